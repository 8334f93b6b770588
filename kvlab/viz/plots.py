"""Pure plot builders: parameters or measurements in, a plotly Figure out.

Nothing here touches widgets or the model, so each builder is unit-tested by
calling it and reading back the data it plots.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..memory import format_bytes, kv_cache_bytes
from .style import HEATMAP_SCALE, MODE_COLORS, MODE_LABELS, PALETTE, TEMPLATE_NAME, axis_title, new_figure


WIDE = 980  # px: side-by-side panels need a fixed width (a FigureWidget otherwise defaults to 700)


def _apply_template(fig: go.Figure, title: str, height: int, legend_below: bool = False) -> go.Figure:
    """Template, a title above the subplot titles, and (optionally) the legend under the x-axis titles."""
    fig.update_layout(template=TEMPLATE_NAME, height=height, width=WIDE, margin=dict(t=95),
                      title=dict(text=title, y=0.98, yref="container", yanchor="top"))
    if legend_below:
        fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.3, x=0), margin=dict(b=140),
                          height=height + 60)
    return fig


# -- 3.1 ------------------------------------------------------------------------------------
def topk_figure(topk: list[tuple[str, float]], context: str = "") -> go.Figure:
    """Horizontal bars: the k most likely next tokens and their probabilities."""
    labels = [f"「{tok}」" if tok.strip() else repr(tok) for tok, _ in topk][::-1]
    probs = [p for _, p in topk][::-1]
    fig = new_figure(f"下一个token的概率（前{len(topk)}名）" + (f"：输入「{context}」" if context else ""), height=300)
    fig.add_bar(x=probs, y=labels, orientation="h", marker_color=[PALETTE[1]] * (len(probs) - 1) + [PALETTE[0]],
                text=[f"{p:.1%}" for p in probs], textposition="outside", cliponaxis=False, name="概率")
    fig.update_xaxes(title=axis_title("概率", "0–1"), range=[0, 1.08])
    fig.update_layout(showlegend=False, margin=dict(l=80, r=60), width=WIDE)
    return fig


def attention_compare_figure(full: np.ndarray, cached: np.ndarray, tokens: list[str], layer: int, head: int,
                             kv_full: int, kv_cached: int) -> go.Figure:
    """Side by side: the t x t weights recomputed without a cache, and the rows a cached pass computes.

    ``full`` [t, t] and ``cached`` [n, t] are attention weights (0-1) of one layer and head.
    """
    full = np.asarray(full, dtype=float)
    cached = np.asarray(cached, dtype=float)
    t = full.shape[0]
    n = cached.shape[0]
    labels = [f"{i + 1}:{tok}" for i, tok in enumerate(tokens)]
    x_labels = [f"{tok}<br>{i + 1}" for i, tok in enumerate(tokens)]  # two short lines: no rotated ticks
    masked = np.where(np.tril(np.ones((t, t), dtype=bool)), full, np.nan)  # future positions stay empty
    cached_rows = np.full((t, t), np.nan)
    cached_rows[t - n:] = cached
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=(
        f"无缓存：重算 {kv_full} 个token的K/V<br>{t}×{t} 分数矩阵",
        f"有缓存：只算 {kv_cached} 个token的K/V<br>{n}×{t} 分数" + ("行" if n == 1 else "矩阵"),
    ))
    common = dict(x=x_labels, y=labels, zmin=0, zmax=1, colorscale=HEATMAP_SCALE, xgap=1, ygap=1,
                  hovertemplate="query %{y} → key %{x}：权重 %{z:.3f}<extra></extra>")
    fig.add_trace(go.Heatmap(z=masked, showscale=False, name="无缓存", **common), row=1, col=1)
    fig.add_trace(go.Heatmap(z=cached_rows, name="有缓存", colorbar=dict(title="注意力权重", len=0.9), **common),
                  row=1, col=2)
    if n < t:
        fig.add_annotation(x=0.5, y=0.55, xref="x2 domain", yref="y2 domain", showarrow=False,
                           text="前面各行在之前的步骤里已经算过，<br>本步只需新token这一行", font=dict(color="#555"))
    for col in (1, 2):
        fig.update_yaxes(autorange="reversed", title=dict(text="query（当前token）", standoff=8), row=1, col=col)
        fig.update_xaxes(title=dict(text="key（被关注的token）", standoff=16), tickangle=0, automargin=True,
                         row=1, col=col)
    _apply_template(fig, f"第 {layer} 层、第 {head} 个头的注意力权重 softmax(QKᵀ/√d)", 440)
    return fig


def latency_figure(results: dict) -> go.Figure:
    """Per-step latency (ms) and cumulative time (s) against t, one line per cache mode, exponents in the legend."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("每一步的耗时", "累计耗时"))
    for mode, r in results.items():
        color = MODE_COLORS.get(mode, PALETTE[-1])
        label = MODE_LABELS.get(mode, mode)
        fig.add_scatter(x=r["t"], y=r["step_ms"], mode="lines", line=dict(color=color, width=1.6),
                        name=f"{label}：每步 ∝ t^{r['step_exponent']:.2f}", legendgroup=mode, row=1, col=1)
        fig.add_scatter(x=r["t"], y=r["cumulative_s"], mode="lines", line=dict(color=color, width=2.4),
                        name=f"{label}：累计 ∝ n^{r['cumulative_exponent']:.2f}", legendgroup=mode, row=1, col=2)
    fig.update_xaxes(title=axis_title("序列长度 t", "tokens"))
    fig.update_yaxes(title=axis_title("单步耗时", "ms"), rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title=axis_title("累计耗时", "s"), rangemode="tozero", row=1, col=2)
    return _apply_template(fig, "无缓存 vs 有缓存：解码耗时随序列长度的增长（本机实测）", 420, legend_below=True)


