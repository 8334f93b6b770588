"""The scheduler: it only decides. Who arrives, who is admitted (static or continuous policy), who is preempted
(recomputation, as vLLM V1), which sequences the step prefills and decodes; the :class:`BlockManager` takes and
returns their blocks. It runs no model (the runner does) and times nothing."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..paged_cache import BlockTable
from ..paging import count_blocks
from .block_manager import BlockManager
from .workload import Request

POLICIES = ("static", "continuous")


@dataclass
class Sequence:
    """A request in the engine: its block table and every token so far (prompt, then generated)."""

    request: Request
    table: BlockTable = field(default_factory=BlockTable)
    tokens: list[int] = field(default_factory=list)
    generated: int = 0
    ready: bool = False  # prefilled: its next pass is a decode
    admitted: int | None = None  # step of its first admission
    first_token: int | None = None  # step that produced its first token
    finished: int | None = None
    preemptions: int = 0
    cached_tokens: int = 0  # tokens found in shared blocks at its admissions (never fed)
    prefill_tokens: int = 0  # tokens its prefill passes fed

    @property
    def order(self) -> tuple[int, int]:
        return self.request.arrival, self.request.rid

    @property
    def done(self) -> bool:
        return self.generated >= self.request.max_new_tokens


@dataclass
class StepPlan:
    """What one step runs: sequences to prefill (their blocks taken) and to decode (room for one token taken)."""

    admitted: list[Sequence]  # admitted in this step (one may be preempted before its prefill)
    prefill: list[Sequence]
    decode: list[Sequence]
    preempted: list[int]


class Scheduler:
    """The step loop's decisions for one policy; the block manager holds the blocks."""

    def __init__(self, requests: list[Request], policy: str, max_batch: int, blocks: BlockManager):
        self.policy, self.max_batch, self.blocks = policy, max_batch, blocks
        self.pending = list(requests)  # not arrived yet, by arrival
        self.waiting: list[Sequence] = []  # arrived, not running, by (arrival, rid)
        self.running: list[Sequence] = []  # by admission
        self.done: list[Sequence] = []

    @property
    def has_work(self) -> bool:
        return bool(self.pending or self.waiting or self.running)

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting

    def arrive(self, clock: int) -> list[int]:
        arrived = []
        while self.pending and self.pending[0].arrival <= clock:
            r = self.pending.pop(0)
            self.waiting.append(Sequence(r, tokens=list(r.prompt)))
            arrived.append(r.rid)
        self.waiting.sort(key=lambda s: s.order)
        return arrived

    def schedule(self, clock: int) -> StepPlan:
        """Admit, preempt (continuous), then take the blocks this step's passes write into."""
        admitted = self._admit(clock)
        preempted = self._make_room() if self.policy == "continuous" else []
        running = {id(s) for s in self.running}
        prefill = [s for s in admitted if id(s) in running]  # not preempted in this very step
        for s in prefill:
            matched = self.blocks.allocate(s.table, s.tokens)
            s.cached_tokens += matched
            s.prefill_tokens += len(s.tokens) - matched
        decode = [s for s in self.running if s.ready]
        for s in decode:
            self.blocks.append(s.table)
        return StepPlan(admitted, prefill, decode, preempted)

    def finish_step(self, plan: StepPlan, tokens: list[int], clock: int) -> list[Sequence]:
        """Give each sequence that ran its new token (prefills first, as run), register the blocks the passes
        filled, and let the finished sequences go (their blocks return). Returns the finished ones."""
        for s, token in zip(plan.prefill + plan.decode, tokens):
            s.tokens.append(token)
            s.generated += 1
            s.ready = True
            s.first_token = clock if s.first_token is None else s.first_token
            self.blocks.register(s.table, s.tokens)
        finished = [s for s in self.running if s.done]
        for s in finished:
            s.finished = clock
            self.blocks.free(s.table)
            self.running.remove(s)
            self.done.append(s)
        return finished

    # -- admission ----------------------------------------------------------------------------------------------
    def _admit(self, clock: int) -> list[Sequence]:
        take = self._static_batch() if self.policy == "static" else self._continuous_joiners()
        for s in take:
            self.waiting.remove(s)
            s.admitted = clock if s.admitted is None else s.admitted
            self.running.append(s)
        return take

    def _static_batch(self) -> list[Sequence]:
        """When the batch is empty: the oldest waiting requests (up to ``max_batch``) whose blocks fit to the end."""
        if self.running:
            return []
        take, blocks, bs = [], 0, self.blocks.block_size
        for s in self.waiting[:self.max_batch]:
            need = count_blocks(s.request.peak_tokens, bs)
            if blocks + need > self.blocks.pool.num_blocks:
                break
            take.append(s)
            blocks += need
        return take

    def _continuous_joiners(self) -> list[Sequence]:
        """Oldest first, no overtaking, while the batch has room and the pool has blocks for a request's tokens
        and its next one (after the blocks the running requests' next decode takes)."""
        take, spare = [], self._decode_need()
        for s in self.waiting:
            if len(self.running) + len(take) >= self.max_batch:
                break
            n = min(len(s.tokens) + 1, s.request.peak_tokens)
            if not self.blocks.can_allocate(s.tokens, n, spare):
                break
            take.append(s)
            spare += self.blocks.blocks_to_allocate(s.tokens, n)
        return take

    # -- preemption ---------------------------------------------------------------------------------------------
    def _decode_need(self) -> int:
        return self.blocks.append_need([s.table for s in self.running if s.ready])

    def _make_room(self) -> list[int]:
        """Preempt the youngest running requests until this step's prefills and decodes fit the free blocks; the
        oldest is never preempted (every request finishes)."""
        preempted = []
        while True:
            fresh = [s for s in self.running if not s.ready]
            need = self._decode_need() + sum(self.blocks.blocks_to_allocate(s.tokens, len(s.tokens)) for s in fresh)
            if need <= self.blocks.pool.num_free or len(self.running) == 1:
                return preempted
            victim = max(self.running, key=lambda s: s.order)
            self._preempt(victim)
            preempted.append(victim.request.rid)

    def _preempt(self, s: Sequence) -> None:
        """Recomputation: its blocks go back, it keeps its tokens and waits to be prefilled again."""
        self.blocks.free(s.table)
        s.ready = False
        s.preemptions += 1
        self.running.remove(s)
        self.waiting.append(s)
        self.waiting.sort(key=lambda x: x.order)
