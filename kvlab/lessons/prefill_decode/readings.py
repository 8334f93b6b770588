"""Chapter 3.3, reading the roofline: one decode step counted by hand before anything is measured, and the
sentences that compare what was measured with the roofs. Every sentence is chosen from the numbers, with a
branch for each shape: close to a roof or far below it, a busy machine (the repeats of a roof spread too
much to trust it), and a GPU's shape (a small model on a GPU is launch-bound: its time barely moves with P
or B, far below both roofs)."""
from __future__ import annotations

from dataclasses import dataclass

from ...config import ModelConfig
from ...costs import PassCost, attention_flops, pass_cost
from ...measure import Rate
from ...memory import format_bytes
from .batching import BatchSweep, SmallMatmuls
from .prefill_sweep import PrefillSweep, launch_bound
from .roofline import Roofs, explain_roofs

STEADY_SPREAD = 1.10  # a roof whose fastest repeat is at most this many times its median: the repeats agree
BUSY_SPREAD = 1.4  # ... at least this many times: the machine was busy measuring it (in between: some spread)
SAME_BAND = 0.15  # two rates within ±15 % of each other are "about the same"
NEAR_ROOF, FAR_ROOF = 0.7, 0.35  # a rate at ≥ 70 % of a roof is close to it; under 35 % it is far below
FULL_ROOF = 0.9  # a rate at ≥ 90 % of a roof uses it up (「用满」); 70–90 % is close, not full


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
        f"① 要读的字节：权重矩阵每个都整个读一遍，{format_bytes(cost.weight_bytes)}（= {cost.weight_bytes / 1e6:.1f} MB，"
        f"1 MiB = 2²⁰ 字节，1 MB = 10⁶ 字节；FP32，每个数 4 字节）。整个模型的 FP32 权重是 {format_bytes(whole)}，"
        f"多出的部分是嵌入表：它有 {format_bytes(table)}，一步只读用到的那 1 行。缓存里 {w.context} 个 token 的 K/V "
        f"读一遍、新 token 的 K/V 写一次，{cost.cache_bytes / 1e6:.2f} MB。合计 M = {cost.bytes / 1e6:.1f} MB"
        "（下面和 GB/s 的带宽相除，所以用 MB）。",
        f"② 要做的运算：每读到一个权重，就和这 1 个 token 做一次乘加（2 次运算），{w.matmul_flops / 1e6:.1f} MFLOP；"
        f"注意力对 {w.context + 1} 个 key 打分再对 V 加权求和，{w.attention_flops / 1e6:.2f} MFLOP。合计 F = "
        f"{cost.flops / 1e6:.1f} MFLOP（1 MFLOP = 10⁶ 次浮点运算）。",
        f"③ 算术强度 I = F ÷ M = {cost.intensity:.2f} FLOP/字节：每从内存搬来 1 个字节，只做 {cost.intensity:.2f} 次运算"
        "——权重读了一大堆，每个只用一次。",
        f"④ 对比：预填充 {prompt_len} 个 token 读的权重几乎一样多（{prefill.weight_bytes / 1e6:.1f} MB），运算却多了约 "
        f"{prefill.flops / cost.flops:.0f} 倍，I = {prefill.intensity:.1f} FLOP/字节：每个权重读一次，供 {prompt_len} 个 "
        "token 一起用。",
    ]


# -- the roofs themselves -----------------------------------------------------------------------------
def spread(rate: Rate) -> float:
    """The fastest repeat over the median one: 1 on a quiet machine, larger the more other programs interfered."""
    return rate.best / rate.median if rate.median > 0 else float("inf")


def roofs_busy(roofs: Roofs) -> bool:
    return max(spread(roofs.bandwidth), spread(roofs.flops)) >= BUSY_SPREAD


