"""The course run once per test session, as a learner has it (issue 32, item 4), and read by several checks.

- **Installed**: kvlab installed non-editable from a clean clone of this checkout's branch into a fresh virtual
  environment (no system site-packages, PYTHONPATH unset), with the install command the notebooks' setup cell
  uses (Colab's and a hosted notebook's way);
- **outside the repository**: the clone's chapters copied into a folder of their own and executed there, by an
  executor started inside that venv (so each kernel is the venv's own Python);
- **on a busy machine**: beside two spinning processes at the learner's own priority (issue 31, part 2), started
  before the first chapter and killed, by their own ids, after the last; whether they lasted is recorded;
- **with the static edition's capture on**: each chapter runs through the installed ``kvlab.book.site.run_chapter``
  (the one way the static edition turns capture on), which also stamps the executed notebook, and keeps each
  precomputed panel's render function for the book's tests (``replay/``).

Each chapter's kernel reports, in a last cell removed before saving, where kvlab came from and its own peak
resident size (VmHWM): the spinners are other processes, so they cannot add to it. The executed notebooks are saved
in ``executed/``; the English edition's chapters (``chapters/en/``) run the same way after the Chinese ones, into
``executed/en/`` (:attr:`CourseRun.english`), but once the spinners are stopped: the busy-machine claims are checked
on the Chinese run (the predicates are the same in both languages), and an English chapter beside them would only
double its own time. Readers: tests/test_installed_course.py (site-packages, no error, peak), tests/test_busy_claims.py
(the recorded claims, re-checked) and tests/test_book.py's ``book`` fixture (the static edition built from them).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from kvlab.colab import install_command

ROOT = Path(__file__).resolve().parents[1]
SPIN = "# {marker}\nwhile True:\n    pass"  # pure Python: one core each, at the priority of whoever started it
# The harness's own test (tests/test_course_run.py) checks the busy processes' life, not the load: they sleep there
IDLE = "# {marker}\nimport time\nwhile True:\n    time.sleep(1)"
BUSY_PROCESSES = 2
CELL_TIMEOUT = 1200  # seconds per cell: a 2-core machine shared with the spinners (and, in CI, with nothing else)

# Appended to each chapter: where kvlab came from and the kernel's peak resident size, as one JSON line.
PROBE = """import json as _json, kvlab as _kvlab
from kvlab.resources import peak_resident_bytes as _peak
print("KVLAB-PROBE " + _json.dumps({"file": _kvlab.__file__, "peak_rss": _peak()}))"""

# Run by the venv's Python in the folder of chapters: each chapter through the installed run_chapter, one line of
# JSON per chapter on stdout (its error instead, and the other chapters still run).
RUNNER = """import json, sys, traceback
from pathlib import Path
import nbformat
from kvlab.book.site import RUN_META, chapter_notebooks, run_chapter

probe, executed, replay, timeout = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
for path in chapter_notebooks(Path.cwd()):
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(probe))
    nbformat.write(nb, path)
    try:
        nb = run_chapter(path, timeout=timeout, replay=replay)
        text = "".join(o.get("text", "") for o in nb.cells.pop().outputs if o.get("output_type") == "stream")
        result = {**json.loads(text.split("KVLAB-PROBE ", 1)[1]), "seconds": nb.metadata[RUN_META]["seconds"]}
        nbformat.write(nb, executed / path.name)
    except Exception:
        result = {"error": traceback.format_exc()[-6000:]}
    print("KVLAB-CHAPTER " + json.dumps({"name": path.name, **result}), flush=True)
"""


def run(cmd, **kw) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@dataclass
class Venv:
    python: Path
    env: dict
    clone: Path
    base: Path


def installed_venv(base: Path) -> Venv:
    """A clean clone of this checkout's branch, and a fresh venv with kvlab installed from it as Colab would."""
    clone = base / "clone"
    branch = run(["git", "-C", str(ROOT), "rev-parse", "--abbrev-ref", "HEAD"]).strip()
    ref = branch if branch != "HEAD" else run(["git", "-C", str(ROOT), "rev-parse", "HEAD"]).strip()
    run(["git", "clone", "-q", "--no-local", str(ROOT), str(clone)])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    venv_dir = base / "venv"
    run([sys.executable, "-m", "venv", str(venv_dir)], env=env)  # no --system-site-packages
    python = venv_dir / "bin" / "python"
    pip = [str(python), "-m", "pip"]
    # Byte-compiled at install, as pip does by default: with PYTHONDONTWRITEBYTECODE set (as on this CI machine) an
    # install without it (--no-compile) leaves every kernel compiling torch and transformers anew, 12 kernels a run.
    # A current pip, as Colab has (pip 23's vendored packaging refuses a git+file:// URL, which has no host):
    run([*pip, "install", "-q", "--upgrade", "pip"], env=env, timeout=900)
    # a fresh venv would otherwise resolve the default (multi-GB CUDA) torch: take the local CPU wheel first
    run([*pip, "install", "-q", "torch==2.13.0"], env=env, timeout=900)
    run([*pip, *install_command(f"git+file://{clone}", ref)], env=env, timeout=900)
    run([*pip, "install", "-q", "ipykernel", "nbclient", "nbformat"], env=env, timeout=900)
    return Venv(python, env, clone, base)


