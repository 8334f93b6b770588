"""The static edition: ``python -m kvlab.book`` built once per session from the course's one run (tests/course_run.py,
whose executions it reads as ``--from-executed`` does), then checked as a reader would use it (a real Chromium with
the network blocked, every page, every precomputed slider, and 3.1 and 3.6 on a phone's 390 px screen) and as a
teacher would print it (pdftoppm pages of every handout). Plus the pieces on their own: the static capture of a
panel and the matplotlib renderer.
"""
from __future__ import annotations

import copy
import html
import json
import os
import pickle
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import ipywidgets as W
import nbformat
import plotly.graph_objects as go
import pytest

from kvlab.book import mpl, site
from kvlab.book.capture import STATIC_MIME, figure_json, option_values, static_bundle
from kvlab.book.site import chapter_notebooks
from kvlab.viz import widgets as kw
from browser_support import ARTIFACT_DIR, CHAPTER_DIR, launch_chromium, unavailable

SITE_LIMIT = 25 * 2**20
NOTEBOOK_LIMIT = 3 * 2**20
# The panels whose sliders must work without a kernel (issue: the static edition), by their CSS class.
REQUIRED_STATIC = {"kvlab-walkthrough": {"step"}, "kvlab-shape": {"filled_pct", "L"}, "kvlab-timeline": {"step"},
                   "kvlab-calc": {"model", "seq_len"}, "kvlab-fit": {"model", "weight_dtype", "cache_dtype"},
                   "kvlab-budget": {"reserved_tokens"},
                   "kvlab-blocks": {"step"}, "kvlab-waste": {"block_size", "reserve"},
                   "kvlab-sharing": {"prefix", "requests", "block_size"}}


def shots_dir() -> Path:
    folder = Path(os.environ.get("KVLAB_SCREENSHOTS") or ARTIFACT_DIR.parent / "book")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# -- the capture and the renderer on their own ------------------------------------------------------------------
def _render(n, kind="bar"):
    if n > 6:
        raise ValueError(f"seq_len must be at most 6, got {n}")
    fig = go.Figure([go.Scatter(y=[0, 1], name="fixed"), go.Bar(x=list(range(n)), y=[1] * n)])
    return kw.View([fig], f"n = {n}")


def test_panel_declares_static_controls_by_name():
    with pytest.raises(ValueError, match="static"):
        kw.Panel({"n": W.IntSlider(value=2, min=1, max=9)}, _render, static=("m",), mode="rerender")


def test_static_form_renders_each_value_of_a_declared_control_through_the_panels_render():
    panel = kw.Panel({"n": W.IntSlider(value=2, min=1, max=9), "kind": W.Dropdown(options=["bar"], value="bar")},
                     _render, static=("n",), mode="rerender")
    spec = static_bundle(panel)[STATIC_MIME]
    n = next(c for c in spec["controls"] if c["name"] == "n")
    assert n["values"] == list(range(1, 10)) and n["default"] == 1 and n["widget"] == "slider"
    assert "states" not in next(c for c in spec["controls"] if c["name"] == "kind")  # not declared: shown as it is
    for value, state in zip(n["values"], n["states"]):
        if value > 6:  # the live panel refuses it: the page shows the same message, greyed out
            assert "error" in state and "6" in state["error"]
            continue
        expected = figure_json(_render(value).figures[0])
        fig = state["figures"][0]
        assert [spec["pool"][i] for i in fig["data"]] == expected["data"]
        assert spec["pool"][fig["layout"]] == expected["layout"] and state["html"] == f"n = {value}"
    fixed = figure_json(_render(1).figures[0])["data"][0]
    assert sum(1 for item in spec["pool"] if item == fixed) == 1  # the unchanging trace is stored once


def test_static_values_are_a_window_around_the_default_for_long_sliders():
    panel = kw.Panel({"n": W.IntSlider(value=500, min=1, max=1000)}, lambda n: kw.View([], str(n)), static=("n",),
                     mode="rerender")
    values, labels = option_values(panel, "n")
    assert len(values) == 48 and values[0] < 500 < values[-1] and labels[0] == str(values[0])


def test_while_the_static_edition_is_built_a_panel_output_carries_its_static_form(monkeypatch):
    shown = []
    monkeypatch.setattr(kw, "display", lambda obj, raw=False: shown.append((obj, raw)))
    panel = kw.Panel({"n": W.IntSlider(value=2, min=1, max=3)}, _render, static=("n",), mode="rerender")
    monkeypatch.delenv(kw.STATIC_ENV, raising=False)
    panel._ipython_display_()
    assert shown[-1] == (panel.widget, False)  # a normal run: just the widget
    monkeypatch.setenv(kw.STATIC_ENV, "1")
    panel._ipython_display_()
    bundle, raw = shown[-1]
    assert raw and "application/vnd.jupyter.widget-view+json" in bundle and bundle[STATIC_MIME]["kind"] == "panel"


