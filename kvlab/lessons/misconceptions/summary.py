"""Chapter 3.5's closing table: every claim of the chapter next to what this notebook measured for it."""
from __future__ import annotations

import html
import sys
from dataclasses import dataclass

from ..._validate import positive_int
from ...claims import Catalog, Chooser, Claim, Rule, in_language, number, show
from ...measure import DecodeTiming, time_generate
from ...memory import dtype_name, format_bytes, kv_cache_bytes
from ...model import ToyTransformer
from ...presets import MODEL_PRESETS
from ...stats import median
from .budget import DEFAULT_GPU, DEFAULT_MODEL, ReservationPlan, SPREADS, plan_reservation
from .common import corpus_prompts, leave_a_core
from . import k_only
from .k_only import (K_ONLY, KV_GAP, KV_SPEEDUP, tail_range, tail_step_ms,
                     tail_times_text)
from .lab import BUG_CARDS, BugRun, REFERENCE
from .phrases import PANELS
from .weights import CacheRun


@dataclass(frozen=True)
class PrefillDecode:
    """One generation with a cache: the prefill pass over the whole prompt against one decode step."""

    prompt_len: int
    prefill_seconds: float  # median over repeats
    decode_seconds: float  # median decode step
    decode_lens: tuple[int, int] = (0, 0)  # tokens per sequence after the first and the last decode step timed

    @property
    def prefill_per_token(self) -> float:
        return self.prefill_seconds / self.prompt_len


@leave_a_core
def prefill_vs_decode(model: ToyTransformer, tokenizer, prompt_len: int = 128, new_tokens: int = 9,
                      repeats: int = 3) -> PrefillDecode:
    """Time a prefill of ``prompt_len`` corpus tokens and the decode steps after it (chapter 3.3, quickly)."""
    prompt = corpus_prompts(tokenizer, prompt_len, 1)
    t = time_generate(model, prompt, positive_int("new_tokens", new_tokens), ("kv",), repeats=repeats)["kv"]
    return PrefillDecode(prompt_len, t.step_seconds[0], median(t.step_seconds[1:]), (t.seq_len[1], t.seq_len[-1]))


def _per_token_agrees(v) -> bool:
    """The printed time per token is the printed prefill time over the prompt's tokens, within their rounding."""
    return abs(v["per_token_ms"] - v["prefill_ms"] / v["prompt_len"]) <= 0.0005 + 0.005 / v["prompt_len"]


PREFILL = Chooser("misconceptions.prefill", (
    Rule("misconceptions.prefill.cheaper", ("prompt_len", "prefill_ms", "per_token_ms", "decode_ms"),
         lambda v: v["per_token_ms"] < v["decode_ms"] and _per_token_agrees(v)),
    Rule("misconceptions.prefill.unclear", ("prompt_len", "prefill_ms", "decode_ms"), substantive=False),
))


def explain_prefill(p: PrefillDecode) -> list[Claim]:
    """The summary's prefill against a decode step, as a claim (:data:`PREFILL`): per token, the prefill costs
    less than a decode step, said only when the printed numbers show it."""
    return [PREFILL.choose({"prompt_len": number(p.prompt_len, 0), "prefill_ms": number(p.prefill_seconds * 1e3, 2, "ms"),
                            "per_token_ms": number(p.prefill_per_token * 1e3, 3, "ms"),
                            "decode_ms": number(p.decode_seconds * 1e3, 2, "ms")})]


