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
from ...config import ModelConfig
from ...inputs import InputError, choice, one_of_numbers, whole_number
from ...costs import PassCost, decode_cost, pass_cost
from ...measure import alternate, device_label, measurement_threads, timed, torch_threads
from ...memory import format_bytes, kv_bytes_per_token
from ...model import ToyTransformer
from ...stats import median
from ...viz import prefill_decode_plots as plots
from ...viz.widgets import Panel, View, selection_slider
from .prefill_sweep import PrefillSweep, prefill_points
from .roofline import RooflinePoint, Roofs


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
        return f"解码 B={batch_size}（上下文 {self.context_len}）"

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
        C = whole_number(CONTEXT_LABEL, value, self.contexts[0], max(self.contexts + self.too_large))
        if C in self.too_large:
            raise InputError(CONTEXT_LABEL, f"为 {C:,} 时，B = {max(self.batch_sizes)} 的缓存要 "
                             f"{format_bytes(self.cache_bytes(C))}，超过一次测量可用的 "
                             f"{format_bytes(BATCH_MAX_CACHE_BYTES)}（课程按每人 2 GiB 内存设计）：请选较短的上下文")
        return choice(CONTEXT_LABEL, C, self.contexts)

    def measuring(self, context_len) -> str | None:
        """What the panel says while a context length not measured yet is measured (None: it was measured)."""
        if context_len not in self.contexts or context_len in self.sweeps or self.model is None:
            return None
        return (f"正在测量：每条序列的缓存里已有 {context_len} 个 token 时，{len(self.batch_sizes)} 种批次大小 B "
                f"各测 {BATCH_REPEATS} 次、每次解码 {BATCH_STEPS} 步（要几秒钟）……")

    def sweep(self, context_len: int) -> BatchSweep:
        if context_len not in self.sweeps:
            if self.model is None:
                raise ValueError(f"context_len: {context_len} was not measured and there is no model to measure it")
            self.sweeps[context_len] = measure_batch_sweep(self.model, self.batch_sizes, context_len)
        return self.sweeps[context_len]


def explain_batch(sweep: BatchSweep, roofs: Roofs) -> list[str]:
    """How the step time moved while the batch stayed left of the ridge, and after it crossed."""
    ridge, one = roofs.ridge, sweep.points[0]
    left = [p for p in sweep.points if p.cost.intensity < ridge]
    right = [p for p in sweep.points if p.cost.intensity >= ridge]
    lines = []
    if len(left) >= 2:
        p = left[-1]
        r = p.step_seconds / one.step_seconds
        flat = ("几乎不变：GPU 上这个小模型一步解码主要是内核启动的固定开销，多几条序列几乎不加时间"
                if roofs.threads is None else "几乎不变，和理想的 roofline 一样")
        how = flat if r < 1.15 else (
            f"增加了 {r - 1:.0%}：实际的机器达不到屋顶，单步耗时并不完全由读的字节决定（下面的矩阵乘实验检查其中一个可能的原因）")
        lines.append(f"B = {one.batch_size} 到 B = {p.batch_size}（算术强度 {p.cost.intensity:.2f}，还在转折点 {ridge:.1f} "
                     f"左边）：单步耗时 ×{r:.2f}，{how}。")
    elif left:
        lines.append(f"B = {sweep.points[1].batch_size} 时算术强度就已越过本机的转折点 {ridge:.1f}。")
    else:
        lines.append(f"连 B = {one.batch_size} 的算术强度也不低于本机的转折点 {ridge:.1f}。")
    if len(right) >= 2:
        a, b = right[0], right[-1]
        lines.append(f"越过转折点以后（B = {a.batch_size} 到 B = {b.batch_size}，B 大了 {b.batch_size / a.batch_size:g} 倍）："
                     f"单步耗时 ×{b.step_seconds / a.step_seconds:.2f}，吞吐 ×{b.tokens_per_s / a.tokens_per_s:.2f}。")
    elif right and left:
        a, b = left[-1], right[0]
        lines.append(f"越过转折点的那一步（B = {a.batch_size} 到 B = {b.batch_size}）：单步耗时 "
                     f"×{b.step_seconds / a.step_seconds:.2f}，吞吐 ×{b.tokens_per_s / a.tokens_per_s:.2f}。")
    elif not right:
        lines.append(f"到 B = {sweep.points[-1].batch_size} 都还在转折点左边。")
    pairs = zip(sweep.points, sweep.points[1:])
    slower = next(((a, b) for a, b in pairs if a.step_seconds > b.step_seconds * 1.02), None)  # more rows, faster step
    if slower is not None:
        a, b = slower
        lines.append(f"B = {a.batch_size} 的一步（{a.step_seconds * 1e3:.2f} ms）反而比 B = {b.batch_size} 的"
                     f"（{b.step_seconds * 1e3:.2f} ms）慢：多一倍的序列不该更快，这是测量的起伏或不同行数选了不同的计算方式；"
                     "上面的平均倍数把这样的起伏抹平了。")
    return lines + _inverted_shape(one, left, right)


