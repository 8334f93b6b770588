"""Chapter 3.4, section 4, why GQA matters: an MHA model and its GQA twin (same layers, query heads and head
size) at one length, and the line the notebook prints for each pair."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ...memory import format_bytes
from ...presets import ModelPreset
from .common import CHAPTER_LONG_S, TWINS, preset, ratio_text, shown, with_kv_heads
from .phrases import TEXTS


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
    return "".join(TEXTS.say("twin.past", model=shown(p), ctx=p.context_length) for p in models)


def twin_line(t: TwinComparison) -> str:
    return TEXTS.say("twin.line", mha=with_kv_heads(t.mha), mha_size=format_bytes(t.mha_bytes),
                     gqa=with_kv_heads(t.gqa), gqa_size=format_bytes(t.gqa_bytes), ratio=ratio_text(t.ratio),
                     past=past_context_note(t.beyond_context))
