"""Chapter 3.2's real models: the chapter's table of typical values recomputed from published configurations
(a size past a model's trained context marked), what GQA saves against an MHA model of the same depth and head
size, and the real models whose head size is not hidden size / query heads."""
from __future__ import annotations

import html
from dataclasses import dataclass

from ...memory import format_bytes
from ...presets import LATENT, MODEL_PRESETS, ModelPreset
from .phrases import TEXTS


TABLE_MODELS = ["GPT-2 (124M)", "LLaMA-7B", "LLaMA-13B", "LLaMA-65B", "Llama-2-70B", "Llama-3-8B", "Gemma-7B"]
MHA_TWINS = {"Llama-2-70B": "LLaMA-65B", "Llama-3-8B": "LLaMA-7B"}  # same layers and head size, but MHA
PAST_CONTEXT = TEXTS.text("past_context", "zh")  # marks a size past the model's trained context (as the Chinese edition does)


@dataclass
class GQASaving:
    """A GQA model against an MHA model of the same depth and head size: how much smaller its cache is."""

    model: str
    query_heads_per_kv_head: int
    mha_twin: str
    ratio: float  # MHA bytes per token / GQA bytes per token


def gqa_savings(twins: dict[str, str] = MHA_TWINS) -> list[GQASaving]:
    out = []
    for name, twin in twins.items():
        p, t = MODEL_PRESETS[name], MODEL_PRESETS[twin]
        out.append(GQASaving(name, p.n_head // p.n_kv_head, twin, t.kv_bytes_per_token() / p.kv_bytes_per_token()))
    return out


def head_dim_exceptions() -> list[ModelPreset]:
    """Real models (standard caches) whose head size is not hidden size / query heads."""
    return [p for p in MODEL_PRESETS.values()
            if not p.hypothetical and p.cache_formula != LATENT and p.n_head * p.head_dim != p.hidden_size]


def past_context(seq_len: int, names=TABLE_MODELS) -> list[str]:
    """The models whose trained context is shorter than ``seq_len`` tokens."""
    return [n for n in names if MODEL_PRESETS[n].context_length < seq_len]


def head_dim_note() -> str:
    """A sentence naming the real models whose head size is not hidden size / query heads."""
    cases = TEXTS.say("table_sep").join(
        TEXTS.say("head_dim_case", name=p.name, n_head=p.n_head, head_dim=p.head_dim, product=p.n_head * p.head_dim,
                  hidden=p.hidden_size) for p in head_dim_exceptions())
    return TEXTS.say("head_dim_note", cases=cases)


def model_table_html(names=TABLE_MODELS, seq_lens=(1024, 4096)) -> str:
    """The chapter's table of typical values, recomputed from published configurations (B = 1, FP16); a size
    past a model's trained context is marked."""
    mark = TEXTS.say("past_context")
    head = TEXTS.say("table_head") + "".join(f"<th>S={s:,}</th>" for s in seq_lens) + "</tr>"
    rows = []
    for name in names:
        p = MODEL_PRESETS[name]
        sizes = [format_bytes(p.kv_cache_bytes(s)) if s <= p.context_length else
                 f"<span style='color:#999'>{format_bytes(p.kv_cache_bytes(s))}{mark}</span>" for s in seq_lens]
        cells = [html.escape(p.name), f"{p.context_length:,}", p.n_layer, p.n_head, p.n_kv_head, p.head_dim,
                 p.hidden_size, format_bytes(p.kv_bytes_per_token("fp16")), *sizes]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    notes = TEXTS.say("table_sep").join(TEXTS.say("gqa_note", model=g.model, group=g.query_heads_per_kv_head,
                                                  twin=g.mha_twin, ratio=g.ratio) for g in gqa_savings())
    return (f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
            f"<p style='font-size:90%'>{TEXTS.say('table_note', mark=mark, notes=notes)}</p>")
