"""Exercises of chapter 3.1: write one cached attention step and run it inside the decode loop; predict the
K/V projections and attention scores of a generation, with and without a cache, and check them on the trace."""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

import torch

from ..cache import KVCache
from ..config import ModelConfig
from ..generation import generate
from ..language import get_language
from ..measure import count_projections
from ..memory import stored_tokens
from ..model import ToyTransformer
from ..phrases import Phrasebook
from ..tokenizer import TOKENIZERS
from . import checker
from .checker import Exercise, ExerciseText, LearnerError, Verdict, right, todo, wrong
from .tools import demo, repeat_kv, rope

NOTEBOOK = "01_autoregressive_decode.ipynb"
SETUP = """import torch

from kvlab.exercises import ch01
from kvlab.exercises.tools import repeat_kv, rope"""

LOGIT_TOLERANCE = 1e-4  # a right step stays below 1e-5 on every case (float rounding only)

# The demo model's cases run on prompts in that model's language (each of the English ones checked on the English
# demo model: "A language" 2 tokens; "A computer" and "A small model" 3 each, a batch of equal lengths as the Chinese).
CASE_PROMPTS = Phrasebook("ch01.prompts", {
    "zh": {"one": "人工", "batch_a": "计算机", "batch_b": "大语言"},
    "en": {"one": "A language", "batch_a": "A computer", "batch_b": "A small model"},
})

