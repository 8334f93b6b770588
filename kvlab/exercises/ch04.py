"""Exercises of chapter 3.4: the cache formula extended to sliding-window models (Mistral-7B, Gemma-2); the largest
batch at a given context on a chosen card (the course's one "how many fit" sum). Expected values come from :mod:`kvlab.presets`; the usable share of a
card is ``presets.DEFAULT_USABLE`` (the chapter's fit panel's default)."""
from __future__ import annotations

from ..phrases import Phrasebook
from ..presets import DEFAULT_USABLE, GPU_PRESETS, MODEL_PRESETS, ModelPreset
from . import checker
from .checker import Exercise, ExerciseText, Verdict, right, wrong

NOTEBOOK = "04_llama7b_memory_estimate.ipynb"
SETUP = """from kvlab import MODEL_PRESETS
from kvlab.exercises import ch04
from kvlab.presets import GPU_PRESETS"""

MIB, GIB = 2**20, 2**30

# What the two graders say, in the course's language when they say it (the checker's own words are
# kvlab.exercises.phrases.CHECKER's).
FEEDBACK = Phrasebook("ch04.feedback", {
    "zh": {
        # 1. the formula with sliding windows
        "query_heads": "你用的是查询头数 {heads}；公式里的 H 是 KV 头数 {kv_heads}。",
        "no_batch": "少乘了批次 B = {B}：每条序列都有自己的缓存。",
        "plain": "这是普通公式：窗口层只存最近 W 个 token，不是全部 S 个。",
        "all_windowed": "你把每一层都当成了窗口层；{model} 只有 {n} 层是，用 preset.layer_is_windowed(layer) 判断。",
        "under_window": "S = {S:,} 还没到窗口 W = {W:,}：窗口层存的是 min(S, W) 个 token，不是 W 个。",
        "window_todo": "在 cache_bytes 里写出你的公式，替换 return None。",
        "case": "{model}，S = {S:,}，B = {B}",
        "returned_none": "{case}：cache_bytes 返回了 None。",
        "window_wrong": "{case}：应为 {want:,} 字节，你的函数返回 {got}。",
        "window_right": "全部 {n} 组都对！例如 Gemma-2-9B 在 S = 8,192、B = 4 时是 {actual:,} 字节，普通公式会算成 {plain:,}。",
        # 2. the largest batch
        "marketed_gb": "你把标称的「{marketed}」当成了 10⁹ 字节的 GB。这张卡报告的总量是 {mib:,} MiB，用 card.memory_bytes。",
        "whole_card": "你用了整张卡：只按总显存的 {share}（显存使用比例）来规划，其余不做规划，"
                      "留作余量（显存碎片、同一张卡上的其他进程）。",
        "no_weights": "忘了先减去权重：权重和缓存共用这张卡的显存。",
        "rounded_up": "向上取整了：最后一条序列放不下，要向下取整。",
        "double_weights": "权重算大了一倍：FP16 每个参数 2 字节。",
    },
    "en": {
        "query_heads": "You used the number of query heads, {heads}; the H in the formula is the number of KV heads, "
                       "{kv_heads}.",
        "no_batch": "The batch B = {B} is missing: every sequence has a cache of its own.",
        "plain": "That is the plain formula: a window layer stores only the last W tokens, not all S.",
        "all_windowed": "You treated every layer as a window layer; only {n} of {model}'s layers are, ask "
                        "preset.layer_is_windowed(layer).",
        "under_window": "S = {S:,} has not reached the window W = {W:,} yet: a window layer stores min(S, W) tokens, "
                        "not W.",
        "window_todo": "write your formula in cache_bytes, in place of return None.",
        "case": "{model}, S = {S:,}, B = {B}",
        "returned_none": "{case}: cache_bytes returned None.",
        "window_wrong": "{case}: should be {want:,} bytes, your function returned {got}.",
        "window_right": "All {n} cases are right! For example, Gemma-2-9B at S = 8,192 and B = 4 needs {actual:,} "
                        "bytes, where the plain formula would give {plain:,}.",
        "marketed_gb": "You read the marketed \"{marketed}\" as GB of 10⁹ bytes. The total this card reports is "
                       "{mib:,} MiB: use card.memory_bytes.",
        "whole_card": "You used the whole card: plan with only {share} of the total memory (the usable fraction) and "
                      "leave the rest out of the plan, as a margin for fragmentation and other processes on the card.",
        "no_weights": "You forgot to subtract the weights first: weights and cache share the card's memory.",
        "rounded_up": "You rounded up: the last sequence does not fit, so round down.",
        "double_weights": "The weights came out twice as large: FP16 takes 2 bytes per parameter.",
    },
})
say = FEEDBACK.say

# == 1. the formula for a model with sliding windows =======================================================
WINDOW_CASES = (("LLaMA-7B", 2048, 1), ("Mistral-7B", 3000, 2), ("Mistral-7B", 8192, 1), ("Gemma-2-9B", 8192, 4),
                ("Gemma-2-9B", 6000, 1))  # (model, S, B): no window; under, past a window; half the layers windowed