CHOOSERS = (K_ONLY, KV_SPEEDUP, KV_GAP, PREFILL)
TEMPLATES = {  # the prefill's sentences (Catalog.of_topics reads TEMPLATES for Chinese, TEMPLATES_EN for English)
    "misconceptions.prefill.cheaper": "预填充 {prompt_len} 个 token 一次前向 {prefill_ms}，平均每个 token {per_token_ms}，比一步"
                                      "解码（{decode_ms}）少：整段提示词在一次前向里成批处理，读一遍权重、调度一次的开销由 {prompt_len} 个 token 分摊。",
    "misconceptions.prefill.unclear": "预填充 {prompt_len} 个 token 一次前向 {prefill_ms}，一步解码 {decode_ms}：这一次的计时"
                                      "说不清平均每个 token 谁多谁少（多半是计时被别的程序打断了）；关掉别的占 CPU 的程序，"
                                      "再运行这一格。",
}
TEMPLATES_EN = {
    "misconceptions.prefill.cheaper": "One prefill pass over {prompt_len} tokens takes {prefill_ms}, {per_token_ms} per "
                                      "token on average, less than a decode step ({decode_ms}): the whole prompt goes "
                                      "through one forward pass as a batch, so reading the weights once and the "
                                      "dispatch overhead are shared by {prompt_len} tokens.",
    "misconceptions.prefill.unclear": "One prefill pass over {prompt_len} tokens takes {prefill_ms}, a decode step "
                                      "{decode_ms}: this timing cannot tell which costs more per token (most likely "
                                      "another program interrupted the timing); close other CPU-hungry programs and "
                                      "rerun this cell.",
}
TOPICS = (k_only, sys.modules[__name__])  # each holds its choosers' sentences: TEMPLATES (zh), TEMPLATES_EN, WORDS_EN
ZH = Catalog.of_topics("zh", TOPICS)
EN = Catalog.of_topics("en", TOPICS)
CATALOGS = {"zh": ZH, "en": EN}


def show_claims(claims: list[Claim]) -> None:
    """Display this chapter's claims in the course's language (``kvlab.set_language``), recorded in the output's
    metadata (``kvlab.claims.show``)."""
    show(claims, in_language(CATALOGS))


@dataclass(frozen=True)
class SummaryRow:
    topic: str
    measured: str  # what this notebook measured here (plain text)
    conclusion: str


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _lens(p: PrefillDecode) -> str:
    first, last = p.decode_lens
    return f"{first}–{last}" if first != last else f"{first}"


def chapter_rows(model: ToyTransformer, runs: list[CacheRun], timings: dict[str, DecodeTiming],
                 prefill: PrefillDecode, plan: ReservationPlan) -> list[SummaryRow]:
    """Sections 3.1-3.4, each in one line, from this notebook's own runs."""
    none, kv = tail_step_ms(timings["none"]), tail_step_ms(timings["kv"])
    held = timings["kv"].cache_bytes[-1]
    r, c = runs[-1], model.config
    element = r.per_token_bytes // (2 * c.n_layer * c.n_kv_head * c.head_dim)  # bytes per stored number
    shape = f"2 × {c.n_layer} × {r.batch_size} × {c.n_kv_head} × {r.stored_tokens} × {c.head_dim} × {element} B"
    formula = kv_cache_bytes(c.n_layer, c.n_kv_head, c.head_dim, r.stored_tokens, r.batch_size,
                             dtype_name(model.dtype))
    llama = MODEL_PRESETS["LLaMA-7B"]
    return [
        _row("3_1", tail=tail_range(timings), none=none, kv=kv, ratio=none / kv, held=format_bytes(held)),
        _row("3_2", L=c.n_layer, B=r.batch_size, H=c.n_kv_head, S=r.stored_tokens, D=c.head_dim, shape=shape,
             formula=formula, written=r.final_bytes),
        _row("3_3", prompt_len=prefill.prompt_len, prefill=_ms(prefill.prefill_seconds),
             per_token=prefill.prefill_per_token * 1e3, lens=_lens(prefill), decode=_ms(prefill.decode_seconds)),
        _row("3_4", llama=format_bytes(llama.kv_cache_bytes(2048)), gpu=plan.gpu, usable=float(plan.fit.usable),
             reserved=plan.reserved_tokens, capacity=plan.capacity),
    ]


