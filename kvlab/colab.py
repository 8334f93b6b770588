"""Colab support: the repository address (the one place it is written) and the notebooks' setup cell.

``python -m kvlab.colab`` rewrites the "Open in Colab" badges and the first code cell of
every notebook in ``chapters/`` and the badge table in ``README.md`` from ``REPO``;
a test fails if any of them is out of date.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REPO = "kvlab-course/kvlab"  # GitHub owner/name of this course: change it here, then run `python -m kvlab.colab`
BRANCH = "main"

SETUP_MARKER = "# kvlab-colab-setup"
BADGE_MARKER = "<!-- kvlab-colab-badge -->"
README_BEGIN, README_END = "<!-- colab-badges:begin -->", "<!-- colab-badges:end -->"


def colab_url(notebook: str) -> str:
    return f"https://colab.research.google.com/github/{REPO}/blob/{BRANCH}/chapters/{notebook}"


def badge_markdown(notebook: str) -> str:
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab_url(notebook)})"
            f" {BADGE_MARKER}")


def setup_cell_source() -> str:
    """The first code cell of every chapter: on Colab only, install kvlab (unless it is already importable,
    e.g. from an uploaded or cloned copy of the course), keeping Colab's own torch."""
    return f'''{SETUP_MARKER}
# On Google Colab only: install kvlab from the course repository unless it is already importable,
# keeping Colab's own torch, and turn on Colab's widget manager. Does nothing elsewhere.
import sys

if "google.colab" in sys.modules:
    import importlib.util

    if importlib.util.find_spec("kvlab") is None:
        import importlib.metadata
        import subprocess

        torch_pin = "torch==" + importlib.metadata.version("torch")
        install = subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                                  "kvlab @ git+https://github.com/{REPO}@{BRANCH}", torch_pin])
        if install.returncode != 0:
            print("kvlab 没有装上（见上面 pip 的报错）。请检查网络后重新运行这一格；或者把课程仓库 "
                  "https://github.com/{REPO} 上传或克隆到 Colab，再运行 !pip install -e <仓库目录>。")
    from google.colab import output

    output.enable_custom_widget_manager()  # ipywidgets 8 on Colab'''


def source_lines(text: str) -> list[str]:
    """A notebook cell's ``source`` as nbformat stores it: the lines, each but the last ending in a newline."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + [parts[-1]]


def sync_notebook(path: Path) -> bool:
    """Rewrite the badge line and the setup cell of one notebook; True if anything changed."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    before = json.dumps(nb, ensure_ascii=False)
    first_md = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    text = "".join(first_md["source"])
    badge = badge_markdown(path.name)
    if BADGE_MARKER in text:
        text = re.sub(r"^.*" + re.escape(BADGE_MARKER) + r".*$", badge, text, count=1, flags=re.M)
    else:
        text = badge + "\n\n" + text
    first_md["source"] = source_lines(text)
    first_code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    if SETUP_MARKER in "".join(first_code["source"]):
        first_code["source"] = source_lines(setup_cell_source())
    else:
        idx = nb["cells"].index(first_code)
        nb["cells"].insert(idx, {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                                 "source": source_lines(setup_cell_source())})
    after = json.dumps(nb, ensure_ascii=False)
    if after != before:
        path.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        return True
    return False


def readme_badges(notebooks: list[Path]) -> str:
    rows = ["| 章节 Chapter | Colab |", "|---|---|"]
    for p in notebooks:
        rows.append(f"| [`{p.name}`](chapters/{p.name}) | [![Open In Colab]"
                    f"(https://colab.research.google.com/assets/colab-badge.svg)]({colab_url(p.name)}) |")
    return "\n".join(rows)


def sync_readme(readme: Path, notebooks: list[Path]) -> bool:
    if not readme.exists():
        return False
    text = readme.read_text(encoding="utf-8")
    if README_BEGIN not in text:
        return False
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    new = f"{head}{README_BEGIN}\n{readme_badges(notebooks)}\n{README_END}{tail}"
    if new != text:
        readme.write_text(new, encoding="utf-8")
        return True
    return False


def main(root: str | None = None) -> int:
    base = Path(root) if root else Path(__file__).resolve().parent.parent
    notebooks = sorted((base / "chapters").glob("*.ipynb"))
    changed = [p.name for p in notebooks if sync_notebook(p)]
    if sync_readme(base / "README.md", notebooks):
        changed.append("README.md")
    print("updated: " + ", ".join(changed) if changed else "all badges and setup cells up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
