"""The one checker every chapter's exercises use: grade an answer, say what went wrong, never raise.

A chapter module (``ch01``, ``ch02`` ...) defines its :class:`Exercise` objects (task, stub cell, check cell,
hints) and one ``grade_*`` function per exercise: a pure function from the learner's answer to a
:class:`Verdict`. The notebook's check cell calls ``chNN.check_*(...)``, which goes through :func:`check`:
it runs the grader, counts wrong attempts (the hint appears from the second one), and returns a
:class:`Feedback` that Jupyter and Colab render as plain HTML (``_repr_html_``) and a terminal as text.

Learner code is called through :func:`call`, which turns an exception into :class:`LearnerError` naming the
case; an answer left as the stub gave it is 「还没有完成」 (Not done yet), never an error.

Everything the checker itself says comes from :data:`kvlab.exercises.phrases.CHECKER` in the course's language when it
says it; an exercise's title, task and hints in English are its :class:`ExerciseText` (``Exercise.english``).

Reference solutions (:mod:`kvlab.exercises.solutions`) are withheld until an attempt: an exercise's feedback carries
its solution, folded under 「显示参考答案」, only once this kernel has checked a real attempt at it (a check whose
status is not TODO: the stub was changed), and says so before. :data:`SOLUTION_GATE` remembers those attempts (per
exercise key, in this kernel's memory; a restarted kernel starts over). A teacher shows every solution at once:
``KVLAB_TEACHER=1`` in the environment JupyterLab (and so the kernel) starts in, or
``kvlab.exercises.show_solutions()`` in a running kernel (``show_solutions(False)`` hides them again until an
attempt, whatever the environment says; ``show_solutions(None)`` lets ``KVLAB_TEACHER`` decide again).

What comes from the ecosystem: nbgrader's pairing of a solution cell (here the learner's stub) with a test
cell right below it, and its rule that an untouched stub is recognised and never counted as an answer;
otter-grader's named test cases, each reported on its own. Neither package is used: both grade through an
assignment release/collect pipeline or a grading server, and a self-study notebook on Colab has neither;
their feedback is in English and would not name the case's inputs the way a learner needs here.
"""
from __future__ import annotations

import dis
import html
import inspect
import os
import re
import traceback
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

from ..language import check_language, get_language
from ..memory import format_bytes
from ..phrases import MissingPhrase
from ..questions import (MAX_ANSWER_CHARS, RIGHT, TODO, WRONG, AnswerError, Choice, Verdict, clip, close,  # noqa: F401
                         parse_number, quoted, right, wrong)
from ..questions import normalize_answer as _normalize, typed_number as _typed_number
from .phrases import CHECKER

BUG = "bug"  # TODO, RIGHT and WRONG are kvlab.questions'
NOT_DONE = CHECKER.text("not_done", "zh")  # 「还没有完成」; said in the course's language (CHECKER's "not_done")


@dataclass(frozen=True)
class ExerciseText:
    """An exercise's words in a language other than Chinese: its title, its task (markdown) and its hints, one for
    each Chinese hint, in the same order."""

    title: str
    task: str
    hints: tuple[str, ...]


