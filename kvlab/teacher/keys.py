"""The answer keys outside the widgets, for a teacher: every self-check question, checkpoint, in-text 小任务 and
exercise, generated from the code that grades them (``kvlab/lessons/*/review.py``, ``kvlab/lessons/checkpoints.py``,
``kvlab/exercises/chNN.py`` and ``solutions.py``).

A numeric key shows how kvlab computes it: the ``answer`` expression of its ``NumberQuestion(...)`` in the quiz's
source, the statements it uses, and the value. An exercise shows its reference solution, the values that solution
computes (where they do not depend on the learner's machine) and the source of its grader.
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import io
import textwrap
from fractions import Fraction

from ..exercises import CHAPTER_MODULES, chapter_module, show_solutions
from ..exercises.checker import TEACHER_ENV
from ..exercises.quiz import ChoiceQuestion, NumberQuestion, answer_verdict
from ..exercises.solutions import SOLUTIONS
from ..lessons.checkpoints import CHECKPOINTS, TASKS
from ..language import get_language
from ..questions import REVEAL_AFTER
from .chapter_texts import say as chapter_say, task_key
from .minutes import HAN
from .phrases import GUIDE

# Exercises whose answer is checked against this page's own measurement: their values differ from machine to
# machine, so the key gives the method, not a number (GUIDE's "measured.<key>").
MEASURED = ("ch03.batch_ridge", "ch03.ttft_tpot")
SIMPLE = (int, float, str, bool, Fraction)


def _code(source: str, lang: str = "python") -> str:
    return f"```{lang}\n{source.strip()}\n```"


def _fold(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


# -- the quiz ------------------------------------------------------------------------------------------------
def answer_expressions(function) -> tuple[list[str], list[str]]:
    """The statements before ``return`` in a ``review_questions`` function, and the ``answer`` expression of each
    ``NumberQuestion(...)`` call in source order."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    body = tree.body[0].body
    setup = [ast.unparse(s) for s in body if not isinstance(s, ast.Return)
             and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)
                    and getattr(n.func, "id", getattr(n.func, "attr", "")) == "NumberQuestion"),
                   key=lambda n: (n.lineno, n.col_offset))
    exprs = []
    for call in calls:
        node = call.args[2] if len(call.args) > 2 else next((k.value for k in call.keywords if k.arg == "answer"), None)
        exprs.append(ast.unparse(node) if node is not None else "")
    return setup, exprs


def quiz_keys(module) -> str:
    """The keys of one lesson's ``review_questions()`` as markdown."""
    return question_keys(module.review_questions)


def question_keys(function) -> str:
    """The keys of the questions ``function()`` returns (a quiz's or a checkpoint's) as markdown."""
    questions = function()
    setup, exprs = answer_expressions(function)
    numbers = [q for q in questions if isinstance(q, NumberQuestion)]
    paired = dict(zip(map(id, numbers), exprs)) if len(exprs) == len(numbers) else {}
    where = f"{inspect.getmodule(function).__name__}.{function.__name__}"
    if get_language() != "zh":  # a statement that builds the Chinese wording is not what another language's keys use
        setup = [st for st in setup if not HAN.search(st)]
    say = GUIDE.say
    lines = [say("q_made_by", where=where)]
    if setup and numbers:
        lines += ["", _fold(say("q_variables", function=function.__name__), _code("\n".join(setup)))]
    for i, q in enumerate(questions, 1):
        lines += ["", say("q_head", i=i, section=q.section, prompt=q.prompt), ""]
        if isinstance(q, ChoiceQuestion):
            letters = "ABCDEFGH"
            for letter, c in zip(letters, q.choices):
                mark = say("q_correct") if c.correct else ""
                lines.append(say("q_choice", letter=letter, text=c.key, mark=mark))
            key = next(c for c in q.choices if c.correct)
            lines += ["", say("q_explained", feedback=key.feedback)]
            lines += ["", say("q_wrong_head"), ""]
            lines += [say("q_wrong", letter=letters[j], feedback=c.feedback) for j, c in enumerate(q.choices)
                      if not c.correct]
        elif not isinstance(q, NumberQuestion):  # a kind of question this page does not know: what the quiz reveals
            lines.append(f"- {answer_verdict(q).message}")
        else:
            tol = say("q_tolerance", tol=q.rel_tol) if q.rel_tol else say("q_exact")
            lines.append(say("q_answer", answer=q.answer_text, unit=q.unit, tolerance=tol))
            if id(q) in paired:
                lines.append(say("q_computed", expression=paired[id(q)], value=repr(q.answer)))
            lines += [say("q_explanation", explanation=q.explanation), say("q_hint", hint=q.hint)]
    return "\n".join(lines)


