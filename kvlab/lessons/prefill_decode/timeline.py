"""Chapter 3.3, one real generation as a timeline (prefill, then decode passes, the cache growing),
and the demo model's decode step against this machine's roofs."""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field, replace
from functools import partial

from ..._validate import positive_int
from ...claims import Claim, number, ratio
from ...config import ModelConfig
from ...costs import PassCost, pass_cost
from ...generation import PassRecord, generate
from ...inputs import prompt_tokens, whole_number
from ...measure import Roofs, device_label, measurement_threads, torch_threads
from ...memory import format_bytes, stored_tokens
from ...model import ToyTransformer
from ...stats import median, percentile
from ...viz import prefill_decode_plots as plots
from ...viz.widgets import Panel, PanelOptions, View, int_slider, play_slider, recent_run, text_box
from .sentences.common import count, pct, signed_pct, times, us
from .sentences.timeline import ITL_TAIL, PANEL, PARALLEL, STEP_BUDGET
from .phrases import PANELS, PROMPTS, label


DEFAULT_PROMPT = PROMPTS.text("timeline", "zh")  # the Chinese edition's; a panel opened without a run uses PROMPTS
TIMELINE_TOKENS = 24  # new tokens of the timeline by default: 1 prefill pass + 23 decode passes
TIMELINE_MAX_TOKENS = 64  # the most the timeline's 「生成的 token 数」 slider allows: each prompt is timed this long
TIMELINE_REPEATS = 3  # generations timed per prompt
# The controls' labels as the Chinese edition shows them (tests match errors against them); a panel shows each in the
# course's language, label(...), asked when the panel or its error is made.
PROMPT_LABEL, TOKENS_LABEL, STEP_LABEL = (PANELS.text(k, "zh") for k in ("label.prompt", "label.tokens", "label.step"))

@dataclass
class Timeline:
    """Greedy generations with a preallocated cache: the one shown (the fastest prefill), every forward pass
    with its time and the cache after it, and the prefill and decode times of every generation made."""

    prompt: str
    prompt_tokens: int
    new_text: list[str]  # the token each pass produced
    trace: list[PassRecord]  # the generation shown: the one whose prefill pass was fastest
    cache_allocated_bytes: int
    bytes_per_token: int  # K and V of one token, all layers
    device: str
    runs: int = 1  # generations made
    prefill_runs: list[float] = field(default_factory=list)  # seconds of each generation's prefill pass
    decode_runs: list[float] = field(default_factory=list)  # seconds of every decode pass of every generation
    tpot_runs: list[float] = field(default_factory=list)  # each generation's TPOT (the mean of its decode passes), s
    decode_by_run: list[list[float]] = field(default_factory=list)  # each generation's decode passes, s

    @property
    def passes(self) -> int:
        return len(self.trace)

    def first(self, n: int) -> Timeline:
        """The first ``n`` passes of every generation: a generation of ``n`` tokens after the same prompt (the model
        is causal and greedy decoding draws nothing at random, so those passes compute the same), with the cache
        such a generation preallocates."""
        if not 1 <= n <= self.passes or not self.decode_by_run:
            raise ValueError(f"n: 1 to {self.passes} passes of a timeline that kept each generation's passes, got {n}")
        decodes = [run[:n - 1] for run in self.decode_by_run]
        return replace(self, new_text=self.new_text[:n], trace=self.trace[:n],
                       cache_allocated_bytes=stored_tokens(self.prompt_tokens, n) * self.bytes_per_token,
                       decode_runs=[s for run in decodes for s in run], decode_by_run=decodes,
                       tpot_runs=[sum(run) / len(run) for run in decodes if run])

    @property
    def starts_ms(self) -> list[float]:
        """Start of each pass when the passes are laid end to end (only the forward passes are timed)."""
        out, t = [], 0.0
        for r in self.trace:
            out.append(t)
            t += r.seconds * 1e3
        return out

    @property
    def ends_ms(self) -> list[float]:
        return [s + r.seconds * 1e3 for s, r in zip(self.starts_ms, self.trace)]

    @property
    def lengths(self) -> list[int]:
        """``cache.length`` after each pass (the last pass's token is returned, never stored)."""
        return [r.seq_len for r in self.trace]

    @property
    def ttft_ms(self) -> float:
        """The prefill pass: the fastest of the generations (another program can only slow one down)."""
        if self.prefill_runs:
            return min(self.prefill_runs) * 1e3
        return sum(r.seconds for r in self.trace if r.phase == "prefill") * 1e3

    @property
    def tpot_ms(self) -> float:
        """TPOT of the generation shown, per request: (end-to-end − TTFT) / (new tokens − 1), a mean."""
        return (self.ends_ms[-1] - self.ends_ms[0]) / (self.passes - 1) if self.passes > 1 else float("nan")

    @property
    def tpot_median_ms(self) -> float:
        """TPOT computed per generation, the median over the generations (the shown one's when only it is known)."""
        return median(self.tpot_runs) * 1e3 if self.tpot_runs else self.tpot_ms

    @property
    def itl_samples(self) -> list[float]:
        """Seconds of every decode pass of every generation: the inter-token latency's distribution."""
        return self.decode_runs or [r.seconds for r in self.trace if r.phase == "decode"]

    def itl_ms(self, q: float = 50) -> float:
        """The inter-token latency's q-th percentile (50: the median), ms."""
        return percentile(self.itl_samples, q) * 1e3

    @property
    def decode_samples(self) -> int:
        return len(self.itl_samples)


