"""Chapter 3.1's exercises in English: titles, tasks, hints and every verdict the graders give hold no Chinese, say
the numbers the Chinese ones say, and the demo model's cases run on the English demo model's own prompts."""
import re

import pytest

from kvlab.exercises import ch01, checker, tools
from kvlab.exercises.solutions import SOLUTIONS
from kvlab.language import using_language

CHINESE = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")  # CJK characters and full-width punctuation
NUMBER = re.compile(r"\d+(?:\.\d+)?")
STEP, WORK = SOLUTIONS["ch01.cached_step"], SOLUTIONS["ch01.work"]
ROPE_LINE = "q, k_new = rope(q, pos), rope(k_new, pos)"


@pytest.fixture()
def english():
    """The course in English, with the English demo model for the checks (the exercises load it once per kernel)."""
    checker.reset_attempts()
    tools.demo.cache_clear()
    with using_language("en"):
        yield
    tools.demo.cache_clear()
    checker.reset_attempts()


def _run(exercise, source):
    ns = {}
    exec(ch01.SETUP, ns)
    exec(source, ns)
    if exercise is ch01.CACHED_STEP:
        return ch01.check_cached_step(ns["cached_attention_step"])
    return ch01.check_work(ns["predict_work"])


def _said(feedback) -> str:
    return feedback.text + feedback._repr_html_()


def test_titles_tasks_and_hints_have_english_words():
    for exercise in ch01.EXERCISES:
        words = exercise.words("en")
        assert len(words.hints) == len(exercise.hints)
        for text in (words.title, words.task, *words.hints):
            assert text.strip() and not CHINESE.search(text), text
    assert "`generate(cache=\"none\")`" in ch01.CACHED_STEP.words("en").task
    assert "`count_projections`" in ch01.WORK.words("en").task


def test_the_demo_cases_prompts_suit_the_english_model():
    from kvlab import load_demo_model

    _, en_tok = load_demo_model("cpu", lang="en")
    one, a, b = (ch01.CASE_PROMPTS.text(k, "en") for k in ("one", "batch_a", "batch_b"))
    assert not any(CHINESE.search(p) or en_tok.unknown(p) for p in (one, a, b))
    assert len(en_tok.encode(a)) == len(en_tok.encode(b))  # a batch without padding, as the Chinese one
    assert [c.label for c in ch01.LOOP_CASES][0] == "用例 1（演示模型，GQA：4 个查询头、2 个 KV 头，提示词「人工」）"


@pytest.mark.parametrize("source, expected", [
    (STEP.replace(ROPE_LINE, "q, k_new = rope(q, pos), rope(k_new, 0)"), "or the position offset is"),
    (STEP.replace(ROPE_LINE, "q, k_new = q, rope(k_new, pos)"), "Q was not rotated for position pos = 5"),
    (STEP.replace(":pos + 1], n_rep)", ":], n_rep)"), "including slots not filled yet"),
    (STEP.replace(":pos + 1], n_rep)", ":pos], n_rep)"), "left out the new token itself"),
    (STEP.replace("repeat_kv(k_cache[:, :, :pos + 1], n_rep)", "k_cache[:, :, :pos + 1]")
     .replace("repeat_kv(v_cache[:, :, :pos + 1], n_rep)", "v_cache[:, :, :pos + 1]"), "expand K/V with repeat_kv"),
    ("def cached_attention_step(q, k_new, v_new, k_cache, v_cache, pos):\n    return q[..., :1]",
     "it should be [B, H, 1, D]"),
], ids=["k at position 0", "q unrotated", "whole cache read", "new token left out", "no GQA repeat", "shape"])
def test_cached_step_feedback_in_english(english, source, expected):
    fb = _run(ch01.CACHED_STEP, source)
    assert fb.status == checker.WRONG and expected in _said(fb), _said(fb)
    assert not CHINESE.search(_said(fb)), _said(fb)


def test_cached_step_names_the_english_prompt_and_passes_a_right_step(english):
    fb = _run(ch01.CACHED_STEP, STEP.replace(ROPE_LINE, "q, k_new = rope(q, pos), rope(k_new, 0)"))
    prompt = ch01.CASE_PROMPTS.text("one", "en")
    assert fb.message.startswith(f'Case 1 (the demo model, GQA: 4 query heads, 2 KV heads, prompt "{prompt}")')
    assert "from step 2 on" in fb.message
    assert any(d.startswith("Generated without a cache (the reference): ") for d in fb.details)
    right = _run(ch01.CACHED_STEP, STEP)
    assert right.status == checker.RIGHT and not CHINESE.search(_said(right))
    assert NUMBER.findall(right.message) == NUMBER.findall(ch01.FEEDBACK.text("step_right", "zh").format(
        cases=len(ch01.LOOP_CASES), steps=sum(c.new_tokens - 1 for c in ch01.LOOP_CASES), tol=ch01.LOGIT_TOLERANCE))


def test_work_feedback_in_english_says_the_chinese_numbers(english):
    sources = [WORK.replace("kv_with_cache = p + (n - 1)", "kv_with_cache = p + n"),
               WORK.replace("kv_with_cache = p + (n - 1)", "kv_with_cache = n"),
               "def predict_work(p, n):\n    return 1, 2",
               "def predict_work(p, n):\n    return None, 1, 2, 3",
               WORK]
    said = [_run(ch01.WORK, s) for s in sources]
    assert said[0].message == "Case p = 1, n = 1: does not match the trace."
    assert said[0].details[0] == "tokens whose K/V are projected with a cache: 1 counted in the trace, 2 predicted"
    assert said[3].status == checker.TODO and said[4].status == checker.RIGHT
    for feedback in said:
        assert not CHINESE.search(_said(feedback)), _said(feedback)
    with using_language("zh"):
        checker.reset_attempts()
        zh = [_run(ch01.WORK, s) for s in sources]
    for en, cn in zip(said, zh):
        assert NUMBER.findall(" ".join((en.message, *en.details))) == \
            NUMBER.findall(" ".join((cn.message, *cn.details))), (en.message, cn.message)
