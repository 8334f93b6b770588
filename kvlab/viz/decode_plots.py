"""Plot builders of chapter 3.1 (autoregressive decoding): pure functions, results in, figures out."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import (HEATMAP_SCALE, MODE_COLORS, MODE_LABELS, PALETTE, WIDE, apply_template, axis_title, grid_layout,
                    named_scale, new_figure, quick_figure, template_layout)

HIGHLIGHT = "#D55E00"  # the rows this step adds


def _json_safe(z: np.ndarray) -> list:
    """A matrix for plotly with empty cells as None: NaN is not valid JSON, and the widget would warn."""
    return [[None if np.isnan(v) else float(v) for v in row] for row in np.asarray(z, dtype=float)]


def topk_figure(topk: list[tuple[str, float]], context: str = "") -> go.Figure:
    """Horizontal bars: the k most likely next tokens and their probabilities."""
    labels = [f"「{tok}」" if tok.strip() else repr(tok) for tok, _ in topk][::-1]
    probs = [p for _, p in topk][::-1]
    fig = new_figure(f"下一个 token 的概率（前 {len(topk)} 名）" + (f"：输入「{context}」" if context else ""),
                     height=300)
    fig.add_bar(x=probs, y=labels, orientation="h", marker_color=[PALETTE[1]] * (len(probs) - 1) + [PALETTE[0]],
                text=[f"{p:.1%}" for p in probs], textposition="outside", cliponaxis=False, name="概率")
    fig.update_xaxes(title=axis_title("概率", "0–1"), range=[0, 1.08])
    fig.update_layout(showlegend=False, margin=dict(l=80, r=60), width=WIDE)
    return fig


def attention_compare_figure(full: np.ndarray, cached: np.ndarray, tokens: list[str], layer: int, head: int,
                             kv_full: int, kv_cached: int) -> go.Figure:
    """Side by side: the t x t weights recomputed without a cache, and the rows a cached pass computes.

    ``full`` [t, t] and ``cached`` [n, t] are attention weights (0-1) of one layer and head; n = t at the
    prefill step (both sides compute the same), then 1.
    """
    full = np.asarray(full, dtype=float)
    cached = np.asarray(cached, dtype=float)
    t = full.shape[0]
    n = cached.shape[0]
    labels = [f"{i + 1}：{tok}" for i, tok in enumerate(tokens)]
    x_labels = [f"{tok}<br>{i + 1}" for i, tok in enumerate(tokens)]  # two short lines: no rotated ticks
    masked = np.where(np.tril(np.ones((t, t), dtype=bool)), full, np.nan)  # future positions stay empty
    cached_rows = np.full((t, t), np.nan)
    cached_rows[t - n:] = np.where(np.tril(np.ones((t, t), dtype=bool))[t - n:], cached, np.nan)
    if n == t:  # the prefill: nothing is cached yet, both sides do the same work
        right = f"有缓存：预填充，同样要算 {kv_cached} 个 token 的 K/V<br>{n}×{t} 分数矩阵，K/V 存入缓存"
    else:
        right = f"有缓存：只算 {kv_cached} 个 token 的 K/V<br>{n}×{t} 分数" + ("行" if n == 1 else "矩阵")
    layout = grid_layout([f"无缓存：重算 {kv_full} 个 token 的 K/V<br>{t}×{t} 分数矩阵", right], 0.12)
    common = dict(type="heatmap", x=x_labels, y=labels, zmin=0, zmax=1, colorscale=named_scale(HEATMAP_SCALE),
                  xgap=1, ygap=1,
                  hovertemplate="查询 %{y} → 键 %{x}：权重 %{z:.3f}<extra></extra>")
    data = [dict(common, z=_json_safe(masked), showscale=False, name="无缓存", xaxis="x", yaxis="y"),
            dict(common, z=_json_safe(cached_rows), name="有缓存", colorbar=dict(title=dict(text="注意力权重"), len=0.9),
                 xaxis="x2", yaxis="y2")]
    if n < t:
        layout["annotations"].append(dict(x=0.5, y=0.55, xref="x2 domain", yref="y2 domain", showarrow=False,
                                          text="前面各行在之前的步骤里已经算过，<br>本步只需新 token 这一行",
                                          font=dict(color="#555")))
    for axis in ("yaxis", "yaxis2"):
        layout[axis].update(autorange="reversed", title=dict(text="查询 Q（当前 token）", standoff=8))
    for axis in ("xaxis", "xaxis2"):
        layout[axis].update(title=dict(text="键 K（被关注的 token）", standoff=16), tickangle=0)
    layout.update(template_layout(f"第 {layer} 层第 {head} 头的注意力权重 softmax(QKᵀ/√d)", 440))
    layout["margin"].update(l=105, b=95)  # fixed room for the token labels: automargin would redraw the figure twice
    return quick_figure(data, layout)


def cache_rows_figure(k: np.ndarray, v: np.ndarray, tokens: list[str], layer: int, group: int, new_rows: int
                      ) -> go.Figure:
    """The cache itself: K and V of one layer and KV group, one row per stored token, the rows added
    by this step outlined. ``k``, ``v``: [t, D]."""
    k, v = np.asarray(k, dtype=float), np.asarray(v, dtype=float)
    t, D = k.shape
    labels = [f"{i + 1}：{tok}" for i, tok in enumerate(tokens)]
    layout = grid_layout([f"K 缓存：{t} 行 × D = {D}", f"V 缓存：{t} 行 × D = {D}"], 0.1)
    lim = float(max(np.abs(k).max(), np.abs(v).max(), 1e-6))
    data, shapes = [], []
    for col, (name, x) in enumerate((("K", k), ("V", v)), start=1):
        xa, ya = ("x", "y") if col == 1 else (f"x{col}", f"y{col}")
        data.append(dict(type="heatmap", z=x.tolist(), y=labels, x=list(range(D)), zmin=-lim, zmax=lim,
                         colorscale=named_scale("RdBu"), showscale=col == 2, colorbar=dict(title=dict(text="数值"), len=0.9),
                         name=name, xaxis=xa, yaxis=ya,
                         hovertemplate=f"{name}：token %{{y}}，第 %{{x}} 维 = %{{z:.3f}}<extra></extra>"))
        shapes.append(dict(type="rect", x0=-0.5, x1=D - 0.5, y0=t - new_rows - 0.5, y1=t - 0.5, xref=xa, yref=ya,
                           line=dict(color=HIGHLIGHT, width=3)))
        suffix = "" if col == 1 else str(col)
        layout[f"yaxis{suffix}"].update(autorange="reversed")
        layout[f"xaxis{suffix}"].update(title=dict(text=axis_title("头维度", "D")))
    title = (f"第 {layer} 层、KV 组 {group} 的缓存内容：橙框 = 预填充写入的全部 {new_rows} 行" if new_rows == t else
             f"第 {layer} 层、KV 组 {group} 的缓存内容：橙框 = 本步追加的新 {new_rows} 行，其余行原样保留")
    layout.update(template_layout(title, 360), shapes=shapes)
    return quick_figure(data, layout)


def latency_figure(results: dict) -> go.Figure:
    """Per-step latency (ms) and cumulative time (s) against t, one line per cache mode, exponents in the legend.

    ``results``: ``{mode: kvlab.measure.DecodeTiming}``.
    """
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=("每一步的耗时", "累计耗时"))
    for mode, r in results.items():
        color = MODE_COLORS.get(mode, PALETTE[-1])
        label = MODE_LABELS.get(mode, mode)
        fig.add_scatter(x=r.seq_len, y=[s * 1e3 for s in r.step_seconds], mode="lines",
                        line=dict(color=color, width=1.6),
                        name=f"{label}：每步 ∝ t^{r.step_exponent:.2f}", legendgroup=mode, row=1, col=1)
        n = list(range(1, len(r.cumulative_seconds) + 1))  # the exponent is fitted against n: plot against n
        fig.add_scatter(x=n, y=r.cumulative_seconds, mode="lines", line=dict(color=color, width=2.4),
                        name=f"{label}：累计 ∝ n^{r.cumulative_exponent:.2f}", legendgroup=mode, row=1, col=2)
    fig.update_xaxes(title=axis_title("序列长度 t", "tokens"), row=1, col=1)
    fig.update_xaxes(title=axis_title("已生成的 token 数 n", "tokens"), row=1, col=2)
    fig.update_yaxes(title=axis_title("单步耗时", "ms"), rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title=axis_title("累计耗时", "s"), rangemode="tozero", row=1, col=2)
    return apply_template(fig, "无缓存与有缓存：解码耗时随序列长度的增长（本机实测）", 420, legend_below=True)


def step_growth_figure(t: list[int], step_ms: list[float], fit_ms: list[float], label: str) -> go.Figure:
    """One long cached run: each decode step's time against t, with the fitted line a + b·t."""
    fig = new_figure(f"{label}：一次长生成中每一步的耗时（本机实测）与拟合直线", height=360, width=WIDE)
    fig.add_scatter(x=t, y=step_ms, mode="markers", marker=dict(size=3, color=MODE_COLORS["kv"], opacity=0.5),
                    name="实测单步耗时")
    fig.add_scatter(x=t, y=fit_ms, mode="lines", line=dict(color=HIGHLIGHT, width=2.5), name="拟合：固定开销 + b·t")
    fig.update_xaxes(title=axis_title("缓存中的 token 数 t", "tokens"))
    fig.update_yaxes(title=axis_title("单步耗时", "ms"), rangemode="tozero")
    fig.update_layout(legend=dict(orientation="h", y=-0.25, x=0))
    return fig


