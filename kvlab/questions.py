"""Answers a learner gives and the questions they answer: the course's neutral home for grading.

A lesson builds :class:`ChoiceQuestion` and :class:`NumberQuestion` objects (numeric answer keys computed by kvlab,
never typed in); :func:`grade` grades one response and returns a :class:`Verdict`: RIGHT, WRONG, or TODO for a
response that cannot be graded (nothing chosen, an empty box, text that is not a number), which never counts as a
wrong answer. A typed number is read by :func:`parse_number` (one parser for the quiz and the exercises), an option
is a :class:`Choice`. :class:`QuizState` keeps a quiz's score (answers, wrong tries, answers shown);
:class:`CheckpointState` a checkpoint's: one prediction per question, graded, then explained.

Nothing here imports a lesson, a plot, a widget or an exercise: lessons write questions with it, the widgets
(:mod:`kvlab.viz.quiz`) show them, the exercises' checker (:mod:`kvlab.exercises.checker`) grades with the same
primitives, and the teacher's keys read them.
"""
from __future__ import annotations

import math
import numbers
import re
import unicodedata
from dataclasses import dataclass, field
from fractions import Fraction

TODO, RIGHT, WRONG = "todo", "right", "wrong"


# -- verdicts --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """What a grader found: ``status`` (TODO, RIGHT or WRONG), one Chinese sentence, and detail lines
    (the failing case, expected and got)."""

    status: str
    message: str
    details: tuple[str, ...] = ()


def right(message: str, *details: str) -> Verdict:
    return Verdict(RIGHT, message, tuple(details))


def wrong(message: str, *details: str) -> Verdict:
    return Verdict(WRONG, message, tuple(details))


def clip(text: str, limit: int = 40) -> str:
    """``text`` shortened to ``limit`` characters (an answer or an error echoed back is never a page long)."""
    return text if len(text) <= limit else f"{text[:limit - 1]}…（共 {len(text):,} 个字符）"


# -- numbers typed as answers ----------------------------------------------------------------------------------
class AnswerError(ValueError):
    """An answer that cannot be read (the message says how to write it)."""


MAX_ANSWER_CHARS = 60  # a number typed as an answer is never longer (longer text is refused at once)
MAX_DIGITS = 40  # digits of a typed number (each side of a fraction)
MAX_EXPONENT = 300  # answers lie within 1e-300 .. 1e300 of zero: Fractions stay small, floats finite
NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)(?:[eE]([-+]?\d+))?$")
RATIO = re.compile(r"^([-+]?\d+)\s*/\s*([-+]?\d+)$")
THOUSANDS = re.compile(r"^[-+]?\d{1,3}(?:([,_， ])\d{3})(?:\1\d{3})*(?:\.\d*)?(?:[eE][-+]?\d+)?$")


LEADING = re.compile(r"[-+]?\d[\d,_， ]*(?:\.\d*)?(?:[eE][-+]?\d+)?")


def normalize_answer(text: str) -> str:
    """Full-width digits made ASCII; thousands separators (, ， _ or spaces, every three digits) removed from the
    number (a unit may follow). A comma anywhere else is a decimal comma or a typo: :class:`AnswerError` (never read
    as a bigger whole number: 0,5 is not 5)."""
    text = unicodedata.normalize("NFKC", text).strip()
    m = LEADING.match(text)
    number = m.group(0).strip() if m else ""
    if number and THOUSANDS.match(number):
        return re.sub(r"[,_， ]", "", number) + text[len(number):]
    if "," in text or "，" in text:
        raise AnswerError(f"「{clip(text)}」里的逗号读不懂：小数点请写成「.」，例如 0.5；千位分隔符要每三位一个，"
                          "例如 131,072")
    return text


def _bounded(value: Fraction, shown: str) -> Fraction:
    if value and not Fraction(1, 10**MAX_EXPONENT) <= abs(value) <= 10**MAX_EXPONENT:
        raise AnswerError(f"「{clip(shown)}」超出了可以比较的范围（绝对值在 1e-{MAX_EXPONENT} 到 1e{MAX_EXPONENT} 之间）")
    return value


def typed_number(text: str) -> Fraction:
    """A number typed as text: "1024", "0.5", "1.5e9", "3/4" (bounded digits and exponent), else AnswerError."""
    what = clip(text)
    if len(text) > MAX_ANSWER_CHARS:
        raise AnswerError(f"答案太长了（{len(text):,} 个字符）：请只写一个数，例如 1024 或 0.5")
    ratio = RATIO.match(text)
    if ratio:
        top, bottom = ratio.groups()
        if max(len(top), len(bottom)) > MAX_DIGITS + 1:
            raise AnswerError(f"「{what}」的位数太多：请写成小数或用 e 表示，例如 1.5e9")
        if int(bottom) == 0:
            raise AnswerError(f"「{what}」的分母是 0：这不是一个数")
        return _bounded(Fraction(int(top), int(bottom)), text)
    m = NUMBER.match(text)
    if not m:
        raise AnswerError(f"「{what}」不是一个数：请只写数字，例如 1024 或 0.5")
    if len(m.group(1).replace(".", "").lstrip("0")) > MAX_DIGITS:
        raise AnswerError(f"「{what}」的位数太多：请写成小数或用 e 表示，例如 1.5e9")
    exponent = m.group(2)
    if exponent is not None and len(exponent.lstrip("+-").lstrip("0")) > 4:
        raise AnswerError(f"「{what}」超出了可以比较的范围（绝对值在 1e-{MAX_EXPONENT} 到 1e{MAX_EXPONENT} 之间）")
    return _bounded(Fraction(text), text)


def _subject(what: str) -> str:
    """「答案」 as it is; an identifier such as ttft_ms gets the space GLOSSARY.md asks for before Chinese."""
    return f"{what} " if what and what[-1].isascii() else what


def parse_number(answer, what: str = "答案") -> Fraction:
    """Any real number (int, float, numpy's, a 0-d tensor or array, Fraction) or numeric string as an exact
    Fraction (floats as their shortest decimal). The value is read from the object's own type (a float subclass
    cannot change what it is worth); digits and exponents are bounded, so any answer is read at once."""
    what = _subject(what)
    if isinstance(answer, bool) or answer is None:
        raise AnswerError(f"{what}需要一个数，收到的是 {answer!r}")
    if isinstance(answer, str):
        if not answer.strip():
            raise AnswerError("还没有填答案：请输入一个数")
        return typed_number(normalize_answer(answer))
    if isinstance(answer, int):
        return _bounded(Fraction(int.__int__(answer)), "这个整数")
    if isinstance(answer, Fraction):
        return _bounded(Fraction(answer.numerator, answer.denominator), "这个分数")
    if isinstance(answer, numbers.Integral):
        return _bounded(Fraction(int(answer)), "这个整数")
    if isinstance(answer, numbers.Real):
        value = float.__float__(answer) if isinstance(answer, float) else float(answer)
        if not math.isfinite(value):
            raise AnswerError(f"{what}需要一个有限的数，收到的是 {value!r}")
        return _bounded(Fraction(repr(value)), repr(value))
    if getattr(answer, "shape", None) == () or (hasattr(answer, "numel") and getattr(answer, "ndim", 1) == 0):
        item = answer.item()  # a 0-d tensor or array: its one number
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            return parse_number(item, what.strip() or "答案")
    raise AnswerError(f"{what}需要一个数，收到的是 {type(answer).__name__}：{clip(repr(answer))}")


def close(got: float, expected: float, rel: float) -> bool:
    return math.isfinite(got) and abs(got - expected) <= rel * abs(expected)


# -- options ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Choice:
    """One option: of an exercise (the learner writes its ``key``) or of a quiz question (``key`` is the text shown)."""

    key: str  # what the learner writes ("A", "rope_offset" ...) or, in a quiz, the option's text
    correct: bool
    feedback: str
    aliases: tuple[str, ...] = ()  # other spellings accepted for the same choice

    def matches(self, text: str) -> bool:
        return text.lower() in (k.lower() for k in (self.key, *self.aliases))

    def verdict(self) -> Verdict:
        """What picking this choice earns: right or wrong, with the feedback written for it."""
        return (right if self.correct else wrong)(("正确！" if self.correct else "不对。") + self.feedback)


# -- questions -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChoiceQuestion:
    """A question with options; the learner picks one (its ``key`` is the text shown)."""

    section: str  # e.g. "3.1"
    prompt: str
    choices: tuple[Choice, ...]

    def __post_init__(self):
        if sum(c.correct for c in self.choices) != 1 or len(self.choices) < 2:
            raise ValueError(f"choices: a question needs 2+ choices and exactly one correct one ({self.prompt!r})")


@dataclass(frozen=True)
class NumberQuestion:
    """A question answered with a number; right when within ``rel_tol`` of ``answer`` (relative)."""

    section: str
    prompt: str
    answer: int | float | Fraction  # computed by kvlab
    unit: str  # what the box expects, e.g. "字节" (shown next to it)
    explanation: str  # shown once the answer is right
    hint: str  # shown after a wrong answer (does not give the number away)
    rel_tol: float = 0.0

    def __post_init__(self):
        if isinstance(self.answer, bool) or not isinstance(self.answer, (int, float, Fraction)):
            raise ValueError(f"answer must be a number, got {self.answer!r}")
        if not 0 <= self.rel_tol < 1:
            raise ValueError(f"rel_tol must be in [0, 1), got {self.rel_tol!r}")

    @property
    def answer_text(self) -> str:
        """The key as a learner would type it: 131,072; 1; 0.9766 (4 significant digits past the point)."""
        value = float(self.answer)
        return f"{round(value):,}" if value.is_integer() else f"{value:,.4g}"


Question = ChoiceQuestion | NumberQuestion


def graded(verdict: Verdict) -> bool:
    """Whether a verdict counts (right or wrong); a TODO one asks for a response that can be graded."""
    return verdict.status != TODO


def _shown(response, value: Fraction) -> str:
    """A numeric response as the learner typed it, or the value read from it."""
    return clip(response.strip() if isinstance(response, str) else f"{float(value):.10g}")


def grade(question: Question, response, hint: bool = True) -> Verdict:
    """Grade one response: the index of a choice (``None``: nothing chosen) or the number answered (typed text, or
    any other value: whatever cannot be read as a number is TODO with the reason in Chinese, never an error).
    ``hint=False`` leaves a wrong number's hint out (a checkpoint shows the answer instead)."""
    if isinstance(question, ChoiceQuestion):
        if response is None:
            return Verdict(TODO, "还没有选择：请点一个选项")
        if isinstance(response, bool) or not isinstance(response, int) or not 0 <= response < len(question.choices):
            raise ValueError(f"response must be the index of a choice in [0, {len(question.choices)}), "
                             f"got {response!r}")
        return question.choices[response].verdict()
    try:
        value = parse_number(response)
    except AnswerError as exc:  # not a number (None, True, a list, "abc", nan ...): said why, not counted
        return Verdict(TODO, str(exc))
    if close(float(value), float(question.answer), question.rel_tol):
        return right(f"正确！{question.explanation}")
    return wrong(f"不对：「{_shown(response, value)}」不是正确答案。" + (f"提示：{question.hint}" if hint else ""))


