"""What chapter 3.2's growth run says about time, as claims (:mod:`kvlab.claims`): two ways timed in the
same rounds compared on the numbers printed (:data:`PACE`, the one chooser in :data:`CHOOSERS`; early in a run only
after a same-work check, :class:`SameWork`), the chapter's
names for its caches (:data:`CHAPTER_LABELS`), the Chinese catalog :data:`ZH`, :func:`pace_claim` and
:func:`show_claims`."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...claims import DIFFERENCE, Catalog, Chooser, Claim, Number, Rule, number, ratio, series, show
from ...stats import median
from ...viz.style import MODE_LABELS


# This chapter sets two caches side by side, not a cache against none: its preallocated cache is named for that.
# (Proposed for kvlab.viz.style.MODE_LABELS as a chapter-3.2 label; passed explicitly until then.)
CHAPTER_LABELS = {**MODE_LABELS, "kv": "预分配（kv）"}


# Two ways timed in the same rounds are compared on the numbers printed: both medians, each round's difference in
# per cent (printed as a series) and the overall difference. "Slower" or "faster" only when every round differs by
# PACE_APART % or more the same way (three rounds pointing the same way by chance alone happens one time in four;
# by 10 % each, far more rarely); "about the same" only when every round is within PACE_SAME %. "Can't tell" quotes
# the rounds and their median (each round's own difference: paired), never the two medians, which come from
# different rounds and can look decisive when the rounds are not.
# Early in a run (short caches), a comparison is made only after a same-work check: a cache that does the same work
# at every pass (transformers' StaticCache attends over all its positions from the first pass) must take the same
# time early and late within SAME_WORK %; otherwise the early window is too noisy to compare anything in it.
PACE_APART, PACE_SAME = 10, 5  # per cent
SAME_WORK = PACE_APART  # per cent: noise above the smallest difference the chooser calls "slower" or "faster"
PACE_FIELDS = ("t_from", "t_to", "n", "other_ms", "base_ms", "rounds")
UNCLEAR_FIELDS = ("t_from", "t_to", "n", "rounds", "paired")
WORK_FIELDS = ("work_early", "work_late", "work_diff")


@dataclass(frozen=True)
class SameWork:
    """A way timed in the same rounds that does the same work at every pass: its per-round medians early and late
    (ms), the same-work check of an early comparison."""

    name: str  # a mode name, as :data:`ZH` writes it
    early_ms: list[float]
    late_ms: list[float]


def _rounds(v) -> tuple[float, ...]:
    r = v["rounds"]
    return r if isinstance(r, tuple) else (r,)


def _diff_agrees(v, sign: int) -> bool:
    """The printed overall difference ``diff`` (per cent; ``sign`` +1: slower by, -1: faster by) is the printed
    medians' ``other / base - 1``, within the rounding of all three."""
    o, b = v["other_ms"], v["base_ms"]
    if b <= 0.005:
        return False
    lo, hi = max(o - 0.005, 0) / (b + 0.005), (o + 0.005) / (b - 0.005)
    return 100 * (lo - 1) - 0.5 <= sign * v["diff"] <= 100 * (hi - 1) + 0.5


def _apart(pct: float, a: float, b: float) -> bool:
    """The printed ``pct`` (whole per cent) is ``|a / b - 1|`` of the printed ``a`` and ``b`` (2 decimals), within
    the rounding of all three."""
    if b <= 0.005:
        return False
    lo, hi = max(a - 0.005, 0) / (b + 0.005), (a + 0.005) / (b - 0.005)
    least = 0.0 if lo <= 1 <= hi else min(abs(lo - 1), abs(hi - 1))
    return 100 * least - 0.5 <= pct <= 100 * max(abs(lo - 1), abs(hi - 1)) + 0.5


def _work_steady(v) -> bool:
    """The same work took the same time early and late: within SAME_WORK %."""
    return v["work_diff"] <= SAME_WORK and _apart(v["work_diff"], v["work_early"], v["work_late"])


