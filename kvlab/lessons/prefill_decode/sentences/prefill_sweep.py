"""Chapter 3.3's claims about the prefill sweep: how the prefill time grows with P (every point), one pass
against feeding the tokens one by one, where prefill crosses the ridge, and the prefill rates' trend."""
from __future__ import annotations

import math

from ....claims import Chooser, Rule
from .common import (P, SAME, vals, close, exponents, launch_bound, LAUNCH_SHOWS, rising, RERUN_SWEEP, RERUN_ROOFS,
                    LAUNCH_TEXT, RERUN_SWEEP_EN, RERUN_ROOFS_EN, LAUNCH_TEXT_EN)


def _no_drop(ts) -> bool:
    return all(b >= (1 - SAME / 100) * a for a, b in zip(ts, ts[1:]))


def _growth(low: float, high: float, step_low: float, step_high: float):
    def holds(v) -> bool:
        Ps, ts = vals(v["Ps"]), vals(v["ts"])
        k = exponents((Ps[0], Ps[-1]), (ts[0], ts[-1]))[0]
        return (len(Ps) == len(ts) >= 2 and _no_drop(ts) and close(v["ratio"], ts[-1] / ts[0])
                and close(v["tokens"], Ps[-1] / Ps[0], 0.1) and low <= k < high
                and all(step_low <= s < step_high for s in exponents(Ps, ts)))
    return holds


GROWTH_SHOWS = ("Ps", "ts", "tokens", "ratio")


def _dropped(v) -> bool:
    Ps, ts = vals(v["Ps"]), vals(v["ts"])
    i = Ps.index(v["p"]) if v["p"] in Ps[:-1] else None
    return i is not None and Ps[i + 1] == v["q"] and ts[i + 1] < (1 - SAME / 100) * ts[i] and close(v["drop"], 100 * (1 - ts[i + 1] / ts[i]), 1)


def _slow_overall(faster: bool):
    """Slower than the tokens from the first P to the last, no drop, but the step named grew about as fast as them
    (exponent 0.75 to 1.25): a little slower than its tokens (``tok``, the step's token ratio), or ``faster``."""
    def holds(v) -> bool:
        Ps, ts = vals(v["Ps"]), vals(v["ts"])
        if v["ps"] not in Ps[:-1] or Ps[Ps.index(v["ps"]) + 1] != v["qs"]:
            return False
        i = Ps.index(v["ps"])
        k = exponents((Ps[0], Ps[-1]), (ts[0], ts[-1]))[0]
        return (_growth(0.25, 0.75, -1, math.inf)(v) and close(v["step"], ts[i + 1] / ts[i])
                and close(v["tok"], v["qs"] / v["ps"], 0.1) and (v["step"] >= v["tok"]) == faster
                and 0.75 <= exponents(Ps[i:i + 2], ts[i:i + 2])[0] < 1.25 and 0.25 <= k < 0.75)
    return holds


MUCH_SLOWER = 0.5  # a segment grows "much slower than its tokens" when its exponent is under this


def _slow_steepest(v) -> bool:
    """Slower than the tokens from the first P to the last and in every segment (exponents under 0.75), no drop, but
    not much slower in every one: the segment named (``ps`` → ``qs``, its time ratio ``step``, token ratio ``tok``)
    is the steepest, with an exponent of at least :data:`MUCH_SLOWER`."""
    Ps, ts = vals(v["Ps"]), vals(v["ts"])
    if v["ps"] not in Ps[:-1] or Ps[Ps.index(v["ps"]) + 1] != v["qs"]:
        return False
    i = Ps.index(v["ps"])
    ks = exponents(Ps, ts)
    return (_growth(-1, 0.75, -1, 0.75)(v) and ks[i] == max(ks) and ks[i] >= MUCH_SLOWER
            and close(v["step"], ts[i + 1] / ts[i]) and close(v["tok"], v["qs"] / v["ps"], 0.1))


BARELY = 0.25  # a segment "barely grew" when its exponent is under this


def _matvec_jump(v) -> bool:
    """Slower than the tokens from the first P to the last (exponent under 0.75), no drop, the first segment
    P = 1 → 2 (its time ratio ``step``, token ratio ``tok``) growing with an exponent from :data:`MUCH_SLOWER` up to
    1.25 (about the tokens' pace; a jump of ×3.4 for ×2 tokens stays "uneven", too steep to read), and every later segment barely growing (exponents under :data:`BARELY`): the jump is the change from the
    matrix-vector kernel (one row) to a matrix-multiply kernel (two or more rows), not a busy machine."""
    Ps, ts = vals(v["Ps"]), vals(v["ts"])
    if len(Ps) != len(ts) or len(Ps) < 3 or tuple(Ps[:2]) != (1, 2) or (v["ps"], v["qs"]) != (1, 2):
        return False
    ks = exponents(Ps, ts)
    k = exponents((Ps[0], Ps[-1]), (ts[0], ts[-1]))[0]
    return (_no_drop(ts) and close(v["ratio"], ts[-1] / ts[0]) and close(v["tokens"], Ps[-1] / Ps[0], 0.1)
            and -1 <= k < 0.75 and MUCH_SLOWER <= ks[0] < 1.25 and all(-1 <= x < BARELY for x in ks[1:])
            and close(v["step"], ts[1] / ts[0]) and close(v["tok"], 2, 0.1))


