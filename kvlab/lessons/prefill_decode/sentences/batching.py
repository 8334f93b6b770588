"""Chapter 3.3's claims about decode batching: throughput against B = 1, the step time left and right of the
ridge, the sum model of compute and reads, and what a few rows of a matmul cost."""
from __future__ import annotations

import math

from ....claims import Chooser, Rule
from .common import (P, SAME, vals, close, rising, RERUN_BATCH, RERUN_ROOFS, RERUN_SMALL, RERUN_BATCH_EN, RERUN_ROOFS_EN,
                     RERUN_SMALL_EN)


def _gain(v) -> bool:
    """The throughput ratio and the step-time ratio agree with the printed throughputs (step = B ÷ gain)."""
    return close(v["ratio"], v["tput"] / v["tput1"], 0.1) and close(v["step"], v["B"] * v["tput1"] / v["tput"])


GAIN_SHOWS = ("B", "tput1", "tput", "ratio", "step")

BATCH_GAIN = Chooser(f"{P}.batch_gain", (
    Rule(f"{P}.batch_gain.ideal", GAIN_SHOWS, lambda v: _gain(v) and v["ratio"] >= (1 - SAME / 100) * v["B"]),
    Rule(f"{P}.batch_gain.compute_capped", (*GAIN_SHOWS, "I", "ridge", "mm", "mflop", "cap", "cap_ratio"),
         lambda v: _gain(v) and v["tput"] > v["tput1"] and v["I"] >= v["ridge"] and v["tput"] <= v["cap"]
         and v["ratio"] < v["B"]
         and close(v["cap"], v["mm"] * 1e3 / v["mflop"], 1) and close(v["cap_ratio"], v["cap"] / v["tput1"], 0.1)),
    Rule(f"{P}.batch_gain.higher", GAIN_SHOWS, lambda v: _gain(v) and v["tput"] > v["tput1"] and v["ratio"] < v["B"]),
    Rule(f"{P}.batch_gain.not_higher", ("B", "tput1", "tput"), lambda v: v["tput"] <= v["tput1"], substantive=False),
    Rule(f"{P}.batch_gain.unmeasured", substantive=False),
))

LEFT_SHOWS = ("Bs", "ts", "Bl", "I", "ridge", "ratio")


def _left(flat: bool):
    def holds(v) -> bool:
        ts = vals(v["ts"])
        ok = v["I"] < v["ridge"] and close(v["ratio"], ts[-1] / ts[0]) and v["Bl"] == vals(v["Bs"])[-1]
        within = all(abs(t / ts[0] - 1) <= SAME / 100 for t in ts)
        return ok and (within if flat else ts[-1] / ts[0] >= 1 + SAME / 100)
    return holds


BATCH_LEFT = Chooser(f"{P}.batch_left", (
    Rule(f"{P}.batch_left.flat", LEFT_SHOWS, _left(True)),
    Rule(f"{P}.batch_left.grows", (*LEFT_SHOWS, "rise"), lambda v: _left(False)(v) and close(v["rise"], 100 * (v["ratio"] - 1), 1)),
    Rule(f"{P}.batch_left.crossed_early", ("B", "I", "ridge"), lambda v: v["I"] >= v["ridge"]),
    Rule(f"{P}.batch_left.uneven", ("Bs", "ts"), substantive=False),
    Rule(f"{P}.batch_left.unmeasured", substantive=False),
))

BATCH_ORDER = Chooser(f"{P}.batch_order", (
    Rule(f"{P}.batch_order.rising", ("Bs", "ts"), lambda v: rising(vals(v["ts"]))),
    Rule(f"{P}.batch_order.ordered", ("Bs", "ts"), lambda v: all(b * 1.02 >= a for a, b in zip(vals(v["ts"]), vals(v["ts"])[1:]))),
    Rule(f"{P}.batch_order.inverted", ("Ba", "ta", "Bb", "tb"), lambda v: v["Ba"] < v["Bb"] and v["ta"] > 1.02 * v["tb"]),
    Rule(f"{P}.batch_order.unmeasured", substantive=False),
))

