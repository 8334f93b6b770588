"""Token-by-token generation in every cache mode, with a per-pass trace."""
from __future__ import annotations

import numbers
import time
from functools import partial
from dataclasses import asdict, dataclass, field

import torch

from ._validate import non_negative_float, one_of, positive_int, seed_value
from .cache import BaseCache, DynamicKVCache, Int8KVCache, KVCache
from .device import synchronize
from .measure import median
from .memory import TORCH_DTYPES
from .model import ForwardProbe, ToyTransformer
from .teaching_caches import KOnlyCache, k_only_forward

CACHE_MODES = ("kv", "none", "k_only", "dynamic", "int8", "fp16")
EXACT_MODES = ("kv", "none", "k_only", "dynamic")  # the same logits as "none" up to float rounding order
LOSSY_MODES = ("int8", "fp16")  # K/V stored narrower than the model computes: small, bounded logit changes
CACHE_CLASSES = {"kv": KVCache, "dynamic": DynamicKVCache, "int8": Int8KVCache, "k_only": KOnlyCache,
                 "fp16": partial(KVCache, storage_dtype="fp16")}


@dataclass
class PassRecord:
    """One forward pass of a generation."""

    phase: str  # "prefill" or "decode"
    seq_len: int  # columns of each sequence after this pass (left padding included)
    new_tokens: int  # columns fed as new in this pass
    seconds: float  # wall time of the forward pass, measured after a device synchronize
    cache_bytes: int  # bytes of the cache holding the stored tokens (0 without a cache)
    cache_allocated_bytes: int  # bytes allocated for cache storage
    k_tokens: int  # tokens (per sequence and layer) whose K was projected in this pass
    v_tokens: int  # tokens (per sequence and layer) whose V was projected in this pass
    allocations: int  # cache storage tensors allocated so far
    bytes_copied: int  # bytes written into cache storage so far


@dataclass
class GenerationResult:
    """``tokens`` [B, prompt + new] (prompt included, left-padded) and one ``PassRecord`` per forward pass."""

    tokens: torch.Tensor
    trace: list[PassRecord]
    prompt_len: int  # columns of the (padded) prompt
    cache_mode: str
    pad_lengths: list[int] = field(default_factory=list)  # left padding of each row (all 0 for equal prompts)
    logits: torch.Tensor | None = None  # [B, new, vocab]: the distribution each new token was drawn from
    cache: BaseCache | None = field(default=None, repr=False)

    @property
    def new_tokens(self) -> torch.Tensor:
        """[B, max_new_tokens]: what was generated after each prompt."""
        return self.tokens[:, self.prompt_len:]

    def sequence(self, row: int) -> torch.Tensor:
        """Row ``row`` without its left padding: its prompt followed by its new tokens."""
        return self.tokens[row, self.pad_lengths[row] if self.pad_lengths else 0:]

    @property
    def time_to_first_token(self) -> float:
        """Seconds of all prefill passes (the first new token comes out of the last one)."""
        return sum(r.seconds for r in self.trace if r.phase == "prefill")

    @property
    def decode_seconds(self) -> list[float]:
        """Seconds of each decode pass, in order."""
        return [r.seconds for r in self.trace if r.phase == "decode"]

    @property
    def time_per_output_token(self) -> float:
        """Median seconds of one decode pass (nan when nothing was decoded)."""
        return median(self.decode_seconds)

    @property
    def total_seconds(self) -> float:
        return sum(r.seconds for r in self.trace)

    def trace_rows(self) -> list[dict]:
        return [asdict(r) for r in self.trace]


PAD_ID = 0  # what fills the left padding; masked out, so any valid id would do


def _is_id(t) -> bool:
    return isinstance(t, numbers.Integral) and not isinstance(t, bool)


