"""Exercises of chapter 3.2: the cache of a real model at a given S, B and dtype, exactly; how many tokens of
cache fit on a 24 GiB card after the weights. Expected values come from :mod:`kvlab.presets` (published
architectures), never from the learner's formula."""
from __future__ import annotations

from ..presets import MODEL_PRESETS
from . import checker
from .checker import Exercise, Verdict

NOTEBOOK = "02_cache_storage_shape.ipynb"
SETUP = """from kvlab import MODEL_PRESETS
from kvlab.exercises import ch02"""

GIB = 2**30

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


# == 2. how many tokens fit on a 24 GiB card ==============================================================
FIT_MODEL, FIT_CARD_GIB = "Llama-3-8B", 24

TOKENS_FIT = Exercise(
    key="ch02.tokens_fit",
    title="练习 2：一张 24 GiB 的卡，装完权重还能放多少个 token 的缓存",
    task=f"""一张显存正好 {FIT_CARD_GIB} GiB 的卡上放 **{FIT_MODEL}**：权重和 KV Cache 都用 FP16（每个数 2 字节）。先放权重，剩下的显存全部留给缓存（这里不考虑激活值等其他开销）。最多能放下多少个 token 的缓存（所有序列加起来）？

权重的字节数 = 参数个数 × 2，精确的参数个数是 `MODEL_PRESETS["{FIT_MODEL}"].n_params`。答案是一个整数。""",
    stub=f'''preset = MODEL_PRESETS["{FIT_MODEL}"]
tokens = None  # a whole number of tokens''',
    check="ch02.check_tokens_fit(tokens)",
    hints=(
        f"{FIT_CARD_GIB} GiB = {FIT_CARD_GIB} × 2³⁰ 字节；先减去权重 n_params × 2 字节，再除以每个 token 的缓存字节数。",
        "每个 token 的缓存 = 2 × L × H_kv × D × 2 字节（B = 1，S = 1）；最后向下取整。",
    ),
)


def tokens_fit_mistakes() -> dict[int, str]:
    p = MODEL_PRESETS[FIT_MODEL]
    per_token = 2 * p.n_layer * p.n_kv_head * p.head_dim * 2
    card, weights = FIT_CARD_GIB * GIB, p.n_params * 2
    return {
        (FIT_CARD_GIB * 10**9 - weights) // per_token: f"你把 {FIT_CARD_GIB} GiB 当成了 {FIT_CARD_GIB} × 10⁹ 字节（GB）。"
                                                       f"1 GiB = 2³⁰ = 1,073,741,824 字节。",
        card // per_token: "忘了先减去权重：权重和缓存共用这张卡的显存。",
        (card - weights) * p.n_kv_head // (per_token * p.n_head): f"每个 token 的缓存要按 KV 头数 {p.n_kv_head} 算，"
                                                                  f"你用的是查询头数 {p.n_head}。",
        -(-(card - weights) // per_token): "向上取整了：最后那个 token 放不下，要向下取整。",
        (card - 16 * 10**9) // per_token: f"权重要用精确的参数个数 {p.n_params:,}，不能用 8B 这个约数。",
    }


def grade_tokens_fit(answer) -> Verdict:
    p = MODEL_PRESETS[FIT_MODEL]
    room = FIT_CARD_GIB * GIB - p.weight_bytes("fp16")
    return checker.grade_count(answer, room // p.kv_bytes_per_token("fp16"), tokens_fit_mistakes())


def check_tokens_fit(answer):
    return checker.check(TOKENS_FIT, grade_tokens_fit, answer)


EXERCISES = (CACHE_SIZE, TOKENS_FIT)
