"""Plot builders of chapter 3.4 (the LLaMA-7B estimate, real models, GPU budgets): pure functions, results in,
figures out. Byte counts come in exact; they are drawn in GiB (or on log axes labelled in IEC units). Titles, axes,
legends and hover text come from :data:`PLOTS` in the course's language when a figure is drawn."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import plotly.graph_objects as go

from ..memory import format_bytes, iec_unit
from ..phrases import Phrasebook
from .style import PALETTE, WIDE, axis_title, new_figure

if TYPE_CHECKING:  # the lesson's result types (the lesson imports this module)
    from ..lessons.memory_estimate import CacheCurve, ContextCurve, FitPlan

GIB = 2**30
CURVE_COLORS = [c for c in PALETTE if c != "#F0E442"]  # no yellow for thin lines on white
DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
WEIGHT_COLOR, CACHE_COLOR, FREE_COLOR, OVER_COLOR = PALETTE[0], PALETTE[1], "#d9d9d9", "#D55E00"
RESERVED_COLOR = "#f2f2f2"

# What the figures say, in both languages (every number a field; plotly's own %{...} placeholders are doubled).
PLOTS = Phrasebook("memory_estimate.plots", {
    "zh": {
        "curves.title": "KV Cache 随序列长度增长（批次 B = {B}，{dtype}）：◆ 为各模型发布时的上下文长度",
        "curves.name": "{model}：每个 token {size}",
        "curves.context": "{model}：上下文 {ctx:,} 个 token，{size}<extra></extra>",
        "curves.weights": "{label}：{size}",
        "curves.now": "当前：S = {S:,}",
        "axis.seq_len": "序列长度 S", "axis.tokens_log": "tokens，对数刻度", "axis.log": "对数刻度",
        "layers.title": "{model}：每一层存多少（S = {S:,}，共 {n} 层，合计 {total}）",
        "layers.global": "全局层：存全部 token", "layers.windowed": "滑动窗口层：最多存窗口内的 token",
        "layers.hover": "第 %{{x}} 层：%{{y:.3g}} {unit}<extra></extra>",
        "axis.layer": "层（从 0 开始）", "axis.layer_kv": "这一层的 K 和 V",
        "bar.weights": "权重", "bar.weights_assumed": "权重（假设的参数量）", "bar.free": "剩余",
        "bar.held_back": "预留 {share:.0%}", "bar.over": "放不下的 KV Cache",
        "bar.held_back_taken": "{held_back}（{reserved}），其中 {over} 被放不下的缓存占用",
        "bar.left": "剩余 {size}", "bar.short": "还差 {size}",
        "bar.title": "{gpu}（总 {total}，可用 {budget}）：权重 {weights} + KV Cache {cache}，{verdict}",
        "bar.memory": "显存", "bar.part": "{label} {size}", "bar.hover": "{label}：{size}<extra></extra>",
        "bar.hover_whole": "{label}<extra></extra>",
        "bar.usable": "可用上限（× {usable:g}）", "bar.total": "总显存",
        "context.title": "{model}，批次 B = {B:,}：KV Cache 随上下文增长，直到填满权重留下的空间",
        "context.cache": "KV Cache（{dtype}）",
        "context.room": "留给缓存的空间 {room}（可用 {budget} − 权重）",
        "context.weights": "权重（{dtype}）{size}",
        "context.released": "模型发布时的上下文 {ctx:,}", "context.no_release": "没有发布的上下文",
        "context.capped": "缓存封顶（滑动窗口）：任何长度都放得下", "context.not_one": "连 1 个 token 都放不下",
        "context.fills": "S = {S:,} 时填满",
        "context.fills_hover": "S = %{{x:,}}：留给缓存的空间用完<extra></extra>",
        "context.never_passes": "缓存封顶，始终比权重小",
        "context.passes": "S = {S:,} 起缓存比权重大", "context.passes_off": "S = {S:,} 起缓存比权重大（在图的右边之外）",
        "context.passes_hover": "S = %{{x:,}}：缓存 = 权重<extra></extra>",
        "context.now_fits": "当前：S = {S:,}，放得下", "context.now_short": "当前：S = {S:,}，放不下",
        "context.now_hover": "S = %{{x:,}}：KV Cache %{{y:.3g}} GiB<extra></extra>",
        "axis.context": "上下文长度 S", "kv_cache": "KV Cache",
    },
    "en": {
        "curves.title": "KV cache against sequence length (batch B = {B}, {dtype}): ◆ marks each model's released "
                        "context length",
        "curves.name": "{model}: {size} per token",
        "curves.context": "{model}: context of {ctx:,} tokens, {size}<extra></extra>",
        "curves.weights": "{label}: {size}",
        "curves.now": "Now: S = {S:,}",
        "axis.seq_len": "sequence length S", "axis.tokens_log": "tokens, log scale", "axis.log": "log scale",
        "layers.title": "{model}: what each layer stores (S = {S:,}, {n} layers, {total} in all)",
        "layers.global": "global layers: store every token", "layers.windowed": "sliding-window layers: store at most "
                                                                               "the tokens in the window",
        "layers.hover": "layer %{{x}}: %{{y:.3g}} {unit}<extra></extra>",
        "axis.layer": "layer (from 0)", "axis.layer_kv": "this layer's K and V",
        "bar.weights": "Weights", "bar.weights_assumed": "Weights (assumed parameter count)", "bar.free": "Free",
        "bar.held_back": "Held back {share:.0%}", "bar.over": "KV cache that does not fit",
        "bar.held_back_taken": "{held_back} ({reserved}), {over} of it taken by the overflow",
        "bar.left": "{size} left", "bar.short": "{size} short",
        "bar.title": "{gpu} ({total} in total, {budget} usable): weights {weights} + KV cache {cache}, {verdict}",
        "bar.memory": "memory", "bar.part": "{label} {size}", "bar.hover": "{label}: {size}<extra></extra>",
        "bar.hover_whole": "{label}<extra></extra>",
        "bar.usable": "usable limit (× {usable:g})", "bar.total": "total memory",
        "context.title": "{model}, batch B = {B:,}: the KV cache grows with the context until it fills the room the "
                         "weights leave",
        "context.cache": "KV cache ({dtype})",
        "context.room": "Room for the cache {room} (usable {budget} − weights)",
        "context.weights": "Weights ({dtype}) {size}",
        "context.released": "Released context of the model {ctx:,}", "context.no_release": "No released context",
        "context.capped": "Cache capped (sliding window): any length fits", "context.not_one": "Not even 1 token fits",
        "context.fills": "Full at S = {S:,}",
        "context.fills_hover": "S = %{{x:,}}: the room for the cache is used up<extra></extra>",
        "context.never_passes": "Cache capped, always smaller than the weights",
        "context.passes": "Cache larger than the weights from S = {S:,}",
        "context.passes_off": "Cache larger than the weights from S = {S:,} (past the right edge of the figure)",
        "context.passes_hover": "S = %{{x:,}}: cache = weights<extra></extra>",
        "context.now_fits": "Now: S = {S:,}, fits", "context.now_short": "Now: S = {S:,}, does not fit",
        "context.now_hover": "S = %{{x:,}}: KV cache %{{y:.3g}} GiB<extra></extra>",
        "axis.context": "context length S", "kv_cache": "KV cache",
    },
})
say = PLOTS.say


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
                        batch_size: int, dtype: str, weights: tuple[str, int] | None = None) -> go.Figure:
    """KV-cache bytes against sequence length for several models (log-log), each released model's context marked
    with a diamond, the selected model (a preset key) drawn thick with its current length marked. Thin lines get
    their own dash pattern, so a line that runs on top of another (Llama-3.1-405B over LLaMA-7B) leaves it visible;
    the legend gives each model's bytes per token. ``weights`` (label, bytes): the selected model's weights as a
    level line, so where its cache passes them shows, and a batch or dtype change moves the curves against it."""
    fig = new_figure(say("curves.title", B=batch_size, dtype=dtype), height=430, width=WIDE)
    lows, highs = [], []
    order = sorted(range(len(curves)), key=lambda i: curves[i].name != selected)  # the thick line first, below
    for i in order:
        c = curves[i]
        color = CURVE_COLORS[i % len(CURVE_COLORS)]
        thick = c.name == selected
        dash = "solid" if thick else DASHES[i % len(DASHES)]
        fig.add_scatter(x=list(c.seq_lens), y=list(c.bytes), mode="lines", legendgroup=c.name,
                        name=say("curves.name", model=c.label, size=format_bytes(c.per_token_bytes)),
                        line=dict(color=color, width=5 if thick else 2, dash=dash), opacity=0.55 if thick else 1,
                        hovertemplate=f"{c.label}<br>S = %{{x:,}}<extra></extra>")
        if c.context_length is not None:
            fig.add_scatter(x=[c.context_length], y=[c.context_bytes], mode="markers", legendgroup=c.name,
                            showlegend=False, marker=dict(symbol="diamond", size=10 if thick else 8, color=color),
                            hovertemplate=say("curves.context", model=c.label, ctx=c.context_length,
                                              size=format_bytes(c.context_bytes)))
        lows.append(min(c.bytes))
        highs.append(max(c.bytes))
    if weights is not None:
        label, n = weights
        fig.add_scatter(x=[curves[0].seq_lens[0], curves[0].seq_lens[-1]], y=[n, n], mode="lines",
                        name=say("curves.weights", label=label, size=format_bytes(n)),
                        line=dict(color="#555", dash="dot", width=2),
                        hovertemplate=say("curves.weights", label=label, size=format_bytes(n)) + "<extra></extra>")
        lows.append(n)
        highs.append(n)
    fig.add_scatter(x=[seq_len], y=[selected_bytes], mode="markers+text", name=say("curves.now", S=seq_len),
                    marker=dict(size=14, color="#000", symbol="circle-open", line=dict(width=3)),
                    text=[format_bytes(selected_bytes)], textposition="middle right")
    tickvals, ticktext = iec_log_ticks(min(lows), max(highs))
    fig.update_xaxes(type="log", title=axis_title(say("axis.seq_len"), say("axis.tokens_log")))
    fig.update_yaxes(type="log", title=axis_title(say("kv_cache"), say("axis.log")), tickvals=tickvals, ticktext=ticktext)
    fig.update_yaxes(title_standoff=12)
    fig.update_layout(legend=dict(x=1.02, y=1, xanchor="left", yanchor="top", font=dict(size=11)),
                      margin=dict(t=70, l=90, r=10))
    return fig


def layer_bytes_figure(model: str, layer_bytes: Sequence[int], windowed: Sequence[bool], seq_len: int) -> go.Figure:
    """One bar per layer: the bytes it keeps after ``seq_len`` tokens (windowed layers in a second colour)."""
    unit, size = iec_unit(max(layer_bytes))
    fig = new_figure(say("layers.title", model=model, S=seq_len, n=len(layer_bytes), total=format_bytes(sum(layer_bytes))),
                     height=270, width=WIDE)
    groups = [(say("layers.global"), False, PALETTE[0]), (say("layers.windowed"), True, PALETTE[2])]
    for label, is_windowed, color in groups:
        idx = [i for i, w in enumerate(windowed) if w == is_windowed]
        if idx:
            fig.add_bar(x=idx, y=[layer_bytes[i] / size for i in idx], name=label, marker_color=color,
                        hovertemplate=say("layers.hover", unit=unit))
    fig.update_xaxes(title=say("axis.layer"))
    fig.update_yaxes(title=axis_title(say("axis.layer_kv"), unit), rangemode="tozero")
    fig.update_layout(bargap=0.15, legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"),
                      margin=dict(t=80, b=45))
    return fig


def fit_bar_figure(plan: "FitPlan", gpu_label: str) -> go.Figure:
    """The card as one stacked bar: weights, cache, what is left of the usable part (or, past the usable line, the
    cache that does not fit), and the share held back; a dashed line at the usable limit, a dotted one at the total."""
    budget, total, weights, cache = plan.budget_bytes, plan.total_bytes, plan.weight_bytes, plan.cache_bytes
    fits_part = min(cache, budget - weights)  # the cache's part inside the usable budget
    parts = [(say("bar.weights_assumed" if plan.model.hypothetical else "bar.weights"), weights, WEIGHT_COLOR),
             (say("kv_cache"), fits_part, CACHE_COLOR)]
    whole = set()  # the parts whose label already gives their sizes (the legend and hover add none)
    held_back = say("bar.held_back", share=float(1 - plan.usable))
    if plan.fits:
        parts.append((say("bar.free"), budget - weights - cache, FREE_COLOR))
        parts.append((held_back, plan.reserved_bytes, RESERVED_COLOR))
    else:  # the missing cache runs past the usable line, into (and maybe past) the share held back
        missing = cache - fits_part
        parts.append((say("bar.over"), missing, OVER_COLOR))
        if missing < plan.reserved_bytes:
            # the band's label gives the whole share held back and the overflow drawn inside it, not the rest
            whole.add(len(parts))
            parts.append((say("bar.held_back_taken", held_back=held_back, reserved=format_bytes(plan.reserved_bytes),
                              over=format_bytes(missing)), plan.reserved_bytes - missing, RESERVED_COLOR))
    verdict = (say("bar.left", size=format_bytes(plan.free_bytes)) if plan.fits
               else say("bar.short", size=format_bytes(-plan.free_bytes)))
    fig = new_figure(say("bar.title", gpu=gpu_label, total=format_bytes(total), budget=format_bytes(budget),
                         weights=format_bytes(weights), cache=format_bytes(cache), verdict=verdict),
                     height=260, width=WIDE)
    for i, (label, n, color) in enumerate(parts):
        fig.add_bar(y=[say("bar.memory")], x=[n / GIB], orientation="h",
                    name=label if i in whole else say("bar.part", label=label, size=format_bytes(n)),
                    marker_color=color, marker_line=dict(color="#999", width=1),
                    hovertemplate=say("bar.hover_whole", label=label) if i in whole
                    else say("bar.hover", label=label, size=format_bytes(n)))
    fig.add_vline(x=budget / GIB, line=dict(color="#000", dash="dash", width=2))
    fig.add_annotation(x=budget / GIB, y=1, yref="paper", yanchor="bottom", xanchor="right", showarrow=False,
                       text=say("bar.usable", usable=float(plan.usable)))
    held = plan.reserved_bytes > 0  # always drawn, hidden without a share held back (a figure redrawn in place keeps shapes)
    fig.add_vline(x=total / GIB, line=dict(color="#666", dash="dot", width=2), visible=held)
    fig.add_annotation(x=total / GIB, y=1, yref="paper", yanchor="bottom", xanchor="left", showarrow=False,
                       text=say("bar.total"), font=dict(color="#666"), visible=held)
    fig.update_layout(barmode="stack", legend=dict(orientation="h", x=0, y=-0.75, traceorder="normal"),
                      margin=dict(t=70, b=110, l=60), height=260)
    fig.update_xaxes(title=axis_title(say("bar.memory"), "GiB"), rangemode="tozero")
    return fig


def fit_context_figure(plan: "FitPlan", curve: "ContextCurve", model_label: str | None = None) -> go.Figure:
    """The KV cache against the context length S (linear axes, the plan's batch and dtypes) under two levels: the
    room the weights leave in the usable memory (◆ where the cache fills it; the cache past it in red) and the
    weights themselves (● where the cache grows past them, drawn when that happens on the figure); the released
    context and the current S. Always the same eight traces, empty where a mark does not apply, so a figure redrawn
    in place never keeps a stale one. ``model_label``: the model's name as shown (default its preset's label)."""
    model_label = plan.model.label if model_label is None else model_label
    weights, room = plan.weight_bytes, plan.room_bytes
    xs, end = list(curve.seq_lens), curve.seq_lens[-1]
    over = curve.overtakes_weights
    passes_here = over is not None and over <= end
    top = max(room, *curve.cache_bytes, weights if passes_here else 0) / GIB * 1.08 or 1
    fig = new_figure(say("context.title", model=model_label, B=plan.batch_size), height=420, width=WIDE)
    stack = [(say("context.cache", dtype=plan.cache_dtype), [min(c, room) for c in curve.cache_bytes], CACHE_COLOR),
             (say("bar.over"), [max(0, c - room) for c in curve.cache_bytes], OVER_COLOR)]
    for name, ys, color in stack:
        fig.add_scatter(x=xs, y=[y / GIB for y in ys], mode="lines", stackgroup="cache", name=name,
                        line=dict(color=color, width=1), fillcolor=color, hoverinfo="skip")
    fig.add_scatter(x=[0, end], y=[room / GIB] * 2, mode="lines", line=dict(color="#000", dash="dash", width=2),
                    name=say("context.room", room=format_bytes(room), budget=format_bytes(plan.budget_bytes)),
                    hoverinfo="skip")
    fig.add_scatter(x=[0, end] if passes_here else [], y=[weights / GIB] * 2 if passes_here else [], mode="lines",
                    line=dict(color=WEIGHT_COLOR, dash="dot", width=2), visible=passes_here, hoverinfo="skip",
                    name=say("context.weights", dtype=plan.weight_dtype, size=format_bytes(weights)))
    ctx = curve.context_length
    fig.add_scatter(x=[ctx, ctx] if ctx else [], y=[0, top] if ctx else [], mode="lines", hoverinfo="skip",
                    line=dict(color=PALETTE[3], dash="dot", width=2), visible=bool(ctx),
                    name=say("context.released", ctx=ctx) if ctx else say("context.no_release"))
    longest = plan.longest_context
    if longest is None:
        runs_out, at = say("context.capped"), []
    elif longest == 0:
        runs_out, at = say("context.not_one"), [0]
    else:
        runs_out, at = say("context.fills", S=longest), [longest]
    fig.add_scatter(x=at, y=[room / GIB] * len(at), mode="markers", name=runs_out,
                    marker=dict(symbol="diamond", size=13, color=OVER_COLOR, line=dict(color="#000", width=1)),
                    hovertemplate=say("context.fills_hover"))
    if over is None:
        passes = say("context.never_passes")
    else:
        passes = say("context.passes" if passes_here else "context.passes_off", S=over)
    fig.add_scatter(x=[over] if passes_here else [], y=[weights / GIB] if passes_here else [], mode="markers",
                    name=passes, hovertemplate=say("context.passes_hover"),
                    marker=dict(symbol="circle", size=11, color=WEIGHT_COLOR, line=dict(color="#000", width=1)))
    fig.add_scatter(x=[plan.seq_len], y=[plan.cache_bytes / GIB], mode="markers",
                    name=say("context.now_fits" if plan.fits else "context.now_short", S=plan.seq_len),
                    marker=dict(size=15, color=PALETTE[2] if plan.fits else OVER_COLOR, symbol="x",
                                line=dict(color="#000", width=1)),
                    hovertemplate=say("context.now_hover"))
    fig.update_xaxes(title=axis_title(say("axis.context"), "tokens"), range=[0, end])
    fig.update_yaxes(title=axis_title(say("kv_cache"), "GiB"), range=[0, top])
    fig.update_layout(legend=dict(orientation="h", x=0, y=-0.36, font=dict(size=11)), margin=dict(b=160, l=60))
    return fig
