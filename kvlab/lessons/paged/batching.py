"""Static against continuous batching on the same requests, timed in alternating rounds, and the claims that say
what the numbers show (kvlab.claims: a decision band, a "cannot tell, rerun" key, the GPU's launch-bound shape)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..._validate import positive_int
from ...measure import alternate, device_label, measurement_threads, torch_threads
from ...claims import ABSOLUTE, DIFFERENCE, MINUS, SEPARATOR, Chooser, Claim, Number, Rule, number, ratio, series
from ...stats import cumulative, median, percentile
from ...model import ToyTransformer
from ...serving import Request, ServeRun, serve
from .runs import BLOCK_SIZE, MAX_BATCH

BAND = 0.15  # a ratio within 1 ± 15 % is "no clear difference"
FLAT = 0.05  # a step's time "about the same" (and tokens/s "close to" the step counts' ratio): within 5 %
MAX_ROUNDS = 5  # each round serves the workload once per policy


@dataclass(frozen=True)
class Rounds:
    """Runs of the same requests under a few engine settings (``runs``: setting -> one run per round), served in
    alternating rounds. The step clock makes every round of a setting take the same steps, so each step's time is
    taken as its fastest round (a burst of load on a busy machine spoils one round of a step, rarely all of them);
    the TTFT below comes from those times. Each round's own numbers are kept to check that the rounds agree."""

    runs: dict[str, list[ServeRun]]
    device: str
    threads: int | None
    where: str  # measure.device_label: what every readout says about the device

    def first(self, policy: str) -> ServeRun:
        """The first round's run (the timeline figure draws it; the schedule is the same in every round)."""
        return self.runs[policy][0]

    def step_seconds(self, policy: str) -> list[float]:
        """Each step's fastest time over the rounds."""
        return [min(r.steps[i].seconds for r in self.runs[policy]) for i in range(len(self.first(policy).steps))]

    def ttfts(self, policy: str, round_index: int | None = None) -> list[float]:
        """Each request's time to first token in seconds, on the fastest step times or on round ``round_index``'s."""
        run = self.first(policy) if round_index is None else self.runs[policy][round_index]
        seconds = self.step_seconds(policy) if round_index is None else [s.seconds for s in run.steps]
        start = dict(zip((s.step for s in run.steps), cumulative([0.0] + seconds[:-1])))
        end = dict(zip((s.step for s in run.steps), cumulative(seconds)))
        return [end[o.first_token] - start[o.request.arrival] for o in run.outcomes]

    def ttft_mean(self, policy: str, round_index: int | None = None) -> float:
        values = self.ttfts(policy, round_index)
        return sum(values) / len(values)


def serve_in_rounds(model: ToyTransformer, runners: dict, warm: dict, rounds: int) -> tuple[dict, str, int | None]:
    """``alternate`` the runners (each serves the requests once) on this machine's measurement threads:
    (runs, device label, threads)."""
    rounds = positive_int("rounds", rounds, maximum=MAX_ROUNDS)
    threads = measurement_threads() if model.device.type == "cpu" else None
    with torch_threads(threads or torch.get_num_threads()):
        runs = alternate(runners, rounds, warmup=warm)
    return runs, device_label(model.device, threads), threads


@dataclass(frozen=True)
class BatchingComparison(Rounds):
    """The same requests served under both policies in ``rounds`` alternating rounds (one pool size for both);
    the tokens/s, TTFT and TPOT come from each step's fastest round (:class:`Rounds`)."""

    def tokens_per_second(self, policy: str) -> float:
        return self.first(policy).new_tokens / sum(self.step_seconds(policy))

    @property
    def throughput_ratio(self) -> float:
        """Continuous over static tokens/s, from the fastest time of every step."""
        return self.tokens_per_second("continuous") / self.tokens_per_second("static")

    @property
    def round_ratios(self) -> list[float]:
        """Per round: continuous tokens/s over static tokens/s, each from that round's own times."""
        return [c.tokens_per_second / s.tokens_per_second for s, c in zip(self.runs["static"], self.runs["continuous"])]

    def ttft_tail(self, policy: str, q: float = 0.9) -> float:
        return percentile(self.ttfts(policy), 100 * q)

    def token_times(self, policy: str, round_index: int | None = None) -> dict[int, list[float]]:
        """Each request's token end times in seconds (the end of each step that gave it a token: its prefill, a
        decode, or a prefill again after a preemption), on the fastest step times or on round ``round_index``'s."""
        run = self.first(policy) if round_index is None else self.runs[policy][round_index]
        seconds = self.step_seconds(policy) if round_index is None else [s.seconds for s in run.steps]
        out: dict[int, list[float]] = {o.request.rid: [] for o in run.outcomes}
        for step, end in zip(run.steps, cumulative(seconds)):
            for rid in step.prefilled + step.decoded:
                out[rid].append(end)
        return out

    def tpots(self, policy: str, round_index: int | None = None) -> list[float]:
        """Time per output token of each request that made at least 2: (end to end − TTFT) / (tokens − 1), i.e.
        from its first token to its last over the tokens in between."""
        return [(t[-1] - t[0]) / (len(t) - 1) for t in self.token_times(policy, round_index).values() if len(t) > 1]

    def tpot_mean(self, policy: str, round_index: int | None = None) -> float:
        values = self.tpots(policy, round_index)
        return sum(values) / len(values) if values else float("nan")

    @property
    def tpot_round_ratios(self) -> list[float]:
        """Per round: continuous mean TPOT over static mean TPOT, each from that round's own step times."""
        return [self.tpot_mean("continuous", i) / self.tpot_mean("static", i) for i in range(len(self.runs["static"]))]

    @property
    def step_round_ratios(self) -> list[float]:
        """Per round: the continuous step's median time over the static step's, each from that round's own steps."""
        return [ratio(median([x.seconds for x in c.steps]), median([x.seconds for x in s.steps]))
                for s, c in zip(self.runs["static"], self.runs["continuous"])]

    def itls(self, policy: str) -> list[float]:
        """Inter-token latencies: every gap between two consecutive tokens of a request (one step's time, or the
        wait and the new prefill after a preemption), on the fastest step times."""
        return [b - a for t in self.token_times(policy).values() for a, b in zip(t, t[1:])]

    def same_tokens(self) -> bool:
        """Every run gave every request the same tokens (greedy; the policy changes when, never what)."""
        first = [o.tokens for o in self.first("static").outcomes]
        return all([o.tokens for o in run.outcomes] == first for runs in self.runs.values() for run in runs)

    def schedule_repeats(self) -> bool:
        """Every round of a policy took the same steps (the step clock makes the schedule reproducible)."""
        return all(len({tuple((s.step, tuple(s.running)) for s in r.steps) for r in runs}) == 1
                   for runs in self.runs.values())


