"""Write the 「动手练习」 (Exercises) section at the end of a chapter's notebook from its exercise module, like
:mod:`kvlab.colab` writes the setup cell. Its prose is Chinese in ``chapters/`` and English in ``chapters/en/``
(:func:`notebook_language`); :func:`section_cells` writes it in either language.

``python -m kvlab.exercises`` rewrites the section of every notebook in ``chapters/`` that has an exercise
module and checks ``chapters/en/``'s (written by ``python -m kvlab.edition`` with :func:`with_section`); ``python -m kvlab.exercises chapters/01_autoregressive_decode.ipynb`` only that one; ``--check`` writes
nothing and exits with 1 when a section is out of date. The section is an intro (markdown and a setup code
cell), then for each exercise its task (markdown), its stub (code) and its check (code). Every generated cell
carries ``metadata.kvlab_exercises`` (``"<key>/<role>"``), ``metadata.kvlab_exercises_hash`` (the hash of the
source it was written with) and an id starting with ``kvlab-ex-``.

A rerun only rewrites what it wrote: a generated cell whose source still matches its hash (or, written before
hashes, equals what the generator writes now) is brought up to date in its place, and a missing one is written
again next to its neighbours. A cell the learner has edited (an answer in a stub) is the learner's: it is never
flagged, rewritten or removed. Every cell changed, and every edited cell left alone, is printed; nothing is
asked (CI has no stdin). No other cell is touched, no file but a course notebook is written, and running it
twice changes nothing the second time.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Callable

from ..colab import source_lines
from ..language import DEFAULT_LANGUAGE, check_language, get_language
from . import CHAPTER_MODULES, chapter_module
from .phrases import CHECKER, NOTEBOOK

META_KEY = "kvlab_exercises"
HASH_KEY = "kvlab_exercises_hash"
SECTION_MARKER = "<!-- kvlab-exercises -->"
TASK_MARKER = "<!-- kvlab-exercise: {key} -->"


def intro(language: str | None = None) -> str:
    """The section's first cell: its marker, its heading and how the exercises work, in ``language`` (default: the
    course's language now)."""
    lang = check_language(language or get_language())
    text = NOTEBOOK.text("intro", lang).format(not_done=CHECKER.text("not_done", lang),
                                                show_solution=CHECKER.text("show_solution", lang))
    return f"{SECTION_MARKER}\n{text}"


INTRO = intro("zh")  # the Chinese notebooks' intro cell, as it is written into them


def source_hash(source: str) -> str:
    """The hash a generated cell's metadata stores of its source (sha256, the first 16 hex digits)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _cell(kind: str, source: str, tag: str) -> dict:
    cell_id = "kvlab-ex-" + re.sub(r"[^A-Za-z0-9]+", "-", tag).strip("-")
    cell = {"cell_type": kind, "id": cell_id[:64], "metadata": {META_KEY: tag, HASH_KEY: source_hash(source)},
            "source": source_lines(source)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def section_cells(module, language: str | None = None) -> list[dict]:
    """The generated cells of one chapter, in order, their prose in ``language`` (default: the course's language now;
    the code cells are the same in every language). An exercise without text in ``language`` is a MissingPhrase
    naming it."""
    lang = check_language(language or get_language())
    chapter = module.__name__.rsplit(".", 1)[-1]
    cells = [_cell("markdown", intro(lang), f"{chapter}/intro"), _cell("code", module.SETUP, f"{chapter}/setup")]
    for ex in module.EXERCISES:
        words = ex.words(lang)
        task = f"{TASK_MARKER.format(key=ex.key)}\n### {words.title}\n\n{words.task}"
        cells += [_cell("markdown", task, f"{ex.key}/task"), _cell("code", ex.stub, f"{ex.key}/stub"),
                  _cell("code", ex.check, f"{ex.key}/check")]
    return cells


def is_generated(cell: dict) -> bool:
    if META_KEY in cell.get("metadata", {}):
        return True
    text = "".join(cell.get("source", []))
    return cell.get("cell_type") == "markdown" and (SECTION_MARKER in text or "<!-- kvlab-exercise: " in text)


def tag_of(cell: dict, chapter: str) -> str | None:
    """A generated cell's ``"<key>/<role>"`` (read from the markers when its metadata was lost), else None."""
    tag = cell.get("metadata", {}).get(META_KEY)
    if isinstance(tag, str) or not is_generated(cell):
        return tag if isinstance(tag, str) else None
    text = _source(cell)
    key = re.search(r"<!-- kvlab-exercise: (\S+) -->", text)
    return f"{key.group(1)}/task" if key else f"{chapter}/intro" if SECTION_MARKER in text else None


