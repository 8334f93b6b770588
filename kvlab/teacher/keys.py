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
from ..questions import REVEAL_AFTER

# Exercises whose answer is checked against this page's own measurement: their values differ from machine to
# machine, so the key gives the method, not a number.
MEASURED = {
    "ch03.batch_ridge": "答案取决于学员这一页实测的两个屋顶（转折点 = 算力 ÷ 带宽）：检查格用同一次测量算出期望的批次。",
    "ch03.ttft_tpot": "答案取决于学员这一次生成的计时：检查格从同一份 trace 算出期望值，并核对学员读的是不是同一次运行。",
}
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
    lines = [f"题目与答案都由 `{where}()` 生成；数字题的标准答案是 kvlab 算出来的（下面写出算式）。"]
    if setup and numbers:
        lines += ["", _fold(f"数字题用到的变量（`{function.__name__}` 里的定义）", _code("\n".join(setup)))]
    for i, q in enumerate(questions, 1):
        lines += ["", f"**{i}.（{q.section}）** {q.prompt}", ""]
        if isinstance(q, ChoiceQuestion):
            letters = "ABCDEFGH"
            for letter, c in zip(letters, q.choices):
                mark = " ✓ **正确答案**" if c.correct else ""
                lines.append(f"- {letter}. {c.key}{mark}")
            key = next(c for c in q.choices if c.correct)
            lines += ["", f"讲解：{key.feedback}"]
            lines += ["", "选错时的反馈：", ""]
            lines += [f"- {letters[j]}：{c.feedback}" for j, c in enumerate(q.choices) if not c.correct]
        elif not isinstance(q, NumberQuestion):  # a kind of question this page does not know: what the quiz reveals
            lines.append(f"- {answer_verdict(q).message}")
        else:
            tol = f"（允许相对误差 {q.rel_tol:g}）" if q.rel_tol else "（必须精确）"
            lines.append(f"- 答案：**{q.answer_text} {q.unit}**{tol}")
            if id(q) in paired:
                lines.append(f"- kvlab 的算法：`{paired[id(q)]}` = `{q.answer!r}`")
            lines += [f"- 讲解：{q.explanation}", f"- 答错时的提示：{q.hint}"]
    return "\n".join(lines)


# -- what a learner sees, and when --------------------------------------------------------------------------------
def what_is_hidden() -> list[str]:
    """KEYS.md's header: when a learner sees each kind of answer, from the code that decides it (the quiz's
    ``REVEAL_AFTER``, the checkpoint's one prediction, the exercises' solution gate, the static edition's flag)."""
    teacher_call = f"kvlab.exercises.{show_solutions.__name__}()"
    return [
        "请不要把这份文件发给学员。学员在课程里什么时候看得到答案：",
        "\n".join([
            f"- **自测题**（各章的「自测」）：同一题答错 {REVEAL_AFTER} 次之后，题下才出现「显示答案」按钮（答对后收回）；"
            "看了答案的那题不计分。",
            "- **检查点**（先预测、再看解释）：每题只算第一次有效作答（学员的预测），判分后立刻给出解释，答错时连同答案；"
            "作答之前不显示。",
            "- **动手练习**：学员第一次检查了自己的答案（改过代码格，检查结果不是「还没有完成」）之后，检查格才附上折叠的"
            "「显示参考答案」；原样运行代码格只得到「还没有完成」和一句说明。记录按练习分开，只在当前 kernel 里，重启 kernel "
            "后重新开始。第二次答错起逐条给出的是提示，不是答案。",
            f"- **老师**：启动 JupyterLab 之前设环境变量 `{TEACHER_ENV}=1`，或在 notebook 里运行 `{teacher_call}`，"
            f"每个练习的检查格都会直接附上参考答案（`{show_solutions.__name__}(False)` 恢复成学员的规则）。",
            "- **静态版**（`python -m kvlab.book`）：页面和讲义 PDF 里没有练习的参考答案；只有用 `--teacher` 构建的教师版"
            "才有（页面上折叠、讲义里印在题目下面）。自测题和检查点的答案在静态版里折叠在每题下面（静态页不能判分），"
            "点开就能看到。",
            "- **不隐藏的**：这份 KEYS.md 和 `kvlab/exercises/solutions.py` 都在仓库里，拿到仓库的人都能读到。",
        ]),
    ]


# -- the checkpoints and the in-text 小任务 -------------------------------------------------------------------------
def checkpoint_keys(section: str) -> str:
    """The keys of chapter ``section``'s checkpoint (:data:`kvlab.lessons.checkpoints.CHECKPOINTS`) as markdown."""
    return ("检查点的每题只算第一次作答（学员的预测）：提交后马上判分并给出解释，答错时同时给出答案。\n\n"
            + question_keys(CHECKPOINTS[section]))


def task_keys(notebook: str) -> str | None:
    """The keys of ``notebook``'s in-text 小任务 (:data:`kvlab.lessons.checkpoints.TASKS`) as markdown, None when
    it has none."""
    tasks = [t for t in TASKS if t.notebook == notebook]
    if not tasks:
        return None
    return "\n\n".join(f"**小任务**：「{t.quote}」\n\n- 答案：{t.key()}" for t in tasks)


def chapter_extra_sections(number: str, notebook: str) -> list[str]:
    """KEYS.md's sections for one chapter besides its quiz and exercises: the checkpoint's keys (when the chapter has
    one) and its 小任务' keys (when it has any), each a ``##`` heading then its body."""
    parts = []
    if number in CHECKPOINTS:
        parts += [f"## {number} 检查点", checkpoint_keys(number)]
    tasks = task_keys(notebook)
    if tasks:
        parts += [f"## {number} 小任务", tasks]
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
    out = []
    for ex in module.EXERCISES:
        grader = getattr(module, f"grade_{ex.name}", None)
        lines = [f"### {ex.title}（`{ex.key}`）", "", _fold("题目（学员看到的说明）", ex.task), "",
                 "参考答案（`kvlab/exercises/solutions.py`）：", "", _code(SOLUTIONS[ex.key]), ""]
        if ex.key in MEASURED:
            lines += [MEASURED[ex.key], ""]
        else:
            values = solution_values(module, ex.key)
            if values:
                lines += ["参考答案算出的值：", ""] + [f"- `{k}` = `{v!r}`" for k, v in values.items()] + [""]
            else:
                lines += ["参考答案是一个函数：检查格用下面评分函数里的用例逐个核对它。", ""]
        lines += [f"检查格：`{ex.check}`", "", "提示（第二次答错起逐条出现）：", ""]
        lines += [f"{i}. {h}" for i, h in enumerate(ex.hints, 1)]
        if grader is not None:
            lines += ["", _fold(f"评分函数 `{module.__name__}.{grader.__name__}`（期望值怎样算出）",
                                _code(inspect.getsource(grader)))]
        out.append("\n".join(lines))
    return "\n\n".join(out)


def exercise_modules() -> list:
    return [chapter_module(name) for name in CHAPTER_MODULES]
