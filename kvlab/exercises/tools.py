"""Small helpers the exercises hand to the learner (so that a stub stays a few lines long), and the demo model
the checks run on."""
from __future__ import annotations

from functools import lru_cache

import torch

from ..attention import repeat_kv
from ..model import apply_rope, rope_tables

__all__ = ["repeat_kv", "rope"]

ROPE_THETA = 10000.0  # every model the exercises run uses LLaMA's base


def rope(x: torch.Tensor, pos: int, theta: float = ROPE_THETA) -> torch.Tensor:
    """Rotate ``x`` [B, H, T, D] as the tokens at positions ``pos .. pos + T - 1`` (RoPE, LLaMA's layout)."""
    T, D = x.shape[-2], x.shape[-1]
    cos, sin = rope_tables(D, pos + T, theta)  # [pos + T, D]
    return apply_rope(x, cos[pos:].to(x.device, x.dtype), sin[pos:].to(x.device, x.dtype))


@lru_cache(maxsize=1)
def demo():
    """The demo model and its tokenizer, on the CPU (the checks are small), loaded once per kernel."""
    from ..demo import load_demo_model

    return load_demo_model("cpu")
