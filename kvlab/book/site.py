"""The static website: run every chapter, turn each into a page, write the table of contents and the shared files.

Pages are made by nbconvert's HTML exporter with the template in ``templates/kvlab`` (JupyterLab's look, with every
script it would fetch replaced by the site's own copy in ``_static/``). Before export, :func:`static_cells` turns
what only a kernel can show into what a page can: a panel or quiz output into its static form (from
:mod:`kvlab.book.capture`), a plotly figure into data drawn by the site's plotly.js, an exercise's check into "run
it live to check". Colab badges become plain links (the badge image would be fetched from outside the site).

From saved executions: ``build(..., executed=DIR)`` (``python -m kvlab.book --from-executed DIR``) runs nothing and
builds from the notebooks in DIR, one per chapter, each executed by :func:`run_chapter` (which stamps it with
``RUN_META``: the static edition was on, how long it ran, and where) from the chapter as it is now; a missing,
unstamped or stale one is refused before anything is written (the test suite's one run of the course is built so).

Reference solutions: a page has none, as a learner's notebook shows one only after a checked attempt, which a page
cannot take (the chapters run with ``KVLAB_TEACHER=0``, and a check cell's output is replaced); built with
``teacher=True`` (``python -m kvlab.book --teacher``, a teacher's copy) every check cell carries its exercise's
solution folded under 「显示参考答案」, and the table of contents says it is the teacher's edition.

The edition's language: :func:`kvlab.book.build` sets kvlab's language (``lang``) while it builds, and every word
the site adds (notes, links, run information, the table of contents) comes from :data:`kvlab.book.phrases.BOOK` in
it; a chapter runs in its own language (an English edition's notebook says so in its metadata) and its run
information is stamped in that language. The English site's ``book.js`` has its non-ASCII characters (CJK
punctuation in its line-breaking rules) written as escapes, so no Chinese character is in its text.

Where the site goes: ``--out`` is built into only when it is new, empty, or a site this builder made. One whose
manifest (``MANIFEST``) lists every file in it, or, for a site built before the manifest, one whose every file is
where that builder put it, with its ``_static/book.js`` and pages carrying the builder's markers; anything else is
refused, so a user's own files are never replaced. The new site is written into a hidden sibling folder (same
parent, since a rename across file systems fails) and renamed into place only once the build succeeded: a failed or
interrupted build leaves the old site as it was, and what a killed build left beside it goes with the next build.
"""
from __future__ import annotations

import asyncio
import copy
import html
import json
import os
import platform
import re
import secrets
import shutil
import signal
import stat
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import nbformat

from ..colab import BADGE_MARKER, SETUP_MARKER, colab_url
from ..edition import EDITION, META_KEY
from ..language import DEFAULT_LANGUAGE, ENV_VAR, LANGUAGES, get_language, using_language
from ..resources import cpu_budget
from ..exercises.checker import TEACHER_ENV
from .capture import PAGE_ENV, REPLAY_ENV, STATIC_MIME
from .phrases import BOOK

HERE = Path(__file__).resolve().parent
COURSE_ROOT = HERE.parents[1]
PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
LIVE_COMMAND = "python -m kvlab.launch"
LIVE_COMMANDS = {"zh": LIVE_COMMAND, "en": "python -m kvlab.launch --lang en"}  # by the edition's language
MATHJAX_CONFIG = """MathJax.Hub.Config({
  jax: ["input/TeX", "output/NativeMML"], extensions: ["tex2jax.js"], showMathMenu: false, messageStyle: "none",
  tex2jax: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]],
            processEscapes: true, processEnvironments: true},
  TeX: {extensions: ["AMSmath.js", "AMSsymbols.js", "noErrors.js", "noUndefined.js"]},
  menuSettings: {renderer: "NativeMML"},
  "HTML-CSS": {availableFonts: [], preferredFont: null, webFont: null, imageFont: null}  // (unused: loads no fonts)
});
MathJax.Hub.Register.StartupHook("End Config", function () {  // (Config merges lists by index: replace it whole)
  MathJax.Hub.config.jax = ["input/TeX", "output/NativeMML"];
});
MathJax.Hub.Queue(function () { window.kvlabMathDone = true; });"""
# MathJax 2 from the jupyter-server-mathjax package: TeX in, the browser's own MathML out (no web fonts, which a
# page opened from file:// may not load); only the files that configuration loads are copied.
MATHJAX_FILES = ("MathJax.js", "config/TeX-AMS-MML_HTMLorMML-full.js", "extensions", "jax/input", "jax/element")
RUN_META = "kvlab_book_run"  # notebook metadata run_chapter writes: {"seconds", "run_info"} (the static edition on)


