"""What chapter 3.2's growth run says about time, as claims (:mod:`kvlab.claims`): two ways timed in the
same rounds compared on the numbers printed (:data:`PACE`; early in a run only after a same-work check,
:class:`SameWork`, :data:`WORK`, printed once before them; :data:`CHOOSERS` has both), the chapter's
names for its caches (:data:`CHAPTER_LABELS`), the catalogs :data:`ZH` and :data:`EN` (:data:`CATALOGS`, by
language; this module is their one topic: TEMPLATES, WORDS, TEMPLATES_EN, WORDS_EN), :func:`work_claim`, :func:`pace_claim` and
:func:`show_claims`."""
from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from ...claims import (ABSOLUTE, DIFFERENCE, Catalog, Chooser, Claim, Number, Rule, in_language, number, ratio,
                       series, show)
from ...stats import median
from ...viz.style import MODE_LABELS, mode_label
from .phrases import TEXTS


# This chapter sets two caches side by side, not a cache against none: its preallocated cache is named for that.
# (Proposed for kvlab.viz.style.MODE_LABELS as a chapter-3.2 label; passed explicitly until then.)
class ChapterLabels(Mapping):
    """``CHAPTER_LABELS[name]``: :data:`MODE_LABELS` with the preallocated cache named 「预分配（kv）」
    ("preallocation (kv)"), read when asked, in the course's language (``lang`` of :meth:`text` for a fixed one)."""

    def text(self, name: str, lang: str | None = None) -> str:
        return TEXTS.text("kv_label", lang) if name == "kv" else mode_label(name, lang)

    def __getitem__(self, name: str) -> str:
        return self.text(name)

    def __iter__(self):
        return iter(MODE_LABELS)

    def __len__(self) -> int:
        return len(MODE_LABELS)

    def __repr__(self) -> str:
        return f"ChapterLabels({dict(self)!r})"


CHAPTER_LABELS = ChapterLabels()


# Two ways timed in the same rounds are compared on the numbers printed: both medians, each round's difference in
# per cent (printed as a series) and the overall difference. "Slower" or "faster" only when every round differs by
# PACE_APART % or more the same way (three rounds pointing the same way by chance alone happens one time in four;
# by 10 % each, far more rarely); "about the same" only when every round is within PACE_SAME %. How much slower or
# faster, and "can't tell", quote the rounds' own differences (paired: their median, and for a size its smallest and
# largest), never the ratio of the two medians, which come from different rounds and can look decisive (or large)
# when the rounds are not (review 7: rounds 21, 135, 40 %, medians' ratio 75 %).
# Early in a run (short caches), a comparison is made only after a same-work check: a cache that does the same work
# at every pass (transformers' StaticCache attends over all its positions from the first pass) must take the same
# time early and late within SAME_WORK %; otherwise the early window is too noisy to compare anything in it.
PACE_APART, PACE_SAME = 10, 5  # per cent
SAME_WORK = PACE_APART  # per cent: noise above the smallest difference the chooser calls "slower" or "faster"
PACE_FIELDS = ("t_from", "t_to", "n", "other_ms", "base_ms", "rounds")
SIZE_FIELDS = ("size", "size_lo", "size_hi")  # "slower"/"faster" by: the rounds' median, smallest and largest
UNCLEAR_FIELDS = ("t_from", "t_to", "n", "rounds", "paired")
WORK_FIELDS = ("t_from", "t_to", "work_early", "work_late", "work_rounds")  # the same-work check (:data:`WORK`)
WORST = "work_worst"  # an early comparison quotes the check's largest round (per cent, either way)
BAD_FIELDS = ("bad", "bad_pct")  # a round named: its number (from 1) and its printed per cent


@dataclass(frozen=True)
class SameWork:
    """A way timed in the same rounds that does the same work at every pass: its per-round medians early and late
    (ms), the same-work check of an early comparison."""

    name: str  # a mode name, as :data:`ZH` writes it
    early_ms: list[float]
    late_ms: list[float]


def _rounds(v) -> tuple[float, ...]:
    return _seq(v, "rounds")


