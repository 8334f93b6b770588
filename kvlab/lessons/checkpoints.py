"""Checkpoints of chapters 3.1-3.4 and the keys of the chapters' in-text 小任务.

A checkpoint closes a chapter, after its 小结: 3-5 questions that put a case the chapter did not print and ask the
learner to predict it (a number or a choice). The first answer to each is the prediction: it is graded, then the
explanation appears (:class:`kvlab.viz.quiz.Checkpoint`). Every numeric key and every "which is right" is computed
by kvlab (the demo model's configuration, :mod:`kvlab.costs`, :mod:`kvlab.memory`, the presets, 3.4's fit plan),
never typed. A notebook shows one with ``checkpoint("3.1")``; the teacher's KEYS.md lists the keys
(:mod:`kvlab.teacher.keys`). Each checkpoint is written in both languages: the questions come in the course's language
when they are asked for (the English ones by the ``_en`` builders beside the Chinese, from the same numbers).

A 小任务 (a small task inside a chapter's prose) has its key in :data:`TASKS`: a phrase of the task's text, to find
it in the notebook, and a function that computes the answer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..costs import attention_flops, pass_cost
from ..demo import load_demo_model
from ..language import get_language
from ..memory import format_bytes, kv_cache_bytes
from ..presets import GPU_PRESETS, MODEL_PRESETS
from ..questions import Choice, ChoiceQuestion, NumberQuestion
from ..viz.quiz import Checkpoint
from . import decode
from .memory_estimate import plan_fit
from .prefill_decode import ROOFLINE_CONFIG

# 3.1
SCORE_STEP = 100  # the sequence length of the decode step whose scores are counted
SCORE_PASSES = 60  # forward passes summed, the t-th over t tokens
# 3.2
STORAGE_BATCH, STORAGE_SLOTS = 2, 256  # the demo model's cache, preallocated
STORAGE_PRESET, STORAGE_S, STORAGE_B, STORAGE_DTYPE = "Gemma-7B", 4096, 3, "int8"  # not a row of 3.2's table
CONCAT_N = 100  # tokens a concatenating cache stores, one pass at a time, in the checkpoint
# 3.3
PREFILL_P = 256  # prefill of P tokens against one decode step at the same length
BATCH_B, SHORT_CONTEXT, LONG_CONTEXT = 16, 8, 1000  # a batched decode step
# 3.4
FIT_PRESET, FIT_GPU, FIT_S, FIT_B = "Llama-2-7B", "A100 40 GB", 4096, 8
GQA_PRESET = "Llama-2-70B"


def demo_config():
    """The shipped demo model's configuration (what 3.1 and 3.2 run)."""
    return load_demo_model("cpu")[0].config


def scores_of_pass(config, new_tokens: int, past_tokens: int = 0) -> int:
    """Attention scores one pass computes in all layers and heads: :func:`kvlab.costs.attention_flops` counts 2
    FLOPs per multiply-add of ``head_dim`` for QKᵀ and as many for weights @ V."""
    return attention_flops(config, new_tokens, past_tokens) // (4 * config.head_dim)


def uncached_over_cached_scores(config, passes: int = SCORE_PASSES) -> float:
    """All passes' attention scores without a cache over with one, the t-th pass over t tokens."""
    none = sum(scores_of_pass(config, t) for t in range(1, passes + 1))
    kv = scores_of_pass(config, 1) + sum(scores_of_pass(config, 1, t - 1) for t in range(2, passes + 1))
    return none / kv


