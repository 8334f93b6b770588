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

from .language import get_language
from .phrases import Phrasebook

TODO, RIGHT, WRONG = "todo", "right", "wrong"

# What grading says, in the course's language when it says it. A question's own prompt, options, explanation and hint
# are its lesson's (written in both languages there).
QUESTIONS = Phrasebook("questions", {
    "zh": {
        "clipped": "{head}…（共 {n:,} 个字符）",
        "quoted": "「{text}」",
        "comma": "{text}里的逗号读不懂：小数点请写成「.」，例如 0.5；千位分隔符要每三位一个，例如 131,072",
        "out_of_range": "{text}超出了可以比较的范围（绝对值在 1e-{exponent} 到 1e{exponent} 之间）",
        "too_long": "答案太长了（{n:,} 个字符）：请只写一个数，例如 1024 或 0.5",
        "too_many_digits": "{text}的位数太多：请写成小数或用 e 表示，例如 1.5e9",
        "zero_denominator": "{text}的分母是 0：这不是一个数",
        "not_a_number": "{text}不是一个数：请只写数字，例如 1024 或 0.5",
        "the_answer": "答案",
        "this_integer": "「这个整数」",
        "this_fraction": "「这个分数」",
        "need_number": "{what}需要一个数，收到的是 {got}",
        "need_number_bare": "需要一个数，收到的是 {got}",
        "need_finite": "{what}需要一个有限的数，收到的是 {got}",
        "need_finite_bare": "需要一个有限的数，收到的是 {got}",
        "need_number_type": "{what}需要一个数，收到的是 {type}：{got}",
        "need_number_type_bare": "需要一个数，收到的是 {type}：{got}",
        "empty": "还没有填答案：请输入一个数",
        "right": "正确！{feedback}",
        "wrong_choice": "不对。{feedback}",
        "nothing_chosen": "还没有选择：请点一个选项",
        "wrong_number": "不对：{shown}不是正确答案。{hint}",
        "hint": "提示：{hint}",
        "answer_choice": "答案：{key}。{feedback}",
        "answer_number": "答案：{answer} {unit}。{explanation}",
        "prediction": "{verdict}{answer}",
    },
    "en": {
        "clipped": "{head}… ({n:,} characters in all)",
        "quoted": "\"{text}\"",
        "comma": "Cannot read the comma in {text}: write the decimal point as \".\", e.g. 0.5; a thousands separator "
                 "goes every three digits, e.g. 131,072",
        "out_of_range": "{text} is beyond the range that can be compared (absolute values from 1e-{exponent} "
                        "to 1e{exponent})",
        "too_long": "The answer is too long ({n:,} characters): write a single number, e.g. 1024 or 0.5",
        "too_many_digits": "{text} has too many digits: write it as a decimal or with an exponent, e.g. 1.5e9",
        "zero_denominator": "{text} has a denominator of 0: that is not a number",
        "not_a_number": "{text} is not a number: write digits only, e.g. 1024 or 0.5",
        "the_answer": "the answer",
        "this_integer": "This whole number",
        "this_fraction": "This fraction",
        "need_number": "Expected a number for {what}, got {got}",
        "need_number_bare": "Expected a number, got {got}",
        "need_finite": "Expected a finite number for {what}, got {got}",
        "need_finite_bare": "Expected a finite number, got {got}",
        "need_number_type": "Expected a number for {what}, got {type}: {got}",
        "need_number_type_bare": "Expected a number, got {type}: {got}",
        "empty": "No answer yet: type a number",
        "right": "Right! {feedback}",
        "wrong_choice": "Not quite. {feedback}",
        "nothing_chosen": "Nothing chosen yet: click an option",
        "wrong_number": "Not quite: {shown} is not the answer.{hint}",
        "hint": " Hint: {hint}",
        "answer_choice": "Answer: {key}. {feedback}",
        "answer_number": "Answer: {answer} {unit}. {explanation}",
        "prediction": "{verdict} {answer}",
    },
})


def quoted(text: str) -> str:
    """``text`` quoted as a message quotes what the learner wrote: 「…」 in Chinese, "…" in English."""
    return QUESTIONS.say("quoted", text=text)


