"""The cost of paging: a decode step on the paged cache against the contiguous ``KVCache``, at a few lengths and
batch sizes, with the gather (reading K/V block by block into one tensor) timed on its own."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..._validate import positive_int
from ...cache import KVCache
from ...claims import ABSOLUTE, DIFFERENCE, Chooser, Claim, Number, Rule, number, ratio, series
from ...measure import alternate, device_label, measurement_threads, timed, torch_threads
from ...stats import median
from ...model import ToyTransformer
from ...paged_cache import PagedKVCache
from ...paging import blocks_for
from .runs import BLOCK_SIZE, corpus_ids
from .texts import TEXTS

COST_BATCHES = (1, 8)
COST_LENGTHS = (32, 128, 224)
MAX_COST_BATCH = 16  # bounds: a cell holds at most 16 x 256 tokens, twice (about 4 MiB each for the demo model)
BAND = 0.15


@dataclass(frozen=True)
class StepCost:
    """One batch size and length: per round, the median decode step of each cache and of the gather alone; the
    comparison uses each cache's fastest round."""

    batch: int
    length: int  # tokens each sequence holds before the timed steps
    contiguous_ms: tuple[float, ...]
    paged_ms: tuple[float, ...]
    gather_ms: tuple[float, ...]  # reading every layer's K and V through the block table, nothing else
    gather_bytes: int  # what that gather copies per step

    # Each cache's step at its fastest round: a burst of load on a busy machine slows some rounds, rarely all.
    @property
    def best_contiguous_ms(self) -> float:
        return min(self.contiguous_ms)

    @property
    def best_paged_ms(self) -> float:
        return min(self.paged_ms)

    @property
    def ratios(self) -> list[float]:
        """Per round: paged over contiguous (to check that the rounds point the same way)."""
        return [p / c for p, c in zip(self.paged_ms, self.contiguous_ms)]

    @property
    def ratio(self) -> float:
        return self.best_paged_ms / self.best_contiguous_ms

    @property
    def extra_ms(self) -> float:
        return self.best_paged_ms - self.best_contiguous_ms


@dataclass(frozen=True)
class PagingCost:
    cells: list[StepCost]
    block_size: int
    device: str
    threads: int | None
    where: str  # measure.device_label: what every readout says about the device

    def cell(self, batch: int, length: int) -> StepCost:
        return next(c for c in self.cells if (c.batch, c.length) == (batch, length))


@torch.no_grad()
def _cell(model: ToyTransformer, ids: torch.Tensor, steps: int, rounds: int, block_size: int) -> StepCost:
    B, L = ids.shape
    c, dev = model.config, model.device
    kv = KVCache(c, B, L + steps, dtype=model.dtype, device=dev)
    paged = PagedKVCache(c, B, L + steps, dtype=model.dtype, device=dev, block_size=block_size)
    model(ids, kv)
    model(ids, paged)
    nxt = ids[:, -1:]  # [B, 1]

    def decode(cache, rewind):
        times = [timed(lambda: model(nxt, cache), dev)[1] for _ in range(steps)]
        rewind()
        return median(times) * 1e3

    def gather():
        paged.reserve(1)
        seconds = timed(lambda: [paged.read(layer, L + 1) for layer in range(c.n_layer)], dev)[1]
        paged.truncate(L)
        return seconds * 1e3

    def rewind_kv():
        kv.length = L

    runs = alternate({"kv": lambda: decode(kv, rewind_kv), "paged": lambda: decode(paged, lambda: paged.truncate(L)),
                      "gather": gather}, rounds)
    return StepCost(B, L, tuple(runs["kv"]), tuple(runs["paged"]), tuple(runs["gather"]),
                    gather_bytes(c, B, L, block_size, paged.element_bytes))


def paging_cost(model: ToyTransformer, tokenizer, batches=COST_BATCHES, lengths=COST_LENGTHS, rounds: int = 5,
                steps: int = 4, block_size: int = BLOCK_SIZE) -> PagingCost:
    """Decode steps at each (batch, length) on both caches after a real prefill of corpus text, alternating."""
    batches = [positive_int("batches", b, maximum=MAX_COST_BATCH) for b in batches]
    lengths = [positive_int("lengths", n, maximum=model.config.max_seq_len - steps) for n in lengths]
    rounds, steps = positive_int("rounds", rounds, maximum=7), positive_int("steps", steps, maximum=16)
    text = corpus_ids(tokenizer)
    threads = measurement_threads() if model.device.type == "cpu" else None
    cells = []
    with torch_threads(threads or torch.get_num_threads()):
        for B in batches:
            for L in lengths:
                rows = [text[b * 97: b * 97 + L] for b in range(B)]
                ids = torch.tensor(rows, dtype=torch.long, device=model.device)  # [B, L]
                cells.append(_cell(model, ids, steps, rounds, block_size))
    return PagingCost(cells, block_size, str(model.device), threads, device_label(model.device, threads))


def gather_bytes(config, batch: int, length: int, block_size: int, element_bytes: float) -> int:
    """Bytes one decode step of the paged cache gathers: K and V of every layer, for ``batch`` rows of whole blocks
    up to the token it writes (``length + 1``): the blocks are copied whole, their empty slots too."""
    width = blocks_for(length + 1, block_size) * block_size
    return int(2 * config.n_layer * batch * width * config.n_kv_head * config.head_dim * element_bytes)