def test_a_quiz_static_form_shows_every_question_with_its_answer_folded():
    """Each lesson's review quiz as the static page shows it: every question, its options, and the answer the live
    quiz's 「显示答案」 gives, inside a closed <details>."""
    from kvlab.exercises.quiz import answer_verdict
    from kvlab.lessons import misconceptions, paged
    from kvlab.viz.quiz import Quiz

    for lesson in (misconceptions, paged):
        questions = lesson.review_questions()
        form = static_bundle(Quiz(questions))[STATIC_MIME]
        assert form["kind"] == "quiz" and form["html"].count('class="kvlab-static-question"') == len(questions)
        for q in questions:
            assert html.escape(answer_verdict(q).message) in form["html"]
            assert all(html.escape(c.key) in form["html"] for c in getattr(q, "choices", ()))


def test_matplotlib_draws_the_trace_types_the_course_uses_with_chinese_labels():
    assert mpl.setup() is not None, "no CJK font found: install fonts-noto-cjk"
    fig = go.Figure()
    fig.add_scatter(x=[1, 10, 100], y=[1, 4, 9], mode="lines+markers", name="有缓存")
    fig.add_bar(x=["预填充", "解码"], y=[3, 1], name="耗时", xaxis="x2", yaxis="y2")
    fig.add_heatmap(z=[[1, 2], [3, 4]], xaxis="x3", yaxis="y3", colorscale="Blues")
    fig.update_layout(title="标题：KV Cache", xaxis=dict(type="log", domain=[0, 0.3], title="序列长度"),
                      xaxis2=dict(domain=[0.35, 0.65]), yaxis2=dict(anchor="x2"),
                      xaxis3=dict(domain=[0.7, 1]), yaxis3=dict(anchor="x3"))
    fig.add_annotation(x=0.5, y=1.05, xref="paper", yref="paper", text="注释<br>两行")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*missing from font.*")
        drawn = mpl.render(figure_json(fig))
        drawn.canvas.draw()
    assert len(drawn.axes) >= 3


def test_without_a_cjk_font_the_handouts_say_so_once(monkeypatch, capsys):
    monkeypatch.setattr(mpl, "cjk_font", lambda: None)
    mpl.setup.cache_clear()
    try:
        assert mpl.setup() is None and mpl.setup() is None
        out = capsys.readouterr().out
        assert out.count("No CJK font found") == 1 and "中文字体" in out
    finally:
        mpl.setup.cache_clear()
        monkeypatch.undo()
        mpl.setup()


def test_matplotlib_renderer_refuses_what_it_does_not_draw():
    with pytest.raises(mpl.Unsupported):
        mpl.render(figure_json(go.Figure(go.Pie(values=[1, 2]))))


# -- where the build writes: checked before any chapter runs, built beside DIR, swapped in only when it succeeded ---
def tiny_chapters(folder: Path, code: str = "print('算过了')") -> Path:
    """A --chapters folder with one small chapter (its title, one code cell)."""
    folder.mkdir(parents=True, exist_ok=True)
    cells = [nbformat.v4.new_markdown_cell("# 3.9 小章"), nbformat.v4.new_code_cell(code)]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), folder / "01_tiny.ipynb")
    return folder


@pytest.fixture
def fake_run(monkeypatch):
    """Chapters 'run' without a kernel (the notebook as it is), so a build takes seconds; the names run."""
    runs = []

    def run(path, replay, log=print):
        runs.append(path.name)
        return nbformat.read(path, as_version=4)

    monkeypatch.setattr(site, "run_with_one_retry", run)
    return runs


def run_book(capsys, *argv) -> tuple[int, str]:
    """``python -m kvlab.book ARGV`` in this process: its exit code and what it wrote to stderr."""
    from kvlab.book.__main__ import main

    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def refused_once(code: int, err: str, *words: str) -> None:
    assert code == 2 and err.count("error:") == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), err


USER_FILES = {"page and style": ("index.html", "_static/book.css"), "figure": ("figures/01_tiny-1.png",),
              "handout": ("handouts/01_tiny.pdf",), "handouts a file": ("handouts",)}


@pytest.mark.parametrize("names", USER_FILES.values(), ids=list(USER_FILES))
def test_book_refuses_a_folder_it_did_not_make(tmp_path, fake_run, capsys, names):
    """Issue 33 (2, 16): a folder holding the user's own files is refused before any chapter runs, untouched."""
    out, chapters = tmp_path / "book", tiny_chapters(tmp_path / "ch")
    for name in names:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("mine")
    before = snapshot(out)
    refused_once(*run_book(capsys, "--out", out, "--chapters", chapters, "--no-handouts"), "--out", "kvlab.book")
    assert snapshot(out) == before and fake_run == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["book", "ch"]  # nothing built beside it either


