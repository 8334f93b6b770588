"""Thin ipywidgets wiring: controls -> a pure render function -> figures and numbers.

Figures are plotly ``FigureWidget``s in JupyterLab (plotly >= 6 needs ``anywidget``);
on Colab, or wherever ``anywidget`` is missing, each update re-renders a plain figure
inside an ``Output`` widget. Errors from bad values become a message in the panel,
never a traceback.

Keeping up with the hand (``python tests/ui_latency.py`` measures it in a real browser): an update
sends the readout first, then for each figure only the properties that changed, in one comm message
(:func:`figure_delta`, :class:`PanelFigureWidget`); a slider's next step is rendered ahead while the
kernel is idle (``PREFETCH``; a panel's browser-drawn sliders: ``kvlab.viz.browser_steps``; both are clients of
its :class:`~kvlab.viz.browser_steps.States`, the one mechanism that draws states ahead). Values that arrive faster than the panel redraws are coalesced by
ipywidgets' front end (one message in flight per control, the latest value sent next), so a drag is
rendered a few times, always ending on the value the slider shows.
"""
from __future__ import annotations

import asyncio
import copy
import html
import os
import sys
import traceback
import weakref
from dataclasses import dataclass, field
from typing import Callable

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go
from IPython.display import display
from plotly.basedatatypes import Undefined
from plotly.serializers import custom_serializers
from traitlets import Dict, TraitError

from ..assets import AssetError
from ..inputs import InputError
from .browser_steps import AHEAD_DELAY_S, Axis, Budget, RenderAhead, States
from .phrases import WIDGETS
from .plotly_code import esm, plotly_code, plotly_version

# Argument names in API errors -> what the learner sees on the control (shown in the course's language:
# friendly_name(); this table is the Chinese one, kept for outside code).
FRIENDLY_NAMES = {key.removeprefix("name."): text for key, text in WIDGETS.texts["zh"].items()
                  if key.startswith("name.")}

# Greys out what a bad value made stale (see Panel.refresh); injected once per panel.
# (the class goes on the panel: plotly's FigureWidget does not follow class changes made after it is shown)
STALE_CSS = ("<style>.kvlab-panel.kvlab-stale .kvlab-readout,.kvlab-panel.kvlab-stale .kvlab-figure"
             "{opacity:0.3;filter:grayscale(1);transition:opacity .1s}</style>")
# What a panel says, in the course's language when it says it (kvlab.viz.phrases.WIDGETS); these constants are the
# Chinese texts, kept for outside code and tests.
RERUN_NOTE = WIDGETS.text("rerun_note", "zh")
STALE_NOTE = WIDGETS.text("stale_note", "zh")

# Pre-rendering: after a learner moves a slider, the panel renders the slider's next value (one more step
# the same way) while the kernel is idle, so the next key press or Play frame shows at once. Only for
# changes made in the browser, only for panels whose renders are quick, never for Panel.set()/refresh().
PREFETCH = True
PREFETCH_MAX_MS = 200.0  # a control whose renders take longer (the quickest of its last 3), or once took 2.5
                         # times as long, is not pre-rendered: that would hold up the next key press, and slow
                         # renders are often measurements (a first visit measures, later ones are cached)
PREFETCH_DELAY_S = AHEAD_DELAY_S  # wait this long after showing a value before pre-rendering (a fast drag goes on)
FOLLOW_DELAY_S = 0.01    # a panel that follows another's controls redraws this long after a change made in the browser


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