WINDOW_STUB = '''def cache_bytes(preset, seq_len, batch_size):
    # preset: a MODEL_PRESETS entry: n_layer, n_kv_head, head_dim, sliding_window (None: no window) and
    # layer_is_windowed(layer) -> True for a layer that keeps only the last sliding_window tokens. FP16: 2 bytes.
    return None'''

WINDOW = Exercise(
    key="ch04.window",
    title="练习 1：把公式推广到滑动窗口",
    task=f"""3.2 节的公式 2 × L × B × H × S × D × 每元素字节假设**每一层都存全部 S 个 token**。滑动窗口的模型不是这样：窗口层只存最近 W 个 token（W = `preset.sliding_window`），其余的层照常存全部 S 个。Mistral-7B（v0.1）的每一层都是窗口层；Gemma-2 只有一半是（哪一层是，问 `preset.layer_is_windowed(layer)`）。

写一个函数 `cache_bytes(preset, seq_len, batch_size)`，返回 FP16 缓存的精确字节数，对普通模型和这两类窗口模型都要对。检查程序会用 {len(WINDOW_CASES)} 组（模型，S，B）核对，其中有 S 比窗口短的，也有比窗口长的。不要调用 `preset.kv_cache_bytes`（那是答案）；上面的计算器可以帮你核对某一组的结果。""",
    stub=WINDOW_STUB,
    check="ch04.check_window(cache_bytes)",
    hints=(
        "一层一层地加：窗口层这一层存 min(S, W) 个 token，其余的层存 S 个；每层每个 token 是 2 × B × H_kv × D × 2 字节。",
        "for layer in range(preset.n_layer): kept = min(seq_len, preset.sliding_window) if preset.layer_is_windowed(layer) "
        "else seq_len。",
    ),
    english=ExerciseText(
        title="Exercise 1: extend the formula to sliding windows",
        task=f"""The formula of section 3.2, 2 × L × B × H × S × D × bytes per element, assumes that **every layer stores all S tokens**. Models with sliding windows do not: a window layer stores only the last W tokens (W = `preset.sliding_window`), and the other layers store all S as usual. In Mistral-7B (v0.1) every layer is a window layer; in Gemma-2 only half of them are (ask `preset.layer_is_windowed(layer)` which ones).

Write a function `cache_bytes(preset, seq_len, batch_size)` that returns the exact number of bytes of an FP16 cache, right for plain models and for both kinds of windowed model. The check tries {len(WINDOW_CASES)} cases (model, S, B), some with S shorter than the window and some longer. Do not call `preset.kv_cache_bytes` (that is the answer); the calculator above can help you check any one case.""",
        hints=(
            "Add it up layer by layer: a window layer stores min(S, W) tokens, the other layers S; each layer takes "
            "2 × B × H_kv × D × 2 bytes per token.",
            "for layer in range(preset.n_layer): kept = min(seq_len, preset.sliding_window) if "
            "preset.layer_is_windowed(layer) else seq_len.",
        ),
    ),
)


