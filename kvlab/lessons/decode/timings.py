"""Chapter 3.1's timings (what runs and measures): the random-weight timing model, decode timed without and
with a cache (alternating, after a warm-up), the long cached run, robust straight-line fits of step time against
t or FLOPs (Theil-Sen over binned medians), the measured medians of each eighth of a run's steps (:class:`StepEnds`,
what the claims quote), and the counted crossover where attention's t² term overtakes the linear terms."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..._validate import positive_int
from ...claims import ratio
from ...config import ModelConfig
from ...costs import attention_crossover, attention_flops, linear_flops_per_token, pass_cost
from ...measure import DecodeTiming, time_generate
from ...stats import median
from ...model import ToyTransformer


def timing_model(device=None, seed: int = 0) -> ToyTransformer:
    """A random-weight model big enough that decode cost visibly grows with t on a CPU."""
    config = ModelConfig(vocab_size=4096, d_model=256, n_layer=4, n_head=4, max_seq_len=2048)
    model = ToyTransformer(config, seed=seed).eval()
    return model.to(device) if device is not None else model


def measure_decode_latency(model: ToyTransformer, new_tokens: int, repeats: int = 1, prompt_len: int = 4,
                           seed: int = 0, progress: bool = True) -> dict[str, DecodeTiming]:
    """Time ``new_tokens`` tokens without ("none") and with ("kv") a cache, alternating, after a warm-up."""
    new_tokens = positive_int("new_tokens", new_tokens)
    prompt_len = positive_int("prompt_len", prompt_len)
    if prompt_len + new_tokens > model.config.max_seq_len:
        raise ValueError(f"new_tokens: prompt_len ({prompt_len}) + new_tokens ({new_tokens}) passes the model's "
                         f"max_seq_len ({model.config.max_seq_len})")
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, model.config.vocab_size, (1, prompt_len), generator=gen)
    return time_generate(model, prompt, new_tokens, ("none", "kv"), repeats=repeats, progress=progress)


def _binned_medians(xs, ys, bins: int = 32) -> tuple[list[float], list[float]]:
    """Median x and median y of consecutive chunks: one timer spike cannot pull a fit through it."""
    size = max(1, len(xs) // bins)
    chunks = [(xs[i:i + size], ys[i:i + size]) for i in range(0, len(xs), size)]
    return [median(x) for x, _ in chunks], [median(y) for _, y in chunks]


def theil_sen(xs, ys) -> tuple[float, float]:
    """Robust straight line y = a + b x: b the median of pairwise slopes, a the median of y - b x."""
    slopes = [(ys[j] - ys[i]) / (xs[j] - xs[i]) for i in range(len(xs)) for j in range(i + 1, len(xs))
              if xs[j] != xs[i]]
    if not slopes:
        raise ValueError("xs: needs at least two different values to fit a line")
    b = median(slopes)
    return median(y - b * x for x, y in zip(xs, ys)), b


@dataclass
class StepFit:
    """Decode step time as a fixed cost plus a part proportional to ``work(t)`` (robust fit over binned medians).

    For a cached step ``work(t) = t`` (the K/V it reads); for an uncached one, the pass's FLOPs.
    """

    t: list[int]
    step_ms: list[float]
    fixed_ms: float  # the line's intercept: drawn, never printed as a step time (explain_* quote measured medians)
    slope_ms: float  # ms per unit of work
    work: list[float]  # work(t) at each measured t

    @property
    def fit_ms(self) -> list[float]:
        """The fitted line at each measured t (drawn over the points; never quoted as a time)."""
        return [self.fixed_ms + self.slope_ms * w for w in self.work]


def fit_step_time(timing: DecodeTiming, work=None) -> StepFit:
    """Fit ``fixed + slope * work(t)`` to the decode passes of a timed generation (``work`` default: t)."""
    t, ms = timing.seq_len[1:], [s * 1e3 for s in timing.step_seconds[1:]]
    if len(t) < 2:
        raise ValueError("timing: needs at least 2 decode passes to fit a line")
    w = [float(x) if work is None else float(work(x)) for x in t]
    a, b = theil_sen(*_binned_medians(w, ms))
    return StepFit(list(t), ms, a, b, w)


def uncached_flops(config: ModelConfig):
    """FLOPs of one uncached pass over t tokens: linear terms plus attention's t² (``kvlab.costs``)."""
    return lambda t: t * linear_flops_per_token(config) + attention_flops(config, t)