SHAPE_SHOWS = ("gl", "gr")

BATCH_SHAPE = Chooser(f"{P}.batch_shape", (
    Rule(f"{P}.batch_shape.ideal", SHAPE_SHOWS, lambda v: v["gl"] < 1.05 or v["gl"] < v["gr"] / 1.1),
    Rule(f"{P}.batch_shape.same", SHAPE_SHOWS, lambda v: v["gr"] / 1.1 <= v["gl"] <= v["gr"] * 1.1),
    Rule(f"{P}.batch_shape.inverted", SHAPE_SHOWS, lambda v: v["gl"] > v["gr"] * 1.1),
    Rule(f"{P}.batch_shape.unmeasured", substantive=False),
))

IDEAL_DOUBLING = 2  # right of the ridge the ideal step time is F ÷ matmul rate, F ∝ B: ×2 each time B doubles


def _per_doubling(v) -> bool:
    """``g`` is the printed step times' growth per doubling of B, first to last of the printed ``Bs``."""
    Bs, ts = vals(v["Bs"]), vals(v["ts"])
    return (len(Bs) == len(ts) >= 2 and Bs[-1] > Bs[0] and ts[0] > 0
            and close(v["g"], (ts[-1] / ts[0]) ** (1 / math.log2(Bs[-1] / Bs[0]))))


def _below_roofs(v) -> bool:
    """Slower than ×2 per doubling by more than SAME, every point right of the ridge (so the matmul roof is the lower
    roof) and its rate under that roof, each share as printed."""
    Is, rates, shares = vals(v["Is"]), vals(v["rates"]), vals(v["shares"])
    return (_per_doubling(v) and v["g"] < IDEAL_DOUBLING * (1 - SAME / 100) and len(Is) == len(rates) == len(shares)
            == len(vals(v["Bs"])) and all(i >= v["ridge"] for i in Is) and all(r < v["mm"] for r in rates)
            and all(close(s, 100 * r / v["mm"], 1) for s, r in zip(shares, rates)))


RIGHT_SHOWS = ("Bs", "Is", "ridge", "ts", "g")
BATCH_RIGHT = Chooser(f"{P}.batch_right", (
    Rule(f"{P}.batch_right.below_roofs", (*RIGHT_SHOWS, "rates", "mm", "shares"), _below_roofs),
    Rule(f"{P}.batch_right.proportional", ("Bs", "ts", "g"),
         lambda v: _per_doubling(v) and abs(v["g"] / IDEAL_DOUBLING - 1) <= SAME / 100),
    Rule(f"{P}.batch_right.steeper", ("Bs", "ts", "g"),
         lambda v: _per_doubling(v) and v["g"] > IDEAL_DOUBLING * (1 + SAME / 100), substantive=False),
    Rule(f"{P}.batch_right.above_roof", (*RIGHT_SHOWS, "rates", "mm"),
         lambda v: _per_doubling(v) and all(i >= v["ridge"] for i in vals(v["Is"]))
         and any(r >= v["mm"] for r in vals(v["rates"])), substantive=False),
    Rule(f"{P}.batch_right.unmeasured", substantive=False),
))


def _sum_model(v) -> bool:
    """The printed estimate is the sum model's (a step = F ÷ matmul rate + M ÷ bandwidth, F ∝ B, M fixed), B still
    left of the ridge, and the measured ratio agrees with the printed step times."""
    a = v["I1"] / v["ridge"]
    return (v["B"] * a < 1 and close(v["f"], 2 / (1 + a)) and close(v["pred"], (v["B"] * a + 1) / (a + 1))
            and close(v["meas"], v["tB"] / v["t1"]))


OVERLAP_SHOWS = ("I1", "ridge", "f", "B", "pred", "t1", "tB", "meas")

