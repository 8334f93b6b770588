"""plotly's widget code, sent to the browser once per kernel, and the small loaders that use it.

plotly's FigureWidget is an anywidget whose ``_esm`` is plotly's whole widget bundle (about 5 MB, plotly.js
inside), synced and saved with every figure: a chapter executed with its widget state saved carried one copy per
figure (3.4: four copies, 20 MB). Here one PlotlyCode widget per kernel carries the bundle gzip-compressed
(about 1.5 MB; a notebook saved with its widget state keeps this one copy), and each figure's ``_esm`` is a few
lines that wait for it (``js/figure.mjs``): the front end decompresses and imports it once per page. Relies on anywidget's
module contract (a default export returning ``initialize``/``render``), which plotly's bundle also follows, and on
plotly.js setting ``window.Plotly`` when it loads (the browser-drawn steps of ``browser_steps.py`` draw with it);
tests/test_widget_private_api.py checks all three. The JavaScript lives in ``js/*.mjs`` (:func:`esm`).
"""
from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path

import plotly.graph_objects as go
from traitlets import Bytes, Unicode

try:
    from anywidget import AnyWidget
except ImportError:  # figure_mode() is then "rerender": no figure widget is made
    import ipywidgets as W

    AnyWidget = W.DOMWidget

JS = Path(__file__).with_name("js")  # the browser's side of the widgets, one ES module per file (shipped in the wheel)
QUIET_METHODS = ("_sendTraceDeltas", "_sendLayoutDelta")  # plotly's FigureView methods made no-ops (code.mjs)


def esm(*names: str, **consts) -> str:
    """An anywidget module (``_esm``) assembled from ``kvlab/viz/js``: ``slot.mjs`` (every widget shares plotly's code
    through it), ``const NAME = <JSON>;`` for each of ``consts`` (values the kernel decides), then the files
    ``names`` (``"pick"`` -> ``pick.mjs``) in order. Each file is checked alone by ``node --check``; the assembled
    module by tests/test_js.py."""
    head = "".join(f"const {name} = {json.dumps(value)};\n" for name, value in consts.items())
    return "\n".join([(JS / "slot.mjs").read_text(encoding="utf-8"), head]
                     + [(JS / f"{name}.mjs").read_text(encoding="utf-8") for name in names])


CODE_ESM = esm("code", QUIET=list(QUIET_METHODS))


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
