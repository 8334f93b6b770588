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
from .common import DEFAULT_PROMPT, leave_a_core


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

    label: str  # what the learner reads: 「多轮对话」
    note: str  # what shapes it: 「每轮很短，历史很长」
    median: int
    sigma: float
    turns: int = 1
    count: int = 1000
    seed: int = 0

    def lengths(self, longest: int) -> list[int]:
        """``count`` lengths, each at least 1 and at most ``longest`` (the model's context)."""
        return list(_spread_lengths(self, positive_int("longest", longest)))

    def describe(self) -> str:
        """The parameters in Chinese, as the notebook prints them."""
        turn = f"对数正态分布，中位数 {self.median} 个 token，σ = {self.sigma:g}"
        shape = (f"每个请求是 1–{self.turns} 轮对话的全部历史（轮数均匀分布），每一轮{turn}" if self.turns > 1
                 else f"每个请求一轮，{turn}")
        return f"{self.count} 个请求，{shape}，随机种子 {self.seed}，截断到模型的上下文长度"


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
    model = inputs.choice(MODEL_LABEL, model, list(BUDGET_MODELS))
    spread = inputs.choice(SPREAD_LABEL, spread, list(SPREADS))
    wd = inputs.choice(WEIGHT_DTYPE_LABEL, weight_dtype, list(DTYPE_BITS))
    cd = inputs.choice(CACHE_DTYPE_LABEL, cache_dtype, list(DTYPE_BITS))
    share = inputs.positive_number(USABLE_LABEL, usable, 1)
    R = inputs.whole_number(RESERVE_LABEL, reserved_tokens, 1, MAX_RESERVE)
    N = inputs.whole_number(CONCURRENT_LABEL, wanted, 1, MAX_CONCURRENT)
    plan = plan_reservation(model, gpu, R, N, SPREADS[spread], wd, cd, share)
    if not plan.fit.weights_fit:
        control = share_or(GPU_LABEL, share, lambda u: plan_reservation(model, gpu, R, N, SPREADS[spread], wd, cd, u).fit)
        raise inputs.InputError(control, f"{gpu}：{weights_do_not_fit(plan.fit)}")
    sweep = [plan_reservation(model, gpu, r, N, SPREADS[spread], wd, cd, share) for r in reserve_options(model, R)]
    figures = [plots.budget_figure(plan), plots.reservation_figure(sweep, plan, TOO_LONG_LIMIT)]
    return View(figures, budget_html(plan), plan)


def budget_html(plan: ReservationPlan) -> str:
    p, R, fit = plan.model, plan.reserved_tokens, plan.fit
    left = "只剩" if plan.capacity == 0 else ""
    lines = [
        f"{html.escape(plan.gpu)}：总显存 {format_bytes(plan.total_bytes)}，按 {float(fit.usable):g} 规划 "
        f"{format_bytes(plan.budget_bytes)}（{usable_note(fit.usable)}）；"
        f"{html.escape(p.label)} 的 {fit.weight_dtype} 权重 {format_bytes(plan.weight_bytes)}；"
        f"留给 KV Cache 的{left} <b>{format_bytes(plan.room_bytes)}</b>。",
        f"每条序列预留 R = {R:,} 个 token × {format_bytes(plan.per_token_bytes)}（{fit.cache_dtype}）= "
        f"{format_bytes(plan.slot_bytes)} → "
        + (f"最多同时 <b>{plan.capacity}</b> 条序列。" if plan.capacity
           else '<span style="color:#b00">最多同时 <b>0</b> 条序列：连 1 条都放不下。</span>'),
    ]
    idle = (f"（{plan.admitted} 条序列共闲置约 {format_bytes(plan.unused_bytes)}）" if plan.admitted else "")
    lines.append(
        f"按「{html.escape(plan.spread.label)}」的请求长度（编出来的示例分布，不是测量数据：{html.escape(plan.spread.describe())}）："
        f"<b>{plan.too_long_share:.1%}</b> 的请求比 R 长（会被截断或拒绝）；所有请求结束时平均填满预留的 "
        f"{plan.used_share:.1%}（比 R 长的按填满计），<b>{1 - plan.used_share:.1%} 闲置</b>{idle}。"
        "这是请求结束那一刻的填充率，也就是最少的浪费：生成途中填得更少。")
    if R > p.context_length:
        lines.append(f'<span style="color:#8a4b00">⚠ R 超过了 {html.escape(p.label)} 的上下文（{p.context_length:,} 个 '
                     f"token）：每条序列多出的 {R - p.context_length:,} 个 token 的预留永远用不上。</span>")
    if plan.over_budget_bytes:
        lines.append(f'<span style="color:#b00">想同时服务 {plan.wanted} 条：需要 {format_bytes(plan.needed_bytes)}，'
                     f"超出预算 <b>{format_bytes(plan.over_budget_bytes)}</b>——第 {plan.capacity + 1} 条序列起就放不下了。"
                     "预算检查在分配之前拒绝它们，而不是等分配时显存不足（OOM）。</span>")
    else:
        lines.append(f"想同时服务 {plan.wanted} 条：需要 {format_bytes(plan.needed_bytes)}，放得下，"
                     f"预算内还剩 {format_bytes(plan.budget_bytes - plan.needed_bytes)}。")
    lines.append(f"对比：按需分页（每块 {PAGE_TOKENS} 个 token，只给用到的块）时，同样的显存平均能放下约 "
                 f"<b>{plan.paged_capacity:.1f}</b> 条这样的请求，而且一条都不截断。")
    return "<br>".join(lines)