class Refused(ValueError):
    """A build refused before anything ran; the message starts with the argument's name (``out: ...``)."""


def cpu_name() -> str:
    """The processor's model name (Linux: /proc/cpuinfo), else what the platform module says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


@dataclass
class RunInfo:
    """When, where and on what the chapters were run (printed on every page)."""

    date: str
    machine: str
    device: str
    python: str
    torch: str

    @classmethod
    def here(cls) -> "RunInfo":
        import torch

        from ..device import pick_device

        device = pick_device()
        cpu = cpu_name()
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu
        budget = cpu_budget()  # the cores this process may use (a hub pod's quota), not the node's count
        return cls(date=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                   machine=BOOK.say("machine", cpu=cpu, cores=budget.value, source=budget.source,
                                    system=platform.system(), arch=platform.machine()),
                   device=BOOK.say("device", type=device.type, name=name), python=platform.python_version(),
                   torch=torch.__version__)

    def html(self) -> str:
        return BOOK.say("run_info", date=html.escape(self.date), machine=html.escape(self.machine),
                        device=html.escape(self.device), python=html.escape(self.python),
                        torch=html.escape(self.torch))


@dataclass
class Chapter:
    """One chapter of the site: its notebook, page, title and the executed notebook."""

    notebook: Path
    executed: object = None
    seconds: float = 0.0
    title: str = ""
    figures: list = field(default_factory=list)  # (kind, plotly JSON) of every figure output, in order

    @property
    def stem(self) -> str:
        return self.notebook.stem

    @property
    def page(self) -> str:
        return f"{self.stem}.html"


def notebook_language(nb) -> str:
    """The language a chapter notebook is written in: an English edition's notebook says so in its metadata
    (:data:`kvlab.edition.META_KEY`); any other is taken to be in the language kvlab writes in now."""
    code = (nb.metadata.get(META_KEY) or {}).get("language")
    return code if code in LANGUAGES else get_language()


def chapters_default(lang: str = DEFAULT_LANGUAGE) -> Path:
    """The course's chapters in ``lang``: ``chapters/`` (Chinese), ``chapters/en/`` (English)."""
    folder = COURSE_ROOT / "chapters"
    return folder if lang == DEFAULT_LANGUAGE else folder / EDITION


def chapter_notebooks(chapters_dir: Path) -> list[Path]:
    """Every chapter notebook (``NN_name.ipynb``), in order: a new chapter is picked up without code changes."""
    return sorted(p for p in Path(chapters_dir).glob("*.ipynb") if re.match(r"\d+_", p.name))


def _cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source) for c in nb.cells]


def executed_in(executed_dir, chapters: list[Path]) -> dict:
    """Each chapter's saved execution in ``executed_dir`` (same file name), by chapter file name; :class:`Refused`
    when one is missing, was not run by :func:`run_chapter` (no ``RUN_META``: the static edition may have been off),
    or is not the chapter as it is now (a cell added, removed or edited since)."""
    folder = Path(executed_dir)
    if not folder.is_dir():
        raise Refused(f"executed: {folder} {'is not a folder' if folder.exists() else 'does not exist'}")
    found = {}
    for chapter in chapters:
        path = folder / chapter.name
        if not path.is_file():
            raise Refused(f"executed: no {chapter.name} in {folder} (every chapter needs its executed notebook)")
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception as exc:  # (nbformat raises several kinds for a file that is not a notebook)
            raise Refused(f"executed: {path} is not a notebook ({type(exc).__name__})") from None
        if not isinstance(nb.metadata.get(RUN_META), dict):
            raise Refused(f"executed: {path} was not executed by kvlab.book (no {RUN_META} in its metadata), so "
                          "its panels may lack their static forms; execute it with kvlab.book.site.run_chapter")
        now, then = _cells(nbformat.read(chapter, as_version=4)), _cells(nb)
        if now != then:
            at = next((i for i, (a, b) in enumerate(zip(now, then)) if a != b), min(len(now), len(then)))
            raise Refused(f"executed: {path} is not {chapter} as it is now (cell {at} differs); execute it again")
        found[chapter.name] = nb
    return found