def decode_checkpoint(config=None) -> list:
    """3.1: the attention scores of one cached step, of a whole generation both ways, a cached step's cost and why
    the cache changes no result."""
    C = Choice
    cfg = config or demo_config()
    t, n = SCORE_STEP, SCORE_PASSES
    ratio = uncached_over_cached_scores(cfg)
    if get_language() == "en":
        return _decode_checkpoint_en(cfg, t, n, ratio)
    return [
        NumberQuestion("3.1", f"演示模型有 {cfg.n_layer} 层、每层 {cfg.n_head} 个查询头。用 KV Cache 解码，序列长度 t = {t} 的"
                              "那一步：所有层、所有头加起来，一共要算多少个注意力分数？先预测。",
                       scores_of_pass(cfg, 1, t - 1), "个",
                       f"每层每个头只有新 token 的 1 个查询，对 {t} 个 K 各算 1 个分数（1 × t 的一行）："
                       f"{cfg.n_layer} × {cfg.n_head} × {t}。不用缓存时，每层每头要算 {t} × {t} 的整个矩阵。",
                       "有缓存时每层每个头只算一行分数：这一行有多长？再乘上层数和头数。"),
        NumberQuestion("3.1", f"演示模型一共做 {n} 次前向，第 t 次前向时序列长 t 个 token（t = 1 … {n}）。把这 {n} 次前向的注意力"
                              "分数全部加起来：不用缓存时大约是用缓存时的几倍？（误差 10% 以内算对）",
                       ratio, "倍",
                       f"不用缓存时第 t 次前向算 t × t 个分数，共约 n³/3；用缓存时算 1 × t 个，共约 n²/2。两者之比约 2n/3，"
                       f"n = {n} 时约 {ratio:.1f} 倍：生成越长，差得越多。",
                       "分别把两种方式每次前向的分数个数加起来（1² + 2² + … 和 1 + 2 + …），再相除。", rel_tol=0.1),
        ChoiceQuestion("3.1", "用 KV Cache 时，一个解码步的代价随序列长度 t 怎样变化？先预测，再看解释。", (
            C("随 t 线性增长：每一步都要读一遍缓存里全部 t 个 token 的 K/V，算 1 × t 个分数", True,
              "投影、MLP 只处理 1 个新 token，代价固定；注意力要把新 token 的 Q 和缓存里 t 个 K、V 都算一遍，"
              "这一项随 t 线性增长。短序列上它常被固定开销盖住，所以本章实测时要生成得足够长才看得出来。"),
            C("不随 t 变化：有了缓存，每一步都只算 1 个 token", False,
              "只为 1 个 token 算 Q、K、V 没错，但注意力还要读缓存里全部 t 个 token 的 K/V，这一项随 t 增长。"),
            C("随 t² 增长", False, "t × t 的分数矩阵是不用缓存时每一步的注意力；有缓存时每层每头只算 1 × t 的一行。"),
            C("随 t 减少：缓存越满，命中越多", False, "KV Cache 不是命中率意义上的缓存：每一步都读全部已存的 K/V，"
              "存得越多读得越多。"))),
        ChoiceQuestion("3.1", "为什么用 KV Cache 生成的结果和每步全部重算一样（不是近似）？", (
            C("因果掩码：一个 token 的 K、V 只取决于它自己和它之前的 token，后来的 token 不会改变它们", True,
              "所以早先算好的 K、V 以后再算一遍也是同样的值，存起来直接用，结果相同（本章的读数里两者最多只差浮点舍入）。"),
            C("缓存里存的是近似值，只是误差小到可以忽略", False,
              "缓存存的就是当时算出的 K、V 本身，不是近似；两种方式只差浮点运算顺序带来的舍入。"),
            C("生成时模型的权重不再变化，所以任何中间结果都可以复用", False,
              "权重不变是必要条件，但不够：如果后来的 token 能影响前面 token 的 K、V（没有因果掩码），存下的值就会过时。"),
            C("每一步都会把缓存和重新计算的结果核对一遍", False, "那样就省不下计算了：缓存的意义正在于不再重算。"))),
    ]


def _decode_checkpoint_en(cfg, t: int, n: int, ratio: float) -> list:
    C = Choice
    return [
        NumberQuestion("3.1", f"The demo model has {cfg.n_layer} layers with {cfg.n_head} query heads each. Decoding with "
                              f"a KV cache, at the step where the sequence is t = {t} tokens long: how many attention "
                              "scores are computed in all, over all layers and heads? Predict first.",
                       scores_of_pass(cfg, 1, t - 1), "scores",
                       f"Each head of each layer has just 1 query, the new token's, and computes 1 score against each "
                       f"of the {t} keys (one 1 × t row): {cfg.n_layer} × {cfg.n_head} × {t}. Without a cache, each "
                       f"layer and head computes the whole {t} × {t} matrix.",
                       "With a cache, each head of each layer computes a single row of scores: how long is that row? "
                       "Then multiply by the numbers of layers and heads."),
        NumberQuestion("3.1", f"The demo model runs {n} forward passes; in pass t the sequence is t tokens long "
                              f"(t = 1 … {n}). Add up the attention scores of all {n} passes: about how many times as "
                              "many are computed without a cache as with one? (Within 10% counts as right.)",
                       ratio, "×",
                       f"Without a cache, pass t computes t × t scores, about n³/3 in all; with a cache it computes "
                       f"1 × t, about n²/2 in all. Their ratio is about 2n/3, about {ratio:.1f}× for n = {n}: the "
                       "longer the generation, the wider the gap.",
                       "Add up each way's scores pass by pass (1² + 2² + … and 1 + 2 + …), then divide.",
                       rel_tol=0.1),
        ChoiceQuestion("3.1", "With a KV cache, how does the cost of one decode step change with the sequence length "
                              "t? Predict first, then read the explanation.", (
            C("It grows linearly with t: every step reads the K/V of all t tokens in the cache and computes 1 × t "
              "scores", True,
              "The projections and the MLP handle only the 1 new token, so their cost is fixed; attention takes the "
              "new token's Q through all t K and V in the cache, and that term grows linearly with t. On short "
              "sequences the fixed cost often hides it, which is why this chapter's measurements must generate long "
              "enough to show it."),
            C("It does not change with t: with a cache, every step computes only 1 token", False,
              "Computing Q, K and V for only 1 token is right, but attention still reads the K/V of all t tokens in "
              "the cache, and that term grows with t."),
            C("It grows with t²", False, "The t × t score matrix is each step's attention without a cache; with a "
              "cache each layer and head computes only one 1 × t row."),
            C("It shrinks with t: the fuller the cache, the more hits", False,
              "A KV cache is not a cache in the hit-rate sense: every step reads all the K/V stored, and the more "
              "is stored, the more is read."))),
        ChoiceQuestion("3.1", "Why does generating with a KV cache give the same result as recomputing everything at "
                              "every step (exactly, not approximately)?", (
            C("The causal mask: a token's K and V depend only on that token and the ones before it, so later tokens "
              "never change them", True,
              "So K and V computed earlier would come out the same if computed again later: storing them and using "
              "them as they are gives the same result (in this chapter's readouts the two differ by floating-point "
              "rounding at most)."),
            C("The cache stores approximations whose error is small enough to ignore", False,
              "The cache stores the very K and V computed at the time, not approximations; the two ways differ only "
              "by the rounding of a different order of floating-point operations."),
            C("The model's weights no longer change during generation, so any intermediate result can be reused",
              False, "Fixed weights are necessary but not enough: if later tokens could affect the K and V of earlier "
              "ones (no causal mask), the stored values would go stale."),
            C("Every step checks the cache against a recomputation", False,
              "Then nothing would be saved: the whole point of the cache is not to recompute."))),
    ]