def _size_agrees(v, sign: int) -> bool:
    """The printed ``size`` (per cent; ``sign`` +1: slower by, -1: faster by) is the median of the printed rounds
    (within a per cent: both are rounded), and ``size_lo``, ``size_hi`` are the printed rounds' smallest and largest
    size."""
    r = [sign * x for x in _rounds(v)]
    return (abs(v["size"] - median(r)) <= 1 + 1e-9 and v["size_lo"] == min(r) and v["size_hi"] == max(r))


def _seq(v, name: str) -> tuple[float, ...]:
    r = v[name]
    return r if isinstance(r, tuple) else (r,)


def _pct_agrees(pct: float, a: float, b: float) -> bool:
    """The printed ``pct`` (whole per cent, signed) is ``a / b - 1`` of the printed ``a`` and ``b`` (2 decimals),
    within the rounding of all three."""
    if b <= 0.005:
        return False
    lo, hi = max(a - 0.005, 0) / (b + 0.005), (a + 0.005) / (b - 0.005)
    return 100 * (lo - 1) - 0.5 <= pct <= 100 * (hi - 1) + 0.5


def _work_rounds_agree(v) -> bool:
    """Each round's printed per cent is that round's printed early / late - 1."""
    e, l, r = _seq(v, "work_early"), _seq(v, "work_late"), _seq(v, "work_rounds")
    return len(e) == len(l) == len(r) and all(_pct_agrees(p, a, b) for p, a, b in zip(r, e, l))


def _names_round(v, series_name: str) -> bool:
    """``bad`` is a round of the printed ``series_name`` and ``bad_pct`` is that round's printed per cent."""
    r, bad = _seq(v, series_name), v["bad"]
    return float(bad).is_integer() and 1 <= bad <= len(r) and r[int(bad) - 1] == v["bad_pct"]


def _work_steady(v) -> bool:
    """The same work took the same time early and late in every round: each within SAME_WORK %."""
    return _work_rounds_agree(v) and all(abs(x) <= SAME_WORK for x in _seq(v, "work_rounds"))


def _work_broken(v, sign: int) -> bool:
    """The named round's same work differed by more than SAME_WORK % early against late, early slower (``sign``
    +1) or faster (-1): ``bad`` is a round of the printed ``work_rounds`` and ``bad_size`` its printed per cent
    without the sign."""
    r, bad = _seq(v, "work_rounds"), v["bad"]
    return (_work_rounds_agree(v) and float(bad).is_integer() and 1 <= bad <= len(r)
            and sign * r[int(bad) - 1] > SAME_WORK and v["bad_size"] == sign * r[int(bad) - 1])


WORK = Chooser("storage.work", (
    Rule("storage.work.interrupted", (*WORK_FIELDS, "bad", "bad_size"), lambda v: _work_broken(v, 1),
         substantive=False),
    Rule("storage.work.interrupted_early_faster", (*WORK_FIELDS, "bad", "bad_size"),
         lambda v: _work_broken(v, -1), substantive=False),
    Rule("storage.work.steady", WORK_FIELDS, _work_steady),
    Rule("storage.work.untimed", ("t_from", "t_to"), substantive=False),
))


def _unclear(v) -> bool:
    """The printed ``paired`` is the median of the printed rounds (within a per cent: both are rounded), and the
    rounds neither all differ by PACE_APART % the same way nor all lie within PACE_SAME %."""
    r = _rounds(v)
    return (abs(v["paired"] - median(list(r))) <= 1 + 1e-9 and not (min(r) >= PACE_APART or max(r) <= -PACE_APART)
            and not all(abs(x) <= PACE_SAME for x in r))


def _interrupted(v) -> bool:
    """Can't tell, and the named round has the side that does strictly more work faster by PACE_APART % or more."""
    return _unclear(v) and _names_round(v, "rounds") and v["bad_pct"] <= -PACE_APART


# slower, faster, same and unclear split on the printed rounds alone, so every sound set of rounds has its sentence
def _same(v) -> bool:
    return all(abs(r) <= PACE_SAME for r in _rounds(v))


def _slower(v) -> bool:
    return min(_rounds(v)) >= PACE_APART and _size_agrees(v, 1)


def _faster(v) -> bool:
    return max(_rounds(v)) <= -PACE_APART and _size_agrees(v, -1)


