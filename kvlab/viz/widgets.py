"""Thin ipywidgets wiring: controls -> a pure render function -> figures and numbers.

Figures are plotly ``FigureWidget``s in JupyterLab (plotly >= 6 needs ``anywidget``);
on Colab, or wherever ``anywidget`` is missing, each update re-renders a plain figure
inside an ``Output`` widget. Errors from bad values become a message in the panel,
never a traceback.
"""
from __future__ import annotations

import html
import sys
import traceback
from dataclasses import dataclass, field
from typing import Callable

import ipywidgets as W
import plotly.graph_objects as go
from IPython.display import display

from ..inputs import InputError

# Argument names in API errors -> what the learner sees on the control.
FRIENDLY_NAMES = {
    "n_layer": "层数 L", "batch_size": "批次 B", "n_kv_head": "KV 头数 H", "n_head": "注意力头数",
    "seq_len": "序列长度 S", "head_dim": "头维度 D", "dtype": "数据类型", "max_new_tokens": "生成 token 数",
    "lengths": "序列长度列表",
}

# Greys out what a bad value made stale (see Panel.refresh); injected once per panel.
# (the class goes on the panel: plotly's FigureWidget does not follow class changes made after it is shown)
STALE_CSS = ("<style>.kvlab-panel.kvlab-stale .kvlab-readout,.kvlab-panel.kvlab-stale .kvlab-figure"
             "{opacity:0.3;filter:grayscale(1);transition:opacity .1s}</style>")
STALE_NOTE = "下方的数字和图仍是上一次有效输入的结果（已变灰），改成有效值后会立即更新。"


def on_colab() -> bool:
    """True inside a Google Colab kernel."""
    return "google.colab" in sys.modules


def figure_mode() -> str:
    """"widget" (plotly FigureWidget) or "rerender" (plain figure redrawn in an Output)."""
    if on_colab():
        return "rerender"
    try:
        import anywidget  # noqa: F401
    except ImportError:
        return "rerender"
    return "widget"


class FigureView:
    """One figure on screen that can be replaced by a newly built one."""

    def __init__(self, fig: go.Figure, mode: str | None = None, css_class: str | None = None):
        self.mode = mode or figure_mode()
        self.figure = fig
        self.updates = 0
        if self.mode == "widget":
            self.widget = go.FigureWidget(fig)
        else:
            self.widget = W.Output()
            self._render()
        if css_class:
            self.widget.add_class(css_class)
        self.widget.add_class("kvlab-figure")

    def _render(self) -> None:
        self.widget.clear_output(wait=True)
        with self.widget:
            display(self.figure)

    def update(self, fig: go.Figure) -> None:
        self.figure = fig
        self.updates += 1
        if self.mode != "widget":
            self._render()
            return
        w = self.widget
        with w.batch_update():
            if len(w.data) != len(fig.data) or any(a.type != b.type for a, b in zip(w.data, fig.data)):
                w.data = ()
                w.add_traces(list(fig.data))
            else:
                for old, new in zip(w.data, fig.data):
                    old.update(new.to_plotly_json(), overwrite=True)
            w.layout = fig.layout


@dataclass
class View:
    """What a render function returns: figures (in a fixed order), an HTML readout, and optionally the
    typed result the render computed (``Panel.result`` keeps the last one, for the notebook's asserts)."""

    figures: list = field(default_factory=list)
    html: str = ""
    result: object = None


def message_html(text: str, kind: str = "warn") -> str:
    colors = {"warn": ("#fff4e5", "#8a4b00"), "bug": ("#fdecea", "#8a1c1c"), "info": ("#eef6fc", "#0b4f7c")}
    bg, fg = colors[kind]
    return (f'<div class="kvlab-msg kvlab-msg-{kind}" style="background:{bg};color:{fg};padding:6px 10px;'
            f'border-radius:4px;margin:4px 0">{text}</div>')


def explain_error(exc: Exception) -> str:
    """A learner-facing line for a ValueError: an :class:`~kvlab.inputs.InputError` as it is (Chinese,
    naming the control); an API error with its argument name made friendly."""
    if isinstance(exc, InputError):
        return f"⚠️ {html.escape(str(exc))}"
    text = str(exc)
    first = text.split(":", 1)[0].split(" ", 1)[0]
    label = FRIENDLY_NAMES.get(first)
    prefix = f"「{label}」" if label else ""
    return f"⚠️ 输入无效{prefix}：{html.escape(text)}"


