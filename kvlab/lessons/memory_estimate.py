"""Chapter 3.4: the LLaMA-7B estimate recomputed, a KV-cache calculator for real models, and GPU budgets.

Every byte count here is an exact integer from :mod:`kvlab.memory` (through the presets of
:mod:`kvlab.presets`, which add the sliding-window and latent-KV rules); nothing is allocated except the
small cache of :func:`measure_cache_allocation`.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from fractions import Fraction

import ipywidgets as W
import torch

from .. import inputs
from ..cache import KVCache
from ..config import ModelConfig
from ..device import as_device, synchronize
from ..memory import DTYPE_BITS, format_bytes, kv_cache_bytes
from ..presets import GPU_PRESETS, LATENT, MODEL_PRESETS, SLIDING_WINDOW, GpuPreset, ModelPreset
from ..viz import memory_estimate_plots as plots
from ..viz.widgets import Panel, View, dropdown, int_box

# -- the chapter's own example -------------------------------------------------------------------
CHAPTER_MODEL = "LLaMA-7B"
CHAPTER_L, CHAPTER_H, CHAPTER_D, CHAPTER_S = 32, 32, 128, 2048  # "L=32层，H=32头，D=128 ... 序列长度为2048"
CHAPTER_LONG_S = 8192  # "当序列长度增长到8192时"
CHAPTER_70B = "70B, 64 KV heads (chapter's hypothetical)"  # "70B模型（L=80, H=64, D=128）"
REAL_70B = "Llama-2-70B"
SHAPE_EXAMPLE_S = 1024  # the sequence length of section 3.2's example
GB, GIB, MIB = 10**9, 2**30, 2**20

# -- control limits ------------------------------------------------------------------------------
MAX_SEQ_LEN = 2**22  # 4,194,304 tokens: 32 x the longest context of any preset; more is a typing error
MAX_BATCH = 2**16
MAX_BUDGET_MIB = 2**24  # 16 TiB: a whole multi-GPU node
CUSTOM_GPU = "自定义"
SEQ_OPTIONS = sorted({2**k for k in range(23)} | {3 * 2**k for k in range(21)})  # 1, 2, 3, 4, 6, 8, 12 ... 2**22
CURVE_MODELS = ("GPT-2 (124M)", "LLaMA-7B", "Llama-2-70B", CHAPTER_70B, "Llama-3.1-405B", "Mistral-7B",
                "DeepSeek-V3 (671B)")
TWINS = ((CHAPTER_70B, REAL_70B), ("LLaMA-65B", "Llama-2-70B"), ("Llama-2-7B", "Llama-3-8B"))
TRADEOFF_BATCHES = tuple(2**k for k in range(13))  # 1 .. 4096
SEARCH_CAP = 2**60  # tokens: a cache that fits this many has stopped growing (every layer windowed)

# Labels on screen (InputError names the control exactly as the learner sees it).
MODEL_LABEL, SEQ_LABEL, BATCH_LABEL = "模型", "序列长度 S", "批次 B"
CACHE_DTYPE_LABEL, WEIGHT_DTYPE_LABEL = "缓存数据类型", "权重数据类型"
GPU_LABEL, BUDGET_LABEL = "GPU", "可用显存（MiB）"


def preset(model) -> ModelPreset:
    """A :class:`ModelPreset` from itself or its name in ``MODEL_PRESETS``."""
    if isinstance(model, ModelPreset):
        return model
    if not isinstance(model, str) or model not in MODEL_PRESETS:
        raise ValueError(f"model must be one of MODEL_PRESETS ({', '.join(MODEL_PRESETS)}); got {model!r}")
    return MODEL_PRESETS[model]


# == 1. The chapter's figures, recomputed ========================================================
@dataclass(frozen=True)
class TextFigure:
    """One figure the original text prints or claims, read in its own unit, against kvlab's exact bytes."""

    what: str  # what the figure is about (Chinese)
    text_says: str  # as the text writes it
    relation: str  # "=" (printed output), "≈" (about) or ">" (more than)
    text_bytes: int  # the text's number in bytes; its code divides by 1024**2 and 1024**3, so MB/GB here are MiB/GiB
    kvlab_bytes: int

    @property
    def ratio(self) -> Fraction:
        return Fraction(self.kvlab_bytes, self.text_bytes)

    @property
    def holds(self) -> bool:
        if self.relation == ">":
            return self.kvlab_bytes > self.text_bytes
        if self.relation == "≈":
            return abs(self.ratio - 1) <= Fraction(1, 10)
        return self.kvlab_bytes == self.text_bytes


