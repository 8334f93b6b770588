import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# Reproducible in CI: the same examples every run, no deadline on a noisy 2-core machine.
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Under pytest-xdist each worker computes on one thread: two workers of two threads each on a 2-core machine wait on
# each other's cores (the OpenMP threads spin), and the suite took several times longer.
torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else min(2, torch.get_num_threads()))


@pytest.fixture
def tiny_config():
    from kvlab import ModelConfig

    return ModelConfig(vocab_size=61, d_model=36, n_layer=2, n_head=6, n_kv_head=2, head_dim=6, max_seq_len=64)


@pytest.fixture
def tiny_model(tiny_config):
    from kvlab import ToyTransformer

    return ToyTransformer(tiny_config, seed=3).eval()



# -- the course run once per session, as installed, outside the repository, beside two busy processes ---------------
# (tests/course_run.py); read by test_installed_course.py, test_busy_claims.py and test_book.py's book fixture.
@pytest.fixture(scope="session")
def installed_venv(tmp_path_factory):
    import shutil
    from pathlib import Path

    from course_run import ROOT, installed_venv as make

    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs a git checkout and git: the course is installed from kvlab @ git+file://<a clean clone>")
    return make(Path(tmp_path_factory.mktemp("installed")))


@pytest.fixture(scope="session")
def course_run(installed_venv, tmp_path_factory):
    from course_run import run_course

    result = run_course(installed_venv)
    # The summary is printed by the process that prints the report: under pytest-xdist a worker ran the fixture, and
    # its base temp folder sits inside the controller's (xdist names it after the worker), so it leaves it there.
    base = tmp_path_factory.getbasetemp()
    folder = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    (folder / COURSE_RUN_SUMMARY).write_text("\n".join(result.summary()), encoding="utf-8")
    return result


COURSE_RUN_SUMMARY = "course_run_summary.txt"


def pytest_terminal_summary(terminalreporter, config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    summary = config._tmp_path_factory.getbasetemp() / COURSE_RUN_SUMMARY
    if summary.exists():
        terminalreporter.section("the course as installed (tests/course_run.py)")
        for line in summary.read_text(encoding="utf-8").splitlines():
            terminalreporter.write_line(line)
