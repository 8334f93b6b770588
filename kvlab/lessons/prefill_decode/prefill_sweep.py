"""Chapter 3.3, prefill is parallel and decode sequential: prompts of many lengths timed, and where
prefill meets this machine's compute roof."""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from functools import partial

import torch

from ..._validate import positive_int
from ...claims import DIFFERENCE, Claim, Number, number, ratio, series
from ...config import ModelConfig
from ...costs import PassCost, decode_cost, pass_cost
from ...generation import GenerationResult, generate
from ...inputs import InputError, one_of_numbers, whole_numbers
from ...measure import Roofs, alternate, device_label, measurement_threads, torch_threads
from ...model import ToyTransformer
from ...stats import growth_exponent
from ...viz import prefill_decode_plots as plots
from ...viz.widgets import Panel, PanelOptions, View, selection_slider, text_box
from .phrases import PANELS, label
from .roofline import RooflinePoint
from .sentences.common import (LAUNCH_TIME, LAUNCH_WORK, count, counts, decimals, exponents, ms, ms_series, pct,
                               signed_pct, some, times)
from .sentences.prefill_sweep import (LONG_P, ONE_PASS, PREFILL_GROWTH, PREFILL_RATES, PREFILL_TAIL, RIDGE, SAME_WORK,
                                      SPEEDUP, SPEEDUP_GROWTH)


PREFILL_LENGTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PREFILL_DECODE_STEPS = 1  # decode passes timed after each prefill of the sweep (one: see LengthPoint)
MAX_CUSTOM_LENGTHS = 10  # prompt lengths a learner may list in the prefill panel
@dataclass
class LengthPoint:
    """A prompt of P tokens: its prefill pass, and the decode pass after it, each the fastest of the repeats (other
    programs on the machine can only make a pass slower, so the fastest is the one closest to the machine's own).
    Both are timed the same way: with one decode pass per repeat (the default), each is the fastest of ``repeats``
    single passes, so at P = 1, where the two are the same work, their ratio is 1 up to the timing's error."""

    prompt_len: int
    prefill_seconds: float
    decode_step_seconds: float  # one decode pass: the fastest of every repeat's decode passes
    decode_steps: int
    prefill_cost: PassCost
    decode_cost: PassCost  # all decode_steps passes together

    @property
    def sequential_seconds(self) -> float:
        """The prompt fed one token per pass instead: P decode-sized passes."""
        return self.prompt_len * self.decode_step_seconds

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_len / self.prefill_seconds

    @property
    def decode_tokens_per_s(self) -> float:
        return 1 / self.decode_step_seconds

    @property
    def speedup(self) -> float:
        """How many times faster the prompt goes through as one pass than token by token."""
        return self.sequential_seconds / self.prefill_seconds

    @property
    def prefill_flops_per_s(self) -> float:
        return self.prefill_cost.flops / self.prefill_seconds

    @property
    def decode_flops_per_s(self) -> float:
        return self.decode_cost.flops / (self.decode_steps * self.decode_step_seconds)

    @property
    def decode_bytes_per_s(self) -> float:
        """Bytes a decode step moves (weights and cache, counted) per second of its measured time."""
        return self.decode_cost.bytes / (self.decode_steps * self.decode_step_seconds)


@dataclass
class PrefillSweep:
    points: list[LengthPoint]
    config: ModelConfig
    device: str
    repeats: int = 1  # generations per prompt length; each pass is the fastest of them

    @property
    def lengths(self) -> list[int]:
        return [p.prompt_len for p in self.points]

    def at(self, prompt_len: int) -> LengthPoint:
        return self.points[self.lengths.index(prompt_len)]


def _generation_without_cache(model, prompt, new_tokens: int) -> GenerationResult:
    """One timed generation, its cache let go as soon as it ends: the sweep reads only the pass records, and ten
    prompts of 1,000 tokens run three times would otherwise hold thirty caches (1 GiB) until the sweep ends."""
    result = generate(model, prompt, new_tokens)
    result.cache = None
    return result