@pytest.mark.parametrize("where", ["root", "home", "repository", "file", "below a file"])
def test_book_refuses_out_paths_it_must_not_build_into(tmp_path, monkeypatch, capsys, where):
    """Issue 33 (2, 16): /, the home folder, the course's own folder and a file are usage errors, checked first."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # empty: refused for being home, not for what it holds
    (tmp_path / "notes.txt").write_text("mine")
    notes = tmp_path / "notes.txt"
    out, word = {"root": ("/", "root"), "home": (home, "home"), "repository": (site.COURSE_ROOT, "course"),
                 "file": (notes, "file"), "below a file": (notes / "book", "file")}[where]

    def must_not_run(*args, **kwargs):
        raise AssertionError("the build started")

    monkeypatch.setattr(site, "build_site", must_not_run)
    refused_once(*run_book(capsys, "--out", out, "--no-handouts"), "--out", word)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "notes.txt"] and not list(home.iterdir())
    assert (tmp_path / "notes.txt").read_text() == "mine" and not Path("/_static").exists()


@pytest.mark.parametrize("chapters", ["empty", "missing", "a file"])
def test_book_checks_the_chapters_folder_before_writing_anything(tmp_path, fake_run, capsys, chapters):
    """Issue 33 (16): a --chapters folder without chapters was found only after 5.7 MiB were copied into DIR."""
    folder = tmp_path / "ch"
    if chapters == "empty":
        folder.mkdir()
    elif chapters == "a file":
        folder.write_text("not a folder")
    refused_once(*run_book(capsys, "--out", tmp_path / "book", "--chapters", folder, "--no-handouts"), "--chapters")
    assert not (tmp_path / "book").exists() and fake_run == []
    assert [p.name for p in tmp_path.iterdir()] == (["ch"] if chapters != "missing" else [])


def test_book_rebuilds_a_site_it_made_marked_by_a_manifest_or_by_the_old_layout(tmp_path, fake_run, capsys):
    """Issue 33 (2): the site lists what it wrote; a site built before the manifest is known by its layout and
    markers; either is rebuilt, but not once the user has put a file of their own in it."""
    from kvlab.book.site import MANIFEST

    out, chapters = tmp_path / "book", tiny_chapters(tmp_path / "ch")
    args = ("--out", out, "--chapters", chapters, "--no-handouts")
    assert run_book(capsys, *args)[0] == 0
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    assert set(manifest["files"]) == files - {MANIFEST} and "01_tiny.html" in files and "index.html" in files
    (out / "index.html").write_text("an earlier build")
    assert run_book(capsys, *args)[0] == 0 and "kvlab-toc" in (out / "index.html").read_text(encoding="utf-8")
    (out / MANIFEST).unlink()  # as the builder before the manifest left it, a failed print's page included
    shutil.copy(out / "01_tiny.html", out / "_print_01_tiny.html")
    assert run_book(capsys, *args)[0] == 0 and (out / MANIFEST).exists()
    assert not (out / "_print_01_tiny.html").exists()
    for marked in (True, False):  # the user's own file in a site, with or without the manifest
        (out / "notes.txt").write_text("mine")
        if not marked:
            (out / MANIFEST).unlink()
        refused_once(*run_book(capsys, *args), "--out", "notes.txt")
        assert (out / "notes.txt").read_text() == "mine"
        (out / "notes.txt").unlink()
    (out / "index.html").write_text("<html>my own page</html>")  # the old layout, but not the old builder's page
    refused_once(*run_book(capsys, *args), "--out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["book", "ch"]


def test_a_failed_or_interrupted_build_leaves_the_old_site_as_it_was(tmp_path, fake_run, monkeypatch, capsys):
    """Issue 33 (2, 16): the site is built beside DIR and swapped in only when done; Ctrl-C is one line, exit 130."""
    from kvlab.book import build

    out, chapters = tmp_path / "book", tiny_chapters(tmp_path / "ch")
    assert run_book(capsys, "--out", out, "--chapters", chapters, "--no-handouts")[0] == 0
    before = snapshot(out)
    for stop in (RuntimeError("a cell failed"), KeyboardInterrupt()):
        def run(path, replay, log=print):
            raise stop

        monkeypatch.setattr(site, "run_with_one_retry", run)
        tiny_chapters(chapters).joinpath("02_more.ipynb").write_bytes((chapters / "01_tiny.ipynb").read_bytes())
        if isinstance(stop, RuntimeError):
            for target in (out, tmp_path / "new"):
                with pytest.raises(RuntimeError, match="a cell failed"):
                    build(target, chapters, handouts=False)
        else:
            code, err = run_book(capsys, "--out", out, "--chapters", chapters, "--no-handouts")
            assert code == 130 and err.strip().count("\n") == 0 and "interrupted" in err, err
        assert snapshot(out) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["book", "ch"]  # no new DIR, no folder beside it


def test_what_a_killed_build_left_beside_the_site_goes_with_the_next_build(tmp_path, fake_run, capsys):
    """SIGKILL leaves the folder being built beside DIR: the next build removes it (its process is gone), and
    nothing else beside DIR."""
    out, chapters = tmp_path / "book", tiny_chapters(tmp_path / "ch")
    left = tmp_path / ".book.kvlab-build-999999999-0a1b2c3d"  # (no process has that id)
    left.mkdir()
    (left / "index.html").write_text("half a site")
    (tmp_path / ".book.notes").write_text("mine")
    assert run_book(capsys, "--out", out, "--chapters", chapters, "--no-handouts")[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [".book.notes", "book", "ch"]


def test_a_failed_pdf_print_leaves_no_print_pages(tmp_path, monkeypatch):
    """Issue 33 (16): the pages Chromium prints from are removed even when printing fails."""
    import sys
    import types

    from kvlab.book import handouts

    class NoChromium:
        def __enter__(self):
            raise RuntimeError("Chromium did not start")

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(handouts, "chromium_missing", lambda: None)
    monkeypatch.setitem(sys.modules, "playwright.sync_api", types.SimpleNamespace(sync_playwright=NoChromium))
    chapter = site.Chapter(Path("01_tiny.ipynb"))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 3.9 小章")])
    with pytest.raises(RuntimeError, match="Chromium"):
        handouts.write_handouts(tmp_path, [chapter], {"01_tiny": nb}, "run info", log=lambda *a: None)
    assert list(tmp_path.glob("_print_*")) == []


# -- issue 31 part 5: exercise solutions only in a teacher's build -------------------------------------------------
SOLVED = "ch04.largest_batch"


def solution_line() -> str:
    """A distinctive line of one exercise's reference solution (its last)."""
    from kvlab.exercises.solutions import SOLUTIONS

    return SOLUTIONS[SOLVED].strip().splitlines()[-1].strip()


