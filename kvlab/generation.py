"""Token-by-token generation in every cache mode, with a per-pass trace."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import torch

from ._validate import non_negative_float, non_negative_int, one_of, positive_int
from .cache import BaseCache, DynamicKVCache, Int8KVCache, KOnlyCache, KVCache
from .device import synchronize
from .timing import median

CACHE_MODES = ("kv", "none", "k_only", "dynamic", "int8")
CACHE_CLASSES = {"kv": KVCache, "dynamic": DynamicKVCache, "int8": Int8KVCache, "k_only": KOnlyCache}


@dataclass
class PassRecord:
    """One forward pass of a generation."""

    phase: str  # "prefill" or "decode"
    seq_len: int  # tokens in each sequence after this pass
    new_tokens: int  # tokens fed as new in this pass
    seconds: float  # wall time of the forward pass, measured after a device synchronize
    cache_bytes: int  # bytes of the cache holding the stored tokens (0 without a cache)
    cache_allocated_bytes: int  # bytes allocated for cache storage
    k_tokens: int  # tokens (per sequence) whose K was projected in this pass
    v_tokens: int  # tokens (per sequence) whose V was projected in this pass
    allocations: int  # cache storage tensors allocated so far
    bytes_copied: int  # bytes written into cache storage so far


@dataclass
class GenerationResult:
    """``tokens`` [B, prompt + new] (prompt included) and one ``PassRecord`` per forward pass."""

    tokens: torch.Tensor
    trace: list[PassRecord]
    prompt_len: int
    cache_mode: str
    logits: torch.Tensor | None = None  # [B, new, vocab]: the distribution each new token was drawn from
    cache: BaseCache | None = field(default=None, repr=False)

    @property
    def new_tokens(self) -> torch.Tensor:
        return self.tokens[:, self.prompt_len:]

    @property
    def time_to_first_token(self) -> float:
        """Seconds of all prefill passes (the first new token comes out of the last one)."""
        return sum(r.seconds for r in self.trace if r.phase == "prefill")

    @property
    def decode_seconds(self) -> list[float]:
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


def as_token_batch(input_ids, vocab_size: int, device=None) -> torch.Tensor:
    """Accept a list of ids, a list of equal-length lists, or a tensor; return LongTensor [B, T]."""
    if isinstance(input_ids, torch.Tensor):
        ids = input_ids
        if ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise ValueError(f"input_ids must hold integer token ids, got dtype {ids.dtype}")
    else:
        if not isinstance(input_ids, (list, tuple)) or len(input_ids) == 0:
            raise ValueError("input_ids must be a non-empty list of token ids, a list of lists, or a tensor")
        rows = input_ids if isinstance(input_ids[0], (list, tuple)) else [input_ids]
        lengths = {len(r) for r in rows}
        if len(lengths) != 1:
            raise ValueError(f"input_ids: prompts in a batch must have equal lengths, got lengths {sorted(lengths)}")
        for r in rows:
            for t in r:
                if isinstance(t, bool) or not isinstance(t, int):
                    raise ValueError(f"input_ids must hold integer token ids, found {t!r}")
        ids = torch.tensor(rows, dtype=torch.long)
    if ids.dim() == 1:
        ids = ids[None]  # [T] -> [1, T]
    if ids.dim() != 2 or ids.shape[0] == 0 or ids.shape[1] == 0:
        raise ValueError(f"input_ids must be shaped [B, T] with B, T >= 1, got {list(ids.shape)}")
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= vocab_size:
        raise ValueError(f"input_ids must lie in [0, {vocab_size}), got values in [{lo}, {hi}]")
    return ids.to(device=device, dtype=torch.long)


def make_cache(model, mode: str, batch_size: int, max_seq_len: int) -> BaseCache | None:
    """A fresh cache of the given mode sized for ``max_seq_len`` tokens (None for "none")."""
    one_of("cache", mode, CACHE_MODES)
    if mode == "none":
        return None
    return CACHE_CLASSES[mode](model.config, batch_size, max_seq_len, dtype=model.dtype, device=model.device)


def _next_token(logits: torch.Tensor, temperature: float, top_k: int | None, gen) -> torch.Tensor:
    """logits [B, vocab] -> next token ids [B, 1]; greedy when temperature == 0."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits.float() / temperature
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
    "k_only" (K cached, V recomputed), "dynamic" (grow by concatenation), "int8".
    ``prefill_chunk_size`` feeds a long prompt to a cache in chunks (same result as
    one pass); without a cache there is nothing to carry between chunks, so the
    prompt is processed in one pass.
    """
    from .model import ToyTransformer

    if not isinstance(model, ToyTransformer):
        raise ValueError(f"model must be a kvlab ToyTransformer, got {type(model).__name__}")
    one_of("cache", cache, CACHE_MODES)
    max_new_tokens = positive_int("max_new_tokens", max_new_tokens)
    temperature = non_negative_float("temperature", temperature)
    if top_k is not None:
        top_k = positive_int("top_k", top_k)
    seed = 0 if seed is None else non_negative_int("seed", seed)
    ids = as_token_batch(input_ids, model.config.vocab_size, model.device)
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
    kv = make_cache(model, cache, B, total - 1)
    trace: list[PassRecord] = []
    all_logits = []
    device = model.device

    def run(phase: str, feed: torch.Tensor, seq_len: int) -> torch.Tensor:
        synchronize(device)
        t0 = time.perf_counter()
        logits = model(feed, kv, last_logits_only=True)[:, -1]  # [B, vocab]
        synchronize(device)
        seconds = time.perf_counter() - t0
        k_tok, v_tok = model.last_projected
        trace.append(PassRecord(
            phase=phase, seq_len=seq_len, new_tokens=seq_len - (trace[-1].seq_len if trace else 0),
            seconds=seconds,
            cache_bytes=kv.used_bytes if kv is not None else 0,
            cache_allocated_bytes=kv.nbytes if kv is not None else 0,
            k_tokens=k_tok, v_tokens=v_tok,
            allocations=kv.allocations if kv is not None else 0,
            bytes_copied=kv.bytes_copied if kv is not None else 0,
        ))
        return logits

    tokens = ids
    # Prefill: the prompt, in chunks when asked. A cache holding K and V takes only the
    # new chunk; without V in the cache, every pass needs the whole prefix.
    for begin in range(0, prompt_len, chunk):
        end = min(begin + chunk, prompt_len)
        feed = ids[:, begin:end] if kv is not None and kv.caches_values else ids[:, :end]
        logits = run("prefill", feed, end)
    for step in range(max_new_tokens):
        if return_logits:
            all_logits.append(logits.float().cpu())
        nxt = _next_token(logits, temperature, top_k, gen)  # [B, 1]
        tokens = torch.cat([tokens, nxt], dim=1)  # [B, t+1]
        if step == max_new_tokens - 1:
            break
        feed = nxt if kv is not None and kv.caches_values else tokens
        logits = run("decode", feed, tokens.shape[1])
    return GenerationResult(
        tokens=tokens.cpu(), trace=trace, prompt_len=prompt_len, cache_mode=cache,
        logits=torch.stack(all_logits, dim=1) if return_logits else None, cache=kv,
    )