PREFILL_GROWTH = Chooser(f"{P}.prefill_growth", (
    Rule(f"{P}.prefill_growth.launch_bound", LAUNCH_SHOWS, launch_bound),
    Rule(f"{P}.prefill_growth.barely", GROWTH_SHOWS, _growth(-1, 0.25, -1, MUCH_SLOWER)),
    Rule(f"{P}.prefill_growth.slow", GROWTH_SHOWS, _growth(0.25, 0.75, -1, MUCH_SLOWER)),
    # the steepest step is P = 1 -> 2: a matrix-vector product there, a matrix product of few rows from P = 2 on
    Rule(f"{P}.prefill_growth.slow_steepest_matvec", (*GROWTH_SHOWS, "ps", "qs", "step", "tok"),
         lambda v: _slow_steepest(v) and v["ps"] == 1 and v["qs"] == 2),
    Rule(f"{P}.prefill_growth.slow_steepest", (*GROWTH_SHOWS, "ps", "qs", "step", "tok"), _slow_steepest),
    # P = 1 -> 2 about as fast as the tokens, then barely any growth: the kernel changes at P = 2, the machine was not busy
    Rule(f"{P}.prefill_growth.matvec_jump", (*GROWTH_SHOWS, "ps", "qs", "step", "tok"), _matvec_jump),
    Rule(f"{P}.prefill_growth.proportional", GROWTH_SHOWS, _growth(0.75, 1.3, 0.5, 1.5)),
    Rule(f"{P}.prefill_growth.slow_overall", (*GROWTH_SHOWS, "ps", "qs", "step", "tok"), _slow_overall(False)),
    Rule(f"{P}.prefill_growth.slow_overall_faster", (*GROWTH_SHOWS, "ps", "qs", "step", "tok"), _slow_overall(True)),
    Rule(f"{P}.prefill_growth.dropped", (*GROWTH_SHOWS, "p", "q", "drop"), _dropped, substantive=False),
    Rule(f"{P}.prefill_growth.uneven", ("Ps", "ts"), substantive=False),
    Rule(f"{P}.prefill_growth.unmeasured", substantive=False),
))

RIDGE = Chooser(f"{P}.ridge", (
    Rule(f"{P}.ridge.crossed", ("twice", "ridge", "P", "I"),
         lambda v: v["I"] >= v["ridge"] and close(v["twice"], 2 * v["ridge"], 1)),
    Rule(f"{P}.ridge.not_crossed", ("twice", "ridge", "P", "I"),
         lambda v: v["I"] < v["ridge"] and close(v["twice"], 2 * v["ridge"], 1)),
    Rule(f"{P}.ridge.unmeasured", substantive=False),
))


def _ks_agree(v, p: str = "Ps", t: str = "ts", k: str = "ks") -> bool:
    Ps, ts, ks = vals(v[p]), vals(v[t]), vals(v[k])
    return len(ks) == len(Ps) - 1 and all(abs(k - c) <= 0.05 for k, c in zip(ks, exponents(Ps, ts)))


def _last_segment(low: float, high: float, closed: bool = False):
    def holds(v) -> bool:
        k = exponents((v["Pa"], v["Pb"]), (v["ta"], v["tb"]))[0]
        return abs(k - v["k"]) <= 0.05 and low <= k and (k <= high if closed else k < high)
    return holds


SEGMENT_SHOWS = ("Pa", "Pb", "ta", "tb", "k")

PREFILL_TAIL = Chooser(f"{P}.prefill_tail", (
    Rule(f"{P}.prefill_tail.launch_bound", LAUNCH_SHOWS, launch_bound),
    Rule(f"{P}.prefill_tail.proportional", ("start", "Pt", "tt", "kt"),
         lambda v: _ks_agree(v, "Pt", "tt", "kt") and vals(v["Pt"])[0] == v["start"] and len(vals(v["kt"])) >= 2
         and all(0.8 <= k <= 1.25 for k in vals(v["kt"]))),
    Rule(f"{P}.prefill_tail.proportional_last", SEGMENT_SHOWS, _last_segment(0.8, 1.25, closed=True)),
    Rule(f"{P}.prefill_tail.speeding", SEGMENT_SHOWS, _last_segment(0.5, 0.8)),
    Rule(f"{P}.prefill_tail.slow", ("Ps", "ts", "ks"),
         lambda v: _ks_agree(v) and all(-0.25 <= k < 0.5 for k in vals(v["ks"]))),
    Rule(f"{P}.prefill_tail.steep", SEGMENT_SHOWS, _last_segment(1.25, math.inf), substantive=False),
    Rule(f"{P}.prefill_tail.noisy", ("Ps", "ts"), substantive=False),
    Rule(f"{P}.prefill_tail.unmeasured", substantive=False),
))

