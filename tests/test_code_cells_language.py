"""Code cells hold code, not prose: the two editions' code cells can then be the same (issue 34).

Every string literal and comment a chapter's code cell holds is free of Chinese, and no string literal is an English
sentence: what a learner reads comes from kvlab's phrasebooks, in the language `kvlab.set_language` names. Exempt:
the Colab setup cell (it runs before kvlab is installed, so it is bilingual) and a cell tagged ``quotes-original``
(the original chapter's code, quoted as it is). Each chapter's first code cell after the setup cell holds the one
language line, ``kvlab.set_language("zh")``."""
import io
import re
import tokenize
from pathlib import Path

import nbformat
import pytest

CHAPTERS = sorted((Path(__file__).resolve().parents[1] / "chapters").glob("*.ipynb"))
CHINESE = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
WORD = re.compile(r"(?<![\w{.])[A-Za-z]{2,}(?![\w(])")
LANGUAGE_LINE = re.compile(r'^kvlab\.set_language\("(zh|en)"\)$', re.M)
SETUP_MARK = "# kvlab-colab-setup"
EXEMPT_TAG = "quotes-original"


def prose_in(source: str) -> list[str]:
    """String literals and comments of ``source`` a person would read as text in one language."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    found = []
    for token in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
        if token.type == tokenize.COMMENT and CHINESE.search(token.string):
            found.append(token.string)
        elif token.type == tokenize.STRING:
            body = re.sub(r"\{[^{}]*\}", " ", token.string)  # an f-string's fields are code
            if CHINESE.search(body) or len(WORD.findall(body)) >= 4:
                found.append(token.string)
    return found


def code_cells(path):
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_code_cells_hold_no_prose(path):
    problems = []
    for cell in code_cells(path):
        if cell.source.startswith(SETUP_MARK) or EXEMPT_TAG in cell.metadata.get("tags", []):
            continue
        problems += [f"{cell.get('id')}: {text[:80]}" for text in prose_in(cell.source)]
    assert not problems, "prose in code cells (move it into the lesson's phrasebook):\n" + "\n".join(problems)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_first_code_cell_after_setup_holds_the_language_line(path):
    cells = [c for c in code_cells(path) if not c.source.startswith(SETUP_MARK)]
    lines = [m.group(0) for c in cells for m in LANGUAGE_LINE.finditer(c.source)]
    assert lines == ['kvlab.set_language("zh")'], lines
    assert LANGUAGE_LINE.search(cells[0].source)


def test_the_prose_finder_finds_prose_and_leaves_code():
    assert prose_in('print(f"运行设备：{device}")') == ['f"运行设备：{device}"']
    assert prose_in("x = 1  # 乘以2是因为K和V各一份") == ["# 乘以2是因为K和V各一份"]
    assert prose_in('print("the cache holds exactly K and V")')
    assert prose_in('lesson.plan_reservation("LLaMA-7B", "T4 16 GB (Colab)", 2048)') == []
    assert prose_in('print(lesson.say("device", device=device))  # the timing threads too') == []
    assert prose_in('f"{a.name} {b.kind} {c.x} {d.y}"') == []