def _timed_generations(model, prompts: dict, new_tokens: int, repeats: int) -> dict:
    """``{key: [GenerationResult per repeat]}`` (without their caches): every prompt generated ``repeats`` times,
    interleaved, with the timing threads of :func:`~kvlab.measure.measurement_threads`, after warming up on the
    smallest and the largest prompt (allocator, kernels; rerunning every shape first would double the cost of the
    sweep)."""
    runners = {k: partial(_generation_without_cache, model, p, new_tokens) for k, p in prompts.items()}
    sizes = sorted(prompts, key=lambda k: prompts[k].numel())
    with torch_threads(measurement_threads()):
        for k in dict.fromkeys((sizes[0], sizes[-1])):
            generate(model, prompts[k], 2)
        return alternate(runners, repeats, warmup={k: lambda: None for k in prompts})


def max_prompt_len(config: ModelConfig, decode_steps: int = PREFILL_DECODE_STEPS) -> int:
    """The longest prompt the sweep can time: the prompt and the decode steps after it fit in max_seq_len."""
    return config.max_seq_len - decode_steps - 1


def measure_prefill_sweep(model: ToyTransformer, lengths=PREFILL_LENGTHS, decode_steps: int = PREFILL_DECODE_STEPS,
                          repeats: int = 3, seed: int = 0) -> PrefillSweep:
    """Time the prefill pass and the decode steps after it for prompts of each length (random token ids),
    ``repeats`` times each, interleaved; see :class:`LengthPoint` for which run counts."""
    decode_steps = positive_int("decode_steps", decode_steps)
    repeats = positive_int("repeats", repeats)
    c = model.config
    if not isinstance(lengths, (list, tuple)) or not lengths:
        raise ValueError(f"lengths must be a non-empty list of prompt lengths, got {lengths!r}")
    lengths = [positive_int("lengths", n, maximum=max_prompt_len(c, decode_steps)) for n in lengths]
    gen = torch.Generator().manual_seed(seed)
    prompts = {P: torch.randint(0, c.vocab_size, (1, P), generator=gen) for P in lengths}
    runs = _timed_generations(model, prompts, decode_steps + 1, repeats)
    points = []
    for P in lengths:
        prefill = min(res.trace[0].seconds for res in runs[P])
        step = min(min(res.decode_seconds) for res in runs[P])
        points.append(LengthPoint(P, prefill, step, decode_steps, pass_cost(c, P), decode_cost(c, P, decode_steps)))
    return PrefillSweep(points, c, device_label(model.device), repeats)


class PrefillLab:
    """The prefill sweep the notebook measured, and more prompt lengths measured when a learner lists them
    (each length once; lengths measured earlier are reused)."""

    def __init__(self, sweep: PrefillSweep, model: ToyTransformer | None = None):
        self.model = model
        self.config = sweep.config
        self.device = sweep.device
        self.repeats = sweep.repeats
        self.points = {p.prompt_len: p for p in sweep.points}

    def measuring(self, lengths) -> str | None:
        """What the panel says while the lengths typed that were not measured yet are measured (None: none)."""
        wanted = typed_lengths(self.config, lengths)
        missing = sorted({P for P in wanted if P not in self.points})
        if not missing or self.model is None:
            return None
        return PANELS.say("prefill_measuring", lengths=_lengths_text(missing))

    def sweep(self, lengths: list[int]) -> PrefillSweep:
        wanted = sorted(set(lengths))
        missing = [P for P in wanted if P not in self.points]
        if missing:
            if self.model is None:
                raise ValueError(f"lengths: {missing} were not measured and there is no model to measure them")
            self.points.update({p.prompt_len: p for p in measure_prefill_sweep(self.model, missing).points})
        return PrefillSweep([self.points[P] for P in wanted], self.config, self.device, self.repeats)


def _lengths_text(lengths) -> str:
    return ", ".join(str(n) for n in lengths)


