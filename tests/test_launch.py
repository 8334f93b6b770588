"""The README's first command: `python -m kvlab.launch` opens the course, also as root, in this environment.

The server is JupyterLab of the launcher's own interpreter and its kernel is that interpreter too, whatever
another installation puts on PATH or in the learner's kernel specs; no news popup; ``--zh`` gives a Chinese
interface. The last test looks at the launched lab in a real headless Chromium.
"""
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import kvlab
from kvlab import launch

NEWS_PLUGIN = "@jupyterlab/apputils-extension:notification"
LANGUAGE_PLUGIN = "@jupyterlab/translation-extension:plugin"


def test_allow_root_only_for_root():
    assert "--allow-root" in launch.lab_command(root=True)
    assert "--allow-root" not in launch.lab_command(root=False)
    assert launch.lab_command(["--allow-root"], root=True).count("--allow-root") == 1
    cmd = launch.lab_command(["--port=9"], root=False)
    assert cmd[-1] == "--port=9" and launch.FIRST_CHAPTER in cmd
    assert "--ServerApp.ip=127.0.0.1" in cmd
    mine = launch.lab_command(["--ServerApp.root_dir=/elsewhere", "--ServerApp.ip=0.0.0.0"], root=False)
    assert [a for a in mine if a.startswith(("--ServerApp.root_dir", "--ServerApp.ip"))] == [
        "--ServerApp.root_dir=/elsewhere", "--ServerApp.ip=0.0.0.0"]  # given twice, jupyter refuses root_dir
    assert launch.FIRST_CHAPTER not in mine  # it is not under /elsewhere


def test_lab_is_this_interpreters_jupyterlab():
    """`python -m jupyter lab` looks `jupyter-lab` up on PATH, which may belong to another installation."""
    cmd = launch.lab_command(root=False)
    assert cmd[:3] == [sys.executable, "-m", "jupyterlab"]
    assert "--LabApp.news_url=None" in cmd  # nothing fetched at run time


def test_course_settings_hide_the_news_question_and_choose_the_language():
    assert launch.course_settings(zh=False) == {NEWS_PLUGIN: {"fetchNews": "false", "checkForUpdates": False}}
    assert launch.course_settings(zh=True)[LANGUAGE_PLUGIN] == {"locale": "zh_CN"}


def test_lang_chooses_the_edition_and_the_interface_language():
    assert launch.course_language(["--lang", "en", "--no-browser"]) == ("en", ["--no-browser"])
    assert launch.course_language(["--lang=zh"]) == ("zh", []) == launch.course_language(["--zh"])
    assert launch.course_language(["--no-browser"]) == (None, ["--no-browser"])
    assert launch.course_settings(lang="en")[LANGUAGE_PLUGIN] == {"locale": "en"}
    assert launch.course_settings(lang="zh")[LANGUAGE_PLUGIN] == {"locale": "zh_CN"}
    assert launch.lab_command(root=False, lang="en")[3] == "chapters/en/01_autoregressive_decode.ipynb"
    assert launch.lab_command(root=False)[3] == launch.FIRST_CHAPTER
    assert (launch.COURSE_ROOT / launch.FIRST_CHAPTERS["en"]).exists()


@pytest.mark.parametrize("argv", [["--lang", "fr"], ["--lang"], ["--lang=EN"]])
def test_an_unknown_or_missing_language_is_a_usage_error_naming_the_editions(argv, capsys):
    assert launch.main(argv) == 2
    err = capsys.readouterr().err
    assert "zh" in err and "en" in err and "Traceback" not in err


def test_zh_without_the_language_pack_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setattr(launch, "language_pack_installed", lambda locale: False)
    assert launch.main(["--zh"]) == 2
    err = capsys.readouterr().err
    assert "jupyterlab-language-pack-zh-CN" in err and "pip install" in err