def run_timeline(model: ToyTransformer, tokenizer, prompt: str = DEFAULT_PROMPT,
                 new_tokens: int = TIMELINE_TOKENS, repeats: int = TIMELINE_REPEATS) -> Timeline:
    """Greedy-generate ``new_tokens`` after ``prompt`` with a preallocated cache, ``repeats`` times after a
    warm-up. The generation with the fastest prefill is the one shown: its prefill is the TTFT and its decode
    passes give the TPOT; the inter-token latency's percentiles come from the decode passes of all of them."""
    new_tokens = positive_int("new_tokens", new_tokens)
    repeats = positive_int("repeats", repeats)
    if not isinstance(prompt, str) or not prompt:
        raise ValueError("prompt: needs at least one character")
    ids = tokenizer.encode(prompt)
    threads = measurement_threads()
    with torch_threads(threads):
        generate(model, ids, min(4, new_tokens))  # warm-up: allocator, kernels
        runs = [generate(model, ids, new_tokens, cache="kv") for _ in range(repeats)]
    result = min(runs, key=lambda r: r.time_to_first_token)
    cache = result.cache
    return Timeline(prompt, len(ids), [tokenizer.decode([t]) for t in result.new_tokens[0].tolist()],
                    result.trace, cache.nbytes, cache.nbytes // cache.max_seq_len,
                    device_label(model.device, threads), repeats,
                    [r.time_to_first_token for r in runs], [s for r in runs for s in r.decode_seconds],
                    [sum(r.decode_seconds) / len(r.decode_seconds) for r in runs if r.decode_seconds],
                    [list(r.decode_seconds) for r in runs])


TAIL_SAMPLES = 100  # under this many samples a p99 is about the largest one


def latency_lines(tl: Timeline) -> list[str]:
    """TPOT (per generation, the median over the generations) and the inter-token latency's percentiles: readouts."""
    tpot = PANELS.say("latency_tpot", tpot=tl.tpot_median_ms, steps=tl.passes - 1, runs=len(tl.tpot_runs) or 1,
                      shown=tl.tpot_ms)
    itl = PANELS.say("latency_itl", p50=tl.itl_ms(50), p90=tl.itl_ms(90), p99=tl.itl_ms(99), runs=tl.runs,
                     samples=tl.decode_samples, device=tl.device)
    return [tpot, itl]


def explain_latency(tl: Timeline) -> list[Claim]:
    """What the p99 of the inter-token latency is (:data:`~.sentences.ITL_TAIL`): with fewer than
    :data:`TAIL_SAMPLES` samples, a value between the two largest."""
    n = tl.decode_samples
    top = sorted(tl.itl_samples)[-2:] if n >= 2 else [math.nan, math.nan]
    return [ITL_TAIL.choose({"n": count(n), "p99": number(tl.itl_ms(99) if n else math.nan, 2, "ms"),
                             "low": number(top[0] * 1e3, 2, "ms"), "high": number(top[1] * 1e3, 2, "ms")})]


