"""What a teacher needs to know about each chapter that the notebook does not compute: prerequisites, outcome
objectives (「学完后你能……」, each one something a teacher can check), the exercises each objective is practised by,
which sections are optional and why, what the chapter builds on, discussion prompts for class, and the publications
behind its claims.

The sections themselves, their length and their run time are read from the notebooks and measured
(:mod:`kvlab.teacher.minutes`); a section named here as optional must exist, and an objective names its exercises
by their keys in ``kvlab/exercises/chNN.py`` (the guide renders their titles, so a renumbered exercise cannot leave
a wrong 「练习 N」 behind): every key named must be an exercise of that chapter, and every exercise of the chapter
must be named by an objective or listed in ``unpractised`` with the reason (``tests/test_teacher.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .references import Support as S


@dataclass(frozen=True)
class Objective:
    """One outcome objective: ``text`` completes 「学完后你能……」 (no number of an exercise in it, no final
    punctuation); ``exercises`` are the keys (``"ch04.window"``) of the chapter's exercises that practise it."""

    text: str
    exercises: tuple[str, ...] = ()


def O(text: str, *exercises: str) -> Objective:  # noqa: E743 (short, for the table below)
    return Objective(text, exercises)


@dataclass(frozen=True)
class ChapterGuide:
    notebook: str  # file name in chapters/
    prerequisites: tuple[str, ...]
    objectives: tuple[Objective, ...]
    builds_on: tuple[tuple[str, str], ...]  # (chapter, what this chapter takes from it)
    optional_sections: dict[str, str] = field(default_factory=dict)  # heading (its start) -> why it is optional
    references: tuple[S, ...] = ()
    further_reading: tuple[S, ...] = ()  # related work the chapter points towards but makes no claim from
    optional_chapter: str = ""  # non-empty: the whole chapter is 拓展 (why)
    discussion: tuple[str, ...] = ()  # 2–3 prompts for class about what the chapter measured: predict, then explain
    unpractised: dict[str, str] = field(default_factory=dict)  # exercise key no objective names -> why


