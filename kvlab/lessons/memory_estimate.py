"""Chapter 3.4: the LLaMA-7B estimate recomputed, a KV-cache calculator for real models, and GPU budgets.

Every byte count here is an exact integer from :mod:`kvlab.memory` (through the presets of
:mod:`kvlab.presets`, which add the sliding-window and latent-KV rules); nothing is allocated except the
small cache of :func:`measure_cache_allocation`.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from fractions import Fraction

import torch

from .. import inputs
from ..cache import KVCache
from ..claims import Catalog, Chooser, Claim, Rule, number, show
from ..config import ModelConfig
from ..device import as_device, synchronize
from ..memory import DTYPE_BITS, format_bytes, kv_cache_bytes
from ..presets import GPU_PRESETS, LATENT, MODEL_PRESETS, SLIDING_WINDOW, STANDARD, GpuPreset, ModelPreset
from ..viz import memory_estimate_plots as plots
from ..viz.widgets import Panel, View, dropdown, float_box, int_box, multi_select, selection_slider

# -- the chapter's own example -------------------------------------------------------------------
CHAPTER_MODEL = "LLaMA-7B"
CHAPTER_L, CHAPTER_H, CHAPTER_D, CHAPTER_S = 32, 32, 128, 2048  # "L=32层，H=32头，D=128 ... 序列长度为2048"
CHAPTER_LONG_S = 8192  # "当序列长度增长到8192时"
CHAPTER_70B = "70B, 64 KV heads (chapter's hypothetical)"  # "70B模型（L=80, H=64, D=128）"; its label is Chinese
REAL_70B = "Llama-3-70B"  # 8 KV heads like Llama-2-70B, and a released context (8192) that covers CHAPTER_LONG_S
GQA_70BS = ("Llama-2-70B", "Llama-3-70B")  # the published 70B models the chapter's hypothetical is read against
SHAPE_EXAMPLE_S = 1024  # the sequence length of section 3.2's example
TEXT_LONG_GB = 2  # "约2GB" at CHAPTER_LONG_S
TEXT_70B_GB = 16  # "超过16GB"
GB, GIB, MIB = 10**9, 2**30, 2**20
CUDA_BLOCK = 512  # bytes: PyTorch's CUDA caching allocator rounds every allocation up to a multiple of this

# -- control limits ------------------------------------------------------------------------------
MAX_SEQ_LEN = 2**22  # 4,194,304 tokens: 32 x the longest context of any preset; more is a typing error
MAX_BATCH = 2**16
MAX_BUDGET_MIB = 2**24  # 16 TiB: a whole multi-GPU node
DEFAULT_USABLE = Fraction(9, 10)  # share of the card an engine plans with (vLLM's gpu_memory_utilization default)
CUSTOM_GPU = "自定义"
SEQ_OPTIONS = sorted({2**k for k in range(23)} | {3 * 2**k for k in range(21)})  # 1, 2, 3, 4, 6, 8, 12 ... 2**22
CURVE_MODELS = ("GPT-2 (124M)", "LLaMA-7B", "Llama-3-70B", CHAPTER_70B, "Llama-3.1-405B", "Mistral-7B",
                "DeepSeek-V3 (671B)")
TWINS = ((CHAPTER_70B, REAL_70B), ("Llama-2-7B", "Llama-3-8B"))
CONTEXT_GRID = 48  # evenly spaced lengths of the fit panel's second figure (plus the points where it bends or ends)
SEARCH_CAP = 2**60  # tokens: a cache that fits this many has stopped growing (every layer windowed)
QUANTIZED = ("fp8", "int8", "int4")  # dtypes narrower than 16 bits: stored with scales in practice
LONG_S = 131072  # 128K tokens: the context of Llama-3.1 and DeepSeek-V3
# What a window is called where the model's own paper names it (shown only for that model).
WINDOW_TERMS = {"Mistral-7B": "（Mistral 论文称之为滚动缓存，rolling buffer cache）"}

# Labels on screen (InputError names the control exactly as the learner sees it).
MODEL_LABEL, SEQ_LABEL, BATCH_LABEL = "模型", "序列长度 S", "批次 B"
SEQ_SLIDER_LABEL, CURVE_LABEL = "拖动 S（对数刻度）", "曲线上的模型"
CACHE_DTYPE_LABEL, WEIGHT_DTYPE_LABEL = "缓存数据类型", "权重数据类型"
GPU_LABEL, BUDGET_LABEL, USABLE_LABEL = "GPU", "总显存（MiB）", "显存使用比例"


def preset(model) -> ModelPreset:
    """A :class:`ModelPreset` from itself or its name in ``MODEL_PRESETS``."""
    if isinstance(model, ModelPreset):
        return model
    if not isinstance(model, str) or model not in MODEL_PRESETS:
        raise ValueError(f"model must be one of MODEL_PRESETS ({', '.join(MODEL_PRESETS)}); got {model!r}")
    return MODEL_PRESETS[model]


def model_options() -> list[tuple[str, str]]:
    """(label shown, preset key) for every preset: a dropdown shows the Chinese label of the hypothetical."""
    return [(p.label, name) for name, p in MODEL_PRESETS.items()]


def ratio_text(r: Fraction) -> str:
    """A ratio as a reader wants it: ``2``, ``1,024``, ``1.5``, ``56.9`` (never ``1.02e+03``)."""
    if r.denominator == 1:
        return f"{r.numerator:,}"
    return f"{round(float(r)):,}" if r >= 100 else f"{float(r):.3g}"


def zh_join(items) -> str:
    """Latin names in a Chinese list: 「A」, 「A 和 B」, 「A、B 和 C」."""
    items = list(items)
    return items[0] if len(items) == 1 else f"{'、'.join(items[:-1])} 和 {items[-1]}"


def spaced(label: str) -> str:
    """A name set into a Chinese sentence: a space on each side that touches Latin letters or digits."""
    return f"{' ' if label[0].isascii() else ''}{label}{' ' if label[-1].isascii() else ''}"


def with_kv_heads(p: ModelPreset) -> str:
    """The label with its KV heads in brackets, unless the label already says them."""
    return p.label if "KV 头" in p.label else f"{p.label}（{p.n_kv_head} 个 KV 头）"


def same_cache_shape(model) -> list[ModelPreset]:
    """The released models whose plain cache has exactly ``model``'s shape (layers, KV heads, head size)."""
    p = preset(model)
    key = (p.n_layer, p.n_kv_head, p.head_dim)
    return [q for q in MODEL_PRESETS.values() if not q.hypothetical and q.name != p.name
            and q.cache_formula == STANDARD and (q.n_layer, q.n_kv_head, q.head_dim) == key]


def hypothetical_note(model) -> str:
    """For the chapter's hypothetical: the real models with its cache shape, and the published 70Bs' KV heads."""
    p = preset(model)
    twins = zh_join(q.label for q in same_cache_shape(p))
    kv_heads = sorted({MODEL_PRESETS[n].n_kv_head for n in GQA_70BS})
    gqa = f"{zh_join(GQA_70BS)} 用 GQA，只有 {'/'.join(map(str, kv_heads))} 个 KV 头"
    return (f"这是原文假设的模型，参数量 {p.n_params / 1e9:g}B 也是假设的。形状完全相同、{p.n_head} 个头各存一份 K/V 的"
            f"真实模型有 {twins}；{gqa}。")


