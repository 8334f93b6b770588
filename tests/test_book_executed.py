"""The static edition built from saved executions (issue 32, item 4): ``python -m kvlab.book --from-executed DIR``
runs no chapter and builds from DIR's notebooks, which :func:`kvlab.book.site.run_chapter` executed and stamped; a
missing, unstamped or stale execution is refused before anything is written. The whole course built so is
tests/test_book.py's ``book`` fixture, from the suite's one run of the course (tests/course_run.py)."""
from __future__ import annotations

import nbformat
import pytest

from kvlab.book import build, site
from test_book import refused_once, run_book, tiny_chapters


@pytest.fixture
def no_run(monkeypatch):
    def run(*args, **kwargs):
        raise AssertionError("a chapter ran")

    monkeypatch.setattr(site, "run_with_one_retry", run)
    monkeypatch.setattr(site, "run_chapter", run)


def stamped(chapters, executed, text="算过了", seconds=12.3):
    """``executed`` holding each chapter of ``chapters`` as run_chapter leaves it, its print showing ``text``."""
    executed.mkdir(parents=True, exist_ok=True)
    info = {"date": "2026-01-02 03:04 UTC", "machine": "某机器", "device": "cpu（某 CPU）", "python": "3.11",
            "torch": "2.13"}
    for path in site.chapter_notebooks(chapters):
        nb = nbformat.read(path, as_version=4)
        code = next(c for c in nb.cells if c.cell_type == "code")
        code.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text + "\n")]
        nb.metadata[site.RUN_META] = {"seconds": seconds, "run_info": info}
        nbformat.write(nb, executed / path.name)
    return executed


def test_a_chapter_run_by_run_chapter_carries_its_stamp_and_builds_without_running_again(tmp_path, monkeypatch,
                                                                                         capsys):
    chapters = tiny_chapters(tmp_path / "ch", "print('跑过一次')")
    nb = site.run_chapter(chapters / "01_tiny.ipynb", timeout=300)
    stamp = nb.metadata[site.RUN_META]
    assert stamp["seconds"] > 0 and set(stamp["run_info"]) == {"date", "machine", "device", "python", "torch"}
    (tmp_path / "ex").mkdir()
    nbformat.write(nb, tmp_path / "ex" / "01_tiny.ipynb")

    def run(*args, **kwargs):
        raise AssertionError("a chapter ran")

    monkeypatch.setattr(site, "run_with_one_retry", run)
    code, _ = run_book(capsys, "--out", tmp_path / "book", "--chapters", chapters, "--no-handouts",
                       "--from-executed", tmp_path / "ex")
    assert code == 0
    page = (tmp_path / "book" / "01_tiny.html").read_text(encoding="utf-8")
    assert "跑过一次" in page and stamp["run_info"]["date"] in page


def test_the_pages_show_the_saved_run_with_its_date_machine_and_seconds(tmp_path, no_run, capsys):
    chapters = tiny_chapters(tmp_path / "ch")
    executed = stamped(chapters, tmp_path / "ex", text="存下的那次运行")
    report = build(tmp_path / "book", chapters, handouts=False, executed=executed, log=lambda *a: None)
    page = (tmp_path / "book" / "01_tiny.html").read_text(encoding="utf-8")
    assert "存下的那次运行" in page and "2026-01-02 03:04 UTC" in page and "某机器" in page and "本章运行 12 秒" in page
    assert report.run_seconds == pytest.approx(12.3) and [ch.title for ch in report.chapters] == ["3.9 小章"]
    assert "（运行 12 秒）" in (tmp_path / "book" / "index.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("problem", ["no folder", "a file", "missing chapter", "unstamped", "edited since",
                                     "cell added since", "not a notebook"])
def test_a_missing_unstamped_or_stale_execution_is_refused_before_anything_is_written(tmp_path, no_run, capsys,
                                                                                       problem):
    chapters = tiny_chapters(tmp_path / "ch")
    executed = stamped(chapters, tmp_path / "ex")
    saved = executed / "01_tiny.ipynb"
    nb = nbformat.read(saved, as_version=4)
    words = ["--from-executed"]
    if problem == "no folder":
        executed = tmp_path / "nowhere"
        words.append("does not exist")
    elif problem == "a file":
        executed = saved
        words.append("not a folder")
    elif problem == "missing chapter":
        saved.rename(executed / "01_other.ipynb")
        words.append("no 01_tiny.ipynb")
    elif problem == "unstamped":
        del nb.metadata[site.RUN_META]
        nbformat.write(nb, saved)
        words.append("run_chapter")
    elif problem == "not a notebook":
        saved.write_text("{ not json")
        words.append("not a notebook")
    else:
        chapter = nbformat.read(chapters / "01_tiny.ipynb", as_version=4)
        if problem == "edited since":
            chapter.cells[1].source = "print('改过了')"
        else:
            chapter.cells.append(nbformat.v4.new_markdown_cell("新的一段"))
        nbformat.write(chapter, chapters / "01_tiny.ipynb")
        words.append("cell 1" if problem == "edited since" else "cell 2")
    refused_once(*run_book(capsys, "--out", tmp_path / "book", "--chapters", chapters, "--no-handouts",
                           "--from-executed", executed), *words)
    assert not (tmp_path / "book").exists()


def test_replay_needs_the_chapters_to_run(tmp_path, no_run):
    chapters = tiny_chapters(tmp_path / "ch")
    with pytest.raises(ValueError, match="replay"):
        build(tmp_path / "book", chapters, handouts=False, executed=stamped(chapters, tmp_path / "ex"),
              replay=tmp_path / "replay")
    assert not (tmp_path / "book").exists()
