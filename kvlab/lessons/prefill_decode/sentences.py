"""Chapter 3.3's claims (issue 31): every sentence that reads a measurement is chosen by a
:class:`~kvlab.claims.Chooser` whose predicate is stated over the very numbers printed with it; :data:`ZH` writes
them in Chinese and :func:`show_claims` displays them with their record. The ``explain_*`` functions of the
section modules build the numbers and call these choosers."""
from __future__ import annotations

import math

from ...claims import ABSOLUTE, DIFFERENCE, Catalog, Chooser, Claim, Number, Rule, number, series, show

P = "prefill_decode"  # every key of this chapter starts with it
SAME = 15  # percent: two measurements of the same thing within ±15 % of each other agree
NEAR, FAR, FULL = 70, 35, 90  # percent of a roof: close to it from 70, far below it under 35, used up from 90
LAUNCH_WORK, LAUNCH_TIME = 16, 1.3  # the work grew ≥ 16x and the time < 1.3x: launch-bound (a GPU's shape)


# -- printing numbers ------------------------------------------------------------------------------------------
def _decimals(values) -> int:
    """Decimals that give the smallest nonzero value at least 3 significant digits (2 to 4)."""
    small = min((abs(x) for x in values if x and math.isfinite(x)), default=1.0)
    return max(2, min(4, 2 - math.floor(math.log10(small))))


def ms(seconds: float) -> Number:
    return number(seconds * 1e3, _decimals([seconds * 1e3]), "ms")


def ms_series(seconds) -> Number:
    values = [s * 1e3 for s in seconds]
    return series(values, _decimals(values), "ms")


def us(seconds: float) -> Number:
    x = seconds * 1e6
    return number(x, 2 if x < 10 else 1 if x < 1000 else 0, "µs")


def count(n: int) -> Number:
    return Number(f"{n:,}")


def counts(ns) -> Number:
    return series(ns, 0) if len(ns) > 1 else count(ns[0])


def some(xs, digits: int = 2, unit: str = "", kind: str = ABSOLUTE) -> Number:
    """One number or a series of them, as many as ``xs`` has."""
    return series(xs, digits, unit, kind) if len(xs) > 1 else number(xs[0], digits, unit, kind)


def pct(x: float) -> Number:
    """A share (0.7 -> 70%)."""
    return number(100 * x, 0, "%")


def signed_pct(x: float) -> Number:
    """A relative difference with its sign (0.2 -> +20%, -0.1 -> -10%)."""
    v = 100 * x
    text = f"{v:+.0f}" if math.isfinite(v) else str(v)
    return Number("0" if text in ("+0", "-0") else text, "%", DIFFERENCE)


def times(x: float, digits: int = 2) -> Number:
    """A ratio, printed bare: the sentence says 「×」 or 「倍」."""
    return number(x, digits)


def gflops(flops_per_s: float) -> Number:
    return number(flops_per_s / 1e9, 1, "GFLOP/s")


def per_s(tokens_per_s: float) -> Number:
    """A throughput in token/s, to 3 significant digits or more (whole tokens from 100)."""
    x = tokens_per_s
    return number(x, 0 if not math.isfinite(x) or abs(x) >= 100 else 1 if abs(x) >= 10 else 2, "token/s")


def gbs(bytes_per_s: float) -> Number:
    return number(bytes_per_s / 1e9, 1, "GB/s")


# -- reading printed numbers back ------------------------------------------------------------------------------
def vals(v) -> tuple[float, ...]:
    return v if isinstance(v, tuple) else (v,)


def close(printed: float, computed: float, step: float = 0.01) -> bool:
    """A printed number agrees with the one computed from other printed numbers: within its rounding step, and
    2 % for the rounding of the numbers it was computed from."""
    return abs(printed - computed) <= step / 2 + 0.02 * abs(computed) + 1e-12


def exponents(xs, ts) -> list[float]:
    """The growth exponent k of each segment (t ~ x^k), from printed numbers."""
    return [math.log(b / a) / math.log(y / x) if min(x, y, a, b) > 0 and x != y else math.nan
            for x, y, a, b in zip(xs, xs[1:], ts, ts[1:])]


def _launch(v) -> bool:
    return v["Pn"] / v["P0"] >= LAUNCH_WORK and v["ratio_all"] < LAUNCH_TIME and close(v["ratio_all"], v["tn"] / v["t0"])


LAUNCH_SHOWS = ("P0", "Pn", "t0", "tn", "ratio_all")


def _rising(xs) -> bool:
    return all(b > a for a, b in zip(xs, xs[1:]))


# -- the timeline ----------------------------------------------------------------------------------------------
ITL_TAIL = Chooser(f"{P}.itl_tail", (
    Rule(f"{P}.itl_tail.few", ("n", "p99", "low", "high"), lambda v: v["n"] < 100 and v["low"] <= v["p99"] <= v["high"]),
    Rule(f"{P}.itl_tail.many", ("n", "p99"), lambda v: v["n"] >= 100),
    Rule(f"{P}.itl_tail.unmeasured", substantive=False),
))


def _parallel(share_max: float):
    def holds(v) -> bool:
        seq = v["P"] * v["itl"]
        return (close(v["sequential"], seq) and close(v["share"], 100 * v["ttft"] / v["sequential"], 1)
                and v["ttft"] < share_max * v["sequential"])
    return holds


PARALLEL = Chooser(f"{P}.parallel", (
    Rule(f"{P}.parallel.half", ("ttft", "P", "itl", "sequential", "share"), _parallel(0.5)),
    Rule(f"{P}.parallel.faster", ("ttft", "P", "itl", "sequential", "share", "runs"), _parallel(1.0)),
    Rule(f"{P}.parallel.unclear", ("ttft", "P", "itl", "sequential"), substantive=False),
    Rule(f"{P}.parallel.unmeasured", substantive=False),
))


def _panel(agree: bool):
    def holds(v) -> bool:
        d1, d2 = v["ttft_diff"], v["tpot_diff"]
        ok = (close(d1, 100 * (v["ttft_panel"] / v["ttft_run"] - 1), 1)
              and close(d2, 100 * (v["tpot_panel"] / v["tpot_run"] - 1), 1))
        return ok and ((abs(d1) <= SAME and abs(d2) <= SAME) == agree)
    return holds


PANEL_SHOWS = ("n", "ttft_panel", "ttft_run", "ttft_diff", "tpot_panel", "tpot_run", "tpot_diff")
PANEL = Chooser(f"{P}.panel", (
    Rule(f"{P}.panel.same", PANEL_SHOWS, _panel(True)),
    Rule(f"{P}.panel.differs", PANEL_SHOWS, _panel(False)),
    Rule(f"{P}.panel.unmeasured", substantive=False),
))

STEP_BUDGET = Chooser(f"{P}.step_budget", (
    Rule(f"{P}.step_budget.overhead", ("measured", "bound", "ratio"),
         lambda v: v["ratio"] >= 3 and close(v["ratio"], v["measured"] * 1e3 / v["bound"], 1)),
    Rule(f"{P}.step_budget.near", ("measured", "bound", "ratio"),
         lambda v: v["ratio"] < 3 and close(v["ratio"], v["measured"] * 1e3 / v["bound"], 0.1)),
    Rule(f"{P}.step_budget.unmeasured", substantive=False),
))