def chapter_figures() -> list[TextFigure]:
    """The figures of section 3.4 (its printed output, the 8192-token and the 70B sentences), recomputed."""
    llama = MODEL_PRESETS[CHAPTER_MODEL]
    return [
        TextFigure(f"LLaMA-7B 每层，S = {CHAPTER_S:,}", "16.0 MB", "=", 16 * MIB,
                   llama.layer_kv_cache_bytes(0, CHAPTER_S)),
        TextFigure(f"LLaMA-7B 共 {CHAPTER_L} 层，S = {CHAPTER_S:,}", "0.50 GB", "=", GIB // 2,
                   llama.kv_cache_bytes(CHAPTER_S)),
        TextFigure(f"LLaMA-7B，S = {CHAPTER_LONG_S:,}", "约2GB", "≈", 2 * GIB, llama.kv_cache_bytes(CHAPTER_LONG_S)),
        TextFigure(f"70B（L=80, H=64, D=128，64 个 KV 头），S = {CHAPTER_LONG_S:,}", "超过16GB", ">", 16 * GIB,
                   MODEL_PRESETS[CHAPTER_70B].kv_cache_bytes(CHAPTER_LONG_S)),
        TextFigure(f"真实的 Llama-2-70B（8 个 KV 头），S = {CHAPTER_LONG_S:,}", "超过16GB", ">", 16 * GIB,
                   MODEL_PRESETS[REAL_70B].kv_cache_bytes(CHAPTER_LONG_S)),
    ]


@dataclass(frozen=True)
class Variant:
    """The chapter's calculation with one thing changed: what per-layer and total figures it prints."""

    change: str
    per_layer_bytes: int
    total_bytes: int

    @property
    def printed(self) -> tuple[str, str]:
        """What the chapter's two print lines show for these bytes (its own format and units)."""
        return f"{self.per_layer_bytes / 1024**2:.1f} MB", f"{self.total_bytes / 1024**3:.2f} GB"


def halving_variants() -> list[Variant]:
    """The chapter's code as written, then each single change that halves its result."""
    L, H, D, S = CHAPTER_L, CHAPTER_H, CHAPTER_D, CHAPTER_S
    k_only = kv_cache_bytes(1, H, D, S) // 2  # K alone is exactly half of K and V
    rows = [("原文代码原样：S = 2048，K 和 V 两份，FP16 每个元素 2 字节", kv_cache_bytes(1, H, D, S)),
            (f"S = {SHAPE_EXAMPLE_S}（3.2 节示例用的长度）", kv_cache_bytes(1, H, D, SHAPE_EXAMPLE_S)),
            ("只算 K（或只算 V）：少乘了「K 和 V」的 2", k_only),
            ("每个元素按 1 字节算（INT8/FP8）：少乘了 FP16 的 2", kv_cache_bytes(1, H, D, S, 1, "int8"))]
    return [Variant(change, per_layer, L * per_layer) for change, per_layer in rows]


def _verdict(f: TextFigure) -> str:
    verdict = "成立" if f.holds else '<span style="color:#b00">不成立</span>'
    if f.relation == ">":
        return f"{verdict}：{format_bytes(f.kvlab_bytes)} {'>' if f.holds else '<'} {format_bytes(f.text_bytes)}"
    return f"{verdict}：kvlab 的结果是原文的 {float(f.ratio):g} 倍"


