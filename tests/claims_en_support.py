"""The checks every chapter's tests/test_lesson_<name>_claims_en.py runs on its lesson's claims in English.

A lesson module ``lesson`` has ``ZH`` and ``EN`` catalogs (``CATALOGS``), ``CHOOSERS`` and ``show_claims``. Its test
file names its synthetic cases, ``{id: a function returning the claims, one list per cell}``, and calls these: every
key has an English sentence filling the same fields; each case said in English holds no Chinese, prints the numbers
the Chinese sentence prints and passes the checker; all the cases together render every English sentence;
show_claims writes in the course's language.
"""
import re
from collections.abc import Callable, Iterable, Mapping

from kvlab import claims
from kvlab.language import using_language
from tests.test_busy_claims import unsound_printed

CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")

Cells = list[list[claims.Claim]]


def not_substantive(rule) -> bool:
    """The rules whose English sentence must say how to rerun: a "can't tell"."""
    return not rule.substantive


def check_every_key_has_an_english_sentence(lesson, *, says_rerun: str | re.Pattern = "rerun",
                                            must_say_rerun: Callable = not_substantive) -> None:
    """The same keys in both catalogs and the choosers, the same fields, no Chinese in an English template, every rule
    that ``must_say_rerun`` picks matching ``says_rerun`` in English; the lesson's catalogs are ZH and EN."""
    keys = {k for c in lesson.CHOOSERS for k in c.keys}
    assert set(lesson.EN.templates) == set(lesson.ZH.templates) == keys
    for key in keys:
        assert lesson.EN.placeholders(key) == lesson.ZH.placeholders(key), key
        assert not CJK.search(lesson.EN.templates[key]), key
    for chooser in lesson.CHOOSERS:
        for rule in chooser.rules:
            if must_say_rerun(rule):  # a "can't tell" says how to rerun, in English too
                assert re.search(says_rerun, lesson.EN.templates[rule.key]), rule.key
    assert lesson.EN.separator == ", " and lesson.CATALOGS == {"zh": lesson.ZH, "en": lesson.EN}


def check_words_in_english(*topics, required: bool = True, empty_as_in_chinese: bool = False) -> None:
    """Each topic's WORDS_EN writes every term of its WORDS (the terms and units the Chinese records), in English, none
    empty (``empty_as_in_chinese``: but where the Chinese is). ``required=False``: a topic may have neither."""
    for topic in topics:
        words, words_en = ((topic.WORDS, topic.WORDS_EN) if required else
                           (getattr(topic, "WORDS", {}), getattr(topic, "WORDS_EN", {})))
        assert set(words_en) == set(words), topic.__name__
        for key, word in words_en.items():
            assert not CJK.search(word), (topic.__name__, key, word)
            assert word.strip() or (empty_as_in_chinese and not words[key].strip()), (topic.__name__, key)


def same_quantity(en_units: Mapping[str, str] = {}) -> Callable:
    """A number printed in English as in Chinese, but for the series' separator and the units in ``en_units``
    (English → Chinese)."""
    def check(lesson, n, en: str) -> None:
        english = lesson.EN.quantity(n)
        for unit, chinese in en_units.items():
            english = english.replace(unit, chinese)
        assert english == lesson.ZH.quantity(n).replace(claims.SEPARATOR, ", "), (n.text, en)
    return check


def text_in_sentence(lesson, n, en: str) -> None:
    """A number's printed text, its series' separator in English, is in the English sentence (for a lesson whose units
    the Chinese writes in words: × is 倍 there)."""
    assert n.text.replace(claims.SEPARATOR, ", ") in en, (n.text, en)


def notebook(lesson, said: Iterable[list[claims.Claim]]) -> dict:
    """A notebook with one output per list of claims: the English sentences and the claims' record."""
    return {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data",
                                                         "data": {"text/plain": "\n".join(map(lesson.EN.say, cs))},
                                                         "metadata": {"kvlab_claims": [c.record() for c in cs]}}]}
                      for cs in said]}


def check_said_in_english(lesson, said: Cells, *, quantity: Callable = same_quantity(),
                          records_no_chinese: bool = False) -> None:
    """One case, one list of claims per cell: each claim in English holds no Chinese; each printed number, with its
    unit, is in both sentences as its catalog prints it (and ``quantity`` holds on it); no number the Chinese
    sentence prints is missing or added; the checker finds nothing in a notebook printing the English, nor
    tests/test_busy_claims.py a negative or missing quantity; with ``records_no_chinese`` no unit is recorded in
    Chinese (a series is recorded with claims.SEPARATOR, by design)."""
    said = [cs for cs in said if cs]
    for cs in said:
        for claim in cs:
            zh, en = lesson.ZH.say(claim), lesson.EN.say(claim)
            assert not CJK.search(en), (claim.key, en)
            for name, n in claim.fields.items():
                assert lesson.ZH.quantity(n) in zh and lesson.EN.quantity(n) in en, (claim.key, name, en)
                quantity(lesson, n, en)
            assert sorted(set(NUMBER.findall(zh))) == sorted(set(NUMBER.findall(en))), (claim.key, zh, en)
            if records_no_chinese:
                assert not CJK.search(str(claim.record()).replace(claims.SEPARATOR, "")), claim.record()
    nb = notebook(lesson, said)
    assert claims.check_recorded(nb, lesson.CHOOSERS) == [] and unsound_printed(nb) == []


def check_every_sentence_rendered(lesson, cases: Iterable[Cells]) -> None:
    """The cases together render every English sentence at least once."""
    assert {c.key for said in cases for cs in said for c in cs} == set(lesson.EN.templates)


def check_show_claims(lesson, said: list[claims.Claim], monkeypatch) -> None:
    """show_claims writes English in English, Chinese by default."""
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, raw, metadata: shown.append(data["text/plain"]))
    with using_language("en"):
        lesson.show_claims(said)
    lesson.show_claims(said)  # the default: Chinese, as before
    assert shown == ["\n".join(map(lesson.EN.say, said)), "\n".join(map(lesson.ZH.say, said))]
    assert not CJK.search(shown[0]) and CJK.search(shown[1])