# What the two graders say, in the course's language when they say it (the checker's own words are
# kvlab.exercises.phrases.CHECKER's).
FEEDBACK = Phrasebook("ch01.feedback", {
    "zh": {
        # 1. one cached attention step
        "case.1": "用例 1（演示模型，GQA：4 个查询头、2 个 KV 头，提示词「{one}」）",
        "case.2": "用例 2（演示模型，批次 2：「{batch_a}」「{batch_b}」）",
        "case.3": "用例 3（随机权重的 MHA：4 个查询头、4 个 KV 头，批次 2）",
        "case.4": "用例 4（随机权重的 GQA：8 个查询头、2 个 KV 头）",
        "case.5": "用例 5（随机权重的 MQA：4 个查询头、1 个 KV 头，提示词只有 1 个 token）",
        "case_short": "用例 {number}",
        "returned_none": "函数返回了 None：最后要 return 注意力的输出",
        "not_a_tensor": "函数应当返回一个张量，返回的是 {kind}",
        "bad_shape": "返回的形状是 {got}，应为 [B, H, 1, D] = {want}",
        "gqa_extra": "这个用例有 {heads} 个查询头、{kv_heads} 个 KV 头：q 与 K/V 相乘之前，先用 repeat_kv 把 K/V 扩成与查询头一样多",
        "where": "{case}，第 {layer} 层，pos = {pos}",
        "case_extra": "{label}。{extra}",
        "case_problem": "{label}：{problem}",
        "other_slots": "缓存里第 {pos} 个位置以外的内容被改动了（位置 {changed}）：新 token 只能写在第 pos = {pos} 个位置",
        "not_written": "新 token 的 {name} 没有写进缓存的第 pos = {pos} 个位置：下一步就读不到它了",
        "v_rotated": "写进缓存的 V 被旋转过了：V 不做 RoPE，只有 Q 和 K 按位置旋转",
        "k_unrotated": "写进缓存的 K 没有按位置 pos = {pos} 旋转：要么漏了 RoPE，要么漏了位置偏移、按位置 0 旋转了"
                       "（位置 0 的旋转角是 0，两者一样）。缓存里的 K 都是按各自的真实位置旋转过的",
        "slot_wrong": "写进缓存第 pos = {pos} 个位置的 {name} 不对",
        "q_unrotated": "Q 没有按位置 pos = {pos} 旋转：要么漏了 RoPE，要么按位置 0 旋转了（两者一样）。"
                       "缓存里的 K 旋转过，新 token 的 Q 也要按它的真实位置旋转",
        "whole_cache": "注意力读了整个预分配的缓存（{slots} 个位置），包括还没有填的位置：只能读前 pos + 1 个",
        "new_left_out": "注意力漏掉了新 token 自己：写入缓存之后，要读前 pos + 1 个位置",
        "tiled": "GQA 的头对应错了：查询头 h 应当读第 h // n_rep 个 KV 头（repeat_kv 的排列），不是第 h % H_kv 个",
        "unscaled": "分数没有除以 √D",
        "off_by": "对一组随机输入，你的输出与正确结果最多相差 {diff:.2e}",
        "step_todo": "写完 cached_attention_step 的函数体，再运行这一格。",
        "tokens_from": "生成的 token 从第 {step} 步起不同",
        "tokens_same": "生成的 token 碰巧都一样，但 logits 已经不对了",
        "diverges": "{label}：第 {step} 步开始与无缓存的参考不同（第 1 步是预填充，由模型完成；从第 2 步起每一层都调用你的函数）。",
        "logits_off": "第 {step} 步的 logits 最大相差 {diff:.3g}（浮点误差不超过 {tol:g}）；{tokens}",
        "reference": "无缓存（参考）生成：{text}",
        "yours": "用你的函数生成：{text}",
        "cause": "原因（检查程序用一组随机输入单独运行了一步，pos = 5）：{cause}",
        "step_right": "全部 {cases} 个用例通过！在 MHA、GQA、MQA 三种头的布局上，你的函数替模型跑了 {steps} 个解码步，"
                      "每一步的 logits 都与无缓存的参考相差不到 {tol:g}，生成的 token 完全相同。",
        # 2. how much work
        "item.kv_none": "无缓存时投影 K/V 的 token 数",
        "item.kv_cached": "有缓存时投影 K/V 的 token 数",
        "item.scores_none": "无缓存时的注意力分数",
        "item.scores_cached": "有缓存时的注意力分数",
        "work_todo": "在 predict_work 里把四个 None 换成你的公式。",
        "work_case": "用例 p = {p}，n = {n}",
        "four_numbers": "{case}：predict_work 应当返回四个数（一个元组），请保留最后的 return 那一行。",
        "work_none_left": "predict_work 还有没填的 None。",
        "work_item": "{item}：trace 里数出 {want:,}，你的预测 {got}",
        "one_pass_too_many": "原因：你多算了一次前向计算。n 个新 token 只需要 n 次：1 次预填充 + n − 1 次解码；"
                             "最后一个 token 生成之后不再送回模型。",
        "approximation": "原因：n³/3、n²/2 只是 p ≪ n、n 很大时的近似；这里要精确的数：无缓存是每次前向 t² 的和，"
                         "有缓存是预填充的 p² 加上之后每一步的 t。",
        "masked_half": "原因：你只数了因果掩码下可见的分数。kvlab 每次都把 t×t（或 1×t）个分数全部算出来，"
                       "再用掩码遮住看不见的部分，这里要数算出来的分数。",
        "work_mismatch": "{case}：和 trace 对不上。",
        "work_right": "全部 {cases} 组 p、n 都与 trace 一致！例如 p = 16、n = 40 时，无缓存算 {none:,} 个分数，"
                      "有缓存只算 {kv:,} 个。",
    },
    "en": {
        "case.1": "Case 1 (the demo model, GQA: 4 query heads, 2 KV heads, prompt \"{one}\")",
        "case.2": "Case 2 (the demo model, a batch of 2: \"{batch_a}\", \"{batch_b}\")",
        "case.3": "Case 3 (random-weight MHA: 4 query heads, 4 KV heads, a batch of 2)",
        "case.4": "Case 4 (random-weight GQA: 8 query heads, 2 KV heads)",
        "case.5": "Case 5 (random-weight MQA: 4 query heads, 1 KV head, a prompt of just 1 token)",
        "case_short": "Case {number}",
        "returned_none": "The function returned None: it must end by returning the attention output",
        "not_a_tensor": "The function should return a tensor; it returned a {kind}",
        "bad_shape": "The returned shape is {got}; it should be [B, H, 1, D] = {want}",
        "gqa_extra": "This case has {heads} query heads and {kv_heads} KV heads: before multiplying q with K/V, expand "
                     "K/V with repeat_kv to as many heads as there are query heads",
        "where": "{case}, layer {layer}, pos = {pos}",
        "case_extra": "{label}. {extra}",
        "case_problem": "{label}: {problem}",
        "other_slots": "The cache changed outside slot {pos} (slots {changed}): the new token may be written only at "
                       "slot pos = {pos}",
        "not_written": "The new token's {name} was not written into slot pos = {pos} of the cache: the next step "
                       "cannot read it",
        "v_rotated": "The V written into the cache was rotated: V gets no RoPE; only Q and K are rotated by position",
        "k_unrotated": "The K written into the cache was not rotated for position pos = {pos}: either RoPE is missing, "
                       "or the position offset is, rotating for position 0 (whose angle is 0, so the two look the "
                       "same). Every K in the cache is rotated for its own true position",
        "slot_wrong": "The {name} written into slot pos = {pos} of the cache is wrong",
        "q_unrotated": "Q was not rotated for position pos = {pos}: either RoPE is missing, or it rotated for position "
                       "0 (the same thing). The K in the cache are rotated, so the new token's Q must be rotated for "
                       "its true position too",
        "whole_cache": "Attention read the whole preallocated cache ({slots} slots), including slots not filled yet: "
                       "read only the first pos + 1",
        "new_left_out": "Attention left out the new token itself: after writing it into the cache, read the first "
                        "pos + 1 slots",
        "tiled": "GQA heads matched wrongly: query head h should read KV head h // n_rep (repeat_kv's order), not "
                 "KV head h % H_kv",
        "unscaled": "The scores were not divided by √D",
        "off_by": "On a set of random inputs, your output differs from the right one by up to {diff:.2e}",
        "step_todo": "Write the body of cached_attention_step, then run this cell again.",
        "tokens_from": "the generated tokens differ from step {step} on",
        "tokens_same": "the generated tokens happen to be the same, but the logits are already wrong",
        "diverges": "{label}: departs from the no-cache reference from step {step} on (step 1 is the prefill, done by "
                    "the model; from step 2 on every layer calls your function).",
        "logits_off": "At step {step} the logits differ by up to {diff:.3g} (float rounding stays below {tol:g}); "
                      "{tokens}",
        "reference": "Generated without a cache (the reference): {text}",
        "yours": "Generated with your function: {text}",
        "cause": "Cause (the check also ran one step on its own on random inputs, pos = 5): {cause}",
        "step_right": "All {cases} cases pass! Across the MHA, GQA and MQA head layouts, your function ran {steps} "
                      "decode steps for the model, every step's logits within {tol:g} of the no-cache reference and "
                      "exactly the same tokens generated.",
        "item.kv_none": "tokens whose K/V are projected without a cache",
        "item.kv_cached": "tokens whose K/V are projected with a cache",
        "item.scores_none": "attention scores without a cache",
        "item.scores_cached": "attention scores with a cache",
        "work_todo": "Replace the four None in predict_work with your formulas.",
        "work_case": "Case p = {p}, n = {n}",
        "four_numbers": "{case}: predict_work should return four numbers (a tuple); keep the return line at the end.",
        "work_none_left": "predict_work still has a None to fill in.",
        "work_item": "{item}: {want:,} counted in the trace, {got} predicted",
        "one_pass_too_many": "Cause: you counted one forward pass too many. n new tokens take only n: 1 prefill + "
                             "n − 1 decode steps; the last token is not fed back to the model once it is generated.",
        "approximation": "Cause: n³/3 and n²/2 are only approximations for p ≪ n and large n; exact numbers are wanted "
                         "here: without a cache, the sum of t² over the passes; with a cache, the prefill's p² plus "
                         "t for every step after it.",
        "masked_half": "Cause: you counted only the scores the causal mask leaves visible. kvlab computes all t×t (or "
                       "1×t) scores every time and then masks the ones that cannot be seen; count the scores "
                       "computed.",
        "work_mismatch": "{case}: does not match the trace.",
        "work_right": "All {cases} pairs of p and n match the trace! For example, with p = 16 and n = 40 there are "
                      "{none:,} scores without a cache and only {kv:,} with one.",
    },
})
say = FEEDBACK.say

