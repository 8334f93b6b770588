"""The block manager: which blocks of the pool each sequence holds, and automatic prefix sharing.

One home for taking and returning a sequence's blocks (``can_allocate``, ``allocate``, ``can_append``,
``append``, ``free``, as in nano-vllm). With ``share_prefixes``, every **full** block whose K/V a pass has
written is registered under the chain hash of its tokens and everything before them
(:func:`kvlab.paging.block_hashes`); a sequence that enters with the same first blocks holds those blocks
(one more reference each) instead of computing and storing them again. A block is registered only after the
pass that filled it, so a block still being written is never matched (nano-vllm issue #208). A registered
block stays findable after its last holder frees it, until the pool hands it out for other tokens (vLLM's
prefix cache). Shared blocks are full, so nobody ever writes into one: no copy-on-write is needed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..paged_cache import BlockPool, BlockTable
from ..paging import block_hashes, count_blocks


@dataclass
class Cached:
    """A registered full block: its chain hash and every token up to its end (compared on a match)."""

    key: int
    tokens: tuple[int, ...]


@dataclass
class BlockManager:
    """Blocks of one :class:`BlockPool` for the engine's sequences (each a :class:`BlockTable` and its tokens)."""

    pool: BlockPool
    share_prefixes: bool = False
    index: dict[int, int] = field(default_factory=dict)  # chain hash -> block
    cached: dict[int, Cached] = field(default_factory=dict)  # block -> what it holds

    @property
    def block_size(self) -> int:
        return self.pool.block_size

    # -- prefix sharing ---------------------------------------------------------------------------------------
    def match(self, tokens: list[int]) -> list[int]:
        """Registered blocks holding the longest run of ``tokens``' first full blocks; the last token is never
        matched (its pass gives the logits of the next token)."""
        if not self.share_prefixes:
            return []
        out = []
        for i, key in enumerate(block_hashes(tokens[:-1], self.block_size)):
            block = self.index.get(key)
            end = (i + 1) * self.block_size
            if block is None or self.cached[block].tokens != tuple(tokens[:end]):
                break
            out.append(block)
        return out

    def register(self, table: BlockTable, tokens: list[int]) -> None:
        """Register ``table``'s full blocks that a pass has written (after the pass, never before)."""
        if not self.share_prefixes:
            return
        bs = self.block_size
        full = table.length // bs
        for i, (block, key) in enumerate(zip(table.blocks[:full], block_hashes(tokens[:full * bs], bs))):
            if block not in self.cached and key not in self.index:
                self.index[key] = block
                self.cached[block] = Cached(key, tuple(tokens[:(i + 1) * bs]))

    def _forget(self, blocks: list[int]) -> None:
        """Blocks handed out for new tokens are no longer what they were registered as."""
        for b in blocks:
            entry = self.cached.pop(b, None)
            if entry is not None:
                del self.index[entry.key]

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
        self._forget(fresh)
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
            self._forget(fresh)
            table.blocks += fresh

    def free(self, table: BlockTable) -> None:
        """The one way a sequence gives its blocks back (finished or preempted); shared ones lose a reference."""
        self.pool.release(table.blocks)
        table.blocks, table.length = [], 0