def _same(a, b) -> bool:
    """Deep equality for plotly property values: numpy arrays, lists, tuples, dicts, numbers (NaN equals NaN)."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
            return False
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return False
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return a == b


def _changes(old: dict, new: dict) -> dict:
    """Top-level properties of ``new`` that differ from ``old`` (None for a property ``new`` no longer has)."""
    out = {k: v for k, v in new.items() if k not in old or not _same(old[k], v)}
    out.update({k: None for k in old if k not in new})
    return out


@dataclass
class FigureDelta:
    """What turns the figure on screen into a new one: properties of the traces kept in place (by index),
    layout properties, traces deleted from the end and traces appended."""

    figure: go.Figure
    restyle: dict = field(default_factory=dict)      # {property: [value per trace in ``traces``]}
    traces: list = field(default_factory=list)
    relayout: dict = field(default_factory=dict)
    delete: list = field(default_factory=list)
    add: list = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.restyle or self.relayout or self.delete or self.add)


def figure_delta(old: go.Figure, new: go.Figure) -> FigureDelta:
    """The difference between two figures, property by property (pure; raises if ``new`` is not a figure).

    Traces are matched by position while their types agree; the rest are deleted and added. A changed
    property is sent whole (``x``, ``marker``, ``annotations``, ``xaxis``), as a fresh figure would have it."""
    old_data, new_data = old._data, new._data  # plotly's own validated property dicts (not copied)
    keep = 0
    while keep < min(len(old_data), len(new_data)) and old_data[keep].get("type") == new_data[keep].get("type"):
        keep += 1
    delta = FigureDelta(new, relayout=copy.deepcopy(_changes(old._layout, new._layout)),
                        delete=list(range(keep, len(old_data))), add=list(new.data[keep:]))
    per_trace = {i: _changes(old_data[i], new_data[i]) for i in range(keep)}
    per_trace = {i: c for i, c in per_trace.items() if c}
    delta.traces = sorted(per_trace)
    for i in delta.traces:
        for prop, value in per_trace[i].items():
            values = delta.restyle.setdefault(prop, [Undefined] * len(delta.traces))
            values[delta.traces.index(i)] = copy.deepcopy(value)
    return delta


class PanelFigureWidget(go.FigureWidget):
    """A plotly ``FigureWidget`` that sends each change as one comm message and ignores the browser's
    report after every redraw (the full trace defaults, which plotly.py only keeps for introspection
    and answered with another message each time). Its code comes from the kernel's one :class:`PlotlyCode`
    instead of a copy of plotly's bundle per figure."""

    _esm = esm("figure", VERSION=plotly_version())  # js/figure.mjs

    def __init__(self, *args, **kwargs):
        plotly_code()  # opened before the first figure, so its code is on its way first
        super().__init__(*args, **kwargs)

    _js2py_traceDeltas = Dict(allow_none=True).tag(sync=True, echo_update=False, **custom_serializers)
    _js2py_layoutDelta = Dict(allow_none=True).tag(sync=True, echo_update=False, **custom_serializers)

    def _handler_js2py_traceDeltas(self, change):  # replaces plotly's handler (and its reply) by nothing
        pass

    def _handler_js2py_layoutDelta(self, change):
        pass

    def _send_one(self, trait: str, msg: dict) -> None:
        """Set the ``_py2js_*`` message trait and both edit ids in one comm message. plotly.py sends the ids
        and the message separately and then the message again as None; the browser acts on a change of the
        message, so here the trait is reset to None in the kernel only."""
        with self.hold_sync():
            self._last_trace_edit_id += 1
            self._last_layout_edit_id += 1
            setattr(self, trait, {**msg, "trace_edit_id": self._last_trace_edit_id,
                                  "layout_edit_id": self._last_layout_edit_id})
        with self._lock_property(**{trait: None}):
            setattr(self, trait, None)

    def _send_update_msg(self, restyle_data, relayout_data, trace_indexes=None, source_view_id=None):
        self._send_one("_py2js_update", {"style_data": restyle_data, "layout_data": relayout_data,
                                         "style_traces": self._normalize_trace_indexes(trace_indexes),
                                         "source_view_id": source_view_id})

    def _send_addTraces_msg(self, new_traces_data):
        self._send_one("_py2js_addTraces", {"trace_data": new_traces_data})

    def _send_deleteTraces_msg(self, delete_inds):
        self._send_one("_py2js_deleteTraces", {"delete_inds": delete_inds})

    def point_state_at_figure(self) -> None:
        """Make the synced ``_widget_data``/``_widget_layout`` the figure's current (live) properties without
        sending them: plotly.py only sets them at construction, so a browser that reloads the page (and asks
        the kernel for every widget's state) would otherwise draw the first figure and get later changes as
        differences from another one."""
        self._trait_values["_widget_data"] = self._data
        self._trait_values["_widget_layout"] = self._layout

    def _send_restyle_msg(self, restyle_data, trace_indexes=None, source_view_id=None):
        self._send_update_msg(restyle_data, {}, trace_indexes, source_view_id)

    def _send_relayout_msg(self, layout_data, source_view_id=None):
        self._send_update_msg({}, layout_data, None, source_view_id)


