"""The widget layer: rendering, error messages instead of tracebacks, and the Colab path."""
import sys
import types

import ipywidgets as W
import plotly.graph_objects as go
import pytest

from kvlab.viz import browser_steps
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
    panel = kw.Panel({"n": W.IntSlider(value=1, min=1, max=9)}, render, mode="rerender",
                     options=kw.PanelOptions(button=button))
    panel.set(n=7)
    assert calls == [1]  # a costly measurement does not rerun on every slider move
    button.click()
    assert calls == [1, 7] and panel.readout.value == "7" and not button.disabled


def test_control_classes_for_browser_tests():
    slider = W.IntSlider(value=1)
    panel = kw.Panel({"step": slider}, lambda step: kw.View([go.Figure()], ""), mode="rerender",
                     options=kw.PanelOptions(css_class="kvlab-x"))
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
    panel = kw.Panel({"a": other, "filled": slider}, lambda a, filled: kw.View([go.Figure()], ""), mode="rerender",
                     options=kw.PanelOptions(extra={"filled": play}))
    row = panel.widget.children[1].children  # [0] is the stale-style holder
    assert list(row) == [other, play, slider]


# -- what a FigureWidget is sent ----------------------------------------------------------------
def _bars(ys, title="t", **trace):
    return go.Figure(go.Bar(x=list(range(len(ys))), y=ys, **trace), layout=dict(title=title))


def _plain(d):
    """A trace or layout dict as plotly.py holds it, without the widget's trace ids."""
    return {k: v for k, v in d.items() if k != "uid"}


def _assert_widget_shows(view):
    """The widget's own (Python-side) figure equals the last figure given to the view, property by property."""
    w, f = view.widget, view.figure
    assert [t["type"] for t in w._data] == [t["type"] for t in f._data]
    for shown, fresh in zip(w._data, f._data):
        assert kw._same(_plain(shown), fresh), (shown, fresh)
    assert kw._same(w._layout, f._layout)


def test_figure_delta_sends_only_what_changed():
    import numpy as np

    old = go.Figure([go.Scatter(y=np.arange(3.0), name="a"), go.Scatter(y=[5, 6], name="b", marker=dict(color="red"))],
                    layout=dict(title="before", xaxis=dict(range=[0, 2])))
    same = go.Figure(old)
    assert kw.figure_delta(old, same).empty  # an identical figure sends nothing
    new = go.Figure([go.Scatter(y=np.array([0.0, 1.0, 9.0]), name="a"), go.Scatter(y=[5, 6], name="b")],
                    layout=dict(title="after", xaxis=dict(range=[0, 2])))
    d = kw.figure_delta(old, new)
    assert d.traces == [0, 1] and set(d.restyle) == {"y", "marker"}
    assert list(d.restyle["y"][0]) == [0, 1, 9] and d.restyle["y"][1] is kw.Undefined  # trace 1 keeps its y
    assert d.restyle["marker"] == [kw.Undefined, None]  # a property the new figure lacks is removed
    assert set(d.relayout) == {"title"} and d.relayout["title"]["text"] == "after"  # the axis did not change
    assert not d.add and not d.delete


def test_figure_delta_adds_and_deletes_traces_at_the_end():
    two = go.Figure([go.Bar(y=[1]), go.Scatter(y=[2])])
    three = go.Figure([go.Bar(y=[1]), go.Scatter(y=[2]), go.Scatter(y=[3])])
    d = kw.figure_delta(two, three)
    assert d.delete == [] and [t.y for t in d.add] == [(3,)] and d.empty is False and d.restyle == {}
    d = kw.figure_delta(three, two)
    assert d.delete == [2] and d.add == []
    swapped = go.Figure([go.Scatter(y=[1]), go.Bar(y=[2])])  # trace types differ from the first on: replaced
    d = kw.figure_delta(two, swapped)
    assert d.delete == [0, 1] and [t.type for t in d.add] == ["scatter", "bar"]


def test_widget_matches_every_new_figure():
    figures = [_bars([1, 2, 3]), _bars([1, 2, 4], "t2"), _bars([1], "t2", marker=dict(color="red")),
               go.Figure([go.Bar(y=[1]), go.Scatter(y=[2, 3], mode="lines")], layout=dict(title="two")),
               go.Figure([go.Scatter(y=[7])], layout=dict(annotations=[dict(text="n", x=0, y=0)])),
               _bars([3, 2, 1])]
    view = kw.FigureView(figures[0], mode="widget")
    for fig in figures[1:]:
        view.update(fig)
        _assert_widget_shows(view)


def _record_comm_messages(monkeypatch):
    """(widget, state keys) for every comm message the kernel would send, in order."""
    import comm

    sent = []
    by_comm = {}

    def publish(self, msg_type, data=None, metadata=None, buffers=None, **keys):
        if msg_type == "comm_msg" and data and data.get("method") == "update":
            sent.append((by_comm.get(self.comm_id), sorted(data["state"])))

    monkeypatch.setattr(comm.DummyComm, "publish_msg", publish)
    return sent, by_comm


