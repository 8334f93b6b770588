"""Chapter 3.6's claims and measurement texts in English: every key has an English sentence filling the same fields,
and every synthetic shape of tests/test_lesson_paged.py, said in English, holds no Chinese, prints the numbers the
Chinese sentence prints and passes the checker; why_sentence and the cell order follow the language switch (the
checks: claims_en_support.py)."""
import pytest

from kvlab import claims
from kvlab.language import using_language
from kvlab.lessons import paged as lesson
from kvlab.lessons.paged import batching, cost
from tests import claims_en_support as support
from tests.test_lesson_paged import (BATCHING_SHAPES, COST_SHAPES, ONE_SIDED, ONE_SIDED_ROUNDS, SHARING_SHAPES,  # noqa: F401
                                     STEP_TIME_CASES, TTFT_R4, WAITED_R5, WAITS_R4, _down, cells, demo, fed_like,
                                     gather_numbers, level, small_batching, small_sharing, timed_like)

num, nan = claims.number, float("nan")
TTFT = {"static_steps": num(4.0, 1), "cont_steps": num(6.0, 1), **WAITS_R4, **WAITED_R5}


def _ttft(s_mean, c_mean):
    return [[batching.TTFT.choose({**TTFT, "static_mean": num(s_mean, 1, "ms"), "static_tail": num(s_mean, 1, "ms"),
                                   "cont_mean": num(c_mean, 1, "ms"), "cont_tail": num(c_mean, 1, "ms")})]]


def _one_sided(chooser):
    said = [[chooser.choose({**ONE_SIDED[chooser], **rounds})] for rounds, _ in ONE_SIDED_ROUNDS]
    return said + [[chooser.choose(_down(chooser))]]


CASES = {  # every synthetic shape and hand-made case of tests/test_lesson_paged.py: a function of the small batching
    # and sharing runs giving the claims, one list a cell
    **{f"batching: {name}": lambda b, s, f=f: [lesson.explain_batching(timed_like(b, f))]
       for name, f in BATCHING_SHAPES.items()},
    **{f"cost: {name}": lambda b, s, grid=grid: [lesson.explain_cost(grid)] for name, (grid, _) in COST_SHAPES.items()},
    **{f"sharing: {name}": lambda b, s, f=f: [lesson.explain_sharing(fed_like(s, f))]
       for name, (f, _) in SHARING_SHAPES.items()},
    **{f"step time: {name}": lambda b, s, numbers=numbers: [[batching.step_time_claim(numbers)]]
       for name, numbers in STEP_TIME_CASES.items()},
    "step time: a negative round": lambda b, s: [[batching.step_time_claim(
        {**STEP_TIME_CASES["paged.step_time.rounds_differ"],
         "step_rounds": claims.series([-2, 21], 0, "%", claims.DIFFERENCE)})]],
    "ttft: r4, r5": lambda b, s: [[batching.TTFT.choose({**TTFT_R4, **WAITS_R4, **WAITED_R5})]],
    "ttft: none waited": lambda b, s: [[batching.TTFT.choose({**TTFT_R4, **WAITS_R4, "cont_waited": num(0, 0),
                                                              "wait_mean": num(nan, 1), "wait_max": num(nan, 0)})]],
    **{f"ttft: {s_mean} vs {c_mean} ms": lambda b, s, s_mean=s_mean, c_mean=c_mean: _ttft(s_mean, c_mean)
       for s_mean, c_mean in [(10.0, 20.0), (10.0, 10.5), (10.0, 5.0), (nan, 1.0)]},
    **{f"one-sided: {chooser.name}": lambda b, s, chooser=chooser: _one_sided(chooser) for chooser in ONE_SIDED},
    "throughput: nan": lambda b, s: [[batching.THROUGHPUT.choose({
        "cont_tps": num(nan), "static_tps": num(1.0), "ratio": num(nan), "rounds": num(nan), "gain": num(nan),
        "least": num(nan), "cont_batch": num(2.0, 1), "static_batch": num(1.0, 1)})]],
    "tpot: nan": lambda b, s: [[batching.TPOT.choose({k: num(nan) for k in (
        "static_tpot", "cont_tpot", "ratio", "rounds", "static_itl", "cont_itl", "gain", "least", "cont_batch",
        "static_batch")})]],
    **{f"gather: {gather}, over {over}": lambda b, s, gather=gather, over=over: [[cost.GATHER.choose(
        gather_numbers(gather, 0.16, over, 3))]]
       for gather, over in ((nan, 2), (0.21, 2), (0.10, 2), (0.17, 2), (0.21, 3))}}