class FigureView:
    """One figure on screen that can be replaced by a newly built one.

    In a FigureWidget only what changed is sent (:func:`figure_delta`): one message for the properties of
    the traces and the layout, plus one to delete and one to add traces when their number or types change."""

    def __init__(self, fig: go.Figure, mode: str | None = None, css_class: str | None = None):
        self.mode = mode or figure_mode()
        self.figure = fig
        self.updates = 0
        if self.mode == "kept":  # drawn elsewhere (a panel's browser-drawn steps): only the figure is kept
            self.widget = None
            return
        if self.mode == "widget":
            self.widget = PanelFigureWidget(fig)
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

    def plan(self, fig: go.Figure) -> FigureDelta:
        """What :meth:`apply` will send for ``fig`` (computed without touching the screen)."""
        if not isinstance(fig, go.Figure):
            raise TypeError(f"a render function returned {type(fig).__name__} where a plotly figure belongs")
        if self.mode != "widget":
            return FigureDelta(fig)
        return figure_delta(self.figure, fig)

    def apply(self, delta: FigureDelta) -> None:
        self.figure = delta.figure
        self.updates += 1
        if self.mode == "kept":
            return
        if self.mode != "widget":
            self._render()
            return
        w = self.widget
        if delta.delete:
            w.data = w.data[:delta.delete[0]]
        if delta.restyle or delta.relayout:
            w.plotly_update(restyle_data=delta.restyle, relayout_data=delta.relayout, trace_indexes=delta.traces)
        if delta.add:
            w.add_traces(delta.add)
        w.point_state_at_figure()

    def update(self, fig: go.Figure) -> None:
        self.apply(self.plan(fig))


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


def friendly_name(argument: str) -> str | None:
    """The control an API argument (``seq_len``) stands for, as the learner sees it, in the course's language; None
    for an argument no control shows."""
    key = f"name.{argument}"
    return WIDGETS.say(key) if key in WIDGETS.texts["zh"] else None


def explain_error(exc: Exception) -> str:
    """A learner-facing line for a ValueError, in the course's language: an :class:`~kvlab.inputs.InputError` as it
    is (naming the control); a missing or broken course file (:class:`~kvlab.assets.AssetError`) with how to restore
    it; an API error (English, naming its argument) with the argument's control named."""
    if isinstance(exc, InputError):
        return f"⚠️ {html.escape(str(exc))}"
    if isinstance(exc, AssetError):  # not the learner's input: a course file is missing or broken
        return WIDGETS.say("asset_error", text=html.escape(str(exc)))
    text = str(exc)
    label = friendly_name(text.split(":", 1)[0].split(" ", 1)[0])
    if label:
        return WIDGETS.say("invalid_named", label=label, text=html.escape(text))
    return WIDGETS.say("invalid", text=html.escape(text))


def next_value(control, old, new):
    """The value one step further than ``new`` in the direction ``old`` -> ``new`` (the way a slider is being
    moved or played), or None at the end of its range or for a control without steps."""
    options = getattr(control, "_options_values", None)
    if isinstance(control, W.SelectionSlider) and options:
        try:
            i, j = options.index(old), options.index(new)
        except ValueError:
            return None
        k = j + (1 if j >= i else -1)
        return options[k] if 0 <= k < len(options) else None
    if isinstance(control, (W.IntSlider, W.FloatSlider)) and isinstance(new, (int, float)):
        step = control.step if new >= (old if old is not None else new) else -control.step
        value = new + step
        return value if control.min <= value <= control.max else None
    return None


def recent_run(runs: dict, key, run: Callable[[], object], keep: int):
    """``runs[key]``, made by ``run()`` the first time it is asked for. ``runs`` keeps the ``keep`` most recently
    used, so pre-rendering a step ahead never evicts the run on screen, and the same control values show the same
    measurement (a render's own cache, as Panel's pre-rendering needs)."""
    if key in runs:
        runs[key] = runs.pop(key)  # now the most recent
    else:
        runs[key] = run()
        while len(runs) > keep:
            runs.pop(next(iter(runs)))  # the least recently used
    return runs[key]


MORE_LABEL = WIDGETS.text("more", "zh")  # the section's title in Chinese; shown in the course's language


def more_section(items: list) -> W.Accordion:
    """A closed section titled 「更多设置」 (More settings) holding ``items`` in one wrapping row."""
    box = W.HBox(items, layout=W.Layout(flex_flow="row wrap", align_items="center"))
    section = W.Accordion([box], titles=(WIDGETS.say("more"),), selected_index=None)
    section.add_class("kvlab-more")
    return section


