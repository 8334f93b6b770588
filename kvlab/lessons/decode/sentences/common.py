"""What chapter 3.1's claims share: numbers as printed (``_ms``, ``_count``, ``_pct``), how a series of eighths'
medians reads (rising, level, one outlier away, rising roughly), printed ratios and shares checked against the printed
numbers they come from, and the one "rerun" phrase every topic ends its can't-tell sentences with."""
from __future__ import annotations

from ....claims import Chooser, Number, number, series
from ....stats import median
from ..timings import StepEnds


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


def _rough(chooser: Chooser, rough: bool) -> Chooser:
    """``chooser`` with only its ``_rough`` keys (rough) or only the others, its can't-tell keys kept: what is said
    after an uncached growth sentence in ROUGH_KEYS (the rate from its first and last eighth is a rough one)."""
    return Chooser(chooser.name, tuple(r for r in chooser.rules
                                       if r.key.endswith("_rough") == rough or not r.substantive))


_RERUN = "把上面面板里的「重复次数（取中位数）」调大，点「运行测量」，再运行这一格；机器忙时先关掉别的占 CPU 的程序。"
# the same in English (the panel's controls named as its English edition shows them: repeats, 「运行测量」's button)
_RERUN_EN = ("raise the number of repeats (the median is taken) in the panel above, click “Run the measurement” and "
             "rerun this cell; if the machine is busy, close other CPU-heavy programs first.")
