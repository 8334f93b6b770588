"""Project-wide pytest hooks (tests/ and the notebooks in chapters/)."""

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