OVERLAP = Chooser(f"{P}.overlap", (
    Rule(f"{P}.overlap.agrees", OVERLAP_SHOWS, lambda v: _sum_model(v) and abs(v["meas"] / v["pred"] - 1) <= SAME / 100),
    Rule(f"{P}.overlap.more", OVERLAP_SHOWS, lambda v: _sum_model(v) and v["meas"] > (1 + SAME / 100) * v["pred"]),
    Rule(f"{P}.overlap.flat", OVERLAP_SHOWS, lambda v: _sum_model(v) and abs(v["meas"] - 1) <= SAME / 100),
    Rule(f"{P}.overlap.partial", OVERLAP_SHOWS, lambda v: _sum_model(v) and 1 + SAME / 100 < v["meas"] < v["pred"]),
    Rule(f"{P}.overlap.faster", OVERLAP_SHOWS, lambda v: _sum_model(v) and v["meas"] < 1 - SAME / 100,
         substantive=False),
    Rule(f"{P}.overlap.unmeasured", substantive=False),
))

INVERTED_ROWS = 1.08  # fewer rows taking this much longer than more rows (best of 15 each) is said


def _rows_inverted(v) -> bool:
    rows, ts = vals(v["rows"]), vals(v["ts"])
    if v["a"] not in rows or v["b"] not in rows:
        return False
    i, j = rows.index(v["a"]), rows.index(v["b"])
    return i < j and ts[i] > ts[j] * INVERTED_ROWS


MATMUL_ROWS = Chooser(f"{P}.matmul_rows", (
    Rule(f"{P}.matmul_rows.inverted", ("mib", "rows", "ts", "repeats", "a", "b"), _rows_inverted),
    Rule(f"{P}.matmul_rows.ordered", ("mib", "rows", "ts", "repeats"),
         lambda v: not any(a > b * INVERTED_ROWS for i, a in enumerate(vals(v["ts"])) for b in vals(v["ts"])[i + 1:])),
    Rule(f"{P}.matmul_rows.unmeasured", substantive=False),
))


def _beyond(v) -> bool:
    share = v["share"] / 100
    return (v["r"] >= 1.3 and close(v["predicted"], share * v["r"] + 1 - share)
            and v["predicted"] > v["measured"] * 1.15)


MATMUL_SLOWDOWN = Chooser(f"{P}.matmul_slowdown", (
    Rule(f"{P}.matmul_slowdown.beyond", ("top", "first", "r", "matmul", "share", "predicted", "measured"), _beyond),
    Rule(f"{P}.matmul_slowdown.slower", ("top", "first", "r"), lambda v: v["r"] >= 1.3),
    Rule(f"{P}.matmul_slowdown.even", ("top", "first", "r"), lambda v: v["r"] < 1.3),
    Rule(f"{P}.matmul_slowdown.unmeasured", substantive=False),
))


_OVERLAP = ("按两者之和估：B = 1 时 I₁ = {I1} FLOP/字节，转折点 {ridge}，到转折点时单步是 B = 1 的 2 ÷ (1 + I₁/转折点) = "
            "{f} 倍（转折点远大于 I₁ 时接近两倍，比如 GPU 上）；按它算 B = 1 → {B} 应涨 ×{pred}，上面实测 {t1} → {tB}，"
            "×{meas}")
_ROWS = "x @ W，W 是 {mib} 的 FP32 矩阵：{rows} 行分别要 {ts}（每种测 {repeats} 次、交替进行，取最快的一次）"
_RIGHT = "越过转折点以后（B = {Bs}，I = {Is}，都不低于转折点 {ridge}），单步耗时 {ts}，B 每翻一倍平均 ×{g}"