def chapter_figures_html(figures: list[TextFigure]) -> str:
    """The recomputed figures as a table: what the text says, what kvlab computes, and whether it holds."""
    rows = "".join(
        f"<tr><td>{html.escape(f.what)}</td><td>{html.escape(f.text_says)}</td>"
        f"<td><b>{format_bytes(f.kvlab_bytes)}</b>（{f.kvlab_bytes:,} B）</td><td>{_verdict(f)}</td></tr>"
        for f in figures)
    return ("<table><thead><tr><th>原文说的是</th><th>原文的数字</th><th>kvlab 算出的（精确字节数）</th>"
            f"<th>结论</th></tr></thead><tbody>{rows}</tbody></table>")


def variants_html(variants: list[Variant]) -> str:
    rows = "".join(f"<tr><td>{html.escape(v.change)}</td><td>{v.printed[0]}</td><td>{v.printed[1]}</td></tr>"
                   for v in variants)
    return ("<table><thead><tr><th>原文的计算，只改一处</th><th>每层 KV Cache</th><th>总 KV Cache</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def gb_and_gib(n_bytes: int) -> tuple[Fraction, Fraction]:
    """``n_bytes`` in GB (10**9 bytes) and in GiB (2**30 bytes), exactly."""
    return Fraction(n_bytes, GB), Fraction(n_bytes, GIB)


# == 2. A calculator for real models ============================================================
@dataclass(frozen=True)
class CacheEstimate:
    """One model's cache for ``batch_size`` sequences of ``seq_len`` tokens in ``dtype``."""

    model: ModelPreset
    seq_len: int
    batch_size: int
    dtype: str
    total_bytes: int
    per_token_bytes: int  # one token of one sequence, every layer (before any window fills)
    layer_bytes: tuple[int, ...]  # one entry per layer
    plain_bytes: int  # 2 * L * B * H_kv * S * D * bytes: equals total_bytes for standard models

    @property
    def beyond_context(self) -> bool:
        return self.seq_len > self.model.context_length


def estimate_cache(model, seq_len: int, batch_size: int = 1, dtype: str = "fp16") -> CacheEstimate:
    """The exact cache of ``model`` (a preset or its name), with that model's own rule."""
    p = preset(model)
    total = p.kv_cache_bytes(seq_len, batch_size, dtype)  # validates seq_len, batch_size and dtype
    layers = tuple(p.layer_kv_cache_bytes(i, seq_len, batch_size, dtype) for i in range(p.n_layer))
    return CacheEstimate(p, seq_len, batch_size, dtype, total, p.kv_bytes_per_token(dtype), layers,
                         p.plain_formula_bytes(seq_len, batch_size, dtype))


@dataclass(frozen=True)
class CacheCurve:
    """Cache bytes of one model at a few sequence lengths (for the log-log plot)."""

    name: str
    seq_lens: tuple[int, ...]
    bytes: tuple[int, ...]
    context_length: int
    context_bytes: int


def cache_curves(names, batch_size: int = 1, dtype: str = "fp16", seq_lens=None) -> list[CacheCurve]:
    seq_lens = tuple(SEQ_OPTIONS[::2] if seq_lens is None else seq_lens)
    out = []
    for name in names:
        p = preset(name)
        out.append(CacheCurve(p.name, seq_lens, tuple(p.kv_cache_bytes(s, batch_size, dtype) for s in seq_lens),
                              p.context_length, p.kv_cache_bytes(p.context_length, batch_size, dtype)))
    return out


def formula_html(e: CacheEstimate) -> str:
    """The formula with this model's numbers in it, ending in the exact byte count."""
    p, S, B, byte = e.model, e.seq_len, e.batch_size, DTYPE_BITS[e.dtype] / 8
    total = f"<b>{e.total_bytes:,} B = {format_bytes(e.total_bytes)}</b>"
    if p.cache_formula == LATENT:
        return (f"L × B × S × 潜在维度 × 每元素字节 = {p.n_layer} × {B:,} × {S:,} × {p.kv_latent_dim} × {byte:g} B"
                f" = {total}")
    if p.cache_formula == SLIDING_WINDOW:
        n_win, n_full = p.n_windowed_layers, p.n_layer - p.n_windowed_layers
        windowed = f"2 × {n_win} 个窗口层 × B × H × min(S, {p.sliding_window:,}) × D"
        both = f"({windowed} + 2 × {n_full} 个全局层 × B × H × S × D)" if n_full else windowed
        return (f"{both} × 每元素字节"
                f"（B = {B:,}，H = {p.n_kv_head}，S = {S:,}，D = {p.head_dim}，每元素 {byte:g} B） = {total}")
    return (f"2 × L × B × H × S × D × 每元素字节 = 2 × {p.n_layer} × {B:,} × {p.n_kv_head} × {S:,} × {p.head_dim}"
            f" × {byte:g} B = {total}")


def attention_zh(p: ModelPreset) -> str:
    """The model's attention layout in the glossary's Chinese terms."""
    if p.cache_formula == LATENT:
        return f"多头潜在注意力（MLA）：{p.n_head} 个查询头，每层每个 token 缓存 1 个 {p.kv_latent_dim} 维的压缩向量"
    if p.n_kv_head == p.n_head:
        return f"多头注意力（MHA）：{p.n_head} 个查询头，每个头一组 K/V"
    if p.n_kv_head == 1:
        return f"多查询注意力（MQA）：{p.n_head} 个查询头共用 1 组 K/V"
    return (f"分组查询注意力（GQA）：{p.n_head} 个查询头分成 {p.n_kv_head} 组，"
            f"每 {p.n_head // p.n_kv_head} 个共用 1 组 K/V")


def explain_formula(p: ModelPreset) -> str:
    """One sentence on why this model's cache needs its own rule ("" for a standard model)."""
    if p.cache_formula == SLIDING_WINDOW:
        which = "每一层" if p.sliding_period == 1 else f"每 {p.sliding_period} 层中的 1 层（共 {p.n_windowed_layers} 层）"
        return (f"{p.name} 的{which}是滑动窗口层：只看、也只存最近 {p.sliding_window:,} 个 token（Mistral 论文称之为"
                f"滚动缓存），所以 S 超过 {p.sliding_window:,} 后这些层的缓存不再增长。")
    if p.cache_formula == LATENT:
        return (f"{p.name} 用多头潜在注意力（MLA）：每层每个 token 只存一个 {p.kv_latent_dim} 维的压缩向量"
                f"（kv_lora_rank 512 + RoPE 的 64 维），{p.n_head} 个头的 K 和 V 都由它还原，所以缓存与头数无关。")
    return ""


def calculator_html(e: CacheEstimate) -> str:
    p = e.model
    dims = "" if p.cache_formula == LATENT else f"，头维度 D = {p.head_dim}"
    head = (f"<b>{html.escape(p.name)}</b>：{p.n_layer} 层，{attention_zh(p)}{dims}；"
            f"发布时的上下文 {p.context_length:,} 个 token")
    lines = [head, formula_html(e),
             f"每个 token（1 条序列，所有层）：{format_bytes(e.per_token_bytes)}；"
             f"每层：{_layer_summary(e)}；总计：<b>{format_bytes(e.total_bytes)}</b>"]
    note = explain_formula(p)
    if note:
        what = ("每个头各存 D = 128 维的 K 和 V，即 DeepSeek-V2 论文对比的 MHA" if p.cache_formula == LATENT
                else "每一层都存下全部 S 个 token")
        lines.append(f"{note}若按普通公式 2 × L × B × H × S × D 算（{what}），会得到 {format_bytes(e.plain_bytes)}，"
                     f"是实际的 {float(Fraction(e.plain_bytes, e.total_bytes)):.3g} 倍。")
    if e.beyond_context:
        lines.append(f'<span style="color:#8a4b00">⚠ S = {e.seq_len:,} 超过了 {html.escape(p.name)} 发布时的上下文'
                     f"（{p.context_length:,} 个 token）：模型没有为这么长的输入训练过，这个数只是公式的外推。</span>")
    if p.hypothetical:
        lines.append("（这是原文假设的模型，没有哪个已发布的 70B 模型让 64 个头各存一份 K/V。）")
    return "<br>".join(lines)


def _layer_summary(e: CacheEstimate) -> str:
    sizes = sorted(set(e.layer_bytes))
    if len(sizes) == 1:
        return format_bytes(sizes[0])
    return f"窗口层 {format_bytes(sizes[0])}，全局层 {format_bytes(sizes[-1])}"


def render_calculator(model, seq_len, batch_size, dtype) -> View:
    """Control values -> readout (formula, per token, per layer, total, flags) and two figures."""
    name = inputs.choice(MODEL_LABEL, model, list(MODEL_PRESETS))
    S = inputs.whole_number(SEQ_LABEL, seq_len, 1, MAX_SEQ_LEN)
    B = inputs.whole_number(BATCH_LABEL, batch_size, 1, MAX_BATCH)
    dt = inputs.choice(CACHE_DTYPE_LABEL, dtype, list(DTYPE_BITS))
    e = estimate_cache(name, S, B, dt)
    names = CURVE_MODELS if name in CURVE_MODELS else (*CURVE_MODELS, name)
    curves = plots.cache_curves_figure(cache_curves(names, B, dt), name, S, e.total_bytes, B, dt)
    windowed = [e.model.layer_is_windowed(i) for i in range(e.model.n_layer)]
    layers = plots.layer_bytes_figure(name, e.layer_bytes, windowed, S)
    return View([curves, layers], calculator_html(e))


def seq_len_slider(value: int = CHAPTER_S) -> W.SelectionSlider:
    """Sequence length on a log scale (powers of 2 and the 3·2^k between them), 1 .. 4,194,304 tokens."""
    return W.SelectionSlider(options=[(f"{s:,}", s) for s in SEQ_OPTIONS], value=value, description=SEQ_LABEL,
                             continuous_update=False, style={"description_width": "initial"},
                             layout=W.Layout(width="520px"))


def calculator_panel(model: str = CHAPTER_MODEL, seq_len: int = CHAPTER_S, batch_size: int = 1,
                     dtype: str = "fp16") -> Panel:
    controls = {"model": dropdown(MODEL_LABEL, list(MODEL_PRESETS), model, width="400px"),
                "seq_len": seq_len_slider(seq_len),
                "batch_size": int_box(BATCH_LABEL, batch_size, width="180px"),
                "dtype": dropdown(CACHE_DTYPE_LABEL, list(DTYPE_BITS), dtype, width="200px")}
    return Panel(controls, render_calculator, layout="horizontal", css_class="kvlab-calc")


# == 3. Will it fit? ==========================================================================
@dataclass(frozen=True)
class FitPlan:
    """Weights plus cache against a memory budget, and how far each of S and B could go."""

    model: ModelPreset
    budget_bytes: int
    weight_dtype: str
    cache_dtype: str
    seq_len: int
    batch_size: int
    weight_bytes: int
    cache_bytes: int
    longest_context: int | None  # at batch_size; None: the cache stops growing before it fills the room
    largest_batch: int  # at seq_len

    @property
    def room_bytes(self) -> int:
        """What the weights leave for the cache (negative when they alone do not fit)."""
        return self.budget_bytes - self.weight_bytes

    @property
    def free_bytes(self) -> int:
        return self.room_bytes - self.cache_bytes

    @property
    def weights_fit(self) -> bool:
        return self.room_bytes >= 0

    @property
    def fits(self) -> bool:
        return self.free_bytes >= 0


def longest_context(model, room_bytes: int, batch_size: int = 1, dtype: str = "fp16") -> int | None:
    """The largest S whose cache fits in ``room_bytes`` (0: not even one token; None: the cache stops growing,
    every layer windowed, before it fills the room). Exact: a binary search on the exact byte counts."""
    p = preset(model)
    cache = lambda s: p.kv_cache_bytes(s, batch_size, dtype)  # noqa: E731
    if room_bytes < cache(1):
        return 0
    if cache(SEARCH_CAP) <= room_bytes:
        return None
    lo, hi = 1, SEARCH_CAP  # cache(lo) fits, cache(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if cache(mid) <= room_bytes else (lo, mid)
    return lo


def largest_batch(model, room_bytes: int, seq_len: int, dtype: str = "fp16") -> int:
    """The most sequences of ``seq_len`` tokens whose cache fits in ``room_bytes`` (the cache is linear in B)."""
    return max(0, room_bytes) // preset(model).kv_cache_bytes(seq_len, 1, dtype)


def plan_fit(model, budget_bytes: int, seq_len: int, batch_size: int = 1, weight_dtype: str = "fp16",
             cache_dtype: str = "fp16") -> FitPlan:
    p = preset(model)
    if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int) or budget_bytes < 1:
        raise ValueError(f"budget_bytes must be a positive whole number of bytes, got {budget_bytes!r}")
    weights = p.weight_bytes(weight_dtype)
    cache = p.kv_cache_bytes(seq_len, batch_size, cache_dtype)
    room = budget_bytes - weights
    return FitPlan(p, budget_bytes, weight_dtype, cache_dtype, seq_len, batch_size, weights, cache,
                   longest_context(p, room, batch_size, cache_dtype), largest_batch(p, room, seq_len, cache_dtype))


