"""The self-check quiz as ipywidgets: questions one under another, immediate feedback with an explanation,
a running score, and the answer on request after repeated wrong answers.

The questions and their grading are :mod:`kvlab.exercises.quiz` (a client of the exercises' checker: one
number parser, one verdict type); this module only wires them to widgets. A response that cannot be graded
(empty, not a number) gets a message saying what to type and does not count. After ``REVEAL_AFTER`` wrong
answers to a question a 「显示答案」 button appears under it; a revealed answer earns no point.

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
from dataclasses import dataclass, field

import ipywidgets as W

from ..exercises.checker import RIGHT, WRONG, Verdict
from ..exercises.quiz import ChoiceQuestion, Question, answer_verdict, grade, graded, response_key
from .widgets import message_html, show

REVEAL_AFTER = 2  # wrong answers to one question before its answer can be shown


def feedback_html(verdict: Verdict, revealed: bool = False) -> str:
    if revealed:
        return message_html(html.escape(verdict.message), "info")
    if not graded(verdict):
        return message_html(f"⚠️ {html.escape(verdict.message)}", "warn")
    is_right = verdict.status == RIGHT
    color, bg = ("#1b5e20", "#e8f5e9") if is_right else ("#8a1c1c", "#fdecea")
    return (f'<div class="kvlab-quiz-{verdict.status}" style="background:{bg};color:{color};padding:6px 10px;'
            f'border-radius:4px;margin:4px 0">{"✓" if is_right else "✗"} {html.escape(verdict.message)}</div>')


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
            box = W.RadioButtons(options=[(c.key, k) for k, c in enumerate(q.choices)], value=None,
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

    def answer(self, index: int, response) -> Verdict:
        """Grade ``response`` to question ``index`` (0-based), show the feedback and update the score."""
        fb = grade(self.questions[index], response)
        if self.state.revealed[index]:  # the answer was shown: graded as feedback, no point
            self.feedback[index].value = feedback_html(fb)
            return fb
        self.state.results[index] = fb.status == RIGHT if graded(fb) else None
        if graded(fb):
            # the same answer graded again (Enter, then 检查; or a click that reached the kernel before the box's
            # new text) repeats its feedback but is not another wrong attempt
            key = response_key(self.questions[index], response)
            again = key == self._last_graded[index]
            self._last_graded[index] = key
            self.state.wrong[index] += fb.status == WRONG and not again
        self.feedback[index].value = feedback_html(fb)
        if graded(fb):  # offered after the second wrong answer, withdrawn once it is right
            offer = self.state.wrong[index] >= REVEAL_AFTER and fb.status != RIGHT
            self.reveal_buttons[index].layout.display = "" if offer else "none"
        self._update_score()
        return fb

    def reveal(self, index: int) -> Verdict:
        """Show question ``index``'s answer and why; it then counts as not answered right."""
        fb = answer_verdict(self.questions[index])
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
