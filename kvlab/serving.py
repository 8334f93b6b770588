"""Serving many requests with one model over a paged cache: static and continuous batching.

Requests arrive on a **step clock**: request r arrives at step ``r.arrival`` of the engine's loop
(one step = the prefill passes of the requests admitted in it, then one decode pass over the
running ones). The schedule is therefore the same on every machine; only the seconds each step
takes are measured. Both policies share one :class:`~kvlab.paged_cache.BlockPool` and the same
passes; they differ only in who may join the batch and when:

* ``"static"``: when the batch is empty, take the waiting requests (oldest first, up to
  ``max_batch``) whose blocks fit to completion; nobody joins until every one of them is done.
* ``"continuous"``: at every step boundary, finished requests leave and return their blocks, and
  waiting requests join (oldest first, no overtaking) while the batch has room and the pool has
  blocks for the request's tokens and its next one. A decode pass that finds too few free blocks
  **preempts** the youngest running request (its blocks are returned; it waits again, keeping its
  tokens, and is prefilled again when readmitted: vLLM's preemption by recomputation) instead of
  failing. The oldest running request is never preempted, so every request finishes (no starvation).

Every request is greedy: its tokens are those of generating it alone (tests check this).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import torch

from ._validate import non_negative_int, number_in, one_of, positive_int, seed_value, token_ids
from .measure import median, timed
from .memory import stored_tokens
from .model import ToyTransformer
from .paged_cache import DEFAULT_BLOCK_SIZE, BlockPool, BlockTable, PagedKVCache
from .paging import blocks_for

POLICIES = ("static", "continuous")
MAX_REQUESTS = 256  # a workload's size bound: its time is at most this many generations of the model's context
MAX_MEAN_GAP = 1e6  # steps between arrivals on average, at most (past ~1e16, 1 - 1/(1 + gap) rounds to 1: no draw)
MAX_MEDIAN = 10**6  # tokens: a median prompt or answer length, at most (far past any context; lengths are clipped)
MAX_SIGMA = 10.0  # a log-normal length's spread at most: exp(log(median) + sigma * z) stays a float


@dataclass(frozen=True)
class Request:
    """One request: its id, the step it arrives at, its prompt's token ids and how many tokens it wants."""

    rid: int
    arrival: int
    prompt: tuple[int, ...]
    max_new_tokens: int

    @property
    def peak_tokens(self) -> int:
        """Tokens it holds in the cache at its longest: the last new token is never fed back."""
        return stored_tokens(len(self.prompt), self.max_new_tokens)


@dataclass(frozen=True)
class Workload:
    """A seeded mix of requests (made up, not measured traffic): prompt and answer lengths log-normal
    around their medians, gaps between arrivals geometric with mean ``mean_gap`` steps (arrivals at
    random steps, ``mean_gap`` apart on average). Prompts are slices of a text's token ids."""

    count: int = 24
    mean_gap: float = 2.0
    prompt_median: int = 24
    prompt_sigma: float = 0.6
    new_median: int = 24
    new_sigma: float = 0.6
    seed: int = 0

    def __post_init__(self):
        """Every field checked once, here: a ValueError names it and the values it accepts."""
        checked = {"count": number_in("count", self.count, 1, MAX_REQUESTS, whole=True),
                   "mean_gap": number_in("mean_gap", self.mean_gap, 0.0, MAX_MEAN_GAP),
                   "prompt_median": number_in("prompt_median", self.prompt_median, 1, MAX_MEDIAN, whole=True),
                   "prompt_sigma": number_in("prompt_sigma", self.prompt_sigma, 0.0, MAX_SIGMA),
                   "new_median": number_in("new_median", self.new_median, 1, MAX_MEDIAN, whole=True),
                   "new_sigma": number_in("new_sigma", self.new_sigma, 0.0, MAX_SIGMA),
                   "seed": seed_value("seed", self.seed)}
        for name, value in checked.items():
            object.__setattr__(self, name, value)  # frozen: plain ints and floats from here on

    def requests(self, text_ids, context: int) -> list[Request]:
        """``count`` requests whose prompt + answer fit in ``context`` tokens; the same ones for the same seed."""
        context = positive_int("context", context)
        ids = list(text_ids)
        if len(ids) < 2:
            raise ValueError("text_ids: need a text of at least 2 tokens to cut prompts from")
        rng = random.Random(self.seed)
        out, clock = [], 0
        for rid in range(self.count):
            if rid:
                clock += _geometric(rng, self.mean_gap)
            p = _lognormal(rng, self.prompt_median, self.prompt_sigma, 1, min(len(ids), context - 1))
            n = _lognormal(rng, self.new_median, self.new_sigma, 1, context - p)
            start = rng.randrange(len(ids) - p + 1)
            out.append(Request(rid, clock, tuple(ids[start:start + p]), n))
        return out


