"""Chapter 3.2's claims in English: every key has an English sentence filling the same fields, and every synthetic
case of tests/test_lesson_storage.py (the growth shapes, the pace and same-work cases), said in English, holds no
Chinese, prints the numbers the Chinese sentence prints and passes the checker; show_claims follows the language."""
import re

import pytest

from kvlab import claims
from kvlab.language import using_language
from kvlab.lessons import storage as lesson
from kvlab.lessons.storage import sentences
from tests.test_lesson_storage import GROWTH_SHAPES, STATIC, _timed

CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")

PACE_CASES = [([10, 10, 10], [15, 15, 15]), ([7.82, 7.9, 7.7], [11.76, 11.5, 12.0]), ([10, 10, 10], [8, 8, 8]),
              ([10, 10, 10], [8, 8.5, 7]), ([10, 10, 10], [10.2, 9.9, 10.4]), ([10, 10, 10], [10.5, 10.3, 10.6]),
              ([10, 10, 10], [13, 13, 10.5]), ([10, 10, 10], [12, 9, 11]), ([10, 10, 10], [13, 13, 9.9]),
              ([0, 0, 0], [0, 0, 0]), ([5, 10, 20], [18.2, 9.5, 21]), ([10], [12])]
WORK_CASES = [([3.89, 6.40, 3.80], [3.76, 3.70, 3.80]), ([15.81, 15.9, 15.7], [9.26, 9.3, 9.2]),
              ([9.0, 9.1, 9.0], [10.2, 10.0, 10.1]), ([9.01, 6.92, 7.87], [8.16, 7.96, 7.89]),
              ([9.9, 10.1, 10.0], [9.5, 9.6, 9.5]), ([0.0] * 3, [0.0] * 3), ([5.0] * 3, [5.1] * 3)]


def _every_case() -> list[list[claims.Claim]]:
    said = [_timed(*shape).claims() for shape in GROWTH_SHAPES.values()]
    said += [[lesson.pace_claim("kv", base, "dynamic", other, "late", (36, 64))] for base, other in PACE_CASES]
    said.append([lesson.pace_claim("kv", [2.50, 4.50, 2.50], "dynamic", [2.62, 2.52, 2.45], "early", (9, 22),
                                   more_work=True)])
    for early, late in WORK_CASES:
        work = lesson.SameWork(STATIC, early, late)
        said.append([lesson.work_claim(work, (9, 22)),
                     lesson.pace_claim("transformers:dynamic", [10, 10, 10], STATIC, [15, 15, 15], "early", (9, 22),
                                       work)])
    return said


def test_every_key_has_an_english_sentence_with_the_same_fields():
    keys = {k for c in lesson.CHOOSERS for k in c.keys}
    assert set(lesson.EN.templates) == set(lesson.ZH.templates) == keys
    for key in keys:
        assert lesson.EN.placeholders(key) == lesson.ZH.placeholders(key), key
        assert not CJK.search(lesson.EN.templates[key]), key
    for chooser in lesson.CHOOSERS:
        for rule in chooser.rules:
            if not rule.substantive and rule.key.startswith("storage.pace"):  # a "can't tell" says how to rerun
                assert "rerun" in lesson.EN.templates[rule.key], rule.key
    assert lesson.EN.separator == ", " and lesson.CATALOGS == {"zh": lesson.ZH, "en": lesson.EN}
    assert set(sentences.WORDS_EN) == set(sentences.WORDS)
    assert not any(CJK.search(w) for w in sentences.WORDS_EN.values())


def test_every_case_said_in_english_holds_no_chinese_and_the_same_numbers():
    said = _every_case()
    assert {c.key for cs in said for c in cs} == set(lesson.EN.templates)  # every English sentence rendered
    for cs in said:
        for claim in cs:
            zh, en = lesson.ZH.say(claim), lesson.EN.say(claim)
            assert not CJK.search(en), (claim.key, en)
            for name, n in claim.fields.items():  # each printed number, with its unit, as the Chinese prints it
                assert lesson.ZH.quantity(n) in zh and lesson.EN.quantity(n) in en, (claim.key, name, en)
                assert lesson.EN.quantity(n) == lesson.ZH.quantity(n).replace(claims.SEPARATOR, ", ")
            assert sorted(set(NUMBER.findall(zh))) == sorted(set(NUMBER.findall(en))), (claim.key, zh, en)
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data",
                                                        "data": {"text/plain": "\n".join(map(lesson.EN.say, cs))},
                                                        "metadata": {"kvlab_claims": [c.record() for c in cs]}}]}
                    for cs in said]}
    assert claims.check_recorded(nb, lesson.CHOOSERS) == []


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
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, raw, metadata: shown.append(data["text/plain"]))
    said = _timed(*GROWTH_SHAPES["busy start"]).claims()
    with using_language("en"):
        lesson.show_claims(said)
    lesson.show_claims(said)  # the default: Chinese, as before
    assert shown == ["\n".join(map(lesson.EN.say, said)), "\n".join(map(lesson.ZH.say, said))]
    assert not CJK.search(shown[0]) and CJK.search(shown[1])


@pytest.mark.parametrize("name", ["kv", "dynamic", "transformers:static"])
def test_chapter_labels_follow_the_language(name):
    zh = lesson.CHAPTER_LABELS[name]
    with using_language("en"):
        en = lesson.CHAPTER_LABELS[name]
    assert CJK.search(zh) and not CJK.search(en) and zh == lesson.CHAPTER_LABELS.text(name, "zh")
    assert lesson.CHAPTER_LABELS["kv"] == "预分配（kv）"
