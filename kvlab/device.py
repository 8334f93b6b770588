"""Device selection, synchronisation and free-memory queries."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch


DEVICE_TYPES = ("cpu", "cuda", "mps")


def pick_device() -> torch.device:
    """The best available device: CUDA, then Apple MPS, then CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def as_device(device) -> torch.device:
    """``None`` -> :func:`pick_device`; strings and devices -> ``torch.device`` (ValueError if unusable)."""
    if device is None:
        return pick_device()
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device: {device!r} is not a device name ({exc})") from None
    if dev.type not in DEVICE_TYPES:
        raise ValueError(f"device: kvlab runs on {', '.join(DEVICE_TYPES)}, got {dev}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: CUDA was requested but no CUDA GPU is available")
    if dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError("device: MPS was requested but is not available")
    return dev


def same_device(a, b) -> bool:
    """True when two devices name the same memory ("cuda" and "cuda:0" do, when 0 is the current GPU)."""
    a, b = torch.device(a), torch.device(b)
    if a.type != b.type:
        return False
    if a.type == "cuda" and (a.index is None or b.index is None):
        current = torch.cuda.current_device()
        return (current if a.index is None else a.index) == (current if b.index is None else b.index)
    return a.index == b.index or a.type != "cuda"


def synchronize(device) -> None:
    """Wait for queued work on ``device`` so a timer reads real elapsed time."""
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        torch.mps.synchronize()


def available_memory(device) -> int | None:
    """Bytes that can still be allocated on ``device`` (None if unknown)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        free, _total = torch.cuda.mem_get_info(dev)
        return int(free)
    if dev.type == "cpu":
        from .resources import memory_headroom

        node = _node_available()
        pod = memory_headroom()  # /proc/meminfo shows the node's memory inside a container or a hub's pod
        known = [x for x in (node, pod) if x is not None]
        return min(known) if known else None
    return None


def _node_available() -> int | None:
    """The machine's available memory (``MemAvailable``), or None if unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits(nbytes: int, device, what: str, name: str) -> None:
    """Raise ``ValueError`` naming ``name`` if ``nbytes`` cannot fit in the device's free memory."""
    free = available_memory(device)
    if free is not None and nbytes > free * 0.9:
        from .memory import format_bytes

        raise ValueError(
            f"{name}: {what} needs {format_bytes(nbytes)}, but only {format_bytes(free)} is free on "
            f"{torch.device(device)}; choose a smaller value"
        )


# -- the last-level cache -----------------------------------------------------------------------------
SYSFS_CPU_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass
class LastLevelCache:
    """The largest cache between the processor and memory: its level ("L3"), size and where it was read."""

    level: str
    bytes: int
    source: str


def parse_cache_size(text: str) -> int:
    """sysfs's cache size ("32768K", "1M", "512") in bytes."""
    text = text.strip().upper()
    factor = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    if not digits.isdigit():
        raise ValueError(f"text must be a cache size such as 32768K, got {text!r}")
    return int(digits) * factor


def last_level_cache(device="cpu", sysfs: Path = SYSFS_CPU_CACHE) -> LastLevelCache | None:
    """The CPU's last-level data cache from sysfs (Linux; the highest level that is not instruction-only), a
    CUDA device's L2 from its properties; None where the system does not say."""
    dev = torch.device(device)
    if dev.type == "cuda":
        size = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0)
        return LastLevelCache("L2", size, "torch.cuda.get_device_properties") if size else None
    if dev.type != "cpu":
        return None
    best = None
    for index in sorted(Path(sysfs).glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip() if (index / "type").exists() else "Unified"
            size = parse_cache_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind != "Instruction" and (best is None or level > best[0]):
            best = (level, size, str(index / "size"))
    return None if best is None else LastLevelCache(f"L{best[0]}", best[1], best[2])
