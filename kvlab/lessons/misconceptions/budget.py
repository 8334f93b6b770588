"""Chapter 3.5, misconception 3: a bigger cache is not better. Weights and cache share one memory budget;
reserving more tokens per sequence lets fewer run at once and leaves most of each reservation unused."""
from __future__ import annotations

import html
import math
import random
from dataclasses import dataclass
from functools import lru_cache

import torch

from ... import inputs
from ..._validate import positive_int
from ...cache import KVCache
from ...device import available_memory
from ...generation import generate
from ...memory import DTYPE_BITS, dtype_name, format_bytes, kv_cache_bytes, stored_tokens
from ...model import ToyTransformer
from ...paging import mean_paged_slots, reserved_fill, reserved_slots
from ...presets import GPU_PRESETS, MODEL_PRESETS, ModelPreset
from ...viz import misconceptions_plots as plots
from ...viz.widgets import Panel, PanelOptions, View, dropdown, float_box, int_slider, selection_slider
from ..memory_estimate import (CACHE_DTYPE_LABEL, DEFAULT_USABLE, FitPlan, USABLE_LABEL, WEIGHT_DTYPE_LABEL, plan_fit,
                               share_or, usable_note, weights_do_not_fit)
from ..memory_estimate.common import label as estimate_label  # 3.4's controls' labels, in the course's language
from .common import DEFAULT_PROMPT, leave_a_core
from .phrases import PANELS, label, shown_text


BUDGET_MODELS = ("LLaMA-7B", "Llama-2-7B", "Llama-3-8B", "Qwen2.5-7B")
DEFAULT_GPU, DEFAULT_MODEL = "RTX 4090 24 GB", "LLaMA-7B"
GPU_LABEL, MODEL_LABEL, SPREAD_LABEL = "GPU", "模型", "请求长度分布"
RESERVE_LABEL, CONCURRENT_LABEL = "每条序列预留（tokens）", "同时服务的序列数"
MAX_CONCURRENT = 128
PAGE_TOKENS = 16  # block size of the paged comparison (vLLM's default)
TOO_LONG_LIMIT = 0.10  # a reservation shorter than more than this share of the requests cuts too many off
MIN_RESERVE_EXPONENT = 6  # the reservation slider starts at 2**6 = 64 tokens and doubles per step ...
MAX_RESERVE_EXPONENT = 17  # ... up to 131,072 tokens, the longest context of BUDGET_MODELS (Qwen2.5-7B)
MAX_RESERVE = 2**MAX_RESERVE_EXPONENT


@dataclass(frozen=True)
class RequestSpread:
    """A made-up spread of request lengths (prompt + answer, tokens), not measured data: each request is a
    conversation of 1 to ``turns`` turns (uniformly many; its whole history is in the cache), each turn drawn
    log-normal around ``median`` (most turns short, a few long). Seeded, so every run draws the same requests."""

    name: str  # what the learner reads, in Chinese: 「多轮对话」 (``label``: in the course's language)
    about: str  # what shapes it, in Chinese: 「每轮很短，历史很长」 (``note``: in the course's language)
    median: int
    sigma: float
    turns: int = 1
    count: int = 1000
    seed: int = 0

    def lengths(self, longest: int) -> list[int]:
        """``count`` lengths, each at least 1 and at most ``longest`` (the model's context)."""
        return list(_spread_lengths(self, positive_int("longest", longest)))

    @property
    def label(self) -> str:
        """The spread's name in the course's language (PANELS' ``spread.*``; a made-up spread's own name)."""
        return shown_text(self.name, "spread.")

    @property
    def note(self) -> str:
        return shown_text(self.about, "spread.")

    def describe(self) -> str:
        """The parameters in the course's language, as the notebook prints them."""
        turn = PANELS.say("spread.turn", median=self.median, sigma=self.sigma)
        shape = (PANELS.say("spread.turns", turns=self.turns, turn=turn) if self.turns > 1
                 else PANELS.say("spread.one_turn", turn=turn))
        return PANELS.say("spread.describe", count=self.count, shape=shape, seed=self.seed)