def gpu_for_budget(gpu: str, budget_mib: int) -> str:
    """How the budget is labelled: the card's name when the box holds that card's memory."""
    card = GPU_PRESETS.get(gpu)
    return card.name if card and card.memory_mib == budget_mib else f"自定义预算 {budget_mib:,} MiB"


def fit_html(plan: FitPlan) -> str:
    p, B, S = plan.model, plan.batch_size, plan.seq_len
    lines = [f"权重：{p.n_params:,} 个参数 × {DTYPE_BITS[plan.weight_dtype] / 8:g} B（{plan.weight_dtype}）= "
             f"<b>{format_bytes(plan.weight_bytes)}</b>；KV Cache（B = {B:,}，S = {S:,}，{plan.cache_dtype}）："
             f"<b>{format_bytes(plan.cache_bytes)}</b>；预算 {format_bytes(plan.budget_bytes)}，"
             + (f"剩余 <b>{format_bytes(plan.free_bytes)}</b>。" if plan.fits
                else f'<span style="color:#b00">放不下，还差 <b>{format_bytes(-plan.free_bytes)}</b></span>。')]
    if plan.longest_context is None:
        longest = "不受显存限制（滑动窗口让缓存封顶）"
    elif plan.longest_context == 0:
        longest = "0 个 token（连 1 个 token 都放不下）"
    else:
        longest = f"<b>{plan.longest_context:,}</b> 个 token"
        if plan.longest_context >= p.context_length:
            longest += f"（超过模型的上下文 {p.context_length:,}：显存不是瓶颈）"
    lines.append(f"批次 B = {B:,} 时，放得下的最长上下文：{longest}")
    lines.append(f"上下文 S = {S:,} 时，放得下的最大批次：<b>{plan.largest_batch:,}</b> 条序列")
    lines.append('<span style="font-size:90%;color:#555">权重按参数个数 × 每个参数的字节数计算（不含量化的缩放系数）；'
                 "CUDA 上下文、激活值和显存碎片还要再占一些，实际可用的比这里少。</span>")
    return "<br>".join(lines)