def test_one_message_per_changed_figure_and_the_readout_first(monkeypatch):
    def render(n, other):
        return kw.View([_bars([n, 1], f"n = {n}"), _bars([other])], f"<b>n = {n}</b>")

    panel = kw.Panel({"n": W.IntSlider(value=1, max=50), "other": W.IntSlider(value=1)}, render, mode="widget")
    sent, by_comm = _record_comm_messages(monkeypatch)
    by_comm.update({panel.readout.comm.comm_id: "readout", panel.views[0].widget.comm.comm_id: "fig0",
                    panel.views[1].widget.comm.comm_id: "fig1"})
    panel.set(n=2)
    widgets = [w for w, _ in sent if w is not None]
    assert widgets == ["readout", "fig0"]  # readout first; fig1 did not change and gets nothing
    assert ["_last_layout_edit_id", "_last_trace_edit_id", "_py2js_update"] in [k for w, k in sent if w == "fig0"]
    sent.clear()
    panel.set(n=2)  # nothing changed: nothing sent
    assert [w for w, _ in sent if w is not None] == []
    _assert_widget_shows(panel.views[0])


def test_set_renders_once_for_several_values():
    calls = []

    def render(a, b):
        calls.append((a, b))
        if a > b:
            raise ValueError(f"seq_len must not exceed the batch, got {a} > {b}")
        return kw.View([go.Figure()], f"{a} {b}")

    panel = kw.Panel({"a": W.IntSlider(value=1, max=9), "b": W.IntSlider(value=2, max=9)}, render, mode="rerender")
    panel.set(a=5, b=6)  # one at a time, a = 5 > b = 2 would have shown an error in between
    assert calls == [(1, 2), (5, 6)] and panel.readout.value == "5 6" and not panel.stale
    panel.set(a=5)  # unchanged values: no render
    assert calls == [(1, 2), (5, 6)]


# -- browser-made changes: pre-rendering and bursts ----------------------------------------------
def _counting_panel(calls, **slider):
    def render(n, other):
        calls.append((n, other))
        if n == 13:
            raise ValueError(f"seq_len must not be 13, got {n}")
        return kw.View([_bars([n, other], f"n = {n}")], f"n = {n}, other = {other}", result=(n, other))

    controls = {"n": W.IntSlider(**{"value": 1, "min": 0, "max": 40, **slider}), "other": W.IntSlider(value=1)}
    return kw.Panel(controls, render, mode="widget")


def _from_browser(control, value):
    """What ipywidgets does when the browser sends a new value (the comm message's handler)."""
    control.set_state({"value": value})


def _assert_shows_fresh(panel):
    """Readout, result and figure are exactly what a fresh render of the controls' values gives."""
    fresh = panel.render(**panel.values())
    assert panel.readout.value == fresh.html and panel.result == fresh.result and not panel.stale
    assert kw._same(panel.views[0].figure._data, fresh.figures[0]._data)
    _assert_widget_shows(panel.views[0])


def test_browser_step_is_prerendered_and_shown_without_rendering(monkeypatch):
    import asyncio

    calls = []
    panel = _counting_panel(calls)

    async def session():
        _from_browser(panel.controls["n"], 2)
        assert panel.readout.value.startswith("n = 2") and calls[-1] == (2, 1)
        await asyncio.sleep(kw.PREFETCH_DELAY_S + 0.05)
        assert calls[-1] == (3, 1)  # the next step the same way, rendered while idle
        before = len(calls)
        _from_browser(panel.controls["n"], 3)
        assert len(calls) == before and panel.readout.value.startswith("n = 3")  # shown, not rendered again
        _assert_shows_fresh(panel)
        await asyncio.sleep(kw.PREFETCH_DELAY_S + 0.05)
        assert calls[-1] == (4, 1)
        _from_browser(panel.controls["n"], 2)  # back: the value shown before is kept too
        assert calls[-1] == (4, 1) and panel.readout.value.startswith("n = 2")
        _assert_shows_fresh(panel)

    asyncio.run(session())
    panel.set(n=3)  # code (a cell, a test) always gets a fresh render
    assert calls[-1] == (3, 1)


def test_a_slider_that_writes_into_a_box_is_prerendered_along_its_own_steps():
    """3.4's S: a log-scale SelectionSlider (an ``extra`` widget, not observed) fills the S box from a kernel
    callback; moved in the browser, the panel renders the slider's next option ahead, not box value + step."""
    import asyncio

    calls = []

    def render(n):
        calls.append(n)
        return kw.View([_bars([n, 0], f"n = {n}")], f"n = {n}", result=n)

    box = W.IntText(value=64)
    slider = W.SelectionSlider(options=[16, 32, 64, 128, 256], value=64)
    slider.observe(lambda change: setattr(box, "value", change["new"]), names="value")
    panel = kw.Panel({"n": box}, render, mode="widget", options=kw.PanelOptions(extra={"n": slider}))

    async def session():
        slider.set_state({"index": 3})  # the browser moves the slider one step right: 128
        assert panel.readout.value == "n = 128" and calls[-1] == 128
        await asyncio.sleep(kw.PREFETCH_DELAY_S + 0.05)
        assert calls[-1] == 256  # the slider's next option, rendered while idle
        before = len(calls)
        slider.set_state({"index": 4})
        assert len(calls) == before and panel.readout.value == "n = 256"  # shown without rendering
        _assert_shows_fresh(panel)
        box.set_state({"value": 100})  # typed in the box: shown; an IntText has no next step
        await asyncio.sleep(kw.PREFETCH_DELAY_S + 0.05)
        assert calls[-1] == 100 and panel.readout.value == "n = 100"

    asyncio.run(session())
    box.value = 32  # code: rendered afresh
    assert calls[-1] == 32 and panel.readout.value == "n = 32"


