"""Chapter 3.3's claims of the engineering notes: the CUDA allocator's fragmentation, FP16 against INT8."""
from __future__ import annotations

from ....claims import Chooser, Rule
from .common import P, close


ALLOCATOR = Chooser(f"{P}.allocator", (
    Rule(f"{P}.allocator.fragmented", ("grow", "pre"), lambda v: v["grow"] >= 1 and v["grow"] > 2 * v["pre"]),
    Rule(f"{P}.allocator.similar", ("grow", "pre"), lambda v: v["grow"] < 1 or v["grow"] <= 2 * v["pre"]),
    Rule(f"{P}.allocator.unmeasured", substantive=False),
))

PRECISION = Chooser(f"{P}.precision", (
    Rule(f"{P}.precision.ratio", ("int8", "fp16", "ratio", "params"),
         lambda v: v["fp16"] > 0 and close(v["ratio"], v["int8"] / v["fp16"], 1)),
    Rule(f"{P}.precision.fp16_exact", ("int8", "fp16", "params"), lambda v: v["fp16"] == 0),
    Rule(f"{P}.precision.unmeasured", substantive=False),
))


TEMPLATES = {  # key -> its Chinese sentence (ZH, in __init__.py)
    f"{P}.allocator.fragmented": "这次测量里，逐步拼接的缓存最多有 {grow} 保留着却没有张量在用，预分配的只有 {pre}：释放掉的旧块"
                                 "没能全部用来放新的、更大的缓存，这就是碎片。",
    f"{P}.allocator.similar": "这次测量里，两者保留未用的显存没有拉开差距（逐步拼接最多 {grow}，预分配 {pre}）：分配器把释放的块"
                              "合并、复用了，这一次没有积累出碎片。",
    f"{P}.allocator.unmeasured": "这次没有读到有效的分配器计数；重新运行这一格。",
    f"{P}.precision.ratio": "INT8 的最大 logit 误差（{int8}）是 FP16（{fp16}）的 {ratio} 倍（在一个 {params} 参数的小模型上）。",
    f"{P}.precision.fp16_exact": "FP16 缓存的 logit 与 FP32 缓存的完全相同（最大误差 {fp16}），INT8 的最大误差是 {int8}"
                                 "（在一个 {params} 参数的小模型上）。",
    f"{P}.precision.unmeasured": "这次没有算出有效的 logit 误差；重新运行这一格。",
}

TEMPLATES_EN = {  # the same claims in English (EN, in __init__.py): the same keys, the same fields
    f"{P}.allocator.fragmented": "In this measurement the cache grown piece by piece had up to {grow} reserved but used by "
                                 "no tensor, the preallocated one only {pre}: the old blocks freed could not all be "
                                 "reused for the new, larger cache. That is fragmentation.",
    f"{P}.allocator.similar": "In this measurement the two left about as much memory reserved but unused (grown piece "
                              "by piece at most {grow}, preallocated {pre}): the allocator merged and reused the freed "
                              "blocks, and no fragmentation built up this time.",
    f"{P}.allocator.unmeasured": "This run read no valid allocator counters; rerun this cell.",
    f"{P}.precision.ratio": "INT8's largest logit error ({int8}) is {ratio} times FP16's ({fp16}) (on a small model of "
                            "{params} parameters).",
    f"{P}.precision.fp16_exact": "The FP16 cache gives exactly the logits of the FP32 cache (largest error {fp16}); "
                                 "INT8's largest error is {int8} (on a small model of {params} parameters).",
    f"{P}.precision.unmeasured": "This run computed no valid logit error; rerun this cell.",
}

CHOOSERS = (ALLOCATOR, PRECISION)