# the controls' labels as the Chinese edition shows them; a panel shows each in the course's language (label())
LENGTHS_LABEL, PROMPT_LEN_LABEL = PANELS.text("label.lengths", "zh"), PANELS.text("label.prompt_len", "zh")


def typed_lengths(config: ModelConfig, lengths) -> list[int]:
    """The prompt lengths typed into the panel's box, checked (an InputError names the box)."""
    return whole_numbers(label(LENGTHS_LABEL), lengths, 1, max_prompt_len(config), MAX_CUSTOM_LENGTHS)


def render_prefill(lab: PrefillLab, lengths, prompt_len) -> View:
    """The prefill panel: the listed prompt lengths (measured on first use), one of them marked."""
    sweep = lab.sweep(typed_lengths(lab.config, lengths))
    p = sweep.at(one_of_numbers(label(PROMPT_LEN_LABEL), prompt_len, sweep.lengths))
    readout = PANELS.say("prefill_html", P=p.prompt_len, prefill_ms=p.prefill_seconds * 1e3,
                         prefill_rate=p.prefill_tokens_per_s, decode_ms=p.decode_step_seconds * 1e3,
                         decode_rate=p.decode_tokens_per_s, sequential_ms=p.sequential_seconds * 1e3, speedup=p.speedup,
                         device=html.escape(sweep.device))
    return View([plots.prefill_decode_figure(sweep, p.prompt_len)], readout, p)


def _follow_lengths(slider, config: ModelConfig, change) -> None:
    """The P slider offers exactly the lengths typed (when they can be read; otherwise the panel says why)."""
    try:
        values = sorted(set(typed_lengths(config, change["new"])))
    except InputError:
        return
    keep = slider.value if slider.value in values else values[-1]
    if list(slider.options) != values:
        slider.index = 0  # first, on its own: the browser's slider must never hold an index past the new list's end
        slider.options = values
    slider.value = keep


def prefill_panel(sweep: PrefillSweep, model: ToyTransformer | None = None, prompt_len: int = 64) -> Panel:
    """A box of prompt lengths (more are measured on ``model`` when typed) and a slider choosing one of them."""
    lab = PrefillLab(sweep, model)
    value = prompt_len if prompt_len in sweep.lengths else sweep.lengths[-1]
    box = text_box(label(LENGTHS_LABEL), _lengths_text(sweep.lengths), width="520px")
    slider = selection_slider(label(PROMPT_LEN_LABEL), sweep.lengths, value)
    box.observe(partial(_follow_lengths, slider, sweep.config), names="value")  # before the panel's own observer
    return Panel({"lengths": box, "prompt_len": slider}, partial(render_prefill, lab), in_browser="prompt_len",
                 options=PanelOptions(layout="horizontal", css_class="kvlab-prefill",
                                      measures=lambda values: lab.measuring(values["lengths"])))


PROPORTIONAL_EXPONENT = 0.8  # a segment of the prefill curve grows "about in proportion to P" from this exponent


def proportional_from(sweep: PrefillSweep) -> int | None:
    """The smallest measured P from which every later segment of the prefill time grows with an exponent of at
    least :data:`PROPORTIONAL_EXPONENT` (1 = in proportion to P); None when the last segment does not."""
    P = sweep.lengths
    t = [p.prefill_seconds for p in sweep.points]
    start = None
    for i in range(len(P) - 1, 0, -1):
        if growth_exponent(P[i - 1:i + 1], t[i - 1:i + 1]) < PROPORTIONAL_EXPONENT:
            break
        start = P[i - 1]
    return start


def _launch_numbers(sweep: PrefillSweep) -> dict:
    a, z = sweep.points[0], sweep.points[-1]
    t0, tn = ms(a.prefill_seconds), ms(z.prefill_seconds)
    return {"P0": count(a.prompt_len), "Pn": count(z.prompt_len), "t0": t0, "tn": tn,
            "ratio_all": times(ratio(tn.value, t0.value))}


