"""Exercises of chapter 3.4: the cache formula extended to sliding-window models (Mistral-7B, Gemma-2); the largest
batch at a given context on a chosen card (the course's one "how many fit" sum). Expected values come from :mod:`kvlab.presets`; the usable share of a
card is ``presets.DEFAULT_USABLE`` (the chapter's fit panel's default)."""
from __future__ import annotations

from ..presets import DEFAULT_USABLE, GPU_PRESETS, MODEL_PRESETS, ModelPreset
from . import checker
from .checker import Exercise, Verdict, right, wrong

NOTEBOOK = "04_llama7b_memory_estimate.ipynb"
SETUP = """from kvlab import MODEL_PRESETS
from kvlab.exercises import ch04
from kvlab.presets import GPU_PRESETS"""

MIB, GIB = 2**20, 2**30

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
)


def window_mistakes(p, S: int, B: int) -> dict[int, str]:
    """Known wrong answers for one case and what each means."""
    per = 2 * B * p.n_kv_head * p.head_dim * 2  # one token, one layer
    plain = p.n_layer * S * per
    out = {plain * p.n_head // p.n_kv_head: f"你用的是查询头数 {p.n_head}；公式里的 H 是 KV 头数 {p.n_kv_head}。",
           plain // B: f"少乘了批次 B = {B}：每条序列都有自己的缓存。"}
    W = p.sliding_window
    if W is not None and S > W:  # past the window: the plain formula, or every layer windowed
        out[plain] = "这是普通公式：窗口层只存最近 W 个 token，不是全部 S 个。"
        out[p.n_layer * W * per] = (f"你把每一层都当成了窗口层；{p.name} 只有 {p.n_windowed_layers} 层是，"
                                    "用 preset.layer_is_windowed(layer) 判断。")
    elif W is not None:  # under the window: windowed layers keep S, not W
        out[p.n_windowed_layers * W * per + (p.n_layer - p.n_windowed_layers) * S * per] = (
            f"S = {S:,} 还没到窗口 W = {W:,}：窗口层存的是 min(S, W) 个 token，不是 W 个。")
    return out


def grade_window(fn) -> Verdict:
    problem = checker.unwritten(fn, WINDOW_STUB, "cache_bytes", "在 cache_bytes 里写出你的公式，替换 return None。")
    if problem:
        return problem
    problem = checker.refuses_reference(fn, {"kv_cache_bytes": ModelPreset.kv_cache_bytes,
                                             "layer_kv_cache_bytes": ModelPreset.layer_kv_cache_bytes})
    if problem:
        return problem
    for name, S, B in WINDOW_CASES:
        p = MODEL_PRESETS[name]
        case = f"{name}，S = {S:,}，B = {B}"
        got = checker.call(fn, p, S, B, case=case)
        if got is None:
            return checker.todo(f"{case}：cache_bytes 返回了 None。")
        want = p.kv_cache_bytes(S, B, "fp16")
        if isinstance(got, bool) or not isinstance(got, (int, float)) or got != want:
            known = window_mistakes(p, S, B).get(got) if isinstance(got, (int, float)) else None
            return wrong(f"{case}：应为 {want:,} 字节，你的函数返回 {got!r}。", *([known] if known else []))
    g = MODEL_PRESETS["Gemma-2-9B"]
    return right(f"全部 {len(WINDOW_CASES)} 组都对！例如 Gemma-2-9B 在 S = 8,192、B = 4 时是 "
                 f"{g.kv_cache_bytes(8192, 4):,} 字节，普通公式会算成 {g.plain_formula_bytes(8192, 4):,}。")


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
)


def largest_batch_mistakes() -> dict[int, str]:
    p, card = MODEL_PRESETS[BATCH_MODEL], GPU_PRESETS[BATCH_CARD]
    per_sequence = 2 * p.n_layer * p.n_kv_head * BATCH_S * p.head_dim * 2
    weights, usable = p.n_params * 2, usable_bytes(card.memory_bytes)
    marketed = int(card.marketed.split()[0]) * 10**9
    return {
        (usable_bytes(marketed) - weights) // per_sequence: f"你把标称的「{card.marketed}」当成了 10⁹ 字节的 GB。"
                                                            f"这张卡报告的总量是 {card.memory_mib:,} MiB，用 card.memory_bytes。",
        (card.memory_bytes - weights) // per_sequence: f"你用了整张卡：只按总显存的 {SHARE}（显存使用比例）来规划，"
                                                       "其余留给 CUDA 上下文等开销。",
        usable // per_sequence: "忘了先减去权重：权重和缓存共用这张卡的显存。",
        -(-(usable - weights) // per_sequence): "向上取整了：最后一条序列放不下，要向下取整。",
        (usable - 2 * weights) // per_sequence: "权重算大了一倍：FP16 每个参数 2 字节。",
    }


def grade_largest_batch(answer) -> Verdict:
    p, card = MODEL_PRESETS[BATCH_MODEL], GPU_PRESETS[BATCH_CARD]
    room = usable_bytes(card.memory_bytes) - p.weight_bytes("fp16")
    return checker.grade_count(answer, room // p.kv_cache_bytes(BATCH_S, 1, "fp16"), largest_batch_mistakes())


def check_largest_batch(answer):
    return checker.check(LARGEST_BATCH, grade_largest_batch, answer)


EXERCISES = (WINDOW, LARGEST_BATCH)
