"""Kernel side of the static edition: what a Panel or a Quiz shows, as data a page without a kernel can show.

While ``python -m kvlab.book`` runs a chapter, ``kvlab.viz.widgets.show`` adds :func:`static_bundle` to each panel's
and quiz's output, under the MIME type ``STATIC_MIME``. A panel's static form is its readout and figures as they
are on screen, plus, for each control it declares ``static``, the states of that control's values (one control
at a time, the others at their defaults), each rendered by the panel's own ``render`` function, the one the live
panel calls (through :class:`kvlab.viz.browser_steps.States`, as the live panel draws ahead): the page and the notebook
cannot disagree.

Figures are stored as plotly JSON (``plotly.io.to_json``, the same encoding a live figure is sent in) in a pool
of distinct traces and layouts, so a trace that does not change with a slider is stored once per page.
"""
from __future__ import annotations

import html
import json
import os
import pickle
from pathlib import Path

from ..exercises.quiz import answer_verdict
from ..viz.browser_steps import States, figure_json
from ..viz.phrases import QUIZ
from .phrases import BOOK

STATIC_MIME = "application/vnd.kvlab.static+json"
MAX_STATES = 48  # values precomputed per control: all of them, or this many around the default
REPLAY_ENV = "KVLAB_STATIC_REPLAY"  # a folder: each exported panel's render function is pickled there (for tests)
PAGE_ENV = "KVLAB_STATIC_PAGE"  # the chapter being run (names the panels: "<page>-<n>")

_counter = {"panels": 0}


class Pool:
    """Distinct JSON values (traces, layouts) by their text; a figure is a list of indexes into it."""

    def __init__(self):
        self.items: list = []
        self._index: dict[str, int] = {}

    def add(self, value) -> int:
        key = json.dumps(value, sort_keys=True, ensure_ascii=False)
        if key not in self._index:
            self._index[key] = len(self.items)
            self.items.append(value)
        return self._index[key]

    def figure(self, fig) -> dict:
        spec = figure_json(fig)
        return {"data": [self.add(t) for t in spec.get("data", [])], "layout": self.add(spec.get("layout", {}))}


def _enumerable(widget) -> bool:
    return hasattr(widget, "_options_values") or (hasattr(widget, "min") and hasattr(widget, "step")
                                                   and isinstance(getattr(widget, "value", None), int))


def value_widget(panel, name: str):
    """The widget whose values the static page offers for control ``name``: the control itself, or, for a free-entry
    box, the slider placed before it that writes into it (3.4's log-scale S slider fills the S box)."""
    control = panel.controls[name]
    before = panel._extra_before.get(name)
    return before if not _enumerable(control) and before is not None and _enumerable(before) else control


