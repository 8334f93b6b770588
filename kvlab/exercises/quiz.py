"""Self-check questions (multiple choice and numeric) and how they are graded: a client of the checker.

A chapter builds :class:`ChoiceQuestion` and :class:`NumberQuestion` objects (numeric answer keys computed
by kvlab, never typed in); :func:`grade` grades one response with the checker's own rules and types: a
number is read by :func:`~kvlab.exercises.checker.parse_number`, an option is a
:class:`~kvlab.exercises.checker.Choice`, and the result is a :class:`~kvlab.exercises.checker.Verdict`:
RIGHT, WRONG, or TODO for a response that cannot be graded (nothing chosen, an empty box, text that is
not a number), which never counts as a wrong answer. :class:`kvlab.viz.quiz.Quiz` shows the questions
as widgets and keeps the score.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from .checker import TODO, AnswerError, Choice, Verdict, clip, close, parse_number, right, wrong


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


def grade(question: Question, response) -> Verdict:
    """Grade one response: the index of a choice (``None``: nothing chosen) or the number answered (typed text, or
    any other value: whatever cannot be read as a number is TODO with the reason in Chinese, never an error)."""
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
    shown = response.strip() if isinstance(response, str) else f"{float(value):.10g}"  # as typed, or the value read
    return wrong(f"不对：「{clip(shown)}」不是正确答案。提示：{question.hint}")


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