def work_figure(max_t: int) -> go.Figure:
    """Counted work per step: K/V projections and attention scores, with and without a cache."""
    t = np.arange(1, max_t + 1)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("每步要计算K/V的token数", "每步的注意力分数个数（每头每层）"))
    for mode, kv, scores in (("none", t, t * t), ("kv", np.ones_like(t), t)):
        color, label = MODE_COLORS[mode], MODE_LABELS[mode]
        fig.add_scatter(x=t, y=kv, name=label, line=dict(color=color), legendgroup=mode, row=1, col=1)
        fig.add_scatter(x=t, y=scores, name=label, line=dict(color=color), legendgroup=mode, showlegend=False,
                        row=1, col=2)
    fig.update_xaxes(title=axis_title("序列长度 t", "tokens"))
    fig.update_yaxes(title=axis_title("K/V 计算量", "tokens"), row=1, col=1)
    fig.update_yaxes(title=axis_title("分数个数", "个"), row=1, col=2)
    return _apply_template(fig, "计算量：t² 对 t（按定义计数）", 360)


# -- 3.2 ------------------------------------------------------------------------------------
MAX_GRID_CELLS = 100 * 128  # L x H blocks drawn individually up to this many


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
    return _apply_template(fig, f"KV Cache 张量 (L,B,H,S,D) = ({L},{B},{H},{S},{D})，{dtype}："
                                f"已用 {format_bytes(used)} / 共 {format_bytes(total)}", 420)


def memory_vs_seq_figure(L: int, B: int, H: int, D: int, S: int, dtype: str = "fp16",
                         compare_dtypes=("fp32", "fp16", "int8")) -> go.Figure:
    """Cache bytes against sequence length for a few dtypes, with the chosen S marked."""
    top = max(S * 2, 16)
    xs = np.unique(np.linspace(1, top, 200).astype(int))
    fig = new_figure(f"显存占用随序列长度线性增长（L={L}, B={B}, H={H}, D={D}）", height=360, width=WIDE)
    unit, scale = _unit_for(kv_cache_bytes(L, H, D, top, B, "fp32"))
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