def budget_panel(gpu: str = DEFAULT_GPU, model: str = DEFAULT_MODEL, spread: str = DEFAULT_SPREAD,
                 reserved_tokens: int = 2048, wanted: int = 12, weight_dtype: str = "fp16",
                 cache_dtype: str = "fp16", usable: float = float(DEFAULT_USABLE)) -> Panel:
    """Card, model, request spread, dtypes and usable share; the reservation per sequence on a doubling slider from
    64 tokens up to 131,072 (the longest context of the models; past the chosen model's context the readout warns
    that the rest is never used), and the sequences wanted at once. (The options stay fixed whatever the model:
    ipywidgets' front end does not redraw a SelectionSlider whose options change.)"""
    options = [2**k for k in range(MIN_RESERVE_EXPONENT, MAX_RESERVE_EXPONENT + 1)]
    reserve = selection_slider(RESERVE_LABEL, [(f"{r:,}", r) for r in options], reserved_tokens, width="460px",
                               continuous=False)
    models = dropdown(MODEL_LABEL, list(BUDGET_MODELS), model, width="210px")
    share = float_box(USABLE_LABEL, usable, step=0.05)
    controls = {"gpu": dropdown(GPU_LABEL, list(GPU_PRESETS), gpu, width="230px"), "model": models,
                "spread": dropdown(SPREAD_LABEL, [(f"{s.label}（{s.note}）", k) for k, s in SPREADS.items()], spread,
                                   width="380px"),
                "weight_dtype": dropdown(WEIGHT_DTYPE_LABEL, list(DTYPE_BITS), weight_dtype, width="190px"),
                "cache_dtype": dropdown(CACHE_DTYPE_LABEL, list(DTYPE_BITS), cache_dtype, width="190px"),
                "usable": share, "reserved_tokens": reserve,
                "wanted": int_slider(CONCURRENT_LABEL, wanted, 1, MAX_CONCURRENT, width="380px")}
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
        """What a learner reads: kvlab's refusal in Chinese, computed."""
        where = "这块 GPU 只有" if self.device_type == "cuda" else "本机只有"
        memory = "显存" if self.device_type == "cuda" else "内存"
        return (f"kvlab 拒绝分配：批次 B = {self.batch_size:,} 条序列、每条 {self.seq_len:,} 个 token 的缓存需要 "
                f"{format_bytes(self.requested_bytes)}，{where} {format_bytes(self.free_bytes)} {memory}空闲")


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
    """The Chinese line, and the API's own message folded away as a detail."""
    return (f"<p><b>{html.escape(refused.line)}</b>：什么都没有分配，Jupyter 内核安然无恙。</p>"
            f"<details><summary>细节：API 抛出的 ValueError 原文（英文）。开头的 <code>{html.escape(refused.argument)}</code> "
            f"是它建议改小的参数；{refused.batch_size:,} 是批次大小 B（要同时缓存的序列数）：演示模型一条序列的缓存只有 "
            f"{format_bytes(refused.requested_bytes // max(refused.batch_size, 1))}，要凑出两倍于空闲内存的缓存，"
            "得要这么多条。所以这一次过大的其实是批次 B：改小 batch_size 或 max_seq_len 都能让缓存放得下。原文如下：</summary>"
            f"<p><code>{html.escape(refused.message)}</code></p></details>")