def executed_info(executed: dict) -> "RunInfo":
    """Where the saved executions ran (the first chapter's stamp)."""
    return RunInfo(**next(iter(executed.values())).metadata[RUN_META]["run_info"])


def chapters_in(chapters_dir=None) -> list[Path]:
    """The chapter notebooks of ``chapters_dir`` (default: the course's), or :class:`Refused` saying why none."""
    folder = Path(chapters_dir) if chapters_dir is not None else COURSE_ROOT / "chapters"
    if not folder.is_dir():
        raise Refused(f"chapters_dir: {folder} {'is not a folder' if folder.exists() else 'does not exist'}")
    found = chapter_notebooks(folder)
    if not found:
        raise Refused(f"chapters_dir: no chapter notebooks (NN_name.ipynb) in {folder}")
    return found


INTERRUPT_GRACE_S = 10  # seconds an interrupted build waits for its kernel's worker to finish before it gives up


def _kill_kernel(client) -> None:
    """Kill the kernel ``client`` started, with whatever it started (its own process group), if it has one yet."""
    process = getattr(getattr(client.km, "provisioner", None), "process", None)
    if process is not None and process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            process.kill()


def run_chapter(path: Path, timeout: int = 600, replay: Path | None = None):
    """Execute one chapter top to bottom in a fresh kernel with the static edition on; the executed notebook.

    The kernel is driven from a worker thread, so that Ctrl-C and SIGTERM stay with this one (nbclient would take
    them over in the main thread and end in a traceback): on an interrupt the kernel is killed and, once the
    worker has cleaned up, the interrupt is raised here."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    lang = notebook_language(nb)  # the kernel's language (the notebook's own language line sets it too)
    env = {"KVLAB_STATIC_EDITION": "1", PAGE_ENV: path.stem, TEACHER_ENV: "0", ENV_VAR: lang}  # no solution shown
    if replay is not None:
        env[REPLAY_ENV] = str(replay)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    failed: list = []
    done = threading.Event()  # (not Thread.join: an interrupted join can mark a running thread as ended)

    def execute():
        try:
            asyncio.run(client.async_execute())  # (its own event loop, closed when done)
        except BaseException as exc:  # raised in the calling thread
            failed.append(exc)
        finally:
            done.set()

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits the environment
    start = time.perf_counter()
    try:
        threading.Thread(target=execute, name=f"kvlab.book {path.name}", daemon=True).start()
        try:
            done.wait()
        except KeyboardInterrupt:
            # Kill the kernel (it may still be starting) and let the worker clean up, but never wait on it for long:
            # a worker stuck on a dead kernel's channels would keep Ctrl-C from ending the build (a CI run hung
            # here for 90 s on a loaded machine). The worker is a daemon thread: it goes with the process.
            deadline = time.monotonic() + INTERRUPT_GRACE_S
            while not done.is_set() and time.monotonic() < deadline:
                _kill_kernel(client)
                done.wait(0.2)
            raise
        if failed:
            raise failed[0]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    with using_language(lang):  # the run information in the chapter's language (the page prints it)
        info = asdict(RunInfo.here())
    nb.metadata[RUN_META] = {"seconds": round(time.perf_counter() - start, 1), "run_info": info}
    return nb


def run_with_one_retry(path: Path, replay: Path | None, log=print):
    """:func:`run_chapter`, run once more if its kernel process dies (killed from outside, e.g. by a cleanup on a
    shared machine); a second death, or any error in a cell, stops the build."""
    from nbclient.exceptions import DeadKernelError

    try:
        return run_chapter(path, replay=replay)
    except DeadKernelError:
        log(f"kvlab.book: the kernel running {path.name} died; running the chapter once more")
        return run_chapter(path, replay=replay)


# -- from kernel outputs to static HTML ------------------------------------------------------------------------
def json_script(value) -> str:
    """``value`` as JSON inside a page (``</`` escaped so no string can close the script)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    return f'<script type="application/json">{text}</script>'


def live_command() -> str:
    """The command that opens the course live, in the edition's language (the language kvlab writes in now)."""
    return LIVE_COMMANDS[get_language()]


def edition_path(notebook: str) -> str:
    """``notebook``'s path under ``chapters/`` in the edition of the language kvlab writes in now."""
    return notebook if get_language() == DEFAULT_LANGUAGE else f"{EDITION}/{notebook}"


