"""A real JupyterHub on 127.0.0.1 for tests/test_hub.py, and a student's side of it: the login form, the REST API,
nbgitpuller's api route and a kernel driven over its websocket, as JupyterLab drives it.

The hub uses the built-in ``simple`` spawner (every user is the current user, with a home of their own under the
test's tmp folder) and the ``shared-password`` authenticator. Everything it writes (database, cookie secret, proxy
pid file, homes, log) lies under one folder; hub, proxy and single-user servers listen on 127.0.0.1 only.

Every process the hub starts (the proxy, the single-user servers, their kernels, git) inherits one environment
variable with a value unique to the run, so the processes are found by it in ``/proc`` however they were
reparented, and none can be left behind unnoticed.
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
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

import requests

MARKER_NAME = "KVLAB_HUB_TEST"
PASSWORD = "kvlab-class-" + "shared"  # the shared student password (SharedPasswordAuthenticator wants >= 8 chars)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def marked_pids(marker: str) -> list[int]:
    """The live processes whose environment carries ``MARKER_NAME=marker`` (zombies have none and are ignored)."""
    needle = f"{MARKER_NAME}={marker}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            pids.append(int(entry))
    return pids


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


CONFIG = """\
c = get_config()  # noqa: F821
c.JupyterHub.bind_url = {bind_url!r}
c.JupyterHub.hub_bind_url = {hub_bind_url!r}
c.JupyterHub.db_url = {db_url!r}
c.JupyterHub.cookie_secret_file = {cookie_secret_file!r}
c.JupyterHub.cleanup_servers = True
c.JupyterHub.cleanup_proxy = True
c.ConfigurableHTTPProxy.api_url = {proxy_api_url!r}
c.ConfigurableHTTPProxy.auth_token = {proxy_token!r}
c.ConfigurableHTTPProxy.pid_file = {proxy_pid_file!r}
c.ConfigurableHTTPProxy.command = [{chp!r}]

c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = {password!r}
c.Authenticator.allowed_users = set({users!r})

c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {home_template!r}
c.Spawner.cmd = [{python!r}, "-m", "jupyterhub.singleuser"]
c.Spawner.args = {args!r}
c.Spawner.cpu_limit = {cpu_limit!r}
c.Spawner.mem_limit = {mem_limit!r}
c.Spawner.environment = {environment!r}
c.Spawner.start_timeout = 240
c.Spawner.http_timeout = 240
"""


@dataclass
class Hub:
    """A JupyterHub started in its own process group; :meth:`stop` ends it and everything it started."""

    base: Path
    users: list[str]
    cpu_limit: float = 1
    mem_limit: str = "2G"
    marker: str = field(default_factory=lambda: uuid.uuid4().hex)
    process: subprocess.Popen | None = None
    url: str = ""
    started_at: float = 0.0
    seen: dict[int, str] = field(default_factory=dict)  # every marked process seen alive: pid -> command line

    @property
    def homes(self) -> Path:
        return self.base / "homes"

    @property
    def log_path(self) -> Path:
        return self.base / "hub.log"

    def start(self, timeout: float = 120) -> None:
        chp = shutil.which("configurable-http-proxy")
        assert chp, "configurable-http-proxy is not on PATH (npm install -g configurable-http-proxy)"
        self.base.mkdir(parents=True, exist_ok=True)
        self.homes.mkdir(exist_ok=True)
        port, hub_port, api_port = free_port(), free_port(), free_port()
        self.url = f"http://127.0.0.1:{port}/"
        config = CONFIG.format(
            bind_url=self.url, hub_bind_url=f"http://127.0.0.1:{hub_port}", proxy_api_url=f"http://127.0.0.1:{api_port}",
            db_url=f"sqlite:///{self.base / 'jupyterhub.sqlite'}", cookie_secret_file=str(self.base / "cookie_secret"),
            proxy_token=secrets.token_hex(32), proxy_pid_file=str(self.base / "proxy.pid"), chp=chp,
            password=PASSWORD, users=sorted(self.users), home_template=str(self.homes / "{username}"),
            python=sys.executable, args=["--allow-root"] if os.geteuid() == 0 else [],
            cpu_limit=self.cpu_limit, mem_limit=self.mem_limit,
            # no network here: transformers must not try the Hugging Face hub
            environment={MARKER_NAME: self.marker, "HF_HUB_OFFLINE": "1"})
        (self.base / "jupyterhub_config.py").write_text(config)
        env = {**os.environ, MARKER_NAME: self.marker}
        for name in ("KVLAB_THREADS", "OMP_NUM_THREADS", "CPU_LIMIT", "MEM_LIMIT", "JUPYTERHUB_API_TOKEN"):
            env.pop(name, None)  # the spawner passes only env_keep on, but the hub and proxy should not see them either
        self.started_at = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(self.base / "jupyterhub_config.py")],
                                            cwd=self.base, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the hub exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                if requests.get(self.url + "hub/api/", timeout=5).status_code == 200:
                    self.note_processes()
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the hub did not answer within {timeout} s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 6000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no hub log)"

    def note_processes(self) -> list[int]:
        pids = marked_pids(self.marker)
        for pid in pids:
            self.seen.setdefault(pid, cmdline(pid))
        return pids

    def stop(self, grace: float = 60) -> dict[int, str]:
        """SIGTERM the hub (it stops every server and the proxy) and wait; then SIGKILL whatever carrying the marker
        still lives, and the hub's process group. Returns what had to be killed (pid -> command line)."""
        if self.process is not None and self.process.poll() is None:
            self.note_processes()
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + 15
        left = marked_pids(self.marker)
        while left and time.monotonic() < deadline:  # servers and kernels may take a moment after the hub exits
            time.sleep(0.5)
            left = marked_pids(self.marker)
        killed = {pid: cmdline(pid) for pid in left}
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.process is not None:
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                pass
        return killed


