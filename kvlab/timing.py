"""Timing helpers: medians, growth exponents, and thread counts for measurements."""
from __future__ import annotations

import math
import os
from contextlib import contextmanager

import torch


def median(values) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def growth_exponent(xs, ys) -> float:
    """Least-squares slope of log(y) against log(x): y ~ x^k returns k."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pts) < 2:
        return float("nan")
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return float("nan")
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def cumulative(values) -> list[float]:
    out, total = [], 0.0
    for v in values:
        total += v
        out.append(total)
    return out


def measurement_threads() -> int:
    """Threads for timings taken inside a notebook: all cores but one.

    The browser and the Jupyter server need a core too; when a multi-threaded kernel
    has to share its cores, threads wait on each other at every operation and the
    timings stop meaning anything (on a 2-core machine a run took 4x to 50x longer).
    """
    return max(1, min(torch.get_num_threads(), (os.cpu_count() or 1) - 1))


@contextmanager
def torch_threads(n: int):
    """Run the block with ``torch.set_num_threads(n)``, restoring the previous count after."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(before)
