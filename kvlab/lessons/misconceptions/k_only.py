"""Chapter 3.5, misconception 2: caching K alone saves nothing worth having. No cache, a K-only cache and a
K+V cache timed side by side, their FLOPs counted, and why V of a past token needs the whole prefix again."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch

from ... import inputs
from ..._validate import positive_int
from ...attention import attention, attention_mask
from ...claims import Chooser, Claim, Rule, number, ratio, series
from ...config import ModelConfig
from ...costs import linear_flops_per_token, pass_cost
from ...measure import DecodeTiming, device_label, time_generate
from ...model import ToyTransformer
from ...stats import median
from ...viz import misconceptions_plots as plots
from ...viz.widgets import Panel, PanelOptions, View, int_slider, run_button
from ..decode import layer_qkv
from .common import NEW_TOKENS_LABEL, leave_a_core
from .phrases import PANELS, ShownNames, ShownText, label


K_ONLY_MODES = ("none", "k_only", "kv")
K_ONLY_NAMES = ShownNames("name", K_ONLY_MODES)  # as in the figures' legends, in the course's language
K_ONLY_MINIMAL = "k_only_min"  # a K-only cache that recomputes no more than V needs (counted, not run)
FLOP_MODES = ("none", "k_only", K_ONLY_MINIMAL, "kv")
FLOP_NAMES = ShownNames("flop", FLOP_MODES)

# LLaMA-7B's shape as a ModelConfig, to count its FLOPs (nothing is allocated): Touvron et al. 2023 and the
# released config.json (hidden 4096, 32 layers, 32 heads, intermediate_size 11008, vocab 32000); its parameter
# count equals MODEL_PRESETS["LLaMA-7B"].n_params (tests check it).
LLAMA_7B_SHAPE = ModelConfig(vocab_size=32000, d_model=4096, n_layer=32, n_head=32, d_ff=11008, max_seq_len=2048)


def compare_k_only(model: ToyTransformer, prompt_ids, new_tokens: int, repeats: int = 1) -> dict[str, DecodeTiming]:
    """Generate with no cache, a K-only cache and a K+V cache on the same prompt, alternating, after a warm-up."""
    new_tokens = positive_int("new_tokens", new_tokens)
    return time_generate(model, prompt_ids, new_tokens, K_ONLY_MODES, repeats=repeats)


def tail_step_ms(t: DecodeTiming, fraction: float = 0.25) -> float:
    """The page's one aggregate of a mode's step time (ms): the median decode step of the last ``fraction`` of each
    repeat (where the sequence is longest), then the median over the repeats (:func:`repeat_tail_ms`)."""
    return median(repeat_tail_ms(t, fraction))


def step_flops(model, mode: str, seq_len: int) -> int:
    """FLOPs, counted as :mod:`kvlab.costs` counts them (2 per multiply-add, the masked half of a block too), of
    the decode pass that brings a sequence to ``seq_len`` tokens. ``model``: a ToyTransformer or a ModelConfig.

    - "none" runs all ``t = seq_len`` tokens through every layer; "kv" runs 1 token after ``t - 1`` cached ones;
    - "k_only", as :func:`kvlab.teaching_caches.k_only_forward` runs it: all t tokens through every layer, only
      the K projection of the ``t - 1`` past tokens skipped;
    - "k_only_min", the least a K-only cache could do: the new token as with a full cache, plus V of the past
      tokens at every layer, which needs their hidden states: the layers below the last re-run over the past
      tokens (their Q, V, attention among themselves, W_o, MLP; K stays cached); at the last layer only their V.
    """
    c = model.config if isinstance(model, ToyTransformer) else model
    if not isinstance(c, ModelConfig):
        raise ValueError(f"model must be a ToyTransformer or a ModelConfig, got {type(model).__name__}")
    t = positive_int("seq_len", seq_len)
    past = t - 1
    kv_proj = 2 * c.d_model * c.n_kv_head * c.head_dim  # one token's K (or V) projection in one layer
    if mode == "kv":
        return pass_cost(c, 1, past).flops
    if mode == "none":
        return pass_cost(c, t).flops
    if mode == "k_only":
        return pass_cost(c, t).flops - past * c.n_layer * kv_proj
    if mode == K_ONLY_MINIMAL:
        per_layer = linear_flops_per_token(c) // c.n_layer  # projections and MLP of one token in one layer
        among_past = 4 * c.n_head * c.head_dim * past * past  # Q K^T and weights @ V of the past tokens
        below = (c.n_layer - 1) * (past * (per_layer - kv_proj) + among_past)
        return pass_cost(c, 1, past).flops + below + past * kv_proj
    raise ValueError(f"mode must be one of {FLOP_MODES}, got {mode!r}")


@dataclass(frozen=True)
class StepFlops:
    """One decode step at ``seq_len`` counted in every way of :func:`step_flops`."""

    seq_len: int
    flops: dict  # mode -> FLOPs

    def share(self, mode: str) -> float:
        """The step's FLOPs as a share of the uncached step's."""
        return self.flops[mode] / self.flops["none"]


def count_step(model, seq_len: int) -> StepFlops:
    return StepFlops(seq_len, {m: step_flops(model, m, seq_len) for m in FLOP_MODES})


def repeat_tail_ms(t: DecodeTiming, fraction: float = 0.25) -> list[float]:
    """:func:`tail_step_ms` of each repeat on its own (ms): how far the repeats agree tells how busy the machine is."""
    out = []
    for seconds in t.pass_seconds:
        steps = seconds[1:]  # decode passes only
        out.append(median(steps[-max(1, int(len(steps) * fraction)):]) * 1e3)
    return out


REPEATS_LABEL = "重复次数（取中位数）"
BAND = 0.15  # a ratio within 1 ± 15 % is "about the same"
FAR = 2.0  # K+V at least this many times faster than no cache (in every repeat): "far faster"
CLEAR = 1.5  # K+V this many times faster (the medians): "clearly faster", below it "a little faster"
MIN_REPEATS = 3  # fewer repeats cannot show how much the machine moves the times


# -- what the timings say, as claims (kvlab.claims) -----------------------------------------------------------
# Each sentence is chosen by a predicate over the numbers it prints: the three modes' medians (of each repeat's
# tail median), each repeat's ratio, the ratio of the medians. A verdict needs the repeats to agree.
def _series(v, name: str) -> tuple[float, ...]:
    x = v[name]
    return x if isinstance(x, tuple) else (x,)


def _ratio_agrees(printed: float, a: float, b: float, half: float) -> bool:
    """``printed`` (rounded to ``half`` either way) is a / b of the printed a and b (2 decimals), within rounding."""
    if b <= 0.005:
        return False
    lo, hi = max(a - 0.005, 0) / (b + 0.005), (a + 0.005) / (b - 0.005)
    return lo - half <= printed <= hi + half


def _diff_agrees(v, sign: int) -> bool:
    """The printed per-cent difference ``diff`` is ``sign`` x (K-only / uncached - 1) of the printed medians."""
    return _ratio_agrees(1 + sign * v["diff"] / 100, v["k_only_ms"], v["none_ms"], 0.005)


def _flat(v) -> bool:
    times = (v["none_ms"], v["k_only_ms"], v["kv_ms"])
    return min(times) > 0 and max(times) <= (1 + BAND) * min(times)


def _same(v) -> bool:
    within = sum(abs(r - 1) < BAND for r in _series(v, "rounds"))
    return v["diff"] < 100 * BAND and _diff_agrees(v, 1 if v["k_only_ms"] >= v["none_ms"] else -1) \
        and v["within"] == within and 2 * within > len(_series(v, "rounds"))


def _same_but_one(v) -> bool:
    """:func:`_same`, with exactly one round outside the band: the printed ``odd`` (1-based) and its ratio."""
    rounds = _series(v, "rounds")
    odd = int(v["odd"])
    return _same(v) and v["within"] == len(rounds) - 1 and 1 <= odd <= len(rounds) \
        and rounds[odd - 1] == v["odd_ratio"] and abs(v["odd_ratio"] - 1) >= BAND


K_ONLY_FIELDS = ("n", "none_ms", "k_only_ms", "rounds", "diff")
K_ONLY = Chooser("misconceptions.k_only", (
    Rule("misconceptions.k_only.few_repeats", ("n", "none_ms", "k_only_ms"), lambda v: v["n"] < MIN_REPEATS,
         substantive=False),
    Rule("misconceptions.k_only.flat", ("none_ms", "k_only_ms", "kv_ms"), _flat),
    Rule("misconceptions.k_only.same_but_one", K_ONLY_FIELDS + ("within", "odd", "odd_ratio"), _same_but_one),
    Rule("misconceptions.k_only.same_all", K_ONLY_FIELDS, lambda v: _same({**v, "within": v["n"]})),
    Rule("misconceptions.k_only.same", K_ONLY_FIELDS + ("within",), _same),
    Rule("misconceptions.k_only.faster", K_ONLY_FIELDS,
         lambda v: v["diff"] >= 100 * BAND and all(r <= 1 - BAND for r in _series(v, "rounds")) and _diff_agrees(v, -1)),
    Rule("misconceptions.k_only.slower", K_ONLY_FIELDS,
         lambda v: v["diff"] >= 100 * BAND and all(r >= 1 + BAND for r in _series(v, "rounds")) and _diff_agrees(v, 1)),
    Rule("misconceptions.k_only.unclear", ("n", "none_ms", "k_only_ms"), substantive=False),
))


def _kv_faster(every: float, low: float, high: float = float("inf")):
    """Every repeat's speedup at least ``every``, the medians' in [low, high) and agreeing with them."""
    def holds(v) -> bool:
        return (min(_series(v, "speedups")) >= every and low <= v["speedup"] < high
                and _ratio_agrees(v["speedup"], v["none_ms"], v["kv_ms"], 0.05))
    return holds


KV_FIELDS = ("none_ms", "kv_ms", "speedup", "speedups")
KV_SPEEDUP = Chooser("misconceptions.kv", (
    Rule("misconceptions.kv.far", KV_FIELDS, _kv_faster(FAR, FAR)),
    Rule("misconceptions.kv.clearly", KV_FIELDS, _kv_faster(1 + BAND, CLEAR)),
    Rule("misconceptions.kv.a_little", KV_FIELDS, _kv_faster(1 + BAND, 1 + BAND, CLEAR)),
    Rule("misconceptions.kv.unclear", ("none_ms", "kv_ms"), substantive=False),  # medians: never NaN or negative
))

_K_ONLY_RERUN = "把上面面板的「重复次数（取中位数）」调大，点「运行测量」，再运行这一格；机器忙时先关掉别的占 CPU 的程序。"
_ROUNDS = "各次重复的比值（只缓存 K ÷ 无缓存）：{rounds}"
_NOT_EXPLAINED = ("按计数它只少做几个百分点的计算，相差这么多不能用计算量解释；原因在计算量以外，这里没有查明：kvlab 的只缓存 K "
                  "走的是另一段代码（把 W_qkv 拆成三次矩阵乘），{n} 次重复方向一致也可能是凑巧（重复越多越可信）。")
K_ONLY_TEMPLATES = {
    "misconceptions.k_only.few_repeats": f"只重复了 {{n}} 次（单步中位数：无缓存 {{none_ms}}，只缓存 K {{k_only_ms}}）：看不出这台机器"
                                         f"让耗时波动多大，说不准只缓存 K 和不缓存是不是一样快；把「{REPEATS_LABEL}」调到 "
                                         f"{MIN_REPEATS} 以上，点「运行测量」，再运行这一格。",
    "misconceptions.k_only.flat": f"三种方式的一步几乎一样快（单步中位数：无缓存 {{none_ms}}，只缓存 K {{k_only_ms}}，有缓存 "
                                  f"{{kv_ms}}，彼此相差不到 {BAND:.0%}）：演示模型太小，一步的时间主要花在固定开销上（在 GPU 上是"
                                  "逐个启动 GPU 内核），计算量的差别显不出来。起作用的是下面按 FLOP 的计数：模型一大，时间就跟着"
                                  "计算量走。",
    "misconceptions.k_only.same": f"只缓存 K 和不缓存差不多一样慢：单步中位数 {{k_only_ms}} 对 {{none_ms}}，相差 {{diff}}，在 "
                                  f"±{BAND:.0%} 之内；{_ROUNDS}，{{n}} 次里有 {{within}} 次在这个范围内。",
    "misconceptions.k_only.same_all": f"只缓存 K 和不缓存差不多一样慢：单步中位数 {{k_only_ms}} 对 {{none_ms}}，相差 {{diff}}，在 "
                                      f"±{BAND:.0%} 之内；{_ROUNDS}，{{n}} 次都在这个范围内。",
    "misconceptions.k_only.same_but_one": f"只缓存 K 和不缓存差不多一样慢：单步中位数 {{k_only_ms}} 对 {{none_ms}}，相差 {{diff}}，"
                                          f"在 ±{BAND:.0%} 之内；{_ROUNDS}，{{n}} 次里有 {{within}} 次在这个范围内，按多数算"
                                          "「一样」。只有第 {odd} 次的比值 {odd_ratio} 和另外几次对不上：那一次多半是某一种方式的"
                                          "计时被别的程序打断了（下一句各次的倍数里，也可以看那一次是不是和另外几次不同）。",
    "misconceptions.k_only.faster": f"这次只缓存 K 比不缓存快 {{diff}}（单步中位数 {{k_only_ms}} 对 {{none_ms}}；{_ROUNDS}，每次都"
                                    f"是它快 {BAND:.0%} 以上）：" + _NOT_EXPLAINED,
    "misconceptions.k_only.slower": f"这次只缓存 K 反而比不缓存慢 {{diff}}（单步中位数 {{k_only_ms}} 对 {{none_ms}}；{_ROUNDS}，"
                                    f"每次都是它慢 {BAND:.0%} 以上）：" + _NOT_EXPLAINED,
    "misconceptions.k_only.unclear": "只缓存 K 的单步中位数 {k_only_ms}，无缓存 {none_ms}：{n} 次重复的结论不一致（或者差别不够大），"
                                     "这台机器太忙，这次说不准只缓存 K 和不缓存谁快；" + _K_ONLY_RERUN,
    "misconceptions.kv.far": "缓存 K 和 V 的一步快得多：单步中位数 {kv_ms}，不缓存（{none_ms}）是它的 {speedup}；各次重复里"
                             "不缓存都是它的 {FAR} 倍以上（{speedups}）。".replace("{FAR}", f"{FAR:g}"),
    "misconceptions.kv.clearly": f"缓存 K 和 V 的一步明显快：单步中位数 {{kv_ms}}，不缓存（{{none_ms}}）是它的 {{speedup}}；各次"
                                 f"重复都快 {BAND:.0%} 以上（不缓存是它的 {{speedups}}）。",
    "misconceptions.kv.a_little": f"缓存 K 和 V 的一步快一些：单步中位数 {{kv_ms}}，不缓存（{{none_ms}}）是它的 {{speedup}}；各次"
                                  f"重复都快 {BAND:.0%} 以上（不缓存是它的 {{speedups}}）。",
    "misconceptions.kv.unclear": f"缓存 K 和 V 的一步（单步中位数 {{kv_ms}}）这次也分不出比不缓存（{{none_ms}}）快多少：几次重复"
                                 f"不一致，或相差在 ±{BAND:.0%} 之内；" + _K_ONLY_RERUN,
}


GAP = 2.0  # a measured speedup at most 1/GAP of the counted one: the fixed cost of a step, not its arithmetic, sets it


def _gap(low: float, high: float):
    """The measured speedup (printed, > 1) in (counted / high, counted / low] of the printed counted ratio."""
    return lambda v: 1 < v["speedup"] and v["counted"] / high < v["speedup"] <= v["counted"] / low


KV_GAP_FIELDS = ("t", "counted", "speedup")
KV_GAP = Chooser("misconceptions.kv_gap", (
    Rule("misconceptions.kv_gap.overhead", KV_GAP_FIELDS, _gap(GAP, float("inf"))),
    Rule("misconceptions.kv_gap.near", KV_GAP_FIELDS, _gap(1 / 1.2, GAP)),
    Rule("misconceptions.kv_gap.beyond", KV_GAP_FIELDS, lambda v: v["speedup"] > 1.2 * v["counted"], substantive=False),
    Rule("misconceptions.kv_gap.unclear", KV_GAP_FIELDS, substantive=False),
))

KV_GAP_TEMPLATES = {
    "misconceptions.kv_gap.overhead": "按计数，计时的这几步（t ≈ {t}）里不缓存一步的计算量是有缓存的 {counted}，实测单步耗时之比"
                                      "却只有 {speedup}："
                                      "省下的计算远多于省下的时间。每一步还有一份与 t 无关的固定开销（Python 调度、逐个启动算子，"
                                      "3.1、3.3 节都量过），有缓存时它占了一步的大半。模型再大也不会追上 FLOP 之比：有缓存的一步"
                                      "主要花在把权重读一遍上（3.3 节的算术强度：批次为 1 时不到 1 FLOP/字节，受访存限制），"
                                      "所以实测倍数仍远小于计算量之比。",
    "misconceptions.kv_gap.near": "按计数，计时的这几步（t ≈ {t}）里不缓存一步的计算量是有缓存的 {counted}，实测单步耗时之比"
                                  "是 {speedup}，"
                                  "和计数相差不到一半：这几步的时间主要花在计算上。",
    "misconceptions.kv_gap.beyond": "按计数，计时的这几步（t ≈ {t}）里不缓存一步的计算量是有缓存的 {counted}，实测单步耗时之比"
                                    "却有 {speedup}，"
                                    "比计算量之比还大：省下的计算解释不了这么大的差，是计时被别的程序打断了；" + _K_ONLY_RERUN,
    "misconceptions.kv_gap.unclear": "按计数，计时的这几步（t ≈ {t}）里不缓存一步的计算量是有缓存的 {counted}；这一次实测不缓存的"
                                     "单步耗时只是有缓存的 {speedup}，没有显出有缓存更快，和计数比不了；" + _K_ONLY_RERUN,
}


def kv_gap_claim(t: int, counted: float, speedup: float) -> Claim:
    """:data:`KV_GAP` on the tail's middle length ``t``, the counted FLOP ratio (no cache ÷ cache) there and the
    measured speedup (as :func:`explain_k_only` prints it)."""
    return KV_GAP.choose({"t": number(t, 0), "counted": number(counted, 0, "×"), "speedup": number(speedup, 1, "×")})


def explain_kv_gap(timings: dict[str, DecodeTiming], model) -> list[Claim]:
    """How far the measured speedup of a full cache falls short of the counted one (:data:`KV_GAP`), at the middle
    of the lengths the tail medians cover. ``model``: the ToyTransformer (or its ModelConfig) that was timed."""
    t = next(iter(timings.values())).seq_len[1:]  # decode passes, as tail_step_ms takes them
    tail = t[-max(1, int(len(t) * 0.25)):]
    mid_t = tail[len(tail) // 2]
    counted = ratio(step_flops(model, "none", mid_t), step_flops(model, "kv", mid_t))
    speedup = ratio(median(repeat_tail_ms(timings["none"])), median(repeat_tail_ms(timings["kv"])))
    return [kv_gap_claim(mid_t, counted, speedup)]


def _odd_round(rounds: list[float]) -> dict:
    """The one round outside ±BAND (1-based index and its ratio), when exactly one is; else round 0 (no such round:
    the rule that names it does not hold)."""
    odd = [i for i, r in enumerate(rounds) if abs(r - 1) >= BAND]
    return {"odd": number(odd[0] + 1 if len(odd) == 1 else 0, 0), "odd_ratio": number(rounds[odd[0]] if odd else 1, 2)}


def _numbers(xs, digits: int, unit: str = ""):
    return series(xs, digits, unit) if len(xs) > 1 else number(xs[0], digits, unit)


def explain_k_only(timings: dict[str, DecodeTiming]) -> list[Claim]:
    """What a run of :func:`compare_k_only` measured, as two claims (:data:`K_ONLY`, :data:`KV_SPEEDUP`) over each
    mode's tail medians (:func:`repeat_tail_ms`, their median as :func:`tail_step_ms` prints it)."""
    per = {m: repeat_tail_ms(timings[m]) for m in K_ONLY_MODES}
    if len({len(v) for v in per.values()}) != 1:
        raise ValueError("timings: every mode needs the same number of repeats")
    mid = {m: median(v) for m, v in per.items()}
    numbers = {"n": number(len(per["none"]), 0), "none_ms": number(mid["none"], 2, "ms"),
               "k_only_ms": number(mid["k_only"], 2, "ms"), "kv_ms": number(mid["kv"], 2, "ms"),
               "rounds": _numbers([ratio(k, u) for k, u in zip(per["k_only"], per["none"])], 2),
               "diff": number(100 * abs(ratio(mid["k_only"], mid["none"]) - 1), 0, "%"),
               "within": number(sum(abs(round(ratio(k, u), 2) - 1) < BAND for k, u in zip(per["k_only"], per["none"])), 0),
               **_odd_round([round(ratio(k, u), 2) for k, u in zip(per["k_only"], per["none"])]),
               "speedup": number(ratio(mid["none"], mid["kv"]), 1, "×"),
               "speedups": _numbers([ratio(u, v) for u, v in zip(per["none"], per["kv"])], 1, "×")}
    return [K_ONLY.choose(numbers), KV_SPEEDUP.choose(numbers)]


