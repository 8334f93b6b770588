"""Chapter 3.5's review: predict, then explain. Each question puts a situation the chapters did not print and asks
what will happen (a number or a choice); the feedback explains why. 3.1 to 3.5, every numeric key computed by kvlab
(shown by kvlab.viz.quiz.Quiz, graded by kvlab.exercises.quiz). The course's one "how many sequences fit" sum is
chapter 3.4's exercise 2; it is not asked again here."""
from __future__ import annotations

from ...costs import pass_cost
from ...questions import Choice, ChoiceQuestion, NumberQuestion
from ...memory import format_bytes
from ...presets import MODEL_PRESETS
from ..storage import padding_waste
from .k_only import LLAMA_7B_SHAPE

QUIZ_NEW_TOKENS = 200  # 3.1: tokens generated after a one-token prompt
QUIZ_LENGTHS = (100, 20, 20, 20)  # 3.2: a padded batch
QUIZ_CONTEXT, QUIZ_BATCH = 1000, 8  # 3.3: decode step at this length, batch 1 vs this batch
QUIZ_GEMMA_S = 8192  # 3.4: Gemma-2-9B at its whole context


def uncached_over_cached(n: int = QUIZ_NEW_TOKENS, config=LLAMA_7B_SHAPE) -> float:
    """FLOPs of generating ``n`` tokens after a 1-token prompt without a cache, over with one (kvlab.costs)."""
    none = sum(pass_cost(config, t).flops for t in range(1, n + 1))
    cached = pass_cost(config, 1).flops + sum(pass_cost(config, 1, t - 1).flops for t in range(2, n + 1))
    return none / cached


def batch_intensity_gain(t: int = QUIZ_CONTEXT, batch: int = QUIZ_BATCH, config=LLAMA_7B_SHAPE) -> float:
    """How much a decode step's arithmetic intensity grows from batch 1 to ``batch`` (FP16, ``t`` tokens)."""
    one, many = pass_cost(config, 1, t - 1, 1, 2), pass_cost(config, 1, t - 1, batch, 2)
    return many.intensity / one.intensity