# == 1. one cached attention step ==========================================================================
STEP_STUB = '''def cached_attention_step(q, k_new, v_new, k_cache, v_cache, pos):
    # 1. rotate q and k_new for position pos: rope(x, pos)
    # 2. write k_new and v_new into slot pos of k_cache and v_cache
    # 3. GQA: repeat_kv(x, n_rep) over the filled slots 0 .. pos only
    # 4. return softmax(q K^T / sqrt(D)) V, shaped [B, H, 1, D]
    return None'''

CACHED_STEP = Exercise(
    key="ch01.cached_step",
    title="练习 1：亲手写一步有缓存的注意力",
    task="""解码时，每一层只为新 token 计算 Q、K、V，旧 token 的 K/V 从缓存里读。下面的函数就是**一层在一个解码步里**要做的全部事情。检查程序会把它放进真实模型的解码循环：预填充照常由模型完成，之后每个解码步的每一层都调用你的函数，再把每一步的 logits 和生成的 token 与 `generate(cache="none")` 逐步比较，报告第一个不同的步。

参数（B 是批次，H 是查询头数，H_kv 是 KV 头数，D 是头维度）：

* `q`：`[B, H, 1, D]`，新 token 的查询，**还没有**做 RoPE；
* `k_new`、`v_new`：`[B, H_kv, 1, D]`，新 token 的 K 和 V，K **还没有**做 RoPE；
* `k_cache`、`v_cache`：`[B, H_kv, S_max, D]`，这一层预分配的缓存。前 `pos` 个位置已经填好（存的 K 都已经按各自的位置旋转过），后面的位置还没有用；
* `pos`：缓存里已有的 token 数，也就是新 token 的位置（从 0 数起）。

要做的四件事：

1. 用 `rope(x, pos)` 把 `q` 和 `k_new` 按位置 `pos` 旋转；
2. 把新 token 的 K、V 写进缓存的第 `pos` 个位置；
3. 分组查询注意力（GQA）：每个 KV 头服务 `n_rep = H // H_kv` 个查询头，`repeat_kv(x, n_rep)` 把 `[B, H_kv, t, D]` 扩成 `[B, H, t, D]`。只取已经填好的前 `pos + 1` 个位置（新 token 自己也在内）；
4. 返回 $\\mathrm{softmax}(QK^\\top/\\sqrt{D})\\,V$，形状 `[B, H, 1, D]`。

检查用到五个用例：演示模型（4 个查询头、2 个 KV 头）的一条和两条提示词，以及三个随机权重的小模型：多头注意力（MHA，每个查询头有自己的 K/V）、8 个查询头共用 2 个 KV 头的 GQA、所有查询头共用 1 个 KV 头的多查询注意力（MQA）。""",
    stub=STEP_STUB,
    check="ch01.check_cached_step(cached_attention_step)",
    hints=(
        "新 token 在位置 pos：q 和 k_new 都用 rope(x, pos) 旋转；写入缓存用切片 k_cache[:, :, pos:pos + 1] = k_new。",
        "n_rep = q.shape[1] // k_cache.shape[1]；k = repeat_kv(k_cache[:, :, :pos + 1], n_rep)；"
        "scores = q @ k.transpose(-2, -1) / D ** 0.5；最后 torch.softmax(scores, dim=-1) @ v。",
    ),
    english=ExerciseText(
        title="Exercise 1: write one cached attention step yourself",
        task="""When decoding, each layer computes Q, K and V for the new token only and reads the old tokens' K/V from the cache. The function below is everything **one layer does in one decode step**. The check puts it into a real model's decode loop: the model does the prefill as usual, then every layer of every decode step calls your function; each step's logits and generated token are compared with `generate(cache="none")`, step by step, and the first step that differs is reported.

Arguments (B is the batch, H the number of query heads, H_kv the number of KV heads, D the head dimension):

* `q`: `[B, H, 1, D]`, the new token's query, **not yet** rotated by RoPE;
* `k_new`, `v_new`: `[B, H_kv, 1, D]`, the new token's K and V, K **not yet** rotated by RoPE;
* `k_cache`, `v_cache`: `[B, H_kv, S_max, D]`, this layer's preallocated cache. The first `pos` slots are filled (each K stored there is already rotated for its own position); the slots after them are unused;
* `pos`: the number of tokens already in the cache, which is also the new token's position (counting from 0).

Four things to do:

1. rotate `q` and `k_new` for position `pos` with `rope(x, pos)`;
2. write the new token's K and V into slot `pos` of the cache;
3. grouped-query attention (GQA): each KV head serves `n_rep = H // H_kv` query heads, and `repeat_kv(x, n_rep)` expands `[B, H_kv, t, D]` to `[B, H, t, D]`. Take only the first `pos + 1` slots, the filled ones (the new token's own included);
4. return $\\mathrm{softmax}(QK^\\top/\\sqrt{D})\\,V$, shaped `[B, H, 1, D]`.

The check uses five cases: the demo model (4 query heads, 2 KV heads) with one prompt and with two, and three small random-weight models: multi-head attention (MHA, every query head with K/V of its own), GQA with 8 query heads sharing 2 KV heads, and multi-query attention (MQA), where all query heads share 1 KV head.""",
        hints=(
            "The new token is at position pos: rotate both q and k_new with rope(x, pos); write into the cache with "
            "a slice, k_cache[:, :, pos:pos + 1] = k_new.",
            "n_rep = q.shape[1] // k_cache.shape[1]; k = repeat_kv(k_cache[:, :, :pos + 1], n_rep); "
            "scores = q @ k.transpose(-2, -1) / D ** 0.5; finally torch.softmax(scores, dim=-1) @ v.",
        ),
    ),
)


