"""Chapter 3.6's self-check: predictions on a given schedule or pool, every numeric answer key computed by kvlab
(kvlab.paging's block arithmetic, kvlab.serving's scheduler, the gather the cost section measures)."""
from __future__ import annotations

from ...config import ModelConfig
from ...model import ToyTransformer
from ...paging import DEFAULT_BLOCK_SIZE, blocks_for, paged_slots, shared_prefix_blocks
from ...questions import Choice, ChoiceQuestion, NumberQuestion
from ...serving import Request, ServeRun, serve
from .cost import gather_bytes
from .phrases import REVIEW

QUIZ_LENGTHS = (37, 16, 90, 5)
QUIZ_BLOCK = DEFAULT_BLOCK_SIZE
QUIZ_SYSTEM, QUIZ_REQUESTS, QUIZ_OWN = 70, 5, 30
QUIZ_GROWN = 100  # a sequence grows from 1 token to this many
QUIZ_WHOLE_SYSTEM = 64  # a system prompt of whole blocks: shared, never written, never copied
# (arrival step, prompt tokens, new tokens) per request
QUIZ_WAIT, QUIZ_WAIT_BATCH = ((0, 4, 6), (0, 4, 2), (1, 4, 2)), 2
QUIZ_FULL, QUIZ_FULL_BATCH, QUIZ_FULL_BLOCKS, QUIZ_FULL_BLOCK = ((0, 4, 8), (0, 4, 8)), 2, 4, 4
# the gather of one paged decode step: a model's shape, K/V in float32, B sequences of L tokens writing one more
QUIZ_GATHER_MODEL = ModelConfig(vocab_size=64, d_model=128, n_layer=4, n_head=4, n_kv_head=2)
QUIZ_GATHER_B, QUIZ_GATHER_L, QUIZ_GATHER_BYTES = 4, 100, 4


def schedule(policy: str, plan, max_batch: int, num_blocks: int | None = None, block_size: int = 4) -> ServeRun:
    """``plan`` ((arrival step, prompt tokens, new tokens) per request) served by kvlab.serving under ``policy``. The
    step clock depends only on these lengths, never on the weights: a tiny random model serves it in milliseconds."""
    model = ToyTransformer(ModelConfig(vocab_size=16, d_model=16, n_layer=1, n_head=2, max_seq_len=64), seed=0).eval()
    requests = [Request(rid, arrival, tuple(range(1, prompt + 1)), new)
                for rid, (arrival, prompt, new) in enumerate(plan)]
    return serve(model, requests, policy, max_batch=max_batch, num_blocks=num_blocks, block_size=block_size,
                 share_prefixes=False)  # every prompt is 1, 2, 3, ...: the questions are about batching alone


def _plan_text(plan) -> str:
    return REVIEW.say("plan_sep").join(REVIEW.say("plan_item", rid=rid, arrival=arrival, prompt=prompt, new=new)
                                       for rid, (arrival, prompt, new) in enumerate(plan))


def _preemption(run: ServeRun) -> tuple[int, int, int]:
    """The first preemption: (its step, the request preempted, the step that prefilled it again)."""
    first = next(s for s in run.steps if s.preempted)
    victim = first.preempted[0]
    again = next(s.step for s in run.steps if s.step > first.step and victim in s.prefilled)
    return first.step, victim, again


