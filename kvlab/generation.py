"""Token-by-token generation in every cache mode, with a per-pass trace.

Read it like gpt-fast's ``generate.py``: :func:`generate` checks every argument once, then runs the
chapter's two phases, :func:`prefill` (the prompt, in one pass or in chunks) and
:func:`decode_n_tokens` (one :func:`decode_one_token` per new token). Every forward pass goes through
:func:`forward_pass`, which times the model alone between two device synchronisations (no argument
check and no host sync inside) and appends a :class:`PassRecord` to the trace. The cache modes are
defined in :mod:`kvlab.cache_modes`.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import torch

from ._validate import non_negative_float, one_of, positive_int, seed_value, token_ids
from .cache import BaseCache
from .cache_modes import CACHE_MODES, MODES
from .device import synchronize
from .memory import TORCH_DTYPES, stored_tokens
from .model import ForwardProbe, ToyTransformer
from .paged_cache import PagedKVCache, PromptSharing
from .teaching_caches import k_only_forward_unchecked


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
    rows: int = 0  # sequences fed in this pass (a paged prefill feeds the prompts of one length at a time)


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
        """TPOT of this request: (end-to-end − TTFT) / (new tokens − 1), the mean of its decode passes (nan when
        nothing was decoded). The distribution of single decode passes (``decode_seconds``) is the inter-token
        latency, reported as a median and tail percentiles."""
        steps = self.decode_seconds
        return sum(steps) / len(steps) if steps else float("nan")

    @property
    def total_seconds(self) -> float:
        return sum(r.seconds for r in self.trace)

    def trace_rows(self) -> list[dict]:
        return [asdict(r) for r in self.trace]


PAD_ID = 0  # what fills the left padding; masked out, so any valid id would do


def as_token_batch(input_ids) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Prompts -> (integer tensor [B, T], left-padding lengths [B] or None); the model's ``check_ids``
    then checks the tensor (dtype, shape, vocabulary range) like any other input.

    Accepts a list of ids (one prompt), a list of lists (a batch; unequal lengths are
    left-padded with ``PAD_ID``), or an integer tensor [T] or [B, T] (no padding). A list's ids are
    checked by :func:`~kvlab._validate.token_ids`, as ``serve`` checks its prompts.
    """
    if isinstance(input_ids, torch.Tensor):
        return (input_ids[None] if input_ids.dim() == 1 else input_ids), None  # [T] -> [1, T]
    if not isinstance(input_ids, (list, tuple)) or not input_ids:
        raise ValueError("input_ids must be a non-empty list of token ids, a list of lists, or an integer tensor")
    nested = [isinstance(r, (list, tuple)) for r in input_ids]
    if any(nested) and not all(nested):
        raise ValueError("input_ids must be either a list of ids or a list of lists of ids, not a mix of both")
    rows = ([token_ids(f"input_ids[{i}]", r) for i, r in enumerate(input_ids)] if all(nested)
            else [token_ids("input_ids", input_ids)])
    width = max(len(r) for r in rows)
    pads = [width - len(r) for r in rows]
    ids = torch.tensor([[PAD_ID] * p + r for p, r in zip(pads, rows)], dtype=torch.long)
    return ids, (torch.tensor(pads, dtype=torch.long) if any(pads) else None)


def run_pads(pad: torch.Tensor | None, batch_size: int) -> list[int]:
    """Left padding of each row as ints (all 0 without padding)."""
    return pad.tolist() if pad is not None else [0] * batch_size


def make_cache(model, mode: str, batch_size: int, max_seq_len: int) -> BaseCache | None:
    """A fresh cache of the given mode sized for ``max_seq_len`` tokens (None for "none")."""
    factory = MODES[one_of("cache", mode, CACHE_MODES)].factory
    if factory is None:
        return None
    if model.dtype not in TORCH_DTYPES.values():
        raise ValueError(f"model: computes in {model.dtype}, which kvlab's caches do not store; "
                         f"use one of {', '.join(TORCH_DTYPES)} (e.g. model.float())")
    return factory(model.config, batch_size, max_seq_len, dtype=model.dtype, device=model.device)


def sample(logits: torch.Tensor, temperature: float, top_k: int | None, generator) -> torch.Tensor:
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
    return torch.multinomial(probs.cpu(), 1, generator=generator).to(logits.device)


