"""Chapter 3.4's shared ground: the chapter's own example (LLaMA-7B, its lengths, the hypothetical 70B and the
published ones it is read against, the text's own numbers), the limits of its controls and their labels as shown,
the byte units, and the small helpers every section uses: a preset by name, the dropdown's options, ratios and
names set into Chinese sentences, the hypothetical model's note and the warning for a length past a model's
released context."""
from __future__ import annotations

import html
from fractions import Fraction

from ...presets import DEFAULT_USABLE, MODEL_PRESETS, STANDARD, ModelPreset  # noqa: F401 (the chapter's name for it)


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
