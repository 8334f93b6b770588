"""Exercises of chapter 3.4: find and correct the 2x error of the original text's LLaMA-7B example; the largest
batch at a given context on a chosen card. Expected values come from :mod:`kvlab.presets`; the usable share of a
card is the chapter's ``DEFAULT_USABLE`` (the fit panel's default)."""
from __future__ import annotations

from ..lessons.memory_estimate import DEFAULT_USABLE
from ..presets import GPU_PRESETS, MODEL_PRESETS
from . import checker
from .checker import Choice, Exercise, Verdict, right, wrong

NOTEBOOK = "04_llama7b_memory_estimate.ipynb"
SETUP = """from kvlab import MODEL_PRESETS
from kvlab.exercises import ch04
from kvlab.presets import GPU_PRESETS"""

MIB, GIB = 2**20, 2**30

# == 1. the 2x error ======================================================================================
TEXT_MODEL, TEXT_S = "LLaMA-7B", 2048

TWO_X = Exercise(
    key="ch04.two_x",
    title="练习 1：找出并改正原文的 2 倍错误",
    task=f"""原文 3.4 节的代码（L = 32，H = 32，D = 128，S = {TEXT_S:,}，FP16）运行后打印「每层 32.0 MB」「总 1.00 GB」，它最后的注释却写着「16.0 MB」「0.50 GB」。自己判断并改正：

* `right_side`：哪一边的数字是对的？写 `"code"`（代码打印的）或 `"comment"`（注释写的）；
* `layer_size`、`total_size`：改正后的每层 KV Cache 和总 KV Cache，写成字节数或带单位的字符串（原文除以 1024² 和 1024³，所以它的 MB、GB 其实是 MiB、GiB，请写正确的单位）；
* `why`：为什么错的那一边恰好差 2 倍？从下面选一个字母：
  * A：代码三个因子 2 都乘了；注释里的数字是同一段代码在 S = 1,024（3.2 节的例子）时的输出，相当于少乘了一个 2；
  * B：代码漏乘了 K 和 V 的那个 2，注释才是对的；
  * C：代码除以 1024³ 却写 GB，GB 与 GiB 的差别造成了 2 倍；
  * D：FP16 每个元素只占 1 字节，代码的 `bytes_per_element = 2` 多乘了一个 2。""",
    stub='''right_side = None  # "code" or "comment"
layer_size = None  # bytes, or a string such as "12.5 MiB"
total_size = None
why = None  # "A", "B", "C" or "D"''',
    check="ch04.check_two_x(right_side, layer_size, total_size, why)",
    hints=(
        "自己数一数 2 * H * S * D * bytes_per_element 里的 2：K 和 V 一个，FP16 的 2 字节一个，S = 2048 = 2 × 1024 又一个。",
        "把 2 * 32 * 2048 * 128 * 2 算出来，再除以 1024²：这就是每层的 MiB 数。",
    ),
)

SIDES = [
    Choice("code", True, "", aliases=("代码",)),
    Choice("comment", False, "注释里的 16.0 MB、0.50 GB 恰好是代码真正打印的一半；自己算一遍 2 × 32 × 2048 × 128 × 2 就知道。",
           aliases=("注释",)),
]
WHY = [
    Choice("A", True, "公式三个因子都乘了：K 和 V 的 2、FP16 的 2 字节、S = 2048。注释的数字正是 S = 1024 时的输出。"),
    Choice("B", False, "代码里 2 * H * S * D * bytes_per_element 最前面的 2 就是 K 和 V：它没有漏乘。"),
    Choice("C", False, "GB 与 GiB 只差约 7%（10⁹ 与 2³⁰），解释不了 2 倍。"),
    Choice("D", False, "FP16 是 16 位，也就是 2 字节：bytes_per_element = 2 是对的。"),
]


def two_x_expected() -> tuple[int, int]:
    p = MODEL_PRESETS[TEXT_MODEL]
    return p.layer_kv_cache_bytes(0, TEXT_S), p.kv_cache_bytes(TEXT_S)


def grade_two_x(right_side, layer_size, total_size, why) -> Verdict:
    if all(a is None for a in (right_side, layer_size, total_size, why)):
        return checker.todo()
    layer_bytes, total_bytes = two_x_expected()
    parts = {
        "right_side": checker.grade_choice(right_side, SIDES),
        "layer_size": checker.grade_bytes(layer_size, layer_bytes, {
            layer_bytes // 2: "这是注释里的 16.0 MB：它只有代码算出的一半。"}),
        "total_size": checker.grade_bytes(total_size, total_bytes, {
            total_bytes // 2: "这是注释里的 0.50 GB：它只有代码算出的一半。",
            layer_bytes: "这是一层的大小：总共要乘层数 L = 32。"}),
        "why": checker.grade_choice(why, WHY),
    }
    missing = [name for name, v in parts.items() if v.status == checker.TODO]
    bad = [f"{name}：{v.message}" + "".join(f"（{d}）" for d in v.details)
           for name, v in parts.items() if v.status == checker.WRONG]
    if bad:
        return wrong(f"{len(bad)} 处不对" + (f"，还有 {'、'.join(missing)} 没填" if missing else "") + "。", *bad)
    if missing:
        return checker.todo(f"填完的都对，还有 {'、'.join(missing)} 没填。")
    return right(f"正确！代码打印的 32.0 MiB、1.00 GiB 是对的（{layer_bytes:,} 和 {total_bytes:,} 字节）；注释少了一半，"
                 "它是 S = 1024 时的输出。")


def check_two_x(right_side, layer_size, total_size, why):
    return checker.check(TWO_X, grade_two_x, right_side, layer_size, total_size, why)


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


EXERCISES = (TWO_X, LARGEST_BATCH)
