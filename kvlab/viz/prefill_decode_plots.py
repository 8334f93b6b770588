"""Plot builders of chapter 3.3 (prefill and decode): pure functions, results in, figures out.

The results are the dataclasses of :mod:`kvlab.lessons.prefill_decode`; nothing here runs a model.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..memory import format_bytes, iec_unit, stored_tokens
from ..phrases import Phrasebook
from .style import PALETTE, WIDE, apply_template, axis_title, new_figure

# Every word the figures show, in both languages, looked up when a figure is built (never at import: the notebook
# sets the language after importing kvlab). Plotly's own %{...} fields are written %{{...}} here.
PLOTS = Phrasebook("prefill_decode.plots", {
    "zh": {
        "phase.prefill": "预填充（prefill）",
        "phase.decode": "解码（decode）",
        "short.prefill": "预填充",
        "short.decode": "解码",
        "point.prefill": "预填充，B = 1（P 个 token 一次前向）",
        "point.decode": "解码，B = 1（P 个 token 之后）",
        "point.batch": "解码，B 条序列一起",
        "timeline.passes": "每一次前向（紧挨着排在时间轴上）",
        "timeline.cache": "前向之后缓存里存了多少",
        "timeline.hover": "第 %{{customdata[0]}} 次前向：输入 %{{customdata[1]}} 个 token，%{{x:.2f}} ms<br>"
                          "输出「%{{customdata[2]}}」<extra></extra>",
        "timeline.length": "cache.length（左轴）",
        "timeline.used": "已用字节（右轴，{unit}）",
        "timeline.allocated": "预分配 {size}（右轴）",
        "time": "时间",
        "bytes_used": "已用字节",
        "timeline.tpot": "TPOT {tpot:.2f} ms（解码步的平均）",
        "timeline.title": "一次真实的生成：提示词 {prompt} 个 token，之后逐个生成 {passes} 个 token",
        "prefill.time": "处理整段提示词的耗时",
        "prefill.rate": "每秒处理的 token 数",
        "prefill.one_pass": "预填充：一次前向（实测）",
        "prefill.one_by_one": "逐个送入：P × 一步解码（由实测单步算出）",
        "prefill.prefill_rate": "预填充 token/s = P ÷ 预填充耗时",
        "prefill.decode_rate": "解码 token/s = 1 ÷ 一步解码耗时",
        "prompt_len": "提示词长度 P",
        "duration": "耗时",
        "throughput": "吞吐",
        "prefill.title": "预填充一次算完整段提示词，解码一步只算 1 个 token（{device}）",
        "roofline.title": "本机的 roofline：内存带宽 {bw:.1f} GB/s，矩阵乘 {mm:.1f} GFLOP/s（{device}）",
        "roofline.roof": "屋顶：min（矩阵乘速率，带宽 × 算术强度）",
        "roofline.ridge": "转折点 {ridge:.1f} FLOP/字节",
        "roofline.hover": "%{{customdata}}<br>算术强度 %{{x:.2f}} FLOP/字节<br>%{{y:.2f}} GFLOP/s<extra></extra>",
        "roofline.also_prefill": "<br>{tag} 的预填充也在这里",
        "roofline.also_batch": "<br>{tag} 的批处理解码也在这里",
        "roofline.crowd": "{n} 个解码点（各个 P）<br>都挤在这里{also}",
        "intensity": "算术强度",
        "flop_per_byte": "FLOP/字节",
        "reached": "实际达到的计算速率",
        "batch.throughput": "解码吞吐",
        "batch.step": "一步解码的耗时",
        "batch.measured": "实测 token/s（B 条序列合计）",
        "batch.ideal": "理想：单步耗时不变时吞吐与 B 成正比",
        "batch.measured_step": "实测单步耗时",
        "batch_size": "批次 B",
        "sequences": "条序列",
        "step_time": "单步耗时",
        "batch.title": "批处理解码：一步为 B 条序列各生成 1 个 token（每条序列的缓存里已有 {context} 个 token，{device}）",
        "alloc.dynamic": "逐步拼接（dynamic）",
        "alloc.kv": "预分配（kv）",
        "alloc.reserved": "reserved：分配器向驱动要来的显存",
        "alloc.allocated": "allocated：张量真正占用的显存",
        "gpu_memory": "显存",
        "alloc.title": "CUDA 缓存分配器：reserved 与 allocated 之差是保留着却没有张量在用的显存（{device}）",
        "padded.row": "序列 {i}（P = {n}）{mark}",
        "padded.title": "左侧补齐（left padding）：灰色 padding，蓝色提示词，橙色生成的 token；✓ = 与单独运行逐 token 相同",
        "padded.hover": "%{{y}}<br>第 %{{x}} 个槽位：%{{text}}<extra></extra>",
        "padded.last_hover": "%{{y}}<br>最后生成的「%{{text}}」：返回、不存入缓存<extra></extra>",
        "padded.last": "最后一列：返回、不存入缓存",
        "padded.axis": "每列 = 1 个缓存槽位，共 {slots} 个",
        "cost.padded": "按最长补齐分配：{slots}",
        "cost.used": "真正存 token 的：{slots}",
        "cost.paged": "分页：每条序列占的块 × 块大小",
        "cost.hover": "每块 %{{x}} 个 token：%{{y}} 个槽位<extra></extra>",
        "cost.mark": "每块 {block}：{slots} ",
        "cost.block": "分页的块大小",
        "cost.slots": "缓存槽位",
        "cost.title": "分页占的槽位随块大小的变化（绿线低于灰色虚线时，分页比补齐省）",
        "precision.title": "每个新 token 位置上 logits 的最大误差（对比 FP32 缓存）",
        "precision.trace": "{label}：最大 {error:.2g}",
        "precision.spread": "logits 跨度（中位数）的 1%",
        "precision.margin": "最大与第二大 logit 之差（最小处）的一半：误差都低于它，贪心选择就不会变",
        "precision.error": "最大 |Δlogit|",
        "precision.position": "第几个新 token",
        "precision.figure": "FP16 / INT8 缓存引入的误差，逐个位置（本机实测）",
    },
    "en": {
        "phase.prefill": "prefill",
        "phase.decode": "decode",
        "short.prefill": "prefill",
        "short.decode": "decode",
        "point.prefill": "prefill, B = 1 (P tokens in one forward pass)",
        "point.decode": "decode, B = 1 (after P tokens)",
        "point.batch": "decode, B sequences together",
        "timeline.passes": "Every forward pass (back to back on the time axis)",
        "timeline.cache": "What the cache holds after each pass",
        "timeline.hover": "Forward pass %{{customdata[0]}}: %{{customdata[1]}} tokens in, %{{x:.2f}} ms<br>"
                          "out: \u201c%{{customdata[2]}}\u201d<extra></extra>",
        "timeline.length": "cache.length (left axis)",
        "timeline.used": "bytes used (right axis, {unit})",
        "timeline.allocated": "preallocated {size} (right axis)",
        "time": "time",
        "bytes_used": "bytes used",
        "timeline.tpot": "TPOT {tpot:.2f} ms (the mean decode step)",
        "timeline.title": "One real generation: a prompt of {prompt} tokens, then {passes} tokens generated one by one",
        "prefill.time": "Time to process the whole prompt",
        "prefill.rate": "Tokens processed per second",
        "prefill.one_pass": "prefill: one forward pass (measured)",
        "prefill.one_by_one": "one by one: P × a decode step (from the measured step)",
        "prefill.prefill_rate": "prefill token/s = P ÷ prefill time",
        "prefill.decode_rate": "decode token/s = 1 ÷ decode step time",
        "prompt_len": "prompt length P",
        "duration": "time",
        "throughput": "throughput",
        "prefill.title": "Prefill computes the whole prompt in one pass; a decode step computes just 1 token ({device})",
        "roofline.title": "This machine's roofline: memory bandwidth {bw:.1f} GB/s, matmul {mm:.1f} GFLOP/s ({device})",
        "roofline.roof": "roof: min(matmul rate, bandwidth × arithmetic intensity)",
        "roofline.ridge": "ridge point {ridge:.1f} FLOP/byte",
        "roofline.hover": "%{{customdata}}<br>arithmetic intensity %{{x:.2f}} FLOP/byte<br>%{{y:.2f}} GFLOP/s"
                          "<extra></extra>",
        "roofline.also_prefill": "<br>the prefill at {tag} is here too",
        "roofline.also_batch": "<br>the batched decode at {tag} is here too",
        "roofline.crowd": "{n} decode points (one per P)<br>all crowd here{also}",
        "intensity": "arithmetic intensity",
        "flop_per_byte": "FLOP/byte",
        "reached": "compute rate reached",
        "batch.throughput": "Decode throughput",
        "batch.step": "Time of one decode step",
        "batch.measured": "measured token/s (all B sequences)",
        "batch.ideal": "ideal: with the step time unchanged, throughput in proportion to B",
        "batch.measured_step": "measured step time",
        "batch_size": "batch B",
        "sequences": "sequences",
        "step_time": "step time",
        "batch.title": "Batched decode: one step generates 1 token for each of B sequences ({context} tokens already in "
                       "each sequence's cache, {device})",
        "alloc.dynamic": "concatenation (dynamic)",
        "alloc.kv": "preallocation (kv)",
        "alloc.reserved": "reserved: GPU memory the allocator got from the driver",
        "alloc.allocated": "allocated: GPU memory tensors really occupy",
        "gpu_memory": "GPU memory",
        "alloc.title": "The CUDA caching allocator: reserved minus allocated is GPU memory held but used by no tensor "
                       "({device})",
        "padded.row": "sequence {i} (P = {n}) {mark}",
        "padded.title": "Left padding: grey padding, blue prompt, orange generated tokens; ✓ = the same token for token "
                        "as when run alone",
        "padded.hover": "%{{y}}<br>slot %{{x}}: %{{text}}<extra></extra>",
        "padded.last_hover": "%{{y}}<br>the last token generated, \u201c%{{text}}\u201d: returned, not stored in the "
                             "cache<extra></extra>",
        "padded.last": "last column: returned, not stored in the cache",
        "padded.axis": "each column = 1 cache slot, {slots} in all",
        "cost.padded": "padded to the longest: {slots}",
        "cost.used": "actually holding a token: {slots}",
        "cost.paged": "paged: each sequence's blocks × block size",
        "cost.hover": "blocks of %{{x}} tokens: %{{y}} slots<extra></extra>",
        "cost.mark": "blocks of {block}: {slots} ",
        "cost.block": "paging block size",
        "cost.slots": "cache slots",
        "cost.title": "Slots taken when paged, by block size (where the green line is below the grey dashes, paging "
                      "saves over padding)",
        "precision.title": "Largest logit error at each new token position (against the FP32 cache)",
        "precision.trace": "{label}: at most {error:.2g}",
        "precision.spread": "1% of the logits' spread (median)",
        "precision.margin": "half the smallest gap between the largest and second-largest logit: with every error below "
                            "it, no greedy choice changes",
        "precision.error": "largest |Δlogit|",
        "precision.position": "new token",
        "precision.figure": "The error FP16 / INT8 caches bring, position by position (measured on this machine)",
    },
})
say = PLOTS.say


class _Shown(dict):
    """A ``{kind: ...}`` table whose texts are read from :data:`PLOTS` when asked for (``prefix`` + kind), so a figure
    built after ``kvlab.set_language`` speaks that language."""

    def __init__(self, prefix: str, kinds, build=lambda kind, text: text):
        super().__init__({kind: None for kind in kinds})
        self._prefix, self._build = prefix, build

    def __getitem__(self, kind):
        if kind not in self.keys():
            raise KeyError(kind)
        return self._build(kind, say(self._prefix + kind))

    def values(self):
        return [self[k] for k in self.keys()]

    def items(self):
        return [(k, self[k]) for k in self.keys()]


PHASE_COLORS = {"prefill": PALETTE[0], "decode": PALETTE[1]}
PHASE_LABELS = _Shown("phase.", ("prefill", "decode"))
PHASE_SHORT = _Shown("short.", ("prefill", "decode"))
FUTURE = "#e3e3e3"  # passes the Play slider has not reached yet
_POINT_LOOK = {"prefill": (PALETTE[0], "circle"), "decode": (PALETTE[1], "x"), "batch": (PALETTE[2], "diamond")}
POINT_STYLE = _Shown("point.", _POINT_LOOK, lambda kind, text: (*_POINT_LOOK[kind], text))  # (colour, symbol, legend)
TAG_POSITION = {"prefill": "top left", "batch": "bottom right"}  # apart where P = B puts them side by side
PRECISION_COLORS = {"kv": PALETTE[0], "fp16": PALETTE[1], "int8": PALETTE[2]}
SLOT_COLORS = {"pad": "#d9d9d9", "prompt": PALETTE[0], "new": PALETTE[1]}


def log_ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    """Ticks at 1, 2 and 5 times each power of ten between ``lo`` and ``hi`` (only the powers of ten when the
    range spans more than four decades), each labelled with its whole value ("0.5", "20", "1,000")."""
    if not (lo > 0 and hi >= lo):
        raise ValueError(f"lo, hi: need 0 < lo <= hi, got {lo}, {hi}")
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    steps = (1, 2, 5) if last - first <= 4 else (1,)
    values = [m * 10.0 ** e for e in range(first, last + 1) for m in steps if lo <= m * 10.0 ** e <= hi]
    return values, [f"{v:,.0f}" if v >= 1 else f"{v:g}" for v in values]


def _log_axis(update, values, pad: float = 1.25, top_pad: float | None = None, **where) -> None:
    """A log axis over ``values`` with :func:`log_ticks`: ``update`` is ``fig.update_xaxes`` or ``update_yaxes``;
    the range reaches ``pad`` times beyond the values (``top_pad`` above them, when given)."""
    positive = [v for v in values if v > 0]
    lo, hi = min(positive) / pad, max(positive) * (top_pad or pad)
    ticks, labels = log_ticks(lo, hi)
    update(type="log", range=[math.log10(lo), math.log10(hi)], tickvals=ticks, ticktext=labels, **where)


# -- one generation as a timeline ------------------------------------------------------------------
def timeline_figure(tl, step: int) -> go.Figure:
    """Passes on a time axis (top) and the cache's length and bytes after each pass (bottom), up to ``step``.

    ``tl``: :class:`kvlab.lessons.prefill_decode.Timeline`. Passes after ``step`` are drawn in grey.
    """
    starts, ends = tl.starts_ms, tl.ends_ms
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.4, 0.6], vertical_spacing=0.14,
                        specs=[[{}], [{"secondary_y": True}]],
                        subplot_titles=(say("timeline.passes"), say("timeline.cache")))
    for phase in ("prefill", "decode"):
        idx = [i for i, r in enumerate(tl.trace) if r.phase == phase]
        if not idx:
            continue
        fig.add_trace(go.Bar(
            base=[starts[i] for i in idx], x=[ends[i] - starts[i] for i in idx], y=[PHASE_SHORT[phase]] * len(idx),
            orientation="h", name=PHASE_LABELS[phase], showlegend=False,
            marker=dict(color=[PHASE_COLORS[phase] if i < step else FUTURE for i in idx],
                        line=dict(color=["#000" if i == step - 1 else "#fff" for i in idx],
                                  width=[2.5 if i == step - 1 else 0.5 for i in idx])),
            text=[tl.new_text[i] if i < step else "" for i in idx], textposition="inside", insidetextanchor="middle",
            textangle=0, constraintext="inside",
            customdata=[[i + 1, tl.trace[i].new_tokens, tl.new_text[i]] for i in idx],
            hovertemplate=say("timeline.hover")), row=1, col=1)
    x = [0.0] + ends[:step]
    lengths = [0] + tl.lengths[:step]  # an empty cache before the first pass
    unit, scale = iec_unit(tl.cache_allocated_bytes)
    top = tl.lengths[-1] * 1.15
    fig.add_scatter(x=x, y=lengths, mode="lines+markers", line=dict(shape="hv", color=PALETTE[0], width=2.5),
                    name=say("timeline.length"), row=2, col=1)
    fig.add_scatter(x=x, y=[n * tl.bytes_per_token / scale for n in lengths], mode="markers",
                    marker=dict(symbol="line-ew-open", size=14, color=PALETTE[3]),
                    name=say("timeline.used", unit=unit), row=2, col=1, secondary_y=True)
    fig.add_scatter(x=[0, ends[-1]], y=[tl.cache_allocated_bytes / scale] * 2, mode="lines",
                    line=dict(dash="dash", color=PALETTE[3], width=1.5),
                    name=say("timeline.allocated", size=format_bytes(tl.cache_allocated_bytes)), row=2, col=1,
                    secondary_y=True)
    fig.update_xaxes(range=[0, ends[-1] * 1.02])
    fig.update_xaxes(title=axis_title(say("time"), "ms"), row=2, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_yaxes(title=axis_title("cache.length", "tokens"), range=[0, top], row=2, col=1, secondary_y=False)
    fig.update_yaxes(title=axis_title(say("bytes_used"), unit), range=[0, top * tl.bytes_per_token / scale], showgrid=False,
                     row=2, col=1, secondary_y=True)
    fig.add_annotation(x=ends[0], y=1, xref="x", yref="y domain", yanchor="bottom", xanchor="left", showarrow=False,
                       text=f"TTFT {tl.ttft_ms:.2f} ms", font=dict(color=PHASE_COLORS["prefill"]))
    fig.add_annotation(x=ends[-1], y=1, xref="x", yref="y domain", yanchor="bottom", xanchor="right", showarrow=False,
                       text=say("timeline.tpot", tpot=tl.tpot_ms), font=dict(color=PHASE_COLORS["decode"]))
    fig.update_yaxes(automargin=True, row=1, col=1)
    fig.update_layout(bargap=0.25)
    return apply_template(fig, say("timeline.title", prompt=tl.prompt_tokens, passes=tl.passes), 460, legend_below=True)


# -- prefill against decode ---------------------------------------------------------------------------
def _mark(fig, x, y, row, col, text):
    fig.add_scatter(x=[x], y=[y], mode="markers+text", text=[text], textposition="top center", showlegend=False,
                    marker=dict(size=15, color="rgba(0,0,0,0)", line=dict(color="#000", width=2)), row=row, col=col,
                    hoverinfo="skip", cliponaxis=False)


def prefill_decode_figure(sweep, selected: int) -> go.Figure:
    """Time of the prompt as one prefill pass vs fed token by token (left), tokens/s of both (right).

    ``sweep``: :class:`kvlab.lessons.prefill_decode.PrefillSweep`; ``selected``: the P to mark.
    """
    P = sweep.lengths
    pts = sweep.points
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.11,
                        subplot_titles=(say("prefill.time"), say("prefill.rate")))
    pre, dec = PHASE_COLORS["prefill"], PHASE_COLORS["decode"]
    fig.add_scatter(x=P, y=[p.prefill_seconds * 1e3 for p in pts], mode="lines+markers", line=dict(color=pre),
                    name=say("prefill.one_pass"), row=1, col=1)
    fig.add_scatter(x=P, y=[p.sequential_seconds * 1e3 for p in pts], mode="lines+markers",
                    line=dict(color=dec, dash="dash"), name=say("prefill.one_by_one"), row=1, col=1)
    fig.add_scatter(x=P, y=[p.prefill_tokens_per_s for p in pts], mode="lines+markers", line=dict(color=pre),
                    name=say("prefill.prefill_rate"), row=1, col=2)
    fig.add_scatter(x=P, y=[p.decode_tokens_per_s for p in pts], mode="lines+markers", line=dict(color=dec),
                    name=say("prefill.decode_rate"), row=1, col=2)
    s = sweep.at(selected)
    _mark(fig, selected, s.prefill_seconds * 1e3, 1, 1, f"P={selected}")
    _mark(fig, selected, s.sequential_seconds * 1e3, 1, 1, "")
    _mark(fig, selected, s.prefill_tokens_per_s, 1, 2, f"P={selected}")
    _mark(fig, selected, s.decode_tokens_per_s, 1, 2, "")
    fig.update_xaxes(type="log", dtick=math.log10(2), tickformat="d", title=axis_title(say("prompt_len"), "tokens"))
    _log_axis(fig.update_yaxes, [p.prefill_seconds * 1e3 for p in pts] + [p.sequential_seconds * 1e3 for p in pts],
              title=axis_title(say("duration"), "ms"), row=1, col=1)
    _log_axis(fig.update_yaxes, [p.prefill_tokens_per_s for p in pts] + [p.decode_tokens_per_s for p in pts],
              title=axis_title(say("throughput"), "token/s"), row=1, col=2)
    return apply_template(fig, say("prefill.title", device=sweep.device), 420, legend_below=True)


# -- the roofline -------------------------------------------------------------------------------------------
def roofline_figure(roofs, points, highlight: str | None = None) -> go.Figure:
    """This machine's roofline (log-log) with measured passes on it.

    ``roofs``: :class:`kvlab.lessons.prefill_decode.Roofs`; ``points``: ``RooflinePoint`` list;
    ``highlight``: the label of a point to ring and name.
    """
    bw, peak = roofs.bandwidth.best, roofs.flops.best
    xs_pts = [p.intensity for p in points] or [roofs.ridge]
    lo = min(min(xs_pts), roofs.ridge) / 3
    hi = max(max(xs_pts), roofs.ridge) * 3
    xs = np.logspace(math.log10(lo), math.log10(hi), 200)
    fig = new_figure(say("roofline.title", bw=bw / 1e9, mm=peak / 1e9, device=roofs.device), height=480, width=WIDE)
    fig.add_scatter(x=xs, y=[min(peak, bw * x) / 1e9 for x in xs], mode="lines", line=dict(color="#444", width=3),
                    name=say("roofline.roof"), hoverinfo="skip")
    fig.add_scatter(x=[roofs.ridge], y=[peak / 1e9], mode="markers+text", marker=dict(size=9, color="#444"),
                    text=[say("roofline.ridge", ridge=roofs.ridge)], textposition="top left", showlegend=False,
                    hoverinfo="skip")
    decode = [p for p in points if p.kind == "decode"]
    crowd = max((p.intensity for p in decode), default=0) * 1.5  # points this close to the decode ones get no tag
    hidden = [p for p in points if p.kind != "decode" and p.tag and p.intensity <= crowd]
    for kind, (color, symbol, label) in POINT_STYLE.items():
        sel = [p for p in points if p.kind == kind]
        if not sel:
            continue
        fig.add_scatter(x=[p.intensity for p in sel], y=[p.flops_per_s / 1e9 for p in sel], mode="markers+text",
                        marker=dict(color=color, symbol=symbol, size=10, line=dict(width=1, color="#fff")),
                        name=label, text=["" if p in hidden else p.tag for p in sel],
                        customdata=[p.label for p in sel], cliponaxis=False,
                        textposition=TAG_POSITION.get(kind, "top center"), textfont=dict(size=10, color=color),
                        hovertemplate=say("roofline.hover"))
    if decode:
        also = "".join(say("roofline.also_prefill" if p.kind == "prefill" else "roofline.also_batch",
                           tag=p.tag.replace("=", " = ")) for p in hidden)
        fig.add_annotation(x=math.log10(decode[-1].intensity), y=math.log10(decode[-1].flops_per_s / 1e9),
                           text=say("roofline.crowd", n=len(decode), also=also), ax=-40, ay=-110, showarrow=True,
                           arrowcolor=POINT_STYLE["decode"][0], font=dict(color=POINT_STYLE["decode"][0], size=11))
    for p in points:
        if p.label == highlight:
            fig.add_scatter(x=[p.intensity], y=[p.flops_per_s / 1e9], mode="markers+text", text=[p.label],
                            textposition="middle right", showlegend=False, hoverinfo="skip",
                            marker=dict(size=20, color="rgba(0,0,0,0)", line=dict(color="#000", width=2.5)))
    ys = [p.flops_per_s / 1e9 for p in points] + [peak / 1e9, bw * lo / 1e9]
    fig.update_xaxes(title=axis_title(say("intensity"), say("flop_per_byte")))
    _log_axis(fig.update_xaxes, [lo, hi], pad=1)
    _log_axis(fig.update_yaxes, ys, top_pad=2, title=axis_title(say("reached"), "GFLOP/s"))  # room for labels
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.24, x=0), margin=dict(b=150), height=540)
    return fig


# -- decode batching ---------------------------------------------------------------------------------------
def batch_figure(sweep, selected: int) -> go.Figure:
    """Decode tokens/s (left) and step time (right) against the batch size, measured.

    ``sweep``: :class:`kvlab.lessons.prefill_decode.BatchSweep`; ``selected``: the B to mark.
    """
    B = sweep.batch_sizes
    pts = sweep.points
    one = pts[0]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.11, subplot_titles=(say("batch.throughput"), say("batch.step")))
    color = POINT_STYLE["batch"][0]
    fig.add_scatter(x=B, y=[p.tokens_per_s for p in pts], mode="lines+markers", line=dict(color=color),
                    name=say("batch.measured"), row=1, col=1)
    fig.add_scatter(x=B, y=[one.tokens_per_s * b / one.batch_size for b in B], mode="lines",
                    line=dict(color="#888", dash="dot"), name=say("batch.ideal"), row=1, col=1)
    fig.add_scatter(x=B, y=[p.step_seconds * 1e3 for p in pts], mode="lines+markers", line=dict(color=color),
                    name=say("batch.measured_step"), showlegend=False, row=1, col=2)
    s = sweep.at(selected)
    _mark(fig, selected, s.tokens_per_s, 1, 1, f"B={selected}")
    _mark(fig, selected, s.step_seconds * 1e3, 1, 2, f"B={selected}")
    fig.update_xaxes(type="log", dtick=math.log10(2), tickformat="d", title=axis_title(say("batch_size"), say("sequences")))
    _log_axis(fig.update_yaxes, [p.tokens_per_s for p in pts] + [one.tokens_per_s * b / one.batch_size for b in B],
              title=axis_title(say("throughput"), "token/s"), row=1, col=1)
    fig.update_yaxes(title=axis_title(say("step_time"), "ms"), rangemode="tozero", row=1, col=2)
    return apply_template(fig, say("batch.title", context=sweep.context_len, device=sweep.device), 400,
                          legend_below=True)


# -- the GPU allocator -----------------------------------------------------------------------------------------
def allocator_figure(comparison) -> go.Figure:
    """Allocated and reserved bytes after each pass, growing vs preallocated cache (CUDA only).

    ``comparison``: :class:`kvlab.lessons.prefill_decode.AllocatorComparison` that ran.
    """
    traces = comparison.traces
    top = max(max(t.reserved + t.allocated) for t in traces.values())
    unit, scale = iec_unit(max(top, 1))
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=[say(f"alloc.{m}") if m in ("dynamic", "kv") else m for m in traces])
    for col, t in enumerate(traces.values(), start=1):
        fig.add_scatter(x=t.lengths, y=[b / scale for b in t.reserved], mode="lines", line=dict(color=PALETTE[3]),
                        name=say("alloc.reserved"), showlegend=col == 1, row=1, col=col)
        fig.add_scatter(x=t.lengths, y=[b / scale for b in t.allocated], mode="lines", line=dict(color=PALETTE[0]),
                        name=say("alloc.allocated"), showlegend=col == 1, row=1, col=col)
    fig.update_xaxes(title=axis_title("cache.length", "tokens"))
    fig.update_yaxes(title=axis_title(say("gpu_memory"), unit), rangemode="tozero", row=1, col=1)
    return apply_template(fig, say("alloc.title", device=comparison.device), 400, legend_below=True)


# -- unequal lengths in one batch ----------------------------------------------------------------------------------
def padded_batch_figure(b) -> go.Figure:
    """The left-padded batch as its cache: one row per sequence, one column per cache slot (padding, prompt,
    generated tokens), and apart from the grid each sequence's last token, returned and never stored.

    ``b``: :class:`kvlab.lessons.prefill_decode.PaddedBatch`.
    """
    slots = stored_tokens(max(b.lengths), b.new_tokens)  # the cache's max_seq_len
    z = np.zeros((len(b.prompts), slots))
    text = [[""] * slots for _ in b.prompts]
    for row, pad in enumerate(b.pad_lengths):
        prompt, new = b.pieces(row)  # one piece a token: a character of the Chinese model, a subword of the English
        z[row, pad:pad + len(prompt)] = 1
        z[row, pad + len(prompt):] = 2
        for j, piece in enumerate((prompt + new)[:slots - pad]):
            text[row][pad + j] = piece
    show_text = slots <= 70
    labels = [say("padded.row", i=i + 1, n=n, mark="✓" if same else "✗") for i, (n, same) in
              enumerate(zip(b.lengths, b.same_as_alone))]
    scale = [[0, SLOT_COLORS["pad"]], [0.33, SLOT_COLORS["pad"]], [0.33, SLOT_COLORS["prompt"]],
             [0.67, SLOT_COLORS["prompt"]], [0.67, SLOT_COLORS["new"]], [1, SLOT_COLORS["new"]]]
    fig = new_figure(say("padded.title"), height=max(260, 110 + 42 * len(b.prompts)), width=WIDE)
    fig.add_trace(go.Heatmap(z=z, x=list(range(slots)), y=labels, zmin=0, zmax=2, colorscale=scale, showscale=False,
                             xgap=1, ygap=3, text=text, texttemplate="%{text}" if show_text else None,
                             textfont=dict(size=11, color="#fff"),
                             hovertemplate=say("padded.hover")))
    last_x = slots + 1  # one empty column apart from the cache
    fig.add_scatter(x=[last_x] * len(labels), y=labels, mode="markers+text" if show_text else "markers",
                    text=[b.pieces(row)[1][-1] if b.pieces(row)[1] else "" for row in range(len(labels))], textfont=dict(size=11, color="#fff"),
                    marker=dict(symbol="square", size=20, color=SLOT_COLORS["new"], opacity=0.55,
                                line=dict(width=1.5, color=SLOT_COLORS["new"])),
                    showlegend=False, hovertemplate=say("padded.last_hover"))
    fig.add_annotation(x=last_x + 0.6, y=1, yref="paper", xanchor="right", yanchor="bottom", showarrow=False,
                       text=say("padded.last"), font=dict(size=11, color=SLOT_COLORS["new"]))
    step = 5 if slots <= 60 else 10
    fig.update_xaxes(title=axis_title(say("padded.axis", slots=slots), "tokens"), range=[-0.5, last_x + 0.7],
                     tickvals=list(range(0, slots, step)), showgrid=False, zeroline=False)
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig


PAGED_BLOCK_SIZES = range(1, 65)  # the block sizes the padding panel's slider offers


def padding_cost_figure(b) -> go.Figure:
    """The slots the batch takes when paged, for every block size the slider offers (the readout prints the one
    chosen), against the padded cache and the slots that hold a token: where paging stops paying."""
    sizes = list(PAGED_BLOCK_SIZES)
    fig = new_figure("", height=340, width=WIDE)
    fig.add_scatter(x=[sizes[0], sizes[-1]], y=[b.cache_slots] * 2, mode="lines", hoverinfo="skip",
                    line=dict(color="#999", dash="dash", width=2), name=say("cost.padded", slots=b.cache_slots))
    fig.add_scatter(x=[sizes[0], sizes[-1]], y=[b.used_slots] * 2, mode="lines", hoverinfo="skip",
                    line=dict(color=PALETTE[0], dash="dot", width=2), name=say("cost.used", slots=b.used_slots))
    paged = [b.paged_slots_at(k) for k in sizes]
    fig.add_scatter(x=sizes, y=paged, mode="lines", line=dict(color=PALETTE[2], width=2),
                    name=say("cost.paged"), hovertemplate=say("cost.hover"))
    fig.add_scatter(x=[b.block_size], y=[b.paged_slots], mode="markers+text", showlegend=False, hoverinfo="skip",
                    marker=dict(size=13, color="rgba(0,0,0,0)", line=dict(color="#000", width=2)),
                    text=[say("cost.mark", block=b.block_size, slots=b.paged_slots)], textposition="middle left")
    fig.update_xaxes(title=axis_title(say("cost.block"), "tokens"), range=[0, sizes[-1] + 1])
    fig.update_yaxes(title=axis_title(say("cost.slots"), "tokens"), range=[0, 1.15 * max(*paged, b.cache_slots)])
    apply_template(fig, say("cost.title"), 380, legend_below=True)
    fig.update_layout(legend=dict(y=-0.38))  # below the x-axis title
    return fig


# -- FP16 and INT8 caches ----------------------------------------------------------------------------------------
def precision_figure(results: dict) -> go.Figure:
    """The largest logit error at each new position (log scale), against the two thresholds the text uses: 1 % of
    the logits' spread, and half the smallest best-vs-second gap (below it no greedy choice can change). The bytes
    are printed above the figure, not drawn again.

    ``results``: ``{mode: kvlab.lessons.prefill_decode.CachePrecision}``.
    """
    fig = new_figure(say("precision.title"), height=400, width=WIDE)
    for m, r in results.items():
        if r.max_logit_error == 0:
            continue  # the reference itself: nothing to draw on a log axis
        fig.add_scatter(x=list(range(1, len(r.logit_error) + 1)), y=r.logit_error, mode="lines",
                        line=dict(color=PRECISION_COLORS.get(m, PALETTE[-1]), width=1.5),
                        name=say("precision.trace", label=r.label, error=r.max_logit_error))
    first = next(iter(results.values()))
    n = len(first.logit_error)
    for value, text, dash in ((first.logit_spread / 100, say("precision.spread"), "dot"),
                              (first.reference_margin / 2, say("precision.margin"), "dash")):
        fig.add_scatter(x=[1, n], y=[value, value], mode="lines", line=dict(color="#666", dash=dash, width=1.2),
                        name=text, hoverinfo="skip")
    fig.update_yaxes(type="log", dtick="D2", title=axis_title(say("precision.error"), "logit"))
    fig.update_xaxes(title=axis_title(say("precision.position"), "tokens"))
    return apply_template(fig, say("precision.figure"), 400, legend_below=True)
