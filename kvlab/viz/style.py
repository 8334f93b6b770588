"""One look for every figure: a plotly template, a colour-blind-safe palette, unit labels."""
from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

from ..cache_modes import MODES

# Okabe & Ito (2008), safe for the common forms of colour blindness.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]

# What each cache mode (kvlab.cache_modes) and each transformers run is drawn in, everywhere.
MODE_COLORS = {**{m.name: m.color for m in MODES.values()},
               "transformers:cached": "#56B4E9", "transformers:no-cache": "#000000",
               "transformers:dynamic": "#CC79A7", "transformers:static": "#56B4E9"}
# The same name for the same thing in every legend, readout and paragraph (GLOSSARY.md).
MODE_LABELS = {**{m.name: m.label for m in MODES.values()},
               "transformers:cached": "transformers 有缓存", "transformers:no-cache": "transformers 无缓存",
               "transformers:dynamic": "transformers DynamicCache（逐步拼接）",
               "transformers:static": "transformers StaticCache（预分配）"}

# Browsers pick the first installed font; the CJK ones keep Chinese labels from showing boxes.
FONT_FAMILY = ("Noto Sans CJK SC, Noto Sans SC, Source Han Sans SC, PingFang SC, Microsoft YaHei, "
               "WenQuanYi Micro Hei, Helvetica, Arial, sans-serif")

# Sequential scale for heatmaps (also colour-blind safe).
HEATMAP_SCALE = "Cividis"

TEMPLATE_NAME = "kvlab"

pio.templates[TEMPLATE_NAME] = go.layout.Template(
    layout=dict(
        font=dict(family=FONT_FAMILY, size=13, color="#222"),
        colorway=PALETTE,
        paper_bgcolor="white",
        plot_bgcolor="white",
        title=dict(x=0.02, xanchor="left", font=dict(size=16)),
        xaxis=dict(showgrid=True, gridcolor="#e5e5e5", zeroline=False, linecolor="#999", ticks="outside"),
        yaxis=dict(showgrid=True, gridcolor="#e5e5e5", zeroline=False, linecolor="#999", ticks="outside"),
        legend=dict(bgcolor="rgba(255,255,255,0.8)", bordercolor="#ddd", borderwidth=1),
        margin=dict(l=60, r=20, t=60, b=50),
        hoverlabel=dict(font=dict(family=FONT_FAMILY)),
    )
)


def new_figure(title: str = "", height: int = 380, **layout) -> go.Figure:
    """An empty figure in the kvlab template."""
    fig = go.Figure()
    fig.update_layout(template=TEMPLATE_NAME, title=title, height=height, **layout)
    return fig


def axis_title(name: str, unit: str | None = None) -> str:
    """``"时间（ms）"``: the unit always beside the quantity, in full-width brackets (GLOSSARY.md)."""
    return f"{name}（{unit}）" if unit else name


WIDE = 980  # px: side-by-side panels need a fixed width (a FigureWidget otherwise defaults to 700)


def apply_template(fig: go.Figure, title: str, height: int, legend_below: bool = False) -> go.Figure:
    """Template, a title above the subplot titles, and (optionally) the legend under the x-axis titles."""
    fig.update_layout(template=TEMPLATE_NAME, height=height, width=WIDE, margin=dict(t=95),
                      title=dict(text=title, y=0.98, yref="container", yanchor="top"))
    if legend_below:
        fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.3, x=0), margin=dict(b=140),
                          height=height + 60)
    return fig
