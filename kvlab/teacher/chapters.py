"""What a teacher needs to know about each chapter that the notebook does not compute: prerequisites, outcome
objectives (「学完后你能……」, each one something a teacher can check), which sections are optional and why, what the
chapter builds on, and the publications behind its claims.

The sections themselves, their length and their run time are read from the notebooks and measured
(:mod:`kvlab.teacher.minutes`); a section named here as optional must exist (``tests/test_teacher.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .references import Support as S


@dataclass(frozen=True)
class ChapterGuide:
    notebook: str  # file name in chapters/
    prerequisites: tuple[str, ...]
    objectives: tuple[str, ...]  # each completes 「学完后你能……」
    builds_on: tuple[tuple[str, str], ...]  # (chapter, what this chapter takes from it)
    optional_sections: dict[str, str] = field(default_factory=dict)  # heading (its start) -> why it is optional
    references: tuple[S, ...] = ()
    further_reading: tuple[S, ...] = ()  # related work the chapter points towards but makes no claim from
    optional_chapter: str = ""  # non-empty: the whole chapter is 拓展 (why)


CHAPTERS = (
    ChapterGuide(
        notebook="01_autoregressive_decode.ipynb",
        prerequisites=(
            "Python 与 PyTorch 张量的基本操作：形状、切片、矩阵乘（`@`）、`softmax`；",
            "Transformer 解码器的自注意力：softmax(QKᵀ/√d)·V、多头注意力、因果掩码；",
            "知道 token、词表和 logits 是什么（模型每一步输出下一个 token 的概率分布）。",
        ),
        objectives=(
            "说出自回归生成每一步的输入和输出，并在 kvlab 的 trace 里指出哪一次前向是预填充、哪些是解码；",
            "解释在因果掩码下，旧 token 的 K、V 为什么不会因为新 token 而改变，所以可以缓存；",
            "写出有缓存的一步注意力（先对新 token 做 RoPE 再写入缓存，GQA 时用 repeat_kv 展开 KV 头），通过练习 1 的五个用例；",
            "给定提示词长度 p 和生成长度 n，算出有缓存和无缓存时投影 K/V 的 token 数与注意力分数的个数（练习 2），说明 n³/3 与 n²/2 从何而来；",
            "读懂本机实测的单步耗时曲线，分清固定开销、随 t 线性增长的部分和 t² 部分。",
        ),
        builds_on=(),
        optional_sections={"有缓存时，单步代价也在增长": "在主线之外细看有缓存时单步耗时随 t 的增长；时间不够可跳过"},
        references=(
            S("transformer", "缩放点积注意力 softmax(QKᵀ/√d)·V、多头注意力和解码器的因果掩码：本节两个公式的来源。"),
            S("rope", "旋转位置编码 RoPE：缓存里存的是已经按位置旋转过的 K（练习 1）。"),
            S("mqa", "多查询注意力 MQA：所有查询头共用一组 K/V（练习 1 的用例之一）。"),
            S("gqa", "分组查询注意力 GQA：几个查询头共用一组 K/V，演示模型就是 4 个查询头、2 个 KV 头。"),
            S("llama", "演示模型仿照的 LLaMA 结构：RMSNorm 前置归一化、SwiGLU 前馈层、RoPE。"),
        ),
    ),
    ChapterGuide(
        notebook="02_cache_storage_shape.ipynb",
        prerequisites=(
            "3.1（K/V 为什么可以缓存）；",
            "常见数据类型每个元素的字节数：FP32 4 字节，FP16/BF16 2 字节，INT8 1 字节；",
            "GiB（2³⁰ 字节）与 GB（10⁹ 字节）的区别。",
        ),
        objectives=(
            "说出缓存形状（L, B, H, S, D）每一维的含义，并说明 H 是 KV 头数而不是查询头数；",
            "用 2 × L × B × H × S × D × 每元素字节数 精确算出一个真实模型的缓存字节数（练习 1：Llama-3-8B），并核对公式与张量实际占用一致；",
            "比较预分配和逐步拼接两种缓存：各分配多少、拷贝多少（逐步拼接总共约 n²/2 个 token），对应 transformers 的 StaticCache 和 DynamicCache；",
            "算出一批不等长序列按最长者补齐（padding）浪费的槽位，说明分页块怎样把浪费限制在每条序列的最后一块；",
            "算出一张卡放下权重之后还能放多少个 token 的缓存（练习 2）。",
        ),
        builds_on=(("3.1", "缓存里存的是每层每个 token 的 K 和 V"),),
        optional_sections={"原文的「典型值」表": "用真实模型的公开配置复核原文的表；3.4 的计算器会再用到这些模型"},
        references=(
            S("hf", "transformers 的 DynamicCache（逐步拼接）和 StaticCache（预分配）：本节在同一份权重上和 kvlab 的缓存比较。"),
            S("gqa", "缓存公式里的 H 是 KV 头数：GQA 模型的缓存按 KV 头数缩小。"),
            S("llama3", "练习 1、练习 2 用的 Llama-3-8B 结构：32 层、8 个 KV 头、头维度 128。"),
            S("vllm", "批处理按最长序列补齐会浪费大量缓存；分页（PagedAttention）把缓存切成块，浪费只剩每条序列的最后一块。"),
            S("gpt2", "原文「典型值」表里的 GPT-2 结构（层数、头数、隐藏维度）。"),
        ),
    ),
    ChapterGuide(
        notebook="03_prefill_and_decode.ipynb",
        prerequisites=(
            "3.1、3.2；",
            "矩阵乘的计算量：[m, k] × [k, n] 约 2·m·k·n 次浮点运算（FLOP）；",
            "内存带宽（GB/s）和算力（FLOP/s）的概念；RMSNorm、SwiGLU、LM 头等结构名词见 GLOSSARY.md。",
        ),
        objectives=(
            "从一次真实生成的 trace 里读出首 token 延迟（TTFT）和解码步的耗时（练习 2），说出预填充和解码各做了几次前向；",
            "把原文的四个步骤对应到 kvlab 源码里的具体几行，并说出每一步之后缓存的 length 是多少；",
            "算出一次前向的浮点运算量、读写的字节数和算术强度，在本机的 roofline 上判断它是访存受限还是算力受限；",
            "解释为什么预填充每秒处理的 token 数是解码的许多倍；",
            "解释批处理为什么能提高解码吞吐，而上下文越长、每条序列自己的 K/V 越使批处理摊不薄；求出让解码越过转折点的最小批次（练习 1）；",
            "说明左侧补齐加掩码为什么和单独运行结果相同、代价是什么，以及 FP16、INT8 缓存各省多少字节、误差多大。",
        ),
        builds_on=(("3.1", "预填充与解码、每步只投影 1 个新 token"), ("3.2", "缓存字节数的公式、预分配、padding")),
        optional_sections={"在 GPU 上会看到什么": "只在有 GPU 时才相关（小模型在 GPU 上受启动开销限制）"},
        references=(
            S("roofline", "roofline 模型：可达到的速率 = min(算力，带宽 × 算术强度)，转折点（ridge point）分开访存受限和算力受限。"),
            S("pope", "大模型推理里预填充与解码的区别：解码每步要读全部权重和 K/V，小批次时受内存带宽限制；批处理提高解码的算术强度。"),
            S("mqa", "解码时反复读取 K/V 的内存带宽是瓶颈之一：减少 KV 头正是为此。"),
            S("vllm", "推理引擎给序列的缓存按块分配（预告 3.6）；预分配按最长长度预留会浪费。"),
            S("kivi", "实际系统对 K 按通道、对 V 按 token 量化缓存（本节 INT8 一段提到的做法）。"),
            S("rmsnorm", "RMSNorm：演示模型每层的归一化。"),
            S("swiglu", "SwiGLU：演示模型的前馈层。"),
        ),
        further_reading=(
            S("sarathi", "把长提示词的预填充切成小块、与其他序列的解码放在同一步（分块预填充）；本节的 prefill_chunk_size 是它的最简单形式。"),
            S("flashattention", "注意力本身也常受访存限制：不把 t × t 的分数矩阵写回显存的精确注意力。课程没有用它，也不依赖它的结论。"),
        ),
    ),
    ChapterGuide(
        notebook="04_llama7b_memory_estimate.ipynb",
        prerequisites=(
            "3.2 的缓存公式；",
            "模型参数量与权重字节数的关系（FP16 每个参数 2 字节）；",
            "常见 GPU 的显存大小（本节给出）。",
        ),
        objectives=(
            "原样运行原文的估算代码，指出哪个数字错了、为什么恰好少了一半，并改正（练习 1）；",
            "区分 GB 与 GiB，并说明这个差别解释不了少掉的那一半；",
            "解释 GQA/MQA 为什么按 KV 头数缩小缓存，算出 64 个 KV 头和 8 个 KV 头的 70B 模型的缓存之比；",
            "用计算器比较 MHA、GQA、MQA、滑动窗口和 MLA 模型的缓存，说出每种结构靠什么减少字节数；",
            "给定一张 GPU、权重精度和可用显存比例，算出最长能放多长的上下文、最多能放多大的批次（练习 2）。",
        ),
        builds_on=(("3.2", "缓存字节数的公式"), ("3.3", "预分配：按最长长度预留")),
        optional_sections={"公式与真实的显存": "在当前设备上真的分配一块缓存核对公式；结论和前面一致，时间不够可跳过"},
        references=(
            S("llama", "LLaMA-7B 的结构：32 层、32 个头、隐藏维度 4096（原文例子）。"),
            S("llama2", "Llama-2-70B 用 GQA，只有 8 个 KV 头（原文假设的是 64 个）。"),
            S("llama3", "Llama-3/3.1 各尺寸的结构与上下文长度（计算器、GPU 预算）。"),
            S("gqa", "GQA：几个查询头共用一组 K/V，缓存按 KV 头数缩小。"),
            S("mqa", "MQA：所有查询头共用一组 K/V（计算器里的 Falcon-7B、StarCoder、Gemma-2B）。"),
            S("mistral", "Mistral 7B：GQA（8 个 KV 头）和 4096 个 token 的滑动窗口注意力，窗口层的缓存不再随 S 增长。"),
            S("gemma2", "Gemma-2：滑动窗口层与全局注意力层交替，只有一半的层缓存随 S 增长。"),
            S("deepseekv2", "多头潜在注意力 MLA：每层每个 token 只缓存一个压缩后的潜在向量（加一小段 RoPE 键），而不是每个头的 K 和 V。"),
            S("deepseekv3", "DeepSeek-V3 沿用 MLA（计算器里的结构）。"),
            S("gpt2", "GPT-2 的结构（计算器）。"),
            S("vllm", "分页并不减少算出的字节数，它消除的是预留造成的浪费和碎片。"),
        ),
        further_reading=(
            S("streamingllm", "只保留最近窗口的缓存时，留住开头几个 token（attention sink）能让未按窗口训练的模型继续稳定生成；课程只讲按窗口训练的模型。"),
        ),
    ),
    ChapterGuide(
        notebook="05_misconceptions.ipynb",
        prerequisites=("3.1–3.4。",),
        objectives=(
            "用实验说明 KV Cache 不是模型参数：生成前后权重校验和不变，缓存写入的字节数等于 B × S × 每个 token 的字节数；",
            "解释为什么只缓存 K 几乎不省时间：旧 token 在某一层的 V 取决于它在这一层的隐藏状态，重算 V 等于重跑前面所有层；",
            "说明为什么按最长长度给每条序列预留缓存会在固定显存下减少能同时服务的序列数，并算出这个数；",
            "从 logits 第一次出错的那一步判断缓存 bug 的类型（练习 1），并修好一个有 bug 的缓存（练习 2）；",
            "完成覆盖 3.1–3.5 的自测，并能解释每道题的答案。",
        ),
        builds_on=(("3.1", "缓存为什么正确、每步算什么"), ("3.2", "缓存的形状与字节"), ("3.3", "预填充与解码的计时"),
                   ("3.4", "显存预算")),
        optional_sections={"放不下时：拒绝，而不是崩溃": "预算检查怎样在分配之前拒绝放不下的请求（工程细节）",
                           "本章在你的机器上测到了什么": "全课实测结果的汇总表，适合课后复习"},
        references=(
            S("vllm", "按最长长度预留时只有一小部分 KV Cache 显存真正存了 token（论文图 2）；请求长度差别很大（论文图 11）。"),
            S("orca", "论文图 2 里作为对照的 Orca（按最长长度或按真实长度预留）。"),
            S("transformer", "因果掩码下一个 token 的 K、V 只取决于它自己和它之前的 token：所以 K、V 可以缓存而 Q 不必。"),
        ),
    ),
    ChapterGuide(
        notebook="06_paged_cache_and_batching.ipynb",
        optional_chapter="不属于原文第 3 章：前面几节指向、却没有真正运行过的技术。学完 3.1–3.5 后再学。",
        prerequisites=(
            "3.2 的 padding 浪费与分页块、3.5 的按最长长度预留；",
            "（有帮助）操作系统里的分页和页表。",
        ),
        objectives=(
            "给定块表和块大小，找出一条序列的第 i 个 token 存在哪个物理块的哪一格（练习 1）；",
            "算出一组序列分页后要多少块、浪费多少槽位，并和填充、按固定长度预留比较；",
            "算出共享系统提示词省下的块数，说明写时复制什么时候发生（练习 2）；",
            "解释连续批处理和静态批处理的区别，以及它对吞吐和首 token 延迟的影响；说明块池用完时调度器怎样抢占；",
            "说明纯 PyTorch 的分页缓存每步为什么多一次收集（gather），真正的 PagedAttention 内核怎样避免它。",
        ),
        builds_on=(("3.2", "padding 浪费与分页块的图"), ("3.5", "按固定长度预留的浪费"), ("3.3", "批处理解码")),
        optional_sections={"6. 分页的代价": "量分页在纯 PyTorch 里多付的代价；理解分页本身不需要"},
        references=(
            S("vllm", "分页的 KV Cache：固定大小的块、块池、块表、引用计数与写时复制、块不够时抢占（重新计算或换出）。"),
            S("orca", "迭代级调度（连续批处理）：每一步的边界都可以让结束的序列离开、新的请求加入。"),
        ),
        further_reading=(
            S("sarathi", "分块预填充：把长提示词的预填充切成小块，和别的序列的解码放在同一步（本章「接下来」提到）。"),
        ),
    ),
)