def exercise_chapter(folder: Path) -> Path:
    """A --chapters folder with a chapter ending in one exercise, its check cell's output as a kernel in teacher mode
    leaves it (the solution folded inside the feedback)."""
    from kvlab.exercises import ch04, checker

    checker.show_solutions(True)
    try:
        feedback = ch04.check_largest_batch(None)._repr_html_()
    finally:
        checker.reset_attempts()
    assert html.escape(solution_line()) in feedback
    folder.mkdir(parents=True, exist_ok=True)
    check = nbformat.v4.new_code_cell(ch04.LARGEST_BATCH.check, metadata={"kvlab_exercises": f"{SOLVED}/check"})
    check.outputs = [nbformat.v4.new_output("display_data", data={"text/html": feedback})]
    stub = nbformat.v4.new_code_cell(ch04.LARGEST_BATCH.stub, metadata={"kvlab_exercises": f"{SOLVED}/stub"})
    cells = [nbformat.v4.new_markdown_cell("# 3.9 小章"), nbformat.v4.new_markdown_cell(ch04.LARGEST_BATCH.task),
             stub, check]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), folder / "01_tiny.ipynb")
    return folder


def site_text(out: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(out.rglob("*.html")))


def test_the_static_edition_has_no_solution_unless_built_for_a_teacher(tmp_path, fake_run, capsys):
    chapters = exercise_chapter(tmp_path / "ch")
    line = solution_line()
    assert run_book(capsys, "--out", tmp_path / "book", "--chapters", chapters, "--no-handouts")[0] == 0
    text = site_text(tmp_path / "book")
    assert "kvlab-run-to-check" in text and site.SOLUTION_WITHHELD in text
    assert line not in text and html.escape(line) not in text and "kvlab-exercise-solution" not in text
    assert "教师版" not in text
    assert run_book(capsys, "--out", tmp_path / "teacher", "--chapters", chapters, "--no-handouts", "--teacher")[0] == 0
    page = (tmp_path / "teacher" / "01_tiny.html").read_text(encoding="utf-8")
    assert page.count('<details class="kvlab-exercise-solution">') == 1 and html.escape(line) in page
    assert site.SOLUTION_WITHHELD not in page
    assert "教师版" in (tmp_path / "teacher" / "index.html").read_text(encoding="utf-8")


def test_a_handout_has_no_solution_unless_built_for_a_teacher(tmp_path):
    from kvlab.book.handouts import print_notebook

    nb = nbformat.read(exercise_chapter(tmp_path) / "01_tiny.ipynb", as_version=4)
    line = html.escape(solution_line())
    for teacher in (False, True):
        static, _ = site.static_cells(copy.deepcopy(nb), "01_tiny.ipynb", teacher)
        printed = nbformat.writes(print_notebook(static, {}, teacher))
        assert (line in printed) == teacher and ("参考答案" in printed) == teacher
        assert "largest_batch = None" not in printed  # the stub (code) is never printed


@pytest.mark.slow  # two kernels
def test_a_chapter_runs_with_teacher_mode_off_even_in_a_teachers_shell(tmp_path, monkeypatch):
    """The build's kernels run with KVLAB_TEACHER=0: a checked real attempt in a chapter would show the solution in
    a teacher's kernel, never in the site's run."""
    code = "from kvlab.exercises import ch04\nch04.check_largest_batch(1)  # a real, wrong attempt"
    monkeypatch.setenv("KVLAB_TEACHER", "1")
    nb = site.run_chapter(tiny_chapters(tmp_path, code) / "01_tiny.ipynb", timeout=300)
    shown = json.dumps(nb.cells[1].outputs, ensure_ascii=False)
    assert "kvlab-exercise-wrong" in shown and "kvlab-exercise-solution" in shown  # unlocked by the attempt ...
    nb = site.run_chapter(tiny_chapters(tmp_path, "from kvlab.exercises import ch04\nch04.check_largest_batch(None)")
                          / "01_tiny.ipynb", timeout=300)
    shown = json.dumps(nb.cells[1].outputs, ensure_ascii=False)
    assert "kvlab-exercise-todo" in shown and "kvlab-exercise-solution\\\"" not in shown  # ... but not by teacher mode


