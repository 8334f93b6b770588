"""The English edition's notebooks, generated from the Chinese ones (issue 34).

``chapters/en/<name>.ipynb`` is written, never edited by hand, from ``chapters/<name>.ipynb``:

- code cells are copied as they are, except the one language line, ``kvlab.set_language("zh")`` -> ``"en"``; the
  code is the same in both editions, and what it prints comes from kvlab's phrasebooks in the language that line sets;
- each markdown cell is replaced by its English text from ``chapters/en/translations/<name>.md``, where every
  translation is stored under its cell's id together with a hash of the Chinese text it was translated from:

      <!-- kvlab-translation: cell-03 from 5d41402abc4b -->
      The English text of cell-03 ...

A translation whose Chinese cell changed since is *stale*, a markdown cell without one is *missing*, one whose cell
is gone is an *orphan*: :func:`problems` names each, ``python -m kvlab.edition --check`` fails on them, and so does
``tests/test_edition.py``. A chapter is in the English edition when its translation file exists.

``python -m kvlab.edition`` writes every English notebook whose translations are complete; it writes over a file in
``chapters/en/`` only if that file is one it wrote (``metadata.kvlab_edition``), and never deletes one.
``python -m kvlab.edition --start NAME`` writes a translation file for a chapter that has none, one block per
markdown cell holding the Chinese text to translate (it refuses to overwrite an existing file).

The exercise section is not translated here: its markdown cells (the intro and each task) are written in English by
the exercise generator (:func:`kvlab.exercises.notebook.with_section`, from each exercise's ``ExerciseText``), the
one source of those words in both editions, so ``python -m kvlab.exercises --check`` holds for ``chapters/en/`` too.
A translation stored for such a cell is *generated* (named, and the notebook is not written).
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .colab import BADGE_MARKER, badge_markdown
from .exercises.notebook import is_generated, module_for, with_section

CHAPTERS = Path(__file__).resolve().parent.parent / "chapters"  # a checkout's chapters (absent in a wheel)
EDITION = "en"
META_KEY = "kvlab_edition"  # in a generated notebook's metadata: {"language": "en", "from": "<zh notebook name>"}
LANGUAGE_LINE = re.compile(r'^(kvlab\.set_language\()"zh"(\))$', re.M)
BLOCK = re.compile(r"^<!-- kvlab-translation: (\S+) from ([0-9a-f]{12}) -->[ \t]*$", re.M)
UNTRANSLATED = "TRANSLATE"  # what --start writes as a block's English text, before the Chinese it quotes


def source_hash(text: str) -> str:
    """The first 12 hex digits of the SHA-256 of a cell's source (what a translation was made from)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class Translation:
    cell_id: str
    source_hash: str
    text: str


def read_translations(text: str) -> dict[str, Translation]:
    """The blocks of a translation file by cell id; ValueError on text before the first block or an id twice."""
    marks = list(BLOCK.finditer(text))
    if text[:marks[0].start() if marks else len(text)].strip():
        raise ValueError("a translation file starts with a '<!-- kvlab-translation: ID from HASH -->' line")
    out = {}
    for mark, after in zip(marks, marks[1:] + [None]):
        cell_id = mark.group(1)
        if cell_id in out:
            raise ValueError(f"cell {cell_id!r} is translated twice")
        body = text[mark.end():after.start() if after else len(text)].strip("\n")
        out[cell_id] = Translation(cell_id, mark.group(2), body)
    return out


def write_translations(blocks: list[Translation]) -> str:
    return "".join(f"<!-- kvlab-translation: {b.cell_id} from {b.source_hash} -->\n{b.text}\n\n" for b in blocks)


@dataclass
class Report:
    """What keeps one chapter's English notebook from being generated, by kind (cell ids)."""

    name: str
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    orphan: list[str] = field(default_factory=list)
    untranslated: list[str] = field(default_factory=list)
    generated: list[str] = field(default_factory=list)  # translations of cells the exercise generator writes
    language_lines: int = 0

    def lines(self) -> list[str]:
        out = [f"{self.name}: {kind} translation for cells {', '.join(ids)}"
               for kind, ids in (("no", self.missing), ("stale", self.stale), ("orphan", self.orphan),
                                 ("unwritten", self.untranslated),
                                 ("needless (the exercise generator writes them)", self.generated)) if ids]
        if self.language_lines != 1:
            out.append(f"{self.name}: {self.language_lines} language lines (kvlab.set_language(\"zh\")), not 1")
        return out


def translation_path(zh_notebook: Path) -> Path:
    return zh_notebook.parent / EDITION / "translations" / (zh_notebook.stem + ".md")


def english_path(zh_notebook: Path) -> Path:
    return zh_notebook.parent / EDITION / zh_notebook.name


