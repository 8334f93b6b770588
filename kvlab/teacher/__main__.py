"""``python -m kvlab.teacher [--lang zh|en] [--out DIR] [--readme FILE] [--check] [--measure [--runs N] [--append] [--note TEXT]]``

Writes GUIDE.md and KEYS.md into DIR (default ``teacher/`` in the repository) and the summary for teachers between
the markers of FILE (default the repository's README.md). ``--lang en`` writes GUIDE.en.md and KEYS.en.md instead,
from the English edition (``chapters/en/``), and the English summary between FILE's ``teacher-summary-en`` markers
where FILE has them (a README without them is left alone). ``--check`` writes nothing and exits with 1 when a file
differs from what the code gives now; it does not go with ``--measure``. ``--measure`` first runs every chapter
``--runs`` times (default 2) and records the times in ``kvlab/teacher/run_times.json`` (``--append``: added to the
runs recorded there, for the same notebooks on the same machine); ``--note`` adds a sentence about the machine.
A GUIDE.md or KEYS.md in DIR that this command did not write is never overwritten.
"""
import argparse
import os
import sys
from pathlib import Path

from ..cli import usage_error
from ..language import LANGUAGES
from .guide import CHAPTERS_DIR, OUT_NAMES, ROOT, has_english_summary, outputs, readme_around_summary
from .phrases import GUIDE
from .run_times import RUN_TIMES, Measurement, measure

OUT_FILES = OUT_NAMES["zh"]


def current_text(path: Path) -> str | None:
    """The text of ``path``; None when it is missing, a folder or not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def written_here(path: Path) -> bool:
    """Whether ``path`` is a file this command wrote: its first line is the generated note (of either language)."""
    return any((current_text(path) or "").startswith(GUIDE.text("generated", lang) + "\n") for lang in LANGUAGES)


def english_block(readme: Path) -> bool:
    """Whether ``readme`` can be read and has the block --lang en fills (without one, the README is left alone)."""
    text = current_text(readme)
    return text is not None and has_english_summary(text)


def check_paths(parser: argparse.ArgumentParser, out: Path, readme: Path | None, writing: bool,
                out_files=OUT_FILES, summary: bool = True) -> None:
    """A usage error, before anything runs or is written, for a README that cannot be read or has no summary block
    (``readme`` None: not used), an --out that is a file or lies in one, and (when ``writing``) a file there this
    command did not write."""
    if readme is not None and summary:  # summary False: --lang en, whose block english_block() found
        try:
            readme_around_summary(readme.read_text(encoding="utf-8"))
        except OSError as exc:
            usage_error(parser, f"readme: {readme}: {exc.strerror}")
        except UnicodeDecodeError:
            usage_error(parser, f"readme: {readme} is not UTF-8 text")
        except ValueError as exc:
            usage_error(parser, f"{exc} in {readme}")
    existing = next(p for p in (out.resolve(), *out.resolve().parents) if p.exists())
    if not existing.is_dir():
        usage_error(parser, f"out: {existing} is a file, not a folder")
    if not writing:
        return
    for path in (out / name for name in out_files):
        if path.exists() and not written_here(path):
            usage_error(parser, f"out: {path} was not written by python -m kvlab.teacher; move it away or choose "
                                "another --out")
    if not os.access(existing, os.W_OK):
        usage_error(parser, f"out: {existing} is not writable")
    if readme is not None and not os.access(readme, os.W_OK):
        usage_error(parser, f"readme: {readme} is not writable")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvlab.teacher", description=__doc__.split("\n\n")[1])
    parser.add_argument("--lang", default="zh", metavar="CODE",
                        help=f"the edition to write the guide and keys for: {', '.join(LANGUAGES)} (default zh)")
    parser.add_argument("--out", type=Path, default=ROOT / "teacher", metavar="DIR")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md", metavar="FILE")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when a file is out of date (not with --measure, which writes)")
    parser.add_argument("--measure", action="store_true")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--note", default="")
    parser.add_argument("--append", action="store_true", help="with --measure: add to the recorded runs")
    args = parser.parse_args(argv)
    if args.lang not in LANGUAGES:
        usage_error(parser, f"lang: {args.lang!r} is not a language of the course; use one of "
                            f"{', '.join(LANGUAGES)}")
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    if args.check and args.measure:
        usage_error(parser, "check: writes nothing, and --measure writes kvlab/teacher/run_times.json: measure "
                            "first (without --check), then check")
    readme = args.readme if args.lang == "zh" or english_block(args.readme) else None
    check_paths(parser, args.out, readme, writing=not args.check, out_files=OUT_NAMES[args.lang],
                summary=args.lang == "zh")
    if args.measure:
        previous = Measurement.load() if args.append and RUN_TIMES.exists() else None
        result = measure(sorted(CHAPTERS_DIR.glob("*.ipynb")), runs=args.runs, note=args.note, previous=previous)
        RUN_TIMES.write_text(result.to_json(), encoding="utf-8")
    stale = []
    for name, text in outputs(readme=readme, lang=args.lang).items():
        path = name if isinstance(name, Path) else args.out / name
        if current_text(path) == text:
            continue
        stale.append(str(path))
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if args.check:
        again = "python -m kvlab.teacher" + ("" if args.lang == "zh" else f" --lang {args.lang}")
        print(f"out of date: {', '.join(stale)} (run {again})" if stale else "teacher files up to date")
        return 1 if stale else 0
    print(f"wrote {', '.join(stale)}" if stale else "teacher files up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
