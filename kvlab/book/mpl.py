"""The course's plotly figures drawn again with matplotlib, for print (handouts) and slides (PNG, SVG).

One renderer for the few things the course's plot builders use: ``scatter`` (lines, markers, text, steps,
fills), ``bar`` (vertical and horizontal, a base, grouped or stacked) and ``heatmap`` traces; subplots laid out by
their axis domains, secondary y axes, log and reversed axes, categories, annotations, lines and rectangles. It reads
the figure's JSON (what the page draws), so no figure's drawing logic is written twice: the plot builders stay the
one home of each figure. A figure with anything else raises :class:`Unsupported` (the handout then picks another).

Chinese labels need a CJK font: :func:`cjk_font` finds one (Noto Sans CJK and the like) and registers it with
matplotlib; without one, :func:`setup` says so once and labels show missing-glyph boxes.
"""
from __future__ import annotations

import base64
import html
import re
import warnings
from functools import cache

import numpy as np

CJK_NAMES = ("Noto Sans CJK SC", "Noto Sans CJK", "Source Han Sans SC", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei",
             "Droid Sans Fallback", "Noto Sans SC", "SimHei", "Microsoft YaHei", "PingFang SC")
DPI = 100  # plotly sizes are in CSS pixels; the PNGs are written at 2x this


class Unsupported(ValueError):
    """The figure uses a trace type or feature this renderer does not draw."""


@cache
def cjk_font() -> str | None:
    """The family name of a CJK font matplotlib can use (registered from the system's font files), or None."""
    from matplotlib import font_manager

    known = {f.name for f in font_manager.fontManager.ttflist}
    for name in CJK_NAMES:
        if name in known:
            return name
    for path in font_manager.findSystemFonts():
        if re.search(r"cjk|wqy|wenquanyi|droidsansfallback|sourcehan|notosanssc", path, re.I):
            try:
                font_manager.fontManager.addfont(path)
            except Exception:  # a font file matplotlib cannot read
                continue
    known = {f.name for f in font_manager.fontManager.ttflist}
    return next((n for n in CJK_NAMES if n in known), None)


@cache
def setup() -> str | None:
    """matplotlib for print: no display, a CJK font first in the fallback list (said once when there is none),
    text kept as text in PDF and as paths in SVG. Returns the CJK family, or None."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    family = cjk_font()
    if family is None:
        print("kvlab.book: 没有找到中文字体（CJK font），讲义图里的中文会显示成方框。"
              "No CJK font found (install fonts-noto-cjk): Chinese labels in the handout figures will show boxes.")
    plt.rcParams.update({
        "font.family": ["DejaVu Sans"] + ([family] if family else []),  # a list: glyph by glyph fallback
        "axes.unicode_minus": False, "pdf.fonttype": 42, "svg.fonttype": "path",
        "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.color": "#e5e5e5",
        "axes.axisbelow": True, "font.size": 9, "legend.fontsize": 8, "legend.frameon": False,
    })
    return family


# -- values -------------------------------------------------------------------------------------------------------
def values(v):
    """A plotly data array as a list or numpy array: typed arrays (``{"dtype", "bdata", "shape"}``) decoded."""
    if isinstance(v, dict) and "bdata" in v:
        arr = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        if "shape" in v:
            shape = [int(n) for n in str(v["shape"]).split(",")] if isinstance(v["shape"], str) else v["shape"]
            arr = arr.reshape(shape)
        return arr
    return v


def numbers(v) -> np.ndarray | None:
    """An array of floats (None -> NaN), or None when the values are not numbers (categories)."""
    v = values(v)
    if v is None:
        return None
    if isinstance(v, np.ndarray):
        return v.astype(float)
    if all(x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)) for x in v):
        return np.array([np.nan if x is None else x for x in v], dtype=float)
    return None


def plain(text) -> str:
    """plotly's small HTML (``<b>``, ``<br>``, ``<sup>``, entities) as plain text lines."""
    if text is None:
        return ""
    text = re.sub(r"<br\s*/?>", "\n", str(text), flags=re.I)
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def color(c, default="#444444"):
    """A plotly colour (name, #hex, rgb(), rgba()) as a matplotlib colour."""
    if c is None:
        return default
    if isinstance(c, str):
        m = re.fullmatch(r"\s*rgba?\(([^)]*)\)\s*", c)
        if m:
            parts = [float(p) for p in m.group(1).split(",")]
            rgb = [p / 255 for p in parts[:3]]
            return (*rgb, parts[3] if len(parts) > 3 else 1.0)
        return c
    return default


