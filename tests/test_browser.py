"""Every chapter in a real JupyterLab, in headless Chromium: run all cells, check that every
widget and figure rendered without errors, then drive each chapter's main controls the way a
learner would (keyboard on sliders, dropdowns, typing, Play and Run buttons) and check that the
figures and numbers they drive change as they should.

Run:   python -m pytest tests/test_browser.py
README screenshots:   KVLAB_SCREENSHOTS=assets python -m pytest tests/test_browser.py

Without a usable browser the tests skip with the reason; with KVLAB_REQUIRE_BROWSER=1 (CI) they
fail instead. The server serves a temporary copy of chapters/: the notebooks on disk are never
touched (checked at the end).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from browser_support import (ARTIFACT_DIR, CHAPTER_DIR, ChapterPage, LabServer, PanelDriver, launch_chromium,
                             unavailable)

pytestmark = pytest.mark.browser

CHAPTERS = sorted(p.name for p in CHAPTER_DIR.glob("*.ipynb"))


# -- fixtures -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        unavailable(f"playwright is not installed ({exc})")
    if importlib.util.find_spec("jupyterlab") is None:
        unavailable("jupyterlab is not installed")
    pw = sync_playwright().start()
    b, reason = None, ""
    try:
        b = launch_chromium(pw)
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if b is None:
        pw.stop()
        unavailable(f"no Chromium could be launched ({reason})")
    yield b
    b.close()
    pw.stop()


@pytest.fixture(scope="module")
def lab(browser, tmp_path_factory):
    originals = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in CHAPTER_DIR.glob("*.ipynb")}
    server = LabServer(tmp_path_factory.mktemp("jupyterlab"),
                       kernel_threads=os.environ.get("KVLAB_BROWSER_KERNEL_THREADS")).start()
    yield server
    server.stop()
    changed = [p.name for p, digest in originals.items() if hashlib.sha256(p.read_bytes()).hexdigest() != digest]
    assert not changed, f"the browser tests modified notebooks on disk: {changed}"


@pytest.fixture(scope="module")
def screenshot_dir() -> Path:
    target = os.environ.get("KVLAB_SCREENSHOTS")
    path = Path(target).resolve() if target else ARTIFACT_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


# -- chapter-specific interactions ----------------------------------------------------------------
def step_of(readout: str) -> int | None:
    m = re.search(r"第\s*(\d+)\s*步", readout)
    return int(m.group(1)) if m else None


def interact_01(ch: ChapterPage) -> None:
    # Step-by-step walkthrough: top-k bars (figure 0) and the two attention heatmaps (figure 1).
    wt = ch.panel("kvlab-walkthrough")
    r0 = wt.readout()
    assert step_of(r0) == 1 and "t = 2" in r0, r0
    assert wt.int_value("step") == 1
    bars0, heat0 = wt.figure(0), wt.figure(1)

    wt.press_slider("step", "ArrowRight")
    r1 = wt.wait_readout(lambda t: step_of(t) == 2, "ArrowRight on the step slider should show 第 2 步")
    assert "t = 3" in r1, r1
    assert wt.int_value("step") == 2
    heat1 = wt.wait_figure_changed(1, heat0, "the heatmaps should redraw for step 2")
    bars1 = wt.wait_figure_changed(0, bars0, "the top-k bars should redraw for step 2")
    assert any("3×3" in a for a in heat1["annotations"]), heat1["annotations"]

    assert "第 0 层" in heat1["title"], heat1["title"]
    wt.select("layer", "1")
    heat2 = wt.wait_figure(1, lambda s: "第 1 层" in s["title"] and s["data"] != heat1["data"],
                           "choosing layer 1 should retitle and redraw the heatmaps")
    assert heat2["svg"] != heat1["svg"]
    assert step_of(wt.readout()) == 2
    assert wt.figure(0)["data"] == bars1["data"], "the layer must not change the top-k bars"

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
    assert f"生成 {n0} 个token" in r0, r0
    fig0 = lat.figure(0)
    lat.press_slider("new_tokens", "ArrowRight")
    n1 = ch.wait_until(lambda: lat.int_value("new_tokens"), lambda v: v != n0, 10,
                       "ArrowRight on new_tokens should move the slider")
    assert n1 == n0 + 32
    ch.page.wait_for_timeout(500)
    assert lat.readout() == r0, "the latency panel must not re-measure before Run is clicked"
    lat.click_run()
    r1 = lat.wait_readout(lambda t: f"生成 {n1} 个token" in t, f"Run should measure {n1} tokens", timeout_s=120)
    times = [float(x) for x in re.findall(r"累计\s*([\d.]+)\s*s", r1)]
    assert len(times) == 2 and all(t > 0 for t in times), r1
    fig1 = lat.wait_figure_changed(0, fig0, "the latency plot should redraw")
    assert fig1["lengths"] and all(n == n1 for n in fig1["lengths"]), fig1["lengths"]


def memory_bytes_shown(readout: str) -> int:
    m = re.search(r"=\s*([\d,]+)\s*B\s*=", readout)
    assert m, f"no byte count in the readout: {readout!r}"
    return int(m.group(1).replace(",", ""))


def memory_bytes_expected(mem: PanelDriver) -> int:
    from kvlab import kv_cache_bytes

    return kv_cache_bytes(mem.int_value("L"), mem.int_value("H"), mem.int_value("D"), mem.int_value("S"),
                          mem.int_value("B"), mem.value("dtype"))


def filled_of(readout: str) -> tuple[int, int]:
    m = re.search(r"已生成\s*([\d,]+)\s*/\s*([\d,]+)", readout)
    assert m, f"no fill count in the readout: {readout!r}"
    return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))


def interact_02(ch: ChapterPage) -> None:
    from kvlab import format_bytes

    mem = ch.panel("kvlab-memory")
    r0 = mem.readout()
    b0 = memory_bytes_shown(r0)
    assert b0 == memory_bytes_expected(mem) == 2 * 32 * 1 * 32 * 1024 * 128 * 2, r0
    grid0, curve0 = mem.figure(0), mem.figure(1)

    # L by keyboard: the byte count follows the formula
    mem.press_slider("L", "ArrowRight")
    r1 = mem.wait_readout(lambda t: memory_bytes_shown(t) != b0, "ArrowRight on L should change the bytes")
    assert mem.int_value("L") == 33
    assert memory_bytes_shown(r1) == memory_bytes_expected(mem) == b0 * 33 // 32, r1
    grid1 = mem.wait_figure_changed(0, grid0, "the cache grid should redraw for L = 33")
    assert "(33,1,32,1024,128)" in grid1["title"].replace(" ", ""), grid1["title"]
    assert grid1["lengths"][0] == 33, grid1["lengths"]  # one heatmap row per layer
    mem.wait_figure_changed(1, curve0, "the memory-vs-S curve should redraw for L = 33")

    # dtype: int8 halves fp16
    b1 = memory_bytes_shown(r1)
    mem.select("dtype", "int8")
    r2 = mem.wait_readout(lambda t: memory_bytes_shown(t) != b1, "choosing int8 should change the bytes")
    assert memory_bytes_shown(r2) == b1 // 2 == memory_bytes_expected(mem), r2
    total = f"共 {format_bytes(memory_bytes_shown(r2))}"
    grid2 = mem.wait_figure_changed(0, grid1, "the cache grid should redraw for int8")
    assert "int8" in grid2["title"] and total in grid2["title"], grid2["title"]

    # S = 0: a warning, no bug, nothing else changes
    mem.type_text("S", "0")
    warn = mem.wait_message("warn", True, "S = 0 should show a .kvlab-msg-warn message")
    assert any("序列长度" in w for w in warn), warn
    assert mem.messages("bug") == []
    assert mem.readout() == r2, "the readout must keep the last valid values"
    ch.page.wait_for_timeout(300)
    assert mem.figure(0)["data"] == grid2["data"], "the figure must keep the last valid values"

    # a valid S again: the message goes, the bytes follow
    mem.type_text("S", "2048")
    mem.wait_message("warn", False, "a valid S should clear the warning")
    r3 = mem.wait_readout(lambda t: memory_bytes_shown(t) == 2 * memory_bytes_shown(r2), "S = 2048 doubles the bytes")
    assert memory_bytes_shown(r3) == memory_bytes_expected(mem), r3
    grid3 = mem.wait_figure_changed(0, grid2, "the cache grid should redraw for S = 2048")

    # Play: from the default fill (a part of S) the cache fills up to 100 %
    start_pct = mem.int_value("filled_pct")
    assert 0 < start_pct < 100 and filled_of(r3) == (2048 * start_pct // 100, 2048), r3
    mem.click_play()
    mem.wait_readout(lambda t: filled_of(t)[0] == 2048, "Play should fill the cache to 100 %", timeout_s=60)
    ch.wait_until(mem.playing, lambda p: not p, 10, "Play should stop at 100 %")
    full = mem.wait_figure_changed(0, grid3, "the grid should redraw as the cache fills")
    used_total = re.search(r"已用 (.+?) / 共 (.+)$", full["title"])
    assert used_total and used_total.group(1) == used_total.group(2), full["title"]  # a full cache: used == total

    # back to the defaults (also for the README screenshot): the original numbers exactly
    while mem.int_value("filled_pct") > start_pct:
        before = mem.int_value("filled_pct")
        mem.press_slider("filled_pct", "ArrowLeft")
        ch.wait_until(lambda: mem.int_value("filled_pct"), lambda v: v < before, 10, "ArrowLeft on the fill slider")
    mem.press_slider("L", "ArrowLeft")
    mem.select("dtype", "fp16")
    mem.type_text("S", "1024")
    mem.wait_readout(lambda t: t == r0, "restoring the controls should restore the original readout")
    mem.wait_figure(0, lambda s: s["data"] == grid0["data"], "restoring the values should restore the grid")

    # Padding waste
    pad = ch.panel("kvlab-padding")
    p0 = pad.readout()
    pfig0 = pad.figure(0)
    pad.type_text("lengths", "5, 50")
    p1 = pad.wait_readout(lambda t: t != p0, "new lengths should update the padding readout")
    assert "浪费 45.0%" in p1 and "B = 2 条序列" in p1 and "最长 50 " in p1, p1  # 1 - 55/100
    pad.wait_figure_changed(0, pfig0, "the padding figure should redraw")
    pad.type_text("lengths", "abc")
    warn = pad.wait_message("warn", True, "lengths 'abc' should show a .kvlab-msg-warn message")
    assert warn and pad.messages("bug") == [], warn
    assert pad.readout() == p1
    pad.type_text("lengths", "12, 40, 7, 33, 25, 60")
    pad.wait_message("warn", False, "valid lengths should clear the warning")
    pad.wait_readout(lambda t: t == p0, "the original lengths should give the original readout")


@dataclass
class ChapterSpec:
    interact: Callable[[ChapterPage], None]
    screenshot: str  # CSS selector scrolled to the top of the screenshot


# New chapters add their interactions here; a chapter without an entry still gets the run-all checks.
CHAPTER_SPECS: dict[str, ChapterSpec] = {
    "01_autoregressive_decode.ipynb": ChapterSpec(interact_01, ".kvlab-panel.kvlab-walkthrough"),
    "02_cache_storage_shape.ipynb": ChapterSpec(interact_02, ".kvlab-panel.kvlab-memory"),
}


def screenshot_name(notebook: str) -> str:
    m = re.match(r"(\d+)", notebook)
    return f"screenshot_{m.group(1).zfill(2) if m else Path(notebook).stem}.png"


# -- checks -----------------------------------------------------------------------------------
def check_clean(ch: ChapterPage, when: str) -> None:
    """No error outputs, every widget and figure rendered, no bug messages, no console or kernel errors."""
    cells = ch.cells()
    assert cells["domCells"] == cells["modelCells"], (
        f"{when}: only {cells['domCells']} of {cells['modelCells']} cells are in the DOM (windowing not off?)")
    errors = [f"cell {c['index']} [{c['head']}]: {'; '.join(c['errors'])}" for c in cells["cells"] if c["errors"]]
    assert not errors, f"{when}: cells raised errors:\n" + "\n".join(errors)
    not_run = [f"cell {c['index']} [{c['head']}]" for c in cells["cells"] if not c["empty"] and c["count"] is None]
    assert not not_run, f"{when}: cells were not executed:\n" + "\n".join(not_run)

    state = ch.wait_until(ch.render_state,
                          lambda s: not s["loading"] and not s["unrenderedPlots"]
                          and all(f["plot"] or f["img"] for f in s["figures"]),
                          30, f"{when}: widgets or figures did not finish rendering")
    assert not state["displayErrors"], f"{when}: widgets failed to display: {state['displayErrors']}"
    assert not state["bugs"], f"{when}: kvlab reported internal errors (.kvlab-msg-bug): {state['bugs']}"
    flat = [f for f in state["figures"] if f["height"] < 100]
    assert not flat, f"{when}: figures rendered with almost no height: {flat}"
    assert not ch.console_errors, f"{when}: browser console errors:\n" + "\n".join(ch.console_errors)
    ch.raise_on_bugs(when)  # kernel errors outside cells, tracebacks in the server log


# -- tests --------------------------------------------------------------------------------------
def test_specs_name_existing_chapters():
    stale = sorted(set(CHAPTER_SPECS) - set(CHAPTERS))
    assert not stale, f"CHAPTER_SPECS names notebooks that no longer exist in chapters/: {stale}"


@pytest.mark.parametrize("notebook", CHAPTERS)
def test_chapter_in_jupyterlab(notebook, browser, lab, screenshot_dir):
    ch = ChapterPage(browser, lab, f"chapters/{notebook}")
    try:
        info = ch.open()
        assert info["path"] == f"chapters/{notebook}", info
        run = ch.run_all()
        print(f"{notebook}: run-all took {run['seconds']:.1f} s ({run})")
        check_clean(ch, "after run-all")
        spec = CHAPTER_SPECS.get(notebook)
        if spec is not None:
            spec.interact(ch)
            check_clean(ch, "after the interactions")
        elif ch.render_state()["panels"]:
            print(f"{notebook} has kvlab panels but no entry in CHAPTER_SPECS: only the run-all checks ran")
        shot = ch.screenshot(screenshot_dir / screenshot_name(notebook), spec.screenshot if spec else None)
        print(f"screenshot: {shot}")
        if ch.ignored_console:
            print("ignored console errors:\n  " + "\n  ".join(ch.ignored_console))
    except BaseException:
        for artifact in ch.failure_artifacts(Path(notebook).stem):
            print(f"failure artifact: {artifact}")
        raise
    finally:
        ch.close()