SPEEDUP = Chooser(f"{P}.speedup", (
    Rule(f"{P}.speedup.below_bound", ("best", "best_P", "bound"), lambda v: v["best"] <= v["bound"]),
    Rule(f"{P}.speedup.above_bound", ("best", "best_P", "bound"), lambda v: v["best"] > v["bound"]),
    Rule(f"{P}.speedup.unmeasured", substantive=False),
))

LONG_P = 32  # "a long prompt": from this many tokens one prefill pass must beat feeding them one by one


def _one_pass_faster(v) -> bool:
    xs = vals(v["xs"])
    return len(vals(v["Ps"])) == len(xs) and all(x > 1 for x in xs)


def _same_work(agree: bool):
    def holds(v) -> bool:
        return close(v["off"], 100 * (v["x"] - 1), 1) and (abs(v["x"] - 1) <= SAME / 100) == agree
    return holds


SAME_WORK = Chooser(f"{P}.same_work", (
    Rule(f"{P}.same_work.agree", ("x", "off"), _same_work(True)),
    Rule(f"{P}.same_work.off", ("x", "off"), _same_work(False), substantive=False),
    Rule(f"{P}.same_work.unmeasured", substantive=False),
))

ONE_PASS = Chooser(f"{P}.one_pass", (
    Rule(f"{P}.one_pass.faster", ("Ps", "xs"), _one_pass_faster),
    Rule(f"{P}.one_pass.not_faster", ("p", "x"), lambda v: v["x"] <= 1, substantive=False),
    Rule(f"{P}.one_pass.unmeasured", substantive=False),
))


def _level_after_peak(v, ys: str = "rates") -> bool:
    Ps, rs = vals(v["Ps"]), vals(v[ys])
    m = Ps.index(v["P_peak"]) if v["P_peak"] in Ps else 0
    return 1 <= m < len(rs) - 1 and rs[m] == max(rs) and rising(rs[:m + 1]) and all(r >= 0.85 * rs[m] for r in rs[m:])


def _grew_overall(v) -> bool:
    xs = vals(v["xs"])
    return len(vals(v["Ps"])) == len(xs) >= 2 and v["g"] >= 2 and close(v["g"], xs[-1] / xs[0], 0.1)


SPEEDUP_GROWTH = Chooser(f"{P}.speedup_growth", (
    Rule(f"{P}.speedup_growth.rising", ("Ps", "xs"), lambda v: len(vals(v["Ps"])) == len(vals(v["xs"])) and rising(vals(v["xs"]))),
    Rule(f"{P}.speedup_growth.rise_then_level", ("Ps", "xs", "P_peak"), lambda v: _level_after_peak(v, "xs")),
    Rule(f"{P}.speedup_growth.overall", ("Ps", "xs", "g"), _grew_overall),
    Rule(f"{P}.speedup_growth.irregular", ("Ps", "xs"), substantive=False),
    Rule(f"{P}.speedup_growth.unmeasured", substantive=False),
))


def _level_after_small_dips(v) -> bool:
    """Rising to ``P_peak`` but for falls each within SAME (timing noise), then level: every later point at least
    85 % of the peak; at least two points before the peak, and the peak at least twice the first point."""
    Ps, rs = vals(v["Ps"]), vals(v["rates"])
    m = Ps.index(v["P_peak"]) if v["P_peak"] in Ps else 0
    return (len(Ps) == len(rs) and 2 <= m < len(rs) - 1 and rs[m] == max(rs) and rs[m] >= 2 * rs[0]
            and all(b >= (1 - SAME / 100) * a for a, b in zip(rs[:m], rs[1:m + 1]))
            and all(r >= 0.85 * rs[m] for r in rs[m:]))


def _one_dip(v) -> bool:
    """Rising at every step but one, from ``p`` to ``q``, where it fell by less than SAME; ``g``: last over first, ≥ 2."""
    Ps, rs = vals(v["Ps"]), vals(v["rates"])
    if len(Ps) != len(rs) or v["p"] not in Ps[:-1]:
        return False
    i = Ps.index(v["p"])
    dips = [j for j in range(len(rs) - 1) if rs[j + 1] <= rs[j]]
    return (dips == [i] and Ps[i + 1] == v["q"] and rs[i + 1] >= (1 - SAME / 100) * rs[i]
            and v["g"] >= 2 and close(v["g"], rs[-1] / rs[0], 0.1))


def _one_drop(v) -> bool:
    """Rising at every step but one (``p`` to ``q``, a drop of any size, printed as ``drop``), the last point above
    every point before the drop, and ``g`` (last over first) ≥ 2: one interrupted timing in a rising series."""
    Ps, rs = vals(v["Ps"]), vals(v["rates"])
    if len(Ps) != len(rs) or v["p"] not in Ps[:-1]:
        return False
    i = Ps.index(v["p"])
    dips = [j for j in range(len(rs) - 1) if rs[j + 1] <= rs[j]]
    return (dips == [i] and Ps[i + 1] == v["q"] and rs[-1] > max(rs[:i + 1]) and v["g"] >= 2
            and close(v["g"], rs[-1] / rs[0], 0.1) and close(v["drop"], 100 * (rs[i + 1] / rs[i] - 1), 1))