@pytest.mark.slow  # a kernel each
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_during_a_chapter_stops_the_build_in_one_line_with_the_old_site_intact(tmp_path, fake_run, capsys,
                                                                                        sig):
    """Ctrl-C (the terminal signals the builder's process group) or SIGTERM while a chapter runs in its kernel: one
    line (besides the kernel's own start-up warning), exit 128 + the signal, the old site as it was, no folder
    beside it, the kernel gone."""
    import signal
    import sys
    import time

    out, chapters = tmp_path / "book", tiny_chapters(tmp_path / "ch")
    assert run_book(capsys, "--out", out, "--chapters", chapters, "--no-handouts")[0] == 0
    before = snapshot(out)
    flag = tmp_path / "kernel.pid"
    tiny_chapters(chapters, f"import os, time\nopen({str(flag)!r}, 'w').write(str(os.getpid()))\ntime.sleep(300)")
    proc = subprocess.Popen([sys.executable, "-m", "kvlab.book", "--out", str(out), "--chapters", str(chapters),
                             "--no-handouts"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,  # Ctrl-C's default, as in a terminal: a shell's background
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # job ignores it
    try:
        deadline = time.monotonic() + 240
        while not (flag.exists() and flag.read_text()) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert flag.exists(), proc.communicate(timeout=60)
        number = getattr(signal, sig)
        if number == signal.SIGINT:
            os.killpg(proc.pid, number)
        else:
            proc.send_signal(number)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    ours = [line for line in err.splitlines() if line.strip() and not line.startswith("[IPKernelApp] WARNING")]
    assert proc.returncode == 128 + number and len(ours) == 1 and "interrupted" in ours[0], err  # (and no traceback)
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["book", "ch", "kernel.pid"]
    kernel = int(flag.read_text())
    for _ in range(50):
        try:
            os.kill(kernel, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"the chapter's kernel (pid {kernel}) still runs")


# -- the whole build ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def book(tmp_path_factory, course_run):
    """The static edition built from the session's one run of the course (tests/course_run.py: installed, outside
    the repository, beside two busy processes, capture on), as ``python -m kvlab.book --from-executed`` does."""
    from kvlab.book import build

    failed = course_run.failed()
    assert not failed, "chapters that did not finish: " + "\n\n".join(f"{k}:\n{v}" for k, v in failed.items())
    root = tmp_path_factory.mktemp("book")
    report = build(root / "site", course_run.chapters_dir, executed=course_run.executed)
    return report, root


def test_build_makes_a_page_for_every_chapter_and_a_table_of_contents(book):
    report, _ = book
    out = report.out
    stems = [p.stem for p in chapter_notebooks(CHAPTER_DIR)]
    assert [ch.stem for ch in report.chapters] == stems  # every chapter in chapters/, a new one included
    index = (out / "index.html").read_text(encoding="utf-8")
    for stem in stems:
        page = (out / f"{stem}.html").read_text(encoding="utf-8")
        assert f'href="{stem}.html"' in index
        assert "kvlab-runinfo" in page and "设备" in page  # when, where and on what it ran
        assert "application/vnd.jupyter.widget-state+json" not in page  # static forms instead of widget state
    print(f"site {report.size_bytes / 2**20:.1f} MiB, build {report.seconds:.0f} s (chapters {report.run_seconds:.0f} s)")
    assert report.size_bytes <= SITE_LIMIT


def test_plotly_js_and_mathjax_are_shipped_once_and_nothing_points_outside(book):
    out = book[0].out
    copies = [p for p in out.rglob("*") if p.is_file() and p.stat().st_size > 1_000_000
              and b"plotly.js v" in p.read_bytes()[:4000]]
    assert [p.relative_to(out).as_posix() for p in copies] == ["_static/plotly.min.js"]
    for page in out.glob("*.html"):
        text = page.read_text(encoding="utf-8")
        sources = re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="([^"]+)"', text)
        assert not [s for s in sources if re.match(r"[a-z]+:", s) and not s.startswith("data:")], page.name


def test_every_exercise_and_quiz_says_run_it_live_with_no_solution_on_the_page(book):
    from kvlab.exercises.solutions import SOLUTIONS

    out = book[0].out
    for stem in (ch.stem for ch in book[0].chapters):
        page = (out / f"{stem}.html").read_text(encoding="utf-8")
        checks = page.count("kvlab-run-to-check")
        assert checks >= 1 and page.count(site.SOLUTION_WITHHELD) == checks
        assert "kvlab-exercise-solution" not in page  # a default build: no reference solution (issue 31, part 5)
        assert "kvlab-exercise-todo" not in page  # no 「还没有完成」 feedback from the run
    text = site_text(out)
    for solution in SOLUTIONS.values():
        assert html.escape(solution.strip().splitlines()[-1].strip()) not in text
    quiz_pages = [p for p in out.glob("*.html") if "kvlab-static-quiz" in p.read_text(encoding="utf-8")]
    assert quiz_pages and "显示答案" in quiz_pages[0].read_text(encoding="utf-8")


def test_executed_chapters_are_small_with_their_widget_state_kept(book):
    for ch in book[0].chapters:
        nb = nbformat.from_dict(json.loads(json.dumps(ch.executed)))
        for cell in nb.cells:  # as a plain run leaves it: without the static forms the build adds
            for o in cell.get("outputs", []):
                o.get("data", {}).pop(STATIC_MIME, None)
        state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
        assert any(m["model_name"] == "AnyModel" for m in state.values())  # the figures' state is saved
        size = len(nbformat.writes(nb).encode())
        print(f"{ch.stem}: executed with widget state {size / 2**20:.2f} MiB")
        assert size <= NOTEBOOK_LIMIT


