"""Chapter 3.2's claims in English: every key has an English sentence filling the same fields, and every synthetic
case of tests/test_lesson_storage.py (the growth shapes, the pace and same-work cases), said in English, holds no
Chinese, prints the numbers the Chinese sentence prints and passes the checker; show_claims follows the language (the
checks: claims_en_support.py)."""
import pytest

from kvlab.language import using_language
from kvlab.lessons import storage as lesson
from kvlab.lessons.storage import sentences
from tests import claims_en_support as support
from tests.test_lesson_storage import GROWTH_SHAPES, STATIC, _timed

PACE_CASES = [([10, 10, 10], [15, 15, 15]), ([7.82, 7.9, 7.7], [11.76, 11.5, 12.0]), ([10, 10, 10], [8, 8, 8]),
              ([10, 10, 10], [8, 8.5, 7]), ([10, 10, 10], [10.2, 9.9, 10.4]), ([10, 10, 10], [10.5, 10.3, 10.6]),
              ([10, 10, 10], [13, 13, 10.5]), ([10, 10, 10], [12, 9, 11]), ([10, 10, 10], [13, 13, 9.9]),
              ([0, 0, 0], [0, 0, 0]), ([5, 10, 20], [18.2, 9.5, 21]), ([10], [12])]
WORK_CASES = [([3.89, 6.40, 3.80], [3.76, 3.70, 3.80]), ([15.81, 15.9, 15.7], [9.26, 9.3, 9.2]),
              ([9.0, 9.1, 9.0], [10.2, 10.0, 10.1]), ([9.01, 6.92, 7.87], [8.16, 7.96, 7.89]),
              ([9.9, 10.1, 10.0], [9.5, 9.6, 9.5]), ([0.0] * 3, [0.0] * 3), ([5.0] * 3, [5.1] * 3)]


def _work(early, late):
    work = lesson.SameWork(STATIC, early, late)
    return [[lesson.work_claim(work, (9, 22)),
             lesson.pace_claim("transformers:dynamic", [10, 10, 10], STATIC, [15, 15, 15], "early", (9, 22), work)]]


CASES = {  # every synthetic case of tests/test_lesson_storage.py, one list of claims a cell
    **{f"growth: {name}": lambda shape=shape: [_timed(*shape).claims()] for name, shape in GROWTH_SHAPES.items()},
    **{f"pace: {base} vs {other}": lambda base=base, other=other: [[lesson.pace_claim("kv", base, "dynamic", other,
                                                                                      "late", (36, 64))]]
       for base, other in PACE_CASES},
    "pace: more work": lambda: [[lesson.pace_claim("kv", [2.50, 4.50, 2.50], "dynamic", [2.62, 2.52, 2.45], "early",
                                                   (9, 22), more_work=True)]],
    **{f"same work: {early} vs {late}": lambda early=early, late=late: _work(early, late)
       for early, late in WORK_CASES}}


def test_every_key_has_an_english_sentence_with_the_same_fields():
    support.check_every_key_has_an_english_sentence(  # a "can't tell" of the pace says how to rerun
        lesson, must_say_rerun=lambda rule: not rule.substantive and rule.key.startswith("storage.pace"))
    support.check_words_in_english(sentences)


@pytest.mark.parametrize("case", CASES)
def test_every_case_said_in_english_holds_no_chinese_and_the_same_numbers(case):
    support.check_said_in_english(lesson, CASES[case]())


def test_every_english_sentence_is_rendered():
    support.check_every_sentence_rendered(lesson, [case() for case in CASES.values()])


def test_english_sentences_say_what_the_chinese_ones_say():
    text = "\n".join(map(lesson.EN.say, _timed(*GROWTH_SHAPES["early faster once"]).claims()))
    assert text.startswith("The second half of the run (36–64 tokens in the cache), time per forward pass")
    assert ('"concatenation (dynamic)" is 40% slower (the rounds\' median; at least 21% slower, at most 135%)'
            in text), text
    assert "round 2 differs by 13% (faster early), more than 10%" in text
    assert "in one round the same work differed by 13% between early and late" in text
    claim = lesson.pace_claim("kv", [2.50, 4.50, 2.50], "dynamic", [2.62, 2.52, 2.45], "early", (9, 22), more_work=True)
    assert "5, -44, -2%" in lesson.EN.say(claim) and "Round 2 at -44%" in lesson.EN.say(claim)


def test_show_claims_writes_in_the_course_language(monkeypatch):
    support.check_show_claims(lesson, _timed(*GROWTH_SHAPES["busy start"]).claims(), monkeypatch)


@pytest.mark.parametrize("name", ["kv", "dynamic", "transformers:static"])
def test_chapter_labels_follow_the_language(name):
    zh = lesson.CHAPTER_LABELS[name]
    with using_language("en"):
        en = lesson.CHAPTER_LABELS[name]
    assert support.CJK.search(zh) and not support.CJK.search(en) and zh == lesson.CHAPTER_LABELS.text(name, "zh")
    assert lesson.CHAPTER_LABELS["kv"] == "预分配（kv）"