def _work_noisy(v) -> bool:
    return v["work_diff"] > SAME_WORK and _apart(v["work_diff"], v["work_early"], v["work_late"])


def _unclear(v) -> bool:
    """The printed ``paired`` is the median of the printed rounds (within a per cent: both are rounded), and the
    rounds neither all differ by PACE_APART % the same way nor all lie within PACE_SAME %."""
    r = _rounds(v)
    return (abs(v["paired"] - median(list(r))) <= 1 + 1e-9 and not (min(r) >= PACE_APART or max(r) <= -PACE_APART)
            and not all(abs(x) <= PACE_SAME for x in r))


# slower, faster, same and unclear split on the printed rounds alone, so every sound set of rounds has its sentence
def _same(v) -> bool:
    return all(abs(r) <= PACE_SAME for r in _rounds(v))


def _slower(v) -> bool:
    return min(_rounds(v)) >= PACE_APART and _diff_agrees(v, 1)


def _faster(v) -> bool:
    return max(_rounds(v)) <= -PACE_APART and _diff_agrees(v, -1)


PACE = Chooser("storage.pace", (
    Rule("storage.pace.noisy", ("t_from", "t_to", *WORK_FIELDS), _work_noisy, substantive=False),
    Rule("storage.pace.slower_checked", (*PACE_FIELDS, "diff", *WORK_FIELDS), lambda v: _work_steady(v) and _slower(v)),
    Rule("storage.pace.faster_checked", (*PACE_FIELDS, "diff", *WORK_FIELDS), lambda v: _work_steady(v) and _faster(v)),
    Rule("storage.pace.same_checked", (*PACE_FIELDS, *WORK_FIELDS), lambda v: _work_steady(v) and _same(v)),
    Rule("storage.pace.slower", (*PACE_FIELDS, "diff"), _slower),
    Rule("storage.pace.faster", (*PACE_FIELDS, "diff"), _faster),
    Rule("storage.pace.same", PACE_FIELDS, _same),
    Rule("storage.pace.unclear", UNCLEAR_FIELDS, _unclear, substantive=False),
    Rule("storage.pace.untimed", ("t_from", "t_to"), substantive=False),
))
CHOOSERS = (PACE,)

_WINDOW = "{when}（缓存里 {t_from}–{t_to} 个 token）"
_PACE_BODY = ("每次前向的耗时（{n} 轮各取中位数，再取中位数）：{other} {other_ms}，{base} {base_ms}。"
              "每一轮「{other}」比「{base}」多用的时间：{rounds}（负数表示更快）")
_PACE_HEAD = _WINDOW + _PACE_BODY
_CHECKED_HEAD = (_WINDOW + f"：先核对这一段的计时。{{work}} 每一步做的事一样多（注意力每步都算全部位置），它在这一段每次前向 "
                 f"{{work_early}}，后半程 {{work_late}}，相差 {{work_diff}}，在 {SAME_WORK}% 以内，这一段的计时可以拿来比较。"
                 "这一段" + _PACE_BODY)
_PACE_RERUN = ("在这台机器上，这一次分不出快慢。点上面面板的「运行测量」再测一次（先关掉别的占 CPU 的程序），或者在下拉框里"
               "选更长的 256 个 token，测完再运行这一格。")
