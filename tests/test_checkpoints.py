"""Checkpoints of 3.1-3.4 (kvlab.lessons.checkpoints), the neutral home of the questions (kvlab.questions), the
Checkpoint widget, the keys of every in-text 小任务, and the guide's count of a checkpoint's questions."""
from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import nbformat
import pytest

from kvlab import questions as Q
from kvlab.lessons import checkpoints as cp
from kvlab.teacher import keys, minutes
from kvlab.viz.quiz import Checkpoint, Quiz

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
NOTEBOOKS = sorted(CHAPTERS.glob("*.ipynb"))
NOTEBOOK_OF = {"3.1": "01_autoregressive_decode.ipynb", "3.2": "02_cache_storage_shape.ipynb",
               "3.3": "03_prefill_and_decode.ipynb", "3.4": "04_llama7b_memory_estimate.ipynb"}
# 3.3's notebook is being restructured: the lead inserts its two cells, then empties this set
NOT_YET_IN_NOTEBOOK: set[str] = set()
EXERCISES_MARKER = "<!-- kvlab-exercises -->"


@pytest.fixture(scope="module")
def banks() -> dict[str, list]:
    return {section: cp.checkpoint_questions(section) for section in cp.CHECKPOINTS}


def wrong_response(q):
    """A response that must be graded wrong: another choice, or a number far outside the tolerance."""
    if isinstance(q, Q.ChoiceQuestion):
        return next(i for i, c in enumerate(q.choices) if not c.correct)
    return str(float(q.answer) * 3 + 7)


def right_response(q):
    if isinstance(q, Q.ChoiceQuestion):
        return next(i for i, c in enumerate(q.choices) if c.correct)
    return q.answer_text  # the key as KEYS.md prints it, typed back


# -- the banks --------------------------------------------------------------------------------------------------
def test_each_of_3_1_to_3_4_has_a_checkpoint_of_3_to_5_questions_of_its_own_section(banks):
    assert sorted(banks) == ["3.1", "3.2", "3.3", "3.4"]
    for section, qs in banks.items():
        assert 3 <= len(qs) <= 5, section
        assert {q.section for q in qs} == {section}
        assert any(isinstance(q, Q.NumberQuestion) for q in qs), f"{section}: a checkpoint asks for a prediction"


def test_every_checkpoint_question_is_graded_right_by_its_own_key_and_wrong_by_a_wrong_one(banks):
    for section, qs in banks.items():
        for q in qs:
            assert Q.grade(q, right_response(q)).status == Q.RIGHT, (section, q.prompt)
            assert Q.grade(q, wrong_response(q)).status == Q.WRONG, (section, q.prompt)
            if isinstance(q, Q.ChoiceQuestion):  # every wrong option, not only the first
                assert [c.verdict().status for c in q.choices].count(Q.RIGHT) == 1


def test_a_prediction_is_explained_whether_it_was_right_or_wrong(banks):
    for qs in banks.values():
        for q in qs:
            shown = Q.answer_verdict(q).message.removeprefix("答案：")
            right, wrong = Q.prediction_verdict(q, right_response(q)), Q.prediction_verdict(q, wrong_response(q))
            assert right.status == Q.RIGHT and wrong.status == Q.WRONG
            explanation = q.explanation if isinstance(q, Q.NumberQuestion) else \
                next(c for c in q.choices if c.correct).feedback
            assert explanation in right.message and explanation in wrong.message
            assert shown in wrong.message and "提示：" + getattr(q, "hint", "-") not in wrong.message  # no hint: committed