def test_a_following_panel_redraws_after_the_other_and_once_per_burst():
    """3.2's bytes panel follows the shape panel's controls: at once for a change made by code, a moment later
    (after the shape panel's own messages) and once for a burst of changes made in the browser."""
    import asyncio

    calls = []
    leader = _counting_panel([])
    follower = kw.Panel({"m": W.IntSlider(value=0)},
                        lambda m: calls.append(leader.values()["n"]) or kw.View([], f"n = {leader.values()['n']}"))
    follower.follow(leader)
    calls.clear()
    leader.controls["n"].value = 5  # code: followed at once
    assert calls == [5] and follower.readout.value == "n = 5"

    async def session():
        for n in (6, 7, 8):  # a drag in the browser
            _from_browser(leader.controls["n"], n)
        assert calls == [5] and leader.readout.value.startswith("n = 8")  # the leader first; the follower waits
        await asyncio.sleep(kw.FOLLOW_DELAY_S + 0.05)
        assert calls == [5, 8] and follower.readout.value == "n = 8"  # once, on the latest value

    asyncio.run(session())
    _from_browser(leader.controls["n"], 9)  # no event loop (plain Python): at once
    assert calls[-1] == 9


def test_prerendering_is_skipped_for_slow_renders_code_changes_and_without_a_loop(monkeypatch):
    import asyncio
    import time

    calls = []
    panel = _counting_panel(calls)
    slow = panel.render

    def render(n, other):  # a change of `other` costs a (simulated) measurement, the first n = 10 a long one
        if other != panel.views[0].figure._data[0]["y"][1]:
            time.sleep(kw.PREFETCH_MAX_MS / 1e3 + 0.01)
        if n == 10 and (10, other) not in calls:
            time.sleep(2.5 * kw.PREFETCH_MAX_MS / 1e3 + 0.01)
        return slow(n, other)

    panel.render = render
    _from_browser(panel.controls["n"], 2)  # no event loop here: nothing is scheduled
    assert panel._next is None

    async def session():
        _from_browser(panel.controls["other"], 2)  # slow: its next value is not rendered ahead
        await asyncio.sleep(kw.PREFETCH_DELAY_S + 0.05)
        assert calls[-1] == (2, 2)
        _from_browser(panel.controls["n"], 3)  # quick: it is
        await asyncio.sleep(kw.PREFETCH_DELAY_S + 0.05)
        assert calls[-1] == (4, 2)
        _from_browser(panel.controls["n"], 10)  # once very slow (then cached, say): never again ahead
        for n in (11, 12):
            _from_browser(panel.controls["n"], n)
            await asyncio.sleep(kw.PREFETCH_DELAY_S + 0.05)
            assert calls[-1] == (n, 2)

    asyncio.run(session())
    monkeypatch.setattr(kw, "PREFETCH", False)  # off: every change is rendered afresh, nothing is kept
    panel.controls["n"].value = 4
    assert calls[-1] == (4, 2) and not panel.drawn.kept
    off = _counting_panel(calls)
    off.prefetch = False  # or off for one panel (a render that is not the same for the same values)
    monkeypatch.setattr(kw, "PREFETCH", True)

    async def other_session():
        _from_browser(off.controls["n"], 2)
        await asyncio.sleep(kw.PREFETCH_DELAY_S + 0.05)
        assert calls[-1] == (2, 1) and not off.drawn.kept

    asyncio.run(other_session())


def test_a_burst_never_leaves_an_older_value_on_screen():
    """Browser changes to two sliders arrive in bursts (with and without idle time in between, so some
    pre-renders run and others are cancelled), code changes and a bad value among them: after every
    change the panel shows exactly a fresh render of the current values, never an earlier one."""
    import asyncio
    import random

    rng = random.Random(7)
    calls = []
    panel = _counting_panel(calls)
    n, other = panel.controls["n"], panel.controls["other"]

    async def session():
        for _ in range(200):
            roll = rng.random()
            if roll < 0.7:  # a key press on n (mostly one step, sometimes a jump), as the browser sends it
                _from_browser(n, min(40, max(0, n.value + rng.choice([1, 1, 1, -1, 5]))))
            elif roll < 0.85:
                _from_browser(other, rng.randint(0, 3))
            else:
                panel.set(n=rng.randint(0, 40))
            if n.value == 13:  # a bad value: the message, the last good numbers greyed out
                assert panel.stale and "kvlab-msg-warn" in panel.message.value
                _from_browser(n, 14)
            _assert_shows_fresh(panel)
            if rng.random() < 0.4:  # idle time: a pre-render may run
                await asyncio.sleep(kw.PREFETCH_DELAY_S + 0.01)
                _assert_shows_fresh(panel)

    asyncio.run(session())


