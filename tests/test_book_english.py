"""The English static edition (issue 34, items 4 and 5): ``python -m kvlab.book --lang en`` builds the English
chapters (``chapters/en/``) into a site whose own words (table of contents, notes, run information, exercise and
handout labels) come from :data:`kvlab.book.phrases.BOOK` in English, and no Chinese character is anywhere in it.

Quick: the command line (an unknown ``--lang`` is a usage error naming zh and en), the English chrome around the
English chapters as they are (not run) and around a panel and an exercise, the Chinese chrome as it was. Slow: the
English site built from the session's one run of the course (tests/course_run.py: ``executed/en/``), a page per
English chapter, no Chinese in its pages, scripts, slide figures or handouts, and, in a real browser offline, every
figure drawn and every precomputed slider showing what the panel's own render function gives in English."""
from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from kvlab.book import build, site
from kvlab.book.phrases import BOOK
from kvlab.book.site import chapter_notebooks
from kvlab.language import using_language
from browser_support import CHAPTER_DIR
from test_book import check_panel, chromium, move, open_offline, shots_dir  # noqa: F401  (chromium: the fixture)

CHINESE = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")  # CJK characters and full-width punctuation
ENGLISH_DIR = CHAPTER_DIR / "en"
# Shipped as their authors wrote them, not the site's text: plotly.js names the Chinese calendar's months, and
# MathJax's speech maps name currency signs.
THIRD_PARTY = ("_static/plotly.min.js", "_static/mathjax/")
TEXT_FILES = (".html", ".js", ".css", ".svg", ".json")


QUOTED = "celltag_quotes-original"  # the class nbconvert gives a cell tagged quotes-original: the original chapter's
# code quoted as it is (Chinese comments and output), the same cell in both editions, shown on purpose


class _QuotedCells(HTMLParser):
    """The (line, column) spans of every element of class ``QUOTED`` in a page, to blank before looking for Chinese."""

    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.spans, self._depth, self._start = [], 0, None

    def handle_starttag(self, tag, attrs):
        if tag != "div":
            return
        if self._depth:
            self._depth += 1
        elif QUOTED in (dict(attrs).get("class") or "").split():
            self._depth, self._start = 1, self.getpos()

    def handle_endtag(self, tag):
        if tag == "div" and self._depth:
            self._depth -= 1
            if not self._depth:
                self.spans.append((self._start, self.getpos()))


def without_quoted_cells(text: str) -> str:
    """``text`` with every quoted-original cell's characters blanked (its line breaks kept)."""
    parser = _QuotedCells()
    parser.feed(text)
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    chars = list(text)
    for (l0, c0), (l1, c1) in parser.spans:
        for i in range(starts[l0 - 1] + c0, starts[l1 - 1] + c1):
            if chars[i] != "\n":
                chars[i] = " "
    return "".join(chars)


def test_a_quoted_original_cell_is_blanked_and_nothing_else():
    page = ('<div class="jp-Cell">中</div>\n<div class="jp-Cell celltag_quotes-original"><div>原文\n代码</div></div>'
            '<p>文</p>')
    blanked = without_quoted_cells(page)
    assert CHINESE.findall(blanked) == ["中", "文"] and blanked.count("\n") == 2 and len(blanked) == len(page)


def chinese_in(out: Path) -> list[str]:
    """Every line of the site's own text files (pages, book.js, styles, slide figures) holding a Chinese character,
    apart from the quoted original cells of a page."""
    found = []
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out).as_posix()
        if not path.is_file() or path.suffix not in TEXT_FILES or rel.startswith(THIRD_PARTY):
            continue
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".html":
            text = without_quoted_cells(text)
        for n, line in enumerate(text.splitlines(), 1):
            for m in CHINESE.finditer(line):
                found.append(f"{rel}:{n}: …{line[max(0, m.start() - 60):m.end() + 60]}…")
                break
    return found


def quoted_original_lines(notebooks) -> set[str]:
    """The lines a handout may print from the executed quoted original cells (their output; the code is left out)."""
    lines = set()
    for nb in notebooks:
        for cell in nb.cells:
            if "quotes-original" in cell.metadata.get("tags", []):
                for o in cell.get("outputs", []):
                    lines |= {line.strip() for line in o.get("text", "").splitlines() if line.strip()}
    return lines


def run_book(capsys, *argv) -> tuple[int, str]:
    """``python -m kvlab.book ARGV`` in this process: its exit code and what it wrote to stderr."""
    from kvlab.book.__main__ import main

    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


@pytest.fixture
def fake_run(monkeypatch):
    """Chapters 'run' without a kernel (the notebook as it is), so a build takes seconds; the names run."""
    runs = []

    def run(path, replay, log=print):
        runs.append(path.name)
        return nbformat.read(path, as_version=4)

    monkeypatch.setattr(site, "run_with_one_retry", run)
    return runs