def tail_times_text(timings: dict[str, DecodeTiming]) -> str:
    """「无缓存 6.49 ms，只缓存 K 6.21 ms，有缓存 1.05 ms」: :func:`tail_step_ms` of each mode (the verdict's numbers)."""
    return PANELS.say("time_sep").join(PANELS.say("mode_time", name=K_ONLY_NAMES.get(m, m), ms=tail_step_ms(t))
                                       for m, t in timings.items())


def same_tokens(timings: dict[str, DecodeTiming]) -> bool:
    first = next(iter(timings.values())).tokens
    return all(torch.equal(t.tokens, first) for t in timings.values())


COUNTING = ShownText("counting")  # the Chinese text as a str; formatted, in the course's language


def tail_range(timings: dict[str, DecodeTiming]) -> str:
    """The sequence lengths whose steps the last-quarter medians cover: "153–201", or "11" for one step."""
    t = next(iter(timings.values())).seq_len[1:]  # decode passes, as tail_step_ms takes them
    tail = t[-max(1, int(len(t) * 0.25)):]
    return f"{tail[0]}" if tail[0] == tail[-1] else f"{tail[0]}–{tail[-1]}"


def render_k_only(model: ToyTransformer, prompt_ids, new_tokens, repeats) -> View:
    """The misconception-2 panel: time the three modes, plot step time and K/V projections per step."""
    n = inputs.whole_number(label(NEW_TOKENS_LABEL), new_tokens, 8, model.config.max_seq_len - len(prompt_ids[0]))
    r = inputs.whole_number(label(REPEATS_LABEL), repeats, 1, 9)
    timings = compare_k_only(model, prompt_ids, n, r)
    counted = count_step(model, timings["none"].seq_len[-1])
    tokens = PANELS.say("same_tokens" if same_tokens(timings) else "tokens_differ")
    readout = PANELS.say("k_only_readout", n=n, tokens=tokens, tail=tail_range(timings), r=r,
                         times=tail_times_text(timings), device=device_label(model.device), counting=COUNTING,
                         t=counted.seq_len, k_share=counted.share("k_only"), kv_share=counted.share("kv"))
    return View([plots.k_only_figure(timings)], readout, timings)


