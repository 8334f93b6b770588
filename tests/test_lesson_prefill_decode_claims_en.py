"""Chapter 3.3's claims in English: every key has an English sentence filling the same fields, and every synthetic
shape and case of tests/test_claims_prefill_decode.py, said in English, holds no Chinese, prints the numbers the
Chinese sentence prints and passes the checker; show_claims follows the language switch (the checks:
claims_en_support.py)."""
import pytest

from kvlab.lessons import prefill_decode as lesson
from kvlab.lessons.prefill_decode.sentences import batching
from tests import claims_en_support as support
from tests.test_claims_prefill_decode import BROKEN, SHAPES, chapter_claims
from tests.test_claims_prefill_decode import CASES as HAND_MADE

CASES = {  # every synthetic run and hand-made case of tests/test_claims_prefill_decode.py, one list of claims a cell
    **{f"run: {name}": lambda run=run: chapter_claims(run) for name, run in SHAPES.items()},
    "run: broken": lambda: chapter_claims(BROKEN),
    **{f"case: {name}": lambda case=case: [case()] for name, case in HAND_MADE.items()}}


def test_every_key_has_an_english_sentence_with_the_same_fields():
    support.check_every_key_has_an_english_sentence(lesson, says_rerun=r"rerun|again")  # or "measure again"
    support.check_words_in_english(batching, empty_as_in_chinese=True)  # the terms, each written in English


@pytest.mark.parametrize("case", CASES)
def test_every_case_said_in_english_holds_no_chinese_and_the_same_numbers(case):
    support.check_said_in_english(lesson, CASES[case]())  # the fixed bands' numbers included


def test_every_english_sentence_is_rendered():
    support.check_every_sentence_rendered(lesson, [case() for case in CASES.values()])


def test_english_sentences_say_what_the_chinese_ones_say():
    idle = {c.key: lesson.EN.say(c) for group in chapter_claims(SHAPES["idle"]) for c in group}
    assert idle["prefill_decode.allocator.fragmented"].startswith(
        "In this measurement the cache grown piece by piece had up to 6.00 MiB reserved but used by no tensor")
    gpu = {c.key: lesson.EN.say(c) for group in chapter_claims(SHAPES["gpu"]) for c in group}
    assert "a few more sequences add almost no time" in gpu["prefill_decode.batch_left.flat"]
    overlap = lesson.EN.say(HAND_MADE["no B left of the ridge but B = 1"]()[0])
    assert "This run cannot work out this estimate: apart from B = 1, no B measured has B × I₁ < the ridge" in overlap


def test_show_claims_writes_in_the_course_language(monkeypatch):
    support.check_show_claims(lesson, chapter_claims(SHAPES["idle"])[0], monkeypatch)