def work_figure(seq_len: list[int], none_per_pass: list[int], kv_per_pass: list[int]) -> go.Figure:
    """Counted work, per pass from a real run's trace: K/V projections, attention scores (new queries × keys),
    and scores summed over the run, against the formulas n³/3 and n²/2."""
    t = np.asarray(seq_len)
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.09, subplot_titles=(
        "输入长度为 t 的一步要计算 K/V 的 token 数", "这一步的注意力分数（每层每头）", "生成 n 个 token 的分数总数"))
    for mode, kv in (("none", np.asarray(none_per_pass)), ("kv", np.asarray(kv_per_pass))):
        color, label = MODE_COLORS[mode], MODE_LABELS[mode]
        scores = kv * t  # each new query against all t keys
        fig.add_scatter(x=t, y=kv, name=label, line=dict(color=color), legendgroup=mode, row=1, col=1)
        fig.add_scatter(x=t, y=scores, name=label, line=dict(color=color), legendgroup=mode, showlegend=False,
                        row=1, col=2)
        fig.add_scatter(x=np.arange(1, len(t) + 1), y=np.cumsum(scores), name=label, line=dict(color=color, width=2.5),
                        legendgroup=mode, showlegend=False, row=1, col=3)
    n = np.arange(1, len(t) + 1)
    fig.add_scatter(x=n, y=n**3 / 3, name="n³/3", line=dict(color=MODE_COLORS["none"], dash="dot"), row=1, col=3)
    fig.add_scatter(x=n, y=n**2 / 2, name="n²/2", line=dict(color=MODE_COLORS["kv"], dash="dot"), row=1, col=3)
    fig.update_xaxes(title=axis_title("输入长度 t", "tokens"), row=1, col=1)
    fig.update_xaxes(title=axis_title("输入长度 t", "tokens"), row=1, col=2)
    fig.update_xaxes(title=axis_title("已生成的 token 数 n", "tokens"), row=1, col=3)
    fig.update_yaxes(title=axis_title("K/V 计算量", "tokens"), row=1, col=1)
    fig.update_yaxes(title=axis_title("分数个数", "个"), row=1, col=2)
    fig.update_yaxes(title=axis_title("分数总数", "个"), type="log", row=1, col=3)
    return apply_template(fig, "从 trace 数出来的计算量：单步 t² 对 t，累计约 n³/3 对 n²/2", 380, legend_below=True)