def colors(c, n: int, default):
    """One colour per point (a list, a typed array of numbers is not a colour list) or the same for all."""
    c = values(c)
    if isinstance(c, (list, tuple)):
        return [color(x, default) for x in c] + [default] * (n - len(c))
    return [color(c, default)] * n


DASHES = {"dash": (0, (5, 3)), "dot": (0, (1, 2)), "dashdot": (0, (5, 2, 1, 2)), "longdash": (0, (9, 3)),
          "solid": "-", None: "-"}
SYMBOLS = {"circle": "o", "square": "s", "diamond": "D", "triangle-up": "^", "triangle-down": "v", "x": "x",
           "cross": "P", "star": "*", "line-ew": "_", "line-ew-open": "_", "line-ns": "|", "line-ns-open": "|",
           "circle-open": "o", "square-open": "s", "diamond-open": "D", None: "o"}


# -- axes -----------------------------------------------------------------------------------------------------------
def _axis_key(ref: str, letter: str) -> str:
    """"x2" -> "xaxis2", "y" -> "yaxis"."""
    return f"{letter}axis{ref[1:]}"


class Canvas:
    """The matplotlib figure and one Axes per plotly (x axis, y axis) pair, placed by the axes' domains."""

    def __init__(self, spec: dict, width_px: float, height_px: float):
        import matplotlib.pyplot as plt

        self.layout = spec.get("layout", {})
        self.fig = plt.figure(figsize=(width_px / DPI, height_px / DPI), dpi=DPI)
        margin = self.layout.get("margin", {})
        self.left = margin.get("l", 70) / width_px
        self.right = 1 - margin.get("r", 30) / width_px
        self.bottom = margin.get("b", 60) / height_px
        self.top = 1 - margin.get("t", 70) / height_px
        self.axes: dict = {}
        self.categories: dict[str, list] = {}  # axis key ("xaxis2") -> its categories, in order of appearance

    def positions(self, axis_key: str, vals) -> np.ndarray:
        """Numbers where ``vals`` go on an axis: the numbers themselves, or each category's index."""
        num = numbers(vals)
        if num is not None:
            return num
        cats = self.categories.setdefault(axis_key, [])
        for v in vals:
            if v not in cats:
                cats.append(v)
        return np.array([cats.index(v) for v in vals], dtype=float)

    def paper(self, x: float, y: float) -> tuple[float, float]:
        """plotly paper coordinates (0..1 inside the margins) -> matplotlib figure coordinates."""
        return self.left + x * (self.right - self.left), self.bottom + y * (self.top - self.bottom)

    def ax(self, xref: str = "x", yref: str = "y"):
        key = (xref, yref)
        if key in self.axes:
            return self.axes[key]
        xa = self.layout.get(_axis_key(xref, "x"), {})
        ya = self.layout.get(_axis_key(yref, "y"), {})
        base_y = ya.get("overlaying")
        if base_y:  # a secondary y axis: twin of the axes it overlays
            ax = self.ax(xref, base_y).twinx()
            ax.grid(False)
            ax.spines["right"].set_visible(True)
        else:
            x0, x1 = xa.get("domain", [0, 1])
            y0, y1 = ya.get("domain", [0, 1])
            (fx0, fy0), (fx1, fy1) = self.paper(x0, y0), self.paper(x1, y1)
            ax = self.fig.add_axes([fx0, fy0, fx1 - fx0, fy1 - fy0])
        self.axes[key] = ax
        self._style(ax, xa, "x")
        self._style(ax, ya, "y")
        return ax

    def _style(self, ax, axis: dict, letter: str) -> None:
        if axis.get("type") == "log":
            (ax.set_xscale if letter == "x" else ax.set_yscale)("log")
        title = plain((axis.get("title") or {}).get("text"))
        if title:
            (ax.set_xlabel if letter == "x" else ax.set_ylabel)(title)
        if axis.get("showgrid") is False:
            ax.grid(False, axis=letter)
        if axis.get("showticklabels") is False:
            ax.tick_params(axis=letter, labelbottom=False, labelleft=False)

    def finish(self) -> None:
        """Ranges and reversed axes (after the data, so categories are known)."""
        from matplotlib.ticker import NullFormatter

        for (xref, yref), ax in self.axes.items():
            for letter, ref in (("x", xref), ("y", yref)):
                axis = self.layout.get(_axis_key(ref, letter), {})
                rng = axis.get("range")
                if rng and None not in rng:
                    lo, hi = rng
                    if axis.get("type") == "log":
                        lo, hi = 10 ** lo, 10 ** hi
                    if not isinstance(lo, str):
                        (ax.set_xlim if letter == "x" else ax.set_ylim)(lo, hi)
                if axis.get("autorange") == "reversed":
                    (ax.invert_xaxis if letter == "x" else ax.invert_yaxis)()
                cats = self.categories.get(_axis_key(ref, letter))
                ticks = (ax.set_xticks if letter == "x" else ax.set_yticks)
                if cats:
                    ticks(range(len(cats)), [plain(c) for c in cats])
                elif axis.get("tickvals") is not None:
                    tv = values(axis["tickvals"])
                    ticks(list(tv), [plain(t) for t in axis.get("ticktext", tv)])
                    if axis.get("type") == "log":
                        getattr(ax, f"{letter}axis").set_minor_formatter(NullFormatter())


