"""Exercises of chapter 3.2: the cache of a real model at a given S, B and dtype, exactly; the bytes of padding in a
batch of unequal lengths. (How many sequences fit on a card after the weights is chapter 3.4's exercise 2.) Expected values come from :mod:`kvlab.presets` (published
architectures), never from the learner's formula."""
from __future__ import annotations

from ..phrases import Phrasebook
from ..presets import MODEL_PRESETS
from . import checker
from .checker import Exercise, ExerciseText, Verdict

NOTEBOOK = "02_cache_storage_shape.ipynb"
SETUP = """from kvlab import MODEL_PRESETS
from kvlab.exercises import ch02"""

# == 1. the cache of a real model ==========================================================================
SIZE_MODEL, SIZE_S, SIZE_B, SIZE_DTYPE = "Llama-3-8B", 8192, 4, "bf16"

# The graders' verdicts on anticipated mistakes, in both languages (read when a check runs: the notebook sets the
# language after importing kvlab); every number is a field.
FEEDBACK = Phrasebook("ch02.feedback", {
    "zh": {
        "query_heads": "你用的是查询头数 {n_head}。公式里的 H 是 KV 头数：{model} 用 GQA，只有 {n_kv_head} 个 KV 头，"
                       "缓存小了 {times} 倍。",
        "half": "少了一半：要么漏了 K/V 的 2（K 和 V 各存一份），要么漏了每个元素的 2 字节（算出的是元素个数，不是字节数）。",
        "no_batch": "少乘了批次 B = {B}：每条序列都有自己的缓存。",
        "double": "多了一倍：{dtype} 每个元素 2 字节（16 位），K/V 的 2 也只乘一次。",
        "bits": "{dtype} 是 16 位 = 2 字节：你按位数 16 乘了。",
        "used": "这是真正存了 token 的字节数；要的是补齐的那部分：分配的减去用到的。",
        "allocated": "这是整个批次分配的字节数；还要减去真正存了 token 的部分。",
        "pad_query_heads": "你用的是查询头数 {n_head}；缓存只为 {n_kv_head} 个 KV 头存 K/V。",
        "pad_half": "少了一半：K 和 V 各存一份，FP16 每个数 2 字节，两个 2 都要乘。",
    },
    "en": {
        "query_heads": "You used the number of query heads, {n_head}. The formula's H is the number of KV heads: "
                       "{model} uses GQA and has only {n_kv_head} KV heads, so its cache is {times} times smaller.",
        "half": "Half too small: either the 2 for K/V is missing (K and V are stored once each), or the 2 bytes per "
                "element are (that counts elements, not bytes).",
        "no_batch": "The batch B = {B} is missing: every sequence has a cache of its own.",
        "double": "Twice too large: {dtype} takes 2 bytes (16 bits) per element, and the 2 for K/V is multiplied "
                  "in only once.",
        "bits": "{dtype} is 16 bits = 2 bytes: you multiplied by the 16 bits.",
        "used": "That is the bytes that really hold a token; the question asks for the padding: allocated minus "
                "used.",
        "allocated": "That is the bytes allocated for the whole batch; subtract the part that really holds tokens.",
        "pad_query_heads": "You used the number of query heads, {n_head}; the cache stores K/V only for the "
                           "{n_kv_head} KV heads.",
        "pad_half": "Half too small: K and V are stored once each and FP16 takes 2 bytes a number: multiply by both "
                    "2s.",
    },
})
say = FEEDBACK.say

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
    english=ExerciseText(
        title="Exercise 1: how large is a real model's KV cache",
        task=f"""With this section's formula, work out the exact size of **{SIZE_MODEL}**'s KV cache at sequence length S = {SIZE_S:,}, batch B = {SIZE_B}, with the cache in {SIZE_DTYPE} (2 bytes per element).

The model's architecture is in `MODEL_PRESETS["{SIZE_MODEL}"]`: the number of layers `n_layer`, query heads `n_head`, KV heads `n_kv_head` and the head size `head_dim`. Write the formula yourself; don't call `kv_cache_bytes`.

Give the answer as a number of bytes (an integer) or as a string with a unit, such as `"1.5 GiB"` or `"1536 MiB"`: the check is exact, so a rounded figure does not count. Note that GiB (2³⁰ bytes) and GB (10⁹ bytes) are not the same thing.""",
        hints=(
            "The formula is 2 × L × B × H × S × D × bytes per element: the 2 is one copy each of K and V, and H is "
            "the number of KV heads.",
            f"{SIZE_MODEL} uses grouped-query attention (GQA): {MODEL_PRESETS[SIZE_MODEL].n_head} query heads share "
            f"{MODEL_PRESETS[SIZE_MODEL].n_kv_head} KV heads, and the cache stores K/V only for the KV heads.",
        ),
    ),
)


def cache_size_mistakes() -> dict[int, str]:
    p, S, B = MODEL_PRESETS[SIZE_MODEL], SIZE_S, SIZE_B
    right = 2 * p.n_layer * B * p.n_kv_head * S * p.head_dim * 2
    return {
        right * p.n_head // p.n_kv_head: say("query_heads", n_head=p.n_head, model=SIZE_MODEL, n_kv_head=p.n_kv_head,
                                             times=p.n_head // p.n_kv_head),
        right // 2: say("half"),
        right // B: say("no_batch", B=B),
        right * 2: say("double", dtype=SIZE_DTYPE),
        right * 8: say("bits", dtype=SIZE_DTYPE),
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
    english=ExerciseText(
        title="Exercise 2: how many bytes of a padded batch are empty",
        task=f"""**{PAD_MODEL}** is serving {len(PAD_LENGTHS)} sequences at once, which now hold {", ".join(f"{n:,}" for n in PAD_LENGTHS)} tokens. The cache is one `(L, B, H, S, D)` tensor, so S has to be the longest sequence's length and the others are padded to that length. The cache is in FP16.

How many **bytes** of this batch's cache hold no token at all (they are only padding)? Give a number of bytes or a string with a unit (the check is exact).""",
        hints=(
            "First count the token positions allocated: B × the longest length; then subtract the positions that "
            "really hold a token: the sum of the lengths.",
            "Each position (one token of one sequence) takes 2 × L × H_kv × D × 2 bytes of cache, where H_kv is the "
            "number of KV heads.",
        ),
    ),
)


def padding_mistakes() -> dict[int, str]:
    p = MODEL_PRESETS[PAD_MODEL]
    allocated, used, waste = padding_expected()
    return {
        used: say("used"),
        allocated: say("allocated"),
        waste * p.n_head // p.n_kv_head: say("pad_query_heads", n_head=p.n_head, n_kv_head=p.n_kv_head),
        waste // 2: say("pad_half"),
    }


def grade_padding(answer) -> Verdict:
    return checker.grade_bytes(answer, padding_expected()[2], padding_mistakes())


def check_padding(answer):
    return checker.check(PADDING, grade_padding, answer)


EXERCISES = (CACHE_SIZE, PADDING)  # (how many fit on a card: chapter 3.4's exercise 2, the course's one such sum)