def is_edited(cell: dict, fresh: dict | None) -> bool:
    """Whether the learner changed a generated cell: its source matches neither its stored hash nor (no hash: a cell
    from before hashes) what the generator writes now (``fresh``; None when it writes no such cell any more)."""
    source = _source(cell)
    if fresh is not None and source == _source(fresh):
        return False
    return cell.get("metadata", {}).get(HASH_KEY) != source_hash(source)


def _refreshed(cell: dict, fresh: dict) -> dict:
    """``fresh`` in place of an unedited ``cell``; its other metadata kept, and its outputs if its source stays."""
    new = {**fresh, "metadata": {**cell.get("metadata", {}), **fresh["metadata"]}}
    if _source(cell) == _source(fresh):
        new["source"] = cell.get("source")
        if fresh["cell_type"] == "code" and cell.get("cell_type") == "code":
            new.update(execution_count=cell.get("execution_count"), outputs=cell.get("outputs", []))
    return new


ADDED, REWRITTEN, HASHED, REMOVED, KEPT = "added", "rewritten", "hashed", "removed", "kept"


def section_changes(nb: dict, module, language: str = DEFAULT_LANGUAGE) -> tuple[dict, list[tuple[str, str]]]:
    """``nb`` with its exercise section brought up to date, and what was done, as ``(tag, change)`` pairs (HASHED:
    only the hash added; KEPT: an edited cell left alone). Unedited generated cells are rewritten where they are; a
    missing one goes after the nearest earlier cell of the section (else before the next one, else at the end).
    ``language``: the notebook's (Chinese unless said otherwise, whatever the course's language is now)."""
    chapter = module.__name__.rsplit(".", 1)[-1]
    fresh = {c["metadata"][META_KEY]: c for c in section_cells(module, language)}
    cells, changes = [], []
    for cell in nb["cells"]:
        tag = tag_of(cell, chapter)
        if tag is None:
            cells.append(cell)
        elif is_edited(cell, fresh.get(tag)):
            cells.append(cell)
            changes.append((tag, KEPT))
        elif tag not in fresh:
            changes.append((tag, REMOVED))
        else:
            new = _refreshed(cell, fresh[tag])
            cells.append(new if new != cell else cell)
            if new != cell:
                changes.append((tag, HASHED if new["source"] == cell.get("source") else REWRITTEN))
    order = list(fresh)
    for i, tag in enumerate(order):
        present = [tag_of(c, chapter) for c in cells]
        if tag in present:
            continue
        before = [j for j, t in enumerate(present) if t in order[:i]]
        after = [j for j, t in enumerate(present) if t in order[i + 1:]]
        at = before[-1] + 1 if before else after[0] if after else len(cells)
        cells.insert(at, fresh[tag])
        changes.append((tag, ADDED))
    return {**nb, "cells": cells}, changes


def with_section(nb: dict, module, language: str = DEFAULT_LANGUAGE) -> dict:
    """``nb`` with its exercise section brought up to date (see :func:`section_changes`)."""
    return section_changes(nb, module, language)[0]


def notebook_language(path: Path) -> str:
    """The language a course notebook is written in: English in a folder named ``en`` (``chapters/en/``), else
    Chinese."""
    return "en" if Path(path).resolve().parent.name == "en" else DEFAULT_LANGUAGE


def module_for(path: Path):
    """The exercise module whose ``NOTEBOOK`` is this notebook, or None."""
    for name in CHAPTER_MODULES:
        module = chapter_module(name)
        if module.NOTEBOOK == path.name:
            return module
    return None


