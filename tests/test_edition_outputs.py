"""What each edition shows stays in its language (issue 34): no Chinese character in any output or widget of an
executed English chapter (a cell tagged ``quotes-original``, the original chapter's code quoted as it is, excepted),
and no English sentence in the Chinese edition's chosen sentences. Reads the session's one run of the course
(tests/course_run.py: both editions, installed, beside two busy processes)."""
from __future__ import annotations

import json
import re

import pytest

CHINESE = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
ENGLISH_RUN = re.compile(r"\b[A-Za-z]{2,}(?:[ ,;:]+[A-Za-z]{2,}){4,}\b")  # five English words in a row


def chinese_shown(nb) -> list[str]:
    """Every output line and widget-state string of an executed notebook that holds a Chinese character."""
    found = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code" or "quotes-original" in cell.get("metadata", {}).get("tags", []):
            continue
        for out in cell.get("outputs", []):
            texts = [out.get("text", ""), out.get("evalue", "")]
            texts += [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
                      for v in out.get("data", {}).values()]
            found += [f"cell {i}: {line.strip()[:120]}" for t in texts for line in "".join(t).splitlines()
                      if CHINESE.search(line)]
    state = json.dumps(nb.get("metadata", {}).get("widgets", {}), ensure_ascii=False)
    found += [f"widget state: {m.group(0)[:120]}" for m in re.finditer(r'"[^"]*[\u4e00-\u9fff][^"]*"', state)]
    return found


def english_in_chosen_sentences(nb) -> list[str]:
    """Chosen sentences (outputs that record claims) of a Chinese chapter holding a run of five English words."""
    found = []
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            if (out.get("metadata") or {}).get("kvlab_claims"):
                text = "".join(out.get("data", {}).get("text/plain", ""))
                found += [f"cell {i}: {m.group(0)}" for m in ENGLISH_RUN.finditer(text)]
    return found


def test_the_finders_find_what_they_look_for():
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [
        {"output_type": "stream", "text": "Running on: cpu\n运行设备：cpu\n"},
        {"output_type": "display_data", "data": {"text/html": "<b>块表</b>"},
         "metadata": {"kvlab_claims": [{"key": "k"}]}}]},
        {"cell_type": "code", "metadata": {"tags": ["quotes-original"]},
         "outputs": [{"output_type": "stream", "text": "显存占用约: 16.00 GB"}]}],
        "metadata": {"widgets": {"state": {"m": {"description": "块大小"}}}}}
    assert chinese_shown(nb) == ["cell 0: 运行设备：cpu", "cell 0: <b>块表</b>", 'widget state: "块大小"']
    said = {"cells": [{"outputs": [{"metadata": {"kvlab_claims": [{}]}, "data": {"text/plain": [
        "首 token 延迟（TTFT）短了 12 %；the step time grows with the cache length here"]}}]}]}
    assert english_in_chosen_sentences(said) == ["cell 0: the step time grows with the cache length here"]
    assert english_in_chosen_sentences({"cells": [{"outputs": [{"metadata": {"kvlab_claims": [{}]}, "data": {
        "text/plain": "KV cache 的 prefill 阶段：TTFT 9.2 ms"}}]}]}) == []


@pytest.mark.slow
def test_the_english_edition_shows_no_chinese(course_run):
    assert course_run.english, "no English chapter ran (chapters/en/ empty in the clone?)"
    problems = []
    for name, ran in sorted(course_run.english.items()):
        problems += [f"en/{name}: {p}" for p in chinese_shown(ran.notebook())]
    assert not problems, "\n".join(problems[:80])


@pytest.mark.slow
def test_the_chinese_editions_chosen_sentences_hold_no_english(course_run):
    problems = []
    for name, ran in sorted(course_run.chapters.items()):
        problems += [f"{name}: {p}" for p in english_in_chosen_sentences(ran.notebook())]
    assert not problems, "\n".join(problems[:80])