@lru_cache(maxsize=64)
def _spread_lengths(spread: RequestSpread, longest: int) -> tuple[int, ...]:
    rng = random.Random(spread.seed)
    out = []
    for _ in range(spread.count):
        turns = rng.randint(1, spread.turns)
        n = sum(rng.lognormvariate(math.log(spread.median), spread.sigma) for _ in range(turns))
        out.append(min(longest, max(1, round(n))))
    return tuple(out)


SPREADS = {
    "chat": RequestSpread("单轮问答", "示例：多数很短，少数很长", 256, 0.9),
    "long_doc": RequestSpread("长文档问答", "提示词很长", 1536, 0.35),
    "multi_turn": RequestSpread("多轮对话", "每轮很短，历史很长", 96, 0.6, turns=12),
}
DEFAULT_SPREAD = "chat"
SPREAD = SPREADS[DEFAULT_SPREAD]


@dataclass(frozen=True)
class ReservationPlan:
    """A card's memory holding a model's weights and, for each running sequence, a fixed reservation of R
    tokens: chapter 3.4's :class:`~kvlab.lessons.memory_estimate.FitPlan` of one sequence of R tokens (usable
    share, budget, weights, room for the cache), and a spread of requests to serve in it."""

    fit: FitPlan
    gpu: str
    spread: RequestSpread
    wanted: int  # sequences we would like to serve at once
    lengths: tuple[int, ...]  # the request spread (tokens)

    @property
    def model(self) -> ModelPreset:
        return self.fit.model

    @property
    def total_bytes(self) -> int:
        return self.fit.total_bytes

    @property
    def budget_bytes(self) -> int:
        """What weights and cache may use: the usable share of the card."""
        return self.fit.budget_bytes

    @property
    def weight_bytes(self) -> int:
        return self.fit.weight_bytes

    @property
    def room_bytes(self) -> int:
        """The budget less the weights (negative when the weights alone do not fit)."""
        return self.fit.room_bytes

    @property
    def reserved_tokens(self) -> int:
        return self.fit.seq_len

    @property
    def per_token_bytes(self) -> int:
        return self.model.kv_bytes_per_token(self.fit.cache_dtype)

    @property
    def slot_bytes(self) -> int:
        """Bytes one sequence's reservation takes."""
        return self.fit.cache_bytes

    @property
    def capacity(self) -> int:
        """How many sequences fit at once (3.4's largest batch at S = R)."""
        return self.fit.largest_batch

    @property
    def admitted(self) -> int:
        return min(self.wanted, self.capacity)

    @property
    def needed_bytes(self) -> int:
        return self.weight_bytes + self.wanted * self.slot_bytes

    @property
    def over_budget_bytes(self) -> int:
        return max(0, self.needed_bytes - self.budget_bytes)

    @property
    def too_long_share(self) -> float:
        """Share of requests longer than the reservation (cut off, or refused)."""
        return sum(n > self.reserved_tokens for n in self.lengths) / len(self.lengths)

    @property
    def used_share(self) -> float:
        """Share of a reservation a request has filled when it ends, averaged over all requests (one longer than R
        counts as full). The fill at completion: the least waste there is; during generation it is less full."""
        return reserved_fill(self.lengths, self.reserved_tokens) / reserved_slots(self.lengths, self.reserved_tokens)

    @property
    def unused_bytes(self) -> int:
        """Reserved but, on average, never written, over all admitted sequences."""
        return round(self.admitted * self.slot_bytes * (1 - self.used_share))

    @property
    def paged_capacity(self) -> float:
        """Sequences that fit on average if each took only the blocks of ``PAGE_TOKENS`` it fills (paging)."""
        pages = mean_paged_slots(self.lengths, PAGE_TOKENS)
        return max(0, self.room_bytes) / (pages * self.per_token_bytes)

    @property
    def cuts_too_many(self) -> bool:
        return self.too_long_share > TOO_LONG_LIMIT


