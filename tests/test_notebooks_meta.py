"""Guards on the committed notebooks and the Colab set-up (no Colab needed)."""
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from kvlab import colab

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))


CHAPTERS = ["01_autoregressive_decode.ipynb", "02_cache_storage_shape.ipynb", "03_prefill_and_decode.ipynb",
            "04_llama7b_memory_estimate.ipynb", "05_misconceptions.ipynb",  # the original chapter's five sections
            "06_paged_cache_and_batching.ipynb"]  # 3.6, the extension


def test_the_chapters_are_there():
    assert [p.name for p in NOTEBOOKS] == CHAPTERS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_badge_and_setup_cell_come_from_the_one_repo_address(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    first_md = "".join(next(c for c in nb["cells"] if c["cell_type"] == "markdown")["source"])
    first_code = "".join(next(c for c in nb["cells"] if c["cell_type"] == "code")["source"])
    assert colab.badge_markdown(path.name) in first_md
    assert first_code == colab.setup_cell_source(), "run `python -m kvlab.colab` to regenerate the setup cells"


def test_readme_badges_are_in_sync():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert colab.readme_badges(NOTEBOOKS) in readme


def _run_setup_cell(monkeypatch, on_colab: bool, importable: bool = True, returncode: int = 0):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd: calls.append(cmd) or types.SimpleNamespace(returncode=returncode))
    widget_manager = []
    if on_colab:
        google = types.ModuleType("google")
        colab_mod = types.ModuleType("google.colab")
        colab_mod.output = types.SimpleNamespace(enable_custom_widget_manager=lambda: widget_manager.append(True))
        google.colab = colab_mod
        monkeypatch.setitem(sys.modules, "google", google)
        monkeypatch.setitem(sys.modules, "google.colab", colab_mod)
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    if not importable:
        import importlib.util

        real = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "kvlab" else real(name, *a))
    exec(compile(colab.setup_cell_source(), "setup-cell", "exec"), {})
    return calls, widget_manager


def test_setup_cell_installs_from_repo_on_colab_and_pins_torch(monkeypatch, capsys):
    import importlib.metadata

    calls, widget_manager = _run_setup_cell(monkeypatch, on_colab=True, importable=False)
    assert len(calls) == 1
    cmd = calls[0]
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"]
    assert f"kvlab @ git+https://github.com/{colab.REPO}@{colab.BRANCH}" in cmd
    assert f"torch=={importlib.metadata.version('torch')}" in cmd  # Colab's torch is kept as it is
    assert widget_manager == [True] and capsys.readouterr().out == ""


def test_setup_cell_skips_the_install_when_kvlab_is_importable(monkeypatch):
    calls, widget_manager = _run_setup_cell(monkeypatch, on_colab=True, importable=True)
    assert calls == [] and widget_manager == [True]


def test_setup_cell_says_what_to_do_when_the_install_fails(monkeypatch, capsys):
    calls, widget_manager = _run_setup_cell(monkeypatch, on_colab=True, importable=False, returncode=1)
    out = capsys.readouterr().out
    assert len(calls) == 1 and "kvlab 没有装上" in out and f"https://github.com/{colab.REPO}" in out
    assert widget_manager == [True]


def test_setup_cell_does_nothing_outside_colab(monkeypatch):
    calls, widget_manager = _run_setup_cell(monkeypatch, on_colab=False)
    assert calls == [] and widget_manager == []


def test_repo_address_is_written_once_in_source():
    hits = [p for p in (ROOT / "kvlab").rglob("*.py") if colab.REPO in p.read_text(encoding="utf-8")]
    assert hits == [ROOT / "kvlab" / "colab.py"]


def test_sync_is_idempotent(tmp_path):
    import shutil

    shutil.copytree(ROOT / "chapters", tmp_path / "chapters", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    colab.main(str(tmp_path))
    for p in NOTEBOOKS:
        assert (tmp_path / "chapters" / p.name).read_text(encoding="utf-8") == p.read_text(encoding="utf-8")