def test_a_reloaded_page_gets_the_current_figure():
    """A browser that reloads asks the kernel for each widget's whole state: it must be the figure shown now,
    not the first one (later updates only send differences)."""
    view = kw.FigureView(_bars([1, 2], "first"), mode="widget")
    view.update(_bars([5, 6, 7], "now"))
    view.update(go.Figure([go.Bar(y=[5, 6, 7]), go.Scatter(y=[1])], layout=dict(title="now")))
    state = view.widget.get_state(["_widget_data", "_widget_layout"])
    assert [t["type"] for t in state["_widget_data"]] == ["bar", "scatter"]
    assert list(state["_widget_data"][0]["y"]) == [5, 6, 7] and state["_widget_layout"]["title"]["text"] == "now"


def test_control_factories_show_their_label_in_full():
    """Every control a lesson shows comes from a factory here: the label is never cut, the width is fixed."""
    made = [kw.int_slider("批次 B", 2, 1, 8), kw.int_box("序列长度 S", 4), kw.float_box("可用比例", 0.9, step=0.05),
            kw.text_box("提示词", "人工", width="260px"), kw.dropdown("数据类型", ["fp16", "fp32"], "fp16"),
            kw.selection_slider("提示词长度 P", [1, 2, 4], 2), kw.multi_select("模型", ["a", "b"], ["a"], rows=2)]
    for control in made:
        assert control.style.description_width == "initial" and control.layout.width, control
    assert [c.description for c in made] == ["批次 B", "序列长度 S", "可用比例", "提示词", "数据类型", "提示词长度 P", "模型"]
    assert made[3].continuous_update is False and made[3].layout.width == "260px"  # read on Enter, not per key
    assert made[5].value == 2 and made[5].continuous_update and made[6].value == ("a",)
    assert kw.checkbox("显示解释", True, width="120px").indent is False
    button = kw.run_button()
    assert button.description == "运行测量" and button.button_style == "primary"
    assert kw.bold_label("形状 <L>").value == "<b>形状 &lt;L&gt;</b>"


def test_more_folds_the_named_controls_under_a_closed_section():
    n, kind = W.IntText(value=3), W.Dropdown(options=["bar", "line"], value="bar")
    panel = kw.Panel({"n": n, "kind": kind}, _render, mode="rerender", options=kw.PanelOptions(more=("kind",)))
    section = panel.more
    assert isinstance(section, W.Accordion) and section.selected_index is None  # closed at first
    assert section.titles == (kw.MORE_LABEL,) and "kvlab-more" in section._dom_classes
    assert kind in section.children[0].children and n not in section.children[0].children
    assert panel.widget.children.index(section) == 2  # right after the controls up front
    kind.value = "line"  # a folded control still drives the panel
    assert panel.views[0].figure.data[0].type == "scatter"
    assert kw.Panel({"n": W.IntText(value=3)}, lambda n: _render(n, "bar"), mode="rerender").more is None
    with pytest.raises(ValueError, match="^more"):
        kw.Panel({"n": W.IntText(value=3)}, lambda n: _render(n, "bar"), mode="rerender",
                 options=kw.PanelOptions(more=("size",)))


# -- issue 19 holes 2 and 10: re-run cells, set() all or nothing --------------------------------------------
def _observers(control) -> int:
    return len(control._trait_notifiers.get("value", {}).get("change", []))


def test_rerunning_the_following_cell_does_not_pile_up_observers():
    """Hole 2: each re-run of 3.2's bytes cell added an observer to the shape panel's controls that never went away
    (20 re-runs: a shape change took 0.4 s instead of 0.02 s)."""
    from kvlab.lessons import storage

    shape = storage.shape_panel()
    first = storage.bytes_panel(shape)
    once = _observers(shape.controls["L"])
    for _ in range(20):  # the bytes cell run again and again
        latest = storage.bytes_panel(shape)
    assert _observers(shape.controls["L"]) == once
    shape.set(L=2)
    assert "2 × 2 × 1 ×" in latest.readout.value and not latest.stale
    assert first.stale  # replaced by the re-run: its output is gone, and it no longer follows


def test_rerunning_the_leading_cell_greys_out_its_old_followers():
    """Hole 2: re-run only the shape cell, move the new L slider to 1, and the old bytes readout still said
    「2 × 32 × …」 without being greyed out."""
    from kvlab.lessons import storage

    shape = storage.shape_panel()
    old_bytes = storage.bytes_panel(shape)
    assert not old_bytes.stale
    new_shape = storage.shape_panel()  # the shape cell run again
    assert old_bytes.stale and "重新运行" in old_bytes.message.value
    new_shape.set(L=1)
    old_bytes.set(B=2)  # its own controls do not make it current again: it reads a shape panel no longer shown
    assert old_bytes.stale and "重新运行" in old_bytes.message.value
    new_bytes = storage.bytes_panel(new_shape)
    assert "2 × 1 × 1 ×" in new_bytes.readout.value and not new_bytes.stale