INVERTED_MIN = 1.05  # per-doubling growth of the step time under this is flat: no shape to compare
SAME_GROWTH = 1.10  # per-doubling growths within 10 % of each other count as about the same


def per_doubling(a: BatchPoint, b: BatchPoint) -> float:
    """How many times the step time grows, on average, each time B doubles from ``a`` to ``b``."""
    return (b.step_seconds / a.step_seconds) ** (1 / math.log2(b.batch_size / a.batch_size))


def _inverted_shape(one: BatchPoint, left: list, right: list) -> list[str]:
    """One line when the step time grew about as fast (within ``SAME_GROWTH``) or faster per doubling of B left
    of the ridge as right of it: the ideal roofline has it flat on the left."""
    if len(left) < 2 or len(right) < 2:
        return []
    gl, gr = per_doubling(one, left[-1]), per_doubling(right[0], right[-1])
    if gl < INVERTED_MIN or gl < gr / SAME_GROWTH:
        return []
    why = ("左边的增长不是越过转折点造成的：运算和读数据不一定能完全重叠，一步的时间可能比两者中较长的那个更接近两者之和（见本节末尾）；"
           "行数很少的矩阵乘本身也可能更慢（下面的矩阵乘实验检查这一种）。")
    if gl <= gr * SAME_GROWTH:
        return [f"转折点两边的增长差不多：左边 B 每翻一倍，单步耗时平均 ×{gl:.2f}，越过转折点以后 ×{gr:.2f}"
                f"（相差不到 {SAME_GROWTH - 1:.0%}）。理想的 roofline 里左边应当几乎不涨。" + why]
    return [f"这和理想的 roofline 反过来了：转折点左边 B 每翻一倍，单步耗时平均 ×{gl:.2f}；越过转折点以后只 ×{gr:.2f}。"
            + why]


def explain_kv_share(config: ModelConfig, batch_size: int, contexts=(8, 256, 1000)) -> list[str]:
    """A decode step of ``batch_size`` sequences at several context lengths: the K/V share of the bytes and
    the arithmetic intensity (counted with :func:`~kvlab.costs.pass_cost`)."""
    lines = []
    for C in contexts:
        cost = pass_cost(config, 1, C, batch_size)
        lines.append(f"B = {batch_size}，每条序列的缓存里已有 {C} 个 token：K/V 占一步读写字节的 {cost.cache_share:.0%}，"
                     f"算术强度 {cost.intensity:.1f} FLOP/字节（B / 2 = {batch_size / 2:g}）")
    return lines


BATCH_LABEL, CONTEXT_LABEL = "批次 B", "上下文长度（每条序列缓存里已有的 token）"  # the controls, as shown


def render_batch(lab: BatchLab, roofs: Roofs, prefill: PrefillSweep, batch_size, context_len) -> View:
    """The batching panel: one batch size and context length against the sweep, and on this machine's roofline."""
    B = one_of_numbers(BATCH_LABEL, batch_size, lab.batch_sizes)
    sweep = lab.sweep(lab.context(context_len))
    p = sweep.at(B)
    one = sweep.points[0]
    who = ("为这 1 条序列生成 1 个 token" if p.batch_size == 1
           else f"同时为 {p.batch_size} 条序列各生成 1 个 token")
    readout = (
        f"<b>B = {p.batch_size}，每条序列的缓存里已有 {sweep.context_len} 个 token</b>：一步解码 "
        f"<b>{p.step_seconds * 1e3:.2f} ms</b>，{who}，即 <b>{p.tokens_per_s:,.0f} token/s</b><br>"
        f"与 B = {one.batch_size} 相比：吞吐 ×{p.tokens_per_s / one.tokens_per_s:.1f}，单步耗时 "
        f"×{p.step_seconds / one.step_seconds:.1f}；K/V 占一步读写字节的 <b>{p.cost.cache_share:.0%}</b>，"
        f"算术强度 <b>{p.cost.intensity:.2f} FLOP/字节</b>（转折点 {roofs.ridge:.1f}），"
        f"实际达到 {p.flops_per_s / 1e9:.1f} GFLOP/s（设备 {html.escape(sweep.device)}）"
    )
    figures = [plots.batch_figure(sweep, p.batch_size),
               plots.roofline_figure(roofs, prefill_points(prefill) + sweep.roofline_points(),
                                     highlight=sweep.label(p.batch_size))]
    return View(figures, readout, p)