def explain_prefill(sweep: PrefillSweep, roofs: "Roofs") -> list[Claim]:
    """Where prefill crosses this machine's ridge (:data:`~.sentences.RIDGE`), from when its time grows about in
    proportion to P (:data:`~.sentences.PREFILL_TAIL`: every segment's exponent checked on the printed times), and
    the speedup's ceiling (:data:`~.sentences.SPEEDUP`)."""
    ridge = roofs.ridge
    crossing = next((p for p in sweep.points if p.prefill_cost.intensity >= ridge), sweep.points[-1])
    claims = [RIDGE.choose({"twice": number(2 * ridge, 0), "ridge": number(ridge, 1), "P": count(crossing.prompt_len),
                            "I": number(crossing.prefill_cost.intensity, 1)})]
    if len(sweep.points) < 2:
        return claims
    times_ = ms_series([p.prefill_seconds for p in sweep.points])
    Ps, ts = sweep.lengths, list(times_.value)
    ks = exponents(Ps, ts) if all(t > 0 for t in ts) else [math.nan] * (len(Ps) - 1)
    start = len(ks)  # the tail of segments within the proportional band, from the end
    while start > 0 and 0.8 <= ks[start - 1] <= 1.25:
        start -= 1
    tail = min(start, len(Ps) - 2)
    digits = decimals(ts)
    claims.append(PREFILL_TAIL.choose({
        **_launch_numbers(sweep), "start": count(Ps[tail]), "Pt": counts(Ps[tail:]),
        "tt": series(ts[tail:], digits, "ms"), "kt": some(ks[tail:], 2, "", DIFFERENCE),
        "Pa": count(Ps[-2]), "Pb": count(Ps[-1]), "ta": number(ts[-2], digits, "ms"), "tb": number(ts[-1], digits, "ms"),
        "k": number(ks[-1], 2, kind=DIFFERENCE), "Ps": counts(Ps), "ts": times_, "ks": some(ks, 2, "", DIFFERENCE)}))
    best = max(sweep.points, key=lambda p: p.speedup)
    last = sweep.points[-1]
    claims.append(SPEEDUP.choose({"best": number(best.speedup, 1), "best_P": count(best.prompt_len),
                                  "bound": number(ratio(roofs.flops.best, last.decode_flops_per_s), 0)}))
    return claims


def launch_bound(first_seconds: float, last_seconds: float, work_ratio: float) -> bool:
    """The work grew ``work_ratio`` times and the time barely moved: a fixed cost per pass dominates (a GPU)."""
    return work_ratio >= LAUNCH_WORK and last_seconds < LAUNCH_TIME * first_seconds


SMALL_P = 8  # "at first": the prompt lengths up to this many times the shortest one measured


def explain_prefill_growth(sweep: PrefillSweep) -> list[Claim]:
    """How the prefill time grew over the first lengths of the sweep (P up to 8 × the shortest), checked on every
    printed step (:data:`~.sentences.PREFILL_GROWTH`): barely, slower than P, about in proportion to P, flat over
    the whole sweep (a GPU's launch-bound shape), or too noisy to tell (a drop, or steps that disagree)."""
    pts = sweep.points
    if len(pts) < 2:
        return []
    a = pts[0]
    small = [p for p in pts if p.prompt_len <= SMALL_P * a.prompt_len]
    if len(small) < 2:
        small = pts[:2]
    Ps = [p.prompt_len for p in small]
    ts_n = ms_series([p.prefill_seconds for p in small])
    ts = ts_n.value
    drop = next((i for i in range(len(ts) - 1) if ts[i + 1] < 0.85 * ts[i]), 0)
    steps = exponents(Ps, ts)
    steep = max(range(len(steps)), key=lambda i: steps[i] if math.isfinite(steps[i]) else -math.inf)
    return [PREFILL_GROWTH.choose({
        **_launch_numbers(sweep), "Ps": counts(Ps), "ts": ts_n, "tokens": number(Ps[-1] / Ps[0], 1),
        "ratio": times(ratio(ts[-1], ts[0])), "p": count(Ps[drop]), "q": count(Ps[drop + 1]),
        "drop": pct(1 - ratio(ts[drop + 1], ts[drop])), "ps": count(Ps[steep]), "qs": count(Ps[steep + 1]),
        "step": times(ratio(ts[steep + 1], ts[steep])), "tok": number(Ps[steep + 1] / Ps[steep], 1)})]


