"""The one checker every chapter's exercises use: grade an answer, say what went wrong, never raise.

A chapter module (``ch01``, ``ch02`` ...) defines its :class:`Exercise` objects (task, stub cell, check cell,
hints) and one ``grade_*`` function per exercise: a pure function from the learner's answer to a
:class:`Verdict`. The notebook's check cell calls ``chNN.check_*(...)``, which goes through :func:`check`:
it runs the grader, counts wrong attempts (the hint appears from the second one), and returns a
:class:`Feedback` that Jupyter and Colab render as plain HTML (``_repr_html_``) and a terminal as text.

Learner code is called through :func:`call`, which turns an exception into :class:`LearnerError` naming the
case; an answer left as the stub gave it is 「还没有完成」, never an error.

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

from ..memory import format_bytes
from ..questions import (MAX_ANSWER_CHARS, RIGHT, TODO, WRONG, AnswerError, Choice, Verdict, clip, close,  # noqa: F401
                         parse_number, right, wrong)
from ..questions import normalize_answer as _normalize, typed_number as _typed_number

BUG = "bug"  # TODO, RIGHT and WRONG are kvlab.questions'
NOT_DONE = "还没有完成"


@dataclass(frozen=True)
class Exercise:
    """One exercise as the notebook shows it. ``key`` is ``"chNN.name"``; the three sources are cells."""

    key: str
    title: str  # Chinese, e.g. 「亲手写一步有缓存的注意力」
    task: str  # markdown under the title
    stub: str  # the code cell the learner edits
    check: str  # the code cell that calls the checker
    hints: tuple[str, ...]  # shown one more per wrong attempt, from the second

    @property
    def chapter(self) -> str:
        return self.key.split(".")[0]

    @property
    def name(self) -> str:
        return self.key.split(".")[1]


def todo(message: str = "") -> Verdict:
    return Verdict(TODO, f"{NOT_DONE}：{message}" if message else f"{NOT_DONE}。")


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
        where = f"（{case}）" if case else ""
        raise LearnerError(wrong(f"你的代码调用了 exit() 或 sys.exit(){where}（SystemExit {exc.code!r}）：函数要用 return 返回结果，"
                                 "不能退出")) from None
    except Exception as exc:  # the learner's code: any error is feedback, never a traceback
        where = f"（{case}）" if case else ""
        line = clip("".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1], 300)
        raise LearnerError(wrong(f"你的代码出错了{where}：{line}", *([extra] if extra else []))) from None


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
    return wrong(f"你的函数调用了参考实现 {name}：检查程序正是拿它来对照的，这样比较没有意义。请用自己的代码写出来。")


# -- attempts and feedback ----------------------------------------------------------------------------
ATTEMPTS: Counter = Counter()  # wrong attempts per exercise key, in this kernel

TEACHER_ENV = "KVLAB_TEACHER"
TEACHER_ON = ("1", "true", "yes", "on")  # what KVLAB_TEACHER may say to show every solution (any case)
SOLUTION_LOCKED = "参考答案会在你第一次检查自己写的答案之后出现：先改上面的代码格，再运行这一格。"


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
    state = "每个练习的检查结果都附上参考答案" if SOLUTION_GATE.teaching() else "参考答案在第一次检查了自己的答案之后出现"
    print(f"kvlab：从现在起，这个 kernel 里{state}（重新运行检查格生效）。")


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
        """Everything the learner reads, as plain text."""
        lines = [f"{self.exercise.title}：{self.message}", *(f"  {d}" for d in self.details)]
        if self.hint:
            lines.append(f"提示：{self.hint}")
        if self.solution_locked:
            lines.append(SOLUTION_LOCKED)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        fg, bg, icon = STYLES[self.status]
        parts = [f"<b>{icon} {html.escape(self.exercise.title)}</b>　{html.escape(self.message)}"]
        if self.details:
            items = "".join(f"<li>{html.escape(d)}</li>" for d in self.details)
            parts.append(f'<ul class="kvlab-exercise-details" style="margin:4px 0 0 0">{items}</ul>')
        if self.hint:
            parts.append(f'<div class="kvlab-exercise-hint" style="margin-top:4px">提示：{html.escape(self.hint)}</div>')
        if self.solution:
            parts.append('<details class="kvlab-exercise-solution" style="margin-top:6px;color:#333">'
                         '<summary style="cursor:pointer">显示参考答案</summary>'
                         f'<pre style="background:#f7f7f7;padding:6px;margin:4px 0">{html.escape(self.solution)}</pre>'
                         '</details>')
        elif self.solution_locked:
            parts.append('<div class="kvlab-exercise-solution-locked" style="margin-top:4px;color:#555">'
                         f'{html.escape(SOLUTION_LOCKED)}</div>')
        return (f'<div class="kvlab-exercise-feedback kvlab-exercise-{self.status}" '
                f'data-exercise="{self.exercise.key}" '
                f'style="background:{bg};color:{fg};padding:6px 10px;border-radius:4px;margin:4px 0">'
                + "".join(parts) + "</div>")


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
        verdict = wrong(f"你的代码调用了 exit() 或 sys.exit()（SystemExit {exc.code!r}）：函数要用 return 返回结果，不能退出")
    except Exception as exc:  # a bug in the checker itself: say so instead of blaming the learner
        line = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
        verdict = Verdict(BUG, f"检查程序本身出错了（这是 kvlab 的 bug，请报告）：{line}")
    hint = None
    if verdict.status == WRONG:
        ATTEMPTS[exercise.key] += 1
        failures = ATTEMPTS[exercise.key]
        if failures >= 2 and exercise.hints:  # one more each time, the earlier ones kept: a hint may fit another field
            hint = " ".join(exercise.hints[:failures - 1])
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
    return wrong(f"需要一个函数，收到的是 {type(answer).__name__}：请把上一格里定义的函数 {name} 传进来")


def unwritten(fn, stub_source: str, name: str, still_todo: str) -> Verdict | None:
    """The verdict for a function answer that cannot be graded yet: not a function, or still the stub
    (「还没有完成」 with ``still_todo``); None when it is the learner's own function."""
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
            raise AnswerError(f"答案太长了（{len(answer):,} 个字符）：请写一个数加单位，例如 \"1.5 GiB\"")
        m = QUANTITY.match(_normalize(answer))
        if not m:
            raise AnswerError(f"读不懂「{clip(answer)}」：请写一个数加单位，例如 \"1.5 GiB\"，或者直接写字节数（整数）")
        unit = UNIT_NAMES.get(m.group(2).upper() if m.group(2) != "字节" else "字节") if m.group(2) else "B"
        if unit is None:
            raise AnswerError(f"不认识单位「{clip(m.group(2))}」：请用 B、KiB、MiB、GiB（或 KB、MB、GB）")
        value = _typed_number(m.group(1))
    else:
        value, unit = parse_number(answer), "B"
    factor = BINARY_UNITS.get(unit.upper()) or DECIMAL_UNITS[unit]
    return Quantity(value, unit, value * factor)


