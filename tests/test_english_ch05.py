"""Chapter 3.5's exercises in English: titles, tasks, hints, the mystery report and every verdict the graders give
hold no Chinese, say the numbers the Chinese ones say, and the caches run on the English demo model's own prompts
with the signatures the identify exercise relies on."""
import re

import pytest

from kvlab.exercises import ch05, checker, tools
from kvlab.exercises.solutions import SOLUTIONS
from kvlab.language import using_language

CHINESE = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")  # CJK characters and full-width punctuation
NUMBER = re.compile(r"\d+(?:\.\d+)?")
FIX = SOLUTIONS["ch05.fix"]


@pytest.fixture()
def english():
    """The course in English, with the English demo model for the checks (the exercises load it once per kernel)."""
    checker.reset_attempts()
    tools.demo.cache_clear()
    with using_language("en"):
        yield
    tools.demo.cache_clear()
    checker.reset_attempts()


def _said(feedback) -> str:
    return feedback.text + feedback._repr_html_()


def _run(exercise, source):
    ns = {"display": lambda *a, **k: None}
    exec(ch05.SETUP, ns)
    exec(source, ns)
    return eval(exercise.check, ns)


def _defined(source: str):
    scope = {}
    exec(source, scope)  # noqa: S102  (the exercise's own stub text)
    return scope["store"]


def test_titles_tasks_and_hints_have_english_words():
    for exercise in ch05.EXERCISES:
        words = exercise.words("en")
        assert len(words.hints) == len(exercise.hints)
        for text in (words.title, words.task, *words.hints):
            assert text.strip() and not CHINESE.search(text), text
    task = ch05.IDENTIFY.words("en").task
    assert all(f'`"{bug}"`' in task for bug in ch05.BUG_IDS) and "`bug_x`" in task
    assert '"Artificial"' in task and '"Large language models"' in task
    assert "`store`" in ch05.FIX.words("en").task and "off_by_one" not in ch05.FIX.words("en").task


def test_the_prompts_suit_the_english_model():
    from kvlab import load_demo_model

    _, en_tok = load_demo_model("cpu", lang="en")
    prompts = ch05.model_prompts(en_tok)
    assert prompts == ("Artificial", "A computer", "Large language models")
    assert not any(CHINESE.search(p) or en_tok.unknown(p) for p in prompts)
    assert ch05.PROMPTS == ("人工", "计算") and ch05.PREVIOUS == "大语言模型"  # the Chinese model's, as before


def test_the_english_model_keeps_the_signatures(english):
    assert ch05.signature("no_reset") == ch05.Signature(None, 1)
    assert ch05.signature("k_as_v") == ch05.Signature(1, 1)
    for bug in ("rope_offset", "off_by_one", "one_slot"):
        assert ch05.signature(bug) == ch05.Signature(2, 2)
    report = ch05.mystery_report()
    assert "Mystery cache X — fresh cache: all 8 steps match" in repr(report)
    assert "reused after one request and reset(): differs from step 1 on" in repr(report)
    assert not CHINESE.search(repr(report) + report._repr_html_())


def test_the_mystery_report_says_the_same_numbers_in_both_languages():
    zh = repr(ch05.mystery_report())
    with using_language("en"):
        en = repr(ch05.mystery_report())  # the Chinese model's signatures, said in English
    assert not CHINESE.search(en) and NUMBER.findall(en) == NUMBER.findall(zh), (zh, en)


@pytest.mark.parametrize("x, y, expected", [
    ("rope_offset", "k_as_v", 'if X were rope_offset, you would see "fresh cache: differs from step 2 on'),
    ("no_reset", "off_by_one", "if Y were off_by_one"),
    ("no_reset", None, "is still None"),
    ("k_as_v", None, "1 cache is misidentified, and bug_y is still None."),
    ("no_reset", "stale", "stale"),
    ("no_reset", "k_as_v", "Both right!"),
])
def test_identify_feedback_in_english(english, x, expected, y):
    fb = _run(ch05.IDENTIFY, f"bug_x = {x!r}\nbug_y = {y!r}")
    assert expected in _said(fb), _said(fb)
    assert not CHINESE.search(_said(fb)), _said(fb)


def test_identify_verdicts_say_the_same_numbers_in_both_languages():
    for x, y in (("rope_offset", "one_slot"), ("k_as_v", None), ("no_reset", "k_as_v")):
        zh = ch05.grade_identify(x, y)
        with using_language("en"):
            en = ch05.grade_identify(x, y)
        said_zh, said_en = " ".join((zh.message, *zh.details)), " ".join((en.message, *en.details))
        assert not CHINESE.search(said_en) and NUMBER.findall(said_en) == NUMBER.findall(said_zh), (said_zh, said_en)


@pytest.mark.parametrize("old, new, expected", [
    ("start = cache.length", "start = cache.length + 1",
     "the 3 new tokens belong in slots 0–2 ([length, length + T)); your code wrote slots 1–3"),
    ("cache.v[layer, :, :, start:start + T] = v", "cache.v[layer, :, :, start:start + T] = k",
     "K was written where V belongs"),
    ("cache.k[layer, :, :, start:start + T] = k\n    cache.v[layer, :, :, start:start + T] = v",
     "cache.k[0, :, :, start:start + T] = k\n    cache.v[0, :, :, start:start + T] = v", "every layer has a cache of"),
    ("start = cache.length", "start = max(cache.length - 1, 0) if cache.length else 0",
     "the 1 new token belongs in slot 3 ([length, length + T)); your code wrote slot 2"),
    ("cache.v[layer, :, :, start:start + T] = v", "cache.v[min(layer, 1), :, :, start:start + T] = v",
     "put V into layer 1"),
    ("cache.v[layer, :, :, start:start + T] = v", "cache.v[layer, :, :, start:start + T] = v\n    cache.length += 1",
     "store changed cache.length"),
], ids=["one slot late", "k as v", "one layer", "one slot early", "v in layer 1", "length moved"])
def test_fix_feedback_in_english(english, old, new, expected):
    assert old in FIX
    fb = _run(ch05.FIX, FIX.replace(old, new))
    assert fb.status == checker.WRONG and expected in _said(fb), _said(fb)
    assert not CHINESE.search(_said(fb)), _said(fb)


def test_the_fix_stub_and_the_solution_in_english(english):
    untouched = ch05.grade_fix(_defined(ch05.FIX_STUB))
    assert untouched.status == checker.TODO and not CHINESE.search(untouched.message), untouched.message
    assert 'Generating from the prompt "Artificial" with it: with a fresh cache it departs from the uncached ' \
           "reference from step 1 on" in untouched.message
    first = ch05.grade_fix(_defined(ch05.FIX_STUB.replace("k.shape[2]", "k.size(2)")))
    assert first.status == checker.WRONG and first.message.startswith('Prompt "Artificial", a fresh cache: departs')
    assert "your code wrote slot 2" in " ".join(first.details)
    right = _run(ch05.FIX, FIX)
    assert right.status == checker.RIGHT and "all 8 steps match the uncached reference" in right.message
    for feedback in (first, right):
        assert not CHINESE.search(_said(feedback) if hasattr(feedback, "text") else feedback.message)


def test_fix_verdicts_say_the_same_numbers_in_both_languages():
    for source in (ch05.FIX_STUB.replace("k.shape[2]", "k.size(2)"),
                   FIX.replace("start = cache.length", "start = cache.length + 1")):
        zh = ch05.store_problem(_defined(source))
        with using_language("en"):
            en = ch05.store_problem(_defined(source))
        assert not CHINESE.search(en) and NUMBER.findall(en) == NUMBER.findall(zh), (zh, en)