@dataclass(frozen=True)
class LoopCase:
    number: int
    model: str  # "demo" or a key of RANDOM_LAYOUTS
    inputs: tuple[tuple[int, ...], ...] | tuple[str, ...]  # token ids, or keys of CASE_PROMPTS (the demo model's)
    new_tokens: int

    def texts(self, lang: str | None = None) -> tuple[str, ...]:
        """A demo case's prompts in ``lang`` (default: the course's language); () for a random-weight model's."""
        return tuple(CASE_PROMPTS.text(key, lang) for key in self.inputs) if self.model == "demo" else ()

    def named(self, lang: str | None = None) -> str:
        """The case as the feedback names it, its prompts in ``lang``, in the course's language."""
        fields = {key: CASE_PROMPTS.text(key, lang) for key in self.inputs} if self.model == "demo" else {}
        return say(f"case.{self.number}", **fields)

    @property
    def label(self) -> str:
        return self.named()

    @property
    def short(self) -> str:
        return say("case_short", number=self.number)


RANDOM_LAYOUTS = {"mha": (4, 4), "gqa": (8, 2), "mqa": (4, 1)}  # (query heads, KV heads)
LOOP_CASES = (
    LoopCase(1, "demo", ("one",), 12),
    LoopCase(2, "demo", ("batch_a", "batch_b"), 10),
    LoopCase(3, "mha", ((3, 5, 7), (9, 2, 4)), 10),
    LoopCase(4, "gqa", ((11, 4, 60, 2),), 10),
    LoopCase(5, "mqa", ((42,),), 10),
)


