"""The course as Colab and hosted notebooks run it: kvlab installed non-editable from a clean clone into a fresh
virtual environment, every chapter executed from a folder outside the repository by that venv's kernel. These checks
read the session's one run of the course (tests/course_run.py, which also loads the cores and turns the static
edition's capture on): each chapter must import kvlab from site-packages, finish without error, and peak at or below
the memory a 2 GiB JupyterHub pod leaves its kernel (1.5 GiB resident: VmHWM, read by the kernel itself, so no short
peak is missed, and the busy processes beside it are not counted)."""
from pathlib import Path

import pytest

from course_run import run
from kvlab.book.site import chapter_notebooks

ROOT = Path(__file__).resolve().parents[1]
POD_KERNEL_BYTES = int(1.5 * 2**30)
CHAPTERS = [p.name for p in chapter_notebooks(ROOT / "chapters")]

pytestmark = [pytest.mark.slow]


def test_every_kvlab_module_imports_from_site_packages(installed_venv):
    code = ("import importlib, pkgutil, kvlab\n"
            "assert 'site-packages' in kvlab.__file__, kvlab.__file__\n"
            "names = [m.name for m in pkgutil.walk_packages(kvlab.__path__, 'kvlab.') if not m.name.endswith('__main__')]\n"
            "for name in names: importlib.import_module(name)\n"
            "print(len(names))")
    venv = installed_venv
    count = int(run([str(venv.python), "-c", code], env=venv.env, cwd=venv.base).split()[-1])
    package = venv.clone / "kvlab"  # what was installed: the committed modules
    expected = sum(1 for p in package.rglob("*.py") if p.name != "__main__.py") - 1  # less kvlab/__init__
    assert count == expected


def test_every_chapter_of_the_clone_was_run(course_run):
    assert len(course_run.chapters) >= 6
    assert sorted(course_run.chapters) == [p.name for p in chapter_notebooks(course_run.chapters_dir)]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_chapter_runs_from_the_installed_package_outside_the_repository_within_a_pods_memory(course_run, chapter):
    assert chapter in course_run.chapters, f"{chapter} is not in the clone (not committed?)"
    ran = course_run.chapters[chapter]
    print(f"{chapter}: {ran.seconds:.0f} s, peak RSS {(ran.peak_rss or 0) / 2**30:.2f} GiB")
    assert ran.error is None, f"{chapter} did not finish:\n{ran.error}"
    assert str(course_run.venv.base / "venv") in ran.kvlab_file and "site-packages" in ran.kvlab_file, ran.kvlab_file
    assert not Path(ran.kvlab_file).resolve().is_relative_to(ROOT)  # not this checkout
    assert ran.peak_rss is not None, f"{chapter}: the kernel could not read its peak resident size"
    assert ran.peak_rss <= POD_KERNEL_BYTES, f"{chapter} peaked at {ran.peak_rss / 2**30:.2f} GiB"