def option_values(panel, name: str) -> tuple[list, list[str]]:
    """The values of control ``name`` the static edition precomputes, and how the control shows each: every option
    of a menu or selection slider, every step of a slider, or (a box another slider writes into, as 3.4's S box)
    that slider's options; at most MAX_STATES of them, centred on the current value."""
    control = value_widget(panel, name)
    if hasattr(control, "_options_values"):
        values, labels = list(control._options_values), [str(x) for x in control._options_labels]
    elif hasattr(control, "min") and hasattr(control, "step") and isinstance(control.value, int):
        values = list(range(control.min, control.max + 1, control.step))
        labels = [f"{v:,}" if abs(v) >= 10000 else str(v) for v in values]
    else:
        raise ValueError(f"static: control {name!r} ({type(control).__name__}) has no list of values to precompute")
    current = panel.controls[name].value
    at = values.index(current) if current in values else 0
    start = max(0, min(at - MAX_STATES // 2, len(values) - MAX_STATES))
    return values[start:start + MAX_STATES], labels[start:start + MAX_STATES]


def _state(pool: Pool, view=None, error: str | None = None) -> dict:
    if error is not None:
        return {"error": error}
    return {"html": view.html, "figures": [pool.figure(f) for f in view.figures]}


def _json_value(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


def _control_text(control) -> str:
    """A control's current value as the learner sees it (for the controls a static page cannot change)."""
    label = getattr(control, "label", None)
    if isinstance(label, str):
        return label
    value = control.value
    if isinstance(value, (tuple, list)):
        return BOOK.say("list_separator").join(str(v) for v in value)
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10000 else str(value)


def precomputed(panel, name: str, defaults: dict, pool: Pool) -> dict:
    """The states of control ``name``'s values, the others at ``defaults``, each rendered by the panel's render
    (a value the live panel refuses gets the message the panel shows), and how the page offers them."""
    values, labels = option_values(panel, name)
    grid = States(panel.render).grid(name, values, defaults)  # the one mechanism that draws a panel's states ahead
    states = [_state(pool, error=panel.explain(d.view)) if d.refused else _state(pool, d.view) for d in grid]
    widget = value_widget(panel, name)
    menu = hasattr(widget, "_options_values") and "Slider" not in type(widget).__name__  # a dropdown, not a slider
    return {"widget": "menu" if menu else "slider", "values": [_json_value(v) for v in values], "labels": labels,
            "states": states, "default": values.index(defaults[name]) if defaults[name] in values else None}


def panel_static(panel) -> dict:
    """A panel's static form (see the module docstring)."""
    _counter["panels"] += 1
    pid = f"kvlab-{os.environ.get(PAGE_ENV, 'page')}-{_counter['panels']}"  # (an HTML id: starts with a letter)
    pool = Pool()
    shown = {"html": panel.readout.value, "figures": [pool.figure(v.figure) for v in panel.views]}
    if panel.error is not None:
        shown["error"] = panel.message.value
    defaults = panel.values()
    controls = []
    for name, control in panel.controls.items():
        entry = {"name": name, "label": str(getattr(control, "description", "") or name),
                 "text": _control_text(control)}
        if name in panel.static:
            entry.update(precomputed(panel, name, defaults, pool))
        controls.append(entry)
    _keep_for_replay(pid, panel, defaults)
    return {"kind": "panel", "id": pid, "css_class": " ".join(panel.widget._dom_classes), "pool": pool.items,
            "shown": shown, "controls": controls}


def _keep_for_replay(pid: str, panel, defaults: dict) -> None:
    """With REPLAY_ENV set (the tests), pickle the panel's render function and defaults, so a test can call it
    in-process and compare the page's states with what the live panel would show."""
    folder = os.environ.get(REPLAY_ENV)
    if not folder or not panel.static:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder) / f"{pid}.pkl", "wb") as f:
        pickle.dump({"render": panel.render, "defaults": defaults, "static": panel.static}, f)


def quiz_static(quiz) -> dict:
    """A quiz on a page without a kernel: each question with its choices or unit, and its answer folded away
    (the text the live quiz's reveal button shows: exercises.quiz.answer_verdict)."""
    items = []
    for i, q in enumerate(quiz.questions):
        choices = getattr(q, "choices", None)
        body = ("<ol type='A'>" + "".join(f"<li>{html.escape(c.key)}</li>" for c in choices) + "</ol>" if choices
                else f"<p>{QUIZ.say('answer_box', unit=html.escape(q.unit))}{QUIZ.say('blank')}</p>")
        answer = html.escape(answer_verdict(q).message)
        question = QUIZ.say("question", n=i + 1, section=html.escape(q.section))
        items.append(f'<div class="kvlab-static-question"><p><b>{question}</b> {html.escape(q.prompt)}</p>{body}'
                     f"<details><summary>{QUIZ.say('reveal')}</summary><p>{answer}</p></details></div>")
    title = quiz.widget.children[0].value if quiz.widget.children else ""
    return {"kind": "quiz", "html": title + "".join(items)}


def static_bundle(obj) -> dict:
    """``{STATIC_MIME: static form}`` for a Panel or a Quiz."""
    if hasattr(obj, "render") and hasattr(obj, "views"):
        return {STATIC_MIME: panel_static(obj)}
    if hasattr(obj, "questions"):
        return {STATIC_MIME: quiz_static(obj)}
    raise TypeError(f"no static form for {type(obj).__name__}")