def explain_measured_roofs(roofs: Roofs) -> list[str]:
    """Both roofs with their repeats' spread, whether the machine was too busy to trust them, the ridge."""
    bw, mm = roofs.bandwidth, roofs.flops
    lines = [f"内存读带宽（斜屋顶）：{bw.best / 1e9:.1f} GB/s（{bw.what}，{len(bw.runs)} 次中最快的一次；中位数 "
             f"{bw.median / 1e9:.1f}）",
             f"矩阵乘速率（平屋顶）：{mm.best / 1e9:.1f} GFLOP/s（{mm.what}，{len(mm.runs)} 次中最快的一次；中位数 "
             f"{mm.median / 1e9:.1f}）"]
    worst = max((bw, mm), key=spread)
    name = "带宽" if worst is bw else "矩阵乘速率"
    if roofs_busy(roofs):
        lines.append(f"⚠ 测屋顶的时候这台机器很忙：{name}最快的一次是中位数的 {spread(worst):.1f} 倍（达到 {BUSY_SPREAD:g} "
                     "倍就算忙，别的程序在抢处理器），屋顶随着负载在移动。屋顶取最快的一次，它最接近机器空闲时的速率，"
                     "但也可能仍然偏低；下文和屋顶比出来的百分比只能当作粗略的参考。等机器空闲时从本页开头重新运行，"
                     "数字会稳定下来。")
    elif spread(worst) > STEADY_SPREAD:
        lines.append(f"重复测量之间有一定波动：{name}最快的一次是中位数的 {spread(worst):.2f} 倍（{STEADY_SPREAD:.2f} 倍以内算一致，"
                     f"达到 {BUSY_SPREAD:g} 倍算很忙）：测量期间机器上还有别的程序在跑。屋顶取最快的一次；"
                     "下文和屋顶比出来的百分比可能差上一两成。")
    else:
        lines.append(f"重复测量之间很一致（最快的一次最多是中位数的 {spread(worst):.2f} 倍，{STEADY_SPREAD:.2f} 倍以内）："
                     "测量期间机器的负载没有大起大落。机器一直很忙时，两个屋顶会一起偏低，这从重复测量里看不出来。")
    return lines + explain_roofs(roofs)


# -- what the measured points say -----------------------------------------------------------------------
def _busy_note(roofs: Roofs) -> str:
    return "（测屋顶时机器很忙，这个百分比只是粗略的。）" if roofs_busy(roofs) else ""


def _above_roof_reason(rate: Rate, name: str) -> str:
    """Why a measured point can stand above a roof: the roof is a sample, not a hard limit."""
    return (f"屋顶不是硬上限：它是 {len(rate.runs)} 次{name}测量（{rate.what}）里最快的一次，只是一个抽样；"
            "测它的那一刻机器可能比测这个点时更忙。")


def explain_prefill_vs_roof(sweep: PrefillSweep, roofs: Roofs) -> list[str]:
    """How close the longest prefill gets to the matmul roof, and whether its rate has levelled off."""
    first, prev, last = sweep.points[0], sweep.points[-2] if len(sweep.points) > 1 else None, sweep.points[-1]
    if launch_bound(first.prefill_seconds, last.prefill_seconds, last.prompt_len / first.prompt_len):
        return [f"P 从 {first.prompt_len} 增加到 {last.prompt_len}，预填充的耗时只变了 ×{last.prefill_seconds / first.prefill_seconds:.2f}："
                "每次前向的时间几乎全是固定开销（GPU 上是几百次内核启动），离两道屋顶都很远，所以这些点看不出 roofline "
                "的形状。要看到它，用更长的提示词或更大的模型。"]
    f = last.prefill_flops_per_s / roofs.flops.best
    g = last.prefill_flops_per_s / prev.prefill_flops_per_s if prev is not None else 1.0  # growth over the last step of P
    head = (f"预填充 P = {last.prompt_len}：I = {last.prefill_cost.intensity:.1f} FLOP/字节，每秒 "
            f"{last.prefill_flops_per_s / 1e9:.1f} GFLOP，是矩阵乘屋顶的 {f:.0%}")
    if f > 1:
        where = (("——高过了屋顶。" if f > 1 + SAME_BAND else "——略高于屋顶。") + _above_roof_reason(roofs.flops, "矩阵乘")
                 + "预填充的矩阵乘形状和它不同（P 行 × 权重），有的形状本来就跑得更快。它已经到了屋顶的高度，预填充是算力受限的。")
    elif f >= NEAR_ROOF:
        where = ("：已经靠近矩阵乘这道屋顶，预填充是算力受限的。" if g <= 1 + SAME_BAND else
                 "：在转折点右边，按 roofline 属于算力受限；但速率还在上升，还没有完全贴住屋顶。")
    elif f >= FAR_ROOF:
        where = ("：比解码高得多，但没有碰到屋顶。这个模型的矩阵（d_model = "
                 f"{sweep.config.d_model}）比测屋顶用的那个矩阵乘小，每次前向还有很多没算进运算数的小算子"
                 "（RMSNorm、softmax、激活函数），它们都要时间。")
    else:
        where = "：离屋顶还远，一次前向的时间里还有很多不是矩阵乘的开销。"
    lines = [head + where + _busy_note(roofs)]
    if prev is not None:
        rising = ("还在上升：已经高过测得的屋顶还在涨，又一个迹象说明这次的屋顶量低了" if f > 1
                  else "还在上升，还没有完全持平：更长的提示词还能更好地用上算力")
        trend = ("已经趋于持平" if abs(g - 1) <= SAME_BAND else rising if g > 1 else "反而下降了（多半是测量噪声）")
        lines.append(f"从 P = {prev.prompt_len} 到 P = {last.prompt_len}，预填充每秒的运算数 ×{g:.2f}，{trend}"
                     f"（±{SAME_BAND:.0%} 以内算持平）。")
    return lines


