"""Colab support: the repository address (the one place it is written) and the notebooks' setup cell.

``python -m kvlab.colab [ROOT]`` rewrites the "Open in Colab" badges and the first code cell of
every notebook in ``ROOT/chapters/`` and the badge table in ``ROOT/README.md`` from ``REPO`` (ROOT: the course
folder, by default the repository this kvlab runs from); a test fails if any of them is out of date.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from .cli import usage_error

REPO = "kvlab-course/kvlab"  # GitHub owner/name of this course: change it here, then run `python -m kvlab.colab`
BRANCH = "main"

SETUP_MARKER = "# kvlab-colab-setup"
BADGE_MARKER = "<!-- kvlab-colab-badge -->"
README_BEGIN, README_END = "<!-- colab-badges:begin -->", "<!-- colab-badges:end -->"
README_EN_BEGIN, README_EN_END = "<!-- colab-badges-en:begin -->", "<!-- colab-badges-en:end -->"  # chapters/en/


def colab_url(notebook: str) -> str:
    return f"https://colab.research.google.com/github/{REPO}/blob/{BRANCH}/chapters/{notebook}"


def badge_markdown(notebook: str) -> str:
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab_url(notebook)})"
            f" {BADGE_MARKER}")


def install_command(source: str = f"git+https://github.com/{REPO}", ref: str = BRANCH) -> list[str]:
    """pip's arguments that install kvlab non-editable from ``source`` at ``ref``: the one install command, used by
    every chapter's setup cell and by the test that installs the course as Colab does (from a local clone)."""
    return ["install", "-q", f"kvlab @ {source}@{ref}"]