def beyond_context_html(model, seq_len: int) -> str:
    """The warning line for a length past the model's released context ("" when within it, or hypothetical)."""
    p = preset(model)
    if not p.has_released_context or seq_len <= p.context_length:
        return ""
    if p.learned_positions:
        why = (f"{html.escape(p.label)} 的位置嵌入表只有 {p.context_length:,} 行：模型根本无法处理这么长的输入，"
               "这个数只是按公式算出的字节数")
    else:
        why = "模型没有为这么长的输入训练过，这个数只是公式的外推"
    return (f'<span style="color:#8a4b00">⚠ S = {seq_len:,} 超过了 {html.escape(p.label)} 发布时的上下文'
            f"（{p.context_length:,} 个 token）：{why}。</span>")


# == 1. The chapter's figures, recomputed ========================================================
@dataclass(frozen=True)
class TextFigure:
    """One figure the original text prints or claims, read in its own unit, against kvlab's exact bytes."""

    what: str  # what the figure is about (Chinese)
    text_says: str  # as the text writes it
    relation: str  # "=" (printed output), "≈" (about) or ">" (more than)
    text_bytes: int  # the text's number in bytes; its code divides by 1024**2 and 1024**3, so MB/GB here are MiB/GiB
    kvlab_bytes: int
    model: ModelPreset | None = None  # the model the figure is about, and at which length
    seq_len: int | None = None

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

    @property
    def beyond_context(self) -> bool:
        """True when the text's length is past the model's released context (never for a hypothetical)."""
        p = self.model
        return p is not None and p.has_released_context and self.seq_len > p.context_length


