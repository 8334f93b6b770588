"""``python -m kvlab.colab``'s command line: --help, and a usage error (exit code 2, no traceback, nothing written)
for an unknown option, extra arguments, and a folder that is missing or is not a course root. What it writes is
tested in test_notebooks_meta.py."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvlab import colab

ROOT = Path(__file__).resolve().parent.parent


def _notebook(path: Path, cells) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": [{"cell_type": kind, "metadata": {}, "source": colab.source_lines(text),
                                           **({"execution_count": None, "outputs": []} if kind == "code" else {})}
                                          for kind, text in cells],
                                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    return path


@pytest.fixture
def course(tmp_path) -> Path:
    """A small course root: one chapter without badge and setup cell, and a README with the badge table markers."""
    root = tmp_path / "course"
    _notebook(root / "chapters" / "01_x.ipynb", [("markdown", "# 3.1 x"), ("code", "print(1)")])
    (root / "README.md").write_text(f"# c\n\n{colab.README_BEGIN}\n{colab.README_END}\n", encoding="utf-8")
    return root


def _files(root: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_course_root_is_synced_and_a_second_run_changes_nothing(course, capsys):
    assert colab.main([str(course)]) == 0
    assert capsys.readouterr().out.strip() == "updated: 01_x.ipynb, README.md"
    nb = json.loads((course / "chapters" / "01_x.ipynb").read_text(encoding="utf-8"))
    assert "".join(nb["cells"][1]["source"]) == colab.setup_cell_source()
    assert colab.main([str(course)]) == 0
    assert capsys.readouterr().out.strip() == "all badges and setup cells up to date"


def test_help_describes_the_command(capsys):
    with pytest.raises(SystemExit) as stop:
        colab.main(["--help"])
    assert stop.value.code == 0 and capsys.readouterr().out.startswith("usage: python -m kvlab.colab")


@pytest.mark.parametrize("case", ["unknown option", "two folders", "missing folder", "a file", "no chapters",
                                  "no notebooks", "a broken notebook", "README without end marker"])
def test_bad_arguments_are_usage_errors_and_write_nothing(course, tmp_path, capsys, case):
    (tmp_path / "empty" / "chapters").mkdir(parents=True)
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    if case == "a broken notebook":
        (course / "chapters" / "02_broken.ipynb").write_text("{not json", encoding="utf-8")
    if case == "README without end marker":
        (course / "README.md").write_text(f"# c\n\n{colab.README_BEGIN}\n", encoding="utf-8")
    argv, says = {"unknown option": (["--tpyo", str(course)], "unrecognized arguments: --tpyo"),
                  "two folders": ([str(course), str(course)], "unrecognized arguments"),
                  "missing folder": ([str(tmp_path / "nope")], "does not exist"),
                  "a file": ([str(tmp_path / "notes.txt")], "not a folder"),
                  "no chapters": ([str(tmp_path)], "not a course root"),
                  "no notebooks": ([str(tmp_path / "empty")], "not a course root"),
                  "a broken notebook": ([str(course)], "02_broken.ipynb"),
                  "README without end marker": ([str(course)], colab.README_END)}[case]
    before = _files(tmp_path)
    with pytest.raises(SystemExit) as stop:
        colab.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and says in err and "Traceback" not in err
    assert _files(tmp_path) == before  # checked before anything is written, the good notebook included


@pytest.mark.parametrize("args, code, says", [(["--help"], 0, "usage: python -m kvlab.colab"),
                                               (["a", "b"], 2, "unrecognized arguments: b")])
def test_the_command_line_checks_its_arguments(tmp_path, args, code, says):
    done = subprocess.run([sys.executable, "-m", "kvlab.colab", *args], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == code and says in done.stdout + done.stderr and "Traceback" not in done.stderr


def test_the_readme_lists_both_editions_with_colab_badges():
    root = Path(colab.__file__).resolve().parent.parent
    notebooks = sorted((root / "chapters").glob("*.ipynb"))
    assert colab.synced_readme(root / "README.md", notebooks) is None, "run python -m kvlab.colab"
    text = (root / "README.md").read_text(encoding="utf-8")
    english = text.split(colab.README_EN_BEGIN)[1].split(colab.README_EN_END)[0]
    for nb in sorted((root / "chapters" / "en").glob("*.ipynb")):
        assert colab.colab_url(f"en/{nb.name}") in english