def render_fit(model, weight_dtype, cache_dtype, gpu, budget_mib, seq_len, batch_size) -> View:
    """Control values -> the budget as a bar, and the batch/context trade-off; a clear message if the weights
    alone do not fit."""
    name = inputs.choice(MODEL_LABEL, model, list(MODEL_PRESETS))
    wd = inputs.choice(WEIGHT_DTYPE_LABEL, weight_dtype, list(DTYPE_BITS))
    cd = inputs.choice(CACHE_DTYPE_LABEL, cache_dtype, list(DTYPE_BITS))
    inputs.choice(GPU_LABEL, gpu, [*GPU_PRESETS, CUSTOM_GPU])
    mib = inputs.whole_number(BUDGET_LABEL, budget_mib, 1, MAX_BUDGET_MIB)
    S = inputs.whole_number(SEQ_LABEL, seq_len, 1, MAX_SEQ_LEN)
    B = inputs.whole_number(BATCH_LABEL, batch_size, 1, MAX_BATCH)
    plan = plan_fit(name, mib * MIB, S, B, wd, cd)
    if not plan.weights_fit:
        raise inputs.InputError(BUDGET_LABEL, f"只有 {format_bytes(plan.budget_bytes)}，连 {name} 的 {wd} 权重"
                                f"（{format_bytes(plan.weight_bytes)}）都放不下：换一张更大的卡、把权重换成 int8 或 "
                                "int4，或者把模型切分到多张卡上")
    points = [(b, longest_context(name, plan.room_bytes, b, cd)) for b in TRADEOFF_BATCHES]
    label = gpu_for_budget(gpu, mib)
    figures = [plots.fit_bar_figure(plan, label),
               plots.fit_tradeoff_figure(points, plan.model.context_length, B, S, plan.fits, name)]
    return View(figures, fit_html(plan))