def course_version() -> str:
    """The kvlab version the notebooks are written for: this kvlab's own (pyproject.toml's ``version``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kvlab")
    except PackageNotFoundError:  # a checkout on sys.path without an install
        import tomllib

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        return tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]


def setup_cell_source() -> str:
    """The first code cell of every chapter. On Colab or any hosted Jupyter with pip: install kvlab when it is not
    importable (keeping the torch already there); when it is, say so if it is older than the notebooks need
    (nbgitpuller can pull notebooks newer than a hub image's kvlab). On Colab, also turn on its widget manager."""
    pip = ", ".join(repr(a) for a in install_command())
    upgrade = " ".join(a if " " not in a else f"'{a}'" for a in ["%pip", "install", "--upgrade", *install_command()[2:]])
    return f'''{SETUP_MARKER}
# On Colab or any hosted Jupyter: install kvlab if missing (keeping torch), else check its version.
# 在 Colab 或其他在线 Jupyter 上：若还没有 kvlab 就安装（保留已有的 torch），否则只核对版本。
import importlib
import importlib.metadata
import importlib.util
import re
import sys

KVLAB_NEEDED = "{course_version()}"  # the kvlab version these notebooks were written for
if importlib.util.find_spec("kvlab") is None:
    import subprocess

    keep_torch = ["torch==" + importlib.metadata.version("torch")] if importlib.util.find_spec("torch") else []
    print("正在安装 kvlab（第一次需要一两分钟）…… · Installing kvlab (a minute or two the first time)…")
    install = subprocess.run([sys.executable, "-m", "pip",
                              {pip}, *keep_torch])
    importlib.invalidate_caches()  # so that `import kvlab` below finds what pip just installed
    if install.returncode != 0:
        print("kvlab 没有装上（见上面 pip 的报错）。请检查网络后重新运行这一格；或者把课程仓库 "
              "https://github.com/{REPO} 上传或克隆下来，再运行 %pip install <仓库目录>。\\n"
              "kvlab did not install (see pip's error above). Check the network and rerun this cell, or upload or "
              "clone https://github.com/{REPO} and run %pip install <repository folder>.")
else:
    try:
        have = importlib.metadata.version("kvlab")
    except importlib.metadata.PackageNotFoundError:  # a course folder on the path without an install
        have = KVLAB_NEEDED
    numbers = lambda v: tuple(int(x) for x in re.findall(r"\\d+", v)[:3])
    if numbers(have) < numbers(KVLAB_NEEDED):
        print(f"这些笔记本需要 kvlab {{KVLAB_NEEDED}} 或更新，已安装的是 {{have}}：有些格可能出错。"
              "请运行 {upgrade}，再重启内核（Kernel → Restart）。\\n"
              f"These notebooks need kvlab {{KVLAB_NEEDED}} or newer; {{have}} is installed, so some cells may fail. "
              "Run {upgrade} and restart the kernel (Kernel → Restart).")
if "google.colab" in sys.modules:
    from google.colab import output

    output.enable_custom_widget_manager()  # ipywidgets 8 on Colab'''


def source_lines(text: str) -> list[str]:
    """A notebook cell's ``source`` as nbformat stores it: the lines, each but the last ending in a newline."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + [parts[-1]]


def synced_notebook(path: Path) -> str | None:
    """The text of one notebook with its badge line and setup cell rewritten, or None when both are up to date;
    ValueError when it is not a notebook with a markdown cell and a code cell."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # not UTF-8, not JSON
        raise ValueError(f"{path} is not a notebook ({exc})") from None
    cells = nb.get("cells", []) if isinstance(nb, dict) else []
    first_md = next((c for c in cells if c.get("cell_type") == "markdown"), None)
    first_code = next((c for c in cells if c.get("cell_type") == "code"), None)
    if first_md is None or first_code is None:
        raise ValueError(f"{path} is not a notebook with a markdown cell and a code cell")
    before = json.dumps(nb, ensure_ascii=False)
    text = "".join(first_md["source"])
    badge = badge_markdown(path.name)
    if BADGE_MARKER in text:
        text = re.sub(r"^.*" + re.escape(BADGE_MARKER) + r".*$", badge, text, count=1, flags=re.M)
    else:
        text = badge + "\n\n" + text
    first_md["source"] = source_lines(text)
    if SETUP_MARKER in "".join(first_code["source"]):
        first_code["source"] = source_lines(setup_cell_source())
    else:
        idx = cells.index(first_code)
        cells.insert(idx, {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                           "source": source_lines(setup_cell_source())})
    if json.dumps(nb, ensure_ascii=False) == before:
        return None
    return json.dumps(nb, ensure_ascii=False, indent=1) + "\n"


def sync_notebook(path: Path) -> bool:
    """Rewrite the badge line and the setup cell of one notebook; True if anything changed."""
    return _write(path, synced_notebook(path))


def readme_badges(notebooks: list[Path], folder: str = "", header: str = "章节 Chapter") -> str:
    rows = [f"| {header} | Colab |", "|---|---|"]
    for p in notebooks:
        rows.append(f"| [`{p.name}`](chapters/{folder}{p.name}) | [![Open In Colab]"
                    f"(https://colab.research.google.com/assets/colab-badge.svg)]({colab_url(folder + p.name)}) |")
    return "\n".join(rows)


def _with_table(text: str, begin_mark: str, end_mark: str, table: str, where: Path) -> str:
    head, begin, rest = text.partition(begin_mark)
    if not begin:
        return text
    _, end, tail = rest.partition(end_mark)
    if not end:
        raise ValueError(f"{where}: {begin_mark} has no {end_mark} after it")
    return f"{head}{begin_mark}\n{table}\n{end_mark}{tail}"


def synced_readme(readme: Path, notebooks: list[Path]) -> str | None:
    """The text of ``readme`` with its badge tables rewritten (the Chinese chapters', and the English edition's from
    ``chapters/en/`` beside them), or None when there is no README, no table or nothing to change; ValueError when a
    table's begin marker has no end marker after it."""
    if not readme.exists():
        return None
    text = readme.read_text(encoding="utf-8")
    new = _with_table(text, README_BEGIN, README_END, readme_badges(notebooks), readme)
    english = sorted((notebooks[0].parent / "en").glob("*.ipynb")) if notebooks else []
    new = _with_table(new, README_EN_BEGIN, README_EN_END, readme_badges(english, "en/", "Chapter"), readme)
    return new if new != text else None


def sync_readme(readme: Path, notebooks: list[Path]) -> bool:
    return _write(readme, synced_readme(readme, notebooks))


def _write(path: Path, text: str | None) -> bool:
    if text is not None:
        path.write_text(text, encoding="utf-8")
    return text is not None


# -- the command line -------------------------------------------------------------------------------------------
def course_notebooks(parser: argparse.ArgumentParser, root: Path) -> list[Path]:
    """The chapters of the course in ``root``; a usage error when ``root`` is not a course root."""
    if not root.exists():
        usage_error(parser, f"ROOT: {root} does not exist")
    if not root.is_dir():
        usage_error(parser, f"ROOT: {root} is not a folder")
    notebooks = sorted((root / "chapters").glob("*.ipynb"))
    if not notebooks:
        usage_error(parser, f"ROOT: {root} is not a course root (no chapters/*.ipynb in it)")
    return notebooks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvlab.colab", description=__doc__.split("\n\n")[1])
    parser.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parent.parent, metavar="ROOT",
                        help="the course folder, holding chapters/ and README.md (default: %(default)s)")
    args = parser.parse_args(argv)
    notebooks = course_notebooks(parser, args.root)
    try:  # every file is read and checked before any is written
        new = {p: synced_notebook(p) for p in notebooks}
        new[args.root / "README.md"] = synced_readme(args.root / "README.md", notebooks)
    except (OSError, ValueError) as exc:
        usage_error(parser, f"ROOT: {exc}")
    changed = [p.name for p, text in new.items() if _write(p, text)]
    print("updated: " + ", ".join(changed) if changed else "all badges and setup cells up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