PREFILL_RATES = Chooser(f"{P}.prefill_rates", (
    Rule(f"{P}.prefill_rates.rising", ("Ps", "rates"), lambda v: rising(vals(v["rates"]))),
    Rule(f"{P}.prefill_rates.rise_then_level", ("Ps", "rates", "P_peak"), _level_after_peak),
    Rule(f"{P}.prefill_rates.rise_then_level_dips", ("Ps", "rates", "P_peak"), _level_after_small_dips),
    Rule(f"{P}.prefill_rates.one_dip", ("Ps", "rates", "p", "q", "g"), _one_dip),
    Rule(f"{P}.prefill_rates.overall", ("Ps", "rates", "p", "q", "drop", "g"), _one_drop),
    Rule(f"{P}.prefill_rates.irregular", ("Ps", "rates"), substantive=False),
    Rule(f"{P}.prefill_rates.unmeasured", substantive=False),
))


_GROWTH = "实测：P = {Ps} 时预填充 {ts}，P 从头到尾 token 数变为 {tokens} 倍，耗时 ×{ratio}"
TEMPLATES = {  # key -> its Chinese sentence (ZH, in __init__.py)
    f"{P}.prefill_growth.unmeasured": "这次没有测出有效的预填充时间；" + RERUN_SWEEP,
    f"{P}.prefill_tail.unmeasured": "这次没有测出有效的预填充时间，说不准何时被算力卡住；" + RERUN_SWEEP,
    f"{P}.prefill_rates.unmeasured": "这次没有测出有效的预填充速率；" + RERUN_SWEEP,
    f"{P}.prefill_growth.launch_bound": LAUNCH_TEXT + "。",
    f"{P}.prefill_growth.barely": _GROWTH + "：每一段都只涨了一点，远比 token 数涨得慢，正是理想的情形——权重只读一遍，"
                                  "就供 P 个 token 一起用。",
    f"{P}.prefill_growth.slow": _GROWTH + "：每一段都涨得比 token 数慢得多，和理想的情形一致——权重只读一遍，就供 P 个 token "
                                "一起用；但也不是不涨，这台机器上短提示词的运算和别的开销已经占了一部分时间。",
    f"{P}.prefill_growth.slow_steepest": _GROWTH + "：每一段都比 token 数涨得慢，但不是每一段都慢得多——P = {ps} → {qs} 这一段"
                                         " ×{step}，最接近 token 数的 ×{tok}。整体上和理想的情形一致——权重只读一遍，就供 P 个"
                                         " token 一起用；但也不是不涨，这台机器上短提示词的运算和别的开销已经占了一部分时间。",
    f"{P}.prefill_growth.slow_steepest_matvec": _GROWTH + "：每一段都比 token 数涨得慢，但不是每一段都慢得多——P = {ps} → "
                                                "{qs} 这一段 ×{step}，最接近 token 数的 ×{tok}：P = 1 是矩阵乘向量，P ≥ 2 换成"
                                                "行数很少的矩阵乘，见选学「行数很少的矩阵乘」。整体上和理想的情形一致——权重只读"
                                                "一遍，就供 P 个 token 一起用。",
    f"{P}.prefill_growth.matvec_jump": _GROWTH + "：P = {ps} → {qs} 这一段涨了 ×{step}（token 数 ×{tok}），之后几乎不涨："
                                       "1 行的输入走 PyTorch 的矩阵乘向量内核，2 行及以上换成矩阵乘内核，在这台 CPU 上读"
                                       "权重更慢（见选学「行数很少的矩阵乘」）。从 P = {qs} 起和理想的情形一致"
                                       "——权重只读一遍，就供 P 个 token 一起用。",
    f"{P}.prefill_growth.proportional": _GROWTH + "：差不多和 token 数成正比，不是理想的「起初涨得很慢」。这台机器上，连很短的"
                                        "提示词也已经被运算（或别的随 P 增长的开销）卡住。",
    f"{P}.prefill_growth.slow_overall": _GROWTH + "：从头到尾比 token 数涨得慢，和理想的情形一致——权重只读一遍，就供 P 个 "
                                        "token 一起用；只有 P = {ps} → {qs} 这一段涨了 ×{step}，几乎和 token 数（×{tok}）"
                                        "涨得一样快（一段的计时容易被机器上别的程序拖慢，看整体走向）。",
    f"{P}.prefill_growth.slow_overall_faster": _GROWTH + "：从头到尾比 token 数涨得慢，和理想的情形一致——权重只读一遍，"
                                               "就供 P 个 token 一起用；只有 P = {ps} → {qs} 这一段涨了 ×{step}，比 token 数"
                                               "（×{tok}）涨得还快（一段的计时容易被机器上别的程序拖慢，看整体走向）。",
    f"{P}.prefill_growth.dropped": _GROWTH + "，但中间 P = {p} 到 {q} 反而快了 {drop}：这次的数字起伏太大（机器忙），看不出"
                                   "起初的走势；" + RERUN_SWEEP,
    f"{P}.prefill_growth.uneven": "实测：P = {Ps} 时预填充 {ts}：各段涨得很不一致（有的段比 token 数涨得还快），这次看不出起初的"
                                  "走势；" + RERUN_SWEEP,
    f"{P}.same_work.agree": "P = 1 时一次预填充和逐个送入本是同一件事（都是 1 个 token 的一次前向），倍数应为 1；这次是 "
                            "{x}（{off}），在 ±15% 以内：这次计时的误差不大。",
    f"{P}.same_work.off": "P = 1 时一次预填充和逐个送入本是同一件事（都是 1 个 token 的一次前向），倍数应为 1；这次是 {x}，"
                          "偏离了 {off}：这就是这次计时的误差，表里的倍数都可能差这么多；" + RERUN_SWEEP,
    f"{P}.same_work.unmeasured": "这次没有测出 P = 1 的有效时间；" + RERUN_SWEEP,
    f"{P}.one_pass.faster": "P = {Ps} 时，逐个送入分别要一次预填充的 {xs} 倍时间：这些长度上一次预填充都更快。",
    f"{P}.one_pass.not_faster": "P = {p} 时逐个送入只要一次预填充的 {x} 倍时间，这次一次预填充没有更快：多半是测它的那一刻"
                                "机器正忙；" + RERUN_SWEEP,
    f"{P}.one_pass.unmeasured": "这次没有测出有效的预填充和解码时间，比不了一次预填充和逐个送入；" + RERUN_SWEEP,
    f"{P}.speedup_growth.rising": "逐个送入 ÷ 一次预填充的倍数（P = {Ps}）：{xs}，随 P 一路增大：提示词越长，一次前向省下的越多。",
    f"{P}.speedup_growth.rise_then_level": "逐个送入 ÷ 一次预填充的倍数（P = {Ps}）：{xs}，一路增大到 P = {P_peak}，之后不再"
                                           "明显增大（都在最大值的 85% 以上）。",
    f"{P}.speedup_growth.overall": "逐个送入 ÷ 一次预填充的倍数（P = {Ps}）：{xs}，从最短到最长的提示词整体增大了 ×{g}，但不是"
                                   "每一步都增大（最短的几个提示词之间换了计算内核、长提示词趋于平稳，都会让某一步停住不涨；往下掉则多半是"
                                   "某个长度的计时被机器上别的程序拖慢；看整体走向）。",
    f"{P}.speedup_growth.irregular": "逐个送入 ÷ 一次预填充的倍数（P = {Ps}）：{xs}，看不出随 P 增大的走势：这次的计时被打断得"
                                     "太多；" + RERUN_SWEEP,
    f"{P}.speedup_growth.unmeasured": "这次没有测出有效的倍数；" + RERUN_SWEEP,
    f"{P}.ridge.crossed": "预填充的算术强度约为 P / 2：P 超过约 2 × 转折点 = {twice} 时就越过本机的转折点（{ridge} FLOP/字节；K/V "
                          "和嵌入也要读写，实际的强度比 P / 2 略低）。测过的长度里，P = {P} 的算术强度 {I} 已不低于转折点。",
    f"{P}.ridge.not_crossed": "预填充的算术强度约为 P / 2：P 超过约 2 × 转折点 = {twice} 时就越过本机的转折点（{ridge} FLOP/字节）。"
                              "测过最长的 P = {P}，算术强度 {I}，还在转折点左边。",
    f"{P}.ridge.unmeasured": "这次的屋顶没有量出有效的转折点；" + RERUN_ROOFS,
    f"{P}.prefill_tail.launch_bound": LAUNCH_TEXT + "，离两道屋顶都很远，看不出何时被算力卡住。",
    f"{P}.prefill_tail.proportional": "实测：从 P = {start} 起（P = {Pt}，预填充 {tt}），每一段耗时的增长指数 {kt} 都在 0.8 到 "
                                      "1.25 之间（完全成正比时是 1）：预填充的耗时与 P 差不多成正比，它被算力卡住了。",
    f"{P}.prefill_tail.proportional_last": "实测：最后一段 P = {Pa} → {Pb}，预填充从 {ta} 到 {tb}，增长指数 {k}，在 0.8 到 "
                                           "1.25 之间（完全成正比时是 1）：预填充的耗时与 P 差不多成正比，它被算力卡住了。",
    f"{P}.prefill_tail.speeding": "实测：最后一段 P = {Pa} → {Pb}，预填充从 {ta} 到 {tb}，增长指数 {k}（完全成正比时是 1，不涨是 0）："
                                  "涨得已经不慢，但还没有与 P 成正比：开始接近算力的限制，还没有完全被卡住。",
    f"{P}.prefill_tail.slow": "实测：P = {Ps} 时预填充 {ts}，每一段的增长指数 {ks} 都低于 0.5：耗时一直比 P 涨得慢得多，"
                              "还没有被算力卡住。",
    f"{P}.prefill_tail.steep": "实测：P = {Pa} → {Pb}，预填充从 {ta} 涨到 {tb}，增长指数 {k}，比 token 数涨得还快：被算力卡住时"
                               "耗时最多与 P 成正比，这一段多半是被机器上别的程序拖慢了，这次说不准从哪里开始成正比；" + RERUN_SWEEP,
    f"{P}.prefill_tail.noisy": "实测：P = {Ps} 时预填充 {ts}：各段的增长起伏不定，这次说不准预填充从哪里开始被算力卡住；"
                               + RERUN_SWEEP,
    f"{P}.speedup.below_bound": "倍数（逐个送入 ÷ 一次预填充）最大是 {best}（P = {best_P}）；预填充碰到矩阵乘屋顶时，倍数最多约为 "
                                "矩阵乘速率 ÷ 解码每秒运算数 = {bound}。",
    f"{P}.speedup.above_bound": "倍数（逐个送入 ÷ 一次预填充）最大是 {best}（P = {best_P}），已经超过按屋顶估的上限 矩阵乘速率 ÷ "
                                "解码每秒运算数 = {bound}：屋顶只是一次抽样，这次量低了（测它时机器更忙），或者预填充的矩阵乘形状"
                                "比测屋顶用的跑得更快。",
    f"{P}.speedup.unmeasured": "这次算不出倍数的上限；" + RERUN_SWEEP,
    f"{P}.prefill_rates.rising": "图上预填充每秒的运算数（P = {Ps}）：{rates}，随 P 每一个点都比前一个高。",
    f"{P}.prefill_rates.rise_then_level": "图上预填充每秒的运算数（P = {Ps}）：{rates}，一路上升到 P = {P_peak}，之后持平"
                                          "（都在最高值的 85% 以上）。",
    f"{P}.prefill_rates.rise_then_level_dips": "图上预填充每秒的运算数（P = {Ps}）：{rates}，一路上升到 P = {P_peak}"
                                               "（中间的回落都不到 15%，在计时误差以内），之后持平（都在最高值的 85% 以上）。",
    f"{P}.prefill_rates.one_dip": "图上预填充每秒的运算数（P = {Ps}）：{rates}，除 P = {p} → {q} 一处小回落外一路上升，"
                                  "从最短到最长整体 ×{g}。",
    f"{P}.prefill_rates.overall": "图上预填充每秒的运算数（P = {Ps}）：{rates}，除 P = {p} → {q} 一处回落（{drop}，计时被打断）"
                                  "外一路上升，从最短到最长整体 ×{g}。",
    f"{P}.prefill_rates.irregular": "图上预填充每秒的运算数（P = {Ps}）：{rates}，高低起伏，不是一路上升：这次的计时被打断得太多，"
                                    "看不清走势；" + RERUN_SWEEP,
}

