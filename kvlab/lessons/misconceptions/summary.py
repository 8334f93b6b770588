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
        SummaryRow("3.1 自回归解码：空间换时间", f"最后 1/4 解码步（t = {tail_range(timings)}）的单步中位数：无缓存 {none:.2f} ms，有缓存 "
                   f"{kv:.2f} ms（不缓存是它的 {none / kv:.1f} 倍）；代价是缓存里存着的 {format_bytes(held)}",
                   "缓存旧 token 的 K/V，每步只算新 token：把重复计算变成增量计算"),
        SummaryRow("3.2 存储结构 L×B×H×S×D", f"演示模型的缓存（L, B, H, S, D）=（{c.n_layer}, {r.batch_size}, "
                   f"{c.n_kv_head}, {r.stored_tokens}, {c.head_dim}）：{shape} = {formula:,} B，trace 记录 "
                   f"{r.final_bytes:,} B", "缓存大小 = 2（K、V）× L × B × H × S × D × 每元素字节，随 B 和 S 线性增长"),
        SummaryRow("3.3 预填充与解码", f"预填充 {prefill.prompt_len} 个 token 一次前向 {_ms(prefill.prefill_seconds)}"
                   f"（每个 token {prefill.prefill_per_token * 1e3:.3f} ms）；"
                   f"之后每个解码步（t = {_lens(prefill)}）的中位数 "
                   f"{_ms(prefill.decode_seconds)}，只出 1 个 token。与 3.1 那一行的有缓存步长度不同，也不是同一次测量",
                   "预填充一次前向处理整段提示词；解码一步只出一个 token，每步都要读一遍权重和缓存"),
        SummaryRow("3.4 LLaMA-7B 的显存", f"S = 2048、B = 1、FP16：{format_bytes(llama.kv_cache_bytes(2048))}（原文写 "
                   f"0.50 GB）；{plan.gpu} 按 {float(plan.fit.usable):g} 规划，放下权重后每条预留 "
                   f"{plan.reserved_tokens:,} 个 token 的序列放得下 {plan.capacity} 条",
                   "先算权重，再按可用显存算能放下多少 token、多少条序列"),
    ]


def scenario_plans(model: str = DEFAULT_MODEL, gpu: str = DEFAULT_GPU) -> dict[str, ReservationPlan]:
    """Each request spread of :data:`SPREADS` on one card, every sequence reserved the model's whole context."""
    context = MODEL_PRESETS[model].context_length
    return {key: plan_reservation(model, gpu, context, 1, spread) for key, spread in SPREADS.items()}


def scenario_row(plans: dict[str, ReservationPlan]) -> SummaryRow:
    """The original text's 业务场景 (long-document QA, multi-turn chat) as one row: fixed vs paged."""
    first = next(iter(plans.values()))
    parts = "；".join(f"{p.spread.label}：闲置 {1 - p.used_share:.0%}，固定 {p.capacity} 条 vs 分页约 "
                     f"{p.paged_capacity:.1f} 条" for p in plans.values())
    return SummaryRow("业务场景", f"{first.gpu} + {first.model.label}，每条预留整个上下文 {first.reserved_tokens:,}：{parts}",
                      "请求越接近上下文长度（长文档问答），固定预留浪费越少、分页收益越小；请求长度相对预留越短、越分散"
                      "（单轮问答、多轮对话），分页省得越多")


def summary_rows(model: ToyTransformer, runs: list[CacheRun], timings: dict[str, DecodeTiming],
                 prefill: PrefillDecode, budget_plans: list[ReservationPlan], lab: dict[str, BugRun],
                 scenarios: dict[str, ReservationPlan]) -> list[SummaryRow]:
    """The chapter's claims next to what this notebook measured for them, from the results it already has."""
    checks = "、".join(f"{r.batch_size} × {r.stored_tokens}" for r in runs)
    same = all(r.weights_unchanged for r in runs)
    exact = all(r.final_bytes == r.batch_size * r.stored_tokens * r.per_token_bytes for r in runs)
    v_last = {m: t.v_tokens[-1] for m, t in timings.items()}
    plans = "；".join(f"预留 {p.reserved_tokens:,} → {p.capacity} 条，闲置 {1 - p.used_share:.0%}，"
                     f"{p.too_long_share:.1%} 的请求放不下" for p in budget_plans)
    broken = {c: r for c, r in lab.items() if c != REFERENCE}
    steps = "，".join(f"{BUG_CARDS[c].label} 第 {r.first_token_step} 步" for c, r in broken.items())
    first = budget_plans[0]
    return chapter_rows(model, runs, timings, prefill, first) + [
        SummaryRow("误区 1：缓存是参数", f"{len(runs)} 次生成（B × S = {checks}）：参数校验和{'全部不变' if same else '变了'}；"
                   f"缓存字节数{'全部等于' if exact else '不等于'} B × S × {format_bytes(runs[0].per_token_bytes)}；"
                   f"reset() 后 {runs[-1].length_after_reset} 个 token",
                   "缓存是推理时另外分配的临时张量，随输入增长；权重一个字节都不变"),
        SummaryRow("误区 2：只缓存 K", f"最后 1/4 解码步的单步耗时：{tail_times_text(timings)}；最后一步投影 V 的 token 数"
                   f"（无缓存 / 只缓存 K / 有缓存）{v_last['none']} / {v_last['k_only']} / {v_last['kv']}",
                   "V 必须和 K 一起缓存，否则每步仍要把整个前缀重算一遍"),
        SummaryRow("误区 3：缓存越大越好", f"{first.gpu} + {first.model.label}（FP16，按 {float(first.fit.usable):g} 规划）："
                   f"{plans}", "预留多少要看显存预算和请求长度的分布；按需分页（PagedAttention）把闲置压到每条序列的最后一块之内"),
        SummaryRow("找 bug", f"{len(broken)} 个坏缓存在提示词「{lab[REFERENCE].prompt}」上第一次生成不同的 token：{steps}；正确的缓存："
                   f"{'全部相同' if lab[REFERENCE].first_token_step is None else '不同！'}",
                   "缓存的 bug 不会报错，只会悄悄改变输出：与无缓存的参考逐步对比才能发现"),
        scenario_row(scenarios),
    ]


def summary_html(rows: list[SummaryRow]) -> str:
    body = "".join(f"<tr><td>{html.escape(r.topic)}</td><td>{html.escape(r.measured)}</td>"
                   f"<td>{html.escape(r.conclusion)}</td></tr>" for r in rows)
    return ("<table><thead><tr><th>本章</th><th>本机实测（本笔记本刚刚算出）</th><th>结论</th></tr></thead>"
            f"<tbody>{body}</tbody></table>")
