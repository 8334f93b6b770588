"""Plot builders of chapter 3.4 (the LLaMA-7B estimate, real models, GPU budgets): pure functions, results in,
figures out. Byte counts come in exact; they are drawn in GiB (or on log axes labelled in IEC units)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import plotly.graph_objects as go

from ..memory import format_bytes, iec_unit
from .style import PALETTE, WIDE, axis_title, new_figure

if TYPE_CHECKING:  # the lesson's result types (the lesson imports this module)
    from ..lessons.memory_estimate import CacheCurve, FitPlan

GIB = 2**30
CURVE_COLORS = [c for c in PALETTE if c != "#F0E442"]  # no yellow for thin lines on white
DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
WEIGHT_COLOR, CACHE_COLOR, FREE_COLOR, OVER_COLOR = PALETTE[0], PALETTE[1], "#d9d9d9", "#D55E00"
RESERVED_COLOR = "#f2f2f2"


def iec_log_ticks(low: float, high: float) -> tuple[list[int], list[str]]:
    """Tick positions at 1, 32, 1024, 32768 ... bytes between ``low`` and ``high``, labelled ``"32 MiB"``."""
    vals, texts = [], []
    v = 1
    while v <= high * 32:
        if v >= low / 32:
            unit, size = iec_unit(v)
            vals.append(v)
            texts.append(f"{v // size} {unit}")
        v *= 32
    return vals, texts


def cache_curves_figure(curves: Sequence["CacheCurve"], selected: str, seq_len: int, selected_bytes: int,
                        batch_size: int, dtype: str) -> go.Figure:
    """KV-cache bytes against sequence length for several models (log-log), each released model's context marked
    with a diamond, the selected model (a preset key) drawn thick with its current length marked. Thin lines get
    their own dash pattern, so a line that runs on top of another (Llama-3.1-405B over LLaMA-7B) leaves it visible;
    the legend gives each model's bytes per token."""
    fig = new_figure(f"KV Cache 随序列长度增长（批次 B = {batch_size}，{dtype}）：◆ 为各模型发布时的上下文长度",
                     height=430, width=WIDE)
    lows, highs = [], []
    order = sorted(range(len(curves)), key=lambda i: curves[i].name != selected)  # the thick line first, below
    for i in order:
        c = curves[i]
        color = CURVE_COLORS[i % len(CURVE_COLORS)]
        thick = c.name == selected
        dash = "solid" if thick else DASHES[i % len(DASHES)]
        fig.add_scatter(x=list(c.seq_lens), y=list(c.bytes), mode="lines", legendgroup=c.name,
                        name=f"{c.label}：每个 token {format_bytes(c.per_token_bytes)}",
                        line=dict(color=color, width=5 if thick else 2, dash=dash), opacity=0.55 if thick else 1,
                        hovertemplate=f"{c.label}<br>S = %{{x:,}}<extra></extra>")
        if c.context_length is not None:
            fig.add_scatter(x=[c.context_length], y=[c.context_bytes], mode="markers", legendgroup=c.name,
                            showlegend=False, marker=dict(symbol="diamond", size=10 if thick else 8, color=color),
                            hovertemplate=f"{c.label}：上下文 {c.context_length:,} 个 token，"
                                          f"{format_bytes(c.context_bytes)}<extra></extra>")
        lows.append(min(c.bytes))
        highs.append(max(c.bytes))
    fig.add_scatter(x=[seq_len], y=[selected_bytes], mode="markers+text", name=f"当前：S = {seq_len:,}",
                    marker=dict(size=14, color="#000", symbol="circle-open", line=dict(width=3)),
                    text=[format_bytes(selected_bytes)], textposition="middle right")
    tickvals, ticktext = iec_log_ticks(min(lows), max(highs))
    fig.update_xaxes(type="log", title=axis_title("序列长度 S", "tokens，对数刻度"))
    fig.update_yaxes(type="log", title=axis_title("KV Cache", "对数刻度"), tickvals=tickvals, ticktext=ticktext)
    fig.update_yaxes(title_standoff=12)
    fig.update_layout(legend=dict(x=1.02, y=1, xanchor="left", yanchor="top", font=dict(size=11)),
                      margin=dict(t=70, l=90, r=10))
    return fig


