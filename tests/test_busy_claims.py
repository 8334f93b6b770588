"""Issue 31 part 2: every chapter that chooses its sentences from measurements (kvlab.claims), executed while two
busy processes at the learner's own priority load the cores, as on Colab or a shared class hub. Every recorded
claim must hold on its recorded (printed) numbers, re-evaluated here from those numbers alone, and no printed time,
rate or byte count may be negative, NaN or infinite. A chapter joins by adding its lesson's choosers below.

The chapters are the session's one run of the course (tests/course_run.py: installed from a clean clone, outside
the repository, beside two spinning processes it starts and kills, the static edition's capture on): this file
reads those executions and runs nothing itself."""
from __future__ import annotations

import re

import pytest

from kvlab import claims
from kvlab.lessons import decode, memory_estimate, misconceptions, paged, prefill_decode, storage

CLAIMING = {  # notebook -> the choosers its lesson uses
    "01_autoregressive_decode.ipynb": decode.CHOOSERS,
    "02_cache_storage_shape.ipynb": storage.CHOOSERS,
    "03_prefill_and_decode.ipynb": prefill_decode.CHOOSERS,
    "04_llama7b_memory_estimate.ipynb": memory_estimate.CHOOSERS,
    "05_misconceptions.ipynb": misconceptions.CHOOSERS,
    "06_paged_cache_and_batching.ipynb": paged.CHOOSERS,
}
UNITS = r"(?:ms|µs/token|s|分钟|GFLOP/s|GB/s|[KMGT]iB|B)\b"
UNSOUND = re.compile(rf"(?<![\w.])(?:[-−]\d[\d,]*(?:\.\d+)?|nan|inf)\s*{UNITS}", re.IGNORECASE)  # - or U+2212


LEADING_NUMBER = re.compile(r"[-−]?[\d,.]+|nan|inf", re.IGNORECASE)


def _differences(out) -> set[str]:
    """The printed numbers an output's claims record as differences (kvlab.claims.DIFFERENCE: a change per token, a
    gap), which may rightly be negative."""
    claims_ = (out.get("metadata") or {}).get("kvlab_claims") or []
    return {f["text"].replace("−", "-") for c in claims_ for f in c.get("fields", {}).values()
            if f.get("kind") == claims.DIFFERENCE}


def unsound_printed(nb) -> list[str]:
    """A negative, NaN or infinite time, rate or size in any text an executed notebook shows (a number its claim
    records as a difference excepted)."""
    found = []
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            text = out.get("text", "") + "".join(out.get("data", {}).get("text/plain", ""))
            differences = _differences(out)
            found += [f"cell {i}: {m.group(0)!r}" for m in UNSOUND.finditer(text)
                      if LEADING_NUMBER.match(m.group(0)).group(0).replace("−", "-") not in differences]
    return found


def test_unsound_printed_finds_negative_and_missing_quantities():
    nb = {"cells": [{"outputs": [{"output_type": "stream", "text": "约 -12 s，nan ms，慢 inf GB/s，−3.5 ms"},
                                 {"data": {"text/plain": "指数 -0.32，差 −1.5 倍，0.25 ms，2,040 个 token"}}]}]}
    assert unsound_printed(nb) == ["cell 0: '-12 s'", "cell 0: 'nan ms'", "cell 0: 'inf GB/s'", "cell 0: '−3.5 ms'"]
    slope = {"output_type": "display_data", "data": {"text/plain": "每多一个 token 变化约 -0.003 ms；-2.00 ms"},
             "metadata": {"kvlab_claims": [{"key": "k", "fields": {"s": {"text": "-0.003", "unit": "ms",
                                                                          "kind": claims.DIFFERENCE}}}]}}
    assert unsound_printed({"cells": [{"outputs": [slope]}]}) == ["cell 0: '-2.00 ms'"]  # a recorded difference only


@pytest.mark.slow
@pytest.mark.parametrize("notebook", sorted(CLAIMING))
def test_claims_hold_on_a_busy_machine(notebook, course_run):
    assert course_run.busy_throughout  # the load lasted the whole run
    assert notebook in course_run.chapters, f"{notebook} was not run (not in the clone: not committed?)"
    nb = course_run.chapters[notebook].notebook()  # (fails with the chapter's error if it did not finish)
    said = claims.recorded(nb)
    problems = claims.check_recorded(nb, CLAIMING[notebook]) + unsound_printed(nb)
    shown = "\n".join(f"cell {cell}: {claim.key}" for cell, claim, _ in said)
    assert said and not problems, f"{problems}\nrecorded claims:\n{shown}"


@pytest.mark.slow
def test_english_claims_hold_on_their_printed_numbers(course_run):
    """The English edition's chapters (run after the spinners: the busy shapes are the Chinese run's): the same
    predicates on the English sentences, and no negative, NaN or infinite figure printed."""
    english = sorted(p.name for p in course_run.english_dir.glob("*.ipynb"))
    assert sorted(course_run.english) == english
    for notebook in english:
        nb = course_run.english[notebook].notebook()
        said = claims.recorded(nb)
        problems = claims.check_recorded(nb, CLAIMING[notebook]) + unsound_printed(nb)
        assert said and not problems, f"en/{notebook}: {problems}"
