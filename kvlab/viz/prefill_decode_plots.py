"""Plot builders of chapter 3.3 (prefill and decode): pure functions, results in, figures out.

The results are the dataclasses of :mod:`kvlab.lessons.prefill_decode`; nothing here runs a model.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..memory import format_bytes, iec_unit, stored_tokens
from .style import PALETTE, WIDE, apply_template, axis_title, new_figure

PHASE_COLORS = {"prefill": PALETTE[0], "decode": PALETTE[1]}
PHASE_LABELS = {"prefill": "预填充（prefill）", "decode": "解码（decode）"}
PHASE_SHORT = {"prefill": "预填充", "decode": "解码"}
FUTURE = "#e3e3e3"  # passes the Play slider has not reached yet
POINT_STYLE = {  # roofline points: (colour, marker symbol, legend label)
    "prefill": (PALETTE[0], "circle", "预填充，B = 1（P 个 token 一次前向）"),
    "decode": (PALETTE[1], "x", "解码，B = 1（P 个 token 之后）"),
    "batch": (PALETTE[2], "diamond", "解码，B 条序列一起"),
}
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
                        subplot_titles=("每一次前向（紧挨着排在时间轴上）", "前向之后缓存里存了多少"))
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
            hovertemplate="第 %{customdata[0]} 次前向：输入 %{customdata[1]} 个 token，%{x:.2f} ms<br>"
                          "输出「%{customdata[2]}」<extra></extra>"), row=1, col=1)
    x = [0.0] + ends[:step]
    lengths = [0] + tl.lengths[:step]  # an empty cache before the first pass
    unit, scale = iec_unit(tl.cache_allocated_bytes)
    top = tl.lengths[-1] * 1.15
    fig.add_scatter(x=x, y=lengths, mode="lines+markers", line=dict(shape="hv", color=PALETTE[0], width=2.5),
                    name="cache.length（左轴）", row=2, col=1)
    fig.add_scatter(x=x, y=[n * tl.bytes_per_token / scale for n in lengths], mode="markers",
                    marker=dict(symbol="line-ew-open", size=14, color=PALETTE[3]),
                    name=f"已用字节（右轴，{unit}）", row=2, col=1, secondary_y=True)
    fig.add_scatter(x=[0, ends[-1]], y=[tl.cache_allocated_bytes / scale] * 2, mode="lines",
                    line=dict(dash="dash", color=PALETTE[3], width=1.5),
                    name=f"预分配 {format_bytes(tl.cache_allocated_bytes)}（右轴）", row=2, col=1, secondary_y=True)
    fig.update_xaxes(range=[0, ends[-1] * 1.02])
    fig.update_xaxes(title=axis_title("时间", "ms"), row=2, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_yaxes(title=axis_title("cache.length", "tokens"), range=[0, top], row=2, col=1, secondary_y=False)
    fig.update_yaxes(title=axis_title("已用字节", unit), range=[0, top * tl.bytes_per_token / scale], showgrid=False,
                     row=2, col=1, secondary_y=True)
    fig.add_annotation(x=ends[0], y=1, xref="x", yref="y domain", yanchor="bottom", xanchor="left", showarrow=False,
                       text=f"TTFT {tl.ttft_ms:.2f} ms", font=dict(color=PHASE_COLORS["prefill"]))
    fig.add_annotation(x=ends[-1], y=1, xref="x", yref="y domain", yanchor="bottom", xanchor="right", showarrow=False,
                       text=f"TPOT {tl.tpot_ms:.2f} ms（解码步的平均）", font=dict(color=PHASE_COLORS["decode"]))
    fig.update_yaxes(automargin=True, row=1, col=1)
    fig.update_layout(bargap=0.25)
    return apply_template(fig, f"一次真实的生成：提示词 {tl.prompt_tokens} 个 token，之后逐个生成 {tl.passes} 个 token",
                          460, legend_below=True)


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
                        subplot_titles=("处理整段提示词的耗时", "每秒处理的 token 数"))
    pre, dec = PHASE_COLORS["prefill"], PHASE_COLORS["decode"]
    fig.add_scatter(x=P, y=[p.prefill_seconds * 1e3 for p in pts], mode="lines+markers", line=dict(color=pre),
                    name="预填充：一次前向（实测）", row=1, col=1)
    fig.add_scatter(x=P, y=[p.sequential_seconds * 1e3 for p in pts], mode="lines+markers",
                    line=dict(color=dec, dash="dash"), name="逐个送入：P × 一步解码（由实测单步算出）", row=1, col=1)
    fig.add_scatter(x=P, y=[p.prefill_tokens_per_s for p in pts], mode="lines+markers", line=dict(color=pre),
                    name="预填充 token/s = P ÷ 预填充耗时", row=1, col=2)
    fig.add_scatter(x=P, y=[p.decode_tokens_per_s for p in pts], mode="lines+markers", line=dict(color=dec),
                    name="解码 token/s = 1 ÷ 一步解码耗时", row=1, col=2)
    s = sweep.at(selected)
    _mark(fig, selected, s.prefill_seconds * 1e3, 1, 1, f"P={selected}")
    _mark(fig, selected, s.sequential_seconds * 1e3, 1, 1, "")
    _mark(fig, selected, s.prefill_tokens_per_s, 1, 2, f"P={selected}")
    _mark(fig, selected, s.decode_tokens_per_s, 1, 2, "")
    fig.update_xaxes(type="log", dtick=math.log10(2), tickformat="d", title=axis_title("提示词长度 P", "tokens"))
    _log_axis(fig.update_yaxes, [p.prefill_seconds * 1e3 for p in pts] + [p.sequential_seconds * 1e3 for p in pts],
              title=axis_title("耗时", "ms"), row=1, col=1)
    _log_axis(fig.update_yaxes, [p.prefill_tokens_per_s for p in pts] + [p.decode_tokens_per_s for p in pts],
              title=axis_title("吞吐", "token/s"), row=1, col=2)
    return apply_template(fig, f"预填充一次算完整段提示词，解码一步只算 1 个 token（{sweep.device}）", 420,
                          legend_below=True)


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
    fig = new_figure(f"本机的 roofline：内存带宽 {bw / 1e9:.1f} GB/s，矩阵乘 {peak / 1e9:.1f} GFLOP/s"
                     f"（{roofs.device}）", height=480, width=WIDE)
    fig.add_scatter(x=xs, y=[min(peak, bw * x) / 1e9 for x in xs], mode="lines", line=dict(color="#444", width=3),
                    name="屋顶：min（矩阵乘速率，带宽 × 算术强度）", hoverinfo="skip")
    fig.add_scatter(x=[roofs.ridge], y=[peak / 1e9], mode="markers+text", marker=dict(size=9, color="#444"),
                    text=[f"转折点 {roofs.ridge:.1f} FLOP/字节"], textposition="top left", showlegend=False,
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
                        hovertemplate="%{customdata}<br>算术强度 %{x:.2f} FLOP/字节<br>%{y:.2f} GFLOP/s<extra></extra>")
    if decode:
        also = "".join(f"<br>{p.tag.replace('=', ' = ')} 的{'预填充' if p.kind == 'prefill' else '批处理解码'}也在这里"
                       for p in hidden)
        fig.add_annotation(x=math.log10(decode[-1].intensity), y=math.log10(decode[-1].flops_per_s / 1e9),
                           text=f"{len(decode)} 个解码点（各个 P）<br>都挤在这里{also}", ax=-40, ay=-110, showarrow=True,
                           arrowcolor=POINT_STYLE["decode"][0], font=dict(color=POINT_STYLE["decode"][0], size=11))
    for p in points:
        if p.label == highlight:
            fig.add_scatter(x=[p.intensity], y=[p.flops_per_s / 1e9], mode="markers+text", text=[p.label],
                            textposition="middle right", showlegend=False, hoverinfo="skip",
                            marker=dict(size=20, color="rgba(0,0,0,0)", line=dict(color="#000", width=2.5)))
    ys = [p.flops_per_s / 1e9 for p in points] + [peak / 1e9, bw * lo / 1e9]
    fig.update_xaxes(title=axis_title("算术强度", "FLOP/字节"))
    _log_axis(fig.update_xaxes, [lo, hi], pad=1)
    _log_axis(fig.update_yaxes, ys, top_pad=2, title=axis_title("实际达到的计算速率", "GFLOP/s"))  # room for labels
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
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.11, subplot_titles=("解码吞吐", "一步解码的耗时"))
    color = POINT_STYLE["batch"][0]
    fig.add_scatter(x=B, y=[p.tokens_per_s for p in pts], mode="lines+markers", line=dict(color=color),
                    name="实测 token/s（B 条序列合计）", row=1, col=1)
    fig.add_scatter(x=B, y=[one.tokens_per_s * b / one.batch_size for b in B], mode="lines",
                    line=dict(color="#888", dash="dot"), name="理想：单步耗时不变时吞吐与 B 成正比", row=1, col=1)
    fig.add_scatter(x=B, y=[p.step_seconds * 1e3 for p in pts], mode="lines+markers", line=dict(color=color),
                    name="实测单步耗时", showlegend=False, row=1, col=2)
    s = sweep.at(selected)
    _mark(fig, selected, s.tokens_per_s, 1, 1, f"B={selected}")
    _mark(fig, selected, s.step_seconds * 1e3, 1, 2, f"B={selected}")
    fig.update_xaxes(type="log", dtick=math.log10(2), tickformat="d", title=axis_title("批次 B", "条序列"))
    _log_axis(fig.update_yaxes, [p.tokens_per_s for p in pts] + [one.tokens_per_s * b / one.batch_size for b in B],
              title=axis_title("吞吐", "token/s"), row=1, col=1)
    fig.update_yaxes(title=axis_title("单步耗时", "ms"), rangemode="tozero", row=1, col=2)
    return apply_template(fig, f"批处理解码：一步为 B 条序列各生成 1 个 token（每条序列的缓存里已有 {sweep.context_len} 个 "
                               f"token，{sweep.device}）", 400, legend_below=True)


# -- the GPU allocator -----------------------------------------------------------------------------------------
def allocator_figure(comparison) -> go.Figure:
    """Allocated and reserved bytes after each pass, growing vs preallocated cache (CUDA only).

    ``comparison``: :class:`kvlab.lessons.prefill_decode.AllocatorComparison` that ran.
    """
    traces = comparison.traces
    top = max(max(t.reserved + t.allocated) for t in traces.values())
    unit, scale = iec_unit(max(top, 1))
    titles = {"dynamic": "逐步拼接（dynamic）", "kv": "预分配（kv）"}
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=[titles.get(m, m) for m in traces])
    for col, t in enumerate(traces.values(), start=1):
        fig.add_scatter(x=t.lengths, y=[b / scale for b in t.reserved], mode="lines", line=dict(color=PALETTE[3]),
                        name="reserved：分配器向驱动要来的显存", showlegend=col == 1, row=1, col=col)
        fig.add_scatter(x=t.lengths, y=[b / scale for b in t.allocated], mode="lines", line=dict(color=PALETTE[0]),
                        name="allocated：张量真正占用的显存", showlegend=col == 1, row=1, col=col)
    fig.update_xaxes(title=axis_title("cache.length", "tokens"))
    fig.update_yaxes(title=axis_title("显存", unit), rangemode="tozero", row=1, col=1)
    return apply_template(fig, f"CUDA 缓存分配器：reserved 与 allocated 之差是保留着却没有张量在用的显存"
                               f"（{comparison.device}）", 400, legend_below=True)


# -- unequal lengths in one batch ----------------------------------------------------------------------------------
def padded_batch_figure(b) -> go.Figure:
    """The left-padded batch as its cache: one row per sequence, one column per cache slot (padding, prompt,
    generated tokens), and apart from the grid each sequence's last token, returned and never stored.

    ``b``: :class:`kvlab.lessons.prefill_decode.PaddedBatch`.
    """
    slots = stored_tokens(max(b.lengths), b.new_tokens)  # the cache's max_seq_len
    z = np.zeros((len(b.prompts), slots))
    text = [[""] * slots for _ in b.prompts]
    for row, (prompt, pad, new) in enumerate(zip(b.prompts, b.pad_lengths, b.batch_text)):
        z[row, pad:pad + len(prompt)] = 1
        z[row, pad + len(prompt):] = 2
        for j, ch in enumerate((prompt + new)[:slots - pad]):
            text[row][pad + j] = ch
    show_text = slots <= 70
    labels = [f"序列 {i + 1}（P = {n}）{'✓' if same else '✗'}" for i, (n, same) in
              enumerate(zip(b.lengths, b.same_as_alone))]
    scale = [[0, SLOT_COLORS["pad"]], [0.33, SLOT_COLORS["pad"]], [0.33, SLOT_COLORS["prompt"]],
             [0.67, SLOT_COLORS["prompt"]], [0.67, SLOT_COLORS["new"]], [1, SLOT_COLORS["new"]]]
    fig = new_figure("左侧补齐（left padding）：灰色 padding，蓝色提示词，橙色生成的 token；✓ = 与单独运行逐 token 相同",
                     height=max(260, 110 + 42 * len(b.prompts)), width=WIDE)
    fig.add_trace(go.Heatmap(z=z, x=list(range(slots)), y=labels, zmin=0, zmax=2, colorscale=scale, showscale=False,
                             xgap=1, ygap=3, text=text, texttemplate="%{text}" if show_text else None,
                             textfont=dict(size=11, color="#fff"),
                             hovertemplate="%{y}<br>第 %{x} 个槽位：%{text}<extra></extra>"))
    last_x = slots + 1  # one empty column apart from the cache
    fig.add_scatter(x=[last_x] * len(labels), y=labels, mode="markers+text" if show_text else "markers",
                    text=[new[-1] if new else "" for new in b.batch_text], textfont=dict(size=11, color="#fff"),
                    marker=dict(symbol="square", size=20, color=SLOT_COLORS["new"], opacity=0.55,
                                line=dict(width=1.5, color=SLOT_COLORS["new"])),
                    showlegend=False, hovertemplate="%{y}<br>最后生成的「%{text}」：返回、不存入缓存<extra></extra>")
    fig.add_annotation(x=last_x + 0.6, y=1, yref="paper", xanchor="right", yanchor="bottom", showarrow=False,
                       text="最后一列：返回、不存入缓存", font=dict(size=11, color=SLOT_COLORS["new"]))
    step = 5 if slots <= 60 else 10
    fig.update_xaxes(title=axis_title(f"每列 = 1 个缓存槽位，共 {slots} 个", "tokens"), range=[-0.5, last_x + 0.7],
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
                    line=dict(color="#999", dash="dash", width=2), name=f"按最长补齐分配：{b.cache_slots}")
    fig.add_scatter(x=[sizes[0], sizes[-1]], y=[b.used_slots] * 2, mode="lines", hoverinfo="skip",
                    line=dict(color=PALETTE[0], dash="dot", width=2), name=f"真正存 token 的：{b.used_slots}")
    paged = [b.paged_slots_at(k) for k in sizes]
    fig.add_scatter(x=sizes, y=paged, mode="lines", line=dict(color=PALETTE[2], width=2),
                    name="分页：每条序列占的块 × 块大小", hovertemplate="每块 %{x} 个 token：%{y} 个槽位<extra></extra>")
    fig.add_scatter(x=[b.block_size], y=[b.paged_slots], mode="markers+text", showlegend=False, hoverinfo="skip",
                    marker=dict(size=13, color="rgba(0,0,0,0)", line=dict(color="#000", width=2)),
                    text=[f"每块 {b.block_size}：{b.paged_slots} "], textposition="middle left")
    fig.update_xaxes(title=axis_title("分页的块大小", "tokens"), range=[0, sizes[-1] + 1])
    fig.update_yaxes(title=axis_title("缓存槽位", "tokens"), range=[0, 1.15 * max(*paged, b.cache_slots)])
    apply_template(fig, "分页占的槽位随块大小的变化（绿线低于灰色虚线时，分页比补齐省）", 380, legend_below=True)
    fig.update_layout(legend=dict(y=-0.38))  # below the x-axis title
    return fig


# -- FP16 and INT8 caches ----------------------------------------------------------------------------------------
def precision_figure(results: dict) -> go.Figure:
    """The largest logit error at each new position (log scale), against the two thresholds the text uses: 1 % of
    the logits' spread, and half the smallest best-vs-second gap (below it no greedy choice can change). The bytes
    are printed above the figure, not drawn again.

    ``results``: ``{mode: kvlab.lessons.prefill_decode.CachePrecision}``.
    """
    fig = new_figure("每个新 token 位置上 logits 的最大误差（对比 FP32 缓存）", height=400, width=WIDE)
    for m, r in results.items():
        if r.max_logit_error == 0:
            continue  # the reference itself: nothing to draw on a log axis
        fig.add_scatter(x=list(range(1, len(r.logit_error) + 1)), y=r.logit_error, mode="lines",
                        line=dict(color=PRECISION_COLORS.get(m, PALETTE[-1]), width=1.5),
                        name=f"{r.label}：最大 {r.max_logit_error:.2g}")
    first = next(iter(results.values()))
    n = len(first.logit_error)
    for value, text, dash in ((first.logit_spread / 100, "logits 跨度（中位数）的 1%", "dot"),
                              (first.reference_margin / 2,
                               "最大与第二大 logit 之差（最小处）的一半：误差都低于它，贪心选择就不会变", "dash")):
        fig.add_scatter(x=[1, n], y=[value, value], mode="lines", line=dict(color="#666", dash=dash, width=1.2),
                        name=text, hoverinfo="skip")
    fig.update_yaxes(type="log", dtick="D2", title=axis_title("最大 |Δlogit|", "logit"))
    fig.update_xaxes(title=axis_title("第几个新 token", "tokens"))
    return apply_template(fig, "FP16 / INT8 缓存引入的误差，逐个位置（本机实测）", 400, legend_below=True)