@dataclass(frozen=True)
class PanelOptions:
    """How a :class:`Panel` is laid out and when it renders, beyond its controls and render function.

    ``css_class``: the panel's class (the browser tests find it by it; a panel made again with the same class, by a
    re-run cell, replaces the older one). ``extra`` widgets are shown but not observed (e.g. a Play button linked to
    a slider): a list goes before the controls, a dict ``{control name: widget}`` puts each widget just before that
    control. With a ``button``, changes wait for a click instead of re-rendering at once (costly measurements).
    ``layout``: "vertical", "horizontal" (one wrapping row) or "grid" (rows of ``columns`` cells).
    ``prefetch``: pre-render a slider's next step while idle (see PREFETCH); ``render`` must then give the same view
    for the same values (it may keep its own cache).
    ``more``: controls folded under a closed 「更多设置」 section after the others (a panel with many controls shows its
    few main ones up front); they work as before once opened.
    ``measures(values)``: for values whose render starts a measurement (a length not timed yet), what the panel says
    while it runs (the figures greyed out until it is done); None for a render that only computes or reads what was
    measured. Such values are never rendered ahead or pre-rendered (a timing must not run unasked)."""

    css_class: str = ""
    layout: str = "vertical"
    columns: int = 4
    extra: object = ()
    more: tuple = ()
    button: W.Button | None = None
    prefetch: bool = True
    measures: Callable[[dict], str | None] | None = None


