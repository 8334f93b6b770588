"""Plot builders of chapter 3.2 (the cache's storage and shape): pure functions, parameters in, figures out."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..memory import DTYPE_BITS, format_bytes, iec_unit, kv_cache_bytes
from .style import MODE_COLORS, MODE_LABELS, PALETTE, WIDE, apply_template, axis_title, new_figure

FILLED, EMPTY, PADDING, TAIL = PALETTE[0], "#e4e4e4", "#d0d0d0", "#F3C77A"  # stored / allocated but empty
MAX_SEPARATORS = 96  # layer or head boundaries drawn one by one up to this many
MAX_BLOCKS = 800  # pages drawn one by one up to this many
GROWTH_DASH = {"transformers:dynamic": "dot", "transformers:static": "dot"}


def _rects(boxes) -> tuple[list, list]:
    """Rectangles ``(x0, x1, y0, y1)`` as one polygon list (None between them) for a ``fill="toself"`` trace."""
    xs, ys = [], []
    for x0, x1, y0, y1 in boxes:
        xs += [x0, x1, x1, x0, x0, None]
        ys += [y0, y0, y1, y1, y0, None]
    return xs, ys


def _box(fig, boxes, name, fill, line=None, row=None, col=None, legend=True, dash=None, group=None, hover=None):
    xs, ys = _rects(boxes)
    fig.add_scatter(x=xs, y=ys, fill="toself" if fill else None, fillcolor=fill, mode="lines", name=name,
                    line=dict(color=line or fill or "#000", width=1 if line else 0, dash=dash),
                    legendgroup=group or name, showlegend=legend, hoverinfo="text" if hover else "skip",
                    hoveron="fills" if hover else None, text=hover, row=row, col=col)


def _lines_at(ys, x0, x1) -> tuple[list, list]:
    """Horizontal segments at each ``y`` from ``x0`` to ``x1``, as one None-separated line."""
    xs, out = [], []
    for y in ys:
        xs += [x0, x1, None]
        out += [y, y, None]
    return xs, out


def _tensor_sheet(fig, col, S, filled, height, bands, band_height, reference, top, scale, show_legend,
                  band_name):
    """One sheet of the cache, ``S`` slots wide and ``height`` bytes per token tall, split into ``bands``
    (layers or heads) when they are tall enough to see; ``reference`` (S, height, label) is outlined dashed."""
    h = height / scale
    if filled < S:
        _box(fig, [(filled, S, 0, h)], "已分配、还空着", EMPTY, row=1, col=col, legend=show_legend, group="empty",
             hover=f"还空着的 {S - filled:,} 个位置")
    if filled:
        _box(fig, [(0, filled, 0, h)], "已存的 token", FILLED, row=1, col=col, legend=show_legend, group="filled",
             hover=f"已存 {filled:,} 个 token")
    if 1 < bands <= MAX_SEPARATORS and band_height / top >= 1 / 60:  # at least ~4 px apart
        xs, ys = _lines_at([i * band_height / scale for i in range(1, bands)], 0, S)
        fig.add_scatter(x=xs, y=ys, mode="lines", line=dict(color="white", width=1), hoverinfo="skip",
                        name=band_name, showlegend=False, row=1, col=col)
    _box(fig, [(0, S, 0, h)], "当前的张量", None, line="#333", row=1, col=col, legend=False)
    if reference:
        ref_S, ref_height, label = reference
        _box(fig, [(0, ref_S, 0, ref_height / scale)], label, None, line="#000", dash="dash", row=1, col=col,
             legend=show_legend, group="reference")


def _point_at_if_small(fig, col, x, y, x_top, y_top, text):
    """An arrow to a rectangle's corner ``(x, y)`` when it covers under 2 % of the axes (easy to miss)."""
    if x * y < 0.02 * x_top * y_top:
        axis = "" if col == 1 else str(col)
        fig.add_annotation(x=x, y=y, xref=f"x{axis}", yref=f"y{axis}", text=text, showarrow=True, arrowhead=2,
                           ax=60, ay=-50, font=dict(color="#333"))


