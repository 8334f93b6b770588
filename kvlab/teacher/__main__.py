"""``python -m kvlab.teacher [--out DIR] [--readme FILE] [--check] [--measure [--runs N] [--append] [--note TEXT]]``

Writes GUIDE.md and KEYS.md into DIR (default ``teacher/`` in the repository) and the summary for teachers between
the markers of FILE (default the repository's README.md). ``--check`` writes nothing and exits with 1 when a file
differs from what the code gives now. ``--measure`` first runs every chapter ``--runs`` times (default 2) and
records the times in ``kvlab/teacher/run_times.json`` (``--append``: added to the runs recorded there, for the same
notebooks on the same machine); ``--note`` adds a sentence about the machine.
"""
import argparse
import sys
from pathlib import Path

from .guide import CHAPTERS_DIR, ROOT, outputs
from .run_times import RUN_TIMES, Measurement, measure


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvlab.teacher", description=__doc__.split("\n\n")[1])
    parser.add_argument("--out", type=Path, default=ROOT / "teacher")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--measure", action="store_true")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--note", default="")
    parser.add_argument("--append", action="store_true", help="with --measure: add to the recorded runs")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    if args.measure:
        previous = Measurement.load() if args.append and RUN_TIMES.exists() else None
        result = measure(sorted(CHAPTERS_DIR.glob("*.ipynb")), runs=args.runs, note=args.note, previous=previous)
        RUN_TIMES.write_text(result.to_json(), encoding="utf-8")
    stale = []
    for name, text in outputs(readme=args.readme).items():
        path = name if isinstance(name, Path) else args.out / name
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(str(path))
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if args.check:
        print(f"out of date: {', '.join(stale)} (run python -m kvlab.teacher)" if stale else "teacher files up to date")
        return 1 if stale else 0
    print(f"wrote {', '.join(stale)}" if stale else "teacher files up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