def live_line(notebook: str) -> str:
    url = html.escape(colab_url(edition_path(notebook)))
    return f'<div class="kvlab-live">{BOOK.say("live_line", command=live_command(), url=url)}</div>'


def panel_html(spec: dict, notebook: str) -> str:
    """A panel's static form: its controls (the precomputed ones work; the others show their values), a message line,
    the readout and one drawing area per figure."""
    parts = []
    for c in spec["controls"]:
        if "states" not in c:
            fixed = BOOK.say("fixed_control", label=html.escape(c["label"]), text=html.escape(c["text"]))
            parts.append(f'<span class="kvlab-fixed">{fixed}</span>')
            continue
        default = c["default"] if c["default"] is not None else 0
        c["default"] = default
        if c.get("widget") == "menu":
            options = "".join(f'<option value="{i}"{" selected" if i == default else ""}>{html.escape(lab)}</option>'
                              for i, lab in enumerate(c["labels"]))
            field_html = f'<select data-control="{c["name"]}">{options}</select>'
        else:
            field_html = (f'<input type="range" data-control="{c["name"]}" min="0" max="{len(c["states"]) - 1}" '
                          f'step="1" value="{default}"><span class="kvlab-value"></span>')
        parts.append(f'<label>{html.escape(c["label"])} {field_html}</label>')
    static = [c for c in spec["controls"] if "states" in c]
    note = BOOK.say("note_sliders" if static else "note_default")
    figures = "".join('<div class="kvlab-plot"></div>' for _ in spec["shown"]["figures"])
    return (f'<div class="kvlab-static-panel {html.escape(spec["css_class"])}" id="{spec["id"]}">{json_script(spec)}'
            f'<div class="kvlab-static-controls">{"".join(parts)}</div><div class="kvlab-live">{note}</div>'
            f'<div class="kvlab-static-message"></div><div class="kvlab-static-readout"></div>{figures}</div>'
            + live_line(notebook))


SOLUTION_WITHHELD = BOOK.text("solution_withheld", "zh")  # (the Chinese edition's; BOOK has both)


def check_cell_html(key: str, teacher: bool = False) -> str:
    """An exercise's check cell on a page without a kernel: how to check; with ``teacher``, the reference solution
    folded away, else where it appears."""
    from ..exercises.solutions import SOLUTIONS

    solution = SOLUTIONS.get(key) if teacher else None
    folded = (f'<details class="kvlab-exercise-solution"><summary>{BOOK.say("show_solution")}</summary>'
              f"<pre>{html.escape(solution)}</pre></details>" if solution else "")
    withheld = "" if teacher else BOOK.say("solution_withheld")
    return (f'<div class="kvlab-run-to-check">{BOOK.say("run_to_check", command=live_command())}{withheld}</div>'
            f"{folded}")


def _html_output(text: str) -> dict:
    return nbformat.v4.new_output("display_data", data={"text/html": text})


def static_outputs(outputs: list, notebook: str, figures: list) -> list:
    out = []
    for o in outputs:
        data = o.get("data", {})
        if STATIC_MIME in data:
            spec = data[STATIC_MIME]
            if spec["kind"] == "panel":
                out.append(_html_output(panel_html(spec, notebook)))
                figures.append(("panel", spec))
            else:
                out.append(_html_output(f'<div class="kvlab-static-quiz">{spec["html"]}</div>' + live_line(notebook)))
        elif PLOTLY_MIME in data:
            fig = data[PLOTLY_MIME]
            figures.append(("figure", fig))
            out.append(_html_output(f'<div class="kvlab-figure-static">{json_script(fig)}</div>'))
        elif WIDGET_MIME in data:
            out.append(_html_output(live_line(notebook)))
        else:
            out.append(o)
    return out


BADGE = re.compile(r"\[!\[[^\]]*\]\([^)]*\)\]\(([^)]*)\)\s*(" + re.escape(BADGE_MARKER) + r")?")