def _checked(v) -> bool:
    return v[WORST] <= SAME_WORK


PACE = Chooser("storage.pace", (
    Rule("storage.pace.noisy", ("t_from", "t_to", WORST), lambda v: v[WORST] > SAME_WORK, substantive=False),
    Rule("storage.pace.slower_checked", (*PACE_FIELDS, *SIZE_FIELDS, WORST), lambda v: _checked(v) and _slower(v)),
    Rule("storage.pace.faster_checked", (*PACE_FIELDS, *SIZE_FIELDS, WORST), lambda v: _checked(v) and _faster(v)),
    Rule("storage.pace.same_checked", (*PACE_FIELDS, WORST), lambda v: _checked(v) and _same(v)),
    Rule("storage.pace.slower", (*PACE_FIELDS, *SIZE_FIELDS), _slower),
    Rule("storage.pace.faster", (*PACE_FIELDS, *SIZE_FIELDS), _faster),
    Rule("storage.pace.same", PACE_FIELDS, _same),
    Rule("storage.pace.interrupted", (*UNCLEAR_FIELDS, *BAD_FIELDS), _interrupted, substantive=False),
    Rule("storage.pace.unclear", UNCLEAR_FIELDS, _unclear, substantive=False),
    Rule("storage.pace.untimed", ("t_from", "t_to"), substantive=False),
))
CHOOSERS = (WORK, PACE)

_WINDOW = "{when}（缓存里 {t_from}–{t_to} 个 token）"
_EARLY = "前四分之一的解码步（缓存里 {t_from}–{t_to} 个 token）"
_PACE_BODY = ("每次前向的耗时（{n} 轮各取中位数，再取中位数）：{other} {other_ms}，{base} {base_ms}。"
              "每一轮「{other}」比「{base}」多用的时间：{rounds}（负数表示更快）")
_PACE_HEAD = _WINDOW + _PACE_BODY
_CHECKED_HEAD = (_WINDOW + f"（上面核对过：同样的工作每一轮前后最多差 {{{WORST}}}，在 {SAME_WORK}% 以内）" + _PACE_BODY)
_PACE_RERUN = ("在这台机器上，这一次分不出快慢。点上面面板的「运行测量」再测一次（先关掉别的占 CPU 的程序），测完再运行这一格；"
               "也可以在下拉框里选更长的 256 个 token，但要注意：那时连前四分之一的解码步也可能越过读数第二行说的 L3 界线"
               "（耗时图里的竖直虚线），两段比的就不再是「装得进」和「装不进」。")
_SLOWER = (f"，每一轮都慢 {PACE_APART}% 以上：按各轮自己的差，「{{other}}」慢了 {{size}}"
           "（各轮的中位数；最少慢 {size_lo}，最多慢 {size_hi}）。")
_FASTER = (f"，每一轮都快 {PACE_APART}% 以上：按各轮自己的差，「{{other}}」快了 {{size}}"
           "（各轮的中位数；最少快 {size_lo}，最多快 {size_hi}）。")
_SAME = f"，每一轮都在 ±{PACE_SAME}% 以内：两者几乎一样快。"
_UNCLEAR = (_WINDOW + "，{n} 轮里每一轮「{other}」比「{base}」多用的时间：{rounds}（负数表示更快），"
            f"各轮的中位数是 {{paired}}；但不是每一轮都朝同一个方向差出 {PACE_APART}% 以上，也不是每一轮都在 "
            f"±{PACE_SAME}% 以内")
_WORK_HEAD = ("先核对计时：{work} 每一步做的事一样多（注意力每步都算全部位置），它每一轮在" + _EARLY +
              "和后半程每次前向的耗时分别是 {work_early} 和 {work_late}，每一轮前后相差 {work_rounds}（负数表示前面更快）")
_WORK_BROKEN = (f"，超过了 {SAME_WORK}%，同样的工作不该差这么多，至少这一轮被打断了。"
                "前四分之一那一段的计时太吵，下面不拿它比较缓存。")