# -- the prefill sweep -----------------------------------------------------------------------------------------
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


PREFILL_GROWTH = Chooser(f"{P}.prefill_growth", (
    Rule(f"{P}.prefill_growth.launch_bound", LAUNCH_SHOWS, _launch),
    Rule(f"{P}.prefill_growth.barely", GROWTH_SHOWS, _growth(-1, 0.25, -1, 0.75)),
    Rule(f"{P}.prefill_growth.slow", GROWTH_SHOWS, _growth(0.25, 0.75, -1, 0.75)),
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
    Rule(f"{P}.prefill_tail.launch_bound", LAUNCH_SHOWS, _launch),
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
    return 1 <= m < len(rs) - 1 and rs[m] == max(rs) and _rising(rs[:m + 1]) and all(r >= 0.85 * rs[m] for r in rs[m:])


def _grew_overall(v) -> bool:
    xs = vals(v["xs"])
    return len(vals(v["Ps"])) == len(xs) >= 2 and v["g"] >= 2 and close(v["g"], xs[-1] / xs[0], 0.1)


SPEEDUP_GROWTH = Chooser(f"{P}.speedup_growth", (
    Rule(f"{P}.speedup_growth.rising", ("Ps", "xs"), lambda v: len(vals(v["Ps"])) == len(vals(v["xs"])) and _rising(vals(v["xs"]))),
    Rule(f"{P}.speedup_growth.rise_then_level", ("Ps", "xs", "P_peak"), lambda v: _level_after_peak(v, "xs")),
    Rule(f"{P}.speedup_growth.overall", ("Ps", "xs", "g"), _grew_overall),
    Rule(f"{P}.speedup_growth.irregular", ("Ps", "xs"), substantive=False),
    Rule(f"{P}.speedup_growth.unmeasured", substantive=False),
))


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
    Rule(f"{P}.prefill_rates.rising", ("Ps", "rates"), lambda v: _rising(vals(v["rates"]))),
    Rule(f"{P}.prefill_rates.rise_then_level", ("Ps", "rates", "P_peak"), _level_after_peak),
    Rule(f"{P}.prefill_rates.one_dip", ("Ps", "rates", "p", "q", "g"), _one_dip),
    Rule(f"{P}.prefill_rates.overall", ("Ps", "rates", "p", "q", "drop", "g"), _one_drop),
    Rule(f"{P}.prefill_rates.irregular", ("Ps", "rates"), substantive=False),
    Rule(f"{P}.prefill_rates.unmeasured", substantive=False),
))

ROOF_SHOWS = ("P", "I", "rate", "share")
PREFILL_ROOF = Chooser(f"{P}.prefill_roof", (
    Rule(f"{P}.prefill_roof.launch_bound", LAUNCH_SHOWS, _launch),
    Rule(f"{P}.prefill_roof.above", ROOF_SHOWS, lambda v: v["share"] > 100),
    Rule(f"{P}.prefill_roof.peaked_earlier", (*ROOF_SHOWS, "best_P", "best_share"),
         lambda v: v["best_share"] >= v["share"] + SAME and v["best_P"] != v["P"]),
    Rule(f"{P}.prefill_roof.near", (*ROOF_SHOWS, "g"), lambda v: v["share"] >= NEAR and v["g"] <= 1 + SAME / 100),
    Rule(f"{P}.prefill_roof.near_rising", (*ROOF_SHOWS, "g"), lambda v: v["share"] >= NEAR and v["g"] > 1 + SAME / 100),
    Rule(f"{P}.prefill_roof.mid", ROOF_SHOWS, lambda v: FAR <= v["share"] < NEAR),
    Rule(f"{P}.prefill_roof.far", ROOF_SHOWS, lambda v: v["share"] < FAR),
    Rule(f"{P}.prefill_roof.unmeasured", substantive=False),
))

TREND_SHOWS = ("Pa", "Pb", "g")
PREFILL_TREND = Chooser(f"{P}.prefill_trend", (
    Rule(f"{P}.prefill_trend.level", TREND_SHOWS, lambda v: abs(v["g"] - 1) <= SAME / 100),
    Rule(f"{P}.prefill_trend.rising_above", (*TREND_SHOWS, "share"), lambda v: v["g"] > 1 and v["share"] > 100),
    Rule(f"{P}.prefill_trend.rising", TREND_SHOWS, lambda v: v["g"] > 1),
    Rule(f"{P}.prefill_trend.fell", TREND_SHOWS, substantive=False),
    Rule(f"{P}.prefill_trend.unmeasured", substantive=False),
))

LONG_RATE_SHOWS = ("P", "rate", "P1", "rate1", "dec")
LONG_RATE = Chooser(f"{P}.long_rate", (
    Rule(f"{P}.long_rate.highest", LONG_RATE_SHOWS, lambda v: v["rate"] > v["rate1"] and v["rate"] > v["dec"]),
    Rule(f"{P}.long_rate.above_decode", LONG_RATE_SHOWS, lambda v: v["dec"] < v["rate"] <= v["rate1"], substantive=False),
    Rule(f"{P}.long_rate.unclear", ("P", "rate", "dec"), lambda v: v["rate"] <= v["dec"], substantive=False),
    Rule(f"{P}.long_rate.unmeasured", substantive=False),
))

DECODE_SHOWS = ("P", "I", "gflops", "mm_share", "rate", "share")
FAR_SHOWS = (*DECODE_SHOWS, "step", "bound", "demo", "layers")
STEADY, BUSY = 1.10, 1.4  # a roof's fastest repeat over its median: within 1.10 the repeats agree; from 1.4 busy


def _far(v) -> bool:
    """Under FAR of the bandwidth, the step and its bandwidth bound printed agreeing with the share."""
    return v["share"] < FAR and close(v["share"], 100 * v["bound"] / v["step"], 1)


def _overhead_explains(v) -> bool:
    """The time beyond the bandwidth bound is at most twice the demo model's whole step scaled by the layers: the
    same few hundred small operators per step can account for it."""
    return v["step"] - v["bound"] <= 2 * v["demo"] * v["layers"]


DECODE_ROOF = Chooser(f"{P}.decode_roof", (
    Rule(f"{P}.decode_roof.above", DECODE_SHOWS, lambda v: v["share"] > 100 + SAME),
    Rule(f"{P}.decode_roof.full", DECODE_SHOWS, lambda v: v["share"] >= FULL),
    Rule(f"{P}.decode_roof.at_median", (*DECODE_SHOWS, "median", "med_share"),
         lambda v: v["share"] >= FAR and abs(v["rate"] / v["median"] - 1) <= SAME / 100
         and close(v["med_share"], 100 * v["rate"] / v["median"], 1)),
    Rule(f"{P}.decode_roof.near", DECODE_SHOWS, lambda v: v["share"] >= NEAR),
    Rule(f"{P}.decode_roof.part", DECODE_SHOWS, lambda v: v["share"] >= FAR),
    Rule(f"{P}.decode_roof.far_overhead", FAR_SHOWS, lambda v: _far(v) and _overhead_explains(v)),
    Rule(f"{P}.decode_roof.far_busy", (*FAR_SHOWS, "spread"),
         lambda v: _far(v) and not _overhead_explains(v) and v["spread"] >= BUSY, substantive=False),
    Rule(f"{P}.decode_roof.far_unexplained", FAR_SHOWS, lambda v: _far(v) and not _overhead_explains(v),
         substantive=False),
    Rule(f"{P}.decode_roof.unmeasured", substantive=False),
))


