"""Open the course in JupyterLab: ``python -m kvlab.launch [more jupyter lab options]``.

Opens the first chapter with JupyterLab's defaults (bound to 127.0.0.1, a login token in the
printed address) and adds ``--allow-root`` only when running as root: in containers and on many
cloud machines learners are root, and a plain ``jupyter lab`` stops there with "Running as root is
not recommended". ``jupyter lab chapters/`` works as before for everyone else.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parent.parent
FIRST_CHAPTER = "chapters/01_autoregressive_decode.ipynb"


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def lab_command(extra=(), root: bool | None = None, course_root: Path = COURSE_ROOT) -> list[str]:
    """The ``jupyter lab`` command line that opens the first chapter."""
    root = running_as_root() if root is None else root
    cmd = [sys.executable, "-m", "jupyter", "lab", FIRST_CHAPTER, f"--ServerApp.root_dir={course_root}",
           "--ServerApp.ip=127.0.0.1"]
    if root and "--allow-root" not in extra:
        cmd.append("--allow-root")
    return cmd + list(extra)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not (COURSE_ROOT / FIRST_CHAPTER).exists():
        print(f"kvlab.launch: the chapters are not next to this kvlab ({COURSE_ROOT}); run it from a clone of "
              "the course repository (pip install -e .), or open the notebooks with `jupyter lab` yourself.",
              file=sys.stderr)
        return 2
    try:
        return subprocess.call(lab_command(argv), cwd=COURSE_ROOT)
    except KeyboardInterrupt:  # Ctrl-C stops the server: no traceback
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