TEMPLATES = {  # what Catalog.of_topics reads for Chinese
    "storage.work.interrupted": _WORK_HEAD + "：第 {bad} 轮差了 {bad_size}（前面更慢）" + _WORK_BROKEN,
    "storage.work.interrupted_early_faster": _WORK_HEAD + "：第 {bad} 轮差了 {bad_size}（前面更快）" + _WORK_BROKEN,
    "storage.work.steady": _WORK_HEAD + f"，每一轮都在 {SAME_WORK}% 以内：前四分之一那一段的计时可以拿来比较。",
    "storage.work.untimed": "先核对计时：" + _EARLY + "或后半程没有测到可以核对的耗时（有一方是 0），下面不拿前四分之一那一段比较缓存。",
    "storage.pace.noisy": (_WINDOW + f"：上面的核对没通过（同样的工作有一轮前后差了 {{{WORST}}}），不拿这一段比较「{{other}}」和"
                           "「{base}」：这一段里两种缓存之间的差别，可能只是计时的噪声。" + _PACE_RERUN),
    "storage.pace.slower_checked": _CHECKED_HEAD + _SLOWER,
    "storage.pace.faster_checked": _CHECKED_HEAD + _FASTER,
    "storage.pace.same_checked": _CHECKED_HEAD + _SAME,
    "storage.pace.slower": _PACE_HEAD + _SLOWER,
    "storage.pace.faster": _PACE_HEAD + _FASTER,
    "storage.pace.same": _PACE_HEAD + _SAME,
    "storage.pace.interrupted": (_UNCLEAR + "。第 {bad} 轮 {bad_pct}：「{other}」做的事只多不少，不会真的更快，这一轮是被打断的。"
                                 + _PACE_RERUN),
    "storage.pace.unclear": _UNCLEAR + "：" + _PACE_RERUN,
    "storage.pace.untimed": _WINDOW + "：这一次没有测到可以比较的耗时（有一方是 0）。" + _PACE_RERUN,
}
WORDS = {"kv": CHAPTER_LABELS.text("kv", "zh"), "dynamic": CHAPTER_LABELS.text("dynamic", "zh"),
         "transformers:dynamic": "DynamicCache", "transformers:static": "StaticCache", "early": "前四分之一的解码步",
         "late": "后半程"}

# -- the same claims in English (Catalog.of_topics reads TEMPLATES_EN and WORDS_EN): the same keys, the same fields --
# A claim's terms are recorded as mode names and "early"/"late"; WORDS_EN writes them in English ({when} opens a
# sentence, so it is capitalised).
WORDS_EN = {"kv": CHAPTER_LABELS.text("kv", "en"), "dynamic": CHAPTER_LABELS.text("dynamic", "en"),
            "transformers:dynamic": "DynamicCache", "transformers:static": "StaticCache",
            "early": "The first quarter of the decode steps", "late": "The second half of the run"}
_WINDOW_EN = "{when} ({t_from}–{t_to} tokens in the cache)"
_EARLY_EN = "the first quarter of the decode steps ({t_from}–{t_to} tokens in the cache)"
_PACE_BODY_EN = (", time per forward pass (the median of each of {n} rounds, then the median of those): {other} "
                 "{other_ms}, {base} {base_ms}. How much longer \"{other}\" took than \"{base}\" in each round: {rounds} "
                 "(a negative figure means faster)")
_PACE_HEAD_EN = _WINDOW_EN + _PACE_BODY_EN
_CHECKED_HEAD_EN = (_WINDOW_EN + f" (checked above: in every round the same work differed by at most {{{WORST}}} "
                    f"between early and late, within {SAME_WORK}%)" + _PACE_BODY_EN)
_PACE_RERUN_EN = ("On this machine, this run cannot tell which is faster. Click \"Run the measurement\" on the panel "
                  "above to rerun it (close other CPU-hungry programs first), then run this cell again. You can also "
                  "pick the longer 256 tokens in the dropdown, but note: then even the first quarter of the decode "
                  "steps may cross the L3 line the readout's second line names (the dashed vertical line in the time "
                  "plot), and the two windows no longer compare \"fits\" against \"does not fit\".")
_SLOWER_EN = (f", every round slower by {PACE_APART}% or more: by the rounds' own differences, \"{{other}}\" is "
              "{size} slower (the rounds' median; at least {size_lo} slower, at most {size_hi}).")