def cache_tensor_figure(L: int, B: int, H: int, S: int, D: int, filled: int, dtype: str = "fp16",
                        reference: tuple[int, int, int, int, str] | None = None) -> go.Figure:
    """The K tensor of a cache (V is its twin) drawn to scale: S slots wide, every layer's H heads of D numbers
    stacked upwards in bytes (so the area is the bytes), the first ``filled`` slots coloured; on the right,
    layer 0 enlarged. ``reference`` (L, H, D, S, dtype) is outlined dashed in both, at the same scale.
    """
    per_number = DTYPE_BITS[dtype] / 8  # bytes per stored number
    layer_h, total_h = H * D * per_number, L * H * D * per_number  # bytes per token: one layer, all layers
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        f"K（V 同形，另存一份）：{L} 层叠起来" + (f"，共 {B:,} 条序列" if B > 1 else "，1 条序列"),
        f"放大第 0 层：{H} 个 KV 头，每个头 {D} 个数 × {per_number:g} 字节"))
    ref_all = ref_layer = None
    width, top_all, top_layer = S, total_h, layer_h
    if reference:
        rL, rH, rD, rS, rdtype = reference
        r_layer = rH * rD * DTYPE_BITS[rdtype] / 8
        label = f"虚线：原文示例 L={rL}、H={rH}、D={rD}、S={rS:,}、{rdtype}"
        ref_all, ref_layer = (rS, rL * r_layer, label), (rS, r_layer, label)
        width, top_all, top_layer = max(S, rS), max(total_h, rL * r_layer), max(layer_h, r_layer)
    unit_a, scale_a = iec_unit(top_all)
    unit_b, scale_b = iec_unit(top_layer)
    dx, dy = 0.025 * width, 0.035 * top_all / scale_a
    shown = min(B - 1, 3)  # the other sequences: sheets of the same size behind the first
    if shown:
        _box(fig, [(k * dx, S + k * dx, k * dy, total_h / scale_a + k * dy) for k in range(shown, 0, -1)],
             f"另外 {B - 1:,} 条序列（同样大小）", "#f4f4f4", line="#888", row=1, col=1, group="batch")
    _tensor_sheet(fig, 1, S, filled, total_h, L, layer_h, ref_all, top_all, scale_a, True, "层与层的分界")
    _box(fig, [(0, S, 0, layer_h / scale_a)], "第 0 层（右图放大）", None, line=PALETTE[1], row=1, col=1,
         group="layer0")
    _tensor_sheet(fig, 2, S, filled, layer_h, H, D * per_number, ref_layer, top_layer, scale_b, False,
                  "头与头的分界")
    _box(fig, [(0, S, 0, layer_h / scale_b)], "第 0 层（右图放大）", None, line=PALETTE[1], row=1, col=2,
         legend=False, group="layer0")
    x_top = (width + shown * dx) * 1.03
    y_top = (top_all / scale_a + shown * dy) * 1.05
    _point_at_if_small(fig, 1, S, total_h / scale_a, x_top, y_top, "当前的张量")
    _point_at_if_small(fig, 2, S, layer_h / scale_b, x_top, top_layer / scale_b * 1.05, "当前的第 0 层")
    fig.update_xaxes(title=axis_title("序列位置", "tokens"), range=[0, x_top])
    fig.update_yaxes(title=axis_title("每个 token 的 K，所有层", unit_a), range=[0, y_top], row=1, col=1)
    fig.update_yaxes(title=axis_title("每个 token 的 K，第 0 层", unit_b), range=[0, top_layer / scale_b * 1.05],
                     row=1, col=2)
    total = kv_cache_bytes(L, H, D, S, B, dtype)
    used = kv_cache_bytes(L, H, D, filled, B, dtype) if filled else 0
    apply_template(fig, f"KV Cache 张量（L, B, H, S, D）=（{L}, {B}, {H}, {S}, {D}），{dtype}："
                        f"已用 {format_bytes(used)} / 共 {format_bytes(total)}", 440, legend_below=True)
    fig.update_layout(legend=dict(y=-0.22))
    return fig


def memory_vs_seq_figure(L: int, B: int, H: int, D: int, S: int, dtype: str = "fp16",
                         compare_dtypes=("fp32", "fp16", "int8")) -> go.Figure:
    """Cache bytes against sequence length for a few dtypes, with the chosen S marked."""
    top = max(S * 2, 16)
    xs = np.unique(np.linspace(1, top, 200).astype(int))
    fig = new_figure(f"KV Cache 的大小随序列长度线性增长（L={L}，B={B}，H={H}，D={D}）", height=360, width=WIDE)
    unit, scale = iec_unit(kv_cache_bytes(L, H, D, top, B, "fp32"))
    for i, dt in enumerate(dict.fromkeys((*compare_dtypes, dtype))):
        ys = [kv_cache_bytes(L, H, D, int(x), B, dt) / scale for x in xs]
        fig.add_scatter(x=xs, y=ys, mode="lines", name=dt, line=dict(color=PALETTE[i % len(PALETTE)],
                                                                       width=3 if dt == dtype else 1.5))
    fig.add_scatter(x=[S], y=[kv_cache_bytes(L, H, D, S, B, dtype) / scale], mode="markers+text",
                    marker=dict(size=11, color=PALETTE[3]), text=[format_bytes(kv_cache_bytes(L, H, D, S, B, dtype))],
                    textposition="top left", name=f"当前 S={S:,}，{dtype}")
    fig.update_xaxes(title=axis_title("序列长度 S", "tokens"))
    fig.update_yaxes(title=axis_title("KV Cache", unit), rangemode="tozero")
    return fig


