"""Chapter 3.5 常见误区与复盘: each of the chapter's three misconceptions refuted by an experiment, a lab of
deliberately broken caches to find the bug in, and the chapter's review as a self-check.

1. The cache is not part of the parameters: the weights (count, bytes, a checksum) do not change whatever is
   generated, the cache's bytes follow B x S exactly, the cache is not in the state dict, and a reset empties it.
2. Caching K alone saves nothing worth having: the same tokens as without a cache, V of every token projected
   again at every step (the trace says so), about the same work and time as no cache at all; even a minimal
   K-only cache has to re-run the past tokens through every layer below the last.
3. A bigger cache is not better: weights and cache share one memory budget (chapter 3.4's plan: the usable share
   of the card, :data:`~kvlab.lessons.memory_estimate.DEFAULT_USABLE`); reserving more tokens per sequence lets
   fewer sequences run at once and leaves most of each reservation unused.
"""
from __future__ import annotations

import hashlib
import html
import math
import random
from dataclasses import dataclass
from functools import lru_cache, partial

import ipywidgets as W
import torch

from .. import inputs
from .._validate import positive_int
from ..assets import corpus_text
from ..attention import attention, attention_mask
from ..cache import KVCache
from ..config import ModelConfig
from ..costs import linear_flops_per_token, pass_cost
from ..device import available_memory
from ..generation import generate
from ..measure import DecodeTiming, leave_a_core, measurement_threads, time_generate
from ..stats import median
from ..memory import DTYPE_BITS, dtype_name, format_bytes, kv_cache_bytes
from ..model import ToyTransformer
from ..paging import mean_paged_slots, reserved_fill, reserved_slots
from ..presets import GPU_PRESETS, MODEL_PRESETS, ModelPreset
from ..teaching_caches import BROKEN_CACHES
from ..tokenizer import UnknownCharactersError
from ..viz import misconceptions_plots as plots
from ..viz.quiz import Choice, ChoiceQuestion, NumberQuestion
from ..viz.source import snippet_html, source_snippet
from ..viz.widgets import Panel, View, dropdown, int_slider, play_slider
from .decode import layer_qkv
from .memory_estimate import (CACHE_DTYPE_LABEL, DEFAULT_USABLE, USABLE_LABEL, WEIGHT_DTYPE_LABEL, FitPlan,
                              plan_fit, weights_do_not_fit)

DEFAULT_PROMPT = "人工"  # the course's running example
LAB_PROMPT = "计算"  # the lab's default: each broken cache first changes a token at a different step


def corpus_prompts(tokenizer, prompt_len: int, batch_size: int, stride: int = 53) -> list[list[int]]:
    """``batch_size`` different prompts of exactly ``prompt_len`` tokens: windows of the corpus ``stride`` apart."""
    need = stride * (positive_int("batch_size", batch_size) - 1) + positive_int("prompt_len", prompt_len)
    text = corpus_text()
    if need > len(text):
        raise ValueError(f"batch_size: {batch_size} windows of {prompt_len} tokens need {need} characters of the "
                         f"corpus, which has {len(text)}")
    ids = tokenizer.encode(text[:need])
    return [ids[b * stride: b * stride + prompt_len] for b in range(batch_size)]


# == Misconception 1: the cache is not part of the parameters ====================================
@dataclass(frozen=True)
class WeightsSnapshot:
    """What the model's parameters are: how many, their bytes, and a checksum of every byte of the state dict."""

    n_params: int
    n_bytes: int
    checksum: str  # sha256 over the names and raw bytes of every state-dict tensor, in order
    n_tensors: int


def weights_snapshot(model: ToyTransformer) -> WeightsSnapshot:
    state = model.state_dict()
    digest = hashlib.sha256()
    for name, t in state.items():
        digest.update(name.encode())
        digest.update(t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes())
    return WeightsSnapshot(sum(p.numel() for p in model.parameters()),
                           sum(t.numel() * t.element_size() for t in state.values()), digest.hexdigest(), len(state))


