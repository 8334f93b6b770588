"""Chapter 3.6's exercises in English: titles, tasks, hints and every verdict the graders give hold no Chinese, say
the numbers the Chinese ones say, and the lookup's generation runs on the English demo model's own prompts."""
import re

import pytest

from kvlab.exercises import ch06, checker, tools
from kvlab.language import using_language
from kvlab.paging import shared_prefix_blocks

CHINESE = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")  # CJK characters and full-width punctuation
NUMBER = re.compile(r"\d+(?:\.\d+)?")


@pytest.fixture()
def english():
    """The course in English, with the English demo model for the checks (the exercises load it once per kernel)."""
    checker.reset_attempts()
    tools.demo.cache_clear()
    with using_language("en"):
        yield
    tools.demo.cache_clear()
    checker.reset_attempts()


def _said(feedback) -> str:
    return feedback.text + feedback._repr_html_()


def test_titles_tasks_and_hints_have_english_words():
    for exercise in ch06.EXERCISES:
        words = exercise.words("en")
        assert len(words.hints) == len(exercise.hints)
        for text in (words.title, words.task, *words.hints):
            assert text.strip() and not CHINESE.search(text), text
    assert "`lookup`" in ch06.LOOKUP.words("en").task and "`with_sharing`" in ch06.BLOCKS.words("en").task


def test_the_lookup_prompts_follow_the_model_language():
    from kvlab import load_demo_model

    _, en_tok = load_demo_model("cpu", lang="en")
    prompts = ch06.model_prompts(en_tok)
    assert not any(CHINESE.search(p) for p in prompts) and ch06.PROMPTS == ("人工智能", "大语言模型会把每个字", "计算")
    lengths = [len(en_tok.encode(p)) for p in prompts]
    assert len(set(lengths)) == 3 and not any(en_tok.unknown(p) for p in prompts)  # unequal lengths, all written


def test_lookup_feedback_in_english(english):
    stub = {}
    exec(ch06.LOOKUP_STUB, stub)
    todo = ch06.check_lookup(stub["lookup"])
    assert todo.status == checker.TODO and "block and offset are still None" in todo.message
    logical = ch06.check_lookup(lambda table, p, bs: (p // bs, p % bs))
    assert logical.status == checker.WRONG and "not the physical block id" in logical.message
    swapped = ch06.check_lookup(lambda table, p, bs: (p % bs, table[p // bs]))
    assert swapped.status == checker.WRONG and "wrong way round" in swapped.message and swapped.hint  # 2nd wrong: hint
    crashing = ch06.check_lookup(lambda table, p, bs: table[p + 10])
    assert crashing.status == checker.WRONG and "position = 0" in crashing.message
    cases = {(tuple(t), p, bs) for t, p, bs in ch06.LOOKUP_CASES}

    def almost(table, p, bs):
        return (table[p // bs] if (tuple(table), p, bs) in cases else table[0]), p % bs
    off = ch06.check_lookup(almost)
    assert off.status == checker.WRONG and "from step 1 on" in off.message
    right = ch06.check_lookup(lambda table, p, bs: (table[p // bs], p % bs))
    assert right.status == checker.RIGHT
    for prompt in ch06.LOOKUP_PROMPTS.texts["en"].values():  # the English model generated the English prompts
        assert f'"{prompt}" →' in right.message
    for feedback in (todo, logical, swapped, crashing, off, right):
        assert not CHINESE.search(_said(feedback)), _said(feedback)


def test_lookup_verdicts_name_the_same_case_in_both_languages():
    wrong_ones = (lambda table, p, bs: (p // bs, p % bs), lambda table, p, bs: (p % bs, table[p // bs]),
                  lambda table, p, bs: 3)
    for answer in wrong_ones:
        zh = ch06.lookup_problem(answer)
        with using_language("en"):
            en = ch06.lookup_problem(answer)
        assert not CHINESE.search(en) and NUMBER.findall(en) == NUMBER.findall(zh), (zh, en)


def test_blocks_feedback_in_english(english):
    s = shared_prefix_blocks(ch06.SYSTEM, ch06.request_lengths(), ch06.COUNT_BLOCK)
    known = ch06.blocks_mistakes()
    said = [ch06.check_blocks(None, None), ch06.check_blocks(s.unshared, None)]
    assert said[0].status == said[1].status == checker.TODO and "with_sharing is still None" in said[1].message
    for wrong_answer, why in known["with"].items():
        feedback = ch06.check_blocks(s.unshared, wrong_answer)
        assert feedback.status == checker.WRONG and feedback.message == "1 answer is wrong."
        assert why in " ".join(feedback.details)
        said.append(feedback)
    assert said[-1].hint and "50 // 16 whole blocks" in said[-1].hint  # the third wrong attempt: both hints
    both = ch06.check_blocks(s.unshared + 1, s.shared + 1)
    assert both.message == "2 answers are wrong."
    right = ch06.check_blocks(s.unshared, s.shared)
    assert right.status == checker.RIGHT
    for feedback in (*said, both, right):
        assert not CHINESE.search(_said(feedback)), _said(feedback)
    with using_language("zh"):
        zh = ch06.grade_blocks(s.unshared, s.shared).message
    assert NUMBER.findall(right.message) == NUMBER.findall(zh)
