"""The installed package is the whole package: a wheel built from this checkout holds every git-tracked file under
``kvlab/`` and every course asset the package maps from ``assets/`` (Colab and hosted notebooks install kvlab
non-editable, so a module missing from the wheel is a chapter that cannot start there)."""
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kvlab.assets import ASSET_FILES

ROOT = Path(__file__).resolve().parents[1]


def tracked(folder: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line]


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory) -> set[str]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(ROOT)], check=True, capture_output=True, text=True)
    (wheel,) = out.glob("kvlab-*.whl")
    with zipfile.ZipFile(wheel) as z:
        return set(z.namelist())


def test_the_wheel_holds_every_tracked_file_of_the_package(wheel_names):
    files = tracked("kvlab")
    assert len(files) > 50  # the listing worked
    missing = [f for f in files if f not in wheel_names and "__pycache__" not in f]
    assert not missing, f"tracked files missing from the wheel: {missing}"


def test_the_wheel_holds_every_course_asset(wheel_names):
    missing = [name for name in ASSET_FILES if f"kvlab/assets/{name}" not in wheel_names]
    assert not missing, f"course assets missing from the wheel: {missing}"


def test_every_lesson_subpackage_is_in_the_wheel(wheel_names):
    """The hole that stopped 3.3, 3.5 and 3.6 on Colab: subpackages of kvlab.lessons listed by hand, and forgotten."""
    for package in sorted(p.parent for p in (ROOT / "kvlab").rglob("__init__.py")):
        name = package.relative_to(ROOT).as_posix()
        assert f"{name}/__init__.py" in wheel_names, name