class Panel:
    """Controls wired to ``render(**values) -> View``; updates figures and the readout on change."""

    explain = staticmethod(explain_error)  # the message a refused value gets (the static edition shows it too)

    def __init__(self, controls: dict, render: Callable[..., View], static=(), in_browser=(), mode: str | None = None,
                 options: PanelOptions | None = None):
        """``static``: the controls whose states the static edition (``python -m kvlab.book``) precomputes with
        ``render``, one control at a time around the defaults, so they still work on a page without a kernel.
        ``in_browser``: sliders (a name or several) whose values around the shown ones are rendered ahead while
        the kernel is idle and switched in the browser without the kernel (:mod:`kvlab.viz.browser_steps`); a
        ``render`` that measures names the values that would in ``options.measures``. Where figures are not widgets
        (Colab, no anywidget: ``mode``) they are ordinary controls. The rest: :class:`PanelOptions`."""
        self.options = options = options or PanelOptions()
        css_class, layout, columns, extra, more, button, measures = (
            options.css_class, options.layout, options.columns, options.extra, options.more, options.button,
            options.measures)
        for arg, names in (("static", static), ("more", more)):
            unknown = [name for name in names if name not in controls]
            if unknown:
                raise ValueError(f"{arg}: {unknown} are not controls of this panel ({list(controls)})")
        in_browser = (in_browser,) if isinstance(in_browser, str) else tuple(in_browser)
        sliders = {}  # in-browser control -> its slider: the control itself, or the ``extra`` slider that fills it
        for name in in_browser:
            slider = next((w for w in (controls.get(name), extra.get(name) if isinstance(extra, dict) else None)
                           if Axis.accepts(w)), None)
            if slider is None:
                raise ValueError(f"in_browser: {name!r} is not a slider of this panel ({list(controls)})")
            sliders[name] = slider
        self.static = tuple(static)
        self.controls = controls
        mode = mode or figure_mode()
        self.in_browser = in_browser if mode == "widget" else ()
        axes = [Axis(name, sliders[name]) for name in self.in_browser]
        self.render = render
        # the states drawn ahead (browser_steps.States): a control's next step (PREFETCH), and the browser-drawn sliders'
        self.drawn = States(self._render, measures, self._note_measuring)
        ahead = States(self._render, measures, self._note_measuring)
        self.ahead = RenderAhead(axes, ahead, self.values) if axes else None
        self.steps = self.ahead.steps if axes else None
        self.button = button
        self.prefetch = options.prefetch
        self.message = W.HTML(layout=W.Layout(width="100%"))
        self.style = W.HTML(STALE_CSS, layout=W.Layout(display="none"))
        self.readout = W.HTML(layout=W.Layout(width="100%"))
        self.readout.add_class("kvlab-readout")
        self.error: str | None = None
        self._holding = False  # set() changes several controls, then renders once
        self._next = None  # the scheduled pre-render (an asyncio TimerHandle)
        self._follow = None  # the scheduled refresh after another panel's control moved (see follow)
        self._before = None  # the key of the values shown before (see _window)
        self._budgets: dict[str, Budget] = {}  # control name -> the time budget of pre-rendering its next step
        self._leader: tuple | None = None  # (the panel this one follows, the observer put on its controls)
        self._followers: list[Panel] = []  # panels that follow this one's controls
        self._orphaned = False  # the panel this one follows was replaced by a re-run cell: stale for good
        first = render(**self.values())
        self.result = first.result
        self.views = [FigureView(f, "kept" if self.steps else mode) for f in first.figures]
        self.readout.value = first.html
        for name, control in controls.items():
            if button is None:
                control.observe(self._on_change, names="value")
            control.add_class(f"kvlab-control-{name}")
        if button is not None:
            button.on_click(self._on_click)
            button.add_class("kvlab-run")
        before = self._extra_before = extra if isinstance(extra, dict) else {}
        items = [] if isinstance(extra, dict) else list(extra)
        folded = []
        for name, control in controls.items():
            (folded if name in more else items).extend([before[name], control] if name in before else [control])
        items += [button] if button is not None else []
        if layout == "grid":  # rows of ``columns`` cells: e.g. a caption and three controls per row
            control_box = W.GridBox(items, layout=W.Layout(
                grid_template_columns=f"repeat({columns}, max-content)", grid_gap="2px 16px", align_items="center"))
        elif layout == "horizontal":
            control_box = W.HBox(items, layout=W.Layout(flex_flow="row wrap", align_items="center"))
        else:
            control_box = W.VBox(items)
        self.more = more_section(folded) if folded else None
        boxes = [control_box] + ([self.more] if self.more else [])
        shown = [self.steps] if self.steps else [self.readout, *[v.widget for v in self.views]]
        self.widget = W.VBox([self.style, *boxes, self.message, *shown])
        if css_class:
            self.widget.add_class(css_class)
        self.widget.add_class("kvlab-panel")
        if self.steps:
            self._show_steps(self.values(), None, first)
        self._replace_older(css_class)

    def _render(self, **values) -> View:
        return self.render(**values)  # (read at each call: a test or a lesson may swap a panel's render)

    # -- re-run cells: a panel made again replaces the one its cell showed before -------------------------
    _newest: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # css_class -> the newest such panel

    def _replace_older(self, css_class: str) -> None:
        """A panel of the same ``css_class`` made before this one was shown by the same cell, now re-run (every
        chapter shows each panel once): it is closed (its output is gone), and the panels that followed it, still on
        screen, stop following it and are greyed out for good (they read controls that are no longer shown)."""
        if not css_class:
            return
        older = Panel._newest.get(css_class)
        Panel._newest[css_class] = self
        if older is None or older is self:
            return
        for follower in list(older._followers):
            follower._orphan()
        older.close()

    def close(self) -> None:
        """Let go of everything a panel no longer shown holds (the kernel keeps a replaced panel in ``Out[n]``): it is
        orphaned (greyed out, renders nothing more, follows no other panel), the states it drew ahead are dropped, and
        its widgets are closed. ``result`` and ``error`` stay readable."""
        self._orphan()
        if self.ahead is not None:
            self.ahead.close()
        close_widgets(self.widget, self.readout)  # (the readout is not in the tree when the browser draws it)

    def _orphan(self) -> None:
        self._unfollow()
        self._orphaned = True
        self._forget()
        self._show_orphaned()

    def _show_orphaned(self) -> None:
        self.error = WIDGETS.say("rerun_note")
        self.message.value = message_html(self.error, "warn")
        self._mark_stale(True)

    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items()}

    def refresh(self) -> None:
        """Render the controls' values afresh and show them."""
        self._forget()
        self._show(self.values())

    def _show(self, values: dict, view: View | None = None, changed: str | None = None) -> None:
        """Show ``view`` (rendered from ``values`` when not given, or pre-rendered): the readout first (it is ready
        before the figures are sent), then only what changed in each figure. Nothing on screen changes unless all of
        it can; a bad value leaves everything as it was, greyed out, with a message."""
        if self._orphaned:
            self._show_orphaned()
            return
        key = self._key(values) if self._prefetching else None
        kept = self.drawn.get(key)  # pre-rendered for this move (see PREFETCH)
        view = kept.view if view is None and kept is not None else view
        if self.steps:
            self._show_steps(values, changed, view)
            self._window(key)
            return
        try:
            if view is None:
                view = self.drawn.draw(key, values, self._budget(changed)).view
            if isinstance(view, ValueError):
                self._show_error(view, explain_error(view), "warn")
                return
            deltas = [fig_view.plan(fig) for fig_view, fig in zip(self.views, view.figures)]
        except Exception as exc:  # a bug: say so in the panel (browser tests look for it), keep the kernel alive
            self._show_bug(exc)
            return
        self.readout.value = view.html
        self.result = view.result
        try:
            for fig_view, delta in zip(self.views, deltas):
                fig_view.apply(delta)
        except Exception as exc:
            self._show_bug(exc)
            return
        self._shown()
        self._window(key)

    def _window(self, key) -> None:
        """PREFETCH's window of states: the one shown and the one shown before it (a step back shows at once); the
        step ahead joins them while the kernel is idle."""
        self.drawn.window([self._before, key])
        self._before = key

    def _shown(self) -> None:
        self.error = None
        self.message.value = ""
        self._mark_stale(False)

    def _show_steps(self, values: dict, changed: str | None, first: View | None = None, move: int = 0) -> None:
        """Browser-drawn sliders (``in_browser``): :meth:`RenderAhead.show` gives the view (rendered ahead, or now;
        ``first``: one rendered already) and sends the browser what it needs; then the values around the new ones
        are rendered ahead. ``move``: the direction the slider moved."""
        others = self._key({k: v for k, v in values.items() if k not in self.in_browser})
        try:
            view = self.ahead.show(values, changed, move, first, others)
        except Exception as exc:  # a bug: say so in the panel, keep the kernel alive
            self._show_bug(exc)
            return
        self.ahead.schedule(changed, move, go=not self._orphaned)
        if isinstance(view, ValueError):
            self._show_error(view, explain_error(view), "warn")
            return
        self.readout.value = view.html
        self.result = view.result
        for fig_view, fig in zip(self.views, view.figures):
            fig_view.update(fig)
        self._shown()

    def render_ahead(self) -> None:
        """Render every value of the browser-drawn sliders ahead now (what the idle kernel does bit by bit)."""
        self.ahead.render_all()

    def _show_bug(self, exc: Exception) -> None:
        detail = html.escape("".join(traceback.format_exception_only(type(exc), exc)).strip())
        self._show_error(exc, WIDGETS.say("bug", detail=detail), "bug", repr(exc))

    def _show_error(self, exc: Exception, text: str, kind: str, error: str | None = None) -> None:
        self.error = error or str(exc)
        self.message.value = message_html(f"{text}<br>{WIDGETS.say('stale_note')}", kind)
        self._mark_stale(True)

    @property
    def stale(self) -> bool:
        """True while the readout and figures show an earlier, valid setting (greyed out)."""
        return "kvlab-stale" in self.widget._dom_classes

    def _mark_stale(self, stale: bool) -> None:
        if stale and not self.stale:
            self.widget.add_class("kvlab-stale")
        elif not stale and self.stale:
            self.widget.remove_class("kvlab-stale")

    def _on_change(self, change) -> None:
        if self._holding:
            return
        name = self._name_of(change["owner"])
        moved = self._moved_in_browser(name)
        if self.steps and name in self.in_browser and moved is not None and not self._orphaned:  # drawn ahead
            self._show_steps(self.values(), name, move=self.ahead.move(name, change["old"], change["new"]))
            return
        if not (self._prefetching and moved is not None):
            self.refresh()  # changed by code (a cell, a test, another widget's callback): always rendered afresh
            return
        # changed in the browser: a value pre-rendered for this move is shown at once
        self._cancel_next()
        values = self.values()
        self._show(values, changed=name)
        if self.error is None:
            self._schedule_next(name, moved, change["old"], change["new"])

    def _moved_in_browser(self, name: str):
        """The widget a learner is moving in the browser that set control ``name``: the control itself, or the
        ``extra`` widget placed before it when that one writes into it (3.4's log-scale S slider fills the S box);
        None for a change made by code. (ipywidgets holds a widget's property lock while it applies a browser
        update and runs its observers; a SelectionSlider syncs its index.)"""
        for widget in (self.controls[name], self._extra_before.get(name)):
            if widget is not None and getattr(widget, "_property_lock", None):
                return widget
        return None

    # -- pre-rendering (see PREFETCH) --------------------------------------------------------------
    @property
    def _prefetching(self) -> bool:
        return PREFETCH and self.prefetch

    @staticmethod
    def _key(values: dict):
        try:
            key = tuple(sorted(values.items()))
            hash(key)
            return key
        except TypeError:  # unhashable control values: nothing is kept
            return None

    def _forget(self) -> None:
        self._cancel_next()
        self.drawn.window(())

    def _cancel_next(self) -> None:
        if self._next is not None:
            self._next.cancel()
            self._next = None

    def _budget(self, name: str | None) -> Budget | None:
        """The time budget of pre-rendering control ``name``'s next step (its renders, shown or ahead, are timed)."""
        if name is None:
            return None
        return self._budgets.setdefault(name, Budget(PREFETCH_MAX_MS, once_ms=2.5 * PREFETCH_MAX_MS))

    def _schedule_next(self, name: str, moved, old, new) -> None:
        """Pre-render control ``name`` one more step of the widget being ``moved`` (old -> new), once the kernel
        is idle."""
        budget = self._budget(name)
        if not budget.ms or budget.spent:
            return
        value = next_value(moved, old, new)
        if value is None:
            return
        values = {**self.values(), name: value}
        key = self._key(values)
        if key is None or self.drawn.get(key) is not None or self.drawn.measuring(values):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (plain Python): nothing runs "later"
            return
        self._next = loop.call_later(PREFETCH_DELAY_S, self._prerender, key, values, name)

    def _name_of(self, control) -> str | None:
        return next((n for n, c in self.controls.items() if c is control), None)

    def _measuring(self, values: dict) -> str | None:
        """What the panel says while rendering ``values`` measures (see ``measures``); None when it does not."""
        return self.drawn.measuring(values)

    def _note_measuring(self, note: str) -> None:
        """Said while a render measures (sent now; the view that follows clears it)."""
        self.message.value = message_html(note, "info")
        self._mark_stale(True)

    def _prerender(self, key, values: dict, changed: str) -> None:
        self._next = None  # (any change since it was scheduled cancelled it)
        drawn = self.drawn.ahead(key, values, self._budget(changed))
        if drawn is not None and not drawn.refused and not all(isinstance(f, go.Figure) for f in drawn.view.figures):
            self.drawn.window([k for k in self.drawn.kept if k != key])  # a bug: shown when that value is chosen

    def follow(self, leader: Panel) -> None:
        """Render afresh whenever one of ``leader``'s controls changes (this panel's render reads them). A change
        made in the browser is followed a moment later (FOLLOW_DELAY_S), once for a burst, so that the leader's
        readout and figures go out first; a change made by code is followed at once (the cell may read ``result``
        next). One observer per follower: following again, or being replaced by a re-run cell, removes it."""
        def changed(change) -> None:
            if self._follow is not None:
                self._follow.cancel()
                self._follow = None
            if getattr(change["owner"], "_property_lock", None):
                try:
                    self._follow = asyncio.get_running_loop().call_later(FOLLOW_DELAY_S, self._followed)
                    return
                except RuntimeError:  # no event loop (plain Python): at once
                    pass
            self.refresh()

        self._unfollow()
        for control in leader.controls.values():
            control.observe(changed, names="value")
        self._leader = (leader, changed)
        leader._followers.append(self)

    def _unfollow(self) -> None:
        if self._leader is None:
            return
        leader, changed = self._leader
        for control in leader.controls.values():
            control.unobserve(changed, names="value")
        if self in leader._followers:
            leader._followers.remove(self)
        self._leader = None
        if self._follow is not None:
            self._follow.cancel()
            self._follow = None

    def _followed(self) -> None:
        self._follow = None
        self.refresh()

    def _on_click(self, _button) -> None:
        self.button.disabled = True
        try:
            self.refresh()
        finally:
            self.button.disabled = False

    def set(self, **values) -> None:
        """Change controls programmatically (as a learner would by dragging them); the panel is rendered
        afresh, once for all the new values, before this returns. Every value is checked first (a ValueError
        naming the control): either all controls change or none does."""
        unknown = [name for name in values if name not in self.controls]
        if unknown:
            raise ValueError(f"{unknown[0]}: not a control of this panel (its controls: {', '.join(self.controls)})")
        checked = {}
        for name, value in values.items():
            control = self.controls[name]
            try:
                checked[name] = control.traits()["value"]._validate(control, value)
            except TraitError as exc:
                raise ValueError(f"{name}: {exc}") from None
        before = self.values()
        self._holding = True
        try:
            for name, value in checked.items():
                self.controls[name].value = value
        finally:
            self._holding = False
        if self.button is None and self.values() != before:
            self.refresh()

    def _ipython_display_(self):
        show(self, self.widget)


