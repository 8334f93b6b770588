"""A class on a real JupyterHub (issue 30, part 2): the hub on 127.0.0.1 with the built-in ``simple`` spawner and the
``shared-password`` authenticator, each student's server given ``cpu_limit = 1`` and ``mem_limit = "2G"`` (which the
spawner only exports as ``CPU_LIMIT`` / ``MEM_LIMIT``: kvlab reads them).

Students log in through the hub's form with the shared password, get their servers, open the teacher's nbgitpuller
link (``kvlab.teacher.link.pull_link``, pointed at a clean clone of this checkout as the course remote) and pull the
course through nbgitpuller's api route. Every student runs chapters 3.1 and 3.3 at the
same time (each student 3.1 then 3.3, as one works through a course), through the Jupyter server's kernel API:
a kernel per student per chapter, the pulled notebook's code cells sent in order over its websocket. Every cell must
finish without error (the notebooks' ``confirm(...)`` claim checks included: under this load a claim may say "can't
tell", none may be false); each kernel must import this environment's kvlab, run on 1 thread with its CPU budget
taken from JupyterHub's CPU_LIMIT, and peak (VmHWM) at or below 1.5 GiB. Afterwards the hub is stopped and no process
it started may be left.

Run with ``-s`` to see the table. ``KVLAB_HUB_STUDENTS=1`` runs a one-student class (for development).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

pytest.importorskip("jupyterhub", reason="jupyterhub is not installed (pip install -e '.[test]')")
pytest.importorskip("nbgitpuller", reason="nbgitpuller is not installed (pip install -e '.[test]')")
pytest.importorskip("websocket", reason="websocket-client is not installed (pip install -e '.[test]')")

from hub_support import CellError, Hub, Student  # noqa: E402

from kvlab.teacher.link import FIRST_CHAPTER, pull_link  # noqa: E402
from kvlab import claims  # noqa: E402
from test_busy_claims import CLAIMING  # noqa: E402  (notebook -> the choosers its lesson uses)

pytestmark = [pytest.mark.slow]

STUDENTS = int(os.environ.get("KVLAB_HUB_STUDENTS", "6"))
CHAPTERS = {"3.1": "chapters/01_autoregressive_decode.ipynb", "3.3": "chapters/03_prefill_and_decode.ipynb"}
POD_KERNEL_BYTES = int(1.5 * 2**30)  # a 2 GiB pod less 0.5 GiB for the notebook server
GiB = 2**30

# Sent after each chapter's last cell: where kvlab came from, the threads it uses and why, the memory limit it sees,
# and the peak resident size (VmHWM) of the kernel and of its parent, the student's notebook server.
PROBE = r"""
import json as _json, os as _os, sys as _sys, torch as _torch, kvlab as _kvlab
from kvlab import measure as _measure, resources as _resources
def _hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
_budget, _mem = _resources.cpu_budget(), _resources.memory_limit()
print("KVLAB-HUB-PROBE " + _json.dumps({
    "kvlab": _kvlab.__file__, "python": _sys.executable, "cwd": _os.getcwd(),
    "CPU_LIMIT": _os.environ.get("CPU_LIMIT"), "MEM_LIMIT": _os.environ.get("MEM_LIMIT"),
    "torch_threads": _torch.get_num_threads(), "measurement_threads": _measure.measurement_threads(),
    "budget": [_budget.value, _budget.source],
    "limits": [[x.value, x.source] for x in _resources.cpu_limits()],
    "memory_limit": None if _mem is None else [_mem.value, _mem.source],
    "peak_rss": _hwm(_os.getpid()), "server_peak_rss": _hwm(_os.getppid())}))
"""


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"git {args} failed: {done.stderr[-2000:]}"
    return done.stdout.strip()


@pytest.fixture
def hub(tmp_path):
    """A JupyterHub for a class of STUDENTS, stopped (and everything it started killed) however the test ends."""
    if shutil.which("configurable-http-proxy") is None:
        pytest.skip("configurable-http-proxy is not on PATH (npm install -g configurable-http-proxy)")
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc: peaks are read from VmHWM and leftover processes looked for there")
    hub = Hub(tmp_path / "hub", [f"student{i}" for i in range(STUDENTS)])
    try:
        hub.start()
        yield hub
    finally:
        killed = hub.stop()
        if killed:
            print(f"\nhub fixture: killed leftover processes {killed}")


@pytest.fixture
def course_remote(tmp_path):
    """A clean clone of this checkout's commit, standing in for the course's git server: (file URL, branch)."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs a git checkout and git: the course is pulled from a clean clone of it")
    remote = tmp_path / "remote" / "kvlab"
    git("clone", "-q", "--no-local", str(ROOT), str(remote))
    branch = git("-C", str(remote), "rev-parse", "--abbrev-ref", "HEAD")
    if branch == "HEAD":  # a detached checkout: give its commit a branch nbgitpuller can name
        branch = "course"
        git("-C", str(remote), "checkout", "-q", "-b", branch)
    return f"file://{remote}", branch


