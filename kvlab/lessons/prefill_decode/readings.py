"""Chapter 3.3, reading the roofline: one decode step counted by hand before anything is measured, and the
sentences that compare what was measured with the roofs. Every sentence is chosen from the numbers, with a
branch for each shape: close to a roof or far below it, a busy machine (the repeats of a roof spread too
much to trust it), and a GPU's shape (a small model on a GPU is launch-bound: its time barely moves with P
or B, far below both roofs)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...config import ModelConfig
from ...claims import Claim, number, ratio
from ...costs import PassCost, attention_flops, pass_cost
from ...measure import Rate, Roofs
from ...memory import format_bytes
from .batching import BatchSweep, SmallMatmuls
from .prefill_sweep import PrefillSweep
from .phrases import PANELS
from .roofline import explain_roofs
from .timeline import StepBudget
from .sentences.common import SAME, count, gbs, gflops, ms, pct, signed_pct, times, us
from .sentences.readings import (BATCH_BASELINE, BATCH_VS_PREFILL, BUSY, DECODE_ROOF, DECODE_SUM, DECODE_VS_MATVEC,
                                 LONG_RATE, MATVEC_READ, PREFILL_ROOF, PREFILL_TREND, ROOF_SPREAD, STEADY, WORKED_BOUNDS)

STEADY_SPREAD, BUSY_SPREAD = STEADY, BUSY  # a roof's fastest repeat over its median: agree within, busy from
SAME_BAND = SAME / 100  # two measurements within ±15 % of each other agree


# -- one decode step, counted by hand ------------------------------------------------------------------
@dataclass(frozen=True)
class WorkedStep:
    """One decode step of one sequence after ``context`` cached tokens, split the way the worked example
    counts it (all numbers from :mod:`kvlab.costs`)."""

    config: ModelConfig
    context: int
    cost: PassCost
    attention_flops: int  # the scores and the weighted sum over the cache, all layers

    @property
    def matmul_flops(self) -> int:
        """Every other FLOP: each weight used once, one multiply-add (2 FLOP) per weight read."""
        return self.cost.flops - self.attention_flops


def worked_decode_step(config: ModelConfig, context: int = 8) -> WorkedStep:
    """The decode step of one sequence after ``context`` cached tokens, FP32."""
    return WorkedStep(config, context, pass_cost(config, 1, context), attention_flops(config, 1, context))


def explain_worked_step(w: WorkedStep, prompt_len: int = 256) -> list[str]:
    """The worked example in four lines, and the prefill of ``prompt_len`` tokens next to it."""
    c, cost = w.config, w.cost
    prefill = pass_cost(c, prompt_len)
    whole, table = c.n_params() * 4, c.vocab_size * c.d_model * 4  # FP32: 4 bytes a parameter
    return [
        PANELS.say("worked.bytes", weights=format_bytes(cost.weight_bytes), weights_mb=cost.weight_bytes / 1e6,
                   whole=format_bytes(whole), table=format_bytes(table), context=w.context, tokens=w.context + 1,
                   cache_mb=cost.cache_bytes / 1e6, mb=cost.bytes / 1e6),
        PANELS.say("worked.flops", matmul=w.matmul_flops / 1e6, tokens=w.context + 1, attention=w.attention_flops / 1e6,
                   mflop=cost.flops / 1e6),
        PANELS.say("worked.intensity", intensity=cost.intensity),
        PANELS.say("worked.prefill", prompt_len=prompt_len, weights_mb=prefill.weight_bytes / 1e6,
                   times=prefill.flops / cost.flops, intensity=prefill.intensity),
    ]


# -- the roofs themselves -----------------------------------------------------------------------------
def spread(rate: Rate) -> float:
    """The fastest repeat over the median one: 1 on a quiet machine, larger the more other programs interfered."""
    return rate.best / rate.median if rate.median > 0 else float("inf")


def roofs_busy(roofs: Roofs) -> bool:
    return max(spread(roofs.bandwidth), spread(roofs.flops)) >= BUSY_SPREAD


def roof_lines(roofs: Roofs) -> list[str]:
    """Both roofs: the fastest repeat and the median (readouts)."""
    bw, mm = roofs.bandwidth, roofs.flops
    return [PANELS.say("roof.bandwidth", best=bw.best / 1e9, what=bw.what, runs=len(bw.runs), median=bw.median / 1e9),
            PANELS.say("roof.matmul", best=mm.best / 1e9, what=mm.what, runs=len(mm.runs), median=mm.median / 1e9)]


def explain_measured_roofs(roofs: Roofs) -> list[Claim]:
    """Whether the roofs' repeats agreed or the machine was too busy to trust them (:data:`~.sentences.ROOF_SPREAD`)."""
    return [ROOF_SPREAD.choose({"bw": times(spread(roofs.bandwidth)), "mm": times(spread(roofs.flops))})]


