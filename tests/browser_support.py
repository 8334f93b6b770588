"""Helpers for tests/test_browser.py: a throwaway JupyterLab server, headless Chromium, and a
small driver for kvlab's widget panels (CSS hooks documented in kvlab/viz/widgets.py).

Nothing here writes into the repository except screenshots and failure artifacts, which go to
``$KVLAB_SCREENSHOTS`` or the git-ignored ``test-artifacts/``.
"""
from __future__ import annotations

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
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
CHAPTER_DIR = REPO_ROOT / "chapters"
ARTIFACT_DIR = REPO_ROOT / "test-artifacts" / "browser"

SYSTEM_CHROMIUM = "/usr/bin/chromium"
# The network is closed: without these Chromium stalls on update/sync/QUIC connection attempts.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}

# User settings for the throwaway server (written as <plugin>.jupyterlab-settings files).
LAB_SETTINGS = {
    # Render every cell: with windowing, cells far from the viewport are not in the DOM.
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    # Never write the notebook back (the server only sees copies anyway).
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    # No news or update checks (closed network, and no toast over the screenshots).
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}

# Browser console errors that are not the course's fault. Keep this list short and specific.
IGNORED_CONSOLE_ERRORS = [
    # Resources on other hosts (the Colab badge image in each notebook's first cell): the
    # network is closed. Matched only when the failing resource is NOT on the Jupyter server.
    ("external resource", re.compile(r"^Failed to load resource: net::ERR_")),
]

# Tracebacks in the server's log (the server's own, or anything a kernel writes to its real stderr).
# Exceptions escaping widget callbacks are caught in the page instead (see JS_OPEN).
SERVER_LOG_ERRORS = re.compile(r"Exception in comm_msg|Exception in comm_open|Traceback \(most recent call last\)")


# -- skip or fail -------------------------------------------------------------------------------
def browser_required() -> bool:
    return os.environ.get("KVLAB_REQUIRE_BROWSER", "") == "1"


def unavailable(reason: str):
    """Skip (or fail, when CI sets KVLAB_REQUIRE_BROWSER=1) because the browser suite cannot run."""
    if browser_required():
        pytest.fail(f"KVLAB_REQUIRE_BROWSER=1 but the browser tests cannot run: {reason}", pytrace=False)
    pytest.skip(f"browser tests skipped: {reason} (set KVLAB_REQUIRE_BROWSER=1 to make this an error)")


def launch_chromium(playwright):
    """Debian's /usr/bin/chromium when present, else Playwright's own browser."""
    kwargs = {"headless": True, "args": CHROMIUM_ARGS}
    if os.path.exists(SYSTEM_CHROMIUM):
        kwargs["executable_path"] = SYSTEM_CHROMIUM
    return playwright.chromium.launch(**kwargs)


