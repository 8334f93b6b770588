"""Exercises of chapter 3.2: the cache of a real model at a given S, B and dtype, exactly; the bytes of padding in a
batch of unequal lengths. (How many sequences fit on a card after the weights is chapter 3.4's exercise 2.) Expected values come from :mod:`kvlab.presets` (published
architectures), never from the learner's formula."""
from __future__ import annotations

from ..presets import MODEL_PRESETS
from . import checker
from .checker import Exercise, Verdict

NOTEBOOK = "02_cache_storage_shape.ipynb"
SETUP = """from kvlab import MODEL_PRESETS
from kvlab.exercises import ch02"""

# == 1. the cache of a real model ==========================================================================
SIZE_MODEL, SIZE_S, SIZE_B, SIZE_DTYPE = "Llama-3-8B", 8192, 4, "bf16"

CACHE_SIZE = Exercise(
    key="ch02.cache_size",
    title="练习 1：一个真实模型的 KV Cache 有多大",
    task=f"""用本节的公式，算出 **{SIZE_MODEL}** 在序列长度 S = {SIZE_S:,}、批次 B = {SIZE_B}、缓存用 {SIZE_DTYPE}（每个元素 2 字节）时 KV Cache 的精确大小。

模型的结构在 `MODEL_PRESETS["{SIZE_MODEL}"]` 里：层数 `n_layer`、查询头数 `n_head`、KV 头数 `n_kv_head`、头维度 `head_dim`。请自己写出公式，不要调用 `kv_cache_bytes`。

答案可以写成字节数（整数），也可以写成带单位的字符串，例如 `"1.5 GiB"` 或 `"1536 MiB"`：检查是精确的，四舍五入过的数不算对。注意 GiB（2³⁰ 字节）和 GB（10⁹ 字节）不是一回事。""",
    stub=f'''preset = MODEL_PRESETS["{SIZE_MODEL}"]
answer = None  # bytes (an int), or a string with a unit such as "1.5 GiB"''',
    check="ch02.check_cache_size(answer)",
    hints=(
        "公式是 2 × L × B × H × S × D × 每个元素的字节数：2 是 K 和 V 各一份，H 是 KV 头数。",
        f"{SIZE_MODEL} 用分组查询注意力（GQA）：{MODEL_PRESETS[SIZE_MODEL].n_head} 个查询头共用 "
        f"{MODEL_PRESETS[SIZE_MODEL].n_kv_head} 个 KV 头，缓存只为 KV 头存 K/V。",
    ),
)


def cache_size_mistakes() -> dict[int, str]:
    p, S, B = MODEL_PRESETS[SIZE_MODEL], SIZE_S, SIZE_B
    right = 2 * p.n_layer * B * p.n_kv_head * S * p.head_dim * 2
    return {
        right * p.n_head // p.n_kv_head: f"你用的是查询头数 {p.n_head}。公式里的 H 是 KV 头数：{SIZE_MODEL} 用 GQA，"
                                         f"只有 {p.n_kv_head} 个 KV 头，缓存小了 {p.n_head // p.n_kv_head} 倍。",
        right // 2: "少了一半：要么漏了 K/V 的 2（K 和 V 各存一份），要么漏了每个元素的 2 字节（算出的是元素个数，不是字节数）。",
        right // B: f"少乘了批次 B = {B}：每条序列都有自己的缓存。",
        right * 2: f"多了一倍：{SIZE_DTYPE} 每个元素 2 字节（16 位），K/V 的 2 也只乘一次。",
        right * 8: f"{SIZE_DTYPE} 是 16 位 = 2 字节：你按位数 16 乘了。",
    }


def grade_cache_size(answer) -> Verdict:
    expected = MODEL_PRESETS[SIZE_MODEL].kv_cache_bytes(SIZE_S, SIZE_B, SIZE_DTYPE)
    return checker.grade_bytes(answer, expected, cache_size_mistakes())


def check_cache_size(answer):
    return checker.check(CACHE_SIZE, grade_cache_size, answer)


# == 2. the padding of a batch =============================================================================
PAD_MODEL, PAD_LENGTHS = "Llama-3-8B", (1800, 420, 95, 640)  # tokens each sequence holds now


def padding_expected() -> tuple[int, int, int]:
    """(bytes allocated, bytes holding a token, bytes of padding) of the padded batch, FP16."""
    p = MODEL_PRESETS[PAD_MODEL]
    allocated = p.kv_cache_bytes(max(PAD_LENGTHS), len(PAD_LENGTHS))
    used = sum(p.kv_cache_bytes(n) for n in PAD_LENGTHS)
    return allocated, used, allocated - used


PADDING = Exercise(
    key="ch02.padding",
    title="练习 2：一个补齐的批次里，多少字节是空的",
    task=f"""**{PAD_MODEL}** 同时服务 {len(PAD_LENGTHS)} 条序列，它们现在分别有 {"、".join(f"{n:,}" for n in PAD_LENGTHS)} 个 token。缓存是一个 `(L, B, H, S, D)` 的张量，所以 S 要按最长的那条取，其余的序列补齐（padding）到同样的长度。缓存用 FP16。

这个批次的缓存里，有多少**字节**的位置没有存任何 token（只是补齐）？答案可以写成字节数，也可以写成带单位的字符串（检查是精确的）。""",
    stub=f'''preset = MODEL_PRESETS["{PAD_MODEL}"]
lengths = {list(PAD_LENGTHS)!r}
padding = None  # bytes (an int), or a string with a unit''',
    check="ch02.check_padding(padding)",
    hints=(
        "先算分配了多少个 token 的位置：B × 最长的长度；再减去真正存了 token 的位置：各条长度之和。",
        "每个位置（一条序列的一个 token）的缓存是 2 × L × H_kv × D × 2 字节，H_kv 是 KV 头数。",
    ),
)


def padding_mistakes() -> dict[int, str]:
    p = MODEL_PRESETS[PAD_MODEL]
    allocated, used, waste = padding_expected()
    return {
        used: "这是真正存了 token 的字节数；要的是补齐的那部分：分配的减去用到的。",
        allocated: "这是整个批次分配的字节数；还要减去真正存了 token 的部分。",
        waste * p.n_head // p.n_kv_head: f"你用的是查询头数 {p.n_head}；缓存只为 {p.n_kv_head} 个 KV 头存 K/V。",
        waste // 2: "少了一半：K 和 V 各存一份，FP16 每个数 2 字节，两个 2 都要乘。",
    }


def grade_padding(answer) -> Verdict:
    return checker.grade_bytes(answer, padding_expected()[2], padding_mistakes())


def check_padding(answer):
    return checker.check(PADDING, grade_padding, answer)


EXERCISES = (CACHE_SIZE, PADDING)  # (how many fit on a card: chapter 3.4's exercise 2, the course's one such sum)
