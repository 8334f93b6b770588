"""The quick subset the README gives for development, ``python -m pytest -m "not slow"``, leaves out every
whole-course run (root conftest.py marks them by where they live) and keeps the unit tests."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def collected(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0", *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    return [line for line in out.stdout.splitlines() if "::" in line]


SLOW_PLACES = ["chapters/01_autoregressive_decode.ipynb", "tests/test_browser.py", "tests/test_book.py",
               "tests/test_hub.py", "tests/test_busy_claims.py", "tests/test_wheel.py"]
UNIT_PLACES = ["tests/test_claims.py", "tests/test_cache.py"]


@pytest.fixture(scope="module")
def quick() -> list[str]:
    """One collection of the quick subset over the slow places and two unit-test files (each run imports torch)."""
    return collected("-m", "not slow", *SLOW_PLACES, *UNIT_PLACES)


def test_not_slow_leaves_out_notebooks_browser_book_and_whole_course_runs(quick):
    everything = collected(*SLOW_PLACES)
    assert any(i.startswith("chapters/") for i in everything)  # nbval collects the notebook's cells
    assert any("test_book.py" in i for i in everything)
    assert not [i for i in quick if i.startswith(("chapters/", "tests/test_browser.py", "tests/test_hub.py",
                                                   "tests/test_busy_claims.py", "tests/test_wheel.py"))]
    assert not [i for i in quick if i.split("::")[-1] in BOOK_FIXTURE_TESTS]  # they use the built edition
    assert any("test_book.py" in i for i in quick)  # the book's unit tests (no build) stay quick


BOOK_FIXTURE_TESTS = {"test_build_makes_a_page_for_every_chapter_and_a_table_of_contents",
                      "test_plotly_js_and_mathjax_are_shipped_once_and_nothing_points_outside"}


def test_not_slow_keeps_the_unit_tests(quick):
    assert any("test_claims.py" in i for i in quick) and any("test_cache.py" in i for i in quick)