# -- the JupyterLab server -----------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """``jupyter lab`` on 127.0.0.1 serving a temporary copy of ``chapters/``, with isolated config,
    runtime, settings and workspace directories, killed at the end."""

    def __init__(self, workdir: Path, kernel_threads: str | None = None):
        self.workdir = Path(workdir)
        self.root = self.workdir / "root"
        self.kernel_threads = kernel_threads
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.workdir / "jupyter-server.log"
        self.proc: subprocess.Popen | None = None
        self._log_file = None

    # setup
    def _prepare(self) -> dict:
        shutil.copytree(CHAPTER_DIR, self.root / "chapters", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        settings = self.workdir / "lab-user-settings"
        for plugin, values in LAB_SETTINGS.items():
            path = settings / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        # The kernel is this interpreter (the one kvlab is installed in), whatever "python" is on PATH.
        # By default it keeps torch's own thread count, as a learner's kernel would (kvlab's timings
        # leave a core for the browser themselves); KVLAB_BROWSER_KERNEL_THREADS can pin it.
        spec = self.workdir / "jupyter-path" / "kernels" / "python3"
        spec.mkdir(parents=True)
        kernel = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                  "display_name": "Python 3 (ipykernel)", "language": "python"}
        if self.kernel_threads:
            kernel["env"] = {"OMP_NUM_THREADS": self.kernel_threads, "MKL_NUM_THREADS": self.kernel_threads}
        (spec / "kernel.json").write_text(json.dumps(kernel))
        env = dict(os.environ)
        for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "JUPYTERLAB_WORKSPACES_DIR"):
            env.pop(var, None)
        env.update({
            "JUPYTER_CONFIG_DIR": str(self.workdir / "config"),
            "JUPYTER_RUNTIME_DIR": str(self.workdir / "runtime"),
            "JUPYTER_PATH": os.pathsep.join(p for p in (str(self.workdir / "jupyter-path"),
                                                         os.environ.get("JUPYTER_PATH", "")) if p),
            "IPYTHONDIR": str(self.workdir / "ipython"),
            "PYTHONUNBUFFERED": "1",
        })
        return env

    def command(self) -> list[str]:
        cmd = [
            sys.executable, "-m", "jupyter", "lab", "--no-browser",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
            "--expose-app-in-browser",
            "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
            f"--LabApp.user_settings_dir={self.workdir / 'lab-user-settings'}",
            f"--LabApp.workspaces_dir={self.workdir / 'lab-workspaces'}",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        return cmd

    def start(self, timeout: float = 90.0) -> "LabServer":
        env = self._prepare()
        self._log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.command(), cwd=self.root, env=env, stdin=subprocess.DEVNULL,
                                     stdout=self._log_file, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with code {self.proc.returncode} before answering:\n"
                                   + self.log_tail())
            try:
                self.api("GET", "/api/status", timeout=2)
                return self
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"jupyter lab did not answer /api/status within {timeout:.0f} s:\n"
                                   + self.log_tail())
            time.sleep(0.25)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # the server shuts its kernels down on SIGTERM
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                try:  # the server and its kernels are alone in the session started for them
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    # use
    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}{path}{sep}token={self.token}"

    def api(self, method: str, path: str, timeout: float = 10):
        req = urllib.request.Request(self.base_url + path, method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def shutdown_sessions(self) -> None:
        """Stop every kernel (one chapter's kernel must not eat CPU during the next chapter)."""
        try:
            for session in self.api("GET", "/api/sessions"):
                self.api("DELETE", f"/api/sessions/{session['id']}")
        except (urllib.error.URLError, OSError):
            pass

    def log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def log_since(self, offset: int) -> str:
        if not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_since(0)[-chars:]


# -- the page ------------------------------------------------------------------------------------
JS_OPEN = r"""async ([path, timeoutMs]) => {
  const app = window.jupyterapp;
  const within = (promise, what) => Promise.race([promise, new Promise((_, reject) =>
    setTimeout(() => reject(new Error(`${what} did not happen within ${timeoutMs / 1000} s`)), timeoutMs))]);
  await within(app.restored, 'JupyterLab start-up');
  app.shell.collapseLeft();   // the notebook gets the width
  app.shell.collapseRight();
  const w = await within(app.commands.execute('docmanager:open', {path, factory: 'Notebook'}), `opening ${path}`);
  await within(w.context.ready, `loading ${path}`);
  await within(w.sessionContext.ready, `starting the kernel of ${path}`);
  app.shell.activateById(w.id);
  window.__kvlabNb = w;
  // Exceptions escaping a widget callback do not reach any cell: ipykernel logs them on the
  // kernel's stderr, which JupyterLab only shows in its log console. Listen for them here.
  window.__kvlabKernelErrors = [];
  const bad = /Traceback \(most recent call last\)|Exception in comm_(msg|open)/;
  w.sessionContext.iopubMessage.connect((_, msg) => {
    const type = msg.header.msg_type;
    const parent = (msg.parent_header && msg.parent_header.msg_type) || 'no parent';
    const c = msg.content || {};
    if (type === 'error' && parent !== 'execute_request') {
      window.__kvlabKernelErrors.push(`${type} (from ${parent}): ${c.ename}: ${c.evalue}`);
    } else if (type === 'stream' && c.name === 'stderr' && bad.test(c.text || '')) {
      window.__kvlabKernelErrors.push(`stderr (from ${parent}): ${String(c.text).slice(-3000)}`);
    }
  });
  return {id: w.id, path: w.context.path, kernel: w.sessionContext.kernelDisplayName};
}"""

JS_KERNEL_IDLE = """() => {
  const k = window.__kvlabNb.sessionContext.session?.kernel;
  return !!k && k.status === 'idle' && k.connectionStatus === 'connected';
}"""

JS_RUN_ALL = """() => {
  const app = window.jupyterapp;
  app.shell.activateById(window.__kvlabNb.id);
  window.__kvlabRunDone = undefined;
  app.commands.execute('notebook:run-all-cells').then(
    (ok) => { window.__kvlabRunDone = String(ok); },
    (err) => { window.__kvlabRunDone = 'error: ' + err; });
}"""

JS_RUN_STATE = """() => {
  const w = window.__kvlabNb;
  const k = w.sessionContext.session?.kernel;
  const prompts = [...w.content.node.querySelectorAll('.jp-InputArea-prompt')].map(e => e.textContent);
  return {done: window.__kvlabRunDone ?? null, kernel: k ? k.status : 'none',
          running: prompts.filter(p => p.includes('*')).length};
}"""

JS_CELLS = """() => {
  const w = window.__kvlabNb;
  const cells = w.content.model.cells;
  const out = [];
  for (let i = 0; i < cells.length; i++) {
    const c = cells.get(i);
    if (c.type !== 'code') continue;
    const src = c.sharedModel.getSource();
    const errors = [];
    const stderr = [];
    for (let j = 0; j < c.outputs.length; j++) {
      const o = c.outputs.get(j).toJSON();
      if (o.output_type === 'error') errors.push(`${o.ename}: ${o.evalue}`);
      if (o.output_type === 'stream' && o.name === 'stderr') {
        const text = Array.isArray(o.text) ? o.text.join('') : String(o.text);
        // tqdm progress bars write to stderr and erase themselves: anything else is a warning or worse
        if (text.replace(/\\r[^\\n]*/g, '').trim()) stderr.push(text.slice(0, 500));
      }
    }
    out.push({index: i, count: c.executionCount, head: src.split('\\n').slice(0, 3).join(' | ').slice(0, 120),
              empty: src.trim() === '', errors, stderr});
  }
  return {cells: out, modelCells: cells.length, domCells: w.content.node.querySelectorAll('.jp-Cell').length};
}"""

# Everything the "did every widget render" check needs, in one round trip.
JS_RENDER_STATE = """() => {
  const root = window.__kvlabNb.content.node;
  const visible = (e) => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length);
  const text = root.innerText;
  const plotOf = (el) => el.matches('.js-plotly-plot') ? el : (el.querySelector('.js-plotly-plot.kvlab-shown') || el.querySelector('.js-plotly-plot'));
  const figures = [...root.querySelectorAll('.kvlab-figure')].map((el, i) => {
    const gd = plotOf(el);
    const panel = el.closest('.kvlab-panel');
    return {
      index: i,
      panel: panel ? [...panel.classList].filter(c => c.startsWith('kvlab-') && c !== 'kvlab-panel').join(' ') : '',
      plot: !!(gd && gd.querySelector('.main-svg') && (gd.data || []).length > 0),
      img: !!el.querySelector('img'),
      height: Math.round(el.getBoundingClientRect().height),
    };
  });
  const plots = [...root.querySelectorAll('.js-plotly-plot')].map(gd => !!gd.querySelector('.main-svg'));
  return {
    loading: text.includes('Loading widget...'),
    displayErrors: [...new Set((text.match(/Error displaying widget[^\\n]*/g) || []))],
    bugs: [...root.querySelectorAll('.kvlab-msg-bug')].filter(visible).map(e => e.innerText),
    figures,
    unrenderedPlots: plots.filter(ok => !ok).length,
    panels: [...root.querySelectorAll('.kvlab-panel')].map(p => [...p.classList].filter(c => c.startsWith('kvlab-')).join(' ')),
  };
}"""

# A fingerprint of one plotly figure: its data (what the kernel sent), its title, and a hash of the
# rendered SVG (proves plotly redrew, not just that the model changed).
JS_FIGURE_STATE = """(el) => {
  const gd = el.matches('.js-plotly-plot') ? el : (el.querySelector('.js-plotly-plot.kvlab-shown') || el.querySelector('.js-plotly-plot'));
  if (!gd) return null;
  const hash = (s) => { let h = 0x811c9dc5; for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 0x01000193); } return (h >>> 0).toString(16) + ':' + s.length; };
  let data;
  // Only what is plotted: plotly.js adds its own keys to gd.data ("ytype", "_doNotReportToPy", ...).
  const KEYS = ['type', 'name', 'x', 'y', 'z', 'text', 'orientation'];
  const plain = (k, v) => ArrayBuffer.isView(v) ? Array.from(v) : v;
  try { data = JSON.stringify((gd.data || []).map(t => KEYS.map(k => t[k] === undefined ? null : t[k])), plain); }
  catch (e) { data = 'unserializable: ' + e; }
  const svg = [...gd.querySelectorAll('.main-svg')].map(s => s.outerHTML).join('');
  const title = gd.querySelector('.gtitle');
  const full = gd._fullData || [];
  return {
    data: hash(data), svg: hash(svg), title: title ? title.textContent : '',
    annotations: [...gd.querySelectorAll('.annotation-text')].map(a => a.textContent),
    ntraces: (gd.data || []).length,
    lengths: full.map(t => { const a = t.z || t.x || t.y; return a ? a.length : 0; }),
  };
}"""

# Run code in the notebook's kernel without a cell (benchmarks, fresh renders to compare with the screen).
JS_EXECUTE = """async ([code, timeoutMs]) => {
  const k = window.__kvlabNb.sessionContext.session.kernel;
  const future = k.requestExecute({code, silent: false, store_history: false, stop_on_error: true});
  let stdout = '', error = null;
  future.onIOPub = (msg) => {
    const c = msg.content || {};
    if (msg.header.msg_type === 'stream' && c.name === 'stdout') stdout += c.text;
    if (msg.header.msg_type === 'error') error = `${c.ename}: ${c.evalue}\\n${(c.traceback || []).join('\\n')}`;
  };
  const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error('kernel code timed out')), timeoutMs));
  await Promise.race([future.done, timeout]);
  return {stdout, error};
}"""

JS_VISIBLE_TEXTS = """(els) => els.filter(e => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length))
                                 .map(e => e.innerText.trim())"""


JS_KERNEL_ERRORS = "window.__kvlabKernelErrors || []"
# What raise_on_bugs reads at every poll, in one evaluation: the visible .kvlab-msg-bug texts and the kernel's errors.
JS_BUGS_AND_KERNEL_ERRORS = f"""() => [({JS_VISIBLE_TEXTS})([...document.querySelectorAll('.kvlab-msg-bug')]),
                                       {JS_KERNEL_ERRORS}]"""


class Fail(AssertionError):
    pass


class ChapterPage:
    """One notebook open in JupyterLab in its own browser context."""

    def __init__(self, browser, lab: LabServer, path: str):
        self.lab = lab
        self.path = path
        self.context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1, locale="zh-CN")
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.console_errors: list[str] = []
        self.ignored_console: list[str] = []
        self.page.on("console", self._on_console)
        self.page.on("pageerror", lambda exc: self.console_errors.append(f"pageerror: {exc}"))
        self.log_offset = lab.log_size()

    def _on_console(self, msg) -> None:
        if msg.type != "error":
            return
        text = msg.text
        url = (msg.location or {}).get("url", "")
        for label, pattern in IGNORED_CONSOLE_ERRORS:
            if pattern.search(text) and url and not url.startswith(self.lab.base_url):
                self.ignored_console.append(f"{label}: {text} ({url})")
                return
        self.console_errors.append(f"console.error: {text}" + (f" ({url})" if url else ""))

    # lifecycle
    def open(self, timeout_ms: int = 90_000) -> dict:
        # A fresh workspace per chapter, so the previous chapter's layout is not restored.
        workspace = re.sub(r"[^A-Za-z0-9]+", "-", self.path).strip("-")
        self.page.goto(self.lab.url(f"/lab/workspaces/{workspace}?reset"), wait_until="domcontentloaded")
        self.page.wait_for_function("() => !!(window.jupyterapp && window.jupyterapp.shell)", timeout=timeout_ms)
        info = self.page.evaluate(JS_OPEN, [self.path, timeout_ms])
        self.wait_js(JS_KERNEL_IDLE, timeout_ms, f"the kernel of {self.path} never became idle")
        return info

    def close(self) -> None:
        try:
            self.context.close()
        finally:
            self.lab.shutdown_sessions()

    # waiting
    def wait_js(self, js: str, timeout_ms: int, message: str, arg=None):
        from playwright.sync_api import TimeoutError as PWTimeout

        try:
            return self.page.wait_for_function(js, arg=arg, timeout=timeout_ms, polling=200)
        except PWTimeout:
            raise Fail(f"{message} (waited {timeout_ms / 1000:.0f} s)") from None

    def wait_until(self, probe, ok, timeout_s: float, message: str):
        """Poll ``probe()`` until ``ok(value)``; fail with ``message`` and the last value. Fails at
        once, with the error itself, if kvlab shows an internal error or the kernel logs a traceback."""
        deadline = time.monotonic() + timeout_s
        value = probe()
        while not ok(value):
            self.raise_on_bugs(f"while waiting: {message}")
            if time.monotonic() > deadline:
                raise Fail(f"{message} (after {timeout_s:.0f} s; last value: {value!r})")
            time.sleep(0.15)
            value = probe()
        return value

    def kernel_errors(self) -> list[str]:
        return self.page.evaluate(f"() => {JS_KERNEL_ERRORS}")

    def raise_on_bugs(self, when: str) -> None:
        bugs, kernel_errors = self.page.evaluate(JS_BUGS_AND_KERNEL_ERRORS)  # one round trip: this runs every poll
        if bugs:
            raise Fail(f"{when}: kvlab reported an internal error (.kvlab-msg-bug): {bugs}")
        if kernel_errors:
            raise Fail(f"{when}: the kernel reported errors outside any cell (widget callbacks):\n"
                       + "\n".join(kernel_errors))
        server_errors = self.new_server_log_errors()
        if server_errors:
            raise Fail(f"{when}: errors in the kernel/server log:\n" + "\n\n".join(server_errors))

    # running
    def run_all(self, timeout_s: float = 240) -> dict:
        self.page.evaluate(JS_RUN_ALL)
        start = time.monotonic()
        state = self.wait_until(lambda: self.page.evaluate(JS_RUN_STATE),
                                lambda s: s["done"] is not None and s["kernel"] == "idle" and s["running"] == 0,
                                timeout_s, f"run-all of {self.path} did not finish")
        state["seconds"] = time.monotonic() - start
        return state

    def cells(self) -> dict:
        return self.page.evaluate(JS_CELLS)

    def render_state(self) -> dict:
        return self.page.evaluate(JS_RENDER_STATE)

    def new_server_log_errors(self) -> list[str]:
        text = self.lab.log_since(self.log_offset)
        lines = text.splitlines()
        hits = []
        for i, line in enumerate(lines):
            if SERVER_LOG_ERRORS.search(line):
                hits.append("\n".join(lines[i:i + 25]))
        return hits

    def panel(self, css_class: str) -> "PanelDriver":
        return PanelDriver(self, css_class)

    def execute(self, code: str, timeout_s: float = 60) -> str:
        """Run ``code`` in the notebook's kernel outside any cell; return what it printed (stdout).
        Raises :class:`Fail` with the traceback if it raised."""
        result = self.page.evaluate(JS_EXECUTE, [code, int(timeout_s * 1000)])
        if result["error"]:
            raise Fail("kernel code failed: " + re.sub(r"\x1b\[[0-9;]*m", "", result["error"]))
        return result["stdout"]

    # artifacts
    def extra_screenshot(self, name: str, selector: str | None = None) -> Path | None:
        """One more picture of the chapter for a reviewer, beside the README one: ``screenshot_NN_<name>.png``
        under $KVLAB_SCREENSHOTS, taken only when that is set (each costs about a second: the suite's own run,
        in CI, keeps only the README picture and the failure artifacts)."""
        if not os.environ.get("KVLAB_SCREENSHOTS"):
            return None
        m = re.match(r"(\d+)", Path(self.path).name)
        chapter = m.group(1).zfill(2) if m else Path(self.path).stem
        folder = Path(os.environ.get("KVLAB_SCREENSHOTS") or ARTIFACT_DIR)
        return self.screenshot(folder / f"screenshot_{chapter}_{name}.png", selector)

    def screenshot(self, path: Path, selector: str | None = None, max_height: int = 1500) -> Path:
        """The notebook area (tab bar and toolbar included) with ``selector`` scrolled to the top and,
        when it fits in ``max_height`` pixels, the window made tall enough to show all of it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        page = self.page
        page.evaluate("() => document.fonts.ready")
        target = page.locator(selector).first if selector else None
        if target is not None:
            dock = page.locator("#jp-main-dock-panel").bounding_box()
            toolbar = page.locator(".jp-NotebookPanel-toolbar").first.bounding_box()
            room = dock["y"] + dock["height"] - (toolbar["y"] + toolbar["height"])  # notebook area height
            missing = int(target.bounding_box()["height"] + 12 + 20 - room)
            height = max(VIEWPORT["height"], min(max_height, VIEWPORT["height"] + missing))
            if height != VIEWPORT["height"]:
                page.set_viewport_size({"width": VIEWPORT["width"], "height": height})
                page.wait_for_timeout(500)
            target.evaluate("(e) => e.scrollIntoView({block: 'start'})")
            page.evaluate("() => { const n = window.__kvlabNb.content.node;"
                          " const s = n.closest('.jp-WindowedPanel-outer') || n; s.scrollTop = Math.max(0, s.scrollTop - 12); }")
        page.mouse.move(0, page.viewport_size["height"] - 1)  # no hover labels in the picture
        page.wait_for_timeout(600)
        clip = page.locator("#jp-main-dock-panel").bounding_box()
        if target is not None:  # end just below the panel when it ends inside the window
            bottom = target.bounding_box()
            end = bottom["y"] + bottom["height"] + 16
            clip["height"] = min(clip["height"], max(100, end - clip["y"]))
        page.screenshot(path=str(path), clip=clip)
        if page.viewport_size != VIEWPORT:
            page.set_viewport_size(VIEWPORT)
        return path

    def failure_artifacts(self, name: str) -> list[str]:
        out = []
        ARTIFACT_DIR.mkdir(parents=True, exist_ok=True)
        try:
            shot = ARTIFACT_DIR / f"failure_{name}.png"
            self.page.screenshot(path=str(shot), full_page=True)
            out.append(str(shot))
        except Exception as exc:  # the page may be gone
            out.append(f"(no failure screenshot: {exc})")
        log = ARTIFACT_DIR / f"failure_{name}.server.log"
        log.write_text(self.lab.log_since(self.log_offset))
        out.append(str(log))
        return out


class PanelDriver:
    """Drives one ``.kvlab-panel`` by its CSS hooks, as a learner would (keyboard, clicks, typing)."""

    def __init__(self, chapter: ChapterPage, css_class: str):
        self.chapter = chapter
        self.page = chapter.page
        self.name = css_class
        self.root = self.page.locator(f".kvlab-panel.{css_class}")
        n = self.root.count()
        if n != 1:
            raise Fail(f"expected exactly one .kvlab-panel.{css_class}, found {n}")
        self.root.scroll_into_view_if_needed()

    def control(self, name: str):
        loc = self.root.locator(f".kvlab-control-{name}")
        if loc.count() != 1:
            raise Fail(f"panel {self.name}: expected one .kvlab-control-{name}, found {loc.count()}")
        return loc

    # reading
    def readout(self) -> str:
        return self.root.locator(".kvlab-readout").inner_text().strip()

    def messages(self, kind: str) -> list[str]:
        return self.root.locator(f".kvlab-msg-{kind}").evaluate_all(JS_VISIBLE_TEXTS)

    def stale(self) -> dict:
        """Which parts are greyed out as stale after a bad value: the readout and each figure."""
        return self.root.evaluate("""(r) => ({
          marked: r.classList.contains('kvlab-stale'),
          readout: Number(getComputedStyle(r.querySelector('.kvlab-readout')).opacity),
          figures: [...r.querySelectorAll('.kvlab-figure')].map(f => Number(getComputedStyle(f).opacity))})""")

    def wait_stale(self, stale: bool, message: str, timeout_s: float = 30) -> dict:
        """Wait until the readout and every figure are (or are no longer) greyed out as stale (opacity)."""
        def ok(s):
            faded = [s["readout"], *s["figures"]]
            return s["marked"] == stale and all((o < 0.5) == stale for o in faded)
        return self.chapter.wait_until(self.stale, ok, timeout_s, f"panel {self.name}: {message}")

    def figure(self, index: int, timeout_s: float = 30) -> dict:
        """Figure ``index`` of the panel once it is drawn with its traces: JupyterLab re-creates the widget views of
        a cell scrolled back into view, so right after scrolling a figure can be missing or still empty."""
        figs = self.root.locator(".kvlab-figure")

        def state():
            return figs.nth(index).evaluate(JS_FIGURE_STATE) if figs.count() > index else None
        return self.chapter.wait_until(state, lambda s: bool(s and s["ntraces"]), timeout_s,
                                       f"panel {self.name}: figure #{index} should be drawn ({figs.count()} figures)")

    def value(self, name: str) -> str:
        """What the control shows now: slider readout, selected option, or the input's text."""
        return self.control(name).evaluate("""(c) => {
          const sel = c.querySelector('select');
          if (sel) return sel.options[sel.selectedIndex].textContent;
          const ro = c.querySelector('.widget-readout');
          if (ro) return ro.textContent.trim();
          const inp = c.querySelector('input, textarea');
          return inp ? inp.value : c.innerText; }""")

    def int_value(self, name: str) -> int:
        return int(self.value(name).replace(",", "").strip())

    # acting
    def press_slider(self, name: str, key: str, times: int = 1) -> None:
        handle = self.control(name).locator(".noUi-handle")
        handle.scroll_into_view_if_needed()
        handle.focus()
        for _ in range(times):
            handle.press(key)

    def type_slider(self, name: str, value: int) -> None:
        """Type ``value`` into the slider's readout and press Enter (ipywidgets' slider readouts are editable): one
        move to a far value, as a learner makes it instead of holding an arrow key down through every value between
        (each of which is drawn)."""
        readout = self.control(name).locator(".widget-readout")
        readout.scroll_into_view_if_needed()
        readout.fill(str(value))
        readout.press("Enter")

    def select(self, name: str, label: str) -> None:
        sel = self.control(name).locator("select")
        sel.scroll_into_view_if_needed()
        sel.select_option(label=label)

    def type_text(self, name: str, text: str) -> None:
        box = self.control(name).locator("input, textarea").first
        box.scroll_into_view_if_needed()
        box.fill(text)
        box.press("Enter")

    def open_more(self, folded: str) -> None:
        """Open the panel's closed 「更多设置」 section, as a learner would, after checking that the control
        ``folded`` is hidden until then (it is one of the controls the section holds)."""
        if self.control(folded).is_visible():
            raise Fail(f"panel {self.name}: .kvlab-control-{folded} should be folded under 更多设置 at first")
        title = self.root.locator(".kvlab-more").get_by_text("更多设置").first
        title.scroll_into_view_if_needed()
        title.click()
        self.control(folded).wait_for(state="visible", timeout=10_000)

    def click_run(self) -> None:
        btn = self.root.locator("button.kvlab-run")
        btn.scroll_into_view_if_needed()
        btn.click()

    def click_play(self) -> None:
        """The Play widget's play/pause button (the first of its buttons)."""
        btn = self.root.locator(".kvlab-play button").first
        btn.scroll_into_view_if_needed()
        btn.click()

    def playing(self) -> bool:
        return self.root.locator(".kvlab-play button i.fa-pause").count() > 0

    # waiting
    def wait_readout(self, ok, message: str, timeout_s: float = 30) -> str:
        return self.chapter.wait_until(self.readout, ok, timeout_s, f"panel {self.name}: {message}")

    def wait_figure(self, index: int, ok, message: str, timeout_s: float = 30) -> dict:
        return self.chapter.wait_until(lambda: self.figure(index), ok, timeout_s,
                                       f"panel {self.name}, figure #{index}: {message}")

    def wait_figure_changed(self, index: int, before: dict, message: str, timeout_s: float = 30) -> dict:
        """The figure's content (data, title or subplot titles) and its rendered SVG differ from ``before``."""
        def changed(s):
            content = (s["data"], s["title"], s["annotations"]) != (before["data"], before["title"],
                                                                    before["annotations"])
            return content and s["svg"] != before["svg"]
        return self.wait_figure(index, lambda s: bool(s) and changed(s), message, timeout_s)

    def wait_message(self, kind: str, present: bool, message: str, timeout_s: float = 30) -> list[str]:
        return self.chapter.wait_until(lambda: self.messages(kind), lambda m: bool(m) == present, timeout_s,
                                       f"panel {self.name}: {message}")