# -- quick: the command line and the chrome ---------------------------------------------------------------------------
@pytest.mark.parametrize("code", ["fr", "EN", ""])
def test_an_unknown_language_is_a_usage_error_naming_zh_and_en(tmp_path, fake_run, capsys, code):
    status, err = run_book(capsys, "--lang", code, "--out", tmp_path / "book", "--no-handouts")
    assert status == 2 and err.count("error:") == 1 and "Traceback" not in err, err
    assert "--lang" in err and "'zh'" in err and "'en'" in err, err
    assert fake_run == [] and not (tmp_path / "book").exists()


def test_lang_en_builds_the_english_chapters_with_the_site_in_english(tmp_path, fake_run, capsys):
    out = tmp_path / "book"
    status, err = run_book(capsys, "--lang", "en", "--out", out, "--no-handouts")
    assert status == 0, err
    names = [p.name for p in chapter_notebooks(ENGLISH_DIR)]
    assert fake_run == names and {"01_autoregressive_decode.ipynb", "06_paged_cache_and_batching.ipynb"} <= set(names)
    index = (out / "index.html").read_text(encoding="utf-8")
    assert '<html lang="en">' in index and BOOK.text("contents", "en") in index
    assert "<code>python -m kvlab.launch --lang en</code>" in index
    for name in names:
        page = (out / name.replace(".ipynb", ".html")).read_text(encoding="utf-8")
        assert f'href="index.html">{BOOK.text("contents", "en")}</a>' in page
        assert f"/chapters/en/{name}" in page and BOOK.text("open_in_colab", "en") in page  # the English notebook
        assert "This chapter took" in page
    assert chinese_in(out) == []
    book_js = (out / "_static" / "book.js").read_text(encoding="utf-8")
    assert book_js.isascii() and "kvlabFiguresDrawn" in book_js


def test_the_english_book_js_says_the_same_in_escapes():
    """book.js's line-breaking rules name CJK punctuation; the English site ships them as \\u escapes: the same
    strings once JavaScript (here: JSON, whose escapes are the same) reads them."""
    original = (site.HERE / "static" / "book.js").read_text(encoding="utf-8")
    escaped = site.ascii_escaped(original)
    assert escaped.isascii() and escaped.count("\n") == original.count("\n")
    sets = re.compile(r'new Set\(("[^"]*")\)')
    before, after = sets.findall(original), sets.findall(escaped)
    assert len(before) == 2 and [json.loads(s) for s in after] == [json.loads(s) for s in before]
    assert [a for a, b in zip(original.splitlines(), escaped.splitlines()) if a != b] == \
        [line for line in original.splitlines() if not line.isascii()]
    assert site.ascii_escaped("'\U0001F600'") == "'\\ud83d\\ude00'"  # past U+FFFF: a surrogate pair


def english_chapter(folder: Path) -> Path:
    """A --chapters folder with one English chapter (as kvlab.edition marks one) ending in an exercise's check."""
    folder.mkdir(parents=True, exist_ok=True)
    check = nbformat.v4.new_code_cell("check_largest_batch(largest_batch)",
                                      metadata={"kvlab_exercises": "ch04.largest_batch/check"})
    cells = [nbformat.v4.new_markdown_cell("# 3.9 A small chapter"), check]
    nb = nbformat.v4.new_notebook(cells=cells, metadata={"kvlab_edition": {"language": "en", "from": "01_tiny.ipynb"}})
    nbformat.write(nb, folder / "01_tiny.ipynb")
    return folder


@pytest.mark.parametrize("teacher", [False, True])
def test_an_exercise_and_the_teachers_note_are_in_english(tmp_path, fake_run, teacher):
    chapters = english_chapter(tmp_path / "ch")
    report = build(tmp_path / "book", chapters, handouts=False, teacher=teacher, lang="en", log=lambda *a: None)
    page = (report.out / "01_tiny.html").read_text(encoding="utf-8")
    index = (report.out / "index.html").read_text(encoding="utf-8")
    assert "run this cell to check it" in page and "python -m kvlab.launch --lang en" in page
    assert (BOOK.text("solution_withheld", "en") in page) != teacher
    assert ("Show the reference solution" in page) == teacher and ("Teacher's edition" in index) == teacher
    assert "usable cores" in index and "This chapter took" in page  # the run information, English too
    assert chinese_in(report.out) == []