@dataclass(frozen=True)
class Exercise:
    """One exercise as the notebook shows it. ``key`` is ``"chNN.name"``; the three sources are cells. ``title``,
    ``task`` and ``hints`` are Chinese; ``english`` holds them in English (:meth:`words` picks by language)."""

    key: str
    title: str  # Chinese, e.g. 「亲手写一步有缓存的注意力」
    task: str  # markdown under the title
    stub: str  # the code cell the learner edits
    check: str  # the code cell that calls the checker
    hints: tuple[str, ...]  # shown one more per wrong attempt, from the second
    english: ExerciseText | None = None

    def __post_init__(self):
        en = self.english
        if en is not None:
            if not isinstance(en, ExerciseText):
                raise ValueError(f"english must be an ExerciseText, got {type(en).__name__}")
            if len(en.hints) != len(self.hints):
                raise ValueError(f"english: {self.key} has {len(self.hints)} Chinese hints but {len(en.hints)} English")
            if not all(isinstance(t, str) and t.strip() for t in (en.title, en.task, *en.hints)):
                raise ValueError(f"english: {self.key} has an empty English title, task or hint")

    @property
    def chapter(self) -> str:
        return self.key.split(".")[0]

    @property
    def name(self) -> str:
        return self.key.split(".")[1]

    def words(self, lang: str | None = None) -> ExerciseText:
        """The title, task and hints in ``lang`` (default: the course's language now); MissingPhrase naming the
        exercise when it has none in that language."""
        lang = check_language(lang or get_language())
        if lang == "zh":
            return ExerciseText(self.title, self.task, self.hints)
        if self.english is None:
            raise MissingPhrase(f"exercise {self.key!r} has no {lang!r} text (title, task, hints): "
                                f"give its Exercise english=ExerciseText(...)")
        return self.english

    def shown_title(self) -> str:
        """The title in the course's language; the exercise's key where it has none in that language (never
        another language's title, never an empty heading)."""
        try:
            return self.words().title
        except MissingPhrase:
            return self.key


def todo(message: str = "") -> Verdict:
    not_done = CHECKER.say("not_done")
    return Verdict(TODO, CHECKER.say("todo", not_done=not_done, message=message) if message
                   else CHECKER.say("todo_bare", not_done=not_done))


class LearnerError(Exception):
    """The learner's code raised; ``verdict`` says where and what."""

    def __init__(self, verdict: Verdict):
        super().__init__(verdict.message)
        self.verdict = verdict


def call(fn: Callable, *args, case: str = "", extra: str = ""):
    """``fn(*args)``; an exception becomes :class:`LearnerError` with the case and the error's last line. So does
    ``SystemExit`` (``exit()`` in learner code must not end the check); ``KeyboardInterrupt`` is let through, so that
    the kernel's stop button still stops a learner's endless loop."""
    try:
        return fn(*args)
    except LearnerError:
        raise
    except SystemExit as exc:
        where = CHECKER.say("case", case=case) if case else ""
        raise LearnerError(wrong(CHECKER.say("exited", where=where, code=repr(exc.code)))) from None
    except Exception as exc:  # the learner's code: any error is feedback, never a traceback
        where = CHECKER.say("case", case=case) if case else ""
        line = clip("".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1], 300)
        raise LearnerError(wrong(CHECKER.say("raised", where=where, line=line), *([extra] if extra else []))) from None


# -- answers that merely call the reference ------------------------------------------------------------------
def _names(code) -> set[str]:
    """Every global and attribute name ``code`` (and the functions defined inside it) loads."""
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _names(const)
    return names


ATTRIBUTE_LOADS = {"LOAD_ATTR", "LOAD_METHOD", "LOAD_SUPER_ATTR"}


def _attributes(code) -> set[str]:
    """Every attribute name ``code`` (and the functions defined inside it) reads: ``preset.kv_cache_bytes``."""
    names = {ins.argval for ins in dis.get_instructions(code) if ins.opname in ATTRIBUTE_LOADS}
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _attributes(const)
    return names


def _is(obj, reference) -> bool:
    return obj is reference or getattr(obj, "__wrapped__", None) is reference or \
        getattr(reference, "__wrapped__", None) is obj