# -- a real server ----------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, token: str, path: str, timeout: float = 2):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def post(port: int, token: str, path: str, body: dict):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


class Launched:
    """``python -m kvlab.launch ARGS`` in a throwaway Jupyter home; another installation's `jupyter-lab` first on
    PATH and a learner's own "python3" kernel spec that points at another interpreter."""

    def __init__(self, tmp_path: Path, *args: str):
        self.tmp, self.port, self.token = tmp_path, free_port(), secrets.token_hex(8)
        other = tmp_path / "other-env" / "bin"
        other.mkdir(parents=True)
        self.marker = tmp_path / "other-jupyter-lab-ran"
        (other / "jupyter-lab").write_text(f"#!/bin/sh\ntouch {self.marker}\nexit 3\n")
        (other / "jupyter-lab").chmod(0o755)
        foreign = tmp_path / "data" / "kernels" / "python3"
        foreign.mkdir(parents=True)
        (foreign / "kernel.json").write_text(json.dumps({
            "argv": [str(other / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (another installation)", "language": "python"}))
        self.runtime = tmp_path / "rt"
        self.home = tmp_path / "home"
        self.env = dict(os.environ, PATH=f"{other}{os.pathsep}{os.environ.get('PATH', '')}",
                        JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"), JUPYTER_RUNTIME_DIR=str(self.runtime),
                        JUPYTER_DATA_DIR=str(tmp_path / "data"), IPYTHONDIR=str(tmp_path / "ipy"),
                        HOME=str(self.home))
        self.env.pop("JUPYTER_PATH", None)
        self.home.mkdir()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kvlab.launch", *args, "--no-browser", f"--ServerApp.port={self.port}",
             "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
             f"--LabApp.workspaces_dir={tmp_path / 'ws'}", f"--LabApp.user_settings_dir={tmp_path / 'us'}"],
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.proc.stdout.read().decode(errors="replace")[-3000:] if self.proc.poll() is not None else ""

    def wait(self, timeout: float = 90) -> "Launched":
        deadline = time.monotonic() + timeout
        while True:
            assert not self.marker.exists(), "the launcher ran another installation's jupyter-lab from PATH"
            assert self.proc.poll() is None, self.output()
            try:
                get(self.port, self.token, "/api/status")
                return self
            except OSError:
                assert time.monotonic() < deadline, f"the launcher's server did not answer within {timeout:.0f} s"
                time.sleep(0.3)

    def api(self, path: str):
        return get(self.port, self.token, path, timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


@pytest.fixture
def launched(tmp_path):
    server = Launched(tmp_path).wait()
    yield server
    server.stop()


@pytest.mark.slow  # each starts the launcher's JupyterLab (about 5 s)
def test_the_launcher_really_serves_the_first_chapter(launched):
    info = launched.api(f"/api/contents/{launch.FIRST_CHAPTER}?content=0")
    assert info["type"] == "notebook" and info["name"] == "01_autoregressive_decode.ipynb"


@pytest.mark.slow
def test_the_kernel_is_this_environment(launched):
    """The chapters' kernel ("python3") runs this interpreter and imports this kvlab, not the learner's other
    "python3" kernel spec; the learner's Jupyter home is left as it was."""
    spec = launched.api("/api/kernelspecs")["kernelspecs"]["python3"]["spec"]
    assert spec["argv"][0] == sys.executable
    from jupyter_client import BlockingKernelClient

    kernel = post(launched.port, launched.token, "/api/kernels", {"name": "python3"})
    connection = launched.runtime / f"kernel-{kernel['id']}.json"
    deadline = time.monotonic() + 30
    while not connection.exists():
        assert time.monotonic() < deadline, "the kernel wrote no connection file"
        time.sleep(0.2)
    client = BlockingKernelClient(connection_file=str(connection))
    client.load_connection_file()
    client.start_channels(hb=False)  # the server watches the kernel's heartbeat; the test waits for its reply
    lines = []
    try:
        client.wait_for_ready(timeout=60)
        reply = client.execute_interactive("import sys, kvlab; print(sys.executable); print(kvlab.__file__)",
                                           timeout=60, output_hook=lambda msg: lines.append(msg))
    finally:
        client.stop_channels()
    assert reply["content"]["status"] == "ok"
    printed = "".join(m["content"].get("text", "") for m in lines if m["msg_type"] == "stream").split()
    assert printed == [sys.executable, kvlab.__file__]
    folders = (launched.tmp / "cfg", launched.tmp / "data", launched.home / ".jupyter",
               launched.home / ".local" / "share" / "jupyter")
    jupyter_files = [p for folder in folders for p in folder.rglob("*") if p.is_file()]
    assert jupyter_files == [launched.tmp / "data" / "kernels" / "python3" / "kernel.json"]  # the learner's own


@pytest.mark.slow
def test_the_news_question_is_answered_and_nothing_is_fetched(launched):
    """The course's settings are defaults (the learner's own settings, empty here, would still win)."""
    news = launched.api(f"/lab/api/settings/{NEWS_PLUGIN}")
    defaults = {name: p["default"] for name, p in news["schema"]["properties"].items()}
    assert defaults["fetchNews"] == "false" and defaults["checkForUpdates"] is False and news["settings"] == {}
    assert launched.api("/lab/api/news") == {"news": []}


# -- the launched lab in a real browser ----------------------------------------------------------
@pytest.mark.browser
@pytest.mark.slow
def test_launched_lab_in_a_browser(tmp_path):
    """What a learner sees: no news question; with --zh the menus are Chinese, with --lang=en English and the English
    edition's first chapter open with its English prose. Screenshots of both go to
    $KVLAB_SCREENSHOTS or test-artifacts/browser/ (look at them)."""
    from browser_support import ARTIFACT_DIR, launch_chromium, unavailable

    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        unavailable(f"playwright is not installed ({exc})")
    if not launch.language_pack_installed("zh_CN"):
        pytest.fail("the zh-CN language pack is part of the course install (requirements.txt)")
    out = Path(os.environ.get("KVLAB_SCREENSHOTS") or ARTIFACT_DIR).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        try:
            browser = launch_chromium(pw)
        except Exception as exc:
            unavailable(f"no Chromium could be launched ({str(exc).strip()[:200]})")
        try:
            for flag, menu, lang in (("--lang=en", "File", "en"), ("--zh", "文件", "zh")):
                work = tmp_path / lang
                shutil.copytree(launch.COURSE_ROOT / "chapters", work / "course" / "chapters")  # autosave-proof
                server = Launched(work, *([flag] if flag else []), f"--ServerApp.root_dir={work / 'course'}").wait()
                try:
                    page = browser.new_page(viewport={"width": 1280, "height": 800})
                    page.goto(f"http://127.0.0.1:{server.port}/lab/tree/{launch.FIRST_CHAPTERS[lang]}?token={server.token}")
                    page.wait_for_selector("#jp-MainMenu", timeout=90_000)
                    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
                    page.wait_for_timeout(4000)  # the news question came a moment after start-up
                    page.screenshot(path=str(out / f"launch_{lang}.png"))
                    menus = page.locator("#jp-MainMenu .lm-MenuBar-itemLabel").all_inner_texts()
                    text = page.inner_text("body")
                    prose = "\n".join(page.locator(".jp-MarkdownOutput").all_inner_texts())
                    page.close()
                finally:
                    server.stop()
                assert "Would you like to get notified" not in text and "Jupyter 新闻" not in text, flag
                assert menus and menus[0] == menu, (flag, menus)
                if lang == "en":  # the English chapter's prose (the setup cell above kvlab is bilingual on purpose)
                    assert "KV cache" in prose and not re.search(r"[\u4e00-\u9fff]", prose), prose[:500]
        finally:
            browser.close()
