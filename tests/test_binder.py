"""The course image in ``binder/``, which repo2docker (BinderHub, Zero to JupyterHub) builds: checked as far as a
machine without a Docker daemon allows. repo2docker prints the Dockerfile it would build (``--no-build`` on a local
folder); a slow test runs the image's install steps in a fresh virtual environment and then a chapter in it."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvlab.launch import LANGUAGE_PLUGIN, course_settings

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
CHAPTER = "04_llama7b_memory_estimate.ipynb"  # the quickest chapter (about 25 s)


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A copy of what a clone of this working tree holds (tracked and new files; nothing git ignores, such as
    build/ or *.egg-info), which repo2docker and pip may read and write."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout, to copy what a clone of the course holds")
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    dest = tmp_path_factory.mktemp("image") / "kvlab"
    for name in filter(None, names):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def apt_packages() -> list[str]:
    lines = (BINDER / "apt.txt").read_text(encoding="utf-8").splitlines()
    return [p for line in lines if (p := line.partition("#")[0].strip())]


def test_the_image_definition_is_cpu_torch_kvlab_and_a_cjk_font():
    requirements = [line.strip() for line in (BINDER / "requirements.txt").read_text(encoding="utf-8").splitlines()
                    if line.strip() and not line.startswith("#")]
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in requirements
    assert [r for r in requirements if r.startswith("torch")] == ["torch==2.13.0+cpu"]
    assert ".[course]" in requirements and "-e ." not in requirements  # non-editable: a mounted home cannot hide it
    assert any(r.startswith("nbgitpuller") for r in requirements)
    assert "fonts-noto-cjk" in apt_packages()
    assert not (BINDER / "start").exists()  # a start script would run at every server start


def test_repo2docker_builds_the_binder_folder(source):
    if importlib.util.find_spec("repo2docker") is None:
        pytest.skip("jupyter-repo2docker is not installed (pip install jupyter-repo2docker)")
    # BinderHub and Zero to JupyterHub build for uid 1000, jovyan (repo2docker's default is the caller's uid)
    done = subprocess.run([sys.executable, "-m", "repo2docker", "--no-build", "--user-id", "1000", "--user-name",
                           "jovyan", str(source)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    dockerfile = done.stdout
    assert f"apt-get install --yes --no-install-recommends {' '.join(sorted(apt_packages()))} &&" in dockerfile
    copy_repo = dockerfile.index("COPY --chown=1000:1000 src/ ${REPO_DIR}/")
    install = dockerfile.index('${KERNEL_PYTHON_PREFIX}/bin/pip install --no-cache-dir -r "binder/requirements.txt"')
    assert copy_repo < install  # `.[course]` needs the whole repository in place
    assert "conda environment for python=3.11" in done.stderr  # binder/runtime.txt
    assert dockerfile.index("RUN ./binder/postBuild") > install
    assert "R2D_ENTRYPOINT" not in dockerfile  # nothing runs (or downloads) when a server starts


PROBE = "import kvlab\nprint('KVLAB-FILE ' + kvlab.__file__)"
RUNNER = """import sys
from pathlib import Path
import nbformat
from nbclient import NotebookClient

path = Path(sys.argv[1])
nb = nbformat.read(path, as_version=4)
nb.cells.append(nbformat.v4.new_code_cell(sys.argv[2]))
NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
print("".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream"))
"""


def run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
def test_the_image_install_steps_run_a_chapter_in_a_fresh_venv(source, tmp_path):
    """binder/'s steps in a fresh venv (no system site-packages, PYTHONPATH unset): ``pip install -r
    binder/requirements.txt`` from the repository's root, then postBuild; then a chapter, executed from a folder
    outside the repository by nbclient started inside the venv, so its kernel is the venv's own and imports kvlab
    from the venv's site-packages.

    The CPU-torch index (download.pytorch.org) is not reachable here: torch==2.13.0 is installed first from the
    local CPU wheel pip's configuration finds, and the requirements are installed without the --extra-index-url line.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], env=env)
    python, env["PATH"] = str(venv / "bin" / "python"), f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    pip = [python, "-m", "pip", "install", "-q"]
    run([*pip, "--upgrade", "pip"], env=env, timeout=600)  # pip 23 refuses some URLs a current pip takes
    run([*pip, "torch==2.13.0"], env=env, timeout=900)
    lines = (source / "binder" / "requirements.txt").read_text(encoding="utf-8").splitlines()
    offline = tmp_path / "requirements.txt"
    offline.write_text("\n".join(line for line in lines if not line.startswith("--extra-index-url")), encoding="utf-8")
    run([*pip, "-r", str(offline)], env=env, cwd=source, timeout=1800)  # as repo2docker: from the repository root
    run([str(source / "binder" / "postBuild")], env=env, cwd=source, timeout=300)
    check = ("from kvlab.launch import ZH_LOCALE, installation_settings_dir, language_pack_installed\n"
             "assert language_pack_installed(ZH_LOCALE)\nprint(installation_settings_dir())")
    settings = run([python, "-c", check], env=env, cwd=tmp_path)  # not the repository's kvlab
    assert (venv / "etc" / "jupyter" / "jupyter_server_config.d" / "nbgitpuller.json").is_file()  # /git-pull served
    course = json.loads((Path(settings.strip()) / "overrides.d" / "kvlab-course.json").read_text(encoding="utf-8"))
    assert course == course_settings(zh=True) and course[LANGUAGE_PLUGIN] == {"locale": "zh_CN"}

    outside = tmp_path / "course"
    outside.mkdir()
    shutil.copy(source / "chapters" / CHAPTER, outside / CHAPTER)
    out = run([python, "-c", RUNNER, str(outside / CHAPTER), PROBE], env=env, cwd=outside, timeout=900)
    kvlab_file = out.split("KVLAB-FILE ", 1)[1].strip()
    assert kvlab_file.startswith(str(venv)) and "site-packages" in kvlab_file, kvlab_file
