"""Chapter 3.3's claims in English: every key has an English sentence filling the same fields, and every synthetic
shape and case of tests/test_claims_prefill_decode.py, said in English, holds no Chinese, prints the numbers the
Chinese sentence prints and passes the checker; show_claims follows the language switch."""
import re

import pytest

from kvlab import claims
from kvlab.language import using_language
from kvlab.lessons import prefill_decode as lesson
from kvlab.lessons.prefill_decode.sentences import batching
from tests.test_busy_claims import unsound_printed
from tests.test_claims_prefill_decode import BROKEN, CASES, SHAPES, chapter_claims

CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def test_every_key_has_an_english_sentence_with_the_same_fields():
    keys = {k for c in lesson.CHOOSERS for k in c.keys}
    assert set(lesson.EN.templates) == set(lesson.ZH.templates) == keys
    for key in keys:
        assert lesson.EN.placeholders(key) == lesson.ZH.placeholders(key), key
        assert not CJK.search(lesson.EN.templates[key]), key
    for chooser in lesson.CHOOSERS:
        for rule in chooser.rules:
            if not rule.substantive:  # a "can't tell" says how to measure again, in English too
                assert re.search(r"rerun|again", lesson.EN.templates[rule.key]), rule.key
    assert lesson.EN.separator == ", " and lesson.CATALOGS == {"zh": lesson.ZH, "en": lesson.EN}
    assert set(batching.WORDS_EN) == set(batching.WORDS)  # the terms, each written in English
    assert all(not CJK.search(en) for en in batching.WORDS_EN.values())


def _every_case() -> list[list[claims.Claim]]:
    """The claims of every synthetic run and every hand-made case of tests/test_claims_prefill_decode.py, one list per
    cell."""
    said = [group for run in [*SHAPES.values(), BROKEN] for group in chapter_claims(run)]
    return said + [case() for case in CASES.values()]


def test_every_case_said_in_english_holds_no_chinese_and_the_same_numbers():
    said = [cs for cs in _every_case() if cs]
    assert {c.key for cs in said for c in cs} == set(lesson.EN.templates)  # every English sentence rendered here
    for cs in said:
        for claim in cs:
            zh, en = lesson.ZH.say(claim), lesson.EN.say(claim)
            assert not CJK.search(en), (claim.key, en)
            for name, n in claim.fields.items():  # each printed number, with its unit, as the Chinese prints it
                assert lesson.ZH.quantity(n) in zh and lesson.EN.quantity(n) in en, (claim.key, name, en)
                assert lesson.EN.quantity(n) == lesson.ZH.quantity(n).replace(claims.SEPARATOR, ", ")
            # and no number the Chinese sentence prints is missing or added (the fixed bands included)
            assert sorted(set(NUMBER.findall(zh))) == sorted(set(NUMBER.findall(en))), (claim.key, zh, en)
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data",
                                                        "data": {"text/plain": "\n".join(map(lesson.EN.say, cs))},
                                                        "metadata": {"kvlab_claims": [c.record() for c in cs]}}]}
                    for cs in said]}
    assert claims.check_recorded(nb, lesson.CHOOSERS) == [] and unsound_printed(nb) == []


def test_english_sentences_say_what_the_chinese_ones_say():
    idle = {c.key: lesson.EN.say(c) for group in chapter_claims(SHAPES["idle"]) for c in group}
    assert idle["prefill_decode.allocator.fragmented"].startswith(
        "In this measurement the cache grown piece by piece had up to 6.00 MiB reserved but used by no tensor")
    gpu = {c.key: lesson.EN.say(c) for group in chapter_claims(SHAPES["gpu"]) for c in group}
    assert "a few more sequences add almost no time" in gpu["prefill_decode.batch_left.flat"]
    overlap = lesson.EN.say(CASES["no B left of the ridge but B = 1"]()[0])
    assert "This run cannot work out this estimate: apart from B = 1, no B measured has B × I₁ < the ridge" in overlap


def test_show_claims_writes_in_the_course_language(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, raw, metadata: shown.append(data["text/plain"]))
    said = chapter_claims(SHAPES["idle"])[0]
    with using_language("en"):
        lesson.show_claims(said)
    lesson.show_claims(said)  # the default: Chinese, as before
    assert shown == ["\n".join(map(lesson.EN.say, said)), "\n".join(map(lesson.ZH.say, said))]
    assert not CJK.search(shown[0]) and CJK.search(shown[1])