# -- what the grid measured, as claims (kvlab.claims) -----------------------------------------------------------
# Cells in order of the bytes they gather. Every predicate reads the printed series: "the more bytes, the slower" only
# where, at the same B, the extra time rises at every longer length (the ratios of different B have different
# denominators, so they are never compared), "a fixed cost" only where it is about the same in every cell, and nothing
# substantive unless most cells' rounds agree (each cell's rounds are compared by cell_verdict, the count printed).
# Every claim that reads an extra time also prints the gather's share of the largest cell's extra time.
def cell_verdict(cell: StepCost) -> str:
    """From the fastest rounds' ratio: "slower" or "faster" beyond ±15 % when most rounds point the same way,
    "same" within ±15 %, else "unclear" (the rounds disagree)."""
    ratio, rounds = cell.ratio, cell.ratios
    if ratio >= 1 + BAND and sum(r > 1 for r in rounds) * 2 > len(rounds):
        return "slower"
    if ratio <= 1 / (1 + BAND) and sum(r < 1 for r in rounds) * 2 > len(rounds):
        return "faster"
    if abs(ratio - 1) < BAND:
        return "same"
    return "unclear"


def _all(x) -> tuple[float, ...]:
    return x if isinstance(x, tuple) else (x,)


def _agree(v) -> bool:
    """Most cells' rounds point the same way (the printed count of cells with a clear verdict)."""
    return 2 * v["agree"] > v["cells"]


def _rises(xs) -> bool:
    """Up at every cell, not only from the first to the last."""
    return all(b > a for a, b in zip(xs, xs[1:]))


def _by_batch(v, name: str) -> list[tuple[float, ...]]:
    """The printed series ``name`` split by the printed batch sizes, each B's cells in printed order."""
    groups: dict[float, list[float]] = {}
    for b, x in zip(_all(v["batches"]), _all(v[name]), strict=True):
        groups.setdefault(b, []).append(x)
    return [tuple(xs) for xs in groups.values()]


def _rises_per_batch(v) -> bool:
    """At every B measured at two lengths or more, the extra time rises at every longer length (and so do the bytes)."""
    extra, mib = _by_batch(v, "extra"), _by_batch(v, "mib")
    return any(len(xs) > 1 for xs in extra) and all(map(_rises, extra)) and all(map(_rises, mib))


def _level(xs, spread: float = 0.3) -> bool:
    """All positive and about the same: the largest within ``spread`` of the smallest."""
    return min(xs) > 0 and max(xs) <= (1 + spread) * min(xs)


def _share_of(v) -> bool:
    """The printed share is the printed gather over the largest cell's printed extra time (rounded to a whole %)."""
    g, e = v["gather"], _all(v["extra"])[-1]
    return abs(v["share"] - 100 * g / e) <= 0.5 + 1e-9


def _grows(v) -> bool:
    extra, ratios = _all(v["extra"]), _all(v["ratios"])
    return _agree(v) and min(extra) > 0 and _rises_per_batch(v) and ratios[-1] >= 1 + BAND and _share_of(v)


def _flat_extra(v) -> bool:
    """The extra time about the same in every cell, and not rising with the length at every B (that is a growth)."""
    return _level(_all(v["extra"])) and not _rises_per_batch(v)


def _odd_cells(v) -> list[tuple[float, float]]:
    """The printed cells whose rounds disagree (``odd_batches``, ``odd_lengths``; none where the claim shows none)."""
    if "odd_batches" not in v:
        return []
    return list(zip(_all(v["odd_batches"]), _all(v["odd_lengths"]), strict=True))


def _odd_named(v) -> bool:
    """Exactly the cells that the printed count leaves out are named: none when every cell agrees, else one printed
    cell (a run where two or more cells' rounds disagree gets no count of slower cells)."""
    odd, grid = _odd_cells(v), list(zip(_all(v["batches"]), _all(v["lengths"])))
    return v["agree"] == v["cells"] - len(odd) and len(odd) <= 1 and all(c in grid for c in odd)


def _clear_ratios(v) -> list[float]:
    """The printed ratios of the cells whose rounds agree (the named odd cell left out)."""
    odd = _odd_cells(v)
    return [r for b, n, r in zip(_all(v["batches"]), _all(v["lengths"]), _all(v["ratios"])) if (b, n) not in odd]


def _slower_count(v) -> bool:
    """The printed count of slower cells: the cells whose rounds agree and whose ratio is 15 % or more."""
    return _odd_named(v) and v["slower"] == sum(r >= 1 + BAND for r in _clear_ratios(v))


def _big_slower(v) -> bool:
    """The largest cell (whose gather is timed) is itself slower beyond the band: only then is a share of its extra
    time worth printing (a few hundredths of a ms of extra time would make any gather a share of thousands of %)."""
    return _all(v["ratios"])[-1] >= 1 + BAND


def _slower(v) -> bool:
    """Most cells slower beyond the band, none clearly faster, and no rise with the length at every B."""
    return (_agree(v) and _slower_count(v) and 2 * v["slower"] > v["cells"] and min(_all(v["ratios"])) * (1 + BAND) > 1
            and not _rises_per_batch(v))


def _rows(v) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]] | None:
    """The smallest and the largest printed B's extra times, and the smallest B's bytes, when both B were measured
    at two lengths or more; else None."""
    batches = _all(v["batches"])
    small, big = min(batches), max(batches)

    def row(b, name):
        return tuple(x for x_b, x in zip(batches, _all(v[name]), strict=True) if x_b == b)

    if small == big or len(row(small, "extra")) < 2 or len(row(big, "extra")) < 2:
        return None
    return row(small, "extra"), row(big, "extra"), row(small, "mib")