# -- what a learner sees, and when --------------------------------------------------------------------------------
def what_is_hidden() -> list[str]:
    """KEYS.md's header: when a learner sees each kind of answer, from the code that decides it (the quiz's
    ``REVEAL_AFTER``, the checkpoint's one prediction, the exercises' solution gate, the static edition's flag)."""
    teacher_call = f"kvlab.exercises.{show_solutions.__name__}()"
    say = GUIDE.say
    return [
        say("hidden_lead"),
        "\n".join([
            say("hidden_quiz", reveal=REVEAL_AFTER),
            say("hidden_checkpoint"),
            say("hidden_exercises"),
            say("hidden_teacher", env=TEACHER_ENV, call=teacher_call, function=show_solutions.__name__),
            say("hidden_book"),
            say("hidden_open"),
        ]),
    ]


# -- the checkpoints and the in-text 小任务 -------------------------------------------------------------------------
def checkpoint_keys(section: str) -> str:
    """The keys of chapter ``section``'s checkpoint (:data:`kvlab.lessons.checkpoints.CHECKPOINTS`) as markdown."""
    return GUIDE.say("checkpoint_lead") + "\n\n" + question_keys(CHECKPOINTS[section])


def task_keys(notebook: str) -> str | None:
    """The keys of ``notebook``'s in-text 小任务 (:data:`kvlab.lessons.checkpoints.TASKS`) as markdown, None when
    it has none."""
    tasks = [t for t in TASKS if t.notebook == notebook]
    if not tasks:
        return None
    return "\n\n".join(GUIDE.say("task", quote=chapter_say(task_key(notebook, i)), key=t.key())
                       for i, t in enumerate(tasks, 1))


def chapter_extra_sections(number: str, notebook: str) -> list[str]:
    """KEYS.md's sections for one chapter besides its quiz and exercises: the checkpoint's keys (when the chapter has
    one) and its 小任务' keys (when it has any), each a ``##`` heading then its body."""
    parts = []
    if number in CHECKPOINTS:
        parts += [GUIDE.say("keys_checkpoint_head", number=number), checkpoint_keys(number)]
    tasks = task_keys(notebook)
    if tasks:
        parts += [GUIDE.say("keys_tasks_head", number=number), tasks]
    return parts


# -- the exercises -----------------------------------------------------------------------------------------
def solution_values(module, key: str) -> dict:
    """The plain values (numbers, strings) the reference solution of ``key`` leaves behind, run as a learner would
    run the setup cell and the filled-in stub."""
    ns: dict = {"display": lambda *a, **k: None}
    with contextlib.redirect_stdout(io.StringIO()):  # what the solution prints is for the learner's screen
        exec(module.SETUP, ns)
        before = set(ns)
        exec(SOLUTIONS[key], ns)
    return {k: v for k, v in ns.items() if k not in before and not k.startswith("_") and isinstance(v, SIMPLE)}


def exercise_keys(module) -> str:
    say = GUIDE.say
    out = []
    for ex in module.EXERCISES:
        words = ex.words()
        grader = getattr(module, f"grade_{ex.name}", None)
        lines = [say("ex_head", title=words.title, key=ex.key), "", _fold(say("ex_task"), words.task), "",
                 say("ex_solution"), "", _code(SOLUTIONS[ex.key]), ""]
        if ex.key in MEASURED:
            lines += [say(f"measured.{ex.key}"), ""]
        else:
            values = solution_values(module, ex.key)
            if values:
                lines += [say("ex_values"), ""] + [f"- `{k}` = `{v!r}`" for k, v in values.items()] + [""]
            else:
                lines += [say("ex_function"), ""]
        lines += [say("ex_check", check=ex.check), "", say("ex_hints"), ""]
        lines += [f"{i}. {h}" for i, h in enumerate(words.hints, 1)]
        if grader is not None:
            lines += ["", _fold(say("ex_grader", function=f"{module.__name__}.{grader.__name__}"),
                                _code(inspect.getsource(grader)))]
        out.append("\n".join(lines))
    return "\n\n".join(out)


def exercise_modules() -> list:
    return [chapter_module(name) for name in CHAPTER_MODULES]