def compare_batching(model: ToyTransformer, requests: list[Request], max_batch: int = MAX_BATCH,
                     block_size: int = BLOCK_SIZE, rounds: int = 2) -> BatchingComparison:
    """Serve ``requests`` under static and continuous batching, alternating, after a short warm-up of each (no
    prefix sharing: the comparison is of the batching alone; section 4 measures sharing)."""
    runners = {p: (lambda p=p: serve(model, requests, p, max_batch=max_batch, block_size=block_size,
                                     share_prefixes=False)) for p in ("static", "continuous")}
    warm = {p: (lambda p=p: serve(model, requests[:2], p, max_batch=max_batch, block_size=block_size,
                                  share_prefixes=False)) for p in runners}
    runs, where, threads = serve_in_rounds(model, runners, warm, rounds)
    return BatchingComparison(runs, str(model.device), threads, where)


# -- what the comparison measured, as claims (kvlab.claims) ----------------------------------------------------
# Each claim is chosen by a predicate over the very numbers it prints: the tokens/s and their ratio (which must agree),
# every round's own ratio, the TTFT and TPOT means and tails, each schedule's step counts (the same on every machine).
def _all(x) -> tuple[float, ...]:
    """A printed number or series as a tuple."""
    return x if isinstance(x, tuple) else (x,)


def _ratio_of(r: float, a: float, b: float, a_step: float, b_step: float) -> bool:
    """The printed ratio ``r`` is a / b of the printed a and b, within their rounding (half a step each)."""
    q = a / b
    return abs(r - q) <= 0.005 + q * (a_step / 2 / a + b_step / 2 / b) + 1e-9


def _gain(v, ratio: float) -> bool:
    """The printed percentage is |ratio - 1| of the printed ratio (both rounded)."""
    return abs(v["gain"] - 100 * abs(ratio - 1)) <= 1.0 + 1e-9


def _within(r: float) -> bool:
    return abs(r - 1) < BAND


def _all_above(rounds) -> bool:
    """Every round's printed ratio at least 1 + BAND: each round alone says "more", not only the best one."""
    return min(_all(rounds)) >= 1 + BAND


def _all_below(rounds) -> bool:
    """Every round's printed ratio at most 1 / (1 + BAND): each round alone says "less"."""
    return max(_all(rounds)) * (1 + BAND) <= 1


def one_sided(name: str, up: str, down: str, shows: tuple[str, ...], consistent) -> tuple[Rule, ...]:
    """The "can't tell how much" rules of a chooser over per-round ratios: every round on one side of 1 (``up``:
    above, ``down``: below) but not every one beyond the band (``least``: the closest round's per cent from 1);
    ``mixed``: rounds on both sides. ``consistent(v)`` checks the printed ratio against the printed quantities."""
    def side(above: bool):
        def holds(v) -> bool:
            rounds = _all(v["rounds"])
            closest = min(rounds) if above else max(rounds)
            return (all((r > 1) if above else (r < 1) for r in rounds) and ((v["ratio"] > 1) if above else (v["ratio"] < 1))
                    and abs(v["least"] - 100 * abs(closest - 1)) <= 1.0 + 1e-9 and v["least"] < 100 * BAND
                    and consistent(v))
        return holds
    return (Rule(f"{name}.{up}_unsure", (*shows, "least"), side(True), substantive=False),
            Rule(f"{name}.{down}_unsure", (*shows, "least"), side(False), substantive=False),
            Rule(f"{name}.mixed", shows, lambda v: min(_all(v["rounds"])) < 1 < max(_all(v["rounds"])),
                 substantive=False))


def _least(rounds: list[float]) -> Number:
    """The per cent from 1 of the round closest to 1 (what ``one_sided`` prints as ``least``)."""
    return number(100 * min(abs(r - 1) for r in rounds), 0, "%")


TPS = ("cont_tps", "static_tps", "ratio", "rounds")
THROUGHPUT = Chooser("paged.throughput", (
    Rule("paged.throughput.faster", (*TPS, "gain", "cont_batch", "static_batch"),
         lambda v: v["ratio"] >= 1 + BAND and _all_above(v["rounds"]) and _gain(v, v["ratio"])
         and _ratio_of(v["ratio"], v["cont_tps"], v["static_tps"], 1, 1) and v["cont_batch"] > v["static_batch"]),
    Rule("paged.throughput.slower", (*TPS, "gain", "cont_batch", "static_batch"),
         lambda v: v["ratio"] * (1 + BAND) <= 1 and _all_below(v["rounds"]) and _gain(v, v["ratio"])
         and _ratio_of(v["ratio"], v["cont_tps"], v["static_tps"], 1, 1) and v["cont_batch"] > v["static_batch"]),
    Rule("paged.throughput.same", TPS,  # every round too (seventh review: 1.07 beside rounds 0.99 and 1.40)
         lambda v: _within(v["ratio"]) and all(map(_within, _all(v["rounds"])))
         and _ratio_of(v["ratio"], v["cont_tps"], v["static_tps"], 1, 1)),
    *one_sided("paged.throughput", "faster", "slower", TPS,
               lambda v: _ratio_of(v["ratio"], v["cont_tps"], v["static_tps"], 1, 1)),
    Rule("paged.throughput.unclear", TPS, substantive=False),
    Rule("paged.throughput.unmeasured", substantive=False),
))

