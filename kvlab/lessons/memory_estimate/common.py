"""Chapter 3.4's shared ground: the chapter's own example (LLaMA-7B, its lengths, the hypothetical 70B and the
published ones it is read against, the text's own numbers), the limits of its controls and their labels as shown,
the byte units, and the small helpers every section uses: a preset by name, the dropdown's options, ratios and
names set into Chinese sentences, the hypothetical model's note and the warning for a length past a model's
released context. Every text here is :data:`.phrases.TEXTS`' in the course's language, read when it is made."""
from __future__ import annotations

import html
from fractions import Fraction

from ...presets import DEFAULT_USABLE, MODEL_PRESETS, STANDARD, ModelPreset  # noqa: F401 (the chapter's name for it)
from .phrases import TEXTS


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
CUSTOM_GPU = TEXTS.text("custom_gpu", "zh")  # the dropdown's value; its label is shown in the course's language
SEQ_OPTIONS = sorted({2**k for k in range(23)} | {3 * 2**k for k in range(21)})  # 1, 2, 3, 4, 6, 8, 12 ... 2**22
CURVE_MODELS = ("GPT-2 (124M)", "LLaMA-7B", "Llama-3-70B", CHAPTER_70B, "Llama-3.1-405B", "Mistral-7B",
                "DeepSeek-V3 (671B)")
TWINS = ((CHAPTER_70B, REAL_70B), ("Llama-2-7B", "Llama-3-8B"))
CONTEXT_GRID = 48  # evenly spaced lengths of the fit panel's second figure (plus the points where it bends or ends)
SEARCH_CAP = 2**60  # tokens: a cache that fits this many has stopped growing (every layer windowed)
QUANTIZED = ("fp8", "int8", "int4")  # dtypes narrower than 16 bits: stored with scales in practice
LONG_S = 131072  # 128K tokens: the context of Llama-3.1 and DeepSeek-V3
# What a window is called where the model's own paper names it (shown only for that model): a TEXTS key.
WINDOW_TERMS = {"Mistral-7B": "window_term.mistral"}

# Labels on screen (InputError names the control exactly as the learner sees it): the constants are the Chinese
# labels (tests and chapter 3.5 match against them); label(...) shows each in the course's language.
LABEL_KEYS = {"model": "label.model", "seq_len": "label.seq_len", "batch": "label.batch",
              "seq_slider": "label.seq_slider", "curves": "label.curves", "cache_dtype": "label.cache_dtype",
              "weight_dtype": "label.weight_dtype", "gpu": "label.gpu", "budget": "label.budget",
              "usable": "label.usable"}
MODEL_LABEL, SEQ_LABEL, BATCH_LABEL = (TEXTS.text(LABEL_KEYS[k], "zh") for k in ("model", "seq_len", "batch"))
SEQ_SLIDER_LABEL, CURVE_LABEL = (TEXTS.text(LABEL_KEYS[k], "zh") for k in ("seq_slider", "curves"))
CACHE_DTYPE_LABEL, WEIGHT_DTYPE_LABEL = (TEXTS.text(LABEL_KEYS[k], "zh") for k in ("cache_dtype", "weight_dtype"))
GPU_LABEL, BUDGET_LABEL, USABLE_LABEL = (TEXTS.text(LABEL_KEYS[k], "zh") for k in ("gpu", "budget", "usable"))
_LABEL_KEY = {TEXTS.text(key, "zh"): key for key in LABEL_KEYS.values()}


def label(constant: str) -> str:
    """A control's label (one of the ``*_LABEL`` constants) in the course's language."""
    return TEXTS.say(_LABEL_KEY[constant])


def shown(model) -> str:
    """A model's name as the learner sees it, in the course's language: the hypothetical's label is a phrase, every
    real model its own name (``ModelPreset.label``)."""
    p = preset(model)
    return TEXTS.say("hypothetical_label") if p.display_name else p.label


