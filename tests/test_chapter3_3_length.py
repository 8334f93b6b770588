"""Chapter 3.3 as a lesson one sitting can hold (issue 31, part 3): its core path reads in at most
:data:`CORE_MINUTES` by the guide's own method, its optional parts are marked 选学 in the heading and named in the
guide, and each roofline term is defined in markdown before any code cell that can print it."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvlab.teacher import guide, minutes
from kvlab.teacher.chapters import CHAPTERS
from kvlab.teacher.run_times import RUN_TIMES, Measurement

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "03_prefill_and_decode.ipynb"
CORE_MINUTES = 22.0  # issue 31: ≤ 22 minutes of core reading (32.9 when it was filed, 38.5 before the cut)
OPTIONAL_MARK = "选学："

# Each term, the bold form that defines it in markdown, and the code that can print it: the first code cell using
# any of these names (the big model, the counted costs, the roofs and what is read against them) is the first
# that may print a term, so every definition must come before it.
TERMS = {"算术强度": ("**算术强度**",), "屋顶": ("**斜屋顶**", "**平屋顶**"), "转折点": ("**转折点**",)}
PRINTS_ROOFLINE = re.compile(r"roofline_model\(|worked_decode_step\(|measure_roofs\(|pass_cost\(|roofline_figure\("
                             r"|measure_batch_sweep\(|\.intensity|ridge|roofs\b")


def _guide():
    return next(g for g in CHAPTERS if g.notebook == NOTEBOOK)


def _cells() -> list[dict]:
    nb = json.loads((ROOT / "chapters" / NOTEBOOK).read_text(encoding="utf-8"))
    return [{**c, "text": "".join(c["source"])} for c in nb["cells"]]


def test_core_reading_fits_one_sitting_by_the_guides_method():
    """汉字 of the markdown outside the 选学 sections plus 汉字 the measured run printed (run_times.json), ÷ 300."""
    runs = Measurement.load(RUN_TIMES).chapter(NOTEBOOK) if RUN_TIMES.exists() else None
    if runs is None:
        pytest.skip("run_times.json has no run of 3.3")
    m = guide.chapter_report(_guide(), Measurement.load(RUN_TIMES)).minutes
    assert m.output_characters == runs.output_characters > 0
    assert m.core_reading <= CORE_MINUTES, (
        f"3.3's core path reads in {m.core_reading:.1f} min (markdown {m.core_characters} + printed "
        f"{m.output_characters} 汉字, ÷ {minutes.READING_SPEED}), more than {CORE_MINUTES:g}")


def test_optional_parts_are_marked_in_the_heading_and_named_in_the_guide():
    _, _, secs = minutes.sections(minutes.read_notebook(ROOT / "chapters" / NOTEBOOK))
    marked = [s.heading for s in secs if s.heading.startswith(OPTIONAL_MARK)]
    assert sorted(marked) == sorted(_guide().optional_sections), "every 选学 heading is in the guide and only those"
    for part in ("计数公式", "单步耗时为什么随 B 增长", "工程实践要点", "在 GPU 上"):
        assert any(part in h for h in marked), part
    core = [s.heading for s in secs if not (s.heading.startswith(OPTIONAL_MARK) or s.parent.startswith(OPTIONAL_MARK))]
    for part in ("一次真实的生成", "四个步骤", "预填充与解码", "roofline", "批处理解码"):  # the core path of issue 31
        assert any(part in h for h in core), part


def _sections_of_cells() -> list[tuple[dict, minutes.Section | None]]:
    """Each cell with the section it ends in (a markdown cell: its last heading)."""
    _, _, secs = minutes.sections(minutes.read_notebook(ROOT / "chapters" / NOTEBOOK))
    out, section, seen = [], None, 0
    for cell in _cells():
        if cell["cell_type"] == "markdown":
            for heading in re.findall(r"^#{2,3}\s+(.+?)\s*$", cell["text"], re.M):
                seen = next(i for i in range(seen, len(secs)) if secs[i].heading == heading) + 1
                section = secs[seen - 1]
        out.append((cell, section))
    return out


ASIDES = {"the small-matmul experiment": r"measure_small_matmuls\(", "the allocator": r"allocator_growth\(",
          "compute/memory overlap": r"完全重叠", "padding": r"padded_batch_panel\(",
          "cache precision": r"compare_cache_precision\("}


@pytest.mark.parametrize("aside", ASIDES)
def test_the_asides_are_inside_optional_sections(aside):
    found = [s for c, s in _sections_of_cells() if re.search(ASIDES[aside], c["text"])]
    assert found and all(OPTIONAL_MARK in s.heading + s.parent for s in found), [s.heading for s in found]


def test_each_roofline_term_is_defined_before_any_cell_that_can_print_it():
    cells = _cells()
    first_print = next(i for i, c in enumerate(cells) if c["cell_type"] == "code" and PRINTS_ROOFLINE.search(c["text"]))
    for term, definitions in TERMS.items():
        defined = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                   and all(d in c["text"] for d in definitions)]
        assert defined and defined[0] < first_print, f"{term} must be defined in markdown before cell {first_print}"
        literal = [i for i, c in enumerate(cells[:defined[0]]) if c["cell_type"] == "code" and term in c["text"]]
        assert not literal, f"cells {literal} print {term} before it is defined"
