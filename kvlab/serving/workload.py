"""The requests a serving engine takes: :class:`Request`, the seeded :class:`Workload`, and the checks every
request passes once, when it enters :func:`kvlab.serving.serve` (nothing is checked again inside a timed step)."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

from .._validate import non_negative_int, number_in, positive_int, seed_value, token_ids
from ..memory import stored_tokens
from ..model import ToyTransformer
from ..paging import blocks_for

POLICIES = ("static", "continuous")
MAX_REQUESTS = 256  # a workload's size bound: its time is at most this many generations of the model's context
MAX_MEAN_GAP = 1e6  # steps between arrivals on average, at most (past ~1e16, 1 - 1/(1 + gap) rounds to 1: no draw)
MAX_MEDIAN = 10**6  # tokens: a median prompt or answer length, at most (far past any context; lengths are clipped)
MAX_SIGMA = 10.0  # a log-normal length's spread at most: exp(log(median) + sigma * z) stays a float


@dataclass(frozen=True)
class Request:
    """One request: its id, the step it arrives at, its prompt's token ids and how many tokens it wants."""

    rid: int
    arrival: int
    prompt: tuple[int, ...]
    max_new_tokens: int

    @property
    def peak_tokens(self) -> int:
        """Tokens it holds in the cache at its longest: the last new token is never fed back."""
        return stored_tokens(len(self.prompt), self.max_new_tokens)


@dataclass(frozen=True)
class Workload:
    """A seeded mix of requests (made up, not measured traffic): prompt and answer lengths log-normal
    around their medians, gaps between arrivals geometric with mean ``mean_gap`` steps (arrivals at
    random steps, ``mean_gap`` apart on average). Prompts are slices of a text's token ids."""

    count: int = 24
    mean_gap: float = 2.0
    prompt_median: int = 24
    prompt_sigma: float = 0.6
    new_median: int = 24
    new_sigma: float = 0.6
    seed: int = 0

    def __post_init__(self):
        """Every field checked once, here: a ValueError names it and the values it accepts."""
        checked = {"count": number_in("count", self.count, 1, MAX_REQUESTS, whole=True),
                   "mean_gap": number_in("mean_gap", self.mean_gap, 0.0, MAX_MEAN_GAP),
                   "prompt_median": number_in("prompt_median", self.prompt_median, 1, MAX_MEDIAN, whole=True),
                   "prompt_sigma": number_in("prompt_sigma", self.prompt_sigma, 0.0, MAX_SIGMA),
                   "new_median": number_in("new_median", self.new_median, 1, MAX_MEDIAN, whole=True),
                   "new_sigma": number_in("new_sigma", self.new_sigma, 0.0, MAX_SIGMA),
                   "seed": seed_value("seed", self.seed)}
        for name, value in checked.items():
            object.__setattr__(self, name, value)  # frozen: plain ints and floats from here on

    def requests(self, text_ids, context: int) -> list[Request]:
        """``count`` requests whose prompt + answer fit in ``context`` tokens; the same ones for the same seed."""
        context = positive_int("context", context)
        ids = list(text_ids)
        if len(ids) < 2:
            raise ValueError("text_ids: need a text of at least 2 tokens to cut prompts from")
        rng = random.Random(self.seed)
        out, clock = [], 0
        for rid in range(self.count):
            if rid:
                clock += _geometric(rng, self.mean_gap)
            p = _lognormal(rng, self.prompt_median, self.prompt_sigma, 1, min(len(ids), context - 1))
            n = _lognormal(rng, self.new_median, self.new_sigma, 1, context - p)
            start = rng.randrange(len(ids) - p + 1)
            out.append(Request(rid, clock, tuple(ids[start:start + p]), n))
        return out


def _lognormal(rng: random.Random, med: float, sigma: float, low: int, high: int) -> int:
    return min(high, max(low, round(rng.lognormvariate(math.log(med), sigma))))


def _geometric(rng: random.Random, mean: float) -> int:
    """Steps until the next arrival: 0, 1, 2, ... with mean ``mean`` in [0, MAX_MEAN_GAP] (0 = same step)."""
    p = 1 / (1 + mean)
    if p == 1:  # mean 0, or too small to tell from 0
        return 0
    return int(math.log(1 - rng.random()) / math.log(1 - p))


def default_pool_blocks(requests: list[Request], max_batch: int, block_size: int) -> int:
    """Enough blocks for the ``max_batch`` longest requests at their longest (no preemption needed)."""
    need = sorted((blocks_for(r.peak_tokens, block_size) for r in requests), reverse=True)
    return max(1, sum(need[:max_batch]))


def check_requests(requests, model: ToyTransformer) -> list[Request]:
    """``requests`` as a list ordered by (arrival, rid), each fitting the model (prompts checked as ``generate``
    checks its own)."""
    if not isinstance(requests, (list, tuple)) or not requests:
        raise ValueError("requests must be a non-empty list of Request")
    if len(requests) > MAX_REQUESTS:
        raise ValueError(f"requests: at most {MAX_REQUESTS} requests, got {len(requests)}")
    seen = set()
    for r in requests:
        if not isinstance(r, Request):
            raise ValueError(f"requests must hold Request objects, got {type(r).__name__}")
        if r.rid in seen:
            raise ValueError(f"requests: rid {r.rid} appears twice")
        seen.add(r.rid)
        non_negative_int(f"requests: request {r.rid}'s arrival", r.arrival)
        positive_int(f"requests: request {r.rid}'s max_new_tokens", r.max_new_tokens)
        prompt = f"requests: request {r.rid}'s prompt"
        model.check_ids(torch.tensor([token_ids(prompt, r.prompt)]), name=prompt)  # generate's two checks
        if r.peak_tokens > model.config.max_seq_len:
            raise ValueError(f"requests: request {r.rid} needs {r.peak_tokens} tokens, past the model's "
                             f"max_seq_len ({model.config.max_seq_len})")
    return sorted(requests, key=lambda r: (r.arrival, r.rid))


def check_pool(requests: list[Request], num_blocks, block_size: int) -> int:
    """``num_blocks`` as an ``int`` if each of the (checked) ``requests`` alone fits a pool of that many blocks."""
    num_blocks = positive_int("num_blocks", num_blocks)
    for r in requests:
        need = blocks_for(r.peak_tokens, block_size)
        if need > num_blocks:
            raise ValueError(f"num_blocks: request {r.rid} alone needs {need} blocks of {block_size} tokens, "
                             f"but the pool has {num_blocks}")
    return num_blocks