def _lognormal(rng: random.Random, med: float, sigma: float, low: int, high: int) -> int:
    return min(high, max(low, round(rng.lognormvariate(math.log(med), sigma))))


def _geometric(rng: random.Random, mean: float) -> int:
    """Steps until the next arrival: 0, 1, 2, ... with mean ``mean`` in [0, MAX_MEAN_GAP] (0 = same step)."""
    p = 1 / (1 + mean)
    if p == 1:  # mean 0, or too small to tell from 0
        return 0
    return int(math.log(1 - rng.random()) / math.log(1 - p))


@dataclass
class Sequence:
    """A request in the engine: its block table and every token so far (prompt, then generated)."""

    request: Request
    table: BlockTable = field(default_factory=BlockTable)
    tokens: list[int] = field(default_factory=list)
    generated: int = 0
    ready: bool = False  # prefilled: its next pass is a decode
    admitted: int | None = None  # step of its (last) admission
    first_token: int | None = None  # step that produced its first token
    finished: int | None = None
    preemptions: int = 0

    @property
    def order(self) -> tuple[int, int]:
        return self.request.arrival, self.request.rid

    @property
    def done(self) -> bool:
        return self.generated >= self.request.max_new_tokens


@dataclass
class StepRecord:
    """What one step of the engine did, and the state after it."""

    step: int  # the step clock
    start_seconds: float  # busy seconds before this step (idle waits cost none)
    seconds: float  # wall time of this step's passes (device-synchronised)
    prefilled: list[int]  # rids prefilled in this step (admitted, or readmitted after a preemption)
    decoded: list[int]  # rids that decoded one token
    finished: list[int]
    preempted: list[int]
    arrived: list[int]
    running: list[int]  # after the step
    waiting: list[int]
    blocks_in_use: int
    tables: dict[int, list[int]]  # rid -> its blocks, after the step
    lengths: dict[int, int]  # rid -> tokens in its blocks
    free: list[int]  # free blocks, the next to be handed out first

    @property
    def new_tokens(self) -> int:
        return len(self.prefilled) + len(self.decoded)


@dataclass
class RequestOutcome:
    """One request's life on the step clock and in measured seconds."""

    request: Request
    tokens: list[int]  # the new tokens it generated
    admitted: int  # step of its first admission
    first_token: int
    finished: int
    preemptions: int
    arrival_seconds: float
    first_token_seconds: float
    finish_seconds: float

    @property
    def ttft_seconds(self) -> float:
        """Time to first token: from the start of its arrival step to the end of the step of its first token."""
        return self.first_token_seconds - self.arrival_seconds

    @property
    def ttft_steps(self) -> int:
        return self.first_token - self.request.arrival + 1

    @property
    def waited_steps(self) -> int:
        return self.admitted - self.request.arrival


