"""Minutes per chapter, computed from the notebook and a measured run, never guessed.

- **reading**: the Chinese characters (汉字) of the notebook's markdown cells, plus those its measured run printed
  (readouts, tables: a learner reads them too), ÷ :data:`READING_SPEED`; in the English guide, the English chapter's
  words (:func:`english_words`) ÷ ``kvlab.teacher.phrases.READING_SPEED_EN`` (the printed words estimated from the
  Chinese run at the chapter's own ratio of English words to Chinese characters, see ``guide.chapter_report``); the core reading counts the output of
  the cells in core sections only (a cell's output belongs to the section it is in, :func:`cell_headings`);
- **running**: the fastest measured run of the chapter's code cells (:mod:`kvlab.teacher.run_times`);
- **panels**: :data:`PANEL_MINUTES` for each code cell that shows an interactive panel (calls a ``*_panel(``);
- **exercises**: :data:`CODE_EXERCISE_MINUTES` for an exercise whose stub is a function to write,
  :data:`CALC_EXERCISE_MINUTES` for one answered with values;
- **quiz**: :data:`QUIZ_MINUTES` per self-check question, a checkpoint's questions included (:func:`quiz_questions`);
- in class (the lesson plans, :mod:`kvlab.teacher.plans`): :data:`DISCUSSION_MINUTES` per discussion prompt and
  :data:`CLASS_OPENING_MINUTES` at the start of every class.

The sections are the notebook's ``##``/``###`` headings; a section is optional when the chapter guide names it (or
its ``##`` parent) in ``optional_sections`` (a 拓展 chapter as a whole is marked in the guide, and its sections are
judged the same way: what to read if the class takes the extension).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

# Silent reading of technical Chinese. IReST (Trauzettel-Klosinski & Dietz 2012, Table 2) measured native readers
# reading general texts ALOUD at 255 ± 29 Chinese characters (syllables) per minute; Brysbaert (2019) finds silent
# reading about 1.3 times as fast as reading aloud (English: 238 vs 183 words per minute), which gives about 330.
# Text with formulas, code names and figures to look at is read more slowly than IReST's general texts: 300.
READING_SPEED = 300  # 汉字 per minute
PANEL_MINUTES = 2.0  # move the controls of one interactive panel and look at what changes
CODE_EXERCISE_MINUTES = 15.0  # write a function and pass the check
CALC_EXERCISE_MINUTES = 8.0  # work out values (by formula or from a table) and pass the check
QUIZ_MINUTES = 1.0  # one self-check question
DISCUSSION_MINUTES = 5.0  # one prompt: a minute to predict alone, two in pairs, two for the class to compare
CLASS_OPENING_MINUTES = 5.0  # the start of a class: questions left from the reading assigned before it

HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# English is counted in words (READING_SPEED_EN words per minute, kvlab.teacher.phrases): runs of letters in the prose,
# outside code blocks, inline code, formulas, HTML tags and link targets.
WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)*")
NOT_PROSE = re.compile(r"```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]*\$|<!--.*?-->|<[^>]+>|\]\([^)]*\)|https?://\S+", re.S)
HEADING = re.compile(r"^(#{1,3})\s+(.+?)\s*$", re.M)
FENCE = re.compile(r"```.*?```", re.S)
EXERCISES_HEADING = "动手练习"


def han_characters(text: str) -> int:
    return len(HAN.findall(text))


def english_words(text: str) -> int:
    """The words a reader reads in ``text`` (markdown): runs of letters outside code, formulas, tags and links."""
    return len(WORD.findall(NOT_PROSE.sub(" ", text)))


def counter(lang: str):
    """How a language's reading is counted: Chinese characters, or English words."""
    return english_words if lang == "en" else han_characters


@dataclass
class Section:
    level: int  # 2 for ##, 3 for ###
    heading: str
    parent: str  # the ## heading a ### section belongs to ("" for a ## section)
    characters: int  # 汉字 in its markdown (English words in an English chapter)
    optional: bool = False
    rate: float = READING_SPEED  # characters (words) per minute
    source: "Section | None" = None  # in an English chapter: the Chinese section it translates

    @property
    def reading_minutes(self) -> float:
        return self.characters / self.rate

    @property
    def is_exercises(self) -> bool:
        if self.source is not None:
            return self.source.is_exercises
        return EXERCISES_HEADING in (self.heading if self.level == 2 else self.parent)


