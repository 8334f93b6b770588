"""A paged KV cache: fixed-size blocks from one shared pool, a block table per sequence.

The idea of vLLM's PagedAttention (Kwon et al., SOSP 2023), in plain PyTorch:

* :class:`BlockPool` holds K and V of ``num_blocks`` blocks, each ``block_size`` tokens of one
  sequence (all layers), a free list, and a reference count per block.
* :class:`BlockTable` is one sequence's list of block ids and its length. Token ``p`` of the
  sequence lives in block ``blocks[p // block_size]`` at offset ``p % block_size``.
* :class:`PagedKVCache` is a batch of block tables over a pool: the cache ``forward`` and
  ``generate`` write into. Blocks are taken on demand as a sequence grows and returned when it is
  freed; every row keeps its own length (no padding). Attention reads K/V through the block
  table: each pass gathers the rows' blocks into one tensor (a copy, which a real PagedAttention
  kernel avoids by reading the blocks in place).

Sequences that start with the same tokens share the blocks of that prefix, counted by reference: full blocks are
found by the chain hash of their tokens and prefix (:class:`PrefixCache`, the serving engine's lookup too); a shared
block that is about to be written is copied first (copy-on-write; :class:`PromptSharing` says what ``generate``
shares).
The block arithmetic (how many blocks given lengths take) lives in :mod:`kvlab.paging`.
"""
from __future__ import annotations

import numbers
from collections import Counter
from dataclasses import dataclass, field

import torch

from ._validate import non_negative_int, positive_int
from .cache import BaseCache, CacheFullError
from .config import ModelConfig
from .device import as_device, same_device
from .memory import format_bytes, torch_dtype
from .paging import DEFAULT_BLOCK_SIZE, block_hashes, blocks_for, count_blocks


class PoolExhaustedError(CacheFullError):
    """A write needs more free blocks than the pool has; no block was taken and nothing was written."""