STEPS = ("static_step", "cont_step", "step_more", "step_rounds", "ratio", "static_steps", "cont_steps", "bound")


def _bound(v) -> bool:
    return abs(v["bound"] - v["static_steps"] / v["cont_steps"]) <= 0.005 + 1e-9


def _step_more(v) -> bool:
    """The printed ``step_more`` (whole per cent) is ``cont_step / static_step - 1`` of the printed steps (2 decimals,
    ms), within the rounding of all three."""
    c, s = v["cont_step"], v["static_step"]
    if s <= 0.005:
        return False
    lo, hi = max(c - 0.005, 0) / (s + 0.005), (c + 0.005) / (s - 0.005)
    return 100 * (lo - 1) - 0.5 <= v["step_more"] <= 100 * (hi - 1) + 0.5


def _flat(more: float) -> bool:
    return abs(more) <= 100 * FLAT


def _little(more: float) -> bool:
    return 100 * FLAT < more < 100 * BAND


def _grows(more: float) -> bool:
    return more >= 100 * BAND


def _every_round(band, v) -> bool:
    """The fastest-step medians' ``step_more`` and every round's own (printed) are in the same ``band``."""
    return band(v["step_more"]) and all(map(band, _all(v["step_rounds"])))


# How a step's time moved with the batch, on the printed step medians and the percentage between them, and on each
# round's own percentage: "flat" only within ±FLAT (and then tokens/s within FLAT of the step counts' ratio: what
# "close" means); "grows a little" from FLAT up to BAND; "grows" from BAND on; the last two only with tokens/s below
# the step counts' ratio. Each only when every round is in that band too. Figures in different bands: "every round
# slower" where every round's step (and the combined one) is slower, whatever the band (review: rounds 14 % and 23 %
# slower were called timing noise); "rounds differ" only where the rounds disagree in sign.
def _signs(rounds) -> set[int]:
    return {(r > 0) - (r < 0) for r in _all(rounds)}


def _in_one_band(v) -> bool:
    return any(_every_round(band, v) for band in (_flat, _little, _grows))


STEP_TIME = Chooser("paged.step_time", (
    Rule("paged.step_time.flat", STEPS, lambda v: _bound(v) and _step_more(v) and _every_round(_flat, v)
         and abs(v["ratio"] / v["bound"] - 1) <= FLAT),
    Rule("paged.step_time.grows_little", STEPS, lambda v: _bound(v) and _step_more(v) and _every_round(_little, v)
         and v["ratio"] < v["bound"]),
    Rule("paged.step_time.grows", STEPS, lambda v: _bound(v) and _step_more(v) and _every_round(_grows, v)
         and v["ratio"] < v["bound"]),
    Rule("paged.step_time.rounds_slower", STEPS, lambda v: _bound(v) and _step_more(v) and v["ratio"] < v["bound"]
         and v["step_more"] > 0 and _signs(v["step_rounds"]) == {1} and not _in_one_band(v), substantive=False),
    Rule("paged.step_time.rounds_differ", STEPS, lambda v: _bound(v) and v["ratio"] < v["bound"]
         and len(_signs(v["step_rounds"])) > 1 and not _in_one_band(v), substantive=False),
    Rule("paged.step_time.unclear", STEPS, lambda v: _bound(v), substantive=False),
    Rule("paged.step_time.unmeasured", ("static_steps", "cont_steps", "bound"), substantive=False),
))

TTFTS = ("static_steps", "cont_steps", "static_mean", "cont_mean", "static_tail", "cont_tail")
WAITS = ("static_max", "cont_max", "cont_waited", "requests", "max_batch")  # counted on the schedule, not timed
WAITED = ("wait_mean", "wait_max")  # the steps the requests that could not join at once waited to join (NaN if none)


def _waits(v) -> bool:
    """The counted waits as the sentence reads them: each schedule's longest TTFT in steps at least its mean, the
    continuous one's no longer than the static one's, and no more requests waiting than there are."""
    return (v["static_max"] >= v["static_steps"] and v["cont_steps"] <= v["cont_max"] <= v["static_max"]
            and v["cont_waited"] <= v["requests"] and v["max_batch"] >= 1)


def _waited(v) -> bool:
    """Some requests waited: at least a step each, on average no more than the longest, and a request that waited
    ``w`` steps has a TTFT of at least ``w + 1`` steps (it joins, then its first token takes a step)."""
    return v["cont_waited"] >= 1 and 1 <= v["wait_mean"] <= v["wait_max"] and v["wait_max"] + 1 <= v["cont_max"]


def _continuous_shorter(v) -> bool:
    return (v["cont_tail"] * (1 + BAND) <= v["static_tail"] and v["cont_mean"] * (1 + BAND) <= v["static_mean"]
            and v["cont_steps"] * (1 + BAND) <= v["static_steps"] and _waits(v))


TTFT = Chooser("paged.ttft", (
    Rule("paged.ttft.continuous_shorter", TTFTS + WAITS + WAITED, lambda v: _continuous_shorter(v) and _waited(v)),
    Rule("paged.ttft.continuous_shorter_no_wait", TTFTS + WAITS,
         lambda v: _continuous_shorter(v) and v["cont_waited"] == 0),
    Rule("paged.ttft.static_shorter", TTFTS,
         lambda v: v["static_tail"] * (1 + BAND) <= v["cont_tail"] and v["static_mean"] * (1 + BAND) <= v["cont_mean"]
         and v["static_steps"] <= v["cont_steps"]),
    Rule("paged.ttft.same", TTFTS,
         lambda v: _within(v["cont_mean"] / v["static_mean"]) and _within(v["cont_tail"] / v["static_tail"])),
    Rule("paged.ttft.unclear", TTFTS, substantive=False),
    Rule("paged.ttft.unmeasured", ("static_steps", "cont_steps"), substantive=False),
))

