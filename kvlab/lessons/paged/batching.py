"""Static against continuous batching on the same requests, timed in alternating rounds, and the sentences
that say what the numbers show (a decision band, a "cannot tell" branch, the GPU's shape)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..._validate import positive_int
from ...measure import alternate, device_label, measurement_threads, torch_threads
from ...stats import cumulative
from ...model import ToyTransformer
from ...serving import Request, ServeRun, quantile, serve
from .runs import BLOCK_SIZE, MAX_BATCH

BAND = 0.15  # a ratio within 1 ± 15 % is "no clear difference"
MAX_ROUNDS = 5  # each round serves the workload once per policy


@dataclass(frozen=True)
class BatchingComparison:
    """The same requests served under both policies in ``rounds`` alternating rounds (one pool size for both).

    The step clock makes every round of a policy take the same steps, so each step's time is taken as its
    fastest round (a burst of load on a busy machine spoils one round of a step, rarely all of them); the
    tokens/s and TTFT below come from those times. Each round's own ratio is kept to check that the rounds agree.
    """

    runs: dict[str, list[ServeRun]]  # policy -> one run per round
    device: str
    threads: int | None
    where: str  # measure.device_label: what every readout says about the device

    def first(self, policy: str) -> ServeRun:
        """The first round's run (the timeline figure draws it; the schedule is the same in every round)."""
        return self.runs[policy][0]

    def step_seconds(self, policy: str) -> list[float]:
        """Each step's fastest time over the rounds."""
        return [min(r.steps[i].seconds for r in self.runs[policy]) for i in range(len(self.first(policy).steps))]

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

    def ttfts(self, policy: str) -> list[float]:
        """Each request's time to first token in seconds, on the fastest step times."""
        run, seconds = self.first(policy), self.step_seconds(policy)
        start = dict(zip((s.step for s in run.steps), cumulative([0.0] + seconds[:-1])))
        end = dict(zip((s.step for s in run.steps), cumulative(seconds)))
        return [end[o.first_token] - start[o.request.arrival] for o in run.outcomes]

    def ttft_mean(self, policy: str) -> float:
        return sum(self.ttfts(policy)) / len(self.ttfts(policy))

    def ttft_tail(self, policy: str, q: float = 0.9) -> float:
        return quantile(self.ttfts(policy), q)

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
    """Serve ``requests`` under static and continuous batching, alternating, after a short warm-up of each."""
    rounds = positive_int("rounds", rounds, maximum=MAX_ROUNDS)
    runners = {p: (lambda p=p: serve(model, requests, p, max_batch=max_batch, block_size=block_size))
               for p in ("static", "continuous")}
    warm = {p: (lambda p=p: serve(model, requests[:2], p, max_batch=max_batch, block_size=block_size))
            for p in runners}
    cpu = model.device.type == "cpu"
    threads = measurement_threads() if cpu else None
    with torch_threads(threads or torch.get_num_threads()):
        runs = alternate(runners, rounds, warmup=warm)
    return BatchingComparison(runs, str(model.device), threads, device_label(model.device, threads))


# -- the sentences --------------------------------------------------------------------------------------------
def throughput_sentence(ratio: float, round_ratios: list[float], static_tps: float, continuous_tps: float,
                        static_batch: float, continuous_batch: float, gpu: bool, static_steps: int,
                        continuous_steps: int) -> str:
    """What the measured tokens/s say: a verdict beyond the ±15 % band only when every round points the same way."""
    head = (f"吞吐：连续批处理每秒 {continuous_tps:,.0f} 个 token，静态批处理 {static_tps:,.0f} 个（每一步取 "
            f"{len(round_ratios)} 轮里最快的一次）：比值 {ratio:.2f}；每一轮单独算的比值 "
            + "、".join(f"{r:.2f}" for r in round_ratios) + "。"
            f"解码时一批平均 {continuous_batch:.1f} 条序列，静态批处理 {static_batch:.1f} 条")
    if ratio >= 1 + BAND and min(round_ratios) > 1:
        tail = (f"：连续批处理快了 {ratio - 1:.0%}。走得早的请求一结束，等待的请求就补进批次，"
                "每次解码前向都算更多条序列。")
    elif ratio <= 1 / (1 + BAND) and max(round_ratios) < 1:
        tail = (f"：这一次连续批处理反而慢了 {1 - ratio:.0%}。它的批次更满，而在这台机器上一步的耗时"
                "随批次增长得几乎和批次一样快：算更多条序列并不比分开算便宜。")
    elif abs(ratio - 1) < BAND:
        tail = f"：相差不到 {BAND:.0%}，在这台机器上分不出哪种吞吐更高。"
    else:
        tail = "：几轮的结论不一致，这台机器太忙（或太吵），这次说不准哪种吞吐更高。"
    return head + tail + _gpu_note(gpu, static_steps, continuous_steps)


def _gpu_note(gpu: bool, static_steps: int, continuous_steps: int) -> str:
    """On a launch-bound device every step takes about the same time, so the throughput ratio tends to the ratio
    of the two schedules' step counts (the same on every machine)."""
    bound = static_steps / continuous_steps
    if gpu:
        return (f"（这是在 GPU 上测的：演示模型这么小，一步的耗时几乎不随批次变化，吞吐之比接近两种调度的步数之比 "
                f"{static_steps} ÷ {continuous_steps} = {bound:.2f}。）")
    return ("（在 GPU 上，演示模型的一步几乎不随批次变慢：一步的时间主要花在逐个启动内核上，每一步的时间差不多，"
            f"吞吐之比就接近两种调度的步数之比 {static_steps} ÷ {continuous_steps} = {bound:.2f}。）")


