"""Chapter 3.2's padding waste in a batch: the slots a padded batch allocates (the longest sequence plus
room reserved for generation) against the slots its tokens use, what a paged cache of the same tokens holds in a
shared pool of blocks (counted, only the drawn blocks built), and a real padded cache allocated to check the bytes."""
from __future__ import annotations

from dataclasses import dataclass

from ..._validate import non_negative_int, positive_int
from ...cache import KVCache
from ...config import ModelConfig
from ...paging import blocks_per_sequence, padded_slots, paged_slots, pool_order


@dataclass
class PoolBlock:
    """One physical block of a paged cache: which sequence owns it, its place in that sequence, slots in use."""

    owner: int  # index of the sequence in the batch
    index: int  # the sequence's 0th, 1st ... block
    used: int  # slots holding tokens (block_size except in a sequence's last block)


@dataclass
class PaddingWaste:
    """Slots a padded batch allocates (the longest sequence plus ``reserve`` slots each for generation) vs uses,
    and what a paged cache of ``block_size`` holds for the same tokens (pages are taken as tokens arrive)."""

    lengths: list[int]
    block_size: int
    bytes_per_slot: int  # K and V of one token, all layers
    reserve: int = 0  # slots each sequence keeps free for the tokens it may still generate (padded layout only)

    @property
    def batch_size(self) -> int:
        return len(self.lengths)

    @property
    def max_len(self) -> int:
        return max(self.lengths)

    @property
    def padded_length(self) -> int:
        """Slots per sequence in the padded layout: the longest sequence plus the reserve."""
        return self.max_len + self.reserve

    @property
    def allocated_slots(self) -> int:
        return padded_slots(self.lengths, self.reserve)

    @property
    def used_slots(self) -> int:
        return sum(self.lengths)

    @property
    def blocks_per_sequence(self) -> list[int]:
        """Pages each sequence needs: its length rounded up to whole blocks."""
        return blocks_per_sequence(self.lengths, self.block_size)

    @property
    def paged_slots(self) -> int:
        return paged_slots(self.lengths, self.block_size)

    @property
    def waste_fraction(self) -> float:
        return 1 - self.used_slots / self.allocated_slots

    @property
    def paged_waste_fraction(self) -> float:
        return 1 - self.used_slots / self.paged_slots

    @property
    def allocated_bytes(self) -> int:
        return self.allocated_slots * self.bytes_per_slot

    @property
    def used_bytes(self) -> int:
        return self.used_slots * self.bytes_per_slot

    @property
    def paged_bytes(self) -> int:
        return self.paged_slots * self.bytes_per_slot

    @property
    def pool_size(self) -> int:
        """Blocks in the shared pool (counted, not built)."""
        return sum(self.blocks_per_sequence)

    def pool_blocks(self, limit: int | None = None) -> list[PoolBlock]:
        """The first ``limit`` blocks of the shared pool (all of them by default) in the order they were taken if all
        sequences grew one token per step together (``paging.pool_order``)."""
        count = self.pool_size if limit is None else min(limit, self.pool_size)
        return [PoolBlock(*block) for block in pool_order(self.lengths, self.block_size, count)]


def padding_waste(lengths, bytes_per_slot: int, block_size: int = 16, reserve: int = 0) -> PaddingWaste:
    """The waste of padding ``lengths`` to the longest (plus ``reserve`` slots each), and of paging them in blocks
    of ``block_size``."""
    if not isinstance(lengths, (list, tuple)) or not lengths:
        raise ValueError(f"lengths must be a non-empty list of sequence lengths, got {lengths!r}")
    return PaddingWaste([positive_int("lengths", n) for n in lengths], positive_int("block_size", block_size),
                        positive_int("bytes_per_slot", bytes_per_slot), non_negative_int("reserve", reserve))


def measured_padding_bytes(lengths, config: ModelConfig, dtype="fp32") -> tuple[int, int]:
    """Allocate a real padded cache for ``lengths``: (allocated bytes, bytes the real tokens fill)."""
    lengths = [positive_int("lengths", n, maximum=config.max_seq_len) for n in lengths]
    cache = KVCache(config, len(lengths), max(lengths), dtype=dtype)
    per_token_row = cache.nbytes // (len(lengths) * max(lengths))
    return cache.nbytes, per_token_row * sum(lengths)
