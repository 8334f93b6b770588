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
                    hypothetical_note, preset, ratio_text, shown)
from .phrases import TEXTS


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
    label: str  # what the learner sees (in the course's language when the curves were made)
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
        out.append(CacheCurve(p.name, shown(p), seq_lens, sizes, p.kv_bytes_per_token(dtype), ctx,
                              None if ctx is None else p.kv_cache_bytes(ctx, batch_size, dtype)))
    return out


def formula_html(e: CacheEstimate) -> str:
    """The formula with this model's numbers in it, ending in the exact byte count."""
    p, S, B, byte = e.model, e.seq_len, e.batch_size, DTYPE_BITS[e.dtype] / 8
    total = f"<b>{e.total_bytes:,} B = {format_bytes(e.total_bytes)}</b>"
    if p.cache_formula == LATENT:
        return TEXTS.say("formula.latent", L=p.n_layer, B=B, S=S, rank=p.kv_lora_rank, rope=p.kv_rope_dim, byte=byte,
                         total=total)
    if p.cache_formula == SLIDING_WINDOW:
        n_win, n_full = p.n_windowed_layers, p.n_layer - p.n_windowed_layers
        windowed = TEXTS.say("formula.windowed", n_win=n_win, W=p.sliding_window)
        both = TEXTS.say("formula.both", windowed=windowed, n_full=n_full) if n_full else windowed
        return TEXTS.say("formula.sliding", layers=both, B=B, H=p.n_kv_head, S=S, D=p.head_dim, byte=byte,
                         total=total)
    return TEXTS.say("formula.plain", L=p.n_layer, B=B, H=p.n_kv_head, S=S, D=p.head_dim, byte=byte, total=total)