def window_mistakes(p, S: int, B: int) -> dict[int, str]:
    """Known wrong answers for one case and what each means."""
    per = 2 * B * p.n_kv_head * p.head_dim * 2  # one token, one layer
    plain = p.n_layer * S * per
    out = {plain * p.n_head // p.n_kv_head: say("query_heads", heads=p.n_head, kv_heads=p.n_kv_head),
           plain // B: say("no_batch", B=B)}
    W = p.sliding_window
    if W is not None and S > W:  # past the window: the plain formula, or every layer windowed
        out[plain] = say("plain")
        out[p.n_layer * W * per] = say("all_windowed", model=p.name, n=p.n_windowed_layers)
    elif W is not None:  # under the window: windowed layers keep S, not W
        out[p.n_windowed_layers * W * per + (p.n_layer - p.n_windowed_layers) * S * per] = (
            say("under_window", S=S, W=W))
    return out


def grade_window(fn) -> Verdict:
    problem = checker.unwritten(fn, WINDOW_STUB, "cache_bytes", say("window_todo"))
    if problem:
        return problem
    problem = checker.refuses_reference(fn, {"kv_cache_bytes": ModelPreset.kv_cache_bytes,
                                             "layer_kv_cache_bytes": ModelPreset.layer_kv_cache_bytes})
    if problem:
        return problem
    for name, S, B in WINDOW_CASES:
        p = MODEL_PRESETS[name]
        case = say("case", model=name, S=S, B=B)
        got = checker.call(fn, p, S, B, case=case)
        if got is None:
            return checker.todo(say("returned_none", case=case))
        want = p.kv_cache_bytes(S, B, "fp16")
        if isinstance(got, bool) or not isinstance(got, (int, float)) or got != want:
            known = window_mistakes(p, S, B).get(got) if isinstance(got, (int, float)) else None
            return wrong(say("window_wrong", case=case, want=want, got=repr(got)), *([known] if known else []))
    g = MODEL_PRESETS["Gemma-2-9B"]
    return right(say("window_right", n=len(WINDOW_CASES), actual=g.kv_cache_bytes(8192, 4),
                     plain=g.plain_formula_bytes(8192, 4)))


def check_window(fn):
    return checker.check(WINDOW, grade_window, fn)


# == 2. the largest batch on a card ========================================================================
BATCH_MODEL, BATCH_CARD, BATCH_S = "Llama-2-13B", "A100 80 GB", 4096
SHARE = f"{float(DEFAULT_USABLE):g}"


def usable_bytes(total: int) -> int:
    """The part of a card's memory planned with (the fit panel's default share), in whole bytes."""
    return total * DEFAULT_USABLE.numerator // DEFAULT_USABLE.denominator

LARGEST_BATCH = Exercise(
    key="ch04.largest_batch",
    title="练习 2：这张卡最多能放多大的批次",
    task=f"""在一张 **{BATCH_CARD}** 上部署 **{BATCH_MODEL}**（多头注意力，每个头都存自己的 K/V），权重和缓存都用 FP16。每条序列的上下文是 S = {BATCH_S:,} 个 token。和上面的面板一样，只按总显存的 {SHARE}（显存使用比例）来规划：先放权重，这一部分里剩下的全部给缓存。最多能同时放下多少条序列（批次 B）？

总显存是 `GPU_PRESETS["{BATCH_CARD}"].memory_bytes`（`nvidia-smi` 报告的总量，字节），乘以 {SHARE} 后向下取整到整字节；模型的结构和精确参数个数在 `MODEL_PRESETS["{BATCH_MODEL}"]` 里。答案是一个整数。""",
    stub=f'''card = GPU_PRESETS["{BATCH_CARD}"]
preset = MODEL_PRESETS["{BATCH_MODEL}"]
largest_batch = None  # a whole number of sequences''',
    check="ch04.check_largest_batch(largest_batch)",
    hints=(
        f"留给缓存的显存 = card.memory_bytes × {SHARE} − n_params × 2；一条序列的缓存 = 2 × L × H_kv × S × D × 2 字节。",
        "分三步算，每一步都用整数：可用显存 = int(card.memory_bytes × 比例)；给缓存的 = 可用显存 − 权重字节数；"
        "批次 = 给缓存的 // 一条序列的缓存字节数。把每一步的中间结果打印出来，看哪一步和你想的不一样。",
    ),
    english=ExerciseText(
        title="Exercise 2: the largest batch this card can hold",
        task=f"""Deploy **{BATCH_MODEL}** (multi-head attention: every head stores its own K/V) on an **{BATCH_CARD}**, with FP16 weights and an FP16 cache. Each sequence has a context of S = {BATCH_S:,} tokens. As in the panel above, plan with only {SHARE} of the total memory (the usable fraction): the weights go in first, and all that is left of this share goes to the cache. How many sequences (batch B) fit at most?

The total memory is `GPU_PRESETS["{BATCH_CARD}"].memory_bytes` (the total `nvidia-smi` reports, in bytes); multiply it by {SHARE} and round down to whole bytes. The model's shape and exact parameter count are in `MODEL_PRESETS["{BATCH_MODEL}"]`. The answer is a whole number.""",
        hints=(
            f"Memory left for the cache = card.memory_bytes × {SHARE} − n_params × 2; one sequence's cache = "
            "2 × L × H_kv × S × D × 2 bytes.",
            "Work it out in three steps, each in whole numbers: usable = int(card.memory_bytes × fraction); for the "
            "cache = usable − weight bytes; batch = for the cache // bytes of one sequence's cache. Print each "
            "intermediate result and see which step differs from what you expected.",
        ),
    ),
)


def largest_batch_mistakes() -> dict[int, str]:
    p, card = MODEL_PRESETS[BATCH_MODEL], GPU_PRESETS[BATCH_CARD]
    per_sequence = 2 * p.n_layer * p.n_kv_head * BATCH_S * p.head_dim * 2
    weights, usable = p.n_params * 2, usable_bytes(card.memory_bytes)
    marketed = int(card.marketed.split()[0]) * 10**9
    return {
        (usable_bytes(marketed) - weights) // per_sequence: say("marketed_gb", marketed=card.marketed,
                                                                mib=card.memory_mib),
        (card.memory_bytes - weights) // per_sequence: say("whole_card", share=SHARE),
        usable // per_sequence: say("no_weights"),
        -(-(usable - weights) // per_sequence): say("rounded_up"),
        (usable - 2 * weights) // per_sequence: say("double_weights"),
    }


def grade_largest_batch(answer) -> Verdict:
    p, card = MODEL_PRESETS[BATCH_MODEL], GPU_PRESETS[BATCH_CARD]
    room = usable_bytes(card.memory_bytes) - p.weight_bytes("fp16")
    return checker.grade_count(answer, room // p.kv_cache_bytes(BATCH_S, 1, "fp16"), largest_batch_mistakes())


def check_largest_batch(answer):
    return checker.check(LARGEST_BATCH, grade_largest_batch, answer)


EXERCISES = (WINDOW, LARGEST_BATCH)