def chapter_figures() -> list[TextFigure]:
    """The figures of section 3.4 (its printed output, the 8192-token and the 70B sentences), recomputed."""
    llama, mha70, gqa70 = MODEL_PRESETS[CHAPTER_MODEL], MODEL_PRESETS[CHAPTER_70B], MODEL_PRESETS[REAL_70B]
    S, LS = CHAPTER_S, CHAPTER_LONG_S
    return [
        TextFigure(f"LLaMA-7B 每层，S = {S:,}", "16.0 MB", "=", 16 * MIB, llama.layer_kv_cache_bytes(0, S), llama, S),
        TextFigure(f"LLaMA-7B 共 {CHAPTER_L} 层，S = {S:,}", "0.50 GB", "=", GIB // 2, llama.kv_cache_bytes(S), llama, S),
        TextFigure(f"LLaMA-7B，S = {LS:,}", "约2GB", "≈", TEXT_LONG_GB * GIB, llama.kv_cache_bytes(LS), llama, LS),
        TextFigure(f"{mha70.label}：L = {mha70.n_layer}，H = {mha70.n_kv_head}，D = {mha70.head_dim}，S = {LS:,}",
                   "超过16GB", ">", TEXT_70B_GB * GIB, mha70.kv_cache_bytes(LS), mha70, LS),
        TextFigure(f"真实的 {gqa70.label}（{gqa70.n_kv_head} 个 KV 头），S = {LS:,}", "超过16GB", ">",
                   TEXT_70B_GB * GIB, gqa70.kv_cache_bytes(LS), gqa70, LS),
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
    """The chapter's code as written, then single changes that halve its result: the three factors of 2 first,
    then half the heads, half the head size, and half the layers (which halves only the total)."""
    L, H, D, S = CHAPTER_L, CHAPTER_H, CHAPTER_D, CHAPTER_S
    k_only = kv_cache_bytes(1, H, D, S) // 2  # K alone is exactly half of K and V
    rows = [("原文代码原样：S = 2048，K 和 V 两份，FP16 每个元素 2 字节", L, kv_cache_bytes(1, H, D, S)),
            (f"S = {SHAPE_EXAMPLE_S}（3.2 节示例用的长度）", L, kv_cache_bytes(1, H, D, SHAPE_EXAMPLE_S)),
            ("只算 K（或只算 V）：少乘了「K 和 V」的 2", L, k_only),
            ("每个元素按 1 字节算（INT8/FP8）：少乘了 FP16 的 2", L, kv_cache_bytes(1, H, D, S, 1, "int8")),
            (f"H = {H // 2}（头数减半）", L, kv_cache_bytes(1, H // 2, D, S)),
            (f"D = {D // 2}（头维度减半）", L, kv_cache_bytes(1, H, D // 2, S)),
            (f"L = {L // 2}（层数减半）", L // 2, kv_cache_bytes(1, H, D, S))]
    return [Variant(change, per_layer, layers * per_layer) for change, layers, per_layer in rows]


def _verdict(f: TextFigure) -> str:
    verdict = "成立" if f.holds else '<span style="color:#b00">不成立</span>'
    if f.relation == ">":
        return f"{verdict}：{format_bytes(f.kvlab_bytes)} {'>' if f.holds else '<'} {format_bytes(f.text_bytes)}"
    return f"{verdict}：kvlab 的结果是原文的 {ratio_text(f.ratio)} 倍"


def _what_cell(f: TextFigure) -> str:
    what = html.escape(f.what)
    if f.beyond_context:
        what += (f'<br><span style="color:#8a4b00;font-size:90%">⚠ 超过 {html.escape(f.model.label)} 发布时的上下文'
                 f"（{f.model.context_length:,} 个 token）：这是原文自己假设的长度</span>")
    return what


def chapter_figures_html(figures: list[TextFigure]) -> str:
    """The recomputed figures as a table: what the text says, what kvlab computes, and whether it holds."""
    rows = "".join(
        f"<tr><td>{_what_cell(f)}</td><td>{html.escape(f.text_says)}</td>"
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


@dataclass(frozen=True)
class SeventyBReading:
    """The 70B sentence read two ways, and the text's own numbers scaled from LLaMA-7B to the 70B shape."""

    at_chapter_s: int  # the 64-KV-head 70B at S = 2048 (if 「同样序列长度」 meant the example's length)
    at_long_s: int  # ... at S = 8192 (the length the sentence before it names)
    scale: Fraction  # 70B cache / LLaMA-7B cache at the same S: (80 / 32) x (64 / 32)
    text_scaled_gb: Fraction  # the text's 「约2GB」 times that scale, in the text's GB
    corrected_scaled: int  # the corrected LLaMA-7B figure at 8192 times that scale, bytes

    @property
    def text_threshold_bytes(self) -> int:
        return TEXT_70B_GB * GIB


def seventy_b_reading() -> SeventyBReading:
    llama, mha70 = MODEL_PRESETS[CHAPTER_MODEL], MODEL_PRESETS[CHAPTER_70B]
    scale = Fraction(mha70.kv_cache_bytes(CHAPTER_LONG_S), llama.kv_cache_bytes(CHAPTER_LONG_S))
    return SeventyBReading(mha70.kv_cache_bytes(CHAPTER_S), mha70.kv_cache_bytes(CHAPTER_LONG_S), scale,
                           TEXT_LONG_GB * scale, int(llama.kv_cache_bytes(CHAPTER_LONG_S) * scale))


def seventy_b_text(r: SeventyBReading) -> str:
    """The reading as sentences (every number from ``r``)."""
    llama, mha70 = MODEL_PRESETS[CHAPTER_MODEL], MODEL_PRESETS[CHAPTER_70B]
    return (f"若「同样序列长度」指的是 S = {CHAPTER_S:,}，64 个 KV 头的 70B 只要 {format_bytes(r.at_chapter_s)}，"
            f"不到原文说的 {TEXT_70B_GB} GB；按上一句的 S = {CHAPTER_LONG_S:,} 读，是 {format_bytes(r.at_long_s)}。\n"
            f"同样长度下，它的缓存是 LLaMA-7B 的 {ratio_text(r.scale)} 倍：层数之比 {mha70.n_layer}/{llama.n_layer}"
            f" 乘 KV 头数之比 {mha70.n_kv_head}/{llama.n_kv_head}。用原文自己的「约{TEXT_LONG_GB}GB」乘 {ratio_text(r.scale)}"
            f" 只有约 {ratio_text(r.text_scaled_gb)} GB，并不超过 {TEXT_70B_GB} GB；用改正后的 "
            f"{format_bytes(llama.kv_cache_bytes(CHAPTER_LONG_S))} 乘 {ratio_text(r.scale)} 得 "
            f"{format_bytes(r.corrected_scaled)}，才超过 {TEXT_70B_GB} GB。")


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
        """Past the model's released context (never for a hypothetical model, which has none)."""
        return self.model.has_released_context and self.seq_len > self.model.context_length

    @property
    def mean_per_token(self) -> Fraction:
        """Bytes per token of one sequence at this length: less than ``per_token_bytes`` once windows fill."""
        return Fraction(self.total_bytes, self.batch_size * self.seq_len)


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

    name: str  # the preset's key
    label: str  # what the learner sees
    seq_lens: tuple[int, ...]
    bytes: tuple[int, ...]
    per_token_bytes: int  # one token, one sequence, every layer (before any window fills)
    context_length: int | None  # None: a hypothetical model, no released context to mark
    context_bytes: int | None


def cache_curves(names, batch_size: int = 1, dtype: str = "fp16", seq_lens=None) -> list[CacheCurve]:
    seq_lens = tuple(SEQ_OPTIONS[::2] if seq_lens is None else seq_lens)
    out = []
    for name in names:
        p = preset(name)
        ctx = p.context_length if p.has_released_context else None
        sizes = tuple(p.kv_cache_bytes(s, batch_size, dtype) for s in seq_lens)
        out.append(CacheCurve(p.name, p.label, seq_lens, sizes, p.kv_bytes_per_token(dtype), ctx,
                              None if ctx is None else p.kv_cache_bytes(ctx, batch_size, dtype)))
    return out


def formula_html(e: CacheEstimate) -> str:
    """The formula with this model's numbers in it, ending in the exact byte count."""
    p, S, B, byte = e.model, e.seq_len, e.batch_size, DTYPE_BITS[e.dtype] / 8
    total = f"<b>{e.total_bytes:,} B = {format_bytes(e.total_bytes)}</b>"
    if p.cache_formula == LATENT:
        return (f"L × B × S × (压缩向量维度 + RoPE 键维度) × 每元素字节 = {p.n_layer} × {B:,} × {S:,} × "
                f"({p.kv_lora_rank} + {p.kv_rope_dim}) × {byte:g} B = {total}")
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
        return (f"多头潜在注意力（MLA）：{p.n_head} 个查询头，每层每个 token 缓存 {p.kv_lora_rank} 维的压缩向量"
                f"和 {p.kv_rope_dim} 维的共用 RoPE 键")
    if p.n_kv_head == p.n_head:
        return f"多头注意力（MHA）：{p.n_head} 个查询头，每个头一组 K/V"
    if p.n_kv_head == 1:
        return f"多查询注意力（MQA）：{p.n_head} 个查询头共用 1 组 K/V"
    return (f"分组查询注意力（GQA）：{p.n_head} 个查询头分成 {p.n_kv_head} 组，"
            f"每 {p.n_head // p.n_kv_head} 个共用 1 组 K/V")


def explain_formula(p: ModelPreset) -> str:
    """Why this model's cache needs its own rule ("" for a standard model); every number from the preset."""
    if p.cache_formula == SLIDING_WINDOW:
        which = "每一层" if p.sliding_period == 1 else f"每 {p.sliding_period} 层中的 1 层（共 {p.n_windowed_layers} 层）"
        return (f"{p.label} 的{which}是滑动窗口层：只看、也只存最近 {p.sliding_window:,} 个 token"
                f"{WINDOW_TERMS.get(p.name, '')}，所以 S 超过 {p.sliding_window:,} 后这些层的缓存不再增长。"
                "能不能真的省下这部分显存，取决于推理引擎是否实现了滚动缓存（较早版本的 vLLM 仍按完整长度"
                "给这些层分配缓存）。")
    if p.cache_formula == LATENT:
        return (f"{p.label} 用多头潜在注意力（MLA）：每层每个 token 只存两样东西：一个 {p.kv_lora_rank} 维的压缩向量"
                f"（所有头的 K 和 V 都由它还原）和一个所有头共用的 {p.kv_rope_dim} 维旋转位置编码（RoPE）键，"
                f"共 {p.kv_latent_dim} 个数，所以缓存与头数无关。")
    return ""


def calculator_html(e: CacheEstimate) -> str:
    p, S = e.model, e.seq_len
    dims = "" if p.cache_formula == LATENT else f"，头维度 D = {p.head_dim}"
    context = (f"发布时的上下文 {p.context_length:,} 个 token" if p.has_released_context
               else "假设的模型，没有发布时的上下文")
    head = f"<b>{html.escape(p.label)}</b>：{p.n_layer} 层，{attention_zh(p)}{dims}；{context}"
    windowed = p.cache_formula == SLIDING_WINDOW
    per_token = f"每个 token（1 条序列，所有层{'；窗口填满之前' if windowed else ''}）：{format_bytes(e.per_token_bytes)}"
    if windowed:
        per_token += f"；S = {S:,} 时平均每个 token：{format_bytes(e.mean_per_token)}"
    lines = [head, formula_html(e),
             f"{per_token}；每层：{_layer_summary(e)}；总计：<b>{format_bytes(e.total_bytes)}</b>"]
    note = explain_formula(p)
    if note:
        what = (f"每个头各存 D = {p.head_dim} 维的 K 和 V，即 DeepSeek-V2 论文对比的 MHA" if p.cache_formula == LATENT
                else "每一层都存下全部 S 个 token")
        if e.plain_bytes == e.total_bytes:  # a sliding window not yet full: both rules agree
            lines.append(f"{note}S = {S:,} 还没有超过窗口 {p.sliding_window:,}，按普通公式 2 × L × B × H × S × D 算"
                         f"也得到 {format_bytes(e.plain_bytes)}：两者相同。")
        else:
            lines.append(f"{note}若按普通公式 2 × L × B × H × S × D 算（{what}），会得到 {format_bytes(e.plain_bytes)}，"
                         f"是实际的 {ratio_text(Fraction(e.plain_bytes, e.total_bytes))} 倍。")
    if e.dtype in QUANTIZED:
        lines.append(f'<span style="font-size:90%;color:#555">{e.dtype} 缓存实际还要为每组数存缩放系数'
                     "（多为 16 位），所以实际字节数比这里算的略多。</span>")
    warning = beyond_context_html(p, S)
    if warning:
        lines.append(warning)
    if p.hypothetical:
        lines.append(f"（{hypothetical_note(p)}）")
    return "<br>".join(lines)


def _layer_summary(e: CacheEstimate) -> str:
    sizes = sorted(set(e.layer_bytes))
    if len(sizes) == 1:
        return format_bytes(sizes[0])
    return f"窗口层 {format_bytes(sizes[0])}，全局层 {format_bytes(sizes[-1])}"


def curve_choice(curve_models) -> tuple[str, ...]:
    """The models picked for the curve plot, checked (none picked is allowed: the selected model is drawn)."""
    if isinstance(curve_models, str) or not isinstance(curve_models, (list, tuple)):
        raise inputs.InputError(CURVE_LABEL, f"需要一组模型，收到的是 {curve_models!r}")
    return tuple(inputs.choice(CURVE_LABEL, m, list(MODEL_PRESETS)) for m in curve_models)


def render_calculator(model, seq_len, batch_size, dtype, curve_models=CURVE_MODELS) -> View:
    """Control values -> readout (formula, per token, per layer, total, flags) and two figures."""
    name = inputs.choice(MODEL_LABEL, model, list(MODEL_PRESETS))
    S = inputs.whole_number(SEQ_LABEL, seq_len, 1, MAX_SEQ_LEN)
    B = inputs.whole_number(BATCH_LABEL, batch_size, 1, MAX_BATCH)
    dt = inputs.choice(CACHE_DTYPE_LABEL, dtype, list(DTYPE_BITS))
    chosen = curve_choice(curve_models)
    e = estimate_cache(name, S, B, dt)
    # the picks in preset order, then the selected model if it is not one of them: a model keeps its colour and
    # dash whichever model is selected and in whatever order the picks were clicked
    names = [n for n in MODEL_PRESETS if n in chosen] + ([] if name in chosen else [name])
    weights = (f"{e.model.label} 的 FP16 权重{'（假设的参数量）' if e.model.hypothetical else ''}",
               e.model.weight_bytes("fp16"))
    curves = plots.cache_curves_figure(cache_curves(names, B, dt), name, S, e.total_bytes, B, dt, weights)
    windowed = [e.model.layer_is_windowed(i) for i in range(e.model.n_layer)]
    layers = plots.layer_bytes_figure(e.model.label, e.layer_bytes, windowed, S)
    return View([curves, layers], calculator_html(e), result=e)


def seq_len_slider(value: int = CHAPTER_S):
    """Sequence length on a log scale (powers of 2 and the 3·2^k between them), 1 .. 4,194,304 tokens. It has no
    readout of its own: it writes into the 「序列长度 S」 box, which also takes any typed length."""
    start = max(s for s in SEQ_OPTIONS if s <= value)
    slider = selection_slider(SEQ_SLIDER_LABEL, [(f"{s:,}", s) for s in SEQ_OPTIONS], start, width="430px",
                              continuous=False, readout=False)
    slider.add_class("kvlab-control-seq_slider")
    return slider


def link_slider_to_box(slider, box) -> None:
    """Moving the slider writes its length into the box; typing a length the slider has moves the slider."""
    def slid(change):
        box.value = change["new"]

    def typed(change):
        if change["new"] in SEQ_OPTIONS and slider.value != change["new"]:
            slider.value = change["new"]

    slider.observe(slid, names="value")
    box.observe(typed, names="value")


def curve_selector(chosen=CURVE_MODELS):
    return multi_select(CURVE_LABEL, model_options(), chosen, rows=9)


def calculator_panel(model: str = CHAPTER_MODEL, seq_len: int = CHAPTER_S, batch_size: int = 1,
                     dtype: str = "fp16", curve_models=CURVE_MODELS) -> Panel:
    """The calculator: model, S (log slider or typed exactly), batch, cache dtype, and the models on the curves
    (Ctrl/Shift-click to pick several)."""
    slider = seq_len_slider(seq_len)
    box = int_box(SEQ_LABEL, seq_len, width="190px")
    link_slider_to_box(slider, box)
    controls = {"model": dropdown(MODEL_LABEL, model_options(), model, width="400px"),
                "seq_len": box,
                "batch_size": int_box(BATCH_LABEL, batch_size, width="160px"),
                "dtype": dropdown(CACHE_DTYPE_LABEL, list(DTYPE_BITS), dtype, width="200px"),
                "curve_models": curve_selector(curve_models)}
    return Panel(controls, render_calculator, layout="horizontal", css_class="kvlab-calc", extra={"seq_len": slider},
                 static=("model", "seq_len"), in_browser="seq_len")


@dataclass(frozen=True)
class LongContextRow:
    """One model at a long context: its cache next to its weights (FP16, and as released when narrower)."""

    model: ModelPreset
    seq_len: int
    cache_bytes: int
    fp16_weight_bytes: int
    released_weight_bytes: int | None  # None when the release is 16-bit


def long_context_rows(names=("Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B", "DeepSeek-V3 (671B)"),
                      seq_len: int = LONG_S) -> list[LongContextRow]:
    out = []
    for name in names:
        p = preset(name)
        released = p.weight_bytes(p.released_dtype) if p.released_dtype else None
        out.append(LongContextRow(p, seq_len, p.kv_cache_bytes(seq_len), p.weight_bytes("fp16"), released))
    return out


def long_context_line(r: LongContextRow) -> str:
    line = (f"{r.model.label}：{r.seq_len:,} 个 token 的缓存 {format_bytes(r.cache_bytes)}，"
            f"FP16 权重 {format_bytes(r.fp16_weight_bytes)}")
    if r.released_weight_bytes is not None:
        line += (f"（它发布的是 {r.model.released_dtype.upper()} 权重：{format_bytes(r.released_weight_bytes)}，"
                 "不含块缩放系数）")
    return line


def comparison_lines() -> list[str]:
    """The chapter's notable comparisons (FP16, B = 1) as sentences; every number computed from the presets."""
    p = MODEL_PRESETS
    llama, falcon, big, mistral = p["LLaMA-7B"], p["Falcon-7B"], p["Llama-3.1-405B"], p["Mistral-7B"]
    l31, v3 = p["Llama-3.1-8B"], p["DeepSeek-V3 (671B)"]
    heads, dims = Fraction(falcon.n_kv_head, llama.n_kv_head), Fraction(falcon.head_dim, llama.head_dim)
    S = CHAPTER_LONG_S
    return [
        f"Falcon-7B（MQA）每个 token {format_bytes(falcon.kv_bytes_per_token())}，是 LLaMA-7B"
        f"（{format_bytes(llama.kv_bytes_per_token())}）的 {heads * dims}：KV 头从 {llama.n_kv_head} 个减到 "
        f"{falcon.n_kv_head} 个贡献 {heads}，头维度从 {llama.head_dim} 减到 {falcon.head_dim} 贡献 {dims}"
        f"（两者层数都是 {llama.n_layer}）。",
        f"Llama-3.1-405B 每个 token {format_bytes(big.kv_bytes_per_token())}，反而比 LLaMA-7B 的 "
        f"{format_bytes(llama.kv_bytes_per_token())} 还少：它有 {big.n_layer} 层，但只有 {big.n_kv_head} 个 KV 头"
        f"（LLaMA-7B 是 {llama.n_layer} 层、{llama.n_kv_head} 个）。",
        f"Mistral-7B 在 {S:,} 个 token 时的缓存是 {format_bytes(mistral.kv_cache_bytes(S))}；普通公式会算成 "
        f"{format_bytes(mistral.plain_formula_bytes(S))}，是实际的 "
        f"{ratio_text(Fraction(mistral.plain_formula_bytes(S), mistral.kv_cache_bytes(S)))} 倍"
        "（这是按本节的公式算出的结果；能不能真的省下，取决于推理引擎是否实现了滚动缓存）。",
        f"{LONG_S:,} 个 token 时，Llama-3.1-8B 一条序列的缓存（{format_bytes(l31.kv_cache_bytes(LONG_S))}）"
        f"已经比它自己的 FP16 权重（{format_bytes(l31.weight_bytes('fp16'))}）还大。",
        f"{v3.n_params / 1e9:.0f}B 的 DeepSeek-V3 的缓存（{format_bytes(v3.kv_cache_bytes(LONG_S))}）只有 "
        f"{l31.n_params / 1e9:.0f}B 的 Llama-3.1-8B（{format_bytes(l31.kv_cache_bytes(LONG_S))}）的一半左右。",
    ]


# == 3. Will it fit? ==========================================================================
def usable_fraction(value) -> Fraction:
    """``value`` (0 < value <= 1) as an exact fraction: 0.9 -> 9/10 (from its shortest decimal form)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise ValueError(f"usable_fraction must be a number in (0, 1], got {value!r}")
    frac = Fraction(str(value)) if isinstance(value, float) else Fraction(value)
    if not 0 < frac <= 1:
        raise ValueError(f"usable_fraction must be in (0, 1], got {value!r}")
    return frac


@dataclass(frozen=True)
class FitPlan:
    """Weights plus cache against the usable part of a card's memory, and how far each of S and B could go."""

    model: ModelPreset
    total_bytes: int  # the card's memory (nvidia-smi's total)
    usable: Fraction  # the share an engine plans with; the rest is left to the CUDA context, activations ...
    weight_dtype: str
    cache_dtype: str
    seq_len: int
    batch_size: int
    weight_bytes: int
    cache_bytes: int
    longest_context: int | None  # at batch_size; None: the cache stops growing before it fills the room
    largest_batch: int  # at seq_len

    @property
    def budget_bytes(self) -> int:
        """What weights and cache may use: ``total_bytes * usable``, rounded down to whole bytes."""
        return self.total_bytes * self.usable.numerator // self.usable.denominator

    @property
    def reserved_bytes(self) -> int:
        return self.total_bytes - self.budget_bytes

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


def plan_fit(model, total_bytes: int, seq_len: int, batch_size: int = 1, weight_dtype: str = "fp16",
             cache_dtype: str = "fp16", usable=DEFAULT_USABLE) -> FitPlan:
    """Weights and cache of ``model`` on a card of ``total_bytes``, of which the share ``usable`` is planned with."""
    p = preset(model)
    if isinstance(total_bytes, bool) or not isinstance(total_bytes, int) or total_bytes < 1:
        raise ValueError(f"total_bytes must be a positive whole number of bytes, got {total_bytes!r}")
    frac = usable_fraction(usable)
    weights = p.weight_bytes(weight_dtype)
    cache = p.kv_cache_bytes(seq_len, batch_size, cache_dtype)
    room = total_bytes * frac.numerator // frac.denominator - weights
    return FitPlan(p, total_bytes, frac, weight_dtype, cache_dtype, seq_len, batch_size, weights, cache,
                   longest_context(p, room, batch_size, cache_dtype), largest_batch(p, room, seq_len, cache_dtype))


@dataclass(frozen=True)
class ContextCurve:
    """The fit panel's second figure: what the card holds as the context grows, at the plan's batch size and dtypes."""

    seq_lens: tuple[int, ...]  # from 0 to past every point of interest
    cache_bytes: tuple[int, ...]  # at each length (0 at S = 0)
    overtakes_weights: int | None  # the first S whose cache is larger than the weights (None: it stops growing first)
    context_length: int | None  # the model's released context (None: hypothetical)


def context_curve(plan: FitPlan) -> ContextCurve:
    """Sample ``plan``'s cache from S = 0 to a little past its seq_len, its context, the length where the room runs
    out and (for sliding windows) the window, keeping those points exactly; plus where the cache passes the weights."""
    p, B, dtype = plan.model, plan.batch_size, plan.cache_dtype
    under = longest_context(p, plan.weight_bytes, B, dtype)
    overtakes = None if under is None else under + 1
    context = p.context_length if p.has_released_context else None
    window = 2 * p.sliding_window if p.sliding_window else 0  # the bend and as much again after it
    marks = [plan.seq_len, context or 0, plan.longest_context or 0, window]
    end = max(16, -(-max(marks) * 23 // 20))  # 15 % past the farthest, so no point sits on the edge
    exact = {m for m in (*marks, p.sliding_window or 0, overtakes or 0) if 0 < m <= end}
    grid = sorted({end * i // CONTEXT_GRID for i in range(CONTEXT_GRID + 1)} | exact)
    cache = tuple(p.kv_cache_bytes(s, B, dtype) if s else 0 for s in grid)
    return ContextCurve(tuple(grid), cache, overtakes, context)


def gpu_for_budget(gpu: str, budget_mib: int) -> str:
    """How the budget is labelled: the card's name when the box holds that card's memory."""
    card = GPU_PRESETS.get(gpu)
    return card.name if card and card.memory_mib == budget_mib else f"自定义 {budget_mib:,} MiB"


def narrower_dtypes(dtype: str) -> list[str]:
    """The weight dtypes with fewer bits than ``dtype`` (none for int4)."""
    return [d for d in QUANTIZED if DTYPE_BITS[d] < DTYPE_BITS[dtype]]


def weights_do_not_fit(plan: FitPlan) -> str:
    """The message when the weights alone exceed the usable memory: by how much, and only the remedies left."""
    p, wd = plan.model, plan.weight_dtype
    narrower = narrower_dtypes(wd)
    remedies = ["换一张显存更大的卡"] + ([f"把权重换成 {' 或 '.join(narrower)}"] if narrower else []) + \
        ["把模型切分到多张卡上"]
    return (f"按显存使用比例 {float(plan.usable):g}，只有 {format_bytes(plan.budget_bytes)} 可用，连{spaced(p.label)}的 {wd} 权重"
            f"（{format_bytes(plan.weight_bytes)}）都放不下，还差 {format_bytes(plan.weight_bytes - plan.budget_bytes)}："
            f"{'、'.join(remedies[:-1])}，或者{remedies[-1]}")


def approximation_note(weight_dtype: str) -> str:
    """The small print under the fit readout: what the weight figure leaves out, and what the usable share is for."""
    note = "权重按参数个数 × 每个参数的位数估算。"
    if weight_dtype in QUANTIZED:
        note += (f"{weight_dtype} 权重实际还要存缩放系数，多数方案还把嵌入层和输出层（lm_head）留在 16 位，"
                 "所以实际大小比这里算的略大：这是一个偏小的估计。")
    return (note + "显存使用比例借用 vLLM 的 gpu_memory_utilization：只按总显存的这一部分规划权重和缓存，其余留给 CUDA "
            "上下文和显存碎片。vLLM 还要从这一部分里扣掉启动时实测的激活峰值，这里忽略它，所以算出的缓存空间是上限。")


def fit_html(plan: FitPlan) -> str:
    p, B, S = plan.model, plan.batch_size, plan.seq_len
    assumed = "（假设的参数量）" if p.hypothetical else ""
    lines = [f"权重：{p.n_params:,} 个参数{assumed} × {DTYPE_BITS[plan.weight_dtype] / 8:g} B（{plan.weight_dtype}）= "
             f"<b>{format_bytes(plan.weight_bytes)}</b>；KV Cache（B = {B:,}，S = {S:,}，{plan.cache_dtype}）："
             f"<b>{format_bytes(plan.cache_bytes)}</b>；可用 {format_bytes(plan.budget_bytes)}"
             f"（总显存 {format_bytes(plan.total_bytes)} × {float(plan.usable):g}），"
             + (f"剩余 <b>{format_bytes(plan.free_bytes)}</b>。" if plan.fits
                else f'<span style="color:#b00">放不下，还差 <b>{format_bytes(-plan.free_bytes)}</b></span>。')]
    warning = beyond_context_html(p, S)
    if warning:
        lines.append(warning)
    if plan.longest_context is None:
        longest = "不受显存限制（滑动窗口让缓存封顶）"
    elif plan.longest_context == 0:
        longest = "0 个 token（连 1 个 token 都放不下）"
    else:
        longest = f"<b>{plan.longest_context:,}</b> 个 token"
        if p.has_released_context and plan.longest_context >= p.context_length:
            longest += f"（超过模型的上下文 {p.context_length:,}：显存不是瓶颈）"
    lines.append(f"批次 B = {B:,} 时，放得下的最长上下文：{longest}")
    lines.append(f"上下文 S = {S:,} 时，放得下的最大批次：<b>{plan.largest_batch:,}</b> 条序列")
    lines.append(f'<span style="font-size:90%;color:#555">{approximation_note(plan.weight_dtype)}</span>')
    return "<br>".join(lines)


def share_or(control: str, share: float, plan) -> str:
    """The control to blame when the weights do not fit: the usable share when it is below the default and the
    default share would hold them (``plan(share) -> FitPlan``), else ``control`` (the card's memory)."""
    if share < DEFAULT_USABLE and plan(DEFAULT_USABLE).weights_fit:
        return USABLE_LABEL
    return control


def render_fit(model, weight_dtype, cache_dtype, gpu, budget_mib, usable, seq_len, batch_size) -> View:
    """Control values -> the card as a bar, and weights + cache as the context grows (where the cache passes the
    weights, where the usable memory runs out); a clear message if the weights alone do not fit."""
    name = inputs.choice(MODEL_LABEL, model, list(MODEL_PRESETS))
    wd = inputs.choice(WEIGHT_DTYPE_LABEL, weight_dtype, list(DTYPE_BITS))
    cd = inputs.choice(CACHE_DTYPE_LABEL, cache_dtype, list(DTYPE_BITS))
    inputs.choice(GPU_LABEL, gpu, [*GPU_PRESETS, CUSTOM_GPU])
    mib = inputs.whole_number(BUDGET_LABEL, budget_mib, 1, MAX_BUDGET_MIB)
    share = inputs.positive_number(USABLE_LABEL, usable, 1)
    S = inputs.whole_number(SEQ_LABEL, seq_len, 1, MAX_SEQ_LEN)
    B = inputs.whole_number(BATCH_LABEL, batch_size, 1, MAX_BATCH)
    plan = plan_fit(name, mib * MIB, S, B, wd, cd, share)
    if not plan.weights_fit:
        raise inputs.InputError(share_or(BUDGET_LABEL, share, lambda u: plan_fit(name, mib * MIB, S, B, wd, cd, u)),
                                weights_do_not_fit(plan))
    figures = [plots.fit_bar_figure(plan, gpu_for_budget(gpu, mib)),
               plots.fit_context_figure(plan, context_curve(plan))]
    return View(figures, fit_html(plan), result=plan)


def fit_panel(model: str = CHAPTER_MODEL, gpu: str = "T4 16 GB (Colab)", seq_len: int = CHAPTER_S,
              batch_size: int = 1, weight_dtype: str = "fp16", cache_dtype: str = "fp16",
              usable: float = float(DEFAULT_USABLE)) -> Panel:
    """The budget panel. Choosing a GPU writes its memory (as nvidia-smi reports it) into the total box, which
    can then be edited freely; the usable share (default 0.9) is what weights and cache may take of it."""
    budget = int_box(BUDGET_LABEL, GPU_PRESETS[gpu].memory_mib, width="210px")
    gpu_box = dropdown(GPU_LABEL, [*GPU_PRESETS, CUSTOM_GPU], gpu, width="230px")

    def card_chosen(change):
        if change["new"] in GPU_PRESETS:
            budget.value = GPU_PRESETS[change["new"]].memory_mib

    gpu_box.observe(card_chosen, names="value")
    share = float_box(USABLE_LABEL, usable, step=0.05)
    controls = {"model": dropdown(MODEL_LABEL, model_options(), model, width="400px"),
                "weight_dtype": dropdown(WEIGHT_DTYPE_LABEL, list(DTYPE_BITS), weight_dtype, width="200px"),
                "cache_dtype": dropdown(CACHE_DTYPE_LABEL, list(DTYPE_BITS), cache_dtype, width="200px"),
                "gpu": gpu_box, "budget_mib": budget, "usable": share,
                "seq_len": int_box(SEQ_LABEL, seq_len, width="200px"),
                "batch_size": int_box(BATCH_LABEL, batch_size, width="160px")}
    return Panel(controls, render_fit, layout="horizontal", css_class="kvlab-fit",
                 more=("weight_dtype", "cache_dtype", "budget_mib", "usable", "batch_size"),
                 static=("model", "weight_dtype", "cache_dtype"))  # not gpu: choosing a card also fills the budget box


def gpu_table_html() -> str:
    """Each GPU preset: the datasheet's number, what nvidia-smi reports (in MiB, GiB and GB), and what PyTorch
    reports where a reading is cited."""
    rows = "".join(
        f"<tr><td>{g.name}</td><td>{g.marketed}</td><td>{g.memory_mib:,} MiB</td>"
        f"<td>{format_bytes(g.memory_bytes)}</td><td>{float(Fraction(g.memory_bytes, GB)):.2f} GB</td>"
        f"<td>{f'约 {g.torch_total_gib} GiB' if g.torch_total_gib else '—'}</td></tr>"
        for g in GPU_PRESETS.values())
    return ("<table><thead><tr><th>GPU</th><th>规格表上写的</th><th>nvidia-smi 报告的总量</th><th>= GiB（2³⁰ 字节）</th>"
            "<th>= GB（10⁹ 字节）</th><th>PyTorch 报告的总量</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def t4_plans(seq_len: int = CHAPTER_S) -> list[FitPlan]:
    """The chapter's deployment question on a Colab T4 at the default usable share: LLaMA-7B in FP16, Llama-3-8B in
    FP16 and in int8 (FP16 caches, one sequence of ``seq_len`` tokens)."""
    t4 = GPU_PRESETS["T4 16 GB (Colab)"].memory_bytes
    return [plan_fit(name, t4, seq_len, 1, weights) for name, weights in
            (("LLaMA-7B", "fp16"), ("Llama-3-8B", "fp16"), ("Llama-3-8B", "int8"))]


def plan_line(plan: FitPlan) -> str:
    """One line per plan for the notebook: weights, room left for the cache, longest context, largest batch."""
    p = plan.model
    head = f"{p.label}，{plan.weight_dtype} 权重 {format_bytes(plan.weight_bytes)}，可用 {format_bytes(plan.budget_bytes)}"
    if not plan.weights_fit:
        return f"{head}：权重本身就放不下，还差 {format_bytes(-plan.room_bytes)}"
    return (f"{head}：留给缓存 {format_bytes(plan.room_bytes)}，最长上下文 {plan.longest_context:,} 个 token，"
            f"{plan.seq_len:,} 个 token 时最大批次 {plan.largest_batch}")


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

    @property
    def beyond_context(self) -> tuple[ModelPreset, ...]:
        """The pair's released models whose context is shorter than ``seq_len``."""
        return tuple(p for p in (self.mha, self.gqa) if p.has_released_context and self.seq_len > p.context_length)


def gqa_twins(seq_len: int = CHAPTER_LONG_S, pairs=TWINS) -> list[TwinComparison]:
    out = []
    for mha_name, gqa_name in pairs:
        mha, gqa = preset(mha_name), preset(gqa_name)
        if (mha.n_layer, mha.n_head, mha.head_dim) != (gqa.n_layer, gqa.n_head, gqa.head_dim):
            raise ValueError(f"pairs: {mha.name} and {gqa.name} differ in more than their KV heads")
        out.append(TwinComparison(mha, gqa, seq_len, mha.kv_cache_bytes(seq_len), gqa.kv_cache_bytes(seq_len)))
    return out


def past_context_note(models) -> str:
    """「（超过 Llama-2-7B 的上下文 4,096）」 for the models given ("" for none)."""
    return "".join(f"（超过 {p.label} 的上下文 {p.context_length:,}）" for p in models)


def twin_line(t: TwinComparison) -> str:
    return (f"{with_kv_heads(t.mha)}：{format_bytes(t.mha_bytes)}；{with_kv_heads(t.gqa)}："
            f"{format_bytes(t.gqa_bytes)}；前者是后者的 {ratio_text(t.ratio)} 倍"
            + past_context_note(t.beyond_context))


# == 5. The formula against real memory =======================================================
@dataclass(frozen=True)
class AllocationCheck:
    """A real cache allocated on a device: the formula's bytes and the bytes the device reports."""

    device: str
    method: str  # how the bytes were obtained (Chinese)
    shape: tuple[int, ...]  # of K (V has the same): (L, B, H_kv, S, D)
    dtype: str
    formula_bytes: int
    measured_bytes: int
    released_bytes: int | None  # what the allocator got back after the cache was freed (None: no counter)
    tensor_bytes: tuple[int, int]  # K's and V's own sizes

    @property
    def is_measurement(self) -> bool:
        """True where an allocator counted the bytes (CUDA, MPS); on the CPU only the tensors' sizes are read."""
        return self.released_bytes is not None

    @property
    def allocator_bytes(self) -> int:
        """What PyTorch's CUDA allocator books for K and V: each rounded up to a multiple of 512 bytes."""
        return sum(-(-n // CUDA_BLOCK) * CUDA_BLOCK for n in self.tensor_bytes)


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
    on CUDA/MPS with the allocator's counter before and after, on the CPU from the tensors' storage (which only
    checks their shape and dtype)."""
    p = preset(model)
    if p.cache_formula != STANDARD:
        raise ValueError(f"model: {p.name} keeps a {p.cache_formula} cache; choose a model with the plain layout")
    dev = as_device(device)
    config = ModelConfig(vocab_size=1, d_model=p.hidden_size, n_layer=p.n_layer, n_head=p.n_head,
                         n_kv_head=p.n_kv_head, head_dim=p.head_dim, max_seq_len=seq_len)
    synchronize(dev)
    before = _allocated(dev)
    cache = KVCache(config, batch_size, seq_len, dtype=dtype, device=dev)  # checks it fits in free memory first
    synchronize(dev)
    after = _allocated(dev)
    sizes = (cache.k.untyped_storage().nbytes(), cache.v.untyped_storage().nbytes())
    if before is None:
        measured = sum(sizes)
        method = ("CPU 上没有分配器的计数：读的是 K、V 两个张量存储的字节数 untyped_storage().nbytes()，"
                  "这只核对了张量的形状和数据类型，并不是分配器的实测")
    else:
        measured = after - before
        counter = "torch.cuda.memory_allocated()" if dev.type == "cuda" else "torch.mps.current_allocated_memory()"
        method = f"{dev.type} 分配器自己的计数：分配前后 {counter} 之差"
    shape = tuple(cache.k.shape)
    formula = p.kv_cache_bytes(seq_len, batch_size, dtype)
    del cache
    released = None if before is None else after - _allocated(dev)
    return AllocationCheck(str(dev), method, shape, dtype, formula, measured, released, sizes)


def allocation_lines(check: AllocationCheck) -> list[str]:
    what = "实测" if check.is_measurement else "张量存储"
    lines = [f"设备 {check.device}：K、V 各一个形状为 {check.shape} 的 {check.dtype} 张量",
             f"方法：{check.method}",
             f"公式 {check.formula_bytes:,} B，{what} {check.measured_bytes:,} B（{format_bytes(check.measured_bytes)}）"]
    if check.device.startswith("cuda"):
        lines.append(f"CUDA 分配器把每个张量向上取整到 {CUDA_BLOCK} 字节的倍数后记账：K、V 取整后共 "
                     f"{check.allocator_bytes:,} B")
    return lines


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


def device_memory_text(gpu: DeviceMemory | None, device) -> str:
    """What this machine reports, as plain numbers (:func:`explain_device_memory` compares them with the table);
    never an error, whatever the card or driver says."""
    if gpu is None:
        return f"当前设备是 {device}，不是 CUDA GPU：没有 torch 报告的显存可看。"
    line = (f"{gpu.name}：torch 报告总显存 {gpu.total_bytes:,} B = {format_bytes(gpu.total_bytes)}，"
            f"此刻空闲 {format_bytes(gpu.free_bytes)}")
    if gpu.preset is None:
        return line + "（表里没有这张卡）。"
    return line + f"；表里 nvidia-smi 的总量是 {gpu.preset.memory_mib:,} MiB。"


# CUDA device names (torch.cuda.get_device_properties(...).name) of the cards in GPU_PRESETS.
DEVICE_NAMES = {"Tesla T4": "T4 16 GB (Colab)", "NVIDIA GeForce RTX 4090": "RTX 4090 24 GB",
                "NVIDIA A100-SXM4-40GB": "A100 40 GB", "NVIDIA A100-SXM4-80GB": "A100 80 GB",
                "NVIDIA H100 80GB HBM3": "H100 80 GB", "NVIDIA H200": "H200 141 GB"}


def matching_gpu(device_name: str) -> GpuPreset | None:
    """The preset of a CUDA device name such as "Tesla T4" (None for any other card)."""
    preset_name = DEVICE_NAMES.get(device_name.strip())
    return GPU_PRESETS[preset_name] if preset_name else None


# == Summary ====================================================================================
def summary_html(check: AllocationCheck) -> str:
    """The chapter's summary as bullets; every number computed here."""
    llama = MODEL_PRESETS[CHAPTER_MODEL]
    as_written, at_1024 = halving_variants()[:2]
    comment_layer, comment_total = at_1024.printed
    gb, gib = gb_and_gib(GIB)
    twin = gqa_twins()[0]
    long_factor = CHAPTER_LONG_S // CHAPTER_S
    measured = ("这一次在 GPU 上用分配器的计数实测了一块缩小版的缓存，结果见上一节按实测数字写出的说明"
                if check.is_measurement else
                "这一次在 CPU 上只核对了张量的形状和数据类型，并不是分配器的实测；在 GPU 上运行时才是实测")
    bullets = [
        f"原文 3.4 节的代码是对的：LLaMA-7B 在 {CHAPTER_S:,} 个 token、FP16 时每层 "
        f"{format_bytes(llama.layer_kv_cache_bytes(0, CHAPTER_S))}，共 {format_bytes(llama.kv_cache_bytes(CHAPTER_S))}；"
        f"{CHAPTER_LONG_S:,} 个 token 时 {format_bytes(llama.kv_cache_bytes(CHAPTER_LONG_S))}。注释里的 "
        f"{comment_layer}、{comment_total} 是这段代码在 S = {SHAPE_EXAMPLE_S:,} 时的输出（漏乘任意一个 2 也会得到它们）；"
        f"正文的「约{TEXT_LONG_GB}GB」又是在 {comment_total} 上乘 {long_factor} 得来的。所以三个数都恰好少了一半。",
        f"GB（10⁹ 字节）与 GiB（2³⁰ 字节）只差约 {float((gb / gib - 1) * 100):.0f}%，kvlab 一律用 GiB 并写出单位。",
        f"公式里的 H 是 KV 头数：{twin.gqa.label} 的缓存只有{spaced(twin.mha.label)}的 1/{ratio_text(twin.ratio)}；"
        "滑动窗口和 MLA 的模型要用各自的公式。",
        "分页（PagedAttention）不减少这些字节数，它消除的是预先预留造成的浪费和显存碎片；字节数本身要靠 GQA/MQA、MLA、"
        "滑动窗口和量化缓存来减少。",
        "部署时权重和缓存共享一张卡，而且只能按总显存的一部分来规划：批次和上下文此消彼长，计算器能算出两者各自的上限。",
        f"{measured}。",
    ]
    return "<ul>" + "".join(f"<li>{html.escape(b)}</li>" for b in bullets) + "</ul>"


# == What the measured bytes say, as claims (kvlab.claims) ==========================================================
# The allocation of section 5 and the GPU's total memory are measurements: each sentence about them is chosen by a
# predicate over the very numbers it prints (bytes as printed, thousands separated), else it says it cannot tell.
def _equal(*names):
    return lambda v: len({v[n] for n in names}) == 1


ALLOCATION = Chooser("memory_estimate.allocation", (
    Rule("memory_estimate.allocation.storage", ("formula", "stored"), _equal("formula", "stored")),
    Rule("memory_estimate.allocation.exact", ("formula", "measured", "released"),
         _equal("formula", "measured", "released")),
    Rule("memory_estimate.allocation.rounded", ("formula", "measured", "rounded", "released"),
         lambda v: v["measured"] == v["rounded"] == v["released"] and v["rounded"] > v["formula"]),
    Rule("memory_estimate.allocation.differs", ("formula", "measured"), substantive=False),
))


def _mib_apart(v, sign: int) -> bool:
    """The printed difference (MiB, one decimal) is ``sign`` x (table - torch's total), within its rounding."""
    apart = sign * (v["table"] - v["total"] / MIB)
    return apart > 0 and abs(v["diff"] - apart) <= 0.05 + 1e-9


DEVICE_MEMORY = Chooser("memory_estimate.device", (
    Rule("memory_estimate.device.less", ("total", "table", "diff"), lambda v: _mib_apart(v, 1)),
    Rule("memory_estimate.device.more", ("total", "table", "diff"), lambda v: _mib_apart(v, -1)),
    Rule("memory_estimate.device.equal", ("total", "table"), lambda v: v["total"] == v["table"] * MIB),
    Rule("memory_estimate.device.unread", ("total", "table"), substantive=False),
))
CHOOSERS = (ALLOCATION, DEVICE_MEMORY)

_DEVICE_HEAD = "torch 报告的总显存 {total}，表里 nvidia-smi 的总量 {table}"
ZH = Catalog("zh", {
    "memory_estimate.allocation.storage": "CPU 上读的是 K、V 两个张量存储的大小，共 {stored}，与公式的 {formula} 相等。这只核对"
                                          "了张量的形状和数据类型，并不是分配器的实测；在 GPU 上运行这一格才是实测。",
    "memory_estimate.allocation.exact": "分配器实测：分配前后的计数相差 {measured}，与公式的 {formula} 一个字节都不差；释放缓存后，"
                                        "分配器收回了 {released}，也一个字节不差。",
    "memory_estimate.allocation.rounded": "分配器实测：分配前后的计数相差 {measured}，比公式的 {formula} 多，正好等于把 K、V 各自"
                                          f"向上取整到 {CUDA_BLOCK} 字节的倍数之后的 {{rounded}}：多出的是分配器的记账方式，"
                                          "不是缓存本身；释放后收回了 {released}。",
    "memory_estimate.allocation.differs": "分配器的计数相差 {measured}，公式是 {formula}：这一次两者（或者释放后收回的字节数）"
                                          "对不上，多半是分配前后别的张量也在分配或释放。重新运行这一格再看；如果还对不上，"
                                          "重启内核（Kernel → Restart）后先运行这一节。",
    "memory_estimate.device.less": _DEVICE_HEAD + "：torch 的读数比它少 {diff}（驱动保留的部分；ECC 设置、驱动版本不同，"
                                                  "读数也不同）。",
    "memory_estimate.device.more": _DEVICE_HEAD + "：torch 的读数比它多 {diff}（ECC 设置、驱动版本不同，读数也不同）。",
    "memory_estimate.device.equal": _DEVICE_HEAD + "：两者正好相等。",
    "memory_estimate.device.unread": _DEVICE_HEAD + "：这一次没能比较两者；重新运行这一格。",
})


def explain_allocation(check: AllocationCheck) -> list[Claim]:
    """Section 5's allocation as a claim (:data:`ALLOCATION`): the allocator's count against the formula on a GPU
    (exact, or rounded up to 512-byte blocks), the tensors' storage on the CPU, or that they do not agree."""
    missing = math.nan
    numbers = {"formula": number(check.formula_bytes, 0, "B"), "measured": number(check.measured_bytes, 0, "B"),
               "stored": number(missing if check.is_measurement else sum(check.tensor_bytes), 0, "B"),
               "released": number(check.released_bytes if check.is_measurement else missing, 0, "B"),
               "rounded": number(check.allocator_bytes, 0, "B")}
    return [ALLOCATION.choose(numbers)]


def explain_device_memory(gpu: DeviceMemory | None) -> list[Claim]:
    """torch's total memory against the table's nvidia-smi total, as a claim (:data:`DEVICE_MEMORY`); none where
    there is no CUDA GPU or the card is not in the table."""
    if gpu is None or gpu.preset is None:
        return []
    table = gpu.preset.memory_mib
    return [DEVICE_MEMORY.choose({"total": number(gpu.total_bytes, 0, "B"), "table": number(table, 0, "MiB"),
                                  "diff": number(abs(table - gpu.total_bytes / MIB), 1, "MiB")})]


def show_claims(claims: list[Claim]) -> None:
    """Display this chapter's claims in Chinese, recorded in the output's metadata (``kvlab.claims.show``); nothing
    when there are none (a CPU has no GPU memory to compare)."""
    if claims:
        show(claims, ZH)
