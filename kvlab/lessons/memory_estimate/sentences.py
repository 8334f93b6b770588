"""What chapter 3.4's measured bytes say, as claims (:mod:`kvlab.claims`): the allocation of section 5
(:data:`ALLOCATION`) and the GPU's total memory against the table (:data:`DEVICE_MEMORY`), each chosen by a
predicate over the bytes it prints; :data:`CHOOSERS`, the Chinese catalog :data:`ZH`, :func:`explain_allocation`,
:func:`explain_device_memory` and :func:`show_claims`."""
from __future__ import annotations

import math

from ...claims import Catalog, Chooser, Claim, Rule, number, show
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
ZH = Catalog("zh", {
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
})


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


def show_claims(claims: list[Claim]) -> None:
    """Display this chapter's claims in Chinese, recorded in the output's metadata (``kvlab.claims.show``); nothing
    when there are none (a CPU has no GPU memory to compare)."""
    if claims:
        show(claims, ZH)
