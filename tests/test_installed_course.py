"""The course as Colab and hosted notebooks run it: kvlab installed non-editable from a clean clone into a fresh
virtual environment (no system site-packages, PYTHONPATH unset) with the install command the notebooks' setup cell
uses, then every chapter executed from a folder outside the repository by an executor started inside that venv, so
its kernel is the venv's own Python. Each chapter must import kvlab from site-packages, finish without error, and
peak at or below the memory a 2 GiB JupyterHub pod leaves its kernel (1.5 GiB resident: VmHWM, read by the kernel
itself, so no short peak is missed)."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvlab.colab import install_command

ROOT = Path(__file__).resolve().parents[1]
POD_KERNEL_BYTES = int(1.5 * 2**30)

pytestmark = [pytest.mark.slow]

# Appended to each chapter: where kvlab came from and the kernel's peak resident size, as one JSON line.
PROBE = """import json as _json, kvlab as _kvlab
from kvlab.resources import peak_resident_bytes as _peak
print("KVLAB-PROBE " + _json.dumps({"file": _kvlab.__file__, "peak_rss": _peak()}))"""

RUNNER = """import json, sys
from pathlib import Path
import nbformat
from nbclient import NotebookClient

probe, out = sys.argv[1], {}
for path in sorted(Path.cwd().glob("*.ipynb")):
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(probe))
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
    out[path.name] = json.loads(text.split("KVLAB-PROBE ", 1)[1])
    print(path.name, out[path.name], flush=True)
print("RESULT " + json.dumps(out))
"""


def run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A clean clone of this checkout's branch, and a fresh venv with kvlab installed from it as Colab would."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs a git checkout and git: the test installs kvlab @ git+file://<a clean clone>")
    base = tmp_path_factory.mktemp("installed")
    clone = base / "clone"
    branch = run(["git", "-C", str(ROOT), "rev-parse", "--abbrev-ref", "HEAD"]).strip()
    ref = branch if branch != "HEAD" else run(["git", "-C", str(ROOT), "rev-parse", "HEAD"]).strip()
    run(["git", "clone", "-q", "--no-local", str(ROOT), str(clone)])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    venv_dir = base / "venv"
    run([sys.executable, "-m", "venv", str(venv_dir)], env=env)  # no --system-site-packages
    python = venv_dir / "bin" / "python"
    # a current pip, as Colab has (pip 23's vendored packaging refuses a git+file:// URL, which has no host)
    run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], env=env, timeout=900)
    # a fresh venv would otherwise resolve the default (multi-GB CUDA) torch: take the local CPU wheel first
    run([str(python), "-m", "pip", "install", "-q", "torch==2.13.0"], env=env, timeout=900)
    run([str(python), "-m", "pip", *install_command(f"git+file://{clone}", ref)], env=env, timeout=900)
    run([str(python), "-m", "pip", "install", "-q", "ipykernel", "nbclient", "nbformat"], env=env, timeout=900)
    return {"python": python, "env": env, "clone": clone, "base": base}


def test_every_kvlab_module_imports_from_site_packages(venv):
    code = ("import importlib, pkgutil, kvlab\n"
            "assert 'site-packages' in kvlab.__file__, kvlab.__file__\n"
            "names = [m.name for m in pkgutil.walk_packages(kvlab.__path__, 'kvlab.') if not m.name.endswith('__main__')]\n"
            "for name in names: importlib.import_module(name)\n"
            "print(len(names))")
    count = int(run([str(venv["python"]), "-c", code], env=venv["env"], cwd=venv["base"]).split()[-1])
    package = venv["clone"] / "kvlab"  # what was installed: the committed modules
    expected = sum(1 for p in package.rglob("*.py") if p.name != "__main__.py") - 1  # less kvlab/__init__
    assert count == expected


def test_every_chapter_runs_from_the_wheel_outside_the_repository(venv):
    outside = venv["base"] / "course"
    outside.mkdir()
    for nb in (venv["clone"] / "chapters").glob("*.ipynb"):
        shutil.copy(nb, outside / nb.name)
    assert len(list(outside.glob("*.ipynb"))) >= 6
    stdout = run([str(venv["python"]), "-c", RUNNER, PROBE], env=venv["env"], cwd=outside, timeout=3600)
    results = json.loads(stdout.split("RESULT ", 1)[1])
    print("\n".join(f"{name}: peak RSS {r['peak_rss'] / 2**30:.2f} GiB" for name, r in results.items()))
    for name, r in results.items():
        assert str(venv["base"] / "venv") in r["file"] and "site-packages" in r["file"], (name, r["file"])
        assert r["peak_rss"] <= POD_KERNEL_BYTES, f"{name} peaked at {r['peak_rss'] / 2**30:.2f} GiB"
