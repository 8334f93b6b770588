"""Guards on the committed notebooks: chapters found in chapters/ (none listed by hand), each complete, every code
cell wiring only; and the Colab set-up (no Colab needed)."""
import ast
import importlib.util
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from kvlab import colab
from kvlab.exercises import notebook

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))


CHAPTER_NAME = re.compile(r"(\d\d)_[a-z0-9_]+\.ipynb")  # 01_autoregressive_decode.ipynb


def test_chapters_are_numbered_one_by_one():
    """Chapters are found, not listed: NN_title.ipynb, numbered 01, 02 ... without a gap."""
    found = [CHAPTER_NAME.fullmatch(p.name) for p in NOTEBOOKS]
    assert NOTEBOOKS and all(found), [p.name for p, m in zip(NOTEBOOKS, found) if not m]
    assert [int(m.group(1)) for m in found] == list(range(1, len(NOTEBOOKS) + 1))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_chapter_has_its_lesson_exercises_and_browser_spec(path):
    """What ARCHITECTURE.md's 「Adding a chapter」 asks for, checked for every notebook in chapters/."""
    nn = path.name[:2]
    module = notebook.module_for(path)
    assert module is not None, f"no kvlab/exercises/chNN.py names {path.name} as its NOTEBOOK"
    assert module.__name__ == f"kvlab.exercises.ch{nn}"
    assert (ROOT / "tests" / "browser_chapters" / f"ch{nn}.py").exists()
    lessons = set(re.findall(r"from kvlab\.lessons import (\w+) as lesson", notebook_source(path)))
    assert len(lessons) == 1, f"{path.name} should import its one lesson as `lesson`, found {lessons}"
    lesson = lessons.pop()
    assert importlib.util.find_spec(f"kvlab.lessons.{lesson}") is not None
    assert importlib.util.find_spec(f"kvlab.viz.{lesson}_plots") is not None, f"kvlab/viz/{lesson}_plots.py"
    assert (ROOT / "tests" / f"test_lesson_{lesson}.py").exists()
    row = f"| `chapters/{path.name}` | `kvlab/lessons/{lesson}"
    assert row in (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"), f"ARCHITECTURE.md's chapter table: {row}"


def notebook_source(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


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


def _run_setup_cell(monkeypatch, on_colab: bool, importable: bool = True, returncode: int = 0,
                    installed: str | None = None):
    source = colab.setup_cell_source()  # written before the fakes below, as the notebooks were
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
    if installed is not None:
        import importlib.metadata

        real_version = importlib.metadata.version
        monkeypatch.setattr(importlib.metadata, "version", lambda name: installed if name == "kvlab" else real_version(name))
    exec(compile(source, "setup-cell", "exec"), {})
    return calls, widget_manager


def test_setup_cell_installs_from_repo_on_colab_and_pins_torch(monkeypatch, capsys):
    import importlib.metadata

    calls, widget_manager = _run_setup_cell(monkeypatch, on_colab=True, importable=False)
    assert len(calls) == 1
    cmd = calls[0]
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"]
    assert f"kvlab @ git+https://github.com/{colab.REPO}@{colab.BRANCH}" in cmd
    assert f"torch=={importlib.metadata.version('torch')}" in cmd  # Colab's torch is kept as it is
    out = capsys.readouterr().out
    assert widget_manager == [True] and "正在安装 kvlab" in out and "没有装上" not in out
    assert "Installing kvlab" in out  # the setup cell runs before kvlab can speak one language: it says both


def test_setup_cell_skips_the_install_when_kvlab_is_importable(monkeypatch):
    calls, widget_manager = _run_setup_cell(monkeypatch, on_colab=True, importable=True)
    assert calls == [] and widget_manager == [True]


def test_the_install_command_is_the_one_function_the_setup_cell_uses():
    assert colab.install_command() == ["install", "-q", f"kvlab @ git+https://github.com/{colab.REPO}@{colab.BRANCH}"]
    assert repr(colab.install_command()[-1]) in colab.setup_cell_source()
    assert colab.install_command("git+file:///tmp/clone", "main")[-1] == "kvlab @ git+file:///tmp/clone@main"


def test_setup_cell_installs_on_any_hosted_jupyter_too(monkeypatch, capsys):
    """Not only Colab: a hosted notebook (a university hub, a mainland-China platform) without kvlab gets it."""
    calls, widget_manager = _run_setup_cell(monkeypatch, on_colab=False, importable=False)
    assert len(calls) == 1 and calls[0][:4] == [sys.executable, "-m", "pip", "install"]
    assert widget_manager == [] and "正在安装 kvlab" in capsys.readouterr().out


@pytest.mark.parametrize("installed, warned", [("0.0.9", True), (None, False), ("99.0", False)])
def test_setup_cell_says_when_the_installed_kvlab_is_older_than_the_notebooks(monkeypatch, capsys, installed,
                                                                              warned):
    """nbgitpuller can pull notebooks newer than a hub image's kvlab: the first cell says so, in Chinese."""
    calls, _ = _run_setup_cell(monkeypatch, on_colab=False, installed=installed)
    out = capsys.readouterr().out
    assert calls == [] and (("这些笔记本需要 kvlab" in out and "%pip install --upgrade" in out
                             and "These notebooks need kvlab" in out) if warned else out == "")
    assert f'KVLAB_NEEDED = "{colab.course_version()}"' in colab.setup_cell_source()


def test_setup_cell_says_what_to_do_when_the_install_fails(monkeypatch, capsys):
    calls, widget_manager = _run_setup_cell(monkeypatch, on_colab=True, importable=False, returncode=1)
    out = capsys.readouterr().out
    assert len(calls) == 1 and "kvlab 没有装上" in out and f"https://github.com/{colab.REPO}" in out
    assert "kvlab did not install" in out
    assert widget_manager == [True]


def test_setup_cell_does_nothing_where_kvlab_is_installed_outside_colab(monkeypatch):
    calls, widget_manager = _run_setup_cell(monkeypatch, on_colab=False)
    assert calls == [] and widget_manager == []


def test_repo_address_is_written_once_in_source():
    hits = [p for p in (ROOT / "kvlab").rglob("*.py") if colab.REPO in p.read_text(encoding="utf-8")]
    assert hits == [ROOT / "kvlab" / "colab.py"]


def test_sync_is_idempotent(tmp_path):
    import shutil

    shutil.copytree(ROOT / "chapters", tmp_path / "chapters", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    assert colab.main([str(tmp_path)]) == 0
    for p in NOTEBOOKS:
        assert (tmp_path / "chapters" / p.name).read_text(encoding="utf-8") == p.read_text(encoding="utf-8")


# -- the thin-cell rule: a code cell is wiring (imports, calls into kvlab, asserts, panels) ---------------------
MAX_FUNCTION_LINES = 15
ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult)
HTML_TAG = re.compile(r"<(b|i|br|p|div|span|table|tr|td|th|ul|li|code|pre|details|style|h[1-6])\b[^>]*>", re.I)


def written_by_kvlab(cell: dict) -> bool:
    """The cells kvlab writes itself: the exercises (the learner's stubs and their check cells) and the Colab setup."""
    return notebook.is_generated(cell) or "".join(cell["source"]) == colab.setup_cell_source()


def cell_logic(source: str) -> list[str]:
    """What in one code cell is logic rather than wiring: raise, try, class, a function over MAX_FUNCTION_LINES
    lines or one that does arithmetic (an arithmetic helper), a global statement, HTML built from strings."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # IPython syntax (%magic, !shell): not Python to judge
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if isinstance(node, ast.Raise):
            found.append(f"line {line}: raise (validation belongs in kvlab, which raises ValueError/InputError)")
        elif isinstance(node, ast.Try):
            found.append(f"line {line}: try/except (handle the case in kvlab and return what the cell shows)")
        elif isinstance(node, ast.ClassDef):
            found.append(f"line {line}: class {node.name}")
        elif isinstance(node, ast.Global):
            found.append(f"line {line}: global")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"line {line}: def {node.name} has {length} lines (more than {MAX_FUNCTION_LINES})")
            if any(isinstance(n, (ast.BinOp, ast.AugAssign)) and isinstance(n.op, ARITHMETIC) for n in ast.walk(node)):
                found.append(f"line {line}: def {node.name} does arithmetic (an arithmetic helper belongs in kvlab)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and HTML_TAG.search(node.value):
            found.append(f"line {line}: HTML built in the cell ({HTML_TAG.search(node.value).group(0)})")
    return found


def thin_cell_violations(nb: dict) -> list[str]:
    return [f"cell {i}, {problem}" for i, cell in enumerate(nb["cells"])
            if cell["cell_type"] == "code" and not written_by_kvlab(cell)
            for problem in cell_logic("".join(cell["source"]))]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_cells_are_wiring_only(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    problems = thin_cell_violations(nb)
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def _notebook(*sources: str, stub: str | None = None) -> dict:
    cells = [{"cell_type": "code", "metadata": {}, "source": s.splitlines(keepends=True)} for s in sources]
    if stub is not None:  # an exercise stub, as kvlab.exercises writes it
        cells.append({"cell_type": "code", "metadata": {notebook.META_KEY: "ch01.x/stub"},
                      "source": stub.splitlines(keepends=True)})
    return {"cells": cells}


def test_the_thin_cell_rule_fails_on_a_cell_with_logic():
    long_body = "".join(f"    print({i})\n" for i in range(16))
    bad = _notebook(
        "n = int(box.value)\nif n < 1:\n    raise ValueError('n')",
        "try:\n    x = lesson.run()\nexcept ValueError:\n    x = None",
        "def tokens_per_s(n, seconds):\n    return n / seconds",
        "def show():\n" + long_body,
        "class Helper:\n    pass",
        "html = f'<b>{n}</b> tokens'",
        "def bump():\n    global n\n    n += 1",
    )
    problems = thin_cell_violations(bad)
    for cell, what in enumerate(["raise", "try/except", "does arithmetic", "17 lines", "class Helper", "HTML",
                                 "global"]):
        assert any(p.startswith(f"cell {cell},") and what in p for p in problems), (what, problems)


def test_the_thin_cell_rule_passes_wiring_and_the_learners_stubs():
    good = _notebook(
        "from kvlab.lessons import decode as lesson\nmodel, tok = load_demo_model(device)",
        "timings = lesson.measure_decode_latency(model, 64)\nfor line in lesson.explain_latency(timings):\n"
        "    print(line)\nassert timings['kv'].tokens_per_s > timings['none'].tokens_per_s",
        "print(f\"{r.bytes / 2**20:.1f} MiB\")\nlesson.latency_panel(model)",
        stub="def cached_attention_step(q, k, v):\n    scores = q @ k.transpose(-2, -1) / 8\n    raise NotImplementedError",
    )
    assert thin_cell_violations(good) == []