# -- a student's side --------------------------------------------------------------------------------------------
class Student:
    """One user: logs in with the shared password through the hub's form, then acts with an API token of their own."""

    def __init__(self, hub: Hub, name: str):
        self.hub, self.name = hub, name
        self.session = requests.Session()
        self.token = ""

    @property
    def home(self) -> Path:
        return self.hub.homes / self.name

    @property
    def server(self) -> str:
        return f"{self.hub.url}user/{self.name}/"

    def _headers(self) -> dict:
        return {"Authorization": f"token {self.token}"}

    def log_in(self) -> None:
        page = self.session.get(self.hub.url + "hub/login", timeout=60)
        page.raise_for_status()
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text)
        assert xsrf, "the hub's login page has no _xsrf field"
        done = self.session.post(self.hub.url + "hub/login", timeout=60, allow_redirects=False,
                                 data={"username": self.name, "password": PASSWORD, "_xsrf": xsrf.group(1)})
        assert done.status_code == 302, f"{self.name}: login answered {done.status_code}: {done.text[:500]}"
        # the hub's session cookie now identifies the student; ask for an API token as the student, with it
        made = self.session.post(self.hub.url + f"hub/api/users/{self.name}/tokens", timeout=60,
                                 json={"note": "kvlab hub test", "expires_in": 3600},
                                 headers={"X-XSRFToken": self.session.cookies.get("_xsrf", path="/hub/")})
        assert made.status_code == 201, f"{self.name}: token request answered {made.status_code}: {made.text[:500]}"
        self.token = made.json()["token"]

    def start_server(self) -> None:
        r = requests.post(self.hub.url + f"hub/api/users/{self.name}/server", headers=self._headers(), timeout=60)
        assert r.status_code in (201, 202), f"{self.name}: spawn answered {r.status_code}: {r.text[:500]}"

    def server_ready(self) -> bool:
        r = requests.get(self.hub.url + f"hub/api/users/{self.name}", headers=self._headers(), timeout=60)
        r.raise_for_status()
        server = r.json().get("servers", {}).get("")
        return bool(server and server.get("ready"))

    def wait_for_server(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.server_ready():
                api = requests.get(self.server + "api/status", headers=self._headers(), timeout=60)
                assert api.status_code == 200, f"{self.name}: server api/status {api.status_code}"
                return
            time.sleep(1)
        raise TimeoutError(f"{self.name}'s server was not ready within {timeout} s")

    def open_link(self, link: str) -> requests.Response:
        """What the student's browser does with the nbgitpuller link: hub -> their server's /git-pull page (logged in
        to the server through the hub's OAuth by the session cookie)."""
        return self.session.get(link, timeout=120)

    def git_pull(self, query: dict, timeout: float = 300) -> list[dict]:
        """nbgitpuller's api route, read as the page's script reads it: server-sent events until ``finished`` or
        ``error``."""
        url = self.server + "git-pull/api?" + urlencode(query)
        events = []
        with requests.get(url, headers=self._headers(), stream=True, timeout=timeout) as r:
            assert r.status_code == 200, f"{self.name}: git-pull/api answered {r.status_code}: {r.text[:500]}"
            for line in r.iter_lines(decode_unicode=True):
                if not line or not line.startswith("data:"):
                    continue
                event = json.loads(line[len("data:"):].strip())
                events.append(event)
                if event.get("phase") in ("finished", "error"):
                    break
        return events

    def kernel(self, path: str) -> "Kernel":
        return Kernel(self, path)


class CellError(AssertionError):
    pass


class Kernel:
    """A kernel started through the single-user server's REST API (behind the hub's proxy) and driven over its
    websocket channels with the Jupyter messaging protocol, as JupyterLab does."""

    def __init__(self, student: Student, path: str, start_timeout: float = 300):
        import websocket  # websocket-client

        self.student = student
        started = time.monotonic()
        r = requests.post(student.server + "api/kernels", headers=student._headers(), timeout=start_timeout,
                          json={"name": "python3", "path": path})
        assert r.status_code == 201, f"{student.name}: starting a kernel answered {r.status_code}: {r.text[:500]}"
        self.id = r.json()["id"]
        self.session = uuid.uuid4().hex
        ws_url = student.server.replace("http://", "ws://", 1) + f"api/kernels/{self.id}/channels?session_id={self.session}"
        # As JupyterLab does, a websocket the server closes while the kernel starts is opened again (same session):
        # on a loaded machine a kernel can take longer than the server waits for its first kernel_info reply.
        self.reconnects = 0
        while True:
            self.ws = websocket.create_connection(ws_url, header=[f"Authorization: token {student.token}"],
                                                  timeout=60)
            self.ws.settimeout(5)
            try:
                self._request("kernel_info_request", {}, "shell",
                              timeout=max(1.0, start_timeout - (time.monotonic() - started)))
                break
            except websocket.WebSocketConnectionClosedException:
                self.reconnects += 1
                if self.reconnects > 3 or time.monotonic() - started > start_timeout:
                    raise
                time.sleep(2)
        self.start_seconds = time.monotonic() - started

    def _send(self, msg_type: str, content: dict, channel: str) -> str:
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "msg_type": msg_type, "session": self.session, "username": self.student.name,
                  "version": "5.3", "date": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())}
        self.ws.send(json.dumps({"header": header, "parent_header": {}, "metadata": {}, "content": content,
                                 "channel": channel, "buffers": []}))
        return msg_id

    def _request(self, msg_type: str, content: dict, channel: str, timeout: float) -> tuple[dict, list[str], list[dict]]:
        """Send one request and read until its reply and the kernel's idle status after it: (reply content, stream
        text, error contents)."""
        import websocket

        msg_id = self._send(msg_type, content, channel)
        reply, idle, text, errors = None, msg_type == "kernel_info_request", [], []
        self.last_outputs = []  # display_data outputs as nbformat stores them (recorded claims ride in their metadata)
        deadline = time.monotonic() + timeout
        while reply is None or not idle:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.student.name}: no reply to {msg_type} within {timeout} s")
            try:
                raw = self.ws.recv()
            except websocket.WebSocketTimeoutException:
                continue
            if isinstance(raw, bytes):  # a message with binary buffers (widget comms): never a reply or a status
                continue
            msg = json.loads(raw)
            kind = msg.get("msg_type") or msg["header"]["msg_type"]
            if kind == "status" and msg["content"].get("execution_state") in ("dead", "restarting"):
                raise CellError(f"{self.student.name}: the kernel died ({msg['content']['execution_state']})")
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg.get("channel") == "iopub":
                if kind == "stream":
                    text.append(msg["content"]["text"])
                elif kind == "error":
                    errors.append(msg["content"])
                elif kind == "display_data":
                    self.last_outputs.append({"output_type": "display_data", "data": msg["content"].get("data", {}),
                                              "metadata": msg["content"].get("metadata", {})})
                elif kind == "status" and msg["content"]["execution_state"] == "idle":
                    idle = True
            elif msg.get("channel") == "shell" and kind.endswith("_reply"):
                reply = msg["content"]
        return reply, text, errors

    def execute(self, code: str, timeout: float = 600) -> str:
        """Run one cell; its printed text. Raises CellError on an error reply or an error output."""
        reply, text, errors = self._request("execute_request", {
            "code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False,
            "stop_on_error": True}, "shell", timeout)
        if reply.get("status") != "ok" or errors:
            err = errors[0] if errors else reply
            tb = "\n".join(err.get("traceback", []))
            tb = re.sub(r"\x1b\[[0-9;]*m", "", tb)
            raise CellError(f"{self.student.name}: {err.get('ename')}: {err.get('evalue')}\n{tb[-4000:]}\n"
                            f"--- cell ---\n{code[:1500]}")
        return "".join(text)

    def shutdown(self) -> None:
        try:
            self.ws.close()
        except Exception:
            pass
        requests.delete(self.student.server + f"api/kernels/{self.id}", headers=self.student._headers(), timeout=120)