def model_language(tokenizer) -> str:
    """The language of the demo model ``tokenizer`` belongs to (else the course's)."""
    return next((code for code, kind in TOKENIZERS.items() if isinstance(tokenizer, kind)), None) or get_language()


@lru_cache(maxsize=None)
def random_model(layout: str) -> ToyTransformer:
    """A small random-weight model with the given head layout, weights scaled up so that attention is sharp
    and every mistake in a step moves the logits far beyond float rounding."""
    n_head, n_kv_head = RANDOM_LAYOUTS[layout]
    config = ModelConfig(vocab_size=97, d_model=64, n_layer=2, n_head=n_head, n_kv_head=n_kv_head, max_seq_len=64)
    model = ToyTransformer(config, seed=len(layout) + n_kv_head).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.endswith("norm.weight"):
                p.mul_(10.0)
    return model


def _case_model(case: LoopCase):
    """The case's model, its prompts as ids, how its tokens are shown, and the case's name (the demo model's prompts
    in that model's language)."""
    if case.model == "demo":
        model, tok = demo()
        lang = model_language(tok)
        return (model, [tok.encode(p) for p in case.texts(lang)], lambda ids: tok.decode(ids).replace("\n", "⏎"),
                case.named(lang))
    return (random_model(case.model), [list(p) for p in case.inputs], lambda ids: " ".join(map(str, ids)),
            case.named())


def _shape_problem(out, q: torch.Tensor) -> str | None:
    if out is None:
        return say("returned_none")
    if not isinstance(out, torch.Tensor):
        return say("not_a_tensor", kind=type(out).__name__)
    if tuple(out.shape) != tuple(q.shape):
        return say("bad_shape", got=list(out.shape), want=list(q.shape))
    return None


@contextmanager
def learner_attention(model: ToyTransformer, fn, label: str, short: str | None = None):
    """Every layer's decode step (one new token, with a cache) calls ``fn``; prefill runs the model's own code.
    ``label`` names the case in the feedback, ``short`` (default: ``label`` up to its bracket) where it failed."""
    short = short or label.split("（")[0].split(" (")[0]
    def patched(attn):
        original = attn.forward

        def forward(x, cos, sin, mask, cache, impl, probe):
            if cache is None or x.shape[1] != 1:
                return original(x, cos, sin, mask, cache, impl, probe)
            B = x.shape[0]
            q, k, v = attn.wqkv(x).split([attn.q_dim, attn.kv_dim, attn.kv_dim], dim=-1)  # [B, 1, *]
            q, k, v = attn.heads(q, attn.n_head), attn.heads(k, attn.n_kv_head), attn.heads(v, attn.n_kv_head)
            gqa = attn.n_head != attn.n_kv_head
            extra = say("gqa_extra", heads=attn.n_head, kv_heads=attn.n_kv_head) if gqa else ""
            where = say("where", case=short, layer=attn.layer, pos=cache.length)
            out = checker.call(fn, q, k, v, cache.k[attn.layer], cache.v[attn.layer], cache.length,
                               case=where, extra=say("case_extra", label=label, extra=extra).rstrip())
            problem = _shape_problem(out, q)
            if problem:
                raise LearnerError(wrong(say("case_problem", label=label, problem=problem)))
            if probe is not None:
                probe.k_tokens.append(1)
                probe.v_tokens.append(1)
            return attn.wo(out.to(x.dtype).transpose(1, 2).reshape(B, 1, attn.q_dim))  # [B, H, 1, D] -> [B, 1, H*D]
        return forward

    for block in model.layers:
        block.attn.forward = patched(block.attn)
    try:
        yield model
    finally:
        for block in model.layers:
            del block.attn.forward  # back to the class's own forward


@dataclass(frozen=True)
class Divergence:
    step: int  # 1-based: the first step whose logits (or token) differ; step 1 is the prefill
    token_step: int | None  # the first step whose token differs (None: the same tokens, by luck)
    reference: str  # the new tokens without a cache, as text
    got: str
    max_logit_diff: float  # at ``step``
    label: str = ""  # the case as named in the feedback (its prompts in the model's language)


