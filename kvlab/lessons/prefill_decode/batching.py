"""Chapter 3.3, decode batching: tokens/s against the batch size at several context lengths, on this
machine's roofline, and why a few rows of a matmul cost more than one."""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from functools import partial

import torch

from ..._validate import positive_int
from ...cache import KVCache
from ...claims import Claim, Number, number, ratio
from ...config import ModelConfig
from ...inputs import InputError, choice, one_of_numbers, whole_number
from ...costs import PassCost, decode_cost, pass_cost
from ...measure import Roofs, alternate, device_label, measurement_threads, timed, torch_threads
from ...memory import format_bytes, kv_bytes_per_token
from ...model import ToyTransformer
from ...stats import median
from ...viz import prefill_decode_plots as plots
from ...viz.widgets import Panel, PanelOptions, View, selection_slider
from .phrases import PANELS, label
from .prefill_sweep import PrefillSweep, prefill_points
from .roofline import RooflinePoint
from .sentences.batching import (BATCH_GAIN, BATCH_LEFT, BATCH_ORDER, BATCH_RIGHT, BATCH_SHAPE, INVERTED_ROWS,
                                 MATMUL_ROWS, MATMUL_SLOWDOWN, OVERLAP)
from .sentences.common import count, counts, decimals, gflops, ms, ms_series, pct, per_s, some, times


BATCH_SIZES = (1, 2, 4, 8, 16, 32)
BATCH_CONTEXTS = (8, 64, 256, 1000)  # tokens already in each sequence's cache, for the batching panel
BATCH_STEPS, BATCH_REPEATS = 3, 3  # decode passes per timed run, runs per batch size (the fastest counts)
BATCH_MAX_CACHE_BYTES = 384 * 2**20  # the largest cache one context-length move may allocate: with the passes run
# on it, within the 512 MiB one measurement may add to the kernel (ARCHITECTURE.md, "What a control value may cost")
@dataclass
class BatchPoint:
    batch_size: int
    step_seconds: float  # one decode pass for the whole batch: median over a run's passes, fastest run
    cost: PassCost  # all decode passes together

    steps: int = 1

    @property
    def tokens_per_s(self) -> float:
        return self.batch_size / self.step_seconds

    @property
    def flops_per_s(self) -> float:
        return self.cost.flops / (self.steps * self.step_seconds)


@dataclass
class BatchSweep:
    points: list[BatchPoint]
    context_len: int  # tokens in each sequence's cache when the first timed decode step starts
    config: ModelConfig
    device: str

    @property
    def batch_sizes(self) -> list[int]:
        return [p.batch_size for p in self.points]

    def at(self, batch_size: int) -> BatchPoint:
        return self.points[self.batch_sizes.index(batch_size)]

    def label(self, batch_size: int) -> str:
        return PANELS.say("point.batch", B=batch_size, context=self.context_len)

    def roofline_points(self) -> list[RooflinePoint]:
        return [RooflinePoint(self.label(p.batch_size), "batch", p.cost.intensity, p.flops_per_s, f"B={p.batch_size}")
                for p in self.points]


@torch.no_grad()
def _decode_passes(model: ToyTransformer, cache: KVCache, context_len: int, feed: torch.Tensor, steps: int):
    """``steps`` greedy decode passes starting from a cache holding ``context_len`` tokens: seconds of each."""
    cache.reset()
    cache.advance(context_len)
    seconds = []
    for _ in range(steps):
        logits, s = timed(partial(model, feed, cache, last_logits_only=True), model.device)
        feed = logits[:, -1:].argmax(-1)  # [B, 1]
        seconds.append(s)
    return seconds


