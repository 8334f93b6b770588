"""Chapter 3.1's claims in English: every key has an English sentence filling the same fields, and every synthetic
shape of tests/test_lesson_decode.py, said in English, holds no Chinese, prints the numbers the Chinese sentence
prints and passes the checker; show_claims writes in the course's language."""
import re

from kvlab import claims
from kvlab.language import using_language
from kvlab.lessons import decode as lesson
from kvlab.lessons.decode.sentences import common, exponents, growth, series
from tests.test_busy_claims import unsound_printed
from tests.test_lesson_decode import T, _counted, _cumulative, _fake, _growth_shapes, _latency_shapes, _step

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
            zh = lesson.ZH.templates[rule.key]
            if not rule.substantive and (common._RERUN in zh or "重跑" in zh):  # says how to rerun, in English too
                assert "rerun" in lesson.EN.templates[rule.key], rule.key
    assert lesson.EN.separator == ", " and lesson.CATALOGS == {"zh": lesson.ZH, "en": lesson.EN}
    for topic in (series, exponents, growth):  # the terms and units the Chinese writes, each written in English
        assert set(getattr(topic, "WORDS_EN", {})) == set(getattr(topic, "WORDS", {})), topic.__name__
        for word in getattr(topic, "WORDS_EN", {}).values():
            assert word.strip() and not CJK.search(word)


def _every_case() -> list[list[claims.Claim]]:
    """The claims of every synthetic shape and every hand-made case of tests/test_lesson_decode.py, one list per cell."""
    model, num = lesson.timing_model(), claims.number
    said = [lesson.explain_latency({"none": none, "kv": kv}, model) for none, kv in _latency_shapes().values()]
    t = list(range(5, 1029))
    for ms in _growth_shapes().values():
        for scale in (1.0, 0.5, 2.0):  # the latency panel's cached run: the same steps, faster, slower
            said.append(lesson.explain_growth(lesson.fit_step_time(_fake("kv", t, ms)), model,
                                              _fake("kv", T, [scale * m for m in ms[:len(T)]])))
    said.append([lesson.CROSSOVER.choose({"cross": num(cross, 0), "n": num(196, 0)}) for cross in (300, 100)])
    for mode in ("none", "kv"):
        for k, early, late in [(2.0, 1.0, 2.7), (1.4, 3.0, 2.0), (0.5, 2.0, 2.0), (2.5, 2.0, 2.0), (0.1, 2.0, 3.0),
                               (0.1, 2.0, 2.05)]:
            said.append([lesson.STEP_EXPONENT.choose(_step(k, early, late), {"mode": mode}),
                         lesson.CUMULATIVE.choose(_cumulative(k, early, late), {"mode": mode})])
        steep = _step(1.45, 17.92, 37.75)
        said.append([lesson.STEP_EXPONENT.choose(_step(1.0, 15.0, 20.0), {"mode": mode}),
                     lesson.STEP_EXPONENT.choose(_step(0.67, 13.42, 20.07), {"mode": mode}),
                     lesson.STEP_EXPONENT.choose(steep, {"mode": mode}), lesson.STEP_STEEP.choose(steep, {"mode": mode})])
    uncertain = {"n": num(192, 0), **_counted(), "none_s": num(2.0, 2, "s"), "kv_s": num(0.5, 2, "s"),
                 "speedup": num(4.0, 1), "none_est": num(3.0, 2, "s"), "kv_est": num(0.5, 2, "s"), "robust": num(6.0, 1)}
    said.append([lesson.TOTALS.choose(uncertain)])
    said.append([lesson.RERUN.choose({"lo": num(5, 0), "hi": num(196, 0), "here": num(2.0, 2, "ms"),
                                      "there": num(2.0, 2, "ms"), "diff": num(50, 0, "%")})])
    return said


def test_every_case_said_in_english_holds_no_chinese_and_the_same_numbers():
    said = _every_case()
    reached = {c.key for cs in said for c in cs}
    assert reached == set(lesson.EN.templates)  # every English sentence is rendered at least once here
    for cs in said:
        for claim in cs:
            zh, en = lesson.ZH.say(claim), lesson.EN.say(claim)
            assert not CJK.search(en), (claim.key, en)
            for name, n in claim.fields.items():  # each printed number, with its unit, as the Chinese prints it
                assert lesson.ZH.quantity(n) in zh and lesson.EN.quantity(n) in en, (claim.key, name, en)
                assert lesson.EN.quantity(n).replace(" min", " 分钟") == lesson.ZH.quantity(n).replace(
                    claims.SEPARATOR, ", ")
            # and no number the Chinese sentence prints is missing or added
            assert sorted(set(NUMBER.findall(zh))) == sorted(set(NUMBER.findall(en))), (claim.key, zh, en)
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data",
                                                        "data": {"text/plain": "\n".join(map(lesson.EN.say, cs))},
                                                        "metadata": {"kvlab_claims": [c.record() for c in cs]}}]}
                    for cs in said]}
    assert claims.check_recorded(nb, lesson.CHOOSERS) == [] and unsound_printed(nb) == []


def test_english_sentences_say_what_the_chinese_ones_say():
    none, kv = _latency_shapes()["busy, rough rise"]
    said = {c.key: lesson.EN.say(c) for c in lesson.explain_latency({"none": none, "kv": kv}, lesson.timing_model())}
    text = said["decode.uncached.rises_rough"]
    assert "from 4.38 ms to 28.63 ms (×6.5)" in text and "the one fall, 26.66 ms → 20.34 ms, is a timing blip" in text
    assert "4.38, 5.69, 7.35, 11.34, 12.69, 26.66, 20.34, 28.63 ms" in text
    exponent = lesson.EN.say(lesson.STEP_EXPONENT.choose(_step(2.0, 1.0, 2.7), {"mode": "kv"}))
    assert exponent.startswith("The cached step exponent, 2.00, is close to 2"), exponent
    off = lesson.EN.say(lesson.STEP_EXPONENT.choose(_step(0.67, 13.42, 20.07), {"mode": "kv"}))
    assert off.startswith("The cached step exponent, 0.67, fitted to every step over the second half, t ≈ 112 → 184, "
                          "disagrees with that half's ends: from 13.42 ms to 20.07 ms, those two medians alone give "
                          "an exponent of about 0.81, more than 0.1 away"), off


def test_show_claims_writes_in_the_course_language(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, raw, metadata: shown.append(data["text/plain"]))
    none, kv = _latency_shapes()["idle"]
    said = lesson.explain_latency({"none": none, "kv": kv}, lesson.timing_model())
    with using_language("en"):
        lesson.show_claims(said)
    lesson.show_claims(said)  # the default: Chinese, as before
    assert shown == ["\n".join(map(lesson.EN.say, said)), "\n".join(map(lesson.ZH.say, said))]
    assert not CJK.search(shown[0]) and CJK.search(shown[1])
