"""What chapter 3.1's timed runs say, as claims (:mod:`kvlab.claims`): the choosers (:data:`CHOOSERS`, a
predicate per key over the very numbers its sentence prints: measured medians, never a fit's intercept as a time;
shares and ratios of them; extrapolations only from a growth this run measured), the Chinese catalog :data:`ZH`,
:func:`show_claims`, and :func:`explain_latency` / :func:`explain_growth`, which turn a run into claims."""
from __future__ import annotations

import math

from ...claims import DIFFERENCE, Catalog, Chooser, Claim, Number, Rule, number, ratio, series, show
from ...measure import DecodeTiming
from ...stats import median
from ...memory import format_bytes, kv_bytes_per_token
from ...model import ToyTransformer
from .timings import (StepEnds, StepFit, crossover_length, generation_flops, step_ends, steps_between, timing_ends,
                      uncached_flops)


def _ms(x: float) -> Number:
    return number(x, 2, "ms")


def _count(x: float) -> Number:
    return number(x, 0)


def _pct(share: float) -> Number:
    return number(100 * share, 0, "%")


RISING_DIP, RISING_JUMP = 0.1, 0.5  # of the whole rise: the most one eighth may fall, and rise, from the one before


def _rises(e) -> bool:
    """Medians that rise from first to last at every point (what 「基本上一段比一段长」 allows): none falls below the
    one before by more than RISING_DIP of the whole rise, none jumps by more than RISING_JUMP of it (load that
    slowed one stretch is not a growth with t)."""
    rise = e[-1] - e[0]
    steps = [later - earlier for earlier, later in zip(e, e[1:])]
    return rise > 0 and all(-RISING_DIP * rise <= step <= RISING_JUMP * rise for step in steps)


def _no_jump(e) -> bool:
    """Medians that differ, no two neighbours of them by more than RISING_JUMP of their span (highest - lowest): one
    such jump is load changing mid-run, not a curve in t."""
    span = max(e) - min(e)
    return span > 0 and all(abs(later - earlier) <= RISING_JUMP * span for earlier, later in zip(e, e[1:]))


def _rising(v) -> bool:
    """The printed eighths rise at every point (:func:`_rises`)."""
    return _rises(v["eighths"])


LEVEL_ENDS, LEVEL_SPREAD = 0.1, 0.3  # of the median step: the ends' gap, and every eighth's distance from the median


def _level_series(e, median_ms: float) -> bool:
    """The first and the last of the medians ``e`` within a tenth of the median step of all, and every one of them
    within three tenths of it (a series that swings in between is noise, not a level line)."""
    return abs(e[-1] - e[0]) <= LEVEL_ENDS * median_ms and all(abs(x - median_ms) <= LEVEL_SPREAD * median_ms for x in e)


def _others(v) -> list[float] | None:
    """The printed eighths without the printed ``outlier`` (its first occurrence): the other seven; None when the
    outlier is not one of them."""
    e = list(v["eighths"])
    if v["outlier"] not in e:
        return None
    i = e.index(v["outlier"])
    return e[:i] + e[i + 1:]


def _departs(e, i: int, median_ms: float) -> bool:
    """Eighth i lies off the others' trend by more than their whole rise (or a tenth of the median step, if more):
    off the mean of its two neighbours, or, at an end, off its neighbour moved on by the others' mean step."""
    others = e[:i] + e[i + 1:]
    step = (others[-1] - others[0]) / (len(others) - 1)
    expected = (e[1] - step if i == 0 else e[-2] + step if i == len(e) - 1 else (e[i - 1] + e[i + 1]) / 2)
    return abs(e[i] - expected) > max(abs(others[-1] - others[0]), 0.1 * median_ms)


def _others_read(v, reads) -> bool:
    """One outlier read away (as ``rises_rough`` names one dip): the eight eighths do not read as ``reads`` says,
    the named one departs from the others' trend (:func:`_departs`), the other seven read as ``reads`` says, and
    the printed ends of those seven are theirs."""
    others = _others(v)
    return (others is not None and len(others) >= 2 and not reads(v["eighths"]) and reads(others)
            and _departs(list(v["eighths"]), list(v["eighths"]).index(v["outlier"]), v["median"])
            and (others[0], others[-1]) == (v["rest_first"], v["rest_last"]))


def _rises_but_one(v) -> bool:
    """The other seven rise at every point (the eight do not), their share as printed."""
    return (_others_read(v, _rises)
            and _share_agrees({"first": v["rest_first"], "last": v["rest_last"], "share": v["rest_share"]}))


def _level_but_one(v) -> bool:
    """The other seven's ends within a tenth of the median step of all (the eight's are not)."""
    return _others_read(v, lambda e: _level_series(e, v["median"]))


def lone_outlier(e, median_ms: float) -> int:
    """The index of the eighth whose removal leaves the others reading as rising or level (the one farthest from
    the others' median, where several would), else of the one farthest from the median of all: what the outlier
    rules are offered (their predicates decide)."""
    def apart(i):
        others = e[:i] + e[i + 1:]
        return abs(e[i] - median(others))
    first = [i for i in range(len(e)) if e[i] not in e[:i]]  # a printed value names its first occurrence
    fits = [i for i in first if _departs(e, i, median_ms)
            and (_rises(e[:i] + e[i + 1:]) or _level_series(e[:i] + e[i + 1:], median_ms))]
    return max(fits or first, key=apart)


ROUGH_GROWTH = 2.0  # a series whose last eighth is at least this many times its first grew with t, however rough


def _inversions(e) -> list[int]:
    """Indices i where eighth i + 1 is below eighth i."""
    return [i for i, (earlier, later) in enumerate(zip(e, e[1:])) if later < earlier]


def _rises_roughly(v) -> bool:
    """Last eighth at least ROUGH_GROWTH x the first (×growth as printed), the printed ends being the series' ends."""
    e = v["eighths"]
    return (e[0] == v["first"] > 0 and e[-1] == v["last"] >= ROUGH_GROWTH * v["first"]
            and _ratio_agrees(v["growth"], v["last"], v["first"]))


