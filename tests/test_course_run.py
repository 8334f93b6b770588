"""The harness behind the session's one run of the course (tests/course_run.py), on two tiny chapters with this
environment's Python standing in for the installed venv: a finished chapter is saved stamped and without the probe
cell, with where kvlab came from and its kernel's peak; a failing one records its error and the next still runs;
the busy processes (sleeping stand-ins here, so that this test does not load the machine for the other worker)
lasted the Chinese chapters and are gone before the English ones run."""
from __future__ import annotations

import os
import sys

import nbformat
import pytest

from course_run import IDLE, Venv, run_course, spinner_marker
from kvlab.book.site import RUN_META

pytestmark = [pytest.mark.slow]  # three kernels beside two sleeping stand-ins for the busy processes (about 25 s idle)


def chapter(folder, name, code):
    cells = [nbformat.v4.new_markdown_cell(f"# {name}"), nbformat.v4.new_code_cell(code)]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), folder / f"{name}.ipynb")


def test_the_harness_saves_each_chapter_records_a_failure_and_stops_its_busy_processes(tmp_path):
    clone = tmp_path / "clone"
    (clone / "chapters").mkdir(parents=True)
    chapter(clone / "chapters", "01_fails", "raise ValueError('坏了')")
    chapter(clone / "chapters", "02_fine", "print('好的')")
    (clone / "chapters" / "en").mkdir()
    # counts this run's busy processes only: another worker's course run spins at the same time
    spinning = ("import subprocess; print(subprocess.run(['pgrep', '-fc', %r], capture_output=True).stdout)"
                % spinner_marker(tmp_path))
    chapter(clone / "chapters" / "en", "02_fine", spinning)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # the busy processes sleep here: their life is checked, not the load they make (the real run spins)
    run = run_course(Venv(python=sys.executable, env=env, clone=clone, base=tmp_path), busy=IDLE)
    assert sorted(run.chapters) == ["01_fails.ipynb", "02_fine.ipynb"]
    failed, fine = run.chapters["01_fails.ipynb"], run.chapters["02_fine.ipynb"]
    assert failed.executed is None and "ValueError" in failed.error and "坏了" in failed.error
    assert fine.error is None and fine.peak_rss > 0 and fine.kvlab_file.endswith("__init__.py")
    nb = fine.notebook()
    assert [c.source for c in nb.cells] == [c.source for c in nbformat.read(clone / "chapters" / "02_fine.ipynb",
                                                                             as_version=4).cells]  # no probe
    assert "好的" in nb.cells[1].outputs[0]["text"] and RUN_META in nb.metadata
    assert run.busy_throughout and len(run.spinners) == 2 and len(run.load) == 3
    for pid in run.spinners:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"busy process {pid} still runs")
    assert run.failed() == {"01_fails.ipynb": failed.error} and any("FAILED" in line for line in run.summary())
    english = run.english["02_fine.ipynb"].notebook()  # the English edition ran after the busy processes stopped
    assert english.cells[1].outputs[0]["text"].strip() == "b'0\\n'" and run.english_seconds > 0
