"""Exact KV-cache memory arithmetic and IEC byte formatting.

All sizes are Python integers, so huge configurations never lose precision.
"""
from __future__ import annotations

import math
import numbers
from decimal import Decimal
from fractions import Fraction

import torch

from ._validate import positive_int

# Bits per stored element. int4/fp8 are storage formats only: the toy model does
# not compute in them, but the calculator sizes them exactly.
DTYPE_BITS: dict[str, int] = {"fp32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4}

_ALIASES = {
    "float32": "fp32", "float": "fp32", "fp32": "fp32",
    "float16": "fp16", "half": "fp16", "fp16": "fp16",
    "bfloat16": "bf16", "bf16": "bf16",
    "fp8": "fp8", "float8": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
    "int8": "int8", "int4": "int4",
}

_TORCH_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.int8: "int8"}
for _name in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _name):
        _TORCH_NAMES[getattr(torch, _name)] = "fp8"

# Names the toy model can actually compute in.
TORCH_DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def dtype_name(dtype, name: str = "dtype") -> str:
    """Canonical short name ("fp16", ...) of a dtype given as a string or ``torch.dtype``."""
    if isinstance(dtype, torch.dtype):
        if dtype in _TORCH_NAMES:
            return _TORCH_NAMES[dtype]
        raise ValueError(f"{name}: unsupported torch dtype {dtype}; use one of {', '.join(DTYPE_BITS)}")
    if isinstance(dtype, str):
        key = dtype.strip().lower().removeprefix("torch.")
        if key in _ALIASES:
            return _ALIASES[key]
    raise ValueError(f"{name} must be one of {', '.join(DTYPE_BITS)} (or a torch dtype); got {dtype!r}")


def torch_dtype(dtype, name: str = "dtype") -> torch.dtype:
    """The ``torch.dtype`` the model computes in for ``dtype`` (fp32/fp16/bf16 only)."""
    short = dtype_name(dtype, name)
    if short not in TORCH_DTYPES:
        raise ValueError(f"{name}: the model cannot compute in {short}; use one of {', '.join(TORCH_DTYPES)}")
    return TORCH_DTYPES[short]


def kv_cache_elements(n_layer, n_kv_head, head_dim, seq_len, batch_size=1) -> int:
    """Number of stored elements of K and V together: ``2 * L * B * H_kv * S * D``."""
    return 2 * math.prod([  # K and V
        positive_int("n_layer", n_layer),
        positive_int("batch_size", batch_size),
        positive_int("n_kv_head", n_kv_head),
        positive_int("seq_len", seq_len),
        positive_int("head_dim", head_dim),
    ])


def kv_cache_bytes(n_layer, n_kv_head, head_dim, seq_len, batch_size=1, dtype="fp16") -> int:
    """Exact bytes of a KV cache: ``2 * L * B * H_kv * S * D * bytes_per_element``.

    ``2`` is one K and one V. Quantization scales (if any) are not included.
    """
    bits = DTYPE_BITS[dtype_name(dtype)]
    total_bits = kv_cache_elements(n_layer, n_kv_head, head_dim, seq_len, batch_size) * bits
    return total_bits // 8  # exact: 2 * ... * bits is always a multiple of 8 for bits >= 4


def kv_bytes_per_token(config, dtype="fp32") -> int:
    """K and V of one token of one sequence, all layers, for a kvlab ``ModelConfig``: what a cached decode
    step reads for each token it attends to, and what each stored token adds to the cache."""
    return kv_cache_bytes(config.n_layer, config.n_kv_head, config.head_dim, 1, 1, dtype)


def stored_tokens(prompt_len: int, new_tokens: int) -> int:
    """Tokens one sequence's cache holds at the end of a generation of ``new_tokens`` after ``prompt_len``: the
    last new token is returned, never fed back, so it is never stored (what ``generate`` preallocates)."""
    return prompt_len + new_tokens - 1


IEC_UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"]


def iec_unit(n) -> tuple[str, int]:
    """The IEC unit a byte count ``n`` is best read in, and its size: ``iec_unit(3 * 2**30) == ("GiB", 2**30)``."""
    power = 0
    while power < len(IEC_UNITS) - 1 and n >= 1024 ** (power + 1):
        power += 1
    return IEC_UNITS[power], 1024 ** power


def format_bytes(n) -> str:
    """Format a byte count in IEC units (powers of 1024): ``"32.0 MiB"``, ``"1.00 GiB"``.

    Bytes are shown whole, KiB and MiB with one decimal, GiB and up with two. A value that would
    round up to 1024 of a unit is shown in the next unit ("1.0 KiB", never "1024.0 B").
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Real):
        raise ValueError(f"n must be a number of bytes, got {n!r} ({type(n).__name__})")
    if not isinstance(n, numbers.Integral) and not math.isfinite(n):
        raise ValueError(f"n must be finite, got {n}")
    if n < 0:
        raise ValueError(f"n must be >= 0 bytes, got {n}")
    unit, size = iec_unit(n)
    decimals = 0 if unit == "B" else 1 if unit in ("KiB", "MiB") else 2
    value = Fraction(n) / size  # exact for any size: no float overflow on huge integers
    if round(value, decimals) >= 1024 and unit != IEC_UNITS[-1]:  # e.g. 1023.99 B, 1023.96 KiB
        unit, size = IEC_UNITS[IEC_UNITS.index(unit) + 1], size * 1024
        decimals = 1 if unit in ("KiB", "MiB") else 2
        value = Fraction(n) / size
    if value >= 10**15:  # beyond YiB: scientific notation instead of a 20-digit number
        return f"{Decimal(value.numerator) / Decimal(value.denominator):.3e} {unit}"
    return f"{float(round(value, decimals)):.{decimals}f} {unit}"