def test_handouts_pdf_pages_and_slide_figures(book):
    report, root = book
    if shutil.which("pdftoppm") is None:
        unavailable("pdftoppm (poppler-utils) is not installed")
    out = report.out
    for ch in report.chapters:
        figures = sorted((out / "figures").glob(f"{ch.stem}-*.png"))
        assert 2 <= len(figures) <= 4 and all(p.with_suffix(".svg").exists() for p in figures), ch.stem
        pdf = report.pdfs[ch.stem]
        info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
        pages = int(re.search(r"Pages:\s+(\d+)", info).group(1))
        assert 2 <= pages <= 40, (ch.stem, pages)
        # Chromium draws Chinese with a system CJK font (its glyphs embedded without names, so check the font is
        # there and the text comes back out of the PDF as text); the figures' glyphs are checked by mpl.save
        assert subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True).stdout.strip()
        text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
        assert ch.title.split()[-1][:4] in text and "\ufffd" not in text  # the Chinese text is there as text
        prefix = root / f"pages-{ch.stem}"
        subprocess.run(["pdftoppm", "-png", "-r", "60", "-f", "1", "-l", "2", str(pdf), str(prefix)], check=True)
        assert len(list(root.glob(f"pages-{ch.stem}*.png"))) == 2
    shutil.copy(sorted(root.glob("pages-02_*.png"))[0], shots_dir() / "handout_page.png")
    shutil.copy(sorted((out / "figures").glob("03_*-1.png"))[0], shots_dir() / "slide_figure.png")


# -- a reader in a real browser, offline ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def chromium():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed")
    with sync_playwright() as p:
        try:
            browser = launch_chromium(p)
        except Exception as exc:
            unavailable(f"Chromium does not start: {exc}")
        yield browser
        browser.close()


DESKTOP = {"width": 1300, "height": 1000}
PHONE = {"width": 390, "height": 844}  # a phone in portrait


def open_offline(browser, path: Path, viewport: dict = DESKTOP, scale: float = 1):
    page = browser.new_page(viewport=viewport, device_scale_factor=scale)
    problems = []
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    page.on("requestfailed", lambda req: problems.append(f"failed: {req.url}"))

    def route(r):
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            problems.append(f"outside the site: {r.request.url}")
            r.abort()

    page.route("**/*", route)
    page.goto(path.as_uri())
    page.wait_for_function("window.kvlabFiguresDrawn === true && window.kvlabMathDone === true"
                           " && window.kvlabMathFitted === true", timeout=90_000)
    return page, problems


SHOWN = """(id) => { const el = document.getElementById(id);
  const norm = (h) => { const d = document.createElement('div'); d.innerHTML = h; return d.innerHTML; };
  return {busy: !!el.dataset.busy, stale: el.classList.contains('kvlab-stale'),
          readout: el.querySelector('.kvlab-static-readout').innerHTML, norm,
          figures: Array.from(el.querySelectorAll('.kvlab-plot')).map((d) => d.kvlabFigure)}; }"""


def move(page, pid: str, name: str, index: int) -> None:
    page.eval_on_selector(f"#{pid} [data-control='{name}']",
                          "(e, i) => { e.value = String(i); e.dispatchEvent(new Event('input')); }", index)
    page.wait_for_function(f"() => !document.getElementById('{pid}').dataset.busy", timeout=30_000)


def test_the_table_of_contents_opens_offline_and_links_every_page(book, chromium):
    report, _ = book
    page = chromium.new_page()
    blocked = []
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else (blocked.append(r.request.url), r.abort()))
    page.goto((report.out / "index.html").as_uri())
    links = page.eval_on_selector_all("a[href]", "(els) => els.map((a) => a.getAttribute('href'))")
    page.close()
    assert blocked == []
    assert [ch.page for ch in report.chapters] == [h for h in links if h.endswith(".html")]
    assert all((report.out / h).exists() for h in links)


def test_every_page_offline_draws_every_figure_renders_math_and_precomputed_sliders_match_the_live_render(book, chromium,
                                                                                                          course_run):
    report, _ = book
    seen, maths = set(), 0
    for ch in report.chapters:
        page, problems = open_offline(chromium, report.out / ch.page)
        drawn = page.evaluate("""() => Array.from(document.querySelectorAll('.kvlab-plot, .kvlab-figure-static'))
            .map((el) => !!el.querySelector('.main-svg'))""")
        assert drawn and all(drawn), f"{ch.page}: {drawn.count(False)} figures not drawn"
        raw = page.evaluate(r"""() => (document.querySelector('main').innerText.match(/\$[^$\n]{1,80}\$/g) || [])""")
        assert raw == [], f"{ch.page}: TeX left unrendered: {raw[:3]}"
        maths += page.evaluate("() => document.querySelectorAll('math').length")
        for pkl in sorted(course_run.replay.glob(f"kvlab-{ch.stem}-*.pkl")):
            check_panel(page, pkl, seen)
        assert problems == [], f"{ch.page}: {problems}"
        page.close()
    assert maths > 0  # the chapters' formulas, typeset
    missing = {cls: names - {n for c, n in seen if c == cls} for cls, names in REQUIRED_STATIC.items()}
    assert not any(missing.values()), f"precomputed sliders missing on the pages: {missing}"


