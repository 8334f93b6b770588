"""The course without a kernel: ``python -m kvlab.book --out DIR`` builds a static website of the executed course and
printable handouts.

- :mod:`kvlab.book.capture` (kernel side): a panel's or quiz's static form, its precomputed states rendered by the
  panel's own render function;
- :mod:`kvlab.book.site`: runs every chapter in ``chapters/`` and writes one page per chapter (nbconvert, template
  in ``templates/kvlab``), the table of contents and the shared files (plotly.js, MathJax, CSS, ``static/book.js``);
- :mod:`kvlab.book.mpl`: the course's plotly figures drawn with matplotlib (print, slides);
- :mod:`kvlab.book.handouts`: key figures as PNG/SVG and a PDF per chapter (Chromium prints the page).
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


def build(out, chapters_dir=None, handouts: bool = True, replay=None, log=print) -> BuildReport:
    """Run the chapters and write the site (and the handouts) into ``out``."""
    from .handouts import write_handouts
    from .site import RunInfo, build_site, static_notebooks, write_pages

    start = time.perf_counter()
    out = Path(out)
    info = RunInfo.here()
    chapters = build_site(out, chapters_dir, replay=replay, log=log)
    run_seconds = sum(ch.seconds for ch in chapters)
    static_nbs = static_notebooks(chapters)
    pdfs = write_handouts(out, chapters, static_nbs, info.html(), log) if handouts else {}
    write_pages(out, chapters, static_nbs, info, pdfs)
    return BuildReport(out, chapters, pdfs, time.perf_counter() - start, run_seconds)