def review_questions() -> list:
    """The chapter's self-check, 3.1 to 3.5: predict, then explain; every numeric key computed by kvlab."""
    C = Choice
    n, gain = QUIZ_NEW_TOKENS, batch_intensity_gain()
    pad = padding_waste(list(QUIZ_LENGTHS), 1)
    lengths = "、".join(str(x) for x in QUIZ_LENGTHS)
    llama7, qwen = MODEL_PRESETS["LLaMA-7B"], MODEL_PRESETS["Qwen2.5-7B"]
    v3, gemma = MODEL_PRESETS["DeepSeek-V3 (671B)"], MODEL_PRESETS["Gemma-2-9B"]
    int8_gain = llama7.kv_bytes_per_token("fp16") / qwen.kv_bytes_per_token("int8")
    S = QUIZ_GEMMA_S
    gemma_share = gemma.kv_cache_bytes(S) / gemma.plain_formula_bytes(S) * 100
    return [
        ChoiceQuestion("3.1", "先预测：用 KV Cache 生成时，解码阶段序列长度为 t 的那一步，要为多少个 token 计算 K 和 V？", (
            C("t 个", False, "那是不用缓存时：每一步把全部上文重新投影一遍。"),
            C("1 个", True, "只有新 token 的 K、V 要算，之前的都从缓存读取（trace 里每个解码步 k_tokens = 1）。"),
            C("t − 1 个", False, "之前的 t − 1 个 token 的 K、V 正是缓存里存着、不用再算的部分。"),
            C("t² 个", False, "t × t 是不用缓存时每层每头的注意力分数个数，不是投影的 token 数。"))),
        NumberQuestion("3.1", f"LLaMA-7B 的形状，提示词只有 1 个 token，接着生成 {n} 个 token。先估计：不用缓存时，"
                              "整个生成的计算量大约是用缓存时的几倍？（按 kvlab.costs 的计数：一次乘加记 2 FLOP）",
                       uncached_over_cached(), "倍",
                       f"不用缓存时第 t 步要算 t 个 token，总共约 1 + 2 + … + {n} ≈ {n}²/2 个 token 的量；用缓存时每步 1 个，"
                       f"共 {n} 个。两者之比约 {n}/2：生成越长，差得越多（3.1 节的「空间换时间」）。",
                       f"数一数两种方式各处理了多少个 token：不用缓存时第 t 步处理 t 个（t = 1 … {n}），用缓存时每步 1 个。"
                       "估计在 10% 以内就算对。", rel_tol=0.1),
        NumberQuestion("3.2", f"一个批次 {len(QUIZ_LENGTHS)} 条序列，现在的长度分别是 {lengths} 个 token。缓存按最长的一条补齐"
                              "（padding，3.2 节），不额外预留。先预测：缓存里百分之几的位置存的是填充、没有用？",
                       pad.waste_fraction * 100, "%",
                       f"分配 {pad.batch_size} × {pad.max_len} = {pad.allocated_slots} 个位置，只用了 {pad.used_slots} 个："
                       f"{pad.waste_fraction:.0%} 是填充。一条长序列就让整批都按它的长度分配——这正是分页缓存"
                       "（3.6 节）按块随用随分配的动机。",
                       "补齐之后每条都占最长那条的长度：先算一共分配了多少个位置，再算真正用了多少。", rel_tol=0.01),
        NumberQuestion("3.3", f"LLaMA-7B 的形状，FP16，缓存里已有 {QUIZ_CONTEXT - 1} 个 token，解码一步。把批次从 1 加到 "
                              f"{QUIZ_BATCH}，这一步的算术强度（FLOP ÷ 读写的字节）大约变为几倍？先想一想：会不会正好是 "
                              f"{QUIZ_BATCH} 倍？", gain, "倍",
                       f"约 {gain:.1f} 倍，不到 {QUIZ_BATCH} 倍：FLOP 随批次变为 {QUIZ_BATCH} 倍，权重却只读一次，所以强度"
                       "上升、更接近算力的屋顶（3.3 节的批处理）；但每条序列的缓存各读各的，字节里这一部分也跟着批次增长，"
                       "上下文越长，批处理能提高的强度越少。",
                       f"权重（约 {format_bytes(MODEL_PRESETS['LLaMA-7B'].weight_bytes('fp16'))}）整批只读一次，每条序列的缓存"
                       "（每个 token 512 KiB）各读一次；FLOP 与批次成正比。", rel_tol=0.03),
        ChoiceQuestion("3.3", "同一个模型、同样生成 64 个 token，只把提示词从 100 个 token 加长到 2000 个。先预测：哪个指标变化最大？", (
            C("TTFT（首 token 延迟）", True, "TTFT 主要是预填充：一次前向要处理全部 2000 个提示词 token，"
              "工作量随提示词长度增长。之后每个解码步只算 1 个新 token，只是读的缓存长一些。"),
            C("TPOT（每 token 延迟，按请求取平均）", False, "解码每步只处理 1 个新 token；提示词变长只让它读的缓存变长，"
              "在不太长的上下文里远没有预填充的变化大。"),
            C("ITL 的中位数（单个解码步的耗时）", False, "解码每步仍只处理 1 个新 token；缓存变长让每步多读一些 K/V，"
              "但在不太长的上下文里，每步读的 K/V 远少于权重，单步耗时只涨一点。"),
            C("每个 token 的 KV Cache 字节数", False, "每个 token 的 K/V 大小只由层数、KV 头数、头维度和数据类型决定"
              "（3.2 节），与提示词多长无关；变的是 token 的个数。"))),
        ChoiceQuestion("3.3", "一次生成里大多数解码步都是 1 ms，只有 3 步因为机器被别的程序打断，各花了 50 ms。"
                              "先预测：TPOT（按请求算的平均）和 ITL（逐步间隔）的中位数，哪个受影响大？", (
            C("TPOT：它是平均值，几个特别慢的步会把它拉高", True,
              "TPOT =（端到端延迟 − TTFT）÷（输出 token 数 − 1），是平均；ITL 是每一步的间隔，报告中位数和尾部分位数："
              "中位数几乎不动，慢的那几步出现在 P99 这样的尾部里。两者都要看。"),
            C("ITL 的中位数：慢步会让每一步都变慢", False, "中位数只看排在中间的那一步：3 个慢步改变不了它。"),
            C("两者一样，TPOT 就是 ITL 的中位数", False, "TPOT 是平均值，不是中位数；有慢步时两者可以差很多。"))),
        NumberQuestion("3.4", f"LLaMA-7B（{llama7.n_layer} 层、{llama7.n_kv_head} 个 KV 头、头维度 {llama7.head_dim}）用 FP16 缓存；"
                              f"Qwen2.5-7B（{qwen.n_layer} 层、{qwen.n_kv_head} 个 KV 头、头维度 {qwen.head_dim}）改用 INT8 缓存"
                              "（每个数 1 字节，不计缩放系数）。先预测：LLaMA-7B 每个 token 的缓存是 Qwen2.5-7B 的几倍？",
                       int8_gain, "倍",
                       f"三个因子相乘：层数 {llama7.n_layer}/{qwen.n_layer}，KV 头 {llama7.n_kv_head}/{qwen.n_kv_head}（GQA），"
                       f"每个数 2 字节对 1 字节（INT8）：{format_bytes(llama7.kv_bytes_per_token('fp16'))} 对 "
                       f"{format_bytes(qwen.kv_bytes_per_token('int8'))}，约 {int8_gain:.1f} 倍。GQA 和量化两种省法可以叠加；"
                       "INT8 的代价是一点 logits 误差（3.3 节）。",
                       "分别看层数、KV 头数和每个数的字节数之比，再相乘。", rel_tol=0.01),
        NumberQuestion("3.4", f"DeepSeek-V3 有 {v3.n_layer} 层、{v3.n_head} 个注意力头、头维度 {v3.head_dim}，用 MLA 每层每个 "
                              f"token 只存 {v3.kv_latent_dim} 个数。如果它像普通的多头注意力那样每个头都存自己的 K 和 V"
                              f"（头维度按 {v3.head_dim} 算），缓存会是 MLA 的几倍？", v3.plain_formula_bytes(S) / v3.kv_cache_bytes(S),
                       "倍", f"每层每个 token：2 × {v3.n_head} × {v3.head_dim} = {2 * v3.n_head * v3.head_dim:,} 个数，对 MLA 的 "
                       f"{v3.kv_latent_dim} 个，约 {v3.plain_formula_bytes(S) / v3.kv_cache_bytes(S):.0f} 倍。层数、序列长度"
                       "两边相同，约掉了。", "只比每层每个 token 存多少个数：K 和 V 各一份，每个头一份。", rel_tol=0.02),
        NumberQuestion("3.4", f"Gemma-2-9B 一半的层是滑动窗口层（窗口 {gemma.sliding_window:,} 个 token，只存最近这么多），"
                              f"另一半存全部 token。在它的整个上下文 S = {S:,} 时，缓存是普通公式（每层都存 S 个 token）算出的"
                              "百分之几？", gemma_share, "%",
                       f"一半的层存 {S:,} 个，一半的层只存 {gemma.sliding_window:,} 个：平均每层 "
                       f"{(S + gemma.sliding_window) // 2:,} 个，是 {S:,} 的 {gemma_share:.0f}%。S 越长，窗口省得越多，"
                       "但全局层仍随 S 线性增长。", "分别算全局层和窗口层每层存多少个 token，再取平均。", rel_tol=0.01),
        ChoiceQuestion("3.5", "有人提议：只缓存 K，每一步用 V = h W_V 把旧 token 的 V 临时算出来，「反正只是一次矩阵乘法」。"
                              "先预测：这样一步要多做多少工作？", (
            C("只多一次 V 的投影，很便宜", False, "W_V 乘的是旧 token 在这一层的隐藏状态 h，而缓存里没有 h："
              "要得到它，得把下面各层在整个前缀上重跑一遍。"),
            C("差不多要把整个前缀在下面各层重算一遍，接近不用缓存", True,
              "第 l 层的 h 是下面各层注意力和 MLP 的输出，混入了整个前缀的信息；算出它就是无缓存做的几乎全部工作"
              "（误区 2 的计数：即使最省的做法，也要重跑下面 L − 1 层）。"),
            C("不用多做：V 可以从缓存的 K 换算出来", False, "K = h W_K 和 V = h W_V 是同一个 h 的两个不同投影，"
              "一般不能从一个换算出另一个。"),
            C("要重算的是旧 token 的 Q", False, "旧 token 的 Q 以后再也用不到（误区 2 的实验：把它们换成噪声，最后一行不变）。"))),
        ChoiceQuestion("3.5", "两台服务器：A 用按需分页的 KV Cache（vLLM），B 给每条序列固定预留一段缓存。先预测：把 A 的 "
                              "gpu_memory_utilization 从 0.9 调到 0.95（权重和激活都没变），与把 B 每条序列固定预留的 token 数"
                              "翻一倍相比，各会怎样？", (
            C("调高比例：缓存池变大，能同时服务的序列变多；预留翻倍：每条占得更多，能同时服务的变少", True,
              "池子越大越好（只要权重和激活放得下）；每条序列的预留超出它用到的部分则是浪费。误区 3 说的是后者。"),
            C("两者都让缓存变大，所以都更好", False, "池子变大是好事，但每条序列预留翻倍只是让同一个池子装下的序列变少。"),
            C("两者都会浪费显存", False, "调高比例是把更多显存给了缓存池：分页之下，它会被真正的 token 用上。"))),
        ChoiceQuestion("3.5", "一个缓存的 reset() 忘了把 length 置 0。先预测：如果每个请求都用一块全新的缓存，"
                              "与无缓存的参考比，会看到什么？", (
            C("每一步都和参考相同：这个 bug 只在复用缓存时出现", True,
              "全新的缓存 length 本来就是 0，reset() 根本没被用到；服务完一个请求再复用它，新请求才会写在旧内容后面"
              "（找 bug 实验室里去掉「先服务上一个请求」试试）。"),
            C("第 1 步（预填充）就出错", False, "那要缓存里先有东西：全新的缓存里什么都没有。"),
            C("第 2 步才出错", False, "解码时的读写都正确：错的只是 reset()，而全新的缓存用不到它。"))),
    ]
