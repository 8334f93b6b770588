"""Measurement, in one place: synchronised timers, warm-up and alternating repeats, this machine's
memory read bandwidth and matmul FLOP rate (its two roofs, :class:`Roofs`, and the model 3.3 measures them for), the
work of a generation counted from its traces (:func:`count_projections`), and
:class:`DecodeTiming`, the one result format for timed generations that the lessons, the
plot builders and ``python -m kvlab.bench`` all read.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from functools import wraps
from dataclasses import dataclass, field
from typing import Callable

import torch

from ._validate import positive_int
from .config import ModelConfig
from .device import synchronize
from .generation import generate
from .model import ToyTransformer
from .phrases import Phrasebook
from .resources import cpu_budget, user_threads
from .stats import cumulative, growth_exponent, median

# What the readouts say about how a number was measured, in the course's language when they say it.
MEASURE = Phrasebook("measure", {
    "zh": {
        "threads_set": "按 {source}={value}",
        "budget": "本进程可用 {cores} 核，来自 {source}",
        "budget_one": "本进程可用 {cores} 核，来自 {source}",
        "leave_a_core": "{budget}；留一核给浏览器和 Jupyter",
        "cpu": "cpu，计时用 {threads} 个线程（{source}）",
        "cpu_one": "cpu，计时用 {threads} 个线程（{source}）",
        "measuring": "测量中",
        "read_bandwidth": "对 {mib:.0f} MiB 的 float32 数组求和",
        "matmul": "{n}×{n} 的 {dtype} 矩阵乘",
    },
    "en": {
        "threads_set": "as {source}={value} says",
        "budget": "{cores} cores available to this process, from {source}",
        "budget_one": "{cores} core available to this process, from {source}",
        "leave_a_core": "{budget}; one core left for the browser and Jupyter",
        "cpu": "CPU, timed on {threads} threads ({source})",
        "cpu_one": "CPU, timed on {threads} thread ({source})",
        "measuring": "Measuring",
        "read_bandwidth": "summing a {mib:.0f} MiB float32 array",
        "matmul": "a {n}×{n} {dtype} matmul",
    },
})


# -- threads and timers ------------------------------------------------------------------------
def measurement_threads() -> int:
    """Threads for timings taken inside a notebook: the process's CPU budget less one core, or the count the
    user set (``KVLAB_THREADS``, ``OMP_NUM_THREADS``); see :mod:`kvlab.resources`.

    The browser and the Jupyter server need a core too; when a multi-threaded kernel has to
    share its cores, threads wait on each other at every operation and the timings stop
    meaning anything (on a 2-core machine a run took 4x to 50x longer).
    """
    budget = cpu_budget()
    n = budget.value if user_threads() is not None else budget.value - 1
    return max(1, min(torch.get_num_threads(), n))


def threads_source() -> str:
    """Where the timing thread count comes from, for the readouts, e.g. 「本进程可用 2 核，来自 CPU 亲和性；留一核给浏览器和
    Jupyter」 or 「按 KVLAB_THREADS=4」 (in English: "2 cores available to this process, from CPU affinity; one core
    left for the browser and Jupyter", "as KVLAB_THREADS=4 says")."""
    budget, user = cpu_budget(), user_threads()
    if user is not None and user.value == budget.value:
        return MEASURE.say("threads_set", source=user.source, value=user.value)
    text = MEASURE.say("budget_one" if budget.value == 1 else "budget", cores=budget.value, source=budget.source)
    return text if user is not None or budget.value == 1 else MEASURE.say("leave_a_core", budget=text)


@contextmanager
def torch_threads(n: int):
    """Run the block with ``torch.set_num_threads(n)``, restoring the previous count after."""
    before = torch.get_num_threads()
    torch.set_num_threads(positive_int("n", n))
    try:
        yield n
    finally:
        torch.set_num_threads(before)


def leave_a_core(fn):
    """Run ``fn`` on :func:`measurement_threads` CPU threads: the demo model gains nothing from a second thread,
    and a thread that has to share its core with the browser makes every step wait for it."""
    @wraps(fn)
    def wrapper(*args, **kwargs):
        with torch_threads(measurement_threads()):
            return fn(*args, **kwargs)
    return wrapper


def timed(fn: Callable[[], object], device) -> tuple[object, float]:
    """Run ``fn()`` between two device synchronisations: ``(its result, seconds)``."""
    synchronize(device)
    t0 = time.perf_counter()
    out = fn()
    synchronize(device)
    return out, time.perf_counter() - t0


def alternate(runners: dict[str, Callable[[], object]], repeats: int, warmup: dict | None = None,
              progress: bool = False, desc: str | None = None) -> dict[str, list]:
    """Run every runner ``repeats`` times, interleaved, after one warm-up call each.

    Round r starts at runner r (rotating), so no runner always runs first on a warm or cold
    machine. ``warmup`` maps a name to a cheaper callable for its warm-up (default: the runner). ``desc``: the
    progress bar's label (default 「测量中」, Measuring, in the course's language).
    Returns ``{name: [result of each repeat]}``.
    """
    from tqdm.auto import tqdm

    desc = MEASURE.say("measuring") if desc is None else desc
    repeats = positive_int("repeats", repeats)
    names = list(runners)
    for name in names:  # allocator, kernels, caches
        (warmup or {}).get(name, runners[name])()
    out = {name: [] for name in names}
    with tqdm(total=repeats * len(names), desc=desc, disable=not progress, leave=False) as bar:
        for r in range(repeats):
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:
                out[name].append(runners[name]())
                bar.update()
    return out


def device_label(device, threads: int | None = None) -> str:
    """Which device produced a number, for every readout: "cpu，计时用 3 个线程" ("CPU, timed on 3 threads") or
    the GPU's name.

    ``threads``: the CPU threads of the timing (default: :func:`measurement_threads`)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return f"{torch.cuda.get_device_name(dev)} GPU"
    if dev.type == "cpu":
        n = threads or measurement_threads()
        return MEASURE.say("cpu_one" if n == 1 else "cpu", threads=n, source=threads_source())
    return str(dev)


# -- this machine's roofs -----------------------------------------------------------------------
@dataclass
class Rate:
    """A measured rate (bytes/s or FLOP/s): the best run is the roof, the median the typical value."""

    best: float
    median: float
    runs: list[float]
    what: str  # how it was measured, for the readout (in the course's language when it was measured)

    @property
    def best_g(self) -> float:
        """The best rate in units of 10^9 per second (GB/s or GFLOP/s)."""
        return self.best / 1e9


def measure_read_bandwidth(device, nbytes: int = 256 * 2**20, repeats: int = 7) -> Rate:
    """Rate of reading a float32 buffer far larger than the CPU caches (bytes/s).

    A sum reads every byte once and writes almost nothing, which is the access pattern of
    a decode step streaming its weights.
    """
    dev = torch.device(device)
    buf = torch.ones(positive_int("nbytes", nbytes) // 4, dtype=torch.float32, device=dev)
    buf.sum()  # warm-up
    runs = [nbytes / timed(buf.sum, dev)[1] for _ in range(positive_int("repeats", repeats))]
    del buf
    return Rate(max(runs), median(runs), runs, MEASURE.say("read_bandwidth", mib=nbytes / 2**20))


def measure_matmul_flops(device, n: int = 1024, repeats: int = 5, dtype=torch.float32) -> Rate:
    """Rate of an n x n by n x n matmul (2 n^3 FLOPs), the compute roof of a prefill pass (FLOP/s)."""
    dev = torch.device(device)
    n = positive_int("n", n)
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    a @ b  # warm-up
    runs = [2 * n**3 / timed(lambda: a @ b, dev)[1] for _ in range(positive_int("repeats", repeats))]
    return Rate(max(runs), median(runs), runs, MEASURE.say("matmul", n=n, dtype=str(dtype).removeprefix("torch.")))


# -- timed generations ---------------------------------------------------------------------------
@dataclass
class DecodeTiming:
    """Repeated runs of one way of generating (a cache mode, or transformers), alternated with the others.

    Per pass (prefill first, then one decode pass per further token) and per repeat; the
    properties summarise them with medians, so one noisy repeat does not move the result.
    """

    name: str
    seq_len: list[int]  # tokens per sequence after each pass
    pass_seconds: list[list[float]]  # [repeat][pass]
    wall_seconds: list[float]  # [repeat]: the whole generation, end to end
    batch_size: int
    new_tokens: int
    tokens: torch.Tensor  # [B, prompt + new] of the first repeat
    k_tokens: list[int] = field(default_factory=list)  # per pass: tokens whose K was projected
    v_tokens: list[int] = field(default_factory=list)
    cache_bytes: list[int] = field(default_factory=list)  # per pass: bytes of the filled cache

    @classmethod
    def from_generations(cls, name: str, runs) -> "DecodeTiming":
        """From ``[(GenerationResult, wall seconds), ...]``, one per repeat."""
        first = runs[0][0]
        return cls(
            name=name, seq_len=[r.seq_len for r in first.trace],
            pass_seconds=[[r.seconds for r in res.trace] for res, _ in runs],
            wall_seconds=[wall for _, wall in runs], batch_size=first.tokens.shape[0],
            new_tokens=first.new_tokens.shape[1], tokens=first.tokens,
            k_tokens=[r.k_tokens for r in first.trace], v_tokens=[r.v_tokens for r in first.trace],
            cache_bytes=[r.cache_bytes for r in first.trace],
        )

    @property
    def step_seconds(self) -> list[float]:
        """Median over repeats of each pass's time."""
        return [median(col) for col in zip(*self.pass_seconds)]

    @property
    def cumulative_seconds(self) -> list[float]:
        return cumulative(self.step_seconds)

    @property
    def step_exponent(self) -> float:
        """Growth exponent of the decode step time over the second half of the run (fixed costs fade there)."""
        t, s = self.seq_len[1:], self.step_seconds[1:]
        half = len(t) // 2
        return growth_exponent(t[half:], s[half:])

    @property
    def cumulative_exponent(self) -> float:
        """Growth exponent of the total time against the number of tokens generated so far."""
        cum = self.cumulative_seconds
        return growth_exponent(range(1, len(cum) + 1), cum)

    @property
    def tokens_per_s(self) -> float:
        """Generated tokens per second of wall time, all sequences together (median repeat)."""
        return self.batch_size * self.new_tokens / median(self.wall_seconds)

    @property
    def tokens_per_s_range(self) -> tuple[float, float]:
        return (self.batch_size * self.new_tokens / max(self.wall_seconds),
                self.batch_size * self.new_tokens / min(self.wall_seconds))

    @property
    def ttft_seconds(self) -> float:
        """Time to first token: the prefill pass (median over repeats)."""
        return median(p[0] for p in self.pass_seconds)

    @property
    def decode_step_seconds(self) -> float:
        """Mean decode pass of each repeat ((wall - first pass) / (new - 1)), median over repeats."""
        n = max(1, self.new_tokens - 1)
        return median((w - p[0]) / n for w, p in zip(self.wall_seconds, self.pass_seconds))


def time_generate(model, prompt, new_tokens: int, modes, repeats: int = 1, progress: bool = False,
                  threads: int | None = None) -> dict[str, DecodeTiming]:
    """Time ``generate`` in each cache mode on the same prompt, alternating the modes after a warm-up.

    ``threads`` (default: :func:`measurement_threads`) leaves a core for the browser in a notebook.
    """
    new_tokens = positive_int("new_tokens", new_tokens)

    runners = {m: (lambda m=m: timed(lambda: generate(model, prompt, new_tokens, cache=m), model.device))
               for m in modes}
    warm = {m: (lambda m=m: generate(model, prompt, min(8, new_tokens), cache=m)) for m in modes}
    with torch_threads(threads or measurement_threads()):
        runs = alternate(runners, repeats, warmup=warm, progress=progress)
    return {mode: DecodeTiming.from_generations(mode, reps) for mode, reps in runs.items()}


# -- this machine's roofs (3.3 and its exercise 3.3-1) ------------------------------------------------------
# The roofline model: 8 layers, d_model 512, fp32 weights of 114 MiB (exercise 3.3-1 uses the same config)
ROOFLINE_CONFIG = ModelConfig(vocab_size=4096, d_model=512, n_layer=8, n_head=8, d_ff=1408, max_seq_len=1024)


@dataclass
class Roofs:
    """This machine's two roofs: memory read bandwidth (bytes/s) and matmul rate (FLOP/s)."""

    bandwidth: Rate
    flops: Rate
    device: str
    threads: int | None = None  # CPU threads both were measured with (None on a GPU)

    @property
    def ridge(self) -> float:
        """The intensity (FLOP/byte) where the two roofs meet."""
        return self.flops.best / self.bandwidth.best

    def attainable(self, intensity: float) -> float:
        """The roofline: min(compute roof, bandwidth × intensity), FLOP/s."""
        return min(self.flops.best, self.bandwidth.best * intensity)


def measure_roofs(device, nbytes: int = 256 * 2**20, n: int = 1024, repeats: int = 15) -> Roofs:
    """Measure both roofs with the timing threads of the other measurements, keeping the fastest of
    ``repeats`` short runs each (a run that another program interrupted is only ever slower)."""
    threads = measurement_threads()
    with torch_threads(threads):
        bandwidth = measure_read_bandwidth(device, nbytes=nbytes, repeats=repeats)
        flops = measure_matmul_flops(device, n=n, repeats=repeats)
    return Roofs(bandwidth, flops, device_label(device, threads), threads if torch.device(device).type == "cpu" else None)


# -- counted work (3.1 and its exercise 3.1-2) ------------------------------------------------------------
@dataclass
class ProjectionCount:
    """K/V projections and attention scores per pass, read from the traces of a run with and without a cache."""

    new_tokens: int
    seq_len: list[int]  # per pass
    none_per_pass: list[int]  # tokens whose K/V the pass projected
    kv_per_pass: list[int]

    @property
    def none_total(self) -> int:
        return sum(self.none_per_pass)

    @property
    def kv_total(self) -> int:
        return sum(self.kv_per_pass)

    @property
    def none_scores(self) -> int:
        """Attention scores per layer and head over the run: each pass's new queries times its keys."""
        return sum(q * t for q, t in zip(self.none_per_pass, self.seq_len))

    @property
    def kv_scores(self) -> int:
        return sum(q * t for q, t in zip(self.kv_per_pass, self.seq_len))


def count_projections(model: ToyTransformer, prompt_ids, new_tokens: int) -> ProjectionCount:
    """Generate ``new_tokens`` both ways and count, from the trace, the tokens whose K/V each pass projects."""
    new_tokens = positive_int("new_tokens", new_tokens)
    none = generate(model, prompt_ids, new_tokens, cache="none").trace
    kv = generate(model, prompt_ids, new_tokens, cache="kv").trace
    return ProjectionCount(new_tokens, [r.seq_len for r in none], [r.k_tokens for r in none],
                           [r.k_tokens for r in kv])