def generation_flops(config: ModelConfig, timing: DecodeTiming) -> int:
    """FLOPs of a timed run's whole generation (``kvlab.costs.pass_cost``), pass by pass from its trace: each pass
    feeds the tokens it projected K/V for (``k_tokens``) after the rest of its length, cached."""
    if len(timing.k_tokens) != len(timing.seq_len) or not timing.k_tokens:
        raise ValueError("timing: needs the trace's K/V projections (k_tokens), one per pass")
    return sum(pass_cost(config, k, t - k).flops for k, t in zip(timing.k_tokens, timing.seq_len))


@dataclass(frozen=True)
class StepEnds:
    """Measured medians of a run's decode steps: of each eighth of them in order of t, and of all of them; t0 and
    t1 are the median t of the first and the last eighth, ``eighths_t`` that of each eighth."""

    t0: int
    t1: int
    eighths_ms: tuple[float, ...]
    median_ms: float
    eighths_t: tuple[int, ...] = ()
    by_medians_ms: float = float("nan")  # the steps' time by medians: each eighth's steps x its median (no stalls)

    @property
    def first_ms(self) -> float:
        return self.eighths_ms[0]

    @property
    def last_ms(self) -> float:
        return self.eighths_ms[-1]

    @property
    def share(self) -> float:
        """Share of the last steps' time that the first steps did not need (what grew with t)."""
        return ratio(self.last_ms - self.first_ms, self.last_ms)

    @property
    def slope_ms(self) -> float:
        """ms per token between the first and the last eighth."""
        return ratio(self.last_ms - self.first_ms, self.t1 - self.t0)

    def without(self, i: int) -> "StepEnds":
        """The same run read without its eighth ``i`` (a lone outlier): the other eighths, their ends and t; the
        median of all steps and the total by medians stay the run's."""
        if not 0 <= i < len(self.eighths_ms) or len(self.eighths_ms) < 3:
            raise ValueError(f"i: needs an eighth of at least 3 to leave out, got {i} of {len(self.eighths_ms)}")
        eighths = self.eighths_ms[:i] + self.eighths_ms[i + 1:]
        at = self.eighths_t[:i] + self.eighths_t[i + 1:] if self.eighths_t else ()
        return StepEnds(at[0] if at else self.t0, at[-1] if at else self.t1, eighths, self.median_ms, at,
                        self.by_medians_ms)


def step_ends(t, ms) -> StepEnds:
    """:class:`StepEnds` of decode steps at lengths ``t`` taking ``ms`` milliseconds each."""
    if not t or len(t) != len(ms):
        raise ValueError(f"t, ms: need as many (at least one) step times as lengths, got {len(t)} and {len(ms)}")
    cuts = [round(i * len(t) / 8) for i in range(9)]
    parts = [(t[a:b], ms[a:b]) for a, b in zip(cuts, cuts[1:]) if b > a]
    eighths = tuple(median(m) for _, m in parts)
    at = tuple(round(median(x)) for x, _ in parts)
    if len(eighths) == 1:  # one step: a series of two equal medians
        eighths, at = eighths * 2, at * 2
    return StepEnds(at[0], at[-1], eighths, median(ms), at, sum(len(m) * median(m) for _, m in parts))


def steps_between(t, ms, lo: int, hi: int) -> list[float]:
    """The step times ``ms`` of the steps whose length t is within [lo, hi]."""
    return [m for x, m in zip(t, ms) if lo <= x <= hi]


def timing_ends(timing: DecodeTiming) -> StepEnds:
    """:func:`step_ends` of a timed generation's decode passes (the prefill left out)."""
    return step_ends(timing.seq_len[1:], [s * 1e3 for s in timing.step_seconds[1:]])


def cached_step_growth(model: ToyTransformer, new_tokens: int = 1024, prompt_len: int = 4,
                       repeats: int = 2) -> StepFit:
    """A long generation with a cache only, ``repeats`` times: how fast does the step time grow with t?"""
    new_tokens = positive_int("new_tokens", new_tokens)
    if prompt_len + new_tokens > model.config.max_seq_len:
        raise ValueError(f"new_tokens: prompt_len ({prompt_len}) + new_tokens ({new_tokens}) passes the model's "
                         f"max_seq_len ({model.config.max_seq_len})")
    prompt = torch.randint(0, model.config.vocab_size, (1, prompt_len), generator=torch.Generator().manual_seed(1))
    return fit_step_time(time_generate(model, prompt, new_tokens, ("kv",), repeats=repeats)["kv"])


def crossover_length(model: ToyTransformer) -> int:
    """Where attention's t² term overtakes the linear terms in an uncached pass (see ``kvlab.costs``)."""
    return attention_crossover(model.config)
