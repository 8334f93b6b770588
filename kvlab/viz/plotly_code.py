"""plotly's widget code, sent to the browser once per kernel, and the small loaders that use it.

plotly's FigureWidget is an anywidget whose ``_esm`` is plotly's whole widget bundle (about 5 MB, plotly.js
inside), synced and saved with every figure: a chapter executed with its widget state saved carried one copy per
figure (3.4: four copies, 20 MB). Here one PlotlyCode widget per kernel carries the bundle gzip-compressed
(about 1.5 MB; a notebook saved with its widget state keeps this one copy), and each figure's ``_esm`` is a few
lines that wait for it (FIGURE_ESM): the front end decompresses and imports it once per page. Relies on anywidget's
module contract (a default export returning ``initialize``/``render``), which plotly's bundle also follows, and on
plotly.js setting ``window.Plotly`` when it loads (the browser-drawn steps of ``browser_steps.py`` draw with it);
tests/test_widget_private_api.py checks all three.
"""
from __future__ import annotations

import functools
import gzip
import json

import plotly.graph_objects as go
from traitlets import Bytes, Unicode

try:
    from anywidget import AnyWidget
except ImportError:  # figure_mode() is then "rerender": no figure widget is made
    import ipywidgets as W

    AnyWidget = W.DOMWidget

SLOT_JS = """
const KEY = Symbol.for("kvlab.plotly-widget-code");
function slot(version) {
  const all = (globalThis[KEY] ??= {});
  if (!all[version]) {
    let resolve, reject;
    const promise = new Promise((a, b) => { resolve = a; reject = b; });
    all[version] = { promise, resolve, reject, started: false };
  }
  return all[version];
}
"""
QUIET_METHODS = ("_sendTraceDeltas", "_sendLayoutDelta")  # plotly's FigureView methods made no-ops (CODE_ESM)
CODE_ESM = SLOT_JS + f"const QUIET = {json.dumps(QUIET_METHODS)};" + """
async function load(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  const url = URL.createObjectURL(new Blob([await new Response(stream).text()], { type: "text/javascript" }));
  try { return quiet(await import(url)).default; } finally { URL.revokeObjectURL(url); }
}
// After every redraw plotly's view diffs the whole drawn figure against its data and sends the result to the
// kernel (about 13 KiB a heatmap figure), which PanelFigureWidget ignores: skipped here, in the browser.
function quiet(module) {
  const view = module.FigureView && module.FigureView.prototype;
  for (const name of QUIET) if (view && typeof view[name] === "function") view[name] = function () {};
  return module;
}
export default () => ({
  initialize({ model }) {
    const s = slot(model.get("version"));
    if (!s.started) { s.started = true; load(model.get("code")).then(s.resolve, s.reject); }
  },
});
"""
FIGURE_ESM = SLOT_JS + """
export default () => {
  let figure;
  return {
    async initialize(ctx) {
      figure = (await slot(VERSION).promise)();
      return figure.initialize?.(ctx);
    },
    render(ctx) { return figure.render(ctx); },
  };
};
"""


@functools.cache
def plotly_widget_bundle() -> bytes:
    """plotly's widget bundle (the ``_esm`` plotly.py gives every FigureWidget), gzip-compressed."""
    return gzip.compress(str(go.FigureWidget._esm).encode(), 6, mtime=0)  # mtime=0: the same bytes every run


def plotly_version() -> str:
    import plotly

    return plotly.__version__


class PlotlyCode(AnyWidget):
    """Never displayed: carries plotly's widget bundle (compressed) to the front end once per kernel."""

    _esm = CODE_ESM
    version = Unicode().tag(sync=True)
    code = Bytes().tag(sync=True)


_shared_code: list = []  # the kernel's one PlotlyCode widget (made again if something closed it)


def plotly_code() -> PlotlyCode:
    if not _shared_code or _shared_code[0].comm is None:
        _shared_code[:] = [PlotlyCode(version=plotly_version(), code=plotly_widget_bundle())]
    return _shared_code[0]
