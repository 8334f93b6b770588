"""The browser's side of the widgets (``kvlab/viz/js/*.mjs``): each file and each assembled widget module parses
(``node --check``), and node's test runner runs ``tests/js/*.test.mjs`` (the state picking of the browser-drawn
steps: the nearest drawn state, a refused state never drawn). Skipped where node is missing."""
import shutil
import subprocess
from pathlib import Path

import pytest

from kvlab.viz import browser_steps, plotly_code, widgets

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed: the JavaScript is not checked here")


def node(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([NODE, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_every_js_file_parses():
    files = sorted(plotly_code.JS.glob("*.mjs"))
    assert {f.stem for f in files} >= {"slot", "code", "figure", "pick", "steps"}
    for f in files:
        run = node("--check", str(f))
        assert run.returncode == 0, f"{f.name}: {run.stderr}"


@pytest.mark.parametrize("module", ["code", "figure", "steps"])
def test_every_assembled_widget_module_parses(module, tmp_path):
    """What the browser imports: slot.mjs, the kernel's constants and the files, in one module (a name declared
    twice, or a constant the kernel forgot, fails here)."""
    esm = {"code": plotly_code.PlotlyCode._esm, "figure": widgets.PanelFigureWidget._esm,
           "steps": browser_steps.BrowserSteps._esm}[module]
    path = tmp_path / f"{module}.mjs"
    path.write_text(esm, encoding="utf-8")
    run = node("--check", str(path))
    assert run.returncode == 0, run.stderr
    assert "export default" in esm


def test_the_state_picking_passes_its_node_tests():
    run = node("--test", "tests/js/")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout
