"""Both modes' step exponent (read against the growth share printed from the same eighths, or not read where the
growth sentence before it says why) and cumulative exponent: their choosers and Chinese sentences (``TEMPLATES``), and the same in English (``TEMPLATES_EN``, ``WORDS_EN``)."""
from __future__ import annotations

import math

from ....claims import Chooser, Rule
from .common import RISING_JUMP, _RERUN, _RERUN_EN, _change_agrees, _no_jump, _ratio_agrees


def _level(v) -> bool:
    """The second half's first and last medians agree with an exponent near 0 (within the rise t^0.3 allows over
    a doubling of t)."""
    return 0.8 * v["from"] <= v["to"] <= 1.25 * v["from"]


ENDS_BAND = 0.1  # a rising exponent is read only within this of the one its second half's printed ends give


def ends_exponent(start: float, end: float, t_from: float, t_to: float) -> float:
    """The exponent of the second half's first and last medians alone: log(end / start) / log(t_to / t_from); NaN
    where it has none."""
    if not (start > 0 and end > 0 and 0 < t_from < t_to):
        return math.nan
    return math.log(end / start) / math.log(t_to / t_from)


def _ends_range(v) -> tuple[float, float]:
    """The least and most :func:`ends_exponent` of the printed medians (2 decimals) and t (whole numbers), within
    their rounding (NaN, NaN where they give none)."""
    got = [ends_exponent(v["from"] + a, v["to"] + b, v["t_from"] + c, v["t_to"] + d)
           for a in (-0.005, 0.005) for b in (-0.005, 0.005) for c in (-0.5, 0.5) for d in (-0.5, 0.5)]
    return (math.nan, math.nan) if any(math.isnan(x) for x in got) else (min(got), max(got))


def _ends_agree(v) -> bool:
    """The fitted exponent within ENDS_BAND of the one the printed ends give (review of the English 3.1: 0.67 beside
    second-half medians that give 0.81)."""
    lo, hi = _ends_range(v)
    return lo - ENDS_BAND - 0.005 <= v["k"] <= hi + ENDS_BAND + 0.005  # (false where NaN)


def _off_ends(v) -> bool:
    """A rising exponent beside rising ends that give another one, more than ENDS_BAND away, as printed
    (``ends_k``, 2 decimals)."""
    lo, hi = _ends_range(v)
    return (0.3 <= v["k"] < 2.3 and v["to"] > v["from"] and lo - 0.005 <= v["ends_k"] <= hi + 0.005
            and not _ends_agree(v))


def _exponent_holds(low: float, high: float):
    """The fitted exponent within [low, high), and the second half's measured medians agreeing: about level for an
    exponent near 0, rising for a larger one, and then by about as much (:func:`_ends_agree`)."""
    def holds(v) -> bool:
        return v["t_from"] < v["t_to"] and low <= v["k"] < high and (_level(v) if high <= 0.3 else
                                                                     v["to"] > v["from"] and _ends_agree(v))
    return holds


STEP = ("k", "t_from", "t_to", "from", "to")  # the exponent and the second half's first and last medians, with their t
SHARE = ("t0", "t1", "share", "implied")  # the growth sentence's share (its ends' t) and the exponent it implies
BENT = ("first", "slope_early", "slope_late", "eighths")  # the first eighth's median, ms per token in each half, all eighths

SHARE_BAND = 0.25  # a step exponent and the one its growth share implies agree within this
BEND = 2 / 3  # a slope per token that falls (rises) to this share of itself (or less) from one half to the next bends


def implied_exponent(share_pct: float, t0: float, t1: float, t_from: float, t_to: float) -> float:
    """The step exponent over t_from -> t_to of a step time ``fixed + b·t`` whose growth from t0 to t1 is
    ``share_pct`` % of the step at t1 (what the growth sentence prints): with c = fixed / b = (t1 - t0) / share - t1,
    log((c + t_to) / (c + t_from)) / log(t_to / t_from). NaN where it has none."""
    if share_pct <= 0 or not t0 < t1 or not 0 < t_from < t_to:
        return math.nan
    c = (t1 - t0) / (share_pct / 100) - t1
    if c + t_from <= 0:
        return math.nan
    return math.log((c + t_to) / (c + t_from)) / math.log(t_to / t_from)


