"""The README's first command: `python -m kvlab.launch` opens the course, also as root."""
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from kvlab import launch


def test_allow_root_only_for_root():
    assert "--allow-root" in launch.lab_command(root=True)
    assert "--allow-root" not in launch.lab_command(root=False)
    assert launch.lab_command(["--allow-root"], root=True).count("--allow-root") == 1
    cmd = launch.lab_command(["--port=9"], root=False)
    assert cmd[:5] == [sys.executable, "-m", "jupyter", "lab", launch.FIRST_CHAPTER] and cmd[-1] == "--port=9"
    assert "--ServerApp.ip=127.0.0.1" in cmd


def test_the_launcher_really_serves_the_first_chapter(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(8)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"), JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"),
               IPYTHONDIR=str(tmp_path / "ipy"))
    proc = subprocess.Popen([sys.executable, "-m", "kvlab.launch", "--no-browser", f"--ServerApp.port={port}",
                             f"--IdentityProvider.token={token}", f"--LabApp.workspaces_dir={tmp_path / 'ws'}"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read().decode(errors="replace")[-3000:]
            try:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/api/contents/{launch.FIRST_CHAPTER}"
                                             "?content=0", headers={"Authorization": f"token {token}"})
                with urllib.request.urlopen(req, timeout=2) as resp:
                    info = json.loads(resp.read())
                break
            except OSError:
                assert time.monotonic() < deadline, "the launcher's server did not answer within 60 s"
                time.sleep(0.3)
        assert info["type"] == "notebook" and info["name"] == "01_autoregressive_decode.ipynb"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
