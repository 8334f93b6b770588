"""Chapter 3.4, section 2: the KV Cache of real models, each with its own rule (plain, sliding window, latent
MLA): one model's exact estimate with the formula written out, the curves of several models against S, what each
attention layout stores, long contexts against the weights, and the chapter's notable comparisons as sentences."""
from __future__ import annotations

import html
from dataclasses import dataclass
from fractions import Fraction

from ...memory import DTYPE_BITS, format_bytes
from ...presets import LATENT, MODEL_PRESETS, SLIDING_WINDOW, ModelPreset
from .common import (CHAPTER_LONG_S, LONG_S, QUANTIZED, SEQ_OPTIONS, WINDOW_TERMS, beyond_context_html,
                    hypothetical_note, preset, ratio_text)


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