TPOTS = ("static_tpot", "cont_tpot", "ratio", "rounds", "static_itl", "cont_itl")


def _tpot_ratio(v) -> bool:
    return _ratio_of(v["ratio"], v["cont_tpot"], v["static_tpot"], 0.01, 0.01)


TPOT = Chooser("paged.tpot", (
    Rule("paged.tpot.slower", (*TPOTS, "gain", "cont_batch", "static_batch"),
         lambda v: v["ratio"] >= 1 + BAND and _all_above(v["rounds"]) and _gain(v, v["ratio"]) and _tpot_ratio(v)
         and v["cont_batch"] > v["static_batch"]),
    Rule("paged.tpot.faster", (*TPOTS, "gain", "cont_batch", "static_batch"),
         lambda v: v["ratio"] * (1 + BAND) <= 1 and _all_below(v["rounds"]) and _gain(v, v["ratio"])
         and _tpot_ratio(v) and v["cont_batch"] > v["static_batch"]),
    Rule("paged.tpot.same", (*TPOTS, "cont_batch", "static_batch"),
         lambda v: _within(v["ratio"]) and all(map(_within, _all(v["rounds"]))) and _tpot_ratio(v)
         and v["cont_batch"] > v["static_batch"]),
    *one_sided("paged.tpot", "slower", "faster", TPOTS, _tpot_ratio),
    Rule("paged.tpot.unclear", TPOTS, substantive=False),
    Rule("paged.tpot.unmeasured", substantive=False),
))

CHOOSERS = (THROUGHPUT, STEP_TIME, TTFT, TPOT)


def _ms(seconds: float, digits: int = 2) -> Number:
    return number(seconds * 1e3, digits, "ms")


def _rounds(values: list[float], digits: int = 2, unit: str = "", kind: str = ABSOLUTE) -> Number:
    """Each round's own number, as a series (one round: a single number)."""
    return series(values, digits, unit, kind) if len(values) > 1 else number(values[0], digits, unit, kind)


def step_time_claim(numbers: dict[str, Number]) -> Claim:
    """STEP_TIME's claim; 「负数表示少用」 is said only where a printed step_more or step_rounds is negative."""
    printed = [x for name in ("step_more", "step_rounds") for x in numbers[name].text.split(SEPARATOR)]
    return STEP_TIME.choose(numbers, {"minus_note": "负数表示少用；" if any(x.startswith(MINUS) or x.startswith("-")
                                                                      for x in printed) else "",
                                      "outside_note": _OUTSIDE if _outside(numbers) else ""})


_OUTSIDE = ("；合起来的那个数是每一步取几轮里最快的一次、再取中位数，不是各轮的平均，所以可以落在各轮的范围之外")


def _outside(numbers: dict[str, Number]) -> bool:
    """The printed combined ``step_more`` lies outside the range of the printed rounds' own (review r8: 28 % beside
    16 % and 24 %)."""
    more, rounds = numbers["step_more"].value, _all(numbers["step_rounds"].value)
    return not any(math.isnan(x) for x in (more, *rounds)) and not min(rounds) <= more <= max(rounds)


def explain_batching(c: BatchingComparison) -> list[Claim]:
    """What the comparison measured, as claims (:data:`CHOOSERS`; ``show_claims`` prints them): throughput, how a
    step's time moved with the batch (the launch-bound shape: flat, so tokens/s follow the step counts), TTFT, TPOT."""
    static, cont = c.first("static"), c.first("continuous")
    tps_ratio = ratio(c.tokens_per_second("continuous"), c.tokens_per_second("static"))
    tpot_ratio = ratio(c.tpot_mean("continuous"), c.tpot_mean("static"))
    batches = {"cont_batch": number(cont.mean_batch, 1), "static_batch": number(static.mean_batch, 1)}
    steps = {"static_steps": number(len(static.steps), 0), "cont_steps": number(len(cont.steps), 0)}
    static_step, cont_step = median(c.step_seconds("static")), median(c.step_seconds("continuous"))
    step_rounds = [100 * (r - 1) for r in c.step_round_ratios]
    waited = [o.waited_steps for o in cont.outcomes if o.waited_steps > 0]  # steps from arrival to joining
    waits = {"static_max": number(max(o.ttft_steps for o in static.outcomes), 0),
             "cont_max": number(max(o.ttft_steps for o in cont.outcomes), 0),
             "cont_waited": number(len(waited), 0), "wait_mean": number(sum(waited) / len(waited) if waited else math.nan, 1),
             "wait_max": number(max(waited, default=math.nan), 0),
             "requests": number(len(cont.outcomes), 0), "max_batch": number(cont.max_batch, 0)}
    return [
        THROUGHPUT.choose({"cont_tps": number(c.tokens_per_second("continuous"), 0, "token/s"),
                           "static_tps": number(c.tokens_per_second("static"), 0, "token/s"),
                           "ratio": number(tps_ratio, 2), "rounds": _rounds(c.round_ratios),
                           "gain": number(100 * abs(tps_ratio - 1), 0, "%"), "least": _least(c.round_ratios),
                           **batches}),
        step_time_claim({"static_step": _ms(static_step), "cont_step": _ms(cont_step),
                    "step_more": number(100 * (ratio(cont_step, static_step) - 1), 0, "%", DIFFERENCE),
                    "step_rounds": _rounds(step_rounds, 0, "%", DIFFERENCE),
                    "ratio": number(tps_ratio, 2), **steps, "bound": number(len(static.steps) / len(cont.steps), 2)}),
        TTFT.choose({"static_steps": number(static.ttft_steps_mean, 1), "cont_steps": number(cont.ttft_steps_mean, 1),
                     "static_mean": _ms(c.ttft_mean("static"), 1), "cont_mean": _ms(c.ttft_mean("continuous"), 1),
                     "static_tail": _ms(c.ttft_tail("static"), 1), "cont_tail": _ms(c.ttft_tail("continuous"), 1),
                     **waits}),
        TPOT.choose({"static_tpot": _ms(c.tpot_mean("static")), "cont_tpot": _ms(c.tpot_mean("continuous")),
                     "ratio": number(tpot_ratio, 2), "rounds": _rounds(c.tpot_round_ratios),
                     "static_itl": _ms(percentile(c.itls("static"), 90)),
                     "cont_itl": _ms(percentile(c.itls("continuous"), 90)),
                     "gain": number(100 * abs(tpot_ratio - 1), 0, "%"), "least": _least(c.tpot_round_ratios),
                     **batches}),
    ]