def review_questions() -> list:
    """The self-check, in the course's language (asked when the quiz is made)."""
    C, say = Choice, REVIEW.say
    lengths, bs = QUIZ_LENGTHS, QUIZ_BLOCK
    blocks = sum(blocks_for(n, bs) for n in lengths)
    shared = shared_prefix_blocks(QUIZ_SYSTEM, [QUIZ_SYSTEM + QUIZ_OWN] * QUIZ_REQUESTS, bs)
    empty = {n: paged_slots([n], bs) - n for n in range(1, QUIZ_GROWN + 1)}  # empty slots at each length
    most = max(empty.values())
    whole = shared_prefix_blocks(QUIZ_WHOLE_SYSTEM, [QUIZ_WHOLE_SYSTEM + QUIZ_OWN] * QUIZ_REQUESTS, bs)
    static = schedule("static", QUIZ_WAIT, QUIZ_WAIT_BATCH)
    continuous = schedule("continuous", QUIZ_WAIT, QUIZ_WAIT_BATCH)
    full = schedule("continuous", QUIZ_FULL, QUIZ_FULL_BATCH, QUIZ_FULL_BLOCKS, QUIZ_FULL_BLOCK)
    preempted_at, victim, again = _preemption(full)
    written = QUIZ_FULL[0][1] + preempted_at - 1  # the position the decode pass of that step writes
    B, L, m = QUIZ_GATHER_B, QUIZ_GATHER_L, QUIZ_GATHER_MODEL
    gathered = gather_bytes(m, B, L, bs, QUIZ_GATHER_BYTES)
    read = blocks_for(L + 1, bs)  # blocks each sequence reads in that step
    sep = say("list_sep")
    system = dict(system=QUIZ_SYSTEM, requests=QUIZ_REQUESTS, own=QUIZ_OWN, block_size=bs)
    return [
        ChoiceQuestion("3.6", say("table_q"), (
            C(say("table_right"), True, say("table_right_why")),
            C(say("table_logical"), False, say("table_logical_why")),
            C(say("table_position"), False, say("table_position_why")),
            C(say("table_overflow"), False, say("table_overflow_why")))),
        NumberQuestion("3.6", say("count_q", n=len(lengths), lengths=sep.join(map(str, lengths)), block_size=bs),
                       blocks, say("unit.blocks"),
                       say("count_why", sum=" + ".join(f"⌈{n}/{bs}⌉" for n in lengths), blocks=blocks,
                           slots=paged_slots(lengths, bs), tokens=sum(lengths)),
                       say("count_hint")),
        NumberQuestion("3.6", say("tail_q", grown=QUIZ_GROWN, block_size=bs), most, say("unit.slots"),
                       say("tail_why", lengths=sep.join([str(n) for n, e in empty.items() if e == most][:6]),
                           block_size=bs, most=most),
                       say("tail_hint")),
        NumberQuestion("3.6", say("saved_q", **system), shared.saved, say("unit.blocks"),
                       say("saved_why", system=QUIZ_SYSTEM, block_size=bs, full=shared.full_shared_blocks,
                           others=QUIZ_REQUESTS - 1, saved=shared.saved, copies=shared.copies),
                       say("saved_hint")),
        NumberQuestion("3.6", say("copies_q", whole=QUIZ_WHOLE_SYSTEM, requests=QUIZ_REQUESTS, own=QUIZ_OWN,
                                  block_size=bs), whole.copies, say("unit.copies"),
                       say("copies_why", whole=QUIZ_WHOLE_SYSTEM, full=whole.full_shared_blocks, block_size=bs,
                           system=QUIZ_SYSTEM, others=QUIZ_REQUESTS - 1, copies=shared.copies),
                       say("copies_hint")),
        NumberQuestion("3.6", say("wait_q", batch=QUIZ_WAIT_BATCH, plan=_plan_text(QUIZ_WAIT)),
                       static.outcomes[2].ttft_steps, say("unit.steps"),
                       say("wait_why", static_end=static.outcomes[0].finished, static_first=static.outcomes[2].first_token,
                           static_ttft=static.outcomes[2].ttft_steps, cont_end=continuous.outcomes[1].finished,
                           cont_first=continuous.outcomes[2].first_token, cont_ttft=continuous.outcomes[2].ttft_steps),
                       say("wait_hint")),
        NumberQuestion("3.6", say("preempt_q", blocks=QUIZ_FULL_BLOCKS, block_size=QUIZ_FULL_BLOCK,
                                  batch=QUIZ_FULL_BATCH, plan=_plan_text(QUIZ_FULL)),
                       preempted_at, say("unit.step"),
                       say("preempt_why", step=preempted_at, position=written, block_size=QUIZ_FULL_BLOCK,
                           index=written // QUIZ_FULL_BLOCK, blocks=QUIZ_FULL_BLOCKS, victim=victim, again=again),
                       say("preempt_hint", block_size=QUIZ_FULL_BLOCK)),
        NumberQuestion("3.6", say("gather_q", layers=m.n_layer, kv_heads=m.n_kv_head, head_dim=m.head_dim,
                                  nbytes=QUIZ_GATHER_BYTES, batch=B, length=L, next=L + 1, block_size=bs),
                       gathered / 1024, "KiB",
                       say("gather_why", next=L + 1, block_size=bs, blocks=read, slots=read * bs, layers=m.n_layer,
                           batch=B, kv_heads=m.n_kv_head, head_dim=m.head_dim, nbytes=QUIZ_GATHER_BYTES,
                           bytes=gathered, kib=gathered / 1024),
                       say("gather_hint")),
    ]
