"""Plain statistics on lists of numbers (no torch): medians, running sums, growth exponents."""
from __future__ import annotations

import math


def median(values) -> float:
    """Median of a sequence of numbers (nan when empty)."""
    s = sorted(values)
    if not s:
        return float("nan")
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def cumulative(values) -> list[float]:
    """Running sums: ``[a, a + b, a + b + c, ...]``."""
    out, total = [], 0.0
    for v in values:
        total += v
        out.append(total)
    return out


def growth_exponent(xs, ys) -> float:
    """Least-squares slope of log(y) against log(x): y ~ x^k returns k (nan with < 2 usable points)."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pts) < 2:
        return float("nan")
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return float("nan")
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def percentile(values, q: float) -> float:
    """The q-th percentile (0-100) of a sequence of numbers, linearly interpolated between the two nearest
    ranks (numpy's default); nan when empty."""
    s = sorted(values)
    if not s:
        return float("nan")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in [0, 100], got {q!r}")
    pos = (len(s) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