# -- traces ---------------------------------------------------------------------------------------------------------
def _scatter(c: Canvas, t: dict, palette_color) -> None:
    ax = c.ax(t.get("xaxis", "x"), t.get("yaxis", "y"))
    y = values(t.get("y", []))
    x = values(t.get("x")) if t.get("x") is not None else list(range(len(y)))
    mode = t.get("mode", "lines+markers" if len(y) < 20 else "lines")
    line, marker = t.get("line", {}), t.get("marker", {})
    col = color(line.get("color") or (marker.get("color") if isinstance(marker.get("color"), str) else None),
                palette_color)
    label = plain(t.get("name")) if t.get("showlegend", True) and t.get("name") else None
    xs = c.positions(_axis_key(t.get("xaxis", "x"), "x"), x)
    ys = c.positions(_axis_key(t.get("yaxis", "y"), "y"), y)
    if "lines" in mode:
        ax.plot(xs, ys, color=col, linestyle=DASHES.get(line.get("dash"), "-"), linewidth=line.get("width", 2) * 0.75,
                drawstyle="steps-post" if line.get("shape") == "hv" else "default", label=label)
        label = None
    if t.get("fill") in ("tozeroy", "tonexty"):
        ax.fill_between(xs, ys, 0, color=color(t.get("fillcolor"), col), alpha=0.25 if not t.get("fillcolor") else 1)
    if "markers" in mode:
        sizes = values(marker.get("size", 6))
        size = (np.asarray(sizes, dtype=float) * 0.9) ** 2 if isinstance(sizes, (list, np.ndarray)) else (sizes * 0.9) ** 2
        symbol = marker.get("symbol")
        mark = SYMBOLS.get(symbol, "o")
        mcolor = colors(marker.get("color"), len(ys), col) if not isinstance(marker.get("color"), str) \
            else color(marker["color"])
        outline = marker.get("line") or {}
        style = dict(s=size, marker=mark, label=label, zorder=3)
        if mark in ("_", "|", "x", "+"):  # markers drawn as lines: their colour is the line's
            style.update(color=mcolor, linewidths=1.5)
        elif isinstance(symbol, str) and symbol.endswith("-open"):
            style.update(facecolors="none", edgecolors=mcolor, linewidths=outline.get("width", 1.2))
        else:
            style.update(facecolors=mcolor, edgecolors=color(outline.get("color"), "none"),
                         linewidths=outline.get("width", 0))
        ax.scatter(xs, ys, **style)
    if "text" in mode:
        texts = t.get("text")
        texts = texts if isinstance(texts, list) else [texts] * len(ys)
        pos = t.get("textposition", "middle center")
        va = "bottom" if "top" in pos else "top" if "bottom" in pos else "center"
        for xi, yi, s in zip(xs, ys, texts):
            if s:
                ax.annotate(plain(s), (xi, yi), ha="center", va=va, fontsize=8,
                            xytext=(0, 4 if va == "bottom" else -4 if va == "top" else 0), textcoords="offset points")