def close_widgets(*roots) -> None:
    """Close ``roots`` and every widget they hold (children, layouts, styles) or link (a Play button's ``link``, see
    play_slider), each once: the kernel's widget registry and the browser let go of them."""
    seen, todo = set(), list(roots)
    while todo:
        widget = todo.pop()
        if not isinstance(widget, W.Widget) or id(widget) in seen:
            continue
        seen.add(id(widget))
        held = [getattr(widget, name) for name in widget.keys] + [getattr(widget, "link", None)]
        todo += [w for value in held for w in (value if isinstance(value, (list, tuple)) else [value])]
        widget.close()


STATIC_ENV = "KVLAB_STATIC_EDITION"  # set by ``python -m kvlab.book`` for the kernels that run the chapters


def show(obj, widget) -> None:
    """Display ``widget``, the view of ``obj`` (a Panel, a Quiz). While the static edition is built, the same output
    also carries ``obj``'s static form (:func:`kvlab.book.capture.static_bundle`), which the site shows instead."""
    if not os.environ.get(STATIC_ENV):
        display(widget)
        return
    from ..book.capture import static_bundle

    bundle = widget._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    display({**data, **static_bundle(obj)}, raw=True)


# -- control factories: every control a lesson shows is built here -------------------------------------------
# ``description`` is the control's label as the learner sees it; a lesson keeps it in one constant and passes the
# same constant to the kvlab.inputs check of its value, so an error message always names a control on screen.
def _labelled(cls, description: str, width: str, **traits):
    """``cls`` with its label shown in full (ipywidgets cuts long labels at a fixed width otherwise)."""
    return cls(description=description, style={"description_width": "initial"}, layout=W.Layout(width=width),
               **traits)


