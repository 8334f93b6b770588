"""What chapter 3.2's growth run says about time, as claims (:mod:`kvlab.claims`): two ways timed in the
same rounds compared on the numbers printed (:data:`PACE`, the one chooser in :data:`CHOOSERS`), the chapter's
names for its caches (:data:`CHAPTER_LABELS`), the Chinese catalog :data:`ZH`, :func:`pace_claim` and
:func:`show_claims`."""
from __future__ import annotations

from ...claims import DIFFERENCE, Catalog, Chooser, Claim, Rule, number, ratio, series, show
from ...stats import median
from ...viz.style import MODE_LABELS


# This chapter sets two caches side by side, not a cache against none: its preallocated cache is named for that.
# (Proposed for kvlab.viz.style.MODE_LABELS as a chapter-3.2 label; passed explicitly until then.)
CHAPTER_LABELS = {**MODE_LABELS, "kv": "预分配（kv）"}


# Two ways timed in the same rounds are compared on the numbers printed: both medians, each round's difference in
# per cent (printed as a series) and the overall difference. "Slower" or "faster" only when every round differs by
# PACE_APART % or more the same way (three rounds pointing the same way by chance alone happens one time in four;
# by 10 % each, far more rarely); "about the same" only when every round is within PACE_SAME %.
PACE_APART, PACE_SAME = 10, 5  # per cent
PACE_FIELDS = ("t_from", "t_to", "n", "other_ms", "base_ms", "rounds")


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


def _same(v) -> bool:
    o, b = v["other_ms"], v["base_ms"]
    return all(abs(r) <= PACE_SAME for r in _rounds(v)) and abs(o - b) <= PACE_SAME / 100 * b + 0.01


PACE = Chooser("storage.pace", (
    Rule("storage.pace.slower", (*PACE_FIELDS, "diff"),
         lambda v: min(_rounds(v)) >= PACE_APART and v["diff"] >= PACE_APART and _diff_agrees(v, 1)),
    Rule("storage.pace.faster", (*PACE_FIELDS, "diff"),
         lambda v: max(_rounds(v)) <= -PACE_APART and v["diff"] >= PACE_APART and _diff_agrees(v, -1)),
    Rule("storage.pace.same", PACE_FIELDS, _same),
    Rule("storage.pace.unclear", PACE_FIELDS, substantive=False),
    Rule("storage.pace.untimed", ("t_from", "t_to"), substantive=False),
))
CHOOSERS = (PACE,)

_PACE_HEAD = ("{when}（缓存里 {t_from}–{t_to} 个 token）每次前向的耗时（{n} 轮各取中位数，再取中位数）：{other} {other_ms}，"
              "{base} {base_ms}。每一轮「{other}」比「{base}」多用的时间：{rounds}（负数表示更快）")
_PACE_RERUN = ("：在这台机器上，这一次分不出快慢。点上面面板的「运行测量」再测一次（先关掉别的占 CPU 的程序），或者在下拉框里"
               "选更长的 256 个 token，测完再运行这一格。")
ZH = Catalog("zh", {
    "storage.pace.slower": _PACE_HEAD + f"，每一轮都慢 {PACE_APART}% 以上：按两边的中位数，「{{other}}」慢了 {{diff}}。",
    "storage.pace.faster": _PACE_HEAD + f"，每一轮都快 {PACE_APART}% 以上：按两边的中位数，「{{other}}」快了 {{diff}}。",
    "storage.pace.same": _PACE_HEAD + f"，每一轮都在 ±{PACE_SAME}% 以内：两者几乎一样快。",
    "storage.pace.unclear": _PACE_HEAD + f"，有的轮相差不到 {PACE_APART}%，或者各轮快慢方向不一致" + _PACE_RERUN,
    "storage.pace.untimed": "{when}（缓存里 {t_from}–{t_to} 个 token）：这一次没有测到可以比较的耗时（有一方是 0）"
                            + _PACE_RERUN,
}, words={"kv": CHAPTER_LABELS["kv"], "dynamic": CHAPTER_LABELS["dynamic"], "transformers:dynamic": "DynamicCache",
          "transformers:static": "StaticCache", "early": "前四分之一的解码步", "late": "后半程"})


def pace_claim(base: str, base_ms: list[float], other: str, other_ms: list[float], when: str,
               window: tuple[int, int]) -> Claim:
    """:data:`PACE`'s claim on two ways timed in the same rounds (one value per round each, in ms): ``other``
    against ``base`` (mode names, as :data:`ZH` writes them) over ``window`` (first and last cached length)."""
    if not base_ms or len(base_ms) != len(other_ms):
        raise ValueError(f"base_ms, other_ms: one time per round each, got {len(base_ms)} and {len(other_ms)}")
    b, o = median(base_ms), median(other_ms)
    rounds = [100 * (ratio(x, y) - 1) for x, y in zip(other_ms, base_ms)]
    rounds_number = series(rounds, 0, "%", DIFFERENCE) if len(rounds) > 1 else number(rounds[0], 0, "%", DIFFERENCE)
    slower = 100 * (ratio(o, b) - 1)
    numbers = {"t_from": number(window[0], 0), "t_to": number(window[1], 0), "n": number(len(rounds), 0),
               "other_ms": number(o, 2, "ms"), "base_ms": number(b, 2, "ms"), "rounds": rounds_number,
               "diff": number(abs(slower), 0, "%")}
    return PACE.choose(numbers, {"other": other, "base": base, "when": when})


def show_claims(claims: list[Claim]) -> None:
    """Display this chapter's claims in Chinese, recorded in the output's metadata (``kvlab.claims.show``)."""
    show(claims, ZH)