def static_cells(nb, notebook: str, teacher: bool = False) -> tuple[object, list]:
    """The executed notebook as the page shows it (see the module docstring), and its figures in order; reference
    solutions only with ``teacher``."""
    figures: list = []
    cells = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = BADGE.sub(lambda m: f"[{BOOK.say('open_in_colab')}]({m.group(1)})", cell.source)
        elif cell.cell_type == "code":
            if cell.source.startswith(SETUP_MARKER):
                continue  # installs kvlab on Colab: nothing for a reader
            tag = cell.metadata.get("kvlab_exercises", "")
            if tag.endswith("/check"):
                cell.outputs = [_html_output(check_cell_html(tag.rsplit("/", 1)[0], teacher))]
            else:
                cell.outputs = static_outputs(cell.outputs, notebook, figures)
        cells.append(cell)
    nb.cells = cells
    nb.metadata.pop("widgets", None)  # the live widgets' saved state: the page has their static forms instead
    return nb, figures


def chapter_title(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = re.search(r"^#\s+(.+)$", cell.source, re.M)
            if m:
                return m.group(1).strip()
    return ""


# -- the site ---------------------------------------------------------------------------------------------------
def nav_html(chapters: list[Chapter], i: int | None) -> str:
    links = [f'<a href="index.html">{BOOK.say("contents")}</a>']
    if i is not None and i > 0:
        links.append(f'<a href="{chapters[i - 1].page}">← {html.escape(chapters[i - 1].title)}</a>')
    if i is not None and i + 1 < len(chapters):
        links.append(f'<a href="{chapters[i + 1].page}">{html.escape(chapters[i + 1].title)} →</a>')
    return " ".join(links)


def export_page(nb, resources: dict, exclude_input: bool = False) -> str:
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="kvlab", extra_template_basedirs=[str(HERE / "templates")],
                            exclude_input_prompt=True, exclude_output_prompt=True, exclude_input=exclude_input)
    body, _ = exporter.from_notebook_node(nb, resources={"kvlab": resources})
    return body