def test_every_key_has_an_english_sentence_with_the_same_fields():
    support.check_every_key_has_an_english_sentence(lesson)
    for zh, en in batching.WORDS_EN.items():  # the recorded Chinese terms, each written in English
        assert support.CJK.search(zh) and en.strip() and not support.CJK.search(en)


@pytest.mark.parametrize("case", CASES)
def test_every_case_said_in_english_holds_no_chinese_and_the_same_numbers(case, small_batching, small_sharing):
    # no number the Chinese sentence prints is missing or added ("90% 分位" is "90th percentile")
    support.check_said_in_english(lesson, CASES[case](small_batching, small_sharing))


def test_every_english_sentence_is_rendered(small_batching, small_sharing):
    support.check_every_sentence_rendered(lesson, [case(small_batching, small_sharing) for case in CASES.values()])


def test_english_sentences_say_what_the_chinese_ones_say():
    claim = batching.TTFT.choose({**TTFT_R4, **WAITS_R4, **WAITED_R5})
    assert ("of 24 requests, 15 could not join in the step they arrived in; they waited 13.1 steps on average and 20 "
            "at most before joining") in lesson.EN.say(claim)
    r8 = lesson.EN.say(batching.step_time_claim(STEP_TIME_CASES["paged.step_time.grows r8"]))
    assert "takes 28% more (each round on its own: 16, 24% more; the combined figure takes" in r8
    slower = lesson.EN.say(batching.step_time_claim(STEP_TIME_CASES["paged.step_time.rounds_slower"]))
    assert ("(each round on its own: 14, 23% more): the step with the fuller batch is slower in every round, but "
            "these figures do not fall in one band") in slower and "noise" not in slower
    negative = batching.step_time_claim({**STEP_TIME_CASES["paged.step_time.rounds_differ"],
                                        "step_rounds": claims.series([-2, 21], 0, "%", claims.DIFFERENCE)})
    assert "(a negative figure means less time; each round on its own: -2, 21% more" in lesson.EN.say(negative)
    odd = lesson.EN.say(lesson.explain_cost(COST_SHAPES["r5, a cell's rounds disagree"][0])[1])
    assert ("(the rounds agree in 5/6 cells; in the cell with B = 8 and 128 tokens per sequence, they disagree)"
            in odd)
    grows = lesson.EN.say(lesson.explain_cost(COST_SHAPES["idle CPU, gather a part"][0])[1])
    assert "B is 1, 1, 1, 8, 8, 8, each sequence 32, 128, 224, 32, 128, 224 tokens long" in grows
    assert "0.10, 0.30, 0.50, 0.70, 1.10, 1.60 ms" in grows and "6% of that cell's extra time" in grows


def test_show_claims_writes_in_the_course_language(monkeypatch):
    support.check_show_claims(lesson, lesson.explain_cost(COST_SHAPES["fixed cost"][0]), monkeypatch)


def test_why_sentence_and_cell_order_follow_the_language():
    on_cpu, on_gpu = cells(level([1.0, 2.0]), level([1.2, 2.4])), cells(level([1.0]), level([1.2]), device="cuda:0")
    with using_language("en"):
        cpu, gpu, order = cost.why_sentence(on_cpu), cost.why_sentence(on_gpu), cost.cell_order(on_cpu)
    assert not support.CJK.search(cpu) and "Expected on a GPU (not measured here)" in cpu
    assert "Expected on a GPU" not in gpu and cpu.startswith(gpu + " ") and "20–26%" in gpu
    assert order == "(1, 32), (1, 128)" and cost.cell_order(on_cpu) == "(1, 32)、(1, 128)"
    assert cost.why_sentence(on_cpu).startswith(cost.why_sentence(on_gpu) + "在 GPU 上预计（这里没有测）")