def k_only_panel(model: ToyTransformer, prompt_ids, new_tokens: int = 120, repeats: int = MIN_REPEATS) -> Panel:
    """Length and repeat sliders; measurements run when the button is clicked."""
    top = model.config.max_seq_len - len(prompt_ids[0])
    return Panel({"new_tokens": int_slider(label(NEW_TOKENS_LABEL), new_tokens, 40, top - top % 40, step=40),
                  "repeats": int_slider(label(REPEATS_LABEL), repeats, 1, 5, width="300px")},
                 partial(render_k_only, model, prompt_ids),
                 options=PanelOptions(layout="horizontal", css_class="kvlab-konly", button=run_button()))


@dataclass(frozen=True)
class Dependency:
    """How much K and V of the last token change, layer by layer, when only the first token is changed:
    ``||changed - original|| / ||original||`` over all KV heads of that token (0.5: by half its own size)."""

    text: str
    changed_text: str
    k_change: list[float]  # per layer, relative to ||K||
    v_change: list[float]  # per layer, relative to ||V||


@leave_a_core
@torch.no_grad()
def prefix_dependency(model: ToyTransformer, tokenizer, text: str = "人工智能模型") -> Dependency:
    """Change the first token of ``text`` and measure K and V of its last token at every layer.

    At layer 0 they depend on the last token and its position alone (no change); from layer 1 on they depend on
    every earlier token through the attention of the layers below: recomputing them means re-running those
    layers over the whole prefix.
    """
    ids = tokenizer.encode(text)
    if len(ids) < 2:
        raise ValueError("text: needs at least 2 tokens (one to change, one to watch)")
    changed = [(ids[0] + 1) % model.config.vocab_size] + ids[1:]
    k_change, v_change = [], []
    for layer in range(model.config.n_layer):
        _, k, v = layer_qkv(model, ids, layer)  # K, V: [H_kv, t, D]
        _, k2, v2 = layer_qkv(model, changed, layer)
        k_change.append(((k2[:, -1] - k[:, -1]).norm() / k[:, -1].norm()).item())
        v_change.append(((v2[:, -1] - v[:, -1]).norm() / v[:, -1].norm()).item())
    return Dependency(text, tokenizer.decode(changed), k_change, v_change)


