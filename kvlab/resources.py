"""What this process may really use: CPU threads and memory.

A kernel in a container or a JupyterHub pod sees the node's cores (``os.cpu_count``) and memory (``/proc/meminfo``),
not its own share of them. Twenty students on a 16-core node each starting 16 threads measure nothing but
contention, and a cache sized against the node's memory gets the kernel OOM-killed instead of refused. So:

- the CPU budget is the smallest of the affinity mask, a cgroup CPU quota (v2 ``cpu.max``, v1
  ``cpu.cfs_quota_us``/``cpu.cfs_period_us``, the smallest over the process's cgroup and its ancestors), JupyterHub's
  ``CPU_LIMIT`` and a count the user set (``KVLAB_THREADS``, else ``OMP_NUM_THREADS``);
- the memory limit is the smallest of the cgroup's ``memory.max`` (v1 ``memory.limit_in_bytes``) and JupyterHub's
  ``MEM_LIMIT``.

A source that is missing, unreadable, malformed or says ``max`` gives no limit: never a crash, never 0 threads.
Every function takes ``root`` (where ``/proc`` and ``/sys`` are) and ``env`` so tests can fake both.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from .language import DEFAULT_LANGUAGE, using_language
from .phrases import Phrasebook

# Where a limit was read, as the readouts name it (in the course's language when the limit is read). A variable the
# user set is named as it is (KVLAB_THREADS).
SOURCES = Phrasebook("resources", {
    "zh": {
        "cgroup_cpu": "cgroup CPU 配额",
        "cgroup_memory": "cgroup 内存上限",
        "affinity": "CPU 亲和性",
        "logical_cores": "本机逻辑核数",
        "hub_cpu": "JupyterHub 的 CPU_LIMIT",
        "hub_memory": "JupyterHub 的 MEM_LIMIT",
    },
    "en": {
        "cgroup_cpu": "cgroup CPU quota",
        "cgroup_memory": "cgroup memory limit",
        "affinity": "CPU affinity",
        "logical_cores": "this machine's logical cores",
        "hub_cpu": "JupyterHub's CPU_LIMIT",
        "hub_memory": "JupyterHub's MEM_LIMIT",
    },
})

NO_LIMIT_BYTES = 2**60  # cgroup v1 writes "no limit" as a huge page-rounded number (9223372036854771712)


@dataclass(frozen=True)
class Limit:
    """One bound on what the process may use: ``value`` (CPUs or bytes) and where it was read, in words for the
    readouts in the course's language when it was read (for example 「cgroup CPU 配额」, cgroup CPU quota)."""

    value: int
    source: str


# -- small readers that never raise -----------------------------------------------------------------------
def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except (OSError, ValueError):
        return None


def _positive_number(text: str | None) -> float | None:
    """A finite number above 0, or None for anything else ("max", "-1", "", "abc", "nan")."""
    try:
        x = float((text or "").strip())
    except ValueError:
        return None
    return x if math.isfinite(x) and x > 0 else None


# -- cgroups -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Mount:
    point: Path  # where the hierarchy is mounted, e.g. /sys/fs/cgroup/cpu
    base: str  # the cgroup path the mount's root stands for (usually "/")
    version: int
    controllers: frozenset[str]


def _mounts(root: Path) -> list[_Mount]:
    """cgroup hierarchies from ``/proc/self/mountinfo``: fields 4 (root) and 5 (mount point); after " - " the
    file-system type and its super options (v1: the controllers)."""
    text = _read(root / "proc/self/mountinfo") or ""
    mounts = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(rest) < 1 or rest[0] not in ("cgroup", "cgroup2"):
            continue
        options = frozenset(rest[2].split(",")) if len(rest) > 2 else frozenset()
        point = root / fields[4].lstrip("/")
        mounts.append(_Mount(point, fields[3], 2 if rest[0] == "cgroup2" else 1, options))
    return mounts


