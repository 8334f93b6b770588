"""The widget layer: rendering, error messages instead of tracebacks, and the Colab path."""
import sys
import types

import ipywidgets as W
import plotly.graph_objects as go
import pytest

from kvlab.viz import widgets as kw


def _render(n, kind):
    if n <= 0:
        raise ValueError(f"seq_len must be a positive integer (>= 1), got {n}")
    fig = go.Figure(go.Bar(x=list(range(n)), y=[1] * n)) if kind == "bar" else go.Figure(go.Scatter(y=[n]))
    return kw.View([fig], f"n = {n}")


@pytest.mark.parametrize("mode", ["widget", "rerender"])
def test_panel_updates_figure_and_readout(mode):
    panel = kw.Panel({"n": W.IntText(value=3), "kind": W.Dropdown(options=["bar", "line"], value="bar")},
                     _render, mode=mode)
    assert panel.readout.value == "n = 3" and panel.views[0].mode == mode
    panel.set(n=5)
    assert panel.readout.value == "n = 5" and panel.views[0].updates == 1
    assert list(panel.views[0].figure.data[0].x) == [0, 1, 2, 3, 4]
    if mode == "widget":
        assert list(panel.views[0].widget.data[0].x) == [0, 1, 2, 3, 4]
    panel.set(kind="line")  # the trace type changes: the widget swaps its traces
    assert panel.views[0].figure.data[0].type == "scatter"
    if mode == "widget":
        assert panel.views[0].widget.data[0].type == "scatter"


@pytest.mark.parametrize("mode", ["widget", "rerender"])
def test_bad_value_shows_message_and_greys_out_stale_numbers(mode):
    panel = kw.Panel({"n": W.IntText(value=3), "kind": W.Dropdown(options=["bar"], value="bar")}, _render,
                     mode=mode)
    assert not panel.stale
    panel.set(n=0)
    assert "kvlab-msg-warn" in panel.message.value and "序列长度 S" in panel.message.value
    assert "上一次有效" in panel.message.value  # says that what is left on screen is not current
    # The last good numbers stay, greyed out: never shown as if they were current.
    assert panel.readout.value == "n = 3" and panel.stale
    assert "kvlab-stale" in panel.widget._dom_classes  # the CSS greys out its readout and figures
    assert ".kvlab-panel.kvlab-stale .kvlab-readout" in panel.style.value
    assert ".kvlab-panel.kvlab-stale .kvlab-figure" in panel.style.value
    panel.set(n=4)
    assert panel.message.value == "" and panel.readout.value == "n = 4" and not panel.stale
    assert "kvlab-stale" not in panel.widget._dom_classes


def test_input_error_is_shown_in_chinese_as_is():
    from kvlab.inputs import InputError, whole_number

    def render(n):
        whole_number("批次 B", n, 1, 10)
        return kw.View([go.Figure()], f"B = {n}")

    panel = kw.Panel({"n": W.IntText(value=2)}, render, mode="rerender")
    panel.set(n=0)
    assert "「批次 B」应在 1 到 10 之间，收到的是 0" in panel.message.value and panel.stale
    with pytest.raises(InputError, match="批次 B"):
        render(11)


def test_bug_in_callback_is_reported_as_bug():
    def broken(n):
        if n > 1:
            raise RuntimeError("boom")
        return kw.View([go.Figure()], "ok")

    panel = kw.Panel({"n": W.IntSlider(value=1, min=1, max=3)}, broken, mode="rerender")
    panel.set(n=2)
    assert "kvlab-msg-bug" in panel.message.value and "boom" in panel.message.value


def test_button_panel_waits_for_click():
    calls = []

    def render(n):
        calls.append(n)
        return kw.View([go.Figure()], str(n))

    button = W.Button(description="run")
    panel = kw.Panel({"n": W.IntSlider(value=1, min=1, max=9)}, render, button=button, mode="rerender")
    panel.set(n=7)
    assert calls == [1]  # a costly measurement does not rerun on every slider move
    button.click()
    assert calls == [1, 7] and panel.readout.value == "7" and not button.disabled


def test_control_classes_for_browser_tests():
    slider = W.IntSlider(value=1)
    panel = kw.Panel({"step": slider}, lambda step: kw.View([go.Figure()], ""), css_class="kvlab-x", mode="rerender")
    assert "kvlab-control-step" in slider._dom_classes
    assert {"kvlab-x", "kvlab-panel"} <= set(panel.widget._dom_classes)
    assert "kvlab-figure" in panel.views[0].widget._dom_classes


def test_play_slider_is_linked():
    play, slider = kw.play_slider("step", 1, 1, 5)
    assert isinstance(play, W.Play) and slider.max == 5 and play.max == 5
    # the link lives in the browser (jslink): check it joins these two widgets' values
    assert play.link.source == (play, "value") and play.link.target == (slider, "value")


@pytest.fixture
def fake_colab(monkeypatch):
    calls = []
    google = types.ModuleType("google")
    colab = types.ModuleType("google.colab")
    output = types.SimpleNamespace(enable_custom_widget_manager=lambda: calls.append("custom widget manager"))
    colab.output = output
    google.colab = colab
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setitem(sys.modules, "google.colab.output", output)
    return calls


def test_colab_path_rerenders_plain_figures(fake_colab):
    assert kw.on_colab() and kw.figure_mode() == "rerender"
    panel = kw.Panel({"n": W.IntText(value=2), "kind": W.Dropdown(options=["bar"], value="bar")}, _render)
    view = panel.views[0]
    assert view.mode == "rerender" and isinstance(view.widget, W.Output)
    panel.set(n=6)
    assert view.updates == 1 and len(view.figure.data[0].x) == 6


def test_jupyterlab_path_uses_figure_widget(monkeypatch):
    import types

    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.setitem(sys.modules, "anywidget", types.ModuleType("anywidget"))
    assert not kw.on_colab() and kw.figure_mode() == "widget"
    view = kw.FigureView(go.Figure(go.Scatter(y=[1, 2])))
    assert isinstance(view.widget, go.FigureWidget)


def test_without_anywidget_falls_back_to_rerender(monkeypatch):
    monkeypatch.setitem(sys.modules, "anywidget", None)
    assert kw.figure_mode() == "rerender"


def test_failing_figure_update_is_reported_and_numbers_stay_consistent():
    def render(n):
        return kw.View([go.Figure(go.Scatter(y=[n]))] if n < 3 else [None], f"n = {n}")

    panel = kw.Panel({"n": W.IntSlider(value=1, min=1, max=5)}, render, mode="widget")
    panel.set(n=4)
    assert "kvlab-msg-bug" in panel.message.value
    assert panel.readout.value == "n = 1"  # no new numbers beside a stale figure


def test_extra_widgets_can_sit_beside_their_control():
    play, slider = kw.play_slider("filled", 1, 0, 9)
    other = W.IntSlider(value=2)
    panel = kw.Panel({"a": other, "filled": slider}, lambda a, filled: kw.View([go.Figure()], ""),
                     extra={"filled": play}, mode="rerender")
    row = panel.widget.children[1].children  # [0] is the stale-style holder
    assert list(row) == [other, play, slider]
