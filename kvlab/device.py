"""Device selection, synchronisation and free-memory queries."""
from __future__ import annotations

import os

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