_RERUN = ("重跑第 3 节那一格（compare_batching 的 rounds 可以调到 5，多测几轮），再运行这一格；机器忙时先关掉别的占 CPU 的程序。")
_BAND = f"{BAND:.0%}"
_TPS_HEAD = ("吞吐：连续批处理 {cont_tps}，静态批处理 {static_tps}（每一步取几轮里最快的一次）：比值 {ratio}；"
             "每一轮单独算的比值 {rounds}")
_TPOT_HEAD = "每个 token 的时间（TPOT）：平均静态批处理 {static_tpot}，连续批处理 {cont_tpot}（比值 {ratio}；每一轮单独算 {rounds}）"
_ITL = "（另看尾部：token 间延迟（ITL）的 90% 分位，静态批处理 {static_itl}，连续批处理 {cont_itl}。）"
_TTFT_HEAD = ("首 token 延迟（TTFT）：按步数平均，静态批处理 {static_steps} 步，连续批处理 {cont_steps} 步（步数由调度决定，"
              "每台机器都一样）。按秒：平均 {static_mean} 对 {cont_mean}，90% 分位 {static_tail} 对 {cont_tail}")
_STEPS_HEAD = "一步耗时的中位数：静态批处理 {static_step}，连续批处理 {cont_step}，连续批处理的一步多用 {step_more}"
_FLAT, _STEPS_RATIO = f"{FLAT:.0%}", "两种调度的步数之比 {static_steps} ÷ {cont_steps} = {bound}"
_STEP_ROUNDS = "每一轮单独算，分别多用 {step_rounds}{outside_note}"


def one_sided_templates(name: str, head: str, up: str, down: str, what: str, rerun: str, tail: str = "") -> dict:
    """The sentences of :func:`one_sided`'s rules: ``up``/``down`` say the direction every round agrees on,
    ``what`` the quantity whose size this run cannot tell."""
    unsure = "：每一轮都是{side}，但差得最少的一轮只差 {{least}}，不到 " + _BAND + "：这次说不准" + what + "差多少；"
    return {f"{name}.{up.split('|')[0]}_unsure": head + unsure.format(side=up.split("|")[1]) + rerun + tail,
            f"{name}.{down.split('|')[0]}_unsure": head + unsure.format(side=down.split("|")[1]) + rerun + tail,
            f"{name}.mixed": head + "：几轮的方向不一致（有的一轮大于 1，有的一轮小于 1）：这台机器太忙（或太吵），这次说不准"
                             + what + "哪边更好；" + rerun + tail}