def ttft_sentence(static_steps: float, continuous_steps: float, static_mean: float, continuous_mean: float,
                  static_tail: float, continuous_tail: float) -> str:
    """Time to first token, on the step clock (the same on every machine) and in measured seconds."""
    text = (f"首 token 延迟（TTFT）：按步数平均，静态批处理 {static_steps:.1f} 步，连续批处理 {continuous_steps:.1f} 步"
            f"（步数由调度决定，每台机器都一样）。按秒：平均 {static_mean * 1e3:,.0f} ms 对 {continuous_mean * 1e3:,.0f} ms，"
            f"90% 分位 {static_tail * 1e3:,.0f} ms 对 {continuous_tail * 1e3:,.0f} ms")
    if continuous_tail * (1 + BAND) <= static_tail and continuous_mean * (1 + BAND) <= static_mean:
        return text + ("：静态批处理里，批次跑起来之后到达的请求要等整批最长的那条写完才能开始，所以尾部延迟最长；"
                       "连续批处理在下一个步的边界就让它们加入。")
    if static_tail * (1 + BAND) <= continuous_tail and static_mean * (1 + BAND) <= continuous_mean:
        return text + "：这一次静态批处理的延迟反而更短：请求来得太稀，几乎没有请求需要等整批结束。"
    return text + f"：两者的平均或尾部相差不到 {BAND:.0%}，或者方向不一致，这组请求上分不出哪种延迟更短。"


def tpot_sentence(static_tpot: float, continuous_tpot: float, round_ratios: list[float], static_itl_tail: float,
                  continuous_itl_tail: float, static_batch: float, continuous_batch: float, gpu: bool) -> str:
    """Time per output token (TPOT) and the inter-token latency's tail (ITL): what continuous batching costs each
    running request, with a ±15 % band, a "rounds disagree" branch and the GPU's launch-bound shape."""
    ratio = continuous_tpot / static_tpot
    text = (f"每个 token 的时间（TPOT）：平均静态批处理 {static_tpot * 1e3:.1f} ms，连续批处理 {continuous_tpot * 1e3:.1f} ms"
            f"（比值 {ratio:.2f}；每一轮单独算 " + "、".join(f"{r:.2f}" for r in round_ratios) + "）")
    itl = (f"（另看尾部：token 间延迟（ITL）的 90% 分位，静态批处理 {static_itl_tail * 1e3:.1f} ms，"
           f"连续批处理 {continuous_itl_tail * 1e3:.1f} ms。）")
    if ratio >= 1 + BAND and min(round_ratios) > 1:
        return text + (f"：按 TPOT，连续批处理每个 token 慢了 {ratio - 1:.0%}。它的批次更满（平均 {continuous_batch:.1f} 条对 "
                       f"{static_batch:.1f} 条），在这台机器上一步随批次变慢；新请求的预填充也和别人的解码挤在同一步里，"
                       "正在生成的请求要多等这一下。这是连续批处理付出的代价，它换来的是什么，见上面的吞吐和首 token 延迟。") + itl
    if ratio <= 1 / (1 + BAND) and max(round_ratios) < 1:
        return text + (f"：这一次连续批处理每个 token 反而快了 {1 - ratio:.0%}，与它更满的批次（{continuous_batch:.1f} 条对 "
                       f"{static_batch:.1f} 条）方向相反：多半是机器忙，静态批处理那一段的步被拖慢了。") + itl
    if abs(ratio - 1) < BAND and all(abs(r - 1) < BAND for r in round_ratios):
        why = ("GPU 上小模型的一步主要花在启动内核上，批次多几条序列，一步几乎不变" if gpu else
               "批次多几条序列，这个小模型的一步几乎不变慢")
        return text + f"：相差不到 {BAND:.0%}。{why}：连续批处理在吞吐和首 token 延迟上的变化（见上面）几乎不用拿每个 token 的速度来换。" + itl
    return text + "：几轮的结论不一致，这台机器太忙，这次说不准哪种每个 token 更快。" + itl


def batching_sentences(c: BatchingComparison) -> list[str]:
    """The three sentences of the comparison (throughput, TTFT, TPOT/ITL), chosen from its numbers."""
    static, cont = c.first("static"), c.first("continuous")
    gpu = c.device.startswith("cuda")
    return [throughput_sentence(c.throughput_ratio, c.round_ratios, c.tokens_per_second("static"),
                                c.tokens_per_second("continuous"), static.mean_batch, cont.mean_batch, gpu,
                                len(static.steps), len(cont.steps)),
            ttft_sentence(static.ttft_steps_mean, cont.ttft_steps_mean, c.ttft_mean("static"),
                          c.ttft_mean("continuous"), c.ttft_tail("static"), c.ttft_tail("continuous")),
            tpot_sentence(c.tpot_mean("static"), c.tpot_mean("continuous"), c.tpot_round_ratios,
                          quantile(c.itls("static"), 0.9), quantile(c.itls("continuous"), 0.9),
                          static.mean_batch, cont.mean_batch, gpu)]