@torch.no_grad()
def first_divergence(case: LoopCase, fn) -> Divergence | None:
    """Generate with ``fn`` as every layer's decode step and compare with ``generate(cache="none")``."""
    model, prompts, show, label = _case_model(case)
    ref = generate(model, prompts, case.new_tokens, cache="none", return_logits=True)
    cache = KVCache(model.config, len(prompts), stored_tokens(len(prompts[0]), case.new_tokens), dtype=model.dtype)
    with learner_attention(model, fn, label, case.short):
        out = generate(model, prompts, case.new_tokens, cache=cache, return_logits=True)
    diff = (out.logits - ref.logits).abs().nan_to_num(math.inf).amax(dim=-1).amax(dim=0)  # [new_tokens]
    differs = (out.new_tokens != ref.new_tokens).any(dim=0) | (diff > LOGIT_TOLERANCE)
    if not bool(differs.any()):
        return None
    step = int(differs.nonzero()[0, 0]) + 1
    tokens_differ = (out.new_tokens != ref.new_tokens).any(dim=0)
    token_step = int(tokens_differ.nonzero()[0, 0]) + 1 if bool(tokens_differ.any()) else None
    return Divergence(step, token_step, show(ref.new_tokens[0].tolist()), show(out.new_tokens[0].tolist()),
                      float(diff[step - 1]), label)


# -- what exactly went wrong: one step on known random inputs ------------------------------------------
def reference_step(q, k_new, v_new, k_cache, v_cache, pos, rotate_q=True, end=None, tile=False, scale=True):
    """The right step, and (through its switches) the mistakes :func:`diagnose` recognises."""
    q = rope(q, pos) if rotate_q else q
    k_cache[:, :, pos:pos + 1] = rope(k_new, pos)
    v_cache[:, :, pos:pos + 1] = v_new
    n_rep = q.shape[1] // k_cache.shape[1]
    end = pos + 1 if end is None else end
    if tile:  # head h reads KV head h % H_kv instead of h // n_rep
        k, v = k_cache[:, :, :end].repeat(1, n_rep, 1, 1), v_cache[:, :, :end].repeat(1, n_rep, 1, 1)
    else:
        k, v = repeat_kv(k_cache[:, :, :end], n_rep), repeat_kv(v_cache[:, :, :end], n_rep)  # [B, H, end, D]
    scores = q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale else 1.0)  # [B, H, 1, end]
    return torch.softmax(scores, dim=-1) @ v


def _probe_inputs(pos: int = 5, s_max: int = 9):
    g = torch.Generator().manual_seed(7)
    B, H, H_kv, D = 2, 4, 2, 8
    q, k_new, v_new = (torch.randn(B, h, 1, D, generator=g) for h in (H, H_kv, H_kv))
    k_cache, v_cache = (torch.randn(B, H_kv, s_max, D, generator=g) for _ in range(2))
    return q, k_new, v_new, k_cache, v_cache, pos


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, atol=1e-5, rtol=1e-4))


def _slot_problem(name: str, before, after, want, raw, pos: int) -> str | None:
    """What the learner's function did to one cache tensor: wrote slot ``pos`` right, or what instead."""
    slot = after[:, :, pos:pos + 1]
    others = torch.cat([before[:, :, :pos], before[:, :, pos + 1:]], dim=2)
    others_after = torch.cat([after[:, :, :pos], after[:, :, pos + 1:]], dim=2)
    if not _same(others_after, others):
        changed = sorted({int(i) for i in (after - before).abs().amax(dim=(0, 1, 3)).nonzero()[:, 0]} - {pos})
        return say("other_slots", pos=pos, changed=changed[:4])
    if _same(slot, want):
        return None
    if _same(slot, before[:, :, pos:pos + 1]):
        return say("not_written", name=name, pos=pos)
    if name == "V" and _same(slot, rope(raw, pos)):
        return say("v_rotated")
    if name == "K" and _same(slot, raw):  # rope(x, 0) is x itself: position 0 turns by angle 0
        return say("k_unrotated", pos=pos)
    return say("slot_wrong", pos=pos, name=name)