def _bar(c: Canvas, t: dict, palette_color, slot: tuple[int, int]) -> None:
    ax = c.ax(t.get("xaxis", "x"), t.get("yaxis", "y"))
    horizontal = t.get("orientation") == "h"
    pos, size = (t.get("y"), t.get("x")) if horizontal else (t.get("x"), t.get("y"))
    size = numbers(size)
    pos = values(pos) if pos is not None else list(range(len(size)))
    n = len(size)
    base = numbers(t.get("base")) if isinstance(t.get("base"), list) or isinstance(t.get("base"), dict) else None
    base = base if base is not None else np.full(n, float(t.get("base") or 0))
    marker = t.get("marker", {})
    fill = colors(marker.get("color"), n, palette_color)
    edge = marker.get("line") or {}
    edges = colors(edge.get("color"), n, "none")
    widths = values(edge.get("width", 0))
    widths = list(widths) if isinstance(widths, (list, np.ndarray)) else [widths] * n
    k, of = slot
    where = c.positions(_axis_key(t.get("yaxis", "y"), "y") if horizontal else _axis_key(t.get("xaxis", "x"), "x"), pos)
    width = float(t.get("width") or 0.8) / of
    where = where + (k - (of - 1) / 2) * width
    label = plain(t.get("name")) if t.get("showlegend", True) and t.get("name") else None
    draw = ax.barh if horizontal else ax.bar
    bars = draw(where, size, width if not t.get("width") else float(t["width"]), base, color=fill,
                edgecolor=edges, linewidth=[w * 0.75 for w in widths], label=label)
    texts = t.get("text")
    if isinstance(texts, list):
        for bar, s in zip(bars, texts):
            if s:
                cx, cy = bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height() / 2
                ax.text(cx, cy, plain(s), ha="center", va="center", fontsize=7, color="white")


def _colormap(scale):
    from matplotlib.colors import LinearSegmentedColormap

    if isinstance(scale, list) and scale:
        return LinearSegmentedColormap.from_list("plotly", [(float(s), color(c)) for s, c in scale])
    names = {"Blues": "Blues", "Viridis": "viridis", "RdBu": "RdBu", "Reds": "Reds", "Greys": "Greys"}
    return names.get(scale, "viridis")


def _heatmap(c: Canvas, t: dict) -> None:
    ax = c.ax(t.get("xaxis", "x"), t.get("yaxis", "y"))
    z = values(t.get("z"))
    z = np.array([[np.nan if v is None else v for v in row] for row in z], dtype=float) if isinstance(z, list) \
        else np.asarray(z, dtype=float)
    if t.get("reversescale"):
        raise Unsupported("heatmap: reversescale")
    image = ax.imshow(z, aspect="auto", origin="lower", cmap=_colormap(t.get("colorscale")),
                      vmin=t.get("zmin"), vmax=t.get("zmax"), interpolation="nearest")
    for letter, key in (("x", "x"), ("y", "y")):
        labels = t.get(key)
        if isinstance(labels, list) and len(labels) == z.shape[1 if key == "x" else 0] and len(labels) <= 40:
            (ax.set_xticks if letter == "x" else ax.set_yticks)(range(len(labels)), [plain(s) for s in labels])
    ax.grid(False)
    if t.get("showscale", True):
        c.fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)


# -- layout decorations ---------------------------------------------------------------------------------------------
def _ref_transform(c: Canvas, xref: str, yref: str):
    """A matplotlib transform for plotly (xref, yref): paper, "x domain", or data coordinates."""
    from matplotlib.transforms import blended_transform_factory

    def one(ref, letter):
        if ref == "paper":
            return None
        axis_ref = ref.split(" ")[0]
        ax = c.ax(axis_ref, "y") if letter == "x" else c.ax("x" + axis_ref[1:], axis_ref)
        if ref.endswith("domain"):
            return ax.transAxes
        return ax.transData

    tx, ty = one(xref, "x"), one(yref, "y")
    fig_t = c.fig.transFigure
    if tx is None and ty is None:
        return None
    return blended_transform_factory(tx or fig_t, ty or fig_t)


def _is_log(c: Canvas, ref: str, letter: str) -> bool:
    if ref == "paper" or ref.endswith("domain"):
        return False
    return c.layout.get(_axis_key(ref.split(" ")[0], letter), {}).get("type") == "log"


def _annotations(c: Canvas) -> None:
    for a in c.layout.get("annotations", []):
        text = plain(a.get("text"))
        if not text:
            continue
        xref, yref = a.get("xref", "x"), a.get("yref", "y")
        x, y = a.get("x", 0), a.get("y", 0)
        ha = {"left": "left", "right": "right"}.get(a.get("xanchor"), "center")
        va = {"top": "top", "bottom": "bottom"}.get(a.get("yanchor"), "center")
        font = a.get("font") or {}
        kw = dict(ha=ha, va=va, fontsize=min(font.get("size", 11), 13) * 0.8, color=color(font.get("color"), "#333"))
        transform = _ref_transform(c, xref, yref)
        if transform is None:
            c.fig.text(*c.paper(x, y), text, **kw)
            continue
        if not (isinstance(x, (int, float)) and isinstance(y, (int, float))):
            continue
        # plotly places an annotation on a log axis by the value's log10
        x = 10 ** x if _is_log(c, xref, "x") else x
        y = 10 ** y if _is_log(c, yref, "y") else y
        fx, fy = c.fig.transFigure.inverted().transform(transform.transform((x, y)))
        if -0.5 < fx < 1.5 and -0.5 < fy < 1.5:  # (one far outside would stretch the saved picture)
            c.fig.text(x, y, text, transform=transform, **kw)


