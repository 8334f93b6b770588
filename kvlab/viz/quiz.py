"""A small self-check quiz in ipywidgets: multiple-choice and numeric questions, immediate feedback with an
explanation, a running score, and the answer on request after repeated wrong answers.

Any chapter can use it: build :class:`ChoiceQuestion` / :class:`NumberQuestion` objects (numeric answer keys
computed by kvlab, never typed in), then ``Quiz(questions)``. :func:`check` is the whole grading logic and is
pure, so tests call it directly; the widgets only wire it. An empty or non-numeric answer is not graded: it
gets a message saying what to type. After ``REVEAL_AFTER`` wrong answers to a question a 「显示答案」 button
appears under it; a revealed answer earns no point.

Why not ``jupyterquiz`` (the ecosystem's quiz renderer, tried first for chapter 3.5): its numeric box is
labelled in fixed English ("Type numeric answer here:"); an empty answer is graded wrong with no message; it
keeps no score; in JupyterLab 4 every answer throws ``pageerror: MathJax.typeset is not a function`` (the
browser suite counts page errors as failures); and its answers live only in the browser's JavaScript, so
neither the kernel nor pytest can check them against kvlab.

CSS hooks (for the browser tests): ``.kvlab-quiz`` on the whole quiz, ``.kvlab-quiz-q{n}`` on question n
(1-based), and inside it ``.kvlab-quiz-choices`` (radio buttons) or ``.kvlab-quiz-input`` (text box) with
``.kvlab-quiz-check`` (button), then ``.kvlab-quiz-feedback`` and ``.kvlab-quiz-reveal`` (the 「显示答案」
button, hidden until needed); ``.kvlab-quiz-score`` on the score line.
"""
from __future__ import annotations

import html
import math
import unicodedata
from dataclasses import dataclass, field
from fractions import Fraction

import ipywidgets as W

from .widgets import message_html, show

RIGHT, WRONG, INVALID = "right", "wrong", "invalid"
REVEAL_AFTER = 2  # wrong answers to one question before its answer can be shown


@dataclass(frozen=True)
class Choice:
    """One option of a multiple-choice question, with what to tell a learner who picks it."""

    text: str
    correct: bool
    explanation: str


@dataclass(frozen=True)
class ChoiceQuestion:
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


@dataclass(frozen=True)
class Feedback:
    status: str  # RIGHT, WRONG or INVALID (not graded)
    message: str  # Chinese, plain text

    @property
    def right(self) -> bool:
        return self.status == RIGHT


def parse_number(text) -> float:
    """What a learner typed -> a float. Accepts full-width digits, thousands separators (, ，and spaces) and
    scientific notation; raises ``ValueError`` with a Chinese message for anything else."""
    if not isinstance(text, str):
        raise ValueError(f"需要输入一个数，收到的是 {text!r}")
    cleaned = unicodedata.normalize("NFKC", text).strip()
    for sep in (",", "，", " ", "_"):
        cleaned = cleaned.replace(sep, "")
    if not cleaned:
        raise ValueError("还没有填答案：请输入一个数")
    try:
        value = float(cleaned)
    except ValueError:
        raise ValueError(f"「{text.strip()}」不是一个数：请只输入数字，例如 1024 或 0.5") from None
    if not math.isfinite(value):
        raise ValueError(f"「{text.strip()}」不是一个有限的数")
    return value


def check(question: Question, response) -> Feedback:
    """Grade one response: the index of a choice (``None``: nothing chosen) or the text typed for a number."""
    if isinstance(question, ChoiceQuestion):
        if response is None:
            return Feedback(INVALID, "还没有选择：请点一个选项")
        if isinstance(response, bool) or not isinstance(response, int) or not 0 <= response < len(question.choices):
            raise ValueError(f"response must be the index of a choice in [0, {len(question.choices)}), "
                             f"got {response!r}")
        choice = question.choices[response]
        return Feedback(RIGHT if choice.correct else WRONG,
                        ("正确！" if choice.correct else "不对。") + choice.explanation)
    try:
        value = parse_number(response)
    except ValueError as exc:
        return Feedback(INVALID, str(exc))
    answer = float(question.answer)
    if math.isclose(value, answer, rel_tol=question.rel_tol):
        return Feedback(RIGHT, f"正确！{question.explanation}")
    return Feedback(WRONG, f"不对：「{response.strip()}」不是正确答案。提示：{question.hint}")


def answer_feedback(question: Question) -> Feedback:
    """What 「显示答案」 shows: the key and why (not graded: a revealed answer earns no point)."""
    if isinstance(question, ChoiceQuestion):
        right = next(c for c in question.choices if c.correct)
        return Feedback(INVALID, f"答案：{right.text}。{right.explanation}")
    return Feedback(INVALID, f"答案：{question.answer_text} {question.unit}。{question.explanation}")


def feedback_html(fb: Feedback, revealed: bool = False) -> str:
    if revealed:
        return message_html(html.escape(fb.message), "info")
    if fb.status == INVALID:
        return message_html(f"⚠️ {html.escape(fb.message)}", "warn")
    color, bg = ("#1b5e20", "#e8f5e9") if fb.right else ("#8a1c1c", "#fdecea")
    return (f'<div class="kvlab-quiz-{fb.status}" style="background:{bg};color:{color};padding:6px 10px;'
            f'border-radius:4px;margin:4px 0">{"✓" if fb.right else "✗"} {html.escape(fb.message)}</div>')