def uses_reference(fn, references: dict[str, object]) -> str | None:
    """The name of a reference implementation ``fn`` calls (``references``: name -> the function), found in its code
    by name (``ch01.traced_work``, ``KVCache._store``; an attribute of that name whatever a global of that name is)
    or through a global or closure alias bound to it; else None."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    read = _attributes(code)
    attribute = next((name for name in references if name in read), None)
    if attribute:
        return attribute
    scope = getattr(fn, "__globals__", {})
    cells = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ()) if c.cell_contents is not None] \
        if all(_filled(c) for c in (getattr(fn, "__closure__", None) or ())) else []
    for name in _names(code):
        bound = scope.get(name)
        for ref_name, ref in references.items():
            if (name == ref_name and (bound is None or _is(bound, ref))) or (bound is not None and _is(bound, ref)):
                return ref_name
    for value in cells:
        for ref_name, ref in references.items():
            if _is(value, ref):
                return ref_name
    return None


def _filled(cell) -> bool:
    try:
        cell.cell_contents
        return True
    except ValueError:  # an empty cell
        return False


def refuses_reference(fn, references: dict[str, object]) -> Verdict | None:
    """WRONG when ``fn`` calls one of ``references`` (the checker would be comparing the reference with itself)."""
    name = uses_reference(fn, references)
    if name is None:
        return None
    return wrong(CHECKER.say("calls_reference", name=name))


# -- attempts and feedback ----------------------------------------------------------------------------
ATTEMPTS: Counter = Counter()  # wrong attempts per exercise key, in this kernel

TEACHER_ENV = "KVLAB_TEACHER"
TEACHER_ON = ("1", "true", "yes", "on")  # what KVLAB_TEACHER may say to show every solution (any case)
SOLUTION_LOCKED = CHECKER.text("solution_locked", "zh")  # said in the course's language (CHECKER's "solution_locked")


@dataclass
class SolutionGate:
    """Which reference solutions this kernel shows: an exercise's once a real attempt at it was checked, every one
    in teacher mode (``teacher``, set by :func:`show_solutions`; None: the ``KVLAB_TEACHER`` variable decides)."""

    attempted: set = field(default_factory=set)  # exercise keys with a checked real attempt
    teacher: bool | None = None

    def teaching(self) -> bool:
        if self.teacher is not None:
            return self.teacher
        return os.environ.get(TEACHER_ENV, "").strip().lower() in TEACHER_ON

    def record(self, key: str, status: str) -> None:
        """Note a check of ``key``: any status but TODO means the learner's own answer was checked."""
        if status != TODO:
            self.attempted.add(key)

    def shows(self, key: str) -> bool:
        return self.teaching() or key in self.attempted


# Module state, on purpose: the kernel's memory of the learner's checks (wrong attempts for the hints, real
# attempts for the solutions). Check cells are separate calls with nothing else to carry it; listed in ARCHITECTURE.md.
SOLUTION_GATE = SolutionGate()


def show_solutions(show: bool | None = True) -> None:
    """Teacher mode for this kernel: True shows every exercise's reference solution in its check cell's feedback,
    False withholds each until a real attempt (even under ``KVLAB_TEACHER=1``), None lets ``KVLAB_TEACHER`` decide."""
    if show is not None and not isinstance(show, bool):
        raise ValueError(f"show_solutions: show must be True, False or None, got {show!r}")
    SOLUTION_GATE.teacher = show
    state = CHECKER.say("teacher_on" if SOLUTION_GATE.teaching() else "teacher_off")
    print(CHECKER.say("teacher_switch", state=state))


def reset_attempts() -> None:
    """Forget every check this kernel has seen: wrong attempts, real attempts and a :func:`show_solutions` setting."""
    ATTEMPTS.clear()
    SOLUTION_GATE.attempted.clear()
    SOLUTION_GATE.teacher = None


STYLES = {  # (text colour, background, mark): marks from common text fonts, not emoji (no missing-glyph boxes)
    RIGHT: ("#1b5e20", "#e8f5e9", "✓"),
    WRONG: ("#8a1c1c", "#fdecea", "✗"),
    TODO: ("#0b4f7c", "#eef6fc", "✎"),
    BUG: ("#8a1c1c", "#fdecea", "⚠"),
}