def test_a_panels_static_form_speaks_the_editions_language():
    spec = {"controls": [{"name": "block_size", "label": "Block size", "text": "16"}], "shown": {"figures": []},
            "css_class": "kvlab-blocks", "id": "kvlab-p1"}
    with using_language("en"):
        english = site.panel_html(json.loads(json.dumps(spec)), "06_paged_cache_and_batching.ipynb")
    chinese = site.panel_html(json.loads(json.dumps(spec)), "06_paged_cache_and_batching.ipynb")
    assert "Block size: 16" in english and BOOK.text("note_default", "en") in english
    assert "/chapters/en/06_paged_cache_and_batching.ipynb" in english and "--lang en" in english
    assert not CHINESE.search(english)
    assert "Block size：16" in chinese and "静态版" in chinese and "/chapters/06_paged_cache_and_batching.ipynb" in chinese
    assert "--lang" not in chinese


# -- slow: the English site built from the session's one run of the course ----------------------------------------------
@pytest.fixture(scope="module")
def english_book(tmp_path_factory, course_run):
    """The English static edition, with handouts, built from the English chapters' executions of the session's run,
    as ``python -m kvlab.book --lang en --from-executed DIR`` does."""
    assert course_run.english, "no English chapter ran (chapters/en/ empty in the clone?)"
    failed = {name: ran.error for name, ran in course_run.english.items() if ran.error is not None}
    assert not failed, "English chapters that did not finish: " + "\n\n".join(f"{k}:\n{v}" for k, v in failed.items())
    root = tmp_path_factory.mktemp("english_book")
    report = build(root / "site", course_run.english_dir, executed=course_run.executed / "en", lang="en")
    return report, root


def test_the_english_site_has_a_page_per_english_chapter(english_book, course_run):
    report, _ = english_book
    out = report.out
    stems = [p.stem for p in chapter_notebooks(course_run.english_dir)]
    assert [ch.stem for ch in report.chapters] == stems
    assert {"01_autoregressive_decode", "06_paged_cache_and_batching"} <= set(stems)  # 3.1 and 3.6 at least
    index = (out / "index.html").read_text(encoding="utf-8")
    assert '<html lang="en">' in index
    for ch in report.chapters:
        page = (out / ch.page).read_text(encoding="utf-8")
        assert f'href="{ch.page}"' in index and '<html lang="en">' in page
        assert ch.title and html.escape(ch.title) in index and not CHINESE.search(ch.title)  # as site.py writes it
        assert "kvlab-runinfo" in page and "device" in page and "This chapter took" in page
        assert "application/vnd.jupyter.widget-state+json" not in page
    assert "kvlab-static-panel" in (out / "06_paged_cache_and_batching.html").read_text(encoding="utf-8")


def test_no_chinese_character_anywhere_in_the_english_site(english_book, course_run):
    report, _ = english_book
    found = chinese_in(report.out)
    assert not found, "\n".join(found[:40])
    if report.pdfs and shutil.which("pdftotext"):
        quoted = quoted_original_lines(ran.notebook() for ran in course_run.english.values())
        for stem, pdf in report.pdfs.items():
            text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
            lines = [line for line in text.splitlines() if CHINESE.search(line) and line.strip() not in quoted]
            assert not lines, f"{stem}.pdf: {lines[:10]}"
            assert "Every number and every figure" in text and "\ufffd" not in text


def test_the_english_pages_open_offline_draw_every_figure_and_their_sliders_match_the_live_render(
        english_book, chromium, course_run):
    report, _ = english_book
    replays = course_run.replay / "en"
    seen: set = set()
    for ch in report.chapters:
        page, problems = open_offline(chromium, report.out / ch.page)
        drawn = page.evaluate("""() => Array.from(document.querySelectorAll('.kvlab-plot, .kvlab-figure-static'))
            .map((el) => !!el.querySelector('.main-svg'))""")
        assert drawn and all(drawn), f"{ch.page}: {drawn.count(False)} figures not drawn"
        with using_language("en"):  # the panels' render functions, called here, speak English as the page does
            for pkl in sorted(replays.glob(f"kvlab-{ch.stem}-*.pkl")):
                check_panel(page, pkl, seen)
        shown = page.evaluate(f"""() => {{ const body = document.body.cloneNode(true);
            body.querySelectorAll('.{QUOTED}').forEach((el) => el.remove()); return body.innerText; }}""")
        assert not CHINESE.search(shown), CHINESE.search(shown)
        page.screenshot(path=str(shots_dir() / f"static_en_{ch.stem}.png"))
        panel = page.locator(".kvlab-static-panel", has=page.locator("input[type=range]")).first
        if panel.count():  # its first slider moved to its end: the panel as a reader sees it (looked at)
            slider = panel.locator("input[type=range]").first
            move(page, panel.get_attribute("id"), slider.get_attribute("data-control"), int(slider.get_attribute("max")))
            assert not CHINESE.search(panel.inner_text())
            panel.screenshot(path=str(shots_dir() / f"static_en_{ch.stem}_slider_moved.png"))
        assert problems == [], f"{ch.page}: {problems}"
        page.close()
    assert seen, "no precomputed slider was moved on the English pages"
