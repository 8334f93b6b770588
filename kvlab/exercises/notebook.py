"""Write the 「动手练习」 section at the end of a chapter's notebook from its exercise module, like
:mod:`kvlab.colab` writes the setup cell.

``python -m kvlab.exercises`` rewrites the section of every notebook in ``chapters/`` that has an exercise
module; ``python -m kvlab.exercises chapters/01_autoregressive_decode.ipynb`` only that one; ``--check`` writes
nothing and exits with 1 when a section is out of date. The section is an intro (markdown and a setup code
cell), then for each exercise its task (markdown), its stub (code) and its check (code). Every generated cell
carries ``metadata.kvlab_exercises`` (``"<key>/<role>"``) and an id starting with ``kvlab-ex-``; a rerun
replaces exactly those cells, where they are, and never touches any other cell. Running it twice changes
nothing the second time.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from ..colab import source_lines
from . import CHAPTER_MODULES, chapter_module

META_KEY = "kvlab_exercises"
SECTION_MARKER = "<!-- kvlab-exercises -->"
TASK_MARKER = "<!-- kvlab-exercise: {key} -->"

INTRO = f"""{SECTION_MARKER}
## 动手练习

每个练习分三格：说明；一格代码，把你的答案写在里面；一格检查。写好之后依次运行这两格，检查格会马上告诉你结果：哪个用例没通过、期望什么、得到了什么；同一个练习第二次没通过时，还会给出提示。实在想不出来，可以点开检查结果里的「显示参考答案」。代码格保持原样时，检查格只会显示「还没有完成」。

先运行下面这一格，载入这一节的练习："""


def _cell(kind: str, source: str, tag: str) -> dict:
    cell_id = "kvlab-ex-" + re.sub(r"[^A-Za-z0-9]+", "-", tag).strip("-")
    cell = {"cell_type": kind, "id": cell_id[:64], "metadata": {META_KEY: tag}, "source": source_lines(source)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def section_cells(module) -> list[dict]:
    """The generated cells of one chapter, in order."""
    chapter = module.__name__.rsplit(".", 1)[-1]
    cells = [_cell("markdown", INTRO, f"{chapter}/intro"), _cell("code", module.SETUP, f"{chapter}/setup")]
    for ex in module.EXERCISES:
        task = f"{TASK_MARKER.format(key=ex.key)}\n### {ex.title}\n\n{ex.task}"
        cells += [_cell("markdown", task, f"{ex.key}/task"), _cell("code", ex.stub, f"{ex.key}/stub"),
                  _cell("code", ex.check, f"{ex.key}/check")]
    return cells


def is_generated(cell: dict) -> bool:
    if META_KEY in cell.get("metadata", {}):
        return True
    text = "".join(cell.get("source", []))
    return cell.get("cell_type") == "markdown" and (SECTION_MARKER in text or "<!-- kvlab-exercise: " in text)


def module_for(path: Path):
    """The exercise module whose ``NOTEBOOK`` is this notebook, or None."""
    for name in CHAPTER_MODULES:
        module = chapter_module(name)
        if module.NOTEBOOK == path.name:
            return module
    return None


def with_section(nb: dict, module) -> dict:
    """``nb`` with its generated cells replaced by a fresh section (where the old one began, else at the end)."""
    cells = nb["cells"]
    first = next((i for i, c in enumerate(cells) if is_generated(c)), None)
    kept = [c for c in cells if not is_generated(c)]
    at = len(kept) if first is None else sum(1 for c in cells[:first] if not is_generated(c))
    return {**nb, "cells": kept[:at] + section_cells(module) + kept[at:]}


def sync_notebook(path: Path, write: bool = True) -> bool:
    """Bring one notebook's exercise section up to date; True if it was out of date (and, with ``write``, rewritten)."""
    path = Path(path)
    module = module_for(path)
    if module is None:
        raise ValueError(f"path: no exercise module in kvlab.exercises names {path.name} as its NOTEBOOK")
    text = path.read_text(encoding="utf-8")
    new = json.dumps(with_section(json.loads(text), module), ensure_ascii=False, indent=1) + "\n"
    if new == text:
        return False
    if write:
        path.write_text(new, encoding="utf-8")
    return True


def section_is_current(path: Path) -> bool:
    return not sync_notebook(path, write=False)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    check_only = "--check" in args
    names = [a for a in args if a != "--check"]
    root = Path(__file__).resolve().parents[2]
    paths = [Path(n) for n in names] or [p for p in sorted((root / "chapters").glob("*.ipynb")) if module_for(p)]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(f"no such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    stale = [p.name for p in paths if sync_notebook(p, write=not check_only)]
    if check_only:
        print("out of date: " + ", ".join(stale) if stale else "all exercise sections up to date")
        return 1 if stale else 0
    print("updated: " + ", ".join(stale) if stale else "all exercise sections up to date")
    return 0