def cache_growth_figure(runs: dict) -> go.Figure:
    """Preallocated vs concatenating caches, kvlab's and transformers': how many K tensors layer 0 went through
    (seen by address), the bytes kvlab copied (counted), and the time of each pass.

    ``runs``: ``{name: kvlab.lessons.storage.CacheGrowth}``; names are kvlab modes or "transformers:...".
    """
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08, subplot_titles=(
        "第 0 层的 K 用过几块存储<br>（data_ptr 变一次算一块）", "累计写入缓存的字节<br>（kvlab 自己计数）",
        "每次前向的耗时<br>（前后 15 次的中位数）"))
    for name, r in runs.items():
        style = dict(color=MODE_COLORS.get(name, "#000"), dash=GROWTH_DASH.get(name))
        label = MODE_LABELS.get(name, name)
        fig.add_scatter(x=r.t, y=r.layer0_k_tensors, name=label, line=style, legendgroup=name, row=1, col=1)
        if r.bytes_copied is not None:
            fig.add_scatter(x=r.t, y=[b / 2**20 for b in r.bytes_copied], name=label, line=style,
                            legendgroup=name, showlegend=False, row=1, col=2)
        fig.add_scatter(x=r.t, y=r.smoothed_ms(), name=label, line=dict(style, width=1.5), legendgroup=name,
                        showlegend=False, row=1, col=3)
    fig.update_xaxes(title=axis_title("缓存里的 token", "个"))
    fig.update_yaxes(title=axis_title("存储块数", "块"), rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title=axis_title("写入量", "MiB"), row=1, col=2)
    fig.update_yaxes(title=axis_title("耗时", "ms"), rangemode="tozero", row=1, col=3)
    return apply_template(fig, "预分配与逐步拼接：同一份权重、同一串 token", 400, legend_below=True)


def padding_figure(waste) -> go.Figure:
    """One batch stored two ways (``kvlab.lessons.storage.PaddingWaste``): padded to the longest sequence (left)
    and in pages of ``block_size`` slots (right), on the same scale; the unused tail of each last page shown."""
    lengths, bs = waste.lengths, waste.block_size
    rows = [f"序列 {i + 1}（{n:,}）" for i, n in enumerate(lengths)]
    paged_rows = [-(-n // bs) * bs for n in lengths]
    width = max(waste.max_len, *paged_rows)
    drawn_one_by_one = sum(waste.blocks_per_sequence) <= MAX_BLOCKS
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04, subplot_titles=(
        f"按最长者预分配：{waste.batch_size} × {waste.max_len:,} 个槽位，浪费 {waste.waste_fraction:.1%}",
        f"分页：每块 {bs} 个 token，共 {sum(waste.blocks_per_sequence):,} 块，浪费 {waste.paged_waste_fraction:.1%}"
        + ("" if drawn_one_by_one else "<br>（块太多，不逐块画出）")))
    bar = 0.34  # half the height of a row's bar
    _box(fig, [(0, n, i - bar, i + bar) for i, n in enumerate(lengths)], "真实 token", FILLED, row=1, col=1,
         group="used")
    _box(fig, [(n, waste.max_len, i - bar, i + bar) for i, n in enumerate(lengths) if n < waste.max_len],
         "padding（空着的槽位）", PADDING, row=1, col=1, group="padding")
    used, tails, outlines = [], [], []
    for i, n in enumerate(lengths):
        if drawn_one_by_one:  # each page apart, a small gap between pages
            pages = [(s, s + bs) for s in range(0, paged_rows[i], bs)]
            gap = min(0.1 * bs, 0.004 * width)
        else:
            pages, gap = [(0, paged_rows[i])], 0.0
        for start, end in pages:
            outlines.append((start + gap, end - gap, i - bar, i + bar))
            used.append((start + gap, min(end - gap, n), i - bar, i + bar))
        if paged_rows[i] > n:
            tails.append((n, paged_rows[i] - gap, i - bar, i + bar))
    _box(fig, used, "真实 token", FILLED, row=1, col=2, legend=False, group="used")
    if tails:
        _box(fig, tails, "每条序列最后一块没用完的部分", TAIL, row=1, col=2, group="tail")
    _box(fig, outlines, "一个块", None, line="#333", row=1, col=2, group="block")
    fig.update_xaxes(title=axis_title("缓存槽位", "tokens"), range=[0, width * 1.01])
    fig.update_yaxes(tickvals=list(range(len(lengths))), ticktext=rows, autorange="reversed", automargin=True,
                     row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=2)
    plot_height = len(lengths) * max(10, min(30, 600 // len(lengths))) + 40
    apply_template(fig, f"同一批 {waste.batch_size} 条序列的两种存法", plot_height + 175, legend_below=True)
    fig.update_layout(legend=dict(y=-90 / plot_height))  # under the x-axis titles
    return fig