@dataclass(frozen=True)
class QueryCheck:
    """Attention at one layer with the queries of every earlier token replaced by noise."""

    layer: int
    t: int
    last_row_change: float  # max |output change| of the newest token: its row uses only its own query
    earlier_rows_change: float  # ... of the earlier tokens' rows


@leave_a_core
@torch.no_grad()
def past_queries_unused(model: ToyTransformer, tokenizer, text: str = "人工智能模型", layer: int = 1,
                        seed: int = 0) -> QueryCheck:
    """Replace Q of every token but the last with noise: the last token's attention output does not move."""
    ids = tokenizer.encode(text)
    q, k, v = layer_qkv(model, ids, layer)  # Q: [H, t, D]; K, V: [H_kv, t, D]
    t = q.shape[1]
    noisy = q.clone()
    gen = torch.Generator().manual_seed(seed)
    noisy[:, :-1] = torch.randn(noisy[:, :-1].shape, generator=gen).to(q)
    mask = attention_mask(t, t, 0, device=q.device)
    out = attention(q[None], k[None], v[None], mask, impl="explicit")[0]  # [H, t, D]
    out_noisy = attention(noisy[None], k[None], v[None], mask, impl="explicit")[0]
    diff = (out_noisy - out).abs()  # [H, t, D]
    return QueryCheck(layer, t, diff[:, -1].max().item(), diff[:, :-1].max().item())