def copy_assets(out: Path) -> None:
    """plotly.js, MathJax, JupyterLab's page style and the site's own CSS/JS, once for the whole site."""
    import jupyter_server_mathjax
    import plotly
    from nbconvert.exporters.html import HTMLExporter  # noqa: F401  (its templates' CSS is copied below)

    static = out / "_static"
    static.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", static / "plotly.min.js")
    for name in ("book.js", "book.css"):
        shutil.copy(HERE / "static" / name, static / name)
    if get_language() != DEFAULT_LANGUAGE:  # (its line-breaking rules name CJK punctuation: written as escapes)
        (static / "book.js").write_text(ascii_escaped((HERE / "static" / "book.js").read_text(encoding="utf-8")),
                                        encoding="utf-8")
    mathjax = Path(jupyter_server_mathjax.__file__).parent / "static"
    for rel in MATHJAX_FILES:
        src, dst = mathjax / rel, static / "mathjax" / rel
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("a11y", "*.mp3", "*.ogg"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
    lab = lab_static()
    (static / "lab.css").write_text((lab / "index.css").read_text(encoding="utf-8") + "\n"
                                    + (lab / "theme-light.css").read_text(encoding="utf-8"), encoding="utf-8")


def ascii_escaped(script: str) -> str:
    """``script`` with every non-ASCII character written as a ``\\uXXXX`` escape (a pair for one past U+FFFF): the
    same JavaScript where those characters are only in strings, regular expressions and comments, as in book.js."""
    def escape(m):
        data = m.group(0).encode("utf-16-be")
        return "".join(f"\\u{int.from_bytes(data[i:i + 2], 'big'):04x}" for i in range(0, len(data), 2))

    return re.sub(r"[^\x00-\x7f]", escape, script)


def lab_static() -> Path:
    """nbconvert's JupyterLab template styles (index.css and the light theme's variables)."""
    from jupyter_core.paths import jupyter_path

    for base in jupyter_path("nbconvert", "templates", "lab", "static"):
        if (Path(base) / "index.css").exists():
            return Path(base)
    raise FileNotFoundError("nbconvert's lab template (static/index.css) is not installed")


def teacher_note() -> str:
    return f'<p class="kvlab-teacher-edition">{BOOK.say("teacher_note")}</p>'


def index_html(chapters: list[Chapter], info: RunInfo, handouts: dict, teacher: bool = False) -> str:
    items = []
    for ch in chapters:
        extra = ""
        if ch.stem in handouts:
            extra = BOOK.say("toc_handout", href=f"handouts/{ch.stem}.pdf")
        items.append(f'<li><a href="{ch.page}">{html.escape(ch.title or ch.stem)}</a>{extra}'
                     f'{BOOK.say("toc_seconds", seconds=ch.seconds)}</li>')
    return f"""<!DOCTYPE html>
<html lang="{BOOK.say("html_lang")}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{BOOK.say("index_title")}</title><link rel="stylesheet" href="_static/book.css"></head>
<body class="kvlab-book">
<h1>{BOOK.say("index_heading")}</h1>
<p>{BOOK.say("index_intro", command=live_command())}</p>
<div class="kvlab-runinfo">{info.html()}</div>{teacher_note() if teacher else ""}
<h2>{BOOK.say("contents")}</h2>
<ol class="kvlab-toc">{"".join(items)}</ol>
<p>{BOOK.say("index_files")}</p>
</body></html>
"""


def build_site(out: Path, chapters_dir: Path | None = None, replay: Path | None = None, log=print,
               executed: dict | None = None) -> list[Chapter]:
    """Run every chapter, or take its saved execution from ``executed`` (:func:`executed_in`), and copy the shared
    files into ``out``; returns the chapters (with their executed notebooks) for the pages and the handouts."""
    chapters = [Chapter(p) for p in chapters_in(chapters_dir)]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    copy_assets(out)
    for ch in chapters:
        if executed is not None:
            ch.executed = executed[ch.notebook.name]
            ch.seconds = float(ch.executed.metadata[RUN_META].get("seconds", 0.0))
            log(f"kvlab.book: took {ch.notebook.name} as executed (it ran in {ch.seconds:.1f} s)")
        else:
            start = time.perf_counter()
            ch.executed = run_with_one_retry(ch.notebook, replay, log)
            ch.seconds = time.perf_counter() - start
            log(f"kvlab.book: ran {ch.notebook.name} in {ch.seconds:.1f} s")
        ch.title = chapter_title(ch.executed)
    return chapters


def static_notebooks(chapters: list[Chapter], teacher: bool = False) -> dict:
    """Each chapter's executed notebook as its page shows it (and its figures kept on the chapter)."""
    out = {}
    for ch in chapters:
        out[ch.stem], ch.figures = static_cells(copy.deepcopy(ch.executed), ch.notebook.name, teacher)
    return out


def write_pages(out: Path, chapters: list[Chapter], static_nbs: dict, info: RunInfo, handouts: dict,
                teacher: bool = False) -> None:
    for i, ch in enumerate(chapters):
        run_info = info.html() + BOOK.say("chapter_seconds", seconds=ch.seconds)
        page = export_page(static_nbs[ch.stem], {"nav": nav_html(chapters, i), "run_info": run_info,
                                                 "mathjax_config": MATHJAX_CONFIG})
        (Path(out) / ch.page).write_text(page, encoding="utf-8")
    (Path(out) / "index.html").write_text(index_html(chapters, info, handouts, teacher), encoding="utf-8")


# -- where the site goes: checked before any chapter runs, built beside it, swapped in ---------------------------------
MANIFEST = ".kvlab-book.json"
MARKER = "kvlab.book static edition"
# What the builder wrote before the manifest: pages, the shared files, slide figures, handouts, and the print
# pages a failed PDF print left behind. Its book.js and every page carry a marker only it wrote.
OLD_LAYOUT = re.compile(r"index\.html|_print_\d+_[^/]*\.html|\d+_[^/]*\.html|figures/\d+_[^/]*-\d+\.(png|svg)"
                        r"|handouts/\d+_[^/]*\.pdf|_static/(plotly\.min\.js|book\.js|book\.css|lab\.css|mathjax/.+)")
OLD_SCRIPT_MARK = "kvlabFiguresDrawn"
OLD_PAGE_MARK = re.compile(r'<body class="[^"]*\bkvlab-book\b')
OLD_INDEX_MARK = '<ol class="kvlab-toc">'
STAGED = re.compile(r"\.(?P<name>.+)\.kvlab-(?P<kind>build|old)-(?P<pid>\d+)-[0-9a-f]+")


def files_in(folder: Path) -> list[str]:
    """Every file (and link) under ``folder``, as sorted relative POSIX paths."""
    found = []
    for root, dirs, files in os.walk(folder):
        rel = Path(root).relative_to(folder)
        found += [(rel / n).as_posix() for n in files + [d for d in dirs if os.path.islink(Path(root, d))]]
    return sorted(found)


def _listing(names: list[str], most: int = 4) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def _has(path: Path, mark) -> bool:
    """Whether the plain file ``path`` holds ``mark`` (a string or a pattern)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() and not path.is_symlink() else ""
    except OSError:
        return False
    return bool(mark.search(text)) if isinstance(mark, re.Pattern) else mark in text


def _old_site(folder: Path, files: list[str]) -> bool:
    """Whether ``files`` are a site built before the manifest: the old layout, its book.js and its pages' markers."""
    if "_static/book.js" not in files or not _has(folder / "_static/book.js", OLD_SCRIPT_MARK):
        return False
    pages = [f for f in files if "/" not in f and f.endswith(".html")]
    return all(_has(folder / f, OLD_PAGE_MARK) for f in pages) and (
        "index.html" not in files or _has(folder / "index.html", OLD_INDEX_MARK))


def not_ours(folder: Path) -> str | None:
    """Why the existing folder ``folder`` may not be built into, or None (empty, or a site this builder made)."""
    files = files_in(folder)
    if not files:
        return None
    if MANIFEST in files:
        try:
            manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
            listed = set(manifest["files"]) if manifest.get("kvlab") == MARKER else None
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            listed = None
        if listed is None:
            return f"holds a {MANIFEST} that kvlab.book did not write"
        extra = [f for f in files if f != MANIFEST and f not in listed]
    elif _old_site(folder, files):
        extra = [f for f in files if not OLD_LAYOUT.fullmatch(f)]
    else:
        return f"is not empty and is not a site built by kvlab.book (it holds {_listing(files)})"
    return f"holds files kvlab.book did not write ({_listing(extra)})" if extra else None


def check_out(out) -> Path:
    """``out`` resolved, if a site may be built there; else :class:`Refused`, saying why."""
    given, out = out, Path(out).expanduser().resolve()
    if out == Path(out.anchor):
        raise Refused(f"out: {given} is the root of the file system; choose a new or empty folder")
    if out == Path.home().resolve():
        raise Refused(f"out: {given} is your home folder; choose a new or empty folder, e.g. {out / 'book'}")
    if COURSE_ROOT == out or out in COURSE_ROOT.parents:
        raise Refused(f"out: {given} holds the kvlab course itself ({COURSE_ROOT}); choose a folder inside it, "
                      "e.g. book")
    if out.exists() and not out.is_dir():
        raise Refused(f"out: {given} is a file, not a folder")
    parent = out.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise Refused(f"out: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise Refused(f"out: cannot write into {parent}")
    problem = not_ours(out) if out.is_dir() else None
    if problem:
        raise Refused(f"out: {given} {problem}; choose a new or empty folder, or move those files away")
    return out


def _sibling(out: Path, kind: str) -> Path:
    return out.parent / f".{out.name}.kvlab-{kind}-{os.getpid()}-{secrets.token_hex(4)}"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # (another user's process)
    return True


def remove_stale(out: Path) -> None:
    """Remove the folders a killed build left beside ``out`` (its process is gone); an old site is kept if ``out``
    itself is missing (killed between the two renames of :func:`swap`)."""
    for path in out.parent.iterdir():
        m = STAGED.fullmatch(path.name)
        if m and m["name"] == out.name and not _running(int(m["pid"])) and (m["kind"] == "build" or out.exists()):
            shutil.rmtree(path, ignore_errors=True)


def write_manifest(folder: Path) -> None:
    files = [f for f in files_in(folder) if f != MANIFEST]
    (folder / MANIFEST).write_text(json.dumps({"kvlab": MARKER, "files": files}, indent=1), encoding="utf-8")


def swap(new: Path, out: Path) -> None:
    """Put the folder ``new`` where ``out`` is (its permissions kept); the old ``out`` is removed once replaced."""
    if not out.exists():
        os.rename(new, out)
        return
    os.chmod(new, stat.S_IMODE(out.stat().st_mode))
    old = _sibling(out, "old")
    os.rename(out, old)
    try:
        os.rename(new, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def staged(out: Path):
    """A new folder beside ``out`` to build into: on success it replaces ``out`` (checked again, in case files were
    put there meanwhile); on an error or an interrupt it is removed and ``out`` stays as it was."""
    created = [p for p in (out.parent, *out.parent.parents) if not p.exists()]  # (deepest first)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(out)
    tmp = _sibling(out, "build")
    tmp.mkdir()
    try:
        yield tmp
        write_manifest(tmp)
        check_out(out)
        swap(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for folder in created:  # the parents made for it, while still empty
            try:
                folder.rmdir()
            except OSError:
                break
        raise