def _row(key: str, **fields) -> SummaryRow:
    """A row of the summary table in the course's language: PANELS' ``summary.<key>`` (its topic), ``.measured``
    (filled with ``fields``) and ``.conclusion``."""
    return SummaryRow(PANELS.say(f"summary.{key}"), PANELS.say(f"summary.{key}.measured", **fields),
                      PANELS.say(f"summary.{key}.conclusion"))


def scenario_plans(model: str = DEFAULT_MODEL, gpu: str = DEFAULT_GPU) -> dict[str, ReservationPlan]:
    """Each request spread of :data:`SPREADS` on one card, every sequence reserved the model's whole context."""
    context = MODEL_PRESETS[model].context_length
    return {key: plan_reservation(model, gpu, context, 1, spread) for key, spread in SPREADS.items()}


def scenario_row(plans: dict[str, ReservationPlan]) -> SummaryRow:
    """The original text's 业务场景 (long-document QA, multi-turn chat) as one row: fixed vs paged."""
    first = next(iter(plans.values()))
    parts = PANELS.say("summary.part_sep").join(
        PANELS.say("summary.scenario_part", spread=p.spread.label, idle=1 - p.used_share, capacity=p.capacity,
                   paged=p.paged_capacity) for p in plans.values())
    return _row("scenarios", gpu=first.gpu, model=first.model.label, reserved=first.reserved_tokens, parts=parts)


def summary_rows(model: ToyTransformer, runs: list[CacheRun], timings: dict[str, DecodeTiming],
                 prefill: PrefillDecode, budget_plans: list[ReservationPlan], lab: dict[str, BugRun],
                 scenarios: dict[str, ReservationPlan]) -> list[SummaryRow]:
    """The chapter's claims next to what this notebook measured for them, from the results it already has."""
    say = PANELS.say
    checks = say("summary.check_sep").join(f"{r.batch_size} × {r.stored_tokens}" for r in runs)
    same = all(r.weights_unchanged for r in runs)
    exact = all(r.final_bytes == r.batch_size * r.stored_tokens * r.per_token_bytes for r in runs)
    v_last = {m: t.v_tokens[-1] for m, t in timings.items()}
    plans = say("summary.part_sep").join(
        say("summary.plan", reserved=p.reserved_tokens, capacity=p.capacity, idle=1 - p.used_share,
            too_long=p.too_long_share) for p in budget_plans)
    broken = {c: r for c, r in lab.items() if c != REFERENCE}
    steps = say("summary.step_sep").join(say("summary.step", label=BUG_CARDS[c].label, step=r.first_token_step)
                                         for c, r in broken.items())
    first = budget_plans[0]
    return chapter_rows(model, runs, timings, prefill, first) + [
        _row("m1", runs=len(runs), checks=checks, same=say("summary.all_same" if same else "summary.changed"),
             exact=say("summary.all_equal" if exact else "summary.not_equal"),
             per_token=format_bytes(runs[0].per_token_bytes), length=runs[-1].length_after_reset),
        _row("m2", times=tail_times_text(timings), none=v_last["none"], k_only=v_last["k_only"], kv=v_last["kv"]),
        _row("m3", gpu=first.gpu, model=first.model.label, usable=float(first.fit.usable), plans=plans),
        _row("lab", bugs=len(broken), prompt=lab[REFERENCE].prompt, steps=steps,
             control=say("summary.lab_same" if lab[REFERENCE].first_token_step is None else "summary.lab_differs")),
        scenario_row(scenarios),
    ]


def summary_html(rows: list[SummaryRow]) -> str:
    body = "".join(f"<tr><td>{html.escape(r.topic)}</td><td>{html.escape(r.measured)}</td>"
                   f"<td>{html.escape(r.conclusion)}</td></tr>" for r in rows)
    return PANELS.say("summary.head") + f"<tbody>{body}</tbody></table>"
