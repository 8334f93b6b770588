"""Plot builders of chapter 3.2 (the cache's storage and shape): pure functions, parameters in, figures out."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..memory import format_bytes, iec_unit, kv_cache_bytes
from .style import HEATMAP_SCALE, MODE_COLORS, MODE_LABELS, PALETTE, WIDE, apply_template, axis_title, new_figure


def cache_grid_figure(L: int, B: int, H: int, S: int, D: int, filled: int | None = None, dtype: str = "fp16"
                      ) -> go.Figure:
    """The 5-D cache (L, B, H, S, D) drawn as an L x H grid of S x D blocks, shaded by how full each block is."""
    filled = S if filled is None else filled
    frac = filled / S
    z = np.full((L, H), frac)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.62, 0.38], horizontal_spacing=0.1, subplot_titles=(
        f"K（V 与之同形，各一份）：{L} 层 × {H} 个头<br>每块 = 一个 S×D 矩阵" + (f"，共 B={B} 份" if B > 1 else ""),
        f"放大其中一块<br>S={S} 行 × D={D} 列",
    ))
    fig.add_trace(go.Heatmap(z=z, x=list(range(H)), y=list(range(L)), zmin=0, zmax=1, colorscale=HEATMAP_SCALE,
                             xgap=1 if H <= 64 else 0, ygap=1 if L <= 64 else 0, showscale=False,
                             hovertemplate="层 %{y}，头 %{x}<br>已填 %{z:.0%}<extra></extra>"), row=1, col=1)
    rows = min(S, 64)
    block = np.zeros((rows, 1))
    block[: max(0, round(rows * frac))] = 1
    fig.add_trace(go.Heatmap(z=block, zmin=0, zmax=1, colorscale=HEATMAP_SCALE, showscale=False,
                             hovertemplate="token 行 %{y}<extra></extra>"), row=1, col=2)
    fig.update_yaxes(title="层 L", autorange="reversed", row=1, col=1)
    fig.update_xaxes(title="头 H", row=1, col=1)
    fig.update_yaxes(title=f"token（已存 {filled:,} / {S:,}）", autorange="reversed", showticklabels=False, row=1, col=2)
    fig.update_xaxes(title=f"D = {D} 维", showticklabels=False, row=1, col=2)
    total = kv_cache_bytes(L, H, D, S, B, dtype)
    used = kv_cache_bytes(L, H, D, filled, B, dtype) if filled else 0
    return apply_template(fig, f"KV Cache 张量 (L,B,H,S,D) = ({L},{B},{H},{S},{D})，{dtype}："
                                f"已用 {format_bytes(used)} / 共 {format_bytes(total)}", 420)


def memory_vs_seq_figure(L: int, B: int, H: int, D: int, S: int, dtype: str = "fp16",
                         compare_dtypes=("fp32", "fp16", "int8")) -> go.Figure:
    """Cache bytes against sequence length for a few dtypes, with the chosen S marked."""
    top = max(S * 2, 16)
    xs = np.unique(np.linspace(1, top, 200).astype(int))
    fig = new_figure(f"显存占用随序列长度线性增长（L={L}, B={B}, H={H}, D={D}）", height=360, width=WIDE)
    unit, scale = iec_unit(kv_cache_bytes(L, H, D, top, B, "fp32"))
    for i, dt in enumerate(dict.fromkeys((*compare_dtypes, dtype))):
        ys = [kv_cache_bytes(L, H, D, int(x), B, dt) / scale for x in xs]
        fig.add_scatter(x=xs, y=ys, mode="lines", name=dt, line=dict(color=PALETTE[i % len(PALETTE)],
                                                                       width=3 if dt == dtype else 1.5))
    fig.add_scatter(x=[S], y=[kv_cache_bytes(L, H, D, S, B, dtype) / scale], mode="markers+text",
                    marker=dict(size=11, color=PALETTE[3]), text=[format_bytes(kv_cache_bytes(L, H, D, S, B, dtype))],
                    textposition="top left", name=f"当前 S={S}")
    fig.update_xaxes(title=axis_title("序列长度 S", "tokens"))
    fig.update_yaxes(title=axis_title("KV Cache", unit), rangemode="tozero")
    return fig


def cache_growth_figure(results: dict) -> go.Figure:
    """Preallocated vs concatenating cache: allocations, bytes copied and time per step.

    ``results``: ``{mode: kvlab.lessons.storage.CacheGrowth}``.
    """
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08,
                        subplot_titles=("累计内存分配次数", "累计拷贝字节数", "每步耗时"))
    for mode, r in results.items():
        color, label = MODE_COLORS[mode], MODE_LABELS[mode]
        fig.add_scatter(x=r.t, y=r.allocations, name=label, line=dict(color=color), legendgroup=mode,
                        row=1, col=1)
        fig.add_scatter(x=r.t, y=[b / 2**20 for b in r.bytes_copied], name=label, line=dict(color=color),
                        legendgroup=mode, showlegend=False, row=1, col=2)
        fig.add_scatter(x=r.t, y=r.step_ms, name=label, line=dict(color=color, width=1), legendgroup=mode,
                        showlegend=False, row=1, col=3)
    fig.update_xaxes(title=axis_title("序列长度 t", "tokens"))
    fig.update_yaxes(title=axis_title("分配次数", "次"), row=1, col=1)
    fig.update_yaxes(title=axis_title("拷贝量", "MiB"), row=1, col=2)
    fig.update_yaxes(title=axis_title("耗时", "ms"), rangemode="tozero", row=1, col=3)
    return apply_template(fig, "预分配 vs 逐步拼接（torch.cat）的 KV Cache", 400, legend_below=True)


def padding_figure(waste) -> go.Figure:
    """A padded batch (``kvlab.lessons.storage.PaddingWaste``): one row per sequence, slots used vs padding,
    and the paged alternative."""
    lengths, S = waste.lengths, waste.max_len
    B = len(lengths)
    cols = min(S, 256)
    scale = S / cols
    z = np.zeros((B, cols))
    for i, n in enumerate(lengths):
        z[i, : max(1, round(n / scale))] = 1
    fig = new_figure(
        f"批处理中的 padding：分配 {waste.allocated_slots} 个槽位，实际用 {waste.used_slots} 个，"
        f"浪费 {waste.waste_fraction:.1%}", height=max(260, 60 + 26 * B), width=WIDE)
    fig.add_trace(go.Heatmap(z=z, x=(np.arange(cols) + 0.5) * scale, y=[f"序列{i + 1}（{n}）" for i, n in enumerate(lengths)],
                             zmin=0, zmax=1, colorscale=[[0, "#eeeeee"], [0.5, "#eeeeee"], [0.5, PALETTE[0]],
                                                         [1, PALETTE[0]]],
                             showscale=False, ygap=2, hovertemplate="%{y}<br>位置 %{x:.0f}<extra></extra>"))
    fig.update_xaxes(title=axis_title("缓存槽位（按最长序列预分配）", "tokens"), range=[0, S])
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_layout(margin=dict(l=120))
    fig.add_annotation(x=1, y=1.0, xref="paper", yref="paper", xanchor="right", yanchor="bottom", showarrow=False,
                       text=f"蓝：真实token　灰：padding　|　分页（每块 {waste.block_size} token）浪费 "
                            f"{waste.paged_waste_fraction:.1%}")
    return fig