@dataclass
class ServeRun:
    """A workload served under one policy: every step and every request, measured."""

    policy: str
    max_batch: int
    block_size: int
    num_blocks: int
    device: str
    steps: list[StepRecord]
    outcomes: list[RequestOutcome]  # in request order
    peak_blocks: int
    copies: int

    @property
    def total_seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    @property
    def new_tokens(self) -> int:
        return sum(len(o.tokens) for o in self.outcomes)

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.total_seconds if self.total_seconds > 0 else float("nan")

    @property
    def ttfts(self) -> list[float]:
        return [o.ttft_seconds for o in self.outcomes]

    @property
    def ttft_mean(self) -> float:
        return sum(self.ttfts) / len(self.ttfts)

    def ttft_quantile(self, q: float = 0.9) -> float:
        return quantile(self.ttfts, q)

    @property
    def ttft_steps_mean(self) -> float:
        return sum(o.ttft_steps for o in self.outcomes) / len(self.outcomes)

    @property
    def preemptions(self) -> int:
        return sum(o.preemptions for o in self.outcomes)

    @property
    def mean_batch(self) -> float:
        """Sequences per decode pass, on average over the steps that decoded."""
        sizes = [len(s.decoded) for s in self.steps if s.decoded]
        return sum(sizes) / len(sizes) if sizes else 0.0

    @property
    def median_step_seconds(self) -> float:
        return median([s.seconds for s in self.steps])


def quantile(values, q: float) -> float:
    """The ``q`` quantile (linear between order statistics; nan when empty)."""
    s = sorted(values)
    if not s:
        return float("nan")
    x = q * (len(s) - 1)
    lo = math.floor(x)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (x - lo)


def default_pool_blocks(requests: list[Request], max_batch: int, block_size: int) -> int:
    """Enough blocks for the ``max_batch`` longest requests at their longest (no preemption needed)."""
    need = sorted((blocks_for(r.peak_tokens, block_size) for r in requests), reverse=True)
    return max(1, sum(need[:max_batch]))


def check_requests(requests, model: ToyTransformer) -> list[Request]:
    """``requests`` as a list ordered by (arrival, rid), each fitting the model (prompts checked as ``generate``
    checks its own)."""
    if not isinstance(requests, (list, tuple)) or not requests:
        raise ValueError("requests must be a non-empty list of Request")
    if len(requests) > MAX_REQUESTS:
        raise ValueError(f"requests: at most {MAX_REQUESTS} requests, got {len(requests)}")
    seen = set()
    for r in requests:
        if not isinstance(r, Request):
            raise ValueError(f"requests must hold Request objects, got {type(r).__name__}")
        if r.rid in seen:
            raise ValueError(f"requests: rid {r.rid} appears twice")
        seen.add(r.rid)
        non_negative_int(f"requests: request {r.rid}'s arrival", r.arrival)
        positive_int(f"requests: request {r.rid}'s max_new_tokens", r.max_new_tokens)
        prompt = f"requests: request {r.rid}'s prompt"
        model.check_ids(torch.tensor([token_ids(prompt, r.prompt)]), name=prompt)  # generate's two checks
        if r.peak_tokens > model.config.max_seq_len:
            raise ValueError(f"requests: request {r.rid} needs {r.peak_tokens} tokens, past the model's "
                             f"max_seq_len ({model.config.max_seq_len})")
    return sorted(requests, key=lambda r: (r.arrival, r.rid))


def check_pool(requests: list[Request], num_blocks, block_size: int) -> int:
    """``num_blocks`` as an ``int`` if each of the (checked) ``requests`` alone fits a pool of that many blocks."""
    num_blocks = positive_int("num_blocks", num_blocks)
    for r in requests:
        need = blocks_for(r.peak_tokens, block_size)
        if need > num_blocks:
            raise ValueError(f"num_blocks: request {r.rid} alone needs {need} blocks of {block_size} tokens, "
                             f"but the pool has {num_blocks}")
    return num_blocks