# -- the same claims in English (Catalog.of_topics reads TEMPLATES, TEMPLATES_EN and WORDS_EN): same keys and fields --
TEMPLATES = {**K_ONLY_TEMPLATES, **KV_GAP_TEMPLATES}  # what Catalog.of_topics reads for Chinese
WORDS = {"×": "倍"}  # the speedups' unit is recorded as ×, written 倍 in Chinese (in English as it is)
REPEATS_LABEL_EN = PANELS.text("label.repeats", "en")  # REPEATS_LABEL in English, as the panel shows it
_K_ONLY_RERUN_EN = (f"raise \"{REPEATS_LABEL_EN}\" on the panel above, click \"Run the measurement\", then rerun this "
                    "cell; on a busy machine, close other CPU-hungry programs first.")
_ROUNDS_EN = "each repeat's ratio (K only ÷ no cache): {rounds}"
_NOT_EXPLAINED_EN = ("by the count it does only a few per cent less work, so the work cannot explain a gap this size; "
                     "the cause lies elsewhere and was not tracked down here: kvlab's K-only cache runs different code "
                     "(it splits W_qkv into three matrix multiplications), and {n} repeats pointing the same way may "
                     "also be chance (the more repeats, the more it can be trusted).")
_SAME_EN = ("Caching K alone is about as slow as no cache: median step {k_only_ms} against {none_ms}, {diff} apart, "
            f"within ±{BAND:.0%}; " + _ROUNDS_EN)
