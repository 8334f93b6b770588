"""Chapter 3.1's timed runs turned into claims: :func:`explain_latency` (the latency panel's two runs) and
:func:`explain_growth` (the long cached run), each building the very numbers its sentences print and asking the
topics' choosers (:mod:`.series`, :mod:`.exponents`, :mod:`.growth`) which sentence they support."""
from __future__ import annotations

import math

from ....claims import DIFFERENCE, Claim, Number, number, ratio, series
from ....measure import DecodeTiming
from ....stats import median
from ....memory import format_bytes, kv_bytes_per_token
from ....model import ToyTransformer
from ..timings import (StepEnds, StepFit, crossover_length, generation_flops, step_ends, steps_between, timing_ends,
                       uncached_flops)
from .common import _count, _ends_numbers, _inversions, _ms, _pct, _rough, lone_outlier
from .exponents import (CUMULATIVE, CUMULATIVE_LEVEL, STEP_EXPONENT, STEP_JUMP, STEP_OUTLIER, STEP_STEEP,
                        _unread, ends_exponent, implied_exponent)
from .growth import EXTRAPOLATION, FIXED_COST, GROWTH, RERUN
from .series import CACHED, CROSSOVER, GROWING, OUTLIER_KEYS, ROUGH_KEYS, TOTALS, UNCACHED


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
    step["ends_k"] = number(ends_exponent(*(step[n].value for n in ("from", "to", "t_from", "t_to"))), kind=DIFFERENCE)
    reading = STEP_EXPONENT.choose(step, {"mode": mode})
    read = STEP_EXPONENT.rule(reading.key).substantive  # an exponent already said to be noise or unfit stays so
    grows = growth.key in GROWING
    if not step["k"].sound:
        pass  # an exponent that could not be fitted is said to be so, whatever came before
    elif growth.key.endswith((".flat", ".flat_outlier")):  # 「看不出随 t 的增长」: the exponent is never read
        reading = _unread("level").choose(step, {"mode": mode})
    elif growth.key in OUTLIER_KEYS:
        reading = STEP_OUTLIER.choose({"k": step["k"], "outlier": growth.fields["outlier"]}, {"mode": mode})
    elif growth.key.endswith(".noisy"):  # whatever the reading (off_share too would quote a share): not read
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