def plan_reservation(model: str = DEFAULT_MODEL, gpu: str = DEFAULT_GPU, reserved_tokens: int = 2048,
                     wanted: int = 4, spread: RequestSpread = SPREAD, weight_dtype: str = "fp16",
                     cache_dtype: str = "fp16", usable=DEFAULT_USABLE) -> ReservationPlan:
    """One of ``GPU_PRESETS`` (its memory as nvidia-smi reports it), planned as chapter 3.4 plans it
    (:func:`~kvlab.lessons.memory_estimate.plan_fit`, the usable share 0.9 by default)."""
    if model not in MODEL_PRESETS:
        raise ValueError(f"model must be one of MODEL_PRESETS, got {model!r}")
    if gpu not in GPU_PRESETS:
        raise ValueError(f"gpu must be one of GPU_PRESETS ({', '.join(GPU_PRESETS)}), got {gpu!r}")
    if not isinstance(spread, RequestSpread):
        raise ValueError(f"spread must be a RequestSpread, got {spread!r}")
    R = positive_int("reserved_tokens", reserved_tokens)
    fit = plan_fit(model, GPU_PRESETS[gpu].memory_bytes, R, 1, weight_dtype, cache_dtype, usable)
    return ReservationPlan(fit, gpu, spread, positive_int("wanted", wanted),
                           _spread_lengths(spread, MODEL_PRESETS[model].context_length))


def reserve_exponent(model: str) -> int:
    """The largest k with 2**k tokens within ``model``'s context (every budget model's context is a power of 2)."""
    return MODEL_PRESETS[model].context_length.bit_length() - 1


def reserve_options(model: str, reserved_tokens: int = 1) -> list[int]:
    """The reservations the trade-off figure sweeps for ``model``: 64 tokens, doubling, up to its context (or up to
    ``reserved_tokens`` when that is longer)."""
    top = max(reserve_exponent(model), (positive_int("reserved_tokens", reserved_tokens) - 1).bit_length())
    return [2**k for k in range(MIN_RESERVE_EXPONENT, top + 1)]


def render_budget(gpu, model, spread, weight_dtype, cache_dtype, usable, reserved_tokens, wanted) -> View:
    """The misconception-3 panel: the card as a bar, and the trade-off as the reservation grows."""
    gpu = inputs.choice(GPU_LABEL, gpu, list(GPU_PRESETS))
    model = inputs.choice(label(MODEL_LABEL), model, list(BUDGET_MODELS))
    spread = inputs.choice(label(SPREAD_LABEL), spread, list(SPREADS))
    wd = inputs.choice(estimate_label(WEIGHT_DTYPE_LABEL), weight_dtype, list(DTYPE_BITS))
    cd = inputs.choice(estimate_label(CACHE_DTYPE_LABEL), cache_dtype, list(DTYPE_BITS))
    share = inputs.positive_number(estimate_label(USABLE_LABEL), usable, 1)
    R = inputs.whole_number(label(RESERVE_LABEL), reserved_tokens, 1, MAX_RESERVE)
    N = inputs.whole_number(label(CONCURRENT_LABEL), wanted, 1, MAX_CONCURRENT)
    plan = plan_reservation(model, gpu, R, N, SPREADS[spread], wd, cd, share)
    if not plan.fit.weights_fit:
        control = share_or(GPU_LABEL, share, lambda u: plan_reservation(model, gpu, R, N, SPREADS[spread], wd, cd, u).fit)
        raise inputs.InputError(control, PANELS.say("budget.no_fit", gpu=gpu, why=weights_do_not_fit(plan.fit)))
    sweep = [plan_reservation(model, gpu, r, N, SPREADS[spread], wd, cd, share) for r in reserve_options(model, R)]
    figures = [plots.budget_figure(plan), plots.reservation_figure(sweep, plan, TOO_LONG_LIMIT)]
    return View(figures, budget_html(plan), plan)


