"""Chapter 3.2's cache shape and bytes: the five dimensions of one sequence's cache as the shape panel shows
them (:class:`CacheShape`, checked as the learner typed them), the formula's bytes for a batch
(:class:`MemoryReadout`), the chapter's example, the GPU memory lines drawn beside them, and the same K and V read
from transformers' cache on the same weights (or, without transformers, why not)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ...inputs import whole_number
from ...memory import format_bytes, kv_cache_bytes
from ...model import ToyTransformer
from ...presets import GPU_PRESETS
from .phrases import TEXTS


MAX_S, MAX_B = 10_000_000, 100_000  # beyond any real model's context or batch: treated as a typing error


# -- the shape: L, H, D, S and how much of S is filled ------------------------------------------------
CHAPTER_EXAMPLE = (32, 32, 128, 1024, "fp16")  # the original chapter's (L, H, D, S, dtype), B = 1
# The shape panel's labels as the Chinese edition shows them (tests match errors against them); the panel shows each in
# the course's language: shape_label(name).
SHAPE_LABELS = {name: TEXTS.text(f"label.{name}", "zh") for name in ("L", "H", "D", "S", "filled_pct")}


def shape_label(name: str) -> str:
    """The shape panel's label of control ``name`` (a key of :data:`SHAPE_LABELS`) in the course's language."""
    return TEXTS.say(f"label.{name}")


def example_text(example=CHAPTER_EXAMPLE) -> str:
    L, H, D, S, dtype = example
    return TEXTS.say("example", L=L, H=H, S=S, D=D, dtype=dtype)


@dataclass
class CacheShape:
    """The cache of one sequence as the shape panel shows it: its four sizes and the tokens stored so far."""

    L: int
    H: int
    D: int
    S: int
    filled: int  # tokens stored so far (of S)

    @property
    def numbers_per_token(self) -> int:
        """Numbers of K one token stores in all layers (V stores as many again)."""
        return self.L * self.H * self.D

    @property
    def numbers(self) -> int:
        """Numbers of K and V together: 2 x L x H x S x D."""
        return 2 * self.numbers_per_token * self.S


def shape_of(L, H, D, S, filled_pct) -> CacheShape:
    """The shape panel's values checked as a learner typed or dragged them (messages naming the control as shown)."""
    S = whole_number(shape_label("S"), S, 1, MAX_S)
    return CacheShape(L=whole_number(shape_label("L"), L, 1, 1024), H=whole_number(shape_label("H"), H, 1, 1024),
                      D=whole_number(shape_label("D"), D, 1, 4096), S=S,
                      filled=S * whole_number(shape_label("filled_pct"), filled_pct, 0, 100) // 100)


def example_numbers(example=CHAPTER_EXAMPLE) -> int:
    L, H, D, S, _ = example
    return 2 * L * H * S * D


# -- the bytes: B and the dtype, on the shape ----------------------------------------------------------
QUANTIZED = ("int8", "int4", "fp8")  # formats whose caches also store scales (not counted by the formula)
GPU_LINES = ("T4 16 GB (Colab)", "H100 80 GB")  # memory sizes drawn on the bytes-against-S figure


@dataclass
class MemoryReadout:
    """The formula's inputs and what it gives, as shown by the bytes panel."""

    L: int
    B: int
    H: int
    S: int
    D: int
    dtype: str
    filled: int  # tokens stored so far (of S)

    @property
    def total_bytes(self) -> int:
        return kv_cache_bytes(self.L, self.H, self.D, self.S, self.B, self.dtype)

    @property
    def used_bytes(self) -> int:
        return kv_cache_bytes(self.L, self.H, self.D, self.filled, self.B, self.dtype) if self.filled else 0

    @property
    def per_token_bytes(self) -> int:
        """K and V of one token of one sequence, all layers."""
        return kv_cache_bytes(self.L, self.H, self.D, 1, 1, self.dtype)


def example_bytes(example=CHAPTER_EXAMPLE) -> int:
    """Bytes of the chapter's example cache (B = 1)."""
    L, H, D, S, dtype = example
    return kv_cache_bytes(L, H, D, S, 1, dtype)


def gpu_lines(names=GPU_LINES) -> tuple[tuple[str, int], ...]:
    return tuple((TEXTS.say("gpu_memory", name=GPU_PRESETS[n].name, size=format_bytes(GPU_PRESETS[n].memory_bytes)),
                  GPU_PRESETS[n].memory_bytes) for n in names)


# -- the same cache in transformers ----------------------------------------------------------------------
@dataclass(frozen=True)
class TransformersKV:
    """K and V of one layer as transformers caches them after the same tokens on the same weights; or why not."""

    k: torch.Tensor | None  # [B, H_kv, T, D]
    v: torch.Tensor | None
    skipped: str = ""  # the reason there is nothing to compare (Chinese), empty when k and v are there


@torch.no_grad()
def transformers_layer_kv(model: ToyTransformer, tokens: torch.Tensor, layer: int = 0) -> TransformersKV:
    """Feed ``tokens`` [B, T] to transformers' ``LlamaForCausalLM`` holding ``model``'s weights
    (:func:`kvlab.interop.to_hf_llama`) and read ``layer``'s K and V from its cache. transformers is an optional
    dependency: without it the result says so instead of raising."""
    from ...interop import hf_cache_of, hf_layer_kv, to_hf_llama, transformers_missing

    missing = transformers_missing()  # missing, too old or broken: what to install, in Chinese
    if missing:
        return TransformersKV(None, None, missing)
    hf = to_hf_llama(model)
    k, v = hf_layer_kv(hf_cache_of(hf(tokens.to(model.device), use_cache=True)), layer)
    return TransformersKV(k, v)