def _rough_one_dip(v) -> bool:
    """Rises roughly with exactly one eighth below the one before it: the printed dip_from -> dip_to."""
    e, dips = v["eighths"], _inversions(v["eighths"])
    return (_rises_roughly(v) and len(dips) == 1
            and (e[dips[0]], e[dips[0] + 1]) == (v["dip_from"], v["dip_to"]))


def _rough_uneven(v) -> bool:
    """Rises roughly and never falls, by uneven steps (a jump that :func:`_rising` does not take for growth)."""
    return _rises_roughly(v) and not _inversions(v["eighths"])


def _share_agrees(v) -> bool:
    """The printed share is (last - first) / last of the printed first and last medians, within their rounding."""
    first, last = (v["eighths"][0], v["eighths"][-1]) if "eighths" in v else (v["first"], v["last"])
    return abs(v["share"] - 100 * (last - first) / last) <= 1 + 2 / last


def _ratio_range(a: float, b: float, da: float, db: float) -> tuple[float, float]:
    """The least and the most a / b can be for a and b printed to within ±da and ±db."""
    if b - db <= 0:
        raise ZeroDivisionError("b: may be 0 at its printed precision")
    return max(a - da, 0) / (b + db), (a + da) / (b - db)


def _ratio_agrees(r: float, a: float, b: float, da: float = 0.005, db: float = 0.005, dr: float = 0.05) -> bool:
    """The printed ratio r (±dr) is a / b of the printed a and b (2 decimals by default), within their rounding."""
    lo, hi = _ratio_range(a, b, da, db)
    return lo - dr <= r <= hi + dr


def _change_agrees(pct: float, a: float, b: float, da: float = 0.005, db: float = 0.005) -> bool:
    """The printed percentage pct (no decimals) is |a - b| / b of the printed a and b, within their rounding."""
    lo, hi = _ratio_range(a, b, da, db)
    least = 0 if lo <= 1 <= hi else min(abs(lo - 1), abs(hi - 1))
    return 100 * least - 0.5 <= pct <= 100 * max(abs(lo - 1), abs(hi - 1)) + 0.5


def _ends_numbers(ends: StepEnds) -> dict[str, Number]:
    return {"t0": _count(ends.t0), "first": _ms(ends.first_ms), "t1": _count(ends.t1), "last": _ms(ends.last_ms),
            "median": _ms(ends.median_ms), "eighths": series(ends.eighths_ms, 2, "ms"), "share": _pct(ends.share)}


def _level_ends(v) -> bool:
    """The first and the last eighth's medians within a tenth of the median step of all."""
    return _level_series(v["eighths"], v["median"])


def _totals_agree(v) -> bool:
    return v["kv_s"] < v["none_s"] and v["speedup"] > 1 and _ratio_agrees(v["speedup"], v["none_s"], v["kv_s"])


def _estimates_agree(v) -> bool:
    return v["robust"] > 1 and _ratio_agrees(v["robust"], v["none_est"], v["kv_est"])


STALLED = 1.2  # a total this much above its estimate by medians was lengthened by stalls; ratios this far apart differ


def _counted(v) -> bool:
    """The printed ratio of the K/V projections counted for the timed run is theirs (whole numbers), and so is the
    printed ratio of the two generations' FLOPs (2 decimals)."""
    return (v["kv_kv"] > 0 and _ratio_agrees(v["counted"], v["none_kv"], v["kv_kv"], 0, 0)
            and _ratio_agrees(v["flops"], v["none_flop"], v["kv_flop"]))


# the run's length, its counted work (K/V projections from the trace, FLOPs of the whole generation) and totals
TIMED = ("n", "none_kv", "kv_kv", "counted", "none_flop", "kv_flop", "flops", "none_s", "kv_s")
TOTALS = Chooser("decode.totals", (
    Rule("decode.totals.faster", TIMED + ("speedup", "robust"),
         lambda v: _counted(v) and _totals_agree(v) and 1 / STALLED <= v["robust"] / v["speedup"] <= STALLED),
    Rule("decode.totals.kv_stalled", TIMED + ("speedup", "none_est", "kv_est", "robust"),
         lambda v: _counted(v) and _totals_agree(v) and _estimates_agree(v) and v["robust"] > STALLED * v["speedup"]
         and v["kv_s"] >= STALLED * v["kv_est"]),
    Rule("decode.totals.none_stalled", TIMED + ("speedup", "none_est", "kv_est", "robust"),
         lambda v: _counted(v) and _totals_agree(v) and _estimates_agree(v) and v["robust"] < v["speedup"] / STALLED
         and v["none_s"] >= STALLED * v["none_est"]),
    Rule("decode.totals.uncertain", TIMED, lambda v: _counted(v) and v["kv_s"] < v["none_s"], substantive=False),
    Rule("decode.totals.unclear", TIMED, _counted, substantive=False),
))

ROUGH = ("eighths", "t0", "t1", "median", "first", "last", "growth")  # a rough rise: eighths, ends, last / first
# one outlier read away: the eighths, the outlier, the other seven's ends and their t
OTHERS = ("eighths", "outlier", "rest_t0", "rest_t1", "rest_first", "rest_last")
UNCACHED = Chooser("decode.uncached", (
    Rule("decode.uncached.growth_dominates", ("eighths", "t0", "t1", "rate", "share"),
         lambda v: _rising(v) and v["share"] >= 50 and v["rate"] > 0 and _share_agrees(v)),
    Rule("decode.uncached.fixed_dominates", ("eighths", "t0", "t1", "rate", "share"),
         lambda v: _rising(v) and v["share"] < 50 and v["rate"] > 0 and _share_agrees(v)),
    Rule("decode.uncached.rises_rough", ROUGH + ("dip_from", "dip_to"), _rough_one_dip),
    Rule("decode.uncached.rises_uneven", ROUGH, _rough_uneven),
    Rule("decode.uncached.flat", ("eighths", "t0", "t1", "median"), _level_ends),
    Rule("decode.uncached.rises_outlier", OTHERS + ("median", "rest_share"), _rises_but_one),
    Rule("decode.uncached.flat_outlier", OTHERS + ("median",), _level_but_one),
    Rule("decode.uncached.noisy", ("eighths", "t0", "t1", "median"), substantive=False),
))

