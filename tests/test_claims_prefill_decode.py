"""Chapter 3.3's claims (issue 31): every chooser's every key reached from synthetic timings, every claim of the
idle, busy (spiky, non-monotone), launch-bound GPU (flat) and noisy shapes passes kvlab.claims' checker from the
numbers as printed, and an idle run says something substantive with every chooser."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import pytest

from kvlab import claims
from kvlab.costs import decode_cost, pass_cost
from kvlab.generation import PassRecord
from kvlab.lessons import prefill_decode as lesson
from kvlab.measure import Rate
from kvlab.lessons.prefill_decode.sentences.common import vals

C = lesson.ROOFLINE_CONFIG
DEMO = replace(C, n_layer=C.n_layer // 2)  # the demo model has half the big one's layers


# -- synthetic measurements ------------------------------------------------------------------------------------
def rate(best: float, median: float | None = None) -> Rate:
    median = best if median is None else median
    return Rate(best, median, [median] * 14 + [best], "fake")


def roofs(bw_gbs: float, mm_gflops: float, bw_spread: float = 1.02, mm_spread: float = 1.03, gpu: bool = False):
    return lesson.Roofs(rate(bw_gbs * 1e9, bw_gbs * 1e9 / bw_spread), rate(mm_gflops * 1e9, mm_gflops * 1e9 / mm_spread),
                        "cuda（测试）" if gpu else "cpu（测试）", None if gpu else 2)


def sweep(prefill_ms: dict, decode_ms: float | dict = 16.0) -> lesson.PrefillSweep:
    dec = decode_ms if isinstance(decode_ms, dict) else {P: decode_ms for P in prefill_ms}
    return lesson.PrefillSweep([lesson.LengthPoint(P, t / 1e3, dec[P] / 1e3, 4, pass_cost(C, P), decode_cost(C, P, 4))
                                for P, t in prefill_ms.items()], C, "cpu（测试）")


def batch(step_ms: dict, context_len: int = 8) -> lesson.BatchSweep:
    return lesson.BatchSweep([lesson.BatchPoint(B, t / 1e3, decode_cost(C, context_len, 3, B), 3)
                              for B, t in step_ms.items()], context_len, C, "cpu（测试）")


def timeline(prefill_ms: list[float], decode_ms: list[list[float]], prompt_tokens: int = 12) -> lesson.Timeline:
    """Generations whose prefill and decode passes took these times; the shown one is the fastest prefill."""
    shown = min(range(len(prefill_ms)), key=lambda i: prefill_ms[i])
    trace = [PassRecord("prefill", prompt_tokens, prompt_tokens, prefill_ms[shown] / 1e3, 0, 0, 0, 0, 0, 0)]
    trace += [PassRecord("decode", prompt_tokens + i + 1, 1, s / 1e3, 0, 0, 0, 0, 0, 0)
              for i, s in enumerate(decode_ms[shown])]
    return lesson.Timeline("abc", prompt_tokens, ["x"] * len(trace), trace, 100, 10, "cpu（测试）", len(prefill_ms),
                           [t / 1e3 for t in prefill_ms], [s / 1e3 for run in decode_ms for s in run],
                           [sum(run) / len(run) / 1e3 for run in decode_ms if run],
                           [[s / 1e3 for s in run] for run in decode_ms])


def small(rows_ms: list[float], rows=(1, 2, 4, 8)) -> lesson.SmallMatmuls:
    return lesson.SmallMatmuls(list(rows), [t / 1e3 for t in rows_ms], 128 * 2**20, "cpu（测试）", 15)


def allocator(grow_mib: float, pre_mib: float) -> lesson.AllocatorComparison:
    def trace(mode, unused):
        return lesson.AllocatorTrace(mode, [1, 2], [2**20, 2**21], [2**20 + int(unused * 2**20)] * 2)
    return lesson.AllocatorComparison("cuda（测试）", True, "", {"dynamic": trace("dynamic", grow_mib),
                                                              "kv": trace("kv", pre_mib)})


@dataclass
class FakePrecision:
    max_logit_error: float


def precision(fp16: float, int8: float) -> dict:
    return {"kv": FakePrecision(0.0), "fp16": FakePrecision(fp16), "int8": FakePrecision(int8)}


def budget(measured_ms: float, r: lesson.Roofs) -> lesson.StepBudget:
    cost = pass_cost(lesson.ROOFLINE_CONFIG, 1, 12)
    return lesson.StepBudget(cost, cost.flops / r.flops.best, cost.bytes / r.bandwidth.best, measured_ms / 1e3)


# -- one run of the chapter, as claims --------------------------------------------------------------------------
@dataclass
class Run:
    """The measurements of one run of chapter 3.3 (what the notebook's cells measure)."""

    timeline: lesson.Timeline
    panel: lesson.Timeline
    prefill: lesson.PrefillSweep
    roofs: lesson.Roofs
    batch: lesson.BatchSweep
    small: lesson.SmallMatmuls
    step_ms: float
    alloc: lesson.AllocatorComparison
    precision: dict


def chapter_claims(run: Run) -> list[list[claims.Claim]]:
    """Every claim the notebook shows, grouped by the cell that shows it."""
    worked = lesson.worked_decode_step(C, 8)
    return [
        lesson.explain_latency(run.timeline) + lesson.explain_prefill_parallel(run.timeline),
        lesson.explain_panel(run.panel, run.timeline),
        lesson.explain_prefill_growth(run.prefill) + lesson.explain_speedups(run.prefill),
        lesson.explain_measured_roofs(run.roofs),
        lesson.explain_worked_bounds(worked, run.roofs) + lesson.explain_step_budget(budget(run.step_ms, run.roofs)),
        lesson.explain_prefill(run.prefill, run.roofs) + lesson.explain_prefill_vs_roof(run.prefill, run.roofs)
        + lesson.explain_prefill_rates(run.prefill) + lesson.explain_long_rate(run.prefill),
        lesson.explain_decode_vs_roof(run.prefill, run.roofs, budget(run.step_ms, run.roofs), DEMO),
        lesson.explain_batch_baseline(run.batch, run.prefill), lesson.explain_batch_gain(run.batch, run.roofs),
        lesson.explain_batch(run.batch, run.roofs)
        + lesson.explain_batch_vs_prefill(run.batch, run.prefill),
        lesson.explain_overlap(run.batch, run.roofs),
        lesson.explain_small_matmuls(run.small, run.batch) + lesson.explain_small_matmul_reads(run.small, run.roofs, run.prefill)
        + lesson.explain_decode_sum(run.small, run.prefill, budget(run.step_ms, run.roofs), DEMO, run.batch),
        lesson.explain_allocator(run.alloc),
        lesson.explain_precision(run.precision, C),
    ]


PS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
BS = (1, 2, 4, 8, 16, 32)
IDLE = Run(
    timeline([3.1, 3.0, 3.2], [[1.2] * 23] * 3), timeline([3.2, 3.1, 3.3], [[1.25] * 23] * 3),
    sweep({P: 14 + 0.8 * P for P in PS}), roofs(10, 75),
    batch({1: 16.5, 2: 17.0, 4: 17.5, 8: 18.5, 16: 21.0, 32: 30.0}), small([10.0, 10.6, 11.4, 12.4]), 2.5,
    allocator(6.0, 0.5), precision(1e-4, 2e-2))
BUSY = Run(  # two spinners beside the kernel: spikes, a prefill slower at P = 2 than at 4, roofs spread
    timeline([9.8, 4.4, 6.1], [[1.2, 7.9, 1.3] * 7 + [9.0, 1.2]] * 3), timeline([2.6, 8.0, 4.0], [[8.0] * 23] * 3),
    sweep({1: 14.2, 2: 48.0, 4: 21.0, 8: 33.7, 16: 30.0, 32: 52.0, 64: 68.6, 128: 60.0, 256: 218.0}, 23.0),
    roofs(9, 96.8, 1.3, 2.5),
    batch({1: 23.1, 2: 32.3, 4: 56.9, 8: 54.4, 16: 80.0, 32: 96.8}), small([13.3, 30.0, 110.8, 96.4]), 9.0,
    allocator(3.0, 2.0), precision(1e-4, 2e-2))
GPU = Run(  # a small model on a GPU: every pass launch-bound, flat in P and B
    timeline([2.0, 2.0, 2.1], [[1.9] * 23] * 3), timeline([2.0, 2.05, 2.1], [[1.9] * 23] * 3),
    sweep({P: 2.0 + 0.0015 * P for P in PS}, 1.9), roofs(3000, 40000, gpu=True),
    batch({B: 1.9 for B in BS}), small([0.06, 0.06, 0.061, 0.062]), 1.9,
    allocator(40.0, 0.0), precision(0.0, 2e-2))
NOISY = Run(  # one run interrupted here and there: some steps level, some jumps
    timeline([30.0, 31.0, 29.0], [[1.0] * 23] * 3), timeline([3.0, 3.0, 3.0], [[1.0] * 23] * 3),
    sweep({1: 10.0, 2: 34.0, 4: 35.0, 8: 36.0, 16: 37.0, 32: 38.0, 64: 39.0, 128: 100.0, 256: 90.0}, 10.0),
    roofs(10, 85, 1.2, 1.15),
    batch({1: 20.0, 2: 40.0, 4: 21.0, 8: 25.0, 16: 30.0, 32: 40.0}), small([10.0, 10.5, 10.8, 14.0]), 10.0,
    allocator(0.5, 0.4), precision(1e-4, 2e-2))
SHAPES = {"idle": IDLE, "busy": BUSY, "gpu": GPU, "noisy": NOISY}


def shown(claim_groups) -> dict:
    """A fake executed notebook: one cell per group, each showing its claims as ``lesson.show_claims`` does."""
    cells = [{"cell_type": "code", "outputs": [{"output_type": "display_data",
                                                "data": {"text/plain": "\n".join(lesson.ZH.say(c) for c in group)},
                                                "metadata": {claims.METADATA_KEY: [c.record() for c in group]}}]}
             for group in claim_groups]
    return {"cells": cells}


def keys(run: Run) -> list[str]:
    return [c.key for group in chapter_claims(run) for c in group]


def print_keys():  # pragma: no cover - a helper to look at the shapes by hand
    for name, run in SHAPES.items():
        print(name, keys(run))


NAN = math.nan
BROKEN = Run(  # nothing measured: every time NaN (a timer that failed, a run interrupted before it printed)
    timeline([NAN, NAN], [[NAN] * 3] * 2), timeline([NAN, NAN], [[NAN] * 3] * 2),
    sweep({P: NAN for P in PS}, NAN), lesson.Roofs(rate(NAN), rate(NAN), "cpu（测试）", 2),
    batch({B: NAN for B in BS}), small([NAN] * 4), NAN, allocator(-1.0, 0.0), precision(NAN, NAN))  # counters: reserved < allocated


def sweep_at(gflops: dict, decode_ms: float = 16.0) -> lesson.PrefillSweep:
    """A sweep whose prefill reaches the given GFLOP/s at each P."""
    return sweep({P: pass_cost(C, P).flops / (g * 1e9) * 1e3 for P, g in gflops.items()}, decode_ms)


# the executed run the review of this change started from (load about 1): its printed numbers
H33_TIMELINE = timeline([1.70, 1.75, 1.80], [[0.56] + [0.67] * 22] * 3, prompt_tokens=22)
H33_SWEEP = sweep({1: 9.00, 2: 12.06, 4: 13.13, 8: 19.30, 16: 25.35, 32: 31.10, 64: 57.46, 128: 101.21, 256: 199.73},
                  {1: 8.02, 2: 7.65, 4: 8.67, 8: 8.90, 16: 8.61, 32: 8.54, 64: 10.50, 128: 9.36, 256: 9.57})
H33_ROOFS = roofs(34.2, 91.7, 1.01, 1.00)
H33_BATCH = batch({1: 7.60, 2: 10.70, 4: 13.78, 8: 16.51, 16: 21.95, 32: 34.09})
H33_SMALL = small([5.84, 11.63, 15.18, 16.75])
# the fourth review's run (/tmp/r4, chapter 3.3 executed at load ~10)
R4_TIMELINE = timeline([1.63, 1.70, 1.75], [[0.54] + [0.60] * 22] * 3, prompt_tokens=22)
R4_SWEEP = sweep({1: 6.45, 2: 10.24, 4: 11.69, 8: 14.13, 16: 18.87, 32: 28.78, 64: 49.48, 128: 89.35, 256: 174.52},
                 {1: 6.13, 2: 7.18, 4: 6.52, 8: 6.30, 16: 6.42, 32: 6.57, 64: 6.96, 128: 7.05, 256: 7.81})
R4_ROOFS = roofs(36.4, 94.4)
R4_BATCH = batch({1: 7.31, 2: 10.14, 4: 12.81, 8: 15.40, 16: 20.74, 32: 31.96})
R4_SMALL = small([5.30, 10.47, 12.94, 15.34])
REVIEWED = {1: 10.48, 2: 23.30, 4: 35.53, 8: 31.78, 16: 48.64, 32: 70.26, 64: 134.50, 128: 232.42, 256: 466.12}
RIDGE_5_5 = roofs(20, 110)  # B = 16 and 32 right of the ridge, 1 to 8 left of it
Q = roofs(20, 100)  # a quiet machine: ridge 5
# Shapes the four runs above do not show, each one reaching the keys named (tested below)
CASES = {
    "many ITL samples": lambda: lesson.explain_latency(timeline([3.0] * 5, [[1.2] * 23] * 5)),
    "prefill faster, not half": lambda: lesson.explain_prefill_parallel(timeline([10.0] * 3, [[1.2] * 23] * 3)),
    "prefill grows slower than P": lambda: lesson.explain_prefill_growth(sweep({1: 10, 2: 13, 4: 17, 8: 22})),
    "prefill slower than P but for one step": lambda: lesson.explain_prefill_growth(  # an executed busy run
        sweep({1: 15.47, 2: 28.00, 4: 35.04, 8: 37.78})),
    "prefill in proportion to P": lambda: lesson.explain_prefill_growth(sweep({1: 10, 2: 20, 4: 40, 8: 80})),
    "prefill slow all along": lambda: lesson.explain_prefill(sweep({1: 10, 2: 11, 4: 12, 8: 13}), Q),
    "prefill speeding up": lambda: lesson.explain_prefill(sweep({1: 1, 8: 2, 32: 6}), Q),
    "ridge not reached": lambda: lesson.explain_prefill(sweep({1: 10, 2: 11, 4: 12}), Q),
    "rates rise then level": lambda: lesson.explain_prefill_rates(
        sweep({1: 10, 2: 10.5, 4: 11, 8: 12, 16: 14, 32: 29.5, 64: 60, 128: 121, 256: 245})),
    "speedup rises then levels": lambda: lesson.explain_speedups(
        sweep({1: 10, 2: 10.5, 4: 11, 8: 12, 16: 14, 32: 29.5, 64: 60, 128: 121, 256: 245})),
    "speedup irregular": lambda: lesson.explain_speedups(sweep({1: 10, 2: 30, 4: 25, 8: 60}, 10.0)),
    "one pass not faster at a long prompt": lambda: lesson.explain_speedups(sweep({32: 40.0, 64: 50.0}, 1.0)),
    "longest prefill slower than the shortest": lambda: lesson.explain_long_rate(sweep({1: 1.0, 8: 20.0})),
    "longest prefill below decode": lambda: lesson.explain_long_rate(sweep({1: 10.0, 8: 200.0})),
    "batch throughput not higher": lambda: lesson.explain_batch_gain(batch({1: 10.0, 2: 25.0})),
    "far below the roof, rising": lambda: lesson.explain_prefill_vs_roof(sweep_at({128: 10, 256: 20}), Q),
    "half the roof": lambda: lesson.explain_prefill_vs_roof(sweep_at({128: 40, 256: 43}), Q),
    "near the roof and rising": lambda: lesson.explain_prefill_vs_roof(sweep_at({128: 72, 256: 87}), Q),
    "decode uses the bandwidth up": lambda: lesson.explain_decode_vs_roof(sweep_at({256: 50}, 5.6), Q, budget(1.0, Q), DEMO),
    "decode far below, beyond the demo's overhead": lambda: lesson.explain_decode_vs_roof(  # a quiet machine
        sweep_at({256: 50}, 40.0), Q, budget(1.0, Q), DEMO),
    "decode far below on a busy machine": lambda: lesson.explain_decode_vs_roof(  # the review's run (busy roofs)
        sweep(REVIEWED, {P: 20.27 for P in PS}), roofs(24.8, 37.9, 1.77, 1.37), budget(0.74, Q), DEMO),
    "the review's sweep": lambda: lesson.explain_prefill_growth(sweep(REVIEWED)) + lesson.explain_prefill(
        sweep(REVIEWED), roofs(24.8, 37.9)) + lesson.explain_prefill_rates(sweep(REVIEWED, 20.0)),
    "rates rise but for one small dip": lambda: lesson.explain_prefill_rates(
        sweep_at({1: 5.3, 2: 4.6, 4: 5.9, 8: 13.1, 16: 17.1, 32: 23.7, 64: 25.0, 128: 29.5, 256: 30.5})),
    "rates rise but for one large dip (review N1)": lambda: lesson.explain_prefill_rates(
        sweep_at({1: 7.5, 2: 10.0, 4: 15.4, 8: 16.8, 16: 37.4, 32: 52.2, 64: 57.5, 128: 45.2, 256: 66.9})),
    "trend against the best earlier rate (review N6)": lambda: lesson.explain_prefill_vs_roof(
        sweep_at({64: 57.5, 128: 45.2, 256: 66.9}), roofs(16.9, 58.6)),
    "ridge rounds onto B = 4 (review N2)": lambda: lesson.explain_overlap(batch({1: 10.0, 2: 15.0, 4: 22.0}),
                                                                          roofs(20, 40.52)),
    "no B left of the ridge but B = 1": lambda: lesson.explain_overlap(batch({1: 10.0, 2: 15.0}), roofs(20, 15)),
    "decode at the bandwidth's median on a busy machine (review N5)": lambda: lesson.explain_decode_vs_roof(
        sweep_at({256: 50}, decode_cost(C, 256, 4).bytes / 4 / 16.5e9 * 1e3), roofs(28.9, 58.6, 28.9 / 16.9),
        budget(1.0, Q), DEMO),
    "batch right of the ridge, capped by the matmul roof (review N4)": lambda: lesson.explain_batch_gain(
        batch({1: 1e3 / 135, 2: 10.0, 4: 11.0, 8: 14.0, 16: 24.0, 32: 32e3 / 820}), roofs(28.9, 58.6)),
    "batch throughput higher, left of the ridge": lambda: lesson.explain_batch_gain(batch({1: 10.0, 2: 15.0}), Q),
    "step grows as the sum model says": lambda: lesson.explain_overlap(batch({1: 20.0, 2: 22.0}), Q),
    "more rows, a faster step": lambda: lesson.explain_overlap(batch({1: 20.0, 2: 15.0}), Q),
    "compute the longer bound": lambda: lesson.explain_worked_bounds(lesson.worked_decode_step(C, 8), roofs(1000, 100)),
    "batch B = 1 faster than the sweep's": lambda: lesson.explain_batch_baseline(batch({1: 10.0, 2: 11.0}),
                                                                                  sweep({8: 20.0}, 16.0)),
    "batch crosses the ridge at once": lambda: lesson.explain_batch(batch({1: 16, 2: 17, 4: 18}), roofs(100, 80)),
    "batch left of the ridge uneven": lambda: lesson.explain_batch(batch({1: 16, 2: 25, 4: 17, 8: 18}), Q),
    "batch left of the ridge unmeasured": lambda: lesson.explain_batch(batch({B: NAN for B in BS}), RIDGE_5_5),
    "batch shape inverted": lambda: lesson.explain_batch(batch({1: 23.07, 2: 30, 4: 40, 8: 56.55, 16: 80, 32: 96.8}),
                                                         RIDGE_5_5),
    "batch shape the same": lambda: lesson.explain_batch(
        batch({1: 21.36, 2: 32.58, 4: 51.03, 8: 52.57, 16: 66.5, 32: 87.74}), RIDGE_5_5),
    "batch shape ideal": lambda: lesson.explain_batch(batch({1: 20, 2: 20.2, 4: 20.4, 8: 20.6, 16: 30, 32: 60}),
                                                      RIDGE_5_5),
    "matrix-vector faster, decode unmeasured": lambda: lesson.explain_small_matmul_reads(
        small([3.0, 4, 5, 6]), roofs(10, 85), sweep({256: 200.0}, NAN)),
    "the third review's decode step, accounted for": lambda: lesson.explain_decode_sum(  # 19.2 GB/s, 2.5 ms, 8.61 ms
        small([128 * 2**20 / 19.2e9 * 1e3, 8, 9, 10]), sweep({256: 200.0}, 8.61), budget(1.25, Q), DEMO),
    "batch right of the ridge, steeper than B": lambda: lesson.explain_batch(
        batch({1: 20, 2: 20.2, 4: 20.4, 8: 20.6, 16: 30, 32: 75}), RIDGE_5_5),
    "batch right of the ridge, above the measured roof": lambda: lesson.explain_batch(
        batch({1: 5, 2: 5.2, 4: 5.4, 8: 5.6, 16: 7.0, 32: 9.0}), RIDGE_5_5),
    "prefill slower than P in every step, one step not much slower": lambda: lesson.explain_prefill_growth(
        sweep({1: 10, 2: 15, 4: 16.5, 8: 18})),
    "prefill slower than P in every step, the steepest step later": lambda: lesson.explain_prefill_growth(
        sweep({1: 10, 2: 11, 4: 16.5, 8: 18})),
    "prefill doubles from P = 1 to 2, then barely grows (review 3.3 #1)": lambda: lesson.explain_prefill_growth(
        sweep({1: 13.0, 2: 27.0, 4: 27.0, 8: 28.0})),
    "rates rise with two small dips, then level (review 3.3 #2)": lambda: lesson.explain_prefill_rates(
        sweep_at({1: 4.3, 2: 4.1, 4: 8.0, 8: 14.8, 16: 27.6, 32: 47.1, 64: 70.7, 128: 82.8, 256: 78.1})),
    **{f"the fourth review's run ({part})": case for part, case in {
        "timeline": lambda: lesson.explain_prefill_parallel(R4_TIMELINE),
        "prefill growth": lambda: lesson.explain_prefill_growth(R4_SWEEP),
        "batch gain": lambda: lesson.explain_batch_gain(R4_BATCH, R4_ROOFS),
        "decode step": lambda: lesson.explain_decode_sum(R4_SMALL, R4_SWEEP, budget(0.578, R4_ROOFS), DEMO, R4_BATCH),
    }.items()},
    **{f"the executed run of /tmp/h33 ({part})": case for part, case in {
        "timeline": lambda: lesson.explain_prefill_parallel(H33_TIMELINE),
        "batch": lambda: lesson.explain_batch(H33_BATCH, H33_ROOFS),
        "decode step": lambda: lesson.explain_decode_sum(H33_SMALL, H33_SWEEP, budget(0.67, H33_ROOFS), DEMO),
    }.items()},
}


# -- the tests ------------------------------------------------------------------------------------------------
def test_every_key_of_every_chooser_is_reached():
    reached = {c.key for run in [*SHAPES.values(), BROKEN] for group in chapter_claims(run) for c in group}
    reached |= {c.key for case in CASES.values() for c in case()}
    assert reached == {k for chooser in lesson.CHOOSERS for k in chooser.keys}


@pytest.mark.parametrize("name", [*SHAPES, "broken"])
def test_every_claim_of_every_shape_passes_the_checker(name):
    """The checker's verdict, and every number shown sound (finite, an absolute one not negative); the only other
    digits a sentence prints are its fixed bands (±15%, 0.8 to 1.25), not measurements."""
    groups = chapter_claims(SHAPES.get(name, BROKEN))
    assert claims.check_recorded(shown(groups), lesson.CHOOSERS) == []
    assert all(c.sound for group in groups for c in group)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_case_passes_the_checker(name):
    nb = shown([CASES[name]()])
    assert claims.recorded(nb) and claims.check_recorded(nb, lesson.CHOOSERS) == []


def test_an_idle_run_says_something_substantive_with_every_chooser():
    said = {c.key for group in chapter_claims(IDLE) for c in group}
    for chooser in lesson.CHOOSERS:
        if chooser is lesson.sentences.PREFILL_TREND:  # said only beside a roof claim that is not launch-bound
            continue
        keys = [k for k in said if k in chooser.keys]
        assert keys and all(chooser.rule(k).substantive for k in keys), (chooser.name, keys)


def test_each_template_shows_exactly_what_its_rule_checks():
    for chooser in lesson.CHOOSERS:
        assert chooser.rules[-1].shows == () and not chooser.rules[-1].substantive  # can't tell, always sayable
        for rule in chooser.rules:
            assert lesson.ZH.placeholders(rule.key) - {"why", "missing"} == set(rule.shows), rule.key  # terms
            if not rule.substantive:
                assert "运行" in lesson.ZH.templates[rule.key] or "拖到" in lesson.ZH.templates[rule.key], rule.key


def test_a_tampered_record_is_caught_by_the_checker():
    """The checker re-evaluates the predicate on the printed numbers: a 'much slower than the tokens' beside a step
    of x3.4 (the issue's busy run) is refused, whatever the chooser said."""
    claim = lesson.explain_prefill_growth(sweep({1: 10.0, 2: 13.0, 4: 17.0, 8: 22.0}))[0]
    assert claim.key.endswith(".slow")
    bad = claims.Claim(claim.key, {**claim.fields, "ts": claims.series([10.0, 34.0, 35.0, 36.0], 2, "ms")})
    nb = {"cells": [{"outputs": [{"data": {"text/plain": lesson.ZH.say(bad)},
                                  "metadata": {claims.METADATA_KEY: [bad.record()]}}]}]}
    assert any("does not hold" in p for p in claims.check_recorded(nb, lesson.CHOOSERS))


@pytest.mark.parametrize("run, key", [
    (BUSY, "prefill_decode.prefill_growth.dropped"),  # P = 2 slower than P = 4
    (NOISY, "prefill_decode.prefill_growth.uneven"),  # P = 1 -> 2 at x3.4, the issue's run
    (BUSY, "prefill_decode.prefill_tail.steep"),  # 68.6 -> 218 ms for 4x the tokens ... k 0.84, 128 -> 256: 1.86
    (BUSY, "prefill_decode.prefill_roof.peaked_earlier"),  # not 「还在上升，还没有完全贴住屋顶」
    (BUSY, "prefill_decode.prefill_rates.irregular"),  # not 「一路向右上方走」
    (BUSY, "prefill_decode.panel.differs"),  # the panel's TTFT 2.60 against 4.40 ms: not 「略有出入」
    (GPU, "prefill_decode.prefill_growth.launch_bound"),
    (GPU, "prefill_decode.batch_left.flat"),
])
def test_the_issues_contradicted_sentences_cannot_be_said(run, key):
    assert key in keys(run)


def test_a_negative_difference_is_printed_with_the_minus_sign():
    """「−」 (U+2212), never an ASCII hyphen before a digit; kvlab.claims reads it back as a minus."""
    said = [c for run in [*SHAPES.values(), BROKEN] for group in chapter_claims(run) for c in group]
    said += [c for case in CASES.values() for c in case()]
    negative = [c for c in said if any(n.kind == claims.DIFFERENCE and n.sound and min(vals(n.value)) < 0
                                       for n in c.fields.values())]
    assert negative and all(claims.MINUS in lesson.ZH.say(c) for c in negative)
    assert not [lesson.ZH.say(c) for c in said if re.search(r"(?<![\w`])-\d", lesson.ZH.say(c))]


def test_the_right_of_the_ridge_reading_of_the_executed_run():
    """/tmp/h33's batch sweep: ×1.44 per doubling past the ridge, every point under the matmul roof, is said to sit
    below both roofs, not to contradict the ideal ×2."""
    right = [c for c in lesson.explain_batch(H33_BATCH, H33_ROOFS) if ".batch_right." in c.key]
    assert [c.key for c in right] == ["prefill_decode.batch_right.below_roofs"]
    assert right[0].fields["g"].text == "1.44" and "两道屋顶之下" in lesson.ZH.say(right[0])


def test_the_decode_step_is_taken_apart_only_when_the_sum_lands_within_the_band():
    accounted = CASES["the third review's decode step, accounted for"]()[0]
    assert accounted.key.endswith(".accounted") and accounted.fields["share"].text == "101"
    short = CASES["the executed run of /tmp/h33 (decode step)"]()[0]  # an idle run: the two parts fall short
    assert short.key.endswith(".short") and short.fields["share"].text == "68" and short.fields["rest"].text == "3.03"
    over = lesson.explain_decode_sum(BUSY.small, BUSY.prefill, budget(BUSY.step_ms, BUSY.roofs), DEMO)[0]
    assert over.key.endswith(".off") and over.fields["share"].value > 115


def test_the_fourth_reviews_prefill_growth_names_its_steepest_step():
    """/tmp/r4: P = 1 → 2 took ×1.59 for ×2 tokens (exponent 0.67): every step slower than the tokens, but not every
    one much slower; the sentence names that step instead of 「每一段都涨得比 token 数慢得多」."""
    claim = CASES["the fourth review's run (prefill growth)"]()[0]
    assert claim.key == "prefill_decode.prefill_growth.slow_steepest_matvec"  # review r5: P = 1 -> 2 is matvec -> matmul
    assert (claim.fields["ps"].text, claim.fields["qs"].text, claim.fields["step"].text) == ("1", "2", "1.59")
    assert "P = 1 是矩阵乘向量，P ≥ 2 换成行数很少的矩阵乘，见选学「行数很少的矩阵乘」" in lesson.ZH.say(claim)
    text = lesson.ZH.say(claim)
    assert "慢得多" not in text.replace("不是每一段都慢得多", "") and "token 数变为 8.0 倍" in text
    much = CASES["prefill grows slower than P"]()[0]  # 10, 13, 17, 22 ms: every exponent under 0.5
    assert much.key == "prefill_decode.prefill_growth.slow" and "慢得多" in lesson.ZH.say(much)
    other = CASES["prefill slower than P in every step, one step not much slower"]()[0]
    assert other.key == "prefill_decode.prefill_growth.slow_steepest_matvec" and other.fields["ps"].text == "1"
    later = CASES["prefill slower than P in every step, the steepest step later"]()[0]
    assert later.key == "prefill_decode.prefill_growth.slow_steepest" and later.fields["ps"].text == "2"
    assert "矩阵乘向量" not in lesson.ZH.say(later)


def test_the_fourth_reviews_short_decode_sum_quotes_the_drift_of_the_same_work():
    """/tmp/r4: the sum fell 1.92 ms short of the 7.81 ms step while the same B = 1 work drifted +16 % between two
    timings: the sentence quotes that drift (a field) and says 「未必只是」, not 「不只是」."""
    claim = CASES["the fourth review's run (decode step)"]()[0]
    assert claim.key == "prefill_decode.decode_sum.short_drifted"
    assert (claim.fields["b1"].text, claim.fields["dec"].text, claim.fields["drift"].text) == ("7.31", "6.30", "+16")
    assert claim.fields["step"].text == "7.81"
    text = lesson.ZH.say(claim)
    assert "+16%" in text and "不同时刻" in text and "未必只是" in text and "不只是" not in text.replace("未必只是", "")
    assert "±15% 以内才算对得上" in text
    steady = lesson.explain_decode_sum(R4_SMALL, R4_SWEEP, budget(0.578, R4_ROOFS), DEMO,
                                       batch({1: 6.50, 2: 10.14}))[0]  # the same work within ±15 %: no drift to quote
    assert steady.key == "prefill_decode.decode_sum.short" and "drift" not in steady.fields
    assert "不同时刻" in lesson.ZH.say(steady) and "未必只是" in lesson.ZH.say(steady)


def test_the_fourth_reviews_product_multiplies_the_printed_factors():
    """/tmp/r4 printed 「22 × 0.54 ms = 11.84 ms」 (the unrounded step): the product is now 22 × 0.54 = 11.88."""
    claim = CASES["the fourth review's run (timeline)"]()[0]
    assert claim.key == "prefill_decode.parallel.half"
    assert (claim.fields["itl"].text, claim.fields["sequential"].text) == ("0.54", "11.88")
    off = claims.Claim(claim.key, {**claim.fields, "sequential": claims.Number("11.84", "ms")})
    assert not lesson.sentences.PARALLEL.rule(claim.key).admits(off)


def test_the_fourth_reviews_batch_gain_says_which_ratio_falls_short():
    """/tmp/r4: 「…单步耗时 ×4.38：没到 32 倍」 read as if the step fell short; the throughput is what falls short."""
    claim = CASES["the fourth review's run (batch gain)"]()[0]
    text = lesson.ZH.say(claim)
    assert claim.key.endswith((".compute_capped", ".higher")) and "没到理想的 32 倍" in text
    assert text.index("没到理想的 32 倍") < text.index("单步耗时")


def test_a_jump_at_p_1_to_2_then_no_growth_names_the_kernel_change():
    """Review 3.3 #1: 13, 27, 27, 28 ms at P = 1, 2, 4, 8: P = 1 → 2 grew faster than the tokens, then barely at
    all: the matrix-vector kernel gives way to a matrix-multiply one; the sentence says so and blames no other
    program. A steep step followed by real growth (the busy run 15.47, 28.00, 35.04, 37.78 ms) is not this case."""
    claim = CASES["prefill doubles from P = 1 to 2, then barely grows (review 3.3 #1)"]()[0]
    assert claim.key == "prefill_decode.prefill_growth.matvec_jump"
    assert (claim.fields["ps"].text, claim.fields["qs"].text, claim.fields["step"].text) == ("1", "2", "2.08")
    zh, en = lesson.ZH.say(claim), lesson.EN.say(claim)
    assert "矩阵乘向量内核" in zh and "别的程序" not in zh
    assert "matrix-vector kernel" in en and "other programs" not in en
    assert CASES["prefill slower than P but for one step"]()[0].key == "prefill_decode.prefill_growth.slow_overall"
    steady = lesson.explain_prefill_growth(sweep({1: 13.0, 2: 27.0, 4: 40.0, 8: 45.0}))[0]
    assert steady.key != "prefill_decode.prefill_growth.matvec_jump"  # P = 2 -> 4 grew ×1.48: not "barely"


def test_rates_with_small_dips_then_level_are_not_called_irregular():
    """Review 3.3 #2: 4.3, 4.1, 8.0, …, 82.8, 78.1 GFLOP/s dip by 5 % and 6 % only, within the ±15 % the trend
    sentence calls level: rising to P = 128, then level; a dip beyond 15 % before the peak stays irregular."""
    claim = CASES["rates rise with two small dips, then level (review 3.3 #2)"]()[0]
    assert claim.key == "prefill_decode.prefill_rates.rise_then_level_dips" and claim.fields["P_peak"].text == "128"
    assert "P = 128" in lesson.EN.say(claim) and "15%" in lesson.EN.say(claim)
    big = lesson.explain_prefill_rates(
        sweep_at({1: 4.3, 2: 3.0, 4: 8.0, 8: 14.8, 16: 27.6, 32: 47.1, 64: 70.7, 128: 82.8, 256: 78.1}))[0]
    assert big.key == "prefill_decode.prefill_rates.irregular"  # 4.3 -> 3.0 is -30 %


def test_a_speedup_that_stalls_at_the_kernel_change_and_at_the_top_is_not_blamed_on_other_programs_alone():
    """The second English review's run: 1.0, 1.0, 2.0, 3.5, 6.6, 11.1, 18.1, 18.1, 19.8 falls to 'overall'; its
    flat steps come from the matrix-vector kernel at P = 1 and from long prompts levelling off, which it now names."""
    run = sweep({1: 14.91, 2: 30.14, 4: 31.01, 8: 33.40, 16: 38.65, 32: 44.99, 64: 56.74, 128: 111.34, 256: 209.76},
                {1: 14.93, 2: 14.72, 4: 15.32, 8: 14.62, 16: 15.96, 32: 15.63, 64: 16.01, 128: 15.70, 256: 16.23})
    growth = lesson.explain_speedups(run)[-1]
    assert growth.key == "prefill_decode.speedup_growth.overall"
    chinese, english = lesson.ZH.say(growth), lesson.EN.say(growth)
    assert "：1.0、1.0、2.0、3.5、6.6、11.1、18.1、" in chinese and "换了计算内核" in chinese
    assert ": 1.0, 1.0, 2.0, 3.5, 6.6, 11.1, 18.1, " in english
    assert "the kernel changes between the shortest prompts" in english
