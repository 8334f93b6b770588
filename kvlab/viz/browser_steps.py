"""Sliders whose values are drawn ahead in the browser, so moving one never waits for the kernel.

A :class:`~kvlab.viz.widgets.Panel` made with ``in_browser=(...)`` renders, around the values on screen, the
neighbouring values of each of those sliders (all of a short slider, a window of a long one), nearest first, while
the kernel is idle, and sends them to the browser in small batches (``BrowserSteps``). The browser draws them with
plotly.js, the shown one first and the others nearest first while the page is idle, stacked off screen; each slider
is linked to the widget in the browser (``jslink``), so a key press, a drag or a Play frame that lands on a drawn
value swaps its figures and readout into place: no round trip to the kernel and no plotly redraw (``python
tests/ui_latency.py`` measures both). A value not drawn yet is shown as soon as the kernel sends it.

The kernel still hears each value and keeps the panel's ``result``, ``readout`` and figures in step for the notebook's
code and the static edition; then it renders ahead around the new values. Any other control (a menu, a text box)
changes the "world": every state is rendered again. A value the render refuses is stored as ``{"error": true}``: the
browser leaves the last drawn state on screen and the kernel shows why, as for any other control.

A slider may fill a box instead of being the control (3.4's log-scale S slider writes into the S box, which also takes
any typed length): a typed value no slider position shows is sent as the one ``FREE_KEY`` state and shown while
``free`` is set; the next move of the slider waits for the kernel once.
"""
from __future__ import annotations

import asyncio
import functools
import json
import math
import time
import weakref
from collections import deque
from dataclasses import dataclass, field

import ipywidgets as W
import plotly.io as pio
from traitlets import Any, Bool, Dict, Int, List, Unicode

from .plotly_code import AnyWidget, esm, plotly_code, plotly_version

AHEAD_WINDOW = 8      # values on each side of the shown one rendered ahead, of the slider just moved (a shorter
                      # slider: all of it)
AHEAD_OTHERS = 2      # ... and of each other slider
AHEAD_SEND_S = 0.12   # rendered states go to the browser at least this often while rendering ahead
AHEAD_DELAY_S = 0.02  # rendering ahead starts this long after a value is shown (a fast drag goes on meanwhile)
AHEAD_MAX_MS = 800.0  # a panel whose renders take longer than this is not rendered ahead (it waits for each value):
                      # a cell run meanwhile waits for at most one render (3.5's bug lab: about 520 ms a generation)
DRAWN_MAX = 12        # the browser keeps at most this many states drawn (the nearest to the shown one)
FREE_KEY = "free"     # the state of a value no slider position shows (typed into a box that a slider fills)



def figure_json(fig) -> dict:
    """A plotly figure as the JSON plotly.js draws: ``{"data": [...], "layout": {...}}`` (the encoding a live figure
    is sent in; the static edition stores figures the same way)."""
    return json.loads(pio.to_json(fig, validate=False))


def state_of(view) -> dict:
    """What the browser draws for one value: ``{"html", "figures"}``, or ``{"error": true}`` for a refused one."""
    if isinstance(view, Exception):
        return {"error": True}
    return {"html": view.html, "figures": [figure_json(f) for f in view.figures]}


@dataclass
class Axis:
    """One slider drawn ahead: the values ``render`` takes, and the ones the browser syncs (a ``SelectionSlider``
    syncs its index, an ``IntSlider`` its value)."""

    name: str
    control: W.Widget

    @property
    def trait(self) -> str:
        return "index" if isinstance(self.control, W.SelectionSlider) else "value"

    def values(self) -> list:
        c = self.control
        if isinstance(c, W.SelectionSlider):
            return list(c._options_values)
        steps = list(range(c.min, c.max + 1, c.step))
        return steps if c.value in steps else sorted(steps + [c.value])  # a value set by code off the steps

    def synced(self) -> list:
        return list(range(len(self.control._options_values))) if self.trait == "index" else self.values()

    @staticmethod
    def accepts(control) -> bool:
        return isinstance(control, (W.IntSlider, W.SelectionSlider))


