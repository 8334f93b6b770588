"""The trained tiny demo models shipped in ``assets/``: Chinese (characters) and English (subwords)."""
from __future__ import annotations

import json

import torch

from .assets import AssetError, asset_path, broken, demo_assets
from .config import ModelConfig
from .device import as_device
from .model import ToyTransformer
from .tokenizer import TOKENIZERS

__all__ = ["AssetError", "load_demo_model"]


def load_demo_model(device=None, lang: str | None = None):
    """Load ``lang``'s demo model (safetensors, no pickle) onto ``device`` (default: :func:`pick_device`).

    ``lang="zh"``: the Chinese character model; ``"en"``: the English subword model; ``None`` (default): the
    course's language (:func:`kvlab.language.get_language`, Chinese unless set). Returns
    ``(model, tokenizer)``; the model is in eval mode. An unknown ``lang`` raises ValueError naming the ones
    there are. A missing, truncated or malformed file raises :class:`AssetError` naming it and saying how to
    restore it.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if lang is None:
        from .language import get_language

        lang = get_language()
    files = demo_assets(lang)
    kind = TOKENIZERS[lang]
    dev = as_device(device)
    weights, config_path, tok_path = asset_path(files.weights, files.config, files.tokenizer)
    try:
        meta = json.loads(config_path.read_text(encoding="utf-8"))
        config = ModelConfig.from_dict(meta["model"])
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
        raise broken(config_path, f"not a valid demo-model config ({type(exc).__name__}: {exc})") from None
    try:
        tokenizer = kind.load(tok_path)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise broken(tok_path, f"not a valid kvlab {kind.__name__} ({type(exc).__name__}: {exc})") from None
    try:
        state = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as exc:
        raise broken(weights, f"cannot be read as safetensors ({exc})") from None
    model = ToyTransformer(config)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        first = str(exc).splitlines()[0]
        raise broken(weights, f"does not match {files.config} ({first})") from None
    bad = [name for name, t in state.items() if not torch.isfinite(t).all()]
    if bad:
        raise broken(weights, f"holds NaN or infinite weights in {bad[:3]}")
    if tokenizer.vocab_size != config.vocab_size:
        raise broken(tok_path, f"has {tokenizer.vocab_size} tokens but the model expects {config.vocab_size}")
    return model.to(dev).eval(), tokenizer