def explain_speedups(sweep: PrefillSweep) -> list[Claim]:
    """How many times longer feeding the prompt one token per pass takes than one prefill pass (the sweep's
    speedups, printed to 1 decimal as in its table): at P = 1, where the two are the same work, how far it is from
    1, the timing's error (:data:`~.sentences.SAME_WORK`); above 1 at every P ≥ :data:`~.sentences.LONG_P`
    (:data:`~.sentences.ONE_PASS`), and how it grew with P, read over every point
    (:data:`~.sentences.SPEEDUP_GROWTH`)."""
    pts = sweep.points
    long = [p for p in pts if p.prompt_len >= LONG_P]
    claims = []
    if 1 in sweep.lengths:
        x = times(sweep.at(1).speedup)
        claims.append(SAME_WORK.choose({"x": x, "off": signed_pct(x.value - 1)}))
    if long:
        xs = [p.speedup for p in long]
        worst = min(range(len(long)), key=lambda i: number(xs[i], 1).value if math.isfinite(xs[i]) else -math.inf)
        claims.append(ONE_PASS.choose({"Ps": counts([p.prompt_len for p in long]), "xs": some(xs, 1),
                                       "p": count(long[worst].prompt_len), "x": number(xs[worst], 1)}))
    if len(pts) >= 2:
        xs = series([p.speedup for p in pts], 1)
        peak = max(range(len(pts)), key=lambda i: xs.value[i] if math.isfinite(xs.value[i]) else -math.inf)
        claims.append(SPEEDUP_GROWTH.choose({"Ps": counts(sweep.lengths), "xs": xs,
                                             "P_peak": count(pts[peak].prompt_len),
                                             "g": times(ratio(xs.value[-1], xs.value[0]), 1)}))
    return claims


def explain_prefill_rates(sweep: PrefillSweep) -> list[Claim]:
    """The prefill rates the roofline plots, read over every point (:data:`~.sentences.PREFILL_RATES`): rising at
    every step, rising then level, rising but for one small dip, or irregular (can't tell)."""
    if len(sweep.points) < 2:
        return []
    rates = series([p.prefill_flops_per_s / 1e9 for p in sweep.points], 1, "GFLOP/s")
    rs, Ps = rates.value, sweep.lengths
    peak = max(range(len(rs)), key=lambda i: rs[i])
    dip = next((i for i in range(len(rs) - 1) if rs[i + 1] <= rs[i]), 0)
    return [PREFILL_RATES.choose({"Ps": counts(Ps), "rates": rates, "P_peak": count(Ps[peak]), "p": count(Ps[dip]),
                                  "q": count(Ps[dip + 1]), "g": times(ratio(rs[-1], rs[0]), 1),
                                  "drop": signed_pct(ratio(rs[dip + 1], rs[dip]) - 1)})]


def prefill_points(sweep: PrefillSweep) -> list[RooflinePoint]:
    """Every prefill pass of the sweep and the decode steps after it, as roofline points."""
    out = [RooflinePoint(PANELS.say("point.prefill", P=p.prompt_len), "prefill", p.prefill_cost.intensity, p.prefill_flops_per_s,
                         f"P={p.prompt_len}") for p in sweep.points]
    return out + [RooflinePoint(PANELS.say("point.decode", P=p.prompt_len), "decode", p.decode_cost.intensity,
                                p.decode_flops_per_s) for p in sweep.points]