def _unit_for(n: int) -> tuple[str, int]:
    for unit, power in (("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)):
        if n >= 1024 ** power:
            return unit, 1024 ** power
    return "B", 1


def cache_growth_figure(results: dict) -> go.Figure:
    """Preallocated vs concatenating cache: allocations, bytes copied and time per step."""
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08,
                        subplot_titles=("累计内存分配次数", "累计拷贝字节数", "每步耗时"))
    for mode, r in results.items():
        color, label = MODE_COLORS[mode], MODE_LABELS[mode]
        fig.add_scatter(x=r["t"], y=r["allocations"], name=label, line=dict(color=color), legendgroup=mode,
                        row=1, col=1)
        fig.add_scatter(x=r["t"], y=[b / 2**20 for b in r["bytes_copied"]], name=label, line=dict(color=color),
                        legendgroup=mode, showlegend=False, row=1, col=2)
        fig.add_scatter(x=r["t"], y=r["step_ms"], name=label, line=dict(color=color, width=1), legendgroup=mode,
                        showlegend=False, row=1, col=3)
    fig.update_xaxes(title=axis_title("序列长度 t", "tokens"))
    fig.update_yaxes(title=axis_title("分配次数", "次"), row=1, col=1)
    fig.update_yaxes(title=axis_title("拷贝量", "MiB"), row=1, col=2)
    fig.update_yaxes(title=axis_title("耗时", "ms"), rangemode="tozero", row=1, col=3)
    return _apply_template(fig, "预分配 vs 逐步拼接（torch.cat）的 KV Cache", 400, legend_below=True)


def padding_figure(waste: dict) -> go.Figure:
    """A padded batch: one row per sequence, slots used vs padding, and the paged alternative."""
    lengths, S = waste["lengths"], waste["max_len"]
    B = len(lengths)
    cols = min(S, 256)
    scale = S / cols
    z = np.zeros((B, cols))
    for i, n in enumerate(lengths):
        z[i, : max(1, round(n / scale))] = 1
    fig = new_figure(
        f"批处理中的 padding：分配 {waste['allocated_slots']} 个槽位，实际用 {waste['used_slots']} 个，"
        f"浪费 {waste['waste_fraction']:.1%}", height=max(260, 60 + 26 * B), width=WIDE)
    fig.add_trace(go.Heatmap(z=z, x=(np.arange(cols) + 0.5) * scale, y=[f"序列{i + 1}（{n}）" for i, n in enumerate(lengths)],
                             zmin=0, zmax=1, colorscale=[[0, "#eeeeee"], [0.5, "#eeeeee"], [0.5, PALETTE[0]],
                                                         [1, PALETTE[0]]],
                             showscale=False, ygap=2, hovertemplate="%{y}<br>位置 %{x:.0f}<extra></extra>"))
    fig.update_xaxes(title=axis_title("缓存槽位（按最长序列预分配）", "tokens"), range=[0, S])
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_layout(margin=dict(l=120))
    fig.add_annotation(x=1, y=1.0, xref="paper", yref="paper", xanchor="right", yanchor="bottom", showarrow=False,
                       text=f"蓝：真实token　灰：padding　|　分页（每块 {waste['block_size']} token）只浪费 "
                            f"{waste['paged_waste_fraction']:.1%}")
    return fig


# -- 3.3 / bench ---------------------------------------------------------------------------
def bench_figure(report: dict) -> go.Figure:
    """kvlab.bench report: tokens/s per run (with min-max) and per-step latency against t."""
    results = report["results"]
    names = list(results)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.42, 0.58], horizontal_spacing=0.12,
                        subplot_titles=("吞吐量（中位数，误差线=最快/最慢）", "每一步的耗时"))
    key = [n.split(":", 1)[1] if n.startswith("kvlab:") else n for n in names]
    tps = [results[n]["tokens_per_s"] for n in names]
    fig.add_bar(x=[MODE_LABELS.get(k, k) for k in key], y=tps, row=1, col=1,
                marker_color=[MODE_COLORS.get(k, PALETTE[-1]) for k in key], showlegend=False,
                error_y=dict(type="data", symmetric=False,
                             array=[results[n]["tokens_per_s_max"] - v for n, v in zip(names, tps)],
                             arrayminus=[v - results[n]["tokens_per_s_min"] for n, v in zip(names, tps)]),
                text=[f"{v:.1f}" for v in tps], textposition="outside")
    prompt = report["config"]["prompt_len"]
    for n, k in zip(names, key):
        steps = results[n]["step_s"]
        fig.add_scatter(x=list(range(prompt, prompt + len(steps))), y=[s * 1e3 for s in steps], mode="lines",
                        name=MODE_LABELS.get(k, k), line=dict(color=MODE_COLORS.get(k, PALETTE[-1]), width=1.4),
                        row=1, col=2)
    fig.update_yaxes(title=axis_title("吞吐量", "tokens/s"), row=1, col=1)
    all_ms = [s * 1e3 for n in names for s in results[n]["step_s"] if s > 0]
    ticks = [m * 10 ** e for e in range(-3, 7) for m in (1, 2, 5)
             if min(all_ms, default=1) / 2 <= m * 10 ** e <= max(all_ms, default=1) * 2]
    fig.update_yaxes(title=axis_title("单步耗时", "ms"), type="log", tickvals=ticks, row=1, col=2)
    fig.update_xaxes(title=axis_title("序列长度 t", "tokens"), row=1, col=2)
    fig.update_xaxes(tickangle=30, row=1, col=1)
    m = report["machine"]
    _apply_template(fig, f"kvlab.bench：{m.get('gpu') or m['cpu']}，带宽上限 "
                         f"{report['bandwidth']['bytes_per_s'] / 1e9:.1f} GB/s", 440, legend_below=True)
    fig.update_layout(legend=dict(y=-0.55), margin=dict(b=190), height=560)
    return fig
