"""The trained tiny Chinese character model shipped in ``assets/``."""
from __future__ import annotations

import json

from safetensors.torch import load_file

from .assets import DEMO_CONFIG, DEMO_TOKENIZER, DEMO_WEIGHTS, assets_dir
from .config import ModelConfig
from .device import as_device
from .model import ToyTransformer
from .tokenizer import CharTokenizer


def load_demo_model(device=None):
    """Load the demo model (safetensors, no pickle) onto ``device`` (default: :func:`pick_device`).

    Returns ``(model, tokenizer)``; the model is in eval mode.
    """
    folder = assets_dir()
    paths = [folder / name for name in (DEMO_WEIGHTS, DEMO_CONFIG, DEMO_TOKENIZER)]
    missing = [p.name for p in paths if not p.exists()]
    if missing:
        raise FileNotFoundError(
            f"demo model files {missing} not found in {folder}; run `python -m kvlab.train` to create them"
        )
    dev = as_device(device)
    config = ModelConfig.from_dict(json.loads(paths[1].read_text(encoding="utf-8"))["model"])
    model = ToyTransformer(config)
    model.load_state_dict(load_file(str(paths[0])), strict=True)
    tokenizer = CharTokenizer.load(paths[2])
    if tokenizer.vocab_size != config.vocab_size:
        raise ValueError(f"tokenizer has {tokenizer.vocab_size} characters but the model expects {config.vocab_size}")
    return model.to(dev).eval(), tokenizer
