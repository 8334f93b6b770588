"""Chapter 3.6's claims and measurement texts in English: every key has an English sentence filling the same fields,
and every synthetic shape of tests/test_lesson_paged.py, said in English, holds no Chinese, prints the numbers the
Chinese sentence prints and passes the checker; why_sentence and the cell order follow the language switch."""
import re

import pytest

from kvlab import claims
from kvlab.language import using_language
from kvlab.lessons import paged as lesson
from kvlab.lessons.paged import batching, cost, sharing
from tests.test_busy_claims import unsound_printed
from tests.test_lesson_paged import (BATCHING_SHAPES, COST_SHAPES, ONE_SIDED, ONE_SIDED_ROUNDS, SHARING_SHAPES,  # noqa: F401
                                     STEP_TIME_CASES, TTFT_R4, WAITED_R5, WAITS_R4, _down, cells, demo, fed_like,
                                     gather_numbers, level, small_batching, small_sharing, timed_like)

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
    for zh, en in batching.WORDS_EN.items():  # the recorded Chinese terms, each written in English
        assert CJK.search(zh) and en.strip() and not CJK.search(en)


def _every_case(batching_run, sharing_run) -> list[list[claims.Claim]]:
    """The claims of every synthetic shape and every hand-made case of tests/test_lesson_paged.py, one list per cell."""
    num, nan = claims.number, float("nan")
    said = [lesson.explain_batching(timed_like(batching_run, f)) for f in BATCHING_SHAPES.values()]
    said += [lesson.explain_cost(grid) for grid, _ in COST_SHAPES.values()]
    said += [lesson.explain_sharing(fed_like(sharing_run, f)) for f, _ in SHARING_SHAPES.values()]
    said += [[batching.step_time_claim(numbers)] for numbers in STEP_TIME_CASES.values()]
    said += [[batching.step_time_claim({**STEP_TIME_CASES["paged.step_time.rounds_differ"],
                                        "step_rounds": claims.series([-2, 21], 0, "%", claims.DIFFERENCE)})]]
    said += [[batching.TTFT.choose({**TTFT_R4, **WAITS_R4, **WAITED_R5})],
             [batching.TTFT.choose({**TTFT_R4, **WAITS_R4, "cont_waited": num(0, 0), "wait_mean": num(nan, 1),
                                    "wait_max": num(nan, 0)})]]
    ttft = {"static_steps": num(4.0, 1), "cont_steps": num(6.0, 1), **WAITS_R4, **WAITED_R5}
    for s_mean, c_mean in [(10.0, 20.0), (10.0, 10.5), (10.0, 5.0), (nan, 1.0)]:
        said.append([batching.TTFT.choose({**ttft, "static_mean": num(s_mean, 1, "ms"), "static_tail": num(s_mean, 1, "ms"),
                                           "cont_mean": num(c_mean, 1, "ms"), "cont_tail": num(c_mean, 1, "ms")})])
    for chooser in ONE_SIDED:
        said += [[chooser.choose({**ONE_SIDED[chooser], **rounds})] for rounds, _ in ONE_SIDED_ROUNDS]
        said.append([chooser.choose(_down(chooser))])
    said.append([batching.THROUGHPUT.choose({"cont_tps": num(nan), "static_tps": num(1.0), "ratio": num(nan),
                                             "rounds": num(nan), "gain": num(nan), "least": num(nan),
                                             "cont_batch": num(2.0, 1), "static_batch": num(1.0, 1)})])
    said.append([batching.TPOT.choose({k: num(nan) for k in ("static_tpot", "cont_tpot", "ratio", "rounds", "static_itl",
                                                             "cont_itl", "gain", "least", "cont_batch", "static_batch")})])
    for gather, over in ((nan, 2), (0.21, 2), (0.10, 2), (0.17, 2), (0.21, 3)):
        said.append([cost.GATHER.choose(gather_numbers(gather, 0.16, over, 3))])
    return said


def test_every_case_said_in_english_holds_no_chinese_and_the_same_numbers(small_batching, small_sharing):
    said = _every_case(small_batching, small_sharing)
    reached = {c.key for cs in said for c in cs}
    assert reached == set(lesson.EN.templates)  # every English sentence is rendered at least once here
    for cs in said:
        for claim in cs:
            zh, en = lesson.ZH.say(claim), lesson.EN.say(claim)
            assert not CJK.search(en), (claim.key, en)
            for name, n in claim.fields.items():  # each printed number, with its unit, as the Chinese prints it
                assert lesson.ZH.quantity(n) in zh and lesson.EN.quantity(n) in en, (claim.key, name, en)
                assert lesson.EN.quantity(n) == lesson.ZH.quantity(n).replace(claims.SEPARATOR, ", ")
            # and no number the Chinese sentence prints is missing or added ("90% 分位" is "90th percentile")
            assert sorted(set(NUMBER.findall(zh))) == sorted(set(NUMBER.findall(en))), (claim.key, zh, en)
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data",
                                                        "data": {"text/plain": "\n".join(map(lesson.EN.say, cs))},
                                                        "metadata": {"kvlab_claims": [c.record() for c in cs]}}]}
                    for cs in said]}
    assert claims.check_recorded(nb, lesson.CHOOSERS) == [] and unsound_printed(nb) == []


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
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, raw, metadata: shown.append(data["text/plain"]))
    said = lesson.explain_cost(COST_SHAPES["fixed cost"][0])
    with using_language("en"):
        lesson.show_claims(said)
    lesson.show_claims(said)  # the default: Chinese, as before
    assert shown == ["\n".join(map(lesson.EN.say, said)), "\n".join(map(lesson.ZH.say, said))]
    assert not CJK.search(shown[0]) and CJK.search(shown[1])


def test_why_sentence_and_cell_order_follow_the_language():
    on_cpu, on_gpu = cells(level([1.0, 2.0]), level([1.2, 2.4])), cells(level([1.0]), level([1.2]), device="cuda:0")
    with using_language("en"):
        cpu, gpu, order = cost.why_sentence(on_cpu), cost.why_sentence(on_gpu), cost.cell_order(on_cpu)
    assert not CJK.search(cpu) and "Expected on a GPU (not measured here)" in cpu
    assert "Expected on a GPU" not in gpu and cpu.startswith(gpu + " ") and "20–26%" in gpu
    assert order == "(1, 32), (1, 128)" and cost.cell_order(on_cpu) == "(1, 32)、(1, 128)"
    assert cost.why_sentence(on_cpu).startswith(cost.why_sentence(on_gpu) + "在 GPU 上预计（这里没有测）")
