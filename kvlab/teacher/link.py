"""``python -m kvlab.teacher.link --hub URL [--repo URL] [--branch NAME] [--lang zh|en] [--no-verify]``: the
nbgitpuller link for a class on JupyterHub.

A student who opens the link gets the course repository's branch pulled into their home folder (merged with their
own changes on later clicks) and chapter 3.1 opened in JupyterLab: the Chinese edition's, or with ``--lang en`` the
English edition's (``chapters/en/``). The link cannot choose JupyterLab's interface language: the hub's image sets it
(binder/postBuild writes the Chinese one). The link is nbgitpuller's
``<hub>/hub/user-redirect/git-pull?repo=...&branch=...&targetpath=...&urlpath=lab/tree/<folder>/chapters/...``;
``targetpath`` names the folder the course is cloned into, so the chapter's path in ``urlpath`` is the same by
construction. Before printing, the branch is looked up with ``git ls-remote`` (at most 10 s): an unreachable
repository or a missing branch prints no link and exits with 2, as a bad option does. ``--no-verify`` skips the look-up.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from urllib.parse import urlencode, urlsplit, urlunsplit

from ..cli import usage_error
from ..colab import BRANCH, REPO
from ..language import LANGUAGES, check_language
from ..launch import FIRST_CHAPTERS

FIRST_CHAPTER = FIRST_CHAPTERS["zh"]
VERIFY_TIMEOUT_S = 10.0


def course_folder(repo: str) -> str:
    """The folder the course is cloned into: the repository's last path part, without ``.git``."""
    name = repo.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return name.removesuffix(".git") or "course"


def hub_base(hub: str) -> str:
    """``hub`` checked and ending with one ``/``. Raises ValueError when it is not a hub's http(s) address."""
    parts = urlsplit(hub.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"hub: {hub!r} is not an http(s) address (e.g. https://hub.example.edu)")
    if parts.query or parts.fragment or {"hub", "user"} & set(parts.path.split("/")):
        raise ValueError(f"hub: give the hub's own address (e.g. https://hub.example.edu), not a page of it: {hub!r}")
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + "/", "", ""))


def pull_link(hub: str, repo: str, branch: str, lang: str = "zh") -> str:
    """The nbgitpuller link that pulls ``repo``'s ``branch`` and opens chapter 3.1 of ``lang``'s edition."""
    if not repo.strip() or not branch.strip():
        raise ValueError("repo: empty" if not repo.strip() else "branch: empty")
    try:
        first = FIRST_CHAPTERS[check_language(lang)]
    except ValueError as e:
        raise ValueError(f"lang: {e}") from None
    folder = course_folder(repo)
    query = {"repo": repo, "branch": branch, "targetpath": folder, "urlpath": f"lab/tree/{folder}/{first}"}
    return f"{hub_base(hub)}hub/user-redirect/git-pull?{urlencode(query)}"


def branch_problem(repo: str, branch: str, timeout: float = VERIFY_TIMEOUT_S) -> str | None:
    """Why nbgitpuller could not pull ``branch`` of ``repo`` (None: it could), asked with git ls-remote."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}  # a private or wrong https address must not wait for a password
    try:
        done = subprocess.run(["git", "ls-remote", "--heads", "--", repo, f"refs/heads/{branch}"],
                              capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return "git is not installed here, so the branch cannot be checked; pass --no-verify to print the link anyway"
    except subprocess.TimeoutExpired:
        return f"--repo: {repo} did not answer within {timeout:g} s; check the address, or pass --no-verify"
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"--repo: cannot read {repo} (git: {said}); check the address, or pass --no-verify"
    if not done.stdout.strip():
        return f"--branch: {repo} has no branch {branch!r}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvlab.teacher.link",
                                     description="Print the nbgitpuller link that gives each student the course.")
    parser.add_argument("--hub", required=True, help="the JupyterHub's address, e.g. https://hub.example.edu")
    parser.add_argument("--repo", default=f"https://github.com/{REPO}",
                        help="the course's git repository (default: %(default)s)")
    parser.add_argument("--branch", default=BRANCH, help="the branch students get (default: %(default)s)")
    parser.add_argument("--lang", default="zh", metavar="|".join(LANGUAGES),
                        help="the edition whose 3.1 the link opens (default: %(default)s)")
    parser.add_argument("--no-verify", action="store_true", help="print the link without checking the branch exists")
    args = parser.parse_args(argv)
    try:
        link = pull_link(args.hub, args.repo, args.branch, args.lang)
    except ValueError as e:
        usage_error(parser, e)
    problem = None if args.no_verify else branch_problem(args.repo, args.branch)
    if problem:
        usage_error(parser, problem)
    print(link)
    return 0


if __name__ == "__main__":
    sys.exit(main())