def int_slider(description: str, value: int, min: int, max: int, step: int = 1, continuous: bool = False,
               width: str = "420px") -> W.IntSlider:
    return _labelled(W.IntSlider, description, width, value=value, min=min, max=max, step=step,
                     continuous_update=continuous)


def int_box(description: str, value: int, width: str = "240px") -> W.IntText:
    """A free-entry integer box: any value can be typed, so the render must validate it."""
    return _labelled(W.IntText, description, width, value=value)


def float_box(description: str, value: float, step: float, width: str = "190px") -> W.FloatText:
    """A free-entry number box (the arrows move it by ``step``): the render must validate what is typed."""
    return _labelled(W.FloatText, description, width, value=value, step=step)


def text_box(description: str, value: str, width: str = "420px") -> W.Text:
    """A free-entry text box, read when the learner presses Enter or leaves it (not at every key)."""
    return _labelled(W.Text, description, width, value=value, continuous_update=False)


def dropdown(description: str, options, value, width: str = "300px") -> W.Dropdown:
    return _labelled(W.Dropdown, description, width, options=options, value=value)


def selection_slider(description: str, options, value, width: str = "420px", continuous: bool = True,
                     readout: bool = True) -> W.SelectionSlider:
    """A slider over given values (``options``: values, or (label, value) pairs)."""
    return _labelled(W.SelectionSlider, description, width, options=options, value=value,
                     continuous_update=continuous, readout=readout)


