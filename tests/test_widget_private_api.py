"""kvlab.viz.widgets leans on names that plotly.py, ipywidgets and anywidget do not promise to keep (see pyproject.toml,
where their versions are bounded to the tested ones). If an upgrade moves one of them, this fails here, by name,
instead of every panel going quietly blank or stale in the browser."""
import gzip
import re

import ipywidgets as W
import plotly.graph_objects as go
import pytest

from kvlab.viz import plotly_code as pc
from kvlab.viz import widgets as kw

PLOTLY_METHODS = ("_send_update_msg", "_send_addTraces_msg", "_send_deleteTraces_msg", "_send_restyle_msg",
                  "_send_relayout_msg", "_handler_js2py_traceDeltas", "_handler_js2py_layoutDelta",
                  "_lock_property", "_normalize_trace_indexes")
PLOTLY_TRAITS = ("_js2py_traceDeltas", "_js2py_layoutDelta", "_py2js_update", "_py2js_addTraces",
                 "_py2js_deleteTraces", "_widget_data", "_widget_layout", "_last_trace_edit_id", "_last_layout_edit_id")


@pytest.mark.parametrize("name", PLOTLY_METHODS)
def test_plotly_figure_widget_still_has_the_methods_panel_figure_widget_replaces_or_calls(name):
    assert callable(getattr(go.FigureWidget, name, None)), f"plotly.py no longer has FigureWidget.{name}"


@pytest.mark.parametrize("name", PLOTLY_TRAITS)
def test_plotly_figure_widget_still_syncs_the_traits_kvlab_writes(name):
    assert go.FigureWidget.class_traits().get(name) is not None or name in go.FigureWidget.class_trait_names(), \
        f"plotly.py's FigureWidget no longer has the trait {name}"


def test_plotly_internals_kvlab_imports_and_reads():
    from plotly.basedatatypes import Undefined  # noqa: F401
    from plotly.serializers import custom_serializers

    assert "to_json" in custom_serializers
    fig = go.Figure(go.Scatter(y=[1, 2]))
    assert isinstance(fig._data, list) and isinstance(fig._layout, dict)  # read by figure_delta


def test_ipywidgets_still_holds_a_property_lock_while_applying_a_browser_update():
    slider = W.IntSlider()
    assert slider._property_lock == {}  # Panel._moved_in_browser and Panel.follow read it
    seen = []
    slider.observe(lambda change: seen.append(dict(slider._property_lock)), names="value")
    slider.set_state({"value": 3})  # what ipywidgets does with a comm message from the browser
    assert seen == [{"value": 3}]
    assert callable(slider.hold_sync) and isinstance(slider._trait_values, dict)


def test_plotly_bundle_still_follows_anywidgets_module_contract():
    """js/figure.mjs calls the bundle's default export and then its initialize/render, as anywidget does."""
    bundle = str(go.FigureWidget._esm)
    assert len(bundle) > 1_000_000, "plotly.py's FigureWidget _esm is no longer its whole widget bundle"
    exports = re.findall(r"export\s*\{([^}]*)\}", bundle)
    assert exports and "as default" in exports[-1]
    assert "initialize(" in bundle and "render(" in bundle


def test_panel_figure_widget_carries_a_small_loader_and_the_kernel_one_compressed_bundle():
    fig = kw.PanelFigureWidget(go.Figure(go.Scatter(y=[1, 2])))
    assert len(fig._esm) < 4000 and "slot(VERSION)" in fig._esm
    code = pc.plotly_code()
    assert code is pc.plotly_code()  # one per kernel
    assert gzip.decompress(code.code).decode() == str(go.FigureWidget._esm)
    assert len(code.code) < 0.4 * len(str(go.FigureWidget._esm))
    import plotly

    assert code.version == plotly.__version__ and repr(plotly.__version__).strip("'") in fig._esm


def test_plotly_bundle_still_exports_the_figure_view_whose_reports_code_esm_silences():
    """CODE_ESM makes FigureView's after-redraw reports to the kernel no-ops; if the class or its methods are renamed
    the figures still draw, but every redraw sends the whole drawn figure's diff again (tests/ui_latency.py: KiB out)."""
    bundle = str(go.FigureWidget._esm)
    exports = re.findall(r"export\s*\{([^}]*)\}", bundle)[-1]
    view = re.search(r"(\w+)\s+as\s+FigureView\b", exports)
    assert view, f"plotly's widget bundle no longer exports FigureView ({exports})"
    start = re.search(rf"(class\s+{view.group(1)}\b|\b{view.group(1)}\s*=\s*class\b)", bundle)
    assert start, f"FigureView ({view.group(1)}) is no longer a class in plotly's widget bundle"
    body = bundle[start.start():]
    for name in pc.QUIET_METHODS:
        assert re.search(rf"\b{name}\(\w*\)\s*\{{", body), f"plotly's FigureView no longer has {name}"
        assert name in pc.CODE_ESM


def test_plotly_bundle_still_sets_window_plotly_when_it_loads():
    """The browser-drawn steps (kvlab.viz.browser_steps) draw with the plotly.js that the kernel's one PlotlyCode
    brought: they find it as window.Plotly, which plotly.js's bundled build sets when it loads."""
    bundle = str(go.FigureWidget._esm)
    assert re.search(r"window\.Plotly\s*=", bundle), "plotly's widget bundle no longer sets window.Plotly"
    from kvlab.viz.browser_steps import BrowserSteps

    steps = BrowserSteps([])
    assert "slot(model.get(\"version\"))" in steps._esm and "globalThis.Plotly" in steps._esm
    assert steps.version == pc.plotly_code().version


def test_ipywidgets_still_lists_a_selection_sliders_values_and_syncs_added_traits():
    """kvlab.viz.browser_steps: a SelectionSlider's values in order (``_options_values``, next_value reads it too),
    and a trait added to a widget after it was made (one ``at_<slider>`` per slider) is synced like a declared one."""
    from traitlets import Any

    from kvlab.viz.browser_steps import Axis, BrowserSteps

    slider = W.SelectionSlider(options=[("small", "s"), ("large", "l")], value="l")
    assert tuple(slider._options_values) == ("s", "l")
    steps = BrowserSteps([Axis("size", slider)])
    assert "at_size" in steps.keys and isinstance(steps.traits()["at_size"], Any)
    assert steps.links[0].source == (slider, "index") and steps.get_state()["at_size"] is None
