"""Chapter 3.4's summary as bullets, every number computed from the sections before it."""
from __future__ import annotations

import html

from ...memory import format_bytes
from ...presets import MODEL_PRESETS
from .allocation import AllocationCheck
from .common import CHAPTER_LONG_S, CHAPTER_MODEL, CHAPTER_S, GIB, SHAPE_EXAMPLE_S, TEXT_LONG_GB, ratio_text, spaced
from .gqa import gqa_twins
from .text_figures import gb_and_gib, halving_variants


def summary_html(check: AllocationCheck) -> str:
    """The chapter's summary as bullets; every number computed here."""
    llama = MODEL_PRESETS[CHAPTER_MODEL]
    as_written, at_1024 = halving_variants()[:2]
    comment_layer, comment_total = at_1024.printed
    gb, gib = gb_and_gib(GIB)
    twin = gqa_twins()[0]
    long_factor = CHAPTER_LONG_S // CHAPTER_S
    measured = ("这一次在 GPU 上用分配器的计数实测了一块缩小版的缓存，结果见上一节按实测数字写出的说明"
                if check.is_measurement else
                "这一次在 CPU 上只核对了张量的形状和数据类型，并不是分配器的实测；在 GPU 上运行时才是实测")
    bullets = [
        f"原文 3.4 节的代码是对的：LLaMA-7B 在 {CHAPTER_S:,} 个 token、FP16 时每层 "
        f"{format_bytes(llama.layer_kv_cache_bytes(0, CHAPTER_S))}，共 {format_bytes(llama.kv_cache_bytes(CHAPTER_S))}；"
        f"{CHAPTER_LONG_S:,} 个 token 时 {format_bytes(llama.kv_cache_bytes(CHAPTER_LONG_S))}。注释里的 "
        f"{comment_layer}、{comment_total} 与这段代码在 S = {SHAPE_EXAMPLE_S:,} 时的输出相同，这是最可能的来历"
        "（漏乘任意一个 2 也会得到它们）；"
        f"正文的「约{TEXT_LONG_GB}GB」又是在 {comment_total} 上乘 {long_factor} 得来的。所以三个数都恰好少了一半。",
        f"GB（10⁹ 字节）与 GiB（2³⁰ 字节）只差约 {float((gb / gib - 1) * 100):.0f}%，kvlab 一律用 GiB 并写出单位。",
        f"公式里的 H 是 KV 头数：{twin.gqa.label} 的缓存只有{spaced(twin.mha.label)}的 1/{ratio_text(twin.ratio)}；"
        "滑动窗口和 MLA 的模型要用各自的公式。",
        "分页（PagedAttention）不减少这些字节数，它消除的是预先预留造成的浪费和显存碎片；字节数本身要靠 GQA/MQA、MLA、"
        "滑动窗口和量化缓存来减少。",
        "部署时权重和缓存共享一张卡，而且只能按总显存的一部分来规划：批次和上下文此消彼长，计算器能算出两者各自的上限。",
        f"{measured}。",
    ]
    return "<ul>" + "".join(f"<li>{html.escape(b)}</li>" for b in bullets) + "</ul>"
