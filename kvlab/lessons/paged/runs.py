"""The chapter's requests and runs: the seeded workloads, the small run the block-table animation replays, and
the waste of three ways of holding the same running sequences (3.2's padding, 3.5's reservation, paging)."""
from __future__ import annotations

from dataclasses import dataclass

from ...assets import corpus_text
from ...generation import generate
from ...language import get_language
from ...measure import leave_a_core
from ...model import ToyTransformer
from ...paging import DEFAULT_BLOCK_SIZE, SCHEMES, paged_slots, reserved_fill, scheme_slots
from ...serving import Request, ServeRun, StepRecord, Workload, serve
from ...tokenizer import TOKENIZERS
from .phrases import PANELS, say

BLOCK_SIZE = DEFAULT_BLOCK_SIZE  # vLLM's default block size, for the chapter's main runs
MAX_BATCH = 8  # sequences a decode pass may hold at most
DEMO = Workload(count=24, mean_gap=2.0, prompt_median=24, new_median=24, seed=0)  # static vs continuous, waste
# The animation: few requests, small blocks and a pool too small for all of them at once, so that blocks are
# freed and reused and one running request finds no free block (it is preempted) within 30 steps.
ANIMATION = Workload(count=6, mean_gap=3.0, prompt_median=8, prompt_sigma=0.5, new_median=10, new_sigma=0.5, seed=7)
ANIMATION_BLOCK_SIZE, ANIMATION_BLOCKS, ANIMATION_BATCH = 4, 12, 4


def model_language(tokenizer) -> str:
    """The language of the demo model ``tokenizer`` belongs to (by its kind), else the course's language."""
    return next((lang for lang, kind in TOKENIZERS.items() if isinstance(tokenizer, kind)), None) or get_language()


def corpus_ids(tokenizer) -> list[int]:
    """The demo model's training text (in its language) as token ids: prompts are cut from it."""
    return tokenizer.encode(corpus_text(model_language(tokenizer)))


def demo_requests(model: ToyTransformer, tokenizer, workload: Workload = DEMO) -> list[Request]:
    return workload.requests(corpus_ids(tokenizer), model.config.max_seq_len)


@leave_a_core
def animation_run(model: ToyTransformer, tokenizer) -> ServeRun:
    """The run the block-table animation replays: continuous batching of :data:`ANIMATION` on a 12-block pool
    (without prefix sharing: a readmitted request prefills again, as the animation tells)."""
    requests = demo_requests(model, tokenizer, ANIMATION)
    return serve(model, requests, "continuous", max_batch=ANIMATION_BATCH, num_blocks=ANIMATION_BLOCKS,
                 block_size=ANIMATION_BLOCK_SIZE, share_prefixes=False)


@leave_a_core
def outputs_match_alone(model: ToyTransformer, run: ServeRun) -> bool:
    """Every request of ``run`` got the tokens it gets when generated alone (greedy): batching, paging and any
    preemption changed when its tokens were computed, never what they are."""
    return all(o.tokens == generate(model, [list(o.request.prompt)], o.request.max_new_tokens).new_tokens[0].tolist()
               for o in run.outcomes)


def reused_blocks(run: ServeRun) -> list[tuple[int, int, int, int]]:
    """(block, step, from rid, to rid): a block that a finished or preempted request gave back and another took."""
    out, last_owner = [], {}
    for s in run.steps:
        for rid, blocks in s.tables.items():
            for b in blocks:
                before = last_owner.get(b)
                if before is not None and before != rid:
                    out.append((b, s.step, before, rid))
                last_owner[b] = rid
    return out


def animation_readout(run: ServeRun, reused: list[tuple[int, int, int, int]], shown: int = 6) -> str:
    """The animated run in a few lines, in the course's language: its steps, requests and preemptions, and the
    first ``shown`` blocks another request took over (``reused``: :func:`reused_blocks`)."""
    where = say("preempted_sep").join(
        say("preempted_at", step=s.step, requests=say("request_sep").join(map(str, s.preempted)))
        for s in run.steps if s.preempted)
    lines = [say("animation", steps=len(run.steps), requests=len(run.outcomes), preemptions=run.preemptions,
                 where=where), say("reused_title", shown=shown)]
    lines += [say("reused", block=block, step=step, before=before, after=after)
              for block, step, before, after in reused[:shown]]
    return "\n".join(lines)