class Engine:
    """The step loop of one policy over one pool. :func:`serve` runs it and returns a :class:`ServeRun`."""

    def __init__(self, model: ToyTransformer, requests: list[Request], policy: str, max_batch: int,
                 pool: BlockPool):
        self.model, self.policy, self.max_batch, self.pool = model, policy, max_batch, pool
        self.pending = list(requests)  # not arrived yet, by arrival
        self.waiting: list[Sequence] = []  # arrived, not running, by (arrival, rid)
        self.running: list[Sequence] = []  # by admission
        self.done: list[Sequence] = []
        self.steps: list[StepRecord] = []
        self.clock = 0
        self.busy = 0.0

    # -- the loop -------------------------------------------------------------
    def run(self) -> None:
        # Every busy step gives the oldest running request a token (it is never preempted), so the loop
        # ends within sum(max_new_tokens) busy steps; more would be a bug, not a slow machine.
        limit = sum(r.max_new_tokens for r in self.pending)
        while self.pending or self.waiting or self.running:
            if len(self.steps) > limit:
                raise RuntimeError(f"engine: {len(self.steps)} steps for {limit} tokens; the scheduler is stuck")
            arrived = self._arrivals()
            if not self.running and not self.waiting:
                self.clock = self.pending[0].arrival  # idle until the next arrival: no time passes
                continue
            self._step(arrived)
            self.clock += 1

    def _arrivals(self) -> list[int]:
        arrived = []
        while self.pending and self.pending[0].arrival <= self.clock:
            r = self.pending.pop(0)
            self.waiting.append(Sequence(r, tokens=list(r.prompt)))
            arrived.append(r.rid)
        self.waiting.sort(key=lambda s: s.order)
        return arrived

    def _step(self, arrived: list[int]) -> None:
        admitted = self._admit()
        preempted = self._make_room() if self.policy == "continuous" else []
        decoding = [s for s in self.running if s.ready]
        _, seconds = timed(lambda: self._passes(admitted, decoding), self.model.device)
        finished = [s for s in self.running if s.done]
        for s in finished:
            s.finished = self.clock
            self.pool.release(s.table.blocks)
            s.table.blocks, s.table.length = [], 0
            self.running.remove(s)
            self.done.append(s)
        self.steps.append(self._record(seconds, admitted, decoding, finished, preempted, arrived))
        self.busy += seconds

    # -- scheduling -------------------------------------------------------------
    def _admit(self) -> list[Sequence]:
        if self.policy == "static":
            if self.running:
                return []
            take, blocks = [], 0
            for s in self.waiting[:self.max_batch]:
                need = blocks_for(s.request.peak_tokens, self.pool.block_size)
                if blocks + need > self.pool.num_blocks:
                    break
                take.append(s)
                blocks += need
        else:
            take, free = [], self.pool.num_free - self._decode_need()
            for s in self.waiting:
                if len(self.running) + len(take) >= self.max_batch:
                    break
                need = blocks_for(min(len(s.tokens) + 1, s.request.peak_tokens), self.pool.block_size)
                if need > free:
                    break  # no overtaking: the oldest waiting request goes first
                take.append(s)
                free -= need
        for s in take:
            self.waiting.remove(s)
            s.admitted = self.clock if s.admitted is None else s.admitted
            self.running.append(s)
        return take

    def _decode_need(self) -> int:
        """Free blocks the next decode pass of the prefilled running requests takes."""
        ready = [s.table for s in self.running if s.ready]
        return PagedKVCache.over(self.pool, ready).blocks_needed(1) if ready else 0

    def _make_room(self) -> list[int]:
        """Preempt the youngest running requests until the decode pass's blocks are free."""
        preempted = []
        while True:
            fresh = [s for s in self.running if not s.ready]
            need = self._decode_need() + sum(blocks_for(len(s.tokens), self.pool.block_size) for s in fresh)
            if need <= self.pool.num_free or len(self.running) == 1:
                return preempted
            victim = max(self.running, key=lambda s: s.order)
            self._preempt(victim)
            preempted.append(victim.request.rid)

    def _preempt(self, s: Sequence) -> None:
        self.pool.release(s.table.blocks)
        s.table.blocks, s.table.length = [], 0
        s.ready = False
        s.preemptions += 1
        self.running.remove(s)
        self.waiting.append(s)
        self.waiting.sort(key=lambda x: x.order)

    # -- the model's passes -----------------------------------------------------
    @torch.no_grad()
    def _passes(self, admitted: list[Sequence], decoding: list[Sequence]) -> None:
        device = self.model.device
        for s in admitted:  # each prompt (with any tokens generated before a preemption) in its own pass
            if s not in self.running:
                continue  # preempted in this very step, before its prefill
            ids = torch.tensor([s.tokens], dtype=torch.long, device=device)  # [1, n]
            logits = self.model(ids, PagedKVCache.over(self.pool, [s.table]), last_logits_only=True)[:, -1]
            self._emit(s, logits[0])
            s.ready = True
        if decoding:
            ids = torch.tensor([[s.tokens[-1]] for s in decoding], dtype=torch.long, device=device)  # [B, 1]
            logits = self.model(ids, PagedKVCache.over(self.pool, [s.table for s in decoding]),
                                last_logits_only=True)[:, -1]
            for s, row in zip(decoding, logits):
                self._emit(s, row)

    def _emit(self, s: Sequence, logits: torch.Tensor) -> None:
        s.tokens.append(int(logits.argmax()))
        s.generated += 1
        if s.first_token is None:
            s.first_token = self.clock

    def _record(self, seconds, admitted, decoding, finished, preempted, arrived) -> StepRecord:
        alive = self.running
        return StepRecord(
            step=self.clock, start_seconds=self.busy, seconds=seconds,
            prefilled=[s.request.rid for s in admitted if s.ready or s.done],
            decoded=[s.request.rid for s in decoding], finished=[s.request.rid for s in finished],
            preempted=preempted, arrived=arrived,
            running=[s.request.rid for s in alive], waiting=[s.request.rid for s in self.waiting],
            blocks_in_use=self.pool.in_use,
            tables={s.request.rid: list(s.table.blocks) for s in alive},
            lengths={s.request.rid: s.table.length for s in alive},
            free=self.pool.free[::-1],
        )