def multi_select(description: str, options, value, rows: int, width: str = "420px") -> W.SelectMultiple:
    return _labelled(W.SelectMultiple, description, width, options=options, value=tuple(value), rows=rows)


def checkbox(description: str, value: bool, width: str) -> W.Checkbox:
    return W.Checkbox(value=value, description=description, indent=False, layout=W.Layout(width=width))


def run_button(description: str | None = None) -> W.Button:
    """The button of a panel that measures (it renders on a click, not on every change of its controls); labelled
    「运行测量」 (Run the measurement) in the course's language unless ``description`` says otherwise."""
    return W.Button(description=WIDGETS.say("run") if description is None else description, button_style="primary",
                    icon="play")


def bold_label(text: str) -> W.HTML:
    """A line of bold text between controls (``text`` is HTML-escaped)."""
    return W.HTML(f"<b>{html.escape(text)}</b>", layout=W.Layout(width="auto"))


def play_slider(description: str, value: int, min: int, max: int, interval_ms: int = 700):
    """A Play button linked to a slider (the slider is the value)."""
    slider = int_slider(description, value, min, max, continuous=True)
    play = W.Play(value=value, min=min, max=max, step=1, interval=interval_ms, description=WIDGETS.say("play"))
    play.link = W.jslink((play, "value"), (slider, "value"))  # in the browser: no kernel round trip per frame
    play.add_class("kvlab-play")
    return play, slider