def check_panel(page, pkl: Path, seen: set) -> None:
    """Move each precomputed control of one panel to its first, middle and last value; the page must then show
    exactly what the panel's own render function (unpickled, called here) gives for that value."""
    replay = pickle.loads(pkl.read_bytes())
    pid = pkl.stem
    spec = page.evaluate("(id) => document.getElementById(id).kvlabSpec", pid)
    classes = spec["css_class"].split()
    css = next((c for c in classes if c in REQUIRED_STATIC), classes[0])
    for control in (c for c in spec["controls"] if "states" in c):
        n = len(control["values"])
        for index in sorted({0, n // 2, n - 1} - {control["default"]}):
            move(page, pid, control["name"], index)
            shown = page.evaluate(SHOWN, pid)
            try:
                view = replay["render"](**{**replay["defaults"], control["name"]: control["values"][index]})
            except ValueError:
                assert shown["stale"], f"{pid}: {control['name']} = {control['values'][index]} should show an error"
                continue
            assert not shown["stale"]
            assert shown["figures"] == [figure_json(f) for f in view.figures], \
                f"{pid}: {control['name']} = {control['values'][index]}: the page's figure differs from the live render"
            assert shown["readout"] == page.evaluate(
                "(h) => { const d = document.createElement('div'); d.innerHTML = h; return d.innerHTML; }", view.html)
        seen.add((css, control["name"]))
        if css == "kvlab-shape" and control["name"] == "filled_pct":
            page.locator(f"#{pid}").screenshot(path=str(shots_dir() / "static_slider_moved.png"))
        move(page, pid, control["name"], control["default"])  # back, so the next control starts from the defaults


# -- on a phone: nothing wider than the page, every figure fitted to it -------------------------------------------------
# What sticks out past the screen's left or right edge, unless it is inside a box that scrolls sideways by itself
# (code, printed output, a wide table or formula) and that box is on the screen.
OFF_THE_PAGE = """() => {
  const width = window.innerWidth, out = [];
  const onScreen = (r) => r.left >= -0.5 && r.right <= width + 0.5;
  const scroller = (el) => { for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
    const x = getComputedStyle(p).overflowX; if (x === 'auto' || x === 'scroll') return p; } return null; };
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('#js-plotly-tester')) continue;  // (plotly's own measuring box, placed off the page on purpose)
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height || getComputedStyle(el).visibility === 'hidden' || onScreen(r)) continue;
    const box = scroller(el);
    if (box && onScreen(box.getBoundingClientRect())) continue;
    const name = el.tagName.toLowerCase() + '.' + String(el.className.baseVal ?? el.className).trim().split(/\\s+/)[0];
    out.push(`${name} spans ${Math.round(r.left)}..${Math.round(r.right)} px: ${(el.textContent || '').slice(0, 40)}`);
  }
  return {scrollWidth: document.documentElement.scrollWidth, width, out};
}"""
# Each figure: drawn, not scrolling sideways, its title, axis titles, subplot titles, labels and legend entries
# inside the figure and on the screen, and no two of its titles and labels on top of each other.
FIGURE_TEXT = r"""() => {
  const width = window.innerWidth, out = [];
  document.querySelectorAll('.kvlab-plot, .kvlab-figure-static').forEach((box, i) => {
    const svg = box.querySelector('.main-svg');
    if (!svg) { out.push(`figure ${i + 1}: not drawn`); return; }
    const s = svg.getBoundingClientRect();
    if (box.scrollWidth > box.clientWidth + 1) out.push(`figure ${i + 1}: scrolls sideways`);
    const texts = Array.from(box.querySelectorAll('text'))
      .filter((t) => /^(g|[xy]\d*)title$/.test(t.getAttribute('class') || ''))
      .concat(Array.from(box.querySelectorAll('.annotation-text, .legendtext')));
    const seen = [];
    texts.forEach((t) => {
      const r = t.getBoundingClientRect();
      if (!r.width) return;
      const what = `figure ${i + 1}: ${t.getAttribute('class')} 「${t.textContent}」`;
      if (r.left < Math.max(0, s.left) - 1 || r.right > Math.min(width, s.right) + 1 || r.top < s.top - 1
          || r.bottom > s.bottom + 1) {
        out.push(`${what} at x ${Math.round(r.left)}..${Math.round(r.right)}, y ${Math.round(r.top - s.top)}..` +
                 `${Math.round(r.bottom - s.top)} is cut off (the figure: x ..${Math.round(s.right)}, y 0..${Math.round(s.height)})`);
      }
      if (t.classList.contains('legendtext')) return;
      seen.forEach(([other, q]) => {
        const w = Math.min(r.right, q.right) - Math.max(r.left, q.left), h = Math.min(r.bottom, q.bottom) - Math.max(r.top, q.top);
        if (w > 2 && h > 2) out.push(`${what} overlaps ${other}`);
      });
      seen.push([`${t.getAttribute('class')} 「${t.textContent}」`, r]);
    });
  });
  return out;
}"""
# Per figure: plotly's drawn width, its box's width, and whether its subplots are where the figure put them.
FITTED = r"""() => Array.from(document.querySelectorAll('.kvlab-plot, .kvlab-figure-static')).map((box) => {
  const area = box.querySelector('.kvlab-plot-area');
  const domains = (l) => Object.keys(l).filter((k) => /^xaxis\d*$/.test(k)).sort()
    .map((k) => String((l[k] || {}).domain || [0, 1])).join(' ');
  return {drawn: area._fullLayout.width, box: area.clientWidth,
          asDesigned: domains(area.layout) === domains(box.kvlabFigure.layout)};
})"""


def check_fits(page, where: str) -> list:
    """Nothing wider than the page, every figure fitted (see OFF_THE_PAGE, FIGURE_TEXT); the figures' FITTED."""
    page_width = page.evaluate(OFF_THE_PAGE)
    assert page_width["scrollWidth"] <= page_width["width"], f"{where}: the page scrolls sideways: {page_width}"
    assert page_width["out"] == [], f"{where}: wider than the page: {page_width['out'][:5]}"
    assert page.evaluate(FIGURE_TEXT) == [], f"{where}: {page.evaluate(FIGURE_TEXT)[:5]}"
    fitted = page.evaluate(FITTED)
    assert all(abs(f["drawn"] - f["box"]) < 1 for f in fitted), f"{where}: a figure is not as wide as its box: {fitted}"
    return fitted


def figures_of(spec: dict, state: dict) -> list:
    return [{"data": [spec["pool"][i] for i in f["data"]], "layout": spec["pool"][f["layout"]]}
            for f in state["figures"]]


def test_on_a_phone_nothing_is_wider_than_the_page_and_figures_fit_then_side_by_side_again_on_a_wide_screen(
        book, chromium):
    """Issue 30 (2b): 3.1 and 3.6 at 390 px. Figures take the screen's width (their side-by-side subplots one above
    the other, titles wrapped), code and wide tables scroll in their own box; a precomputed slider still shows its
    states; turned to a wide screen, the figures go back to their design. Screenshots: phone_*.png, desktop_*.png."""
    report, _ = book
    for prefix in ("01_", "06_"):  # 3.1, 3.6
        ch = next(c for c in report.chapters if c.stem.startswith(prefix))
        page, problems = open_offline(chromium, report.out / ch.page, PHONE, scale=2)
        fitted = check_fits(page, f"{ch.page} at 390 px")
        assert any(not f["asDesigned"] for f in fitted), f"{ch.page}: no figure's subplots were put one above the other"
        page.screenshot(path=str(shots_dir() / f"phone_{ch.stem}_top.png"))
        boxes = page.locator(".kvlab-plot, .kvlab-figure-static")
        for n in range(min(2, boxes.count())):
            boxes.nth(n).screenshot(path=str(shots_dir() / f"phone_{ch.stem}_figure{n + 1}.png"))
        page.locator(".jp-InputArea-editor").nth(1).scroll_into_view_if_needed()
        page.screenshot(path=str(shots_dir() / f"phone_{ch.stem}_code.png"))
        # a precomputed slider moved on the phone: the page shows that state, and it fits
        pid = page.evaluate("() => Array.from(document.querySelectorAll('.kvlab-static-panel'))"
                            ".find((el) => el.kvlabSpec.controls.some((c) => c.states)).id")
        spec = page.evaluate("(id) => document.getElementById(id).kvlabSpec", pid)
        control = next(c for c in spec["controls"] if "states" in c)
        last = len(control["states"]) - 1
        move(page, pid, control["name"], last)
        shown = page.evaluate(SHOWN, pid)
        if "error" not in control["states"][last]:
            assert shown["figures"] == figures_of(spec, control["states"][last]), f"{pid}: not the state moved to"
        check_fits(page, f"{ch.page} at 390 px, {control['name']} moved to its last value")
        move(page, pid, control["name"], control["default"])
        # turned into a wide screen: every figure as designed, as wide as its box
        page.set_viewport_size(DESKTOP)
        page.wait_for_function(f"() => ({FITTED})().every((f) => f.asDesigned && Math.abs(f.drawn - f.box) < 1)",
                               timeout=30_000)
        check_fits(page, f"{ch.page} widened to 1300 px")
        page.close()
        assert problems == [], f"{ch.page}: {problems}"
    page, problems = open_offline(chromium, report.out / ch.page)  # 3.6 opened on a wide screen
    fitted = check_fits(page, f"{ch.page} at 1300 px")
    assert all(f["asDesigned"] for f in fitted) and problems == []
    page.locator(".kvlab-plot, .kvlab-figure-static").nth(0).scroll_into_view_if_needed()
    page.screenshot(path=str(shots_dir() / f"desktop_{ch.stem}.png"))
    page.close()


def test_run_info_gives_the_cores_this_process_may_use_not_the_machines(monkeypatch):
    """Issue 30 (3): the site's header prints kvlab.resources.cpu_budget() (a hub pod's quota), not os.cpu_count()."""
    from kvlab.resources import Limit

    monkeypatch.setattr(site, "cpu_budget", lambda: Limit(1, "cgroup CPU 配额"))
    monkeypatch.setattr(site.os, "cpu_count", lambda: 64)
    info = site.RunInfo.here()
    assert "可用 1 核（cgroup CPU 配额）" in info.machine and "64 核" not in info.machine
    assert "可用 1 核（cgroup CPU 配额）" in info.html()