def _shapes(c: Canvas) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    for s in c.layout.get("shapes", []):
        transform = _ref_transform(c, s.get("xref", "x"), s.get("yref", "y"))
        if transform is None or s.get("type") not in ("line", "rect"):
            continue
        line = s.get("line") or {}
        kw = dict(transform=transform, color=color(line.get("color"), "#888"), linewidth=line.get("width", 1) * 0.75,
                  linestyle=DASHES.get(line.get("dash"), "-"), clip_on=False)
        x0, x1, y0, y1 = (s.get(k) for k in ("x0", "x1", "y0", "y1"))
        if not all(isinstance(v, (int, float)) for v in (x0, x1, y0, y1)):
            continue
        if s["type"] == "line":
            c.fig.add_artist(Line2D([x0, x1], [y0, y1], **kw))
        else:
            c.fig.add_artist(Rectangle((x0, y0), x1 - x0, y1 - y0, transform=transform, clip_on=False,
                                       facecolor=color(s.get("fillcolor"), "none"), alpha=s.get("opacity", 1),
                                       edgecolor=kw["color"], linewidth=kw["linewidth"]))


def render(spec: dict, width_px: float | None = None, height_px: float | None = None):
    """A matplotlib Figure drawn from a plotly figure's JSON (``{"data", "layout"}``)."""
    setup()
    layout = spec.get("layout", {})
    width_px = width_px or layout.get("width") or 900
    height_px = height_px or layout.get("height") or 450
    c = Canvas(spec, width_px, height_px)
    palette = (layout.get("colorway") or (layout.get("template") or {}).get("layout", {}).get("colorway")
               or ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"])
    traces = spec.get("data", [])
    bars = [i for i, t in enumerate(traces) if t.get("type") == "bar"]
    grouped = layout.get("barmode", "group") == "group"
    for i, t in enumerate(traces):
        kind = t.get("type", "scatter")
        if t.get("visible") in (False, "legendonly"):
            continue
        col = palette[i % len(palette)]
        if kind in ("scatter", "scattergl"):
            _scatter(c, t, col)
        elif kind == "bar":
            same = [j for j in bars if (traces[j].get("xaxis"), traces[j].get("yaxis")) == (t.get("xaxis"), t.get("yaxis"))]
            _bar(c, t, col, (same.index(i), len(same)) if grouped else (0, 1))
        elif kind == "heatmap":
            _heatmap(c, t)
        else:
            raise Unsupported(f"trace type {kind!r}")
    if not c.axes:
        c.ax()
    c.finish()
    _shapes(c)
    _annotations(c)
    title = plain((layout.get("title") or {}).get("text"))
    if title:
        c.fig.suptitle(title, x=c.left, ha="left", y=1 - 8 / height_px, va="top", fontsize=11, fontweight="bold")
    handles = [h for ax in c.axes.values() for h in ax.get_legend_handles_labels()[0]]
    if handles and layout.get("showlegend", True):
        labels = [lab for ax in c.axes.values() for lab in ax.get_legend_handles_labels()[1]]
        legend = layout.get("legend") or {}
        if legend.get("orientation") == "h" or (legend.get("x") or 0) <= 1:  # below the plot
            cols = max(1, min(len(labels), int(90 // max(len(lab) for lab in labels))))
            below = min(ax.get_position().y0 for ax in c.axes.values()) - 60 / height_px  # under the x titles
            c.fig.legend(handles, labels, loc="upper center", ncol=cols, bbox_to_anchor=(0.5, below))
        else:  # to the right of the plot, as plotly's default
            c.fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(c.right + 0.01, c.top))
    return c.fig


def save(spec: dict, stem, formats=("png", "svg")) -> list:
    """Draw ``spec`` and write ``<stem>.<format>`` for each format (PNG at 2x); the files written."""
    import matplotlib.pyplot as plt

    fig = render(spec)
    written = []
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*missing from font.*")  # a missing glyph fails loudly
        for fmt in formats:
            path = f"{stem}.{fmt}"
            fig.savefig(path, dpi=DPI * 2 if fmt == "png" else DPI, bbox_inches="tight", pad_inches=0.15)
            written.append(path)
    plt.close(fig)
    return written