def _own_paths(root: Path) -> dict[str, str]:
    """``/proc/self/cgroup``: controller -> this process's cgroup path ("" keys the v2 unified hierarchy)."""
    paths = {}
    for line in (_read(root / "proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _id, controllers, path = parts
        for name in (controllers.split(",") if controllers else [""]):
            paths[name] = path
    return paths


def _cgroup_dirs(root: Path, controller: str) -> list[Path]:
    """The directories of this process's cgroup and each of its ancestors that hold ``controller``'s files,
    own cgroup first. In a cgroup namespace the own path may not exist under the mount: ancestors still count."""
    own = _own_paths(root)
    dirs = []
    for m in _mounts(root):
        if m.version == 1 and controller not in m.controllers:
            continue
        path = own.get(controller if m.version == 1 else "")
        if path is None:
            continue
        rel = path[len(m.base):] if m.base != "/" and path.startswith(m.base) else path
        parts = [p for p in rel.split("/") if p]
        for depth in range(len(parts), -1, -1):
            d = m.point.joinpath(*parts[:depth])
            if d.is_dir() and d not in dirs:
                dirs.append(d)
    return dirs


def cgroup_cpu_quota(root: Path = Path("/")) -> Limit | None:
    """The smallest CPU quota over this process's cgroups and their ancestors, rounded down and at least 1."""
    best = None
    for d in _cgroup_dirs(root, "cpu"):
        max_line = _read(d / "cpu.max")  # v2: "QUOTA PERIOD" or "max PERIOD"
        if max_line is not None:
            parts = max_line.split()
            quota, period = (parts + [None, None])[:2]
        else:  # v1: -1 means no quota
            quota, period = _read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us")
        q, p = _positive_number(quota), _positive_number(period)
        if q is not None and p is not None:
            cpus = max(1, math.floor(q / p))
            best = cpus if best is None else min(best, cpus)
    return None if best is None else Limit(best, SOURCES.say("cgroup_cpu"))


def cgroup_memory_limit(root: Path = Path("/")) -> Limit | None:
    """The smallest memory limit over this process's cgroups and their ancestors, in bytes."""
    best = None
    for d in _cgroup_dirs(root, "memory"):
        for name in ("memory.max", "memory.limit_in_bytes"):
            value = _positive_number(_read(d / name))
            if value is not None and value < NO_LIMIT_BYTES:
                best = int(value) if best is None else min(best, int(value))
    return None if best is None else Limit(best, SOURCES.say("cgroup_memory"))


# -- the budgets -------------------------------------------------------------------------------------------------
def user_threads(env=None) -> Limit | None:
    """A thread count the user set: ``KVLAB_THREADS``, else ``OMP_NUM_THREADS`` (a positive integer; anything
    else is ignored)."""
    env = os.environ if env is None else env
    for name in ("KVLAB_THREADS", "OMP_NUM_THREADS"):
        text = (env.get(name) or "").strip()
        if text.isdigit() and int(text) > 0:
            return Limit(int(text), name)
    return None


def affinity_cpus() -> Limit:
    """The CPUs this process may be scheduled on (the affinity mask; the logical core count where there is none)."""
    try:
        return Limit(max(1, len(os.sched_getaffinity(0))), SOURCES.say("affinity"))
    except (AttributeError, OSError):
        return Limit(max(1, os.cpu_count() or 1), SOURCES.say("logical_cores"))


def cpu_limits(root: Path = Path("/"), env=None) -> list[Limit]:
    """Every CPU bound that applies, from the machine's to the user's."""
    env = os.environ if env is None else env
    limits = [affinity_cpus(), cgroup_cpu_quota(root)]
    hub = _positive_number(env.get("CPU_LIMIT"))
    if hub is not None:
        limits.append(Limit(max(1, math.floor(hub)), SOURCES.say("hub_cpu")))
    limits.append(user_threads(env))
    return [x for x in limits if x is not None]


def cpu_budget(root: Path = Path("/"), env=None) -> Limit:
    """How many threads this process may really run at once: the smallest bound (the first named on a tie)."""
    return min(cpu_limits(root, env), key=lambda x: x.value)


def memory_limit(root: Path = Path("/"), env=None) -> Limit | None:
    """The smallest memory limit set for this process by its cgroup or JupyterHub's ``MEM_LIMIT``; None if none."""
    env = os.environ if env is None else env
    limits = [cgroup_memory_limit(root)]
    hub = _positive_number(env.get("MEM_LIMIT"))
    if hub is not None:
        limits.append(Limit(int(hub), SOURCES.say("hub_memory")))
    limits = [x for x in limits if x is not None]
    return min(limits, key=lambda x: x.value) if limits else None


def resident_bytes(root: Path = Path("/")) -> int | None:
    """This process's resident size now (``VmRSS``)."""
    return _status_bytes(root, "VmRSS")


def peak_resident_bytes(root: Path = Path("/")) -> int | None:
    """This process's peak resident size so far (``VmHWM``): what a pod's memory limit is measured against."""
    return _status_bytes(root, "VmHWM")


def _status_bytes(root: Path, field: str) -> int | None:
    for line in (_read(root / "proc/self/status") or "").splitlines():
        if line.startswith(field + ":"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return None


def apply_thread_budget() -> Limit:
    """Lower torch's thread count to :func:`cpu_budget` (torch counts the node's cores); never raise it. Runs when
    kvlab is imported: a ``KVLAB_LANG`` naming no language is refused later, when something is said, not here."""
    import torch

    try:
        budget = cpu_budget()
    except ValueError:  # KVLAB_LANG names no language: the budget's words are not what is needed here
        with using_language(DEFAULT_LANGUAGE):
            budget = cpu_budget()
    if torch.get_num_threads() > budget.value:
        torch.set_num_threads(budget.value)
    return budget


def memory_headroom(root: Path = Path("/"), env=None) -> int | None:
    """Bytes this process may still take under its :func:`memory_limit` (the limit less its own resident size;
    the notebook server beside it is what check_fits' margin is for), or None when no limit is set."""
    limit = memory_limit(root, env)
    if limit is None:
        return None
    return max(0, limit.value - (resident_bytes(root) or 0))