CHAPTERS = (
    ChapterGuide(
        notebook="01_autoregressive_decode.ipynb",
        prerequisites=(
            "Python 与 PyTorch 张量的基本操作：形状、切片、矩阵乘（`@`）、`softmax`；",
            "Transformer 解码器的自注意力：softmax(QKᵀ/√d)·V、多头注意力、因果掩码；",
            "知道 token、词表和 logits 是什么（模型每一步输出下一个 token 的概率分布）。",
        ),
        discussion=(
            "（数完「计算量」一节、开始计时之前问）生成长度 n 从 64 翻到 128，无缓存投影 K/V 的 token 数和注意力分数各变成几倍？有缓存的呢？先写下预测，再预测：实测的总耗时会不会按同样的倍数变？看过本机的曲线后再说差在哪里：是固定开销、t² 那一项还是机器忙？",
            "有缓存时每一步只为 1 个新 token 投影 K/V，单步耗时却不是常数。随 t 增长的那一部分来自哪里？换成更大的模型、更长的上下文，它会不会变成单步耗时的主要部分？",
            "为什么旧 token 的 K、V 可以缓存，而旧 token 的 Q 从来不需要？如果去掉因果掩码（每个 token 都能看到后面的 token），缓存还成立吗？",
        ),
        objectives=(
            O("说出自回归生成每一步的输入和输出，并在 kvlab 的 trace 里指出哪一次前向是预填充、哪些是解码"),
            O("解释在因果掩码下，旧 token 的 K、V 为什么不会因为新 token 而改变，所以可以缓存"),
            O("写出有缓存的一步注意力（先对新 token 做 RoPE 再写入缓存，GQA 时用 repeat_kv 展开 KV 头），通过检查程序的全部用例",
              "ch01.cached_step"),
            O("给定提示词长度 p 和生成长度 n，算出有缓存和无缓存时投影 K/V 的 token 数与注意力分数的个数，说明 n³/3 与 n²/2 从何而来",
              "ch01.work"),
            O("读懂本机实测的单步耗时曲线，分清固定开销、随 t 线性增长的部分和 t² 部分"),
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
        discussion=(
            "先预测再用面板核对：同样层数和头维度，把 8 个 KV 头的 GQA 模型换成每个查询头都有自己 K/V 的多头注意力（32 个头），缓存变成几倍？",
            "逐步拼接一共要多拷贝约 n²/2 个 token，可本机测到的耗时可能和预分配差不多。请解释为什么；缓存超过 CPU 的最后一级缓存（L3）以后，你预测两条曲线会怎样？",
            "一批 4 条序列，长度 1,000、100、100、100：按最长者补齐，空着的槽位占多少？换成每块 16 个 token 的分页，最多空多少个槽位？为什么分页的浪费与最长的那条无关？",
        ),
        objectives=(
            O("说出缓存形状（L, B, H, S, D）每一维的含义，并说明 H 是 KV 头数而不是查询头数"),
            O("用 2 × L × B × H × S × D × 每元素字节数 精确算出一个真实模型（Llama-3-8B）的缓存字节数，并核对公式与张量实际占用一致",
              "ch02.cache_size"),
            O("比较预分配和逐步拼接两种缓存：各分配多少、拷贝多少（逐步拼接总共约 n²/2 个 token），对应 transformers 的 StaticCache 和 DynamicCache"),
            O("算出一批不等长序列按最长者补齐（padding）浪费的槽位和字节，说明分页块怎样把浪费限制在每条序列的最后一块",
              "ch02.padding"),
            O("在缓存大小随 S 变化的图上读出一张卡只放缓存（不算权重）时最多能放下的长度；算上权重的预算在 3.4"),
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
        discussion=(
            "拖动提示词长度之前先预测：P 从 8 变成 64，预填充一次前向的耗时变成几倍？每秒处理的 token 数呢？再解释本机测到的数字，它和 roofline 上的位置是否一致？",
            "运行批处理那一格之前先预测：B = 32 的单步是 B = 1 的几倍，吞吐呢？再对照本机的数字解释：批次 1 的一步解码落在转折点的哪一边，加大批次时算术强度怎样变？为什么上下文越长，加大批次换来的好处越少？",
            "首 token 延迟（TTFT）和每 token 延迟（TPOT）分别由哪个阶段决定？一个聊天应用和一个离线批量生成摘要的任务，各自更在乎哪一个，会怎样取舍批次大小？",
        ),
        objectives=(
            O("从一次真实生成的 trace 里读出首 token 延迟（TTFT）和解码步的耗时，说出预填充和解码各做了几次前向",
              "ch03.ttft_tpot"),
            O("把原文的四个步骤对应到 kvlab 源码里的具体几行，并说出每一步之后缓存的 length 是多少"),
            O("算出一次前向的浮点运算量、读写的字节数和算术强度，在本机的 roofline 上判断它是访存受限还是算力受限"),
            O("解释为什么预填充每秒处理的 token 数是解码的许多倍"),
            O("解释批处理为什么能提高解码吞吐，而上下文越长、每条序列自己的 K/V 越使批处理摊不薄；求出让解码越过转折点的最小批次",
              "ch03.batch_ridge"),
            O("（选学）说明左侧补齐加掩码为什么和单独运行结果相同、代价是什么，以及 FP16、INT8 缓存各省多少字节、误差多大"),
        ),
        builds_on=(("3.1", "预填充与解码、每步只投影 1 个新 token"), ("3.2", "缓存字节数的公式、预分配、padding")),
        optional_sections={
            "选学：计数公式": "算术强度的公式怎样数出来、与 PyTorch 的 FLOP 计数器核对；正文只用它数出的结果",
            "选学：单步耗时为什么随 B 增长": "小矩阵乘实验与运算和读数据的重叠：解释本机偏离理想 roofline 的原因，结论随机器而变",
            "选学：工程实践要点": "原文的三条工程实践要点（预分配与 GPU 分配器、长短不一的提示词、FP16 与 INT8 缓存）；预分配和 padding 3.2 已经量过，分页在 3.6 展开",
            "选学：在 GPU 上会看到什么": "只在有 GPU 时才相关（小模型在 GPU 上受启动开销限制），以及 FP16 与 TF32 下的转折点",
        },
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
        discussion=(
            "看答案之前先猜：原文的估算恰好少了一半，少的是哪一项？为什么 GB 与 GiB 的差别解释不了这一半？",
            "先预测：64 个 KV 头和 8 个 KV 头的 70B 模型，缓存之比是多少？再解释：在同一张卡上，这对能同时服务的序列数意味着什么，又要付出什么代价？",
            "滑动窗口和 MLA 都减少缓存的字节数：一个减少每层存多少个 token，一个减少每个 token 存多少个数。它们各要付出什么代价？计算器里哪个模型用了哪一种？",
        ),
        objectives=(
            O("原样运行原文的估算代码，指出哪个数字错了、为什么恰好少了一半，并改正"),
            O("区分 GB 与 GiB，并说明这个差别解释不了少掉的那一半"),
            O("解释 GQA/MQA 为什么按 KV 头数缩小缓存，算出 64 个 KV 头和 8 个 KV 头的 70B 模型的缓存之比"),
            O("用计算器比较 MHA、GQA、MQA、滑动窗口和 MLA 模型的缓存，说出每种结构靠什么减少字节数，并把 3.2 的缓存公式推广到有滑动窗口层的模型",
              "ch04.window"),
            O("给定一张 GPU、权重精度和可用显存比例，算出最长能放多长的上下文、最多能放多大的批次", "ch04.largest_batch"),
        ),
        builds_on=(("3.2", "缓存字节数的公式"), ("3.3", "预分配：按最长长度预留")),
        optional_sections={"选学：公式与真实的显存": "在当前设备上真的分配一块缓存核对公式；结论和前面一致，时间不够可跳过"},
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
        discussion=(
            "生成前后权重的校验和完全相同，这个实验排除了什么说法？有人说「KV Cache 越用越大，模型就学到越多」，你会用本章的哪几个读数反驳？",
            "先预测只缓存 K 和不缓存谁快，再看本机读数；按计数，只缓存 K 仍要做无缓存 95% 以上的计算，为什么？如果读数是「说不准」，它告诉了你什么？",
            "为什么给每条序列按最长长度预留缓存，会让同一张卡能同时服务的序列变少？预留多少才合适，要知道请求的什么分布？",
        ),
        objectives=(
            O("用实验说明 KV Cache 不是模型参数：生成前后权重校验和不变，缓存写入的字节数等于 B × S × 每个 token 的字节数"),
            O("解释为什么只缓存 K 几乎不省时间：旧 token 在某一层的 V 取决于它在这一层的隐藏状态，重算 V 等于重跑前面所有层"),
            O("说明为什么按最长长度给每条序列预留缓存会在固定显存下减少能同时服务的序列数，并算出这个数"),
            O("从 logits 第一次出错的那一步判断缓存 bug 的类型，并修好一个有 bug 的缓存", "ch05.identify", "ch05.fix"),
            O("完成覆盖 3.1–3.5 的自测，并能解释每道题的答案"),
        ),
        builds_on=(("3.1", "缓存为什么正确、每步算什么"), ("3.2", "缓存的形状与字节"), ("3.3", "预填充与解码的计时"),
                   ("3.4", "显存预算")),
        optional_sections={
            "选学：拖动提示词长度和批次": "误区 1 的面板：亲手改长度和批次，看上一格已经证明的事；时间不够可跳过",
            "选学：放不下时，拒绝而不是崩溃": "预算检查怎样在分配之前拒绝放不下的请求：工程细节，误区 3 的结论不依赖它",
            "选学：本章在你的机器上测到了什么": "全课实测结果的汇总表，课上的读数前面都已出现；适合课后复习",
        },
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
        discussion=(
            "块大小从 4 改成 16，再改成 64：先预测浪费的槽位和块表的长度各怎样变，再用面板核对。块大小该怎样取舍？",
            "连续批处理让等待的请求更早加入：它对吞吐和首 token 延迟（TTFT）各有什么影响？有没有请求反而会变慢（提示：抢占）？",
            "纯 PyTorch 的分页缓存每一步要多一次收集（gather）。先预测：上下文越长、批次越大，多出的时间是变多还是变少？再看本机读数说得准不准，说不准时原因是什么？",
        ),
        objectives=(
            O("给定块表和块大小，找出一条序列的第 i 个 token 存在哪个物理块的哪一格", "ch06.lookup"),
            O("算出一组序列分页后要多少块、浪费多少槽位，并和填充、按固定长度预留比较"),
            O("算出共享系统提示词省下的块数，说明写时复制什么时候发生", "ch06.blocks"),
            O("解释连续批处理和静态批处理的区别，以及它对吞吐和首 token 延迟的影响；说明块池用完时调度器怎样抢占"),
            O("说明纯 PyTorch 的分页缓存每步为什么多一次收集（gather），真正的 PagedAttention 内核怎样避免它"),
        ),
        builds_on=(("3.2", "padding 浪费与分页块的图"), ("3.5", "按固定长度预留的浪费"), ("3.3", "批处理解码")),
        optional_sections={"选学：服务引擎自己共享前缀": "服务引擎自己按哈希找共享的块并量首 token 延迟；共享前缀的块数和写时复制前面已经讲完",
                           "6. 分页的代价": "量分页在纯 PyTorch 里多付的代价；理解分页本身不需要"},
        references=(
            S("vllm", "分页的 KV Cache：固定大小的块、块池、块表、引用计数与写时复制、块不够时抢占（重新计算或换出）。"),
            S("orca", "迭代级调度（连续批处理）：每一步的边界都可以让结束的序列离开、新的请求加入。"),
        ),
        further_reading=(
            S("sarathi", "分块预填充：把长提示词的预填充切成小块，和别的序列的解码放在同一步（本章「接下来」提到）。"),
        ),
    ),
)