def measure_batch_sweep(model: ToyTransformer, batch_sizes=BATCH_SIZES, context_len: int = 8,
                        decode_steps: int = BATCH_STEPS, repeats: int = BATCH_REPEATS, seed: int = 0) -> BatchSweep:
    """Time decode steps of B sequences at once, each with ``context_len`` tokens already in its cache, for
    each B: ``repeats`` runs of ``decode_steps`` passes, the batch sizes interleaved (a burst of load elsewhere
    then spoils one run of each, not every run of one), the fastest run kept. The caches' first rows are left
    as allocated (zeros): their values do not change the work or the time of a step, and filling them by a
    real prefill of B × context tokens would cost far more than the measurement. Each run allocates its cache
    (outside the timed passes) and lets it go, so the sweep holds one batch size's cache at a time, not all of them
    (at B = 1 … 32 and 1,000 tokens: 1 GiB for B = 32 instead of 2 GiB)."""
    decode_steps = positive_int("decode_steps", decode_steps)
    repeats = positive_int("repeats", repeats)
    c = model.config
    context_len = positive_int("context_len", context_len, maximum=c.max_seq_len - decode_steps)
    if not isinstance(batch_sizes, (list, tuple)) or not batch_sizes:
        raise ValueError(f"batch_sizes must be a non-empty list, got {batch_sizes!r}")
    sizes = [positive_int("batch_sizes", b, maximum=4096) for b in batch_sizes]
    gen = torch.Generator().manual_seed(seed)
    feeds = {B: torch.randint(0, c.vocab_size, (B, 1), generator=gen).to(model.device) for B in sizes}

    def run(B: int, steps: int) -> list[float]:
        cache = KVCache(c, B, context_len + decode_steps, dtype=model.dtype, device=model.device)
        return _decode_passes(model, cache, context_len, feeds[B], steps)

    with torch_threads(measurement_threads()):
        runs = alternate({B: partial(run, B, decode_steps) for B in sizes}, repeats,
                         warmup={B: partial(run, B, 1) for B in sizes})
    points = [BatchPoint(B, min(median(r) for r in runs[B]), decode_cost(c, context_len, decode_steps, B), decode_steps)
              for B in sizes]
    return BatchSweep(points, context_len, c, device_label(model.device))


class BatchLab:
    """Batch sweeps per context length: the one the notebook measured, more measured when a learner asks."""

    def __init__(self, sweep: BatchSweep, model: ToyTransformer | None = None):
        self.model = model
        self.config = sweep.config
        self.sweeps = {sweep.context_len: sweep}
        self.batch_sizes = sweep.batch_sizes
        room = sweep.config.max_seq_len - BATCH_STEPS  # the longest context the model has room to decode after
        offered = {C for C in BATCH_CONTEXTS if C <= room} - {sweep.context_len}  # (that one is measured)
        self.too_large = sorted(C for C in offered if self.cache_bytes(C) > BATCH_MAX_CACHE_BYTES)
        self.contexts = sorted((offered - set(self.too_large)) | {sweep.context_len})

    def cache_bytes(self, context_len: int) -> int:
        """The largest cache measuring ``context_len`` allocates: the largest batch's, counted in FP32 (the widest
        a kvlab model computes in)."""
        return max(self.batch_sizes) * (context_len + BATCH_STEPS) * kv_bytes_per_token(self.config)

    def context(self, value) -> int:
        """The context length a learner chose, one of :attr:`contexts`; a length the lesson has but whose
        measurement would pass the memory bound is refused with its size, before anything runs."""
        C = whole_number(label(CONTEXT_LABEL), value, self.contexts[0], max(self.contexts + self.too_large))
        if C in self.too_large:
            raise InputError(label(CONTEXT_LABEL), PANELS.say(
                "batch_too_large", C=C, B=max(self.batch_sizes), size=format_bytes(self.cache_bytes(C)),
                limit=format_bytes(BATCH_MAX_CACHE_BYTES)))
        return choice(label(CONTEXT_LABEL), C, self.contexts)

    def measuring(self, context_len) -> str | None:
        """What the panel says while a context length not measured yet is measured (None: it was measured)."""
        if context_len not in self.contexts or context_len in self.sweeps or self.model is None:
            return None
        return PANELS.say("batch_measuring", context=context_len, sizes=len(self.batch_sizes), repeats=BATCH_REPEATS,
                          steps=BATCH_STEPS)

    def sweep(self, context_len: int) -> BatchSweep:
        if context_len not in self.sweeps:
            if self.model is None:
                raise ValueError(f"context_len: {context_len} was not measured and there is no model to measure it")
            self.sweeps[context_len] = measure_batch_sweep(self.model, self.batch_sizes, context_len)
        return self.sweeps[context_len]