def test_numeric_keys_are_computed_by_kvlab_not_typed(banks):
    """Spot checks against the core's own arithmetic: the keys move with the configuration they are computed from."""
    from kvlab.config import ModelConfig
    from kvlab.memory import kv_cache_bytes
    from kvlab.presets import MODEL_PRESETS

    cfg = cp.demo_config()
    assert banks["3.2"][0].answer == kv_cache_bytes(cfg.n_layer, cfg.n_kv_head, cfg.head_dim, cp.STORAGE_SLOTS,
                                                    cp.STORAGE_BATCH, "fp32")
    assert banks["3.4"][0].answer == MODEL_PRESETS[cp.FIT_PRESET].kv_cache_bytes(cp.FIT_S) / 2**30
    other = ModelConfig(vocab_size=64, d_model=64, n_layer=3, n_head=2, max_seq_len=512)
    assert cp.decode_checkpoint(other)[0].answer == 3 * 2 * cp.SCORE_STEP  # layers x heads x one row of t
    assert cp.storage_checkpoint(other)[0].answer == kv_cache_bytes(3, 2, 32, cp.STORAGE_SLOTS, cp.STORAGE_BATCH,
                                                                    "fp32")
    per_token = kv_cache_bytes(cfg.n_layer, cfg.n_kv_head, cfg.head_dim, 1, 1, "fp32")
    assert banks["3.2"][1].answer == per_token * sum(range(1, cp.CONCAT_N + 1)) / 2**20  # pass t writes t tokens
    big = MODEL_PRESETS[cp.STORAGE_PRESET]
    assert banks["3.2"][2].answer == big.kv_cache_bytes(cp.STORAGE_S, cp.STORAGE_B, "int8") / 2**20
    # review r26: not a number chapter 3.2's table prints (B = 1, FP16, S = 1,024 and 4,096)
    assert all(banks["3.2"][2].answer * 2**20 != big.kv_cache_bytes(s) for s in (1024, 4096))
    n = cp.SCORE_PASSES
    assert cp.uncached_over_cached_scores(cfg) == pytest.approx(sum(t * t for t in range(1, n + 1))
                                                                / sum(range(1, n + 1)))


def test_an_unknown_checkpoint_is_refused_by_name():
    with pytest.raises(ValueError, match="section"):
        cp.checkpoint_questions("3.9")


def test_checkpoint_text_follows_the_glossary(banks):
    text = "".join(q.prompt + getattr(q, "explanation", "") + "".join(c.key + c.feedback for c in
                                                                          getattr(q, "choices", ()))
                   for qs in banks.values() for q in qs)
    assert "KV 缓存" not in text and "KV缓存" not in text and "脊点" not in text
    assert not re.search(r"\d(GB|GiB|MiB)", text)  # a space between a number and its unit


# -- the widget -----------------------------------------------------------------------------------------------
def test_the_checkpoint_grades_the_first_prediction_explains_it_and_locks_the_question(banks):
    qs = banks["3.2"]
    number = next(i for i, q in enumerate(qs) if isinstance(q, Q.NumberQuestion))
    choice = next(i for i, q in enumerate(qs) if isinstance(q, Q.ChoiceQuestion))
    w = Checkpoint(qs)
    assert "kvlab-checkpoint" in w.widget._dom_classes and "kvlab-quiz" in w.widget._dom_classes
    assert "预测对了 0 / 4" in w.score.value
    assert w.answer(number, "").status == Q.TODO and not w.inputs[number].disabled  # not a prediction yet
    assert w.answer(number, "abc").status == Q.TODO and not w.inputs[number].disabled
    fb = w.answer(number, wrong_response(qs[number]))
    assert fb.status == Q.WRONG and qs[number].explanation in w.feedback[number].value
    assert w.inputs[number].disabled and w.buttons[number].disabled
    again = w.answer(number, right_response(qs[number]))  # committed: the same verdict, no point
    assert again == fb and w.state.right == 0 and "已预测 1 题" in w.score.value
    w.inputs[choice].value = right_response(qs[choice])  # a click on the right option
    assert "kvlab-quiz-right" in w.feedback[choice].value and w.inputs[choice].disabled
    assert "预测对了 1 / 4" in w.score.value
    assert all(b.layout.display == "none" for b in w.reveal_buttons)  # every prediction is explained already
    with pytest.raises(ValueError, match="index"):
        w.state.reveal(choice)