CROSSOVER = Chooser("decode.crossover", (
    Rule("decode.crossover.far", ("cross", "n"), lambda v: v["cross"] > 2 * v["n"]),
    Rule("decode.crossover.near", ("cross", "n"), lambda v: v["n"] < v["cross"] <= 2 * v["n"]),
    Rule("decode.crossover.passed", ("cross", "n"), lambda v: v["cross"] <= v["n"]),
))


def _level(v) -> bool:
    """The second half's first and last medians agree with an exponent near 0 (within the rise t^0.3 allows over
    a doubling of t)."""
    return 0.8 * v["from"] <= v["to"] <= 1.25 * v["from"]


def _exponent_holds(low: float, high: float):
    """The fitted exponent within [low, high), and the second half's measured medians agreeing: about level for an
    exponent near 0, rising for a larger one."""
    def holds(v) -> bool:
        return v["t_from"] < v["t_to"] and low <= v["k"] < high and (_level(v) if high <= 0.3 else v["to"] > v["from"])
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
ROUGH_KEYS = ("decode.uncached.rises_rough", "decode.uncached.rises_uneven")  # rises, but by uneven steps
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

CACHED = Chooser("decode.cached", (
    Rule("decode.cached.flat", ("eighths", "t0", "t1", "median"), _level_ends),
    Rule("decode.cached.grows", ("eighths", "t0", "t1", "share"), lambda v: _rising(v) and _share_agrees(v)),
    Rule("decode.cached.flat_outlier", OTHERS + ("median",), _level_but_one),
    Rule("decode.cached.grows_outlier", OTHERS + ("median", "rest_share"), _rises_but_one),
    Rule("decode.cached.noisy", ("eighths", "t0", "t1", "median"), substantive=False),
))

def _extrapolates_both(v) -> bool:
    return v["rate"] > 0 and v["slope"] > 0 and v["kv_s"] > 0 and v["none_min"] * 60 > v["kv_s"]


def _extrapolates_kv_flat(v) -> bool:
    return (v["rate"] > 0 and v["kv_s"] > 0 and v["none_min"] * 60 > v["kv_s"]
            and 0.9 <= v["kv_s"] * 1e3 / (v["median"] * v["top"]) <= 1.1)


EXTRAPOLATION = Chooser("decode.extrapolation", (
    Rule("decode.extrapolation.both", ("rate", "slope", "top", "none_min", "kv_s"), _extrapolates_both),
    Rule("decode.extrapolation.kv_flat", ("rate", "top", "none_min", "median", "kv_s"), _extrapolates_kv_flat),
    # the same, from a rate the uncached eighths gave rising unevenly (ROUGH_KEYS): said to be rough
    Rule("decode.extrapolation.both_rough", ("rate", "slope", "top", "none_min", "kv_s"), _extrapolates_both),
    Rule("decode.extrapolation.kv_flat_rough", ("rate", "top", "none_min", "median", "kv_s"), _extrapolates_kv_flat),
    Rule("decode.extrapolation.none", ("top",), substantive=False),
))

def _fixed_cost(v) -> bool:
    """Timed ratio below the FLOPs' ratio; the cached generation's GFLOP at the measured rate is ``compute`` ms, its
    mean per pass ``per_step`` ms, below the median step; ``share`` is (median - per_step) / median; all as printed."""
    lo, hi = _ratio_range(v["kv_flop"], v["rate"], 0.005, 0.05)
    per_lo, per_hi = (v["compute"] - 0.005) / v["passes"], (v["compute"] + 0.005) / v["passes"]
    share_lo = 100 * (1 - (v["per_step"] + 0.0005) / (v["median"] - 0.005))
    share_hi = 100 * (1 - (v["per_step"] - 0.0005) / (v["median"] + 0.005))
    return (0 < v["speedup"] < v["flops"] and v["kv_flop"] > 0 and v["passes"] > 0
            and 1e3 * lo - 0.005 <= v["compute"] <= 1e3 * hi + 0.005
            and per_lo - 0.0005 <= v["per_step"] <= per_hi + 0.0005 and 0 < v["per_step"] < v["median"]
            and share_lo - 0.5 <= v["share"] <= share_hi + 0.5)


# why the timed ratio is far below the FLOPs': the cached steps' FLOPs at the rate measured without a cache, against
# the measured median step (what is left is the fixed cost a cache does not save)
FIXED = ("speedup", "flops", "kv_flop", "rate", "compute", "passes", "per_step", "median", "share")
FIXED_COST = Chooser("decode.fixed_cost", (
    Rule("decode.fixed_cost.share", FIXED, _fixed_cost),
    Rule("decode.fixed_cost.share_rough", FIXED, _fixed_cost),  # the rate from eighths that rose unevenly
    Rule("decode.fixed_cost.unclear", ("flops",), substantive=False),
))



def _rough(chooser: Chooser, rough: bool) -> Chooser:
    """``chooser`` with only its ``_rough`` keys (rough) or only the others, its can't-tell keys kept: what is said
    after an uncached growth sentence in ROUGH_KEYS (the rate from its first and last eighth is a rough one)."""
    return Chooser(chooser.name, tuple(r for r in chooser.rules
                                       if r.key.endswith("_rough") == rough or not r.substantive))


GROWTH_RULES = {"large": lambda s: s >= 55, "half": lambda s: 45 <= s < 55, "notable": lambda s: 20 <= s < 45,
                "small": lambda s: s < 20}


def _growth_holds(size: str):
    def holds(v) -> bool:
        measured = (v["last"] - v["first"]) / (v["t1"] - v["t0"]) * 1e3  # µs/token between the two ends
        return (v["slope"] > 0 and v["last"] > 1.05 * v["first"] and 0.5 <= v["slope"] / measured <= 2
                and _share_agrees(v) and GROWTH_RULES[size](v["share"]) and v["rate"] > 0)
    return holds