def explain_prefill_parallel(tl: Timeline) -> list[Claim]:
    """Whether the one prefill pass beat feeding the prompt token by token (prompt length × the fastest decode pass:
    the TTFT is the fastest prefill pass; the fastest of many more decode steps favours token by token, which the
    sentence says, while a median decode step on a busy machine would make prefill look faster than it is), read
    from the numbers it prints (:data:`~.sentences.PARALLEL`):
    under half of it, faster but not half (a busy moment slowed the few prefills), or not faster (can't tell)."""
    itl = number(tl.itl_ms(0), 2, "ms")
    sequential = tl.prompt_tokens * itl.value  # the product of the printed factors, so that it reads P × itl exactly
    return [PARALLEL.choose({"ttft": number(tl.ttft_ms, 2, "ms"), "P": count(tl.prompt_tokens),
                             "itl": itl, "n": count(tl.decode_samples),
                             "sequential": number(sequential, 2, "ms"),
                             "share": pct(ratio(tl.ttft_ms, sequential)), "runs": count(tl.runs)})]


def explain_panel(panel: Timeline, run: Timeline) -> list[Claim]:
    """The timeline panel as it opened (its own timing of the prompt) against the run printed above it: both
    TTFTs and both shown generations' TPOTs, and their relative differences (:data:`~.sentences.PANEL`)."""
    a, b = number(panel.ttft_ms, 2, "ms"), number(run.ttft_ms, 2, "ms")
    c, d = number(panel.tpot_ms, 2, "ms"), number(run.tpot_ms, 2, "ms")
    return [PANEL.choose({"n": count(panel.passes), "ttft_panel": a, "ttft_run": b,
                          "ttft_diff": signed_pct(ratio(a.value, b.value) - 1), "tpot_panel": c, "tpot_run": d,
                          "tpot_diff": signed_pct(ratio(c.value, d.value) - 1)})]


def regenerate(model: ToyTransformer, tokenizer, timeline: Timeline, cache: str):
    """The timeline's prompt and number of tokens generated again with another cache mode (a
    :class:`~kvlab.generation.GenerationResult`), with the timing threads."""
    with torch_threads(measurement_threads()):
        return generate(model, tokenizer.encode(timeline.prompt), timeline.passes, cache=cache)


def _checked_prompt(model: ToyTransformer, tokenizer, prompt) -> str:
    """The prompt typed, trimmed, with room for TIMELINE_MAX_TOKENS after it (an InputError names the box)."""
    return prompt_tokens(label(PROMPT_LABEL), prompt, tokenizer, model.config.max_seq_len - TIMELINE_MAX_TOKENS)[0]


def render_timeline(model: ToyTransformer, tokenizer, runs: dict, prompt, new_tokens, step) -> View:
    """The timeline panel: pass ``step`` of a generation of ``new_tokens`` after ``prompt``. Each prompt's
    generations are measured once, TIMELINE_MAX_TOKENS long; every length is read from their first passes (the
    sliders replay them without measuring again, so TTFT stays put while the length changes)."""
    prompt = _checked_prompt(model, tokenizer, prompt)
    n = whole_number(label(TOKENS_LABEL), new_tokens, 2, TIMELINE_MAX_TOKENS)
    step = whole_number(label(STEP_LABEL), step, 1, n)
    tl = recent_run(runs, prompt, lambda: run_timeline(model, tokenizer, prompt, TIMELINE_MAX_TOKENS), keep=4).first(n)
    r = tl.trace[step - 1]
    readout = PANELS.say(
        "timeline_html", step=step, passes=tl.passes, phase=PANELS.say(f"phase.{r.phase}"),
        fed=PANELS.say(f"fed.{r.phase}", tokens=r.new_tokens),
        generated=PANELS.say("generated_one" if step == 1 else "generated", step=step), ms=r.seconds * 1e3, length=r.seq_len,
        used=format_bytes(r.cache_bytes), per_token=format_bytes(tl.bytes_per_token),
        allocated=format_bytes(tl.cache_allocated_bytes), text=html.escape("".join(tl.new_text[:step])),
        ttft=tl.ttft_ms, runs=tl.runs, tpot=tl.tpot_ms, steps=tl.passes - 1, p50=tl.itl_ms(50), p90=tl.itl_ms(90),
        samples=tl.decode_samples, device=html.escape(tl.device))
    return View([plots.timeline_figure(tl, step)], readout, tl)


