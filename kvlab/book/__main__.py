"""``python -m kvlab.book [--lang zh|en] [--out DIR] [--no-handouts] [--teacher] [--from-executed DIR]``: build the static edition (see :mod:`kvlab.book`)."""
from __future__ import annotations

import argparse
import signal
import sys

from ..cli import usage_error
from ..memory import format_bytes
from . import build


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the build is, so that it cleans up as it does on Ctrl-C."""


def _terminate(signum, frame):
    raise Terminated


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvlab.book", description=__doc__)
    parser.add_argument("--out", default="book", help="folder to write the site into (default: ./book); a new or "
                        "empty folder, or a site kvlab.book built, which is replaced only once the build succeeded")
    parser.add_argument("--lang", default="zh", metavar="zh|en",
                        help="the edition: zh, the Chinese chapters (default), or en, the English edition "
                        "(chapters/en/, and the site's own words in English)")
    parser.add_argument("--chapters", dest="chapters_dir", default=None,
                        help="folder of chapter notebooks (default: the course's, chapters/ or chapters/en/)")
    parser.add_argument("--no-handouts", action="store_true", help="skip the PDF handouts and slide figures")
    parser.add_argument("--teacher", action="store_true", help="a teacher's copy: every exercise's reference solution "
                        "on the pages (folded) and in the handouts; without it the site has none")
    parser.add_argument("--from-executed", dest="executed", default=None, metavar="DIR",
                        help="build from the chapters' executed notebooks in DIR (one per chapter, same file name, "
                        "executed by kvlab.book.site.run_chapter from the chapters as they are now) instead of "
                        "running them")
    args = parser.parse_args(argv)
    from .site import Refused

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        report = build(args.out, args.chapters_dir, handouts=not args.no_handouts, teacher=args.teacher,
                       executed=args.executed, lang=args.lang)
    except Refused as exc:
        usage_error(parser, exc)
    except KeyboardInterrupt as exc:
        print(f"kvlab.book: interrupted; {args.out} is as it was", file=sys.stderr)
        return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)
    finally:
        signal.signal(signal.SIGTERM, previous)
    ran = "the chapters having run in" if args.executed else "of which running the chapters"
    edition = "teacher's edition (with the exercises' solutions), " if args.teacher else ""
    print(f"kvlab.book: {edition}{len(report.chapters)} chapters, {len(report.pdfs)} handouts, "
          f"{format_bytes(report.size_bytes)} in {report.out}/ ({report.seconds:.0f} s, {ran} "
          f"{report.run_seconds:.0f} s); open {report.out}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
