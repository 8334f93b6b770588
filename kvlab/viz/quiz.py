"""The self-check quiz and the checkpoints as ipywidgets: questions one under another, immediate feedback with an
explanation, a running score.

The questions, their grading and the score are :mod:`kvlab.questions` (:class:`~kvlab.questions.QuizState`,
:class:`~kvlab.questions.CheckpointState`); this module only wires them to widgets. A response that cannot be graded
(empty, not a number) gets a message saying what to type and does not count.

- :class:`Quiz`: answer as often as you like; after ``REVEAL_AFTER`` wrong answers to a question a 「显示答案」 button
  appears under it; a revealed answer earns no point.
- :class:`Checkpoint`: predict, then read why. The first gradable answer to each question is the learner's
  prediction: it is graded, the explanation (and, if it was wrong, the answer) appears at once, and the question's
  controls are locked.

Why not ``jupyterquiz`` (the ecosystem's quiz renderer, tried first for chapter 3.5): its numeric box is
labelled in fixed English ("Type numeric answer here:"); an empty answer is graded wrong with no message; it
keeps no score; in JupyterLab 4 every answer throws ``pageerror: MathJax.typeset is not a function`` (the
browser suite counts page errors as failures); and its answers live only in the browser's JavaScript, so
neither the kernel nor pytest can check them against kvlab.

CSS hooks (for the browser tests): ``.kvlab-quiz`` on the whole quiz (and ``.kvlab-checkpoint`` on a checkpoint),
``.kvlab-quiz-q{n}`` on question n (1-based), and inside it ``.kvlab-quiz-choices`` (radio buttons) or
``.kvlab-quiz-input`` (text box) with ``.kvlab-quiz-check`` (button), then ``.kvlab-quiz-feedback`` and
``.kvlab-quiz-reveal`` (the 「显示答案」 button, hidden until needed); ``.kvlab-quiz-score`` on the score line.
"""
from __future__ import annotations

import html

import ipywidgets as W

from ..questions import (REVEAL_AFTER, RIGHT, ChoiceQuestion, CheckpointState, Question, QuizState,  # noqa: F401
                         Verdict, graded)
from .phrases import QUIZ
from .widgets import message_html, show


def feedback_html(verdict: Verdict, revealed: bool = False) -> str:
    if revealed:
        return message_html(html.escape(verdict.message), "info")
    if not graded(verdict):
        return message_html(f"⚠️ {html.escape(verdict.message)}", "warn")
    is_right = verdict.status == RIGHT
    color, bg = ("#1b5e20", "#e8f5e9") if is_right else ("#8a1c1c", "#fdecea")
    return (f'<div class="kvlab-quiz-{verdict.status}" style="background:{bg};color:{color};padding:6px 10px;'
            f'border-radius:4px;margin:4px 0">{"✓" if is_right else "✗"} {html.escape(verdict.message)}</div>')