def layer_bytes_figure(model: str, layer_bytes: Sequence[int], windowed: Sequence[bool], seq_len: int) -> go.Figure:
    """One bar per layer: the bytes it keeps after ``seq_len`` tokens (windowed layers in a second colour)."""
    unit, size = iec_unit(max(layer_bytes))
    fig = new_figure(f"{model}：每一层存多少（S = {seq_len:,}，共 {len(layer_bytes)} 层，"
                     f"合计 {format_bytes(sum(layer_bytes))}）", height=270, width=WIDE)
    groups = [("全局层：存全部 token", False, PALETTE[0]), ("滑动窗口层：最多存窗口内的 token", True, PALETTE[2])]
    for label, is_windowed, color in groups:
        idx = [i for i, w in enumerate(windowed) if w == is_windowed]
        if idx:
            fig.add_bar(x=idx, y=[layer_bytes[i] / size for i in idx], name=label, marker_color=color,
                        hovertemplate="第 %{x} 层：%{y:.3g} " + unit + "<extra></extra>")
    fig.update_xaxes(title="层（从 0 开始）")
    fig.update_yaxes(title=axis_title("这一层的 K 和 V", unit), rangemode="tozero")
    fig.update_layout(bargap=0.15, legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"),
                      margin=dict(t=80, b=45))
    return fig


def fit_bar_figure(plan: "FitPlan", gpu_label: str) -> go.Figure:
    """The card as one stacked bar: weights, cache, what is left of the usable part (or, past the usable line, the
    cache that does not fit), and the share held back; a dashed line at the usable limit, a dotted one at the total."""
    budget, total, weights, cache = plan.budget_bytes, plan.total_bytes, plan.weight_bytes, plan.cache_bytes
    fits_part = min(cache, budget - weights)  # the cache's part inside the usable budget
    assumed = "（假设的参数量）" if plan.model.hypothetical else ""
    parts = [(f"权重{assumed}", weights, WEIGHT_COLOR), ("KV Cache", fits_part, CACHE_COLOR)]
    held_back = f"预留 {float(1 - plan.usable):.0%}"
    if plan.fits:
        parts.append(("剩余", budget - weights - cache, FREE_COLOR))
        parts.append((held_back, plan.reserved_bytes, RESERVED_COLOR))
    else:  # the missing cache runs past the usable line, into (and maybe past) the share held back
        missing = cache - fits_part
        parts.append(("放不下的 KV Cache", missing, OVER_COLOR))
        if missing < plan.reserved_bytes:
            parts.append((f"{held_back}（未被占用的部分）", plan.reserved_bytes - missing, RESERVED_COLOR))
    verdict = f"剩余 {format_bytes(plan.free_bytes)}" if plan.fits else f"还差 {format_bytes(-plan.free_bytes)}"
    fig = new_figure(f"{gpu_label}（总 {format_bytes(total)}，可用 {format_bytes(budget)}）：权重 {format_bytes(weights)}"
                     f" + KV Cache {format_bytes(cache)}，{verdict}", height=260, width=WIDE)
    for label, n, color in parts:
        fig.add_bar(y=["显存"], x=[n / GIB], orientation="h", name=f"{label} {format_bytes(n)}", marker_color=color,
                    marker_line=dict(color="#999", width=1), hovertemplate=f"{label}：{format_bytes(n)}<extra></extra>")
    fig.add_vline(x=budget / GIB, line=dict(color="#000", dash="dash", width=2))
    fig.add_annotation(x=budget / GIB, y=1, yref="paper", yanchor="bottom", xanchor="right", showarrow=False,
                       text=f"可用上限（× {float(plan.usable):g}）")
    held = plan.reserved_bytes > 0  # always drawn, hidden without a share held back (see fit_tradeoff_figure)
    fig.add_vline(x=total / GIB, line=dict(color="#666", dash="dot", width=2), visible=held)
    fig.add_annotation(x=total / GIB, y=1, yref="paper", yanchor="bottom", xanchor="left", showarrow=False,
                       text="总显存", font=dict(color="#666"), visible=held)
    fig.update_layout(barmode="stack", legend=dict(orientation="h", x=0, y=-0.75, traceorder="normal"),
                      margin=dict(t=70, b=110, l=60), height=260)
    fig.update_xaxes(title=axis_title("显存", "GiB"), rangemode="tozero")
    return fig