def storage_checkpoint(config=None) -> list:
    """3.2, cases the chapter does not print: the demo model's preallocated cache in bytes, what a concatenating cache
    writes for ``CONCAT_N`` tokens, a real model's batch in INT8 in MiB, and how that write total grows with n."""
    C = Choice
    cfg = config or demo_config()
    B, S, n = STORAGE_BATCH, STORAGE_SLOTS, CONCAT_N
    demo_bytes = kv_cache_bytes(cfg.n_layer, cfg.n_kv_head, cfg.head_dim, S, B, "fp32")
    per_token = kv_cache_bytes(cfg.n_layer, cfg.n_kv_head, cfg.head_dim, 1, 1, "fp32")
    written = per_token * n * (n + 1) // 2  # pass t writes all t tokens into a new tensor
    twice = (2 * n) * (2 * n + 1) / (n * (n + 1))
    big = MODEL_PRESETS[STORAGE_PRESET]
    big_bytes = big.kv_cache_bytes(STORAGE_S, STORAGE_B, STORAGE_DTYPE)
    if get_language() == "en":
        return _storage_checkpoint_en(cfg, B, S, n, demo_bytes, per_token, written, twice, big, big_bytes)
    return [
        NumberQuestion("3.2", f"演示模型：L = {cfg.n_layer} 层，H = {cfg.n_kv_head} 个 KV 头，头维度 D = {cfg.head_dim}，FP32"
                              f"（每个元素 4 字节）。预分配一个批次 B = {B}、最多 S = {S} 个 token 的缓存：K 和 V 一共占多少字节？",
                       demo_bytes, "字节",
                       f"2（K 和 V）× {cfg.n_layer} × {B} × {cfg.n_kv_head} × {S} × {cfg.head_dim} × 4 = {demo_bytes:,} 字节"
                       f" = {format_bytes(demo_bytes)}。注意 H 是 KV 头数（{cfg.n_kv_head}），不是查询头数（{cfg.n_head}）。",
                       "字节数 = 2 × L × B × H × S × D × 每元素字节数；H 用 KV 头数。"),
        NumberQuestion("3.2", f"还是演示模型，B = 1、FP32，改用逐步拼接：每存进 1 个 token，就用 torch.cat 分配一块新存储，"
                              f"把已有的 token 和新 token 一起写进去。从空缓存存到 n = {n} 个 token，所有层的 K、V 一共写入"
                              "多少 MiB？（误差 10% 以内算对）",
                       written / 2**20, "MiB",
                       f"每个 token 的 K、V（所有层）是 2 × {cfg.n_layer} × {cfg.n_kv_head} × {cfg.head_dim} × 4 = "
                       f"{per_token:,} 字节。第 t 次拼接要写 t 个 token，1 + 2 + … + {n} = {n * (n + 1) // 2:,} 个 token，"
                       f"共 {written:,} 字节 = {format_bytes(written)}。预分配每个 token 只写一次：{n} 个 token 共 "
                       f"{format_bytes(per_token * n)}。",
                       "先算一个 token 的 K、V 有多少字节；再数第 1、2、…、n 次拼接各要写几个 token。", rel_tol=0.1),
        NumberQuestion("3.2", f"{big.label}：L = {big.n_layer} 层，{big.n_kv_head} 个 KV 头，头维度 {big.head_dim}。"
                              f"缓存用 INT8（每个元素 1 字节），B = {STORAGE_B}，S = {STORAGE_S:,} 个 token：KV Cache 占多少 MiB？",
                       big_bytes / 2**20, "MiB",
                       f"2 × {big.n_layer} × {STORAGE_B} × {big.n_kv_head} × {STORAGE_S:,} × {big.head_dim} × 1 字节 = "
                       f"{big_bytes:,} 字节 = {big_bytes / 2**20:,.0f} MiB（1 MiB = 2²⁰ 字节），即 {format_bytes(big_bytes)}。",
                       "先用公式算出字节数，再除以 1024 × 1024。"),
        ChoiceQuestion("3.2", f"第二题的逐步拼接，如果存到 {2 * n} 个 token 而不是 {n} 个，一共写入的字节大约变成几倍？", (
            C("约 4 倍", True, f"写入量约为 n²/2：n 翻倍，它约变为 2² = 4 倍（精确地说是 {twice:.2f} 倍）。预分配只写 n 个 "
                              "token，才是 2 倍。"),
            C("约 2 倍：token 数翻倍", False, "那是预分配：每个 token 只写一次。逐步拼接每次都把已有的 token 全部重写。"),
            C("约 8 倍", False, "8 = 2³ 是 n³ 的增长；拼接的写入量是 1 + 2 + … + n ≈ n²/2，是 n² 的增长。"),
            C("不变：每次只多写 1 个 token", False, "每次拼接都要把已有的 t 个 token 重写一遍，不只是新的那 1 个。"))),
    ]


