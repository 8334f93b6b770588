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
                    MIB, REAL_70B, SHAPE_EXAMPLE_S, TEXT_70B_GB, TEXT_LONG_GB, ratio_text, shown)
from .phrases import TEXTS


@dataclass(frozen=True)
class TextFigure:
    """One figure the original text prints or claims, read in its own unit, against kvlab's exact bytes."""

    what: str  # what the figure is about (in the course's language when it was made)
    text_says: str  # as the text writes it (quoted in translation in English)
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
    say = TEXTS.say
    over = say("says.over", gb=TEXT_70B_GB)
    return [
        TextFigure(say("fig.per_layer", S=S), "16.0 MB", "=", 16 * MIB, llama.layer_kv_cache_bytes(0, S), llama, S),
        TextFigure(say("fig.total", L=CHAPTER_L, S=S), "0.50 GB", "=", GIB // 2, llama.kv_cache_bytes(S), llama, S),
        TextFigure(say("fig.long", S=LS), say("says.about", gb=TEXT_LONG_GB), "≈", TEXT_LONG_GB * GIB,
                   llama.kv_cache_bytes(LS), llama, LS),
        TextFigure(say("fig.mha70", model=shown(mha70), L=mha70.n_layer, H=mha70.n_kv_head, D=mha70.head_dim, S=LS),
                   over, ">", TEXT_70B_GB * GIB, mha70.kv_cache_bytes(LS), mha70, LS),
        TextFigure(say("fig.real70", model=gqa70.label, kv=gqa70.n_kv_head, S=LS), over, ">",
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
    say = TEXTS.say
    rows = [(say("variant.as_written"), L, kv_cache_bytes(1, H, D, S)),
            (say("variant.seq_len", S=SHAPE_EXAMPLE_S), L, kv_cache_bytes(1, H, D, SHAPE_EXAMPLE_S)),
            (say("variant.k_only"), L, k_only),
            (say("variant.one_byte"), L, kv_cache_bytes(1, H, D, S, 1, "int8")),
            (say("variant.half_h", H=H // 2), L, kv_cache_bytes(1, H // 2, D, S)),
            (say("variant.half_d", D=D // 2), L, kv_cache_bytes(1, H, D // 2, S)),
            (say("variant.half_l", L=L // 2), L // 2, kv_cache_bytes(1, H, D, S))]
    return [Variant(change, per_layer, layers * per_layer) for change, layers, per_layer in rows]


def _verdict(f: TextFigure) -> str:
    verdict = TEXTS.say("verdict.holds" if f.holds else "verdict.fails")
    if f.relation == ">":
        return TEXTS.say("verdict.more", verdict=verdict, kvlab=format_bytes(f.kvlab_bytes),
                         sign=">" if f.holds else "<", text=format_bytes(f.text_bytes))
    return TEXTS.say("verdict.ratio", verdict=verdict, ratio=ratio_text(f.ratio))


def _what_cell(f: TextFigure) -> str:
    what = html.escape(f.what)
    if f.beyond_context:
        what += TEXTS.say("what.beyond", model=html.escape(shown(f.model)), ctx=f.model.context_length)
    return what


def chapter_figures_html(figures: list[TextFigure]) -> str:
    """The recomputed figures as a table: what the text says, what kvlab computes, and whether it holds."""
    rows = "".join(TEXTS.say("figures.row", what=_what_cell(f), says=html.escape(f.text_says),
                             size=format_bytes(f.kvlab_bytes), n=f.kvlab_bytes, verdict=_verdict(f))
                   for f in figures)
    return TEXTS.say("figures.table", rows=rows)


def variants_html(variants: list[Variant]) -> str:
    rows = "".join(f"<tr><td>{html.escape(v.change)}</td><td>{v.printed[0]}</td><td>{v.printed[1]}</td></tr>"
                   for v in variants)
    return TEXTS.say("variants.table", rows=rows)


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
    return TEXTS.say("seventy_b", S=CHAPTER_S, at_s=format_bytes(r.at_chapter_s), threshold=TEXT_70B_GB,
                     long_s=CHAPTER_LONG_S, at_long=format_bytes(r.at_long_s), scale=ratio_text(r.scale),
                     l70=mha70.n_layer, l7=llama.n_layer, kv70=mha70.n_kv_head, kv7=llama.n_kv_head,
                     text_gb=TEXT_LONG_GB, scaled_gb=ratio_text(r.text_scaled_gb),
                     corrected=format_bytes(llama.kv_cache_bytes(CHAPTER_LONG_S)),
                     corrected_scaled=format_bytes(r.corrected_scaled))
