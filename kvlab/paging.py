"""Paged-cache arithmetic: how many fixed-size blocks given token counts take, and the slots they hold.

The one home of this arithmetic: 3.2's padding panel, 3.3's padded batch, 3.5's budget and
3.6's paged cache all count blocks here, and the slots padding (3.2) and fixed reservations (3.5)
allocate for the same sequences. A block holds ``block_size`` tokens of one sequence
(K and V of every layer); a sequence takes whole blocks, so only its last block can be part empty.
"""
from __future__ import annotations

from dataclasses import dataclass

from ._validate import non_negative_int, positive_int

DEFAULT_BLOCK_SIZE = 16  # vLLM's default block size: the one home of this number


def blocks_for(tokens, block_size) -> int:
    """Blocks one sequence of ``tokens`` tokens occupies: ``ceil(tokens / block_size)`` (0 for 0 tokens)."""
    return count_blocks(non_negative_int("tokens", tokens), positive_int("block_size", block_size))


def count_blocks(tokens: int, block_size: int) -> int:
    """:func:`blocks_for` on numbers already checked (the cache's and the engine's inner loops)."""
    return -(-tokens // block_size)


def block_fill(tokens: int, index: int, block_size: int) -> int:
    """Tokens the ``index``-th block of a sequence of ``tokens`` tokens holds (``block_size`` except in its last
    block; 0 past it)."""
    return max(0, min(block_size, tokens - index * block_size))


def blocks_per_sequence(lengths, block_size) -> list[int]:
    """Blocks each sequence of ``lengths`` occupies."""
    return [blocks_for(n, block_size) for n in _lengths(lengths)]


def paged_slots(lengths, block_size) -> int:
    """Token slots the blocks of all ``lengths`` hold together: every sequence rounded up to whole blocks."""
    return sum(blocks_per_sequence(lengths, block_size)) * positive_int("block_size", block_size)


def pool_order(lengths, block_size, limit: int) -> list[tuple[int, int, int]]:
    """The first ``limit`` blocks a shared pool hands out if all sequences grow one token per step together, as
    ``(owner, index, tokens held)``: every sequence's block j is taken at its token j x block_size + 1, so all j-th
    blocks come before any (j+1)-th, in batch order. Only these ``limit`` blocks are built (the pool's size is
    ``sum(blocks_per_sequence(...))``), so a batch of millions of blocks costs no more than the blocks shown."""
    lengths, bs = _lengths(lengths), positive_int("block_size", block_size)
    limit = non_negative_int("limit", limit)
    order: list[tuple[int, int, int]] = []
    j = 0
    while len(order) < limit:
        row = [(i, j, block_fill(n, j, bs)) for i, n in enumerate(lengths) if j * bs < n]
        if not row:  # every sequence has handed out all its blocks
            break
        order += row[:limit - len(order)]
        j += 1
    return order


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


# -- the three ways of holding the same sequences (3.2 padding, 3.5 reservation, 3.6 paging) -------------
SCHEMES = ("padding", "reservation", "paging")


def padded_slots(lengths, reserve: int = 0) -> int:
    """Slots a padded batch allocates: every sequence as long as the longest, plus ``reserve`` each (3.2)."""
    lengths = _lengths(lengths)
    return len(lengths) * (max(lengths, default=0) + non_negative_int("reserve", reserve))


def reserved_slots(lengths, reserve) -> int:
    """Slots fixed per-request reservations allocate: ``reserve`` for every sequence, whatever its length (3.5)."""
    return len(_lengths(lengths)) * non_negative_int("reserve", reserve)


def reserved_fill(lengths, reserve) -> int:
    """Slots of the reservations that hold tokens: a sequence longer than ``reserve`` fills all of its own (3.5)."""
    r = non_negative_int("reserve", reserve)
    return sum(min(n, r) for n in _lengths(lengths))


def scheme_slots(scheme: str, lengths, block_size: int, reserve: int) -> int:
    """Slots ``scheme`` allocates to hold ``lengths``: padding to the longest, a fixed reservation, or blocks."""
    if scheme == "padding":
        return padded_slots(lengths)
    if scheme == "reservation":
        return reserved_slots(lengths, reserve)
    if scheme == "paging":
        return paged_slots(lengths, block_size)
    raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")


@dataclass(frozen=True)
class SharedPrefix:
    """Blocks ``lengths`` take when every sequence after the first starts with the first one's ``prefix`` tokens
    and holds them through reference counts instead of its own copy (see ``PagedKVCache.share_prefix``). As in
    ``generate``, a prefix is shared only when it fills at least one whole block."""

    prefix: int
    lengths: tuple[int, ...]
    block_size: int

    @property
    def unshared(self) -> int:
        """Blocks without sharing: every sequence its own."""
        return sum(blocks_per_sequence(self.lengths, self.block_size))

    @property
    def full_shared_blocks(self) -> int:
        """Whole blocks of the prefix, held once for all sequences."""
        return self.prefix // self.block_size

    @property
    def copies(self) -> int:
        """Copy-on-write copies: a part-filled last prefix block is shared, then copied by each sharer's first write."""
        return (len(self.lengths) - 1) * (self.full_shared_blocks > 0 and self.prefix % self.block_size != 0)

    @property
    def saved(self) -> int:
        return (len(self.lengths) - 1) * self.full_shared_blocks

    @property
    def shared(self) -> int:
        """Blocks with sharing."""
        return self.unshared - self.saved


def shared_prefix_blocks(prefix, lengths, block_size) -> SharedPrefix:
    """The blocks ``lengths`` (each sequence's tokens at its longest) take with and without sharing the first
    ``prefix`` tokens; every sequence must hold more than ``prefix`` tokens (it writes at least one of its own)."""
    p = non_negative_int("prefix", prefix)
    lengths = _lengths(lengths)
    if not lengths:
        raise ValueError("lengths must hold at least one sequence length")
    short = [n for n in lengths if n <= p]
    if short:
        raise ValueError(f"lengths: every sequence needs more than the {p} shared tokens, got {short[0]}")
    return SharedPrefix(p, tuple(lengths), positive_int("block_size", block_size))


def block_hashes(tokens, block_size: int) -> list[int]:
    """Chain hashes of the full blocks of ``tokens``, the keys of automatic prefix sharing (as in vLLM and
    nano-vllm): block i's hash covers its own tokens and, through block i − 1's hash, every token before it, so
    two sequences' i-th blocks have the same key only if they start with the same ``(i + 1) x block_size`` tokens
    (up to a hash collision, which a block manager rules out by comparing the tokens)."""
    out, h = [], 0
    for end in range(block_size, len(tokens) + 1, block_size):
        h = hash((h, tuple(tokens[end - block_size:end])))
        out.append(h)
    return out