def read_notebook(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def sections(nb: dict, count=han_characters) -> tuple[str, int, list[Section]]:
    """The chapter's title, the 汉字 (``count``: what else to count) before its first ``##`` and its sections in
    order."""
    title, intro, out = "", 0, []
    parent = ""
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        masked = FENCE.sub(lambda m: m.group(0).replace("#", " "), text)  # a comment in a code block is no heading
        pieces = [(m.start(), len(m.group(1)), m.group(2)) for m in HEADING.finditer(masked)]
        before = text[:pieces[0][0]] if pieces else text
        if out:
            out[-1].characters += count(before)
        else:
            intro += count(before)
        for i, (start, level, heading) in enumerate(pieces):
            end = pieces[i + 1][0] if i + 1 < len(pieces) else len(text)
            characters = count(text[start:end])
            if level == 1:
                title, intro = heading, intro + characters
                continue
            parent = heading if level == 2 else parent
            out.append(Section(level, heading, "" if level == 2 else parent, characters))
    return title, intro, out


def cell_headings(nb: dict) -> list[str]:
    """For each cell, the heading of the ``##``/``###`` section it is in ("" before the first): the last such
    heading in or before it. Output a code cell prints belongs to that section (optional with it)."""
    out, current = [], ""
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            masked = FENCE.sub(lambda m: m.group(0).replace("#", " "), "".join(cell["source"]))
            found = [m.group(2) for m in HEADING.finditer(masked) if len(m.group(1)) > 1]
            current = found[-1] if found else current
        out.append(current)
    return out


def panel_cells(nb: dict) -> int:
    """Code cells that show an interactive panel."""
    return sum(1 for c in nb["cells"] if c["cell_type"] == "code" and "_panel(" in "".join(c["source"]))


def lesson_module_name(nb: dict) -> str | None:
    """``kvlab.lessons.X`` from the notebook's ``from kvlab.lessons import X as lesson``."""
    for cell in nb["cells"]:
        m = re.search(r"from kvlab\.lessons import (\w+) as lesson", "".join(cell["source"]))
        if cell["cell_type"] == "code" and m:
            return f"kvlab.lessons.{m.group(1)}"
    return None


def has_quiz(nb: dict) -> bool:
    return any(c["cell_type"] == "code" and "review_questions(" in "".join(c["source"]) for c in nb["cells"])


CHECKPOINT_CALL = re.compile(r"\bcheckpoint\(\s*[\"'](\d+\.\d+)[\"']\s*\)")


def checkpoint_sections(nb: dict) -> list[str]:
    """The chapters whose checkpoint the notebook shows: ``checkpoint("3.1")`` in a code cell."""
    return [m.group(1) for c in nb["cells"] if c["cell_type"] == "code"
            for m in CHECKPOINT_CALL.finditer("".join(c["source"]))]


def quiz_questions(nb: dict, quiz_module=None) -> int:
    """The questions a learner answers in the chapter (:data:`QUIZ_MINUTES` each): its lesson's
    ``review_questions()`` (``quiz_module``, when the notebook has that quiz) and every checkpoint it shows."""
    from ..lessons.checkpoints import checkpoint_questions

    review = len(quiz_module.review_questions()) if quiz_module is not None else 0
    return review + sum(len(checkpoint_questions(s)) for s in checkpoint_sections(nb))


def exercise_minutes(exercise) -> float:
    return CODE_EXERCISE_MINUTES if re.search(r"^\s*def ", exercise.stub, re.M) else CALC_EXERCISE_MINUTES


@dataclass
class Minutes:
    """One chapter's minutes, each part computed as the module docstring says."""

    characters: int  # 汉字 of the markdown cells
    core_characters: int  # 汉字 outside the optional sections
    output_characters: int  # 汉字 the measured run printed
    run_seconds: float | None  # None: not measured
    panels: int
    exercises: tuple[float, ...]  # minutes per exercise
    quiz_questions: int
    core_output_characters: int | None = None  # of those, printed in core sections (None: not recorded, all core)
    rate: float = READING_SPEED  # characters (English: words) per minute

    @property
    def reading(self) -> float:
        return (self.characters + self.output_characters) / self.rate

    @property
    def core_reading(self) -> float:
        core_output = self.output_characters if self.core_output_characters is None else self.core_output_characters
        return (self.core_characters + core_output) / self.rate

    @property
    def running(self) -> float:
        return (self.run_seconds or 0.0) / 60

    @property
    def panel_minutes(self) -> float:
        return self.panels * PANEL_MINUTES

    @property
    def exercise_minutes(self) -> float:
        return sum(self.exercises)

    @property
    def quiz_minutes(self) -> float:
        return self.quiz_questions * QUIZ_MINUTES

    @property
    def total(self) -> float:
        """Reading, running, panels, exercises and quiz: the time to work through the chapter."""
        return self.reading + self.running + self.panel_minutes + self.exercise_minutes + self.quiz_minutes
