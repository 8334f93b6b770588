"""Chapter 3.1's walkthrough: greedy generation step by step, each step computed both ways (everything
recomputed, and with a real cache), with the attention weights, the top-k choices and what the cache holds after it;
which position a head's newest query looks at most, and the steps at which two heads agree."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..._validate import positive_int
from ...cache import KVCache
from ...model import ToyTransformer


DEFAULT_PROMPT = "人工"


@dataclass
class DecodeStep:
    """What one step of generation computes, both ways."""

    step: int  # 1-based
    tokens: list[str]  # the input this step sees (t tokens)
    next_token: str  # the greedy choice
    topk: list[tuple[str, float]]  # the k most likely next tokens and their probabilities
    full_weights: torch.Tensor  # [L, H, t, t]: attention weights when everything is recomputed
    cached_weights: torch.Tensor  # [L, H, n, t]: what the cached pass computes (n new tokens: t at prefill, then 1)
    kv_without_cache: int  # tokens whose K/V are projected without a cache (= t)
    kv_with_cache: int  # ... and with one (the prompt at the first step, then 1)
    row_max_abs_diff: float  # |cached row - last row of full attention|, max over layers and heads
    k_cache: torch.Tensor  # [L, H_kv, t, D]: what the cache holds after this step
    v_cache: torch.Tensor

    @property
    def t(self) -> int:
        return len(self.tokens)


@torch.no_grad()
def decode_walkthrough(model: ToyTransformer, tokenizer, prompt: str, steps: int, k: int = 5) -> list[DecodeStep]:
    """Greedy-generate ``steps`` tokens after ``prompt``, recording both ways of computing each step."""
    steps = positive_int("steps", steps)
    k = positive_int("k", k)
    ids = tokenizer.encode(prompt)
    limit = model.config.max_seq_len
    if len(ids) + steps > limit:
        raise ValueError(f"steps: prompt ({len(ids)}) + steps ({steps}) passes max_seq_len ({limit})")
    cache = KVCache(model.config, 1, len(ids) + steps, dtype=model.dtype, device=model.device)
    feed = torch.tensor([ids], device=model.device)
    out = []
    for step in range(1, steps + 1):
        _, full = model(torch.tensor([ids], device=model.device), return_attention=True)
        n_new = feed.shape[1]
        cached_logits, rows = model(feed, cache, return_attention=True)
        full_w = torch.stack([w[0] for w in full]).float().cpu()  # [L, H, t, t]
        rows_w = torch.stack([w[0] for w in rows]).float().cpu()  # [L, H, n_new, t]
        probs = torch.softmax(cached_logits[0, -1].float(), dim=-1)
        top = torch.topk(probs, min(k, probs.numel()))
        nxt = int(top.indices[0])
        views = [cache.layer_view(layer) for layer in range(model.config.n_layer)]  # each ([1, H_kv, t, D],) * 2
        out.append(DecodeStep(
            step=step, tokens=[tokenizer.decode([i]) for i in ids], next_token=tokenizer.decode([nxt]),
            topk=[(tokenizer.decode([int(i)]), float(p)) for p, i in zip(top.values, top.indices)],
            full_weights=full_w, cached_weights=rows_w, kv_without_cache=len(ids), kv_with_cache=n_new,
            row_max_abs_diff=(rows_w[:, :, -1] - full_w[:, :, -1]).abs().max().item(),
            k_cache=torch.stack([kk[0] for kk, _ in views]).float().cpu(),  # [L, H_kv, t, D]
            v_cache=torch.stack([vv[0] for _, vv in views]).float().cpu(),
        ))
        ids = ids + [nxt]
        feed = torch.tensor([[nxt]], device=model.device)
    return out


def most_attended(s: DecodeStep, layer: int, head: int) -> tuple[int, str, float]:
    """The position (0-based) and token the newest query of ``head`` looks at most in this step, and its weight."""
    row = s.cached_weights[layer, head, -1]  # [t]
    i = int(row.argmax())
    return i, s.tokens[i], float(row[i])


def steps_where_heads_agree(steps: list[DecodeStep], layer: int, head_a: int, head_b: int) -> list[int]:
    """Steps at which two heads' newest queries look most at the same position (the walkthrough's task)."""
    return [s.step for s in steps if most_attended(s, layer, head_a)[0] == most_attended(s, layer, head_b)[0]]