def attention_zh(p: ModelPreset) -> str:
    """The model's attention layout in the glossary's terms, in the course's language (the name is the Chinese
    edition's)."""
    if p.cache_formula == LATENT:
        return TEXTS.say("attention.mla", heads=p.n_head, rank=p.kv_lora_rank, rope=p.kv_rope_dim)
    if p.n_kv_head == p.n_head:
        return TEXTS.say("attention.mha", heads=p.n_head)
    if p.n_kv_head == 1:
        return TEXTS.say("attention.mqa", heads=p.n_head)
    return TEXTS.say("attention.gqa", heads=p.n_head, groups=p.n_kv_head, per=p.n_head // p.n_kv_head)


def explain_formula(p: ModelPreset) -> str:
    """Why this model's cache needs its own rule ("" for a standard model); every number from the preset."""
    if p.cache_formula == SLIDING_WINDOW:
        which = (TEXTS.say("window.every") if p.sliding_period == 1
                 else TEXTS.say("window.some", period=p.sliding_period, n=p.n_windowed_layers))
        term = TEXTS.say(WINDOW_TERMS[p.name]) if p.name in WINDOW_TERMS else ""
        return TEXTS.say("explain.sliding", model=shown(p), which=which, W=p.sliding_window, term=term)
    if p.cache_formula == LATENT:
        return TEXTS.say("explain.latent", model=shown(p), rank=p.kv_lora_rank, rope=p.kv_rope_dim,
                         dim=p.kv_latent_dim)
    return ""


def calculator_html(e: CacheEstimate) -> str:
    p, S = e.model, e.seq_len
    dims = "" if p.cache_formula == LATENT else TEXTS.say("calc.dims", D=p.head_dim)
    context = (TEXTS.say("calc.context", ctx=p.context_length) if p.has_released_context
               else TEXTS.say("calc.no_context"))
    head = TEXTS.say("calc.head", model=html.escape(shown(p)), n=p.n_layer, attention=attention_zh(p), dims=dims,
                     context=context)
    windowed = p.cache_formula == SLIDING_WINDOW
    per_token = TEXTS.say("calc.per_token_windowed" if windowed else "calc.per_token", size=format_bytes(e.per_token_bytes))
    if windowed:
        per_token += TEXTS.say("calc.mean", S=S, size=format_bytes(e.mean_per_token))
    lines = [head, formula_html(e),
             TEXTS.say("calc.totals", per_token=per_token, layers=_layer_summary(e), total=format_bytes(e.total_bytes))]
    note = explain_formula(p)
    if note:
        what = (TEXTS.say("calc.what_mla", D=p.head_dim) if p.cache_formula == LATENT else TEXTS.say("calc.what_all"))
        if e.plain_bytes == e.total_bytes:  # a sliding window not yet full: both rules agree
            lines.append(TEXTS.say("calc.same", note=note, S=S, W=p.sliding_window, plain=format_bytes(e.plain_bytes)))
        else:
            lines.append(TEXTS.say("calc.plain", note=note, what=what, plain=format_bytes(e.plain_bytes),
                                   ratio=ratio_text(Fraction(e.plain_bytes, e.total_bytes))))
    if e.dtype in QUANTIZED:
        lines.append(TEXTS.say("calc.quantized", dtype=e.dtype))
    warning = beyond_context_html(p, S)
    if warning:
        lines.append(warning)
    if p.hypothetical:
        lines.append(TEXTS.say("calc.hypothetical", note=hypothetical_note(p)))
    return "<br>".join(lines)


def _layer_summary(e: CacheEstimate) -> str:
    sizes = sorted(set(e.layer_bytes))
    if len(sizes) == 1:
        return format_bytes(sizes[0])
    return TEXTS.say("calc.layers_two", windowed=format_bytes(sizes[0]), full=format_bytes(sizes[-1]))


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
    line = TEXTS.say("long.line", model=shown(r.model), S=r.seq_len, cache=format_bytes(r.cache_bytes),
                     weights=format_bytes(r.fp16_weight_bytes))
    if r.released_weight_bytes is not None:
        line += TEXTS.say("long.released", dtype=r.model.released_dtype.upper(),
                          size=format_bytes(r.released_weight_bytes))
    return line


def comparison_lines() -> list[str]:
    """The chapter's notable comparisons (FP16, B = 1) as sentences; every number computed from the presets."""
    p = MODEL_PRESETS
    llama, falcon, big, mistral = p["LLaMA-7B"], p["Falcon-7B"], p["Llama-3.1-405B"], p["Mistral-7B"]
    l31, v3 = p["Llama-3.1-8B"], p["DeepSeek-V3 (671B)"]
    heads, dims = Fraction(falcon.n_kv_head, llama.n_kv_head), Fraction(falcon.head_dim, llama.head_dim)
    S = CHAPTER_LONG_S
    say = TEXTS.say
    return [
        say("cmp.falcon", falcon=format_bytes(falcon.kv_bytes_per_token()), llama=format_bytes(llama.kv_bytes_per_token()),
            ratio=heads * dims, kv7=llama.n_kv_head, kvf=falcon.n_kv_head, heads=heads, d7=llama.head_dim,
            df=falcon.head_dim, dims=dims, L=llama.n_layer),
        say("cmp.405b", big=format_bytes(big.kv_bytes_per_token()), llama=format_bytes(llama.kv_bytes_per_token()),
            L=big.n_layer, kv=big.n_kv_head, L7=llama.n_layer, kv7=llama.n_kv_head),
        say("cmp.mistral", S=S, actual=format_bytes(mistral.kv_cache_bytes(S)),
            plain=format_bytes(mistral.plain_formula_bytes(S)),
            ratio=ratio_text(Fraction(mistral.plain_formula_bytes(S), mistral.kv_cache_bytes(S)))),
        say("cmp.l31", S=LONG_S, cache=format_bytes(l31.kv_cache_bytes(LONG_S)),
            weights=format_bytes(l31.weight_bytes("fp16"))),
        say("cmp.v3", v3_b=v3.n_params / 1e9, v3=format_bytes(v3.kv_cache_bytes(LONG_S)), l31_b=l31.n_params / 1e9,
            l31=format_bytes(l31.kv_cache_bytes(LONG_S))),
    ]
