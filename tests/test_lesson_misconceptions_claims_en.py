"""Chapter 3.5's claims in English: every key has an English sentence filling the same fields, and every synthetic
case of tests/test_lesson_misconceptions.py, said in English, holds no Chinese, prints the numbers the Chinese
sentence prints and passes the checker; show_claims writes in the course's language."""
import re

from kvlab import claims
from kvlab.language import using_language
from kvlab.lessons import misconceptions as lesson
from kvlab.lessons.misconceptions import k_only
from tests.test_busy_claims import unsound_printed
from tests.test_lesson_misconceptions import K_ONLY_SHAPES, KV_GAP_SHAPES, _modes, _prefill_shapes

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
            if not rule.substantive:  # a "can't tell" says how to rerun, in English too
                assert "rerun" in lesson.EN.templates[rule.key], rule.key
    assert lesson.EN.separator == ", " and lesson.CATALOGS == {"zh": lesson.ZH, "en": lesson.EN}
    assert k_only.WORDS == {"×": "倍"} and lesson.ZH.words == k_only.WORDS and lesson.EN.words == {}
    for cs in _every_case():  # no unit recorded in Chinese (a series is recorded with claims.SEPARATOR, by design)
        assert not any(CJK.search(str(c.record()).replace(claims.SEPARATOR, "")) for c in cs)


def _every_case() -> list[list[claims.Claim]]:
    """The claims of every synthetic shape of tests/test_lesson_misconceptions.py, one list per cell."""
    said = [lesson.explain_k_only(_modes(*times)) for times, _ in K_ONLY_SHAPES.values()]
    said += [lesson.explain_prefill(p) for p in _prefill_shapes().values()]
    said += [[lesson.kv_gap_claim(176, counted, speedup)] for counted, speedup in KV_GAP_SHAPES.values()]
    return said


def test_every_case_said_in_english_holds_no_chinese_and_the_same_numbers():
    said = _every_case()
    assert {c.key for cs in said for c in cs} == set(lesson.EN.templates)  # every English sentence rendered
    for cs in said:
        for claim in cs:
            zh, en = lesson.ZH.say(claim), lesson.EN.say(claim)
            assert not CJK.search(en), (claim.key, en)
            for name, n in claim.fields.items():  # each printed number as the Chinese prints it (× is 倍 there)
                assert lesson.ZH.quantity(n) in zh and lesson.EN.quantity(n) in en, (claim.key, name, en)
                assert n.text.replace(claims.SEPARATOR, ", ") in en
            assert sorted(set(NUMBER.findall(zh))) == sorted(set(NUMBER.findall(en))), (claim.key, zh, en)
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data",
                                                        "data": {"text/plain": "\n".join(map(lesson.EN.say, cs))},
                                                        "metadata": {"kvlab_claims": [c.record() for c in cs]}}]}
                    for cs in said]}
    assert claims.check_recorded(nb, lesson.CHOOSERS) == [] and unsound_printed(nb) == []


def test_english_sentences_say_what_the_chinese_ones_say():
    text = " ".join(map(lesson.EN.say, lesson.explain_k_only(_modes(*K_ONLY_SHAPES["idle CPU"][0]))))
    assert "median step 5.10 ms against 5.10 ms, 0% apart" in text and "(K only ÷ no cache): 1.02, 1.02, 0.96" in text
    assert "no cache (5.10 ms) takes 5.1× as long; in every repeat no cache takes 2× as long or more (5.0, 4.7, 5.1×)" in text
    gap = lesson.EN.say(lesson.kv_gap_claim(176, *KV_GAP_SHAPES["idle CPU (the fourth review's run)"]))
    assert "t ≈ 176" in gap and "111× the work" in gap and "fixed cost" in gap
    prefill = lesson.EN.say(lesson.explain_prefill(_prefill_shapes()["idle CPU"])[0])
    assert "0.050 ms per token on average, less than a decode step (2.00 ms)" in prefill


def test_show_claims_writes_in_the_course_language(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, raw, metadata: shown.append(data["text/plain"]))
    said = lesson.explain_k_only(_modes(*K_ONLY_SHAPES["idle CPU"][0]))
    with using_language("en"):
        lesson.show_claims(said)
    lesson.show_claims(said)  # the default: Chinese, as before
    assert shown == ["\n".join(map(lesson.EN.say, said)), "\n".join(map(lesson.ZH.say, said))]
    assert not CJK.search(shown[0]) and CJK.search(shown[1])