def _cache_checksum(cache: KVCache) -> str:
    """sha256 of the stored K and V (the filled part only)."""
    digest = hashlib.sha256()
    for t in (cache.k[:, :, :, :cache.length], cache.v[:, :, :, :cache.length]):
        digest.update(t.contiguous().cpu().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


@dataclass
class CacheRun:
    """One generation with a cache we hold: the weights before and after, and the cache as it grew."""

    prompt_len: int
    batch_size: int
    new_tokens: int
    before: WeightsSnapshot
    after: WeightsSnapshot
    seq_lens: list[int]  # tokens per sequence stored after each pass
    cache_bytes: list[int]  # bytes written so far after each pass (the trace's cache bytes: the filled part)
    allocated_bytes: int  # the preallocated tensors, this size from before the prefill on
    per_token_bytes: int  # K and V of one token of one sequence, all layers (the formula)
    cache_checksum: str
    cache_in_state_dict: bool  # does any state-dict tensor share memory with the cache?
    length_after_reset: int
    bytes_after_reset: int
    text: str  # what the first sequence reads (prompt and new tokens)

    @property
    def stored_tokens(self) -> int:
        """S: tokens per sequence in the cache at the end (the last new token is never fed back)."""
        return self.seq_lens[-1]

    @property
    def final_bytes(self) -> int:
        return self.cache_bytes[-1]

    @property
    def weights_unchanged(self) -> bool:
        return self.before == self.after


@leave_a_core
@torch.no_grad()
def run_with_cache(model: ToyTransformer, tokenizer, prompt_len: int, batch_size: int,
                   new_tokens: int = 16) -> CacheRun:
    """Generate ``new_tokens`` after ``batch_size`` corpus prompts of ``prompt_len`` tokens, watching both."""
    c = model.config
    prompt_len = positive_int("prompt_len", prompt_len)
    batch_size = positive_int("batch_size", batch_size)
    new_tokens = positive_int("new_tokens", new_tokens)
    if prompt_len + new_tokens > c.max_seq_len:
        raise ValueError(f"new_tokens: prompt_len ({prompt_len}) + new_tokens ({new_tokens}) passes the model's "
                         f"max_seq_len ({c.max_seq_len})")
    prompts = corpus_prompts(tokenizer, prompt_len, batch_size)
    before = weights_snapshot(model)
    cache = KVCache(c, batch_size, prompt_len + new_tokens - 1, dtype=model.dtype, device=model.device)
    result = generate(model, prompts, new_tokens, cache=cache)
    after = weights_snapshot(model)
    storages = {cache.k.untyped_storage().data_ptr(), cache.v.untyped_storage().data_ptr()}
    shared = any(t.untyped_storage().data_ptr() in storages for t in model.state_dict().values())
    checksum = _cache_checksum(cache)
    per_token = kv_cache_bytes(c.n_layer, c.n_kv_head, c.head_dim, 1, 1, dtype_name(model.dtype))
    run = CacheRun(prompt_len, batch_size, new_tokens, before, after, [r.seq_len for r in result.trace],
                   [r.cache_bytes for r in result.trace], cache.nbytes, per_token, checksum, shared, 0, 0,
                   tokenizer.decode(result.tokens[0]))
    cache.reset()
    run.length_after_reset, run.bytes_after_reset = cache.length, cache.used_bytes
    return run


M1_LIMITS = {"prompt_len": 200, "batch_size": 8, "new_tokens": 48}
PROMPT_LEN_LABEL, BATCH_LABEL, NEW_TOKENS_LABEL = "提示词长度", "批次 B", "生成 token 数"


def render_weights_vs_cache(model: ToyTransformer, tokenizer, prompt_len, batch_size, new_tokens) -> View:
    """The misconception-1 panel: one real generation, the weights checked before and after, the cache's bytes."""
    P = inputs.whole_number(PROMPT_LEN_LABEL, prompt_len, 1, M1_LIMITS["prompt_len"])
    B = inputs.whole_number(BATCH_LABEL, batch_size, 1, M1_LIMITS["batch_size"])
    n = inputs.whole_number(NEW_TOKENS_LABEL, new_tokens, 1, M1_LIMITS["new_tokens"])
    run = run_with_cache(model, tokenizer, P, B, n)
    S = run.stored_tokens
    same = "不变 ✓" if run.weights_unchanged else '<span style="color:#b00">变了！</span>'
    readout = (
        f"参数：{run.after.n_params:,} 个，{format_bytes(run.after.n_bytes)}；state_dict 校验和 "
        f"<code>{run.before.checksum[:12]}</code> → <code>{run.after.checksum[:12]}</code>（{same}）<br>"
        f"KV Cache 已写入：B = {B} 条序列 × S = {S} 个 token（提示词 {P} + 生成 {n} − 1：最后一个新 token 还没有送回模型）"
        f" × 每个 token {format_bytes(run.per_token_bytes)} = <b>{run.final_bytes:,} B = "
        f"{format_bytes(run.final_bytes)}</b>；预分配的张量在预填充之前就已经是 {run.allocated_bytes:,} B"
        f"（按 {P + n - 1} 个 token 分配，3.3 节）；缓存内容的校验和 <code>{run.cache_checksum[:12]}</code>（随输入而变）<br>"
        f"缓存在 state_dict 里吗？{'是' if run.cache_in_state_dict else '不在'}（没有哪个参数张量与缓存共用内存）；"
        f"reset() 之后：{run.length_after_reset} 个 token，已用 {run.bytes_after_reset} B"
    )
    limits = M1_LIMITS
    x_max = limits["batch_size"] * (limits["prompt_len"] + limits["new_tokens"] - 1)
    return View([plots.weights_vs_cache_figure(run, x_max)], readout, run)


def weights_panel(model: ToyTransformer, tokenizer, prompt_len: int = 120, batch_size: int = 4,
                  new_tokens: int = 16) -> Panel:
    """Prompt length and batch sliders, and a Play button that generates one more token per frame."""
    play, tokens = play_slider(NEW_TOKENS_LABEL, new_tokens, 1, M1_LIMITS["new_tokens"], interval_ms=400)
    tokens.layout.width = "330px"
    controls = {"prompt_len": int_slider(PROMPT_LEN_LABEL, prompt_len, 1, M1_LIMITS["prompt_len"], width="340px"),
                "batch_size": int_slider(BATCH_LABEL, batch_size, 1, M1_LIMITS["batch_size"], width="260px"),
                "new_tokens": tokens}
    return Panel(controls, partial(render_weights_vs_cache, model, tokenizer), layout="horizontal",
                 extra={"new_tokens": play}, css_class="kvlab-weights")


# == Misconception 2: caching K alone =============================================================
K_ONLY_MODES = ("none", "k_only", "kv")
K_ONLY_NAMES = {"none": "无缓存", "k_only": "只缓存 K", "kv": "有缓存"}  # as in the figures' legends
K_ONLY_MINIMAL = "k_only_min"  # a K-only cache that recomputes no more than V needs (counted, not run)
FLOP_MODES = ("none", "k_only", K_ONLY_MINIMAL, "kv")
FLOP_NAMES = {"none": "无缓存", "k_only": "只缓存 K（kvlab 的实现）", K_ONLY_MINIMAL: "只缓存 K（最省的做法）",
              "kv": "有缓存"}

# LLaMA-7B's shape as a ModelConfig, to count its FLOPs (nothing is allocated): Touvron et al. 2023 and the
# released config.json (hidden 4096, 32 layers, 32 heads, intermediate_size 11008, vocab 32000); its parameter
# count equals MODEL_PRESETS["LLaMA-7B"].n_params (tests check it).
LLAMA_7B_SHAPE = ModelConfig(vocab_size=32000, d_model=4096, n_layer=32, n_head=32, d_ff=11008, max_seq_len=2048)


def compare_k_only(model: ToyTransformer, prompt_ids, new_tokens: int, repeats: int = 1) -> dict[str, DecodeTiming]:
    """Generate with no cache, a K-only cache and a K+V cache on the same prompt, alternating, after a warm-up."""
    new_tokens = positive_int("new_tokens", new_tokens)
    return time_generate(model, prompt_ids, new_tokens, K_ONLY_MODES, repeats=repeats)


def tail_step_ms(t: DecodeTiming, fraction: float = 0.25) -> float:
    """Median decode-step time (ms) over the last ``fraction`` of the run, where the sequence is longest."""
    steps = t.step_seconds[1:]  # decode passes only
    tail = steps[-max(1, int(len(steps) * fraction)):]
    return median(tail) * 1e3


def step_flops(model, mode: str, seq_len: int) -> int:
    """FLOPs, counted as :mod:`kvlab.costs` counts them (2 per multiply-add, the masked half of a block too), of
    the decode pass that brings a sequence to ``seq_len`` tokens. ``model``: a ToyTransformer or a ModelConfig.

    - "none" runs all ``t = seq_len`` tokens through every layer; "kv" runs 1 token after ``t - 1`` cached ones;
    - "k_only", as :func:`kvlab.teaching_caches.k_only_forward` runs it: all t tokens through every layer, only
      the K projection of the ``t - 1`` past tokens skipped;
    - "k_only_min", the least a K-only cache could do: the new token as with a full cache, plus V of the past
      tokens at every layer, which needs their hidden states: the layers below the last re-run over the past
      tokens (their Q, V, attention among themselves, W_o, MLP; K stays cached); at the last layer only their V.
    """
    c = model.config if isinstance(model, ToyTransformer) else model
    if not isinstance(c, ModelConfig):
        raise ValueError(f"model must be a ToyTransformer or a ModelConfig, got {type(model).__name__}")
    t = positive_int("seq_len", seq_len)
    past = t - 1
    kv_proj = 2 * c.d_model * c.n_kv_head * c.head_dim  # one token's K (or V) projection in one layer
    if mode == "kv":
        return pass_cost(c, 1, past).flops
    if mode == "none":
        return pass_cost(c, t).flops
    if mode == "k_only":
        return pass_cost(c, t).flops - past * c.n_layer * kv_proj
    if mode == K_ONLY_MINIMAL:
        per_layer = linear_flops_per_token(c) // c.n_layer  # projections and MLP of one token in one layer
        among_past = 4 * c.n_head * c.head_dim * past * past  # Q K^T and weights @ V of the past tokens
        below = (c.n_layer - 1) * (past * (per_layer - kv_proj) + among_past)
        return pass_cost(c, 1, past).flops + below + past * kv_proj
    raise ValueError(f"mode must be one of {FLOP_MODES}, got {mode!r}")


@dataclass(frozen=True)
class StepFlops:
    """One decode step at ``seq_len`` counted in every way of :func:`step_flops`."""

    seq_len: int
    flops: dict  # mode -> FLOPs

    def share(self, mode: str) -> float:
        """The step's FLOPs as a share of the uncached step's."""
        return self.flops[mode] / self.flops["none"]


def count_step(model, seq_len: int) -> StepFlops:
    return StepFlops(seq_len, {m: step_flops(model, m, seq_len) for m in FLOP_MODES})


def tail_times_text(timings: dict[str, DecodeTiming]) -> str:
    """「无缓存 6.49 ms，只缓存 K 6.21 ms，有缓存 1.05 ms」: the median step of the last quarter of each run."""
    return "，".join(f"{K_ONLY_NAMES.get(m, m)} {tail_step_ms(t):.2f} ms" for m, t in timings.items())


def same_tokens(timings: dict[str, DecodeTiming]) -> bool:
    first = next(iter(timings.values())).tokens
    return all(torch.equal(t.tokens, first) for t in timings.values())


REPEATS_LABEL = "重复次数（取中位数）"
COUNTING = "按 kvlab.costs 的计数（一次乘加记 2 FLOP，掩码遮住的一半也算）"


def tail_range(timings: dict[str, DecodeTiming]) -> str:
    """The sequence lengths whose steps the last-quarter medians cover: "153–201"."""
    t = next(iter(timings.values())).seq_len[1:]  # decode passes, as tail_step_ms takes them
    tail = t[-max(1, int(len(t) * 0.25)):]
    return f"{tail[0]}–{tail[-1]}"


def render_k_only(model: ToyTransformer, prompt_ids, new_tokens, repeats) -> View:
    """The misconception-2 panel: time the three modes, plot step time and K/V projections per step."""
    n = inputs.whole_number(NEW_TOKENS_LABEL, new_tokens, 8, model.config.max_seq_len - len(prompt_ids[0]))
    r = inputs.whole_number(REPEATS_LABEL, repeats, 1, 9)
    timings = compare_k_only(model, prompt_ids, n, r)
    counted = count_step(model, timings["none"].seq_len[-1])
    tokens = "三种方式生成的 token 完全相同" if same_tokens(timings) else '<span style="color:#b00">token 不同！</span>'
    readout = (
        f"生成 {n} 个 token：{tokens}。最后 1/4 的解码步（t = {tail_range(timings)}）单步耗时中位数："
        f"<b>{tail_times_text(timings)}</b>（{model.device}，{measurement_threads()} 个 CPU 线程）<br>"
        f"trace 记录的每步投影（序列长度为 t 的那一步）：无缓存 K = V = t；只缓存 K：K = 1，<b>V = t</b>；有缓存：K = V = 1。"
        f"{COUNTING}，t = {counted.seq_len} 时只缓存 K 的一步仍要做无缓存的 <b>{counted.share('k_only'):.1%}</b> 的计算"
        f"（有缓存：{counted.share('kv'):.2%}）"
    )
    return View([plots.k_only_figure(timings)], readout, timings)


def k_only_panel(model: ToyTransformer, prompt_ids, new_tokens: int = 200) -> Panel:
    """Length and repeat sliders; measurements run when the button is clicked."""
    top = model.config.max_seq_len - len(prompt_ids[0])
    return Panel({"new_tokens": int_slider(NEW_TOKENS_LABEL, new_tokens, 40, top - top % 40, step=40),
                  "repeats": int_slider(REPEATS_LABEL, 1, 1, 5, width="300px")},
                 partial(render_k_only, model, prompt_ids), layout="horizontal", css_class="kvlab-konly",
                 button=W.Button(description="运行测量", button_style="primary", icon="play"))


@dataclass(frozen=True)
class Dependency:
    """How much K and V of the last token change, layer by layer, when only the first token is changed:
    ``||changed - original|| / ||original||`` over all KV heads of that token (0.5: by half its own size)."""

    text: str
    changed_text: str
    k_change: list[float]  # per layer, relative to ||K||
    v_change: list[float]  # per layer, relative to ||V||


@leave_a_core
@torch.no_grad()
def prefix_dependency(model: ToyTransformer, tokenizer, text: str = "人工智能模型") -> Dependency:
    """Change the first token of ``text`` and measure K and V of its last token at every layer.

    At layer 0 they depend on the last token and its position alone (no change); from layer 1 on they depend on
    every earlier token through the attention of the layers below: recomputing them means re-running those
    layers over the whole prefix.
    """
    ids = tokenizer.encode(text)
    if len(ids) < 2:
        raise ValueError("text: needs at least 2 tokens (one to change, one to watch)")
    changed = [(ids[0] + 1) % model.config.vocab_size] + ids[1:]
    k_change, v_change = [], []
    for layer in range(model.config.n_layer):
        _, k, v = layer_qkv(model, ids, layer)  # K, V: [H_kv, t, D]
        _, k2, v2 = layer_qkv(model, changed, layer)
        k_change.append(((k2[:, -1] - k[:, -1]).norm() / k[:, -1].norm()).item())
        v_change.append(((v2[:, -1] - v[:, -1]).norm() / v[:, -1].norm()).item())
    return Dependency(text, tokenizer.decode(changed), k_change, v_change)


@dataclass(frozen=True)
class QueryCheck:
    """Attention at one layer with the queries of every earlier token replaced by noise."""

    layer: int
    t: int
    last_row_change: float  # max |output change| of the newest token: its row uses only its own query
    earlier_rows_change: float  # ... of the earlier tokens' rows


@leave_a_core
@torch.no_grad()
def past_queries_unused(model: ToyTransformer, tokenizer, text: str = "人工智能模型", layer: int = 1,
                        seed: int = 0) -> QueryCheck:
    """Replace Q of every token but the last with noise: the last token's attention output does not move."""
    ids = tokenizer.encode(text)
    q, k, v = layer_qkv(model, ids, layer)  # Q: [H, t, D]; K, V: [H_kv, t, D]
    t = q.shape[1]
    noisy = q.clone()
    gen = torch.Generator().manual_seed(seed)
    noisy[:, :-1] = torch.randn(noisy[:, :-1].shape, generator=gen).to(q)
    mask = attention_mask(t, t, 0, device=q.device)
    out = attention(q[None], k[None], v[None], mask, impl="explicit")[0]  # [H, t, D]
    out_noisy = attention(noisy[None], k[None], v[None], mask, impl="explicit")[0]
    diff = (out_noisy - out).abs()  # [H, t, D]
    return QueryCheck(layer, t, diff[:, -1].max().item(), diff[:, :-1].max().item())


# == Misconception 3: a bigger cache is not better ===============================================
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
        raise inputs.InputError(GPU_LABEL, f"{gpu}：{weights_do_not_fit(plan.fit)}")
    sweep = [plan_reservation(model, gpu, r, N, SPREADS[spread], wd, cd, share) for r in reserve_options(model, R)]
    figures = [plots.budget_figure(plan), plots.reservation_figure(sweep, plan, TOO_LONG_LIMIT)]
    return View(figures, budget_html(plan), plan)


def budget_html(plan: ReservationPlan) -> str:
    p, R, fit = plan.model, plan.reserved_tokens, plan.fit
    left = "只剩" if plan.capacity == 0 else ""
    lines = [
        f"{html.escape(plan.gpu)}：总显存 {format_bytes(plan.total_bytes)}，按 {float(fit.usable):g} 规划 "
        f"{format_bytes(plan.budget_bytes)}（其余 {float(1 - fit.usable):.0%} 留给 CUDA 上下文等开销；激活也要占显存，"
        f"所以下面的缓存空间是上限）；"
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
    reserve = W.SelectionSlider(options=[(f"{r:,}", r) for r in options], value=reserved_tokens,
                                description=RESERVE_LABEL, continuous_update=False,
                                style={"description_width": "initial"}, layout=W.Layout(width="460px"))
    models = dropdown(MODEL_LABEL, list(BUDGET_MODELS), model, width="210px")
    share = W.FloatText(value=usable, step=0.05, description=USABLE_LABEL, style={"description_width": "initial"},
                        layout=W.Layout(width="190px"))
    controls = {"gpu": dropdown(GPU_LABEL, list(GPU_PRESETS), gpu, width="230px"), "model": models,
                "spread": dropdown(SPREAD_LABEL, [(f"{s.label}（{s.note}）", k) for k, s in SPREADS.items()], spread,
                                   width="380px"),
                "weight_dtype": dropdown(WEIGHT_DTYPE_LABEL, list(DTYPE_BITS), weight_dtype, width="190px"),
                "cache_dtype": dropdown(CACHE_DTYPE_LABEL, list(DTYPE_BITS), cache_dtype, width="190px"),
                "usable": share, "reserved_tokens": reserve,
                "wanted": int_slider(CONCURRENT_LABEL, wanted, 1, MAX_CONCURRENT, width="380px")}
    return Panel(controls, render_budget, layout="horizontal", css_class="kvlab-budget")


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
    need = len(ids) + new_tokens - 1
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

    @property
    def line(self) -> str:
        """What a learner reads: kvlab's refusal in Chinese, computed."""
        where = "这块 GPU 只有" if self.device_type == "cuda" else "本机只有"
        memory = "显存" if self.device_type == "cuda" else "内存"
        return (f"kvlab 拒绝分配：这块缓存需要 {format_bytes(self.requested_bytes)}，{where} "
                f"{format_bytes(self.free_bytes)} {memory}空闲")


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
        return RefusedAllocation(batch * per_sequence, free, model.device.type, str(exc))
    raise RuntimeError("a cache twice the size of free memory was allocated; kvlab's check did not refuse it")


def refusal_html(refused: RefusedAllocation) -> str:
    """The Chinese line, and the API's own message folded away as a detail."""
    return (f"<p><b>{html.escape(refused.line)}</b>：什么都没有分配，内核安然无恙。</p>"
            f"<details><summary>细节：API 抛出的 ValueError（英文，第一个词是出问题的参数）</summary>"
            f"<code>{html.escape(refused.message)}</code></details>")


# == Find the bug ===================================================================================
PREVIOUS_PROMPT = "大语言模型"  # the request served before the lab's prompt, with the same cache
LAB_NEW_TOKENS = 24
LOGIT_TOLERANCE = 1e-4  # |logit difference| below this is float rounding (a correct cache stays under 1e-5)
REFERENCE = "kv"  # the correct cache, as a control


@dataclass(frozen=True)
class BugCard:
    """What the lab shows for one cache: a neutral label, and, revealed on request, the explanation, the fix and
    the methods the cache overrides (shown from their source)."""

    label: str
    explanation: str
    fix: str
    methods: tuple[str, ...]


BUG_CARDS: dict[str, BugCard] = {
    REFERENCE: BugCard(
        "对照：正确的 KVCache",
        "这是 kvlab 的 KVCache，没有 bug：每一步的 logits 与无缓存的参考只差浮点舍入（小于 1e-5），生成的 token 完全相同。",
        "无需修复。", ("_store", "_read")),
    "rope_offset": BugCard(
        "缓存 A",
        "新 token 的 K 存进缓存时，旋转位置编码（RoPE）用的是位置 0、1、2……而不是它在序列中的真实位置 "
        "length、length + 1……：写 K 时漏掉了位置偏移。预填充从位置 0 开始，所以第 1 步完全正确；"
        "从第 2 步（第一次解码）起，每个新 K 都自称在位置 0，注意力分数里的相对位置全错了。"
        "模型很有把握时，错误的 logits 仍可能选出同一个 token，所以 token 往往要晚几步才变。",
        "旋转 K 时用 positions = length + arange(T)（kvlab 的 rope_and_mask(start=cache.length, ...)）。", ("_store",)),
    "no_reset": BugCard(
        "缓存 B",
        "reset() 忘了把 length 置 0。服务完上一个请求（「大语言模型」）后，同一块缓存接着服务这个提示词："
        "新的提示词被接在上一个请求的 token 后面，既能看到上一个请求的内容，位置编码也从错误的位置开始。"
        "所以第 1 步的 logits 就不同了；而全新的缓存从 length = 0 开始，完全正确（去掉「先服务上一个请求」试试）。",
        "reset() 里写上 self.length = 0（存储本身可以留着复用：读取只看前 length 个位置）。", ("reset",)),
    "k_as_v": BugCard(
        "缓存 C",
        "写缓存时把 K 写进了 V 的位置（复制粘贴时少改了一个字母）。注意力用权重对「K」求加权平均，"
        "输出完全不对，第 1 步（预填充）就已经出错，而且错得很离谱。",
        "self.v[layer, :, :, length:end] = v（而不是 = k）。", ("_store",)),
    "off_by_one": BugCard(
        "缓存 D",
        "新 token 写在 length − 1 而不是 length：把「最后一个已存 token 的下标」当成了「下一个空位」。"
        "预填充写在 0 … P−1（P 是提示词的 token 数），第 1 步正确。第一次解码把新 token 写在 P−1，"
        "覆盖了提示词最后一个 token 的 K/V；此后每个新 token 都比应在的位置早一格，而注意力读到的最后一格（length）"
        "始终还没写过：全新的缓存里是 0，复用的缓存里是上一个请求留下的旧数据。"
        "结果：提示词最后一个 token 丢了，每一步还多看到一个假 token。",
        "写入区间是 [length, length + T)：start = self.length。", ("_store",)),
    "one_slot": BugCard(
        "缓存 E",
        "所有层都读写第 0 层的那一格（忘了用 layer 下标）。同一次前向计算里，每一层都先写入新 token 再读取，"
        "所以预填充（第 1 步）恰好正确；从第一次解码起，每一层看到的旧 token 的 K/V 都是最后一层写下的，"
        "而不是本层的。",
        "按 self.k[layer] / self.v[layer] 读写：每一层有自己的一份缓存。", ("_store", "_read")),
}
CACHE_LABEL, PROMPT_LABEL, REVEAL_LABEL, REUSE_LABEL = "缓存", "提示词", "显示解释", "先服务上一个请求"
LAB_CACHES = (REFERENCE, *BROKEN_CACHES)


@dataclass(frozen=True)
class BugRun:
    """One cache against the uncached reference. The reference is teacher-forced: at every step it reads the
    same text this cache has written so far, so each step compares the next token of one and the same input."""

    cache: str  # "kv", a key of BROKEN_CACHES, or the name of the KVCache subclass that was run
    prompt: str
    reference: list[str]  # per step: the uncached model's next token after this cache's text so far
    output: list[str]  # ... this cache's token
    logit_diff: list[float]  # per step: max |logit difference| against the reference
    reused: bool = True  # the cache served PREVIOUS_PROMPT first (reset() in between)

    @property
    def first_token_step(self) -> int | None:
        """1-based step of the first new token that differs (None: all the same)."""
        return next((i + 1 for i, (a, b) in enumerate(zip(self.reference, self.output)) if a != b), None)

    @property
    def first_logit_step(self) -> int | None:
        """1-based step of the first distribution that differs beyond float rounding."""
        return next((i + 1 for i, d in enumerate(self.logit_diff) if d > LOGIT_TOLERANCE), None)

    @property
    def differing_steps(self) -> int:
        return sum(a != b for a, b in zip(self.reference, self.output))


def cache_class(cache) -> type[KVCache]:
    """The ``KVCache`` class a lab cache id (or a ``KVCache`` subclass, a learner's fix) stands for."""
    if isinstance(cache, type) and issubclass(cache, KVCache):
        return cache
    if cache == REFERENCE:
        return KVCache
    if cache in BROKEN_CACHES:
        return BROKEN_CACHES[cache]
    raise ValueError(f"cache must be one of {', '.join(LAB_CACHES)} or a KVCache subclass; got {cache!r}")


def make_lab_cache(cache, model: ToyTransformer, max_seq_len: int) -> KVCache:
    """A fresh cache for the lab: the correct ``KVCache`` ("kv"), one of ``BROKEN_CACHES`` by its id, or any
    ``KVCache`` subclass (a learner's fixed version of a broken one)."""
    return cache_class(cache)(model.config, 1, max_seq_len, dtype=model.dtype, device=model.device)


@leave_a_core
@torch.no_grad()
def run_lab_cache(model: ToyTransformer, tokenizer, cache, prompt: str = LAB_PROMPT,
                  new_tokens: int = LAB_NEW_TOKENS, previous: str = PREVIOUS_PROMPT, reused: bool = True) -> BugRun:
    """Serve ``prompt`` with one cache (when ``reused``: after serving ``previous`` with it and ``reset()``, as a
    server would) and compare every step with the uncached model reading the same text. ``cache``: an id (see
    :func:`make_lab_cache`) or a ``KVCache`` subclass."""
    new_tokens = positive_int("new_tokens", new_tokens)
    first, second = tokenizer.encode(previous), tokenizer.encode(prompt)
    kv = make_lab_cache(cache, model, len(first) + len(second) + 2 * (new_tokens - 1))
    if reused:
        generate(model, [first], new_tokens, cache=kv)
        kv.reset()
    out = generate(model, [second], new_tokens, cache=kv, return_logits=True)
    read = out.tokens[:, :-1]  # [1, P + n - 1]: the prompt and every new token but the last (never fed back)
    ref_logits = model(read)[:, len(second) - 1:]  # [1, n, vocab]: one full pass, no cache, causal mask
    diff = (out.logits - ref_logits).abs().nan_to_num(float("inf")).amax(dim=-1)[0]  # [n]
    as_text = lambda ids: [tokenizer.decode([int(i)]) for i in ids]  # noqa: E731
    name = cache.__name__ if isinstance(cache, type) else cache
    return BugRun(name, prompt, as_text(ref_logits[0].argmax(dim=-1)), as_text(out.new_tokens[0]), diff.tolist(),
                  bool(reused))


def lab_line(run: BugRun) -> str:
    """One line per cache for a printed overview: where its tokens and its logits first part from the reference."""
    label = BUG_CARDS[run.cache].label if run.cache in BUG_CARDS else run.cache
    if run.first_token_step is None and run.first_logit_step is None:
        return f"{label}：{len(run.output)} 步全部与参考相同（logits 的差异都在浮点误差以内）"
    tokens = ("token 全部相同" if run.first_token_step is None
              else f"token 从第 {run.first_token_step} 步起不同")
    return f"{label}：{tokens}，logits 从第 {run.first_logit_step} 步起偏离"


MAX_LAB_PROMPT, MAX_LAB_TOKENS = 64, 48


def lab_prompt(tokenizer, prompt) -> str:
    """The prompt box's text, checked against the demo model's vocabulary."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise inputs.InputError(PROMPT_LABEL, "是空的：请输入几个汉字，例如「人工」")
    prompt = prompt.strip()
    if len(prompt) > MAX_LAB_PROMPT:
        raise inputs.InputError(PROMPT_LABEL, f"最多 {MAX_LAB_PROMPT} 个字，收到了 {len(prompt)} 个")
    try:
        tokenizer.encode(prompt)
    except UnknownCharactersError as exc:
        shown = "、".join(f"「{c}」" for c in exc.characters[:10])
        raise inputs.InputError(PROMPT_LABEL, f"里的 {shown} 不在演示模型的词表里（它只认识训练语料中的字）") from None
    return prompt


def render_lab(model: ToyTransformer, tokenizer, cache, prompt, new_tokens, reused, reveal,
               run=run_lab_cache) -> View:
    """The lab panel: the reference and this cache's tokens with the differences marked, the logit
    differences per step, and (when ``reveal``) what the bug is and the code it is in."""
    cache = inputs.choice(CACHE_LABEL, cache, list(LAB_CACHES))
    prompt = lab_prompt(tokenizer, prompt)
    n = inputs.whole_number(NEW_TOKENS_LABEL, new_tokens, 1, MAX_LAB_TOKENS)
    result = run(model, tokenizer, cache, prompt, n, reused=bool(reused))
    figure = plots.divergence_figure(result, BUG_CARDS[cache].label, LOGIT_TOLERANCE)
    return View([figure], lab_html(result, bool(reveal)), result)


def _shown(token: str) -> str:
    """A token as one visible cell: a newline as ↵, a space as ␣."""
    return html.escape(token.replace("\n", "↵").replace(" ", "␣"))


def tokens_table_html(run: BugRun, label: str) -> str:
    """The prompt and the new tokens, one column per step, the reference above this cache; the first step that
    differs in a strong colour, later differing steps in a light one."""
    first = run.first_token_step
    cell = "padding:1px 3px;text-align:center;min-width:1.2em"

    def row(name: str, tokens: list[str], strong: str) -> str:
        tds = []
        for i, (tok, ref) in enumerate(zip(tokens, run.reference)):
            bg = strong if first == i + 1 else ("#fbe3d6" if first and i + 1 > first and tok != ref else "")
            style = f"{cell};background:{bg};color:white" if bg == strong else f"{cell};background:{bg}"
            tds.append(f'<td style="{style}">{_shown(tok)}</td>')
        return (f'<tr><td style="padding-right:8px;white-space:nowrap">{html.escape(name)}</td>'
                f'<td style="color:#888;padding-right:6px;white-space:nowrap">{html.escape(run.prompt)}</td>'
                + "".join(tds) + "</tr>")

    steps = "".join(f'<td style="{cell};color:#999;font-size:75%">{i}</td>' for i in range(1, len(run.output) + 1))
    return ('<table style="border-collapse:collapse;margin:4px 0">'
            f'<tr><td style="color:#999;font-size:75%">第几步</td><td style="color:#999;font-size:75%">提示词</td>'
            f"{steps}</tr>{row('无缓存（参考）', run.reference, '#0072B2')}{row(label, run.output, '#D55E00')}</table>")


def methods_html(cache: str) -> str:
    """The source of the methods the cache overrides, as they are in the installed package."""
    cls = cache_class(cache)
    return "".join(snippet_html(source_snippet(getattr(cls, m))) for m in BUG_CARDS[cache].methods)


def lab_html(run: BugRun, reveal: bool) -> str:
    card = BUG_CARDS[run.cache]
    step, logit_step = run.first_token_step, run.first_logit_step
    served = (f"先服务上一个请求「{PREVIOUS_PROMPT}」，reset() 后再服务它" if run.reused else "用一块全新的缓存服务它")
    lines = [f"提示词「{html.escape(run.prompt)}」：{served}；每一步都和不用缓存的模型读同样的上文（这个缓存已经写出的"
             "文字）时选的下一个 token 对比：", tokens_table_html(run, card.label)]
    if step is None:
        lines.append(f"<b>{html.escape(card.label)}：{len(run.output)} 步全部相同</b>；"
                     f"logits 最大差异 {max(run.logit_diff):.1e}")
        if run.cache != REFERENCE:
            lines.append("这次的设置恰好没有让 bug 暴露出来——bug 仍然在：换一个提示词、多生成几个 token，"
                         "或者改一改「先服务上一个请求」试试。")
    else:
        lines.append(f"<b>{html.escape(card.label)}：第 {step} 步开始不同</b>：参考「{_shown(run.reference[step - 1])}」，"
                     f"这个缓存「{_shown(run.output[step - 1])}」；logits 从第 {logit_step} 步起就超出了浮点误差；"
                     f"{len(run.output)} 步里有 {run.differing_steps} 步选的 token 与参考不同")
    if reveal:
        lines.append(f"<b>解释：</b>{html.escape(card.explanation)}<br><b>修复：</b>{html.escape(card.fix)}<br>"
                     f"<b>代码</b>（这个缓存改写的方法）：{methods_html(run.cache)}")
    else:
        lines.append("<i>先自己猜一猜 bug 在哪里，再勾选「显示解释」。</i>")
    return "<br>".join(lines)


def lab_panel(model: ToyTransformer, tokenizer, cache: str = "rope_offset", prompt: str = LAB_PROMPT,
              new_tokens: int = LAB_NEW_TOKENS, reused: bool = True) -> Panel:
    """Cache menu, prompt box, length slider, a fresh-or-reused box and a reveal box (cleared whenever another
    cache is chosen)."""
    menu = dropdown(CACHE_LABEL, [(BUG_CARDS[c].label, c) for c in LAB_CACHES], cache, width="280px")
    reveal = W.Checkbox(value=False, description=REVEAL_LABEL, indent=False, layout=W.Layout(width="120px"))
    menu.observe(lambda _change: setattr(reveal, "value", False), names="value")
    text = W.Text(value=prompt, description=PROMPT_LABEL, continuous_update=False,
                  style={"description_width": "initial"}, layout=W.Layout(width="260px"))
    reuse = W.Checkbox(value=reused, description=REUSE_LABEL, indent=False, layout=W.Layout(width="170px"))
    run = lru_cache(maxsize=64)(run_lab_cache)  # the same settings twice (reveal toggled) run once
    controls = {"cache": menu, "prompt": text,
                "new_tokens": int_slider(NEW_TOKENS_LABEL, new_tokens, 1, MAX_LAB_TOKENS, width="340px"),
                "reused": reuse, "reveal": reveal}
    return Panel(controls, partial(render_lab, model, tokenizer, run=run), layout="horizontal",
                 css_class="kvlab-lab")


def run_all_lab_caches(model: ToyTransformer, tokenizer, prompt: str = LAB_PROMPT,
                       new_tokens: int = LAB_NEW_TOKENS, reused: bool = True) -> dict[str, BugRun]:
    return {c: run_lab_cache(model, tokenizer, c, prompt, new_tokens, reused=reused) for c in LAB_CACHES}


# == Review ===========================================================================================
QUIZ_GPU = DEFAULT_GPU  # the budget question plans the card of misconception 3


def review_questions() -> list:
    """The chapter's self-check, 3.1 to 3.5; every numeric answer key computed by kvlab."""
    llama3, llama7 = MODEL_PRESETS["Llama-3-8B"], MODEL_PRESETS["LLaMA-7B"]
    mha70, gqa70 = MODEL_PRESETS["70B, 64 KV heads (chapter's hypothetical)"], MODEL_PRESETS["Llama-2-70B"]
    card, plan = GPU_PRESETS[QUIZ_GPU], plan_reservation("LLaMA-7B", QUIZ_GPU, 2048, 1)
    usable = float(plan.fit.usable)
    C = Choice
    return [
        ChoiceQuestion("3.1", "用 KV Cache 生成时，解码阶段序列长度为 t 的那一步要为多少个 token 计算 K 和 V？", (
            C("t 个", False, "那是不用缓存时：每一步把全部上文重新投影一遍。"),
            C("1 个", True, "只有新 token 的 K、V 要算，之前的都从缓存读取（trace 里每个解码步 k_tokens = 1）。"),
            C("t − 1 个", False, "之前的 t − 1 个 token 的 K、V 正是缓存里存着、不用再算的部分。"),
            C("t² 个", False, "t × t 是不用缓存时每层每头的注意力分数个数，不是投影的 token 数。"))),
        ChoiceQuestion("3.1", "缓存里已有 t − 1 个 token、输入第 t 个 token 时，每层每个查询头要算多少个注意力分数？", (
            C("t × t 个", False, "那是无缓存时重算的完整矩阵。"),
            C("t 个（1 × t）", True, "新 token 的一个查询对 t 个键（t − 1 个旧的加它自己）：单步从 O(t²) 降为 O(t)。"),
            C("t − 1 个", False, "新 token 也要和它自己的 K 做点积：一共 t 个。"),
            C("1 个", False, "新 token 要和全部 t 个 token（包括自己）的 K 做点积。"))),
        NumberQuestion("3.2", f"Llama-3-8B（{llama3.n_layer} 层，{llama3.n_kv_head} 个 KV 头，头维度 {llama3.head_dim}）"
                              "在 FP16 下，1 条序列的 1 个 token 要占多少字节的 KV Cache（所有层，K 和 V）？",
                       llama3.kv_bytes_per_token("fp16"), "字节",
                       f"2（K 和 V）× {llama3.n_layer} 层 × {llama3.n_kv_head} 个 KV 头 × {llama3.head_dim} × 2 字节"
                       f" = {format_bytes(llama3.kv_bytes_per_token('fp16'))}。",
                       "公式是 2 × L × H × D × 每元素字节，其中 H 是 KV 头数，不是查询头数。"),
        ChoiceQuestion("3.2", "缓存里已存部分的形状是（L, B, H, S, D）（预分配的缓存里是前 length 个位置）。"
                              "解码时每生成一个 token，哪一维加 1？", (
            C("L", False, "层数由模型结构决定，不会变。"),
            C("B", False, "批次是同时处理的序列数，解码一步不会增加序列。"),
            C("S", True, "S 是已存的 token 数：每一步追加 1 个。"),
            C("D", False, "头维度由模型结构决定。"))),
        ChoiceQuestion("3.3", "预填充（prefill）阶段做的是什么？", (
            C("一次处理完整的提示词，算出所有提示词 token 的 K/V 存入缓存", True,
              "提示词的所有 token 可以在一次前向计算里并行处理；之后的解码每步只处理 1 个新 token。"),
            C("为每个提示词 token 各做一次前向计算", False, "提示词一开始就全部已知，不必逐个处理。"),
            C("把缓存清零、分配显存", False, "分配是准备工作；预填充是一次真正的前向计算。"))),
        NumberQuestion("3.4", f"LLaMA-7B（{llama7.n_layer} 层，{llama7.n_kv_head} 个 KV 头，D = {llama7.head_dim}），"
                              "序列长度 2048，批次 1，FP16：KV Cache 一共多少 GiB？",
                       llama7.kv_cache_bytes(2048, 1, "fp16") / 2**30, "GiB",
                       f"2 × {llama7.n_layer} × 1 × {llama7.n_kv_head} × 2048 × {llama7.head_dim} × 2 B = "
                       f"{format_bytes(llama7.kv_cache_bytes(2048))}。原文注释里的 0.50 GB 少了一半。",
                       "把 2（K 和 V）、L、B、H、S、D 和每元素 2 字节全部乘起来，再除以 1024³。", rel_tol=0.005),
        NumberQuestion("3.4", f"原文假设的 70B 模型有 {mha70.n_kv_head} 个 KV 头；真实的 Llama-2-70B 用分组查询注意力"
                              f"（GQA，几个查询头共用一组 K/V），只有 {gqa70.n_kv_head} 个。"
                              "同样的序列长度下，前者的 KV Cache 是后者的几倍？",
                       mha70.kv_bytes_per_token() / gqa70.kv_bytes_per_token(), "倍",
                       f"层数、头维度都相同，缓存与 KV 头数成正比：{mha70.n_kv_head} / {gqa70.n_kv_head} = "
                       f"{mha70.n_kv_head // gqa70.n_kv_head} 倍。",
                       "只有 KV 头数不同，比一比两者的 KV 头数。"),
        ChoiceQuestion("3.5", "用同一个模型生成了几段不同长度、不同批次的文字之后，模型 state_dict 的校验和会怎样？", (
            C("不变", True, "推理不改权重：缓存是每次生成时另外分配的张量，不在 state_dict 里。"),
            C("随生成的 token 数变大", False, "变大的是 KV Cache（B × S × 每个 token 的字节数），不是参数。"),
            C("每次生成都不同", False, "只有缓存的内容随输入变；参数一个字节都没变。"))),
        ChoiceQuestion("3.5", "为什么只缓存 K、不缓存 V 几乎不省时间？", (
            C("因为 V 比 K 大", False, "K 和 V 的形状完全相同。"),
            C("因为旧 token 的 V 会随新 token 改变，必须每步重算", False,
              "不会：因果掩码下，一个 token 的 K、V 只取决于它自己和它之前的 token，新 token 改变不了它们——"
              "所以 K 和 V 才能缓存。问题在于不缓存 V 时，重算它要付出的代价。"),
            C("因为旧 token 在第 l 层的 V 取决于它在第 l 层的隐藏状态，而那要把前面所有层在整个前缀上重算一遍",
              True, "要重算 V 就得重跑几乎整个模型：只缓存 K 省下的只是旧 token 的 K 投影那一小部分。"),
            C("因为注意力用不到 V", False, "注意力的输出就是对 V 的加权平均，离不开 V。"))),
        NumberQuestion("3.5", f"{card.name}（nvidia-smi 报告 {card.memory_mib:,} MiB），像 3.4 节那样按 {usable:g} 规划"
                              f"（其余 {1 - usable:.0%} 留给 CUDA 上下文等开销）。放上 FP16 的 LLaMA-7B 权重"
                              f"（{llama7.n_params:,} 个参数，每个 2 字节），剩下的给 KV Cache（{llama7.n_layer} 层，"
                              f"{llama7.n_kv_head} 个 KV 头，D = {llama7.head_dim}，FP16）。"
                              "每条序列预留 2048 个 token，最多能同时服务几条序列？", plan.capacity, "条",
                       f"可用 {card.memory_mib:,} MiB × {usable:g} = {format_bytes(plan.budget_bytes)}，减去权重 "
                       f"{format_bytes(plan.weight_bytes)}，剩 {format_bytes(plan.room_bytes)}；每条序列预留 "
                       f"{format_bytes(plan.slot_bytes)}，放得下 {plan.capacity} 条。",
                       f"先算可用显存（总量 × {usable:g}）减去权重，再除以一条序列 2048 个 token 的缓存（每个 token "
                       f"{format_bytes(plan.per_token_bytes)}），只取整条。"),
        ChoiceQuestion("3.5", "一个缓存的第 1 步（预填充）完全正确，从第 2 步起 logits 才开始偏离。"
                              "下面哪个 bug 不可能造成这种现象？", (
            C("K 写进了 V 的位置", True, "这个 bug 在预填充时就生效：第 1 步就错了。"),
            C("所有层都读写第 0 层的那一格", False, "预填充时每层先写后读，恰好正确，解码时才出错。"),
            C("新 token 写在 length − 1", False, "预填充从 0 开始写，恰好正确，解码时才出错。"))),
    ]


# == The chapter's numbers, on this machine =======================================================
@dataclass(frozen=True)
class PrefillDecode:
    """One generation with a cache: the prefill pass over the whole prompt against one decode step."""

    prompt_len: int
    prefill_seconds: float  # median over repeats
    decode_seconds: float  # median decode step

    @property
    def prefill_per_token(self) -> float:
        return self.prefill_seconds / self.prompt_len


@leave_a_core
def prefill_vs_decode(model: ToyTransformer, tokenizer, prompt_len: int = 128, new_tokens: int = 9,
                      repeats: int = 3) -> PrefillDecode:
    """Time a prefill of ``prompt_len`` corpus tokens and the decode steps after it (chapter 3.3, quickly)."""
    prompt = corpus_prompts(tokenizer, prompt_len, 1)
    t = time_generate(model, prompt, positive_int("new_tokens", new_tokens), ("kv",), repeats=repeats)["kv"]
    return PrefillDecode(prompt_len, t.step_seconds[0], median(t.step_seconds[1:]))


@dataclass(frozen=True)
class SummaryRow:
    topic: str
    measured: str  # what this notebook measured here (plain text)
    conclusion: str


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def chapter_rows(model: ToyTransformer, runs: list[CacheRun], timings: dict[str, DecodeTiming],
                 prefill: PrefillDecode, plan: ReservationPlan) -> list[SummaryRow]:
    """Sections 3.1-3.4, each in one line, from this notebook's own runs."""
    none, kv = tail_step_ms(timings["none"]), tail_step_ms(timings["kv"])
    held = timings["kv"].cache_bytes[-1]
    r, c = runs[-1], model.config
    element = r.per_token_bytes // (2 * c.n_layer * c.n_kv_head * c.head_dim)  # bytes per stored number
    shape = f"2 × {c.n_layer} × {r.batch_size} × {c.n_kv_head} × {r.stored_tokens} × {c.head_dim} × {element} B"
    formula = kv_cache_bytes(c.n_layer, c.n_kv_head, c.head_dim, r.stored_tokens, r.batch_size,
                             dtype_name(model.dtype))
    llama = MODEL_PRESETS["LLaMA-7B"]
    return [
        SummaryRow("3.1 自回归解码：空间换时间", f"最后 1/4 解码步（t = {tail_range(timings)}）的单步中位数：无缓存 {none:.2f} ms，有缓存 "
                   f"{kv:.2f} ms（快 {none / kv:.1f} 倍）；代价是缓存里存着的 {format_bytes(held)}",
                   "缓存旧 token 的 K/V，每步只算新 token：把重复计算变成增量计算"),
        SummaryRow("3.2 存储结构 L×B×H×S×D", f"演示模型的缓存（L, B, H, S, D）=（{c.n_layer}, {r.batch_size}, "
                   f"{c.n_kv_head}, {r.stored_tokens}, {c.head_dim}）：{shape} = {formula:,} B，trace 记录 "
                   f"{r.final_bytes:,} B", "缓存大小 = 2（K、V）× L × B × H × S × D × 每元素字节，随 B 和 S 线性增长"),
        SummaryRow("3.3 预填充与解码", f"预填充 {prefill.prompt_len} 个 token 一次前向 {_ms(prefill.prefill_seconds)}"
                   f"（每个 token {_ms(prefill.prefill_per_token)}）；之后每个解码步 {_ms(prefill.decode_seconds)}，"
                   "只出 1 个 token",
                   "预填充一次前向处理整段提示词；解码一步只出一个 token，每步都要读一遍权重和缓存"),
        SummaryRow("3.4 LLaMA-7B 的显存", f"S = 2048、B = 1、FP16：{format_bytes(llama.kv_cache_bytes(2048))}（原文写 "
                   f"0.50 GB）；{plan.gpu} 按 {float(plan.fit.usable):g} 规划，放下权重后每条预留 "
                   f"{plan.reserved_tokens:,} 的序列放得下 {plan.capacity} 条",
                   "先算权重，再按可用显存算能放下多少 token、多少条序列"),
    ]


def scenario_plans(model: str = DEFAULT_MODEL, gpu: str = DEFAULT_GPU) -> dict[str, ReservationPlan]:
    """Each request spread of :data:`SPREADS` on one card, every sequence reserved the model's whole context."""
    context = MODEL_PRESETS[model].context_length
    return {key: plan_reservation(model, gpu, context, 1, spread) for key, spread in SPREADS.items()}


def scenario_row(plans: dict[str, ReservationPlan]) -> SummaryRow:
    """The original text's 业务场景 (long-document QA, multi-turn chat) as one row: fixed vs paged."""
    first = next(iter(plans.values()))
    parts = "；".join(f"{p.spread.label}：闲置 {1 - p.used_share:.0%}，固定 {p.capacity} 条 vs 分页约 "
                     f"{p.paged_capacity:.1f} 条" for p in plans.values())
    return SummaryRow("业务场景", f"{first.gpu} + {first.model.label}，每条预留整个上下文 {first.reserved_tokens:,}：{parts}",
                      "请求越接近上下文长度（长文档问答），固定预留浪费越少、分页收益越小；请求越短（单轮问答、多轮对话），"
                      "分页省得越多")


def summary_rows(model: ToyTransformer, runs: list[CacheRun], timings: dict[str, DecodeTiming],
                 prefill: PrefillDecode, budget_plans: list[ReservationPlan], lab: dict[str, BugRun],
                 scenarios: dict[str, ReservationPlan]) -> list[SummaryRow]:
    """The chapter's claims next to what this notebook measured for them, from the results it already has."""
    checks = "、".join(f"{r.batch_size} × {r.stored_tokens}" for r in runs)
    same = all(r.weights_unchanged for r in runs)
    exact = all(r.final_bytes == r.batch_size * r.stored_tokens * r.per_token_bytes for r in runs)
    v_last = {m: t.v_tokens[-1] for m, t in timings.items()}
    plans = "；".join(f"预留 {p.reserved_tokens:,} → {p.capacity} 条，闲置 {1 - p.used_share:.0%}，"
                     f"{p.too_long_share:.1%} 的请求放不下" for p in budget_plans)
    broken = {c: r for c, r in lab.items() if c != REFERENCE}
    steps = "，".join(f"{BUG_CARDS[c].label} 第 {r.first_token_step} 步" for c, r in broken.items())
    first = budget_plans[0]
    return chapter_rows(model, runs, timings, prefill, first) + [
        SummaryRow("误区 1：缓存是参数", f"{len(runs)} 次生成（B × S = {checks}）：参数校验和{'全部不变' if same else '变了'}；"
                   f"缓存字节数{'全部等于' if exact else '不等于'} B × S × {format_bytes(runs[0].per_token_bytes)}；"
                   f"reset() 后 {runs[-1].length_after_reset} 个 token",
                   "缓存是推理时另外分配的临时张量，随输入增长；权重一个字节都不变"),
        SummaryRow("误区 2：只缓存 K", f"最后 1/4 解码步的单步耗时：{tail_times_text(timings)}；最后一步投影 V 的 token 数"
                   f"（无缓存 / 只缓存 K / 有缓存）{v_last['none']} / {v_last['k_only']} / {v_last['kv']}",
                   "V 必须和 K 一起缓存，否则每步仍要把整个前缀重算一遍"),
        SummaryRow("误区 3：缓存越大越好", f"{first.gpu} + {first.model.label}（FP16，按 {float(first.fit.usable):g} 规划）："
                   f"{plans}", "预留多少要看显存预算和请求长度的分布；按需分页（PagedAttention）避免闲置"),
        SummaryRow("找 bug", f"{len(broken)} 个坏缓存在「{lab[REFERENCE].prompt}」上第一次生成不同的 token：{steps}；正确的缓存："
                   f"{'全部相同' if lab[REFERENCE].first_token_step is None else '不同！'}",
                   "缓存的 bug 不会报错，只会悄悄改变输出：与无缓存的参考逐步对比才能发现"),
        scenario_row(scenarios),
    ]


def summary_html(rows: list[SummaryRow]) -> str:
    body = "".join(f"<tr><td>{html.escape(r.topic)}</td><td>{html.escape(r.measured)}</td>"
                   f"<td>{html.escape(r.conclusion)}</td></tr>" for r in rows)
    return ("<table><thead><tr><th>本章</th><th>本机实测（本笔记本刚刚算出）</th><th>结论</th></tr></thead>"
            f"<tbody>{body}</tbody></table>")