ZH_TEMPLATES = {
    "paged.throughput.faster": _TPS_HEAD + "。连续批处理快了 {gain}：走得早的请求一结束，等待的请求就补进批次，每次解码"
                               "前向平均算 {cont_batch} 条序列，静态批处理只有 {static_batch} 条。",
    "paged.throughput.slower": _TPS_HEAD + "。这一次连续批处理反而慢了 {gain}：它每次解码前向平均算 {cont_batch} 条序列"
                               "（静态批处理 {static_batch} 条），吞吐却更低：在这台机器上，把更多条序列放进一步并不比分开算"
                               "便宜（下一句看一步的耗时怎样随批次变）。",
    "paged.throughput.same": _TPS_HEAD + f"。合起来和每一轮都相差不到 {_BAND}，在这台机器上分不出哪种吞吐更高。",
    **one_sided_templates("paged.throughput", _TPS_HEAD, "faster|连续批处理的吞吐更高", "slower|连续批处理的吞吐更低",
                          "吞吐", _RERUN),
    "paged.throughput.unclear": _TPS_HEAD + f"：几轮的比值和总的比值对不上，或者没有一边差出 {_BAND} 以上：这台机器太忙"
                                "（或太吵），这次说不准哪种吞吐更高、高多少；" + _RERUN,
    "paged.throughput.unmeasured": "这一次没有测出有效的吞吐（总时间为 0 或不是一个数）；" + _RERUN,
    "paged.step_time.flat": _STEPS_HEAD + "（{minus_note}" + _STEP_ROUNDS + f"），都在 ±{_FLAT} 以内，差不多：这个小模型一步的耗时几乎不随批次变"
                            "（在 GPU 上，小模型的一步主要花在逐个启动内核上，就是这样）。所以吞吐之比 {ratio} 接近"
                            + _STEPS_RATIO + f"（相差不到 {_FLAT}）：连续批处理少走的那些步，就是它多出的吞吐。",
    "paged.step_time.grows_little": _STEPS_HEAD + "（{minus_note}" + _STEP_ROUNDS + f"）：每一轮都是批次更满的一步慢了一些，但不到 {_BAND}。吞吐之比 {{ratio}} 小于"
                                    + _STEPS_RATIO + "：连续批处理少走的那些步，没有全部变成多出的吞吐，一部分被它每一步多用"
                                    "的时间抵掉了（每个新请求的预填充也各是一次单独的前向）。",
    "paged.step_time.grows": _STEPS_HEAD + "（{minus_note}" + _STEP_ROUNDS + f"），每一轮都在 {_BAND} 以上：批次更满的一步明显更慢，所以吞吐之比 {{ratio}} 小于"
                             + _STEPS_RATIO + "。在一步的耗时不随批次变的设备上（例如 GPU 上的这个"
                             "小模型，一步主要花在逐个启动内核上），吞吐之比会更接近步数之比 {bound}（每个新请求的预填充各是一次"
                             "单独的前向，所以一般到不了 {bound}）。",
    "paged.step_time.rounds_differ": _STEPS_HEAD + "（{minus_note}" + _STEP_ROUNDS + f"）：不在同一档（±{_FLAT} 以内、"
                                     f"{_FLAT}–{_BAND}、{_BAND} 以上），这一次说不准一步慢了多少。吞吐之比 {{ratio}} 小于"
                                     + _STEPS_RATIO + "，差出来的部分可能是一步变慢，也可能只是计时的噪声；" + _RERUN,
    "paged.step_time.rounds_slower": _STEPS_HEAD + "（{minus_note}" + _STEP_ROUNDS + f"）：每一轮都是批次更满的一步更慢，"
                                     f"但这几个数不在同一档（±{_FLAT} 以内、{_FLAT}–{_BAND}、{_BAND} 以上），这一次说不准是慢了"
                                     f"一些还是明显更慢。吞吐之比 {{ratio}} 小于" + _STEPS_RATIO + "：连续批处理少走的那些步，"
                                     "有一部分被它更慢的一步抵掉了（每个新请求的预填充也各是一次单独的前向）；想看清慢了多少，"
                                     "可以" + _RERUN,
    "paged.step_time.unclear": _STEPS_HEAD + "（{minus_note}" + _STEP_ROUNDS + "）；两种调度的步数之比 {static_steps} ÷ {cont_steps} = {bound}，吞吐之比 "
                               f"{{ratio}}：两者对不上（既不是一步差不多、吞吐之比与步数之比相差不到 {_FLAT}，也不是一步慢了、"
                               "吞吐之比小于步数之比），这一次说不清一步的耗时怎样影响吞吐；" + _RERUN,
    "paged.step_time.unmeasured": "两种调度的步数之比 {static_steps} ÷ {cont_steps} = {bound}（每台机器都一样）；这一次一步"
                                  "的耗时没有测出有效的数，说不清它怎样随批次变；" + _RERUN,
    "paged.ttft.continuous_shorter": _TTFT_HEAD + "：静态批处理里，批次跑起来之后到达的请求要等整批最长的那条写完才能开始，"
                                     "所以它的尾部延迟长得多（按步数最长 {static_max} 步）；连续批处理只要批次有空位、块池有块，就在请求到达的"
                                     "那一步让它加入，但批次满了（最多 {max_batch} 条）或块不够时也要排队：{requests} 个请求"
                                     "里有 {cont_waited} 个没能在到达的那一步加入，它们平均等了 {wait_mean} 步、最长等了 "
                                     "{wait_max} 步才加入（全部 {requests} 个请求的首 token 延迟按步数平均 {cont_steps} 步、"
                                     "最长 {cont_max} 步），仍远短于静态批处理。",
    "paged.ttft.continuous_shorter_no_wait": _TTFT_HEAD + "：静态批处理里，批次跑起来之后到达的请求要等整批最长的那条写完才"
                                             "能开始，所以它的尾部延迟长得多（按步数最长 {static_max} 步）；连续批处理只要"
                                             "批次有空位（最多 {max_batch} 条）、块池有块，就在请求到达的那一步让它加入：这一次 "
                                             "{requests} 个请求里没能在到达的那一步加入的有 {cont_waited} 个（首 token 延迟按"
                                             "步数最长 {cont_max} 步）。",
    "paged.ttft.static_shorter": _TTFT_HEAD + "：这一次静态批处理的延迟反而更短：请求来得太稀，几乎没有请求需要等整批结束。",
    "paged.ttft.same": _TTFT_HEAD + f"：平均和尾部都相差不到 {_BAND}，这组请求上分不出哪种延迟更短。",
    "paged.ttft.unclear": _TTFT_HEAD + "：按秒算的平均和尾部方向不一致，或者和步数的结论对不上：这台机器太忙，这次说不准；"
                          + _RERUN,
    "paged.ttft.unmeasured": "首 token 延迟（TTFT）：按步数平均，静态批处理 {static_steps} 步，连续批处理 {cont_steps} 步"
                             "（步数由调度决定，每台机器都一样）；按秒的延迟这一次没有测出有效的数；" + _RERUN,
    "paged.tpot.slower": _TPOT_HEAD + "：按 TPOT，连续批处理每个 token 慢了 {gain}。它的批次更满（平均 {cont_batch} 条对 "
                         "{static_batch} 条），新请求的预填充也和别人的解码挤在同一步里，正在生成的请求要多等这一下。这是"
                         "连续批处理付出的代价，它换来的是什么，见上面的吞吐和首 token 延迟。" + _ITL,
    "paged.tpot.faster": _TPOT_HEAD + "：这一次连续批处理每个 token 反而快了 {gain}，与它更满的批次（{cont_batch} 条对 "
                         "{static_batch} 条）方向相反：多半是机器忙，静态批处理那一段的步被拖慢了；重跑看是否还这样。" + _ITL,
    "paged.tpot.same": _TPOT_HEAD + f"：每一轮都相差不到 {_BAND}。批次多几条序列（平均 {{cont_batch}} 条对 "
                       "{static_batch} 条），这个小模型的一步几乎不变慢（GPU 上小模型的一步主要花在启动内核上，也是这样）："
                       "连续批处理在吞吐和首 token 延迟上的变化几乎不用拿每个 token 的速度来换。" + _ITL,
    **one_sided_templates("paged.tpot", _TPOT_HEAD, "slower|连续批处理每个 token 更慢", "faster|连续批处理每个 token 更快",
                          "每个 token 的时间", _RERUN, _ITL),
    "paged.tpot.unclear": _TPOT_HEAD + f"：几轮的比值和总的比值对不上，或者没有一边差出 {_BAND} 以上：这台机器太忙，"
                          "这次说不准哪种每个 token 更快、快多少；" + _RERUN + _ITL,
    "paged.tpot.unmeasured": "每个 token 的时间（TPOT）这一次没有测出有效的数（没有请求生成两个以上的 token，或者计时为 0）；"
                             + _RERUN,
}