def explain_decode_vs_roof(sweep: PrefillSweep, roofs: Roofs) -> list[str]:
    """How much of the bandwidth roof a decode step uses (after the longest prompt)."""
    dec = sweep.points[-1]
    g = dec.decode_bytes_per_s / roofs.bandwidth.best
    head = (f"解码（P = {dec.prompt_len} 之后）：I = {dec.decode_cost.intensity:.2f} FLOP/字节，每秒 "
            f"{dec.decode_flops_per_s / 1e9:.1f} GFLOP，只是矩阵乘屋顶的 {dec.decode_flops_per_s / roofs.flops.best:.0%}；"
            f"每秒搬运 {dec.decode_bytes_per_s / 1e9:.1f} GB，是测得带宽的 {g:.0%}")
    if g > 1 + SAME_BAND:
        how = ("——超过了测得的带宽：要么权重有一部分留在了处理器的缓存里，要么测带宽那一刻机器正忙，带宽量低了"
               "（下文的矩阵乘向量实验再量一次读权重的速度）。")
    elif g >= FULL_ROOF:
        how = ("：用满了测得的带宽，解码被带宽这道斜屋顶卡住，是访存受限的（求和测出的带宽也可能偏低，"
               "下文的矩阵乘向量实验再量一次读权重的速度）。")
    elif g >= NEAR_ROOF:
        how = ("：接近带宽这道斜屋顶，但没有用满。解码是访存受限的（算术强度远在转折点左边），一步里还有一些别的开销"
               "（下文的矩阵乘向量实验检查读权重本身能多快）。")
    elif g >= FAR_ROOF:
        how = "：用了带宽的相当一部分，但没有用满。它仍是访存受限的（算术强度远在转折点左边），但一步里还有别的开销。"
    elif roofs.threads is None:
        how = ("：离斜屋顶很远。GPU 上这个小模型的一步解码主要是几百次内核启动的固定开销，读权重本身只占一小部分。")
    else:
        how = "：只用了带宽的一小部分，一步解码里还有许多不是读权重的开销（下文的矩阵乘实验检查其中一个可能的原因）。"
    return [head + how + _busy_note(roofs)]


def explain_batch_vs_prefill(batch: BatchSweep, sweep: PrefillSweep, rows: int = 32) -> list[str]:
    """The decode of ``rows`` sequences against the prefill of ``rows`` tokens: same intensity, same height?"""
    if rows not in batch.batch_sizes or rows not in sweep.lengths:
        return []
    d, p = batch.at(rows).flops_per_s, sweep.at(rows).prefill_flops_per_s
    r = d / p
    head = (f"B = {rows} 的解码（每条序列缓存里 {batch.context_len} 个 token）每秒 {d / 1e9:.1f} GFLOP，P = {rows} 的预填充 "
            f"{p / 1e9:.1f} GFLOP")
    if abs(r - 1) <= SAME_BAND:
        return [head + f"：落在相近的高度（相差 {abs(r - 1):.0%}，±{SAME_BAND:.0%} 以内）。同样是 {rows} 行的矩阵 × 权重，"
                "速率也差不多。"]
    high, low = ("解码", "预填充") if r > 1 else ("预填充", "解码")
    return [head + f"：这次{high}是{low}的 {max(r, 1 / r):.1f} 倍（高 {max(r, 1 / r) - 1:.0%}，超出 ±{SAME_BAND:.0%}）。两者的矩阵乘一样大，差别来自别处："
            f"两个点是在不同时刻量的（机器的忙碌程度会变），而且不全是同样的算子——预填充多一次 {rows} × {rows} 的因果注意力，"
            f"解码要为 {rows} 条序列各读一份 K/V、算 {rows} 个位置的 logits。"]


