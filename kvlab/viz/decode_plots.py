"""Plot builders of chapter 3.1 (autoregressive decoding): pure functions, results in, figures out."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import HEATMAP_SCALE, MODE_COLORS, MODE_LABELS, PALETTE, WIDE, apply_template, axis_title, new_figure


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
    apply_template(fig, f"第 {layer} 层、第 {head} 个头的注意力权重 softmax(QKᵀ/√d)", 440)
    return fig


def latency_figure(results: dict) -> go.Figure:
    """Per-step latency (ms) and cumulative time (s) against t, one line per cache mode, exponents in the legend.

    ``results``: ``{mode: kvlab.measure.DecodeTiming}``.
    """
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("每一步的耗时", "累计耗时"))
    for mode, r in results.items():
        color = MODE_COLORS.get(mode, PALETTE[-1])
        label = MODE_LABELS.get(mode, mode)
        fig.add_scatter(x=r.seq_len, y=[s * 1e3 for s in r.step_seconds], mode="lines",
                        line=dict(color=color, width=1.6),
                        name=f"{label}：每步 ∝ t^{r.step_exponent:.2f}", legendgroup=mode, row=1, col=1)
        fig.add_scatter(x=r.seq_len, y=r.cumulative_seconds, mode="lines", line=dict(color=color, width=2.4),
                        name=f"{label}：累计 ∝ n^{r.cumulative_exponent:.2f}", legendgroup=mode, row=1, col=2)
    fig.update_xaxes(title=axis_title("序列长度 t", "tokens"))
    fig.update_yaxes(title=axis_title("单步耗时", "ms"), rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title=axis_title("累计耗时", "s"), rangemode="tozero", row=1, col=2)
    return apply_template(fig, "无缓存 vs 有缓存：解码耗时随序列长度的增长（本机实测）", 420, legend_below=True)


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
    return apply_template(fig, "计算量：t² 对 t（按定义计数）", 360)