def _small_gather(v) -> bool:
    """The printed estimate: the smallest B's largest gather at the speed of the timed one (the largest cell's printed
    bytes in its printed time), within the rounding of the printed estimate."""
    rows, mib = _rows(v), _all(v["mib"])
    if rows is None:
        return False
    return abs(v["small_gather"] - max(rows[2]) * v["gather"] / mib[-1]) <= 0.005 + 1e-9


def _fixed_then_grows_shape(v) -> bool:
    """Slower in every cell; at the smallest B the extra time level (within 30 %), at the largest B it rises at every
    longer length and by more than that band; the smallest B's gathers, at the timed gather's speed, under half of
    that B's least extra time: there the extra is mostly a fixed cost per step."""
    rows = _rows(v)
    if rows is None:
        return False
    small, big, _ = rows
    return (_agree(v) and _odd_named(v) and min(_all(v["ratios"])) >= 1 + BAND and _level(small) and _rises(big)
            and max(big) > 1.3 * min(big) and v["small_b"] == min(_all(v["batches"]))
            and v["big_b"] == max(_all(v["batches"])) and _small_gather(v) and 2 * v["small_gather"] < min(small))


def _adds_up(v) -> bool:
    """The smallest B's largest printed extra (its fixed cost per step) plus the timed gather within 15 % of the
    largest cell's printed extra: the two measurements add up, so the gather's share of that cell can be quoted
    (review r8: 0.13 + 0.24 ms beside 0.28 ms did not)."""
    rows = _rows(v)
    return rows is not None and max(rows[0]) + v["gather"] <= (1 + BAND) * _all(v["extra"])[-1]


def _fixed_then_grows(v) -> bool:
    return _fixed_then_grows_shape(v) and _adds_up(v) and _share_of(v)


def _fixed_then_grows_apart(v) -> bool:
    """The shape, the two measurements not adding up, and the gather at least half the largest cell's printed extra:
    only "the gather is the larger part" is said, no share."""
    rows = _rows(v)
    return (_fixed_then_grows_shape(v) and rows is not None and not _adds_up(v)
            and 2 * v["gather"] >= _all(v["extra"])[-1] > 0)


def _ends(v) -> bool:
    """The printed first and last cells' bytes and extra times are those of the printed series."""
    mib, extra = _all(v["mib"]), _all(v["extra"])
    return all(abs(a - b) < 1e-9 for a, b in [(v["small_mib"], mib[0]), (v["small_extra"], extra[0]),
                                               (v["big_mib"], mib[-1]), (v["big_extra"], extra[-1])])


def _not_rising(v) -> bool:
    """Slower (as :func:`_slower`), every extra time positive, and the extra time does not grow with the bytes: at
    every B its longest cell's extra time within 30 % of its shortest's, and so the largest cell's of the smallest's."""
    extra = _all(v["extra"])
    return (_slower(v) and _big_slower(v) and _share_of(v) and _ends(v) and min(extra) > 0
            and all(xs[-1] <= 1.3 * xs[0] for xs in _by_batch(v, "extra")) and extra[-1] <= 1.3 * extra[0])


def _has_peak(v) -> bool:
    """Some printed cell's extra time over 30 % above both the first and the last cells'."""
    extra = _all(v["extra"])
    return max(extra) > 1.3 * max(extra[0], extra[-1])


def _peak(v) -> bool:
    """A peak (:func:`_has_peak`), and the printed peak is the printed cell with the most extra time."""
    cells = list(zip(_all(v["batches"]), _all(v["lengths"]), _all(v["extra"])))
    return (_has_peak(v) and (v["peak_b"], v["peak_length"], v["peak_extra"]) in cells
            and v["peak_extra"] == max(_all(v["extra"])))


ENDS = ("small_mib", "small_extra", "big_mib", "big_extra")  # the fewest and the most bytes gathered, their extra time
PEAK = ("peak_b", "peak_length", "peak_extra")  # the cell with the most extra time
ODD = ("odd_batches", "odd_lengths")  # the one cell whose rounds disagree (NaN, so not shown, when there is none)


def _with_odd(rule: Rule) -> tuple[Rule, Rule]:
    """``rule`` when every cell's rounds agree, then ``rule + "_odd"``, which also names the one cell that disagrees."""
    return rule, Rule(rule.key + "_odd", (*rule.shows, *ODD), rule.holds)


