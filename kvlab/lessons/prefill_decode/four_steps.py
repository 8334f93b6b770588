"""Chapter 3.3, the chapter's four steps mapped to kvlab's code, and checked on a real cache."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..._validate import positive_int
from ...attention import attention
from ...cache import BaseCache, KVCache
from ...generation import decode_n_tokens, decode_one_token, prefill
from ...inputs import choice
from ...model import Attention, ToyTransformer
from ...viz.source import show_source
from .phrases import PANELS


@dataclass(frozen=True)
class CodePart:
    obj: object
    start: str
    stop: str
    caption_key: str  # its caption in PANELS, in the course's language when shown

    @property
    def caption(self) -> str:
        """The caption in the Chinese edition's words."""
        return PANELS.text(self.caption_key, "zh")

    @property
    def shown_caption(self) -> str:
        return PANELS.say(self.caption_key)


FOUR_STEPS = {
    "prefill": [
        CodePart(prefill, "def prefill", "return logits", "step.prefill"),
        CodePart(ToyTransformer.forward_unchecked, "x = self.embed(ids)", "cache.advance(T)",
                 "step.forward"),
    ],
    "decode": [
        CodePart(decode_n_tokens, "for step in range(n)", "logits = decode_one_token(",
                 "step.decode_loop"),
        CodePart(decode_one_token, "def decode_one_token", "return forward_pass(",
                 "step.decode_one"),
    ],
    "attention": [
        CodePart(Attention.forward, "= self.wqkv(x)", "out = attn_ops.attention(",
                 "step.attention_forward"),
        CodePart(attention, "k = repeat_kv(k", "out = weights @ v",
                 "step.attention"),
    ],
    "update": [
        CodePart(KVCache.write, "def write", "return self._read", "step.write"),
        CodePart(KVCache._store, "def _store", "self.v[layer", "step.store"),
        CodePart(BaseCache.advance, "def advance", "self.length += n", "step.advance"),
    ],
}


STEP_ARGUMENT = PANELS.text("label.step_argument", "zh")  # how a message names show_step's argument (in Chinese)


def show_step(name: str):
    """The code of one of the chapter's four steps, from the installed kvlab (an ``IPython.display.HTML``)."""
    from IPython.display import HTML

    parts = FOUR_STEPS[choice(PANELS.say("label.step_argument"), name, list(FOUR_STEPS))]
    return HTML("".join(show_source(p.obj, p.start, p.stop, caption=p.shown_caption).data for p in parts))


@dataclass
class FourStepCheck:
    """A prompt prefilled into a real cache, then a few decode steps, with the cache inspected after each pass."""

    prompt_len: int
    lengths: list[int]  # cache.length after each pass (prefill, then each decode step)
    written_rows: list[list[int]]  # per pass: the token rows (positions) where K or V changed, any layer or head
    rows_per_layer_head: list[torch.Tensor]  # per pass: [L, H_kv] rows changed in each layer and head
    old_rows_identical: list[bool]  # per pass: every row stored before the pass is bit-identical after it
    rest_untouched: list[bool]  # per pass: rows from length on are still the zeros they were allocated as
    logits_max_diff: list[float]  # per decode step: |logits with the cache - logits recomputed without one|


@torch.no_grad()
def check_four_steps(model: ToyTransformer, ids, decode_steps: int = 3) -> FourStepCheck:
    """Prefill ``ids`` into a preallocated cache, then decode greedily, comparing the cache before and after
    every pass and each decode step's logits with a recomputation of the whole sequence without a cache."""
    decode_steps = positive_int("decode_steps", decode_steps)
    ids = model.check_ids(torch.as_tensor(ids).reshape(1, -1), "ids")  # [1, P]
    P = ids.shape[1]
    if P + decode_steps > model.config.max_seq_len:
        raise ValueError(f"decode_steps: prompt ({P}) + decode_steps ({decode_steps}) passes max_seq_len")
    cache = KVCache(model.config, 1, P + decode_steps, dtype=model.dtype, device=model.device)
    out = FourStepCheck(P, [], [], [], [], [], [])
    seq, feed = ids, ids
    for step in range(decode_steps + 1):
        k0, v0, before = cache.k.clone(), cache.v.clone(), cache.length
        logits = model(feed, cache)
        changed = ((cache.k != k0) | (cache.v != v0)).any(-1)[:, 0]  # [L, H_kv, S]: rows where K or V changed
        out.lengths.append(cache.length)
        out.written_rows.append(changed.any(0).any(0).nonzero().flatten().tolist())
        out.rows_per_layer_head.append(changed.sum(-1).cpu())
        out.old_rows_identical.append(bool(torch.equal(cache.k[..., :before, :], k0[..., :before, :])
                                           and torch.equal(cache.v[..., :before, :], v0[..., :before, :])))
        out.rest_untouched.append(bool((cache.k[..., cache.length:, :] == 0).all()
                                       and (cache.v[..., cache.length:, :] == 0).all()))
        if step:
            full = model(seq)  # [1, t, vocab]: the whole sequence again, without a cache
            out.logits_max_diff.append((logits[0, -1] - full[0, -1]).abs().max().item())
        feed = logits[:, -1:].argmax(-1)  # [1, 1]: the greedy next token
        seq = torch.cat([seq, feed], dim=1)
    return out