def exact_bytes_text(n) -> str:
    return f"{int(n):,} 字节" if Fraction(n).denominator == 1 else f"{float(n):,.1f} 字节"


def grade_bytes(answer, expected: int, known: dict[int, str] | None = None, what: str = "答案") -> Verdict:
    """A size, checked exactly. ``known`` maps the byte counts of anticipated mistakes to what to say."""
    if answer is None:
        return todo()
    try:
        q = parse_bytes(answer)
    except AnswerError as exc:
        return wrong(str(exc))
    got = f"你的{what}：{q} = {exact_bytes_text(q.bytes)}"
    if q.bytes == expected:
        return right(f"正确！{exact_bytes_text(expected)} = {format_bytes(expected)}。")
    if q.value < 1024 and q.unit == "B" and not isinstance(answer, str):
        return wrong(f"你写的是 {_fraction_text(q.value)} 字节：不带单位的数按字节算。要用 GiB 之类的单位，请写成字符串，"
                     f"例如 \"{_fraction_text(q.value)} GiB\"。")
    if q.value < 1024 and q.unit == "B" and not re.search("[A-Za-z字]", answer):
        return wrong(f"你写的「{answer}」没有单位，按字节算就是 {_fraction_text(q.value)} 字节。请加上单位，"
                     f"例如 \"{_fraction_text(q.value)} MiB\"。")
    if q.decimal and q.as_binary() == expected:
        big = BINARY_OF[q.unit]
        return wrong(f"数值对了，单位错了：1 {q.unit} = {DECIMAL_UNITS[q.unit]:,} 字节（10 的幂），而这个数是按 "
                     f"1 {big} = {BINARY_UNITS[big.upper()]:,} 字节（1024 的幂）算出来的。请把单位写成 {big}。", got)
    if q.decimal and abs(q.bytes - expected) <= Fraction(expected, 100):
        return wrong(f"大约对，但题目要精确值：{q.unit} 是 10 的幂（1 GB = 10⁹ 字节），换算时四舍五入了。"
                     "请写出字节数，或者用 GiB、MiB（1024 的幂）写出精确值。", got)
    for value, message in (known or {}).items():
        if q.bytes == value or (q.decimal and q.as_binary() == value):
            return wrong(message, got)
    if abs(q.bytes - expected) <= Fraction(expected, 100):
        return wrong("很接近，但不精确：缓存的字节数是整数，请写出精确值（字节数，或者能整除的 GiB、MiB）。", got)
    return wrong(f"不对。{got}。", )


def grade_count(answer, expected: int, known: dict[int, str] | None = None, what: str = "答案") -> Verdict:
    """A whole number (tokens, sequences), checked exactly."""
    if answer is None:
        return todo()
    try:
        value = parse_number(answer, what)
    except AnswerError as exc:
        return wrong(str(exc))
    if value.denominator != 1:
        return wrong(f"{what}应当是整数，你写的是 {float(value):g}：放不下半个，记得向下取整。")
    n = int(value)
    if n == expected:
        return right(f"正确！{n:,}。")
    if n in (known or {}):
        return wrong(known[n], f"你的{what}：{n:,}")
    return wrong(f"不对：你的{what}是 {n:,}。")


def pick(answer, choices: list[Choice], what: str = "选项") -> Choice | Verdict:
    """The choice ``answer`` names (keys case-insensitive, spaces and quotes ignored), or the verdict saying why
    there is none (TODO for None)."""
    if answer is None:
        return todo()
    if not isinstance(answer, str):
        return wrong(f"{what}要写成字符串，例如 \"{choices[0].key}\"，收到的是 {answer!r}")
    key = unicodedata.normalize("NFKC", answer).strip().strip("\"'「」").strip()
    found = next((c for c in choices if c.matches(key)), None)
    if found is None:
        shown = "、".join(f"\"{c.key}\"" for c in choices)
        return wrong(f"没有「{answer}」这个{what}：请从 {shown} 中选一个")
    return found


def grade_choice(answer, choices: list[Choice], what: str = "选项") -> Verdict:
    """One of ``choices``, with the feedback written for it."""
    found = pick(answer, choices, what)
    return found if isinstance(found, Verdict) else found.verdict()