def fit_panel(model: str = CHAPTER_MODEL, gpu: str = "T4 16 GB (Colab)", seq_len: int = CHAPTER_S,
              batch_size: int = 1, weight_dtype: str = "fp16", cache_dtype: str = "fp16") -> Panel:
    """The budget panel. Choosing a GPU writes its memory (as nvidia-smi reports it) into the budget box,
    which can then be edited freely (for example to what ``torch.cuda.mem_get_info()`` says is free)."""
    budget = int_box(BUDGET_LABEL, GPU_PRESETS[gpu].memory_mib, width="230px")
    gpu_box = dropdown(GPU_LABEL, [*GPU_PRESETS, CUSTOM_GPU], gpu, width="230px")

    def card_chosen(change):
        if change["new"] in GPU_PRESETS:
            budget.value = GPU_PRESETS[change["new"]].memory_mib

    gpu_box.observe(card_chosen, names="value")
    controls = {"model": dropdown(MODEL_LABEL, list(MODEL_PRESETS), model, width="400px"),
                "weight_dtype": dropdown(WEIGHT_DTYPE_LABEL, list(DTYPE_BITS), weight_dtype, width="200px"),
                "cache_dtype": dropdown(CACHE_DTYPE_LABEL, list(DTYPE_BITS), cache_dtype, width="200px"),
                "gpu": gpu_box, "budget_mib": budget,
                "seq_len": int_box(SEQ_LABEL, seq_len, width="200px"),
                "batch_size": int_box(BATCH_LABEL, batch_size, width="160px")}
    return Panel(controls, render_fit, layout="horizontal", css_class="kvlab-fit")