def explain_batch(sweep: BatchSweep, roofs: Roofs) -> list[Claim]:
    """How the step time moved while the batch stayed left of the ridge (:data:`~.sentences.BATCH_LEFT`: every
    point), whether it ever fell as B grew (:data:`~.sentences.BATCH_ORDER`), the growth per doubling of B on
    both sides of the ridge (:data:`~.sentences.BATCH_SHAPE`), and right of it against the ideal ×2 per doubling
    (:data:`~.sentences.BATCH_RIGHT`)."""
    ridge, pts = roofs.ridge, sweep.points
    left = [p for p in pts if p.cost.intensity < ridge]
    right = [p for p in pts if p.cost.intensity >= ridge]
    claims = []
    if len(left) >= 2:
        ts = ms_series([p.step_seconds for p in left])
        r = ratio(ts.value[-1], ts.value[0])
        claims.append(BATCH_LEFT.choose(
            {"Bs": counts([p.batch_size for p in left]), "ts": ts, "Bl": count(left[-1].batch_size),
             "I": number(left[-1].cost.intensity, 2),
             "ridge": number(ridge, 1), "ratio": times(r), "rise": pct(r - 1),
             "B": count(left[-1].batch_size)},
            {"why": "gpu_launch" if roofs.threads is None else "cpu"}))
    elif right:
        first_right = right[0]
        claims.append(BATCH_LEFT.choose({"B": count(first_right.batch_size), "I": number(first_right.cost.intensity, 2),
                                         "ridge": number(ridge, 1), "Bs": counts(sweep.batch_sizes), "Bl": count(pts[-1].batch_size),
                                         "ts": some([p.step_seconds * 1e3 for p in pts], 2, "ms"),
                                         "ratio": times(math.nan), "rise": pct(math.nan)}))
    if len(pts) >= 2:
        ts = ms_series([p.step_seconds for p in pts])
        inverted = next((i for i in range(len(pts) - 1) if ts.value[i] > 1.02 * ts.value[i + 1]), 0)
        digits = decimals(ts.value)
        claims.append(BATCH_ORDER.choose({
            "Bs": counts(sweep.batch_sizes), "ts": ts, "Ba": count(pts[inverted].batch_size),
            "ta": number(ts.value[inverted], digits, "ms"), "Bb": count(pts[inverted + 1].batch_size),
            "tb": number(ts.value[inverted + 1], digits, "ms")}))
    if len(left) >= 2 and len(right) >= 2:
        claims.append(BATCH_SHAPE.choose({"gl": times(per_doubling(pts[0], left[-1])),
                                          "gr": times(per_doubling(right[0], right[-1]))}))
    if len(right) >= 2:
        claims.append(_right_of_ridge(right, roofs))
    return claims


def _right_of_ridge(right: list[BatchPoint], roofs: Roofs) -> Claim:
    """The batches right of the ridge: their step time's growth per doubling of B against the ideal ×2, with their
    rates against the matmul roof (:data:`~.sentences.BATCH_RIGHT`)."""
    mm = gflops(roofs.flops.best)
    rates = some([p.flops_per_s / 1e9 for p in right], 1, "GFLOP/s")
    return BATCH_RIGHT.choose({
        "Bs": counts([p.batch_size for p in right]), "Is": some([p.cost.intensity for p in right], 2),
        "ridge": number(roofs.ridge, 1), "ts": ms_series([p.step_seconds for p in right]),
        "g": times(per_doubling(right[0], right[-1])), "rates": rates, "mm": mm,
        "shares": some([100 * ratio(r, mm.value) for r in rates.value], 0, "%")})