def _storage_checkpoint_en(cfg, B, S, n, demo_bytes, per_token, written, twice, big, big_bytes) -> list:
    C = Choice
    return [
        NumberQuestion("3.2", f"The demo model: L = {cfg.n_layer} layers, H = {cfg.n_kv_head} KV heads, head dimension "
                              f"D = {cfg.head_dim}, FP32 (4 bytes per element). Preallocate a cache for a batch of "
                              f"B = {B} and at most S = {S} tokens: how many bytes do K and V take together?",
                       demo_bytes, "bytes",
                       f"2 (K and V) × {cfg.n_layer} × {B} × {cfg.n_kv_head} × {S} × {cfg.head_dim} × 4 = "
                       f"{demo_bytes:,} bytes = {format_bytes(demo_bytes)}. Note that H is the number of KV heads "
                       f"({cfg.n_kv_head}), not of query heads ({cfg.n_head}).",
                       "bytes = 2 × L × B × H × S × D × bytes per element, with H the number of KV heads."),
        NumberQuestion("3.2", f"The demo model again, B = 1, FP32, but storing by concatenation: for every token "
                              "stored, torch.cat allocates new storage and writes the tokens already there together "
                              f"with the new one. From an empty cache up to n = {n} tokens, how many MiB of K and V "
                              "are written in all, over all layers? (Within 10% counts as right.)",
                       written / 2**20, "MiB",
                       f"One token's K and V (all layers) take 2 × {cfg.n_layer} × {cfg.n_kv_head} × {cfg.head_dim} "
                       f"× 4 = {per_token:,} bytes. Concatenation number t writes t tokens: 1 + 2 + … + {n} = "
                       f"{n * (n + 1) // 2:,} tokens, {written:,} bytes = {format_bytes(written)} in all. "
                       f"Preallocation writes each token once: {format_bytes(per_token * n)} for {n} tokens.",
                       "First work out how many bytes one token's K and V take; then count the tokens that "
                       "concatenations 1, 2, …, n each write.", rel_tol=0.1),
        NumberQuestion("3.2", f"{big.label}: L = {big.n_layer} layers, {big.n_kv_head} KV heads, head dimension "
                              f"{big.head_dim}. The cache is INT8 (1 byte per element), B = {STORAGE_B}, "
                              f"S = {STORAGE_S:,} tokens: how many MiB does the KV cache take?",
                       big_bytes / 2**20, "MiB",
                       f"2 × {big.n_layer} × {STORAGE_B} × {big.n_kv_head} × {STORAGE_S:,} × {big.head_dim} × 1 byte "
                       f"= {big_bytes:,} bytes = {big_bytes / 2**20:,.0f} MiB (1 MiB = 2²⁰ bytes), that is "
                       f"{format_bytes(big_bytes)}.",
                       "Work out the bytes with the formula first, then divide by 1024 × 1024."),
        ChoiceQuestion("3.2", f"With the concatenation of question 2, if {2 * n} tokens were stored instead of {n}, "
                              "about how many times as many bytes would be written in all?", (
            C("About 4 times", True, f"About n²/2 bytes are written: when n doubles, that becomes about 2² = 4 times "
                                    f"as much (exactly {twice:.2f} times). Only preallocation, which writes n tokens, "
                                    "would double."),
            C("About twice: twice the tokens", False, "That is preallocation, which writes each token once. "
              "Concatenation rewrites all the tokens already there every time."),
            C("About 8 times", False, "8 = 2³ is how n³ grows; concatenation writes 1 + 2 + … + n ≈ n²/2, which "
              "grows as n²."),
            C("The same: each time writes only 1 more token", False,
              "Each concatenation rewrites all t tokens already there, not only the 1 new one."))),
    ]