class BrowserSteps(AnyWidget):
    """The readout and figures of the values around the shown ones, drawn ahead in the browser (see the module
    docstring). ``axes``: the sliders' names; ``grid``: per slider, the values the browser syncs; ``at_<name>``:
    that slider's synced value, linked to it in the browser; ``world``: bumped when every state changes. States
    travel as messages ``{"world", "states": {key: state}, "keep": [keys]}``, a key being the sliders' positions
    in ``grid`` joined by commas."""

    _esm = esm("pick", "steps", VERSION=plotly_version(), DRAWN_MAX=DRAWN_MAX, FREE_KEY=FREE_KEY)  # js/*.mjs
    version = Unicode().tag(sync=True)
    axes = List().tag(sync=True)
    grid = List().tag(sync=True)
    world = Int(0).tag(sync=True)
    free = Bool(False).tag(sync=True)
    seed = Dict().tag(sync=True)  # the world's first state, {"world", "states": {key: state}}: with the widget itself

    def __init__(self, axes: list[Axis], **kwargs):
        plotly_code()  # the code the browser draws with, on its way before the first states
        super().__init__(version=plotly_version(), axes=[a.name for a in axes], **kwargs)
        self.add_traits(**{f"at_{a.name}": Any().tag(sync=True) for a in axes})
        self.add_class("kvlab-steps")
        self.layout.width = "100%"
        self.links = [W.jslink((a.control, a.trait), (self, f"at_{a.name}")) for a in axes]
        self.on_msg(self._on_browser_msg)
        self.asked = None  # called when the browser asks for every state held (a page drawn or reloaded)

    def _on_browser_msg(self, _widget, content, _buffers) -> None:
        if isinstance(content, dict) and content.get("want") == "states" and self.asked is not None:
            self.asked()

    def seed_state(self, key: str, state: dict) -> None:
        """The first state of the current world, kept in a synced trait: the browser has it as soon as the widget is
        drawn (messages wait while the kernel runs other cells) and when the page is reloaded."""
        self.seed = {"world": self.world, "states": {key: state}}

    def send_states(self, states: dict, keep: list | None = None) -> None:
        """Send ``{key: state}`` for the current world; ``keep``: every key the browser should still hold."""
        msg = {"world": self.world, "states": states}
        if keep is not None:
            msg["keep"] = keep
        self.send(msg)

    def close(self) -> None:
        """Close the widget and its links to the sliders (the kernel and the browser let go of them)."""
        for link in self.links:
            link.close()
        super().close()


@dataclass
class Budget:
    """One use's time budget for drawing ahead: spent while the quickest of the last 3 renders took over ``max_ms``
    (a busy moment passes: quick renders turn it back on), and for good once one render took over ``once_ms`` (a
    first visit that measured; later ones are cached)."""

    max_ms: float
    once_ms: float = math.inf
    ms: deque = field(default_factory=lambda: deque(maxlen=3))
    broken: bool = False

    def record(self, ms: float) -> None:
        self.ms.append(ms)
        self.broken = self.broken or ms > self.once_ms

    @property
    def spent(self) -> bool:
        return self.broken or (bool(self.ms) and min(self.ms) > self.max_ms)


@dataclass
class Drawn:
    """One state: the render's View, or the ValueError of a value the render refuses."""

    view: object

    @property
    def refused(self) -> bool:
        return isinstance(self.view, Exception)

    @functools.cached_property
    def state(self) -> dict:
        """What the browser draws for it (:func:`state_of`), encoded once."""
        return state_of(self.view)


class States:
    """A panel's states drawn ahead: the one mechanism behind a slider's next step (``Panel``'s PREFETCH), the values
    around the shown ones (:class:`RenderAhead`) and the static edition's grid (``kvlab.book.capture``).

    One cache policy: a state is kept by its key until its use names the keys it still wants (:meth:`window`). One time
    budget per use: :meth:`ahead` draws only while that use's :class:`Budget` is not spent, never a value whose
    render would measure (``measures(values)`` names them: a timing must not run unasked), and never lets a bug out;
    :meth:`draw` (a value chosen on screen, or the static grid) always draws, and records its time on the budget.
    ``noting(text)``: called before a render that measures, with what it measures (the panel says so meanwhile)."""

    def __init__(self, render, measures=None, noting=None):
        self.render = render
        self.measures = measures
        self.noting = noting
        self.kept: dict = {}  # key -> Drawn

    def measuring(self, values: dict) -> str | None:
        """What a render of ``values`` measures (None when it only computes, or the hint itself fails)."""
        try:
            return self.measures(values) if self.measures is not None else None
        except Exception:  # a value the render will refuse (and explain)
            return None

    def draw(self, key, values: dict, budget: Budget | None = None) -> Drawn:
        """Render ``values`` now (a ValueError is the state of a refused value; any other exception is a bug and
        propagates), time it on ``budget``, and keep it under ``key`` (None: not kept)."""
        note = self.measuring(values)
        if note and self.noting is not None:
            self.noting(note)
        t0 = time.perf_counter()
        try:
            drawn = Drawn(self.render(**values))
        except ValueError as exc:
            drawn = Drawn(exc)
        finally:
            if budget is not None:
                budget.record((time.perf_counter() - t0) * 1e3)
        if key is not None:
            self.kept[key] = drawn
        return drawn

    def ahead(self, key, values: dict, budget: Budget) -> Drawn | None:
        """Draw ``values`` unasked, unless kept already, over budget, measuring, or failing with a bug (None: not
        drawn; a bug is shown and explained when that value is really chosen)."""
        if key is None or key in self.kept or budget.spent or self.measuring(values):
            return None
        try:
            return self.draw(key, values, budget)
        except Exception:
            return None

    def get(self, key) -> Drawn | None:
        return self.kept.get(key) if key is not None else None

    def window(self, keys) -> None:
        """Keep only the states of ``keys`` (the use's window moved)."""
        keep = set(keys)
        self.kept = {k: d for k, d in self.kept.items() if k in keep}

    def grid(self, name: str, values: list, others: dict) -> list[Drawn]:
        """The static edition's grid: control ``name`` at each of ``values``, the others at ``others``, every one
        drawn (however long it takes: no kernel waits for the page); nothing kept."""
        return [self.draw(None, {**others, name: value}) for value in values]


