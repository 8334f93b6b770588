"""Chapter 3.4's exercises in English: titles, tasks, hints and every verdict the graders give hold no Chinese and
say the numbers the Chinese ones say."""
import re

import pytest

from kvlab import MODEL_PRESETS
from kvlab.exercises import ch04, checker
from kvlab.language import using_language
from kvlab.presets import GPU_PRESETS

CHINESE = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")  # CJK characters and full-width punctuation
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def test_titles_tasks_and_hints_have_english_words():
    for exercise in ch04.EXERCISES:
        words = exercise.words("en")
        assert len(words.hints) == len(exercise.hints)
        for text in (words.title, words.task, *words.hints):
            assert text.strip() and not CHINESE.search(text), text
        zh = exercise.words("zh")
        assert sorted(set(NUMBER.findall(zh.task))) == sorted(set(NUMBER.findall(words.task))), exercise.key
    assert "`cache_bytes(preset, seq_len, batch_size)`" in ch04.WINDOW.words("en").task
    assert "A100 80 GB" in ch04.LARGEST_BATCH.words("en").task


def _good(p, s, b):
    return sum(2 * b * p.n_kv_head * p.head_dim * 2 * (min(s, p.sliding_window) if p.layer_is_windowed(i) else s)
               for i in range(p.n_layer))


def _window_answers():
    yield "stub", None
    yield "plain", lambda p, s, b: p.plain_formula_bytes(s, b)
    yield "query heads", lambda p, s, b: 2 * p.n_layer * b * p.n_head * s * p.head_dim * 2
    yield "returns None", lambda p, s, b: None if s > 4000 else _good(p, s, b)
    yield "right", _good


def _verdicts():
    """Every verdict the two graders give (each known mistake, the stub, a right answer), said by ``say``."""
    out = []
    for name, fn in _window_answers():
        if fn is None:
            stub = {}
            exec(ch04.WINDOW_STUB, stub)
            fn = stub["cache_bytes"]
        out.append(ch04.grade_window(fn))
    for name, S, B in ch04.WINDOW_CASES:
        out += [checker.wrong(why) for why in ch04.window_mistakes(MODEL_PRESETS[name], S, B).values()]
    p, card = MODEL_PRESETS[ch04.BATCH_MODEL], GPU_PRESETS[ch04.BATCH_CARD]
    right = (ch04.usable_bytes(card.memory_bytes) - p.weight_bytes("fp16")) // p.kv_cache_bytes(ch04.BATCH_S, 1)
    out += [ch04.grade_largest_batch(a) for a in (None, 3, right, *ch04.largest_batch_mistakes())]
    return [(v.status, v.message, *v.details) for v in out]


def test_every_verdict_in_english_says_the_same_numbers():
    zh = _verdicts()
    with using_language("en"):
        en = _verdicts()
    assert len(zh) == len(en) > 20
    for z, e in zip(zh, en):
        assert z[0] == e[0] and not any(CHINESE.search(t) for t in e[1:]), e
        assert sorted(set(NUMBER.findall(" ".join(z[1:])))) == sorted(set(NUMBER.findall(" ".join(e[1:])))), (z, e)


def test_english_verdicts_read_as_english():
    with using_language("en"):
        wrong = ch04.grade_window(lambda p, s, b: p.plain_formula_bytes(s, b))
        assert wrong.status == checker.WRONG
        assert wrong.message.startswith("Mistral-7B, S = 8,192, B = 1: should be 536,870,912 bytes")
        assert "That is the plain formula" in wrong.details[0]
        assert "Gemma-2-9B at S = 8,192 and B = 4 needs 8,455,716,864 bytes" in ch04.grade_window(_good).message
        mistakes = ch04.largest_batch_mistakes()
        assert any("You read the marketed \"80 GB HBM2e\" as GB of 10⁹ bytes" in m for m in mistakes.values())


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_right_answers_are_right_in_either_language(lang):
    p, card = MODEL_PRESETS[ch04.BATCH_MODEL], GPU_PRESETS[ch04.BATCH_CARD]
    right = (ch04.usable_bytes(card.memory_bytes) - p.weight_bytes("fp16")) // p.kv_cache_bytes(ch04.BATCH_S, 1)
    with using_language(lang):
        assert ch04.grade_window(_good).status == ch04.grade_largest_batch(right).status == checker.RIGHT
