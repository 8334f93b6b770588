"""Every chapter in a real JupyterLab, in headless Chromium: run all cells, check that every
widget and figure rendered without errors, then drive each chapter's main controls the way a
learner would (keyboard on sliders, dropdowns, typing, Play and Run buttons) and check that the
figures and numbers they drive change as they should.

Run:   python -m pytest tests/test_browser.py
README screenshots:   KVLAB_SCREENSHOTS=assets python -m pytest tests/test_browser.py
(with KVLAB_SCREENSHOTS set, each chapter also leaves the extra pictures its interactions take for a
reviewer, screenshot_NN_<name>.png; without it only the README picture and failure artifacts are written)

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

from browser_support import (ARTIFACT_DIR, CHAPTER_DIR, ChapterPage, LabServer, launch_chromium,
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


@dataclass
class ChapterSpec:
    interact: Callable[[ChapterPage], None]
    screenshot: str  # CSS selector scrolled to the top of the screenshot


def load_specs() -> dict[str, ChapterSpec]:
    """One module per chapter in tests/browser_chapters/: ``NOTEBOOK``, ``SCREENSHOT`` and ``interact(ch)``.

    A new chapter adds its own file there; a chapter without one still gets the run-all checks.
    """
    specs = {}
    for path in sorted(SPEC_DIR.glob("*.py")):
        module_spec = importlib.util.spec_from_file_location(f"browser_chapters.{path.stem}", path)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        specs[module.NOTEBOOK] = ChapterSpec(module.interact, module.SCREENSHOT)
    return specs


SPEC_DIR = Path(__file__).resolve().parent / "browser_chapters"
CHAPTER_SPECS: dict[str, ChapterSpec] = load_specs()


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
    warned = [f"cell {c['index']} [{c['head']}]: {c['stderr']}" for c in cells["cells"] if c["stderr"]]
    assert not warned, f"{when}: cells wrote warnings or other text to stderr:\n" + "\n".join(warned)
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


# -- the English edition (issue 34): 3.1 and 3.6 in a real JupyterLab ------------------------------------------------
ENGLISH = {  # notebook -> (the panel a learner moves first, its slider, the CSS selector of the screenshot)
    "01_autoregressive_decode.ipynb": ("kvlab-walkthrough", "step", ".kvlab-panel.kvlab-walkthrough"),
    "06_paged_cache_and_batching.ipynb": ("kvlab-blocks", "step", ".kvlab-panel.kvlab-blocks"),
}
CHINESE = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def chinese_on_page(ch: ChapterPage) -> list[str]:
    """Lines holding Chinese in what the page shows outside code inputs: outputs, widgets, figures, prose (the
    bilingual setup cell's source is an input, so it is not read)."""
    texts = ch.page.locator(".jp-OutputArea, .jp-MarkdownOutput").all_inner_texts()
    return [line.strip()[:120] for t in texts for line in t.splitlines() if CHINESE.search(line)]


def test_english_specs_name_english_chapters():
    """The browser suite's English scope (issue 34): 3.1 and 3.6 at least, each an English chapter that exists."""
    assert {"01_autoregressive_decode.ipynb", "06_paged_cache_and_batching.ipynb"} <= set(ENGLISH)
    assert set(ENGLISH) <= {p.name for p in (CHAPTER_DIR / "en").glob("*.ipynb")}


@pytest.mark.parametrize("notebook", sorted(ENGLISH))
def test_english_chapter_in_jupyterlab(notebook, browser, lab, screenshot_dir):
    panel_class, slider, shot_at = ENGLISH[notebook]
    ch = ChapterPage(browser, lab, f"chapters/en/{notebook}")
    try:
        ch.open()
        run = ch.run_all()
        print(f"en/{notebook}: run-all took {run['seconds']:.1f} s")
        check_clean(ch, "after run-all")
        assert not chinese_on_page(ch), chinese_on_page(ch)[:20]
        panel = ch.panel(panel_class)
        # scrolled into view, JupyterLab re-creates the cell's widget views: under load that took over 30 s once
        before, figure = panel.readout(), panel.figure(0, timeout_s=90)
        panel.press_slider(slider, "ArrowRight")
        after = panel.wait_readout(lambda t: t != before, f"ArrowRight on {slider} should change the readout")
        panel.wait_figure_changed(0, figure, f"ArrowRight on {slider} should redraw the first figure")
        assert not CHINESE.search(after), after
        check_clean(ch, "after moving the slider")
        assert not chinese_on_page(ch), chinese_on_page(ch)[:20]
        shot = ch.screenshot(screenshot_dir / f"screenshot_en_{notebook[:2]}.png", shot_at)
        print(f"screenshot: {shot}")
    except BaseException:
        for artifact in ch.failure_artifacts(f"en_{Path(notebook).stem}"):
            print(f"failure artifact: {artifact}")
        raise
    finally:
        ch.close()