# -- the same claims in English (EN, in __init__.py): the same keys, the same fields ----------------------------
_GROWTH_EN = ("Measured: at P = {Ps} prefill takes {ts}; from the first P to the last the tokens grow {tokens} times, "
              "the time ×{ratio}")
_IDEAL_EN = "the ideal case: the weights are read once and serve all P tokens together"
_RATES_EN = "The prefill's operations per second on the plot (P = {Ps}): {rates}"
_SPEEDUPS_EN = "One by one ÷ one prefill (P = {Ps}): {xs}"
TEMPLATES_EN = {
    f"{P}.prefill_growth.unmeasured": "This run measured no valid prefill time; " + RERUN_SWEEP_EN,
    f"{P}.prefill_tail.unmeasured": "This run measured no valid prefill time, so it cannot tell when compute starts to "
                                    "limit it; " + RERUN_SWEEP_EN,
    f"{P}.prefill_rates.unmeasured": "This run measured no valid prefill rate; " + RERUN_SWEEP_EN,
    f"{P}.prefill_growth.launch_bound": LAUNCH_TEXT_EN + ".",
    f"{P}.prefill_growth.barely": _GROWTH_EN + ": every segment grew only a little, far slower than the tokens: exactly "
                                  + _IDEAL_EN + ".",
    f"{P}.prefill_growth.slow": _GROWTH_EN + ": every segment grew much slower than the tokens, in line with " + _IDEAL_EN
                                + "; but it does grow: on this machine a short prompt's compute and other overheads "
                                "already take part of the time.",
    f"{P}.prefill_growth.slow_steepest": _GROWTH_EN + ": every segment grew slower than the tokens, but not every one much "
                                         "slower: P = {ps} → {qs} took ×{step}, the closest to the tokens' ×{tok}. On the "
                                         "whole this is in line with " + _IDEAL_EN + "; but it does grow: on this machine "
                                         "a short prompt's compute and other overheads already take part of the time.",
    f"{P}.prefill_growth.slow_steepest_matvec": _GROWTH_EN + ": every segment grew slower than the tokens, but not every "
                                                "one much slower: P = {ps} → {qs} took ×{step}, the closest to the "
                                                "tokens' ×{tok}. At P = 1 it is a matrix-vector product, from P ≥ 2 a "
                                                "matrix product of few rows (see the optional section \"Matrix "
                                                "multiplications with very few rows\"). On the whole this is in line with " + _IDEAL_EN + ".",
    f"{P}.prefill_growth.matvec_jump": _GROWTH_EN + ": from P = {ps} to {qs} the time grew ×{step} (the tokens ×{tok}), "
                                       "then barely grew: a 1-row input takes PyTorch's matrix-vector kernel, while 2 "
                                       "or more rows take a matrix-multiply kernel that reads the weights more slowly "
                                       "on this CPU (see the optional section \"Matrix multiplications with very few "
                                       "rows\"). From P = {qs} on this is " + _IDEAL_EN + ".",
    f"{P}.prefill_growth.proportional": _GROWTH_EN + ": roughly in proportion to the tokens, not the ideal \"slow growth "
                                        "at first\". On this machine even a very short prompt is already limited by "
                                        "compute (or by other overheads that grow with P).",
    f"{P}.prefill_growth.slow_overall": _GROWTH_EN + ": from the first to the last it grew slower than the tokens, in "
                                        "line with " + _IDEAL_EN + "; only the segment P = {ps} → {qs} grew ×{step}, "
                                        "almost as fast as the tokens (×{tok}) (one segment's timing is easily slowed "
                                        "by other programs on the machine; look at the overall trend).",
    f"{P}.prefill_growth.slow_overall_faster": _GROWTH_EN + ": from the first to the last it grew slower than the tokens, "
                                               "in line with " + _IDEAL_EN + "; only the segment P = {ps} → {qs} grew "
                                               "×{step}, even faster than the tokens (×{tok}) (one segment's timing is "
                                               "easily slowed by other programs on the machine; look at the overall "
                                               "trend).",
    f"{P}.prefill_growth.dropped": _GROWTH_EN + ", but from P = {p} to {q} it got {drop} faster: the numbers swing too "
                                   "much this time (a busy machine) to show the early trend; " + RERUN_SWEEP_EN,
    f"{P}.prefill_growth.uneven": "Measured: at P = {Ps} prefill takes {ts}: the segments grew very unevenly (some "
                                  "faster than the tokens), so this run does not show the early trend; " + RERUN_SWEEP_EN,
    f"{P}.same_work.agree": "At P = 1 one prefill and feeding one by one are the same thing (one forward pass of 1 "
                            "token), so the ratio should be 1; this time it is {x} ({off}), within ±15%: this run's "
                            "timing error is small.",
    f"{P}.same_work.off": "At P = 1 one prefill and feeding one by one are the same thing (one forward pass of 1 "
                          "token), so the ratio should be 1; this time it is {x}, off by {off}: that is this run's "
                          "timing error, and every ratio in the table may be off by as much; " + RERUN_SWEEP_EN,
    f"{P}.same_work.unmeasured": "This run measured no valid time at P = 1; " + RERUN_SWEEP_EN,
    f"{P}.one_pass.faster": "At P = {Ps}, feeding the tokens one by one takes {xs} times as long as one prefill: at "
                            "these lengths one prefill is always faster.",
    f"{P}.one_pass.not_faster": "At P = {p}, feeding the tokens one by one takes only {x} times as long as one prefill, "
                                "so one prefill was not faster this time: most likely the machine was busy the moment "
                                "it was timed; " + RERUN_SWEEP_EN,
    f"{P}.one_pass.unmeasured": "This run measured no valid prefill and decode times, so it cannot compare one prefill "
                                "with feeding the tokens one by one; " + RERUN_SWEEP_EN,
    f"{P}.speedup_growth.rising": _SPEEDUPS_EN + ", growing all the way with P: the longer the prompt, the more one "
                                  "forward pass saves.",
    f"{P}.speedup_growth.rise_then_level": _SPEEDUPS_EN + ", growing up to P = {P_peak} and no longer clearly after it "
                                           "(all at 85% of the largest or more).",
    f"{P}.speedup_growth.overall": _SPEEDUPS_EN + ", ×{g} from the shortest prompt to the longest, but not growing at "
                                   "every step (a step can stall where the kernel changes between the shortest prompts or "
                                   "where long prompts level off, and a dip usually means other programs on the machine "
                                   "slowed one length's timing; look at the overall trend).",
    f"{P}.speedup_growth.irregular": _SPEEDUPS_EN + ": no trend with P shows: this run's timings were interrupted too "
                                     "often; " + RERUN_SWEEP_EN,
    f"{P}.speedup_growth.unmeasured": "This run measured no valid ratio; " + RERUN_SWEEP_EN,
    f"{P}.ridge.crossed": "Prefill's arithmetic intensity is about P / 2: beyond P ≈ 2 × ridge = {twice} it crosses this "
                          "machine's ridge point ({ridge} FLOP/byte; K/V and the embeddings are read and written too, "
                          "so the real intensity is a little below P / 2). Of the lengths measured, the first at or past the "
                          "ridge is P = {P}, with an intensity of {I}.",
    f"{P}.ridge.not_crossed": "Prefill's arithmetic intensity is about P / 2: beyond P ≈ 2 × ridge = {twice} it crosses "
                              "this machine's ridge point ({ridge} FLOP/byte). The longest P measured, P = {P}, has an "
                              "intensity of {I}, still left of the ridge.",
    f"{P}.ridge.unmeasured": "This run's roofs gave no valid ridge point; " + RERUN_ROOFS_EN,
    f"{P}.prefill_tail.launch_bound": LAUNCH_TEXT_EN + ", far from both roofs, so it does not show when compute starts "
                                      "to limit it.",
    f"{P}.prefill_tail.proportional": "Measured: from P = {start} on (P = {Pt}, prefill {tt}), every segment's growth "
                                      "exponent {kt} lies between 0.8 and 1.25 (exactly in proportion it is 1): the "
                                      "prefill time is roughly in proportion to P; compute limits it.",
    f"{P}.prefill_tail.proportional_last": "Measured: over the last segment, P = {Pa} → {Pb}, prefill went from {ta} to "
                                           "{tb}, a growth exponent of {k}, between 0.8 and 1.25 (exactly in proportion "
                                           "it is 1): the prefill time is roughly in proportion to P; compute limits it.",
    f"{P}.prefill_tail.speeding": "Measured: over the last segment, P = {Pa} → {Pb}, prefill went from {ta} to {tb}, a "
                                  "growth exponent of {k} (in proportion it is 1, flat 0): no longer growing slowly, but "
                                  "not yet in proportion to P: it is nearing the limit of compute, not fully held by it "
                                  "yet.",
    f"{P}.prefill_tail.slow": "Measured: at P = {Ps} prefill takes {ts}; every segment's growth exponent {ks} is below "
                              "0.5: the time keeps growing much slower than P; compute does not limit it yet.",
    f"{P}.prefill_tail.steep": "Measured: at P = {Pa} → {Pb}, prefill went from {ta} to {tb}, a growth exponent of {k}, "
                               "faster than the tokens: when compute limits it, the time grows at most in proportion "
                               "to P, so most likely other programs on the machine slowed this segment, and this run "
                               "cannot tell where the growth becomes proportional; " + RERUN_SWEEP_EN,
    f"{P}.prefill_tail.noisy": "Measured: at P = {Ps} prefill takes {ts}: the segments' growth swings up and down, so "
                               "this run cannot tell where compute starts to limit prefill; " + RERUN_SWEEP_EN,
    f"{P}.speedup.below_bound": "The largest ratio (one by one ÷ one prefill) is {best} (P = {best_P}); once prefill "
                                "reaches the matmul roof, the ratio is at most about matmul rate ÷ decode's operations "
                                "per second = {bound}.",
    f"{P}.speedup.above_bound": "The largest ratio (one by one ÷ one prefill) is {best} (P = {best_P}), above the bound "
                                "estimated from the roofs, matmul rate ÷ decode's operations per second = {bound}: a roof "
                                "is only one sample and came out low this time (the machine was busier when it was "
                                "measured), or prefill's matmul shapes run faster than the one the roof was measured "
                                "with.",
    f"{P}.speedup.unmeasured": "This run cannot work out the ratio's bound; " + RERUN_SWEEP_EN,
    f"{P}.prefill_rates.rising": _RATES_EN + ", each point higher than the one before as P grows.",
    f"{P}.prefill_rates.rise_then_level": _RATES_EN + ", rising up to P = {P_peak}, then level (all at 85% of the "
                                          "highest or more).",
    f"{P}.prefill_rates.rise_then_level_dips": _RATES_EN + ", rising up to P = {P_peak} (every dip on the way under "
                                               "15%, within the timing noise), then level (all at 85% of the highest or "
                                               "more).",
    f"{P}.prefill_rates.one_dip": _RATES_EN + ", rising all the way but for one small dip at P = {p} → {q}; ×{g} from "
                                  "the shortest to the longest.",
    f"{P}.prefill_rates.overall": _RATES_EN + ", rising all the way but for one drop at P = {p} → {q} ({drop}, an "
                                  "interrupted timing); ×{g} from the shortest to the longest.",
    f"{P}.prefill_rates.irregular": _RATES_EN + ", up and down, not rising all the way: this run's timings were "
                                    "interrupted too often to show the trend; " + RERUN_SWEEP_EN,
}

CHOOSERS = (PREFILL_GROWTH, RIDGE, PREFILL_TAIL, SPEEDUP, SAME_WORK, ONE_PASS, SPEEDUP_GROWTH, PREFILL_RATES)
