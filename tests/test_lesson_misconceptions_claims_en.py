"""Chapter 3.5's claims in English: every key has an English sentence filling the same fields, and every synthetic
case of tests/test_lesson_misconceptions.py, said in English, holds no Chinese, prints the numbers the Chinese
sentence prints and passes the checker; show_claims writes in the course's language (the checks:
claims_en_support.py)."""
import pytest

from kvlab.lessons import misconceptions as lesson
from kvlab.lessons.misconceptions import k_only
from tests import claims_en_support as support
from tests.test_lesson_misconceptions import K_ONLY_SHAPES, KV_GAP_SHAPES, _modes, _prefill_shapes

CASES = {  # every synthetic shape of tests/test_lesson_misconceptions.py, one list of claims a cell
    **{f"K only: {name}": lambda times=times: [lesson.explain_k_only(_modes(*times))]
       for name, (times, _) in K_ONLY_SHAPES.items()},
    **{f"prefill: {name}": lambda name=name: [lesson.explain_prefill(_prefill_shapes()[name])]
       for name in _prefill_shapes()},
    **{f"kv gap: {name}": lambda shape=shape: [[lesson.kv_gap_claim(176, *shape)]]
       for name, shape in KV_GAP_SHAPES.items()}}


def test_every_key_has_an_english_sentence_with_the_same_fields():
    support.check_every_key_has_an_english_sentence(lesson)
    assert k_only.WORDS == {"×": "倍"} and lesson.ZH.words == k_only.WORDS and lesson.EN.words == {}


@pytest.mark.parametrize("case", CASES)
def test_every_case_said_in_english_holds_no_chinese_and_the_same_numbers(case):
    # each printed number as the Chinese prints it (× is 倍 there); no unit recorded in Chinese
    support.check_said_in_english(lesson, CASES[case](), quantity=support.text_in_sentence, records_no_chinese=True)


def test_every_english_sentence_is_rendered():
    support.check_every_sentence_rendered(lesson, [case() for case in CASES.values()])


def test_english_sentences_say_what_the_chinese_ones_say():
    text = " ".join(map(lesson.EN.say, lesson.explain_k_only(_modes(*K_ONLY_SHAPES["idle CPU"][0]))))
    assert "median step 5.10 ms against 5.10 ms, 0% apart" in text and "(K only ÷ no cache): 1.02, 1.02, 0.96" in text
    assert "no cache (5.10 ms) takes 5.1× as long; in every repeat no cache takes 2× as long or more (5.0, 4.7, 5.1×)" in text
    gap = lesson.EN.say(lesson.kv_gap_claim(176, *KV_GAP_SHAPES["idle CPU (the fourth review's run)"]))
    assert "t ≈ 176" in gap and "111× the work" in gap and "fixed cost" in gap
    prefill = lesson.EN.say(lesson.explain_prefill(_prefill_shapes()["idle CPU"])[0])
    assert "0.050 ms per token on average, less than a decode step (2.00 ms)" in prefill


def test_show_claims_writes_in_the_course_language(monkeypatch):
    support.check_show_claims(lesson, lesson.explain_k_only(_modes(*K_ONLY_SHAPES["idle CPU"][0])), monkeypatch)