def test_the_quiz_keeps_its_behaviour_on_the_neutral_state():
    q = Q.NumberQuestion("3.2", "how many?", 7, "个", "because", "count")
    quiz = Quiz([q])
    assert isinstance(quiz.state, Q.QuizState) and not isinstance(quiz.state, Q.CheckpointState)
    for typed in ("5", "5.0", "6"):
        quiz.answer(0, typed)
    assert quiz.state.wrong == [2] and quiz.reveal_buttons[0].layout.display == ""  # 5 and 5.0 are one try
    assert quiz.answer(0, "7").status == Q.RIGHT and quiz.reveal_buttons[0].layout.display == "none"
    with pytest.raises(ValueError, match="questions"):
        Quiz([])


def test_the_old_addresses_still_import():
    from kvlab.exercises import checker, quiz

    assert quiz.ChoiceQuestion is Q.ChoiceQuestion and quiz.grade is Q.grade
    assert checker.Verdict is Q.Verdict and checker.Choice is Q.Choice and checker.parse_number is Q.parse_number
    assert checker.parse_number("131,072") == Fraction(131072) and checker.parse_bytes("1.5 KiB").bytes == 1536


def test_lessons_and_viz_import_no_exercise_module():
    """issue 32: the question types live in a neutral module, so lessons and viz never import kvlab.exercises."""
    import importlib.util
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    spec = importlib.util.spec_from_file_location("architecture", ROOT / "tests" / "test_architecture.py")
    arch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(arch)
    graph = arch.import_graph()
    found = {n: sorted(m for m in ms if m.startswith("kvlab.exercises")) for n, ms in graph.items()
             if n.startswith(("kvlab.lessons", "kvlab.viz", "kvlab.questions"))}
    assert {n: ms for n, ms in found.items() if ms} == {}
    assert all(not m.startswith(("kvlab.lessons", "kvlab.viz", "kvlab.exercises")) for m in graph["kvlab.questions"])


# -- the notebooks -------------------------------------------------------------------------------------------
def _cells(name: str):
    return nbformat.read(CHAPTERS / name, as_version=4).cells


def test_each_checkpoint_sits_after_its_chapters_summary_and_before_its_exercises():
    for section, name in NOTEBOOK_OF.items():
        cells = _cells(name)
        shown = [i for i, c in enumerate(cells) if c.cell_type == "code" and f'checkpoint("{section}")' in c.source]
        if section in NOT_YET_IN_NOTEBOOK:
            assert shown == [], f"{section}'s checkpoint is in its notebook: remove it from NOT_YET_IN_NOTEBOOK"
            continue
        assert len(shown) == 1, name
        summary = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and "## 小结" in c.source)
        exercises = next(i for i, c in enumerate(cells) if EXERCISES_MARKER in c.source)
        assert summary < shown[0] < exercises, name
        heading = cells[shown[0] - 1]
        assert heading.cell_type == "markdown" and heading.source.startswith("## 检查点"), name
    others = [p.name for p in NOTEBOOKS if p.name not in NOTEBOOK_OF.values()]
    assert all(not minutes.checkpoint_sections(nbformat.read(CHAPTERS / n, as_version=4)) for n in others)


def _task_cells():
    """(notebook, cell text, number of 小任务) for every markdown cell that sets one."""
    for path in NOTEBOOKS:
        for c in nbformat.read(path, as_version=4).cells:
            if c.cell_type == "markdown" and "小任务" in c.source:
                yield path.name, c.source, c.source.count("小任务")


def test_every_task_in_every_notebook_has_a_key_and_every_key_a_task():
    found = list(_task_cells())
    assert found, "the course sets 小任务 in its prose (3.1's walkthrough at least)"
    for name, text, count in found:
        keyed = [t for t in cp.TASKS if t.notebook == name and t.quote in text]
        assert len(keyed) == count, f"{name}: {count} 小任务 in a cell, {len(keyed)} keys in kvlab.lessons.checkpoints.TASKS"
    for t in cp.TASKS:  # no key for a task that is gone
        assert any(t.notebook == name and t.quote in text for name, text, _ in found), t.quote


def test_every_task_key_is_computed_and_keys_md_gets_it():
    for t in cp.TASKS:
        key = t.key()
        assert key and "第" in key
    section = keys.chapter_extra_sections("3.1", NOTEBOOK_OF["3.1"])
    assert "## 3.1 小任务" in section and "## 3.1 检查点" in section


