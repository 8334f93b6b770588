"""Serving many requests with one model over a paged cache: static and continuous batching, prefix sharing.

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

With ``share_prefixes`` (the default, as in vLLM V1), a request whose first full blocks hold the same tokens as
blocks an earlier pass wrote holds those blocks instead of prefilling them (:mod:`.block_manager`).
Every request is greedy: its tokens are those of generating it alone (tests check this).

The engine is split as in nano-vllm: :mod:`.block_manager` (blocks), :mod:`.scheduler` (decisions only),
:mod:`.runner` (the unchecked, timed passes), :mod:`.recorder` (what the animation replays); :mod:`.workload`
holds the requests and the checks they pass once, on entry.
"""
from __future__ import annotations

from ..measure import timed
from ..model import ToyTransformer
from ..paged_cache import BlockPool
from ..paging import DEFAULT_BLOCK_SIZE
from .._validate import one_of, positive_int
from .block_manager import BlockManager
from .recorder import RequestOutcome, ServeRun, StepRecord, record_step, result
from .runner import Runner
from .scheduler import POLICIES, Scheduler, Sequence
from .workload import (MAX_MEAN_GAP, MAX_MEDIAN, MAX_REQUESTS, MAX_SIGMA, Request, Workload, check_pool,
                       check_requests, default_pool_blocks)


class Engine:
    """The step loop of one policy over one pool: the scheduler decides, the runner runs the timed passes, every
    step is recorded. :func:`serve` runs it and returns a :class:`ServeRun`."""

    def __init__(self, model: ToyTransformer, requests: list[Request], policy: str, max_batch: int,
                 pool: BlockPool, share_prefixes: bool = True):
        self.model, self.policy, self.max_batch, self.pool = model, policy, max_batch, pool
        self.share_prefixes = share_prefixes
        self.scheduler = Scheduler(requests, policy, max_batch, BlockManager(pool, share_prefixes))
        self.runner = Runner(model, pool)
        self.steps: list[StepRecord] = []
        self.clock = 0
        self.busy = 0.0

    def run(self) -> None:
        # Every busy step gives the oldest running request a token (it is never preempted), so the loop
        # ends within sum(max_new_tokens) busy steps; more would be a bug, not a slow machine.
        sched = self.scheduler
        limit = sum(r.max_new_tokens for r in sched.pending)
        while sched.has_work:
            if len(self.steps) > limit:
                raise RuntimeError(f"engine: {len(self.steps)} steps for {limit} tokens; the scheduler is stuck")
            arrived = sched.arrive(self.clock)
            if sched.idle:
                self.clock = sched.pending[0].arrival  # idle until the next arrival: no time passes
                continue
            self.step(arrived)
            self.clock += 1

    def step(self, arrived: list[int]) -> None:
        plan = self.scheduler.schedule(self.clock)
        passes = self.runner.prepare(plan)
        out, seconds = timed(lambda: self.runner.run(passes), self.model.device)
        finished = self.scheduler.finish_step(plan, self.runner.tokens(out), self.clock)
        self.steps.append(record_step(self.clock, self.busy, seconds, plan, finished, arrived, self.scheduler,
                                      self.pool))
        self.busy += seconds


def serve(model: ToyTransformer, requests, policy: str = "continuous", *, max_batch: int = 8,
          num_blocks: int | None = None, block_size: int = DEFAULT_BLOCK_SIZE,
          share_prefixes: bool = True) -> ServeRun:
    """Serve ``requests`` (greedy) under ``policy`` with one paged pool; every step timed on the model's device.

    ``num_blocks`` defaults to :func:`default_pool_blocks` (no preemption needed); a smaller pool makes
    continuous batching preempt. ``share_prefixes``: requests reuse the full blocks of a prefix an earlier pass
    wrote. Every argument and request is checked here, once. Time and memory are bounded by the requests: at most
    ``sum(max_new_tokens)`` steps, each at most ``max_batch`` sequences of ``max_seq_len`` tokens.
    """
    if not isinstance(model, ToyTransformer):
        raise ValueError(f"model must be a kvlab ToyTransformer, got {type(model).__name__}")
    one_of("policy", policy, POLICIES)
    max_batch = positive_int("max_batch", max_batch, maximum=MAX_REQUESTS)
    block_size = positive_int("block_size", block_size, maximum=model.config.max_seq_len)
    if not isinstance(share_prefixes, bool):
        raise ValueError(f"share_prefixes must be True or False, got {share_prefixes!r}")
    ordered = check_requests(requests, model)
    if num_blocks is None:
        num_blocks = default_pool_blocks(ordered, max_batch, block_size)
    num_blocks = check_pool(ordered, num_blocks, block_size)
    pool = BlockPool(model.config, num_blocks, block_size, model.dtype, model.device, name=f"{policy} pool")
    engine = Engine(model, ordered, policy, max_batch, pool, share_prefixes)
    engine.run()
    return result(policy, max_batch, model.device, engine.scheduler, engine.steps, requests, pool, share_prefixes)


__all__ = ["DEFAULT_BLOCK_SIZE", "Engine", "MAX_MEAN_GAP", "MAX_MEDIAN", "MAX_REQUESTS", "MAX_SIGMA", "POLICIES",
           "Request", "RequestOutcome", "ServeRun", "Sequence", "StepRecord", "Workload", "check_pool",
           "check_requests", "default_pool_blocks", "serve"]