def batch_panel(sweep: BatchSweep, roofs: Roofs, prefill: PrefillSweep, model: ToyTransformer | None = None) -> Panel:
    """A batch-size slider and a context-length slider (other lengths are measured on ``model`` when chosen; the
    lengths measured, and every batch size at them, are drawn ahead in the browser)."""
    lab = BatchLab(sweep, model)
    slider = selection_slider(BATCH_LABEL, sweep.batch_sizes, sweep.batch_sizes[0])
    context = selection_slider(CONTEXT_LABEL, lab.contexts, sweep.context_len, width="520px", continuous=False)
    return Panel({"batch_size": slider, "context_len": context}, partial(render_batch, lab, roofs, prefill),
                 layout="horizontal", css_class="kvlab-batch", in_browser=("batch_size", "context_len"),
                 measures=lambda values: lab.measuring(values["context_len"]))


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


INVERTED_ROWS = 1.08  # fewer rows taking this much longer than more rows gets its own line (best of 15 each)


def explain_small_matmuls(m: SmallMatmuls, batch: BatchSweep | None = None) -> list[str]:
    """The row counts' times, and whether a few rows read W slower than one; with ``batch``, whether that can
    explain the batch sweep at all (it cannot when the step grew less than the slowdown implies: the probe's W is
    far larger than the model's matrices), and a line when fewer rows took longer than more."""
    times = "，".join(f"{r} 行 {s * 1e3:.2f} ms" for r, s in zip(m.rows, m.seconds))
    lines = [f"x @ W，W 是 {format_bytes(m.weight_bytes)} 的 FP32 矩阵：{times}（{m.device}，每种测 {m.repeats} 次、"
             "交替进行，取最快的一次）。"]
    timed = list(zip(m.rows, m.seconds))
    inverted = [(a, b) for i, (a, sa) in enumerate(timed) for b, sb in timed[i + 1:] if sa > sb * INVERTED_ROWS]
    if inverted:
        a, b = inverted[0]
        lines.append(f"{a} 行反而比 {b} 行慢：矩阵乘的库对不同的行数会选不同的计算方式，这里量到的是这个库在这个形状上"
                     "的表现，不是一条「行数越多越慢」的规律。")
    top, r = m.rows[-1], m.slowdown(m.rows[-1])
    expected = _expected_step_growth(m, batch, r) if r >= 1.3 else None
    if expected is not None and expected[2] > expected[3] * (1 + 0.15):
        matmul_s, share, predicted, measured = expected
        lines.append(f"要读的权重一样多，{top} 行却要 {m.rows[0]} 行的 {r:.1f} 倍时间。可这解释不了上面的批处理扫描：按 1 行的速度，"
                     f"一步解码里读权重的矩阵乘约要 {matmul_s * 1e3:.1f} ms，占 B = {m.rows[0]} 一步的 {share:.0%}；这部分若慢 "
                     f"×{r:.1f}，B = {top} 的一步至少要慢 ×{predicted:.2f}，实测只慢了 ×{measured:.2f}。这个实验的 W 比模型的"
                     "任何一个矩阵都大得多（模型每个矩阵只有几 MiB，放得进最后一级缓存：同一次矩阵乘里要把它读好几遍时，第二遍起读的是缓存；"
                     f"{format_bytes(m.weight_bytes)} 的 W 每遍都得从内存读），而矩阵乘的库对不同的行数"
                     "和形状会选不同的计算方式：大 W 上量到的倍数不能直接搬到模型的一步上。")
    elif r >= 1.3:
        lines.append(f"要读的权重一样多，{top} 行却要 {m.rows[0]} 行的 {r:.1f} 倍时间：在这台机器上，行数很少的"
                     "矩阵乘读权重的速度不如矩阵乘向量，这可能是 B 增大时单步耗时增长的原因之一（这个 W 比模型的矩阵大得多，"
                     "倍数不能原样搬到模型的一步上）。")
    else:
        lines.append(f"{top} 行只要 {m.rows[0]} 行的 {r:.1f} 倍时间：这台机器上读权重的速度几乎不受行数影响，"
                     "单步耗时随 B 的增长主要来自运算次数和每条序列自己的 K/V。")
    return lines