class RenderAhead:
    """The kernel's side of a panel's browser-drawn sliders: the states of the current world (keyed by the sliders'
    positions on their grids, "3,0,12"), drawn ahead (:class:`States`) around the shown ones while the kernel is
    idle, one render per turn of the event loop, and sent to :class:`BrowserSteps` every AHEAD_SEND_S.

    ``drawn``: the panel's States for these sliders; ``values()``: the panel's controls now. :meth:`show` is the one
    call a panel makes when a value changes: it returns the view to show and sends or renders ahead what the
    browser needs.

    The kernel renders for one panel at a time: the one moved last goes first (Play on one panel right after moves on
    another whose renders are slow must not wait a slow render per frame); the others resume when it is done."""

    _latest = None  # a weak reference to the RenderAhead scheduled last

    def __init__(self, axes: list[Axis], drawn: States, values):
        self.axes = axes
        self.steps = BrowserSteps(axes)
        self.drawn = drawn
        self.values = values
        self.budget = Budget(AHEAD_MAX_MS)  # every render of these sliders, shown or ahead
        self.world = None  # the other controls' values the states were rendered for
        self.grids: list = []  # per slider, the values render takes, in the browser's order
        self._unsent: dict = {}  # key -> state rendered ahead, not yet sent
        self._todo: list = []  # keys still to render ahead, nearest first
        self._job = None  # the scheduled render-ahead step (an asyncio handle)
        self._sent_at = 0.0
        self.steps.asked = self.send_all

    @property
    def states(self) -> dict:
        """key -> :class:`Drawn`, the states of the current world held now."""
        return self.drawn.kept

    # -- keys and values ---------------------------------------------------------------------------------
    def key_of(self, values: dict) -> str | None:
        """The sliders' positions on their grids, joined ("3,0,12"); None when one is off its grid."""
        try:
            return ",".join(str(grid.index(values[a.name])) for a, grid in zip(self.axes, self.grids))
        except (ValueError, TypeError):
            return None

    def values_at(self, key: str) -> dict:
        values = self.values()
        for a, grid, pos in zip(self.axes, self.grids, key.split(",")):
            values[a.name] = grid[int(pos)]
        return values

    def move(self, name: str, old, new) -> int:
        """+1 or -1: the way slider ``name`` moved on its grid (0 when either value is off it)."""
        grid = self.grids[[a.name for a in self.axes].index(name)] if self.grids else []
        if old in grid and new in grid:
            return 1 if grid.index(new) >= grid.index(old) else -1
        return 0

    def keys_around(self, center: str, changed: str | None, move: int) -> list[str]:
        """The keys around ``center`` in the order they are rendered: first the slider just moved, on the way it
        moved, up to AHEAD_WINDOW values (Play and a held key only ever need the next one: it stays ahead even when
        a render takes most of a frame); then, nearest first, the rest of that window and each other slider within
        AHEAD_OTHERS of its value (a panel's only slider: within AHEAD_WINDOW; all of a slider no longer than the
        window's two sides)."""
        pos = [int(p) for p in center.split(",")]
        onward: list[str] = []
        rings: dict[int, list[str]] = {}
        for a, axis in enumerate(self.axes):
            n = len(self.grids[a])
            window = AHEAD_WINDOW if axis.name == changed or len(self.axes) == 1 else AHEAD_OTHERS
            reach = n if n <= 2 * window + 1 else window
            for d in range(1, reach + 1):
                for sign in (1, -1):
                    p = pos[a] + sign * d
                    if 0 <= p < n:
                        key = ",".join(str(p if b == a else q) for b, q in enumerate(pos))
                        first = axis.name == changed and sign == (-1 if move < 0 else 1)
                        (onward.append(key) if first else rings.setdefault(d, []).append(key))
        return [center] + onward + [key for d in sorted(rings) for key in rings[d]]

    # -- the states --------------------------------------------------------------------------------------
    def show(self, values: dict, changed: str | None, move: int = 0, first=None, others=None):
        """The view to show for ``values`` (a View, or the ValueError of a refused value), and what the browser needs
        sent: when slider ``changed`` moved within the world, the state rendered ahead (the browser has shown it
        already) or rendered now and sent; any other change (``others``, the other controls' values, differs from
        the world's; a refresh; a slider set off its steps) starts a new world, its first state seeded. ``first``:
        a view of ``values`` rendered already (the constructor's). Then the values around are rendered ahead."""
        key = self.key_of(values) if changed in [a.name for a in self.axes] and others == self.world else None
        new_world = others is None or key is None
        if new_world:
            self.new_world(others)
            key = self.key_of(values)
        free = key is None  # a value no slider position shows (typed into the box a slider fills)
        key = FREE_KEY if free else key
        if self.steps.free != free:
            self.steps.free = free
        drawn = self.drawn.get(key)
        if drawn is None:
            drawn = Drawn(first) if first is not None else self.drawn.draw(key, values, self.budget)
            self.drawn.kept[key] = drawn
            if new_world:
                self.steps.seed_state(key, drawn.state)  # with the widget itself
            else:
                self.steps.send_states({key: drawn.state})
        return drawn.view

    def new_world(self, others) -> None:
        """Every state rendered so far is stale: forget them, and tell the browser (the sliders' grids too)."""
        self.cancel()
        self.world = others
        self.grids = [a.values() for a in self.axes]
        self.drawn.window(())
        self._unsent = {}
        with self.steps.hold_sync():
            self.steps.grid = [a.synced() for a in self.axes]
            self.steps.world += 1

    def send_all(self) -> None:
        """Every state held (the browser asks when a page is drawn or reloaded)."""
        self.steps.send_states({key: d.state for key, d in self.states.items()}, keep=list(self.states))

    # -- rendering ahead ---------------------------------------------------------------------------------
    def schedule(self, changed: str | None, move: int, go: bool = True) -> None:
        """Drop the states far from the shown ones (the browser drops them too) and, with ``go``, render the values
        around the shown ones once the kernel is idle, nearest first (see step)."""
        self.cancel()
        center = self.key_of(self.values())
        if center is None:
            return
        star = self.keys_around(center, changed, move)
        self.drawn.window(star)
        self.steps.send_states({}, keep=list(self.states))
        if not go or self.budget.spent:
            return
        self._todo = [key for key in star if key not in self.states]
        RenderAhead._latest = weakref.ref(self)
        try:
            self._job = asyncio.get_running_loop().call_later(AHEAD_DELAY_S, self.step)
        except RuntimeError:  # no event loop (plain Python): nothing runs "later" (render_all() does it now)
            pass

    def step(self, wait_for_latest: bool = True) -> bool:
        """Render one key ahead; send what was rendered every AHEAD_SEND_S and at the end. False when done. While
        another panel, moved later, is rendering ahead, this one waits (``wait_for_latest``)."""
        self._job = None
        if not self._todo:
            self.flush()
            return False
        latest = RenderAhead._latest() if RenderAhead._latest is not None else None
        if wait_for_latest and latest is not None and latest is not self and latest._job is not None:
            try:
                self._job = asyncio.get_running_loop().call_later(AHEAD_DELAY_S, self.step)
                return True
            except RuntimeError:  # no event loop: nothing to wait for
                pass
        key = self._todo.pop(0)
        drawn = self.drawn.ahead(key, self.values_at(key), self.budget)
        if drawn is not None:
            self._unsent[key] = drawn.state
        if self.budget.spent:
            self._todo = []
        if not self._todo or time.monotonic() - self._sent_at >= AHEAD_SEND_S:
            self.flush()
        if self._todo:
            try:
                self._job = asyncio.get_running_loop().call_soon(self.step)
            except RuntimeError:
                pass
        return bool(self._todo)

    def render_all(self) -> None:
        """Render every value ahead now (what the idle kernel does bit by bit; tests and scripts call it)."""
        if self._job is not None:
            self._job.cancel()
            self._job = None
        while self.step(wait_for_latest=False):
            pass

    def flush(self) -> None:
        """Send the states rendered ahead and not sent yet."""
        if self._unsent:
            self.steps.send_states(self._unsent)
            self._unsent = {}
        self._sent_at = time.monotonic()

    def cancel(self) -> None:
        """Stop rendering ahead (what was rendered is sent)."""
        if self._job is not None:
            self._job.cancel()
            self._job = None
        self._todo = []
        self.flush()

    def close(self) -> None:
        """Stop for good (a panel replaced by its re-run cell): nothing more is rendered ahead, every state is let go
        of, and the browser's widget is closed."""
        self.cancel()
        self.drawn.window(())
        self.steps.close()
