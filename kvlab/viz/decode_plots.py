"""Plot builders of chapter 3.1 (autoregressive decoding): pure functions, results in, figures out."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..phrases import Phrasebook
from .style import (HEATMAP_SCALE, MODE_COLORS, MODE_LABELS, PALETTE, WIDE, apply_template, axis_title, grid_layout,
                    named_scale, new_figure, quick_figure, template_layout)

HIGHLIGHT = "#D55E00"  # the rows this step adds

# Every title, axis, legend entry, hover text and note of these figures, looked up when a figure is built (a notebook
# sets the language after importing kvlab). Plotly's own %{...} fields are written %{{...}} here.
PLOTS = Phrasebook("decode.plots", {
    "zh": {
        "token": "「{token}」",
        "row_label": "{position}：{token}",
        "topk_title": "下一个 token 的概率（前 {k} 名）",
        "topk_context": "：输入「{context}」",
        "probability": "概率",
        "no_cache": "无缓存",
        "with_cache": "有缓存",
        "left_title": "无缓存：重算 {kv} 个 token 的 K/V<br>{t}×{t} 分数矩阵",
        "right_prefill": "有缓存：预填充，同样要算 {kv} 个 token 的 K/V<br>{n}×{t} 分数矩阵，K/V 存入缓存",
        "right_row": "有缓存：只算 {kv} 个 token 的 K/V<br>{n}×{t} 分数行",
        "right_matrix": "有缓存：只算 {kv} 个 token 的 K/V<br>{n}×{t} 分数矩阵",
        "attention_hover": "查询 %{{y}} → 键 %{{x}}：权重 %{{z:.3f}}<extra></extra>",
        "attention_weight": "注意力权重",
        "rows_done": "前面各行在之前的步骤里已经算过，<br>本步只需新 token 这一行",
        "query_axis": "查询 Q（当前 token）",
        "key_axis": "键 K（被关注的 token）",
        "attention_title": "第 {layer} 层第 {head} 头的注意力权重 softmax(QKᵀ/√d)",
        "cache_side": "{name} 缓存：{t} 行 × D = {D}",
        "value": "数值",
        "cache_hover": "{name}：token %{{y}}，第 %{{x}} 维 = %{{z:.3f}}<extra></extra>",
        "head_dim": "头维度",
        "cache_prefill": "第 {layer} 层、KV 组 {group} 的缓存内容：橙框 = 预填充写入的全部 {rows} 行",
        "cache_decode": "第 {layer} 层、KV 组 {group} 的缓存内容：橙框 = 本步追加的新 {rows} 行，其余行原样保留",
        "step_time_title": "每一步的耗时",
        "total_time_title": "累计耗时",
        "step_legend": "{label}：每步 ∝ t^{exponent:.2f}",
        "total_legend": "{label}：累计 ∝ n^{exponent:.2f}",
        "seq_len": "序列长度 t",
        "generated": "已生成的 token 数 n",
        "step_time": "单步耗时",
        "total_time": "累计耗时",
        "latency_title": "无缓存与有缓存：解码耗时随序列长度的增长（本机实测）",
        "growth_title": "{label}：一次长生成中每一步的耗时（本机实测）与拟合直线",
        "measured_step": "实测单步耗时",
        "fit": "拟合：固定开销 + b·t",
        "cached_tokens": "缓存中的 token 数 t",
        "work_kv_title": "输入长度为 t 的一步要计算 K/V 的 token 数",
        "work_scores_title": "这一步的注意力分数（每层每头）",
        "work_total_title": "生成 n 个 token 的分数总数",
        "input_len": "输入长度 t",
        "kv_work": "K/V 计算量",
        "scores": "分数个数",
        "total_scores": "分数总数",
        "unit_count": "个",
        "work_title": "从 trace 数出来的计算量：单步 t² 对 t，累计约 n³/3 对 n²/2",
    },
    "en": {
        "token": "\"{token}\"",
        "row_label": "{position}: {token}",
        "topk_title": "Next-token probabilities (top {k})",
        "topk_context": ": input \"{context}\"",
        "probability": "probability",
        "no_cache": "no cache",
        "with_cache": "with a cache",
        "left_title": "No cache: K/V recomputed for {kv} tokens<br>a {t}×{t} score matrix",
        "right_prefill": "With a cache: the prefill computes K/V for {kv} tokens too<br>a {n}×{t} score matrix; "
                         "K/V go into the cache",
        "right_row": "With a cache: K/V computed for {kv} token only<br>a {n}×{t} row of scores",
        "right_matrix": "With a cache: K/V computed for {kv} tokens only<br>a {n}×{t} score matrix",
        "attention_hover": "query %{{y}} → key %{{x}}: weight %{{z:.3f}}<extra></extra>",
        "attention_weight": "attention weight",
        "rows_done": "the rows above were computed in earlier steps;<br>this step needs only the new token's row",
        "query_axis": "query Q (current token)",
        "key_axis": "key K (token attended to)",
        "attention_title": "Attention weights softmax(QKᵀ/√d), layer {layer}, head {head}",
        "cache_side": "{name} cache: {t} rows × D = {D}",
        "value": "value",
        "cache_hover": "{name}: token %{{y}}, dimension %{{x}} = %{{z:.3f}}<extra></extra>",
        "head_dim": "head dimension",
        "cache_prefill": "Cache of layer {layer}, KV group {group}: orange box = all {rows} rows the prefill wrote",
        "cache_decode": "Cache of layer {layer}, KV group {group}: orange box = the {rows} row this step "
                        "appended; the other rows stay as they were",
        "step_time_title": "Time per step",
        "total_time_title": "Total time",
        "step_legend": "{label}: per step ∝ t^{exponent:.2f}",
        "total_legend": "{label}: total ∝ n^{exponent:.2f}",
        "seq_len": "sequence length t",
        "generated": "tokens generated n",
        "step_time": "step time",
        "total_time": "total time",
        "latency_title": "No cache vs. with a cache: how decode time grows with sequence length (measured here)",
        "growth_title": "{label}: the time of each step of one long generation (measured here) and the fitted line",
        "measured_step": "measured step time",
        "fit": "fit: fixed cost + b·t",
        "cached_tokens": "tokens in the cache t",
        "work_kv_title": "Tokens whose K/V a step of input length t computes",
        "work_scores_title": "Attention scores of that step (per layer and head)",
        "work_total_title": "Total scores for generating n tokens",
        "input_len": "input length t",
        "kv_work": "K/V work",
        "scores": "scores",
        "total_scores": "total scores",
        "unit_count": "count",
        "work_title": "Work counted from the trace: t² vs. t per step, about n³/3 vs. n²/2 in all",
    },
})
say = PLOTS.say


def _json_safe(z: np.ndarray) -> list:
    """A matrix for plotly with empty cells as None: NaN is not valid JSON, and the widget would warn."""
    return [[None if np.isnan(v) else float(v) for v in row] for row in np.asarray(z, dtype=float)]


def topk_figure(topk: list[tuple[str, float]], context: str = "") -> go.Figure:
    """Horizontal bars: the k most likely next tokens and their probabilities."""
    labels = [say("token", token=tok) if tok.strip() else repr(tok) for tok, _ in topk][::-1]
    probs = [p for _, p in topk][::-1]
    fig = new_figure(say("topk_title", k=len(topk)) + (say("topk_context", context=context) if context else ""),
                     height=300)
    fig.add_bar(x=probs, y=labels, orientation="h", marker_color=[PALETTE[1]] * (len(probs) - 1) + [PALETTE[0]],
                text=[f"{p:.1%}" for p in probs], textposition="outside", cliponaxis=False, name=say("probability"))
    fig.update_xaxes(title=axis_title(say("probability"), "0–1"), range=[0, 1.08])
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
    labels = [say("row_label", position=i + 1, token=tok) for i, tok in enumerate(tokens)]
    x_labels = [f"{tok}<br>{i + 1}" for i, tok in enumerate(tokens)]  # two short lines: no rotated ticks
    masked = np.where(np.tril(np.ones((t, t), dtype=bool)), full, np.nan)  # future positions stay empty
    cached_rows = np.full((t, t), np.nan)
    cached_rows[t - n:] = np.where(np.tril(np.ones((t, t), dtype=bool))[t - n:], cached, np.nan)
    if n == t:  # the prefill: nothing is cached yet, both sides do the same work
        right = say("right_prefill", kv=kv_cached, n=n, t=t)
    else:
        right = say("right_row" if n == 1 else "right_matrix", kv=kv_cached, n=n, t=t)
    layout = grid_layout([say("left_title", kv=kv_full, t=t), right], 0.12)
    common = dict(type="heatmap", x=x_labels, y=labels, zmin=0, zmax=1, colorscale=named_scale(HEATMAP_SCALE),
                  xgap=1, ygap=1,
                  hovertemplate=say("attention_hover"))
    data = [dict(common, z=_json_safe(masked), showscale=False, name=say("no_cache"), xaxis="x", yaxis="y"),
            dict(common, z=_json_safe(cached_rows), name=say("with_cache"),
                 colorbar=dict(title=dict(text=say("attention_weight")), len=0.9), xaxis="x2", yaxis="y2")]
    if n < t:
        layout["annotations"].append(dict(x=0.5, y=0.55, xref="x2 domain", yref="y2 domain", showarrow=False,
                                          text=say("rows_done"),
                                          font=dict(color="#555")))
    for axis in ("yaxis", "yaxis2"):
        layout[axis].update(autorange="reversed", title=dict(text=say("query_axis"), standoff=8))
    for axis in ("xaxis", "xaxis2"):
        layout[axis].update(title=dict(text=say("key_axis"), standoff=16), tickangle=0)
    layout.update(template_layout(say("attention_title", layer=layer, head=head), 440))
    layout["margin"].update(l=105, b=95)  # fixed room for the token labels: automargin would redraw the figure twice
    return quick_figure(data, layout)


def cache_rows_figure(k: np.ndarray, v: np.ndarray, tokens: list[str], layer: int, group: int, new_rows: int
                      ) -> go.Figure:
    """The cache itself: K and V of one layer and KV group, one row per stored token, the rows added
    by this step outlined. ``k``, ``v``: [t, D]."""
    k, v = np.asarray(k, dtype=float), np.asarray(v, dtype=float)
    t, D = k.shape
    labels = [say("row_label", position=i + 1, token=tok) for i, tok in enumerate(tokens)]
    layout = grid_layout([say("cache_side", name=name, t=t, D=D) for name in ("K", "V")], 0.1)
    lim = float(max(np.abs(k).max(), np.abs(v).max(), 1e-6))
    data, shapes = [], []
    for col, (name, x) in enumerate((("K", k), ("V", v)), start=1):
        xa, ya = ("x", "y") if col == 1 else (f"x{col}", f"y{col}")
        data.append(dict(type="heatmap", z=x.tolist(), y=labels, x=list(range(D)), zmin=-lim, zmax=lim,
                         colorscale=named_scale("RdBu"), showscale=col == 2, colorbar=dict(title=dict(text=say("value")), len=0.9),
                         name=name, xaxis=xa, yaxis=ya,
                         hovertemplate=say("cache_hover", name=name)))
        shapes.append(dict(type="rect", x0=-0.5, x1=D - 0.5, y0=t - new_rows - 0.5, y1=t - 0.5, xref=xa, yref=ya,
                           line=dict(color=HIGHLIGHT, width=3)))
        suffix = "" if col == 1 else str(col)
        layout[f"yaxis{suffix}"].update(autorange="reversed")
        layout[f"xaxis{suffix}"].update(title=dict(text=axis_title(say("head_dim"), "D")))
    title = say("cache_prefill" if new_rows == t else "cache_decode", layer=layer, group=group, rows=new_rows)
    layout.update(template_layout(title, 360), shapes=shapes)
    return quick_figure(data, layout)


def latency_figure(results: dict) -> go.Figure:
    """Per-step latency (ms) and cumulative time (s) against t, one line per cache mode, exponents in the legend.

    ``results``: ``{mode: kvlab.measure.DecodeTiming}``.
    """
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(say("step_time_title"), say("total_time_title")))
    for mode, r in results.items():
        color = MODE_COLORS.get(mode, PALETTE[-1])
        label = MODE_LABELS.get(mode, mode)
        fig.add_scatter(x=r.seq_len, y=[s * 1e3 for s in r.step_seconds], mode="lines",
                        line=dict(color=color, width=1.6),
                        name=say("step_legend", label=label, exponent=r.step_exponent), legendgroup=mode, row=1, col=1)
        n = list(range(1, len(r.cumulative_seconds) + 1))  # the exponent is fitted against n: plot against n
        fig.add_scatter(x=n, y=r.cumulative_seconds, mode="lines", line=dict(color=color, width=2.4),
                        name=say("total_legend", label=label, exponent=r.cumulative_exponent), legendgroup=mode,
                        row=1, col=2)
    fig.update_xaxes(title=axis_title(say("seq_len"), "tokens"), row=1, col=1)
    fig.update_xaxes(title=axis_title(say("generated"), "tokens"), row=1, col=2)
    fig.update_yaxes(title=axis_title(say("step_time"), "ms"), rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title=axis_title(say("total_time"), "s"), rangemode="tozero", row=1, col=2)
    return apply_template(fig, say("latency_title"), 420, legend_below=True)


def step_growth_figure(t: list[int], step_ms: list[float], fit_ms: list[float], label: str) -> go.Figure:
    """One long cached run: each decode step's time against t, with the fitted line a + b·t."""
    fig = new_figure(say("growth_title", label=label), height=360, width=WIDE)
    fig.add_scatter(x=t, y=step_ms, mode="markers", marker=dict(size=3, color=MODE_COLORS["kv"], opacity=0.5),
                    name=say("measured_step"))
    fig.add_scatter(x=t, y=fit_ms, mode="lines", line=dict(color=HIGHLIGHT, width=2.5), name=say("fit"))
    fig.update_xaxes(title=axis_title(say("cached_tokens"), "tokens"))
    fig.update_yaxes(title=axis_title(say("step_time"), "ms"), rangemode="tozero")
    fig.update_layout(legend=dict(orientation="h", y=-0.25, x=0))
    return fig


def work_figure(seq_len: list[int], none_per_pass: list[int], kv_per_pass: list[int]) -> go.Figure:
    """Counted work, per pass from a real run's trace: K/V projections, attention scores (new queries × keys),
    and scores summed over the run, against the formulas n³/3 and n²/2."""
    t = np.asarray(seq_len)
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.09, subplot_titles=(
        say("work_kv_title"), say("work_scores_title"), say("work_total_title")))
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
    fig.update_xaxes(title=axis_title(say("input_len"), "tokens"), row=1, col=1)
    fig.update_xaxes(title=axis_title(say("input_len"), "tokens"), row=1, col=2)
    fig.update_xaxes(title=axis_title(say("generated"), "tokens"), row=1, col=3)
    fig.update_yaxes(title=axis_title(say("kv_work"), "tokens"), row=1, col=1)
    fig.update_yaxes(title=axis_title(say("scores"), say("unit_count")), row=1, col=2)
    fig.update_yaxes(title=axis_title(say("total_scores"), say("unit_count")), type="log", row=1, col=3)
    return apply_template(fig, say("work_title"), 380, legend_below=True)
