"""Plot builder for a ``python -m kvlab.bench`` report."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import MODE_COLORS, MODE_LABELS, PALETTE, apply_template, axis_title


def bench_figure(report) -> go.Figure:
    """A ``kvlab.bench.BenchReport``: tokens/s per run (with min-max) and per-step latency against t."""
    runs = report.runs
    names = list(runs)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.42, 0.58], horizontal_spacing=0.12,
                        subplot_titles=("吞吐量（中位数，误差线=最快/最慢）", "每一步的耗时"))
    key = [n.split(":", 1)[1] if n.startswith("kvlab:") else n for n in names]
    tps = [runs[n].tokens_per_s for n in names]
    fig.add_bar(x=[MODE_LABELS.get(k, k) for k in key], y=tps, row=1, col=1,
                marker_color=[MODE_COLORS.get(k, PALETTE[-1]) for k in key], showlegend=False,
                error_y=dict(type="data", symmetric=False,
                             array=[runs[n].tokens_per_s_range[1] - v for n, v in zip(names, tps)],
                             arrayminus=[v - runs[n].tokens_per_s_range[0] for n, v in zip(names, tps)]),
                text=[f"{v:.1f}" for v in tps], textposition="outside")
    for n, k in zip(names, key):
        fig.add_scatter(x=runs[n].seq_len, y=[s * 1e3 for s in runs[n].step_seconds], mode="lines",
                        name=MODE_LABELS.get(k, k), line=dict(color=MODE_COLORS.get(k, PALETTE[-1]), width=1.4),
                        row=1, col=2)
    fig.update_yaxes(title=axis_title("吞吐量", "tokens/s"), row=1, col=1)
    all_ms = [s * 1e3 for n in names for s in runs[n].step_seconds if s > 0]
    ticks = [m * 10 ** e for e in range(-3, 7) for m in (1, 2, 5)
             if min(all_ms, default=1) / 2 <= m * 10 ** e <= max(all_ms, default=1) * 2]
    fig.update_yaxes(title=axis_title("单步耗时", "ms"), type="log", tickvals=ticks, row=1, col=2)
    fig.update_xaxes(title=axis_title("序列长度 t", "tokens"), row=1, col=2)
    fig.update_xaxes(tickangle=30, row=1, col=1)
    m = report.machine
    apply_template(fig, f"kvlab.bench：{m.get('gpu') or m['cpu']}，带宽上限 "
                        f"{max(b.best_g for b in report.bandwidth):.1f} GB/s", 440, legend_below=True)
    fig.update_layout(legend=dict(y=-0.55), margin=dict(b=190), height=560)
    return fig
