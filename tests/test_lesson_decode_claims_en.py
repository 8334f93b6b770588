"""Chapter 3.1's claims in English: every key has an English sentence filling the same fields, and every synthetic
shape of tests/test_lesson_decode.py, said in English, holds no Chinese, prints the numbers the Chinese sentence
prints and passes the checker; show_claims writes in the course's language (the checks: claims_en_support.py)."""
import pytest

from kvlab import claims
from kvlab.lessons import decode as lesson
from kvlab.lessons.decode.sentences import common, exponents, growth, series
from tests import claims_en_support as support
from tests.test_lesson_decode import T, _counted, _cumulative, _fake, _growth_shapes, _latency_shapes, _step

STEP_SHAPES = [(2.0, 1.0, 2.7), (1.4, 3.0, 2.0), (0.5, 2.0, 2.0), (2.5, 2.0, 2.0), (0.1, 2.0, 3.0), (0.1, 2.0, 2.05)]


def _latency(name):
    none, kv = _latency_shapes()[name]
    return [lesson.explain_latency({"none": none, "kv": kv}, lesson.timing_model())]


def _growth(name, scale):  # the latency panel's cached run: the same steps, faster, slower
    ms = _growth_shapes()[name]
    return [lesson.explain_growth(lesson.fit_step_time(_fake("kv", list(range(5, 1029)), ms)), lesson.timing_model(),
                                  _fake("kv", T, [scale * m for m in ms[:len(T)]]))]


def _exponents(mode):
    said = [[lesson.STEP_EXPONENT.choose(_step(k, early, late), {"mode": mode}),
             lesson.CUMULATIVE.choose(_cumulative(k, early, late), {"mode": mode})] for k, early, late in STEP_SHAPES]
    steep = _step(1.45, 17.92, 37.75)
    return said + [[lesson.STEP_EXPONENT.choose(_step(1.0, 15.0, 20.0), {"mode": mode}),
                    lesson.STEP_EXPONENT.choose(_step(0.67, 13.42, 20.07), {"mode": mode}),
                    lesson.STEP_EXPONENT.choose(steep, {"mode": mode}),
                    lesson.STEP_STEEP.choose(steep, {"mode": mode})]]


def _totals():
    num = claims.number
    uncertain = {"n": num(192, 0), **_counted(), "none_s": num(2.0, 2, "s"), "kv_s": num(0.5, 2, "s"),
                 "speedup": num(4.0, 1), "none_est": num(3.0, 2, "s"), "kv_est": num(0.5, 2, "s"),
                 "robust": num(6.0, 1)}
    return [[lesson.TOTALS.choose(uncertain)]]


def _rerun():
    num = claims.number
    return [[lesson.RERUN.choose({"lo": num(5, 0), "hi": num(196, 0), "here": num(2.0, 2, "ms"),
                                  "there": num(2.0, 2, "ms"), "diff": num(50, 0, "%")})]]


CASES = {  # the claims of every synthetic shape and every hand-made case of tests/test_lesson_decode.py, a list a cell
    **{f"latency: {name}": lambda name=name: _latency(name) for name in _latency_shapes()},
    **{f"growth: {name} x{scale}": lambda name=name, scale=scale: _growth(name, scale)
       for name in _growth_shapes() for scale in (1.0, 0.5, 2.0)},
    "crossover": lambda: [[lesson.CROSSOVER.choose({"cross": claims.number(cross, 0), "n": claims.number(196, 0)})
                           for cross in (300, 100)]],
    "exponents: none": lambda: _exponents("none"), "exponents: kv": lambda: _exponents("kv"),
    "totals uncertain": _totals, "rerun": _rerun}


def _says_rerun(rule):  # a rule that says how to rerun in Chinese says so in English too
    zh = lesson.ZH.templates[rule.key]
    return not rule.substantive and (common._RERUN in zh or "重跑" in zh)


def test_every_key_has_an_english_sentence_with_the_same_fields():
    support.check_every_key_has_an_english_sentence(lesson, must_say_rerun=_says_rerun)
    support.check_words_in_english(series, exponents, growth, required=False)  # the terms and units, in English


@pytest.mark.parametrize("case", CASES)
def test_every_case_said_in_english_holds_no_chinese_and_the_same_numbers(case):
    support.check_said_in_english(lesson, CASES[case](), quantity=support.same_quantity({" min": " 分钟"}))


def test_every_english_sentence_is_rendered():
    support.check_every_sentence_rendered(lesson, [case() for case in CASES.values()])


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
    none, kv = _latency_shapes()["idle"]
    support.check_show_claims(lesson, lesson.explain_latency({"none": none, "kv": kv}, lesson.timing_model()),
                              monkeypatch)
