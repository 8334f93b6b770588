"""One look for every figure: a plotly template, a colour-blind-safe palette, unit labels."""
from __future__ import annotations

import functools
import json
from collections.abc import Mapping

import plotly.graph_objects as go
import plotly.io as pio

from ..cache_modes import MODES
from .phrases import MODE_NAMES, STYLE

# Okabe & Ito (2008), safe for the common forms of colour blindness.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]

# What each cache mode (kvlab.cache_modes) and each transformers run is drawn in, everywhere.
MODE_COLORS = {**{m.name: m.color for m in MODES.values()},
               "transformers:cached": "#56B4E9", "transformers:no-cache": "#000000",
               "transformers:dynamic": "#CC79A7", "transformers:static": "#56B4E9"}


def mode_label(name: str, lang: str | None = None) -> str:
    """The name of cache mode (or transformers run) ``name`` in every legend, readout and paragraph (GLOSSARY.md), in
    ``lang`` (default: the course's language now); KeyError for a name that is neither."""
    if name not in MODE_NAMES.texts["zh"]:
        raise KeyError(name)
    return MODE_NAMES.text(name, lang)


class ModeLabels(Mapping):
    """``MODE_LABELS[name]``: :func:`mode_label` read when it is asked for, so a figure built after
    ``kvlab.set_language("en")`` gets the English names (a dict built at import would keep the Chinese ones)."""

    def __getitem__(self, name: str) -> str:
        return mode_label(name)

    def __iter__(self):
        return iter(MODE_NAMES.texts["zh"])

    def __len__(self) -> int:
        return len(MODE_NAMES.texts["zh"])

    def __repr__(self) -> str:
        return f"ModeLabels({dict(self)!r})"


# The same name for the same thing in every legend, readout and paragraph (GLOSSARY.md), in the course's language.
MODE_LABELS = ModeLabels()

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
    """``"时间（ms）"``: the unit always beside the quantity, in full-width brackets (GLOSSARY.md); in English
    ``"time (ms)"``."""
    return STYLE.say("axis_title", name=name, unit=unit) if unit else name


WIDE = 980  # px: side-by-side panels need a fixed width (a FigureWidget otherwise defaults to 700)


def apply_template(fig: go.Figure, title: str, height: int, legend_below: bool = False) -> go.Figure:
    """Template, a title above the subplot titles, and (optionally) the legend under the x-axis titles."""
    fig.update_layout(template=TEMPLATE_NAME, height=height, width=WIDE, margin=dict(t=95),
                      title=dict(text=title, y=0.98, yref="container", yanchor="top"))
    if legend_below:
        fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.3, x=0), margin=dict(b=140),
                          height=height + 60)
    return fig


# -- figures rebuilt on every key press, without plotly's per-property validation -------------------------
@functools.lru_cache(maxsize=1)
def _template_json() -> str:
    return json.dumps(pio.templates[TEMPLATE_NAME].to_plotly_json())


def quick_figure(data: list[dict], layout: dict) -> go.Figure:
    """A figure from plain trace and layout dicts, the kvlab template merged in as JSON, built without plotly's
    per-property validation (a tenth of the time): for the builders a slider redraws on every key press.
    ``tests/test_lesson_decode.py`` checks that validated plotly accepts what they build."""
    return go.Figure({"data": data, "layout": {**layout, "template": json.loads(_template_json())}}, _validate=False)


@functools.lru_cache(maxsize=8)
def _grid_json(cols: int, horizontal_spacing: float, column_widths: tuple | None) -> str:
    from plotly.subplots import make_subplots  # slow (about 50 ms): once per grid, its layout kept as JSON

    fig = make_subplots(rows=1, cols=cols, horizontal_spacing=horizontal_spacing,
                        column_widths=list(column_widths) if column_widths else None,
                        subplot_titles=[f"title {i}" for i in range(cols)])
    layout = fig.layout.to_plotly_json()
    layout.pop("template", None)  # plotly's default: quick_figure puts kvlab's in
    return json.dumps(layout)


@functools.lru_cache(maxsize=8)
def _scale_json(name: str) -> str:
    from plotly.colors import get_colorscale

    return json.dumps(get_colorscale(name))


def named_scale(name: str) -> list:
    """A named colour scale as the list validated plotly would send (plotly.js's own scale of the same name can
    run the other way): for :func:`quick_figure`."""
    return json.loads(_scale_json(name))


def grid_layout(titles: list[str], horizontal_spacing: float, column_widths: tuple | None = None) -> dict:
    """The layout ``make_subplots(rows=1, cols=len(titles), ...)`` gives (axes' domains and anchors, the
    subplot titles as annotations), as a dict to fill in: ``xaxis``, ``xaxis2``, ``yaxis``, ``yaxis2`` ..."""
    layout = json.loads(_grid_json(len(titles), horizontal_spacing, column_widths))
    for note, text in zip(layout["annotations"], titles):
        note["text"] = text
    return layout


def template_layout(title: str, height: int) -> dict:
    """What :func:`apply_template` sets (without a legend below), as layout entries for :func:`quick_figure`."""
    return dict(height=height, width=WIDE, margin=dict(t=95),
                title=dict(text=title, y=0.98, yref="container", yanchor="top"))