def test_the_heads_task_key_names_the_steps_the_notebook_asserts():
    from kvlab import load_demo_model
    from kvlab.lessons import decode

    model, tok = load_demo_model("cpu")
    steps = decode.decode_walkthrough(model, tok, decode.DEFAULT_PROMPT, steps=cp.WALKTHROUGH_STEPS)
    agree = decode.steps_where_heads_agree(steps, layer=0, head_a=0, head_b=1)
    key = cp.heads_agree_key()
    assert 0 < len(agree) < len(steps) and all(f"第 {s} 步" in key for s in agree)
    walkthrough = next(c.source for c in _cells(NOTEBOOK_OF["3.1"]) if "decode_walkthrough(" in c.source)
    assert f"steps={cp.WALKTHROUGH_STEPS})" in walkthrough  # the key runs what the notebook runs


def test_keys_md_sections_list_every_checkpoint_key(banks):
    for section, qs in banks.items():
        text = "\n".join(keys.chapter_extra_sections(section, NOTEBOOK_OF[section]))
        assert f"## {section} 检查点" in text
        for q in qs:
            assert q.prompt in text
            key = q.answer_text if isinstance(q, Q.NumberQuestion) else next(c for c in q.choices if c.correct).key
            assert key in text
    assert keys.chapter_extra_sections("3.5", "05_misconceptions.ipynb") == []


# -- the guide's minutes --------------------------------------------------------------------------------------
def test_a_checkpoints_questions_count_as_quiz_minutes(banks):
    nb = minutes.read_notebook(CHAPTERS / NOTEBOOK_OF["3.1"])
    assert minutes.checkpoint_sections(nb) == ["3.1"]
    assert minutes.quiz_questions(nb) == len(banks["3.1"])
    from kvlab.lessons import misconceptions

    review = minutes.read_notebook(CHAPTERS / "05_misconceptions.ipynb")
    assert minutes.has_quiz(review)
    assert minutes.quiz_questions(review, misconceptions) == len(misconceptions.review_questions())
    both = {"cells": nb["cells"] + review["cells"]}  # a chapter with a quiz and a checkpoint counts both
    assert minutes.quiz_questions(both, misconceptions) == len(banks["3.1"]) + len(misconceptions.review_questions())


def test_a_checkpoints_static_form_shows_every_question_with_its_answer_folded(banks):
    """The static edition (no kernel) shows a checkpoint like a quiz: each question, its options, the answer folded."""
    import html

    from kvlab.book.capture import STATIC_MIME, static_bundle

    for qs in banks.values():
        form = static_bundle(Checkpoint(qs))[STATIC_MIME]
        assert form["kind"] == "quiz" and form["html"].count('class="kvlab-static-question"') == len(qs)
        assert "检查点" in form["html"]
        assert all(html.escape(Q.answer_verdict(q).message) in form["html"] for q in qs)


# -- the widgets in English (issue 34): the quiz's and the checkpoint's own words follow the language ------------
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def _english_questions():
    return [Q.NumberQuestion("3.2", "How many bytes does one token's K/V take?", 1024, "bytes",
                             "2 x 4 layers x 2 heads x 32 x 2 bytes.", "Count K and V."),
            Q.ChoiceQuestion("3.2", "Which grows with the context?", (
                Q.Choice("The cache", True, "It holds K/V for every token."),
                Q.Choice("The weights", False, "They stay the same size."))),
            Q.NumberQuestion("3.2", "How many blocks?", 3, "blocks", "ceil(40 / 16) = 3.", "Round up.")]


def _shown_text(widget) -> str:
    """Every string a widget tree shows: values, descriptions, placeholders, options."""
    import ipywidgets as W

    out, todo = [], [widget]
    while todo:
        w = todo.pop()
        out += [str(getattr(w, name, "")) for name in ("value", "description", "placeholder")]
        out += [str(label) for label in getattr(w, "_options_labels", ())]
        todo += [c for c in getattr(w, "children", ()) if isinstance(c, W.Widget)]
    return "\n".join(out)