@dataclass
class Feedback:
    """What a check cell shows. ``_repr_html_`` renders it in JupyterLab and Colab; ``str`` in a terminal."""

    exercise: Exercise
    status: str
    message: str
    details: tuple[str, ...] = ()
    hint: str | None = None
    solution: str | None = field(default=None, repr=False)  # None until shown (see SolutionGate)
    solution_locked: bool = False  # a solution exists but is withheld until a real attempt: say when it appears

    @property
    def right(self) -> bool:
        return self.status == RIGHT

    @property
    def text(self) -> str:
        """Everything the learner reads, as plain text (in the course's language)."""
        lines = [CHECKER.say("text_heading", title=self.exercise.shown_title(), message=self.message),
                 *(f"  {d}" for d in self.details)]
        if self.hint:
            lines.append(CHECKER.say("hint", hint=self.hint))
        if self.solution_locked:
            lines.append(CHECKER.say("solution_locked"))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        fg, bg, icon = STYLES[self.status]
        parts = [CHECKER.say("html_heading", icon=icon, title=html.escape(self.exercise.shown_title()),
                             message=html.escape(self.message))]
        if self.details:
            items = "".join(f"<li>{html.escape(d)}</li>" for d in self.details)
            parts.append(f'<ul class="kvlab-exercise-details" style="margin:4px 0 0 0">{items}</ul>')
        if self.hint:
            hint = html.escape(CHECKER.say("hint", hint=self.hint))
            parts.append(f'<div class="kvlab-exercise-hint" style="margin-top:4px">{hint}</div>')
        if self.solution:
            parts.append('<details class="kvlab-exercise-solution" style="margin-top:6px;color:#333">'
                         f'<summary style="cursor:pointer">{html.escape(CHECKER.say("show_solution"))}</summary>'
                         f'<pre style="background:#f7f7f7;padding:6px;margin:4px 0">{html.escape(self.solution)}</pre>'
                         '</details>')
        elif self.solution_locked:
            parts.append('<div class="kvlab-exercise-solution-locked" style="margin-top:4px;color:#555">'
                         f'{html.escape(CHECKER.say("solution_locked"))}</div>')
        return (f'<div class="kvlab-exercise-feedback kvlab-exercise-{self.status}" '
                f'data-exercise="{self.exercise.key}" '
                f'style="background:{bg};color:{fg};padding:6px 10px;border-radius:4px;margin:4px 0">'
                + "".join(parts) + "</div>")


def _hints(exercise: Exercise, n: int) -> str:
    """The first ``n`` hints in the course's language, one after another (what is missing named, never left out)."""
    try:
        return " ".join(exercise.words().hints[:n])
    except MissingPhrase as exc:
        return str(exc)


def check(exercise: Exercise, grade: Callable[..., Verdict], *answers, **named) -> Feedback:
    """Grade ``answers`` with ``grade`` and build the feedback; never raises."""
    from .solutions import SOLUTIONS

    try:
        verdict = grade(*answers, **named)
    except LearnerError as exc:
        verdict = exc.verdict
    except AnswerError as exc:  # an answer that cannot be read is the learner's to fix, never kvlab's bug
        verdict = wrong(str(exc))
    except SystemExit as exc:  # exit() reached the grader outside call(): still the learner's, never the end
        verdict = wrong(CHECKER.say("exited", where="", code=repr(exc.code)))
    except Exception as exc:  # a bug in the checker itself: say so instead of blaming the learner
        line = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
        verdict = Verdict(BUG, CHECKER.say("checker_bug", line=line))
    hint = None
    if verdict.status == WRONG:
        ATTEMPTS[exercise.key] += 1
        failures = ATTEMPTS[exercise.key]
        if failures >= 2 and exercise.hints:  # one more each time, the earlier ones kept: a hint may fit another field
            hint = _hints(exercise, failures - 1)
    elif verdict.status == RIGHT:
        ATTEMPTS.pop(exercise.key, None)
    SOLUTION_GATE.record(exercise.key, verdict.status)
    solution = SOLUTIONS.get(exercise.key)
    shown = solution is not None and SOLUTION_GATE.shows(exercise.key)
    return Feedback(exercise, verdict.status, verdict.message, verdict.details, hint, solution if shown else None,
                    solution_locked=solution is not None and not shown)


# -- is it still the stub? ------------------------------------------------------------------------------
def _code_key(code) -> tuple:
    """What a function does, instruction by instruction with their arguments resolved (line numbers, comments and
    the docstring left out)."""
    return tuple((ins.opname, _code_key(ins.argval) if inspect.iscode(ins.argval) else repr(ins.argval))
                 for ins in dis.get_instructions(code))