# -- the roofs -------------------------------------------------------------------------------------------------
ROOF_SPREAD = Chooser(f"{P}.roof_spread", (
    Rule(f"{P}.roof_spread.busy", ("bw", "mm"), lambda v: max(v["bw"], v["mm"]) >= BUSY),
    Rule(f"{P}.roof_spread.some", ("bw", "mm"), lambda v: max(v["bw"], v["mm"]) > STEADY),
    Rule(f"{P}.roof_spread.steady", ("bw", "mm"), lambda v: max(v["bw"], v["mm"]) <= STEADY),
    Rule(f"{P}.roof_spread.unmeasured", substantive=False),
))

BOUNDS_SHOWS = ("mflop", "compute", "mb", "read", "ratio")
WORKED_BOUNDS = Chooser(f"{P}.worked_bounds", (
    Rule(f"{P}.worked_bounds.memory", BOUNDS_SHOWS,
         lambda v: v["read"] >= v["compute"] and close(v["ratio"], v["read"] / v["compute"], 1)),
    Rule(f"{P}.worked_bounds.compute", BOUNDS_SHOWS,
         lambda v: v["read"] < v["compute"] and close(v["ratio"], v["compute"] / v["read"], 0.1)),
    Rule(f"{P}.worked_bounds.unmeasured", substantive=False),
))


# -- batching --------------------------------------------------------------------------------------------------
def _diff_agrees(a: str, b: str, d: str):
    return lambda v: close(v[d], 100 * (v[a] / v[b] - 1), 1)


BASELINE_SHOWS = ("b1", "P", "dec", "diff")
BATCH_BASELINE = Chooser(f"{P}.batch_baseline", (
    Rule(f"{P}.batch_baseline.same", BASELINE_SHOWS,
         lambda v: abs(v["diff"]) <= SAME and _diff_agrees("b1", "dec", "diff")(v)),
    Rule(f"{P}.batch_baseline.slower_here", BASELINE_SHOWS,
         lambda v: v["diff"] > SAME and _diff_agrees("b1", "dec", "diff")(v)),
    Rule(f"{P}.batch_baseline.faster_here", BASELINE_SHOWS,
         lambda v: v["diff"] < -SAME and _diff_agrees("b1", "dec", "diff")(v)),
    Rule(f"{P}.batch_baseline.unmeasured", substantive=False),
))

def _gain(v) -> bool:
    """The throughput ratio and the step-time ratio agree with the printed throughputs (step = B ÷ gain)."""
    return close(v["ratio"], v["tput"] / v["tput1"], 0.1) and close(v["step"], v["B"] * v["tput1"] / v["tput"])


