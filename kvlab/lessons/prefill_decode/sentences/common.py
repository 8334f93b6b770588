"""Chapter 3.3's claims, the ground they share: the chapter's key prefix and bands, how each kind of number
is printed (:class:`~kvlab.claims.Number`), how predicates read printed numbers back, and the phrases several
sentences share (how to rerun a cell, a launch-bound pass)."""
from __future__ import annotations

import math

from ....claims import ABSOLUTE, DIFFERENCE, MINUS, Number, number, series

P = "prefill_decode"  # every key of this chapter starts with it
SAME = 15  # percent: two measurements of the same thing within ±15 % of each other agree
NEAR, FAR, FULL = 70, 35, 90  # percent of a roof: close to it from 70, far below it under 35, used up from 90
LAUNCH_WORK, LAUNCH_TIME = 16, 1.3  # the work grew ≥ 16x and the time < 1.3x: launch-bound (a GPU's shape)


# -- printing numbers ------------------------------------------------------------------------------------------
def decimals(values) -> int:
    """Decimals that give the smallest nonzero value at least 3 significant digits (2 to 4)."""
    small = min((abs(x) for x in values if x and math.isfinite(x)), default=1.0)
    return max(2, min(4, 2 - math.floor(math.log10(small))))


def ms(seconds: float) -> Number:
    return number(seconds * 1e3, decimals([seconds * 1e3]), "ms")


def ms_series(seconds) -> Number:
    values = [s * 1e3 for s in seconds]
    return series(values, decimals(values), "ms")


def us(seconds: float) -> Number:
    x = seconds * 1e6
    return number(x, 2 if x < 10 else 1 if x < 1000 else 0, "µs")


def count(n: int) -> Number:
    return Number(f"{n:,}")


def counts(ns) -> Number:
    return series(ns, 0) if len(ns) > 1 else count(ns[0])


def some(xs, digits: int = 2, unit: str = "", kind: str = ABSOLUTE) -> Number:
    """One number or a series of them, as many as ``xs`` has."""
    return series(xs, digits, unit, kind) if len(xs) > 1 else number(xs[0], digits, unit, kind)


def pct(x: float) -> Number:
    """A share (0.7 -> 70%)."""
    return number(100 * x, 0, "%")


def signed_pct(x: float) -> Number:
    """A relative difference with its sign, the minus sign 「−」 (0.2 -> +20%, -0.1 -> −10%)."""
    v = 100 * x
    text = f"{v:+.0f}" if math.isfinite(v) else str(v)
    return Number("0" if text in ("+0", "-0") else text.replace("-", MINUS), "%", DIFFERENCE)


def times(x: float, digits: int = 2) -> Number:
    """A ratio, printed bare: the sentence says 「×」 or 「倍」."""
    return number(x, digits)


def gflops(flops_per_s: float) -> Number:
    return number(flops_per_s / 1e9, 1, "GFLOP/s")


def per_s(tokens_per_s: float) -> Number:
    """A throughput in token/s, to 3 significant digits or more (whole tokens from 100)."""
    x = tokens_per_s
    return number(x, 0 if not math.isfinite(x) or abs(x) >= 100 else 1 if abs(x) >= 10 else 2, "token/s")


def gbs(bytes_per_s: float) -> Number:
    return number(bytes_per_s / 1e9, 1, "GB/s")


# -- reading printed numbers back ------------------------------------------------------------------------------
def vals(v) -> tuple[float, ...]:
    return v if isinstance(v, tuple) else (v,)


def close(printed: float, computed: float, step: float = 0.01) -> bool:
    """A printed number agrees with the one computed from other printed numbers: within its rounding step, and
    2 % for the rounding of the numbers it was computed from."""
    return abs(printed - computed) <= step / 2 + 0.02 * abs(computed) + 1e-12


def exponents(xs, ts) -> list[float]:
    """The growth exponent k of each segment (t ~ x^k), from printed numbers."""
    return [math.log(b / a) / math.log(y / x) if min(x, y, a, b) > 0 and x != y else math.nan
            for x, y, a, b in zip(xs, xs[1:], ts, ts[1:])]


def launch_bound(v) -> bool:
    return v["Pn"] / v["P0"] >= LAUNCH_WORK and v["ratio_all"] < LAUNCH_TIME and close(v["ratio_all"], v["tn"] / v["t0"])


LAUNCH_SHOWS = ("P0", "Pn", "t0", "tn", "ratio_all")


def rising(xs) -> bool:
    return all(b > a for a, b in zip(xs, xs[1:]))


# -- phrases several sentences share ----------------------------------------------------------------------------
CLOSE = "关掉别的占 CPU 的程序（或别的笔记本内核）"
RERUN_TIMELINE = f"{CLOSE}，再运行一次 `timeline = lesson.run_timeline(...)` 那一格。"
RERUN_SWEEP = f"{CLOSE}，再运行一次 `sweep = lesson.measure_prefill_sweep(big)` 那一格（然后重新运行后面的格子）。"
RERUN_ROOFS = f"{CLOSE}，再运行一次 `roofs = lesson.measure_roofs(device)` 那一格。"
RERUN_BATCH = f"{CLOSE}，再运行一次 `batch = lesson.measure_batch_sweep(big)` 那一格。"
RERUN_SMALL = f"{CLOSE}，再运行一次 `small = lesson.measure_small_matmuls(device)` 那一格。"
LAUNCH_TEXT = ("P 从 {P0} 增加到 {Pn}（耗时 {t0} → {tn}），预填充的耗时只 ×{ratio_all}：几乎不随 P 变化。一次前向的时间几乎全是"
               "固定开销（GPU 上是几百次内核启动），P 个 token 的运算藏在里面")

# -- the same phrases in English (each topic's TEMPLATES_EN uses them) --------------------------------------------
CLOSE_EN = "close other CPU-hungry programs (or other notebook kernels)"
RERUN_TIMELINE_EN = f"{CLOSE_EN} and rerun the `timeline = lesson.run_timeline(...)` cell."
RERUN_SWEEP_EN = (f"{CLOSE_EN} and rerun the `sweep = lesson.measure_prefill_sweep(big)` cell (then rerun the cells "
                  "after it).")
RERUN_ROOFS_EN = f"{CLOSE_EN} and rerun the `roofs = lesson.measure_roofs(device)` cell."
RERUN_BATCH_EN = f"{CLOSE_EN} and rerun the `batch = lesson.measure_batch_sweep(big)` cell."
RERUN_SMALL_EN = f"{CLOSE_EN} and rerun the `small = lesson.measure_small_matmuls(device)` cell."
LAUNCH_TEXT_EN = ("As P grows from {P0} to {Pn} (taking {t0} → {tn}), the prefill time grows only ×{ratio_all}: it "
                  "hardly changes with P. A forward pass is almost all fixed overhead (on a GPU, a few hundred kernel "
                  "launches), and the work of the P tokens hides inside it")