SHARE = ("gather", "share")  # the largest cell's gather and its share of that cell's extra time
GROWS = ("batches", "lengths", "mib", "extra", "ratios", "agree", "cells", *SHARE)
COST = Chooser("paged.cost", (
    Rule("paged.cost.grows_gather", GROWS, lambda v: _grows(v) and v["share"] >= 50),
    Rule("paged.cost.grows_elsewhere", GROWS, lambda v: _grows(v) and v["share"] < 50),
    Rule("paged.cost.fixed_flat", ("contiguous", "batches", "mib", "extra", "ratios", "agree", "cells", *SHARE),
         lambda v: _agree(v) and _level(_all(v["contiguous"]), BAND) and _flat_extra(v)
         and min(_all(v["ratios"])) >= 1 + BAND and _share_of(v)),
    Rule("paged.cost.fixed", GROWS,
         lambda v: _agree(v) and _flat_extra(v) and _big_slower(v) and _share_of(v)),
    Rule("paged.cost.same", ("ratios",), lambda v: all(abs(r - 1) < BAND for r in _all(v["ratios"]))),
    *_with_odd(Rule("paged.cost.fixed_then_grows", ("small_b", "big_b", "small_gather", *GROWS), _fixed_then_grows)),
    *_with_odd(Rule("paged.cost.fixed_then_grows_apart", ("small_b", "big_b", "small_gather", *GROWS[:-1]),
                    _fixed_then_grows_apart)),
    *_with_odd(Rule("paged.cost.not_rising", ("slower", *ENDS, *GROWS), lambda v: _not_rising(v) and not _has_peak(v))),
    *_with_odd(Rule("paged.cost.not_rising_peak", ("slower", *ENDS, *PEAK, *GROWS), lambda v: _not_rising(v) and _peak(v))),
    *_with_odd(Rule("paged.cost.slower", ("slower", *GROWS), lambda v: _slower(v) and _big_slower(v) and _share_of(v))),
    *_with_odd(Rule("paged.cost.slower_big_level", ("slower", *GROWS[:-2]), lambda v: _slower(v) and not _big_slower(v))),
    Rule("paged.cost.contradicts", ("ratios",), lambda v: max(_all(v["ratios"])) >= 1 + BAND
         and min(_all(v["ratios"])) * (1 + BAND) <= 1, substantive=False),
    Rule("paged.cost.noisy", ("ratios", "agree", "cells"), lambda v: v["agree"] < v["cells"], substantive=False),
    # every cell's rounds agree, yet no pattern: some cells slower beyond the band, the others within it
    Rule("paged.cost.mixed", ("ratios", "cells"), substantive=False),
    Rule("paged.cost.unmeasured", substantive=False),
))

def _gather_share(v) -> bool:
    """The printed share is the printed gather over the printed extra time of its cell (rounded to a whole %)."""
    return v["big_extra"] > 0 and abs(v["gather_share"] - 100 * v["gather"] / v["big_extra"]) <= 0.5 + 1e-9


def _over_extra(v) -> bool:
    """The gather alone took over 15 % longer than the whole paged step's (positive) extra time in that cell."""
    return v["gather"] > (1 + BAND) * v["big_extra"] > 0


GATHER = Chooser("paged.gather", (
    # ... and so in every round of that cell (each round's gather against that round's own extra time): no timing
    # noise, a gather timed on its own costs more than it adds to a step (review of the English 3.6)
    Rule("paged.gather.over_extra_steady", ("batch", "length", "big_mib", "gather", "big_extra", "over_rounds", "rounds"),
         lambda v: _over_extra(v) and v["rounds"] >= 2 and v["over_rounds"] == v["rounds"]),
    # ... but not in every round: the timing's noise is larger than the difference
    Rule("paged.gather.over_extra", ("batch", "length", "big_mib", "gather", "big_extra"), _over_extra),
    # longer, but within 15 %: about the same (the difference within the timing's precision)
    Rule("paged.gather.about_extra", ("batch", "length", "big_mib", "gather", "big_extra", "gather_share"),
         lambda v: v["big_extra"] < v["gather"] <= (1 + BAND) * v["big_extra"] and _gather_share(v)),
    Rule("paged.gather.measured", ("batch", "length", "big_mib", "gather")),
    Rule("paged.gather.unmeasured", ("batch", "length", "big_mib"), substantive=False),
))

CHOOSERS = (GATHER, COST)


def _series(xs, digits: int, unit: str = "", kind: str = ABSOLUTE) -> Number:
    """One number per cell: a series, or a single number for a grid of one cell."""
    return series(xs, digits, unit, kind) if len(xs) > 1 else number(xs[0], digits, unit, kind)


def _ms(x: float) -> Number:
    return number(x, 2, "ms")


def _mib(b: int) -> float:
    return b / 2**20


def explain_cost(cost: PagingCost) -> list[Claim]:
    """What the grid measured, as claims (:data:`CHOOSERS`; ``show_claims`` prints them): the gather of the largest
    cell, then how the paged step compared with the contiguous one, cell by cell in order of the bytes gathered."""
    cells = sorted(cost.cells, key=lambda c: c.gather_bytes)
    big = cells[-1]
    gather = min(big.gather_ms)
    ratios = _series([c.ratio for c in cells], 2)
    numbers = {"batches": _series([c.batch for c in cells], 0), "lengths": _series([c.length for c in cells], 0),
               "mib": _series([_mib(c.gather_bytes) for c in cells], 2, "MiB"),
               "extra": _series([c.extra_ms for c in cells], 2, "ms", DIFFERENCE), "ratios": ratios,
               "contiguous": _series([c.best_contiguous_ms for c in cells], 2, "ms"),
               "agree": number(sum(cell_verdict(c) != "unclear" for c in cells), 0), "cells": number(len(cells), 0),
               # counted as printed, over the cells whose rounds agree
               "slower": number(sum(r >= 1 + BAND for c, r in zip(cells, _all(ratios.value)) if cell_verdict(c) != "unclear"), 0),
               "gather": _ms(gather), **_odd_numbers(cells)}
    printed = {name: _all(numbers[name].value) for name in ("gather", "extra", "mib", "batches")}  # as printed
    numbers["share"] = number(100 * ratio(printed["gather"][0], printed["extra"][-1]), 0, "%")
    numbers.update(_small_numbers(printed))
    numbers.update(_end_numbers(cells))
    return [GATHER.choose({"batch": number(big.batch, 0), "length": number(big.length, 0),
                           "big_mib": number(_mib(big.gather_bytes), 2, "MiB"), "gather": _ms(gather),
                           "big_extra": numbers["big_extra"], "gather_share": numbers["share"],
                           "over_rounds": number(gather_over_rounds(big), 0), "rounds": number(len(big.gather_ms), 0)}),
            COST.choose(numbers, {"order": cell_order(cost)})]