def _in_brackets(note: str) -> str:
    """3.4's note on the share held back, set in brackets mid-sentence: its first letter in lower case (English)."""
    return note[:1].lower() + note[1:]


def budget_html(plan: ReservationPlan) -> str:
    p, R, fit, say = plan.model, plan.reserved_tokens, plan.fit, PANELS.say
    lines = [
        say("budget.card", gpu=html.escape(plan.gpu), total=format_bytes(plan.total_bytes), usable=float(fit.usable),
            budget=format_bytes(plan.budget_bytes), note=_in_brackets(usable_note(fit.usable)), model=html.escape(p.label),
            dtype=fit.weight_dtype, weights=format_bytes(plan.weight_bytes),
            only=say("budget.only") if plan.capacity == 0 else "", room=format_bytes(plan.room_bytes)),
        say("budget.slot", R=R, per_token=format_bytes(plan.per_token_bytes), dtype=fit.cache_dtype,
            slot=format_bytes(plan.slot_bytes))
        + (say("budget.capacity", capacity=plan.capacity) if plan.capacity else say("budget.none")),
    ]
    idle = (say("budget.idle", admitted=plan.admitted, idle=format_bytes(plan.unused_bytes)) if plan.admitted else "")
    lines.append(say("budget.spread", spread=html.escape(plan.spread.label), describe=html.escape(plan.spread.describe()),
                     too_long=plan.too_long_share, used=plan.used_share, idle_share=1 - plan.used_share, idle=idle))
    if R > p.context_length:
        lines.append(say("budget.past_context", model=html.escape(p.label), context=p.context_length,
                         extra=R - p.context_length))
    if plan.over_budget_bytes:
        lines.append(say("budget.over", wanted=plan.wanted, needed=format_bytes(plan.needed_bytes),
                         over=format_bytes(plan.over_budget_bytes), first=plan.capacity + 1))
    else:
        lines.append(say("budget.fits", wanted=plan.wanted, needed=format_bytes(plan.needed_bytes),
                         left=format_bytes(plan.budget_bytes - plan.needed_bytes)))
    lines.append(say("budget.paged", page=PAGE_TOKENS, capacity=plan.paged_capacity))
    return "<br>".join(lines)


def budget_panel(gpu: str = DEFAULT_GPU, model: str = DEFAULT_MODEL, spread: str = DEFAULT_SPREAD,
                 reserved_tokens: int = 2048, wanted: int = 12, weight_dtype: str = "fp16",
                 cache_dtype: str = "fp16", usable: float = float(DEFAULT_USABLE)) -> Panel:
    """Card, model, request spread, dtypes and usable share; the reservation per sequence on a doubling slider from
    64 tokens up to 131,072 (the longest context of the models; past the chosen model's context the readout warns
    that the rest is never used), and the sequences wanted at once. (The options stay fixed whatever the model:
    ipywidgets' front end does not redraw a SelectionSlider whose options change.)"""
    options = [2**k for k in range(MIN_RESERVE_EXPONENT, MAX_RESERVE_EXPONENT + 1)]
    reserve = selection_slider(label(RESERVE_LABEL), [(f"{r:,}", r) for r in options], reserved_tokens, width="460px",
                               continuous=False)
    models = dropdown(label(MODEL_LABEL), list(BUDGET_MODELS), model, width="210px")
    share = float_box(estimate_label(USABLE_LABEL), usable, step=0.05)
    controls = {"gpu": dropdown(GPU_LABEL, list(GPU_PRESETS), gpu, width="230px"), "model": models,
                "spread": dropdown(label(SPREAD_LABEL), [(PANELS.say("spread.option", label=s.label, note=s.note), k)
                                                         for k, s in SPREADS.items()], spread, width="380px"),
                "weight_dtype": dropdown(estimate_label(WEIGHT_DTYPE_LABEL), list(DTYPE_BITS), weight_dtype,
                                         width="190px"),
                "cache_dtype": dropdown(estimate_label(CACHE_DTYPE_LABEL), list(DTYPE_BITS), cache_dtype, width="190px"),
                "usable": share, "reserved_tokens": reserve,
                "wanted": int_slider(label(CONCURRENT_LABEL), wanted, 1, MAX_CONCURRENT, width="380px")}
    return Panel(controls, render_budget, static=("reserved_tokens",), in_browser=("reserved_tokens", "wanted"),
                 options=PanelOptions(layout="horizontal", css_class="kvlab-budget",
                                      more=("gpu", "model", "weight_dtype", "cache_dtype", "usable")))