def serve(model: ToyTransformer, requests, policy: str = "continuous", *, max_batch: int = 8,
          num_blocks: int | None = None, block_size: int = DEFAULT_BLOCK_SIZE) -> ServeRun:
    """Serve ``requests`` (greedy) under ``policy`` with one paged pool; every step timed on the model's device.

    ``num_blocks`` defaults to :func:`default_pool_blocks` (no preemption needed); a smaller pool makes
    continuous batching preempt. Time and memory are bounded by the requests: at most
    ``sum(max_new_tokens)`` steps, each at most ``max_batch`` sequences of ``max_seq_len`` tokens.
    """
    if not isinstance(model, ToyTransformer):
        raise ValueError(f"model must be a kvlab ToyTransformer, got {type(model).__name__}")
    one_of("policy", policy, POLICIES)
    max_batch = positive_int("max_batch", max_batch, maximum=MAX_REQUESTS)
    block_size = positive_int("block_size", block_size, maximum=model.config.max_seq_len)
    ordered = check_requests(requests, model)
    if num_blocks is None:
        num_blocks = default_pool_blocks(ordered, max_batch, block_size)
    num_blocks = check_pool(ordered, num_blocks, block_size)
    pool = BlockPool(model.config, num_blocks, block_size, model.dtype, model.device, name=f"{policy} pool")
    engine = Engine(model, ordered, policy, max_batch, pool)
    engine.run()
    return _result(engine, requests)


def _result(engine: Engine, requests) -> ServeRun:
    start = {s.step: s.start_seconds for s in engine.steps}
    end = {s.step: s.start_seconds + s.seconds for s in engine.steps}
    by_rid = {s.request.rid: s for s in engine.done}
    outcomes = []
    for r in requests:
        s = by_rid[r.rid]
        outcomes.append(RequestOutcome(
            request=r, tokens=s.tokens[len(r.prompt):], admitted=s.admitted, first_token=s.first_token,
            finished=s.finished, preemptions=s.preemptions, arrival_seconds=start[r.arrival],
            first_token_seconds=end[s.first_token], finish_seconds=end[s.finished]))
    p = engine.pool
    return ServeRun(engine.policy, engine.max_batch, p.block_size, p.num_blocks, str(engine.model.device),
                    engine.steps, outcomes, p.peak_in_use, p.copies)