def gpu_table_html() -> str:
    """Each GPU preset: the datasheet's number, what nvidia-smi reports, and that in GiB and in GB."""
    rows = "".join(
        f"<tr><td>{g.name}</td><td>{g.marketed}</td><td>{g.memory_mib:,} MiB</td>"
        f"<td>{format_bytes(g.memory_bytes)}</td><td>{float(Fraction(g.memory_bytes, GB)):.2f} GB</td></tr>"
        for g in GPU_PRESETS.values())
    return ("<table><thead><tr><th>GPU</th><th>规格表上写的</th><th>nvidia-smi 报告的总量</th><th>= GiB（2³⁰ 字节）</th>"
            f"<th>= GB（10⁹ 字节）</th></tr></thead><tbody>{rows}</tbody></table>")


# == 4. Why GQA matters ========================================================================
@dataclass(frozen=True)
class TwinComparison:
    """An MHA model and its GQA twin (same layers, query heads and head size) at one sequence length."""

    mha: ModelPreset
    gqa: ModelPreset
    seq_len: int
    mha_bytes: int
    gqa_bytes: int

    @property
    def ratio(self) -> Fraction:
        return Fraction(self.mha_bytes, self.gqa_bytes)


def gqa_twins(seq_len: int = CHAPTER_LONG_S, pairs=TWINS) -> list[TwinComparison]:
    out = []
    for mha_name, gqa_name in pairs:
        mha, gqa = preset(mha_name), preset(gqa_name)
        if (mha.n_layer, mha.n_head, mha.head_dim) != (gqa.n_layer, gqa.n_head, gqa.head_dim):
            raise ValueError(f"pairs: {mha.name} and {gqa.name} differ in more than their KV heads")
        out.append(TwinComparison(mha, gqa, seq_len, mha.kv_cache_bytes(seq_len), gqa.kv_cache_bytes(seq_len)))
    return out