GROWTH = Chooser("decode.growth", (
    *(Rule(f"decode.growth.{size}", ("t0", "t1", "first", "last", "slope", "share", "per_token", "rate"),
           _growth_holds(size)) for size in GROWTH_RULES),
    Rule("decode.growth.flat", ("t0", "t1", "first", "last"), lambda v: abs(v["last"] - v["first"]) <= 0.05 * v["first"]),
    Rule("decode.growth.noisy", ("t0", "t1", "first", "last"), substantive=False),
))

SAME_STEPS = 0.15  # two measurements of the same steps this close (as a share of the earlier one) agree
COMPARED = ("lo", "hi", "here", "there", "diff")  # the lengths both runs took, each run's median step there, |here - there|
RERUN = Chooser("decode.rerun", (
    Rule("decode.rerun.same", COMPARED,
         lambda v: v["lo"] < v["hi"] and v["diff"] <= 100 * SAME_STEPS and _change_agrees(v["diff"], v["here"], v["there"])),
    Rule("decode.rerun.slower", COMPARED,
         lambda v: v["lo"] < v["hi"] and v["here"] > v["there"] and v["diff"] > 100 * SAME_STEPS
         and _change_agrees(v["diff"], v["here"], v["there"])),
    Rule("decode.rerun.faster", COMPARED,
         lambda v: v["lo"] < v["hi"] and v["here"] < v["there"] and v["diff"] > 100 * SAME_STEPS
         and _change_agrees(v["diff"], v["here"], v["there"])),
    Rule("decode.rerun.unclear", ("lo", "hi"), substantive=False),
))

OUTLIER_KEYS = {"decode.uncached.rises_outlier", "decode.uncached.flat_outlier", "decode.cached.flat_outlier",
                "decode.cached.grows_outlier"}  # read without one eighth: what follows reads those seven too
GROWING = {"decode.uncached.growth_dominates", "decode.uncached.fixed_dominates", "decode.cached.grows",
           "decode.uncached.rises_rough", "decode.uncached.rises_uneven", "decode.uncached.rises_outlier",
           "decode.cached.grows_outlier"}
CHOOSERS = (TOTALS, UNCACHED, CROSSOVER, STEP_EXPONENT, STEP_UNREAD, STEP_JUMP, STEP_OUTLIER, STEP_STEEP, CUMULATIVE,
            CACHED, FIXED_COST, EXTRAPOLATION, GROWTH, RERUN)

_GROWTH_ZH = ("有缓存，t 从 {t0} 附近到 {t1} 附近：单步耗时的中位数从 {first} 涨到 {last}，拟合斜率 {slope}：缓存里每多一个 "
              "token，每一步就多花这么多时间。从 t = {t0} 到 {t1} 多出的这部分，占 t = {t1} 附近实测单步中位数 {last} 的 {share}，"
              "{size}。每多一个 token 要多读 "
              "{per_token} 的 K/V；若把这部分时间全算作读缓存，等效读取速度约 {rate}，其中还包括和这些 K/V 做注意力的计算，"
              "所以真正的读取速度只会更快。")
_RERUN = "把上面面板里的「重复次数（取中位数）」调大，点「运行测量」，再运行这一格；机器忙时先关掉别的占 CPU 的程序。"
_TOTALS = ("两种方式生成了同样的 {n} 个新 token（按这次的 trace 数，每层无缓存共为 {none_kv} 个 token 投影 K/V，有缓存只"
           "投影 {kv_kv} 个，投影 K/V 的 token 数相差 {counted} 倍；按模型配置算，整次生成的浮点运算量无缓存 {none_flop}、"
           "有缓存 {kv_flop}，相差 {flops} 倍）：无缓存累计 {none_s}，有缓存 {kv_s}")
_STALLED = (_TOTALS + "，无缓存用时是有缓存的 {speedup} 倍。按各步耗时的中位数估算，无缓存约 {none_est}、有缓存约 {kv_est}，"
            "是 {robust} 倍：")
_EIGHTHS = "把各步按 t 分成八段（从 t = {t0} 附近到 t = {t1} 附近），每段单步耗时的中位数 {eighths}，全部步的中位数 {median}"
_SECOND_HALF = "后半段 t ≈ {t_from} → {t_to}，"
_OUTLIER = ("把各步按 t 分成八段，每段单步耗时的中位数 {eighths}，全部步的中位数 {median}。其中 {outlier} 那一段偏离了其余七段的走势，是一次计时"
            "波动；除去它，其余七段")
_REST_RISES = ("基本上一段比一段长：从 t = {rest_t0} 附近的 {rest_first} 涨到 t = {rest_t1} 附近的 {rest_last}，随 t 增长的"
               "部分在 t = {rest_t1} 附近约占单步的 {rest_share}。")
_REST_LEVEL = ("头尾（t = {rest_t0} 附近 {rest_first}，t = {rest_t1} 附近 {rest_last}）相差不到全部步中位数的一成，"
               "每一段离它也都不到三成，看不出随 t 的增长：")
_SHARE = ("若单步耗时 = 固定开销 + 与 t 成正比的一项，按 t = {t0} → {t1} 随 t 增长的部分占单步的 {share} 推算，后半段的指数"
          "应约为 {implied}")
_BENT = ("t = {t0} → {t_from} 从 {first} 到 {from}，每多一个 token 单步耗时变化约 {slope_early}；t = {t_from} → {t_to} "
         "每多一个 token 变化约 {slope_late}；八段 {eighths} 里相邻两段之差都不到最高与最低之差的一半，"
         "不是某一处突然一跳")
_FIXED_SHARE = ("为什么用时只差 {speedup} 倍，浮点运算量却差 {flops} 倍？有缓存整次生成 {kv_flop}，按无缓存时随 t "
                "增长的部分测得的 {rate} 算只需约 {compute}，{passes} 次前向计算平均每次 {per_step}；可实测的单步中位数是 "
                "{median}：其中约 {share} 是与 t 无关的固定开销（逐个执行小运算、把权重读一遍），缓存"
                "省不掉它。")