def _implied_agrees(v) -> bool:
    """The printed implied exponent is :func:`implied_exponent` of the printed share (±0.5 %) and t, to 2 decimals."""
    ends = (v["t0"], v["t1"], v["t_from"], v["t_to"])
    lo, hi = sorted(implied_exponent(v["share"] + d, *ends) for d in (-0.5, 0.5))
    return lo - 0.005 <= v["implied"] <= hi + 0.005  # (false where either is NaN)


def _agrees_with_share(v) -> bool:
    return _implied_agrees(v) and abs(v["k"] - v["implied"]) <= SHARE_BAND


def _slope_agrees(slope: float, lo_ms: float, hi_ms: float, t_lo: float, t_hi: float) -> bool:
    """A printed ms per token (3 decimals) is (hi - lo) / (t_hi - t_lo) of printed medians (2 decimals)."""
    return t_hi > t_lo and abs(slope - (hi_ms - lo_ms) / (t_hi - t_lo)) <= 0.0005 + 0.01 / (t_hi - t_lo)


def _slopes_agree(v) -> bool:
    """ms per token in the first half (first -> from) and the second (from -> to), as printed."""
    return (_slope_agrees(v["slope_early"], v["first"], v["from"], v["t0"], v["t_from"])
            and _slope_agrees(v["slope_late"], v["from"], v["to"], v["t_from"], v["t_to"]))


def _bends(v) -> bool:
    """The exponent well below the share's, beside a slope per token that falls by BEND or more, the eighths rising
    without one jump (:func:`_no_jump`): a curve, no power."""
    return (_no_jump(v["eighths"]) and _implied_agrees(v) and v["k"] < v["implied"] - SHARE_BAND and _slopes_agree(v)
            and v["slope_early"] > 0 and v["slope_late"] <= BEND * v["slope_early"])


def _steepens(v) -> bool:
    """The exponent well above the share's, beside a slope per token that rises by 1 / BEND or more, the eighths rising
    without one jump (:func:`_no_jump`)."""
    return (_no_jump(v["eighths"]) and _implied_agrees(v) and v["k"] > v["implied"] + SHARE_BAND and _slopes_agree(v)
            and v["slope_late"] > 0 and v["slope_early"] <= BEND * v["slope_late"])

# Said instead of the exponent's reading when the mode's growth sentence above says otherwise: no exponent reading
# beside a "can't tell", only "level" beside "level"; and "t² shows" only where the counted crossover is near.
# After a level one ("看不出随 t 的增长", with or without one outlier) the exponent is never read, whatever it is: it
# can only be noise beside that sentence (a fourth review found 「和各段中位数对不上」 there, a reason the run contradicted).
STEP_UNREAD = Chooser("decode.exponent_unread", (
    Rule("decode.exponent_unread.noisy", ("k",), substantive=False),
    Rule("decode.exponent_unread.level", ("k",), substantive=False),
    Rule("decode.exponent_unread.cumulative_noisy", ("k",), substantive=False),  # the cumulative one, same reason
))


def _unread(why: str) -> Chooser:
    """STEP_UNREAD's one key for ``why`` ("noisy", "level" or "cumulative_noisy"): said for what the mode's growth
    sentence said."""
    return Chooser(STEP_UNREAD.name, (STEP_UNREAD.rule(f"{STEP_UNREAD.name}.{why}"),))
# after ROUGH_KEYS: the exponent is not read; where one step between neighbouring eighths is more than RISING_JUMP
# of the whole rise, that jump is named (eighths at and next, their medians, the step, its share of first -> last)
JUMP = ("k", "at", "next", "jump_from", "jump_to", "jump", "first", "last", "jump_share", "repeats")


def _jumps(v) -> bool:
    """Neighbouring eighths at and next = at + 1, the printed step their difference, its printed share of the whole
    rise (first -> last) above RISING_JUMP, within the rounding of the printed medians."""
    rise = v["last"] - v["first"]
    share = 100 * v["jump"] / rise if rise > 0 else math.nan
    return (v["at"] >= 1 and v["next"] == v["at"] + 1 and v["repeats"] >= 1
            and abs(v["jump"] - (v["jump_to"] - v["jump_from"])) <= 0.015
            and abs(v["jump_share"] - share) <= 0.5 + 100 * 0.02 / rise
            and v["jump_share"] > 100 * RISING_JUMP and v["jump"] > 0)


