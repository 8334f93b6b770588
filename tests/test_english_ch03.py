"""Chapter 3.3's exercises in English: titles, tasks, hints, the machine's readout, the trace table and every verdict
the graders give hold no Chinese and say the numbers the Chinese ones say; the trace runs on the English demo model's
own prompt, prefilled in as many chunks as the Chinese one."""
import dataclasses
import re

import pytest
import torch

from kvlab.exercises import ch03, checker, tools
from kvlab.exercises.solutions import SOLUTIONS
from kvlab.generation import GenerationResult, PassRecord
from kvlab.language import using_language
from kvlab.measure import Rate, Roofs

CHINESE = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")  # CJK characters and full-width punctuation
NUMBER = re.compile(r"\d+(?:\.\d+)?")
MACHINES = (ch03.Machine(10e9, 100e9, "test"), ch03.Machine(10e9, 20e9, "test"))  # ridge 10 and ridge 2
RIDGE_ANSWERS = [(None, None, None), (0.1, 47, 0), (1e-8, 47, 0), (10, 46, 0), (10, 48, 0), (10, 20, 0), (10, 0, 0),
                 (10, 47, 36), (10, 47.5, 0), (10, "many", 0), (10, 47, None), (10.0, 47, 0), (2.0, 5, 36),
                 (2.0, 5, 0), (2.0, 36, 36), (3, None, None), (10, 47, float("inf")), (2, 4, 0)]
TIMING_ANSWERS = [(None, None, None), (6.0, 2.95, 0.65), (6.0, 2.95, None), (2.0, 2.95, 0.65), (1.0, 2.95, 0.65),
                  (6.5, 2.95, 0.65), (17.8, 2.95, 0.65), (0.006, 2.95, 0.65), (6.0, 0.65, 0.65), (6.0, 2.95, 2.95),
                  (6.0, 2.95, 1.0), (6.0, 17.8 / 5, 0.65), (6.0, 11.8 / 5, 0.65), (6.0, 17.8 / 7, 0.65), (99, 99, 99),
                  ("x", 1, 1)]


def fake_run() -> GenerationResult:
    """3 prefill chunks (2, 3, 1 ms) and 4 decode steps (0.5, 0.7, 0.6, 10 ms), as tests/test_exercises.py's."""
    ms = {"prefill": [2.0, 3.0, 1.0], "decode": [0.5, 0.7, 0.6, 10.0]}
    trace, seq = [], 0
    for phase, times in ms.items():
        for t in times:
            new = 7 if phase == "prefill" else 1
            seq += new
            trace.append(PassRecord(phase, seq, new, t / 1e3, 0, 0, 0, 0, 0, 0))
    return GenerationResult(tokens=torch.zeros(1, 26, dtype=torch.long), trace=trace, prompt_len=21, cache_mode="kv")


def _words(verdict: checker.Verdict) -> str:
    return " ".join((verdict.message, *verdict.details))


def _both(grade, *args) -> tuple[str, str]:
    with using_language("zh"):
        zh = _words(grade(*args))
    with using_language("en"):
        en = _words(grade(*args))
    return zh, en


def _same_numbers(zh: str, en: str) -> None:
    assert not CHINESE.search(en), en
    assert NUMBER.findall(en) == NUMBER.findall(zh), (zh, en)


@pytest.fixture()
def english():
    """The course in English, with the English demo model for the checks (the exercises load it once per kernel)."""
    checker.reset_attempts()
    tools.demo.cache_clear()
    with using_language("en"):
        yield
    tools.demo.cache_clear()
    checker.reset_attempts()


def test_titles_tasks_and_hints_have_english_words():
    for exercise in ch03.EXERCISES:
        words = exercise.words("en")
        assert len(words.hints) == len(exercise.hints)
        for text in (words.title, words.task, *words.hints):
            assert text.strip() and not CHINESE.search(text), text
    ridge = ch03.BATCH_RIDGE.words("en").task
    assert "`pass_cost(ch03.CONFIG, 1, C, B)`" in ridge and "29,893,120 parameters, 114.0 MiB" in ridge
    assert f"`prefill_chunk_size={ch03.TRACE_CHUNK}`" in ch03.TTFT_TPOT.words("en").task


