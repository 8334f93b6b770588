"""Checkpoints of chapters 3.1-3.4 and the keys of the chapters' in-text 小任务.

A checkpoint closes a chapter, after its 小结: 3-5 questions that put a case the chapter did not print and ask the
learner to predict it (a number or a choice). The first answer to each is the prediction: it is graded, then the
explanation appears (:class:`kvlab.viz.quiz.Checkpoint`). Every numeric key and every "which is right" is computed
by kvlab (the demo model's configuration, :mod:`kvlab.costs`, :mod:`kvlab.memory`, the presets, 3.4's fit plan),
never typed. A notebook shows one with ``checkpoint("3.1")``; the teacher's KEYS.md lists the keys
(:mod:`kvlab.teacher.keys`).

A 小任务 (a small task inside a chapter's prose) has its key in :data:`TASKS`: a phrase of the task's text, to find
it in the notebook, and a function that computes the answer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..costs import attention_flops, pass_cost
from ..demo import load_demo_model
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


def memory_estimate_checkpoint() -> list:
    """3.4: a 7B model's cache at its full context in GiB and in GB, a GQA 70B model's, and whether a batch fits."""
    C = Choice
    m, big = MODEL_PRESETS[FIT_PRESET], MODEL_PRESETS[GQA_PRESET]
    S, B = FIT_S, FIT_B
    cache = m.kv_cache_bytes(S, 1, "fp16")
    gpu = GPU_PRESETS[FIT_GPU]
    plan = plan_fit(FIT_PRESET, gpu.memory_bytes, S, B)
    used = format_bytes(plan.weight_bytes + plan.cache_bytes)
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
    """3.1's walkthrough: the steps where heads 0 and 1 of layer 0 attend most to the same token (demo model, the
    chapter's prompt and step count)."""
    model, tok = load_demo_model("cpu")
    steps = decode.decode_walkthrough(model, tok, decode.DEFAULT_PROMPT, steps=WALKTHROUGH_STEPS)
    agree = decode.steps_where_heads_agree(steps, layer=0, head_a=0, head_b=1)
    shown = "、".join(f"第 {s} 步" for s in agree)
    return (f"演示模型、提示词「{decode.DEFAULT_PROMPT}」、{len(steps)} 步（本章「逐步播放」面板的设置）里，第 0 层的第 0 头和第 1 头最关注同一个"
            f" token 的是：{shown}（由 `decode.steps_where_heads_agree(steps, layer=0, head_a=0, head_b=1)` 算出；"
            "面板下面一格断言它既不是空的、也不是全部的步）。")


WALKTHROUGH_STEPS = 10  # the walkthrough's steps in 3.1's cell (decode_walkthrough(..., steps=10))

TASKS: tuple[Task, ...] = (
    Task("01_autoregressive_decode.ipynb", "找出这两个头最关注**同一个** token 的所有步", heads_agree_key),
)
