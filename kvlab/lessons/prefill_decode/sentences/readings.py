"""Chapter 3.3's claims that read measured points against the roofs: prefill near or far below the matmul
roof, decode against the bandwidth roof (and, once the matrix-vector product is measured, the decode step
accounted for), the roofs' own spread, the worked step's two bounds, the batch's B = 1 against the sweep's decode."""
from __future__ import annotations

from ....claims import Chooser, Rule
from .common import (P, SAME, NEAR, FAR, FULL, close, launch_bound, LAUNCH_SHOWS, RERUN_SWEEP, RERUN_ROOFS,
                    RERUN_BATCH, RERUN_SMALL, LAUNCH_TEXT, RERUN_SWEEP_EN, RERUN_ROOFS_EN, RERUN_BATCH_EN,
                    RERUN_SMALL_EN, LAUNCH_TEXT_EN)


ROOF_SHOWS = ("P", "I", "rate", "share")

PREFILL_ROOF = Chooser(f"{P}.prefill_roof", (
    Rule(f"{P}.prefill_roof.launch_bound", LAUNCH_SHOWS, launch_bound),
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

VS_SHOWS = ("B", "C", "d", "p", "diff")

BATCH_VS_PREFILL = Chooser(f"{P}.batch_vs_prefill", (
    Rule(f"{P}.batch_vs_prefill.same", VS_SHOWS, lambda v: abs(v["diff"]) <= SAME and _diff_agrees("d", "p", "diff")(v)),
    Rule(f"{P}.batch_vs_prefill.decode_higher", VS_SHOWS, lambda v: v["diff"] > SAME and _diff_agrees("d", "p", "diff")(v)),
    Rule(f"{P}.batch_vs_prefill.prefill_higher", VS_SHOWS, lambda v: v["diff"] < -SAME and _diff_agrees("d", "p", "diff")(v)),
    Rule(f"{P}.batch_vs_prefill.unmeasured", substantive=False),
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


def _summed(v) -> bool:
    """The sum as printed: reading the step's bytes at the matrix-vector rate (MB ÷ GB/s = ms), plus the fixed cost
    (the demo model's whole step × the layers' ratio), and its share of the measured step."""
    return (close(v["read"], v["mb"] / v["rate"]) and close(v["fixed"], v["demo"] * v["layers"])
            and close(v["total"], v["read"] + v["fixed"]) and close(v["share"], 100 * v["total"] / v["step"], 1))


def _short(v) -> bool:
    """The sum under the band (below 85 % of the step), and the rest printed as the step minus the sum."""
    return _summed(v) and v["total"] < (1 - SAME / 100) * v["step"] and close(v["rest"], v["step"] - v["total"])


def _drifted(v) -> bool:
    """The same B = 1 work, timed twice on this page (the batch sweep's ``b1``, the prefill sweep's ``dec``), drifted
    beyond the band, the drift printed as their relative difference."""
    return abs(v["drift"]) > SAME and _diff_agrees("b1", "dec", "drift")(v)


SUM_SHOWS = ("P", "step", "mb", "rate", "read", "demo", "layers", "fixed", "total", "share")
DRIFT_SHOWS = ("b1", "dec", "drift")
DECODE_SUM = Chooser(f"{P}.decode_sum", (
    Rule(f"{P}.decode_sum.accounted", SUM_SHOWS, lambda v: _summed(v) and abs(v["total"] / v["step"] - 1) <= SAME / 100),
    Rule(f"{P}.decode_sum.short_drifted", (*SUM_SHOWS, "rest", *DRIFT_SHOWS), lambda v: _short(v) and _drifted(v)),
    Rule(f"{P}.decode_sum.short", (*SUM_SHOWS, "rest"), _short),
    Rule(f"{P}.decode_sum.off", SUM_SHOWS, _summed, substantive=False),
    Rule(f"{P}.decode_sum.unmeasured", substantive=False),
))


_ROOF = "预填充 P = {P}：I = {I} FLOP/字节，每秒 {rate}，是矩阵乘屋顶的 {share}"
_DECODE = ("解码（P = {P} 之后）：I = {I} FLOP/字节，每秒 {gflops}，只是矩阵乘屋顶的 {mm_share}；每秒搬运 {rate}，"
           "是测得带宽的 {share}")
_FAR = ("这一步 {step}，按带宽只要 {bound}；演示模型一整步（同样是几百个小算子）{demo}，这个模型的层数是它的 "
        "{layers} 倍：")
_BOUNDS = "手算的那一步解码：运算 {mflop} MFLOP ÷ 矩阵乘速率 = {compute}；搬运 {mb} MB ÷ 带宽 = {read}"
_BASELINE = ("B = 1 在这里一步 {b1}；上面提示词扫描里同一个模型在 P = {P} 之后的一步解码是 {dec}，这里比那里 {diff}")
_VS = "B = {B} 的解码（每条序列缓存里 {C} 个 token）每秒 {d}，P = {B} 的预填充 {p}，解码比预填充 {diff}"
_MATVEC = "{rows} 行 × W（矩阵乘向量）读 W 的速度：{mb} ÷ {ms} = {rate}，求和测得的带宽是 {bw}（{share}）"
_LATER = "（选学「行数很少的矩阵乘」一节量出矩阵乘向量读权重的速度以后，会把这一步的时间拆开算一遍）"
_SUM = ("回头看 roofline 一节里 P = {P} 之后的那一步解码（{step}）：它要读写 {mb}，按上面矩阵乘向量读 W 的速度 {rate} 要 "
        "{read}；再加上一步的固定开销，按演示模型一整步 {demo} × 层数之比 {layers} 算是 {fixed}；合计 {total}，是实测的 {share}")
_SHORT = "，不到 85%（±15% 以内才算对得上）：这两份只解释了那一步的一部分，还有 {rest} 在它们之外。可能的原因："
_WHY_SHORT = ("另外，模型的每个矩阵只有几 MiB，比这个 W 小得多，一次次小的矩阵乘向量未必读得这么快；这个模型的小算子也比演示"
              "模型的大（向量更长）。所以那一步里「别的开销」未必只是小算子的固定开销。")

TEMPLATES = {  # key -> its Chinese sentence (ZH, in __init__.py)
    f"{P}.prefill_trend.unmeasured": "这次没有测出有效的预填充速率，看不出它的走势；" + RERUN_SWEEP,
    f"{P}.long_rate.highest": "P = {P} 的预填充每秒 {rate}，高于 P = {P1} 的 {rate1} 和其后一步解码的 {dec}：提示词越长，"
                              "预填充越能用上算力。",
    f"{P}.long_rate.above_decode": "P = {P} 的预填充每秒 {rate}，高于其后一步解码的 {dec}，却不高于 P = {P1} 的 {rate1}：这次的"
                                   "计时被打断了，看不出提示词越长越能用上算力；" + RERUN_SWEEP,
    f"{P}.long_rate.unclear": "P = {P} 的预填充每秒 {rate}，不高于其后一步解码的 {dec}：这次说不准，多半是测预填充的那一刻机器"
                              "正忙；" + RERUN_SWEEP,
    f"{P}.long_rate.unmeasured": "这次没有测出有效的预填充和解码速率；" + RERUN_SWEEP,
    f"{P}.prefill_roof.launch_bound": LAUNCH_TEXT + "，离两道屋顶都很远，所以这些点看不出 roofline 的形状。要看到它，用更长的提示词"
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
    f"{P}.prefill_roof.unmeasured": "这次预填充的速率或屋顶没有测出有效的数；" + RERUN_SWEEP,
    f"{P}.prefill_trend.level": "和更短的提示词里最快的 P = {Pa} 比，P = {Pb} 的预填充每秒的运算数 ×{g}，已经趋于持平（±15% 以内算持平）。",
    f"{P}.prefill_trend.rising_above": "和更短的提示词里最快的 P = {Pa} 比，P = {Pb} 的预填充每秒的运算数 ×{g}，还在上升：已经是屋顶的 {share} 还在涨，"
                                       "又一个迹象说明这次的屋顶量低了。",
    f"{P}.prefill_trend.rising": "和更短的提示词里最快的 P = {Pa} 比，P = {Pb} 的预填充每秒的运算数 ×{g}，还在上升，还没有持平（±15% 以内算持平）。",
    f"{P}.prefill_trend.fell": "和更短的提示词里最快的 P = {Pa} 比，P = {Pb} 的预填充每秒的运算数 ×{g}，反而下降了：这一段说不准（多半是测量噪声）；"
                               + RERUN_SWEEP,
    f"{P}.decode_roof.above": _DECODE + "——超过了测得的带宽：要么权重有一部分留在了处理器的缓存里，要么测带宽那一刻机器正忙，带宽"
                              "量低了（下文的矩阵乘向量实验再量一次读权重的速度）。",
    f"{P}.decode_roof.full": _DECODE + "：用满了测得的带宽，解码被带宽这道斜屋顶卡住，是访存受限的。",
    f"{P}.decode_roof.at_median": _DECODE + "，却和屋顶的中位数 {median} 相当（{med_share}）：屋顶取的是最快的一次，机器忙时，"
                                  "解码大约跑在当时给得出的带宽上；它是访存受限的（算术强度远在转折点左边）。",
    f"{P}.decode_roof.near": _DECODE + "：接近带宽这道斜屋顶，但没有用满。解码是访存受限的（算术强度远在转折点左边），一步里还有"
                             "一些别的开销" + _LATER + "。",
    f"{P}.decode_roof.part": _DECODE + "：用了带宽的相当一部分，但没有用满。它仍是访存受限的（算术强度远在转折点左边），但一步里"
                             "还有别的开销" + _LATER + "。",
    f"{P}.decode_roof.far_overhead": _DECODE + "：只用了带宽的一小部分。" + _FAR + "多出来的时间和这些小算子的开销是同一个"
                                     "量级：一步的时间大多花在读权重以外的固定开销上（CPU 上是逐个算子的调度；GPU 上主要是"
                                     "几百次内核启动）。",
    f"{P}.decode_roof.far_busy": _DECODE + "：只用了带宽的一小部分。" + _FAR + "小算子的开销解释不了这么大的差距。测屋顶时"
                                 "机器很忙（最快的一次是中位数的 {spread} 倍），解码和屋顶不在同一忙闲下量，这个百分比靠不住；"
                                 + RERUN_SWEEP,
    f"{P}.decode_roof.far_unexplained": _DECODE + "：只用了带宽的一小部分。" + _FAR + "小算子的开销解释不了这么大的差距，"
                                        "这次说不准差在哪里；" + RERUN_SWEEP,
    f"{P}.decode_roof.unmeasured": "这次解码的速率或带宽没有测出有效的数；" + RERUN_SWEEP,
    f"{P}.roof_spread.busy": "⚠ 测屋顶的时候这台机器很忙：最快的一次是中位数的几倍——带宽 {bw} 倍，矩阵乘速率 {mm} 倍（达到 1.4 倍就算忙，"
                             "别的程序在抢处理器），屋顶随着负载在移动。屋顶取最快的一次，它最接近机器空闲时的速率，但也可能仍然"
                             "偏低；下文和屋顶比出来的百分比只能当作粗略的参考。" + RERUN_ROOFS,
    f"{P}.roof_spread.some": "重复测量之间有一定波动：最快的一次是中位数的几倍——带宽 {bw} 倍，矩阵乘速率 {mm} 倍（1.10 倍以内算一致，"
                             "达到 1.4 倍算很忙）：测量期间机器上多半还有别的程序在跑。屋顶取最快的一次；下文和屋顶比出来的百分比可能"
                             "差上一两成。",
    f"{P}.roof_spread.steady": "重复测量之间很一致（最快的一次是中位数的几倍——带宽 {bw} 倍，矩阵乘速率 {mm} 倍，都在 1.10 倍以内）："
                               "测量期间机器的负载没有大起大落。机器一直很忙时，两个屋顶会一起偏低，这从重复测量里看不出来。",
    f"{P}.roof_spread.unmeasured": "这次的屋顶没有测出有效的数；" + RERUN_ROOFS,
    f"{P}.worked_bounds.memory": _BOUNDS + "。搬运字节的下限是运算下限的 {ratio} 倍：这一步的时间由读写的字节决定，它是访存受限的。",
    f"{P}.worked_bounds.compute": _BOUNDS + "。在这台机器上，运算的下限反而更长（{ratio} 倍）：带宽相对算力特别高，这一步是算力受限的。",
    f"{P}.worked_bounds.unmeasured": "这次的屋顶没有测出有效的数，算不出这一步的下限；" + RERUN_ROOFS,
    f"{P}.batch_baseline.same": _BASELINE + "：两次测量一致（±15% 以内）。",
    f"{P}.batch_baseline.slower_here": _BASELINE + "（超出 ±15%）：同样的工作在不同时刻量，差了这么多，说明这段时间机器的忙闲在变"
                                       "（这次更忙）。下面的倍数都以这里的 B = 1 为基准；如果这里的 B = 1 偏慢，单步耗时的倍数会偏小、"
                                       "吞吐的倍数会偏大。",
    f"{P}.batch_baseline.faster_here": _BASELINE + "（超出 ±15%）：同样的工作在不同时刻量，差了这么多，说明这段时间机器的忙闲在变"
                                       "（那次更忙）。下面的倍数都以这里的 B = 1 为基准；如果这里的 B = 1 偏快，单步耗时的倍数会偏大、"
                                       "吞吐的倍数会偏小。",
    f"{P}.batch_baseline.unmeasured": "这次没有可以比较的 B = 1 单步耗时；" + RERUN_BATCH,
    f"{P}.batch_vs_prefill.same": _VS + "：落在相近的高度（±15% 以内）。同样是 {B} 行的矩阵 × 权重，速率也差不多。",
    f"{P}.batch_vs_prefill.decode_higher": _VS + "（超出 ±15%）。两者的矩阵乘一样大，差别来自别处：两个点是在不同时刻量的（机器的"
                                           "忙碌程度会变），而且不全是同样的算子——预填充多一次 {B} × {B} 的因果注意力，解码要为 {B} "
                                           "条序列各读一份 K/V、算 {B} 个位置的 logits。",
    f"{P}.batch_vs_prefill.prefill_higher": _VS + "（超出 ±15%）。两者的矩阵乘一样大，差别来自别处：两个点是在不同时刻量的（机器的"
                                            "忙碌程度会变），而且不全是同样的算子——预填充多一次 {B} × {B} 的因果注意力，解码要为 {B} "
                                            "条序列各读一份 K/V、算 {B} 个位置的 logits。",
    f"{P}.batch_vs_prefill.unmeasured": "这次比不了这两个点；" + RERUN_BATCH,
    f"{P}.matvec_read.faster": _MATVEC + "：比求和测得的带宽还快。W 远大于处理器的缓存，留在缓存里的部分解释不了这么多；更可能是"
                               "求和这个内核本身读内存不如矩阵乘向量快（也可能测带宽的那一刻机器更忙）：这道斜屋顶量低了，这次比不出"
                               "矩阵乘向量的内核是否读得满带宽。",
    f"{P}.matvec_read.full": _MATVEC + "：矩阵乘向量本身就能读满带宽，解码若用不满带宽，原因不在这个内核。",
    f"{P}.matvec_read.slower": _MATVEC + "：在这台机器上，矩阵乘向量的内核本身就读不满带宽，这是解码只用到带宽一部分的原因之一。",
    f"{P}.matvec_read.unmeasured": "这次的矩阵乘向量没有测出有效的时间；" + RERUN_SMALL,
    f"{P}.decode_vs_matvec.further": "所以上面 roofline 一节里解码的百分比（每秒搬运 {rate}，是求和带宽的 {share}）是和一道偏低的"
                                     "屋顶比的：按这次矩阵乘向量读权重的速度算，解码只用到了 {of_matvec}，离读满带宽比那里说的更远。",
    f"{P}.decode_vs_matvec.unmeasured": "这次比不了解码和矩阵乘向量的读速度；" + RERUN_SMALL,
    f"{P}.decode_sum.accounted": _SUM + "，在 ±15% 以内：那一步的时间就这样分成两份——按矩阵乘向量的速度读权重，加上几百个小算子"
                                 "的固定开销。",
    f"{P}.decode_sum.short_drifted": _SUM + _SHORT + "这几个数是在不同时刻量的，机器的忙闲可能已经变了：上面同样的 B = 1 一步，"
                                     "批次实验里 {b1}、提示词扫描里 {dec}，就差了 {drift}。" + _WHY_SHORT,
    f"{P}.decode_sum.short": _SUM + _SHORT + "这几个数是在不同时刻量的，机器的忙闲可能已经变了。" + _WHY_SHORT,
    f"{P}.decode_sum.off": _SUM + "，比实测多出了 15% 以上：这两份加起来超过了那一步本身，这次说不准（这几个数是在不同时刻量的，"
                           "机器的忙闲会变）；" + RERUN_SMALL,
    f"{P}.decode_sum.unmeasured": "这次算不出那一步解码拆开的两份（缺少有效的解码、矩阵乘向量或演示模型一步的时间）；" + RERUN_SMALL,
}

# -- the same claims in English (EN, in __init__.py): the same keys, the same fields ----------------------------
_ROOF_EN = "Prefill at P = {P}: I = {I} FLOP/byte, {rate}, {share} of the matmul roof"
_DECODE_HEAD_EN = "Decode (after P = {P}): I = {I} FLOP/byte, {gflops}, only {mm_share} of the matmul roof; it moves {rate}"
_DECODE_EN = _DECODE_HEAD_EN + ", {share} of the measured bandwidth"
_FAR_EN = ("this step takes {step}, where the bandwidth alone would need {bound}; a whole step of the demo model (the same "
           "few hundred small operators) takes {demo}, and this model has {layers} times its layers: ")
_BOUNDS_EN = ("The decode step worked out by hand: compute {mflop} MFLOP ÷ matmul rate = {compute}; move {mb} MB ÷ "
              "bandwidth = {read}")
_BASELINE_EN = ("B = 1 takes {b1} a step here; in the prompt sweep above, the same model's decode step after P = {P} took "
                "{dec}; here against there: {diff}")
_VS_EN = ("Decode at B = {B} ({C} tokens in each sequence's cache) runs {d}, prefill at P = {B} {p}; decode against "
          "prefill: {diff}")
_MATVEC_EN = ("How fast {rows} row × W (a matrix-vector product) reads W: {mb} ÷ {ms} = {rate}; the bandwidth the sum "
              "measured is {bw} ({share})")
_LATER_EN = (" (once the optional section on matrix multiplications with very few rows has measured how fast a matrix-vector product "
             "reads the weights, this step's time is taken apart)")
_SUM_EN = ("Back to the decode step after P = {P} in the roofline section ({step}): it reads and writes {mb}, which at "
           "the matrix-vector product's speed of reading W above, {rate}, takes {read}; add a step's fixed cost, the "
           "demo model's whole step {demo} × the ratio of the layers {layers}, that is {fixed}; in all {total}, {share} "
           "of the measured step")
_SHORT_EN = (", under 85% (only within ±15% do they match): these two parts explain only some of that step, and {rest} "
             "lies outside them. Possible reasons: ")
_WHY_SHORT_EN = ("Also, each of the model's matrices is only a few MiB, much smaller than this W, and many small "
                 "matrix-vector products need not read as fast; this model's small operators are also larger than the "
                 "demo model's (longer vectors). So the \"other overhead\" in that step need not be only the small "
                 "operators' fixed cost.")
_PREFILL_RATE_EN = "Prefill at P = {P} runs {rate}"
_TREND_EN = "Against P = {Pa}, the fastest of the shorter prompts, prefill at P = {Pb} does ×{g} the operations per second"
_VS_WHY_EN = (" (beyond ±15%). The two do matmuls of the same size, so the difference comes from elsewhere: the two "
              "points were measured at different moments (how busy the machine is changes), and not all their "
              "operators are the same: prefill adds a {B} × {B} causal attention, decode reads a copy of K/V for each "
              "of its {B} sequences and computes logits at {B} positions.")
TEMPLATES_EN = {
    f"{P}.prefill_trend.unmeasured": "This run measured no valid prefill rate, so its trend does not show; "
                                     + RERUN_SWEEP_EN,
    f"{P}.long_rate.highest": _PREFILL_RATE_EN + ", above P = {P1}'s {rate1} and the decode step after it, {dec}: the "
                              "longer the prompt, the better prefill uses the compute.",
    f"{P}.long_rate.above_decode": _PREFILL_RATE_EN + ", above the decode step after it, {dec}, but not above P = {P1}'s "
                                   "{rate1}: this run's timing was interrupted, so it does not show that longer prompts "
                                   "use the compute better; " + RERUN_SWEEP_EN,
    f"{P}.long_rate.unclear": _PREFILL_RATE_EN + ", no higher than the decode step after it, {dec}: this run cannot "
                              "tell, most likely the machine was busy while the prefill was timed; " + RERUN_SWEEP_EN,
    f"{P}.long_rate.unmeasured": "This run measured no valid prefill and decode rates; " + RERUN_SWEEP_EN,
    f"{P}.prefill_roof.launch_bound": LAUNCH_TEXT_EN + ", far from both roofs, so these points do not show the roofline's "
                                      "shape. To see it, use longer prompts or a larger model.",
    f"{P}.prefill_roof.above": _ROOF_EN + ", above the measured roof. The roof is no hard limit: it is the fastest of 15 "
                               "timed matmuls, only a sample, and the machine may have been busier when it was measured "
                               "than when this point was; prefill's matmul shape (P rows × the weights) may also simply "
                               "run faster. It has reached the roof's height: prefill is compute-bound.",
    f"{P}.prefill_roof.peaked_earlier": _ROOF_EN + "; yet the closest to the roof is the shorter P = {best_P} "
                                        "({best_share}): prefill was near the roof there already, and longer prompts got "
                                        "no faster (this time the longer one was even slower, from a busy machine or "
                                        "from the attention that grows with P).",
    f"{P}.prefill_roof.near": _ROOF_EN + ", ×{g} the fastest rate of the shorter prompts: close to the matmul roof; "
                              "prefill is compute-bound.",
    f"{P}.prefill_roof.near_rising": _ROOF_EN + ": right of the ridge, so compute-bound by the roofline; but ×{g} the "
                                     "fastest rate of the shorter prompts, still rising, not yet pressed against the "
                                     "roof.",
    f"{P}.prefill_roof.mid": _ROOF_EN + ": it does not reach the roof. This model's matrices are smaller than the matmul "
                             "the roof was measured with, and every forward pass has many small operators left out of "
                             "the operation count (RMSNorm, softmax, the activation function), all of which take time.",
    f"{P}.prefill_roof.far": _ROOF_EN + ": still far from the roof; a forward pass spends much of its time on work that "
                             "is not matmuls.",
    f"{P}.prefill_roof.unmeasured": "This run measured no valid prefill rate or roof; " + RERUN_SWEEP_EN,
    f"{P}.prefill_trend.level": _TREND_EN + ": levelling off (within ±15% counts as level).",
    f"{P}.prefill_trend.rising_above": _TREND_EN + ", still rising: at {share} of the roof and still climbing, one more "
                                       "sign that this run's roof came out low.",
    f"{P}.prefill_trend.rising": _TREND_EN + ", still rising, not level yet (within ±15% counts as level).",
    f"{P}.prefill_trend.fell": _TREND_EN + ", lower instead: this run cannot tell about this stretch (most likely "
                               "measurement noise); " + RERUN_SWEEP_EN,
    f"{P}.decode_roof.above": _DECODE_EN + ", beyond the measured bandwidth: either part of the weights stayed in the "
                              "processor's cache, or the machine was busy while the bandwidth was measured and it came "
                              "out low (the matrix-vector experiment below measures how fast the weights are read once "
                              "more).",
    f"{P}.decode_roof.full": _DECODE_EN + ": it uses up the measured bandwidth; decode is held by the bandwidth's "
                             "sloped roof: it is memory-bound.",
    f"{P}.decode_roof.at_median": _DECODE_HEAD_EN + ": {share} of the bandwidth roof (the fastest repeat) and {med_share} "
                                  "of the median repeat ({median}); on a busy machine decode runs at about the bandwidth "
                                  "the machine could give at the time; it is memory-bound (its arithmetic intensity is far left of "
                                  "the ridge).",
    f"{P}.decode_roof.near": _DECODE_EN + ": close to the bandwidth's sloped roof, but not using it up. Decode is "
                             "memory-bound (its arithmetic intensity is far left of the ridge), and a step has some "
                             "other overhead" + _LATER_EN + ".",
    f"{P}.decode_roof.part": _DECODE_EN + ": a good part of the bandwidth, but not all of it. It is still memory-bound "
                             "(its arithmetic intensity is far left of the ridge), but a step has other overhead"
                             + _LATER_EN + ".",
    f"{P}.decode_roof.far_overhead": _DECODE_EN + ": only a small part of the bandwidth; " + _FAR_EN + "the extra time "
                                     "is of the same order as those small operators' overhead: a step spends most of its "
                                     "time on fixed overhead other than reading the weights (on a CPU, dispatching one "
                                     "operator at a time; on a GPU, mostly a few hundred kernel launches).",
    f"{P}.decode_roof.far_busy": _DECODE_EN + ": only a small part of the bandwidth; " + _FAR_EN + "the small operators' "
                                 "overhead cannot explain so large a gap. The machine was very busy while the roofs were "
                                 "measured (the fastest repeat {spread} times the median), so decode and the roof were "
                                 "not measured under the same load, and this percentage cannot be trusted; "
                                 + RERUN_SWEEP_EN,
    f"{P}.decode_roof.far_unexplained": _DECODE_EN + ": only a small part of the bandwidth; " + _FAR_EN + "the small "
                                        "operators' overhead cannot explain so large a gap, and this run cannot tell "
                                        "where the rest goes; " + RERUN_SWEEP_EN,
    f"{P}.decode_roof.unmeasured": "This run measured no valid decode rate or bandwidth; " + RERUN_SWEEP_EN,
    f"{P}.roof_spread.busy": "⚠ This machine was very busy while the roofs were measured: the fastest repeat is several "
                             "times the median, {bw} times for the bandwidth and {mm} times for the matmul rate (1.4 "
                             "times or more counts as busy: other programs are competing for the processor), so the "
                             "roofs move with the load. A roof takes the fastest repeat, the closest to an idle "
                             "machine's rate, but it may still be low; the percentages of the roofs below are only a "
                             "rough guide; " + RERUN_ROOFS_EN,
    f"{P}.roof_spread.some": "The repeats vary somewhat: the fastest is {bw} times the median for the bandwidth and {mm} "
                             "times for the matmul rate (within 1.10 times counts as agreeing, 1.4 times or more as "
                             "very busy): most likely other programs were running on the machine during the measurement. A roof "
                             "takes the fastest repeat; the percentages of the roofs below may be off by up to about a fifth.",
    f"{P}.roof_spread.steady": "The repeats agree closely (the fastest is {bw} times the median for the bandwidth and "
                               "{mm} times for the matmul rate, both within 1.10 times): the machine's load did not "
                               "swing during the measurement. On a machine busy the whole time, both roofs come out "
                               "low together, which the repeats cannot show.",
    f"{P}.roof_spread.unmeasured": "This run measured no valid roofs; " + RERUN_ROOFS_EN,
    f"{P}.worked_bounds.memory": _BOUNDS_EN + ". The bound from moving bytes is {ratio} times the bound from compute: "
                                 "this step's time is set by the bytes read and written; it is memory-bound.",
    f"{P}.worked_bounds.compute": _BOUNDS_EN + ". On this machine the bound from compute is the longer one ({ratio} "
                                  "times): the bandwidth is unusually high for the compute, and this step is "
                                  "compute-bound.",
    f"{P}.worked_bounds.unmeasured": "This run measured no valid roofs, so this step's bounds cannot be worked out; "
                                     + RERUN_ROOFS_EN,
    f"{P}.batch_baseline.same": _BASELINE_EN + ": the two measurements agree (within ±15%).",
    f"{P}.batch_baseline.slower_here": _BASELINE_EN + " (beyond ±15%): the same work measured at different moments "
                                       "differs this much, so the machine's load changed in between (busier this time). "
                                       "The ratios below all take this B = 1 as the base; if it is slow, the step-time "
                                       "ratios come out low and the throughput ratios high.",
    f"{P}.batch_baseline.faster_here": _BASELINE_EN + " (beyond ±15%): the same work measured at different moments "
                                       "differs this much, so the machine's load changed in between (busier that time). "
                                       "The ratios below all take this B = 1 as the base; if it is fast, the step-time "
                                       "ratios come out high and the throughput ratios low.",
    f"{P}.batch_baseline.unmeasured": "This run has no B = 1 step time to compare; " + RERUN_BATCH_EN,
    f"{P}.batch_vs_prefill.same": _VS_EN + ": about the same height (within ±15%). Both multiply a matrix of {B} rows by "
                                  "the weights, and at about the same rate.",
    f"{P}.batch_vs_prefill.decode_higher": _VS_EN + _VS_WHY_EN,
    f"{P}.batch_vs_prefill.prefill_higher": _VS_EN + _VS_WHY_EN,
    f"{P}.batch_vs_prefill.unmeasured": "This run cannot compare these two points; " + RERUN_BATCH_EN,
    f"{P}.matvec_read.faster": _MATVEC_EN + ": faster than the bandwidth the sum measured. W is far larger than the "
                               "processor's cache, so the part that stays in the cache cannot explain this much; more "
                               "likely the sum kernel itself reads memory more slowly than the matrix-vector product "
                               "(or the machine was busier while the bandwidth was measured): the sloped roof came out "
                               "low, and this run cannot tell whether the matrix-vector kernel reads at the full "
                               "bandwidth.",
    f"{P}.matvec_read.full": _MATVEC_EN + ": the matrix-vector product alone reads at the full bandwidth, so if decode "
                             "does not use up the bandwidth, the reason is not this kernel.",
    f"{P}.matvec_read.slower": _MATVEC_EN + ": on this machine the matrix-vector kernel itself cannot read at the full "
                               "bandwidth, one reason why decode uses only part of it.",
    f"{P}.matvec_read.unmeasured": "This run measured no valid time for the matrix-vector product; " + RERUN_SMALL_EN,
    f"{P}.decode_vs_matvec.further": "So the decode percentage in the roofline section above (moving {rate}, {share} of "
                                     "the sum's bandwidth) was taken against a roof that is too low: at the speed this "
                                     "matrix-vector product reads the weights, decode uses only {of_matvec}, further "
                                     "from the full bandwidth than that section says.",
    f"{P}.decode_vs_matvec.unmeasured": "This run cannot compare decode with how fast the matrix-vector product reads; "
                                        + RERUN_SMALL_EN,
    f"{P}.decode_sum.accounted": _SUM_EN + ", within ±15%: that step's time splits into these two parts, reading the "
                                 "weights at the matrix-vector speed plus the fixed cost of a few hundred small "
                                 "operators.",
    f"{P}.decode_sum.short_drifted": _SUM_EN + _SHORT_EN + "these numbers were measured at different moments, and the "
                                     "machine's load may have changed: the same B = 1 step above took {b1} in the batch "
                                     "experiment and {dec} in the prompt sweep, a difference of {drift}. " + _WHY_SHORT_EN,
    f"{P}.decode_sum.short": _SUM_EN + _SHORT_EN + "these numbers were measured at different moments, and the machine's "
                             "load may have changed. " + _WHY_SHORT_EN,
    f"{P}.decode_sum.off": _SUM_EN + ", over 15% more than measured: the two parts add up to more than the step itself, "
                           "so this run cannot tell (these numbers were measured at different moments, and the "
                           "machine's load changes); " + RERUN_SMALL_EN,
    f"{P}.decode_sum.unmeasured": "This run cannot split that decode step into its two parts (a valid decode, "
                                  "matrix-vector or demo-model step time is missing); " + RERUN_SMALL_EN,
}

CHOOSERS = (PREFILL_ROOF, PREFILL_TREND, LONG_RATE, DECODE_ROOF, ROOF_SPREAD, WORKED_BOUNDS, BATCH_BASELINE, BATCH_VS_PREFILL,
            MATVEC_READ, DECODE_VS_MATVEC, DECODE_SUM)