def diagnose(fn) -> str | None:
    """Run ``fn`` once on random GQA inputs (4 query heads, 2 KV heads, pos = 5 of 9 slots, the unused slots
    holding leftovers) and name the first mistake it shows; None when this step comes out right."""
    q, k_new, v_new, k_cache, v_cache, pos = _probe_inputs()
    want_k, want_v = k_cache.clone(), v_cache.clone()
    want = reference_step(q, k_new, v_new, want_k, want_v, pos)
    got_k, got_v = k_cache.clone(), v_cache.clone()
    try:
        out = fn(q.clone(), k_new.clone(), v_new.clone(), got_k, got_v, pos)
    except Exception:
        return None  # the loop already reported the error with its case
    problem = _shape_problem(out, q)
    if problem:
        return problem
    for name, before, after, target, raw in (("K", k_cache, got_k, want_k[:, :, pos:pos + 1], k_new),
                                             ("V", v_cache, got_v, v_new, v_new)):
        problem = _slot_problem(name, before, after, target, raw, pos)
        if problem:
            return problem
    if _same(out, want):
        return None
    mistakes = (
        (dict(rotate_q=False), "q_unrotated"),
        (dict(end=k_cache.shape[2]), "whole_cache"),
        (dict(end=pos), "new_left_out"),
        (dict(tile=True), "tiled"),
        (dict(scale=False), "unscaled"),
    )
    for switches, message in mistakes:
        if _same(out, reference_step(q, k_new, v_new, k_cache.clone(), v_cache.clone(), pos, **switches)):
            return say(message, pos=pos, slots=k_cache.shape[2])
    return say("off_by", diff=(out - want).abs().max().item())


def grade_cached_step(fn) -> Verdict:
    problem = checker.unwritten(fn, STEP_STUB, "cached_attention_step", say("step_todo"))
    if problem:
        return problem
    problem = checker.refuses_reference(fn, {"reference_step": reference_step})
    if problem:
        return problem
    for case in LOOP_CASES:
        d = first_divergence(case, fn)
        if d is not None:
            cause = diagnose(fn)
            tokens = say("tokens_from", step=d.token_step) if d.token_step else say("tokens_same")
            return wrong(say("diverges", label=d.label or case.label, step=d.step),
                         say("logits_off", step=d.step, diff=d.max_logit_diff, tol=LOGIT_TOLERANCE, tokens=tokens),
                         say("reference", text=d.reference), say("yours", text=d.got),
                         *([say("cause", cause=cause)] if cause else []))
    steps = sum(c.new_tokens - 1 for c in LOOP_CASES)
    return right(say("step_right", cases=len(LOOP_CASES), steps=steps, tol=LOGIT_TOLERANCE))


def check_cached_step(fn):
    return checker.check(CACHED_STEP, grade_cached_step, fn)


# == 2. how much work: K/V projections and attention scores =============================================
WORK_STUB = '''def predict_work(p, n):
    # a prompt of p tokens, n new tokens; per layer (and per head for the scores)
    kv_without_cache = None  # tokens whose K/V are projected, summed over all forward passes
    kv_with_cache = None
    scores_without_cache = None  # attention scores computed, summed over all forward passes
    scores_with_cache = None
    return kv_without_cache, kv_with_cache, scores_without_cache, scores_with_cache'''

WORK = Exercise(
    key="ch01.work",
    title="练习 2：预测计算量，再和 trace 对账",
    task="""提示词有 p 个 token，要生成 n 个新 token。写出一个函数，预测整个生成过程中（所有前向计算加起来）：

* 每层一共为多少个 token 投影了 K/V：无缓存时、有缓存时；
* 每层每头一共算了多少个注意力分数：无缓存时、有缓存时。

数分数时按 kvlab 实际算的数：一次前向计算里，这次送进模型的每个 token（无缓存时是全部 t 个，有缓存的解码步只有 1 个）的查询，与这次计算能看到的全部 t 个 K 各算一个分数（预填充的 p×p 个分数全部算出来，再用因果掩码遮住右上角）。想一想一共有几次前向计算：第 1 次是预填充；最后一个新 token 生成之后，还需要再送回模型吗？

检查程序对几组 `(p, n)` 分别用两种方式真正生成一遍，从 trace 里数出这四个数（和上面「计算量」一节的 `count_projections` 一样），与你的预测比较。""",
    stub=WORK_STUB,
    check="ch01.check_work(predict_work)",
    hints=(
        "n 个新 token 一共需要 n 次前向计算：1 次预填充（看到 p 个 token），然后 n − 1 次解码，"
        "第 i 次解码看到 p + i 个 token。",
        "无缓存：第 k 次计算要为全部 t 个 token 投影 K/V、算 t×t 个分数；有缓存：预填充 p 个 token、p×p 个分数，"
        "之后每次只投影 1 个 token、算 1×t 个分数。",
    ),
    english=ExerciseText(
        title="Exercise 2: predict the work, then check it against the trace",
        task="""A prompt has p tokens and n new tokens are to be generated. Write a function that predicts, for the whole generation (all forward passes added up):

* how many tokens each layer projects K/V for in all: without a cache, and with one;
* how many attention scores each layer and head computes in all: without a cache, and with one.

Count the scores the way kvlab actually computes them: in one forward pass, the query of every token fed to the model in that pass (all t tokens without a cache, just 1 in a cached decode step) gets one score against each of the t keys that pass can see (the prefill computes all p×p scores, then the causal mask hides the upper-right triangle). Think about how many forward passes there are: the first is the prefill; once the last new token is generated, does it need to be fed back to the model?

For a few pairs `(p, n)`, the check really generates both ways, counts these four numbers from the trace (as `count_projections` does in the "work" section above) and compares them with your prediction.""",
        hints=(
            "n new tokens take n forward passes in all: 1 prefill (which sees p tokens), then n − 1 decode steps, "
            "decode step i seeing p + i tokens.",
            "Without a cache, pass k projects K/V for all t tokens and computes t×t scores; with a cache, the prefill "
            "handles p tokens and p×p scores, then every pass projects just 1 token and computes 1×t scores.",
        ),
    ),
)