def gather_over_rounds(cell: StepCost) -> int:
    """The rounds of ``cell`` whose gather, timed on its own, took longer than that round's paged step took over its
    contiguous one."""
    return sum(g > p - c for g, p, c in zip(cell.gather_ms, cell.paged_ms, cell.contiguous_ms))


def _end_numbers(cells: list[StepCost]) -> dict[str, Number]:
    """The fewest and the most bytes gathered and those cells' extra times; the cell with the most extra time."""
    first, last = cells[0], cells[-1]
    peak = max(cells, key=lambda c: c.extra_ms)
    return {"small_mib": number(_mib(first.gather_bytes), 2, "MiB"), "small_extra": number(first.extra_ms, 2, "ms", DIFFERENCE),
            "big_mib": number(_mib(last.gather_bytes), 2, "MiB"), "big_extra": number(last.extra_ms, 2, "ms", DIFFERENCE),
            "peak_b": number(peak.batch, 0), "peak_length": number(peak.length, 0),
            "peak_extra": number(peak.extra_ms, 2, "ms", DIFFERENCE)}


def _odd_numbers(cells: list[StepCost]) -> dict[str, Number]:
    """The B and length of the cells whose rounds disagree (NaN when none: the ``_odd`` keys are not said)."""
    odd = [c for c in cells if cell_verdict(c) == "unclear"] or [None]
    return {"odd_batches": _series([c.batch if c else float("nan") for c in odd], 0),
            "odd_lengths": _series([c.length if c else float("nan") for c in odd], 0)}


def _small_numbers(printed: dict[str, tuple[float, ...]]) -> dict[str, Number]:
    """The smallest and largest B, and the smallest B's largest gather at the timed gather's speed (the largest cell's
    bytes in its time), all from the printed numbers."""
    small = min(printed["batches"])
    most = max(m for b, m in zip(printed["batches"], printed["mib"]) if b == small)
    return {"small_b": number(small, 0), "big_b": number(max(printed["batches"]), 0),
            "small_gather": _ms(most * ratio(printed["gather"][0], printed["mib"][-1]))}


def cell_order(cost: PagingCost) -> str:
    """The cells as the claims list them, in order of the bytes they gather: "(1, 32)、(1, 128)、..." (in English
    "(1, 32), (1, 128), ...")."""
    return TEXTS.say("cell_separator").join(f"({c.batch}, {c.length})" for c in sorted(cost.cells, key=lambda c: c.gather_bytes))


_RERUN = ("重跑这一格（可以把第一行改成 lesson.paging_cost(model, tok, rounds=7)，多测几轮）；机器忙时先关掉别的占 CPU 的"
          "程序。")
_BAND = f"{BAND:.0%}"
_CELLS = ("各格子按要收集的字节从少到多排：B 依次是 {batches}，每条的长度依次是 {lengths} 个 token，各收集 {mib}；"
          "分页的一步比连续缓存多花 {extra}，比值 {ratios}（{agree}/{cells} 个格子的几轮结论一致）")
_SHARE = "收集最多的那一格，单独测的收集要 {gather}，是那一格多出的时间的 {share}"
_NOT_RISING_HEAD = (f"。在几轮结论一致的 {{agree}} 个格子里，分页的一步有 {{slower}} 个比连续缓存慢 {_BAND} 以上，没有一格明显"
                    "更快。" + _SHARE + "。多出的时间没有随字节增长（{small_mib} 时 {small_extra}，{big_mib} 时 "
                    "{big_extra}；同一个 B 里，最长那一格多出的时间也没有比最短那一格多 30% 以上）：更像是每一步固定的开销，"
                    "而不是拷贝的字节")
