"""Chapter 3.4, section 1: the original text's figures recomputed (its printed output, the 8,192-token and the
70B sentences) against kvlab's exact bytes, the single changes to its calculation that halve the result (why its
numbers are exactly half), GB against GiB, and the 70B sentence read two ways."""
from __future__ import annotations

import html
from dataclasses import dataclass
from fractions import Fraction

from ...memory import format_bytes, kv_cache_bytes
from ...presets import MODEL_PRESETS, ModelPreset
from .common import (CHAPTER_70B, CHAPTER_D, CHAPTER_H, CHAPTER_L, CHAPTER_LONG_S, CHAPTER_MODEL, CHAPTER_S, GB, GIB,
                    MIB, REAL_70B, SHAPE_EXAMPLE_S, TEXT_70B_GB, TEXT_LONG_GB, ratio_text)


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