def as_token_batch(input_ids, vocab_size: int, device=None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Prompts -> (LongTensor [B, T], left-padding lengths [B] or None).

    Accepts a list of ids (one prompt), a list of lists (a batch; unequal lengths are
    left-padded with ``PAD_ID``), or an integer tensor [T] or [B, T] (no padding).
    """
    pad = None
    if isinstance(input_ids, torch.Tensor):
        ids = input_ids
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise ValueError(f"input_ids must hold integer token ids, got dtype {ids.dtype}")
    elif isinstance(input_ids, (list, tuple)) and input_ids:
        nested = [isinstance(r, (list, tuple)) for r in input_ids]
        if any(nested) and not all(nested):
            raise ValueError("input_ids must be either a list of ids or a list of lists of ids, not a mix of both")
        rows = [list(r) for r in input_ids] if all(nested) else [list(input_ids)]
        if any(len(r) == 0 for r in rows):
            raise ValueError("input_ids: every prompt needs at least one token")
        bad = next((t for r in rows for t in r if not _is_id(t)), None)
        if bad is not None:
            raise ValueError(f"input_ids must hold integer token ids, found {bad!r} ({type(bad).__name__})")
        width = max(len(r) for r in rows)
        pads = [width - len(r) for r in rows]
        ids = torch.tensor([[PAD_ID] * p + [int(t) for t in r] for p, r in zip(pads, rows)], dtype=torch.long)
        if any(pads):
            pad = torch.tensor(pads, dtype=torch.long)
    else:
        raise ValueError("input_ids must be a non-empty list of token ids, a list of lists, or an integer tensor")
    if ids.dim() == 1:
        ids = ids[None]  # [T] -> [1, T]
    if ids.dim() != 2 or ids.shape[0] == 0 or ids.shape[1] == 0:
        raise ValueError(f"input_ids must be shaped [B, T] with B, T >= 1, got {list(ids.shape)}")
    lo, hi = (int(v) for v in torch.aminmax(ids))
    if lo < 0 or hi >= vocab_size:
        raise ValueError(f"input_ids must lie in [0, {vocab_size}), got values in [{lo}, {hi}]")
    ids = ids.to(device=device, dtype=torch.long)
    return ids, (pad.to(device) if pad is not None else None)


def make_cache(model, mode: str, batch_size: int, max_seq_len: int) -> BaseCache | None:
    """A fresh cache of the given mode sized for ``max_seq_len`` tokens (None for "none")."""
    one_of("cache", mode, CACHE_MODES)
    if mode == "none":
        return None
    if model.dtype not in TORCH_DTYPES.values():
        raise ValueError(f"model: computes in {model.dtype}, which kvlab's caches do not store; "
                         f"use one of {', '.join(TORCH_DTYPES)} (e.g. model.float())")
    return CACHE_CLASSES[mode](model.config, batch_size, max_seq_len, dtype=model.dtype, device=model.device)


def _next_token(logits: torch.Tensor, temperature: float, top_k: int | None, gen) -> torch.Tensor:
    """logits [B, vocab] -> next token ids [B, 1]; greedy when temperature == 0."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    # Shift so the best logit is 0 before dividing: a tiny temperature then sends the others to
    # -inf (greedy in the limit) instead of overflowing to inf - inf = NaN.
    logits = logits.float()
    logits = (logits - logits.amax(dim=-1, keepdim=True)) / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # [B, 1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs.cpu(), 1, generator=gen).to(logits.device)


@torch.no_grad()
def generate(model, input_ids, max_new_tokens, *, cache="kv", temperature=0.0, seed=None, top_k=None,
             prefill_chunk_size=None, return_logits=False) -> GenerationResult:
    """Generate ``max_new_tokens`` tokens after ``input_ids`` with the chosen cache mode.

    cache: "kv" (preallocated), "none" (re-run the whole sequence each step),
    "k_only" (K cached, V recomputed), "dynamic" (grow by concatenation), "int8" (int8 K/V
    with per-vector scales), "fp16" (K/V stored in fp16 whatever the model computes in), or a
    cache object to use as it is (it is not reset: what it already holds comes first).
    Prompts of unequal length are left-padded and masked; each row's new tokens are those of
    running that prompt alone. ``prefill_chunk_size`` feeds a long prompt to a cache in chunks
    (same result as one pass); without a cache there is nothing to carry between chunks, so
    the prompt is processed in one pass.
    """
    if not isinstance(model, ToyTransformer):
        raise ValueError(f"model must be a kvlab ToyTransformer, got {type(model).__name__}")
    if not isinstance(cache, BaseCache):
        one_of("cache", cache, CACHE_MODES)
    max_new_tokens = positive_int("max_new_tokens", max_new_tokens)
    temperature = non_negative_float("temperature", temperature)
    if top_k is not None:
        top_k = positive_int("top_k", top_k)
    seed = 0 if seed is None else seed_value("seed", seed)
    ids, pad = as_token_batch(input_ids, model.config.vocab_size, model.device)
    B, prompt_len = ids.shape
    total = prompt_len + max_new_tokens
    limit = model.config.max_seq_len
    if total > limit:
        raise ValueError(
            f"max_new_tokens: prompt ({prompt_len}) + max_new_tokens ({max_new_tokens}) = {total} passes the "
            f"model's max_seq_len ({limit})"
        )
    chunk = prompt_len if prefill_chunk_size is None else positive_int("prefill_chunk_size", prefill_chunk_size)
    if cache == "none":
        chunk = prompt_len
    gen = torch.Generator().manual_seed(seed)

    # The last new token is returned, never fed back: the cache needs room for total - 1 tokens.
    if isinstance(cache, BaseCache):
        kv, mode = cache, type(cache).__name__
        model.check_cache(kv, B)
        if kv.length + total - 1 > kv.max_seq_len:
            raise ValueError(f"cache: holds {kv.length} of {kv.max_seq_len} tokens; {total - 1} more do not fit")
    else:
        kv, mode = make_cache(model, cache, B, total - 1), cache
    whole_sequence = kv is None or not kv.stores_values  # no cache, or no V in it: every pass sees everything
    forward = partial(k_only_forward, model) if kv is not None and not kv.stores_values else model.forward
    base = kv.length if kv is not None else 0  # columns a given cache already holds
    trace: list[PassRecord] = []
    all_logits = []
    device = model.device

    def run(phase: str, feed: torch.Tensor, seq_len: int) -> torch.Tensor:
        probe = ForwardProbe()
        synchronize(device)
        t0 = time.perf_counter()
        logits = forward(feed, kv, pad_lengths=pad, last_logits_only=True, probe=probe)[:, -1]  # [B, vocab]
        synchronize(device)
        seconds = time.perf_counter() - t0
        k_tok, v_tok = probe.projected()
        trace.append(PassRecord(
            phase=phase, seq_len=seq_len, new_tokens=seq_len - (trace[-1].seq_len if trace else base),
            seconds=seconds,
            cache_bytes=kv.used_bytes if kv is not None else 0,
            cache_allocated_bytes=kv.nbytes if kv is not None else 0,
            k_tokens=k_tok, v_tokens=v_tok,
            allocations=kv.allocations if kv is not None else 0,
            bytes_copied=kv.bytes_copied if kv is not None else 0,
        ))
        return logits

    tokens = ids
    # Prefill: the prompt, in chunks when asked.
    for begin in range(0, prompt_len, chunk):
        end = min(begin + chunk, prompt_len)
        logits = run("prefill", ids[:, :end] if whole_sequence else ids[:, begin:end], base + end)
    for step in range(max_new_tokens):
        if return_logits:
            all_logits.append(logits.float().cpu())
        nxt = _next_token(logits, temperature, top_k, gen)  # [B, 1]
        tokens = torch.cat([tokens, nxt], dim=1)  # [B, t+1]
        if step == max_new_tokens - 1:
            break
        logits = run("decode", tokens if whole_sequence else nxt, base + tokens.shape[1])
    return GenerationResult(
        tokens=tokens.cpu(), trace=trace, prompt_len=prompt_len, cache_mode=mode,
        pad_lengths=pad.tolist() if pad is not None else [0] * B,
        logits=torch.stack(all_logits, dim=1) if return_logits else None, cache=kv,
    )