ZH_TEMPLATES = {
    "paged.gather.measured": "分页的一步要先按块表把每一层的 K、V 收集（gather）成连续的张量：B = {batch}、每条 {length} 个 "
                             "token 时每步拷贝 {big_mib}，单独测这一步收集，最快要 {gather}。",
    "paged.gather.over_extra": "分页的一步要先按块表把每一层的 K、V 收集（gather）成连续的张量：B = {batch}、每条 {length} 个 "
                               "token 时每步拷贝 {big_mib}，单独测这一步收集，最快要 {gather}，比那一格分页的一步整个多出的 "
                               "{big_extra} 还长（收集只是分页那一步的一部分）：这一次计时的噪声比这点差别还大，下面比的"
                               "多出的时间要带着这一点读。",
    "paged.gather.over_extra_steady": "分页的一步要先按块表把每一层的 K、V 收集（gather）成连续的张量：B = {batch}、每条 "
                                      "{length} 个 token 时每步拷贝 {big_mib}，单独测这一步收集，最快要 {gather}，比那一格"
                                      "分页的一步整个多出的 {big_extra} 还长，而且每一轮都是这样（{over_rounds}/{rounds} 轮）："
                                      "这不是计时的噪声，而是单独测的收集比它在一步里多花的时间更多。多出的时间是两整步之差，"
                                      "连续缓存的那一步做注意力时也要把每个 K、V 从内存读一遍；分页的一步里，注意力读的是收集"
                                      "刚拷出来的副本，所以收集的开销很可能有一部分顶替了连续缓存那一步本来也要做的读取。这里"
                                      "单独测的收集时间，只是它在一步里多花的时间的上限。",
    "paged.gather.about_extra": "分页的一步要先按块表把每一层的 K、V 收集（gather）成连续的张量：B = {batch}、每条 {length} 个 "
                                "token 时每步拷贝 {big_mib}，单独测这一步收集，最快要 {gather}，与那一格分页的一步整个多出的 "
                                "{big_extra} 相当（{gather_share}）：单独测的收集不可能比整个多出的还多，差的这一点在计时精度"
                                "之内。",
    "paged.gather.unmeasured": "分页的一步要先按块表把每一层的 K、V 收集（gather）成连续的张量：B = {batch}、每条 {length} 个 "
                               "token 时每步拷贝 {big_mib}；这一次收集的耗时没有测出有效的数；" + _RERUN,
    "paged.cost.grows_gather": _CELLS + "：分页的一步更慢，而且 B 相同时，每条越长、要收集的字节越多，多出的时间就越多"
                               "（同一个 B 里每一格都比前一格多）。" + _SHARE + "：多出的时间大部分就花在收集上。",
    "paged.cost.grows_elsewhere": _CELLS + "：分页的一步更慢，而且 B 相同时，每条越长、要收集的字节越多，多出的时间就越多"
                                  "（同一个 B 里每一格都比前一格多）。" + _SHARE + "：收集只是一小部分，多出的时间大部分"
                                  "来自收集之外、这里没有分开测的部分：每一步在 Python 里准备块表索引、注意力读收集出来的 "
                                  "K/V（收集后只是转置成按头排列的视图，同一个头的数据在内存里是隔开的，不像连续缓存那样挨在"
                                  "一起）。",
    "paged.cost.fixed_flat": "连续缓存的一步几乎不随 B 和长度变（各格子 {contiguous}；B 依次是 {batches}，各收集 {mib}）：这个小模型的一步"
                             "主要花在固定开销上（GPU 上是逐个启动内核，CPU 上是逐个调用算子）。分页的一步每一格都慢了 "
                             f"{_BAND} 以上（比值 {{ratios}}），多出的时间差不多（{{extra}}；{{agree}}/{{cells}} 个格子的几轮"
                             "结论一致）：是每层两次收集和准备块表索引这类每步固定的开销，而不是拷贝的字节。" + _SHARE + "。",
    "paged.cost.fixed": _CELLS + "：每一格多出的时间都差不多，不随要收集的字节增长：更像是每一步准备块表索引这类固定的开销。"
                        + _SHARE + "。",
    "paged.cost.same": f"每一格两种缓存都相差不到 {_BAND}（分页比连续缓存，比值 {{ratios}}）：在这台机器上，这么小的模型"
                       "看不出分页的代价。",
    "paged.cost.fixed_then_grows": _CELLS + "。B = {small_b} 的几格多出的时间差不多，不随长度变；B = {big_b} 的几格"
                                   "一格比一格多。按收集最多的那一格单独测出的速度（最后一格的字节用 {gather}）算，B = "
                                   "{small_b} 的几格收集最多也只要约 {small_gather}，不到它们多出的时间的一半：B 小时多出的"
                                   "大部分是每一步固定的开销（按块表取索引、每一层多做的几个小运算）；B 大时要收集的字节多得"
                                   "多，多出的时间才随字节增长。" + _SHARE + "。",
    "paged.cost.fixed_then_grows_apart": _CELLS + "。B = {small_b} 的几格多出的时间差不多，不随长度变；B = {big_b} 的几格"
                                         "一格比一格多。按收集最多的那一格单独测出的速度（最后一格的字节用 {gather}）算，B = "
                                         "{small_b} 的几格收集最多也只要约 {small_gather}，不到它们多出的时间的一半：B 小时多出的"
                                         "大部分是每一步固定的开销（按块表取索引、每一层多做的几个小运算）；B 大时要收集的字节多得"
                                         "多，多出的时间才随字节增长。不过 B = {small_b} 时每一步固定多出的时间，加上单独测的收集 "
                                         f"{{gather}}，比收集最多的那一格多出的时间（最后一个）还多 {_BAND} 以上：这两次测量这一次"
                                         "对不上，只能说收集占了大头，精确的比例要在空闲时重测。",
    "paged.cost.slower": _CELLS + f"。在几轮结论一致的 {{agree}} 个格子里，分页的一步有 {{slower}} 个比连续缓存慢 {_BAND} 以上，"
                         "没有一格明显更快。" + _SHARE + "。但并不是每个 B 都是每条越长、多出的时间越多：这次看不出分页的代价随要收集的"
                         "字节怎样变。想看清楚，可以" + _RERUN,
    "paged.cost.not_rising": _CELLS + _NOT_RISING_HEAD + "。",
    "paged.cost.not_rising_peak": _CELLS + _NOT_RISING_HEAD + "；只有 B = {peak_b}、每条 {peak_length} 个 token 那一格多出 "
                                  "{peak_extra}，比别的格子高出一截，不在这个规律里（可以重跑这一格看它是不是计时的噪声）。",
    "paged.cost.slower_big_level": _CELLS + f"。在几轮结论一致的 {{agree}} 个格子里，分页的一步有 {{slower}} 个比连续缓存慢 "
                                   f"{_BAND} 以上，没有一格明显更快；但收集最多的那一格（比值是最后一个）两种缓存相差不到 {_BAND}，所以说不出收集占"
                                   "多出的时间多少；也不是每个 B 都是每条越长、多出的时间越多：这次看不出分页的代价随要收集的"
                                   "字节怎样变。想看清楚，可以" + _RERUN,
    "paged.cost.contradicts": "各格子的结论互相矛盾：有的格子分页明显更慢，有的反而明显更快（分页比连续缓存，比值 {ratios}）。"
                              "分页不会让一步变快，这是机器太忙造成的：这次说不准分页慢多少；" + _RERUN,
    "paged.cost.noisy": "分页比连续缓存，各格子的比值 {ratios}，只有 {agree}/{cells} 个格子的几轮结论一致：这台机器太忙，"
                        "这次说不准分页慢多少；" + _RERUN,
    "paged.cost.mixed": f"分页比连续缓存，各格子的比值 {{ratios}}：{{cells}} 个格子各自的几轮结论一致，但有的格子慢了 {_BAND} "
                        f"以上，有的相差不到 {_BAND}，多出的时间也看不出随 B 和长度怎样变：这次说不准分页慢多少；" + _RERUN,
    "paged.cost.unmeasured": "这一次的计时没有测出有效的数，说不准分页慢多少；" + _RERUN,
}