def preset(model) -> ModelPreset:
    """A :class:`ModelPreset` from itself or its name in ``MODEL_PRESETS``."""
    if isinstance(model, ModelPreset):
        return model
    if not isinstance(model, str) or model not in MODEL_PRESETS:
        raise ValueError(f"model must be one of MODEL_PRESETS ({', '.join(MODEL_PRESETS)}); got {model!r}")
    return MODEL_PRESETS[model]


def model_options() -> list[tuple[str, str]]:
    """(label shown, preset key) for every preset: a dropdown shows the hypothetical's label in the course's
    language."""
    return [(shown(p), name) for name, p in MODEL_PRESETS.items()]


def ratio_text(r: Fraction) -> str:
    """A ratio as a reader wants it: ``2``, ``1,024``, ``1.5``, ``56.9`` (never ``1.02e+03``)."""
    if r.denominator == 1:
        return f"{r.numerator:,}"
    return f"{round(float(r)):,}" if r >= 100 else f"{float(r):.3g}"


def zh_join(items) -> str:
    """Latin names in a Chinese list: 「A」, 「A 和 B」, 「A、B 和 C」."""
    items = list(items)
    return items[0] if len(items) == 1 else f"{'、'.join(items[:-1])} 和 {items[-1]}"


def join_names(items) -> str:
    """Names in a list in the course's language: 「A、B 和 C」 (as :func:`zh_join`), "A, B and C"."""
    items = list(items)
    if len(items) == 1:
        return items[0]
    return TEXTS.say("list_last", items=TEXTS.say("list_sep").join(items[:-1]), last=items[-1])


def spaced(label: str) -> str:
    """A name set into a Chinese sentence: a space on each side that touches Latin letters or digits."""
    return f"{' ' if label[0].isascii() else ''}{label}{' ' if label[-1].isascii() else ''}"


def set_in(label: str) -> str:
    """A name set into a sentence of the course's language: :func:`spaced` in Chinese, as it is in English (the
    hypothetical's label, a phrase, as it reads inside a sentence: "the hypothetical 70B ...")."""
    if label == TEXTS.say("hypothetical_label"):
        label = TEXTS.say("hypothetical_in_sentence")
    return spaced(label) if TEXTS.say("list_sep") == "、" else label


def with_kv_heads(p: ModelPreset) -> str:
    """The label with its KV heads in brackets, unless the label already says them (the hypothetical's)."""
    return shown(p) if p.display_name else TEXTS.say("with_kv_heads", model=p.label, n=p.n_kv_head)


def same_cache_shape(model) -> list[ModelPreset]:
    """The released models whose plain cache has exactly ``model``'s shape (layers, KV heads, head size)."""
    p = preset(model)
    key = (p.n_layer, p.n_kv_head, p.head_dim)
    return [q for q in MODEL_PRESETS.values() if not q.hypothetical and q.name != p.name
            and q.cache_formula == STANDARD and (q.n_layer, q.n_kv_head, q.head_dim) == key]


def hypothetical_note(model) -> str:
    """For the chapter's hypothetical: the real models with its cache shape, and the published 70Bs' KV heads."""
    p = preset(model)
    twins = join_names(q.label for q in same_cache_shape(p))
    kv_heads = sorted({MODEL_PRESETS[n].n_kv_head for n in GQA_70BS})
    return TEXTS.say("hypothetical_note", params=p.n_params / 1e9, heads=p.n_head, twins=twins,
                     gqa_models=join_names(GQA_70BS), kv_heads="/".join(map(str, kv_heads)))


def beyond_context_html(model, seq_len: int) -> str:
    """The warning line for a length past the model's released context ("" when within it, or hypothetical)."""
    p = preset(model)
    if not p.has_released_context or seq_len <= p.context_length:
        return ""
    name = html.escape(shown(p))
    why = (TEXTS.say("beyond.learned", model=name, ctx=p.context_length) if p.learned_positions
           else TEXTS.say("beyond.extrapolated"))
    return TEXTS.say("beyond.line", S=seq_len, model=name, ctx=p.context_length, why=why)
