"""``python -m kvlab.book [--out DIR] [--no-handouts]``: build the static edition (see :mod:`kvlab.book`)."""
from __future__ import annotations

import argparse
import sys

from ..memory import format_bytes
from . import build


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvlab.book", description=__doc__)
    parser.add_argument("--out", default="book", help="folder to write the site into (default: ./book)")
    parser.add_argument("--chapters", default=None, help="folder of chapter notebooks (default: the course's)")
    parser.add_argument("--no-handouts", action="store_true", help="skip the PDF handouts and slide figures")
    args = parser.parse_args(argv)
    report = build(args.out, args.chapters, handouts=not args.no_handouts)
    print(f"kvlab.book: {len(report.chapters)} chapters, {len(report.pdfs)} handouts, "
          f"{format_bytes(report.size_bytes)} in {report.out}/ ({report.seconds:.0f} s, of which running the "
          f"chapters {report.run_seconds:.0f} s); open {report.out}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