# -- one generation: checked once, then prefill and decode -----------------------------------------
@dataclass
class Decoding:
    """What one generation carries from pass to pass; :func:`generate` builds it after checking everything."""

    model: ToyTransformer
    cache: BaseCache | None
    pad: torch.Tensor | None  # [B] left padding of each row, or None
    temperature: float
    top_k: int | None
    generator: torch.Generator
    start: int = 0  # columns the cache held before this generation (a cache passed in may hold some)
    trace: list[PassRecord] = field(default_factory=list)
    drawn_from: list[torch.Tensor] | None = None  # with return_logits: the logits [B, vocab] each token came from

    @property
    def whole_sequence(self) -> bool:
        """No cache, or no V in it (K-only): every pass has to see the whole sequence again."""
        return self.cache is None or not self.cache.stores_values

    def sample(self, logits: torch.Tensor) -> torch.Tensor:
        """The next token [B, 1] drawn from ``logits`` [B, vocab] (kept in ``drawn_from`` when asked)."""
        if self.drawn_from is not None:
            self.drawn_from.append(logits)
        return sample(logits, self.temperature, self.top_k, self.generator)


def forward_pass(run: Decoding, phase: str, feed: torch.Tensor, seq_len: int, new: int,
                 rows: BaseCache | None = None) -> torch.Tensor:
    """One forward pass of ``feed`` [B, T]: the last column's logits [B, vocab], its :class:`PassRecord` traced.

    Only the model is timed, between two device synchronisations; the arguments were checked once by
    :func:`generate`, so no check (and no host sync a check would need) runs inside the timed region.
    ``new``: the columns of ``feed`` that are new (all T, unless nothing holds V and the whole sequence is fed again).
    ``rows``: a paged cache over some of the rows (a paged prefill feeds prompts of one length at a time).
    """
    model, cache, probe = run.model, run.cache if rows is None else rows, ForwardProbe()
    synchronize(model.device)
    t0 = time.perf_counter()
    if cache is not None and not cache.stores_values:
        logits = k_only_forward_unchecked(model, feed, cache, run.pad, last_logits_only=True, probe=probe)
    else:
        logits = model.forward_unchecked(feed, cache, run.pad, last_logits_only=True, probe=probe)
    synchronize(model.device)
    seconds = time.perf_counter() - t0
    k_tok, v_tok = probe.projected()
    run.trace.append(PassRecord(
        phase=phase, seq_len=seq_len, new_tokens=new, seconds=seconds,
        cache_bytes=run.cache.used_bytes if run.cache is not None else 0,
        cache_allocated_bytes=run.cache.nbytes if run.cache is not None else 0,
        k_tokens=k_tok, v_tokens=v_tok,
        allocations=run.cache.allocations if run.cache is not None else 0,
        bytes_copied=cache.bytes_copied if cache is not None else 0, rows=feed.shape[0],
    ))
    return logits[:, -1]  # [B, vocab]