def _shares(sweep: PrefillSweep, roofs: Roofs) -> list[float]:
    return [p.prefill_flops_per_s / roofs.flops.best for p in sweep.points]


def explain_prefill_vs_roof(sweep: PrefillSweep, roofs: Roofs) -> list[Claim]:
    """How close the longest prefill gets to the matmul roof (:data:`~.sentences.PREFILL_ROOF`: against every
    length's share of it) and how its rate moved against the fastest shorter prompt (:data:`~.sentences.PREFILL_TREND`)."""
    pts = sweep.points
    last = pts[-1]
    shares = [pct(f) for f in _shares(sweep, roofs)]
    best = max(range(len(pts)), key=lambda i: shares[i].value)
    prev = max(pts[:-1], key=lambda p: p.prefill_flops_per_s) if len(pts) > 1 else last  # the best earlier rate
    g = times(ratio(last.prefill_flops_per_s, prev.prefill_flops_per_s)) if len(pts) > 1 else times(1.0)
    first = pts[0]
    t0, tn = ms(first.prefill_seconds), ms(last.prefill_seconds)
    numbers = {"P0": count(first.prompt_len), "Pn": count(last.prompt_len), "t0": t0, "tn": tn,
               "ratio_all": times(ratio(tn.value, t0.value)), "P": count(last.prompt_len),
               "I": number(last.prefill_cost.intensity, 1), "rate": gflops(last.prefill_flops_per_s),
               "share": shares[-1], "best_P": count(pts[best].prompt_len), "best_share": shares[best], "g": g}
    claims = [PREFILL_ROOF.choose(numbers)]
    if len(pts) > 1 and claims[0].key != PREFILL_ROOF.rules[0].key:
        claims.append(PREFILL_TREND.choose({"Pa": count(prev.prompt_len), "Pb": count(last.prompt_len), "g": g,
                                            "share": shares[-1]}))
    return claims


def explain_long_rate(sweep: PrefillSweep) -> list[Claim]:
    """The longest prompt's prefill rate against the shortest one's and the decode step after it
    (:data:`~.sentences.LONG_RATE`): the longer the prompt, the more of the machine a prefill uses."""
    pts = sweep.points
    if len(pts) < 2:
        return []
    first, last = pts[0], pts[-1]
    return [LONG_RATE.choose({"P": count(last.prompt_len), "rate": gflops(last.prefill_flops_per_s),
                              "P1": count(first.prompt_len), "rate1": gflops(first.prefill_flops_per_s),
                              "dec": gflops(last.decode_flops_per_s)})]


def explain_decode_vs_roof(sweep: PrefillSweep, roofs: Roofs, demo: StepBudget, demo_config: ModelConfig) -> list[Claim]:
    """How much of the bandwidth roof a decode step uses (after the longest prompt; :data:`~.sentences.DECODE_ROOF`).
    Far below it, whether the demo model's whole step (``demo``: the same few hundred small operators, on
    ``demo_config``'s layers), scaled by the layers, can account for the time beyond the bandwidth bound; when it
    cannot, whether the roofs were measured on a busy machine."""
    dec = sweep.points[-1]
    step = ms(dec.decode_step_seconds)
    bound = ms(dec.decode_cost.bytes / dec.decode_steps / roofs.bandwidth.best)
    rate, median = gbs(dec.decode_bytes_per_s), gbs(roofs.bandwidth.median)
    return [DECODE_ROOF.choose({
        "P": count(dec.prompt_len), "I": number(dec.decode_cost.intensity, 2), "gflops": gflops(dec.decode_flops_per_s),
        "mm_share": pct(dec.decode_flops_per_s / roofs.flops.best), "rate": rate, "median": median,
        "med_share": pct(ratio(rate.value, median.value)),
        "share": pct(dec.decode_bytes_per_s / roofs.bandwidth.best), "step": step, "bound": bound,
        "demo": ms(demo.measured_seconds), "layers": times(sweep.config.n_layer / demo_config.n_layer, 1),
        "spread": times(max(spread(roofs.bandwidth), spread(roofs.flops)))})]


def explain_batch_vs_prefill(batch: BatchSweep, sweep: PrefillSweep, rows: int = 32) -> list[Claim]:
    """The decode of ``rows`` sequences against the prefill of ``rows`` tokens: same intensity, same height?
    (:data:`~.sentences.BATCH_VS_PREFILL`)"""
    if rows not in batch.batch_sizes or rows not in sweep.lengths:
        return []
    d, p = gflops(batch.at(rows).flops_per_s), gflops(sweep.at(rows).prefill_flops_per_s)
    return [BATCH_VS_PREFILL.choose({"B": count(rows), "C": count(batch.context_len), "d": d, "p": p,
                                     "diff": signed_pct(ratio(d.value, p.value) - 1)})]


