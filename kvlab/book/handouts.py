"""Printable handouts: one PDF per chapter (its prose, printed results, tables and 2-4 key figures), and those
figures as PNG and SVG for slides.

The figures are the chapter's own plotly figures as the run left them (a panel's default state, or a figure cell),
drawn by :mod:`kvlab.book.mpl`: the first ``KEY_FIGURES`` that it can draw, one per output. The PDF is the same
chapter page without code, panels or widgets, printed by headless Chromium (the one the browser tests use), which
typesets the text (Chinese or English: the labels come from :data:`kvlab.book.phrases.BOOK`) and the MathJax formulas; ``pdftoppm`` can turn it into pages to look at. Exercises need a
kernel, so a handout keeps their tasks only; a teacher's build (``teacher=True``) prints each reference solution
under its task.
"""
from __future__ import annotations

import copy
import html
import os
from pathlib import Path

import nbformat

from ..exercises.solutions import SOLUTIONS
from . import mpl
from .phrases import BOOK
from .site import MATHJAX_CONFIG, export_page

KEY_FIGURES = 4
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def first_figure(kind: str, spec: dict) -> dict:
    """The plotly JSON of an output's (first) figure: a figure cell's, or a panel's first figure on screen."""
    if kind == "figure":
        return spec
    pool, fig = spec["pool"], spec["shown"]["figures"][0]
    return {"data": [pool[i] for i in fig["data"]], "layout": pool[fig["layout"]]}


def key_figures(chapter, out: Path, log=print) -> dict[int, str]:
    """Draw the chapter's key figures into ``out/figures``; {output number: figure stem} of those drawn."""
    folder = out / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    drawn: dict[int, str] = {}
    for n, (kind, spec) in enumerate(chapter.figures):
        if len(drawn) == KEY_FIGURES:
            break
        if kind == "panel" and not spec["shown"]["figures"]:
            continue
        stem = f"{chapter.stem}-{len(drawn) + 1}"
        try:
            mpl.save(first_figure(kind, spec), folder / stem)
        except mpl.Unsupported as exc:
            log(f"kvlab.book: {chapter.stem} figure {n + 1} left out of the handout ({exc})")
            continue
        except Exception as exc:  # a renderer bug: said, and the next figure tried (the tests count the figures)
            log(f"kvlab.book: {chapter.stem} figure {n + 1} could not be drawn with matplotlib: {exc!r}")
            continue
        drawn[n] = stem
    return drawn


def solution_output(key: str):
    """An exercise's reference solution, open, for a teacher's handout (print has no folds)."""
    return nbformat.v4.new_output("display_data", data={"text/html": '<div class="kvlab-exercise-solution">'
                                  f'<b>{BOOK.say("handout_solution")}</b><pre>{html.escape(SOLUTIONS[key])}</pre>'
                                  '</div>'})


def print_notebook(static_nb, drawn: dict[int, str], teacher: bool = False):
    """The chapter for print: no code, the key figures (as SVG) where they were, no other figure or panel; with
    ``teacher``, each exercise's reference solution under its task."""
    nb = copy.deepcopy(static_nb)
    n = -1
    cells = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            tag = cell.metadata.get("kvlab_exercises", "")
            key = tag.rsplit("/", 1)[0]
            if teacher and tag.endswith("/check") and key in SOLUTIONS:
                cell.outputs, cell.source = [solution_output(key)], ""
                cells.append(cell)
                continue
            if tag:
                continue  # exercises need a kernel: the task stays (markdown), the stub and check go
            kept = []
            for o in cell.outputs:
                text = "".join(o.get("data", {}).get("text/html", "")) if "data" in o else ""
                is_figure = "kvlab-static-panel" in text or "kvlab-figure-static" in text
                if is_figure:
                    n += 1
                    if n in drawn:
                        kept.append(nbformat.v4.new_output("display_data", data={"text/html":
                                    f'<img class="kvlab-handout-figure" src="figures/{drawn[n]}.svg" alt="">'}))
                elif "kvlab-live" in text or "kvlab-static-quiz" in text:
                    continue
                else:
                    kept.append(o)
            cell.outputs = kept
            cell.source = ""
        cells.append(cell)
    nb.cells = cells
    return nb


PRINT_CSS = """<style>
.kvlab-handout-figure { width: 100%; max-width: 680px; display: block; margin: 6px auto; }
.kvlab-nav { display: none; }
body.kvlab-book { max-width: none; font-size: 11pt; }
@page { size: A4; margin: 14mm 12mm; }
</style>"""


def write_pdf(html_path: Path, pdf_path: Path, browser) -> None:
    page = browser.new_page()
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
    page.goto(html_path.as_uri())
    page.wait_for_function("window.kvlabMathDone === true", timeout=60_000)
    page.pdf(path=str(pdf_path), format="A4", print_background=True,
             margin={"top": "14mm", "bottom": "14mm", "left": "12mm", "right": "12mm"})
    page.close()


def chromium_missing() -> str | None:
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright)"
    if not os.path.exists(CHROMIUM):
        return f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium)"
    return None


def write_handouts(out: Path, chapters, static_nbs: dict, info_html: str, log=print,
                   teacher: bool = False) -> dict[str, Path]:
    """Key figures (PNG, SVG) and a PDF for every chapter; {chapter stem: PDF path}. Exercise solutions only with
    ``teacher``."""
    out = Path(out)
    (out / "handouts").mkdir(parents=True, exist_ok=True)
    prints = {}
    pdfs: dict[str, Path] = {}
    try:
        for ch in chapters:
            drawn = key_figures(ch, out, log)
            page = export_page(print_notebook(static_nbs[ch.stem], drawn, teacher),
                               {"nav": "", "run_info": info_html, "mathjax_config": MATHJAX_CONFIG}, exclude_input=True)
            page = page.replace("</head>", PRINT_CSS + "</head>", 1)
            path = out / f"_print_{ch.stem}.html"  # beside _static/ and figures/, which it links to; removed after
            prints[ch.stem] = path
            path.write_text(page, encoding="utf-8")
        missing = chromium_missing()
        if missing:
            log(f"kvlab.book: {BOOK.say('no_pdfs', why=missing)}")
        else:
            from playwright.sync_api import sync_playwright

            with sync_playwright() as p:
                browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                for stem, path in prints.items():
                    pdfs[stem] = out / "handouts" / f"{stem}.pdf"
                    write_pdf(path, pdfs[stem], browser)
                browser.close()
    finally:  # the print pages go even when printing failed
        for path in prints.values():
            path.unlink(missing_ok=True)
    return pdfs
