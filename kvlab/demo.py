"""The trained tiny Chinese character model shipped in ``assets/``."""
from __future__ import annotations

import json

import torch

from .assets import DEMO_CONFIG, DEMO_TOKENIZER, DEMO_WEIGHTS, assets_dir
from .config import ModelConfig
from .device import as_device
from .model import ToyTransformer
from .tokenizer import CharTokenizer

RESTORE = "restore it with `git checkout assets/` (in a clone of the course) or retrain it with `python -m kvlab.train`"


class AssetError(ValueError):
    """A demo-model file in ``assets/`` is missing, truncated or malformed (the message names it)."""


def _broken(path, problem: str) -> AssetError:
    return AssetError(f"{path.name}: {problem}. The file at {path} is broken; {RESTORE}")


def load_demo_model(device=None):
    """Load the demo model (safetensors, no pickle) onto ``device`` (default: :func:`pick_device`).

    Returns ``(model, tokenizer)``; the model is in eval mode. A missing, truncated or
    malformed file raises :class:`AssetError` naming it and saying how to restore it.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = assets_dir()
    weights, config_path, tok_path = (folder / name for name in (DEMO_WEIGHTS, DEMO_CONFIG, DEMO_TOKENIZER))
    missing = [p.name for p in (weights, config_path, tok_path) if not p.exists()]
    if missing:
        raise AssetError(f"demo model files {missing} not found in {folder}; {RESTORE}")
    dev = as_device(device)
    try:
        meta = json.loads(config_path.read_text(encoding="utf-8"))
        config = ModelConfig.from_dict(meta["model"])
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
        raise _broken(config_path, f"not a valid demo-model config ({type(exc).__name__}: {exc})") from None
    try:
        tokenizer = CharTokenizer.load(tok_path)
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _broken(tok_path, f"not a valid kvlab character tokenizer ({type(exc).__name__}: {exc})") from None
    try:
        state = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as exc:
        raise _broken(weights, f"cannot be read as safetensors ({exc})") from None
    model = ToyTransformer(config)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        first = str(exc).splitlines()[0]
        raise _broken(weights, f"does not match demo_config.json ({first})") from None
    bad = [name for name, t in state.items() if not torch.isfinite(t).all()]
    if bad:
        raise _broken(weights, f"holds NaN or infinite weights in {bad[:3]}")
    if tokenizer.vocab_size != config.vocab_size:
        raise _broken(tok_path, f"has {tokenizer.vocab_size} characters but the model expects {config.vocab_size}")
    return model.to(dev).eval(), tokenizer
