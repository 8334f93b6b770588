"""What chapter 3.4's measured bytes say, as claims (:mod:`kvlab.claims`): the allocation of section 5
(:data:`ALLOCATION`) and the GPU's total memory against the table (:data:`DEVICE_MEMORY`), each chosen by a
predicate over the bytes it prints; :data:`CHOOSERS`, the sentences in Chinese (:data:`TEMPLATES`) and English
(:data:`TEMPLATES_EN`, the same keys and fields; the package builds the catalogs ``ZH``, ``EN`` and ``CATALOGS``
from them), :func:`explain_allocation` and :func:`explain_device_memory`."""
from __future__ import annotations

import math

from ...claims import Chooser, Claim, Rule, number
from .allocation import AllocationCheck, DeviceMemory
from .common import CUDA_BLOCK, MIB


# The allocation of section 5 and the GPU's total memory are measurements: each sentence about them is chosen by a
# predicate over the very numbers it prints (bytes as printed, thousands separated), else it says it cannot tell.
def _equal(*names):
    return lambda v: len({v[n] for n in names}) == 1


ALLOCATION = Chooser("memory_estimate.allocation", (
    Rule("memory_estimate.allocation.storage", ("formula", "stored"), _equal("formula", "stored")),
    Rule("memory_estimate.allocation.exact", ("formula", "measured", "released"),
         _equal("formula", "measured", "released")),
    Rule("memory_estimate.allocation.rounded", ("formula", "measured", "rounded", "released"),
         lambda v: v["measured"] == v["rounded"] == v["released"] and v["rounded"] > v["formula"]),
    Rule("memory_estimate.allocation.differs", ("formula", "measured"), substantive=False),
))


def _mib_apart(v, sign: int) -> bool:
    """The printed difference (MiB, one decimal) is ``sign`` x (table - torch's total), within its rounding."""
    apart = sign * (v["table"] - v["total"] / MIB)
    return apart > 0 and abs(v["diff"] - apart) <= 0.05 + 1e-9


DEVICE_MEMORY = Chooser("memory_estimate.device", (
    Rule("memory_estimate.device.less", ("total", "table", "diff"), lambda v: _mib_apart(v, 1)),
    Rule("memory_estimate.device.more", ("total", "table", "diff"), lambda v: _mib_apart(v, -1)),
    Rule("memory_estimate.device.equal", ("total", "table"), lambda v: v["total"] == v["table"] * MIB),
    Rule("memory_estimate.device.unread", ("total", "table"), substantive=False),
))
CHOOSERS = (ALLOCATION, DEVICE_MEMORY)

_DEVICE_HEAD = "torch 报告的总显存 {total}，表里 nvidia-smi 的总量 {table}"
TEMPLATES = {  # what Catalog.of_topics reads for Chinese
    "memory_estimate.allocation.storage": "CPU 上读的是 K、V 两个张量存储的大小，共 {stored}，与公式的 {formula} 相等。这只核对"
                                          "了张量的形状和数据类型，并不是分配器的实测；在 GPU 上运行这一格才是实测。",
    "memory_estimate.allocation.exact": "分配器实测：分配前后的计数相差 {measured}，与公式的 {formula} 一个字节都不差；释放缓存后，"
                                        "分配器收回了 {released}，也一个字节不差。",
    "memory_estimate.allocation.rounded": "分配器实测：分配前后的计数相差 {measured}，比公式的 {formula} 多，正好等于把 K、V 各自"
                                          f"向上取整到 {CUDA_BLOCK} 字节的倍数之后的 {{rounded}}：多出的是分配器的记账方式，"
                                          "不是缓存本身；释放后收回了 {released}。",
    "memory_estimate.allocation.differs": "分配器的计数相差 {measured}，公式是 {formula}：这一次两者（或者释放后收回的字节数）"
                                          "对不上，多半是分配前后别的张量也在分配或释放。重新运行这一格再看；如果还对不上，"
                                          "重启内核（Kernel → Restart）后先运行这一节。",
    "memory_estimate.device.less": _DEVICE_HEAD + "：torch 的读数比它少 {diff}（驱动保留的部分；ECC 设置、驱动版本不同，"
                                                  "读数也不同）。",
    "memory_estimate.device.more": _DEVICE_HEAD + "：torch 的读数比它多 {diff}（ECC 设置、驱动版本不同，读数也不同）。",
    "memory_estimate.device.equal": _DEVICE_HEAD + "：两者正好相等。",
    "memory_estimate.device.unread": _DEVICE_HEAD + "：这一次没能比较两者；重新运行这一格。",
}