_SLOWER = f"，每一轮都慢 {PACE_APART}% 以上：按两边的中位数，「{{other}}」慢了 {{diff}}。"
_FASTER = f"，每一轮都快 {PACE_APART}% 以上：按两边的中位数，「{{other}}」快了 {{diff}}。"
_SAME = f"，每一轮都在 ±{PACE_SAME}% 以内：两者几乎一样快。"
ZH = Catalog("zh", {
    "storage.pace.noisy": (_WINDOW + f"：这一段的计时太吵，不拿来比较「{{other}}」和「{{base}}」。{{work}} 每一步做的事一样多"
                           f"（注意力每步都算全部位置），它在这一段每次前向 {{work_early}}，后半程 {{work_late}}，同样的工作"
                           f"前后相差 {{work_diff}}，超过了 {SAME_WORK}%：这一段里两种缓存之间的差别，可能只是计时的噪声。" + _PACE_RERUN),
    "storage.pace.slower_checked": _CHECKED_HEAD + _SLOWER,
    "storage.pace.faster_checked": _CHECKED_HEAD + _FASTER,
    "storage.pace.same_checked": _CHECKED_HEAD + _SAME,
    "storage.pace.slower": _PACE_HEAD + _SLOWER,
    "storage.pace.faster": _PACE_HEAD + _FASTER,
    "storage.pace.same": _PACE_HEAD + _SAME,
    "storage.pace.unclear": (_WINDOW + "，{n} 轮里每一轮「{other}」比「{base}」多用的时间：{rounds}（负数表示更快），"
                             f"各轮的中位数是 {{paired}}；但不是每一轮都朝同一个方向差出 {PACE_APART}% 以上，也不是每一轮都在 "
                             f"±{PACE_SAME}% 以内：" + _PACE_RERUN),
    "storage.pace.untimed": _WINDOW + "：这一次没有测到可以比较的耗时（有一方是 0）。" + _PACE_RERUN,
}, words={"kv": CHAPTER_LABELS["kv"], "dynamic": CHAPTER_LABELS["dynamic"], "transformers:dynamic": "DynamicCache",
          "transformers:static": "StaticCache", "early": "前四分之一的解码步", "late": "后半程"})


def _work_numbers(work: SameWork | None) -> dict[str, Number]:
    """The same-work check's printed numbers; NaN without one (so the rules that show them never hold)."""
    if work is None:
        return {name: number(math.nan) for name in WORK_FIELDS}
    if not work.early_ms or len(work.early_ms) != len(work.late_ms):
        raise ValueError(f"work: one early and one late time per round, got {len(work.early_ms)} and {len(work.late_ms)}")
    e, l = median(work.early_ms), median(work.late_ms)
    return {"work_early": number(e, 2, "ms"), "work_late": number(l, 2, "ms"),
            "work_diff": number(100 * abs(ratio(e, l) - 1), 0, "%")}


def pace_claim(base: str, base_ms: list[float], other: str, other_ms: list[float], when: str,
               window: tuple[int, int], work: SameWork | None = None) -> Claim:
    """:data:`PACE`'s claim on two ways timed in the same rounds (one value per round each, in ms): ``other``
    against ``base`` (mode names, as :data:`ZH` writes them) over ``window`` (first and last cached length); with
    ``work``, only after its same-work check (early and late within :data:`SAME_WORK` %)."""
    if not base_ms or len(base_ms) != len(other_ms):
        raise ValueError(f"base_ms, other_ms: one time per round each, got {len(base_ms)} and {len(other_ms)}")
    b, o = median(base_ms), median(other_ms)
    rounds = [100 * (ratio(x, y) - 1) for x, y in zip(other_ms, base_ms)]
    rounds_number = series(rounds, 0, "%", DIFFERENCE) if len(rounds) > 1 else number(rounds[0], 0, "%", DIFFERENCE)
    slower = 100 * (ratio(o, b) - 1)
    numbers = {"t_from": number(window[0], 0), "t_to": number(window[1], 0), "n": number(len(rounds), 0),
               "other_ms": number(o, 2, "ms"), "base_ms": number(b, 2, "ms"), "rounds": rounds_number,
               "diff": number(abs(slower), 0, "%"), "paired": number(median(rounds), 0, "%", DIFFERENCE),
               **_work_numbers(work)}
    terms = {"other": other, "base": base, "when": when} | ({"work": work.name} if work else {})
    return PACE.choose(numbers, terms)


def show_claims(claims: list[Claim]) -> None:
    """Display this chapter's claims in Chinese, recorded in the output's metadata (``kvlab.claims.show``)."""
    show(claims, ZH)
