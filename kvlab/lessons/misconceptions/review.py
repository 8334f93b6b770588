"""Chapter 3.5's review: the chapter's self-check questions, 3.1 to 3.5, every numeric answer key computed
by kvlab (shown by kvlab.viz.quiz.Quiz, graded by kvlab.exercises.quiz)."""
from __future__ import annotations

from ...memory import format_bytes
from ...presets import GPU_PRESETS, MODEL_PRESETS
from ...exercises.checker import Choice
from ...exercises.quiz import ChoiceQuestion, NumberQuestion
from .budget import DEFAULT_GPU, plan_reservation


QUIZ_GPU = DEFAULT_GPU  # the budget question plans the card of misconception 3


def review_questions() -> list:
    """The chapter's self-check, 3.1 to 3.5; every numeric answer key computed by kvlab."""
    llama3, llama7 = MODEL_PRESETS["Llama-3-8B"], MODEL_PRESETS["LLaMA-7B"]
    mha70, gqa70 = MODEL_PRESETS["70B, 64 KV heads (chapter's hypothetical)"], MODEL_PRESETS["Llama-2-70B"]
    card, plan = GPU_PRESETS[QUIZ_GPU], plan_reservation("LLaMA-7B", QUIZ_GPU, 2048, 1)
    usable = float(plan.fit.usable)
    C = Choice
    return [
        ChoiceQuestion("3.1", "用 KV Cache 生成时，解码阶段序列长度为 t 的那一步要为多少个 token 计算 K 和 V？", (
            C("t 个", False, "那是不用缓存时：每一步把全部上文重新投影一遍。"),
            C("1 个", True, "只有新 token 的 K、V 要算，之前的都从缓存读取（trace 里每个解码步 k_tokens = 1）。"),
            C("t − 1 个", False, "之前的 t − 1 个 token 的 K、V 正是缓存里存着、不用再算的部分。"),
            C("t² 个", False, "t × t 是不用缓存时每层每头的注意力分数个数，不是投影的 token 数。"))),
        ChoiceQuestion("3.1", "缓存里已有 t − 1 个 token、输入第 t 个 token 时，每层每个查询头要算多少个注意力分数？", (
            C("t × t 个", False, "那是无缓存时重算的完整矩阵。"),
            C("t 个（1 × t）", True, "新 token 的一个查询对 t 个键（t − 1 个旧的加它自己）：单步从 O(t²) 降为 O(t)。"),
            C("t − 1 个", False, "新 token 也要和它自己的 K 做点积：一共 t 个。"),
            C("1 个", False, "新 token 要和全部 t 个 token（包括自己）的 K 做点积。"))),
        NumberQuestion("3.2", f"Llama-3-8B（{llama3.n_layer} 层，{llama3.n_kv_head} 个 KV 头，头维度 {llama3.head_dim}）"
                              "在 FP16 下，1 条序列的 1 个 token 要占多少字节的 KV Cache（所有层，K 和 V）？",
                       llama3.kv_bytes_per_token("fp16"), "字节",
                       f"2（K 和 V）× {llama3.n_layer} 层 × {llama3.n_kv_head} 个 KV 头 × {llama3.head_dim} × 2 字节"
                       f" = {format_bytes(llama3.kv_bytes_per_token('fp16'))}。",
                       "公式是 2 × L × H × D × 每元素字节，其中 H 是 KV 头数，不是查询头数。"),
        ChoiceQuestion("3.2", "缓存里已存部分的形状是（L, B, H, S, D）（预分配的缓存里是前 length 个位置）。"
                              "解码时每生成一个 token，哪一维加 1？", (
            C("L", False, "层数由模型结构决定，不会变。"),
            C("B", False, "批次是同时处理的序列数，解码一步不会增加序列。"),
            C("S", True, "S 是已存的 token 数：每一步追加 1 个。"),
            C("D", False, "头维度由模型结构决定。"))),
        ChoiceQuestion("3.3", "预填充（prefill）阶段做的是什么？", (
            C("一次处理完整的提示词，算出所有提示词 token 的 K/V 存入缓存", True,
              "提示词的所有 token 可以在一次前向计算里并行处理；之后的解码每步只处理 1 个新 token。"),
            C("为每个提示词 token 各做一次前向计算", False, "提示词一开始就全部已知，不必逐个处理。"),
            C("把缓存清零、分配显存", False, "分配是准备工作；预填充是一次真正的前向计算。"))),
        NumberQuestion("3.4", f"LLaMA-7B（{llama7.n_layer} 层，{llama7.n_kv_head} 个 KV 头，D = {llama7.head_dim}），"
                              "序列长度 2048，批次 1，FP16：KV Cache 一共多少 GiB？",
                       llama7.kv_cache_bytes(2048, 1, "fp16") / 2**30, "GiB",
                       f"2 × {llama7.n_layer} × 1 × {llama7.n_kv_head} × 2048 × {llama7.head_dim} × 2 B = "
                       f"{format_bytes(llama7.kv_cache_bytes(2048))}。原文注释里的 0.50 GB 少了一半。",
                       "把 2（K 和 V）、L、B、H、S、D 和每元素 2 字节全部乘起来，再除以 1024³。", rel_tol=0.005),
        NumberQuestion("3.4", f"原文假设的 70B 模型有 {mha70.n_kv_head} 个 KV 头；真实的 Llama-2-70B 用分组查询注意力"
                              f"（GQA，几个查询头共用一组 K/V），只有 {gqa70.n_kv_head} 个。"
                              "同样的序列长度下，前者的 KV Cache 是后者的几倍？",
                       mha70.kv_bytes_per_token() / gqa70.kv_bytes_per_token(), "倍",
                       f"层数、头维度都相同，缓存与 KV 头数成正比：{mha70.n_kv_head} / {gqa70.n_kv_head} = "
                       f"{mha70.n_kv_head // gqa70.n_kv_head} 倍。",
                       "只有 KV 头数不同，比一比两者的 KV 头数。"),
        ChoiceQuestion("3.5", "用同一个模型生成了几段不同长度、不同批次的文字之后，模型 state_dict 的校验和会怎样？", (
            C("不变", True, "推理不改权重：缓存是每次生成时另外分配的张量，不在 state_dict 里。"),
            C("随生成的 token 数变大", False, "变大的是 KV Cache（B × S × 每个 token 的字节数），不是参数。"),
            C("每次生成都不同", False, "只有缓存的内容随输入变；参数一个字节都没变。"))),
        ChoiceQuestion("3.5", "为什么只缓存 K、不缓存 V 几乎不省时间？", (
            C("因为 V 比 K 大", False, "K 和 V 的形状完全相同。"),
            C("因为旧 token 的 V 会随新 token 改变，必须每步重算", False,
              "不会：因果掩码下，一个 token 的 K、V 只取决于它自己和它之前的 token，新 token 改变不了它们——"
              "所以 K 和 V 才能缓存。问题在于不缓存 V 时，重算它要付出的代价。"),
            C("因为旧 token 在第 l 层的 V 取决于它在第 l 层的隐藏状态，而那要把前面所有层在整个前缀上重算一遍",
              True, "要重算 V 就得重跑几乎整个模型：只缓存 K 省下的只是旧 token 的 K 投影那一小部分。"),
            C("因为注意力用不到 V", False, "注意力的输出就是对 V 的加权平均，离不开 V。"))),
        NumberQuestion("3.5", f"{card.name}（nvidia-smi 报告 {card.memory_mib:,} MiB），像 3.4 节那样按 {usable:g} 规划"
                              f"（其余 {1 - usable:.0%} 留给 CUDA 上下文等开销）。放上 FP16 的 LLaMA-7B 权重"
                              f"（{llama7.n_params:,} 个参数，每个 2 字节），剩下的给 KV Cache（{llama7.n_layer} 层，"
                              f"{llama7.n_kv_head} 个 KV 头，D = {llama7.head_dim}，FP16）。"
                              "每条序列预留 2048 个 token，最多能同时服务几条序列？", plan.capacity, "条",
                       f"可用 {card.memory_mib:,} MiB × {usable:g} = {format_bytes(plan.budget_bytes)}，减去权重 "
                       f"{format_bytes(plan.weight_bytes)}，剩 {format_bytes(plan.room_bytes)}；每条序列预留 "
                       f"{format_bytes(plan.slot_bytes)}，放得下 {plan.capacity} 条。",
                       f"先算可用显存（总量 × {usable:g}）减去权重，再除以一条序列 2048 个 token 的缓存（每个 token "
                       f"{format_bytes(plan.per_token_bytes)}），只取整条。"),
        ChoiceQuestion("3.5", "一个缓存的第 1 步（预填充）完全正确，从第 2 步起 logits 才开始偏离。"
                              "下面哪个 bug 不可能造成这种现象？", (
            C("K 写进了 V 的位置", True, "这个 bug 在预填充时就生效：第 1 步就错了。"),
            C("所有层都读写第 0 层的那一格", False, "预填充时每层先写后读，恰好正确，解码时才出错。"),
            C("新 token 写在 length − 1", False, "预填充从 0 开始写，恰好正确，解码时才出错。"))),
    ]