TEMPLATES = {  # key -> its Chinese sentence (ZH, in __init__.py)
    f"{P}.batch_left.unmeasured": "这次没有测出有效的单步耗时；" + RERUN_BATCH,
    f"{P}.batch_gain.ideal": "B = {B} 相比 B = 1：吞吐 {tput1} → {tput}（×{ratio}），单步耗时只 ×{step}：接近理想的 {B} 倍。",
    f"{P}.batch_gain.compute_capped": "B = {B} 相比 B = 1：吞吐 {tput1} → {tput}（×{ratio}），没到理想的 {B} 倍；单步耗时 ×{step}。B = {B} "
                                      "的 I = {I} 已远在转折点（{ridge}）右边，按平屋顶，吞吐最多约为矩阵乘速率 {mm} ÷ 每个 token 的 "
                                      "{mflop} MFLOP = {cap}（B = 1 实测的 ×{cap_ratio}），实测 {tput}。",
    f"{P}.batch_gain.higher": "B = {B} 相比 B = 1：吞吐 {tput1} → {tput}（×{ratio}），提高了，但没到"
                              "理想的 {B} 倍，因为单步耗时也涨了（×{step}）。",
    f"{P}.batch_gain.not_higher": "B = {B} 相比 B = 1：吞吐 {tput1} → {tput}，没有提高：多半是测大批次时机器正忙；" + RERUN_BATCH,
    f"{P}.batch_gain.unmeasured": "这次没有测出有效的吞吐；" + RERUN_BATCH,
    f"{P}.batch_left.flat": "B = {Bs} 还在转折点（{ridge}）左边（B = {Bl} 时 I = {I}）：单步耗时 {ts}，都在 B = 1 的 ±15% 以内，"
                            "从头到尾 ×{ratio}，几乎不变，和理想的 roofline 一样{why}。",
    f"{P}.batch_left.grows": "B = {Bs} 还在转折点（{ridge}）左边（B = {Bl} 时 I = {I}）：单步耗时 {ts}，从头到尾 ×{ratio}，增加了 "
                             "{rise}：实际的机器达不到屋顶，单步耗时并不完全由读的字节决定（下面的矩阵乘实验检查其中一个可能的原因）。",
    f"{P}.batch_left.crossed_early": "B = {B} 时算术强度（{I}）就已越过本机的转折点 {ridge}。",
    f"{P}.batch_left.uneven": "转折点左边的单步耗时 {ts}（B = {Bs}）忽高忽低，说不清随 B 怎样变；" + RERUN_BATCH,
    f"{P}.batch_order.rising": "单步耗时随 B（{Bs}）一步比一步长：{ts}。",
    f"{P}.batch_order.ordered": "单步耗时随 B（{Bs}）：{ts}，没有哪个 B 比前一个 B 快 2% 以上（2% 以内算测量的起伏）：多一倍的"
                                "序列不会让一步更快。",
    f"{P}.batch_order.inverted": "B = {Ba} 的一步（{ta}）反而比 B = {Bb} 的（{tb}）慢：多一倍的序列不该更快，这是测量的起伏或不同"
                                 "行数选了不同的计算方式；上面的平均倍数把这样的起伏抹平了。",
    f"{P}.batch_order.unmeasured": "这次的单步耗时没有测出有效的数；" + RERUN_BATCH,
    f"{P}.batch_shape.ideal": "转折点左边 B 每翻一倍，单步耗时平均 ×{gl}；越过转折点以后 ×{gr}：左边涨得更慢，和理想的 roofline 一致。",
    f"{P}.batch_shape.same": "转折点两边的增长差不多：左边 B 每翻一倍，单步耗时平均 ×{gl}，越过转折点以后 ×{gr}（相差不到 10%）。"
                             "理想的 roofline 里左边应当几乎不涨。左边的增长不是越过转折点造成的：运算和读数据不一定能完全重叠，"
                             "一步的时间可能比两者中较长的那个更接近两者之和（见本节末尾）；行数很少的矩阵乘本身也可能更慢"
                             "（下面的矩阵乘实验检查这一种）。",
    f"{P}.batch_shape.inverted": "这和理想的 roofline 反过来了：转折点左边 B 每翻一倍，单步耗时平均 ×{gl}；越过转折点以后只 ×{gr}。"
                                 "左边的增长不是越过转折点造成的：运算和读数据不一定能完全重叠，一步的时间可能比两者中较长的那个"
                                 "更接近两者之和（见本节末尾）；行数很少的矩阵乘本身也可能更慢（下面的矩阵乘实验检查这一种）。",
    f"{P}.batch_shape.unmeasured": "这次算不出转折点两边每翻一倍的增长；" + RERUN_BATCH,
    f"{P}.batch_right.below_roofs": _RIGHT + "。按 roofline，点贴着平屋顶时一步的时间由运算次数决定，与 B 成正比（B 每翻一倍 "
                                    "×2）；实测涨得比这慢，因为这几个点没有贴着屋顶：每秒 {rates}，只是矩阵乘屋顶 {mm} 的 {shares}，"
                                    "都在两道屋顶之下（越过转折点以后，平屋顶是较低的那道）。一步里还有不随 B 增长的开销，B 越大，"
                                    "它在一步里占得越少，点就越靠近屋顶。",
    f"{P}.batch_right.proportional": "越过转折点以后（B = {Bs}），单步耗时 {ts}，B 每翻一倍平均 ×{g}：与 B 差不多成正比（±15% "
                                     "以内），和 roofline 说的一样——那里一步的时间由运算次数决定。",
    f"{P}.batch_right.steeper": "越过转折点以后（B = {Bs}），单步耗时 {ts}，B 每翻一倍平均 ×{g}，比 B 涨得还快：运算次数只与 B "
                                "成正比，这多出来的是测量的起伏（测大批次时机器更忙）；" + RERUN_BATCH,
    f"{P}.batch_right.above_roof": _RIGHT + "，每秒 {rates}，有的点高过了测得的矩阵乘屋顶 {mm}：屋顶量低了，这次说不准这些点"
                                   "离屋顶多远；" + RERUN_ROOFS,
    f"{P}.batch_right.unmeasured": "这次算不出转折点右边每翻一倍的增长；" + RERUN_BATCH,
    f"{P}.overlap.agrees": _OVERLAP + "，相差不到 15%：与这个估计相符。",
    f"{P}.overlap.more": _OVERLAP + "，比这个偏悲观的估计涨得还多：除了运算和读数据不重叠，还有别的原因让单步变慢（上一小节的"
                         "矩阵乘实验量了其中一种），也可能测大批次时机器更忙（各个 B 交替测量，这种可能较小）。",
    f"{P}.overlap.flat": _OVERLAP + "：单步几乎不变，比这个估计小得多，像理想的 roofline（完全重叠）那样。",
    f"{P}.overlap.partial": _OVERLAP + "：介于完全重叠（不变）和完全不重叠之间，按这个模型是运算和读数据部分重叠。",
    f"{P}.overlap.faster": _OVERLAP + "：B 多了，单步反而更快，这是测量的起伏；" + RERUN_BATCH,
    f"{P}.overlap.unmeasured": "这次算不出这个估计：{missing}；" + RERUN_BATCH,
    f"{P}.matmul_rows.inverted": _ROWS + "。{a} 行反而比 {b} 行慢：矩阵乘的库对不同的行数会选不同的计算方式，这里量到的是这个库在"
                                 "这个形状上的表现，不是一条「行数越多越慢」的规律。",
    f"{P}.matmul_rows.ordered": _ROWS + "。",
    f"{P}.matmul_rows.unmeasured": "这次的矩阵乘没有测出有效的时间；" + RERUN_SMALL,
    f"{P}.matmul_slowdown.beyond": "要读的权重一样多，{top} 行却要 {first} 行的 {r} 倍时间。可这解释不了上面的批处理扫描：按 1 行的"
                                   "速度，一步解码里读权重的矩阵乘约要 {matmul}，占 B = {first} 一步的 {share}；这部分若慢 ×{r}，"
                                   "B = {top} 的一步至少要慢 ×{predicted}，实测只慢了 ×{measured}。这个实验的 W 比模型的任何一个矩阵"
                                   "都大得多（模型每个矩阵只有几 MiB，放得进最后一级缓存：同一次矩阵乘里要把它读好几遍时，第二遍起读"
                                   "的是缓存；这个 W 每遍都得从内存读），而矩阵乘的库对不同的行数和形状会选不同的计算方式：大 W 上量到"
                                   "的倍数不能直接搬到模型的一步上。",
    f"{P}.matmul_slowdown.slower": "要读的权重一样多，{top} 行却要 {first} 行的 {r} 倍时间：在这台机器上，行数很少的矩阵乘读权重的"
                                   "速度不如矩阵乘向量，这可能是 B 增大时单步耗时增长的原因之一（这个 W 比模型的矩阵大得多，倍数不能"
                                   "原样搬到模型的一步上）。",
    f"{P}.matmul_slowdown.even": "{top} 行只要 {first} 行的 {r} 倍时间：这台机器上读权重的速度几乎不受行数影响，单步耗时随 B 的"
                                 "增长主要来自运算次数和每条序列自己的 K/V。",
    f"{P}.matmul_slowdown.unmeasured": "这次的矩阵乘没有测出有效的时间；" + RERUN_SMALL,
}
WORDS = {"no_b1": "批处理扫描里没有测出 B = 1 的单步耗时",
         "no_left": "B = 1 之外，没有哪个测过的 B 满足 B × I₁ < 转折点（这个估计只在转折点左边成立）",
         "gpu_launch": "：GPU 上这个小模型一步解码主要是内核启动的固定开销，多几条序列几乎不加时间", "cpu": ""}