@dataclass
class ChapterRun:
    """One chapter of the run: its saved execution, or the error that stopped it."""

    name: str
    executed: Path | None = None
    error: str | None = None
    kvlab_file: str = ""
    peak_rss: int | None = None  # (None: the kernel could not read its VmHWM)
    seconds: float = 0.0

    def notebook(self):
        assert self.error is None, f"{self.name} did not finish:\n{self.error}"
        return nbformat.read(self.executed, as_version=4)


@dataclass
class CourseRun:
    venv: Venv
    course: Path  # the folder outside the repository the chapters ran in
    executed: Path  # the executed notebooks, one per chapter (kvlab.book's --from-executed DIR)
    replay: Path  # each precomputed panel's render function and defaults (kvlab.book.capture)
    chapters: dict[str, ChapterRun] = field(default_factory=dict)
    english: dict[str, ChapterRun] = field(default_factory=dict)  # the English edition's chapters, by file name
    busy_throughout: bool = False
    spinners: list[int] = field(default_factory=list)  # the busy processes' ids (killed when the run ended)
    seconds: float = 0.0  # the Chinese chapters, beside the spinners
    load: tuple = ()  # the 1-, 5- and 15-minute load averages when the Chinese chapters ended
    english_seconds: float = 0.0  # the English chapters, after the spinners

    @property
    def chapters_dir(self) -> Path:
        """The chapters as they were run (the clone's): what the saved executions are checked against."""
        return self.venv.clone / "chapters"

    @property
    def english_dir(self) -> Path:
        """The English edition's chapters as they were run (the clone's ``chapters/en/``)."""
        return self.chapters_dir / "en"

    def failed(self) -> dict[str, str]:
        return {name: ch.error for name, ch in self.chapters.items() if ch.error is not None}

    def summary(self) -> list[str]:
        lines = [f"{prefix}{ch.name}: {'FAILED' if ch.error else f'{ch.seconds:.0f} s'}, "
                 f"peak {(ch.peak_rss or 0) / 2**30:.2f} GiB"
                 for prefix, runs in (("", self.chapters), ("en/", self.english)) for ch in runs.values()]
        return lines + [f"Chinese chapters: {self.seconds:.0f} s beside {BUSY_PROCESSES} busy processes "
                        f"(they lasted: {self.busy_throughout}); load averages at their end "
                        + " ".join(f"{x:.2f}" for x in self.load),
                        f"English chapters: {self.english_seconds:.0f} s, after the busy processes stopped"]


def spinner_marker(base: Path) -> str:
    """What a run's busy processes carry on their command line: their own run's folder, so a probe (or ``pgrep -f``)
    tells them from another run's, e.g. the other test worker's."""
    return f"kvlab busy process for {base}"


def start_spinners(marker: str, body: str = SPIN) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", body.format(marker=marker)]) for _ in range(BUSY_PROCESSES)]


def stop(spinners: list[subprocess.Popen]) -> None:
    for p in spinners:
        p.kill()
        p.wait(timeout=10)


def _run_folder(venv: Venv, course: Path, executed: Path, replay: Path) -> list[dict]:
    """Run every chapter in ``course`` with the installed runner; one result per chapter."""
    done = subprocess.run([str(venv.python), "-c", RUNNER, PROBE, str(executed), str(replay), str(CELL_TIMEOUT)],
                          env=venv.env, cwd=course, capture_output=True, text=True, timeout=7200)
    lines = [json.loads(line.split(" ", 1)[1]) for line in done.stdout.splitlines()
             if line.startswith("KVLAB-CHAPTER ")]
    assert done.returncode == 0 and lines, f"the course run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return lines


def _chapter_runs(lines: list[dict], executed: Path) -> dict[str, ChapterRun]:
    runs = {}
    for r in lines:
        ch = ChapterRun(r["name"], error=r.get("error"), kvlab_file=r.get("file", ""),
                        peak_rss=r.get("peak_rss"), seconds=r.get("seconds", 0.0))
        if ch.error is None:
            ch.executed = executed / ch.name
        runs[ch.name] = ch
    return runs


def run_course(venv: Venv, busy: str = SPIN) -> CourseRun:
    """Every chapter of the clone, Chinese then English, executed once outside the repository, beside the spinners
    (see the docstring); ``busy`` is their code (:data:`IDLE` for the harness's own test)."""
    base = venv.base
    result = CourseRun(venv, base / "course", base / "executed", base / "replay")
    english = (result.course / "en", result.executed / "en", result.replay / "en")
    for folder in (result.course, result.executed, result.replay, *english):
        folder.mkdir()
    for nb in result.chapters_dir.glob("*.ipynb"):
        shutil.copy(nb, result.course / nb.name)
    for nb in result.english_dir.glob("*.ipynb") if result.english_dir.is_dir() else ():
        shutil.copy(nb, english[0] / nb.name)
    start = time.perf_counter()
    spinners = start_spinners(spinner_marker(base), busy)
    result.spinners = [p.pid for p in spinners]
    try:
        lines = _run_folder(venv, result.course, result.executed, result.replay)
        result.busy_throughout = all(p.poll() is None for p in spinners)
    finally:
        stop(spinners)
    result.seconds, result.load = time.perf_counter() - start, os.getloadavg()
    start = time.perf_counter()
    english_lines = _run_folder(venv, *english) if any(english[0].glob("*.ipynb")) else []
    result.english_seconds = time.perf_counter() - start
    result.chapters = _chapter_runs(lines, result.executed)
    result.english = _chapter_runs(english_lines, english[1])
    return result