_BOTH = ("按这次测得的增长外推（无缓存随 t 增长的计算约 {rate}，有缓存每步的耗时随 t 增长约 {slope}），"
         "把滑块拉到最右（{top} 个 token），无缓存一次约需 {none_min}，有缓存约 {kv_s}。")
_KV_FLAT = ("按这次测得的增长外推（无缓存随 t 增长的计算约 {rate}），把滑块拉到最右（{top} 个 token），"
            "无缓存一次约需 {none_min}；有缓存这次没测出随 t 的增长，按单步中位数 {median} 算约 "
            "{kv_s}（读缓存那一项没算进去，实际会更长，长多少见下面一小节测出的斜率）。")
_ROUGH_RATE = "各段涨幅不均匀，这个速率只是粗估，由它算出的占比也是。"
_ROUGH_EXTRAPOLATION = "各段涨幅不均匀，这个速率和外推只是粗估。"
ZH = Catalog("zh", {
    "decode.totals.faster": _TOTALS + "，无缓存用时是有缓存的 {speedup} 倍（按各步耗时的中位数估算是 {robust} 倍，两者相符）。",
    "decode.totals.kv_stalled": _STALLED + "有缓存那次的累计时间 {kv_s} 比按中位数估算的 {kv_est} 长出一截，"
                                "是被几次卡顿拖长的，按中位数算的倍数更可靠。",
    "decode.totals.none_stalled": _STALLED + "无缓存那次的累计时间 {none_s} 比按中位数估算的 {none_est} "
                                  "长出一截，是被几次卡顿拖长的，按中位数算的倍数更可靠。",
    "decode.totals.uncertain": _TOTALS + "；有缓存更快，但这一次说不准快多少：累计时间和各步耗时的中位数给出的倍数对不上，"
                               "多半是计时被别的程序打断了；" + _RERUN,
    "decode.totals.unclear": _TOTALS + "；这一次有缓存没有更快，多半是计时被别的程序打断了，" + _RERUN,
    "decode.uncached.growth_dominates": "无缓存：把各步按 t 分成八段，每段单步耗时的中位数基本上一段比一段长：{eighths}（从 t = {t0} "
                                        "附近到 t = {t1} 附近）。多出的时间花在随 t 增长的投影、前馈网络和注意力上，按它们的 "
                                        "FLOP 数折算约 {rate}；在 t = {t1} 附近这部分占单步的 {share}，随 t 增长的部分占大头。",
    "decode.uncached.fixed_dominates": "无缓存：把各步按 t 分成八段，每段单步耗时的中位数基本上一段比一段长：{eighths}（从 t = {t0} "
                                       "附近到 t = {t1} 附近）。多出的时间按随 t 增长的 FLOP 数折算约 {rate}；在 t = {t1} "
                                       "附近这部分只占单步的 {share}，固定开销仍占大头。",
    "decode.uncached.rises_rough": "无缓存：" + _EIGHTHS + "：从 {first} 涨到 {last}（×{growth}），单步耗时随 t 明显变长；"
                                   "{dip_from} → {dip_to} 一处回落是计时波动，所以下面的单步指数不作解读。",
    "decode.uncached.rises_uneven": "无缓存：" + _EIGHTHS + "：从 {first} 涨到 {last}（×{growth}），一段比一段长，单步耗时随 t "
                                    "明显变长；只是各段涨幅很不均匀（计时波动），所以下面的单步指数不作解读。",
    "decode.uncached.flat": "无缓存：" + _EIGHTHS + "；头尾两段相差不到全部步中位数的一成，每一段离它也都不到三成：在这么短的长度内看不出随 t 的增长："
                            "固定开销（例如在 GPU 上逐个启动 GPU 内核）盖过了随 t 增长的计算；把生成长度调大，才看得出增长从哪里开始。",
    "decode.uncached.rises_outlier": "无缓存：" + _OUTLIER + _REST_RISES,
    "decode.uncached.flat_outlier": "无缓存：" + _OUTLIER + _REST_LEVEL + "固定开销盖过了随 t 增长的计算；把生成长度调大，"
                                    "才看得出增长从哪里开始。",
    "decode.uncached.noisy": "无缓存：" + _EIGHTHS + "：这一次计时噪声太大（或长度太短），说不清随 t 增长了多少；把生成长度调大或"
                             + _RERUN,
    "decode.crossover.far": "按 FLOP 数，t² 项要到 t ≈ {cross} 才追上线性项，远超这次测量的最大长度 t = {n}。",
    "decode.crossover.near": "按 FLOP 数，t² 项要到 t ≈ {cross} 才追上线性项，已经接近这次测量的最大长度 t = {n}。",
    "decode.crossover.passed": "按 FLOP 数，t² 项在 t ≈ {cross} 追上线性项，这次测量（最大 t = {n}）已经越过了它。",
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
    "decode.cached.flat": "有缓存：" + _EIGHTHS + "；头尾两段相差不到全部步中位数的一成，每一段离它也都不到三成，看不出随 t 的增长：读缓存那一项在这么"
                          "短的长度内淹没在固定开销和计时噪声里。",
    "decode.cached.grows": "有缓存：把各步按 t 分成八段，每段单步耗时的中位数基本上一段比一段长：{eighths}（从 t = {t0} 附近到 "
                           "t = {t1} 附近）；随 t 增长的部分在 t = {t1} 附近约占单步的 {share}。",
    "decode.cached.flat_outlier": "有缓存：" + _OUTLIER + _REST_LEVEL + "读缓存那一项在这么短的长度内淹没在固定开销和计时"
                                  "噪声里。",
    "decode.cached.grows_outlier": "有缓存：" + _OUTLIER + _REST_RISES,
    "decode.cached.noisy": "有缓存：" + _EIGHTHS + "：这一次计时噪声太大，说不清随 t 增长了多少；" + _RERUN,
    "decode.fixed_cost.share": _FIXED_SHARE,
    "decode.fixed_cost.share_rough": _FIXED_SHARE + _ROUGH_RATE,
    "decode.fixed_cost.unclear": "整次生成的浮点运算量差 {flops} 倍，用时的倍数为什么和它不同，这一次的计时拆不清（没测出"
                                 "无缓存随 t 增长的运算速度，或数字对不上），就不拆分了。",
    "decode.extrapolation.both": _BOTH,
    "decode.extrapolation.kv_flat": _KV_FLAT,
    "decode.extrapolation.both_rough": _BOTH + _ROUGH_EXTRAPOLATION,
    "decode.extrapolation.kv_flat_rough": _KV_FLAT + _ROUGH_EXTRAPOLATION,
    "decode.extrapolation.none": "这一次说不清无缓存的单步耗时随 t 怎样增长，就不按它外推到滑块最右（{top} 个 token）；"
                                 "把生成长度调大或" + _RERUN,
    **{f"decode.growth.{size}": _GROWTH_ZH.replace("{size}", word)
       for size, word in (("large", "占了大头"), ("half", "约占一半"), ("notable", "已经不小"), ("small", "还不大"))},
    "decode.growth.flat": "有缓存，t 从 {t0} 附近到 {t1} 附近：单步耗时的中位数从 {first} 到 {last}，几乎不变：读缓存那一项"
                          "淹没在固定开销里（在 GPU 上，时间主要花在逐个启动 GPU 内核上，常常就是这样）。",
    "decode.growth.noisy": "有缓存，t 从 {t0} 附近到 {t1} 附近：单步耗时的中位数从 {first} 到 {last}，这一次没有测出清楚的"
                           "增长，计时噪声盖过了它；重跑这一格，或者把这一格里的 new_tokens=1024 改大（最多约 2000）再试。",
    "decode.rerun.same": "同样是 t = {lo} 到 {hi} 的这些步，这一格单步耗时的中位数 {here}，上面面板那次（有缓存）{there}，"
                         "相差 {diff}，两次测量对得上。",
    "decode.rerun.slower": "同样是 t = {lo} 到 {hi} 的这些步，这一格单步耗时的中位数 {here}，比上面面板那次（有缓存）的 {there} "
                           "慢 {diff}：同样长度的一步不会自己变慢，多半是两次之间机器的忙闲变了。比较两次测量时，看增长（斜率）"
                           "比看绝对的耗时可靠。",
    "decode.rerun.faster": "同样是 t = {lo} 到 {hi} 的这些步，这一格单步耗时的中位数 {here}，比上面面板那次（有缓存）的 {there} "
                           "快 {diff}：同样长度的一步不会自己变快，多半是两次之间机器的忙闲变了。比较两次测量时，看增长（斜率）"
                           "比看绝对的耗时可靠。",
    "decode.rerun.unclear": "这一格和上面面板那次（有缓存）在 t = {lo} 到 {hi} 之间的单步耗时这一次比不清；" + _RERUN,
}, words={"none": "无缓存", "kv": "有缓存", "min": "分钟"})


