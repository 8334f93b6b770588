"""Chapter 3.4's claims in English: every key has an English sentence filling the same fields, and every synthetic
shape of tests/test_lesson_memory_estimate.py, said in English, holds no Chinese, prints the numbers the Chinese
sentence prints and passes the checker; show_claims follows the language switch (the checks: claims_en_support.py)."""
import re

import pytest

from kvlab import claims
from kvlab.lessons import memory_estimate as lesson
from tests import claims_en_support as support
from tests.test_lesson_memory_estimate import GIB, _allocation_claims, _device_claims

CASES = {  # every synthetic shape of tests/test_lesson_memory_estimate.py, one list of claims a cell
    **{f"allocation: {name}": [said] for name, said in _allocation_claims()},
    **{f"device: {name}": [said] for name, said in _device_claims()},
    "device: unread": [[lesson.DEVICE_MEMORY.choose({"total": claims.number(16 * GIB, 0, "B"),
                                                     "table": claims.number(15360, 0, "MiB"),
                                                     "diff": claims.number(3, 1, "MiB")})]]}


def test_every_key_has_an_english_sentence_with_the_same_fields():
    support.check_every_key_has_an_english_sentence(lesson, says_rerun=re.compile("rerun", re.IGNORECASE))


@pytest.mark.parametrize("case", CASES)
def test_every_case_said_in_english_holds_no_chinese_and_the_same_numbers(case):
    support.check_said_in_english(lesson, CASES[case])


def test_every_english_sentence_is_rendered():
    support.check_every_sentence_rendered(lesson, CASES.values())


def test_english_sentences_say_what_the_chinese_ones_say():
    said = dict(_allocation_claims())
    assert "rose by 33,554,432 B across the allocation, exactly the formula's 33,554,432 B" in \
        lesson.EN.say(said["GPU, exact"][0])
    assert "rounding K and V each up to a multiple of 512 bytes gives" in lesson.EN.say(said["GPU, rounded to 512 B"][0])
    assert "it is not a measurement by the allocator" in lesson.EN.say(said["CPU (idle)"][0])
    less = dict(_device_claims())["less"][0]
    assert lesson.EN.say(less).endswith("torch's reading is 251.0 MiB less (the part the driver keeps; the reading "
                                        "varies with the ECC setting and the driver version).")


def test_show_claims_writes_in_the_course_language(monkeypatch):
    support.check_show_claims(lesson, dict(_allocation_claims())["GPU, exact"], monkeypatch)