def prefill_decode_checkpoint(config=ROOFLINE_CONFIG) -> list:
    """3.3 (the chapter's larger model, FP32): prefill against decode in arithmetic intensity, where a decode step
    sits on the roofline, what batching does to the bytes, and to the intensity at a long context."""
    C = Choice
    c, P, B = config, PREFILL_P, BATCH_B
    prefill, decode_step = pass_cost(c, P), pass_cost(c, 1, P - 1)
    gain = prefill.intensity / decode_step.intensity
    one, many = pass_cost(c, 1, SHORT_CONTEXT - 1), pass_cost(c, 1, SHORT_CONTEXT - 1, B)
    far = pass_cost(c, 1, LONG_CONTEXT - 1, B)
    drops = far.intensity < many.intensity
    if get_language() == "en":
        return _prefill_decode_checkpoint_en(c, P, B, prefill, decode_step, gain, one, many, far, drops)
    shape = f"本章的大模型（{c.n_layer} 层，d_model = {c.d_model}，FP32）"
    return [
        NumberQuestion("3.3", f"{shape}：预填充 P = {P} 个 token 的一次前向，和序列长度 {P} 时的一个解码步相比，"
                              "哪个算术强度（FLOP ÷ 读写的字节）更高？高大约几倍？（误差 20% 以内算对）",
                       gain, "倍",
                       f"预填充高得多：约 {prefill.intensity:.0f} 对 {decode_step.intensity:.2f} FLOP/字节，约 {gain:.0f} 倍。"
                       f"两者都要把权重读一遍，预填充却用它算 {P} 个 token，解码只算 1 个：FP32 时预填充约 P / 2，解码约 0.5。",
                       "两种前向都把全部权重读一遍；各自用这些字节算了多少个 token？", rel_tol=0.2),
        ChoiceQuestion("3.3", "批次 B = 1 的一个解码步，落在本机 roofline 的哪一边？", (
            C("转折点左边：访存受限，耗时由读写的字节数决定", True,
              f"它的算术强度只有约 {decode_step.intensity:.1f} FLOP/字节，远低于 CPU、GPU 的转折点："
              "每读一个字节只做半次运算，算力大多闲着。"),
            C("转折点右边：算力受限，耗时由运算次数决定", False,
              f"那是长提示词的预填充（算术强度约 {prefill.intensity:.0f}）。解码每步只为 1 个 token 读全部权重。"),
            C("正好在转折点上", False, "转折点是两道屋顶相交处；一步解码的强度远比它低。"),
            C("不一定：看提示词有多长", False, "B = 1 时无论上下文多长，解码的强度都在 0.5 附近：读的字节还会因 K/V 变多。"))),
        NumberQuestion("3.3", f"{shape}，上下文只有 {SHORT_CONTEXT} 个 token。把解码的批次从 1 加到 {B}："
                              f"一步要读写的字节数大约变为几倍？（误差 10% 以内算对）",
                       many.bytes / one.bytes, "倍",
                       f"只变为约 {many.bytes / one.bytes:.2f} 倍：权重（{format_bytes(one.weight_bytes)}）整批只读一次，"
                       f"{B} 条序列的 K/V 在上下文这么短时只是零头。FLOP 却变为 {B} 倍，所以算术强度约变为 "
                       f"{many.intensity / one.intensity:.1f} 倍：这就是批处理解码的好处。",
                       "一步要读的字节里，哪一部分整批只读一次，哪一部分每条序列各读各的？短上下文时哪部分占大头？",
                       rel_tol=0.1),
        ChoiceQuestion("3.3", f"还是批次 {B}：把上下文从 {SHORT_CONTEXT} 个 token 加长到 {LONG_CONTEXT} 个。一步解码的算术强度会怎样？", (
            C("明显下降：每条序列都要读自己的 K/V，上下文越长这部分字节越多", drops,
              f"按 kvlab.costs 数：从约 {many.intensity:.1f} 降到约 {far.intensity:.1f} FLOP/字节。批处理摊薄的是权重，"
              "摊不薄各条序列自己的 K/V。"),
            C("基本不变：批次没变", not drops, f"批次没变，但读的 K/V 变多了：约 {many.intensity:.1f} → {far.intensity:.1f} FLOP/字节。"),
            C("明显上升：注意力的运算变多了", False,
              f"注意力运算确实变多，但每个 K/V 只参与很少的运算；字节增长得更快，强度约 {many.intensity:.1f} → "
              f"{far.intensity:.1f}。"))),
    ]