def is_stub(fn, stub_source: str, name: str) -> bool:
    """True when ``fn`` is still the function ``name`` of ``stub_source`` (same bytecode and constants;
    comments, blank lines and the docstring may differ)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    namespace: dict = {}
    exec(compile(stub_source, "<stub>", "exec"), {"__builtins__": __builtins__}, namespace)  # defs only
    stub = namespace.get(name)
    return stub is not None and _code_key(code) == _code_key(stub.__code__)


def not_callable(answer, name: str) -> Verdict | None:
    if callable(answer):
        return None
    return wrong(CHECKER.say("not_callable", type=type(answer).__name__, name=name))


def unwritten(fn, stub_source: str, name: str, still_todo: str) -> Verdict | None:
    """The verdict for a function answer that cannot be graded yet: not a function, or still the stub
    (「还没有完成」, Not done yet, with ``still_todo``); None when it is the learner's own function."""
    return not_callable(fn, name) or (todo(still_todo) if is_stub(fn, stub_source, name) else None)


# -- answers that are numbers ---------------------------------------------------------------------------
BINARY_UNITS = {"B": 1, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
DECIMAL_UNITS = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
BINARY_OF = {"KB": "KiB", "MB": "MiB", "GB": "GiB", "TB": "TiB"}
UNIT_NAMES = {"B": "B", "KIB": "KiB", "MIB": "MiB", "GIB": "GiB", "TIB": "TiB", "KB": "KB", "MB": "MB", "GB": "GB",
              "TB": "TB", "字节": "B", "BYTES": "B", "BYTE": "B"}
QUANTITY = re.compile(r"^([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z字节]*)$")


@dataclass(frozen=True)
class Quantity:
    """A size the learner wrote: ``value`` in ``unit`` (as written), ``bytes`` exact."""

    value: Fraction
    unit: str  # "B", "KiB" ... "GB"
    bytes: Fraction

    @property
    def decimal(self) -> bool:
        return self.unit in DECIMAL_UNITS

    def as_binary(self) -> Fraction:
        """The bytes this number would be if its GB were read as GiB (MB as MiB ...)."""
        return self.value * BINARY_UNITS[BINARY_OF[self.unit].upper()] if self.decimal else self.bytes

    def __str__(self) -> str:
        return f"{_fraction_text(self.value)} {self.unit}"


def _fraction_text(x: Fraction) -> str:
    return f"{int(x):,}" if x.denominator == 1 else f"{float(x):.10g}"  # 4.0000001 must not read as 4


def parse_bytes(answer) -> Quantity:
    """A size: a number of bytes (int), or a string with a unit: "4 GiB", "4096 MiB", "4,294,967,296 B"."""
    if isinstance(answer, str):
        if len(answer) > MAX_ANSWER_CHARS:
            raise AnswerError(CHECKER.say("bytes_too_long", n=len(answer)))
        m = QUANTITY.match(_normalize(answer))
        if not m:
            raise AnswerError(CHECKER.say("bytes_unreadable", text=quoted(clip(answer))))
        unit = UNIT_NAMES.get(m.group(2).upper() if m.group(2) != "字节" else "字节") if m.group(2) else "B"
        if unit is None:
            raise AnswerError(CHECKER.say("unknown_unit", unit=quoted(clip(m.group(2)))))
        value = _typed_number(m.group(1))
    else:
        value, unit = parse_number(answer), "B"
    factor = BINARY_UNITS.get(unit.upper()) or DECIMAL_UNITS[unit]
    return Quantity(value, unit, value * factor)


def exact_bytes_text(n) -> str:
    """``n`` bytes, exactly, in the course's language: 「4,294,967,296 字节」 (4,294,967,296 bytes)."""
    return CHECKER.say("bytes", n=f"{int(n):,}" if Fraction(n).denominator == 1 else f"{float(n):,.1f}")


def grade_bytes(answer, expected: int, known: dict[int, str] | None = None, what: str | None = None) -> Verdict:
    """A size, checked exactly. ``known`` maps the byte counts of anticipated mistakes to what to say. ``what``: how
    the feedback names the answer (default 「答案」, answer, in the course's language)."""
    if answer is None:
        return todo()
    what = CHECKER.say("the_answer") if what is None else what
    try:
        q = parse_bytes(answer)
    except AnswerError as exc:
        return wrong(str(exc))
    got = CHECKER.say("your_bytes", what=what, quantity=q, exact=exact_bytes_text(q.bytes))
    if q.bytes == expected:
        return right(CHECKER.say("bytes_right", exact=exact_bytes_text(expected), short=format_bytes(expected)))
    if q.value < 1024 and q.unit == "B" and not isinstance(answer, str):
        return wrong(CHECKER.say("bytes_no_unit_number", value=_fraction_text(q.value)))
    if q.value < 1024 and q.unit == "B" and not re.search("[A-Za-z字]", answer):
        return wrong(CHECKER.say("bytes_no_unit_text", answer=quoted(answer), value=_fraction_text(q.value)))
    if q.decimal and q.as_binary() == expected:
        big = BINARY_OF[q.unit]
        return wrong(CHECKER.say("bytes_decimal_unit", unit=q.unit, decimal=DECIMAL_UNITS[q.unit], binary=big,
                                 binary_bytes=BINARY_UNITS[big.upper()]), got)
    if q.decimal and abs(q.bytes - expected) <= Fraction(expected, 100):
        return wrong(CHECKER.say("bytes_rounded", unit=q.unit), got)
    for value, message in (known or {}).items():
        if q.bytes == value or (q.decimal and q.as_binary() == value):
            return wrong(message, got)
    if abs(q.bytes - expected) <= Fraction(expected, 100):
        return wrong(CHECKER.say("bytes_close"), got)
    return wrong(CHECKER.say("bytes_wrong", got=got))


def grade_count(answer, expected: int, known: dict[int, str] | None = None, what: str | None = None) -> Verdict:
    """A whole number (tokens, sequences), checked exactly. ``what``: how the feedback names the answer (default
    「答案」, answer, in the course's language)."""
    if answer is None:
        return todo()
    named, what = what, CHECKER.say("the_answer") if what is None else what
    try:
        value = parse_number(answer, named)  # (None: the number parser's own name for an answer)
    except AnswerError as exc:
        return wrong(str(exc))
    if value.denominator != 1:
        return wrong(CHECKER.say("count_fraction", what=what, value=float(value)))
    n = int(value)
    if n == expected:
        return right(CHECKER.say("count_right", n=n))
    if n in (known or {}):
        return wrong(known[n], CHECKER.say("your_count", what=what, n=n))
    return wrong(CHECKER.say("count_wrong", what=what, n=n))


def pick(answer, choices: list[Choice], what: str | None = None) -> Choice | Verdict:
    """The choice ``answer`` names (keys case-insensitive, spaces and quotes ignored), or the verdict saying why
    there is none (TODO for None). ``what``: how the feedback names a choice (default 「选项」, option)."""
    if answer is None:
        return todo()
    what = CHECKER.say("option") if what is None else what
    if not isinstance(answer, str):
        return wrong(CHECKER.say("choice_not_text", what=what, key=choices[0].key, got=repr(answer)))
    key = unicodedata.normalize("NFKC", answer).strip().strip("\"'「」").strip()
    found = next((c for c in choices if c.matches(key)), None)
    if found is None:
        listed = CHECKER.say("list_sep").join(f"\"{c.key}\"" for c in choices)
        return wrong(CHECKER.say("choice_unknown", answer=quoted(answer), what=what, listed=listed))
    return found


def grade_choice(answer, choices: list[Choice], what: str | None = None) -> Verdict:
    """One of ``choices``, with the feedback written for it."""
    found = pick(answer, choices, what)
    return found if isinstance(found, Verdict) else found.verdict()