_GAP_HEAD_EN = "By the count, in the steps timed (t ≈ {t}) an uncached step does {counted} the work of a cached one"
TEMPLATES_EN = {
    "misconceptions.k_only.few_repeats": f"Too few repeats to tell ({{n}}; median step: no cache {{none_ms}}, K only "
                                         f"{{k_only_ms}}): they cannot show how much this machine makes the times "
                                         f"wander, so whether caching K alone is as fast as no cache is not clear; set "
                                         f"\"{REPEATS_LABEL_EN}\" to {MIN_REPEATS} or more, click \"Run the "
                                         f"measurement\", then rerun this cell.",
    "misconceptions.k_only.flat": f"The three ways take about as long per step (median step: no cache {{none_ms}}, K "
                                  f"only {{k_only_ms}}, with a cache {{kv_ms}}, all within {BAND:.0%} of each other): "
                                  "the demo model is so small that a step's time goes mostly into fixed overhead (on a "
                                  "GPU, launching GPU kernels one by one), which hides the difference in work. What "
                                  "counts is the FLOP count below: on a bigger model, time follows the work.",
    "misconceptions.k_only.same": _SAME_EN + "; {within} of the {n} are within that band.",
    "misconceptions.k_only.same_all": _SAME_EN + "; all {n} are within that band.",
    "misconceptions.k_only.same_but_one": _SAME_EN + "; {within} of the {n} are within that band, so by majority the "
                                          "two are \"the same\". Only repeat {odd}'s ratio, {odd_ratio}, is out of "
                                          "line with the others: most likely another program interrupted the timing "
                                          "of one of the ways in that repeat (in the next sentence's per-repeat "
                                          "speedups, see whether that repeat stands out too).",
    "misconceptions.k_only.faster": "This time caching K alone is {diff} faster than no cache (median step {k_only_ms} "
                                    "against {none_ms}; " + _ROUNDS_EN + f", faster by {BAND:.0%} or more every "
                                    "time): " + _NOT_EXPLAINED_EN,
    "misconceptions.k_only.slower": "This time caching K alone is even {diff} slower than no cache (median step "
                                    "{k_only_ms} against {none_ms}; " + _ROUNDS_EN + f", slower by {BAND:.0%} or more "
                                    "every time): " + _NOT_EXPLAINED_EN,
    "misconceptions.k_only.unclear": "Caching K alone: median step {k_only_ms}; no cache: {none_ms}. The {n} repeats "
                                     "disagree (or the difference is too small): this machine is too busy to tell "
                                     "which is faster this time; " + _K_ONLY_RERUN_EN,
    "misconceptions.kv.far": "Caching K and V makes a step far faster: median step {kv_ms}, and no cache ({none_ms}) "
                             "takes {speedup} as long; in every repeat no cache takes {FAR}× as long or more "
                             "({speedups}).".replace("{FAR}", f"{FAR:g}"),
    "misconceptions.kv.clearly": "Caching K and V makes a step clearly faster: median step {kv_ms}, and no cache "
                                 f"({{none_ms}}) takes {{speedup}} as long; every repeat is faster by {BAND:.0%} or "
                                 "more (no cache takes {speedups} as long).",
    "misconceptions.kv.a_little": "Caching K and V makes a step a little faster: median step {kv_ms}, and no cache "
                                  f"({{none_ms}}) takes {{speedup}} as long; every repeat is faster by {BAND:.0%} or "
                                  "more (no cache takes {speedups} as long).",
    "misconceptions.kv.unclear": "This time the step with K and V cached (median {kv_ms}) cannot be told apart from "
                                 f"no cache ({{none_ms}}) either: the repeats disagree, or differ by less than "
                                 f"±{BAND:.0%}; " + _K_ONLY_RERUN_EN,
    "misconceptions.kv_gap.overhead": _GAP_HEAD_EN + ", yet the measured step times differ only {speedup}: far more "
                                      "work is saved than time. Every step also carries a fixed cost that does not "
                                      "depend on t (Python dispatch, launching operators one by one, measured in "
                                      "3.1 and 3.3), and with a cache it is most of a step. A bigger model would not "
                                      "catch up with the FLOP ratio either: a cached step goes mostly into reading "
                                      "the weights once (3.3's arithmetic intensity: under 1 FLOP/byte at batch size "
                                      "1, memory-bound), so the measured speedup stays far below the ratio of the "
                                      "work.",
    "misconceptions.kv_gap.near": _GAP_HEAD_EN + ", and the measured step times differ {speedup}, within a factor of "
                                  "two of the count: these steps' time goes mostly into computing.",
    "misconceptions.kv_gap.beyond": _GAP_HEAD_EN + ", yet the measured step times differ {speedup}, more than the "
                                    "work does: the work saved cannot explain a gap that large, so other programs "
                                    "interrupted the timing; " + _K_ONLY_RERUN_EN,
    "misconceptions.kv_gap.unclear": _GAP_HEAD_EN + "; this time the uncached step measured only {speedup} the cached "
                                     "one's time, which shows no speedup from the cache and cannot be compared with "
                                     "the count; " + _K_ONLY_RERUN_EN,
}