def _measuring(model: ToyTransformer, tokenizer, runs: dict, values: dict) -> str | None:
    """What the panel says while a prompt not timed yet is timed (None: it was, or the render will refuse it)."""
    if _checked_prompt(model, tokenizer, values["prompt"]) in runs:
        return None
    return PANELS.say("timeline_measuring", tokens=TIMELINE_MAX_TOKENS, repeats=TIMELINE_REPEATS)


def _keep_step_in_range(step, play, change) -> None:
    """The pass slider (and its Play button) span the passes of the generation chosen."""
    n = change["new"]
    if isinstance(n, int) and 2 <= n <= TIMELINE_MAX_TOKENS:
        play.max = n
        step.max = n  # a value above the new maximum is clamped by the slider


def timeline_panel(model: ToyTransformer, tokenizer, timeline: Timeline | None = None) -> Panel:
    """A prompt box, the number of tokens to generate, and a Play-able pass slider over one generation; it starts
    at ``timeline``'s prompt and length and measures that prompt's generations (TIMELINE_MAX_TOKENS long) once."""
    n = timeline.passes if timeline is not None else TIMELINE_TOKENS
    full = timeline is not None and timeline.passes == TIMELINE_MAX_TOKENS and timeline.decode_by_run
    runs = {timeline.prompt: timeline} if full else {}
    prompt = text_box(label(PROMPT_LABEL), timeline.prompt if timeline else PROMPTS.say("timeline"), width="520px")
    tokens = int_slider(label(TOKENS_LABEL), n, 2, TIMELINE_MAX_TOKENS, width="360px")
    play, step = play_slider(label(STEP_LABEL), 1, 1, n, interval_ms=400)
    tokens.observe(partial(_keep_step_in_range, step, play), names="value")  # before the panel's own observer
    return Panel({"prompt": prompt, "new_tokens": tokens, "step": step},
                 partial(render_timeline, model, tokenizer, runs), static=("step",), in_browser=("new_tokens", "step"),
                 options=PanelOptions(extra={"step": play}, layout="grid", columns=2, css_class="kvlab-timeline",
                                      measures=partial(_measuring, model, tokenizer, runs)))


# -- the demo model's decode step against this machine's roofs -----------------------------------------
@dataclass(frozen=True)
class StepBudget:
    """One decode step of a model: what it has to compute and read, the least time the two roofs allow for
    each, and the time measured."""

    cost: PassCost
    compute_seconds: float  # cost.flops / the matmul roof
    read_seconds: float  # cost.bytes / the bandwidth roof
    measured_seconds: float

    @property
    def bound_seconds(self) -> float:
        return max(self.compute_seconds, self.read_seconds)

    @property
    def overhead_ratio(self) -> float:
        """How many times the measured step is of the roofline's bound."""
        return self.measured_seconds / self.bound_seconds


def step_budget(config: ModelConfig, timeline: Timeline, roofs: "Roofs") -> StepBudget:
    """The first decode step of ``timeline`` (one token after the prompt) against the roofs; the time measured
    is the median decode step (the inter-token latency's median)."""
    cost = pass_cost(config, 1, timeline.prompt_tokens)
    return StepBudget(cost, cost.flops / roofs.flops.best, cost.bytes / roofs.bandwidth.best, timeline.itl_ms(50) / 1e3)


def step_budget_lines(budget: StepBudget) -> list[str]:
    """The counted work of one decode step and the least time each roof allows for it: readouts."""
    c = budget.cost
    return [PANELS.say("step_budget", mflop=c.flops / 1e6, compute=budget.compute_seconds * 1e6, mb=c.bytes / 1e6,
                       read=budget.read_seconds * 1e6)]


def explain_step_budget(budget: StepBudget) -> list[Claim]:
    """The measured step against the longer of the two bounds (:data:`~.sentences.STEP_BUDGET`)."""
    bound = us(budget.bound_seconds)
    measured = number(budget.measured_seconds * 1e3, 2, "ms")
    r = ratio(measured.value * 1e3, bound.value)
    return [STEP_BUDGET.choose({"measured": measured, "bound": bound, "ratio": times(r, 0 if r >= 3 else 1)})]