class Quiz:
    """The questions one under another, each graded as soon as it is answered, and a score at the bottom."""

    state_type = QuizState
    css_class = "kvlab-quiz"
    default_title = "title"  # QUIZ's key of the title shown when none is given: 「自测」 (Self-check)

    def __init__(self, questions, title: str | None = None):
        title = QUIZ.say(self.default_title) if title is None else title
        self.state = self.state_type(questions)
        self.questions = list(self.state.questions)
        self.feedback = [W.HTML() for _ in self.questions]
        self.reveal_buttons = [W.Button(description=QUIZ.say("reveal"), icon="eye", layout=W.Layout(display="none"))
                               for _ in self.questions]
        for fb in self.feedback:
            fb.add_class("kvlab-quiz-feedback")
        self.inputs, self.buttons = [], []
        boxes = [self._question_box(i, q) for i, q in enumerate(self.questions)]
        self.score = W.HTML()
        self.score.add_class("kvlab-quiz-score")
        self._update_score()
        self.widget = W.VBox([W.HTML(f"<h3>{html.escape(title)}</h3>"), *self._intro(), *boxes, self.score])
        self.widget.add_class("kvlab-quiz")
        self.widget.add_class(self.css_class)

    def _intro(self) -> list:
        return []

    def _question_box(self, i: int, q: Question) -> W.VBox:
        heading = html.escape(QUIZ.say("question", n=i + 1, section=q.section))
        prompt = W.HTML(f"<b>{heading}</b> {html.escape(q.prompt)}",
                        layout=W.Layout(width="100%"))
        button = None
        if isinstance(q, ChoiceQuestion):
            box = W.RadioButtons(options=[(c.key, k) for k, c in enumerate(q.choices)], value=None,
                                 layout=W.Layout(width="100%"))
            box.add_class("kvlab-quiz-choices")
            box.observe(lambda change, i=i: self.answer(i, change["new"]), names="value")
            row = box
        else:
            box = W.Text(placeholder=QUIZ.say("placeholder"), continuous_update=False,
                         description=QUIZ.say("answer_box", unit=q.unit),
                         style={"description_width": "initial"}, layout=W.Layout(width="320px"))
            box.add_class("kvlab-quiz-input")
            button = W.Button(description=QUIZ.say("check"), button_style="info")
            button.add_class("kvlab-quiz-check")
            box.observe(lambda change, i=i: self.answer(i, change["new"]), names="value")
            button.on_click(lambda _b, i=i, box=box: self.answer(i, box.value))
            row = W.HBox([box, button])
        self.inputs.append(box)
        self.buttons.append(button)
        reveal = self.reveal_buttons[i]
        reveal.add_class("kvlab-quiz-reveal")
        reveal.on_click(lambda _b, i=i: self.reveal(i))
        qbox = W.VBox([prompt, row, self.feedback[i], reveal], layout=W.Layout(margin="6px 0 10px 0"))
        qbox.add_class(f"kvlab-quiz-q{i + 1}")
        return qbox

    def answer(self, index: int, response) -> Verdict:
        """Grade ``response`` to question ``index`` (0-based), show the feedback and update the score."""
        fb = self.state.answer(index, response)
        self.feedback[index].value = feedback_html(fb)
        if not self.state.revealed[index]:
            self.reveal_buttons[index].layout.display = "" if self.state.offered[index] else "none"
        self._update_score()
        return fb

    def reveal(self, index: int) -> Verdict:
        """Show question ``index``'s answer and why; it then counts as not answered right."""
        fb = self.state.reveal(index)
        self.feedback[index].value = feedback_html(fb, revealed=True)
        self.reveal_buttons[index].layout.display = "none"
        self._update_score()
        return fb

    def _score_html(self) -> str:
        n, state = len(self.questions), self.state
        done = QUIZ.say("score_all_right") if state.right == n else ""
        shown = sum(state.revealed)
        seen = QUIZ.say("score_seen", shown=shown) if shown else ""
        return QUIZ.say("score", right=state.right, n=n, answered=state.answered, seen=seen, done=done)

    def _update_score(self) -> None:
        self.score.value = self._score_html()

    def _ipython_display_(self):
        show(self, self.widget)  # (with its static form while the static edition is built)


class Checkpoint(Quiz):
    """A chapter's checkpoint: predict each answer first; the prediction is graded, explained, and kept (the
    question's controls are then locked, so the explanation follows the learner's own prediction)."""

    state_type = CheckpointState
    css_class = "kvlab-checkpoint"
    default_title = "checkpoint_title"  # 「检查点：先预测，再看解释」 (Checkpoint: predict first, then read why)

    def _intro(self) -> list:
        return [W.HTML(html.escape(QUIZ.say("checkpoint_intro")))]

    def answer(self, index: int, response) -> Verdict:
        fb = super().answer(index, response)
        if self.state.committed(index):  # the prediction is in: lock the question
            self.inputs[index].disabled = True
            if self.buttons[index] is not None:
                self.buttons[index].disabled = True
        return fb

    def _score_html(self) -> str:
        n, state = len(self.questions), self.state
        return QUIZ.say("checkpoint_score", right=state.right, n=n, answered=state.answered)