# -- the same claims in English (Catalog.of_topics reads TEMPLATES_EN): the same keys, the same fields --------------
_DEVICE_HEAD_EN = "torch reports {total} of GPU memory in total; the table's nvidia-smi total is {table}"
TEMPLATES_EN = {
    "memory_estimate.allocation.storage": "On the CPU this reads the storage of the two tensors K and V: {stored} in "
                                          "all, equal to the formula's {formula}. That checks only the tensors' shape "
                                          "and dtype; it is not a measurement by the allocator, which is what running "
                                          "this cell on a GPU gives.",
    "memory_estimate.allocation.exact": "Measured by the allocator: its count rose by {measured} across the "
                                        "allocation, exactly the formula's {formula}, not a byte off; once the cache "
                                        "was freed, the allocator got back {released}, again not a byte off.",
    "memory_estimate.allocation.rounded": "Measured by the allocator: its count rose by {measured} across the "
                                          "allocation, more than the formula's {formula}, and exactly the {rounded} "
                                          f"that rounding K and V each up to a multiple of {CUDA_BLOCK} bytes gives: "
                                          "the extra is how the allocator books memory, not the cache itself; once "
                                          "freed, {released} came back.",
    "memory_estimate.allocation.differs": "The allocator's count changed by {measured}, the formula says {formula}: "
                                          "this time the two (or the bytes given back after freeing) do not match, "
                                          "most likely because other tensors were allocated or freed at the same "
                                          "time. Rerun this cell; if they still do not match, restart the kernel "
                                          "(Kernel → Restart) and run this section first.",
    "memory_estimate.device.less": _DEVICE_HEAD_EN + ": torch's reading is {diff} less (the part the driver keeps; "
                                                     "the reading varies with the ECC setting and the driver version).",
    "memory_estimate.device.more": _DEVICE_HEAD_EN + ": torch's reading is {diff} more (the reading varies with the "
                                                     "ECC setting and the driver version).",
    "memory_estimate.device.equal": _DEVICE_HEAD_EN + ": the two are exactly equal.",
    "memory_estimate.device.unread": _DEVICE_HEAD_EN + ": this time the two could not be compared; rerun this cell.",
}


def explain_allocation(check: AllocationCheck) -> list[Claim]:
    """Section 5's allocation as a claim (:data:`ALLOCATION`): the allocator's count against the formula on a GPU
    (exact, or rounded up to 512-byte blocks), the tensors' storage on the CPU, or that they do not agree."""
    missing = math.nan
    numbers = {"formula": number(check.formula_bytes, 0, "B"), "measured": number(check.measured_bytes, 0, "B"),
               "stored": number(missing if check.is_measurement else sum(check.tensor_bytes), 0, "B"),
               "released": number(check.released_bytes if check.is_measurement else missing, 0, "B"),
               "rounded": number(check.allocator_bytes, 0, "B")}
    return [ALLOCATION.choose(numbers)]


def explain_device_memory(gpu: DeviceMemory | None) -> list[Claim]:
    """torch's total memory against the table's nvidia-smi total, as a claim (:data:`DEVICE_MEMORY`); none where
    there is no CUDA GPU or the card is not in the table."""
    if gpu is None or gpu.preset is None:
        return []
    table = gpu.preset.memory_mib
    return [DEVICE_MEMORY.choose({"total": number(gpu.total_bytes, 0, "B"), "table": number(table, 0, "MiB"),
                                  "diff": number(abs(table - gpu.total_bytes / MIB), 1, "MiB")})]