GAIN_SHOWS = ("B", "tput1", "tput", "ratio", "step")
BATCH_GAIN = Chooser(f"{P}.batch_gain", (
    Rule(f"{P}.batch_gain.ideal", GAIN_SHOWS, lambda v: _gain(v) and v["ratio"] >= (1 - SAME / 100) * v["B"]),
    Rule(f"{P}.batch_gain.compute_capped", (*GAIN_SHOWS, "I", "ridge", "mm", "mflop", "cap", "cap_ratio"),
         lambda v: _gain(v) and v["tput"] > v["tput1"] and v["I"] >= v["ridge"] and v["tput"] <= v["cap"]
         and close(v["cap"], v["mm"] * 1e3 / v["mflop"], 1) and close(v["cap_ratio"], v["cap"] / v["tput1"], 0.1)),
    Rule(f"{P}.batch_gain.higher", GAIN_SHOWS, lambda v: _gain(v) and v["tput"] > v["tput1"]),
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

VS_SHOWS = ("B", "C", "d", "p", "diff")
BATCH_VS_PREFILL = Chooser(f"{P}.batch_vs_prefill", (
    Rule(f"{P}.batch_vs_prefill.same", VS_SHOWS, lambda v: abs(v["diff"]) <= SAME and _diff_agrees("d", "p", "diff")(v)),
    Rule(f"{P}.batch_vs_prefill.decode_higher", VS_SHOWS, lambda v: v["diff"] > SAME and _diff_agrees("d", "p", "diff")(v)),
    Rule(f"{P}.batch_vs_prefill.prefill_higher", VS_SHOWS, lambda v: v["diff"] < -SAME and _diff_agrees("d", "p", "diff")(v)),
    Rule(f"{P}.batch_vs_prefill.unmeasured", substantive=False),
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


# -- a few rows of a matmul ------------------------------------------------------------------------------------
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

MATVEC_SHOWS = ("rows", "mb", "ms", "rate", "bw", "share")
MATVEC_READ = Chooser(f"{P}.matvec_read", (
    Rule(f"{P}.matvec_read.faster", MATVEC_SHOWS, lambda v: v["share"] > 100 + SAME),
    Rule(f"{P}.matvec_read.full", MATVEC_SHOWS, lambda v: v["share"] >= 100 - SAME),
    Rule(f"{P}.matvec_read.slower", MATVEC_SHOWS, lambda v: v["share"] < 100 - SAME),
    Rule(f"{P}.matvec_read.unmeasured", substantive=False),
))

DECODE_VS_MATVEC = Chooser(f"{P}.decode_vs_matvec", (
    Rule(f"{P}.decode_vs_matvec.further", ("rate", "share", "of_matvec"), lambda v: v["of_matvec"] < v["share"]),
    Rule(f"{P}.decode_vs_matvec.unmeasured", substantive=False),
))


# -- engineering notes -----------------------------------------------------------------------------------------
ALLOCATOR = Chooser(f"{P}.allocator", (
    Rule(f"{P}.allocator.fragmented", ("grow", "pre"), lambda v: v["grow"] >= 1 and v["grow"] > 2 * v["pre"]),
    Rule(f"{P}.allocator.similar", ("grow", "pre"), lambda v: v["grow"] < 1 or v["grow"] <= 2 * v["pre"]),
    Rule(f"{P}.allocator.unmeasured", substantive=False),
))

PRECISION = Chooser(f"{P}.precision", (
    Rule(f"{P}.precision.ratio", ("int8", "fp16", "ratio", "params"),
         lambda v: v["fp16"] > 0 and close(v["ratio"], v["int8"] / v["fp16"], 1)),
    Rule(f"{P}.precision.fp16_exact", ("int8", "fp16", "params"), lambda v: v["fp16"] == 0),
    Rule(f"{P}.precision.unmeasured", substantive=False),
))

CHOOSERS = (ITL_TAIL, PARALLEL, PANEL, STEP_BUDGET, PREFILL_GROWTH, SAME_WORK, ONE_PASS, SPEEDUP_GROWTH, RIDGE, PREFILL_TAIL,
            SPEEDUP, PREFILL_RATES, PREFILL_ROOF, PREFILL_TREND, LONG_RATE, DECODE_ROOF, ROOF_SPREAD, WORKED_BOUNDS,
            BATCH_BASELINE, BATCH_GAIN, BATCH_LEFT, BATCH_ORDER, BATCH_SHAPE, BATCH_VS_PREFILL, OVERLAP, MATMUL_ROWS,
            MATMUL_SLOWDOWN, MATVEC_READ, DECODE_VS_MATVEC, ALLOCATOR, PRECISION)


# -- the Chinese sentences -------------------------------------------------------------------------------------
_CLOSE = "关掉别的占 CPU 的程序（或别的笔记本内核）"
_RERUN_TIMELINE = f"{_CLOSE}，再运行一次 `timeline = lesson.run_timeline(...)` 那一格。"
_RERUN_SWEEP = f"{_CLOSE}，再运行一次 `sweep = lesson.measure_prefill_sweep(big)` 那一格（然后重新运行后面的格子）。"
_RERUN_ROOFS = f"{_CLOSE}，再运行一次 `roofs = lesson.measure_roofs(device)` 那一格。"
_RERUN_BATCH = f"{_CLOSE}，再运行一次 `batch = lesson.measure_batch_sweep(big)` 那一格。"
_RERUN_SMALL = f"{_CLOSE}，再运行一次 `small = lesson.measure_small_matmuls(device)` 那一格。"
_LAUNCH = ("P 从 {P0} 增加到 {Pn}（耗时 {t0} → {tn}），预填充的耗时只 ×{ratio_all}：几乎不随 P 变化。一次前向的时间几乎全是"
           "固定开销（GPU 上是几百次内核启动），P 个 token 的运算藏在里面")
_GROWTH = "实测：P = {Ps} 时预填充 {ts}，P 从头到尾 token 多了 {tokens} 倍，耗时 ×{ratio}"
_ROOF = "预填充 P = {P}：I = {I} FLOP/字节，每秒 {rate}，是矩阵乘屋顶的 {share}"
_DECODE = ("解码（P = {P} 之后）：I = {I} FLOP/字节，每秒 {gflops}，只是矩阵乘屋顶的 {mm_share}；每秒搬运 {rate}，"
           "是测得带宽的 {share}")
_FAR = ("这一步 {step}，按带宽只要 {bound}；演示模型一整步（同样是几百个小算子）{demo}，这个模型的层数是它的 "
        "{layers} 倍：")
_BOUNDS = "手算的那一步解码：运算 {mflop} MFLOP ÷ 矩阵乘速率 = {compute}；搬运 {mb} MB ÷ 带宽 = {read}"
_BASELINE = ("B = 1 在这里一步 {b1}；上面提示词扫描里同一个模型在 P = {P} 之后的一步解码是 {dec}，这里比那里 {diff}")
_VS = "B = {B} 的解码（每条序列缓存里 {C} 个 token）每秒 {d}，P = {B} 的预填充 {p}，解码比预填充 {diff}"
_OVERLAP = ("按两者之和估：B = 1 时 I₁ = {I1} FLOP/字节，转折点 {ridge}，到转折点时单步是 B = 1 的 2 ÷ (1 + I₁/转折点) = "
            "{f} 倍（转折点远大于 I₁ 时接近两倍，比如 GPU 上）；按它算 B = 1 → {B} 应涨 ×{pred}，上面实测 {t1} → {tB}，"
            "×{meas}")
_ROWS = "x @ W，W 是 {mib} 的 FP32 矩阵：{rows} 行分别要 {ts}（每种测 {repeats} 次、交替进行，取最快的一次）"
_MATVEC = "{rows} 行 × W（矩阵乘向量）读 W 的速度：{mb} ÷ {ms} = {rate}，求和测得的带宽是 {bw}（{share}）"

ZH = Catalog("zh", {
    f"{P}.itl_tail.few": "{n} 个解码步的 p99（{p99}）只由最大的两个样本决定（在 {low} 和 {high} 之间）：不到 100 个样本时，"
                         "它反映的是一两次卡顿，不是稳定的分位数。",
    f"{P}.itl_tail.many": "p99（{p99}）来自 {n} 个解码步，是一个有意义的分位数。",
    f"{P}.itl_tail.unmeasured": "这次没有可算分位数的解码步；" + _RERUN_TIMELINE,
    f"{P}.parallel.half": "预填充 {ttft}；把 {P} 个 token 逐个送进去约需 {P} × {itl}（最快的一步解码，和 TTFT 一样取最快的）= {sequential}：一次前向处理"
                          "整段提示词，只用了逐个送进去的 {share}。",
    f"{P}.parallel.faster": "预填充 {ttft}；把 {P} 个 token 逐个送进去约需 {P} × {itl}（最快的一步解码，和 TTFT 一样取最快的）= {sequential}：一次前向"
                            "还是更快（{share}），但这次没快到一半——TTFT 只取自 {runs} 次预填充，几十个解码步里更容易碰上一步"
                            "没被机器上别的程序打断的；" + _RERUN_TIMELINE,
    f"{P}.parallel.unclear": "预填充 {ttft}；把 {P} 个 token 逐个送进去约需 {P} × {itl}（最快的一步解码，和 TTFT 一样取最快的）= {sequential}：这次说不准，"
                             "预填充没有比逐个送进去快，多半是那一刻机器上别的程序占用了处理器；" + _RERUN_TIMELINE,
    f"{P}.panel.same": "面板打开时（生成 {n} 个 token）为这句提示词重新计了时：TTFT {ttft_panel}，上面那次 {ttft_run}（{ttft_diff}）；"
                       "图上那一遍的 TPOT {tpot_panel}，上面那次图上那一遍 {tpot_run}（{tpot_diff}）。都在 ±15% 以内：两次测量一致。",
    f"{P}.panel.differs": "面板打开时（生成 {n} 个 token）为这句提示词重新计了时：TTFT {ttft_panel}，上面那次 {ttft_run}（{ttft_diff}）；"
                          "图上那一遍的 TPOT {tpot_panel}，上面那次图上那一遍 {tpot_run}（{tpot_diff}）。超出了 ±15%：同样的工作在"
                          "不同时刻量，机器的忙闲不同，数字就不同；两次里更快的那次更接近机器空闲时的速度。",
    f"{P}.parallel.unmeasured": "这次没有测出有效的预填充和解码时间，比不了一次前向和逐个送进去；" + _RERUN_TIMELINE,
    f"{P}.prefill_growth.unmeasured": "这次没有测出有效的预填充时间；" + _RERUN_SWEEP,
    f"{P}.prefill_tail.unmeasured": "这次没有测出有效的预填充时间，说不准何时被算力卡住；" + _RERUN_SWEEP,
    f"{P}.prefill_rates.unmeasured": "这次没有测出有效的预填充速率；" + _RERUN_SWEEP,
    f"{P}.prefill_trend.unmeasured": "这次没有测出有效的预填充速率，看不出它的走势；" + _RERUN_SWEEP,
    f"{P}.batch_left.unmeasured": "这次没有测出有效的单步耗时；" + _RERUN_BATCH,
    f"{P}.panel.unmeasured": "面板这次没有可以和上面比的 TTFT/TPOT；把「生成的 token 数」拖到 2 以上再看。",
    f"{P}.step_budget.overhead": "实测一步解码（ITL 的中位数）{measured}，是两者中较长那个（{bound}）的 {ratio} 倍：这个模型太小，"
                                 "一次前向的时间绝大部分不是花在运算和读写本身，而是花在固定开销上（Python、逐个算子的调度；"
                                 "在 GPU 上还有每个内核的启动）。",
    f"{P}.step_budget.near": "实测一步解码（ITL 的中位数）{measured}，只是两者中较长那个（{bound}）的 {ratio} 倍：这台机器上，"
                             "连这么小的模型也接近两道屋顶。",
    f"{P}.step_budget.unmeasured": "这次没有测出一步解码的时间，比不了；" + _RERUN_TIMELINE,
    f"{P}.prefill_growth.launch_bound": _LAUNCH + "。",
    f"{P}.prefill_growth.barely": _GROWTH + "：每一段都只涨了一点，远比 token 数涨得慢，正是理想的情形——权重只读一遍，"
                                  "就供 P 个 token 一起用。",
    f"{P}.prefill_growth.slow": _GROWTH + "：每一段都涨得比 token 数慢得多，和理想的情形一致——权重只读一遍，就供 P 个 token "
                                "一起用；但也不是不涨，这台机器上短提示词的运算和别的开销已经占了一部分时间。",
    f"{P}.prefill_growth.proportional": _GROWTH + "：差不多和 token 数成正比，不是理想的「起初涨得很慢」。这台机器上，连很短的"
                                        "提示词也已经被运算（或别的随 P 增长的开销）卡住。",
    f"{P}.prefill_growth.slow_overall": _GROWTH + "：从头到尾比 token 数涨得慢得多，和理想的情形一致——权重只读一遍，就供 P 个 "
                                        "token 一起用；只有 P = {ps} → {qs} 这一段涨了 ×{step}，几乎和 token 数（×{tok}）"
                                        "涨得一样快（一段的计时容易被机器上别的程序拖慢，看整体走向）。",
    f"{P}.prefill_growth.slow_overall_faster": _GROWTH + "：从头到尾比 token 数涨得慢得多，和理想的情形一致——权重只读一遍，"
                                               "就供 P 个 token 一起用；只有 P = {ps} → {qs} 这一段涨了 ×{step}，比 token 数"
                                               "（×{tok}）涨得还快（一段的计时容易被机器上别的程序拖慢，看整体走向）。",
    f"{P}.prefill_growth.dropped": _GROWTH + "，但中间 P = {p} 到 {q} 反而快了 {drop}：这次的数字起伏太大（机器忙），看不出"
                                   "起初的走势；" + _RERUN_SWEEP,
    f"{P}.prefill_growth.uneven": "实测：P = {Ps} 时预填充 {ts}：各段涨得很不一致（有的段比 token 数涨得还快），这次看不出起初的"
                                  "走势；" + _RERUN_SWEEP,
    f"{P}.same_work.agree": "P = 1 时一次预填充和逐个送入本是同一件事（都是 1 个 token 的一次前向），倍数应为 1；这次是 "
                            "{x}（{off}），在 ±15% 以内：这次计时的误差不大。",
    f"{P}.same_work.off": "P = 1 时一次预填充和逐个送入本是同一件事（都是 1 个 token 的一次前向），倍数应为 1；这次是 {x}，"
                          "偏离了 {off}：这就是这次计时的误差，表里的倍数都可能差这么多；" + _RERUN_SWEEP,
    f"{P}.same_work.unmeasured": "这次没有测出 P = 1 的有效时间；" + _RERUN_SWEEP,
    f"{P}.one_pass.faster": "P = {Ps} 时，逐个送入分别要一次预填充的 {xs} 倍时间：这些长度上一次预填充都更快。",
    f"{P}.one_pass.not_faster": "P = {p} 时逐个送入只要一次预填充的 {x} 倍时间，这次一次预填充没有更快：多半是测它的那一刻"
                                "机器正忙；" + _RERUN_SWEEP,
    f"{P}.one_pass.unmeasured": "这次没有测出有效的预填充和解码时间，比不了一次预填充和逐个送入；" + _RERUN_SWEEP,
    f"{P}.speedup_growth.rising": "逐个送入 ÷ 一次预填充的倍数（P = {Ps}）：{xs}，随 P 一路增大：提示词越长，一次前向省下的越多。",
    f"{P}.speedup_growth.rise_then_level": "逐个送入 ÷ 一次预填充的倍数（P = {Ps}）：{xs}，一路增大到 P = {P_peak}，之后不再"
                                           "明显增大（都在最大值的 85% 以上）。",
    f"{P}.speedup_growth.overall": "逐个送入 ÷ 一次预填充的倍数（P = {Ps}）：{xs}，从最短到最长的提示词整体增大了 ×{g}，但不是"
                                   "每一步都增大（一个长度的计时容易被机器上别的程序拖慢，看整体走向）。",
    f"{P}.speedup_growth.irregular": "逐个送入 ÷ 一次预填充的倍数（P = {Ps}）：{xs}，看不出随 P 增大的走势：这次的计时被打断得"
                                     "太多；" + _RERUN_SWEEP,
    f"{P}.speedup_growth.unmeasured": "这次没有测出有效的倍数；" + _RERUN_SWEEP,
    f"{P}.long_rate.highest": "P = {P} 的预填充每秒 {rate}，高于 P = {P1} 的 {rate1} 和其后一步解码的 {dec}：提示词越长，"
                              "预填充越能用上算力。",
    f"{P}.long_rate.above_decode": "P = {P} 的预填充每秒 {rate}，高于其后一步解码的 {dec}，却不高于 P = {P1} 的 {rate1}：这次的"
                                   "计时被打断了，看不出提示词越长越能用上算力；" + _RERUN_SWEEP,
    f"{P}.long_rate.unclear": "P = {P} 的预填充每秒 {rate}，不高于其后一步解码的 {dec}：这次说不准，多半是测预填充的那一刻机器"
                              "正忙；" + _RERUN_SWEEP,
    f"{P}.long_rate.unmeasured": "这次没有测出有效的预填充和解码速率；" + _RERUN_SWEEP,
    f"{P}.batch_gain.ideal": "B = {B} 相比 B = 1：吞吐 {tput1} → {tput}（×{ratio}），单步耗时只 ×{step}：接近理想的 {B} 倍。",
    f"{P}.batch_gain.compute_capped": "B = {B} 相比 B = 1：吞吐 {tput1} → {tput}（×{ratio}），单步耗时 ×{step}：没到 {B} 倍。B = {B} "
                                      "的 I = {I} 已远在转折点（{ridge}）右边，按平屋顶，吞吐最多约为矩阵乘速率 {mm} ÷ 每个 token 的 "
                                      "{mflop} MFLOP = {cap}（B = 1 实测的 ×{cap_ratio}），实测 {tput}。",
    f"{P}.batch_gain.higher": "B = {B} 相比 B = 1：吞吐 {tput1} → {tput}（×{ratio}），单步耗时 ×{step}：吞吐提高了，但没到"
                              "理想的 {B} 倍，因为单步耗时也涨了。",
    f"{P}.batch_gain.not_higher": "B = {B} 相比 B = 1：吞吐 {tput1} → {tput}，没有提高：多半是测大批次时机器正忙；" + _RERUN_BATCH,
    f"{P}.batch_gain.unmeasured": "这次没有测出有效的吞吐；" + _RERUN_BATCH,
    f"{P}.ridge.crossed": "预填充的算术强度约为 P / 2：P 超过约 2 × 转折点 = {twice} 时就越过本机的转折点（{ridge} FLOP/字节；K/V "
                          "和嵌入也要读写，实际的强度比 P / 2 略低）。测过的长度里，P = {P} 的算术强度 {I} 已不低于转折点。",
    f"{P}.ridge.not_crossed": "预填充的算术强度约为 P / 2：P 超过约 2 × 转折点 = {twice} 时就越过本机的转折点（{ridge} FLOP/字节）。"
                              "测过最长的 P = {P}，算术强度 {I}，还在转折点左边。",
    f"{P}.ridge.unmeasured": "这次的屋顶没有量出有效的转折点；" + _RERUN_ROOFS,
    f"{P}.prefill_tail.launch_bound": _LAUNCH + "，离两道屋顶都很远，看不出何时被算力卡住。",
    f"{P}.prefill_tail.proportional": "实测：从 P = {start} 起（P = {Pt}，预填充 {tt}），每一段耗时的增长指数 {kt} 都在 0.8 到 "
                                      "1.25 之间（完全成正比时是 1）：预填充的耗时与 P 差不多成正比，它被算力卡住了。",
    f"{P}.prefill_tail.proportional_last": "实测：最后一段 P = {Pa} → {Pb}，预填充从 {ta} 到 {tb}，增长指数 {k}，在 0.8 到 "
                                           "1.25 之间（完全成正比时是 1）：预填充的耗时与 P 差不多成正比，它被算力卡住了。",
    f"{P}.prefill_tail.speeding": "实测：最后一段 P = {Pa} → {Pb}，预填充从 {ta} 到 {tb}，增长指数 {k}（完全成正比时是 1，不涨是 0）："
                                  "涨得已经不慢，但还没有与 P 成正比：开始接近算力的限制，还没有完全被卡住。",
    f"{P}.prefill_tail.slow": "实测：P = {Ps} 时预填充 {ts}，每一段的增长指数 {ks} 都低于 0.5：耗时一直比 P 涨得慢得多，"
                              "还没有被算力卡住。",
    f"{P}.prefill_tail.steep": "实测：P = {Pa} → {Pb}，预填充从 {ta} 涨到 {tb}，增长指数 {k}，比 token 数涨得还快：被算力卡住时"
                               "耗时最多与 P 成正比，这一段多半是被机器上别的程序拖慢了，这次说不准从哪里开始成正比；" + _RERUN_SWEEP,
    f"{P}.prefill_tail.noisy": "实测：P = {Ps} 时预填充 {ts}：各段的增长起伏不定，这次说不准预填充从哪里开始被算力卡住；"
                               + _RERUN_SWEEP,
    f"{P}.speedup.below_bound": "倍数（逐个送入 ÷ 一次预填充）最大是 {best}（P = {best_P}）；预填充碰到矩阵乘屋顶时，倍数最多约为 "
                                "矩阵乘速率 ÷ 解码每秒运算数 = {bound}。",
    f"{P}.speedup.above_bound": "倍数（逐个送入 ÷ 一次预填充）最大是 {best}（P = {best_P}），已经超过按屋顶估的上限 矩阵乘速率 ÷ "
                                "解码每秒运算数 = {bound}：屋顶只是一次抽样，这次量低了（测它时机器更忙），或者预填充的矩阵乘形状"
                                "比测屋顶用的跑得更快。",
    f"{P}.speedup.unmeasured": "这次算不出倍数的上限；" + _RERUN_SWEEP,
    f"{P}.prefill_rates.rising": "图上预填充每秒的运算数（P = {Ps}）：{rates}，随 P 一点一点都在上升。",
    f"{P}.prefill_rates.rise_then_level": "图上预填充每秒的运算数（P = {Ps}）：{rates}，一路上升到 P = {P_peak}，之后持平"
                                          "（都在最高值的 85% 以上）。",
    f"{P}.prefill_rates.one_dip": "图上预填充每秒的运算数（P = {Ps}）：{rates}，除 P = {p} → {q} 一处小回落外一路上升，"
                                  "从最短到最长整体 ×{g}。",
    f"{P}.prefill_rates.overall": "图上预填充每秒的运算数（P = {Ps}）：{rates}，除 P = {p} → {q} 一处回落（{drop}，计时被打断）"
                                  "外一路上升，从最短到最长整体 ×{g}。",
    f"{P}.prefill_rates.irregular": "图上预填充每秒的运算数（P = {Ps}）：{rates}，高低起伏，不是一路上升：这次的计时被打断得太多，"
                                    "看不清走势；" + _RERUN_SWEEP,
    f"{P}.prefill_roof.launch_bound": _LAUNCH + "，离两道屋顶都很远，所以这些点看不出 roofline 的形状。要看到它，用更长的提示词"
                                      "或更大的模型。",
    f"{P}.prefill_roof.above": _ROOF + "，高过了测得的屋顶。屋顶不是硬上限：它是 15 次矩阵乘测量里最快的一次，只是一个抽样，测它的"
                               "那一刻机器可能比测这个点时更忙；预填充的矩阵乘形状（P 行 × 权重）也可能本来就跑得更快。它已经到了"
                               "屋顶的高度，预填充是算力受限的。",
    f"{P}.prefill_roof.peaked_earlier": _ROOF + "；离屋顶最近的却是更短的 P = {best_P}（{best_share}）：预填充在那里已经接近屋顶，"
                                        "更长的提示词没有再快起来（这次更长的反而慢了，可能是机器忙，也可能是随 P 增长的注意力"
                                        "拖慢了它）。",
    f"{P}.prefill_roof.near": _ROOF + "，比更短的提示词里最快的那个速率 ×{g}：已经靠近矩阵乘这道屋顶，预填充是算力受限的。",
    f"{P}.prefill_roof.near_rising": _ROOF + "：在转折点右边，按 roofline 属于算力受限；但比更短的提示词里最快的那个速率还 ×{g}，还在上升，"
                                     "还没有完全贴住屋顶。",
    f"{P}.prefill_roof.mid": _ROOF + "：没有碰到屋顶。这个模型的矩阵比测屋顶用的那个矩阵乘小，每次前向还有很多没算进运算数的小算子"
                             "（RMSNorm、softmax、激活函数），它们都要时间。",
    f"{P}.prefill_roof.far": _ROOF + "：离屋顶还远，一次前向的时间里还有很多不是矩阵乘的开销。",
    f"{P}.prefill_roof.unmeasured": "这次预填充的速率或屋顶没有测出有效的数；" + _RERUN_SWEEP,
    f"{P}.prefill_trend.level": "和更短的提示词里最快的 P = {Pa} 比，P = {Pb} 的预填充每秒的运算数 ×{g}，已经趋于持平（±15% 以内算持平）。",
    f"{P}.prefill_trend.rising_above": "和更短的提示词里最快的 P = {Pa} 比，P = {Pb} 的预填充每秒的运算数 ×{g}，还在上升：已经是屋顶的 {share} 还在涨，"
                                       "又一个迹象说明这次的屋顶量低了。",
    f"{P}.prefill_trend.rising": "和更短的提示词里最快的 P = {Pa} 比，P = {Pb} 的预填充每秒的运算数 ×{g}，还在上升，还没有持平（±15% 以内算持平）。",
    f"{P}.prefill_trend.fell": "和更短的提示词里最快的 P = {Pa} 比，P = {Pb} 的预填充每秒的运算数 ×{g}，反而下降了：这一段说不准（多半是测量噪声）；"
                               + _RERUN_SWEEP,
    f"{P}.decode_roof.above": _DECODE + "——超过了测得的带宽：要么权重有一部分留在了处理器的缓存里，要么测带宽那一刻机器正忙，带宽"
                              "量低了（下文的矩阵乘向量实验再量一次读权重的速度）。",
    f"{P}.decode_roof.full": _DECODE + "：用满了测得的带宽，解码被带宽这道斜屋顶卡住，是访存受限的。",
    f"{P}.decode_roof.at_median": _DECODE + "，却和屋顶的中位数 {median} 相当（{med_share}）：屋顶取的是最快的一次，机器忙时，"
                                  "解码大约跑在当时给得出的带宽上；它是访存受限的（算术强度远在转折点左边）。",
    f"{P}.decode_roof.near": _DECODE + "：接近带宽这道斜屋顶，但没有用满。解码是访存受限的（算术强度远在转折点左边），一步里还有"
                             "一些别的开销。",
    f"{P}.decode_roof.part": _DECODE + "：用了带宽的相当一部分，但没有用满。它仍是访存受限的（算术强度远在转折点左边），但一步里"
                             "还有别的开销。",
    f"{P}.decode_roof.far_overhead": _DECODE + "：只用了带宽的一小部分。" + _FAR + "多出来的时间和这些小算子的开销是同一个"
                                     "量级：一步的时间大多花在读权重以外的固定开销上（CPU 上是逐个算子的调度；GPU 上主要是"
                                     "几百次内核启动）。",
    f"{P}.decode_roof.far_busy": _DECODE + "：只用了带宽的一小部分。" + _FAR + "小算子的开销解释不了这么大的差距。测屋顶时"
                                 "机器很忙（最快的一次是中位数的 {spread} 倍），解码和屋顶不在同一忙闲下量，这个百分比靠不住；"
                                 + _RERUN_SWEEP,
    f"{P}.decode_roof.far_unexplained": _DECODE + "：只用了带宽的一小部分。" + _FAR + "小算子的开销解释不了这么大的差距，"
                                        "这次说不准差在哪里；" + _RERUN_SWEEP,
    f"{P}.decode_roof.unmeasured": "这次解码的速率或带宽没有测出有效的数；" + _RERUN_SWEEP,
    f"{P}.roof_spread.busy": "⚠ 测屋顶的时候这台机器很忙：最快的一次是中位数的几倍——带宽 {bw} 倍，矩阵乘速率 {mm} 倍（达到 1.4 倍就算忙，"
                             "别的程序在抢处理器），屋顶随着负载在移动。屋顶取最快的一次，它最接近机器空闲时的速率，但也可能仍然"
                             "偏低；下文和屋顶比出来的百分比只能当作粗略的参考。" + _RERUN_ROOFS,
    f"{P}.roof_spread.some": "重复测量之间有一定波动：最快的一次是中位数的几倍——带宽 {bw} 倍，矩阵乘速率 {mm} 倍（1.10 倍以内算一致，"
                             "达到 1.4 倍算很忙）：测量期间机器上还有别的程序在跑。屋顶取最快的一次；下文和屋顶比出来的百分比可能"
                             "差上一两成。",
    f"{P}.roof_spread.steady": "重复测量之间很一致（最快的一次是中位数的几倍——带宽 {bw} 倍，矩阵乘速率 {mm} 倍，都在 1.10 倍以内）："
                               "测量期间机器的负载没有大起大落。机器一直很忙时，两个屋顶会一起偏低，这从重复测量里看不出来。",
    f"{P}.roof_spread.unmeasured": "这次的屋顶没有测出有效的数；" + _RERUN_ROOFS,
    f"{P}.worked_bounds.memory": _BOUNDS + "。搬运字节的下限是运算下限的 {ratio} 倍：这一步的时间由读写的字节决定，它是访存受限的。",
    f"{P}.worked_bounds.compute": _BOUNDS + "。在这台机器上，运算的下限反而更长（{ratio} 倍）：带宽相对算力特别高，这一步是算力受限的。",
    f"{P}.worked_bounds.unmeasured": "这次的屋顶没有测出有效的数，算不出这一步的下限；" + _RERUN_ROOFS,
    f"{P}.batch_baseline.same": _BASELINE + "：两次测量一致（±15% 以内）。",
    f"{P}.batch_baseline.slower_here": _BASELINE + "（超出 ±15%）：同样的工作在不同时刻量，差了这么多，说明这段时间机器的忙闲在变"
                                       "（这次更忙）。下面的倍数都以这里的 B = 1 为基准；如果这里的 B = 1 偏慢，单步耗时的倍数会偏小、"
                                       "吞吐的倍数会偏大。",
    f"{P}.batch_baseline.faster_here": _BASELINE + "（超出 ±15%）：同样的工作在不同时刻量，差了这么多，说明这段时间机器的忙闲在变"
                                       "（那次更忙）。下面的倍数都以这里的 B = 1 为基准；如果这里的 B = 1 偏快，单步耗时的倍数会偏大、"
                                       "吞吐的倍数会偏小。",
    f"{P}.batch_baseline.unmeasured": "这次没有可以比较的 B = 1 单步耗时；" + _RERUN_BATCH,
    f"{P}.batch_left.flat": "B = {Bs} 还在转折点（{ridge}）左边（B = {Bl} 时 I = {I}）：单步耗时 {ts}，都在 B = 1 的 ±15% 以内，"
                            "从头到尾 ×{ratio}，几乎不变，和理想的 roofline 一样{why}。",
    f"{P}.batch_left.grows": "B = {Bs} 还在转折点（{ridge}）左边（B = {Bl} 时 I = {I}）：单步耗时 {ts}，从头到尾 ×{ratio}，增加了 "
                             "{rise}：实际的机器达不到屋顶，单步耗时并不完全由读的字节决定（下面的矩阵乘实验检查其中一个可能的原因）。",
    f"{P}.batch_left.crossed_early": "B = {B} 时算术强度（{I}）就已越过本机的转折点 {ridge}。",
    f"{P}.batch_left.uneven": "转折点左边的单步耗时 {ts}（B = {Bs}）忽高忽低，说不清随 B 怎样变；" + _RERUN_BATCH,
    f"{P}.batch_order.ordered": "单步耗时随 B（{Bs}）一路不减：{ts}。",
    f"{P}.batch_order.inverted": "B = {Ba} 的一步（{ta}）反而比 B = {Bb} 的（{tb}）慢：多一倍的序列不该更快，这是测量的起伏或不同"
                                 "行数选了不同的计算方式；上面的平均倍数把这样的起伏抹平了。",
    f"{P}.batch_order.unmeasured": "这次的单步耗时没有测出有效的数；" + _RERUN_BATCH,
    f"{P}.batch_shape.ideal": "转折点左边 B 每翻一倍，单步耗时平均 ×{gl}；越过转折点以后 ×{gr}：左边涨得更慢，和理想的 roofline 一致。",
    f"{P}.batch_shape.same": "转折点两边的增长差不多：左边 B 每翻一倍，单步耗时平均 ×{gl}，越过转折点以后 ×{gr}（相差不到 10%）。"
                             "理想的 roofline 里左边应当几乎不涨。左边的增长不是越过转折点造成的：运算和读数据不一定能完全重叠，"
                             "一步的时间可能比两者中较长的那个更接近两者之和（见本节末尾）；行数很少的矩阵乘本身也可能更慢"
                             "（下面的矩阵乘实验检查这一种）。",
    f"{P}.batch_shape.inverted": "这和理想的 roofline 反过来了：转折点左边 B 每翻一倍，单步耗时平均 ×{gl}；越过转折点以后只 ×{gr}。"
                                 "左边的增长不是越过转折点造成的：运算和读数据不一定能完全重叠，一步的时间可能比两者中较长的那个"
                                 "更接近两者之和（见本节末尾）；行数很少的矩阵乘本身也可能更慢（下面的矩阵乘实验检查这一种）。",
    f"{P}.batch_shape.unmeasured": "这次算不出转折点两边每翻一倍的增长；" + _RERUN_BATCH,
    f"{P}.batch_vs_prefill.same": _VS + "：落在相近的高度（±15% 以内）。同样是 {B} 行的矩阵 × 权重，速率也差不多。",
    f"{P}.batch_vs_prefill.decode_higher": _VS + "（超出 ±15%）。两者的矩阵乘一样大，差别来自别处：两个点是在不同时刻量的（机器的"
                                           "忙碌程度会变），而且不全是同样的算子——预填充多一次 {B} × {B} 的因果注意力，解码要为 {B} "
                                           "条序列各读一份 K/V、算 {B} 个位置的 logits。",
    f"{P}.batch_vs_prefill.prefill_higher": _VS + "（超出 ±15%）。两者的矩阵乘一样大，差别来自别处：两个点是在不同时刻量的（机器的"
                                            "忙碌程度会变），而且不全是同样的算子——预填充多一次 {B} × {B} 的因果注意力，解码要为 {B} "
                                            "条序列各读一份 K/V、算 {B} 个位置的 logits。",
    f"{P}.batch_vs_prefill.unmeasured": "这次比不了这两个点；" + _RERUN_BATCH,
    f"{P}.overlap.agrees": _OVERLAP + "，相差不到 15%：与这个估计相符。",
    f"{P}.overlap.more": _OVERLAP + "，比这个偏悲观的估计涨得还多：除了运算和读数据不重叠，还有别的原因让单步变慢（上一小节的"
                         "矩阵乘实验量了其中一种），也可能测大批次时机器更忙。",
    f"{P}.overlap.flat": _OVERLAP + "：单步几乎不变，比这个估计小得多，像理想的 roofline（完全重叠）那样。",
    f"{P}.overlap.partial": _OVERLAP + "：介于完全重叠（不变）和完全不重叠之间，按这个模型是运算和读数据部分重叠。",
    f"{P}.overlap.faster": _OVERLAP + "：B 多了，单步反而更快，这是测量的起伏；" + _RERUN_BATCH,
    f"{P}.overlap.unmeasured": "这次算不出这个估计：{missing}；" + _RERUN_BATCH,
    f"{P}.matmul_rows.inverted": _ROWS + "。{a} 行反而比 {b} 行慢：矩阵乘的库对不同的行数会选不同的计算方式，这里量到的是这个库在"
                                 "这个形状上的表现，不是一条「行数越多越慢」的规律。",
    f"{P}.matmul_rows.ordered": _ROWS + "。",
    f"{P}.matmul_rows.unmeasured": "这次的矩阵乘没有测出有效的时间；" + _RERUN_SMALL,
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
    f"{P}.matmul_slowdown.unmeasured": "这次的矩阵乘没有测出有效的时间；" + _RERUN_SMALL,
    f"{P}.matvec_read.faster": _MATVEC + "：比求和测得的带宽还快。W 远大于处理器的缓存，留在缓存里的部分解释不了这么多；更可能是"
                               "求和这个内核本身读内存不如矩阵乘向量快（也可能测带宽的那一刻机器更忙）：这道斜屋顶量低了，这次比不出"
                               "矩阵乘向量的内核是否读得满带宽。",
    f"{P}.matvec_read.full": _MATVEC + "：矩阵乘向量本身就能读满带宽，解码若用不满带宽，原因不在这个内核。",
    f"{P}.matvec_read.slower": _MATVEC + "：在这台机器上，矩阵乘向量的内核本身就读不满带宽，这是解码只用到带宽一部分的原因之一。",
    f"{P}.matvec_read.unmeasured": "这次的矩阵乘向量没有测出有效的时间；" + _RERUN_SMALL,
    f"{P}.decode_vs_matvec.further": "所以上面 roofline 一节里解码的百分比（每秒搬运 {rate}，是求和带宽的 {share}）是和一道偏低的"
                                     "屋顶比的：按这次矩阵乘向量读权重的速度算，解码只用到了 {of_matvec}，离读满带宽比那里说的更远。",
    f"{P}.decode_vs_matvec.unmeasured": "这次比不了解码和矩阵乘向量的读速度；" + _RERUN_SMALL,
    f"{P}.allocator.fragmented": "这次测量里，逐步拼接的缓存最多有 {grow} 保留着却没有张量在用，预分配的只有 {pre}：释放掉的旧块"
                                 "没能全部用来放新的、更大的缓存，这就是碎片。",
    f"{P}.allocator.similar": "这次测量里，两者保留未用的显存没有拉开差距（逐步拼接最多 {grow}，预分配 {pre}）：分配器把释放的块"
                              "合并、复用了，这一次没有积累出碎片。",
    f"{P}.allocator.unmeasured": "这次没有读到有效的分配器计数；重新运行这一格。",
    f"{P}.precision.ratio": "INT8 的最大 logit 误差（{int8}）是 FP16（{fp16}）的 {ratio} 倍（在一个 {params} 参数的小模型上）。",
    f"{P}.precision.fp16_exact": "FP16 缓存的 logit 与 FP32 缓存的完全相同（最大误差 {fp16}），INT8 的最大误差是 {int8}"
                                 "（在一个 {params} 参数的小模型上）。",
    f"{P}.precision.unmeasured": "这次没有算出有效的 logit 误差；重新运行这一格。",
}, words={"no_b1": "批处理扫描里没有测出 B = 1 的单步耗时",
                "no_left": "B = 1 之外，没有哪个测过的 B 满足 B × I₁ < 转折点（这个估计只在转折点左边成立）",
                "gpu_launch": "：GPU 上这个小模型一步解码主要是内核启动的固定开销，多几条序列几乎不加时间", "cpu": ""})


def show_claims(claims: list[Claim]) -> None:
    """Display this chapter's claims in Chinese, recorded in the output's metadata (``kvlab.claims.show``); nothing
    when there are none."""
    if claims:
        show(claims, ZH)
