"""The course without a kernel: ``python -m kvlab.book --out DIR`` builds a static website of the executed course and
printable handouts.

- :mod:`kvlab.book.capture` (kernel side): a panel's or quiz's static form, its precomputed states rendered by the
  panel's own render function;
- :mod:`kvlab.book.site`: runs every chapter in ``chapters/`` and writes one page per chapter (nbconvert, template
  in ``templates/kvlab``), the table of contents and the shared files (plotly.js, MathJax, CSS, ``static/book.js``),
  into a folder it checked first, built beside ``--out`` and swapped in only when the build succeeded;
- :mod:`kvlab.book.mpl`: the course's plotly figures drawn with matplotlib (print, slides);
- :mod:`kvlab.book.handouts`: key figures as PNG/SVG and a PDF per chapter (Chromium prints the page).
- :mod:`kvlab.book.phrases`: the site's own words in Chinese and English.

Exercise solutions are in neither unless built with ``teacher=True`` (``--teacher``): a teacher's copy.

``lang="en"`` (``--lang en``) builds the English edition: the chapters of ``chapters/en/`` (unless ``chapters_dir``
is given), every word of the site's own (table of contents, notes, run information, handout labels) from
:data:`kvlab.book.phrases.BOOK` in English; the default, ``zh``, is the Chinese edition.

``executed=DIR`` (``--from-executed DIR``) builds from saved executions instead of running the chapters (the test
suite runs the course once and builds from that run): see :func:`kvlab.book.site.executed_in`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class BuildReport:
    out: Path
    chapters: list
    pdfs: dict
    seconds: float
    run_seconds: float

    @property
    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.out.rglob("*") if p.is_file())


def build(out, chapters_dir=None, handouts: bool = True, replay=None, log=print, teacher: bool = False,
          executed=None, lang: str = "zh") -> BuildReport:
    """Run the chapters, or take their saved executions from the folder ``executed``, and write the site (and the
    handouts) into ``out``; the exercises' reference solutions only with ``teacher``. ``lang``: the edition, ``"zh"``
    (``chapters/``) or ``"en"`` (``chapters/en/``, and the site's own words in English).

    ``chapters_dir``, ``executed`` and ``out`` are checked before any chapter runs or anything is written
    (:class:`kvlab.book.site.Refused`); the site is built beside ``out`` and replaces it only when the build
    succeeded (:func:`kvlab.book.site.staged`). ``replay`` (tests) needs the chapters to run here.
    """
    from ..language import check_language, using_language
    from . import site

    try:
        check_language(lang)
    except ValueError as exc:
        raise site.Refused(f"lang: {exc}") from None
    if chapters_dir is None:
        chapters_dir = site.chapters_default(lang)
    with using_language(lang):
        return _build(out, chapters_dir, handouts, replay, log, teacher, executed)


def _build(out, chapters_dir, handouts, replay, log, teacher, executed) -> BuildReport:
    """:func:`build` in the language kvlab writes in now."""
    from . import site
    from .handouts import write_handouts

    if executed is not None and replay is not None:
        raise ValueError("replay: the render functions are kept while the chapters run; with executed=, pass "
                         "replay to kvlab.book.site.run_chapter when executing them")
    start = time.perf_counter()
    paths = site.chapters_in(chapters_dir)
    saved = site.executed_in(executed, paths) if executed is not None else None
    target = site.check_out(out)
    info = site.executed_info(saved) if saved else site.RunInfo.here()
    with site.staged(target) as tmp:
        chapters = site.build_site(tmp, chapters_dir, replay=replay, log=log, executed=saved)
        static_nbs = site.static_notebooks(chapters, teacher)
        pdfs = write_handouts(tmp, chapters, static_nbs, info.html(), log, teacher) if handouts else {}
        site.write_pages(tmp, chapters, static_nbs, info, pdfs, teacher)
    pdfs = {stem: target / path.relative_to(tmp) for stem, path in pdfs.items()}
    run_seconds = sum(ch.seconds for ch in chapters)
    return BuildReport(Path(out), chapters, pdfs, time.perf_counter() - start, run_seconds)