TEMPLATES = ZH_TEMPLATES  # what Catalog.of_topics reads for Chinese


# -- the same claims in English (Catalog.of_topics reads TEMPLATES_EN and WORDS_EN): the same keys, the same fields --
# step_time_claim's terms are recorded as their Chinese text; WORDS_EN writes them in English.
WORDS_EN = {"负数表示少用；": "a negative figure means less time; ",
            _OUTSIDE: "; the combined figure takes each step's fastest round and then the median, not the mean of the "
                      "rounds, so it can fall outside the rounds' range"}
_RERUN_EN = ("rerun the cell of section 3 (you can raise compare_batching's rounds to 5 to time more rounds), then "
             "run this cell again; on a busy machine, close other CPU-hungry programs first.")
_TPS_HEAD_EN = ("Throughput: continuous batching {cont_tps}, static batching {static_tps} (each step timed at its "
                "fastest round): ratio {ratio}; each round's own ratio: {rounds}")
_TPOT_HEAD_EN = ("Time per output token (TPOT), mean: static batching {static_tpot}, continuous batching {cont_tpot} "
                 "(ratio {ratio}; each round on its own: {rounds})")
_ITL_EN = (" (For the tail: the 90th percentile of the inter-token latency (ITL) is {static_itl} with static "
           "batching and {cont_itl} with continuous batching.)")
_TTFT_STEPS_EN = ("Time to first token (TTFT): in steps, static batching averages {static_steps} steps and continuous "
                  "batching {cont_steps} (the scheduler sets the steps, so they are the same on every machine)")
_TTFT_HEAD_EN = (_TTFT_STEPS_EN + ". In seconds, static against continuous: mean {static_mean} against "
                 "{cont_mean}, 90th percentile {static_tail} against {cont_tail}")
_STEPS_HEAD_EN = ("Median step time: static batching {static_step}, continuous batching {cont_step}; a "
                  "continuous-batching step takes {step_more} more")
_STEPS_RATIO_EN = "the ratio of the two schedules' step counts, {static_steps} ÷ {cont_steps} = {bound}"
_STEP_ROUNDS_EN = " ({minus_note}each round on its own: {step_rounds} more{outside_note})"
_STATIC_WAIT_EN = (": with static batching, a request that arrives after the batch has started waits until the "
                   "batch's longest request has finished, so static batching's tail latency is far longer (up to {static_max} "
                   "steps); continuous batching lets a request join in the step it arrives whenever the batch has "
                   "room")


def one_sided_templates_en(name: str, head: str, up: str, down: str, what: str, rerun: str, tail: str = "") -> dict:
    """:func:`one_sided_templates` in English: ``up``/``down`` as ``"key|what every round says"``, ``what`` the
    quantity whose difference this run cannot size."""
    unsure = (": {side} in every round, but in the closest round the difference is only {{least}}, under " + _BAND
              + ": this run cannot tell by how much the " + what + " differs; ")
    return {f"{name}.{up.split('|')[0]}_unsure": head + unsure.format(side=up.split("|")[1]) + rerun + tail,
            f"{name}.{down.split('|')[0]}_unsure": head + unsure.format(side=down.split("|")[1]) + rerun + tail,
            f"{name}.mixed": head + ": the rounds point different ways (some ratios above 1, some below): this "
                             "machine is too busy (or too noisy) to tell which side has the better " + what
                             + " this time; " + rerun + tail}