def fit_tradeoff_figure(points: Sequence[tuple[int, int | None]], context_length: int | None, batch_size: int,
                        seq_len: int, fits: bool, model: str) -> go.Figure:
    """Longest context that fits against batch size (log-log): every point under the curve fits. The x axis always
    starts at B = 1; batches whose cache stops growing (sliding windows) before it fills the room are a shaded
    band, since any context fits there. ``context_length`` None: no released context to draw (hypothetical)."""
    fig = new_figure(f"{model}：批次越大，能放下的上下文越短（曲线下方都放得下）", height=330, width=WIDE)
    bounded = [(b, s) for b, s in points if s]
    if bounded:
        fig.add_scatter(x=[b for b, _ in bounded], y=[s for _, s in bounded], mode="lines+markers",
                        name="放得下的最长上下文", line=dict(color=PALETTE[0], width=3),
                        hovertemplate="B = %{x:,}：最长 %{y:,} 个 token<extra></extra>")
    batches = [b for b, _ in points] + [batch_size]
    x_range = [math.log10(min(1, *batches)) - 0.1, math.log10(max(batches)) + 0.1]  # axis ranges: log10 units
    # The band and the context line are always there, hidden when they do not apply: a widget that redraws this
    # figure in place keeps shapes the new layout no longer has, but follows changes to the ones it has.
    unbounded = [b for b, s in points if s is None]
    last = max(unbounded, default=0)
    later = [b for b, _ in points if b > last]
    edge = math.sqrt(last * later[0]) if unbounded and later else 10 ** x_range[1]  # halfway to the next batch
    # shapes on a log axis take data values (annotations and axis ranges take log10)
    fig.add_vrect(x0=10 ** x_range[0], x1=edge, fillcolor=PALETTE[2], opacity=0.15, line_width=0,
                  visible=bool(unbounded))
    if unbounded:
        fig.add_scatter(x=unbounded, y=[None] * len(unbounded), mode="markers", showlegend=True,
                        name=f"B ≤ {last:,}：缓存封顶（滑动窗口），任何上下文都放得下",
                        marker=dict(symbol="square", size=12, color=PALETTE[2], opacity=0.4))
    shown = context_length is not None
    fig.add_hline(y=context_length if shown else 1, line=dict(color=PALETTE[3], dash="dot"), visible=shown)
    fig.add_annotation(x=1, xref="paper", y=math.log10(context_length) if shown else 0, yref="y", xanchor="right",
                       yanchor="bottom", showarrow=False, visible=shown, font=dict(color=PALETTE[3]),
                       text=f"模型发布时的上下文 {context_length:,}" if shown else "")
    fig.add_scatter(x=[batch_size], y=[seq_len], mode="markers", name=f"当前（B = {batch_size:,}，S = {seq_len:,}）",
                    marker=dict(size=14, color=PALETTE[2] if fits else OVER_COLOR, symbol="x"))
    fig.update_xaxes(type="log", title=axis_title("批次 B", "条序列，对数刻度"), range=x_range)
    fig.update_yaxes(type="log", title=axis_title("上下文长度", "tokens，对数刻度"), title_standoff=12)
    fig.update_layout(legend=dict(orientation="h", x=0, y=-0.3), margin=dict(b=90, l=90))
    return fig