ZH_TEMPLATES.update({key + "_odd": ZH_TEMPLATES[key].replace(
    "个格子的几轮结论一致）", "个格子的几轮结论一致；B = {odd_batches}、每条 {odd_lengths} 个 token 那一格几轮的结论不一致）")
    for key in ("paged.cost.fixed_then_grows", "paged.cost.fixed_then_grows_apart", "paged.cost.slower", "paged.cost.slower_big_level", "paged.cost.not_rising",
                "paged.cost.not_rising_peak")})


TEMPLATES = ZH_TEMPLATES  # what Catalog.of_topics reads for Chinese

# -- the same claims in English (Catalog.of_topics reads TEMPLATES_EN): the same keys, the same fields -------------
_RERUN_EN = ("rerun this cell (you can change its first line to lesson.paging_cost(model, tok, rounds=7) to time more "
             "rounds); on a busy machine, close other CPU-hungry programs first.")
_AGREE_EN = "the rounds agree in {agree}/{cells} cells)"  # the end of _CELLS_EN, where an "_odd" key names its cell
_CELLS_EN = ("The cells in order of the bytes they gather: B is {batches}, each sequence {lengths} tokens long, "
             "gathering {mib}; the paged step takes {extra} longer than the contiguous cache's, ratios {ratios} ("
             + _AGREE_EN)
_SHARE_EN = "In the cell that gathers the most, the gather timed on its own takes {gather}, {share} of that cell's extra time"
_GATHER_EN = ("A paged step first gathers every layer's K and V through the block table into contiguous tensors: at "
              "B = {batch} with {length} tokens per sequence, each step copies {big_mib}")
_SLOWER_COUNT_EN = ("Of the {agree} cells whose rounds agree, the paged step is slower than the contiguous cache's by "
                    + _BAND + " or more in {slower}, and clearly faster in none")
_NO_PATTERN_EN = (": this run does not show how the cost of paging changes with the bytes to gather. To see it "
                  "clearly, " + _RERUN_EN)
_NOT_RISING_HEAD_EN = (". " + _SLOWER_COUNT_EN + ". " + _SHARE_EN + ". The extra time does not grow with the bytes "
                       "({small_extra} at {small_mib}, {big_extra} at {big_mib}; at each B, the longest cell's extra "
                       "time is not over 30% above the shortest's either): it looks like a fixed cost per step rather "
                       "than the bytes copied")
_FIXED_THEN_GROWS_EN = (". At B = {small_b} the extra time is about the same in every cell and does not change with the "
                        "length; at B = {big_b} it rises from cell to cell. At the speed of the gather timed in the cell "
                        "that gathers the most (the last cell's bytes in {gather}), the cells at B = {small_b} take at "
                        "most about {small_gather} to gather, under half their extra time: at small B most of the extra "
                        "is a fixed cost per step (looking up indices through the block table, a few more small "
                        "operations in every layer); only at large B, with many more bytes to gather, does the extra "
                        "time grow with the bytes.")
_GROWS_EN = (": the paged step is slower, and at the same B, the longer each sequence and the more bytes to gather, the "
             "more extra time it takes (at each B, every cell more than the one before). ")