def show_claims(claims: list[Claim]) -> None:
    """Display this chapter's claims in Chinese, recorded in the output's metadata (``kvlab.claims.show``)."""
    show(claims, ZH)


def _exponent_claims(timing: DecodeTiming, mode: str, growth: Claim, crossover: Claim) -> list[Claim]:
    """The step exponent (fitted over the second half) beside the medians of that half's first and last eighth and
    their t; the cumulative exponent beside the first 4 passes' mean and the second half's median step (and, where
    those cannot give it, beside the total against passes x the median step: stalls). The readings agree with the
    sentences before them: ``growth`` (this mode's steps: can't tell -> neither exponent read; level -> not read at all, whatever
    it is, and the cumulative exponent not read as "later steps are slower"; unfit -> said so; risen unevenly -> not read, its largest jump named) and the counted ``crossover`` (far -> a steep
    exponent is not the t² term; read without an outlier -> not read). Below 1.15 the exponent is read against the
    share of the same eighths' ends (what the growth sentence prints) and the exponent that share implies."""
    steps_ms = [s * 1e3 for s in timing.step_seconds]
    early, late = sum(steps_ms[:4]) / len(steps_ms[:4]), median(steps_ms[1 + (len(steps_ms) - 1) // 2:])
    ends = timing_ends(timing)
    half = len(ends.eighths_ms) // 2
    step = {"k": number(timing.step_exponent, kind=DIFFERENCE), "t_from": _count(ends.eighths_t[half]),
            "t_to": _count(ends.eighths_t[-1]), "from": _ms(ends.eighths_ms[half]), "to": _ms(ends.eighths_ms[-1])}
    step.update(_share_numbers(ends, step))
    reading = STEP_EXPONENT.choose(step, {"mode": mode})
    read = STEP_EXPONENT.rule(reading.key).substantive  # an exponent already said to be noise or unfit stays so
    grows = growth.key in GROWING
    if not step["k"].sound:
        pass  # an exponent that could not be fitted is said to be so, whatever came before
    elif growth.key.endswith((".flat", ".flat_outlier")):  # 「看不出随 t 的增长」: the exponent is never read
        reading = _unread("level").choose(step, {"mode": mode})
    elif growth.key in OUTLIER_KEYS:
        reading = STEP_OUTLIER.choose({"k": step["k"], "outlier": growth.fields["outlier"]}, {"mode": mode})
    elif read and growth.key.endswith(".noisy"):
        reading = _unread("noisy").choose(step, {"mode": mode})
    elif growth.key in ROUGH_KEYS:  # a rise by uneven steps: whatever the exponent, the jump is named, it is not read
        reading = STEP_JUMP.choose({**step, **_jump_numbers(ends, timing)}, {"mode": mode})
    elif reading.key in ("decode.step_exponent.between", "decode.step_exponent.quadratic") \
            and crossover.key == "decode.crossover.far":
        reading = STEP_STEEP.choose(step, {"mode": mode})
    total, passes = sum(steps_ms) / 1e3, len(steps_ms)
    product = passes * ends.median_ms / 1e3
    cumulative = {"k": number(timing.cumulative_exponent, kind=DIFFERENCE), "early": _ms(early), "late": _ms(late),
                  "spread": _pct(ratio(abs(late - early), early)), "total": number(total, 2, "s"),
                  "passes": _count(passes), "median": _ms(ends.median_ms), "product": number(product, 2, "s"),
                  "excess": number(ratio(total, product), 1)}
    overall = (CUMULATIVE if grows else CUMULATIVE_LEVEL).choose(cumulative, {"mode": mode})
    if growth.key.endswith(".noisy") and CUMULATIVE.rule(overall.key).substantive:  # 「计时噪声太大」: never read
        overall = _unread("cumulative_noisy").choose(cumulative, {"mode": mode})
    return [reading, overall]


def _jump_numbers(ends: StepEnds, timing: DecodeTiming) -> dict[str, Number]:
    """The largest step between neighbouring eighths (1-based: eighth at -> next), its share of the whole rise from
    the first eighth to the last, and how many times each step was timed."""
    e = list(series(ends.eighths_ms, 2).value)
    steps = [later - earlier for earlier, later in zip(e, e[1:])] or [0.0]
    i = max(range(len(steps)), key=steps.__getitem__)
    jump_to = e[i + 1] if len(e) > 1 else e[0]
    return {"at": _count(i + 1), "next": _count(i + 2), "jump_from": _ms(e[i]), "jump_to": _ms(jump_to),
            "jump": number(steps[i], 2, "ms", DIFFERENCE), "first": _ms(e[0]), "last": _ms(e[-1]),
            "jump_share": _pct(ratio(steps[i], e[-1] - e[0])), "repeats": _count(len(timing.pass_seconds))}


def _share_numbers(ends: StepEnds, step: dict[str, Number]) -> dict[str, Number]:
    """The growth sentence's share and its ends' t (one home: :func:`_ends_numbers`), the exponent it implies over
    the second half (from those printed numbers), the first eighth's median and ms per token in each half."""
    shown = _ends_numbers(ends)
    t0, t1, share = (shown[name].value for name in ("t0", "t1", "share"))
    t_from, t_to = step["t_from"].value, step["t_to"].value
    return {"t0": shown["t0"], "t1": shown["t1"], "share": shown["share"],
            "implied": number(implied_exponent(share, t0, t1, t_from, t_to), kind=DIFFERENCE),
            "first": shown["first"],
            "slope_early": number(ratio(step["from"].value - shown["first"].value, t_from - t0), 3, "ms", DIFFERENCE),
            "slope_late": number(ratio(step["to"].value - step["from"].value, t_to - t_from), 3, "ms", DIFFERENCE),
            "eighths": shown["eighths"]}


def _outlier_numbers(ends: StepEnds) -> tuple[dict[str, Number], StepEnds]:
    """The lone outlier offered to the outlier rules (:func:`lone_outlier` of the printed eighths), and the other
    seven's ends, as numbers and as :class:`StepEnds` (what follows an outlier claim reads)."""
    if len(ends.eighths_ms) < 3:
        return ({"outlier": _ms(ends.first_ms), "rest_t0": _count(ends.t0), "rest_t1": _count(ends.t1),
                 "rest_first": _ms(ends.first_ms), "rest_last": _ms(ends.last_ms), "rest_share": _pct(ends.share)}, ends)
    i = lone_outlier(list(series(ends.eighths_ms, 2).value), _ms(ends.median_ms).value)
    rest = ends.without(i)
    return ({"outlier": _ms(ends.eighths_ms[i]), "rest_t0": _count(rest.t0), "rest_t1": _count(rest.t1),
             "rest_first": _ms(rest.first_ms), "rest_last": _ms(rest.last_ms), "rest_share": _pct(rest.share)}, rest)


def _estimate_s(timing: DecodeTiming, ends: StepEnds) -> float:
    """A run's total by medians: its prefill pass, then each eighth of its decode steps at that eighth's median."""
    return timing.step_seconds[0] + ends.by_medians_ms / 1e3


FLOP_UNITS = ((1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP"), (1, "FLOP"))


def _flop_numbers(none_flops: int, kv_flops: int) -> dict[str, Number]:
    """The two generations' FLOPs in one unit (the largest that leaves the smaller at least 1, 2 decimals) and their
    ratio."""
    scale, unit = next((s, u) for s, u in FLOP_UNITS if min(none_flops, kv_flops) >= s or s == 1)
    return {"none_flop": number(none_flops / scale, 2, unit), "kv_flop": number(kv_flops / scale, 2, unit),
            "flops": number(ratio(none_flops, kv_flops), 1)}


def _totals(none_t: DecodeTiming, kv_t: DecodeTiming, none: StepEnds, kv: StepEnds, config) -> Claim:
    total_none, total_kv = none_t.cumulative_seconds[-1], kv_t.cumulative_seconds[-1]
    est_none, est_kv = _estimate_s(none_t, none), _estimate_s(kv_t, kv)
    none_kv, kv_kv = sum(none_t.k_tokens), sum(kv_t.k_tokens)  # counted in the timed run's own trace
    if not (none_kv and kv_kv):
        raise ValueError("results: timings without a trace of the K/V projections (k_tokens) cannot be compared")
    return TOTALS.choose({"n": _count(kv_t.new_tokens), "none_kv": _count(none_kv), "kv_kv": _count(kv_kv),
                          "counted": number(ratio(none_kv, kv_kv), 1),
                          **_flop_numbers(generation_flops(config, none_t), generation_flops(config, kv_t)),
                          "none_s": number(total_none, 2, "s"),
                          "kv_s": number(total_kv, 2, "s"), "speedup": number(ratio(total_none, total_kv), 1),
                          "none_est": number(est_none, 2, "s"), "kv_est": number(est_kv, 2, "s"),
                          "robust": number(ratio(est_none, est_kv), 1)})


def _fixed_cost_claim(totals: Claim, none_t: DecodeTiming, kv_t: DecodeTiming, kv: StepEnds, rate: float,
                      config, rough: bool = False) -> Claim:
    """The cached generation's FLOPs at the ``rate`` measured without a cache (GFLOP/s; NaN: none measured), per
    pass, against the cached median step: the fixed cost's share (:data:`FIXED_COST`; said to be rough where the
    rate came from eighths that rose unevenly)."""
    kv_flops, passes = generation_flops(config, kv_t), len(kv_t.step_seconds)
    compute_ms = ratio(kv_flops, rate * 1e9) * 1e3
    per_step = compute_ms / passes
    speedup = totals.fields.get("speedup") or number(ratio(none_t.cumulative_seconds[-1], kv_t.cumulative_seconds[-1]), 1)
    return _rough(FIXED_COST, rough).choose({"speedup": speedup, "flops": totals.fields["flops"],
                              "kv_flop": number(kv_flops / 1e9, 2, "GFLOP"), "rate": number(rate, 1, "GFLOP/s"),
                              "compute": _ms(compute_ms), "passes": _count(passes), "per_step": number(per_step, 3, "ms"),
                              "median": _ms(kv.median_ms), "share": _pct(ratio(kv.median_ms - per_step, kv.median_ms))})


def explain_latency(results: dict[str, DecodeTiming], model: ToyTransformer) -> list[Claim]:
    """What this run measured, as claims (:data:`CHOOSERS`; :func:`show_claims` prints them): the totals (beside
    the same by medians), the uncached steps' growth from measured medians, the counted crossover, both modes'
    exponents, the cached steps, and the slider's right end extrapolated from the growth this run measured (or not
    at all)."""
    c = model.config
    flops = uncached_flops(c)
    none_t, kv_t = results["none"], results["kv"]
    none, kv = timing_ends(none_t), timing_ends(kv_t)
    kv_all = kv  # every cached step: the median the cached sentence prints
    rate = ratio(flops(none.t1) - flops(none.t0), none.last_ms - none.first_ms) / 1e6
    dips = _inversions(none.eighths_ms) or [0]
    (none_others, none_rest), (kv_others, kv_rest) = _outlier_numbers(none), _outlier_numbers(kv)
    uncached = UNCACHED.choose({**_ends_numbers(none), **none_others, "rate": number(rate, 1, "GFLOP/s"),
                                "growth": number(ratio(none.last_ms, none.first_ms), 1),
                                "dip_from": _ms(none.eighths_ms[dips[0]]), "dip_to": _ms(none.eighths_ms[dips[0] + 1])})
    cached = CACHED.choose({**_ends_numbers(kv), **kv_others})
    none = none_rest if uncached.key in OUTLIER_KEYS else none  # what was said is what is extrapolated from
    kv = kv_rest if cached.key in OUTLIER_KEYS else kv
    rate = ratio(flops(none.t1) - flops(none.t0), none.last_ms - none.first_ms) / 1e6
    if uncached.key not in GROWING:
        rate = math.nan  # extrapolate only from a growth this run measured and said
    kv_slope = kv.slope_ms if cached.key in GROWING else math.nan
    top = c.max_seq_len - 8
    lengths = range(5, top + 4)  # the slider's right end: a prompt of 4, then top - 1 decode passes
    none_s = sum(none.first_ms + (flops(t) - flops(none.t0)) / (rate * 1e6) for t in lengths) / 1e3
    kv_s = (sum(kv.first_ms + kv_slope * (t - kv.t0) for t in lengths) / 1e3 if cached.key in GROWING
            else kv.median_ms * top / 1e3)
    n = none_t.seq_len[-1]
    rough = uncached.key in ROUGH_KEYS  # the rate is from first and last of eighths that rose unevenly
    crossover = CROSSOVER.choose({"cross": _count(crossover_length(model)), "n": _count(n)})
    totals = _totals(none_t, kv_t, none, kv, c)
    return [
        totals,
        uncached,
        crossover,
        *_exponent_claims(none_t, "none", uncached, crossover),
        cached,
        *_exponent_claims(kv_t, "kv", cached, crossover),
        _fixed_cost_claim(totals, none_t, kv_t, kv_all, rate, c, rough),
        _rough(EXTRAPOLATION, rough).choose({"rate": number(rate, 1, "GFLOP/s"), "slope": number(kv_slope * 1e3, 2, "µs/token"),
                              "top": _count(top), "none_min": number(none_s / 60, 1, "min"),
                              "median": _ms(kv.median_ms), "kv_s": number(kv_s, 1, "s")}),
    ]


COMPARED_AT_LEAST = 8  # steps of each run at the lengths both took, for their medians to be compared


def _rerun(fit: StepFit, earlier: DecodeTiming) -> list[Claim]:
    """The long run's median step beside the latency panel's (cached) at the lengths both took (none: no claim)."""
    t_before, ms_before = earlier.seq_len[1:], [s * 1e3 for s in earlier.step_seconds[1:]]
    lo, hi = max(min(fit.t), min(t_before)), min(max(fit.t), max(t_before))
    here, there = steps_between(fit.t, fit.step_ms, lo, hi), steps_between(t_before, ms_before, lo, hi)
    if lo >= hi or min(len(here), len(there)) < COMPARED_AT_LEAST:
        return []
    here_ms, there_ms = median(here), median(there)
    return [RERUN.choose({"lo": _count(lo), "hi": _count(hi), "here": _ms(here_ms), "there": _ms(there_ms),
                          "diff": _pct(ratio(abs(here_ms - there_ms), there_ms))})]


def explain_growth(fit: StepFit, model: ToyTransformer, earlier: DecodeTiming | None = None) -> list[Claim]:
    """The long cached run as a claim (:data:`GROWTH`): measured medians at both ends, the fitted slope only where
    it agrees with them, and the cache read rate it implies; given the ``earlier`` cached run (the latency panel's),
    the two runs' median steps at the lengths both took, compared (:data:`RERUN`)."""
    ends = step_ends(fit.t, fit.step_ms)
    per_token = format_bytes(kv_bytes_per_token(model.config)).split()
    rate = ratio(kv_bytes_per_token(model.config), fit.slope_ms / 1e3) / 1e9 if fit.slope_ms > 0 else math.nan
    return [GROWTH.choose({**_ends_numbers(ends), "slope": number(fit.slope_ms * 1e3, 2, "µs/token", DIFFERENCE),
                           "per_token": Number(per_token[0], per_token[1]), "rate": number(rate, 1, "GB/s")}),
            *(_rerun(fit, earlier) if earlier is not None else [])]