def explain_batch_gain(sweep: BatchSweep, roofs: Roofs | None = None) -> list[Claim]:
    """The largest batch's throughput against B = 1's, and its step time (:data:`~.sentences.BATCH_GAIN`): close to
    B times (ideal), right of the ridge and so capped by the matmul roof (``roofs``: matmul rate ÷ FLOP per token),
    higher, or not higher (can't tell). Every ratio is computed from the numbers as printed."""
    one, top = sweep.points[0], sweep.points[-1]
    if one.batch_size != 1 or top.batch_size == 1:
        return []
    t1, tB = per_s(one.tokens_per_s), per_s(top.tokens_per_s)
    gain = ratio(tB.value, t1.value)
    mm = gflops(roofs.flops.best if roofs else math.nan)
    mflop = number(top.cost.flops / (top.steps * top.batch_size) / 1e6, 1)
    cap = per_s(ratio(mm.value * 1e3, mflop.value))
    return [BATCH_GAIN.choose({"B": count(top.batch_size), "tput1": t1, "tput": tB, "ratio": times(gain, 1),
                               "step": times(ratio(top.batch_size, gain)), "I": number(top.cost.intensity, 2),
                               "ridge": number(roofs.ridge if roofs else math.nan, 1), "mm": mm, "mflop": mflop,
                               "cap": cap, "cap_ratio": times(ratio(cap.value, t1.value), 1)})]


def batch_ridge_lines(sweep: BatchSweep, roofs: Roofs) -> list[str]:
    """The step time and throughput after the batch crossed the ridge (readouts)."""
    ridge = roofs.ridge
    left = [p for p in sweep.points if p.cost.intensity < ridge]
    right = [p for p in sweep.points if p.cost.intensity >= ridge]
    if len(right) >= 2:
        a, b = right[0], right[-1]
        return [PANELS.say("ridge.right", a=a.batch_size, b=b.batch_size, times=b.batch_size / a.batch_size,
                           step=b.step_seconds / a.step_seconds, tput=b.tokens_per_s / a.tokens_per_s)]
    if right and left:
        a, b = left[-1], right[0]
        return [PANELS.say("ridge.cross", a=a.batch_size, b=b.batch_size, step=b.step_seconds / a.step_seconds,
                           tput=b.tokens_per_s / a.tokens_per_s)]
    return [PANELS.say("ridge.left", B=sweep.points[-1].batch_size, ridge=ridge)] if not right else []


def explain_overlap(sweep: BatchSweep, roofs: Roofs) -> list[Claim]:
    """The sum model (a step = F ÷ matmul rate + M ÷ bandwidth: compute and reads not overlapping at all) against
    the batch sweep (:data:`~.sentences.OVERLAP`). With F ∝ B and M fixed, and a = I₁ ÷ ridge, the step at B is
    (B·a + 1) ÷ (a + 1) times B = 1's, so 2 ÷ (1 + a) times it at the ridge; compared with the largest B still
    left of the ridge, as measured."""
    pts = sweep.points
    one = pts[0]
    I1, ridge = number(one.cost.intensity, 2), number(roofs.ridge, 1)
    a = ratio(I1.value, ridge.value)
    # left of the ridge as the printed I₁ and ridge say (B·a < 1), so the checker's re-reading agrees
    left = [p for p in pts[1:] if p.cost.intensity < roofs.ridge and p.batch_size * a < 1]
    if not left or one.batch_size != 1:  # nothing to compare: every rule but "unmeasured" refuses a NaN
        return [OVERLAP.choose({name: number(math.nan) for name in OVERLAP.rules[0].shows},
                               {"missing": "no_b1" if one.batch_size != 1 else "no_left"})]
    top = left[-1]
    t1, tB = ms(one.step_seconds), ms(top.step_seconds)
    return [OVERLAP.choose({"I1": I1, "ridge": ridge, "f": times(2 / (1 + a)), "B": count(top.batch_size),
                            "pred": times((top.batch_size * a + 1) / (a + 1)), "t1": t1, "tB": tB,
                            "meas": times(ratio(tB.value, t1.value))})]