TEMPLATES_EN = {
    "paged.throughput.faster": _TPS_HEAD_EN + ". Continuous batching is {gain} faster: as soon as an early request "
                               "finishes, a waiting one takes its place in the batch, so each decode forward pass "
                               "computes {cont_batch} sequences on average, against {static_batch} with static "
                               "batching.",
    "paged.throughput.slower": _TPS_HEAD_EN + ". This time continuous batching is {gain} slower: each decode forward "
                               "pass computes {cont_batch} sequences on average (static batching {static_batch}), yet "
                               "the throughput is lower: on this machine, putting more sequences into one step is no "
                               "cheaper than computing them apart (the next sentence shows how a step's time changes "
                               "with the batch).",
    "paged.throughput.same": _TPS_HEAD_EN + ". Combined and in every round they are within " + _BAND + " of each "
                             "other: on this machine neither has the higher throughput.",
    **one_sided_templates_en("paged.throughput", _TPS_HEAD_EN, "faster|continuous batching has the higher throughput",
                             "slower|continuous batching has the lower throughput", "throughput", _RERUN_EN),
    "paged.throughput.unclear": _TPS_HEAD_EN + ": the rounds' ratios do not match the combined one, or neither side "
                                "is ahead by more than " + _BAND + ": this machine is too busy (or too noisy) to tell "
                                "which throughput is higher, or by how much; " + _RERUN_EN,
    "paged.throughput.unmeasured": "This run measured no valid throughput (a total time of 0, or not a number); "
                                   + _RERUN_EN,
    "paged.step_time.flat": _STEPS_HEAD_EN + _STEP_ROUNDS_EN + ", all within ±" + _FLAT + ": about the same. This "
                            "small model's step hardly changes with the batch (on a GPU, where a small model's step "
                            "goes mostly into launching kernels one by one, it looks just like this). So the "
                            "throughput ratio {ratio} is close to " + _STEPS_RATIO_EN + " (within " + _FLAT + "): "
                            "the steps continuous batching saves are its extra throughput.",
    "paged.step_time.grows_little": _STEPS_HEAD_EN + _STEP_ROUNDS_EN + ": in every round the step with the fuller "
                                    "batch is somewhat slower, but by less than " + _BAND + ". The throughput ratio "
                                    "{ratio} is below " + _STEPS_RATIO_EN + ": not all the steps continuous batching "
                                    "saves turn into extra throughput; the extra time each of its steps takes eats "
                                    "part of them (and each new request's prefill is a forward pass of its own).",
    "paged.step_time.grows": _STEPS_HEAD_EN + _STEP_ROUNDS_EN + ", " + _BAND + " or more in every round: the step "
                             "with the fuller batch is clearly slower, so the throughput ratio {ratio} is below "
                             + _STEPS_RATIO_EN + ". On a device where a step's time does not change with the batch "
                             "(this small model on a GPU, for example, where a step goes mostly into launching "
                             "kernels one by one), the throughput ratio comes closer to the step ratio {bound} (each "
                             "new request's prefill is a forward pass of its own, so it usually falls short of "
                             "{bound}).",
    "paged.step_time.rounds_differ": _STEPS_HEAD_EN + _STEP_ROUNDS_EN + ": these figures do not fall in one band "
                                     "(within ±" + _FLAT + ", " + _FLAT + "–" + _BAND + ", " + _BAND + " or more), so "
                                     "this run cannot tell how much slower a step got. The throughput ratio {ratio} is "
                                     "below " + _STEPS_RATIO_EN + "; the gap may come from a slower step, or only from "
                                     "timing noise; " + _RERUN_EN,
    "paged.step_time.rounds_slower": _STEPS_HEAD_EN + _STEP_ROUNDS_EN + ": the step with the fuller batch is slower "
                                     "in every round, but these figures do not fall in one band (within ±" + _FLAT + ", "
                                     + _FLAT + "–" + _BAND + ", " + _BAND + " or more), so this run cannot tell whether "
                                     "a step got somewhat or clearly slower. The throughput ratio {ratio} is below "
                                     + _STEPS_RATIO_EN + ": the slower step eats part of the steps continuous batching "
                                     "saves (and each new request's prefill is a forward pass of its own); to see by "
                                     "how much, " + _RERUN_EN,
    "paged.step_time.unclear": _STEPS_HEAD_EN + _STEP_ROUNDS_EN + "; the ratio of the two schedules' step counts is "
                               "{static_steps} ÷ {cont_steps} = {bound}, the throughput ratio {ratio}: the two do not "
                               "fit together (neither a step about the same with the throughput ratio within " + _FLAT
                               + " of the step ratio, nor a slower step with the throughput ratio below the step "
                               "ratio), so this run cannot tell how a step's time affects the throughput; "
                               + _RERUN_EN,
    "paged.step_time.unmeasured": "The ratio of the two schedules' step counts is {static_steps} ÷ {cont_steps} = "
                                  "{bound} (the same on every machine); this run measured no valid step time, so it "
                                  "cannot tell how a step's time changes with the batch; " + _RERUN_EN,
    "paged.ttft.continuous_shorter": _TTFT_HEAD_EN + _STATIC_WAIT_EN + " and the block pool has blocks, but when the "
                                     "batch is full (at most {max_batch} sequences) or blocks run short, it queues "
                                     "too: of {requests} requests, {cont_waited} could not join in the step they "
                                     "arrived in; they waited {wait_mean} steps on average and {wait_max} at most before "
                                     "joining (the time to first token of all {requests} requests averages "
                                     "{cont_steps} steps, at most {cont_max}), still far shorter than with static "
                                     "batching.",
    "paged.ttft.continuous_shorter_no_wait": _TTFT_HEAD_EN + _STATIC_WAIT_EN + " (at most {max_batch} sequences) and "
                                             "the block pool has blocks: this time, {cont_waited} of the {requests} "
                                             "requests could not join in the step they arrived in (time to first token "
                                             "at most {cont_max} steps).",
    "paged.ttft.static_shorter": _TTFT_HEAD_EN + ": this time static batching has the shorter latency: the requests "
                                 "arrive so sparsely that hardly any of them waits for a whole batch to finish.",
    "paged.ttft.same": _TTFT_HEAD_EN + ": the mean and the tail are both within " + _BAND + "; on this set of "
                       "requests neither has the shorter latency.",
    "paged.ttft.unclear": _TTFT_HEAD_EN + ": in seconds, the mean and the tail point different ways, or disagree with "
                          "the step counts: this machine is too busy to tell this time; " + _RERUN_EN,
    "paged.ttft.unmeasured": _TTFT_STEPS_EN + "; this run measured no valid latency in seconds; " + _RERUN_EN,
    "paged.tpot.slower": _TPOT_HEAD_EN + ": by TPOT, continuous batching is {gain} slower per token. Its batches are "
                         "fuller ({cont_batch} sequences on average against {static_batch}), and new requests' "
                         "prefills share a step with the others' decodes, so a request that is generating waits for "
                         "them too. That is the price of continuous batching; what it buys is in the throughput and "
                         "the time to first token above." + _ITL_EN,
    "paged.tpot.faster": _TPOT_HEAD_EN + ": this time continuous batching is {gain} faster per token, the opposite of "
                         "what its fuller batches ({cont_batch} sequences against {static_batch}) would do: most "
                         "likely the machine was busy and slowed the static batching steps; rerun to see whether it "
                         "holds." + _ITL_EN,
    "paged.tpot.same": _TPOT_HEAD_EN + ": within " + _BAND + " in every round. A few more sequences per batch "
                       "({cont_batch} on average against {static_batch}) hardly slow this small model's step (a small "
                       "model's step on a GPU goes mostly into launching kernels, and behaves the same): continuous "
                       "batching's gains in throughput and time to first token cost almost nothing in per-token "
                       "speed." + _ITL_EN,
    **one_sided_templates_en("paged.tpot", _TPOT_HEAD_EN, "slower|continuous batching is slower per token",
                             "faster|continuous batching is faster per token", "time per token", _RERUN_EN, _ITL_EN),
    "paged.tpot.unclear": _TPOT_HEAD_EN + ": the rounds' ratios do not match the combined one, or neither side is "
                          "ahead by more than " + _BAND + ": this machine is too busy to tell which is faster per "
                          "token, or by how much; " + _RERUN_EN + _ITL_EN,
    "paged.tpot.unmeasured": "This run measured no valid time per output token (TPOT) (no request generated two "
                             "tokens or more, or the timing was 0); " + _RERUN_EN,
}