STEP_JUMP = Chooser("decode.exponent_jump", (
    Rule("decode.exponent_jump.unread", JUMP, _jumps, substantive=False),
    Rule("decode.exponent_jump.rough", ("k",), substantive=False),
))
# beside a growth read without one outlying eighth: the exponent, fitted over all steps, is not read
STEP_OUTLIER = Chooser("decode.exponent_outlier", (
    Rule("decode.exponent_outlier.unread", ("k", "outlier"), substantive=False),
))
STEP_STEEP = Chooser("decode.exponent_steep", (
    Rule("decode.exponent_steep.not_t2", STEP, lambda v: v["k"] >= 1.15 and v["to"] > v["from"]),
))

# Below 1.15 the exponent is read against the growth share printed from the same eighths (a fixed cost plus a part
# proportional to t): where they agree, it is read; where the slope per token bends, that is said instead.
STEP_EXPONENT = Chooser("decode.step_exponent", (
    Rule("decode.step_exponent.bends", STEP + SHARE + BENT, lambda v: -0.3 <= v["k"] < 1.15 and _bends(v)),
    Rule("decode.step_exponent.steepens", STEP + SHARE + BENT, lambda v: 0.3 <= v["k"] < 1.15 and _steepens(v)),
    Rule("decode.step_exponent.flat", STEP, _exponent_holds(-0.3, 0.3)),
    Rule("decode.step_exponent.mixed", STEP + SHARE,
         lambda v: _exponent_holds(0.3, 0.85)(v) and _agrees_with_share(v)),
    Rule("decode.step_exponent.linear", STEP + SHARE,
         lambda v: _exponent_holds(0.85, 1.15)(v) and _agrees_with_share(v)),
    Rule("decode.step_exponent.between", STEP, _exponent_holds(1.15, 1.85)),
    Rule("decode.step_exponent.quadratic", STEP, _exponent_holds(1.85, 2.3)),
    Rule("decode.step_exponent.not_level", STEP, lambda v: -0.3 <= v["k"] < 0.3 and not _level(v), substantive=False),
    Rule("decode.step_exponent.not_rising", STEP, lambda v: 0.3 <= v["k"] < 2.3 and v["to"] <= v["from"],
         substantive=False),
    Rule("decode.step_exponent.off_share", STEP + SHARE,
         lambda v: 0.3 <= v["k"] < 1.15 and _implied_agrees(v) and abs(v["k"] - v["implied"]) > SHARE_BAND,
         substantive=False),  # says only that the two disagree: no reason its printed numbers could contradict
    Rule("decode.step_exponent.off_ends", STEP + ("ends_k",), _off_ends, substantive=False),
    Rule("decode.step_exponent.out_of_range", ("k",), lambda v: not -0.3 <= v["k"] < 2.3, substantive=False),
    Rule("decode.step_exponent.unfit", substantive=False),
))


def _stalls(v) -> bool:
    """The cumulative exponent above 1 beside first and last step times within a tenth of each other (which cannot
    give it), and a total well above the passes x the median step (stalls lengthened it), all as printed."""
    product_slack = v["passes"] * 0.005 / 1e3 + 0.005
    return (v["k"] >= 1.15 and v["spread"] < 10 and _change_agrees(v["spread"], v["late"], v["early"])
            and abs(v["product"] - v["passes"] * v["median"] / 1e3) <= product_slack
            and v["excess"] >= 1.3 and _ratio_agrees(v["excess"], v["total"], v["product"]))


GROWTH_READINGS = ("decode.cumulative.between", "decode.cumulative.quadratic")  # "later steps are slower"
CUMULATIVE = Chooser("decode.cumulative", (
    Rule("decode.cumulative.early_slow", ("k", "early", "late"),
         lambda v: v["k"] < 0.85 and v["early"] >= 1.5 * v["late"]),
    Rule("decode.cumulative.linear", ("k",), lambda v: 0.85 <= v["k"] < 1.15),
    Rule("decode.cumulative.between", ("k", "late", "early"),
         lambda v: 1.15 <= v["k"] < 1.85 and v["late"] >= 1.1 * v["early"]),
    Rule("decode.cumulative.quadratic", ("k", "late", "early"),
         lambda v: 1.85 <= v["k"] < 2.3 and v["late"] >= 1.1 * v["early"]),
    Rule("decode.cumulative.stalls", ("k", "early", "late", "spread", "total", "passes", "median", "product", "excess"),
         _stalls, substantive=False),
    Rule("decode.cumulative.noisy", ("k",), substantive=False),
    Rule("decode.cumulative.unfit", substantive=False),
))
# beside a mode whose steps were not said to grow, the cumulative exponent is not read as "later steps are slower"
CUMULATIVE_LEVEL = Chooser(CUMULATIVE.name, tuple(r for r in CUMULATIVE.rules if r.key not in GROWTH_READINGS))