# -- verdicts --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """What a grader found: ``status`` (TODO, RIGHT or WRONG), one sentence in the course's language, and detail
    lines (the failing case, expected and got)."""

    status: str
    message: str
    details: tuple[str, ...] = ()


def right(message: str, *details: str) -> Verdict:
    return Verdict(RIGHT, message, tuple(details))


def wrong(message: str, *details: str) -> Verdict:
    return Verdict(WRONG, message, tuple(details))


def clip(text: str, limit: int = 40) -> str:
    """``text`` shortened to ``limit`` characters (an answer or an error echoed back is never a page long)."""
    return text if len(text) <= limit else QUESTIONS.say("clipped", head=text[:limit - 1], n=len(text))


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
        raise AnswerError(QUESTIONS.say("comma", text=quoted(clip(text))))
    return text


def _bounded(value: Fraction, shown: str) -> Fraction:
    """``value``, or :class:`AnswerError` when it lies beyond what can be compared; ``shown``: how the message names
    it (already quoted)."""
    if value and not Fraction(1, 10**MAX_EXPONENT) <= abs(value) <= 10**MAX_EXPONENT:
        raise AnswerError(QUESTIONS.say("out_of_range", text=shown, exponent=MAX_EXPONENT))
    return value


def typed_number(text: str) -> Fraction:
    """A number typed as text: "1024", "0.5", "1.5e9", "3/4" (bounded digits and exponent), else AnswerError."""
    what = quoted(clip(text))
    if len(text) > MAX_ANSWER_CHARS:
        raise AnswerError(QUESTIONS.say("too_long", n=len(text)))
    ratio = RATIO.match(text)
    if ratio:
        top, bottom = ratio.groups()
        if max(len(top), len(bottom)) > MAX_DIGITS + 1:
            raise AnswerError(QUESTIONS.say("too_many_digits", text=what))
        if int(bottom) == 0:
            raise AnswerError(QUESTIONS.say("zero_denominator", text=what))
        return _bounded(Fraction(int(top), int(bottom)), what)
    m = NUMBER.match(text)
    if not m:
        raise AnswerError(QUESTIONS.say("not_a_number", text=what))
    if len(m.group(1).replace(".", "").lstrip("0")) > MAX_DIGITS:
        raise AnswerError(QUESTIONS.say("too_many_digits", text=what))
    exponent = m.group(2)
    if exponent is not None and len(exponent.lstrip("+-").lstrip("0")) > 4:
        raise AnswerError(QUESTIONS.say("out_of_range", text=what, exponent=MAX_EXPONENT))
    return _bounded(Fraction(text), what)


def _subject(what: str) -> str:
    """「答案」 as it is; an identifier such as ttft_ms gets the space GLOSSARY.md asks for before Chinese (in
    Chinese; an English sentence spaces its words itself)."""
    return f"{what} " if what and what[-1].isascii() and get_language() == "zh" else what


def _say_about(key: str, what: str, **fields) -> str:
    """``key``'s message about ``what`` (an answer's name), or its ``_bare`` form when ``what`` is empty."""
    return QUESTIONS.say(key, what=_subject(what), **fields) if what else QUESTIONS.say(f"{key}_bare", **fields)


def parse_number(answer, what: str | None = None) -> Fraction:
    """Any real number (int, float, numpy's, a 0-d tensor or array, Fraction) or numeric string as an exact
    Fraction (floats as their shortest decimal). The value is read from the object's own type (a float subclass
    cannot change what it is worth); digits and exponents are bounded, so any answer is read at once. ``what``: how
    a message names the answer (default 「答案」, the answer, in the course's language; "" for no name)."""
    what = QUESTIONS.say("the_answer") if what is None else what
    if isinstance(answer, bool) or answer is None:
        raise AnswerError(_say_about("need_number", what, got=repr(answer)))
    if isinstance(answer, str):
        if not answer.strip():
            raise AnswerError(QUESTIONS.say("empty"))
        return typed_number(normalize_answer(answer))
    if isinstance(answer, int):
        return _bounded(Fraction(int.__int__(answer)), QUESTIONS.say("this_integer"))
    if isinstance(answer, Fraction):
        return _bounded(Fraction(answer.numerator, answer.denominator), QUESTIONS.say("this_fraction"))
    if isinstance(answer, numbers.Integral):
        return _bounded(Fraction(int(answer)), QUESTIONS.say("this_integer"))
    if isinstance(answer, numbers.Real):
        value = float.__float__(answer) if isinstance(answer, float) else float(answer)
        if not math.isfinite(value):
            raise AnswerError(_say_about("need_finite", what, got=repr(value)))
        return _bounded(Fraction(repr(value)), quoted(clip(repr(value))))
    if getattr(answer, "shape", None) == () or (hasattr(answer, "numel") and getattr(answer, "ndim", 1) == 0):
        item = answer.item()  # a 0-d tensor or array: its one number
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            return parse_number(item, what or None)
    raise AnswerError(_say_about("need_number_type", what, type=type(answer).__name__, got=clip(repr(answer))))


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
        return (right if self.correct else wrong)(
            QUESTIONS.say("right" if self.correct else "wrong_choice", feedback=self.feedback))


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
            return Verdict(TODO, QUESTIONS.say("nothing_chosen"))
        if isinstance(response, bool) or not isinstance(response, int) or not 0 <= response < len(question.choices):
            raise ValueError(f"response must be the index of a choice in [0, {len(question.choices)}), "
                             f"got {response!r}")
        return question.choices[response].verdict()
    try:
        value = parse_number(response)
    except AnswerError as exc:  # not a number (None, True, a list, "abc", nan ...): said why, not counted
        return Verdict(TODO, str(exc))
    if close(float(value), float(question.answer), question.rel_tol):
        return right(QUESTIONS.say("right", feedback=question.explanation))
    return wrong(QUESTIONS.say("wrong_number", shown=quoted(_shown(response, value)),
                               hint=QUESTIONS.say("hint", hint=question.hint) if hint else ""))


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
        return Verdict(TODO, QUESTIONS.say("answer_choice", key=key.key, feedback=key.feedback))
    return Verdict(TODO, QUESTIONS.say("answer_number", answer=question.answer_text, unit=question.unit,
                                       explanation=question.explanation))


def prediction_verdict(question: Question, response) -> Verdict:
    """A checkpoint's grade of a prediction, with the explanation whether it was right or wrong: a wrong one also
    gets the key and why (no hint: the prediction is committed, the explanation is what comes next)."""
    verdict = grade(question, response, hint=False)
    if verdict.status != WRONG:
        return verdict
    return wrong(QUESTIONS.say("prediction", verdict=verdict.message, answer=answer_verdict(question).message))


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