def response_key(question: Question, response):
    """What makes two responses the same attempt: a number's value (7, "7.0" and "７" are one answer), a choice's
    index."""
    if isinstance(question, NumberQuestion):
        try:
            return parse_number(response)
        except AnswerError:
            return None
    return response


def answer_verdict(question: Question) -> Verdict:
    """What 「显示答案」 shows: the key and why (TODO: a revealed answer is not graded and earns no point)."""
    if isinstance(question, ChoiceQuestion):
        key = next(c for c in question.choices if c.correct)
        return Verdict(TODO, f"答案：{key.key}。{key.feedback}")
    return Verdict(TODO, f"答案：{question.answer_text} {question.unit}。{question.explanation}")


def prediction_verdict(question: Question, response) -> Verdict:
    """A checkpoint's grade of a prediction, with the explanation whether it was right or wrong: a wrong one also
    gets the key and why (no hint: the prediction is committed, the explanation is what comes next)."""
    verdict = grade(question, response, hint=False)
    if verdict.status != WRONG:
        return verdict
    return wrong(f"{verdict.message}{answer_verdict(question).message}")


# -- a quiz's and a checkpoint's state ---------------------------------------------------------------------
REVEAL_AFTER = 2  # wrong answers to one question before its answer can be shown


@dataclass
class QuizState:
    """A quiz's grading state: the latest graded result of each question (``None``: not answered yet, or the answer
    was not valid), the wrong answers given to each, which answers were shown, and which may be shown."""

    questions: tuple
    results: list = field(default_factory=list)
    wrong: list = field(default_factory=list)
    revealed: list = field(default_factory=list)
    offered: list = field(default_factory=list)  # 「显示答案」 offered (after REVEAL_AFTER wrong answers)
    last_graded: list = field(default_factory=list)  # the latest graded (valid) response's key to each question

    def __post_init__(self):
        self.questions = tuple(self.questions)
        if not self.questions:
            raise ValueError("questions: a quiz needs at least one question")
        n = len(self.questions)
        self.results, self.wrong, self.revealed = [None] * n, [0] * n, [False] * n
        self.offered, self.last_graded = [False] * n, [None] * n

    @property
    def right(self) -> int:
        return sum(1 for r in self.results if r is True)

    @property
    def answered(self) -> int:
        return sum(1 for r in self.results if r is not None)

    def answer(self, index: int, response) -> Verdict:
        """Grade ``response`` to question ``index`` (0-based) and update the score."""
        fb = grade(self.questions[index], response)
        if self.revealed[index] or not graded(fb):  # shown: feedback, no point; not gradable: not counted
            if not self.revealed[index]:
                self.results[index] = None
            return fb
        self.results[index] = fb.status == RIGHT
        # the same answer graded again (Enter, then 检查; or a click that reached the kernel before the box's new
        # text) repeats its feedback but is not another wrong attempt
        key = response_key(self.questions[index], response)
        again = key == self.last_graded[index]
        self.last_graded[index] = key
        self.wrong[index] += fb.status == WRONG and not again
        self.offered[index] = self.wrong[index] >= REVEAL_AFTER and fb.status != RIGHT  # withdrawn once right
        return fb

    def reveal(self, index: int) -> Verdict:
        """Question ``index``'s answer and why; it then counts as not answered right."""
        self.revealed[index], self.results[index], self.offered[index] = True, False, False
        return answer_verdict(self.questions[index])


@dataclass
class CheckpointState(QuizState):
    """A checkpoint's state: the first gradable response to each question is its prediction, graded and explained
    at once (:func:`prediction_verdict`), then kept: later responses get the same verdict and change nothing."""

    verdicts: list = field(default_factory=list)  # the prediction's verdict per question (None: not predicted)

    def __post_init__(self):
        super().__post_init__()
        self.verdicts = [None] * len(self.questions)

    def committed(self, index: int) -> bool:
        return self.verdicts[index] is not None

    def answer(self, index: int, response) -> Verdict:
        if self.committed(index):
            return self.verdicts[index]
        fb = prediction_verdict(self.questions[index], response)
        if graded(fb):
            self.results[index], self.verdicts[index] = fb.status == RIGHT, fb
            self.wrong[index] = int(fb.status == WRONG)
        return fb

    def reveal(self, index: int) -> Verdict:  # a checkpoint explains every prediction: nothing to reveal
        raise ValueError("index: a checkpoint shows the answer with the graded prediction, never before")
