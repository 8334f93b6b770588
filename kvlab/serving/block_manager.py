"""The block manager: which blocks of the pool each sequence holds, and automatic prefix sharing.

One home for taking and returning a sequence's blocks (``can_allocate``, ``allocate``, ``can_append``,
``append``, ``free``, as in nano-vllm). With ``share_prefixes``, every **full** block whose K/V a pass has
written is registered under the chain hash of its tokens and everything before them (a
:class:`kvlab.paged_cache.PrefixCache`, the lookup generate's paged prefill uses too); a sequence that enters with
the same first blocks holds those blocks (one more reference each) instead of computing and storing them
again. A block is registered only after the pass that filled it, so a block still being written is never
matched (nano-vllm issue #208). A registered block stays findable after its last holder frees it, until the
pool hands it out for other tokens (vLLM's prefix cache). Shared blocks are full, so nobody ever writes into
one: no copy-on-write is needed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..paged_cache import BlockPool, BlockTable, PrefixCache
from ..paging import count_blocks


@dataclass
class BlockManager:
    """Blocks of one :class:`BlockPool` for the engine's sequences (each a :class:`BlockTable` and its tokens)."""

    pool: BlockPool
    share_prefixes: bool = False
    prefixes: PrefixCache = field(init=False)  # full blocks by chain hash: the one lookup, generate's too

    def __post_init__(self) -> None:
        self.prefixes = PrefixCache(self.pool.block_size)

    @property
    def block_size(self) -> int:
        return self.pool.block_size

    # -- prefix sharing ---------------------------------------------------------------------------------------
    def match(self, tokens: list[int]) -> list[int]:
        """Registered blocks holding the longest run of ``tokens``' first full blocks (none without sharing)."""
        return self.prefixes.match(tokens) if self.share_prefixes else []

    def register(self, table: BlockTable, tokens: list[int]) -> None:
        """Register ``table``'s full blocks that a pass has written (after the pass, never before)."""
        if self.share_prefixes:
            self.prefixes.register(table, tokens)

    # -- taking and returning blocks ----------------------------------------------------------------------------
    def blocks_to_allocate(self, tokens: list[int], n: int) -> int:
        """Free blocks that holding the first ``n`` of ``tokens`` takes: its blocks minus matched ones in use."""
        held = sum(1 for b in self.match(tokens) if self.pool.refs[b])
        return count_blocks(n, self.block_size) - held

    def can_allocate(self, tokens: list[int], n: int, spare: int = 0) -> bool:
        return self.blocks_to_allocate(tokens, n) <= self.pool.num_free - spare

    def allocate(self, table: BlockTable, tokens: list[int]) -> int:
        """Blocks for all of ``tokens`` (the table must be empty): matched blocks first, counted as already stored,
        then fresh ones. Returns the tokens matched (the prefill feeds only the rest)."""
        matched = self.match(tokens)
        for b in matched:
            if self.pool.refs[b]:
                self.pool.retain(b)
            else:
                self.pool.reclaim(b)
        fresh = self.pool.take(count_blocks(len(tokens), self.block_size) - len(matched), "admitting a request")
        self.prefixes.forget(fresh)
        table.blocks, table.length = matched + fresh, len(matched) * self.block_size
        return table.length

    def append_need(self, tables: list[BlockTable]) -> int:
        """Free blocks one more token in each of ``tables`` takes: one for each table whose blocks are full."""
        return sum(1 for t in tables if t.length == len(t.blocks) * self.block_size)

    def can_append(self, tables: list[BlockTable], spare: int = 0) -> bool:
        return self.append_need(tables) <= self.pool.num_free - spare

    def append(self, table: BlockTable) -> None:
        """Room for one more token: a fresh block when the table's blocks are full."""
        if table.length == len(table.blocks) * self.block_size:
            fresh = self.pool.take(1, "a decode step")
            self.prefixes.forget(fresh)
            table.blocks += fresh

    def free(self, table: BlockTable) -> None:
        """The one way a sequence gives its blocks back (finished or preempted); shared ones lose a reference."""
        self.pool.release(table.blocks)
        table.blocks, table.length = [], 0
