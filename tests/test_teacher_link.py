"""``python -m kvlab.teacher.link``: the nbgitpuller link for a class, checked against a local git repository (the
branch is looked up with git ls-remote; a missing branch, an unreachable repository or a bad hub address print no
link and exit with 2)."""
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from kvlab.colab import BRANCH, REPO
from kvlab.teacher.link import FIRST_CHAPTER, branch_problem, course_folder, main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def course_repo(tmp_path):
    """A git repository with branches main and spring, as a file:// URL."""
    repo = tmp_path / "course.git"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.edu"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "README.md").write_text("course\n", encoding="utf-8")
    subprocess.run([*git, "add", "README.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "start"], check=True)
    subprocess.run([*git, "branch", "spring"], check=True)
    return repo.as_uri()


def run(argv, capsys):
    """(exit code, stdout, stderr) of the command run in this process."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def query(link: str) -> dict:
    return {k: v[0] for k, v in parse_qs(urlsplit(link).query, strict_parsing=True).items()}


def test_verified_link_pulls_the_branch_and_opens_chapter_3_1(course_repo, capsys):
    code, out, err = run(["--hub", "https://uni.example.edu/jhub", "--repo", course_repo, "--branch", "spring"], capsys)
    assert (code, err) == (0, "")
    link = out.strip()
    assert urlsplit(link)[:3] == ("https", "uni.example.edu", "/jhub/hub/user-redirect/git-pull")
    assert query(link) == {"repo": course_repo, "branch": "spring", "targetpath": "course",
                           "urlpath": f"lab/tree/course/{FIRST_CHAPTER}"}
    assert (ROOT / FIRST_CHAPTER).is_file() and FIRST_CHAPTER.startswith("chapters/01_")


def test_no_verify_prints_the_default_repository_and_branch(capsys):
    code, out, _ = run(["--hub", "http://127.0.0.1:8000/", "--no-verify"], capsys)
    folder = REPO.rsplit("/", 1)[-1]
    assert code == 0 and out.startswith("http://127.0.0.1:8000/hub/user-redirect/git-pull?")
    assert query(out.strip()) == {"repo": f"https://github.com/{REPO}", "branch": BRANCH, "targetpath": folder,
                                  "urlpath": f"lab/tree/{folder}/{FIRST_CHAPTER}"}


def test_a_missing_branch_prints_no_link(course_repo, capsys):
    code, out, err = run(["--hub", "https://hub.example.edu", "--repo", course_repo, "--branch", "autumn"], capsys)
    assert (code, out) == (2, "") and "--branch" in err and "no branch 'autumn'" in err


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("repo", ["file:///nonexistent/course.git", "http://127.0.0.1:{port}/course.git"])
def test_an_unreachable_repository_prints_no_link_quickly(repo, capsys):
    start = time.monotonic()
    code, out, err = run(["--hub", "https://hub.example.edu", "--repo", repo.format(port=_closed_port())], capsys)
    assert (code, out) == (2, "") and "cannot read" in err and "--no-verify" in err
    assert time.monotonic() - start < 5


def test_a_remote_that_does_not_answer_is_given_up_on(tmp_path, monkeypatch):
    """git ls-remote runs under a timeout (10 s in the command): a git that hangs is stopped and reported."""
    fake = tmp_path / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nexec {shutil.which('sleep')} 30\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    start = time.monotonic()
    assert "did not answer within 0.5 s" in branch_problem("https://git.example.edu/course", "main", timeout=0.5)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("hub", ["hub.example.edu", "ftp://hub.example.edu", "https://", "",
                                 "https://hub.example.edu/hub/login", "https://hub.example.edu/user/ana/lab"])
def test_a_hub_that_is_not_an_http_address_is_a_usage_error(hub, capsys):
    code, out, err = run(["--hub", hub], capsys)  # refused before the branch is looked up
    assert (code, out) == (2, "") and "--hub" in err


def test_the_clone_folder_is_the_repository_name():
    assert [course_folder(r) for r in ("https://github.com/a/kvlab", "https://github.com/a/kvlab.git/",
                                       "git@github.com:a/kvlab.git", "file:///srv/git/kvlab")] == ["kvlab"] * 4


def test_runs_as_a_module():
    done = subprocess.run([sys.executable, "-m", "kvlab.teacher.link", "--hub", "https://hub.example.edu",
                           "--no-verify"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("https://hub.example.edu/hub/user-redirect/git-pull?")


def test_lang_en_opens_the_english_editions_first_chapter_and_a_bad_code_prints_no_link(course_repo, capsys):
    code, out, err = run(["--hub", "https://uni.example.edu", "--repo", course_repo, "--lang", "en"], capsys)
    assert (code, err) == (0, "")
    urlpath = query(out.strip())["urlpath"]
    assert urlpath == "lab/tree/course/chapters/en/01_autoregressive_decode.ipynb"
    assert (ROOT / urlpath.removeprefix("lab/tree/course/")).is_file()
    code, out, err = run(["--hub", "https://uni.example.edu", "--repo", course_repo, "--lang", "fr"], capsys)
    assert code == 2 and out == "" and "lang: language must be one of 'zh', 'en'; got 'fr'" in err
    assert "Traceback" not in err