def explain_small_matmul_reads(m: SmallMatmuls, roofs: Roofs, sweep: PrefillSweep | None = None) -> list[str]:
    """Whether one row times W (a matrix-vector product) reads W as fast as the summing roof does; when it reads
    faster, the decode share of the bandwidth printed with the roofline (``sweep``) measured against it instead."""
    rate = m.weight_bytes / m.seconds[0]
    r = rate / roofs.bandwidth.best
    head = (f"{m.rows[0]} 行 × W（矩阵乘向量）读 W 的速度：{m.weight_bytes / 1e6:.1f} MB ÷ {m.seconds[0] * 1e3:.2f} ms = "
            f"{rate / 1e9:.1f} GB/s，求和测得的带宽是 {roofs.bandwidth.best / 1e9:.1f} GB/s（{r:.0%}）")
    if r > 1 + SAME_BAND:
        lines = [head + "：比求和测得的带宽还快。W 远大于处理器的缓存，留在缓存里的部分解释不了这么多；更可能是求和这个"
                 "内核本身读内存不如矩阵乘向量快（也可能测带宽的那一刻机器更忙）：这道斜屋顶量低了，这次比不出矩阵乘向量"
                 "的内核是否读得满带宽。" + _busy_note(roofs)]
        if sweep is not None:
            dec = sweep.points[-1]
            lines.append(f"所以上面 roofline 一节里解码的百分比（每秒搬运 {dec.decode_bytes_per_s / 1e9:.1f} GB，是求和带宽的 "
                         f"{dec.decode_bytes_per_s / roofs.bandwidth.best:.0%}）是和一道偏低的屋顶比的：按这次矩阵乘向量读权重的"
                         f"速度算，解码只用到了 {dec.decode_bytes_per_s / rate:.0%}，离读满带宽比那里说的更远。")
        return lines
    if r >= 1 - SAME_BAND:
        return [head + "：矩阵乘向量本身就能读满带宽。所以解码只用到带宽的一部分，原因不在这个内核，而在一步解码里"
                "的其他开销：几百个小算子的调度，和没算进字节数的激活值读写。" + _busy_note(roofs)]
    return [head + "：在这台机器上，矩阵乘向量的内核本身就读不满带宽，这是解码只用到带宽一部分的原因之一。"
            + _busy_note(roofs)]


def explain_batch_baseline(batch: BatchSweep, sweep: PrefillSweep) -> list[str]:
    """The batch sweep's B = 1 step against the same model's decode step in the prefill sweep (the prompt length
    nearest the batch's context): two measurements of the same work at different moments."""
    one = batch.points[0]
    if one.batch_size != 1:
        return []
    near = min(sweep.points, key=lambda p: abs(p.prompt_len - batch.context_len))
    r = one.step_seconds / near.decode_step_seconds
    head = (f"B = 1 在这里一步 {one.step_seconds * 1e3:.2f} ms；上面提示词扫描里同一个模型在 P = {near.prompt_len} 之后的"
            f"一步解码是 {near.decode_step_seconds * 1e3:.2f} ms")
    if abs(r - 1) <= SAME_BAND:
        return [head + f"：两次测量一致（相差 {abs(r - 1):.0%}，±{SAME_BAND:.0%} 以内）。"]
    return [head + f"，相差 {abs(r - 1):.0%}：同样的工作在不同时刻量，差了这么多，说明这段时间机器的忙闲在变"
            f"（{'这次' if r > 1 else '那次'}更忙）。下面的倍数都以这里的 B = 1 为基准；"
            + ("如果这里的 B = 1 偏慢，单步耗时的倍数会偏小、吞吐的倍数会偏大。" if r > 1
               else "如果这里的 B = 1 偏快，单步耗时的倍数会偏大、吞吐的倍数会偏小。")]


def _duration(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} µs"


def explain_worked_bounds(w: WorkedStep, roofs: Roofs) -> list[str]:
    """The worked decode step against the measured roofs: its two lower bounds on time, and which is longer."""
    compute, read = w.cost.flops / roofs.flops.best, w.cost.bytes / roofs.bandwidth.best
    head = (f"手算的那一步解码：运算 {w.cost.flops / 1e6:.1f} MFLOP ÷ 矩阵乘速率 = {_duration(compute)}；"
            f"搬运 {w.cost.bytes / 1e6:.1f} MB ÷ 带宽 = {_duration(read)}")
    if read >= compute:
        return [head + f"。搬运字节的下限是运算下限的 {read / compute:.0f} 倍：这一步的时间由读写的字节决定，"
                "它是访存受限的。"]
    return [head + f"。在这台机器上，运算的下限反而更长（{compute / read:.1f} 倍）：带宽相对算力特别高，这一步是"
            "算力受限的。" + _busy_note(roofs)]
