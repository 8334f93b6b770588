"""A slider whose every value is drawn ahead in the browser, so stepping through it never waits for the kernel.

A :class:`~kvlab.viz.widgets.Panel` made with ``in_browser="step"`` renders every value of that slider whenever
another control changes (or the panel is refreshed) and sends them in one message (``BrowserSteps.states``). The
browser draws them with plotly.js, the shown one first and the others, nearest first, while the page is idle, off
screen; the slider is linked to ``BrowserSteps.value`` in the browser (``jslink``), so a key press or a Play frame
swaps already-drawn figures and the readout into place: no round trip to the kernel and no plotly redraw per step
(``python tests/ui_latency.py`` measures both). The kernel still hears each value and keeps the panel's
``result``, ``readout`` and figures in step for the notebook's code and the static edition.

A value the render refuses is stored as ``{"error": true}``: the browser leaves the last drawn state on screen
and the kernel shows why, as for any other control.
"""
from __future__ import annotations

import json

import plotly.io as pio
from traitlets import Any, List, Unicode

from .plotly_code import SLOT_JS, AnyWidget, plotly_code, plotly_version

STEPS_ESM = SLOT_JS + r"""
const CONFIG = { displaylogo: false };
const later = (fn) => (globalThis.requestIdleCallback || ((f) => setTimeout(f, 1)))(fn, { timeout: 300 });
const STYLE_HIDDEN = "position:absolute;top:0;left:0;opacity:0;pointer-events:none";
const pause = () => new Promise((resolve) => setTimeout(resolve, 0));

export default () => ({
  async initialize({ model }) {
    await slot(model.get("version")).promise;  // plotly's bundle has loaded, and with it window.Plotly
  },
  render({ model, el }) {
    const Plotly = globalThis.Plotly;
    const readout = document.createElement("div");
    readout.className = "widget-html kvlab-readout";
    const text = document.createElement("div");
    text.className = "widget-html-content";
    readout.append(text);
    const figures = document.createElement("div");
    el.append(readout, figures);
    let drawn = new Map(), generation = 0, waiting = false, closed = false;

    const states = () => model.get("states");
    const index = () => model.get("values").indexOf(model.get("value"));
    const drop = (gd) => { Plotly.purge(gd); gd.remove(); };

    // Every drawn state of a figure lies in that figure's place, stacked, transparent and out of the pointer's way;
    // the shown one is opaque and carries the class kvlab-shown. Opacity, not visibility: visibility is inherited,
    // so showing a figure restyled its whole SVG (about 50 ms a key press on a 2-core machine; opacity about 12).
    const places = [];
    function place(k) {
      while (places.length <= k) {
        const div = document.createElement("div");
        div.className = "kvlab-figure";
        div.style.position = "relative";
        figures.append(div);
        places.push(div);
      }
      return places[k];
    }
    const hide = (gd) => { gd.classList.remove("kvlab-shown"); gd.style.opacity = "0"; gd.style.pointerEvents = "none"; };

    async function drawState(i, gen) {  // -> the state's figures, drawn hidden in their places
      const gds = [];
      for (const [k, fig] of states()[i].figures.entries()) {
        const gd = document.createElement("div");
        gd.dataset.generation = String(gen);
        gd.style.cssText = STYLE_HIDDEN;
        place(k).append(gd);
        const copy = structuredClone(fig);  // plotly writes into what it is given
        await Plotly.newPlot(gd, copy.data, copy.layout, CONFIG);
        gds.push(gd);
        await pause();  // a key press gets in between two figures
        if (gen !== generation || closed) { gds.forEach(drop); return []; }
      }
      return gds;
    }
    const draw = (i) => { if (!drawn.has(i)) drawn.set(i, drawState(i, generation)); return drawn.get(i); };

    function show() {
      const i = index(), gen = generation;
      if (i < 0 || states()[i].error) return;  // the kernel explains a refused value; the last state stays
      draw(i).then((gds) => {
        if (gen !== generation || closed || index() !== i) return;
        text.innerHTML = states()[i].html;
        gds.forEach((gd, k) => {
          const where = place(k), old = where.querySelector(":scope > .kvlab-shown");
          if (old === gd) return;
          where.style.height = gd._fullLayout.height + "px";
          gd.style.opacity = "1";
          gd.style.pointerEvents = "auto";
          gd.classList.add("kvlab-shown");
          if (old) (old.dataset.generation === String(gen) ? hide(old) : drop(old));
        });
        places.slice(gds.length).forEach((where) => { where.replaceChildren(); where.style.height = "0px"; });
        ahead();
      });
    }

    function ahead() {  // draw the other states, nearest to the shown one first, while the page is idle
      if (waiting || closed) return;
      const here = index(), all = [...states().keys()];
      const next = all.filter((i) => !drawn.has(i) && !states()[i].error)
        .sort((a, b) => Math.abs(a - here) - Math.abs(b - here))[0];
      if (next === undefined) return;
      waiting = true;
      later(() => { waiting = false; draw(next).then(ahead); });
    }

    model.on("change:states", () => {
      generation += 1;
      for (const job of drawn.values()) job.then((gds) => gds.filter((gd) => !gd.classList.contains("kvlab-shown")).forEach(drop));
      drawn = new Map();
      show();
    });
    model.on("change:value", show);
    show();
    return () => {
      closed = true;
      generation += 1;
      for (const job of drawn.values()) job.then((gds) => gds.forEach(drop));
    };
  },
});
"""


def figure_json(fig) -> dict:
    """A plotly figure as the JSON plotly.js draws: ``{"data": [...], "layout": {...}}`` (the encoding a live figure
    is sent in; the static edition stores figures the same way)."""
    return json.loads(pio.to_json(fig, validate=False))


class BrowserSteps(AnyWidget):
    """The readout and figures of every value of one slider, drawn ahead in the browser (see the module docstring).
    ``values``: the slider's values in order; ``states``: one per value, ``{"html", "figures"}`` or
    ``{"error": true}``; ``value``: the slider's value, linked to the slider in the browser."""

    _esm = f"const VERSION = {json.dumps(plotly_version())};" + STEPS_ESM
    version = Unicode().tag(sync=True)
    values = List().tag(sync=True)
    states = List().tag(sync=True)
    value = Any().tag(sync=True)

    def __init__(self, **kwargs):
        plotly_code()  # the code the browser draws with, on its way before the first states
        super().__init__(version=plotly_version(), **kwargs)
        self.add_class("kvlab-steps")
        self.layout.width = "100%"

    def show_all(self, values: list, views: list, value) -> None:
        """Send every value's view (a ``View``, or an exception for a refused value) in one message."""
        states = [{"error": True} if isinstance(v, Exception) else
                  {"html": v.html, "figures": [figure_json(f) for f in v.figures]} for v in views]
        with self.hold_sync():
            self.values = list(values)
            self.states = states
            self.value = value