WORK_CASES = ((1, 1), (2, 3), (6, 10), (16, 40))
WORK_ITEM_KEYS = ("item.kv_none", "item.kv_cached", "item.scores_none", "item.scores_cached")
WORK_ITEMS = tuple(FEEDBACK.text(key, "zh") for key in WORK_ITEM_KEYS)  # the four counts as the Chinese edition names them


@lru_cache(maxsize=None)
def traced_work(p: int, n: int) -> tuple[int, int, int, int]:
    """The four counts of a real generation on the demo model, read from the traces of both runs."""
    model, _ = demo()
    count = count_projections(model, [list(range(1, p + 1))], n)
    return count.none_total, count.kv_total, count.none_scores, count.kv_scores


def _n_passes_mistake(p: int, n: int) -> tuple[int, int, int, int]:
    """The counts if the last new token were fed back too (n decode passes instead of n - 1)."""
    lengths = range(p, p + n + 1)
    return sum(lengths), p + n, sum(t * t for t in lengths), p * p + sum(lengths[1:])


def _approx_scores(n: int) -> tuple:
    """The chapter's large-n approximations, as a learner might type them."""
    return (n**3 / 3, n**2 / 2)


def _half_scores(p: int, n: int) -> tuple[int, int]:
    """Score counts if the masked upper triangle were not computed."""
    lengths = range(p, p + n)
    return sum(t * (t + 1) // 2 for t in lengths), p * (p + 1) // 2 + sum(lengths[1:])


def _count_value(answer):
    """A predicted count as an exact number (numpy's, a 0-d tensor, a float subclass: read by its value), or None."""
    try:
        return checker.parse_number(answer)
    except checker.AnswerError:
        return None


def _shown(answer, value) -> str:
    if value is None:
        return checker.clip(repr(answer))
    return f"{int(value):,}" if value.denominator == 1 else f"{float(value):g}"


def _as_counts(answer) -> tuple | None:
    if not isinstance(answer, (tuple, list)) or len(answer) != 4:
        return None
    return tuple(answer)


def grade_work(fn) -> Verdict:
    problem = checker.unwritten(fn, WORK_STUB, "predict_work", say("work_todo"))
    if problem:
        return problem
    problem = checker.refuses_reference(fn, {"traced_work": traced_work, "count_projections": count_projections})
    if problem:
        return problem
    for p, n in WORK_CASES:
        case = say("work_case", p=p, n=n)
        got = _as_counts(checker.call(fn, p, n, case=case))
        if got is None:
            return wrong(say("four_numbers", case=case))
        if any(g is None for g in got):
            return todo(say("work_none_left"))
        want = traced_work(p, n)
        values = [_count_value(g) for g in got]  # each count's value, whatever real type holds it
        bad = [i for i in range(4) if values[i] != want[i]]
        if not bad:
            continue
        details = [say("work_item", item=say(WORK_ITEM_KEYS[i]), want=want[i], got=_shown(got[i], values[i]))
                   for i in bad]
        got = values
        if all(got[i] == _n_passes_mistake(p, n)[i] for i in bad):
            details.append(say("one_pass_too_many"))
        elif set(bad) <= {2, 3} and all(got[i] == _approx_scores(n)[i - 2] for i in bad):
            details.append(say("approximation"))
        elif set(bad) <= {2, 3} and all(got[i] == _half_scores(p, n)[i - 2] for i in bad):
            details.append(say("masked_half"))
        return wrong(say("work_mismatch", case=case), *details)
    return right(say("work_right", cases=len(WORK_CASES), none=traced_work(16, 40)[2], kv=traced_work(16, 40)[3]))


def check_work(fn):
    return checker.check(WORK, grade_work, fn)


EXERCISES = (CACHED_STEP, WORK)
