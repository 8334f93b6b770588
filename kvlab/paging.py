"""Paged-cache arithmetic: how many fixed-size blocks given token counts take, and the slots they hold.

The one home of this arithmetic: 3.2's padding panel, 3.3's padded batch, 3.5's budget and
3.6's paged cache all count blocks here. A block holds ``block_size`` tokens of one sequence
(K and V of every layer); a sequence takes whole blocks, so only its last block can be part empty.
"""
from __future__ import annotations

from ._validate import non_negative_int, positive_int


def blocks_for(tokens, block_size) -> int:
    """Blocks one sequence of ``tokens`` tokens occupies: ``ceil(tokens / block_size)`` (0 for 0 tokens)."""
    n = non_negative_int("tokens", tokens)
    bs = positive_int("block_size", block_size)
    return -(-n // bs)


def blocks_per_sequence(lengths, block_size) -> list[int]:
    """Blocks each sequence of ``lengths`` occupies."""
    return [blocks_for(n, block_size) for n in _lengths(lengths)]


def paged_slots(lengths, block_size) -> int:
    """Token slots the blocks of all ``lengths`` hold together: every sequence rounded up to whole blocks."""
    return sum(blocks_per_sequence(lengths, block_size)) * positive_int("block_size", block_size)


def mean_paged_slots(lengths, block_size) -> float:
    """Slots one sequence of ``lengths`` takes on average (a request mix's expected footprint)."""
    lengths = _lengths(lengths)
    if not lengths:
        raise ValueError("lengths must hold at least one sequence length")
    return paged_slots(lengths, block_size) / len(lengths)


def _lengths(lengths) -> list[int]:
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__iter__"):
        raise ValueError(f"lengths must be a list of token counts, got {lengths!r}")
    return [non_negative_int("lengths", n) for n in lengths]