def test_set_checks_every_value_before_changing_any():
    """Hole 10: shape.set(L=64, S="abc") raised after L had moved: the slider at 64, the readout still at 32 and not
    greyed, the bytes panel already at 64."""
    from kvlab.lessons import storage

    shape = storage.shape_panel()
    follower = storage.bytes_panel(shape)
    before, readout, bytes_readout = shape.values(), shape.readout.value, follower.readout.value
    for bad in ({"L": 64, "S": "abc"}, {"L": 64, "nothing": 3}, {"L": 64, "dtype": "fp16"}):
        with pytest.raises(ValueError):
            shape.set(**bad)
        assert shape.values() == before and shape.readout.value == readout and not shape.stale
        assert follower.readout.value == bytes_readout


# -- sliders drawn ahead in the browser (Panel(in_browser=...), kvlab.viz.browser_steps) -------------------------------
def _stepped_panel(calls, mode="widget", in_browser="step"):
    def render(step, other, size="s"):
        calls.append((step, other))
        if step == 4 and other == 2:
            raise ValueError(f"seq_len must not be 4 here, got {step}")
        return kw.View([_bars([step, other], f"step = {step}"), go.Figure(go.Scatter(y=[other]))],
                       f"step = {step}, other = {other}, size = {size}", result=(step, other, size))

    controls = {"step": W.IntSlider(value=2, min=1, max=5), "other": W.Dropdown(options=[1, 2, 3], value=1),
                "size": W.SelectionSlider(options=[("small", "s"), ("large", "l")], value="s")}
    panel = kw.Panel(controls, render, mode=mode, in_browser=in_browser)
    if panel.steps is not None:
        panel.sent = []
        panel.steps.send = panel.sent.append  # what would go to the browser
        panel.steps.asked()  # the page is drawn: it asks for every state held
    return panel


def _browser_states(panel) -> dict:
    """The states the browser holds after every message sent since the last world began (its ``receive``)."""
    held = dict(panel.steps.seed["states"]) if panel.steps.seed.get("world") == panel.steps.world else {}
    for msg in panel.sent:
        if msg["world"] != panel.steps.world:  # an earlier world: the browser ignores it
            continue
        held.update(msg["states"])
        if "keep" in msg:
            held = {k: v for k, v in held.items() if k in msg["keep"]}
    return held


def test_in_browser_slider_renders_ahead_once_and_moves_without_rendering():
    from kvlab.viz.browser_steps import BrowserSteps, figure_json

    calls = []
    panel = _stepped_panel(calls)
    steps = panel.steps
    assert isinstance(steps, BrowserSteps) and steps in panel.widget.children
    assert panel.readout not in panel.widget.children and all(v.widget is None for v in panel.views)
    assert [ln.source for ln in steps.links] == [(panel.controls["step"], "value")]
    assert steps.links[0].target == (steps, "at_step") and steps.axes == ["step"] and steps.grid == [[1, 2, 3, 4, 5]]
    assert calls == [(2, 1)]  # the shown value only; the others wait for an idle kernel
    panel.render_ahead()
    assert calls == [(2, 1), (3, 1), (1, 1), (4, 1), (5, 1)]  # nearest first, each once
    held = _browser_states(panel)
    assert sorted(held) == ["0", "1", "2", "3", "4"]  # keys: positions on the slider's grid
    for value in range(1, 6):
        fresh = panel.render(step=value, other=1)
        assert held[str(value - 1)] == {"html": fresh.html, "figures": [figure_json(f) for f in fresh.figures]}
    calls.clear()
    panel.sent.clear()
    _from_browser(panel.controls["step"], 4)  # the browser has shown it already; the kernel only follows
    assert calls == [] and panel.result == (4, 1, "s") and panel.readout.value.startswith("step = 4, other = 1")
    assert panel.views[0].figure.layout.title.text == "step = 4" and not panel.stale
    assert all(not m["states"] for m in panel.sent)  # nothing sent again
    world = steps.world
    panel.controls["other"].set_state({"index": 2})  # another control (a menu syncs its index): a new world
    assert steps.world == world + 1 and calls == [(4, 3)] and panel.result == (4, 3, "s")
    panel.render_ahead()
    assert sorted(calls) == [(s, 3) for s in range(1, 6)]


def test_in_browser_sliders_render_a_window_around_the_shown_values_the_moved_one_first(monkeypatch):
    monkeypatch.setattr(browser_steps, "AHEAD_WINDOW", 1)
    monkeypatch.setattr(browser_steps, "AHEAD_OTHERS", 1)
    calls = []
    panel = _stepped_panel(calls, in_browser=("step", "size"))
    assert panel.steps.grid == [[1, 2, 3, 4, 5], [0, 1]]  # the selection slider syncs its index
    assert [ln.source[1] for ln in panel.steps.links] == ["value", "index"]
    panel.render_ahead()
    assert sorted(_browser_states(panel)) == ["0,0", "1,0", "1,1", "2,0"]  # a star: one slider at a time
    calls.clear()
    panel.controls["step"].set_state({"value": 3})  # moved up in the browser: its next value first
    assert calls == []
    panel.render_ahead()
    assert calls[0] == (4, 1) and len(calls) == 2  # step 4, then size "l" at step 3
    assert sorted(_browser_states(panel)) == ["1,0", "2,0", "2,1", "3,0"]  # what is far is dropped on both sides
    panel.controls["size"].set_state({"index": 1})
    assert panel.result == (3, 1, "l") and panel.steps.world == 1
    assert browser_steps.AHEAD_MAX_MS > 0