@dataclass
class QuizState:
    """The latest graded result of each question (``None``: not answered yet, or the answer was not valid), the
    wrong answers given to each, and which answers were shown."""

    results: list = field(default_factory=list)
    wrong: list = field(default_factory=list)
    revealed: list = field(default_factory=list)

    @property
    def right(self) -> int:
        return sum(1 for r in self.results if r is True)

    @property
    def answered(self) -> int:
        return sum(1 for r in self.results if r is not None)


class Quiz:
    """The questions one under another, each graded as soon as it is answered, and a score at the bottom."""

    def __init__(self, questions, title: str = "自测"):
        self.questions = list(questions)
        if not self.questions:
            raise ValueError("questions: a quiz needs at least one question")
        n = len(self.questions)
        self.state = QuizState([None] * n, [0] * n, [False] * n)
        self._last_graded = [None] * n  # the latest graded (valid) response to each question
        self.feedback = [W.HTML() for _ in self.questions]
        self.reveal_buttons = [W.Button(description="显示答案", icon="eye", layout=W.Layout(display="none"))
                               for _ in self.questions]
        for fb in self.feedback:
            fb.add_class("kvlab-quiz-feedback")
        self.inputs = []
        boxes = [self._question_box(i, q) for i, q in enumerate(self.questions)]
        self.score = W.HTML()
        self.score.add_class("kvlab-quiz-score")
        self._update_score()
        self.widget = W.VBox([W.HTML(f"<h3>{html.escape(title)}</h3>"), *boxes, self.score])
        self.widget.add_class("kvlab-quiz")

    def _question_box(self, i: int, q: Question) -> W.VBox:
        prompt = W.HTML(f"<b>第 {i + 1} 题（{html.escape(q.section)}）</b> {html.escape(q.prompt)}",
                        layout=W.Layout(width="100%"))
        if isinstance(q, ChoiceQuestion):
            box = W.RadioButtons(options=[(c.text, k) for k, c in enumerate(q.choices)], value=None,
                                 layout=W.Layout(width="100%"))
            box.add_class("kvlab-quiz-choices")
            box.observe(lambda change, i=i: self.answer(i, change["new"]), names="value")
            row = box
        else:
            box = W.Text(placeholder="输入一个数", continuous_update=False, description=f"答案（{q.unit}）",
                         style={"description_width": "initial"}, layout=W.Layout(width="320px"))
            box.add_class("kvlab-quiz-input")
            button = W.Button(description="检查", button_style="info")
            button.add_class("kvlab-quiz-check")
            box.observe(lambda change, i=i: self.answer(i, change["new"]), names="value")
            button.on_click(lambda _b, i=i, box=box: self.answer(i, box.value))
            row = W.HBox([box, button])
        self.inputs.append(box)
        reveal = self.reveal_buttons[i]
        reveal.add_class("kvlab-quiz-reveal")
        reveal.on_click(lambda _b, i=i: self.reveal(i))
        qbox = W.VBox([prompt, row, self.feedback[i], reveal], layout=W.Layout(margin="6px 0 10px 0"))
        qbox.add_class(f"kvlab-quiz-q{i + 1}")
        return qbox

    def answer(self, index: int, response) -> Feedback:
        """Grade ``response`` to question ``index`` (0-based), show the feedback and update the score."""
        fb = check(self.questions[index], response)
        if self.state.revealed[index]:  # the answer was shown: graded as feedback, no point
            self.feedback[index].value = feedback_html(fb)
            return fb
        self.state.results[index] = None if fb.status == INVALID else fb.right
        if fb.status != INVALID:
            # the same answer graded again (Enter, then 检查; or a click that reached the kernel before the box's
            # new text) repeats its feedback but is not another wrong attempt
            again = response == self._last_graded[index]
            self._last_graded[index] = response
            self.state.wrong[index] += fb.status == WRONG and not again
        self.feedback[index].value = feedback_html(fb)
        if fb.status != INVALID:  # offered after the second wrong answer, withdrawn once it is right
            offer = self.state.wrong[index] >= REVEAL_AFTER and not fb.right
            self.reveal_buttons[index].layout.display = "" if offer else "none"
        self._update_score()
        return fb

    def reveal(self, index: int) -> Feedback:
        """Show question ``index``'s answer and why; it then counts as not answered right."""
        fb = answer_feedback(self.questions[index])
        self.state.revealed[index] = True
        self.state.results[index] = False
        self.feedback[index].value = feedback_html(fb, revealed=True)
        self.reveal_buttons[index].layout.display = "none"
        self._update_score()
        return fb

    def _update_score(self) -> None:
        n = len(self.questions)
        done = "全部答对！" if self.state.right == n else ""
        shown = sum(self.state.revealed)
        seen = f"，看了 {shown} 题的答案" if shown else ""
        self.score.value = (f"<b>得分：{self.state.right} / {n}</b>（已作答 {self.state.answered} 题{seen}）{done}")

    def _ipython_display_(self):
        show(self, self.widget)  # (with its static form while the static edition is built)