def _prefill_decode_checkpoint_en(c, P, B, prefill, decode_step, gain, one, many, far, drops) -> list:
    C = Choice
    shape = f"This chapter's larger model ({c.n_layer} layers, d_model = {c.d_model}, FP32)"
    return [
        NumberQuestion("3.3", f"{shape}: compare one forward pass that prefills P = {P} tokens with one decode step at "
                              f"sequence length {P}. Which has the higher arithmetic intensity (FLOPs ÷ bytes read and "
                              "written), and about how many times higher? (Within 20% counts as right.)",
                       gain, "×",
                       f"The prefill, by far: about {prefill.intensity:.0f} against {decode_step.intensity:.2f} "
                       f"FLOP/byte, about {gain:.0f}×. Both read all the weights once, but the prefill uses them for "
                       f"{P} tokens and the decode step for 1: in FP32 the prefill is about P / 2, decode about 0.5.",
                       "Both passes read all the weights once; how many tokens does each compute with those bytes?",
                       rel_tol=0.2),
        ChoiceQuestion("3.3", "On which side of this machine's roofline does a decode step with batch B = 1 fall?", (
            C("Left of the ridge point: memory-bound, its time set by the bytes read and written", True,
              f"Its arithmetic intensity is only about {decode_step.intensity:.1f} FLOP/byte, far below the ridge "
              "points of CPUs and GPUs: half an operation per byte read, so most of the compute sits idle."),
            C("Right of the ridge point: compute-bound, its time set by the number of operations", False,
              f"That is the prefill of a long prompt (arithmetic intensity about {prefill.intensity:.0f}). A decode "
              "step reads all the weights for just 1 token."),
            C("Right on the ridge point", False, "The ridge point is where the two roofs meet; one decode step's "
              "intensity is far below it."),
            C("It depends on how long the prompt is", False, "With B = 1, decode's intensity stays around 0.5 however "
              "long the context: the bytes read even grow with more K/V."))),
        NumberQuestion("3.3", f"{shape}, with a context of only {SHORT_CONTEXT} tokens. Raise the decode batch from 1 "
                              f"to {B}: about how many times as many bytes does a step read and write? (Within 10% "
                              "counts as right.)",
                       many.bytes / one.bytes, "×",
                       f"Only about {many.bytes / one.bytes:.2f} times: the weights ({format_bytes(one.weight_bytes)}) "
                       f"are read once for the whole batch, and the {B} sequences' K/V are a trifle at so short a "
                       f"context. The FLOPs grow {B} times, though, so the arithmetic intensity grows about "
                       f"{many.intensity / one.intensity:.1f} times: that is what batching buys decode.",
                       "Of the bytes a step reads, which part is read once for the whole batch and which once per "
                       "sequence? Which part dominates at a short context?", rel_tol=0.1),
        ChoiceQuestion("3.3", f"Still at batch {B}: lengthen the context from {SHORT_CONTEXT} tokens to "
                              f"{LONG_CONTEXT}. What happens to the arithmetic intensity of a decode step?", (
            C("It drops clearly: every sequence reads its own K/V, and the longer the context, the more bytes that "
              "takes", drops,
              f"Counted by kvlab.costs: from about {many.intensity:.1f} to about {far.intensity:.1f} FLOP/byte. "
              "Batching spreads the weights' bytes over the batch, but not each sequence's own K/V."),
            C("It stays about the same: the batch did not change", not drops,
              f"The batch did not change, but more K/V is read: about {many.intensity:.1f} → {far.intensity:.1f} "
              "FLOP/byte."),
            C("It rises clearly: attention does more operations", False,
              f"Attention does do more operations, but each K/V takes part in very few of them; the bytes grow "
              f"faster, and the intensity goes from about {many.intensity:.1f} to {far.intensity:.1f}."))),
    ]


