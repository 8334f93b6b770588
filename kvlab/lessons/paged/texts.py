"""What chapter 3.6's measurement modules (:mod:`.batching`, :mod:`.cost`, :mod:`.sharing`) show a learner outside
their claim sentences, in both languages: the sentence on why a real paged cache does not pay for the gather, and the
separator between the cells a claim lists. Looked up when the text is made (``TEXTS.say``), never at import, so
``kvlab.set_language`` in the notebook's first cell decides it."""
from __future__ import annotations

from ...phrases import Phrasebook

TEXTS = Phrasebook("paged.texts", {
    "zh": {
        "why": "这里的分页是纯 PyTorch 写的：注意力需要连续的 K、V，所以每一步先把块拷贝到一起（这次拷贝是不是多出的时间的"
               "大头，只看上面按这次测量挑出的那句）。vLLM 的 PagedAttention 内核在注意力内部按块表直接读各个块，不做这次拷贝。"
               "按块读并非完全免费：vLLM 的论文量到它的注意力内核比读连续内存的内核慢约 20–26%，但注意力只占一步的一部分，"
               "换来的批次更大，整体吞吐反而高得多。",
        "why_off_gpu": "{why}在 GPU 上预计（这里没有测）：演示模型这么小，一步的时间主要花在启动内核上，两种缓存的一步都几乎"
                       "不随 B 和长度变，分页多出的主要是几次内核启动的固定时间。",
        "cell_separator": "、",
    },
    "en": {
        "why": "The paging here is plain PyTorch: attention needs K and V in contiguous memory, so every step first copies "
               "the blocks together (whether that copy is most of the extra time, only the sentence chosen above from "
               "this run's measurements says). vLLM's PagedAttention kernel reads each block through the block table "
               "inside attention itself and makes no such copy. Reading block by block is not free either: the vLLM "
               "paper measured its attention kernel at about 20–26% slower than one reading contiguous memory. But "
               "attention is only part of a step, and the larger batches paging makes room for raise the overall "
               "throughput by far more.",
        "why_off_gpu": "{why} Expected on a GPU (not measured here): with a demo model this small, a step's time goes "
                       "mostly into launching kernels, so neither cache's step changes much with B or the length, and "
                       "what paging adds is mainly the fixed time of a few more kernel launches.",
        "cell_separator": ", ",
    },
})