def explain_small_matmul_reads(m: SmallMatmuls, roofs: Roofs, sweep: PrefillSweep | None = None) -> list[Claim]:
    """Whether one row times W (a matrix-vector product) reads W as fast as the summing roof does
    (:data:`~.sentences.MATVEC_READ`); when it reads faster, the decode share of the bandwidth printed with the
    roofline (``sweep``) measured against it instead (:data:`~.sentences.DECODE_VS_MATVEC`)."""
    rate = m.weight_bytes / m.seconds[0]
    claims = [MATVEC_READ.choose({"rows": count(m.rows[0]), "mb": number(m.weight_bytes / 1e6, 1, "MB"),
                                  "ms": ms(m.seconds[0]), "rate": gbs(rate), "bw": gbs(roofs.bandwidth.best),
                                  "share": pct(rate / roofs.bandwidth.best)})]
    if sweep is not None and claims[0].key == MATVEC_READ.rules[0].key:
        dec = sweep.points[-1]
        claims.append(DECODE_VS_MATVEC.choose({"rate": gbs(dec.decode_bytes_per_s),
                                               "share": pct(dec.decode_bytes_per_s / roofs.bandwidth.best),
                                               "of_matvec": pct(dec.decode_bytes_per_s / rate)}))
    return claims


def explain_decode_sum(m: SmallMatmuls, sweep: PrefillSweep, demo: StepBudget, demo_config: ModelConfig,
                       batch: BatchSweep | None = None) -> list[Claim]:
    """The decode step printed with the roofline (after the longest prompt) taken apart: its bytes read at the
    matrix-vector product's measured rate, plus the fixed cost of a step (the demo model's whole step, ``demo``, ×
    the layers' ratio to ``demo_config``), summed as printed against the measured step (:data:`~.sentences.DECODE_SUM`).
    When the sum falls short, the drift of the same B = 1 work between ``batch`` and ``sweep`` (printed with the batch
    sweep, :func:`explain_batch_baseline`) is quoted if it left the band: the numbers were timed at different moments."""
    dec = sweep.points[-1]
    step, mb = ms(dec.decode_step_seconds), number(dec.decode_cost.bytes / dec.decode_steps / 1e6, 1, "MB")
    rate = gbs(ratio(m.weight_bytes, m.seconds[0]))
    read = ms(ratio(mb.value, rate.value) / 1e3)  # MB ÷ GB/s = ms
    demo_ms, layers = ms(demo.measured_seconds), times(sweep.config.n_layer / demo_config.n_layer, 1)
    fixed = ms(demo_ms.value * layers.value / 1e3)
    total = ms((read.value + fixed.value) / 1e3)
    base = _baseline_numbers(batch, sweep) if batch is not None else None
    drift = {"b1": base["b1"], "dec": base["dec"], "drift": base["diff"]} if base else {}
    return [DECODE_SUM.choose({"P": count(dec.prompt_len), "step": step, "mb": mb, "rate": rate, "read": read,
                               "demo": demo_ms, "layers": layers, "fixed": fixed, "total": total,
                               "share": pct(ratio(total.value, step.value)),
                               "rest": ms((step.value - total.value) / 1e3),
                               **(drift or {"b1": number(math.nan), "dec": number(math.nan), "drift": number(math.nan)})})]


def _baseline_numbers(batch: BatchSweep, sweep: PrefillSweep) -> dict | None:
    """The batch sweep's B = 1 step and the same model's decode step in the prefill sweep (the prompt length nearest
    the batch's context), as printed, and their relative difference; None without a B = 1 point."""
    one = batch.points[0]
    if one.batch_size != 1:
        return None
    near = min(sweep.points, key=lambda p: abs(p.prompt_len - batch.context_len))
    b1, dec = number(one.step_seconds * 1e3, 2, "ms"), number(near.decode_step_seconds * 1e3, 2, "ms")
    return {"b1": b1, "P": count(near.prompt_len), "dec": dec, "diff": signed_pct(ratio(b1.value, dec.value) - 1)}


def explain_batch_baseline(batch: BatchSweep, sweep: PrefillSweep) -> list[Claim]:
    """The batch sweep's B = 1 step against the same model's decode step in the prefill sweep (the prompt length
    nearest the batch's context): two measurements of the same work at different moments
    (:data:`~.sentences.BATCH_BASELINE`)."""
    base = _baseline_numbers(batch, sweep)
    return [BATCH_BASELINE.choose(base)] if base else []


def explain_worked_bounds(w: WorkedStep, roofs: Roofs) -> list[Claim]:
    """The worked decode step against the measured roofs: its two lower bounds on time, and which is longer
    (:data:`~.sentences.WORKED_BOUNDS`)."""
    compute, read = us(w.cost.flops / roofs.flops.best), us(w.cost.bytes / roofs.bandwidth.best)
    r = ratio(read.value, compute.value)
    return [WORKED_BOUNDS.choose({"mflop": number(w.cost.flops / 1e6, 1), "compute": compute,
                                  "mb": number(w.cost.bytes / 1e6, 1), "read": read,
                                  "ratio": times(r, 0) if r >= 1 else times(ratio(1, r), 1)})]