def memory_estimate_checkpoint() -> list:
    """3.4: a 7B model's cache at its full context in GiB and in GB, a GQA 70B model's, and whether a batch fits."""
    C = Choice
    m, big = MODEL_PRESETS[FIT_PRESET], MODEL_PRESETS[GQA_PRESET]
    S, B = FIT_S, FIT_B
    cache = m.kv_cache_bytes(S, 1, "fp16")
    gpu = GPU_PRESETS[FIT_GPU]
    plan = plan_fit(FIT_PRESET, gpu.memory_bytes, S, B)
    used = format_bytes(plan.weight_bytes + plan.cache_bytes)
    if get_language() == "en":
        return _memory_estimate_checkpoint_en(m, big, S, B, cache, gpu, plan, used)
    budget = f"{format_bytes(plan.budget_bytes)}（{format_bytes(gpu.memory_bytes)} 的 {float(plan.usable):.0%}）"
    return [
        NumberQuestion("3.4", f"{m.label} 和 LLaMA-7B 形状相同（{m.n_layer} 层，{m.n_kv_head} 个 KV 头，头维度 {m.head_dim}），"
                              f"上下文长度 {m.context_length}。FP16，B = 1，S = {S}：KV Cache 占多少 GiB？",
                       cache / 2**30, "GiB",
                       f"每个 token {format_bytes(m.kv_bytes_per_token('fp16'))}，{S} 个 token 共 {cache:,} 字节 = "
                       f"{format_bytes(cache)}：缓存和 S 成正比，本章原文的例子只有这么长的一半，缓存也是一半。",
                       "先算每个 token 的 K/V 字节数（2 × L × H × D × 2），再乘 S，最后除以 2³⁰。"),
        NumberQuestion("3.4", f"同一个缓存（{m.label}，FP16，S = {S}，B = 1）如果用 GB（10⁹ 字节）来写，是多少 GB？（写到小数点后两位）",
                       cache / 10**9, "GB",
                       f"{cache:,} 字节 ÷ 10⁹ ≈ {cache / 10**9:.2f} GB，比 GiB 的数字大约 {2**30 / 10**9 - 1:.0%}：GiB 是 2³⁰ = 1,073,741,824 字节。"
                       f"硬盘厂商写的 GB 通常是 10⁹ 字节；显卡规格表上的「80 GB」其实是 80 GiB（本章的显卡表：A100 80 GB 正好 "
                       f"{GPU_PRESETS['A100 80 GB'].memory_mib:,} MiB）。PyTorch 和本课程打印的都是 GiB。",
                       "1 GiB = 2³⁰ 字节，1 GB = 10⁹ 字节：先换回字节数，再除以 10⁹。", rel_tol=0.005),
        NumberQuestion("3.4", f"{big.label}：{big.n_layer} 层，{big.n_head} 个查询头，但只有 {big.n_kv_head} 个 KV 头（GQA），"
                              f"头维度 {big.head_dim}。FP16，B = 1，S = {S}：KV Cache 占多少 GiB？",
                       big.kv_cache_bytes(S, 1, "fp16") / 2**30, "GiB",
                       f"公式里的 H 是 KV 头数 {big.n_kv_head}。模型大了约 {big.n_params / m.n_params:.0f} 倍，"
                       f"缓存却比 {m.label} 的 {format_bytes(cache)} 还小；按 {big.n_head} 个头算会多算 "
                       f"{big.n_head // big.n_kv_head} 倍。",
                       "公式里的 H 用 KV 头数，不用查询头数。"),
        ChoiceQuestion("3.4", f"{m.label}，FP16 权重和 FP16 缓存，S = {S}，批次 B = {B}，放在 {gpu.name} 上，"
                              f"按本章的做法只规划显存的 {float(plan.usable):.0%}。放得下吗？", (
            C("放得下", plan.fits, f"权重 {format_bytes(plan.weight_bytes)} + KV Cache {format_bytes(plan.cache_bytes)} = {used}，"
              f"可用 {budget}；S = {S} 时最多能放 B = {plan.largest_batch}。"),
            C("放不下：KV Cache 就超过了显存", not plan.fits and plan.cache_bytes > plan.budget_bytes,
              f"KV Cache 是 {format_bytes(plan.cache_bytes)}，可用 {budget}；加上权重一共 {used}。"),
            C("放不下：权重加缓存超了", not plan.fits and plan.cache_bytes <= plan.budget_bytes,
              f"权重 {format_bytes(plan.weight_bytes)} + KV Cache {format_bytes(plan.cache_bytes)} = {used}，可用 {budget}。"))),
    ]


def _memory_estimate_checkpoint_en(m, big, S, B, cache, gpu, plan, used) -> list:
    C = Choice
    budget = f"{format_bytes(plan.budget_bytes)} ({float(plan.usable):.0%} of {format_bytes(gpu.memory_bytes)})"
    return [
        NumberQuestion("3.4", f"{m.label} has the same shape as LLaMA-7B ({m.n_layer} layers, {m.n_kv_head} KV heads, "
                              f"head dimension {m.head_dim}) and a context length of {m.context_length}. FP16, B = 1, "
                              f"S = {S}: how many GiB does the KV cache take?",
                       cache / 2**30, "GiB",
                       f"{format_bytes(m.kv_bytes_per_token('fp16'))} per token, {cache:,} bytes = "
                       f"{format_bytes(cache)} for {S} tokens: the cache is proportional to S, and the example in "
                       "this chapter's original text is half as long, so its cache is half as large.",
                       "First work out one token's K/V bytes (2 × L × H × D × 2), multiply by S, then divide by 2³⁰."),
        NumberQuestion("3.4", f"The same cache ({m.label}, FP16, S = {S}, B = 1) written in GB (10⁹ bytes): how many "
                              "GB is it? (To two decimal places.)",
                       cache / 10**9, "GB",
                       f"{cache:,} bytes ÷ 10⁹ ≈ {cache / 10**9:.2f} GB, a number about {2**30 / 10**9 - 1:.0%} "
                       "larger than in GiB: a GiB is 2³⁰ = 1,073,741,824 bytes. Disk makers' GB are usually 10⁹ "
                       "bytes; the \"80 GB\" on a GPU's spec sheet is in fact 80 GiB (this chapter's GPU table: the "
                       f"A100 80 GB has exactly {GPU_PRESETS['A100 80 GB'].memory_mib:,} MiB). PyTorch and this "
                       "course print GiB.",
                       "1 GiB = 2³⁰ bytes, 1 GB = 10⁹ bytes: go back to bytes first, then divide by 10⁹.",
                       rel_tol=0.005),
        NumberQuestion("3.4", f"{big.label}: {big.n_layer} layers, {big.n_head} query heads but only {big.n_kv_head} "
                              f"KV heads (GQA), head dimension {big.head_dim}. FP16, B = 1, S = {S}: how many GiB "
                              "does the KV cache take?",
                       big.kv_cache_bytes(S, 1, "fp16") / 2**30, "GiB",
                       f"The H in the formula is the number of KV heads, {big.n_kv_head}. The model is about "
                       f"{big.n_params / m.n_params:.0f} times larger, yet its cache is smaller than "
                       f"{m.label}'s {format_bytes(cache)}; counting {big.n_head} heads would overstate it "
                       f"{big.n_head // big.n_kv_head} times.",
                       "The H in the formula is the number of KV heads, not of query heads."),
        ChoiceQuestion("3.4", f"{m.label} with FP16 weights and an FP16 cache, S = {S}, batch B = {B}, on an "
                              f"{gpu.name}, planning on only {float(plan.usable):.0%} of its memory as this chapter "
                              "does. Does it fit?", (
            C("It fits", plan.fits, f"Weights {format_bytes(plan.weight_bytes)} + KV cache "
              f"{format_bytes(plan.cache_bytes)} = {used}, with {budget} usable; at S = {S} at most "
              f"B = {plan.largest_batch} fits."),
            C("It does not fit: the KV cache alone is larger than the memory",
              not plan.fits and plan.cache_bytes > plan.budget_bytes,
              f"The KV cache is {format_bytes(plan.cache_bytes)}, with {budget} usable; {used} with the weights."),
            C("It does not fit: weights plus cache are too much", not plan.fits and plan.cache_bytes <= plan.budget_bytes,
              f"Weights {format_bytes(plan.weight_bytes)} + KV cache {format_bytes(plan.cache_bytes)} = {used}, "
              f"with {budget} usable."))),
    ]