def read_notebook(path: Path) -> dict:
    """The notebook at ``path``; ValueError when it is not a Jupyter notebook (nbformat 4), so nothing is written."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: not a Jupyter notebook (not a file)")
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # not UTF-8, not JSON
        raise ValueError(f"{path}: not a Jupyter notebook ({exc})") from None
    if not (isinstance(nb, dict) and nb.get("nbformat") == 4 and isinstance(nb.get("cells"), list)
            and all(isinstance(c, dict) and isinstance(c.get("metadata", {}), dict) for c in nb["cells"])):
        raise ValueError(f"{path}: not a Jupyter notebook (nbformat 4 with a list of cells)")
    return nb


CHANGE_TEXT = {  # (what --check says, what a run says)
    ADDED: ("missing", "written"),
    REWRITTEN: ("out of date", "rewritten"),
    HASHED: ("no hash yet", "hash added"),
    REMOVED: ("no longer generated", "removed"),
    KEPT: ("edited, left as it is", "edited, left as it is"),
}


def sync_notebook(path: Path, write: bool = True, say: Callable[[str], None] | None = None) -> bool:
    """Bring one notebook's exercise section up to date; True if it was out of date (and, with ``write``, rewritten).
    ``say`` gets one line per cell changed (or, without ``write``, to change) and per edited cell left alone."""
    path = Path(path)
    module = module_for(path.resolve())
    if module is None:
        raise ValueError(f"path: no exercise module in kvlab.exercises names {path.name} as its NOTEBOOK")
    new, changes = section_changes(read_notebook(path), module, notebook_language(path))
    for tag, change in changes:
        if say:
            say(f"{path.name}: {tag}: {CHANGE_TEXT[change][write]}")
    stale = any(change != KEPT for _, change in changes)
    if stale and write:
        _write(path.resolve(), json.dumps(new, ensure_ascii=False, indent=1) + "\n")
    return stale


def _write(path: Path, text: str) -> None:
    """``text`` into ``path`` all at once (a crash leaves the old notebook, never half of one)."""
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.",
                                     delete=False) as tmp:
        tmp.write(text)
    os.chmod(tmp.name, path.stat().st_mode & 0o777)
    os.replace(tmp.name, path)


def section_is_current(path: Path) -> bool:
    return not sync_notebook(path, write=False)


USAGE = "usage: python -m kvlab.exercises [--check] [NOTEBOOK ...]"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    check_only = "--check" in args
    names = [a for a in args if a != "--check"]
    if any(n.startswith("-") for n in names):
        print(USAGE, file=sys.stderr)
        return 2
    root = Path(__file__).resolve().parents[2]
    paths = [Path(n) for n in names] or [p for folder in (root / "chapters", root / "chapters" / "en")
                                          for p in sorted(folder.glob("*.ipynb")) if module_for(p)]
    if not paths:  # an installed wheel has no chapters/ beside it: say so rather than "all up to date"
        print(f"no course notebooks found in {root / 'chapters'}: name the notebooks to check, e.g. "
              "python -m kvlab.exercises --check chapters/01_autoregressive_decode.ipynb", file=sys.stderr)
        return 2
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(f"no such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    for p in paths:  # every one checked before any is written
        try:
            if module_for(p.resolve()) is None:
                raise ValueError(f"{p}: not a course notebook (no kvlab/exercises/chNN.py names {p.name})")
            read_notebook(p)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
    # chapters/en/ is generated by python -m kvlab.edition (which writes its exercise section with this module's
    # with_section): checked here, never written, so the two commands cannot disagree.
    english = {p for p in paths if notebook_language(p) == "en"}
    stale = [("en/" if p in english else "") + p.name for p in paths
             if sync_notebook(p, write=not check_only and p not in english, say=print)]
    if not check_only and any(name.startswith("en/") for name in stale):
        print("out of date in chapters/en/ (generated from the Chinese chapters): run python -m kvlab.edition")
        return 1
    if check_only:
        print("out of date: " + ", ".join(stale) if stale else "all exercise sections up to date")
        return 1 if stale else 0
    print("updated: " + ", ".join(stale) if stale else "all exercise sections up to date")
    return 0
