"""How long each chapter's cells take to run, measured: ``python -m kvlab.teacher --measure`` runs every notebook in
``chapters/`` top to bottom in a fresh kernel (nbclient, default settings), ``runs`` times each, alternating the
chapters so a burst of load elsewhere does not hit one chapter's runs only, and writes the result to
``run_times.json`` next to this module (``--append`` adds the new runs to the recorded ones: re-measure when the
machine is quieter and the fastest run gets closer to the machine's own speed). The guide reads that file; it never times anything itself, so regenerating
the guide gives the same text on every machine.

A chapter's time is the sum over its code cells of the interval from the kernel's ``execute_input`` to its
``execute_reply`` (what the learner waits for), without the kernel's start; the guide uses the fastest run, the
one closest to what the machine can do when nobody else is using it (another program can only slow a run down).
"""
from __future__ import annotations

import json
import os
import platform
import re
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..book.site import cpu_name  # the static edition names the machine the same way
from ..resources import cpu_budget

RUN_TIMES = Path(__file__).with_name("run_times.json")


@dataclass
class ChapterRuns:
    notebook: str
    seconds: list[float]  # the cells' execution time of each run
    output_characters: int = 0  # 汉字 the run printed (readouts, tables), which a learner reads too
    load: list[float] = field(default_factory=list)  # the 1-minute load average after each run
    peak_rss: list[int] = field(default_factory=list)  # the kernel's peak resident bytes (VmHWM) in each run
    cpu_seconds: list[float] = field(default_factory=list)  # the kernel's CPU time (user + system) in each run
    section_output: dict[str, int] = field(default_factory=dict)  # output_characters by section heading

    @property
    def fastest(self) -> float:
        return min(self.seconds)

    @property
    def cpu_cores(self) -> list[float]:
        """The kernel's mean CPU use (CPU seconds / seconds of the cells) of each run that recorded it: the last
        ones, since runs recorded before CPU time was come first."""
        timed = self.seconds[len(self.seconds) - len(self.cpu_seconds):]
        return [c / s for c, s in zip(self.cpu_seconds, timed) if s > 0]


@dataclass
class Measurement:
    """The runs of every chapter and the machine they ran on, as written to ``run_times.json``."""

    date: str
    machine: str  # processor, cores, system
    load_before: list[float]  # /proc/loadavg's 1, 5 and 15 minute averages before the first run
    load_after: list[float]
    note: str  # how busy the machine was, in words (Chinese), written by whoever measured
    chapters: list[ChapterRuns] = field(default_factory=list)

    def chapter(self, notebook: str) -> ChapterRuns | None:
        """The runs of ``notebook`` (a file name), or None when it was not measured."""
        return next((ch for ch in self.chapters if ch.notebook == notebook), None)

    @property
    def cores(self) -> int:
        return int(re.search(r"(\d+) 核", self.machine).group(1))

    def busyness(self) -> str:
        """How busy the machine was while the chapters ran, in words (the course's language), from the recorded load."""
        from .phrases import GUIDE

        loads = [x for ch in self.chapters for x in ch.load] or self.load_before[:1]
        if not loads:
            return GUIDE.say("busy_none")
        low, high = min(loads), max(loads)
        per_core = high / self.cores
        said = GUIDE.say("busy_range", low=low, high=high, cores=self.cores)
        if per_core <= 1.2:
            return GUIDE.say("busy_idle", said=said)
        return GUIDE.say("busy_busy", said=said, per_core=per_core)

    def machine_words(self, lang: str = "zh") -> str:
        """The machine as recorded (Chinese: 「AMD EPYC，2 核，Linux x86_64」), in ``lang``."""
        if lang == "zh":
            return self.machine
        return re.sub(r"(\d+) 核", r"\1 cores", self.machine).replace("，", ", ")

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=1) + "\n"

    @classmethod
    def load(cls, path: Path = RUN_TIMES) -> "Measurement":
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        data["chapters"] = [ChapterRuns(**ch) for ch in data["chapters"]]
        return cls(**data)