TEMPLATES_EN = {
    "paged.gather.measured": _GATHER_EN + "; timed on its own, this gather takes {gather} at its fastest.",
    "paged.gather.over_extra": _GATHER_EN + "; timed on its own, this gather takes {gather} at its fastest, longer "
                               "than the whole {big_extra} the paged step adds in that cell (the gather is only part of "
                               "the paged step): this time the timing noise is larger than the difference, so read the "
                               "extra times compared below with that in mind.",
    "paged.gather.over_extra_steady": _GATHER_EN + "; timed on its own, this gather takes {gather} at its fastest, "
                                      "longer than the whole {big_extra} the paged step adds in that cell, and longer "
                                      "in every round ({over_rounds}/{rounds} rounds): this is not timing noise; a "
                                      "gather timed on its own costs more than it adds to a step. The extra time is the "
                                      "difference between two whole steps, and the contiguous cache's step also reads "
                                      "every K and V from memory for its attention; in the paged step, attention reads "
                                      "the copy the gather has just made, so part of the gather's cost most likely "
                                      "stands in for reading the contiguous step does anyway. The gather's time here "
                                      "is an upper bound on what it adds to a step.",
    "paged.gather.about_extra": _GATHER_EN + "; timed on its own, this gather takes {gather} at its fastest, about the "
                                "whole {big_extra} the paged step adds in that cell ({gather_share}): the gather alone "
                                "cannot take longer than all the extra time, and the small excess is within the timing's "
                                "precision.",
    "paged.gather.unmeasured": _GATHER_EN + "; this run measured no valid time for the gather; " + _RERUN_EN,
    "paged.cost.grows_gather": _CELLS_EN + _GROWS_EN + _SHARE_EN + ": most of the extra time goes into the gather.",
    "paged.cost.grows_elsewhere": _CELLS_EN + _GROWS_EN + _SHARE_EN + ": the gather is only a small part. Most of the "
                                  "extra time comes from outside it, from work not timed separately here: building the "
                                  "block-table indices in Python every step, and attention reading the gathered K/V "
                                  "(after the gather it is only transposed into a per-head view, so one head's data lies "
                                  "apart in memory instead of side by side as in the contiguous cache).",
    "paged.cost.fixed_flat": "The contiguous cache's step hardly changes with B or the length ({contiguous} across the "
                             "cells; B is {batches}, gathering {mib}): this small model's step is mostly fixed overhead "
                             "(launching kernels one by one on a GPU, calling operators one by one on a CPU). The paged "
                             "step is slower by " + _BAND + " or more in every cell (ratios {ratios}), by about the "
                             "same extra time everywhere ({extra}; the rounds agree in {agree}/{cells} cells): a fixed "
                             "cost per step, such as two gathers per layer and building the block-table indices, not "
                             "the bytes copied. " + _SHARE_EN + ".",
    "paged.cost.fixed": _CELLS_EN + ": every cell's extra time is about the same and does not grow with the bytes to "
                        "gather: it looks like a fixed cost per step, such as building the block-table indices. "
                        + _SHARE_EN + ".",
    "paged.cost.same": "In every cell the two caches are within " + _BAND + " of each other (paged over contiguous, "
                       "ratios {ratios}): on this machine, a model this small shows no cost of paging.",
    "paged.cost.fixed_then_grows": _CELLS_EN + _FIXED_THEN_GROWS_EN + " " + _SHARE_EN + ".",
    "paged.cost.fixed_then_grows_apart": _CELLS_EN + _FIXED_THEN_GROWS_EN + " But at B = {small_b} the fixed extra "
                                         "time per step plus the gather timed on its own, {gather}, comes to more than "
                                         "the extra time of the cell that gathers the most (the last one) by over "
                                         + _BAND + ": the two measurements do not add up this time, so all this run "
                                         "can say is that the gather is the larger part; the exact share needs a rerun "
                                         "on an idle machine.",
    "paged.cost.slower": _CELLS_EN + ". " + _SLOWER_COUNT_EN + ". " + _SHARE_EN + ". But not at every B does the extra time grow with each longer sequence"
                         + _NO_PATTERN_EN,
    "paged.cost.not_rising": _CELLS_EN + _NOT_RISING_HEAD_EN + ".",
    "paged.cost.not_rising_peak": _CELLS_EN + _NOT_RISING_HEAD_EN + "; only the cell with B = {peak_b} and "
                                  "{peak_length} tokens per sequence adds {peak_extra}, well above the other cells and "
                                  "outside this pattern (rerun this cell to see whether it is timing noise).",
    "paged.cost.slower_big_level": _CELLS_EN + ". " + _SLOWER_COUNT_EN + "; but in the cell that gathers the most (the "
                                   "last ratio) the two caches are within " + _BAND + ", so there is no saying what "
                                   "share of the extra time the gather takes; nor does the extra time grow with each longer "
                                   "sequence at every B" + _NO_PATTERN_EN,
    "paged.cost.contradicts": "The cells contradict one another: in some the paged step is clearly slower, in others "
                              "clearly faster (paged over contiguous, ratios {ratios}). Paging never makes a step "
                              "faster; a busy machine did this, so this run cannot tell how much slower paging is; "
                              + _RERUN_EN,
    "paged.cost.noisy": "Paged over contiguous, the cells' ratios are {ratios}, and the rounds agree in only "
                        "{agree}/{cells} cells: this machine is too busy to tell how much slower paging is this time; "
                        + _RERUN_EN,
    "paged.cost.mixed": "Paged over contiguous, the cells' ratios are {ratios}: the rounds agree within each of the "
                        "{cells} cells, but some cells are slower by " + _BAND + " or more and others within "
                        + _BAND + ", and the extra time follows no pattern in B or the length: this run cannot tell "
                        "how much slower paging is; " + _RERUN_EN,
    "paged.cost.unmeasured": "This run's timings gave no valid numbers, so it cannot tell how much slower paging is; "
                             + _RERUN_EN,
}
TEMPLATES_EN.update({key + "_odd": TEMPLATES_EN[key].replace(_AGREE_EN, _AGREE_EN[:-1] + "; in the cell with B = "
                                                             "{odd_batches} and {odd_lengths} tokens per sequence, "
                                                             "they disagree)")
                     for key in ("paged.cost.fixed_then_grows", "paged.cost.fixed_then_grows_apart", "paged.cost.slower",
                                 "paged.cost.slower_big_level", "paged.cost.not_rising", "paged.cost.not_rising_peak")})


def why_sentence(cost: PagingCost) -> str:
    """Why a real paged cache does not pay for the gather, and what is expected on the other kind of device (no
    measured number, and no cause read from one: the claims above say how much of the extra time the gather is), in
    the course's language (:data:`.texts.TEXTS`)."""
    why = TEXTS.say("why")
    return why if cost.device.startswith("cuda") else TEXTS.say("why_off_gpu", why=why)