# -- the same claims in English (EN, in __init__.py): the same keys, the same fields ----------------------------
_OVERLAP_EN = ("Estimated as the sum of the two: at B = 1, I₁ = {I1} FLOP/byte and the ridge is {ridge}, so at the "
               "ridge a step takes 2 ÷ (1 + I₁/ridge) = {f} times B = 1's (nearly twice when the ridge is far above I₁, "
               "as on a GPU); by that, B = 1 → {B} should grow ×{pred}; measured above, {t1} → {tB}, ×{meas}")
_ROWS_EN = ("x @ W, with W an FP32 matrix of {mib}: {rows} rows take {ts} (each timed {repeats} times, taking turns, "
            "the fastest kept)")
_RIGHT_EN = ("Beyond the ridge (B = {Bs}, I = {Is}, none below the ridge {ridge}), the step takes {ts}, ×{g} on "
             "average for each doubling of B")
_GAIN_EN = "B = {B} against B = 1: throughput {tput1} → {tput}"
_LEFT_EN = "B = {Bs} are still left of the ridge ({ridge}) (at B = {Bl}, I = {I}): the step takes {ts}"
_NOT_RIDGE_EN = ("The growth on the left does not come from crossing the ridge: computing and reading data need not "
                 "overlap fully, so a step may take closer to the sum of the two than to the longer one (see the end "
                 "of this section); a matmul of few rows may also be slower in itself (the matmul experiment below "
                 "checks that one).")