CHOOSERS = (STEP_EXPONENT, STEP_UNREAD, STEP_JUMP, STEP_OUTLIER, STEP_STEEP, CUMULATIVE)

_SECOND_HALF = "后半段 t ≈ {t_from} → {t_to}，"
_SHARE = ("若单步耗时 = 固定开销 + 与 t 成正比的一项，按 t = {t0} → {t1} 随 t 增长的部分占单步的 {share} 推算，后半段的指数"
          "应约为 {implied}")
_BENT = ("t = {t0} → {t_from} 从 {first} 到 {from}，每多一个 token 单步耗时变化约 {slope_early}；t = {t_from} → {t_to} "
         "每多一个 token 变化约 {slope_late}；八段 {eighths} 里相邻两段之差都不到最高与最低之差的一半，"
         "不是某一处突然一跳")
TEMPLATES = {
    "decode.step_exponent.flat": "{mode}的单步指数 {k} 接近 0（" + _SECOND_HALF + "从 {from} 到 {to}）：后半段的单步耗时几乎"
                                 "不随 t 变，固定开销为主。",
    "decode.step_exponent.bends": "{mode}的单步指数 {k}（" + _SECOND_HALF + "从 {from} 到 {to}）比按占比推算的小得多。"
                                  + _SHARE + "。可后半段每个 token 的变化比前半段小得多：" + _BENT + "。曲线向下弯，一条 t^k 描述不了"
                                  "整段，所以这个指数不作解读。",
    "decode.step_exponent.steepens": "{mode}的单步指数 {k}（" + _SECOND_HALF + "从 {from} 到 {to}）比按占比推算的大得多。"
                                     + _SHARE + "。可后半段每个 token 的变化比前半段大得多：" + _BENT + "。曲线向上弯，一条 t^k 描述不了"
                                     "整段，所以这个指数不作解读。",
    "decode.step_exponent.mixed": "{mode}的单步指数 {k} 在 0 和 1 之间（" + _SECOND_HALF + "从 {from} 涨到 {to}）：固定开销"
                                  "和随 t 增长的部分都有份。" + _SHARE + "，两者大致相符。",
    "decode.step_exponent.linear": "{mode}的单步指数 {k} 接近 1（" + _SECOND_HALF + "从 {from} 涨到 {to}）：后半段的单步耗时"
                                   "大致随 t 成正比地变长。" + _SHARE + "，两者大致相符。",
    "decode.step_exponent.off_share": "{mode}的单步指数 {k}（" + _SECOND_HALF + "从 {from} 到 {to}）和按增长占比推算的"
                                      "对不上：" + _SHARE + "，相差太多：这一次的计时说不清是哪个对，这个指数不作解读；"
                                      + _RERUN,
    "decode.step_exponent.off_ends": "{mode}的单步指数 {k}（对后半段 t ≈ {t_from} → {t_to} 的每一步做的拟合）和这半段头尾的中位数"
                                     f"对不上：从 {{from}} 涨到 {{to}}，只看这两个数，指数约为 {{ends_k}}，相差超过 {ENDS_BAND}："
                                     "这一次的计时定不下这个指数，不作解读；" + _RERUN,
    "decode.exponent_jump.unread": "{mode}的单步指数 {k}：第 {at} 段 {jump_from} 到第 {next} 段 {jump_to} 一下跳了 {jump}，"
                                   "占全部涨幅（{first} → {last}）的 {jump_share}：每步只测了 {repeats} 次，机器负载一变，"
                                   "单步耗时就像随 t 变了，这个指数不作解读；" + _RERUN,
    "decode.exponent_jump.rough": "{mode}的单步指数 {k}：前面讲{mode}各段耗时的那句已经说明，各段涨幅不均匀，这个指数不作"
                                  "解读；" + _RERUN,
    "decode.exponent_outlier.unread": "{mode}的单步指数 {k}：拟合用的是全部步，包括前面说的那段离群的 {outlier}，会被它带偏，"
                                      "这个指数不作解读。",
    "decode.exponent_unread.noisy": "{mode}的单步指数 {k}：前面讲{mode}各段耗时的那句已经说明，这一次计时噪声太大，说不清随 t "
                                    "增长了多少；这个指数反映的是计时波动，不作解读。",
    "decode.exponent_unread.level": "{mode}的单步指数 {k}：前面讲{mode}各段耗时的那句已经说明，这么短的长度内看不出随 t 的增长，"
                                    "这个指数不作解读。",
    "decode.exponent_unread.cumulative_noisy": "{mode}的累计指数 {k}：同样因为{mode}这一次计时噪声太大，这个指数也不作解读。",
    "decode.exponent_steep.not_t2": "{mode}的单步指数 {k} 大于 1（" + _SECOND_HALF + "从 {from} 涨到 {to}），比按 FLOP 数预计"
                                    "的更陡：在这个长度上 t² 项还很小（见上面的 t*），多出来的陡度来自计时波动和矩阵乘法在"
                                    "不同长度下效率不同，不是 t² 项。",
    "decode.step_exponent.between": "{mode}的单步指数 {k} 在 1 和 2 之间（" + _SECOND_HALF + "从 {from} 涨到 {to}）：t² 部分"
                                    "已经显现。",
    "decode.step_exponent.quadratic": "{mode}的单步指数 {k} 接近 2（" + _SECOND_HALF + "从 {from} 涨到 {to}）：t² 部分为主。",
    "decode.step_exponent.not_level": "{mode}的单步指数 {k} 接近 0，但" + _SECOND_HALF + "头尾的单步中位数 {from}、{to} 一个比"
                                      "另一个高出 25% 以上，与指数对不上：这是计时噪声；" + _RERUN,
    "decode.step_exponent.not_rising": "{mode}的单步指数 {k} 说单步耗时随 t 变长，但" + _SECOND_HALF + "单步中位数从 {from} 到 "
                                       "{to}，并没有变长，与指数对不上：这是计时噪声；" + _RERUN,
    "decode.step_exponent.out_of_range": "{mode}的单步指数 {k} 不在 0 到 2 之间（单步耗时不会随 t 变短，按 FLOP 数也不会涨得比 "
                                         "t² 还快）：这是计时噪声；" + _RERUN,
    "decode.step_exponent.unfit": "{mode}的单步指数这一次拟合不出来；" + _RERUN,
    "decode.cumulative.early_slow": "{mode}的累计指数 {k} 小于 1：前 4 次前向计算（含预填充）平均 {early}，比后半段的单步"
                                    "中位数 {late} 慢得多，累计曲线先陡后缓。",
    "decode.cumulative.linear": "{mode}的累计指数 {k} 接近 1：总时间大致与生成的 token 数 n 成正比。",
    "decode.cumulative.between": "{mode}的累计指数 {k} 在 1 和 2 之间：后面的步更慢（后半段的单步中位数 {late}，前 4 次前向"
                                 "计算平均 {early}），总时间增长得比 n 快。",
    "decode.cumulative.quadratic": "{mode}的累计指数 {k} 接近 2：后面的步慢得多（后半段的单步中位数 {late}，前 4 次前向计算"
                                   "平均 {early}），总时间接近随 n² 增长。",
    "decode.cumulative.stalls": "{mode}的累计指数 {k}：前 4 次前向计算平均 {early}，后半段的单步中位数 {late}，相差 {spread}，"
                                "撑不起这个指数；累计 {total} 是 {passes} 次前向计算 × 单步中位数 {median}（约 {product}）的 "
                                "{excess} 倍：累计时间是被中途几次卡顿拉高的，这个指数不作解读。",
    "decode.cumulative.noisy": "{mode}的累计指数 {k}：这一次的计时太乱，说不清是哪一段拖慢的；" + _RERUN,
    "decode.cumulative.unfit": "{mode}的累计指数这一次拟合不出来；" + _RERUN,
}
WORDS = {"none": "无缓存", "kv": "有缓存"}  # the {mode} these sentences name

