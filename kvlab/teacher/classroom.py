"""The guide's section on running a class on JupyterHub: which hub for which class size, what one student's kernel
measured (peak resident memory and CPU of every chapter at its defaults, from ``run_times.json``), and a Zero to
JupyterHub ``singleuser`` block whose guarantees and limits are computed from those measurements."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..language import get_language
from .phrases import GUIDE
from .run_times import Measurement

GIB = 2**30
SERVER_ALLOWANCE = 0.5 * GIB  # the notebook server and the pod's own processes, beside one kernel
POD_LIMIT = 2 * GIB  # the usual per-student start on a hub (Zero to JupyterHub, mybinder.org)


def round_up(x: float, step: float) -> float:
    """``x`` rounded up to a multiple of ``step`` (with a little slack for float noise)."""
    return math.ceil(x / step - 1e-9) * step


@dataclass(frozen=True)
class StudentNeeds:
    """One student's resources, from the measured chapters: the largest kernel peak and mean CPU, and what follows."""

    peak_bytes: int  # the largest kernel peak (VmHWM) of any chapter
    peak_chapter: str
    cpu_cores: float  # the largest mean CPU use of a chapter's run (CPU seconds / seconds of the cells)
    memory_guarantee: float  # GiB: the largest kernel plus the server's allowance
    memory_limit: float  # GiB: room for a second chapter's kernel left open
    cpu_guarantee: float
    cpu_limit: int


def student_needs(measurement: Measurement) -> StudentNeeds | None:
    """What one student needs, computed from the recorded runs; None when no run recorded memory."""
    peaks = {ch.notebook: max(ch.peak_rss) for ch in measurement.chapters if ch.peak_rss}
    if not peaks:
        return None
    chapter = max(peaks, key=peaks.get)
    cpu = max(x for ch in measurement.chapters for x in ch.cpu_cores)
    guarantee = round_up((peaks[chapter] + SERVER_ALLOWANCE) / GIB, 0.25)
    limit = max(POD_LIMIT / GIB, round_up(guarantee + peaks[chapter] / GIB, 0.5))
    return StudentNeeds(peaks[chapter], chapter, cpu, guarantee, limit, round_up(min(cpu, 1.0), 0.25), 1)


def singleuser_yaml(needs: StudentNeeds) -> str:
    """Zero to JupyterHub's ``singleuser`` block for these needs."""
    return "\n".join([
        "singleuser:",
        "  memory:",
        f"    guarantee: {needs.memory_guarantee:g}G",
        f"    limit: {needs.memory_limit:g}G",
        "  cpu:",
        f"    guarantee: {needs.cpu_guarantee:g}",
        f"    limit: {needs.cpu_limit}",
    ])


def resources_table(measurement: Measurement) -> str:
    lines = [GUIDE.say("hub_table_head"), "|---|---:|---:|---:|"]
    missing = GUIDE.say("not_measured")
    for ch in measurement.chapters:
        peak = f"{max(ch.peak_rss) / GIB:.2f}" if ch.peak_rss else missing
        cpu = ch.cpu_cores
        lines.append(f"| `{ch.notebook}` | {peak} | {ch.fastest:.1f} | {max(cpu):.2f} |" if cpu else
                     f"| `{ch.notebook}` | {peak} | {ch.fastest:.1f} | {missing} |")
    return "\n".join(lines)


def class_section(measurement: Measurement | None) -> str:
    """The guide's section on teaching a class on JupyterHub (in the course's language)."""
    say = GUIDE.say
    parts = [say("hub_head"), say("hub_lead"), say("hub_list")]
    needs = student_needs(measurement) if measurement else None
    if needs is None:
        parts += [say("hub_unmeasured")]
        return "\n\n".join(parts)
    parts += [
        say("hub_needs_head"),
        say("hub_needs_lead", date=measurement.date, machine=measurement.machine_words(get_language())),
        resources_table(measurement),
        say("hub_largest", chapter=needs.peak_chapter, peak=needs.peak_bytes / GIB, allowance=SERVER_ALLOWANCE / GIB),
        say("hub_yaml_head"),
        say("hub_yaml_lead", allowance=SERVER_ALLOWANCE / GIB),
        "```yaml\n" + singleuser_yaml(needs) + "\n```",
    ]
    return "\n\n".join(parts)