_FASTER_EN = (f", every round faster by {PACE_APART}% or more: by the rounds' own differences, \"{{other}}\" is "
              "{size} faster (the rounds' median; at least {size_lo} faster, at most {size_hi}).")
_SAME_EN = f", every round within ±{PACE_SAME}%: the two are about equally fast."
_UNCLEAR_EN = (_WINDOW_EN + ", how much longer \"{other}\" took than \"{base}\" in each of {n} rounds: {rounds} (a "
               "negative figure means faster), the rounds' median {paired}; but the rounds neither all differ by "
               f"{PACE_APART}% or more the same way nor all lie within ±{PACE_SAME}%")
_WORK_HEAD_EN = ("First, a check of the timing: {work} does the same work at every step (its attention covers every "
                 "position at every step); in each round its time per forward pass in " + _EARLY_EN + " and in the "
                 "second half was {work_early} and {work_late}, a difference of {work_rounds} per round (a negative "
                 "figure means faster early)")
_WORK_BROKEN_EN = (f", more than {SAME_WORK}%: the same work should not differ that much, so at least this round was "
                   "interrupted. The timing of the first quarter is too noisy: the caches are not compared on it "
                   "below.")
TEMPLATES_EN = {
    "storage.work.interrupted": _WORK_HEAD_EN + ": round {bad} differs by {bad_size} (slower early)" + _WORK_BROKEN_EN,
    "storage.work.interrupted_early_faster": (_WORK_HEAD_EN + ": round {bad} differs by {bad_size} (faster early)"
                                              + _WORK_BROKEN_EN),
    "storage.work.steady": (_WORK_HEAD_EN + f", every round within {SAME_WORK}%: the timing of the first quarter can "
                            "be used for comparisons."),
    "storage.work.untimed": ("First, a check of the timing: no time to check was measured in " + _EARLY_EN + " or in "
                             "the second half (one side is 0), so the caches are not compared on the first quarter "
                             "below."),
    "storage.pace.noisy": (_WINDOW_EN + f": the check above failed (in one round the same work differed by "
                           f"{{{WORST}}} between early and late), so \"{{other}}\" and \"{{base}}\" are not compared on "
                           "this window: any difference between the two caches here may be only timing noise. "
                           + _PACE_RERUN_EN),
    "storage.pace.slower_checked": _CHECKED_HEAD_EN + _SLOWER_EN,
    "storage.pace.faster_checked": _CHECKED_HEAD_EN + _FASTER_EN,
    "storage.pace.same_checked": _CHECKED_HEAD_EN + _SAME_EN,
    "storage.pace.slower": _PACE_HEAD_EN + _SLOWER_EN,
    "storage.pace.faster": _PACE_HEAD_EN + _FASTER_EN,
    "storage.pace.same": _PACE_HEAD_EN + _SAME_EN,
    "storage.pace.interrupted": (_UNCLEAR_EN + ". Round {bad} at {bad_pct}: \"{other}\" does no less work, so it "
                                 "cannot really be faster; this round was interrupted. " + _PACE_RERUN_EN),
    "storage.pace.unclear": _UNCLEAR_EN + ". " + _PACE_RERUN_EN,
    "storage.pace.untimed": _WINDOW_EN + ": this run measured no times to compare (one side is 0). " + _PACE_RERUN_EN,
}
_TOPIC = (sys.modules[__name__],)  # this module is the lesson's one claims topic
ZH = Catalog.of_topics("zh", _TOPIC)
EN = Catalog.of_topics("en", _TOPIC)
CATALOGS = {"zh": ZH, "en": EN}




def _pct_rounds(a: list[float], b: list[float]) -> list[float]:
    """Each round's ``a / b - 1`` in per cent."""
    return [100 * (ratio(x, y) - 1) for x, y in zip(a, b)]


def _printed(xs: list[float], digits: int, unit: str, kind: str = ABSOLUTE) -> Number:
    """One number per round: a series, or one number for a single round."""
    return series(xs, digits, unit, kind) if len(xs) > 1 else number(xs[0], digits, unit, kind)