def test_in_browser_slider_refused_value_is_explained_by_the_kernel():
    calls = []
    panel = _stepped_panel(calls)
    panel.set(other=2)  # step 4 is refused with other = 2: its state says so, the others are drawn
    panel.render_ahead()
    assert [("error" in s) for _, s in sorted(_browser_states(panel).items())] == [False, False, False, True, False]
    assert not panel.stale and panel.readout.value.startswith("step = 2, other = 2")
    _from_browser(panel.controls["step"], 4)
    assert panel.stale and "序列长度 S" in panel.message.value and panel.readout.value.startswith("step = 2, other = 2")
    _from_browser(panel.controls["step"], 5)
    assert not panel.stale and panel.message.value == "" and panel.result == (5, 2, "s")
    panel.set(step=3, other=1)  # code: rendered afresh
    assert panel.result == (3, 1, "s") and all("error" not in s for s in _browser_states(panel).values())


def test_in_browser_slider_stops_rendering_ahead_when_renders_are_slow(monkeypatch):
    monkeypatch.setattr(browser_steps, "AHEAD_MAX_MS", -1.0)  # every render counts as slow
    calls = []
    panel = _stepped_panel(calls)
    panel.render_ahead()
    assert len(calls) == 2  # the shown value, and the one render that found it slow
    _from_browser(panel.controls["step"], 5)  # not rendered ahead: rendered now, and sent
    assert calls[-1] == (5, 1) and panel.result == (5, 1, "s") and "4" in _browser_states(panel)


def test_in_browser_slider_is_an_ordinary_control_where_figures_are_redrawn():
    calls = []
    panel = _stepped_panel(calls, mode="rerender")  # Colab, or no anywidget
    assert panel.steps is None and panel.in_browser == () and panel.readout in panel.widget.children
    assert calls == [(2, 1)]
    _from_browser(panel.controls["step"], 3)
    assert panel.result == (3, 1, "s") and calls[-1] == (3, 1)


def test_in_browser_must_name_a_slider():
    controls = {"n": W.IntText(value=3), "kind": W.Dropdown(options=["bar"], value="bar")}
    with pytest.raises(ValueError, match="in_browser: 'n' is not a slider"):
        kw.Panel(controls, _render, mode="widget", in_browser="n")
    with pytest.raises(ValueError, match="in_browser: 'm' is not a slider"):
        kw.Panel(controls, _render, mode="widget", in_browser=("m",))


def test_in_browser_slider_that_fills_a_box_shows_a_typed_value_as_the_free_state():
    """3.4's pattern: a log-scale slider writes into the S box; a length typed into the box that no slider position
    shows is sent as the one free state, and the slider works again once moved."""
    calls = []

    def render(n):
        calls.append(n)
        return kw.View([_bars([n])], f"n = {n}", result=n)

    box = W.IntText(value=4)
    slider = W.SelectionSlider(options=[("1", 1), ("4", 4), ("16", 16)], value=4)
    slider.observe(lambda change: setattr(box, "value", change["new"]), names="value")
    panel = kw.Panel({"n": box}, render, mode="widget", in_browser="n", options=kw.PanelOptions(extra={"n": slider}))
    panel.sent = []
    panel.steps.send = panel.sent.append
    panel.steps.asked()
    assert panel.steps.links[0].source == (slider, "index") and panel.steps.grid == [[0, 1, 2]]
    panel.render_ahead()
    assert sorted(_browser_states(panel)) == ["0", "1", "2"] and not panel.steps.free
    box.set_state({"value": 7})  # typed: no slider position shows 7
    assert panel.steps.free and panel.result == 7 and _browser_states(panel)["free"]["html"] == "n = 7"
    slider.set_state({"index": 2})  # the slider again: back on its grid
    assert not panel.steps.free and panel.result == 16 and panel.readout.value == "n = 16"
    assert "free" not in _browser_states(panel)


def test_in_browser_sliders_render_the_moved_slider_onward_first(monkeypatch):
    """Play and a held key need only the next values of the slider moving: they come first, so the kernel stays ahead
    of them even when a render takes most of a frame; then the rest, nearest first."""
    monkeypatch.setattr(browser_steps, "AHEAD_WINDOW", 3)
    monkeypatch.setattr(browser_steps, "AHEAD_OTHERS", 1)
    panel = _stepped_panel([], in_browser=("step", "size"))
    assert panel.ahead.keys_around("1,0", "step", 1) == ["1,0", "2,0", "3,0", "4,0", "0,0", "1,1"]
    assert panel.ahead.keys_around("3,0", "step", -1) == ["3,0", "2,0", "1,0", "0,0", "4,0", "3,1"]
    assert panel.ahead.keys_around("1,0", None, 0) == ["1,0", "2,0", "0,0", "1,1"]  # a new world: one value each way


def test_in_browser_slider_of_a_replaced_panel_stays_greyed_out():
    """A panel orphaned by a re-run cell (its leader replaced) keeps its warning when one of its drawn-ahead sliders
    moves: the move is not shown as if the panel still read live controls."""
    calls = []
    panel = _stepped_panel(calls)
    panel._orphan()
    _from_browser(panel.controls["step"], 3)
    assert panel.stale and panel.error == kw.RERUN_NOTE