class Panel:
    """Controls wired to ``render(**values) -> View``; updates figures and the readout on change."""

    def __init__(self, controls: dict, render: Callable[..., View], css_class: str = "", mode: str | None = None,
                 layout: str = "vertical", extra=(), button: W.Button | None = None, columns: int = 4):
        """``extra`` widgets are shown but not observed (e.g. a Play button linked to a slider): a list goes
        before the controls, a dict ``{control name: widget}`` puts each widget just before that control.
        With a ``button``, changes wait for a click instead of re-rendering at once (costly measurements).
        ``layout``: "vertical", "horizontal" (one wrapping row) or "grid" (rows of ``columns`` cells)."""
        self.controls = controls
        self.render = render
        self.button = button
        self.message = W.HTML(layout=W.Layout(width="100%"))
        self.style = W.HTML(STALE_CSS, layout=W.Layout(display="none"))
        self.readout = W.HTML(layout=W.Layout(width="100%"))
        self.readout.add_class("kvlab-readout")
        self.error: str | None = None
        first = render(**self.values())
        self.result = first.result
        self.views = [FigureView(f, mode) for f in first.figures]
        self.readout.value = first.html
        for name, control in controls.items():
            if button is None:
                control.observe(self._on_change, names="value")
            control.add_class(f"kvlab-control-{name}")
        if button is not None:
            button.on_click(self._on_click)
            button.add_class("kvlab-run")
        before = extra if isinstance(extra, dict) else {}
        items = [] if isinstance(extra, dict) else list(extra)
        for name, control in controls.items():
            items += [before[name], control] if name in before else [control]
        items += [button] if button is not None else []
        if layout == "grid":  # rows of ``columns`` cells: e.g. a caption and three controls per row
            control_box = W.GridBox(items, layout=W.Layout(
                grid_template_columns=f"repeat({columns}, max-content)", grid_gap="2px 16px", align_items="center"))
        elif layout == "horizontal":
            control_box = W.HBox(items, layout=W.Layout(flex_flow="row wrap", align_items="center"))
        else:
            control_box = W.VBox(items)
        self.widget = W.VBox([self.style, control_box, self.message, self.readout, *[v.widget for v in self.views]])
        if css_class:
            self.widget.add_class(css_class)
        self.widget.add_class("kvlab-panel")

    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items()}

    def refresh(self) -> None:
        try:
            view = self.render(**self.values())
            for fig_view, fig in zip(self.views, view.figures):
                fig_view.update(fig)
        except ValueError as exc:
            self.error = str(exc)
            self.message.value = message_html(f"{explain_error(exc)}<br>{STALE_NOTE}", "warn")
            self._mark_stale(True)
            return
        except Exception as exc:  # a bug: say so in the panel (browser tests look for it), keep the kernel alive
            self.error = repr(exc)
            detail = html.escape("".join(traceback.format_exception_only(type(exc), exc)).strip())
            self.message.value = message_html(f"内部错误（这是 kvlab 的 bug，请报告）：{detail}<br>{STALE_NOTE}",
                                              "bug")
            self._mark_stale(True)
            return
        self.error = None
        self.message.value = ""
        self.readout.value = view.html
        self.result = view.result
        self._mark_stale(False)

    @property
    def stale(self) -> bool:
        """True while the readout and figures show an earlier, valid setting (greyed out)."""
        return "kvlab-stale" in self.widget._dom_classes

    def _mark_stale(self, stale: bool) -> None:
        if stale and not self.stale:
            self.widget.add_class("kvlab-stale")
        elif not stale and self.stale:
            self.widget.remove_class("kvlab-stale")

    def _on_change(self, _change) -> None:
        self.refresh()

    def _on_click(self, _button) -> None:
        self.button.disabled = True
        try:
            self.refresh()
        finally:
            self.button.disabled = False

    def set(self, **values) -> None:
        """Change controls programmatically (as a learner would by dragging them)."""
        for name, value in values.items():
            self.controls[name].value = value

    def _ipython_display_(self):
        display(self.widget)


def int_slider(description: str, value: int, min: int, max: int, step: int = 1, continuous: bool = False,
               width: str = "420px") -> W.IntSlider:
    return W.IntSlider(value=value, min=min, max=max, step=step, description=description,
                       continuous_update=continuous, style={"description_width": "initial"},
                       layout=W.Layout(width=width))


def int_box(description: str, value: int, width: str = "240px") -> W.IntText:
    """A free-entry integer box: any value can be typed, so the render must validate it."""
    return W.IntText(value=value, description=description, style={"description_width": "initial"},
                     layout=W.Layout(width=width))


def dropdown(description: str, options, value, width: str = "300px") -> W.Dropdown:
    return W.Dropdown(options=options, value=value, description=description,
                      style={"description_width": "initial"}, layout=W.Layout(width=width))


def play_slider(description: str, value: int, min: int, max: int, interval_ms: int = 700):
    """A Play button linked to a slider (the slider is the value)."""
    slider = int_slider(description, value, min, max, continuous=True)
    play = W.Play(value=value, min=min, max=max, step=1, interval=interval_ms, description="播放")
    play.link = W.jslink((play, "value"), (slider, "value"))  # in the browser: no kernel round trip per frame
    play.add_class("kvlab-play")
    return play, slider
