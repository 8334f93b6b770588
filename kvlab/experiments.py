"""Measurements the chapters run on the learner's machine; plots take their results."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ._validate import positive_int
from .cache import KVCache
from .config import ModelConfig
from .generation import generate
from .memory import kv_cache_bytes
from .model import ToyTransformer
from .timing import cumulative, growth_exponent, measurement_threads, median, torch_threads


# -- 3.1: one decoding step, with and without a cache -----------------------------------
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
    logits_max_abs_diff: float  # |next-token logits with cache - without|

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
        full_logits, full = model(torch.tensor([ids], device=model.device), return_attention=True)
        n_new = feed.shape[1]
        cached_logits, rows = model(feed, cache, return_attention=True)
        full_w = torch.stack([w[0] for w in full]).float().cpu()  # [L, H, t, t]
        rows_w = torch.stack([w[0] for w in rows]).float().cpu()  # [L, H, n_new, t]
        diff = (rows_w[:, :, -1] - full_w[:, :, -1]).abs().max().item()
        probs = torch.softmax(cached_logits[0, -1].float(), dim=-1)
        top = torch.topk(probs, min(k, probs.numel()))
        nxt = int(top.indices[0])
        out.append(DecodeStep(
            step=step, tokens=[tokenizer.decode([i]) for i in ids], next_token=tokenizer.decode([nxt]),
            topk=[(tokenizer.decode([int(i)]), float(p)) for p, i in zip(top.values, top.indices)],
            full_weights=full_w, cached_weights=rows_w, kv_without_cache=len(ids), kv_with_cache=n_new,
            row_max_abs_diff=diff,
            logits_max_abs_diff=(cached_logits[0, -1] - full_logits[0, -1]).abs().max().item(),
        ))
        ids = ids + [nxt]
        feed = torch.tensor([[nxt]], device=model.device)
    return out


# -- 3.1: per-step latency with and without a cache ------------------------------------
def timing_model(device=None, seed: int = 0) -> ToyTransformer:
    """A random-weight model big enough that decode cost visibly grows with t on a CPU."""
    config = ModelConfig(vocab_size=4096, d_model=256, n_layer=4, n_head=4, max_seq_len=2048)
    model = ToyTransformer(config, seed=seed).eval()
    return model.to(device) if device is not None else model


def measure_decode_latency(model: ToyTransformer, new_tokens: int, modes=("none", "kv"), repeats: int = 1,
                           prompt_len: int = 4, seed: int = 0, progress: bool = True) -> dict:
    """Generate ``new_tokens`` tokens in each mode (alternating, after a warm-up) and summarise the traces.

    Returns ``{mode: {"t", "step_ms", "cumulative_s", "step_exponent", "cumulative_exponent", "tokens"}}``,
    each step's time being the median over ``repeats``.
    """
    from tqdm.auto import tqdm

    new_tokens = positive_int("new_tokens", new_tokens)
    repeats = positive_int("repeats", repeats)
    prompt_len = positive_int("prompt_len", prompt_len)
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, model.config.vocab_size, (1, prompt_len), generator=gen)
    runs = {mode: [] for mode in modes}
    with torch_threads(measurement_threads()), \
            tqdm(total=repeats * len(modes), desc="测量中", disable=not progress, leave=False) as bar:
        for mode in modes:  # warm-up
            generate(model, prompt, min(8, new_tokens), cache=mode)
        for _ in range(repeats):
            for mode in modes:
                runs[mode].append(generate(model, prompt, new_tokens, cache=mode))
                bar.update()
    out = {}
    for mode, results in runs.items():
        traces = [r.trace for r in results]
        t = [rec.seq_len for rec in traces[0]]
        step_s = [median(col) for col in zip(*([rec.seconds for rec in tr] for tr in traces))]
        cum = cumulative(step_s)
        decode_t, decode_s = t[1:], step_s[1:]
        half = len(decode_t) // 2  # fit the second half, where growth (not fixed overhead) dominates
        out[mode] = {
            "t": t, "step_ms": [s * 1e3 for s in step_s], "cumulative_s": cum,
            "step_exponent": growth_exponent(decode_t[half:], decode_s[half:]),
            "cumulative_exponent": growth_exponent(range(1, len(cum) + 1), cum),
            "tokens": results[0].tokens,
            "k_tokens": [rec.k_tokens for rec in traces[0]], "v_tokens": [rec.v_tokens for rec in traces[0]],
        }
    return out


# -- 3.2: preallocated vs grow-by-concatenation -----------------------------------------
def wide_cache_model(seed: int = 0) -> ToyTransformer:
    """Thin weights, wide cache (16 heads of 64 per layer): cache copies are visible next to weight reads."""
    config = ModelConfig(vocab_size=512, d_model=256, n_layer=8, n_head=16, head_dim=64, max_seq_len=4096)
    return ToyTransformer(config, seed=seed).eval()


def compare_cache_growth(model: ToyTransformer, new_tokens: int, prompt_len: int = 8, progress: bool = True) -> dict:
    """Run "kv" (preallocated) and "dynamic" (concatenation) side by side: allocations, bytes copied, time."""
    from tqdm.auto import tqdm

    new_tokens = positive_int("new_tokens", new_tokens)
    prompt = torch.arange(prompt_len)[None] % model.config.vocab_size
    out = {}
    with torch_threads(measurement_threads()):
        results = {}
        for mode in tqdm(("kv", "dynamic"), desc="测量中", disable=not progress, leave=False):
            generate(model, prompt, min(8, new_tokens), cache=mode)  # warm-up
            results[mode] = generate(model, prompt, new_tokens, cache=mode)
    for mode, res in results.items():
        out[mode] = {
            "t": [r.seq_len for r in res.trace],
            "allocations": [r.allocations for r in res.trace],
            "bytes_copied": [r.bytes_copied for r in res.trace],
            "allocated_bytes": [r.cache_allocated_bytes for r in res.trace],
            "step_ms": [r.seconds * 1e3 for r in res.trace],
            "tokens": res.tokens,
        }
    return out


# -- 3.2: padding waste in a batch --------------------------------------------------------
def parse_lengths(text, maximum: int = 1_000_000, max_count: int = 64) -> list[int]:
    """"12, 40, 7" -> [12, 40, 7]; ValueError (naming ``lengths``) for anything else."""
    if isinstance(text, (list, tuple)):
        parts = list(text)
    else:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("lengths: type the prompt lengths separated by commas, e.g. 12, 40, 7")
        parts = [p.strip() for p in text.replace("，", ",").replace(" ", ",").split(",") if p.strip()]
    values = []
    for p in parts:
        try:
            v = int(p) if isinstance(p, str) else p
        except ValueError:
            raise ValueError(f"lengths: {p!r} is not a whole number") from None
        values.append(positive_int("lengths", v, maximum=maximum))
    if not values:
        raise ValueError("lengths: give at least one length")
    if len(values) > max_count:
        raise ValueError(f"lengths: at most {max_count} sequences, got {len(values)}")
    return values


def padding_waste(lengths, config: ModelConfig, dtype="fp16", block_size: int = 16) -> dict:
    """Slots a padded batch allocates vs uses, and what a paged cache of ``block_size`` would allocate."""
    lengths = parse_lengths(lengths)
    block_size = positive_int("block_size", block_size)
    B, S = len(lengths), max(lengths)
    allocated_slots = B * S
    used_slots = sum(lengths)
    paged_slots = sum(math.ceil(n / block_size) * block_size for n in lengths)
    per_slot = kv_cache_bytes(config.n_layer, config.n_kv_head, config.head_dim, 1, 1, dtype)
    return {
        "lengths": lengths, "batch_size": B, "max_len": S,
        "allocated_slots": allocated_slots, "used_slots": used_slots, "paged_slots": paged_slots,
        "waste_fraction": 1 - used_slots / allocated_slots,
        "paged_waste_fraction": 1 - used_slots / paged_slots,
        "bytes_per_slot": per_slot,
        "allocated_bytes": allocated_slots * per_slot, "used_bytes": used_slots * per_slot,
        "paged_bytes": paged_slots * per_slot, "block_size": block_size,
    }


def measured_padding_bytes(lengths, config: ModelConfig, dtype="fp32") -> tuple[int, int]:
    """Allocate a real padded cache for ``lengths``: (allocated bytes, bytes the real tokens fill)."""
    lengths = parse_lengths(lengths, maximum=config.max_seq_len)
    cache = KVCache(config, len(lengths), max(lengths), dtype=dtype)
    per_token_row = cache.nbytes // (len(lengths) * max(lengths))
    return cache.nbytes, per_token_row * sum(lengths)


@torch.no_grad()
def layer_qkv(model: ToyTransformer, ids, layer: int = 0):
    """Q [H, t, D], K and V [H_kv, t, D] (RoPE applied) that ``layer`` computes for one sequence ``ids``."""
    from .model import apply_rope

    ids = torch.as_tensor(ids, device=model.device).reshape(1, -1)  # [1, t]
    t = ids.shape[1]
    x = model.embed(ids)
    for block in model.layers[:layer]:
        x = block(x, model.rope_cos[:t], model.rope_sin[:t], None, 0)
    attn = model.layers[layer].attn
    q, k, v = attn.wqkv(model.layers[layer].attn_norm(x)).split([attn.q_dim, attn.kv_dim, attn.kv_dim], dim=-1)
    cos, sin = model.rope_cos[:t], model.rope_sin[:t]
    q = apply_rope(q.view(t, attn.n_head, attn.head_dim).transpose(0, 1), cos, sin)  # [t, H*D] -> [H, t, D]
    k = apply_rope(k.view(t, attn.n_kv_head, attn.head_dim).transpose(0, 1), cos, sin)  # [H_kv, t, D]
    v = v.view(t, attn.n_kv_head, attn.head_dim).transpose(0, 1)  # [H_kv, t, D]
    return q, k, v
