"""Chapter 3.4's claims in English: every key has an English sentence filling the same fields, and every synthetic
shape of tests/test_lesson_memory_estimate.py, said in English, holds no Chinese, prints the numbers the Chinese
sentence prints and passes the checker; show_claims follows the language switch."""
import re

from kvlab import claims
from kvlab.language import using_language
from kvlab.lessons import memory_estimate as lesson
from tests.test_lesson_memory_estimate import GIB, _allocation_claims, _device_claims

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
            if not rule.substantive:  # a "can't tell" says to rerun, in English too
                assert "rerun" in lesson.EN.templates[rule.key].lower(), rule.key
    assert lesson.EN.separator == ", " and lesson.CATALOGS == {"zh": lesson.ZH, "en": lesson.EN}


def _every_case() -> list[list[claims.Claim]]:
    said = [cs for _, cs in _allocation_claims()] + [cs for _, cs in _device_claims()]
    unread = {"total": claims.number(16 * GIB, 0, "B"), "table": claims.number(15360, 0, "MiB"),
              "diff": claims.number(3, 1, "MiB")}
    return said + [[lesson.DEVICE_MEMORY.choose(unread)]]


def test_every_case_said_in_english_holds_no_chinese_and_the_same_numbers():
    said = _every_case()
    assert {c.key for cs in said for c in cs} == set(lesson.EN.templates)  # every English sentence rendered
    for cs in said:
        for claim in cs:
            zh, en = lesson.ZH.say(claim), lesson.EN.say(claim)
            assert not CJK.search(en), (claim.key, en)
            for name, n in claim.fields.items():  # each printed number, with its unit, as the Chinese prints it
                assert lesson.ZH.quantity(n) in zh and lesson.EN.quantity(n) in en, (claim.key, name, en)
            assert sorted(set(NUMBER.findall(zh))) == sorted(set(NUMBER.findall(en))), (claim.key, zh, en)
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data",
                                                        "data": {"text/plain": "\n".join(map(lesson.EN.say, cs))},
                                                        "metadata": {"kvlab_claims": [c.record() for c in cs]}}]}
                    for cs in said]
          }
    assert claims.check_recorded(nb, lesson.CHOOSERS) == []


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
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, raw, metadata: shown.append(data["text/plain"]))
    said = dict(_allocation_claims())["GPU, exact"]
    with using_language("en"):
        lesson.show_claims(said)
    lesson.show_claims(said)  # the default: Chinese, as before
    assert shown == ["\n".join(map(lesson.EN.say, said)), "\n".join(map(lesson.ZH.say, said))]
    assert not CJK.search(shown[0]) and CJK.search(shown[1])