# -- the same claims in English (Catalog.of_topics reads TEMPLATES_EN and WORDS_EN): the same keys, the same fields --
_SECOND_HALF_EN = "over the second half, t ≈ {t_from} → {t_to}, "
_SHARE_EN = ("if a step took a fixed cost plus a term proportional to t, the part that grows with t over "
             "t = {t0} → {t1}, {share} of a step, would put the second half's exponent at about {implied}")
_SHARE_EN_START = "I" + _SHARE_EN[1:]
_BENT_EN = ("over t = {t0} → {t_from} the step went from {first} to {from}, changing by about {slope_early} per extra "
            "token; over t = {t_from} → {t_to} it changed by about {slope_late} per extra token; in the eighths "
            "{eighths} no two neighbours differ by as much as half the gap between the highest and the lowest, so "
            "this is no sudden jump at one place")
_SAID_ABOVE_EN = "as the sentence above on the {mode} eighths already says, "
TEMPLATES_EN = {
    "decode.step_exponent.flat": "The {mode} step exponent, {k}, is close to 0 (" + _SECOND_HALF_EN + "from {from} to "
                                 "{to}): in the second half the step time hardly changes with t; the fixed cost "
                                 "dominates.",
    "decode.step_exponent.bends": "The {mode} step exponent, {k} (" + _SECOND_HALF_EN + "from {from} to {to}), is much "
                                  "smaller than the share implies. " + _SHARE_EN_START + ". But the second half "
                                  "changes much less per token than the first: " + _BENT_EN + ". The curve bends "
                                  "down, and no single t^k describes the whole run, so this exponent is not read.",
    "decode.step_exponent.steepens": "The {mode} step exponent, {k} (" + _SECOND_HALF_EN + "from {from} to {to}), is "
                                     "much larger than the share implies. " + _SHARE_EN_START + ". But the second half "
                                     "changes much more per token than the first: " + _BENT_EN + ". The curve bends "
                                     "up, and no single t^k describes the whole run, so this exponent is not read.",
    "decode.step_exponent.mixed": "The {mode} step exponent, {k}, lies between 0 and 1 (" + _SECOND_HALF_EN + "rising "
                                  "from {from} to {to}): both the fixed cost and the part that grows with t count. "
                                  + _SHARE_EN_START + ", and the two roughly agree.",
    "decode.step_exponent.linear": "The {mode} step exponent, {k}, is close to 1 (" + _SECOND_HALF_EN + "rising from "
                                   "{from} to {to}): in the second half the step time grows roughly in proportion to "
                                   "t. " + _SHARE_EN_START + ", and the two roughly agree.",
    "decode.step_exponent.off_share": "The {mode} step exponent, {k} (" + _SECOND_HALF_EN + "from {from} to {to}), "
                                      "disagrees with the one the growth share implies: " + _SHARE_EN + ", too far "
                                      "apart: this run's timing cannot tell which is right, so this exponent is not "
                                      "read; " + _RERUN_EN,
    "decode.step_exponent.off_ends": "The {mode} step exponent, {k}, fitted to every step " + _SECOND_HALF_EN
                                     + "disagrees with that half's ends: from {from} to {to}, those two medians alone "
                                     f"give an exponent of about {{ends_k}}, more than {ENDS_BAND} away: this run's "
                                     "timing cannot pin the exponent down, so it is not read; " + _RERUN_EN,
    "decode.exponent_jump.unread": "The {mode} step exponent, {k}: from eighth {at}, {jump_from}, to eighth {next}, "
                                   "{jump_to}, the step time jumps by {jump}, {jump_share} of the whole rise ({first} "
                                   "→ {last}): each step was timed only a few times (repeats: {repeats}), and when the "
                                   "machine's load changes, the step time looks as if it changed with t, so this "
                                   "exponent is not read; " + _RERUN_EN,
    "decode.exponent_jump.rough": "The {mode} step exponent, {k}: " + _SAID_ABOVE_EN + "they rose by uneven steps, so "
                                  "this exponent is not read; " + _RERUN_EN,
    "decode.exponent_outlier.unread": "The {mode} step exponent, {k}: the fit uses every step, including the outlying "
                                      "eighth at {outlier} named above, which skews it, so this exponent is not read.",
    "decode.exponent_unread.noisy": "The {mode} step exponent, {k}: " + _SAID_ABOVE_EN + "this run's timing is too "
                                    "noisy to tell how much the step time grows with t; the exponent reflects timing "
                                    "jitter and is not read.",
    "decode.exponent_unread.level": "The {mode} step exponent, {k}: " + _SAID_ABOVE_EN + "no growth with t shows at "
                                    "such short lengths, so this exponent is not read.",
    "decode.exponent_unread.cumulative_noisy": "The {mode} cumulative exponent, {k}: for the same reason (the {mode} "
                                               "timing was too noisy this time), this exponent is not read either.",
    "decode.exponent_steep.not_t2": "The {mode} step exponent, {k}, is above 1 (" + _SECOND_HALF_EN + "rising from "
                                    "{from} to {to}), steeper than the FLOPs predict: at this length the t² term is "
                                    "still small (see t* above); the extra steepness comes from timing jitter and from "
                                    "matrix multiplications running at different efficiency at different lengths, not "
                                    "from the t² term.",
    "decode.step_exponent.between": "The {mode} step exponent, {k}, lies between 1 and 2 (" + _SECOND_HALF_EN + "rising "
                                    "from {from} to {to}): the t² part is showing.",
    "decode.step_exponent.quadratic": "The {mode} step exponent, {k}, is close to 2 (" + _SECOND_HALF_EN + "rising from "
                                      "{from} to {to}): the t² part dominates.",
    "decode.step_exponent.not_level": "The {mode} step exponent, {k}, is close to 0, but " + _SECOND_HALF_EN + "the "
                                      "median steps at its ends, {from} and {to}, differ by more than 25%, which "
                                      "disagrees with the exponent: this is timing noise; " + _RERUN_EN,
    "decode.step_exponent.not_rising": "The {mode} step exponent, {k}, says the step time grows with t, but "
                                       + _SECOND_HALF_EN + "the median step goes from {from} to {to}, no longer, which "
                                       "disagrees with the exponent: this is timing noise; " + _RERUN_EN,
    "decode.step_exponent.out_of_range": "The {mode} step exponent, {k}, is not between 0 and 2 (a step does not get "
                                         "faster as t grows, and by its FLOPs it cannot grow faster than t²): this is "
                                         "timing noise; " + _RERUN_EN,
    "decode.step_exponent.unfit": "The {mode} step exponent could not be fitted this time; " + _RERUN_EN,
    "decode.cumulative.early_slow": "The {mode} cumulative exponent, {k}, is below 1: the first 4 forward passes "
                                    "(prefill included) average {early}, much slower than the second half's median "
                                    "step, {late}, so the cumulative curve is steep first and flatter later.",
    "decode.cumulative.linear": "The {mode} cumulative exponent, {k}, is close to 1: the total time is roughly "
                                "proportional to n, the number of tokens generated.",
    "decode.cumulative.between": "The {mode} cumulative exponent, {k}, lies between 1 and 2: later steps are slower "
                                 "(the second half's median step {late}, the first 4 forward passes {early} on "
                                 "average), so the total time grows faster than n.",
    "decode.cumulative.quadratic": "The {mode} cumulative exponent, {k}, is close to 2: later steps are much slower "
                                   "(the second half's median step {late}, the first 4 forward passes {early} on "
                                   "average), and the total time grows nearly as n².",
    "decode.cumulative.stalls": "The {mode} cumulative exponent, {k}: the first 4 forward passes average {early} and "
                                "the second half's median step is {late}, {spread} apart, which cannot give this "
                                "exponent; the total, {total}, is {excess} times {passes} forward passes × the median "
                                "step {median} (about {product}): a few stalls along the way raised the total, so this "
                                "exponent is not read.",
    "decode.cumulative.noisy": "The {mode} cumulative exponent, {k}: this run's timing is too erratic to tell which part "
                               "slowed it; " + _RERUN_EN,
    "decode.cumulative.unfit": "The {mode} cumulative exponent could not be fitted this time; " + _RERUN_EN,
}
WORDS_EN = {"none": "uncached", "kv": "cached"}  # the {mode}, as an adjective: "the uncached step exponent"