def load_average() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def cells_seconds(nb) -> float:
    """The summed execute_input -> execute_reply interval of an executed notebook's code cells."""
    total = 0.0
    for cell in nb.cells:
        timing = cell.get("metadata", {}).get("execution", {})
        start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        if cell.cell_type == "code" and start and end:
            total += (datetime.fromisoformat(end.replace("Z", "+00:00"))
                      - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
    return total


DETAILS = re.compile(r"<details.*?</details>", re.S)  # folded (reference solutions): not read unless opened
TAG = re.compile(r"<[^>]+>")


def cell_output_characters(cell) -> int:
    """汉字 in the text one cell's outputs show: printed streams, plain text and HTML (tags and folded parts
    removed). Figures and widgets are not counted."""
    from .minutes import han_characters

    total = 0
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            total += han_characters(out.get("text", ""))
            continue
        data = out.get("data", {})
        if "text/html" in data:
            total += han_characters(TAG.sub(" ", DETAILS.sub(" ", "".join(data["text/html"]))))
        elif "text/plain" in data and "application/vnd.jupyter.widget-view+json" not in data:
            total += han_characters("".join(data["text/plain"]))
    return total


def output_characters(nb) -> int:
    """汉字 in the text an executed notebook shows (:func:`cell_output_characters` of every cell)."""
    return sum(cell_output_characters(cell) for cell in nb["cells"])


def section_output_characters(nb) -> dict[str, int]:
    """The same 汉字, by the heading of the section each cell is in (``kvlab.teacher.minutes.cell_headings``):
    the guide counts only the core sections' output in a chapter's core reading."""
    from .minutes import cell_headings

    by_section: dict[str, int] = {}
    for heading, cell in zip(cell_headings(nb), nb["cells"]):
        n = cell_output_characters(cell)
        if n:
            by_section[heading] = by_section.get(heading, 0) + n
    return by_section


# Run by the kernel after the chapter's last cell: its peak resident size (VmHWM: no short peak is missed, as
# polling from outside would) and its CPU time so far, as one line.
KERNEL_PROBE = """import os as _os
from kvlab.resources import peak_resident_bytes as _peak
_t = _os.times()
print("KVLAB-KERNEL", _peak(), round(_t.user + _t.system, 2))"""


@dataclass
class Run:
    """One run of one notebook, as the kernel saw it."""

    seconds: float  # the cells' summed execution time
    output_characters: int
    peak_rss: int | None  # bytes; None where /proc is not there
    cpu_seconds: float | None
    section_output: dict[str, int] = field(default_factory=dict)  # output_characters by section heading


def run_once(path: Path, timeout: int = 600) -> Run:
    """Execute one notebook in a fresh kernel, then :data:`KERNEL_PROBE` in the same kernel (not counted in the
    cells' time or the characters)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(KERNEL_PROBE))
    NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    probe = nb.cells.pop()
    text = "".join(o.get("text", "") for o in probe.get("outputs", []) if o.get("output_type") == "stream")
    fields = text.split("KVLAB-KERNEL", 1)[1].split() if "KVLAB-KERNEL" in text else []
    peak, cpu = (int(fields[0]), float(fields[1])) if len(fields) >= 2 else (None, None)
    return Run(cells_seconds(nb), output_characters(nb), peak, cpu, section_output_characters(nb))


def measure(paths: list[Path], runs: int = 2, note: str = "", log=print,
            previous: Measurement | None = None) -> Measurement:
    """Run every notebook ``runs`` times (round robin) and return the measurement; with ``previous`` (runs of the
    same notebooks on the same machine, e.g. taken while it was busier) the new runs are added to its runs."""
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs!r}")
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{cpu_name()}，{cpu_budget().value} 核，{platform.system()} {platform.machine()}"  # cores it may use
    if previous is not None and previous.machine != machine:
        raise ValueError(f"previous: measured on {previous.machine}, not on this machine ({machine})")
    old = {ch.notebook: ch for ch in previous.chapters} if previous else {}
    result = Measurement(date=f"{previous.date.split(' – ')[0]} – {now}" if previous else now, machine=machine,
                         load_before=previous.load_before if previous else load_average(), load_after=[], note=note,
                         chapters=[ChapterRuns(p.name, list(old[p.name].seconds), old[p.name].output_characters,
                                               list(old[p.name].load), list(old[p.name].peak_rss),
                                               list(old[p.name].cpu_seconds), dict(old[p.name].section_output))
                                   if p.name in old else ChapterRuns(p.name, []) for p in paths])
    for r in range(runs):
        for path, chapter in zip(paths, result.chapters):
            start = time.perf_counter()
            run = run_once(path)
            chapter.output_characters, chapter.section_output = run.output_characters, run.section_output
            chapter.seconds.append(round(run.seconds, 2))
            chapter.load.append((load_average() or [float("nan")])[0])
            if run.peak_rss is not None:
                chapter.peak_rss.append(run.peak_rss)
                chapter.cpu_seconds.append(run.cpu_seconds)
            peak = f", kernel peak {run.peak_rss / 2**30:.2f} GiB" if run.peak_rss else ""
            log(f"run {r + 1}/{runs} {path.name}: cells {chapter.seconds[-1]:.1f} s "
                f"(wall {time.perf_counter() - start:.1f} s, load {load_average()}{peak})")
    result.load_after = load_average()
    return result