def per_doubling(a: BatchPoint, b: BatchPoint) -> float:
    """How many times the step time grows, on average, each time B doubles from ``a`` to ``b``."""
    return (b.step_seconds / a.step_seconds) ** (1 / math.log2(b.batch_size / a.batch_size))


def share_text(x: float) -> str:
    """A share as a percentage: one decimal below 1 % (a small share never reads 「0%」), whole percents above."""
    return f"{x:.1%}" if x < 0.01 else f"{x:.0%}"


def explain_kv_share(config: ModelConfig, batch_size: int, contexts=(8, 256, 1000), steps: int = BATCH_STEPS) -> list[str]:
    """``steps`` decode steps of ``batch_size`` sequences from several context lengths, counted as the batch sweep
    counts them (:func:`~kvlab.costs.decode_cost`, so the first line's intensity is the sweep's): the K/V share of
    the bytes and the arithmetic intensity."""
    lines = []
    for C in contexts:
        cost = decode_cost(config, C, steps, batch_size)
        lines.append(PANELS.say("kv_share", B=batch_size, C=C, steps=steps, share=share_text(cost.cache_share),
                                intensity=cost.intensity, half=batch_size / 2))
    return lines


# the controls' labels as the Chinese edition shows them; a panel shows each in the course's language (label())
BATCH_LABEL, CONTEXT_LABEL = PANELS.text("label.batch", "zh"), PANELS.text("label.context", "zh")


def render_batch(lab: BatchLab, roofs: Roofs, prefill: PrefillSweep, batch_size, context_len) -> View:
    """The batching panel: one batch size and context length against the sweep, and on this machine's roofline."""
    B = one_of_numbers(label(BATCH_LABEL), batch_size, lab.batch_sizes)
    sweep = lab.sweep(lab.context(context_len))
    p = sweep.at(B)
    one = sweep.points[0]
    who = PANELS.say("who.one") if p.batch_size == 1 else PANELS.say("who.many", B=p.batch_size)
    readout = PANELS.say(
        "batch_html", B=p.batch_size, context=sweep.context_len, ms=p.step_seconds * 1e3, who=who, rate=p.tokens_per_s,
        B1=one.batch_size, tput=p.tokens_per_s / one.tokens_per_s, step=p.step_seconds / one.step_seconds,
        share=share_text(p.cost.cache_share), intensity=p.cost.intensity, ridge=roofs.ridge,
        gflops=p.flops_per_s / 1e9, device=html.escape(sweep.device))
    figures = [plots.batch_figure(sweep, p.batch_size),
               plots.roofline_figure(roofs, prefill_points(prefill) + sweep.roofline_points(),
                                     highlight=sweep.label(p.batch_size))]
    return View(figures, readout, p)


def batch_panel(sweep: BatchSweep, roofs: Roofs, prefill: PrefillSweep, model: ToyTransformer | None = None) -> Panel:
    """A batch-size slider and a context-length slider (other lengths are measured on ``model`` when chosen; the
    lengths measured, and every batch size at them, are drawn ahead in the browser)."""
    lab = BatchLab(sweep, model)
    slider = selection_slider(label(BATCH_LABEL), sweep.batch_sizes, sweep.batch_sizes[0])
    context = selection_slider(label(CONTEXT_LABEL), lab.contexts, sweep.context_len, width="520px", continuous=False)
    return Panel({"batch_size": slider, "context_len": context}, partial(render_batch, lab, roofs, prefill),
                 in_browser=("batch_size", "context_len"),
                 options=PanelOptions(layout="horizontal", css_class="kvlab-batch",
                                      measures=lambda values: lab.measuring(values["context_len"])))


@dataclass
class SmallMatmuls:
    """``x @ W`` for a few rows of x, with W larger than the CPU caches: the fastest of the repeats per row count."""

    rows: list[int]
    seconds: list[float]
    weight_bytes: int
    device: str
    repeats: int = 1  # runs per row count, interleaved; the fastest is kept

    def slowdown(self, rows: int) -> float:
        """Time for ``rows`` rows over the time for the first row count."""
        return self.seconds[self.rows.index(rows)] / self.seconds[0]


