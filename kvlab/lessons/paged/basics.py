"""Section 1 of chapter 3.6: the paged cache on the demo model next to the contiguous one, and a pool that runs
out (a clear error, nothing half-written)."""
from __future__ import annotations

import html
from dataclasses import dataclass

import torch

from ...generation import generate
from ...measure import leave_a_core
from ...memory import stored_tokens
from ...model import ToyTransformer
from ...paged_cache import PagedKVCache, PoolExhaustedError
from ...paging import blocks_for
from .phrases import PANELS, PROMPTS
from .runs import model_language

FIRST_KEYS = ("first_short", "first_long", "first_tiny")  # 4, 22 and 2 tokens (English: 4, 18, 2): no padding


def first_prompts(lang: str) -> tuple[str, ...]:
    """The first look's prompts for ``lang``'s demo model."""
    return tuple(PROMPTS.text(key, lang) for key in FIRST_KEYS)


FIRST_PROMPTS = first_prompts("zh")  # the Chinese model's (kvlab.train checks its tokenizer writes every one)
FIRST_NEW_TOKENS = 16
FIRST_BLOCK_SIZE = 8


@dataclass(frozen=True)
class FirstLook:
    """The same prompts generated with the contiguous KVCache and with the paged cache."""

    prompts: tuple[str, ...]
    texts: list[str]  # each row's new text (paged)
    same_tokens: bool
    max_logit_diff: float
    lengths: list[int]  # tokens each row holds at the end
    tables: list[list[int]]
    block_size: int
    pool_blocks: int
    blocks_in_use: int
    contiguous_slots: int  # slots the contiguous KVCache allocated (B x its longest row, padding included)
    paged_prefill_passes: list[int]  # tokens per row of each prefill pass (each prompt at its own length)

    @property
    def paged_slots(self) -> int:
        return self.blocks_in_use * self.block_size

    @property
    def blocks_match(self) -> bool:
        return self.blocks_in_use == sum(blocks_for(n, self.block_size) for n in self.lengths)


@leave_a_core
@torch.no_grad()
def first_look(model: ToyTransformer, tokenizer, prompts=None, new_tokens: int = FIRST_NEW_TOKENS,
               block_size: int = FIRST_BLOCK_SIZE) -> FirstLook:
    """``prompts`` (default: :func:`first_prompts` in the model's language) generated with both caches."""
    prompts = first_prompts(model_language(tokenizer)) if prompts is None else prompts
    ids = [tokenizer.encode(p) for p in prompts]
    peak = stored_tokens(max(map(len, ids)), new_tokens)
    kv = generate(model, ids, new_tokens, cache="kv", return_logits=True)
    cache = PagedKVCache(model.config, len(ids), peak, dtype=model.dtype, device=model.device, block_size=block_size)
    paged = generate(model, ids, new_tokens, cache=cache, return_logits=True)
    return FirstLook(
        tuple(prompts), [tokenizer.decode(r.tolist()) for r in paged.new_tokens],
        torch.equal(kv.tokens, paged.tokens), float((kv.logits - paged.logits).abs().max()),
        cache.lengths, [list(t.blocks) for t in cache.tables], block_size, cache.pool.num_blocks, cache.pool.in_use,
        kv.cache.batch_size * kv.cache.max_seq_len, [r.new_tokens for r in paged.trace if r.phase == "prefill"])


@dataclass(frozen=True)
class Exhausted:
    """A generation on a pool too small for it: the error, and the pool's state after it."""

    message: str
    lengths: list[int]  # what each row holds after the failed pass (the passes before it were complete)
    blocks_in_use: int
    free_blocks: int
    pool_blocks: int
    consistent: bool  # every block is either free or in exactly one table, and each table fits its row's length


@leave_a_core
@torch.no_grad()
def exhausted_pool(model: ToyTransformer, tokenizer, num_blocks: int = 6, block_size: int = FIRST_BLOCK_SIZE
                   ) -> Exhausted | None:
    """Generate the first look's prompts on a pool of ``num_blocks`` blocks; None if it (unexpectedly) fits."""
    ids = [tokenizer.encode(p) for p in first_prompts(model_language(tokenizer))]
    cache = PagedKVCache(model.config, len(ids), max(map(len, ids)) + FIRST_NEW_TOKENS, dtype=model.dtype,
                         device=model.device, block_size=block_size, num_blocks=num_blocks)
    try:
        generate(model, ids, FIRST_NEW_TOKENS, cache=cache)
    except PoolExhaustedError as exc:
        held = [b for t in cache.tables for b in t.blocks]
        fits = all(len(t.blocks) == blocks_for(t.length, block_size) for t in cache.tables)
        consistent = len(held) == len(set(held)) and not set(held) & set(cache.pool.free) and fits \
            and len(held) + cache.pool.num_free == num_blocks
        return Exhausted(str(exc), cache.lengths, cache.pool.in_use, cache.pool.num_free, num_blocks, consistent)
    return None


def exhausted_html(e: Exhausted) -> str:
    return (PANELS.say("exhausted_intro")
            + f'<div style="background:#fdecea;color:#8a1c1c;padding:6px 10px;border-radius:4px">'
            f"PoolExhaustedError: {html.escape(e.message)}</div>"
            + PANELS.say("exhausted_after", lengths=e.lengths, used=e.blocks_in_use, free=e.free_blocks,
                         pool=e.pool_blocks, consistent=PANELS.say("yes" if e.consistent else "no")))


def texts_table(look: FirstLook) -> str:
    rows = "".join(f"<tr><td>{html.escape(p)}</td><td>{html.escape(t)}</td><td>{n}</td><td>{b}</td></tr>"
                   for p, t, n, b in zip(look.prompts, look.texts, look.lengths, look.tables))
    return PANELS.say("texts_table", rows=rows)