@dataclass(frozen=True)
class ReservationEffect:
    """The same generation with caches reserved for different numbers of tokens."""

    reserved: list[int]
    allocated_bytes: list[int]
    used_bytes: list[int]
    same_tokens: bool


@leave_a_core
@torch.no_grad()
def reservation_effect(model: ToyTransformer, tokenizer, prompt: str = DEFAULT_PROMPT, new_tokens: int = 24,
                       extra: tuple[int, ...] = (0, 64, 200)) -> ReservationEffect:
    """Generate the same text with a cache that fits exactly and with caches ``extra`` tokens bigger."""
    ids = tokenizer.encode(prompt)
    need = stored_tokens(len(ids), new_tokens)
    reserved, allocated, used, outputs = [], [], [], []
    for more in extra:
        cache = KVCache(model.config, 1, need + more, dtype=model.dtype, device=model.device)
        outputs.append(generate(model, [ids], new_tokens, cache=cache).tokens)
        reserved.append(need + more)
        allocated.append(cache.nbytes)
        used.append(cache.used_bytes)
    return ReservationEffect(reserved, allocated, used, all(torch.equal(o, outputs[0]) for o in outputs))


@dataclass(frozen=True)
class RefusedAllocation:
    requested_bytes: int
    free_bytes: int
    device_type: str  # "cuda", "cpu" ...
    message: str  # the API's ValueError (English, names the argument)
    batch_size: int = 0  # the sequences asked for: the huge number in the message
    seq_len: int = 0  # tokens reserved per sequence

    @property
    def argument(self) -> str:
        """The argument the API's message blames (its first word)."""
        return self.message.split(":", 1)[0]

    @property
    def line(self) -> str:
        """What a learner reads: kvlab's refusal in the course's language, computed."""
        kind = "gpu" if self.device_type == "cuda" else "cpu"
        return PANELS.say("refusal.line", batch=self.batch_size, seq_len=self.seq_len,
                          requested=format_bytes(self.requested_bytes), where=PANELS.say(f"refusal.{kind}_where"),
                          free=format_bytes(self.free_bytes), memory=PANELS.say(f"refusal.{kind}_memory"))


def refused_allocation(model: ToyTransformer) -> RefusedAllocation | None:
    """Ask for a cache twice as big as this machine's free memory: kvlab refuses before allocating anything.
    ``None`` where the device does not report its free memory."""
    free = available_memory(model.device)
    if free is None:
        return None
    c = model.config
    per_sequence = kv_cache_bytes(c.n_layer, c.n_kv_head, c.head_dim, c.max_seq_len, 1, dtype_name(model.dtype))
    batch = 2 * free // per_sequence + 1
    try:
        KVCache(c, batch, c.max_seq_len, dtype=model.dtype, device=model.device)
    except ValueError as exc:
        return RefusedAllocation(batch * per_sequence, free, model.device.type, str(exc), batch, c.max_seq_len)
    raise RuntimeError("a cache twice the size of free memory was allocated; kvlab's check did not refuse it")


def refusal_html(refused: RefusedAllocation) -> str:
    """The line in the course's language, and the API's own message folded away as a detail."""
    return PANELS.say("refusal.html", line=html.escape(refused.line), argument=html.escape(refused.argument),
                      batch=refused.batch_size,
                      per_sequence=format_bytes(refused.requested_bytes // max(refused.batch_size, 1)),
                      message=html.escape(refused.message))