def request_names(rids) -> str:
    """「请求 0、请求 2」 (English: "request 0, request 2"), in the course's language."""
    return say("request_sep").join(PANELS.say("request", rid=r) for r in rids)


def step_events(s: StepRecord) -> list[str]:
    """What happened in one step, in the course's language, for the animation's readout."""
    out = []
    if s.arrived:
        out.append(PANELS.say("event.arrived", names=request_names(s.arrived)))
    if s.prefilled:
        out.append(PANELS.say("event.prefilled", names=request_names(s.prefilled)))
    if s.decoded:
        out.append(PANELS.say("event.decoded_one" if len(s.decoded) == 1 else "event.decoded", n=len(s.decoded)))
    if s.preempted:
        out.append(PANELS.say("event.preempted", names=request_names(s.preempted)))
    if s.finished:
        out.append(PANELS.say("event.finished", names=request_names(s.finished)))
    return out


# -- waste: the same running sequences, held three ways ----------------------------------------------------
@dataclass(frozen=True)
class WasteTimeline:
    """At every step of a run, the slots each scheme would hold for the running sequences, and the tokens in them.

    ``paged_measured``: slots of the blocks the run's pool really held (block_size each); ``slots['paging']`` is
    the same from :mod:`kvlab.paging` at ``block_size`` (equal at the run's own block size)."""

    steps: list[int]
    running: list[int]  # sequences running at each step
    used: list[int]  # tokens the running sequences hold
    slots: dict[str, list[int]]  # scheme -> slots it holds at each step
    paged_measured: list[int]
    block_size: int
    reserve: int
    cut: int  # requests longer than the reservation at their longest (3.5 would cut or refuse them)
    reserved_used: list[int]  # tokens inside the reservations: a request longer than its reservation fills it, no more

    def held(self, scheme: str) -> list[int]:
        """Tokens ``scheme``'s slots hold at each step: every token, except that a fixed reservation holds at most
        ``reserve`` of a request (what 3.5 would cut off or refuse is not in its slots)."""
        return self.reserved_used if scheme == "reservation" else self.used

    def waste_share(self, scheme: str) -> float:
        """Share of the slot-steps of ``scheme`` that hold no token, over the whole run (never negative: a reservation
        shorter than a request counts that request's reservation as full, review of the English 3.6: -540.7 %)."""
        return 1 - sum(self.held(scheme)) / sum(self.slots[scheme])

    @property
    def paging_tail_bounded(self) -> bool:
        """At every step paging leaves fewer than ``block_size`` empty slots per running sequence (only a sequence's
        last block can be part empty)."""
        return all(s - u < self.block_size * n or n == 0
                   for s, u, n in zip(self.slots["paging"], self.used, self.running))

    def peak(self, scheme: str) -> int:
        return max(self.slots[scheme])

    def mean(self, scheme: str) -> float:
        return sum(self.slots[scheme]) / len(self.steps)


def waste_timeline(run: ServeRun, block_size: int, reserve: int) -> WasteTimeline:
    """The running sequences of every step of ``run`` (their lengths as measured), held padded to the longest,
    in fixed reservations of ``reserve`` tokens, and in blocks of ``block_size``."""
    busy = [s for s in run.steps if s.running]
    lengths = [list(s.lengths.values()) for s in busy]
    slots = {scheme: [scheme_slots(scheme, ls, block_size, reserve) for ls in lengths] for scheme in SCHEMES}
    cut = sum(o.request.peak_tokens > reserve for o in run.outcomes)
    return WasteTimeline([s.step for s in busy], [len(ls) for ls in lengths], [sum(ls) for ls in lengths], slots,
                         [s.blocks_in_use * run.block_size for s in busy], block_size, reserve, cut,
                         [reserved_fill(ls, reserve) for ls in lengths])


def paged_is_measured(timeline: WasteTimeline, run: ServeRun) -> bool:
    """The pool's blocks at every step equal the block arithmetic at the run's block size (no sharing in a run)."""
    busy = [s for s in run.steps if s.running]
    return timeline.paged_measured == [paged_slots(list(s.lengths.values()), run.block_size) for s in busy]