def english_notebook(zh_nb, translations: dict[str, Translation], name: str):
    """(the English notebook, its Report): the Chinese notebook with markdown translated and the language line set."""
    report = Report(name)
    nb = copy.deepcopy(zh_nb)
    ids = set()
    for cell in nb.cells:
        ids.add(cell.id)
        if cell.cell_type == "markdown" and is_generated(cell):
            if cell.id in translations:
                report.generated.append(cell.id)
        elif cell.cell_type == "markdown":
            t = translations.get(cell.id)
            if t is None:
                report.missing.append(cell.id)
                continue
            if t.source_hash != source_hash(cell.source):
                report.stale.append(cell.id)
            if not t.text.strip() or t.text.lstrip().startswith(UNTRANSLATED):
                report.untranslated.append(cell.id)
            cell.source = "\n".join(badge_markdown(f"{EDITION}/{name}") if BADGE_MARKER in line else line
                                    for line in t.text.split("\n"))  # the badge opens the English notebook
        elif cell.cell_type == "code":
            cell.source, n = LANGUAGE_LINE.subn(r'\1"en"\2', cell.source)
            report.language_lines += n
    report.orphan = sorted(translations.keys() - ids)
    module = module_for(Path(name))
    if module is not None:  # the exercise section's prose in English, as the exercise generator writes it
        import nbformat

        nb = nbformat.from_dict(with_section(nb, module, EDITION))
        for cell in nb.cells:  # (the generator writes sources as lists of lines, as a notebook file stores them)
            if isinstance(cell.source, list):
                cell.source = "".join(cell.source)
    nb.metadata[META_KEY] = {"language": EDITION, "from": name}
    return nb, report


def chapter(zh_notebook: Path):
    """(the English notebook, its Report) for a Chinese chapter that has a translation file."""
    import nbformat

    zh = nbformat.read(zh_notebook, as_version=4)
    translations = read_translations(translation_path(zh_notebook).read_text(encoding="utf-8"))
    return english_notebook(zh, translations, zh_notebook.name)


def edition_chapters(chapters: Path = CHAPTERS) -> list[Path]:
    """The Chinese chapters that have a translation file (the chapters of the English edition)."""
    return [p for p in sorted(chapters.glob("*.ipynb")) if translation_path(p).exists()]


def untranslated_chapters(chapters: Path = CHAPTERS) -> list[Path]:
    return [p for p in sorted(chapters.glob("*.ipynb")) if not translation_path(p).exists()]


def rendered(nb) -> str:
    import nbformat

    return nbformat.writes(nb) + "\n"


def generate(chapters: Path = CHAPTERS, check: bool = False, out=sys.stdout) -> int:
    """Write (or, with ``check``, compare) every English notebook; the exit status: 1 when something is wrong."""
    import nbformat

    status = 0
    for zh in edition_chapters(chapters):
        nb, report = chapter(zh)
        problems = report.lines()
        if problems:
            print("\n".join(problems), file=out)
            status = 1
            continue
        target, text = english_path(zh), rendered(nb)
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        if check:
            print(f"{target.relative_to(chapters.parent)}: out of date (python -m kvlab.edition)", file=out)
            status = 1
            continue
        if current is not None and META_KEY not in nbformat.reads(current, as_version=4).metadata:
            print(f"{target}: not written by kvlab.edition; left as it is", file=out)
            status = 1
            continue
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target.relative_to(chapters.parent)}", file=out)
    return status


def start(name: str, chapters: Path = CHAPTERS, out=sys.stdout) -> int:
    """Write a translation file to fill in for chapter ``name`` (a notebook stem or file name)."""
    import nbformat

    zh = chapters / (name if name.endswith(".ipynb") else name + ".ipynb")
    if not zh.exists():
        print(f"no chapter {zh.name} in {chapters}", file=out)
        return 2
    target = translation_path(zh)
    if target.exists():
        print(f"{target} exists; not overwritten", file=out)
        return 1
    nb = nbformat.read(zh, as_version=4)
    blocks = [Translation(c.id, source_hash(c.source), f"{UNTRANSLATED}\n\n" + "\n".join(
        "> " + line for line in c.source.splitlines())) for c in nb.cells if c.cell_type == "markdown"]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(write_translations(blocks), encoding="utf-8")
    print(f"wrote {target}: {len(blocks)} cells to translate", file=out)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvlab.edition", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if an English notebook is "
                        "out of date or a translation is missing, stale or an orphan")
    parser.add_argument("--start", metavar="CHAPTER", help="write a translation file to fill in for CHAPTER")
    args = parser.parse_args(argv)
    if not CHAPTERS.is_dir():
        print("python -m kvlab.edition works in a checkout of the course (no chapters/ here)", file=sys.stderr)
        return 2
    if args.start:
        return start(args.start)
    return generate(check=args.check)


if __name__ == "__main__":
    sys.exit(main())