def test_the_quiz_speaks_english_from_title_to_score():
    from kvlab.language import using_language

    with using_language("en"):
        quiz = Quiz(_english_questions())
        assert quiz.answer(0, "").message == "No answer yet: type a number"
        assert quiz.answer(0, "12,5").status == Q.TODO  # a decimal comma: said how to write it, not counted
        assert quiz.answer(0, "512").message == 'Not quite: "512" is not the answer. Hint: Count K and V.'
        quiz.answer(0, "2048")
        shown = quiz.reveal(0).message
        assert shown == "Answer: 1,024 bytes. 2 x 4 layers x 2 heads x 32 x 2 bytes."
        assert quiz.answer(1, 0).message == "Right! It holds K/V for every token."
        assert quiz.answer(2, 3).message == "Right! ceil(40 / 16) = 3."
        text = _shown_text(quiz.widget)
    assert "<h3>Self-check</h3>" in text and "<b>Question 1 (3.2)</b>" in text and "Answer (bytes)" in text
    assert "Type a number" in text and "Check" in text and "Show the answer" in text
    assert "<b>Score: 2 / 3</b> (3 answered, answers shown: 1)" in quiz.score.value
    assert not CJK.search(text), [line for line in text.splitlines() if CJK.search(line)]
    assert Quiz(_english_questions()).widget.children[0].value == "<h3>自测</h3>"  # Chinese by default, as before


def test_the_checkpoint_speaks_english_and_explains_a_wrong_prediction():
    from kvlab.language import using_language

    with using_language("en"):
        w = Checkpoint(_english_questions())
        wrong = w.answer(0, "2048")
        w.answer(1, 0)
        text = _shown_text(w.widget)
    assert wrong.message == 'Not quite: "2048" is not the answer. Answer: 1,024 bytes. 2 x 4 layers x 2 heads x 32 ' \
                            'x 2 bytes.'
    assert "<h3>Checkpoint: predict first, then read why</h3>" in text and "Only your first answer" in text
    assert "<b>Predicted right: 1 / 3</b> (2 predicted)" in w.score.value
    assert not CJK.search(text), [line for line in text.splitlines() if CJK.search(line)]
    assert "检查点：先预测，再看解释" in Checkpoint(_english_questions()).widget.children[0].value


# -- the English edition ----------------------------------------------------------------------------------------
def _question_words(q) -> list[str]:
    if isinstance(q, Q.ChoiceQuestion):
        return [q.prompt, *(t for c in q.choices for t in (c.key, c.feedback))]
    return [q.prompt, q.unit, q.explanation, q.hint]


def test_every_checkpoint_in_english_has_no_chinese_and_the_same_keys(banks):
    from kvlab.language import using_language

    with using_language("en"):
        english = {section: cp.checkpoint_questions(section) for section in cp.CHECKPOINTS}
    for section, zh in banks.items():
        en = english[section]
        assert [type(q) for q in en] == [type(q) for q in zh]
        for q_zh, q_en in zip(zh, en):
            for text in _question_words(q_en):
                assert text.strip() and not CJK.search(text), text
            if isinstance(q_en, Q.NumberQuestion):
                assert (q_en.answer, q_en.rel_tol) == (q_zh.answer, q_zh.rel_tol)
                assert Q.grade(q_en, right_response(q_en)).status == Q.RIGHT
            else:
                assert [c.correct for c in q_en.choices] == [c.correct for c in q_zh.choices]


def test_the_heads_task_key_in_english_replays_the_english_walkthrough():
    from kvlab import load_demo_model
    from kvlab.language import using_language
    from kvlab.lessons import decode

    model, tok = load_demo_model("cpu", lang="en")
    prompt = decode.PROMPTS.text("walkthrough", "en")
    steps = decode.decode_walkthrough(model, tok, prompt, steps=cp.WALKTHROUGH_STEPS)
    agree = decode.steps_where_heads_agree(steps, layer=0, head_a=0, head_b=1)
    with using_language("en"):
        key = cp.heads_agree_key()
    assert not CJK.search(key) and f'"{prompt}"' in key and 0 < len(agree) < len(steps)
    assert re.findall(r"\d+", key.split(" at step")[1].split("(")[0]) == [str(s) for s in agree]
    assert "「人工」" in cp.heads_agree_key()  # Chinese by default, as before