@pytest.mark.parametrize("mode, in_browser", [("widget", "step"), ("widget", ()), ("rerender", "step")])
def test_a_panel_replaced_by_its_rerun_cell_lets_go_of_what_it_drew(mode, in_browser):
    """Issue 33 hole 17: each re-run of 3.1's walkthrough cell kept the replaced panel's drawn-ahead states (about
    1.9 MiB a run; 0.4 MiB a plain figure panel). A kernel keeps the replaced panel itself (``Out[n]``): its states go
    all the same and its widgets are closed; with no reference left, the panel goes too. The new panel works."""
    import gc
    import weakref

    def cell():  # the same cell, run again and again
        play, slider = kw.play_slider("step", 2, 1, 6)
        panel = kw.Panel({"step": slider}, lambda step: kw.View([_bars([step])], f"step = {step}", result=step),
                         mode=mode, in_browser=in_browser,
                         options=kw.PanelOptions(extra=[play], css_class="kvlab-rerun-test"))
        if panel.ahead is not None:
            panel.render_ahead()  # what the idle kernel does after the cell
        return panel

    old = cell()
    drawn = [weakref.ref(d.view) for d in old.ahead.states.values()] if old.ahead is not None else []
    assert len(drawn) == (6 if mode == "widget" and in_browser else 0)
    new = cell()
    gc.collect()
    assert [ref() for ref in drawn] == [None] * len(drawn)  # gone, though the panel is still referenced
    assert old.stale and old.error == kw.RERUN_NOTE
    closed = [old.widget, old.readout, *old.controls.values(), *[v.widget for v in old.views if v.widget]]
    assert all(w.comm is None for w in closed)  # the kernel's widget registry and the browser let go of them
    replaced = weakref.ref(old)
    del old, closed
    gc.collect()
    assert replaced() is None
    _from_browser(new.controls["step"], 5)
    assert new.result == 5 and new.readout.value == "step = 5" and not new.stale and new.widget.comm is not None
    if new.ahead is not None:
        new.render_ahead()
        assert len(new.ahead.states) == 6 and new.steps.comm is not None


def _measuring_panel(mode="widget"):
    """A slider whose values 4 and 5 are "not measured yet": rendering them measures, once."""
    measured, seen = {1, 2, 3}, []
    holder = {}

    def render(n):
        panel = holder.get("panel")
        if panel is not None:  # what the learner sees while the render runs
            seen.append((n, panel.message.value, panel.stale))
        measured.add(n)
        return kw.View([_bars([n])], f"n = {n}", result=n)

    controls = {"n": W.IntSlider(value=2, min=1, max=5)}
    panel = kw.Panel(controls, render, mode=mode, in_browser="n",
                     options=kw.PanelOptions(measures=lambda values: None if values["n"] in measured else f"正在测量 n = {values['n']}……"))
    holder["panel"] = panel
    if panel.steps is not None:
        panel.sent = []
        panel.steps.send = panel.sent.append
        panel.steps.asked()
    return panel, seen


@pytest.mark.parametrize("mode", ["widget", "rerender"])
def test_a_render_that_measures_says_so_while_it_runs_and_is_never_rendered_ahead(mode):
    panel, seen = _measuring_panel(mode)
    if panel.steps is not None:
        panel.render_ahead()
        assert sorted(_browser_states(panel)) == ["0", "1", "2"]  # 4 and 5 measure: not rendered unasked
    assert [n for n, _, _ in seen] == ([3, 1] if panel.steps is not None else [])  # nearest first
    seen.clear()
    _from_browser(panel.controls["n"], 5)
    assert seen == [(5, kw.message_html("正在测量 n = 5……", "info"), True)]  # sent before the measurement
    assert panel.message.value == "" and not panel.stale and panel.result == 5
    seen.clear()
    _from_browser(panel.controls["n"], 3)
    assert [(n, msg) for n, msg, _ in seen] == ([] if panel.steps is not None else [(3, "")])


def test_a_measuring_value_is_not_pre_rendered():
    panel, seen = _measuring_panel("rerender")
    assert kw.PREFETCH and panel._measuring({"n": 4}) and not panel._measuring({"n": 3})
    panel._budget("n").record(1.0)
    panel._schedule_next("n", panel.controls["n"], 2, 3)  # its next value, 4, would measure
    assert panel._next is None


def test_a_measures_hint_that_fails_counts_as_not_measuring():
    panel = kw.Panel({"n": W.IntSlider(value=2)}, lambda n: kw.View([], f"n = {n}", result=n), mode="rerender",
                     options=kw.PanelOptions(measures=lambda values: 1 / 0))
    _from_browser(panel.controls["n"], 3)
    assert panel.result == 3 and panel.message.value == "" and not panel.stale


def test_the_panel_moved_last_renders_ahead_first():
    """Two panels with states to render ahead: the one scheduled last renders all of its own first (3.5's Play on the
    weights panel right after moves on the bug lab, whose renders take half a second, had frames missing)."""
    import asyncio

    order = []

    def make(tag):
        def render(step):
            order.append(tag)
            return kw.View([_bars([step])], f"{tag} {step}", result=step)

        panel = kw.Panel({"step": W.IntSlider(value=1, min=1, max=6)}, render, mode="widget", in_browser="step")
        panel.steps.send = lambda msg: None
        return panel

    async def session():
        first = make("a")
        make("b")  # made, and so scheduled, last
        await asyncio.sleep(0.5)
        assert order == ["a", "b"] + ["b"] * 5 + ["a"] * 5  # each panel's shown value, then b's five, then a's
        order.clear()
        _from_browser(first.controls["step"], 6)  # a new move on a: it goes first (its states are all rendered)
        await asyncio.sleep(0.2)
        assert order == []

    asyncio.run(session())


