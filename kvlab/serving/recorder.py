"""What the engine did, step by step and request by request: the records the 3.6 animation and timelines read."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..measure import median
from ..paged_cache import BlockPool
from ..stats import percentile
from .scheduler import Scheduler, Sequence, StepPlan
from .workload import Request


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
    refs: dict[int, int] = field(default_factory=dict)  # block -> tables holding it, for every block in use

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
    cached_tokens: int = 0  # prompt tokens found in shared blocks (never fed)
    prefill_tokens: int = 0  # tokens its prefill passes fed (a preempted request's are fed again)

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
    share_prefixes: bool = False

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

    def ttft_percentile(self, q: float = 90) -> float:
        return percentile(self.ttfts, q)

    @property
    def prefill_tokens(self) -> int:
        """Tokens the prefill passes fed, all requests together."""
        return sum(o.prefill_tokens for o in self.outcomes)

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens the requests found in shared blocks instead of computing them."""
        return sum(o.cached_tokens for o in self.outcomes)

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


def record_step(clock: int, busy: float, seconds: float, plan: StepPlan, finished: list[Sequence],
                arrived: list[int], scheduler: Scheduler, pool: BlockPool) -> StepRecord:
    """The step just run and the state after it."""
    alive = scheduler.running
    return StepRecord(
        step=clock, start_seconds=busy, seconds=seconds,
        prefilled=[s.request.rid for s in plan.prefill], decoded=[s.request.rid for s in plan.decode],
        finished=[s.request.rid for s in finished], preempted=plan.preempted, arrived=arrived,
        running=[s.request.rid for s in alive], waiting=[s.request.rid for s in scheduler.waiting],
        blocks_in_use=pool.in_use,
        tables={s.request.rid: list(s.table.blocks) for s in alive},
        lengths={s.request.rid: s.table.length for s in alive},
        free=pool.free[::-1], refs={b: n for b, n in enumerate(pool.refs) if n},
    )


def result(policy: str, max_batch: int, model_device, scheduler: Scheduler, steps: list[StepRecord],
           requests, pool: BlockPool, share_prefixes: bool) -> ServeRun:
    """The run, its requests in the order given."""
    start = {s.step: s.start_seconds for s in steps}
    end = {s.step: s.start_seconds + s.seconds for s in steps}
    by_rid = {s.request.rid: s for s in scheduler.done}
    outcomes = []
    for r in requests:
        s = by_rid[r.rid]
        outcomes.append(RequestOutcome(
            request=r, tokens=s.tokens[len(r.prompt):], admitted=s.admitted, first_token=s.first_token,
            finished=s.finished, preemptions=s.preemptions, arrival_seconds=start[r.arrival],
            first_token_seconds=end[s.first_token], finish_seconds=end[s.finished],
            cached_tokens=s.cached_tokens, prefill_tokens=s.prefill_tokens))
    return ServeRun(policy, max_batch, pool.block_size, pool.num_blocks, str(model_device), steps, outcomes,
                    pool.peak_in_use, pool.copies, share_prefixes)
