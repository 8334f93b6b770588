"""The package list in pyproject.toml is complete: every folder under kvlab/ with an ``__init__.py`` is in it (plus
``kvlab.assets``, the top-level assets/ folder), and nothing else. tests/test_wheel.py then checks the built wheel
holds every tracked file of those packages."""
import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_lists_every_kvlab_package():
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    found = find_packages(where=str(ROOT), include=["kvlab", "kvlab.*"])
    assert sorted(listed) == sorted(found + ["kvlab.assets"]), \
        f"pyproject.toml's packages: missing {sorted(set(found) - set(listed))}, extra {sorted(set(listed) - set(found) - {'kvlab.assets'})}"
    assert len(listed) == len(set(listed))