def run_chapter(student: Student, folder: str, chapter: str) -> dict:
    """Start a kernel in the pulled chapter's folder, send its code cells in order (stopping at the first error, as
    a run-all does), then the probe; shut the kernel down. The error, if any, is returned, not raised, so that every
    student's runs finish and every failure is reported."""
    import nbformat

    notebook = student.home / folder / CHAPTERS[chapter]
    nb = nbformat.read(notebook, as_version=4)
    kernel = student.kernel(str(Path(folder) / CHAPTERS[chapter]).rsplit("/", 1)[0])
    error = None
    try:
        started = time.monotonic()
        executed = {"cells": []}  # what a run-all shows: the claims recorded with each cell's displays
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.source.strip():
                try:
                    kernel.execute(cell.source)
                except CellError as e:
                    error = str(e)
                    break
                finally:
                    executed["cells"].append({"outputs": kernel.last_outputs})
        seconds = time.monotonic() - started
        text = kernel.execute(PROBE)
    finally:
        kernel.shutdown()
    probe = json.loads(text.split("KVLAB-HUB-PROBE ", 1)[1])
    choosers = CLAIMING.get(Path(CHAPTERS[chapter]).name, ())
    false_claims = claims.check_recorded(executed, choosers) if choosers else []  # re-evaluated, not trusted
    return {"student": student.name, "chapter": chapter, "seconds": seconds, "kernel_start": kernel.start_seconds,
            "reconnects": kernel.reconnects, "error": error or ("; ".join(false_claims) if false_claims else None),
            "claims": len(claims.recorded(executed)), **probe}


