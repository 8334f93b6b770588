"""Argument checks shared by the whole package.

Every public function validates its inputs here, so a bad value always gets a
``ValueError`` whose message starts with the argument's name.
"""
from __future__ import annotations

import math
import numbers


def positive_int(name: str, value, *, maximum: int | None = None) -> int:
    """Return ``value`` as an ``int`` if it is a whole number >= 1 (and <= ``maximum``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer() and not isinstance(value, bool):
            raise ValueError(f"{name} must be an integer, got the float {value!r}; write {int(value)}")
        raise ValueError(f"{name} must be a positive integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if value < 1:
        raise ValueError(f"{name} must be a positive integer (>= 1), got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {value}")
    return value


def non_negative_int(name: str, value) -> int:
    """Return ``value`` as an ``int`` if it is a whole number >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a non-negative integer, got {value!r} ({type(value).__name__})")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return int(value)


def finite_float(name: str, value) -> float:
    """Return ``value`` as a finite ``float`` (a huge integer such as 10**400 is not one)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    try:
        out = float(value)
    except OverflowError:
        raise ValueError(f"{name} must be a finite number, got one too large for a float ({str(value)[:20]}...)") \
            from None
    if not math.isfinite(out):
        raise ValueError(f"{name} must be a finite number, got {out}")
    return out


def positive_float(name: str, value, *, minimum: float = 0.0, maximum: float | None = None) -> float:
    """Return ``value`` as a finite ``float`` > ``minimum`` (and <= ``maximum``)."""
    value = finite_float(name, value)
    if value <= minimum:
        raise ValueError(f"{name} must be a finite number > {minimum:g}, got {value:g}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum:g}, got {value:g}")
    return value


def non_negative_float(name: str, value) -> float:
    """Return ``value`` as a finite ``float`` >= 0."""
    value = finite_float(name, value)
    if value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value:g}")
    return value


def _whole(value: int) -> str:
    """A whole number as a message shows it (str() of a huge one is slow, and past 4,300 digits refused)."""
    return f"{value:,}" if abs(value) < 10**15 else f"a {int(value).bit_length():,}-bit number"


def token_ids(name: str, ids) -> list[int]:
    """``ids`` (a list or tuple of 1+ whole-number token ids) as a list of ``int``: 1.5 and True are refused, never
    truncated. The vocabulary range is the model's to check (``ToyTransformer.check_ids``)."""
    if not isinstance(ids, (list, tuple)):
        raise ValueError(f"{name} must be a list or tuple of token ids, got {type(ids).__name__}")
    if not ids:
        raise ValueError(f"{name} needs at least one token")
    for t in ids:
        if isinstance(t, bool) or not isinstance(t, numbers.Integral):
            raise ValueError(f"{name} must hold integer token ids, found {repr(t)[:40]} ({type(t).__name__})")
        if not -2**63 <= t < 2**63:  # a tensor of ids holds 64-bit integers
            raise ValueError(f"{name} must hold token ids in [0, vocab_size), found {_whole(t)}")
    return [int(t) for t in ids]


def number_in(name: str, value, low, high, *, whole: bool = False):
    """``value`` as an ``int`` (``whole``) or finite ``float`` in [``low``, ``high``]; each refusal states the range."""
    bounds = ", ".join(f"{b:,}" if isinstance(b, int) else f"{b:g}" for b in (low, high))
    wanted = f"{name} must be {'a whole number' if whole else 'a finite number'} in [{bounds}]"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral if whole else numbers.Real):
        raise ValueError(f"{wanted}, got {repr(value)[:40]} ({type(value).__name__})")
    if isinstance(value, numbers.Integral):
        if not low <= value <= high:  # compared exactly, however large
            raise ValueError(f"{wanted}, got {_whole(value)}")
        return int(value) if whole else float(value)
    try:
        number = float(value)
    except OverflowError:
        raise ValueError(f"{wanted}, got one too large for a float") from None
    if not low <= number <= high:  # NaN and the infinities too
        raise ValueError(f"{wanted}, got {number:g}")
    return number


SEED_LIMIT = 2**64  # torch.Generator.manual_seed accepts 0 .. 2**64 - 1


def seed_value(name: str, value) -> int:
    """Return ``value`` as an ``int`` seed in [0, 2**64)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a whole number in [0, 2**64), got {value!r} ({type(value).__name__})")
    value = int(value)
    if not 0 <= value < SEED_LIMIT:
        raise ValueError(f"{name} must be in [0, 2**64), got {value}")
    return value


def one_of(name: str, value, choices) -> str:
    """Return ``value`` if it is one of ``choices`` (strings)."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value
