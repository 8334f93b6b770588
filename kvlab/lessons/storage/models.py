"""Chapter 3.2's real models: the chapter's table of typical values recomputed from published configurations
(a size past a model's trained context marked), what GQA saves against an MHA model of the same depth and head
size, and the real models whose head size is not hidden size / query heads."""
from __future__ import annotations

import html
from dataclasses import dataclass

from ...memory import format_bytes
from ...presets import LATENT, MODEL_PRESETS, ModelPreset


TABLE_MODELS = ["GPT-2 (124M)", "LLaMA-7B", "LLaMA-13B", "LLaMA-65B", "Llama-2-70B", "Llama-3-8B", "Gemma-7B"]
MHA_TWINS = {"Llama-2-70B": "LLaMA-65B", "Llama-3-8B": "LLaMA-7B"}  # same layers and head size, but MHA
PAST_CONTEXT = "＊"  # marks a size past the model's trained context


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
    cases = "；".join(f"{p.name} 有 {p.n_head} 个查询头、每个 {p.head_dim} 维，{p.n_head} × {p.head_dim} = "
                     f"{p.n_head * p.head_dim:,}，而隐藏维度是 {p.hidden_size:,}" for p in head_dim_exceptions())
    return f"头维度 ≠ 隐藏维度 / 查询头数的真实模型：{cases}。"


def model_table_html(names=TABLE_MODELS, seq_lens=(1024, 4096)) -> str:
    """The chapter's table of typical values, recomputed from published configurations (B = 1, FP16); a size
    past a model's trained context is marked."""
    head = ("<tr><th>模型</th><th>训练上下文</th><th>层数 L</th><th>查询头</th><th>KV 头 H</th><th>头维度 D</th>"
            "<th>隐藏维度</th><th>每个 token（FP16）</th>" + "".join(f"<th>S={s:,}</th>" for s in seq_lens) + "</tr>")
    rows = []
    for name in names:
        p = MODEL_PRESETS[name]
        sizes = [format_bytes(p.kv_cache_bytes(s)) if s <= p.context_length else
                 f"<span style='color:#999'>{format_bytes(p.kv_cache_bytes(s))}{PAST_CONTEXT}</span>" for s in seq_lens]
        cells = [html.escape(p.name), f"{p.context_length:,}", p.n_layer, p.n_head, p.n_kv_head, p.head_dim,
                 p.hidden_size, format_bytes(p.kv_bytes_per_token("fp16")), *sizes]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    notes = "；".join(f"{g.model} 每 {g.query_heads_per_kv_head} 个查询头共用一组 K/V，每个 token 的缓存是 "
                     f"{g.mha_twin} 的 1/{g.ratio:g}" for g in gqa_savings())
    return (f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
            f"<p style='font-size:90%'>B = 1，FP16。{PAST_CONTEXT} 超过了该模型训练时的上下文长度：模型没在这么长的序列上"
            f"训练过（GPT-2 的位置嵌入只有 1,024 个，更长的序列根本输入不了），这一格只是照公式算出的字节数。{notes}。</p>")