def _worst(rounds: list[float]) -> int:
    """The round (from 1) furthest from 0."""
    return max(range(len(rounds)), key=lambda i: abs(rounds[i]) if math.isfinite(rounds[i]) else math.inf) + 1


def work_claim(work: SameWork, window: tuple[int, int]) -> Claim:
    """:data:`WORK`'s claim: ``work`` (one early and one late time per round, ms) took the same time early
    (``window``) and late in every round, or the round furthest apart is named."""
    _check_work(work)
    rounds = _pct_rounds(work.early_ms, work.late_ms)
    bad = _worst(rounds)
    numbers = {"t_from": number(window[0], 0), "t_to": number(window[1], 0),
               "work_early": _printed(work.early_ms, 2, "ms"), "work_late": _printed(work.late_ms, 2, "ms"),
               "work_rounds": _printed(rounds, 0, "%", DIFFERENCE),
               "bad": number(bad, 0), "bad_pct": number(rounds[bad - 1], 0, "%", DIFFERENCE),
               "bad_size": number(abs(rounds[bad - 1]), 0, "%")}
    return WORK.choose(numbers, {"work": work.name})


def _check_work(work: SameWork) -> None:
    if not work.early_ms or len(work.early_ms) != len(work.late_ms):
        raise ValueError(f"work: one early and one late time per round, got {len(work.early_ms)} and {len(work.late_ms)}")


def _worst_number(work: SameWork | None) -> Number:
    """The same-work check's largest round (per cent, either way); NaN without a check or a time (so the rules that
    show it never hold)."""
    if work is None:
        return number(math.nan)
    _check_work(work)
    rounds = [abs(x) for x in _pct_rounds(work.early_ms, work.late_ms)]
    return number(max(rounds) if all(math.isfinite(x) for x in rounds) else math.nan, 0, "%")


def pace_claim(base: str, base_ms: list[float], other: str, other_ms: list[float], when: str,
               window: tuple[int, int], work: SameWork | None = None, more_work: bool = False) -> Claim:
    """:data:`PACE`'s claim on two ways timed in the same rounds (one value per round each, in ms): ``other``
    against ``base`` (mode names, as :data:`ZH` writes them) over ``window`` (first and last cached length); with
    ``work``, only after its same-work check (:func:`work_claim`, printed before: every round within
    :data:`SAME_WORK` %). ``more_work``: ``other`` does strictly more work than ``base``, so a round where it is
    faster by :data:`PACE_APART` % or more was interrupted and is named."""
    if not base_ms or len(base_ms) != len(other_ms):
        raise ValueError(f"base_ms, other_ms: one time per round each, got {len(base_ms)} and {len(other_ms)}")
    b, o = median(base_ms), median(other_ms)
    rounds = _pct_rounds(other_ms, base_ms)
    fastest = min(range(len(rounds)), key=lambda i: rounds[i] if math.isfinite(rounds[i]) else math.inf) + 1
    sign = 1 if median(rounds) >= 0 else -1  # the size of "slower" (+) or "faster" (-), from the rounds themselves
    sizes = [sign * x for x in rounds]
    numbers = {"t_from": number(window[0], 0), "t_to": number(window[1], 0), "n": number(len(rounds), 0),
               "other_ms": number(o, 2, "ms"), "base_ms": number(b, 2, "ms"),
               "rounds": _printed(rounds, 0, "%", DIFFERENCE),
               "size": number(abs(median(rounds)), 0, "%"), "size_lo": number(min(sizes), 0, "%", DIFFERENCE),
               "size_hi": number(max(sizes), 0, "%", DIFFERENCE), "paired": number(median(rounds), 0, "%", DIFFERENCE),
               WORST: _worst_number(work),
               "bad": number(fastest if more_work else math.nan, 0),
               "bad_pct": number(rounds[fastest - 1], 0, "%", DIFFERENCE)}
    terms = {"other": other, "base": base, "when": when}
    return PACE.choose(numbers, terms)


def show_claims(claims: list[Claim]) -> None:
    """Display this chapter's claims in the course's language (``kvlab.set_language``), recorded in the output's
    metadata (``kvlab.claims.show``)."""
    show(claims, in_language(CATALOGS))