def measure_small_matmuls(device, rows=(1, 2, 4, 8), nbytes: int = 128 * 2**20, repeats: int = 15) -> SmallMatmuls:
    """Time ``x @ W`` (fp32, W of ``nbytes``: the same bytes are read whatever the rows), the row counts
    interleaved (a burst of load spoils one run of each, not every run of one), the fastest of ``repeats`` kept."""
    dev = torch.device(device)
    rows = [positive_int("rows", r, maximum=64) for r in rows]
    repeats = positive_int("repeats", repeats)
    n_in = 4096
    n_out = positive_int("nbytes", nbytes) // (4 * n_in)
    if n_out < 1:
        raise ValueError(f"nbytes: needs at least {4 * n_in} bytes, got {nbytes}")
    w = torch.full((n_in, n_out), 0.01, device=dev)  # [in, out], as kvlab's Linear stores its weights
    xs = {r: torch.full((r, n_in), 0.5, device=dev) for r in rows}
    threads = measurement_threads()
    with torch_threads(threads):
        runs = alternate({r: partial(timed, partial(torch.matmul, xs[r], w), dev) for r in rows}, repeats)
    del w
    return SmallMatmuls(rows, [min(s for _, s in runs[r]) for r in rows], 4 * n_in * n_out,
                        device_label(dev, threads), repeats)


def _expected_step_growth(m: SmallMatmuls, batch: BatchSweep | None, r: float):
    """What the row counts' slowdown ``r`` predicts for the batch sweep's step from B = rows[0] to rows[-1]:
    (seconds the step's weight matmuls take at the 1-row read rate, their share of that step, the least growth
    of the step if they slow down ``r`` times and nothing else grows, the growth measured); None without a sweep
    holding both batch sizes."""
    lo, hi = m.rows[0], m.rows[-1]
    if batch is None or not {lo, hi} <= set(batch.batch_sizes):
        return None
    first = batch.at(lo)
    matmul_s = first.cost.weight_bytes / first.steps / (m.weight_bytes / m.seconds[0])
    share = min(1.0, matmul_s / first.step_seconds)
    return matmul_s, share, share * r + (1 - share), batch.at(hi).step_seconds / first.step_seconds


def explain_small_matmuls(m: SmallMatmuls, batch: BatchSweep | None = None) -> list[Claim]:
    """The row counts' times, said with whether fewer rows ever took longer than more (:data:`~.sentences.MATMUL_ROWS`),
    and whether a few rows read W slower than one (:data:`~.sentences.MATMUL_SLOWDOWN`); with ``batch``, whether that
    can explain the batch sweep at all (it cannot when the step grew less than the slowdown implies: the probe's W
    is far larger than the model's matrices)."""
    ts = ms_series(m.seconds)
    t = ts.value
    inverted = next(((i, j) for i in range(len(t)) for j in range(i + 1, len(t)) if t[i] > t[j] * INVERTED_ROWS), (0, 1))
    claims = [MATMUL_ROWS.choose({"mib": Number(*format_bytes(m.weight_bytes).split()), "rows": counts(m.rows), "ts": ts,
                                  "repeats": count(m.repeats), "a": count(m.rows[inverted[0]]),
                                  "b": count(m.rows[min(inverted[1], len(m.rows) - 1)])})]
    r = m.slowdown(m.rows[-1])
    expected = _expected_step_growth(m, batch, r) or (math.nan,) * 4
    matmul_s, share, predicted, measured = expected
    claims.append(MATMUL_SLOWDOWN.choose({
        "top": count(m.rows[-1]), "first": count(m.rows[0]), "r": number(r, 1), "matmul": number(matmul_s * 1e3, 1, "ms"),
        "share": pct(share), "predicted": times(predicted), "measured": times(measured)}))
    return claims