# == 5. The formula against real memory =======================================================
@dataclass(frozen=True)
class AllocationCheck:
    """A real cache allocated on a device: the formula's bytes and the bytes measured there."""

    device: str
    method: str  # how the bytes were measured (Chinese)
    shape: tuple[int, ...]  # of K (V has the same): (L, B, H_kv, S, D)
    dtype: str
    formula_bytes: int
    measured_bytes: int
    released_bytes: int | None  # what the allocator got back after the cache was freed (None: no counter)


def _allocated(dev: torch.device) -> int | None:
    """The allocator's own count of allocated bytes on ``dev`` (None on the CPU, which has none)."""
    if dev.type == "cuda":
        return torch.cuda.memory_allocated(dev)
    if dev.type == "mps":
        return torch.mps.current_allocated_memory()
    return None


def measure_cache_allocation(model=CHAPTER_MODEL, seq_len: int = CHAPTER_S // 8, batch_size: int = 1,
                             dtype: str = "fp16", device=None) -> AllocationCheck:
    """Allocate a real :class:`KVCache` of ``model``'s shape, scaled down to ``seq_len`` tokens, and measure it:
    on CUDA/MPS with the allocator's counter before and after, on the CPU from the tensors' storage."""
    p = preset(model)
    if p.cache_formula != "standard":
        raise ValueError(f"model: {p.name} keeps a {p.cache_formula} cache; choose a model with the plain layout")
    dev = as_device(device)
    config = ModelConfig(vocab_size=1, d_model=p.hidden_size, n_layer=p.n_layer, n_head=p.n_head,
                         n_kv_head=p.n_kv_head, head_dim=p.head_dim, max_seq_len=seq_len)
    synchronize(dev)
    before = _allocated(dev)
    cache = KVCache(config, batch_size, seq_len, dtype=dtype, device=dev)  # checks it fits in free memory first
    synchronize(dev)
    after = _allocated(dev)
    if before is None:
        measured = cache.k.untyped_storage().nbytes() + cache.v.untyped_storage().nbytes()
        method = "CPU 上没有分配器的计数：读 K、V 两个张量实际存储的字节数 untyped_storage().nbytes()"
    else:
        measured = after - before
        method = (f"{dev.type} 分配器自己的计数：分配前后 "
                  + ("torch.cuda.memory_allocated()" if dev.type == "cuda" else "torch.mps.current_allocated_memory()")
                  + " 之差")
    shape = tuple(cache.k.shape)
    formula = p.kv_cache_bytes(seq_len, batch_size, dtype)
    del cache
    released = None if before is None else after - _allocated(dev)
    return AllocationCheck(str(dev), method, shape, dtype, formula, measured, released)


@dataclass(frozen=True)
class DeviceMemory:
    """What torch reports about the current GPU, next to the matching preset's nvidia-smi total."""

    name: str
    total_bytes: int  # torch.cuda.get_device_properties(...).total_memory
    free_bytes: int  # torch.cuda.mem_get_info()[0]
    preset: GpuPreset | None


def device_memory(device=None) -> DeviceMemory | None:
    """The current CUDA GPU's memory as torch sees it (None on CPU/MPS)."""
    dev = as_device(device)
    if dev.type != "cuda":
        return None
    props = torch.cuda.get_device_properties(dev)
    free, _total = torch.cuda.mem_get_info(dev)
    return DeviceMemory(props.name, int(props.total_memory), int(free), matching_gpu(props.name))


# CUDA device names (torch.cuda.get_device_properties(...).name) of the cards in GPU_PRESETS.
DEVICE_NAMES = {"Tesla T4": "T4 16 GB (Colab)", "NVIDIA GeForce RTX 4090": "RTX 4090 24 GB",
                "NVIDIA A100-SXM4-40GB": "A100 40 GB", "NVIDIA A100-SXM4-80GB": "A100 80 GB",
                "NVIDIA H100 80GB HBM3": "H100 80 GB", "NVIDIA H200": "H200 141 GB"}


def matching_gpu(device_name: str) -> GpuPreset | None:
    """The preset of a CUDA device name such as "Tesla T4" (None for any other card)."""
    preset_name = DEVICE_NAMES.get(device_name.strip())
    return GPU_PRESETS[preset_name] if preset_name else None