@dataclass
class BlockTable:
    """One sequence's blocks, in order, and how many tokens they hold."""

    blocks: list[int] = field(default_factory=list)
    length: int = 0

    def slot(self, position: int, block_size: int) -> tuple[int, int]:
        """(block id, offset in the block) of token ``position``: the block-table lookup."""
        return self.blocks[position // block_size], position % block_size


class BlockPool:
    """K/V storage for ``num_blocks`` blocks of ``block_size`` tokens, a free list and reference counts.

    ``k``, ``v``: (L, num_blocks, block_size, H_kv, D). A block id indexes dimension 1 in every
    layer: one id holds the tokens' K and V at all layers. ``refs[b]`` counts the block tables
    holding block ``b``; a block with no reference is on the free list. Freed blocks are reused
    first (the free list is a stack).
    """

    def __init__(self, config: ModelConfig, num_blocks, block_size=DEFAULT_BLOCK_SIZE, dtype=None, device=None,
                 name: str = "block pool"):
        if not isinstance(config, ModelConfig):
            raise ValueError(f"config must be a ModelConfig, got {type(config).__name__}")
        self.config = config
        self.num_blocks = positive_int("num_blocks", num_blocks)
        self.block_size = positive_int("block_size", block_size, maximum=config.max_seq_len)
        self.dtype = torch.float32 if dtype is None else torch_dtype(dtype)
        self.device = as_device("cpu" if device is None else device)
        self.name = str(name)
        c = config
        shape = (c.n_layer, self.num_blocks, self.block_size, c.n_kv_head, c.head_dim)  # (L, N, bs, H_kv, D)
        _check_pool_fits(self, 2 * c.n_layer * c.n_kv_head * c.head_dim * self.element_bytes)
        self.k = torch.zeros(shape, dtype=self.dtype, device=self.device)
        self.v = torch.zeros(shape, dtype=self.dtype, device=self.device)
        self.refs = [0] * self.num_blocks
        self.free = list(range(self.num_blocks - 1, -1, -1))  # a stack: block 0 is handed out first
        self.peak_in_use = 0
        self.blocks_taken = 0  # blocks handed out so far (a reused block counts again)
        self.copies = 0  # copy-on-write copies made so far

    # -- counting -------------------------------------------------------------
    @property
    def num_free(self) -> int:
        return len(self.free)

    @property
    def in_use(self) -> int:
        return self.num_blocks - len(self.free)

    @property
    def element_bytes(self) -> int:
        return self.dtype.itemsize

    @property
    def block_bytes(self) -> int:
        """Bytes of one block: K and V of ``block_size`` tokens at every layer."""
        c = self.config
        return 2 * c.n_layer * self.block_size * c.n_kv_head * c.head_dim * self.element_bytes

    @property
    def nbytes(self) -> int:
        return self.num_blocks * self.block_bytes

    def describe(self) -> str:
        return (f"{self.name} ({self.num_blocks} blocks of {self.block_size} tokens, "
                f"{format_bytes(self.block_bytes)} each)")

    # -- taking and returning blocks -------------------------------------------
    def check_free(self, needed: int, what: str) -> None:
        """Raise :class:`PoolExhaustedError` naming the pool and ``what`` asked, unless ``needed`` blocks are free."""
        if needed > len(self.free):
            raise PoolExhaustedError(
                f"{self.describe()} is out of blocks: {what} needs {needed} free block(s), "
                f"but only {len(self.free)} of {self.num_blocks} are free; nothing was written. "
                "Free finished sequences, serve fewer at once, or build a pool with more num_blocks")

    def take(self, n: int, what: str = "a write") -> list[int]:
        """``n`` free blocks, each now referenced once (all or none)."""
        n = non_negative_int("n", n)
        self.check_free(n, what)
        out = [self.free.pop() for _ in range(n)]
        for b in out:
            self.refs[b] = 1
        self.blocks_taken += n
        self.peak_in_use = max(self.peak_in_use, self.in_use)
        return out

    def _block_id(self, name: str, block) -> int:
        """``block`` as the id of a block of this pool, or a ValueError naming ``name``."""
        if isinstance(block, bool) or not isinstance(block, numbers.Integral) or not 0 <= block < self.num_blocks:
            raise ValueError(f"{name}: {block!r} is not a block id (an integer in [0, {self.num_blocks}))")
        return int(block)

    def _in_use(self, name: str, block, what: str) -> int:
        block = self._block_id(name, block)
        if self.refs[block] < 1:
            raise ValueError(f"{name}: block {block} is free; only a block in use can be {what}")
        return block

    def retain(self, block: int) -> None:
        """One more block table holds ``block`` (prefix sharing)."""
        self.refs[self._in_use("block", block, "shared")] += 1

    def release(self, blocks) -> None:
        """Each of ``blocks`` is held by one table fewer; a block nobody holds goes back on the free list.
        Every id is checked first: a bad one changes nothing."""
        if isinstance(blocks, (str, bytes)) or not hasattr(blocks, "__iter__"):
            raise ValueError(f"blocks must be a list of block ids, got {blocks!r}")
        blocks = [self._block_id("blocks", b) for b in blocks]
        for b, n in Counter(blocks).items():
            if not self.refs[b]:
                raise ValueError(f"blocks: block {b} is already free (released twice)")
            if n > self.refs[b]:
                raise ValueError(f"blocks: block {b} is held by {self.refs[b]} table(s) but released {n} times")
        for b in blocks:
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.free.append(b)

    def reclaim(self, block: int) -> None:
        """Take the free ``block`` back by its id, referenced once: a block whose K/V a block manager still finds
        useful (a cached prefix block) is handed out again instead of a block from the top of the free list."""
        block = self._block_id("block", block)
        if self.refs[block]:
            raise ValueError(f"block: block {block} is in use; only a free block can be reclaimed")
        self.free.remove(block)
        self.refs[block] = 1
        self.blocks_taken += 1
        self.peak_in_use = max(self.peak_in_use, self.in_use)

    def copy_on_write(self, block: int) -> int:
        """A private copy of shared ``block`` (K and V at every layer) for the table about to write into it."""
        block = self._in_use("block", block, "copied")
        (new,) = self.take(1, f"copying shared block {block} before a write (copy-on-write)")
        self.k[:, new] = self.k[:, block]
        self.v[:, new] = self.v[:, block]
        self.release([block])
        self.copies += 1
        return new


def _check_pool_matches(pool: BlockPool, config: ModelConfig, dtype, device) -> None:
    """Refuse a pool whose blocks do not hold this cache's K/V (layers, kv heads, head dim, dtype, device)."""
    theirs, mine = pool.config, config
    diff = [(f"{n}={getattr(theirs, n)}", f"{n}={getattr(mine, n)}") for n in ("n_layer", "n_kv_head", "head_dim")
            if getattr(theirs, n) != getattr(mine, n)]
    if pool.dtype != dtype:
        diff.append((f"dtype={pool.dtype}", f"dtype={dtype}"))
    if not same_device(pool.device, device):
        diff.append((f"device={pool.device}", f"device={device}"))
    if diff:
        raise ValueError(f"pool: built for {', '.join(a for a, _ in diff)}, but this cache has "
                         f"{', '.join(b for _, b in diff)}; build the pool with the cache's config, dtype and device")


def _check_pool_fits(pool: BlockPool, bytes_per_slot: int) -> None:
    from .device import available_memory

    free = available_memory(pool.device)
    need = bytes_per_slot * pool.num_blocks * pool.block_size
    if free is not None and need > 0.9 * free:
        raise ValueError(f"num_blocks: {pool.num_blocks:,} blocks of {pool.block_size} tokens need "
                         f"{format_bytes(need)}, but only {format_bytes(free)} is free on {pool.device}; "
                         "choose fewer num_blocks")


class PagedKVCache(BaseCache):
    """A batch of sequences whose K/V live in blocks of a shared :class:`BlockPool`.

    ``PagedKVCache(config, batch_size, max_seq_len)`` builds its own pool, by default with enough
    blocks for every row to reach ``max_seq_len`` (``num_blocks`` may be smaller: a write that
    finds too few free blocks raises :class:`PoolExhaustedError`, changing nothing).
    ``PagedKVCache.over(pool, tables)`` is a cache over block tables a scheduler manages.
    Each row keeps its own length (``lengths``); ``length`` is the longest row's. With ``share_prefixes``,
    ``generate`` lets a prompt that starts like an earlier one (at least one whole block alike) hold that row's
    blocks instead of computing and storing them again (:class:`PromptSharing`).
    """

    def __init__(self, config: ModelConfig, batch_size, max_seq_len=None, dtype=None, device=None, *,
                 block_size=DEFAULT_BLOCK_SIZE, num_blocks=None, pool: BlockPool | None = None, tables=None,
                 share_prefixes: bool = False):
        self.tables: list[BlockTable] = []  # before BaseCache sets length = 0
        super().__init__(config, batch_size, max_seq_len, dtype, device)
        if pool is None:
            bs = positive_int("block_size", block_size, maximum=config.max_seq_len)
            if num_blocks is None:  # room for every row to reach max_seq_len: too much blames those two
                c = config
                self._check_storage_fits(2 * c.n_layer * c.n_kv_head * c.head_dim * self.dtype.itemsize,
                                         "the paged KV cache")
                num_blocks = self.batch_size * blocks_for(self.max_seq_len, bs)
            pool = BlockPool(config, num_blocks, bs, self.dtype, self.device)
        elif not isinstance(pool, BlockPool):
            raise ValueError(f"pool must be a BlockPool, got {type(pool).__name__}")
        else:
            _check_pool_matches(pool, config, self.dtype, self.device)
        self.pool = pool
        self.tables = [BlockTable() for _ in range(self.batch_size)] if tables is None else list(tables)
        if len(self.tables) != self.batch_size:
            raise ValueError(f"tables: {len(self.tables)} block tables for a batch of {self.batch_size}")
        if not isinstance(share_prefixes, bool):
            raise ValueError(f"share_prefixes must be True or False, got {share_prefixes!r}")
        self.share_prefixes = share_prefixes  # generate: a row starting like an earlier one holds its blocks
        self._gather: torch.Tensor | None = None  # [B, blocks]: block ids each row reads this pass
        self._slots: torch.Tensor | None = None  # [B * T]: where this pass's new tokens go

    @classmethod
    def over(cls, pool: BlockPool, tables: list[BlockTable], max_seq_len=None) -> "PagedKVCache":
        """A cache over existing block tables in ``pool`` (rows in the order given); no storage is allocated."""
        if not isinstance(pool, BlockPool):
            raise ValueError(f"pool must be a BlockPool, got {type(pool).__name__}")
        return cls(pool.config, len(tables), max_seq_len, pool.dtype, pool.device, pool=pool, tables=tables)

    @classmethod
    def grown(cls, pool: BlockPool, tables: list[BlockTable], n_new: int) -> "PagedKVCache":
        """One pass's view of ``tables`` whose blocks a block manager has already taken for ``n_new`` more tokens
        per row: nothing is checked, taken or synchronised (the serving runner's pass; :meth:`over` checks)."""
        view = _GrownTables.__new__(_GrownTables)
        view.config, view.pool, view.tables, view.batch_size = pool.config, pool, tables, len(tables)
        view.max_seq_len, view.dtype, view.device = pool.config.max_seq_len, pool.dtype, pool.device
        view.allocations = view.bytes_copied = 0
        view.share_prefixes = False
        lengths = [t.length for t in tables]
        view._starts = torch.tensor(lengths, dtype=torch.long, device=pool.device)  # [B]
        view._index(n_new)
        return view

    # -- per-row lengths ------------------------------------------------------
    @property
    def block_size(self) -> int:
        return self.pool.block_size

    @property
    def lengths(self) -> list[int]:
        return [t.length for t in self.tables]

    @property
    def length(self) -> int:
        """Tokens in the longest row (the columns a pass reads back)."""
        return max((t.length for t in self.tables), default=0)

    @length.setter
    def length(self, value) -> None:  # BaseCache sets 0 when it is built; nothing else may set it
        if value != 0 or self.length != 0:
            raise AttributeError("length: a PagedKVCache keeps one length per row (its block tables); "
                                 "use advance(), reset() or share_prefix()")

    def starts(self):
        lengths = self.lengths
        if len(set(lengths)) <= 1:
            return lengths[0] if lengths else 0
        return torch.tensor(lengths, dtype=torch.long, device=self.device)  # [B]

    # -- making room: blocks on demand, copy-on-write ---------------------------
    def blocks_needed(self, n_new: int) -> int:
        """Free blocks ``n_new`` more tokens per row take (what :meth:`reserve` takes): new blocks plus copies of
        shared part-filled blocks written into. A block's writers copy it while another table still holds it, so
        when all its holders write, the last one keeps the original."""
        bs, need, writers = self.block_size, 0, Counter()
        for t in self.tables:
            need += max(0, count_blocks(t.length + n_new, bs) - len(t.blocks))
            if n_new and t.length % bs:
                writers[t.blocks[t.length // bs]] += 1  # writes into its part-filled last block
        return need + sum(min(n, self.pool.refs[b] - 1) for b, n in writers.items())

    def check_room(self, n_new: int) -> None:
        if self.length + n_new > self.max_seq_len:
            raise CacheFullError(f"cache full: the longest row holds {self.length} tokens, {n_new} more would "
                                 f"pass max_seq_len={self.max_seq_len}")
        rows = ", ".join(f"{t.length} -> {t.length + n_new}" for t in self.tables[:4])
        more = "" if len(self.tables) <= 4 else f" and {len(self.tables) - 4} more rows"
        self.pool.check_free(self.blocks_needed(n_new), f"growing {len(self.tables)} sequence(s) by {n_new} "
                                                        f"token(s) (lengths {rows}{more})")

    def reserve(self, n_new: int) -> None:
        """Take the blocks ``n_new`` more tokens per row need (copying shared ones written into), after
        checking that all of them are free: all or nothing. Builds this pass's gather and slot indices."""
        self.check_room(n_new)
        bs = self.block_size
        for t in self.tables:
            if n_new and t.length % bs:
                i = t.length // bs
                if self.pool.refs[t.blocks[i]] > 1:
                    t.blocks[i] = self.pool.copy_on_write(t.blocks[i])
            extra = count_blocks(t.length + n_new, bs) - len(t.blocks)
            if extra > 0:
                t.blocks.extend(self.pool.take(extra))
        self._index(n_new)

    def slot_of(self, table: BlockTable, position: int) -> int:
        """Row of the pool's token slots (block id x block_size + offset) that holds ``table``'s token ``position``."""
        block, offset = table.slot(position, self.block_size)
        return block * self.block_size + offset

    def _index(self, n_new: int) -> None:
        width = count_blocks(self.length + n_new, self.block_size)
        gather = [t.blocks[:width] + [0] * (width - min(width, len(t.blocks))) for t in self.tables]
        slots = [self.slot_of(t, p) for t in self.tables for p in range(t.length, t.length + n_new)]
        self._gather = torch.tensor(gather, dtype=torch.long, device=self.device)  # [B, blocks]; 0 = unused column
        self._slots = torch.tensor(slots, dtype=torch.long, device=self.device)  # [B * T]
        self._end = self.length + n_new

    # -- writing and reading through the block table ----------------------------
    def write(self, layer, k, v):
        """Store k/v [B, H_kv, T, D] in the rows' blocks; return K/V [B, H_kv, longest end, D] read through the
        block tables (a row's columns past its own end belong to nobody and are masked by the model)."""
        B, H, T, D = k.shape
        flat_k = self.pool.k[layer].view(-1, H, D)  # (N * bs, H_kv, D): one row per token slot
        flat_v = self.pool.v[layer].view(-1, H, D)
        flat_k.index_copy_(0, self._slots, k.transpose(1, 2).reshape(B * T, H, D))  # [B, T, H, D] -> [B*T, H, D]
        flat_v.index_copy_(0, self._slots, v.transpose(1, 2).reshape(B * T, H, D))
        self.bytes_copied += 2 * k.numel() * self.pool.element_bytes
        return self.read(layer, self._end)

    def read(self, layer: int, end: int):
        """K, V of the first ``end`` columns of every row, gathered block by block: [B, H_kv, end, D] each."""
        B, nb = self._gather.shape
        bs, H, D = self.block_size, self.config.n_kv_head, self.config.head_dim
        idx = self._gather.view(-1)  # [B * nb]
        k = self.pool.k[layer].index_select(0, idx).view(B, nb * bs, H, D)[:, :end]  # [B*nb, bs, H, D] -> [B, S, H, D]
        v = self.pool.v[layer].index_select(0, idx).view(B, nb * bs, H, D)[:, :end]
        return k.transpose(1, 2), v.transpose(1, 2)  # [B, H_kv, S, D]

    def layer_view(self, layer: int):
        """(K, V) of one layer as stored, each [B, H_kv, length, D] (rows shorter than the longest hold
        whatever their unused columns read; compare a row up to its own length)."""
        self._index(0)
        return self.read(layer, self.length)

    def advance(self, n) -> None:
        n = non_negative_int("n", n)
        short = [i for i, t in enumerate(self.tables) if count_blocks(t.length + n, self.block_size) > len(t.blocks)]
        if short:
            raise CacheFullError(f"n: rows {short} hold no blocks for {n} more token(s); reserve() takes them "
                                 "before the tokens are written")
        for t in self.tables:
            t.length += n

    # -- sequences: free, share -------------------------------------------------
    def free_row(self, row: int) -> None:
        """Return row ``row``'s blocks to the pool (shared ones only lose a reference); its length becomes 0."""
        t = self.tables[row]
        self.pool.release(t.blocks)
        t.blocks, t.length = [], 0

    def truncate(self, length) -> None:
        """Keep only the first ``length`` tokens of every row (at most its own length); blocks past them go back."""
        n = non_negative_int("length", length)
        for t in self.tables:
            t.length = min(t.length, n)
            keep = count_blocks(t.length, self.block_size)
            self.pool.release(t.blocks[keep:])
            del t.blocks[keep:]

    def reset(self) -> None:
        for row in range(len(self.tables)):
            self.free_row(row)

    def share_prefix(self, src: int, dst: int, n_tokens) -> int:
        """Row ``dst`` (empty) starts with the first ``n_tokens`` tokens of row ``src``: it holds the same
        blocks, each referenced once more, instead of computing and storing them again. A part-filled last
        block is shared too and copied when either row first writes into it (copy-on-write).
        Returns the number of blocks shared."""
        n = non_negative_int("n_tokens", n_tokens)
        self._check_empty("dst", dst)
        s = self.tables[src]
        if n > s.length:
            raise ValueError(f"n_tokens: row {src} holds {s.length} tokens, fewer than the {n} to share")
        shared = s.blocks[:count_blocks(n, self.block_size)]
        self.hold(dst, shared, n)
        return len(shared)

    def hold(self, row: int, blocks: list[int], n_tokens: int) -> None:
        """Empty row ``row`` starts with ``n_tokens`` tokens already stored in ``blocks`` of the pool (in use, each now
        referenced once more); all blocks are checked before any is taken."""
        self._check_empty("row", row)
        if count_blocks(non_negative_int("n_tokens", n_tokens), self.block_size) != len(blocks):
            raise ValueError(f"n_tokens: {n_tokens} tokens fill {count_blocks(n_tokens, self.block_size)} "
                             f"block(s) of {self.block_size}, not the {len(blocks)} given")
        for b in blocks:
            self.pool._in_use("blocks", b, "shared")
        for b in blocks:
            self.pool.retain(b)
        self.tables[row].blocks, self.tables[row].length = list(blocks), n_tokens

    def _check_empty(self, name: str, row: int) -> None:
        t = self.tables[row]
        if t.length or t.blocks:
            raise ValueError(f"{name}: row {row} already holds {t.length} tokens; only an empty row can share a prefix")

    # -- bytes ----------------------------------------------------------------
    @property
    def element_bytes(self) -> float:
        return self.pool.element_bytes

    @property
    def nbytes(self) -> int:
        """Bytes of the whole pool (allocated once)."""
        return self.pool.nbytes

    @property
    def held_blocks(self) -> int:
        """Distinct blocks these rows hold (a shared block counts once)."""
        return len({b for t in self.tables for b in t.blocks})

    @property
    def used_bytes(self) -> int:
        """Bytes of the blocks these rows hold: what paging takes from the pool for them."""
        return self.held_blocks * self.pool.block_bytes

    def __repr__(self) -> str:
        return (f"PagedKVCache(lengths={self.lengths}, blocks={[t.blocks for t in self.tables]}, "
                f"pool={self.pool.in_use}/{self.pool.num_blocks} in use, block_size={self.block_size})")


class _GrownTables(PagedKVCache):
    """:meth:`PagedKVCache.grown`'s view: its blocks and indices are ready before the pass, its lengths only counted."""

    def starts(self):
        return self._starts

    def reserve(self, n_new: int) -> None:
        pass  # blocks taken and indices built by grown()

    def advance(self, n) -> None:
        for t in self.tables:
            t.length += n


# -- prefix sharing: full blocks found by chain hash (the serving engine's and generate's one lookup) ----------------
@dataclass(frozen=True)
class Cached:
    """A registered full block: its chain hash and every token up to its end (compared on a match)."""

    key: int
    tokens: tuple[int, ...]


@dataclass
class PrefixCache:
    """Automatic prefix sharing's lookup (as in vLLM and nano-vllm): every full block a pass has written, registered
    under the chain hash of its tokens and every token before them (:func:`kvlab.paging.block_hashes`). A sequence
    that starts with the same full blocks finds them here instead of computing and storing them again. Register a
    block only after the pass that filled it, so that a block still being written is never matched (nano-vllm issue
    #208); :meth:`forget` a block handed out again for other tokens. Used by the serving engine's block manager and
    by generate's paged prefill (:class:`PromptSharing`)."""

    block_size: int
    index: dict[int, int] = field(default_factory=dict)  # chain hash -> block
    cached: dict[int, Cached] = field(default_factory=dict)  # block -> what it holds

    def match(self, tokens: list[int]) -> list[int]:
        """Registered blocks holding the longest run of ``tokens``' first full blocks; the last token is never
        matched (its pass gives the logits of the next token)."""
        out, bs = [], self.block_size
        for i, key in enumerate(block_hashes(tokens[:-1], bs)):
            block = self.index.get(key)
            if block is None or self.cached[block].tokens != tuple(tokens[:(i + 1) * bs]):
                break
            out.append(block)
        return out

    def register(self, table: BlockTable, tokens: list[int]) -> None:
        """Register ``table``'s full blocks, which a pass has written with ``tokens`` (after the pass, never before)."""
        bs = self.block_size
        full = table.length // bs
        for i, (block, key) in enumerate(zip(table.blocks[:full], block_hashes(tokens[:full * bs], bs))):
            if block not in self.cached and key not in self.index:
                self.index[key] = block
                self.cached[block] = Cached(key, tuple(tokens[:(i + 1) * bs]))

    def forget(self, blocks: list[int]) -> None:
        """Blocks handed out for new tokens are no longer what they were registered as."""
        for b in blocks:
            entry = self.cached.pop(b, None)
            if entry is not None:
                del self.index[entry.key]


class PromptSharing:
    """How the prompts of one ``generate`` call on a cache with ``share_prefixes`` share blocks.

    * **Full blocks**, found in a :class:`PrefixCache` by chain hash, as the serving engine finds them. A block is
      registered only after the pass that wrote it, so the prompts are prefilled in waves (:meth:`wave`): a prompt
      waits while an earlier prompt still to be prefilled would write the next full block it could find; prompts
      that share nothing are prefilled together in the first wave.
    * **The part of one more block** that a prompt has in common with an earlier prompt continuing the same full
      blocks (typically a system prompt's last, part-filled block; only after at least one full block is shared).
      It is shared, and copied by the row's first write into it (copy-on-write, :meth:`PagedKVCache.reserve`):
      the row keeps no shared part-filled block, but it does not compute those tokens again. The serving engine
      shares full blocks only: its requests arrive at different times and are found by hash alone.

    A prompt keeps at least its last token to feed (that pass gives the logits of its first new token). A row that
    holds tokens from before neither lends nor borrows: its blocks hold those tokens, not its prompt.
    """

    def __init__(self, cache: "PagedKVCache", prompts: list[list[int]]):
        self.cache, self.prompts = cache, prompts
        self.prefixes = PrefixCache(cache.block_size)
        self.empty = [t.length == 0 for t in cache.tables]
        self.keys = [block_hashes(p[:-1], cache.block_size) if e else [] for p, e in zip(prompts, self.empty)]
        self.tails: dict[int, int] = {}  # chain hash of a full block -> a prefilled row whose prompt goes on after it

    def wave(self, pending: list[int]) -> tuple[list[int], list[int]]:
        """(the rows of ``pending`` to prefill now, the rest): a row waits while an earlier pending row would write
        the next full block it could find. The first pending row never waits."""
        ready, later, claimed = [], [], set()
        for r in pending:
            found, keys = len(self.prefixes.match(self.prompts[r])), self.keys[r]
            (later if found < len(keys) and keys[found] in claimed else ready).append(r)
            claimed.update(keys)
        return ready, later

    def hold(self, row: int) -> int:
        """Row ``row`` holds the blocks it shares (one more reference each); returns the prompt tokens they hold."""
        if not self.empty[row]:
            return 0
        bs, prompt = self.cache.block_size, self.prompts[row]
        blocks = self.prefixes.match(prompt)
        n = len(blocks) * bs
        lender = self.tails.get(self.keys[row][len(blocks) - 1]) if blocks else None
        if lender is not None and self.prompts[lender][:n] == prompt[:n]:
            common = _common_start(prompt[n:len(prompt) - 1], self.prompts[lender][n:n + bs])
            if common:
                blocks.append(self.cache.tables[lender].blocks[len(blocks)])
                n += common
        if blocks:
            self.cache.hold(row, blocks, n)
        return n

    def register(self, rows: list[int]) -> None:
        """After the rows' passes: their full blocks become findable, and each row lends the block after each."""
        for r in rows:
            if self.empty[r]:
                self.prefixes.register(self.cache.tables[r], self.prompts[r])
                for key in self.keys[r]:
                    self.tails.setdefault(key, r)


def _common_start(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