# -- the English edition (issue 34): the widget layer's own words follow kvlab.set_language ---------------------
CJK = __import__("re").compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def test_a_panels_messages_follow_the_language_when_they_are_shown():
    from kvlab.assets import AssetError
    from kvlab.inputs import InputError, whole_number
    from kvlab.language import using_language

    def render(n):
        if n == 7:
            raise RuntimeError("boom")
        if n == 8:
            raise AssetError("assets/demo.safetensors is missing")
        whole_number("batch B", n, 1, 10)
        return kw.View([go.Figure()], f"B = {n}")

    panel = kw.Panel({"n": W.IntText(value=2)}, render, mode="rerender")  # made in Chinese, then switched
    with using_language("en"):
        panel.set(n=0)
        refused = panel.message.value
        panel.set(n=7)
        bug = panel.message.value
        panel.set(n=8)
        asset = panel.message.value
        api = kw.explain_error(ValueError("seq_len must be a positive integer (>= 1), got 0"))
        plain = kw.explain_error(ValueError("top_k must be positive"))
    assert "batch B: must be from 1 to 10, got 0" in refused and "last valid input" in refused and panel.stale
    assert "Internal error (a bug in kvlab, please report it): RuntimeError: boom" in bug
    assert "A course data file is missing or damaged" in asset and "demo.safetensors" in asset
    assert api == "⚠️ Invalid input for sequence length S: seq_len must be a positive integer (&gt;= 1), got 0"
    assert plain == "⚠️ Invalid input: top_k must be positive"
    for text in (refused, bug, asset, api, plain):
        assert not CJK.search(text), text
    panel.set(n=0)  # Chinese again, word for word
    assert "「batch B」应在 1 到 10 之间，收到的是 0" in panel.message.value and kw.STALE_NOTE in panel.message.value
    assert kw.explain_error(ValueError("seq_len: bad")) == "⚠️ 输入无效「序列长度 S」：seq_len: bad"
    assert kw.FRIENDLY_NAMES["seq_len"] == "序列长度 S" and kw.friendly_name("nothing") is None


def test_the_widget_layers_own_controls_are_labelled_in_the_language_they_are_made_in():
    from kvlab.language import using_language

    assert (kw.run_button().description, kw.play_slider("step", 1, 1, 5)[0].description) == ("运行测量", "播放")
    assert kw.more_section([]).titles == (kw.MORE_LABEL,) == ("更多设置",)
    with using_language("en"):
        assert kw.run_button().description == "Run the measurement"
        assert kw.run_button("Time it").description == "Time it"  # a lesson's own label is kept
        assert kw.play_slider("step", 1, 1, 5)[0].description == "Play"
        assert kw.more_section([]).titles == ("More settings",)
        panel = kw.Panel({"n": W.IntText(value=3)}, lambda n: _render(n, "bar"), mode="rerender",
                         options=kw.PanelOptions(css_class="kvlab-english-rerun"))
        kw.Panel({"n": W.IntText(value=3)}, lambda n: _render(n, "bar"), mode="rerender",
                 options=kw.PanelOptions(css_class="kvlab-english-rerun"))  # the cell run again
        assert panel.stale and panel.error.startswith("The cell of the panel above has been run again")
        assert not CJK.search(panel.message.value)


def test_mode_labels_and_axis_titles_follow_the_language():
    from kvlab.cache_modes import MODES
    from kvlab.language import using_language
    from kvlab.viz import style

    assert dict(style.MODE_LABELS) == {**{m.name: m.label for m in MODES.values()},
                                       "transformers:cached": "transformers 有缓存",
                                       "transformers:no-cache": "transformers 无缓存",
                                       "transformers:dynamic": "transformers DynamicCache（逐步拼接）",
                                       "transformers:static": "transformers StaticCache（预分配）"}
    assert style.axis_title("时间", "ms") == "时间（ms）" and style.axis_title("步") == "步"
    with using_language("en"):
        assert style.MODE_LABELS["kv"] == "with a cache (kv)" and style.MODE_LABELS.get("none") == "no cache (none)"
        assert style.MODE_LABELS.get("mystery", "mystery") == "mystery"  # (a plot's fallback for an unknown run)
        assert {**style.MODE_LABELS}["paged"] == "paged cache (paged)" and len(style.MODE_LABELS) == len(MODES) + 4
        assert all(not CJK.search(label) and f"({name})" in label
                   for name, label in style.MODE_LABELS.items() if name in MODES)
        assert style.axis_title("time", "ms") == "time (ms)"
    assert style.mode_label("kv", "en") == "with a cache (kv)" and style.mode_label("kv") == MODES["kv"].label
    with pytest.raises(KeyError):
        style.MODE_LABELS["mystery"]