def test_a_class_runs_the_course_on_jupyterhub(hub, course_remote, tmp_path):
    students = [Student(hub, name) for name in hub.users]
    repo, branch = course_remote
    link = pull_link(hub.url, repo, branch)
    parts = urlsplit(link)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert parts.path == "/hub/user-redirect/git-pull" and query["repo"] == repo and query["branch"] == branch
    folder = query["targetpath"]
    assert query["urlpath"] == f"lab/tree/{folder}/{FIRST_CHAPTER}"
    marks = {"hub up": time.monotonic() - hub.started_at}

    # 1. every student logs in with the shared password and gets a server
    with ThreadPoolExecutor(len(students)) as pool:
        list(pool.map(Student.log_in, students))
        list(pool.map(Student.start_server, students))
        list(pool.map(Student.wait_for_server, students))
    marks["servers ready"] = time.monotonic() - hub.started_at

    # 2. ...opens the teacher's link (the hub sends them to their server's /git-pull page, whose script would call
    # the api route), and the api route pulls the course into their home
    def pull(student: Student) -> list[dict]:
        page = student.open_link(link)
        assert page.status_code == 200 and urlsplit(page.url).path == f"/user/{student.name}/git-pull", \
            f"{student.name}: the link ended at {page.status_code} {page.url}"
        return student.git_pull({k: query[k] for k in ("repo", "branch", "targetpath")})

    with ThreadPoolExecutor(len(students)) as pool:
        pulls = list(pool.map(pull, students))
    for student, events in zip(students, pulls):
        assert events and events[-1].get("phase") == "finished", f"{student.name}: nbgitpuller said {events[-3:]}"
        course = student.home / folder
        for path in [*CHAPTERS.values(), "kvlab/__init__.py", query["urlpath"].split(f"{folder}/", 1)[1]]:
            assert (course / path).is_file(), f"{student.name}: {path} did not arrive in {course}"
        assert git("-C", str(course), "rev-parse", "HEAD") == git("-C", repo[len("file://"):], "rev-parse", "HEAD")
    marks["course pulled"] = time.monotonic() - hub.started_at
    hub.note_processes()

    # 3. the class: every student at once, each working through 3.1 then 3.3
    def work_through(student: Student) -> list[dict]:
        return [run_chapter(student, folder, chapter) for chapter in CHAPTERS]

    class_started = time.monotonic()
    with ThreadPoolExecutor(len(students)) as pool:
        futures = [pool.submit(work_through, s) for s in students]
        while not all(f.done() for f in futures):
            hub.note_processes()  # every kernel and server, for the leftover check
            time.sleep(2)
        runs = [r for f in futures for r in f.result()]
    class_seconds = time.monotonic() - class_started
    marks["class run"] = time.monotonic() - hub.started_at

    # 4. stop the hub: everything it started must go with it
    killed = hub.stop()
    wall = time.monotonic() - hub.started_at
    started_kinds = " ".join(hub.seen.values())

    print(f"\nJupyterHub class: {len(students)} students, {os.cpu_count()} cores here; the spawner's cpu_limit = "
          f"{hub.cpu_limit}, mem_limit = {hub.mem_limit}")
    print("timeline (s from hub start): " + ", ".join(f"{k} {v:.0f}" for k, v in marks.items()))
    print(f"{'student':<10} {'chapter':<7} {'seconds':>8} {'kernel start':>12} {'peak GiB':>9} {'server GiB':>10} "
          f"{'threads':>7} {'timing':>6}  budget")
    for r in runs:
        print(f"{r['student']:<10} {r['chapter']:<7} {r['seconds']:8.1f} {r['kernel_start']:12.1f} "
              f"{r['peak_rss'] / GiB:9.2f} {r['server_peak_rss'] / GiB:10.2f} {r['torch_threads']:7d} "
              f"{r['measurement_threads']:6d}  {r['budget'][0]} ({r['budget'][1]})"
              + (f"  (websocket reopened {r['reconnects']}× while the kernel started)" if r["reconnects"] else "")
              + ("  FAILED: " + r["error"].splitlines()[0] if r["error"] else ""))
    for chapter in CHAPTERS:
        under = [r["seconds"] for r in runs if r["chapter"] == chapter and not r["error"]] or [float("nan")]
        print(f"{chapter} under the class load: {min(under):.1f}–{max(under):.1f} s (mean {sum(under) / len(under):.1f} s)")
    print(f"class run {class_seconds:.0f} s; the test's wall time from hub start to hub stopped: {wall:.0f} s")

    failed = [r for r in runs if r["error"]]
    assert not failed, f"{len(failed)} of {len(runs)} chapter runs failed:\n" + "\n\n".join(
        f"{r['student']} {r['chapter']}: {r['error']}" for r in failed)
    assert not killed, f"processes the hub started outlived it and had to be killed: {killed}"
    for r in runs:  # a chapter on kvlab.claims recorded its claims (each re-checked above)
        assert r["claims"] > 0 or Path(CHAPTERS[r["chapter"]]).name not in CLAIMING, f"{r['student']} {r['chapter']}: no claims"
    assert "configurable-http-proxy" in started_kinds and "jupyterhub.singleuser" in started_kinds \
        and "ipykernel" in started_kinds, f"the leftover check saw too little: {sorted(set(hub.seen.values()))}"
    for r in runs:
        who = f"{r['student']} {r['chapter']}"
        assert Path(r["kvlab"]).resolve() == (ROOT / "kvlab" / "__init__.py").resolve(), f"{who}: kvlab from {r['kvlab']}"
        assert Path(r["python"]).resolve() == Path(sys.executable).resolve(), f"{who}: kernel python {r['python']}"
        assert Path(r["cwd"]).resolve() == (hub.homes / r["student"] / folder
                                            / "chapters").resolve(), f"{who}: kernel ran in {r['cwd']}"
        assert r["CPU_LIMIT"] is not None and float(r["CPU_LIMIT"]) == hub.cpu_limit, f"{who}: CPU_LIMIT {r['CPU_LIMIT']}"
        assert r["budget"][0] == 1, f"{who}: CPU budget {r['budget']}"
        assert ["JupyterHub 的 CPU_LIMIT", 1] in [[s, v] for v, s in r["limits"]], f"{who}: limits {r['limits']}"
        assert r["torch_threads"] == 1 and r["measurement_threads"] == 1, \
            f"{who}: {r['torch_threads']} torch threads, {r['measurement_threads']} timing threads"
        assert r["memory_limit"] is not None and r["memory_limit"][0] <= 2 * GiB, f"{who}: memory limit {r['memory_limit']}"
        assert r["peak_rss"] <= POD_KERNEL_BYTES, f"{who}: kernel peak {r['peak_rss'] / GiB:.2f} GiB > 1.5 GiB"
    assert wall < 600, f"the hub test took {wall:.0f} s"