TEMPLATES_EN = {
    f"{P}.batch_left.unmeasured": "This run measured no valid step time; " + RERUN_BATCH_EN,
    f"{P}.batch_gain.ideal": _GAIN_EN + " (×{ratio}), while the step grows only ×{step}: close to the ideal {B} times.",
    f"{P}.batch_gain.compute_capped": _GAIN_EN + " (×{ratio}), short of the ideal {B} times; the step grows ×{step}. At "
                                      "B = {B}, I = {I} is far right of the ridge ({ridge}), so under the flat roof the "
                                      "throughput is at most about the matmul rate {mm} ÷ {mflop} MFLOP per token = "
                                      "{cap} (×{cap_ratio} the B = 1 measurement); measured: {tput}.",
    f"{P}.batch_gain.higher": _GAIN_EN + " (×{ratio}): higher, but short of the ideal {B} times, because the step grows "
                              "too (×{step}).",
    f"{P}.batch_gain.not_higher": _GAIN_EN + ", no higher: most likely the machine was busy while the large batches "
                                  "were timed; " + RERUN_BATCH_EN,
    f"{P}.batch_gain.unmeasured": "This run measured no valid throughput; " + RERUN_BATCH_EN,
    f"{P}.batch_left.flat": _LEFT_EN + ", all within ±15% of B = 1's, ×{ratio} from first to last: almost unchanged, as "
                            "in the ideal roofline{why}.",
    f"{P}.batch_left.grows": _LEFT_EN + ", ×{ratio} from first to last, {rise} more: a real machine does not reach the "
                             "roofs, and the step's time is not set by the bytes read alone (the matmul experiment "
                             "below checks one possible reason).",
    f"{P}.batch_left.crossed_early": "Already at B = {B} the arithmetic intensity ({I}) is past this machine's ridge "
                                     "{ridge}.",
    f"{P}.batch_left.uneven": "Left of the ridge the step times {ts} (B = {Bs}) go up and down, so this run cannot say "
                              "how they change with B; " + RERUN_BATCH_EN,
    f"{P}.batch_order.rising": "With B ({Bs}) each step is longer than the one before: {ts}.",
    f"{P}.batch_order.ordered": "Step time by B ({Bs}): {ts}; no B is more than 2% faster than the B before it (within "
                                "2% is measurement noise): twice the sequences do not make a step faster.",
    f"{P}.batch_order.inverted": "The step at B = {Ba} ({ta}) is slower than the one at B = {Bb} ({tb}): twice the "
                                 "sequences should not be faster, so this is measurement noise, or the library chose a "
                                 "different method for a different number of rows; the average ratios above smooth such "
                                 "swings out.",
    f"{P}.batch_order.unmeasured": "This run measured no valid step times; " + RERUN_BATCH_EN,
    f"{P}.batch_shape.ideal": "Left of the ridge each doubling of B makes a step ×{gl} on average; beyond the ridge "
                              "×{gr}: slower growth on the left, as in the ideal roofline.",
    f"{P}.batch_shape.same": "The growth is about the same on both sides of the ridge: on the left each doubling of B "
                             "makes a step ×{gl} on average, beyond the ridge ×{gr} (less than 10% apart). In the ideal "
                             "roofline the left side should hardly grow. " + _NOT_RIDGE_EN,
    f"{P}.batch_shape.inverted": "This is the ideal roofline turned around: left of the ridge each doubling of B makes "
                                 "a step ×{gl} on average, beyond the ridge only ×{gr}. " + _NOT_RIDGE_EN,
    f"{P}.batch_shape.unmeasured": "This run cannot work out the growth per doubling on either side of the ridge; "
                                   + RERUN_BATCH_EN,
    f"{P}.batch_right.below_roofs": _RIGHT_EN + ". By the roofline, a point on the flat roof takes a time set by its "
                                    "operations, in proportion to B (×2 for each doubling); the measurement grows more "
                                    "slowly because these points are not on the roof: {rates}, only {shares} of the "
                                    "matmul roof {mm}, all below both roofs (beyond the ridge the flat roof is the lower "
                                    "one). A step also has overhead that does not grow with B; the larger B, the smaller "
                                    "its part of a step, and the closer the point comes to the roof.",
    f"{P}.batch_right.proportional": "Beyond the ridge (B = {Bs}), the step takes {ts}, ×{g} on average for each "
                                     "doubling of B: roughly in proportion to B (within ±15%), as the roofline says: "
                                     "there a step's time is set by its operations.",
    f"{P}.batch_right.steeper": "Beyond the ridge (B = {Bs}), the step takes {ts}, ×{g} on average for each doubling of "
                                "B, faster than B grows: the operations grow only in proportion to B, so the extra is "
                                "measurement noise (the machine busier while the large batches were timed); "
                                + RERUN_BATCH_EN,
    f"{P}.batch_right.above_roof": _RIGHT_EN + "; {rates}, some points above the measured matmul roof {mm}: the roof "
                                   "came out low, and this run cannot tell how far these points are from it; "
                                   + RERUN_ROOFS_EN,
    f"{P}.batch_right.unmeasured": "This run cannot work out the growth per doubling right of the ridge; "
                                   + RERUN_BATCH_EN,
    f"{P}.overlap.agrees": _OVERLAP_EN + ", less than 15% apart: it matches this estimate.",
    f"{P}.overlap.more": _OVERLAP_EN + ", more than even this pessimistic estimate: besides computing and reading not "
                         "overlapping, something else slows the step (the previous subsection's matmul experiment "
                         "measured one such cause), or the machine was busier while the large batches were timed (the "
                         "Bs are timed taking turns, so this is less likely).",
    f"{P}.overlap.flat": _OVERLAP_EN + ": the step hardly changes, far less than this estimate, as in the ideal roofline "
                         "(full overlap).",
    f"{P}.overlap.partial": _OVERLAP_EN + ": between full overlap (no change) and none at all; by this model, computing "
                            "and reading data overlap in part.",
    f"{P}.overlap.faster": _OVERLAP_EN + ": with more B the step got faster, which is measurement noise; "
                           + RERUN_BATCH_EN,
    f"{P}.overlap.unmeasured": "This run cannot work out this estimate: {missing}; " + RERUN_BATCH_EN,
    f"{P}.matmul_rows.inverted": _ROWS_EN + ". {a} rows are slower than {b}: the matmul library chooses a different "
                                 "method for a different number of rows, so what is measured here is how this library "
                                 "does on this shape, not a rule that \"more rows are slower\".",
    f"{P}.matmul_rows.ordered": _ROWS_EN + ".",
    f"{P}.matmul_rows.unmeasured": "This run measured no valid matmul times; " + RERUN_SMALL_EN,
    f"{P}.matmul_slowdown.beyond": "Reading as many weights, {top} rows take {r} times as long as {first}. Yet that "
                                   "cannot explain the batch sweep above: at the speed of 1 row, the matmuls that read "
                                   "the weights in a decode step take about {matmul}, {share} of a step at B = "
                                   "{first}; were that part ×{r} slower, a step at B = {top} would be at least "
                                   "×{predicted} slower, and it measured only ×{measured}. This experiment's W is far "
                                   "larger than any of the model's matrices (each of those is only a few MiB and fits "
                                   "in the last-level cache: when a matmul reads it several times, the second read on "
                                   "comes from the cache; this W has to come from memory every time), and the matmul "
                                   "library chooses different methods for different numbers of rows and shapes: a "
                                   "ratio measured on a large W does not carry over to the model's step as it is.",
    f"{P}.matmul_slowdown.slower": "Reading as many weights, {top} rows take {r} times as long as {first}: on this "
                                   "machine a matmul of few rows reads the weights more slowly than a matrix-vector "
                                   "product, which may be one reason why a step grows with B (this W is much larger "
                                   "than the model's matrices, so the ratio does not carry over to the model's step as "
                                   "it is).",
    f"{P}.matmul_slowdown.even": "{top} rows take only {r} times as long as {first}: on this machine how fast the "
                                 "weights are read hardly depends on the rows, and a step's growth with B comes mostly "
                                 "from the operations and each sequence's own K/V.",
    f"{P}.matmul_slowdown.unmeasured": "This run measured no valid matmul times; " + RERUN_SMALL_EN,
}
WORDS_EN = {"no_b1": "the batch sweep measured no step time at B = 1",
            "no_left": "apart from B = 1, no B measured has B × I₁ < the ridge (this estimate holds only left of the "
                       "ridge)",
            "gpu_launch": ": on a GPU this small model's decode step is mostly the fixed cost of launching kernels, and "
                          "a few more sequences add almost no time",
            "cpu": ""}

CHOOSERS = (BATCH_GAIN, BATCH_LEFT, BATCH_ORDER, BATCH_SHAPE, BATCH_RIGHT, OVERLAP, MATMUL_ROWS, MATMUL_SLOWDOWN)
