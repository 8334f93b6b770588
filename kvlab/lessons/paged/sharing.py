"""Shared prefixes on the real model: requests that start with the same system prompt, generated on a paged cache
with and without sharing its blocks; the blocks counted, the copy-on-write copies counted, the outputs compared."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..._validate import positive_int
from ...generation import generate
from ...measure import leave_a_core
from ...memory import stored_tokens
from ...model import ToyTransformer
from ...paged_cache import PagedKVCache
from ...paging import SharedPrefix, shared_prefix_blocks
from .runs import BLOCK_SIZE, corpus_ids

SHARE_PREFIX, SHARE_REQUESTS, SHARE_NEW_TOKENS = 40, 4, 16  # the real run's defaults
QUESTION_TOKENS = 10  # each request's own part after the system prompt
MAX_SHARE_PREFIX = 200  # the slider's bounds: every request fits the demo model's 256 tokens
MAX_SHARE_REQUESTS = 16
SYSTEM_START = 0  # the system prompt is the corpus's first MAX_SHARE_PREFIX tokens


def system_prompt(tokenizer, length: int) -> list[int]:
    return corpus_ids(tokenizer)[SYSTEM_START:SYSTEM_START + positive_int("length", length, maximum=MAX_SHARE_PREFIX)]


def questions(tokenizer, count: int, length: int = QUESTION_TOKENS) -> list[list[int]]:
    """``count`` different questions of ``length`` tokens cut from the corpus, each starting with a different token
    (so that no two requests share more than the system prompt)."""
    ids = corpus_ids(tokenizer)
    out, firsts, at = [], set(), MAX_SHARE_PREFIX
    while len(out) < count:
        if at + length > len(ids):
            raise ValueError(f"count: the corpus has too few different first tokens for {count} questions")
        if ids[at] not in firsts:
            firsts.add(ids[at])
            out.append(ids[at:at + length])
        at += 7
    return out


@dataclass(frozen=True)
class SharingRun:
    """The same requests generated on a paged cache without and with shared prefixes, counted and compared."""

    arithmetic: SharedPrefix  # what kvlab.paging says for the lengths the run reached
    plain_blocks: int  # blocks in use at the end, measured in the pool
    shared_blocks: int
    copies: int  # copy-on-write copies the pool made
    plain_prefill_tokens: int  # tokens the prefill passes fed
    shared_prefill_tokens: int
    same_tokens: bool
    max_logit_diff: float

    @property
    def matches_arithmetic(self) -> bool:
        a = self.arithmetic
        return (self.plain_blocks, self.shared_blocks, self.copies) == (a.unshared, a.shared, a.copies)


@leave_a_core
@torch.no_grad()
def sharing_run(model: ToyTransformer, tokenizer, prefix: int = SHARE_PREFIX, requests: int = SHARE_REQUESTS,
                block_size: int = BLOCK_SIZE, new_tokens: int = SHARE_NEW_TOKENS) -> SharingRun:
    """``requests`` prompts of the same ``prefix``-token system prompt and their own question, ``new_tokens`` each."""
    requests = positive_int("requests", requests, maximum=MAX_SHARE_REQUESTS)
    system = system_prompt(tokenizer, prefix)
    prompts = [system + q for q in questions(tokenizer, requests)]
    peak = stored_tokens(len(prompts[0]), positive_int("new_tokens", new_tokens, maximum=32))
    results = {}
    for share in (False, True):
        cache = PagedKVCache(model.config, requests, peak, dtype=model.dtype, device=model.device,
                             block_size=block_size, share_prefixes=share)
        results[share] = (generate(model, prompts, new_tokens, cache=cache, return_logits=True), cache)
    (plain, plain_cache), (shared, shared_cache) = results[False], results[True]
    return SharingRun(
        arithmetic=shared_prefix_blocks(prefix, shared_cache.lengths, block_size),
        plain_blocks=plain_cache.pool.in_use, shared_blocks=shared_cache.pool.in_use, copies=shared_cache.pool.copies,
        plain_prefill_tokens=_prefill_tokens(plain), shared_prefill_tokens=_prefill_tokens(shared),
        same_tokens=torch.equal(plain.tokens, shared.tokens),
        max_logit_diff=float((plain.logits - shared.logits).abs().max()))


def _prefill_tokens(result) -> int:
    """Tokens the prefill passes fed, all rows together."""
    return sum(p.new_tokens * p.rows for p in result.trace if p.phase == "prefill")