def test_the_trace_prompt_suits_the_english_model():
    from kvlab import load_demo_model

    _, zh_tok = load_demo_model("cpu", lang="zh")
    _, en_tok = load_demo_model("cpu", lang="en")
    prompt = ch03.trace_prompt(en_tok)
    assert ch03.trace_prompt(zh_tok) == ch03.TRACE_PROMPT == "人工智能模型处理一个请求，通常分为两个阶段"
    assert not CHINESE.search(prompt) and not en_tok.unknown(prompt)
    chunks = [-(-len(tok.encode(p)) // ch03.TRACE_CHUNK) for tok, p in ((zh_tok, ch03.TRACE_PROMPT), (en_tok, prompt))]
    assert chunks[0] == chunks[1] == 3  # three prefill passes, the last one part-filled, in both editions


def test_the_machine_says_where_its_roofs_come_from_in_english(monkeypatch):
    roofs = Roofs(Rate(25e9, 24e9, [25e9], "x"), Rate(75e9, 70e9, [75e9], "y"), "cpu", 1)
    monkeypatch.setattr(ch03, "measure_roofs", lambda device: roofs)
    for given, words in ((roofs, "as measured above on this page"), (None, "measured just now"),
                         ("not roofs", "not the ones this page measured")):
        with using_language("zh"):
            zh = str(ch03.this_machine(given))
        with using_language("en"):
            en = str(ch03.this_machine(given))
        assert words in en and en.startswith("This machine (cpu, ") and "25.0 GB/s" in en
        _same_numbers(zh, en)
    assert str(ch03.Machine(1e9, 2e9, "gpu", "words of its own")).startswith("本机（gpu，words of its own）")


@pytest.mark.parametrize("machine", MACHINES, ids=["ridge 10", "ridge 2"])
def test_batch_ridge_verdicts_in_english_say_the_chinese_numbers(machine):
    for answers in RIDGE_ANSWERS:
        _same_numbers(*_both(ch03.grade_batch_ridge, machine, *answers))
    for bad in ("x", ch03.Machine(0, 1e9, "x")):
        _same_numbers(*_both(ch03.grade_batch_ridge, bad, 1, 2, 3))


def test_batch_ridge_english_wording():
    ten, two = MACHINES
    with using_language("en"):
        right = ch03.grade_batch_ridge(ten, 10.0, 47, 0)
        assert right.status == checker.RIGHT and right.message == "Correct! This machine's ridge point is about 10 FLOP/byte."
        assert "no B gets past the ridge point" in right.details[1] and "from B = 47 on" in right.details[0]
        assert "from B = 36 on" in _words(ch03.grade_batch_ridge(two, 2.0, 5, 36))
        partly = ch03.grade_batch_ridge(ten, 3, None, None)
        assert partly.message == "1 answer is wrong; still to fill in: b_short, b_long."
        assert partly.details == ("ridge: Not right: you wrote 3, and that is not what this machine's measurements "
                                  "give",)
        assert ch03.grade_batch_ridge(ten, 10, 47, None).message == "Not done yet: what you filled in is right; " \
                                                                   "still to fill in: b_long."
        assert ch03.grade_batch_ridge(ten, 0.1, 20, 36).message == "3 answers are wrong."
        assert "only the weights' bytes" in _words(ch03.grade_batch_ridge(ten, 10, 20, 0))
        assert "the two context lengths are swapped" in _words(ch03.grade_batch_ridge(two, 2.0, 36, 36))


def test_ttft_tpot_verdicts_in_english_say_the_chinese_numbers():
    run = fake_run()
    for answers in TIMING_ANSWERS:
        _same_numbers(*_both(ch03.grade_ttft_tpot, run, *answers))
    even = dataclasses.replace(run, trace=[dataclasses.replace(p, seconds=0.001) for p in run.trace])
    broken = [dataclasses.replace(run, trace=[p for p in run.trace if p.phase == phase])
              for phase in ("prefill", "decode")]
    zero = dataclasses.replace(run, trace=[dataclasses.replace(p, seconds=0.0) for p in run.trace])
    for traced in (even, "x", *broken, zero):
        _same_numbers(*_both(ch03.grade_ttft_tpot, traced, 3, 1, 1))
    with using_language("en"):
        said = _words(ch03.grade_ttft_tpot(run, 6.0, 2.95, 0.65))
        assert said.startswith("Correct! TTFT = the sum of 3 prefill passes = 6.000 ms;") and "pulled the mean up" in said
        assert "no decode forward pass" in _words(ch03.grade_ttft_tpot(broken[0], 3, 1, 1))
        assert "the prompt was split into 3 chunks" in _words(ch03.grade_ttft_tpot(run, 2.0, 2.95, 0.65))


def test_the_trace_table_in_english():
    table = ch03.trace_table(fake_run())
    with using_language("zh"):
        zh_text, zh_html = repr(table), table._repr_html_()
    with using_language("en"):
        en_text, en_html = repr(table), table._repr_html_()
    for zh, en in ((zh_text, en_text), (zh_html, en_html)):
        _same_numbers(zh, en)
    assert en_text.splitlines()[0] == "  1 prefill  new tokens   7  sequence   7  2.000 ms"
    assert "<th>Time (ms)</th>" in en_html and "<td>decode</td>" in en_html


def test_a_real_trace_in_english(english):
    traced = ch03.traced_run()  # on the English demo model
    assert sum(r.phase == "prefill" for r in traced.trace) == 3
    fb = ch03.check_ttft_tpot(traced, *_solution_answers(traced))
    assert fb.status == checker.RIGHT and not CHINESE.search(fb.text + fb._repr_html_()), fb.text


def _solution_answers(traced) -> tuple[float, float, float]:
    """The reference solution's three numbers on ``traced``."""
    ns = {"ch03": ch03, "display": lambda *a: None, "run": traced}
    exec(SOLUTIONS["ch03.ttft_tpot"].replace("traced = ch03.traced_run()", "traced = run"), ns)
    return ns["ttft_ms"], ns["tpot_ms"], ns["itl_median_ms"]
