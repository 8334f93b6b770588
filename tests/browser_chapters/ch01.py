"""Browser interactions for chapter 3.1 (run by tests/test_browser.py after run-all)."""
from __future__ import annotations

import re

from browser_support import ChapterPage

NOTEBOOK = "01_autoregressive_decode.ipynb"
SCREENSHOT = ".kvlab-panel.kvlab-walkthrough"  # scrolled to the top of the README screenshot


def step_of(readout: str) -> int | None:
    m = re.search(r"第\s*(\d+)\s*步", readout)
    return int(m.group(1)) if m else None


def measured_diff(readout: str) -> float:
    m = re.search(r"最大差异\s*([0-9.]+e[-+]\d+)", readout)
    assert m, f"no measured difference in the readout: {readout!r}"
    return float(m.group(1))


def interact(ch: ChapterPage) -> None:
    # Step-by-step walkthrough: top-k bars (0), the two attention heatmaps (1), the cache's K/V rows (2).
    wt = ch.panel("kvlab-walkthrough")
    r0 = wt.readout()
    assert step_of(r0) == 1 and "t = 2" in r0 and "预填充" in r0, r0  # step 1 is the prefill: same work both ways
    assert wt.int_value("step") == 1
    bars0, heat0, cache0 = wt.figure(0), wt.figure(1), wt.figure(2)
    assert any("预填充" in a for a in heat0["annotations"]), heat0["annotations"]
    assert "预填充写入的全部 2 行" in cache0["title"], cache0["title"]

    wt.press_slider("step", "ArrowRight")
    r1 = wt.wait_readout(lambda t: step_of(t) == 2, "ArrowRight on the step slider should show 第 2 步")
    assert "t = 3" in r1 and "只为 1 个 token 计算 K/V" in r1, r1
    assert measured_diff(r1) < 1e-5  # the cached row equals the full matrix's last row
    assert wt.int_value("step") == 2
    heat1 = wt.wait_figure_changed(1, heat0, "the heatmaps should redraw for step 2")
    bars1 = wt.wait_figure_changed(0, bars0, "the top-k bars should redraw for step 2")
    cache1 = wt.wait_figure_changed(2, cache0, "the cache rows should redraw for step 2")
    assert any("3×3" in a for a in heat1["annotations"]), heat1["annotations"]
    assert "本步追加的新 1 行" in cache1["title"] and cache1["lengths"] == [3, 3], cache1  # one more row of K and V

    assert "第 0 层" in heat1["title"], heat1["title"]
    wt.select("layer", "1")
    heat2 = wt.wait_figure(1, lambda s: "第 1 层" in s["title"] and s["data"] != heat1["data"],
                           "choosing layer 1 should retitle and redraw the heatmaps")
    assert heat2["svg"] != heat1["svg"]
    wt.wait_figure(2, lambda s: "第 1 层" in s["title"], "choosing layer 1 should show layer 1's cache")
    assert step_of(wt.readout()) == 2
    assert wt.figure(0)["data"] == bars1["data"], "the layer must not change the top-k bars"
    # another head of the same KV group: same cache rows, other attention weights
    cache_l1 = wt.figure(2)
    wt.select("head", "1（KV 组 0）")
    wt.wait_readout(lambda t: "第 1 层第 1 头" in t, "choosing head 1 should update the readout")
    heat3 = wt.wait_figure(1, lambda s: "第 1 头" in s["title"], "choosing head 1 should retitle the heatmaps")
    assert heat3["data"] != heat2["data"] and wt.figure(2)["data"] == cache_l1["data"]  # shared K/V
    wt.select("head", "2（KV 组 1）")
    wt.wait_figure(2, lambda s: "KV 组 1" in s["title"] and s["data"] != cache_l1["data"],
                   "head 2 reads KV group 1: other cache rows")
    wt.select("head", "0（KV 组 0）")
    wt.select("layer", "0")

    wt.click_play()
    wt.wait_readout(lambda t: (step_of(t) or 0) >= 4, "Play should advance the step", timeout_s=20)
    last = wt.wait_readout(lambda t: step_of(t) == 10, "Play should run to the last step (10)", timeout_s=40)
    ch.wait_until(wt.playing, lambda p: not p, 10, "Play should stop at the last step")
    assert "t = 11" in last, last
    assert wt.int_value("step") == 10
    wt.wait_figure(1, lambda s: any("11×11" in a for a in s["annotations"]), "heatmaps should show step 10")

    # Back to step 3 by keyboard (a step where the next token is uncertain: a better README screenshot)
    wt.press_slider("step", "ArrowLeft", times=7)
    wt.wait_readout(lambda t: step_of(t) == 3, "ArrowLeft x7 should go back to step 3")
    wt.wait_figure(1, lambda s: any("4×4" in a for a in s["annotations"]), "heatmaps should show step 3")

    # Latency measurement: changes wait for the Run button.
    lat = ch.panel("kvlab-latency")
    r0 = lat.readout()
    n0 = lat.int_value("new_tokens")
    assert f"生成 {n0} 个 token" in r0, r0
    fig0 = lat.figure(0)
    lat.press_slider("new_tokens", "ArrowRight")
    n1 = ch.wait_until(lambda: lat.int_value("new_tokens"), lambda v: v != n0, 10,
                       "ArrowRight on new_tokens should move the slider")
    assert n1 == n0 + 32
    ch.page.wait_for_timeout(500)
    assert lat.readout() == r0, "the latency panel must not re-measure before Run is clicked"
    lat.click_run()
    r1 = lat.wait_readout(lambda t: f"生成 {n1} 个 token" in t, f"Run should measure {n1} tokens", timeout_s=120)
    times = [float(x) for x in re.findall(r"累计\s*([\d.]+)\s*s", r1)]
    assert len(times) == 2 and all(t > 0 for t in times), r1
    fig1 = lat.wait_figure_changed(0, fig0, "the latency plot should redraw")
    assert fig1["lengths"] and all(n == n1 for n in fig1["lengths"]), fig1["lengths"]