def prefill(run: Decoding, ids: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """Phase 1: the prompt ``ids`` [B, P], ``chunk_size`` columns per pass. Returns the last pass's logits."""
    P = ids.shape[1]
    for begin in range(0, P, chunk_size):
        end = min(begin + chunk_size, P)
        logits = forward_pass(run, "prefill", ids[:, :end] if run.whole_sequence else ids[:, begin:end],
                              run.start + end, end - begin)
    return logits


def prefill_paged(run: Decoding, prompts: list[list[int]], chunk_size: int) -> torch.Tensor:
    """Phase 1 on a paged cache, with no padding: the prompts fed the same number of tokens go through their passes
    together, each row writing into its own blocks at its own positions. With ``share_prefixes``, a prompt that
    starts like an earlier one holds that prompt's blocks (reference counts) and only the rest of it is fed; it is
    prefilled in a later wave, after the pass that wrote them: full blocks are found by chain hash in a
    ``PrefixCache``, as the serving engine finds them (:class:`~kvlab.paged_cache.PromptSharing` says what is
    shared and why). Returns every row's last logits [B, vocab]."""
    cache: PagedKVCache = run.cache
    sharing = PromptSharing(cache, prompts) if cache.share_prefixes else None
    last: list[torch.Tensor | None] = [None] * len(prompts)
    pending = list(range(len(prompts)))
    while pending:
        ready, pending = sharing.wave(pending) if sharing else (pending, [])
        held = {r: sharing.hold(r) if sharing else 0 for r in ready}  # prompt tokens already in shared blocks
        by_fed: dict[int, list[int]] = {}
        for r in ready:
            by_fed.setdefault(len(prompts[r]) - held[r], []).append(r)
        for rows in by_fed.values():
            tables = [cache.tables[r] for r in rows]
            view = type(cache).over(cache.pool, tables, cache.max_seq_len)  # a subclass of the cache stays one
            ids = torch.tensor([prompts[r][held[r]:] for r in rows], dtype=torch.long, device=run.model.device)
            for begin in range(0, ids.shape[1], chunk_size):  # ids: [rows, fed]
                feed = ids[:, begin:begin + chunk_size]
                logits = forward_pass(run, "prefill", feed, view.length + feed.shape[1], feed.shape[1], rows=view)
            for i, r in enumerate(rows):
                last[r] = logits[i]
        if sharing:
            sharing.register(ready)
    return torch.stack(last)  # [B, vocab]


def decode_one_token(run: Decoding, tokens: torch.Tensor, next_token: torch.Tensor) -> torch.Tensor:
    """One decode pass: the token just drawn, ``next_token`` [B, 1], goes in (the whole sequence ``tokens``
    [B, t] when nothing holds V); the logits of the token after it come out [B, vocab]."""
    return forward_pass(run, "decode", tokens if run.whole_sequence else next_token, run.start + tokens.shape[1], 1)


def decode_n_tokens(run: Decoding, tokens: torch.Tensor, logits: torch.Tensor, n: int) -> torch.Tensor:
    """Phase 2: draw ``n`` tokens, the first from the prefill's ``logits``, each fed back for the next.

    Returns ``tokens`` [B, t + n]. The last token drawn is returned, never fed: n new tokens take
    n - 1 decode passes.
    """
    for step in range(n):
        next_token = run.sample(logits)  # [B, 1]
        tokens = torch.cat([tokens, next_token], dim=1)  # [B, t + 1]
        if step < n - 1:
            logits = decode_one_token(run, tokens, next_token)
    return tokens


@torch.no_grad()
def generate(model, input_ids, max_new_tokens, *, cache="kv", temperature=0.0, seed=None, top_k=None,
             prefill_chunk_size=None, return_logits=False) -> GenerationResult:
    """Generate ``max_new_tokens`` tokens after ``input_ids`` with the chosen cache mode.

    cache: a name in ``CACHE_MODES`` (:mod:`kvlab.cache_modes`: "kv" preallocated, "none" re-run the whole
    sequence each step, "k_only" K cached and V recomputed, "dynamic" grow by concatenation, "int8" int8 K/V
    with per-vector scales, "fp16" K/V stored in fp16 whatever the model computes in), or a cache object to
    use as it is (it is not reset: what it already holds comes first). "paged" keeps K/V in blocks of a
    shared pool (:class:`~kvlab.paged_cache.PagedKVCache`; pass one built with ``share_prefixes=True`` to let
    prompts that start alike share their first blocks, :class:`~kvlab.paged_cache.PromptSharing`).
    Prompts of unequal length are left-padded and masked (a paged cache needs no padding: each row is fed
    and stored at its own positions; the returned ``tokens`` are still left-padded to one width); each
    row's new tokens are those of running that prompt alone. ``prefill_chunk_size`` feeds a long prompt to a
    cache in chunks (same result as one pass); without a cache there is nothing to carry between chunks, so
    the prompt is processed in one pass. Every argument is checked here, once.
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
    ids, pad = as_token_batch(input_ids)
    ids = model.check_ids(ids)  # [B, P]
    B, prompt_len = ids.shape
    total = prompt_len + max_new_tokens
    limit = model.config.max_seq_len
    if total > limit:
        raise ValueError(
            f"max_new_tokens: prompt ({prompt_len}) + max_new_tokens ({max_new_tokens}) = {total} passes the "
            f"model's max_seq_len ({limit})"
        )
    pad = model.check_pad(pad, B)
    chunk = prompt_len if prefill_chunk_size is None else positive_int("prefill_chunk_size", prefill_chunk_size)
    stored = stored_tokens(prompt_len, max_new_tokens)  # the last new token is returned, never fed back
    if isinstance(cache, BaseCache):
        kv, mode = cache, type(cache).__name__
        model.check_cache(kv, B)
        if kv.length + stored > kv.max_seq_len:
            raise ValueError(f"cache: holds {kv.length} of {kv.max_seq_len} tokens; {stored} more do not fit")
    else:
        kv, mode = make_cache(model, cache, B, stored), cache
    paged = isinstance(kv, PagedKVCache)  # every row at its own position: no padding in the passes
    run = Decoding(model, kv, None if paged else pad, temperature, top_k, torch.Generator().manual_seed(seed),
                   start=kv.length if kv is not None else 0, drawn_from=[] if return_logits else None)
    if kv is None:
        chunk = prompt_len  # nothing carries between chunks: one pass

    if paged:
        logits = prefill_paged(run, [row[p:].tolist() for row, p in zip(ids, run_pads(pad, B))], chunk)
    else:
        logits = prefill(run, ids, chunk)
    tokens = decode_n_tokens(run, ids, logits, max_new_tokens)
    return GenerationResult(
        tokens=tokens.cpu(), trace=run.trace, prompt_len=prompt_len, cache_mode=mode,
        pad_lengths=run_pads(pad, B),
        logits=torch.stack([x.float().cpu() for x in run.drawn_from], dim=1) if return_logits else None, cache=kv,
    )
