"""UI latency benchmark: how fast each slider-driven panel follows the keyboard, in a real JupyterLab in
headless Chromium, next to a bare-widget baseline measured in the same page.

    python tests/ui_latency.py                   # every chapter, every slider; the tables at the end
    python tests/ui_latency.py --chapters 02 03  # some chapters
    python tests/ui_latency.py --no-prefetch     # kvlab's pre-rendering of the next step off (cold renders)
    python tests/ui_latency.py --json out.json   # also the raw samples

For every slider (``.kvlab-control-*`` holding a noUiSlider) of every ``.kvlab-panel`` without a Run
button, in every chapter, after run-all:

- key -> readout: a key press on the slider's handle until the panel's readout shows new text;
- key -> figures: until the last DOM change inside every figure that changed (plotly's redraw);
- key -> figures painted: until the end of the first frame after that last change (a requestAnimationFrame,
  then a task queued from it): what the eye gets, the browser's style, layout and paint included;
- burst: 20 key presses sent as fast as the browser takes them (a drag) until the panel settles, then
  the screen is compared with a fresh render of the final value made in the kernel (readout text, the
  plotted data of every trace, titles, annotations, shapes, axis types and fixed ranges);
- Play (panels with a Play button, from Stop): frames, readout updates, the lag of the readout behind
  the frames at the start and at the end, and how long the panel takes to settle after the last frame
  (a growing backlog shows up in the last two);
- where the time goes: comm messages and bytes per press in each direction, plotly redraws, the kernel's
  time per update (render, of it in the chapters' plot builders, figure diff, sending) and each
  figure's redraw time in the browser.

Times are taken in the page (``performance.now()`` at the keydown, MutationObservers on the readout
and the figures), not by polling from Python. The baseline panel (a bare ``IntSlider`` observed by a
callback that sets one ``HTML`` label and the ``y`` of a one-bar ``FigureWidget``) is appended to the
server's temporary copy of each notebook; each slider's presses alternate with the baseline's, and its
ratios are to those baseline presses, so both are measured under the same load. Single presses go on in
one direction (each a value not shown just before), as a learner stepping through a slider does.

This is a benchmark, not a test: it prints numbers whatever they are. It exits 1 only when a final
state differs from a fresh render or a chapter could not be measured.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser_support import CHAPTER_DIR, ChapterPage, LabServer, launch_chromium  # noqa: E402

BASELINE = "kvlab-uibaseline"
QUIET_MS = 450     # the panel counts as settled after this long without a DOM change (and an idle kernel)
BURST = 20

# The baseline: the floor that Jupyter widgets, the kernel round trip and plotly impose on this machine.
BASELINE_CELL = '''\
# kvlab UI latency baseline (added by tests/ui_latency.py to the server's temporary copy only)
import types as _ui_types

import ipywidgets as _ui_W
import plotly.graph_objects as _ui_go


def _ui_baseline():
    slider = _ui_W.IntSlider(value=50, min=0, max=100, description="baseline", continuous_update=False)
    label = _ui_W.HTML("value = 50")
    fig = _ui_go.FigureWidget(_ui_go.Bar(x=["value"], y=[50]))

    def on_change(change):
        label.value = f"value = {change['new']}"
        fig.data[0].y = [change["new"]]

    slider.observe(on_change, names="value")
    slider.add_class("kvlab-control-value")
    label.add_class("kvlab-readout")
    fig.add_class("kvlab-figure")
    box = _ui_W.VBox([slider, label, fig])
    box.add_class("kvlab-panel")
    box.add_class("BASELINE")
    render = lambda value: types_view([_ui_go.Figure(_ui_go.Bar(x=["value"], y=[value]))], f"value = {value}")
    return _ui_types.SimpleNamespace(widget=box, controls={"value": slider}, render=render)


types_view = lambda figures, html: _ui_types.SimpleNamespace(figures=figures, html=html)
_kvlab_ui_baseline = _ui_baseline()
_kvlab_ui_baseline.widget
'''.replace("BASELINE", BASELINE)

# In-page probe on one panel: keydown times, readout changes, DOM changes inside each figure, plotly's
# afterplot events, long tasks on the main thread, and the comm messages in each direction.
JS_PROBE_INSTALL = r"""(root) => {
  window.__kvlabUi = window.__kvlabUi || {probes: {}};
  const ui = window.__kvlabUi;
  if (!ui.msgs) {
    ui.msgs = {in: 0, out: 0, inBytes: 0, outBytes: 0};
    const k = window.__kvlabNb.sessionContext.session.kernel;
    const size = (m) => JSON.stringify(m.content).length
      + (m.buffers || []).reduce((s, b) => s + (b.byteLength || 0), 0);
    k.anyMessage.connect((_, {msg, direction}) => {
      if (msg.header.msg_type !== 'comm_msg') return;
      if (direction === 'recv') { ui.msgs.in += 1; ui.msgs.inBytes += size(msg); }
      else { ui.msgs.out += 1; ui.msgs.outBytes += size(msg); }
    });
    ui.longtasks = [];
    try {
      new PerformanceObserver((list) => { for (const e of list.getEntries()) ui.longtasks.push([e.startTime, e.duration]); })
        .observe({type: 'longtask', buffered: false});
    } catch (e) { /* no long-task API */ }
  }
  const name = [...root.classList].filter(c => c.startsWith('kvlab-') && c !== 'kvlab-panel' && c !== 'kvlab-stale').join(' ');
  const p = {keys: [], readout: [], figs: [], plots: [], painted: []};
  const ro = root.querySelector('.kvlab-readout');
  new MutationObserver(() => p.readout.push([performance.now(), ro.textContent]))
    .observe(ro, {subtree: true, childList: true, characterData: true});
  // A change the eye can see: inside (or of) a plot on screen, or of the figure's place itself. Browser-drawn
  // states are stacked in the place, transparent (opacity 0) until shown; drawing or dropping them shows nothing.
  const visible = (n) => n.nodeType === 1 && (n.classList.contains('kvlab-shown') || n.style.opacity !== '0');
  const onScreen = (r) => {
    if (!r.target.isConnected) return false;  // drawn and replaced before anyone saw it
    const gd = r.target.closest ? r.target.closest('.js-plotly-plot') : r.target.parentElement?.closest('.js-plotly-plot');
    if (gd) return visible(gd) || (r.type === 'attributes' && r.attributeName === 'class' && r.oldValue?.includes('kvlab-shown'));
    return r.type !== 'childList' || [...r.addedNodes].some(visible);
  };
  [...root.querySelectorAll('.kvlab-figure')].forEach((el, i) => {
    p.figs[i] = []; p.plots[i] = []; p.painted[i] = [];
    // painted: the end of the first frame after a change (rAF runs before its paint, a task queued there after it)
    new MutationObserver((records) => {
      if (!records.some(onScreen)) return;  // a state drawn ahead, hidden (kvlab.viz.browser_steps): not seen yet
      p.figs[i].push(performance.now());
      requestAnimationFrame(() => setTimeout(() => p.painted[i].push(performance.now()), 0)); })
      .observe(el, {subtree: true, childList: true, characterData: true, attributes: true, attributeOldValue: true});
    const gd = el.matches('.js-plotly-plot') ? el : (el.querySelector('.js-plotly-plot.kvlab-shown') || el.querySelector('.js-plotly-plot'));
    if (gd && gd.on) gd.on('plotly_afterplot', () => p.plots[i].push(performance.now()));
  });
  root.addEventListener('keydown', () => p.keys.push(performance.now()), true);
  ui.probes[name] = p;
  return name;
}"""

JS_PROBE_RESET = r"""(name) => {
  const ui = window.__kvlabUi, p = ui.probes[name];
  p.keys.length = 0; p.readout.length = 0;
  p.figs.forEach(f => f.length = 0); p.plots.forEach(f => f.length = 0); p.painted.forEach(f => f.length = 0);
  ui.longtasks.length = 0;
  p.msgs0 = {...ui.msgs};
  p.readout0 = document.querySelector('.kvlab-panel.' + name.split(' ').join('.') + ' .kvlab-readout').textContent;
}"""

# Settled: the kernel is idle and nothing changed on the panel for ``quiet`` ms.
JS_PROBE_SETTLED = r"""([name, quiet]) => {
  const p = window.__kvlabUi.probes[name];
  const k = window.__kvlabNb.sessionContext.session?.kernel;
  const times = [...p.readout.map(r => r[0]), ...p.figs.flat(), ...p.keys];
  const last = times.length ? Math.max(...times) : 0;
  return !!k && k.status === 'idle' && p.keys.length > 0 && performance.now() - last > quiet;
}"""

JS_PROBE_READ = r"""(name) => {
  const ui = window.__kvlabUi, p = ui.probes[name];
  const t0 = p.keys.length ? p.keys[0] : null;
  const rel = (t) => t === null || t === undefined ? null : t - t0;
  const texts = p.readout.map(r => r[1]);
  const final = texts.length ? texts[texts.length - 1] : p.readout0;
  const firstFinal = p.readout.find(r => r[1] === final);
  const lastFig = p.figs.map(f => f.length ? rel(Math.max(...f)) : null);
  // a figure's redraw: from the previous thing drawn (the readout or another figure) to its last DOM change
  const marks = [firstFinal && final !== p.readout0 ? rel(firstFinal[0]) : null, ...lastFig].filter(x => x !== null);
  const drawMs = lastFig.map(t => t === null ? null : t - Math.max(0, ...marks.filter(m => m < t)));
  const afterplot = p.plots.map(f => f.length ? rel(Math.max(...f)) : null);
  const painted = p.painted.map(f => f.length ? rel(Math.max(...f)) : null);
  const inWindow = ui.longtasks.filter(([s]) => t0 !== null && s >= t0);
  return {
    keys: p.keys.length,
    readout: firstFinal && final !== p.readout0 ? rel(firstFinal[0]) : null,
    readoutChanges: new Set(texts).size,
    figures: lastFig, afterplot, drawMs, painted,
    figureRedraws: p.plots.map(f => f.length),
    longtaskMs: inWindow.reduce((s, [, d]) => s + d, 0),
    msgsIn: ui.msgs.in - p.msgs0.in, msgsOut: ui.msgs.out - p.msgs0.out,
    bytesIn: ui.msgs.inBytes - p.msgs0.inBytes, bytesOut: ui.msgs.outBytes - p.msgs0.outBytes,
  };
}"""

# What a slider allows and shows: noUiSlider's own options and value.
JS_SLIDER = r"""(c) => {
  const api = c.querySelector('.noUi-target').noUiSlider;
  const r = api.options.range;
  return {min: Number(r.min), max: Number(r.max), step: Number(api.options.step || 1), value: Number(api.get())};
}"""

JS_PANELS = r"""() => [...window.__kvlabNb.content.node.querySelectorAll('.kvlab-panel')].map(p => ({
  name: [...p.classList].filter(c => c.startsWith('kvlab-') && c !== 'kvlab-panel' && c !== 'kvlab-stale').join(' '),
  button: !!p.querySelector('button.kvlab-run'),
  play: !!p.querySelector('.kvlab-play'),
  sliders: [...p.querySelectorAll('[class*="kvlab-control-"]')].filter(c => c.querySelector('.noUi-handle'))
    .map(c => [...c.classList].find(k => k.startsWith('kvlab-control-')).slice('kvlab-control-'.length)),
}))"""

# What each figure of a panel holds (what plotly.js redraws): traces, points, annotations, shapes.
JS_CENSUS = r"""(root) => [...root.querySelectorAll('.kvlab-figure')].map(el => {
  const gd = el.matches('.js-plotly-plot') ? el : (el.querySelector('.js-plotly-plot.kvlab-shown') || el.querySelector('.js-plotly-plot'));
  const len = (v) => v ? (Array.isArray(v) || ArrayBuffer.isView(v) ? Array.from(v).flat().length : 0) : 0;
  const data = (gd && gd.data) || [], layout = (gd && gd.layout) || {};
  return {traces: data.length, points: data.reduce((s, t) => s + Math.max(len(t.x), len(t.y), len(t.z)), 0),
          annotations: (layout.annotations || []).length, shapes: (layout.shapes || []).length,
          types: [...new Set(data.map(t => t.type || 'scatter'))].join('/')};
})"""

# Play frames: every move of a slider handle in the panel (Play drives its slider in the browser).
JS_FRAMES_START = r"""(root) => {
  const ui = window.__kvlabUi;
  ui.frames = [];
  ui.frameObs = new MutationObserver((records) => {
    for (const r of records) {
      const c = r.target.closest('[class*="kvlab-control-"]');
      const name = c ? [...c.classList].find(k => k.startsWith('kvlab-control-')).slice(14) : '?';
      ui.frames.push([performance.now(), name, r.target.getAttribute('aria-valuenow')]);
    }
  });
  root.querySelectorAll('.noUi-handle').forEach(h =>
    ui.frameObs.observe(h, {attributes: true, attributeFilter: ['aria-valuenow']}));
}"""

# The screen against a fresh render made in the kernel: readout text, plotted data, titles, annotations.
JS_COMPARE = r"""([root, fresh]) => {
  const norm = (s) => String(s ?? '').replace(/\s+/g, ' ').trim();
  const tmp = document.createElement('div');
  tmp.innerHTML = fresh.html;
  const problems = [];
  const shown = norm(root.querySelector('.kvlab-readout').textContent);
  if (shown !== norm(tmp.textContent)) problems.push(`readout: shows ${JSON.stringify(shown.slice(0, 160))}, fresh render ${JSON.stringify(norm(tmp.textContent).slice(0, 160))}`);
  const TYPED = {f8: Float64Array, f4: Float32Array, i1: Int8Array, u1: Uint8Array, i2: Int16Array, u2: Uint16Array,
                 i4: Int32Array, u4: Uint32Array};
  const decoded = (v) => (v && typeof v === 'object' && typeof v.bdata === 'string' && TYPED[v.dtype])
    ? Array.from(new TYPED[v.dtype](Uint8Array.from(atob(v.bdata), (c) => c.charCodeAt(0)).buffer)) : v;
  const flat = (v) => { v = decoded(v); return (Array.isArray(v) || ArrayBuffer.isView(v)) ? Array.from(v).flatMap(flat) : [v]; };
  const canon = (v) => { v = decoded(v); return JSON.stringify((v !== null && typeof v === 'object' && !Array.isArray(v) && !ArrayBuffer.isView(v)) ? v : (v === undefined ? null : (Array.isArray(v) || ArrayBuffer.isView(v) ? flat(v) : v))); };
  const KEYS = ['type', 'name', 'x', 'y', 'z', 'text', 'orientation', 'visible'];
  const figs = [...root.querySelectorAll('.kvlab-figure')];
  fresh.figures.forEach((f, i) => {
    const el = figs[i];
    const gd = el && (el.matches('.js-plotly-plot') ? el : (el.querySelector('.js-plotly-plot.kvlab-shown') || el.querySelector('.js-plotly-plot')));
    if (!gd) { problems.push(`figure #${i}: not on screen`); return; }
    const data = gd.data || [];
    if (data.length !== f.data.length) { problems.push(`figure #${i}: ${data.length} traces, fresh render ${f.data.length}`); return; }
    f.data.forEach((t, j) => KEYS.forEach(k => {
      const a = canon(data[j][k]), b = canon(t[k]);
      if (a !== b) problems.push(`figure #${i} trace ${j} ${k}: ${a.slice(0, 80)} vs fresh ${b.slice(0, 80)}`);
    }));
    const title = (l) => norm(typeof l.title === 'string' ? l.title : (l.title || {}).text);
    if (title(gd.layout || {}) !== title(f.layout)) problems.push(`figure #${i} title: ${title(gd.layout)} vs fresh ${title(f.layout)}`);
    const notes = (l) => JSON.stringify((l.annotations || []).map(a => norm(a.text)));
    if (notes(gd.layout || {}) !== notes(f.layout)) problems.push(`figure #${i} annotations differ`);
    if ((gd.layout.shapes || []).length !== (f.layout.shapes || []).length) problems.push(`figure #${i} shapes differ`);
    for (const [key, axis] of Object.entries(f.layout).filter(([k]) => /^[xy]axis\d*$/.test(k))) {
      const shownAxis = gd.layout[key] || {};
      if ((shownAxis.type || '-') !== (axis.type || '-') && axis.type) problems.push(`figure #${i} ${key} type`);
      if (axis.range && JSON.stringify(flat(shownAxis.range || [])) !== JSON.stringify(flat(axis.range)))
        problems.push(`figure #${i} ${key} range: ${JSON.stringify(shownAxis.range)} vs fresh ${JSON.stringify(axis.range)}`);
      if (!axis.range && shownAxis.autorange === false) problems.push(`figure #${i} ${key}: a fixed range, fresh autoranges`);
    }
  });
  return problems;
}"""

# Kernel side: find a panel by its CSS class and render its current control values afresh.
KERNEL_FRESH = '''\
def _kvlab_ui_fresh(css):
    import gc, json
    import numpy
    from kvlab.viz.widgets import Panel
    if css == "BASELINE":
        panel = _kvlab_ui_baseline
    else:
        panel = next(o for o in gc.get_objects() if isinstance(o, Panel) and css in o.widget._dom_classes)
    view = panel.render(**{n: c.value for n, c in panel.controls.items()})
    import base64
    def plain(o):  # plotly >= 6 writes numpy arrays as {"dtype", "bdata", "shape"}: back to lists
        if isinstance(o, dict) and "bdata" in o and "dtype" in o:
            a = numpy.frombuffer(base64.b64decode(o["bdata"]), dtype=o["dtype"])
            shape = o.get("shape")
            shape = [int(n) for n in str(shape).split(",")] if isinstance(shape, str) else shape
            return plain(a.reshape(shape) if shape else a)
        if isinstance(o, dict):
            return {k: plain(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [plain(v) for v in o]
        if isinstance(o, numpy.ndarray):
            return o.tolist()
        return o.item() if isinstance(o, numpy.generic) else o
    figs = [plain(f.to_plotly_json()) for f in view.figures]
    print(json.dumps({"html": view.html, "figures": figs}, default=str))
'''.replace("BASELINE", BASELINE)


# Kernel side: time each refresh of each panel (render, figure diffs, sending) by wrapping Panel's methods.
KERNEL_PROFILE = '''\
def _kvlab_ui_profile():
    import sys, time
    from kvlab.viz import widgets as kw
    if getattr(kw.Panel, "_ui_profiled", False):
        return
    records = kw.Panel._ui_records = {}
    current = {}
    depth = [0]

    def timed(fn, key, method=True):
        def wrapper(*args, **kwargs):
            depth[0] += 1
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0 or key != "figures":  # nested plot builders count once
                    current[key] = current.get(key, 0.0) + (time.perf_counter() - t) * 1e3
        return wrapper

    show = getattr(kw.Panel, "_show", None)

    def profiled_show(self, values, view=None, changed=None):
        current.clear()
        depth[0] = 0
        t = time.perf_counter()
        show(self, values, view, changed)
        total = (time.perf_counter() - t) * 1e3
        css = " ".join(c for c in self.widget._dom_classes if c.startswith("kvlab-") and c not in ("kvlab-panel", "kvlab-stale"))
        rec = {"total": total, "plan": current.get("plan", 0.0), "apply": current.get("apply", 0.0),
               "figures": current.get("figures", 0.0), "ready": float(view is not None)}
        rec["render"] = total - rec["plan"] - rec["apply"]
        records.setdefault(f"{css}|{changed}", []).append(rec)

    if hasattr(kw.Panel, "_show"):
        kw.Panel._show = profiled_show
        kw.FigureView.apply = timed(kw.FigureView.apply, "apply")
        kw.FigureView.plan = timed(kw.FigureView.plan, "plan")
    else:  # kvlab before the pre-rendering (for a before/after run): refresh() renders and updates
        refresh = kw.Panel.refresh
        kw.Panel._show = profiled_show
        kw.Panel.refresh = lambda self: self._show(None)
        show = lambda self, values, view, changed: refresh(self)
        kw.FigureView.update = timed(kw.FigureView.update, "apply")
    # the chapters' plot builders (render functions call them as plots.<name>): time spent building figures
    for name, module in list(sys.modules.items()):
        if name.startswith("kvlab.viz.") and name.endswith("_plots"):
            for attr, fn in list(vars(module).items()):
                if attr.endswith("_figure") and callable(fn) and getattr(fn, "__module__", "") == name:
                    setattr(module, attr, timed(fn, "figures"))
    kw.Panel._ui_profiled = True


def _kvlab_ui_profile_read():
    import json, statistics
    from kvlab.viz import widgets as kw
    out = {}
    for css, recs in getattr(kw.Panel, "_ui_records", {}).items():
        cold = [r for r in recs if not r["ready"]] or recs
        out[css] = {k: statistics.median(r[k] for r in cold) for k in ("render", "figures", "plan", "apply", "total")}
        out[css]["n"], out[css]["ready"] = len(recs), sum(r["ready"] for r in recs)
    print(json.dumps(out))


_kvlab_ui_profile()
'''


@dataclass
class Row:
    chapter: str
    panel: str
    control: str
    readout_ms: list = field(default_factory=list)
    base_readout_ms: list = field(default_factory=list)  # the baseline's, pressed just before each of these
    base_figure_ms: list = field(default_factory=list)
    base_burst_ms: list = field(default_factory=list)
    figure_ms: list = field(default_factory=list)
    painted_ms: list = field(default_factory=list)      # key -> the frame after the figures' last change, painted
    base_painted_ms: list = field(default_factory=list)
    burst_ms: list = field(default_factory=list)
    burst_renders: list = field(default_factory=list)   # distinct readouts shown during a burst
    msgs_in: list = field(default_factory=list)         # kernel -> browser comm messages per press
    msgs_out: list = field(default_factory=list)        # browser -> kernel
    bytes_in: list = field(default_factory=list)
    bytes_out: list = field(default_factory=list)
    longtask_ms: list = field(default_factory=list)     # main-thread long tasks per press
    redraws: list = field(default_factory=list)         # plotly afterplot events per press (all figures)
    wrong: list = field(default_factory=list)            # final state vs fresh render
    play: dict = field(default_factory=dict)
    kernel: dict = field(default_factory=dict)          # median ms per refresh: render, plan, apply, total
    draw_ms: list = field(default_factory=list)         # per press: per figure, first to last DOM change
    census: list = field(default_factory=list)          # per figure: traces, points, annotations, shapes


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def p90(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    return xs[min(len(xs) - 1, round(0.9 * (len(xs) - 1)))]


class Bench:
    def __init__(self, ch: ChapterPage, quiet_ms: int = QUIET_MS):
        self.ch = ch
        self.page = ch.page
        self.quiet = quiet_ms
        self.names: dict[str, str] = {}
        self.direction: dict[tuple[str, str], bool] = {}
        self.ch.execute(KERNEL_FRESH)
        self.ch.execute(KERNEL_PROFILE)

    def root(self, panel: str):
        return self.page.locator(f".kvlab-panel.{panel}").first

    def probe(self, panel: str) -> str:
        if panel not in self.names:
            self.names[panel] = self.root(panel).evaluate(JS_PROBE_INSTALL)
        return self.names[panel]

    def handle(self, panel: str, control: str):
        return self.root(panel).locator(f".kvlab-control-{control} .noUi-handle").first

    def slider(self, panel: str, control: str) -> dict:
        return self.root(panel).locator(f".kvlab-control-{control}").first.evaluate(JS_SLIDER)

    def press(self, panel: str, control: str, keys: list[str], timeout_s: float = 120) -> dict:
        name = self.probe(panel)
        handle = self.handle(panel, control)
        handle.scroll_into_view_if_needed()
        handle.focus()
        self.page.wait_for_timeout(150)  # scrolling and focus settle before the clock starts
        self.page.evaluate(JS_PROBE_RESET, name)
        for key in keys:
            self.page.keyboard.press(key)
        self.ch.wait_js(JS_PROBE_SETTLED, int(timeout_s * 1000), f"{panel}: did not settle after {keys}",
                        arg=[name, self.quiet])
        return self.page.evaluate(JS_PROBE_READ, name)

    def keys_for(self, panel: str, control: str, n: int) -> list[str]:
        """``n`` presses that stay inside the slider's range: on in the direction of the last ones (each press
        a value not just shown), turning back at an end."""
        s = self.slider(panel, control)
        pos, top = round((s["value"] - s["min"]) / s["step"]), round((s["max"] - s["min"]) / s["step"])
        right = self.direction.get((panel, control), top - pos >= pos)
        keys = []
        for _ in range(n):
            if (right and pos == top) or (not right and pos == 0):
                right = not right
            keys.append("ArrowRight" if right else "ArrowLeft")
            pos += 1 if right else -1
        self.direction[(panel, control)] = right
        return keys

    def fresh_problems(self, panel: str, tries: int = 5) -> list[str]:
        """What differs between the screen and a fresh render of the kernel's values. A slider drawn in the browser
        moves the screen before the kernel hears the last value (ipywidgets sends it once the previous one is
        answered, and a cell run in between is answered first): a difference is looked at again, a second apart,
        until it goes or ``tries`` runs all show it."""
        css = panel.split()[0]
        for attempt in range(tries):
            fresh = json.loads(self.ch.execute(f"_kvlab_ui_fresh({css!r})"))
            problems = self.page.evaluate(JS_COMPARE, [self.root(panel).element_handle(), fresh])
            if not problems:
                return []
            time.sleep(1.0)
        return problems

    def play(self, panel: str, max_frames: int = 25, timeout_s: float = 120) -> dict:
        """Press Play; pause after ``max_frames`` frames. Frames are the slider's moves (``aria-valuenow`` of its
        handle); the lag of a frame is the time until the readout next changes."""
        name = self.probe(panel)
        root = self.root(panel)
        stop = root.locator(".kvlab-play button:has(i.fa-stop)")
        if stop.count():  # from the start of the range (Stop rewinds), settled
            self.page.evaluate(JS_PROBE_RESET, name)
            stop.first.click()
            self.page.evaluate("(name) => window.__kvlabUi.probes[name].keys.push(performance.now())", name)
            self.ch.wait_js(JS_PROBE_SETTLED, int(timeout_s * 1000), f"{panel}: did not settle after Stop",
                            arg=[name, self.quiet])
        self.page.evaluate(JS_PROBE_RESET, name)
        self.page.evaluate(JS_FRAMES_START, root.element_handle())
        button = root.locator(".kvlab-play button").first
        button.scroll_into_view_if_needed()
        pausing = root.locator(".kvlab-play button i.fa-pause")
        start = time.monotonic()
        button.click()
        self.page.evaluate("(name) => window.__kvlabUi.probes[name].keys.push(performance.now())", name)
        while time.monotonic() - start < timeout_s:
            if self.page.evaluate("() => window.__kvlabUi.frames.length") >= max_frames or not pausing.count():
                break
            self.page.wait_for_timeout(100)
        if pausing.count():
            button.click()
        self.ch.wait_js(JS_PROBE_SETTLED, int(timeout_s * 1000), f"{panel}: did not settle after Play",
                        arg=[name, self.quiet])
        frames = self.page.evaluate("() => { window.__kvlabUi.frameObs.disconnect(); return window.__kvlabUi.frames; }")
        read = self.page.evaluate(JS_PROBE_READ, name)
        readouts = self.page.evaluate("(name) => window.__kvlabUi.probes[name].readout.map(r => r[0])", name)
        figs = self.page.evaluate("(name) => window.__kvlabUi.probes[name].figs.map(f => f.length ? Math.max(...f) : null)",
                                  name)
        ends = [*readouts[-1:], *[f for f in figs if f]]
        tail = max(ends) - frames[-1][0] if ends and frames else None
        lags = []
        for t, *_ in frames:
            after = [r for r in readouts if r >= t - 2]  # (a readout set in the frame's own task may be logged first)
            lags.append(after[0] - t if after else None)
        return {"control": frames[0][1] if frames else "?", "frames": len(frames),
                "frame_ms": median([b[0] - a[0] for a, b in zip(frames, frames[1:])]),
                "readout_updates": read["readoutChanges"] - 1,
                "readout_interval_ms": median([b - a for a, b in zip(readouts, readouts[1:])]),
                "lag_first_ms": median(lags[:3]), "lag_last_ms": median(lags[-3:]), "tail_ms": tail,
                "problems": self.fresh_problems(panel)}


def measure_chapter(ch: ChapterPage, chapter: str, presses: int, bursts: int, only: list[str] | None,
                    all_sliders: bool, play: bool, prefetch: bool = True) -> list[Row]:
    bench = Bench(ch)
    ch.execute(f"import kvlab.viz.widgets as _kvlab_w; _kvlab_w.PREFETCH = {prefetch}")
    state = ch.render_state()
    if state["displayErrors"] or state["bugs"] or state["unrenderedPlots"]:
        print(f"  {chapter}: NOT ALL RENDERED: {state['displayErrors']} {state['bugs']} "
              f"{state['unrenderedPlots']} plots unrendered", flush=True)
    panels = [p for p in ch.page.evaluate(JS_PANELS) if not p["button"] and p["sliders"]]
    if only:
        panels = [p for p in panels if any(o in p["name"] for o in only) or BASELINE in p["name"]]
    base = next(p for p in panels if BASELINE in p["name"])
    targets = [(p["name"], c) for p in panels if p is not base
               for c in (p["sliders"] if all_sliders else p["sliders"][:1])]
    base_key = (base["name"], "value")
    rows = {base_key: Row(chapter, "baseline (bare widgets)", "value")}
    for panel, c in targets:
        rows[(panel, c)] = Row(chapter, panel.replace("kvlab-", ""), c)

    def single(key, paired: Row | None = None):
        r = bench.press(*key, bench.keys_for(*key, 1))
        figs = [f for f in r["figures"] if f is not None]
        painted = [f for f in r["painted"] if f is not None]
        for row in [rows[key], *([paired] if paired else [])]:
            if row is paired:
                row.base_readout_ms.append(r["readout"])
                row.base_figure_ms.append(max(figs) if figs else None)
                row.base_painted_ms.append(max(painted) if painted else None)
                continue
            row.readout_ms.append(r["readout"])
            row.figure_ms.append(max(figs) if figs else None)
            row.painted_ms.append(max(painted) if painted else None)
            row.msgs_in.append(r["msgsIn"])
            row.msgs_out.append(r["msgsOut"])
            row.bytes_in.append(r["bytesIn"])
            row.bytes_out.append(r["bytesOut"])
            row.longtask_ms.append(r["longtaskMs"])
            row.redraws.append(sum(r["figureRedraws"]))
            row.draw_ms.append(r["drawMs"])

    def burst(key, paired: Row | None = None):
        r = bench.press(*key, bench.keys_for(*key, BURST))
        ends = [t for t in [r["readout"], *r["figures"]] if t is not None]
        if paired:
            paired.base_burst_ms.append(max(ends) if ends else None)
        row = rows[key]
        row.burst_ms.append(max(ends) if ends else None)
        row.burst_renders.append(r["readoutChanges"])
        problems = bench.fresh_problems(key[0])
        if problems:
            row.wrong.append(problems)

    # each slider in turn, its presses interleaved with the baseline's: the same load for both
    for panel, control in targets:
        target = rows[(panel, control)]
        for _ in range(presses):
            single(base_key, target)
            single((panel, control))
        for _ in range(bursts):
            burst(base_key, target)
            burst((panel, control))
        print(f"  {chapter}: {panel} {control} done", flush=True)
    for (panel, _), row in rows.items():
        row.census = bench.root(panel).evaluate(JS_CENSUS)
    if ch.console_errors or ch.kernel_errors():
        print(f"  {chapter}: browser console / kernel errors: {ch.console_errors[:5]} {ch.kernel_errors()[:5]}")
    kernel = json.loads(ch.execute("_kvlab_ui_profile_read()"))
    for (panel, control), row in rows.items():
        row.kernel = kernel.get(f"{panel}|{control}") or kernel.get(f"{panel}|None", {})  # (kvlab before 13)
    plays = []
    if play:
        for p in panels:
            if p["play"] and p is not base:
                result = bench.play(p["name"])
                row = Row(chapter, p["name"].replace("kvlab-", ""), result["control"], play=result)
                row.wrong += [result["problems"]] if result["problems"] else []
                plays.append(row)
    return [*rows.values(), *plays]


def fmt_ms(x):
    return "—" if x is None else f"{x:,.0f}"


def fmt_ratio(x, b):
    return "" if x is None or not b else f" ({x / b:.2f}×)"


def kernel_ms(k: dict) -> str:
    if not k:
        return "—"
    return (f"{k['render']:.0f} ({k['figures']:.0f} in plot builders) · {k['plan']:.1f} · {k['apply']:.1f} "
            f"({k['ready']:.0f}/{k['n']} pre-rendered)")


def table(rows: list[Row]) -> str:
    lines = ["| panel (chapter), slider | key → readout median / p90 ms | key → figures median / p90 ms | "
             "key → figures painted median / p90 ms | "
             f"burst of {BURST} → settled ms | renders in burst | comm msgs/press in·out | KiB/press in·out | "
             "plotly redraws/press | kernel ms per update not pre-rendered: render · diff · send | final = fresh |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    by_chapter: dict[str, list[Row]] = {}
    for r in rows:
        if not r.play:
            by_chapter.setdefault(r.chapter, []).append(r)
    for chapter, rs in by_chapter.items():
        for r in rs:
            paired = bool(r.base_readout_ms)
            b_ro = median(r.base_readout_ms) if paired else median(r.readout_ms)
            b_fig = median(r.base_figure_ms) if paired else median(r.figure_ms)
            b_paint = median(r.base_painted_ms) if paired else median(r.painted_ms)
            paint = median(r.painted_ms)
            b_burst = median(r.base_burst_ms) if paired else median(r.burst_ms)
            ro, fig, burst = median(r.readout_ms), median(r.figure_ms), median(r.burst_ms)
            ok = "—" if not r.burst_ms and not r.play else ("yes" if not r.wrong else "NO")
            kib = (f"{(median(r.bytes_in) or 0) / 1024:.1f} · {(median(r.bytes_out) or 0) / 1024:.1f}"
                   if r.bytes_in else "—")
            lines.append(
                f"| {r.panel} ({chapter}), {r.control} | {fmt_ms(ro)}{fmt_ratio(ro, b_ro)} / {fmt_ms(p90(r.readout_ms))} | "
                f"{fmt_ms(fig)}{fmt_ratio(fig, b_fig)} / {fmt_ms(p90(r.figure_ms))} | "
                f"{fmt_ms(paint)}{fmt_ratio(paint, b_paint)} / {fmt_ms(p90(r.painted_ms))} | "
                f"{fmt_ms(burst)}{fmt_ratio(burst, b_burst)} | {fmt_ms(median(r.burst_renders))} | "
                f"{fmt_ms(median(r.msgs_in))} · {fmt_ms(median(r.msgs_out))} | {kib} | "
                f"{fmt_ms(median(r.redraws))} | {kernel_ms(r.kernel)} | {ok} |")
    figs = list({r.panel + r.chapter: r for r in rows if r.census and not r.play}.values())
    if figs:
        lines += ["", "| figure (chapter) | what plotly draws | browser ms to redraw it (median over the presses that changed it) |",
                  "|---|---|---|"]
        for r in figs:
            same_panel = [x for x in rows if x.panel == r.panel and x.chapter == r.chapter]
            for i, c in enumerate(r.census):
                draws = median([d[i] for x in same_panel for d in x.draw_ms if i < len(d)])
                lines.append(f"| {r.panel} #{i} ({r.chapter}) | {c['traces']} {c['types']} traces, {c['points']:,} points, "
                             f"{c['annotations']} annotations, {c['shapes']} shapes | {fmt_ms(draws)} |")
    plays = [r for r in rows if r.play]
    if plays:
        lines += ["", "| Play (chapter) | frames | frame interval ms | readout updates | readout interval ms | "
                      "lag first → last frames ms | settled after last frame ms | final = fresh |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in plays:
            p = r.play
            lines.append(f"| {r.panel} ({r.chapter}), {r.control} | {p['frames']} | {fmt_ms(p['frame_ms'])} | "
                         f"{p['readout_updates']} | {fmt_ms(p['readout_interval_ms'])} | "
                         f"{fmt_ms(p['lag_first_ms'])} → {fmt_ms(p['lag_last_ms'])} | {fmt_ms(p['tail_ms'])} | "
                         f"{'yes' if not p['problems'] else 'NO'} |")
    return "\n".join(lines)


def add_baseline(notebook: Path) -> None:
    nb = json.loads(notebook.read_text())
    nb["cells"].append({"cell_type": "code", "execution_count": None, "id": "kvlab-ui-baseline", "metadata": {},
                        "outputs": [], "source": BASELINE_CELL.splitlines(keepends=True)})
    notebook.write_text(json.dumps(nb, ensure_ascii=False, indent=1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chapters", nargs="*", help="notebook name prefixes, e.g. 02 03 (default: all)")
    ap.add_argument("--panels", nargs="*", help="only panels whose CSS class contains one of these")
    ap.add_argument("--presses", type=int, default=8, help="single presses per slider (default 8)")
    ap.add_argument("--bursts", type=int, default=2, help=f"bursts of {BURST} presses per slider (default 2)")
    ap.add_argument("--first-slider", action="store_true", help="only the first slider of each panel (default: all)")
    ap.add_argument("--no-play", action="store_true", help="skip the Play measurements")
    ap.add_argument("--no-prefetch", action="store_true",
                    help="turn kvlab's pre-rendering of the next slider step off in each kernel (cold renders)")
    ap.add_argument("--json", type=Path, help="write the raw samples here")
    args = ap.parse_args(argv)

    from playwright.sync_api import sync_playwright

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server and browser on a kill, too

    notebooks = sorted(p.name for p in CHAPTER_DIR.glob("*.ipynb"))
    if args.chapters:
        notebooks = [n for n in notebooks if any(n.startswith(c) for c in args.chapters)]
    load0 = os.getloadavg()
    rows: list[Row] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="kvlab-ui-") as tmp, sync_playwright() as pw:
        browser = launch_chromium(pw)
        lab = LabServer(Path(tmp), kernel_threads=os.environ.get("KVLAB_BROWSER_KERNEL_THREADS")).start()
        try:
            for nb in notebooks:
                add_baseline(lab.root / "chapters" / nb)
                ch = ChapterPage(browser, lab, f"chapters/{nb}")
                try:
                    ch.open()
                    run = ch.run_all()
                    print(f"{nb}: run-all {run['seconds']:.0f} s, load average {os.getloadavg()[0]:.1f}", flush=True)
                    measured = measure_chapter(ch, nb[:2], args.presses, args.bursts, args.panels,
                                               not args.first_slider, not args.no_play, not args.no_prefetch)
                    rows += measured
                    print(table(measured), flush=True)
                except Exception as exc:  # one chapter's failure must not lose the others' numbers
                    failures.append(f"{nb}: {type(exc).__name__}: {str(exc)[-3000:]}")
                    print(f"{nb}: FAILED: {failures[-1]}", flush=True)
                finally:
                    ch.close()
        finally:
            lab.stop()
            browser.close()
    load1 = os.getloadavg()
    print()
    print(f"UI latency on {os.cpu_count()} CPU cores, load average {load0[0]:.1f} at the start and {load1[0]:.1f} at "
          f"the end; ratios are to the baseline measured in the same page, interleaved press by press "
          f"({args.presses} single presses and {args.bursts} bursts of {BURST} per slider); kvlab's pre-rendering "
          f"{'off' if args.no_prefetch else 'on'}.")
    print()
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1, ensure_ascii=False))
    wrong = [r for r in rows if r.wrong]
    for r in wrong:
        print(f"\nfinal state differs from a fresh render: {r.panel} ({r.chapter}), {r.control}:\n  "
              + "\n  ".join(p for probs in r.wrong for p in probs[:5]))
    for f in failures:
        print(f"\nnot measured: {f[:2000]}")
    return 1 if wrong or failures else 0


if __name__ == "__main__":
    sys.exit(main())