CHECKPOINTS: dict[str, Callable[[], list]] = {
    "3.1": decode_checkpoint, "3.2": storage_checkpoint, "3.3": prefill_decode_checkpoint,
    "3.4": memory_estimate_checkpoint,
}


def checkpoint_questions(section: str) -> list:
    """The questions of chapter ``section``'s checkpoint ("3.1" ... "3.4")."""
    if section not in CHECKPOINTS:
        raise ValueError(f"section must be one of {sorted(CHECKPOINTS)}, got {section!r}")
    return CHECKPOINTS[section]()


def checkpoint(section: str) -> Checkpoint:
    """Chapter ``section``'s checkpoint as a widget: predict each answer, then read why."""
    return Checkpoint(checkpoint_questions(section))


# -- keys of the in-text 小任务 ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Task:
    """A 小任务 in a chapter's prose: ``quote`` is a phrase of its text (how the notebook's task is found), ``key``
    computes its answer as one markdown sentence."""

    notebook: str
    quote: str
    key: Callable[[], str]


def heads_agree_key() -> str:
    """3.1's walkthrough: the steps where heads 0 and 1 of layer 0 attend most to the same token (the demo model
    of the course's language, the chapter's prompt in that language and its step count), said in that language."""
    model, tok = load_demo_model("cpu")
    prompt = decode.PROMPTS.say("walkthrough")
    steps = decode.decode_walkthrough(model, tok, prompt, steps=WALKTHROUGH_STEPS)
    agree = decode.steps_where_heads_agree(steps, layer=0, head_a=0, head_b=1)
    if get_language() == "en":
        shown = ("step " if len(agree) == 1 else "steps ") + (
            " and ".join(str(s) for s in agree) if len(agree) < 3 else
            ", ".join(str(s) for s in agree[:-1]) + f" and {agree[-1]}")
        return (f"With the demo model, the prompt \"{prompt}\" and {len(steps)} steps (the settings of this chapter's "
                "step-by-step panel), heads 0 and 1 of layer 0 attend most to the same token at "
                f"{shown} (computed by `decode.steps_where_heads_agree(steps, layer=0, head_a=0, head_b=1)`; the cell "
                "below the panel asserts that this is neither none nor all of the steps).")
    shown = "、".join(f"第 {s} 步" for s in agree)
    return (f"演示模型、提示词「{prompt}」、{len(steps)} 步（本章「逐步播放」面板的设置）里，第 0 层的第 0 头和第 1 头最关注同一个"
            f" token 的是：{shown}（由 `decode.steps_where_heads_agree(steps, layer=0, head_a=0, head_b=1)` 算出；"
            "面板下面一格断言它既不是空的、也不是全部的步）。")


WALKTHROUGH_STEPS = 10  # the walkthrough's steps in 3.1's cell (decode_walkthrough(..., steps=10))

TASKS: tuple[Task, ...] = (
    Task("01_autoregressive_decode.ipynb", "找出这两个头最关注**同一个** token 的所有步", heads_agree_key),
)
