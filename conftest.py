"""Project-wide pytest hooks (tests/ and the notebooks in chapters/)."""
import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two workers share two cores: OpenMP threads that spin while they wait (libgomp's default) would take the other
    # worker's core, its notebook kernels' and its browser's. Every process a worker starts inherits this.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# -- the course's nbval run time, printed at the end of every run ------------------------
_NOTEBOOK_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):
        _NOTEBOOK_SECONDS[path] = _NOTEBOOK_SECONDS.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if not _NOTEBOOK_SECONDS:
        return
    terminalreporter.section("notebooks under nbval")
    for path, seconds in sorted(_NOTEBOOK_SECONDS.items()):
        terminalreporter.write_line(f"{path}: {seconds:.1f} s")
    terminalreporter.write_line(f"whole course: {sum(_NOTEBOOK_SECONDS.values()):.1f} s")


# -- the quick subset: `python -m pytest -m "not slow"` ----------------------------------
# Whole-course runs are marked slow here, by where they live, because nbval's items carry no markers of their own
# and a module-level pytestmark is easy to forget: every notebook under nbval, the browser suite, the static
# edition built from executed chapters, the wheel and installed-course runs, the busy-machine claims, the hub, and
# whatever reads the session's one run of the course (tests/course_run.py) or its installed venv.
SLOW_MODULES = {"test_browser.py", "test_hub.py", "test_wheel.py", "test_installed_course.py", "test_busy_claims.py",
                "test_panel_costs.py"}
SLOW_FIXTURES = {"book", "course_run", "installed_venv"}  # the static edition built from the run; the run; its venv


# -- two workers (pytest-xdist: `-n 2 --dist loadgroup`, pyproject.toml's addopts; `-n 0` for one process) ---------
# The groups must be marked before xdist reads them (this hook runs first): a notebook's nbval cells split between
# workers would run without the cells before them.
# A group runs on one worker, in order. Every file is its own group, so a module-scoped fixture (a hub) starts once,
# except the browser suite's chapters, each a group of its own, so that both workers share them (a worker starts its
# own JupyterLab server for the ones it runs); everything that reads the one run of the course shares one group, so
# the session-scoped run (tests/course_run.py: a venv and both editions' chapters) happens on one worker, once.
COURSE_RUN_GROUP = "course-run"


def xdist_group(item) -> str:
    if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
        return COURSE_RUN_GROUP
    if item.path.name == "test_browser.py":  # one chapter each (minutes): both workers share them, each its own lab
        return item.nodeid
    return item.nodeid.split("::", 1)[0]  # the file (chapters/en/01_x.ipynb is not chapters/01_x.ipynb)


import pytest  # noqa: E402


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items):

    for item in items:
        name = item.path.name
        if (name.endswith(".ipynb") or name in SLOW_MODULES or "browser" in item.keywords
                or SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))):
            item.add_marker(pytest.mark.slow)
        item.add_marker(pytest.mark.xdist_group(xdist_group(item)))
