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
from ..measure import count_projections
from ..memory import stored_tokens
from ..model import ToyTransformer
from . import checker
from .checker import Exercise, LearnerError, Verdict, right, todo, wrong
from .tools import demo, repeat_kv, rope

NOTEBOOK = "01_autoregressive_decode.ipynb"
SETUP = """import torch

from kvlab.exercises import ch01
from kvlab.exercises.tools import repeat_kv, rope"""

LOGIT_TOLERANCE = 1e-4  # a right step stays below 1e-5 on every case (float rounding only)

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
)


@dataclass(frozen=True)
class LoopCase:
    label: str
    model: str  # "demo" or a key of RANDOM_LAYOUTS
    prompts: tuple[tuple[int, ...], ...] | tuple[str, ...]
    new_tokens: int


RANDOM_LAYOUTS = {"mha": (4, 4), "gqa": (8, 2), "mqa": (4, 1)}  # (query heads, KV heads)
LOOP_CASES = (
    LoopCase("用例 1（演示模型，GQA：4 个查询头、2 个 KV 头，提示词「人工」）", "demo", ("人工",), 12),
    LoopCase("用例 2（演示模型，批次 2：「计算机」「大语言」）", "demo", ("计算机", "大语言"), 10),
    LoopCase("用例 3（随机权重的 MHA：4 个查询头、4 个 KV 头，批次 2）", "mha", ((3, 5, 7), (9, 2, 4)), 10),
    LoopCase("用例 4（随机权重的 GQA：8 个查询头、2 个 KV 头）", "gqa", ((11, 4, 60, 2),), 10),
    LoopCase("用例 5（随机权重的 MQA：4 个查询头、1 个 KV 头，提示词只有 1 个 token）", "mqa", ((42,),), 10),
)


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
    if case.model == "demo":
        model, tok = demo()
        return model, [tok.encode(p) for p in case.prompts], lambda ids: tok.decode(ids).replace("\n", "⏎")
    return random_model(case.model), [list(p) for p in case.prompts], lambda ids: " ".join(map(str, ids))


def _shape_problem(out, q: torch.Tensor) -> str | None:
    if out is None:
        return "函数返回了 None：最后要 return 注意力的输出"
    if not isinstance(out, torch.Tensor):
        return f"函数应当返回一个张量，返回的是 {type(out).__name__}"
    if tuple(out.shape) != tuple(q.shape):
        return f"返回的形状是 {list(out.shape)}，应为 [B, H, 1, D] = {list(q.shape)}"
    return None


@contextmanager
def learner_attention(model: ToyTransformer, fn, label: str):
    """Every layer's decode step (one new token, with a cache) calls ``fn``; prefill runs the model's own code."""
    def patched(attn):
        original = attn.forward

        def forward(x, cos, sin, mask, cache, impl, probe):
            if cache is None or x.shape[1] != 1:
                return original(x, cos, sin, mask, cache, impl, probe)
            B = x.shape[0]
            q, k, v = attn.wqkv(x).split([attn.q_dim, attn.kv_dim, attn.kv_dim], dim=-1)  # [B, 1, *]
            q, k, v = attn.heads(q, attn.n_head), attn.heads(k, attn.n_kv_head), attn.heads(v, attn.n_kv_head)
            gqa = attn.n_head != attn.n_kv_head
            extra = (f"这个用例有 {attn.n_head} 个查询头、{attn.n_kv_head} 个 KV 头：q 与 K/V 相乘之前，"
                     "先用 repeat_kv 把 K/V 扩成与查询头一样多") if gqa else ""
            where = f"{label.split('（')[0]}，第 {attn.layer} 层，pos = {cache.length}"
            out = checker.call(fn, q, k, v, cache.k[attn.layer], cache.v[attn.layer], cache.length,
                               case=where, extra=f"{label}。{extra}")
            problem = _shape_problem(out, q)
            if problem:
                raise LearnerError(wrong(f"{label}：{problem}"))
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


@torch.no_grad()
def first_divergence(case: LoopCase, fn) -> Divergence | None:
    """Generate with ``fn`` as every layer's decode step and compare with ``generate(cache="none")``."""
    model, prompts, show = _case_model(case)
    ref = generate(model, prompts, case.new_tokens, cache="none", return_logits=True)
    cache = KVCache(model.config, len(prompts), stored_tokens(len(prompts[0]), case.new_tokens), dtype=model.dtype)
    with learner_attention(model, fn, case.label):
        out = generate(model, prompts, case.new_tokens, cache=cache, return_logits=True)
    diff = (out.logits - ref.logits).abs().nan_to_num(math.inf).amax(dim=-1).amax(dim=0)  # [new_tokens]
    differs = (out.new_tokens != ref.new_tokens).any(dim=0) | (diff > LOGIT_TOLERANCE)
    if not bool(differs.any()):
        return None
    step = int(differs.nonzero()[0, 0]) + 1
    tokens_differ = (out.new_tokens != ref.new_tokens).any(dim=0)
    token_step = int(tokens_differ.nonzero()[0, 0]) + 1 if bool(tokens_differ.any()) else None
    return Divergence(step, token_step, show(ref.new_tokens[0].tolist()), show(out.new_tokens[0].tolist()),
                      float(diff[step - 1]))


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
        return f"缓存里第 {pos} 个位置以外的内容被改动了（位置 {changed[:4]}）：新 token 只能写在第 pos = {pos} 个位置"
    if _same(slot, want):
        return None
    if _same(slot, before[:, :, pos:pos + 1]):
        return f"新 token 的 {name} 没有写进缓存的第 pos = {pos} 个位置：下一步就读不到它了"
    if name == "V" and _same(slot, rope(raw, pos)):
        return "写进缓存的 V 被旋转过了：V 不做 RoPE，只有 Q 和 K 按位置旋转"
    if name == "K" and _same(slot, raw):  # rope(x, 0) is x itself: position 0 turns by angle 0
        return (f"写进缓存的 K 没有按位置 pos = {pos} 旋转：要么漏了 RoPE，要么漏了位置偏移、按位置 0 旋转了"
                "（位置 0 的旋转角是 0，两者一样）。缓存里的 K 都是按各自的真实位置旋转过的")
    return f"写进缓存第 pos = {pos} 个位置的 {name} 不对"


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
        (dict(rotate_q=False), f"Q 没有按位置 pos = {pos} 旋转：要么漏了 RoPE，要么按位置 0 旋转了（两者一样）。"
                               "缓存里的 K 旋转过，新 token 的 Q 也要按它的真实位置旋转"),
        (dict(end=k_cache.shape[2]), f"注意力读了整个预分配的缓存（{k_cache.shape[2]} 个位置），包括还没有填的位置：只能读前 pos + 1 个"),
        (dict(end=pos), "注意力漏掉了新 token 自己：写入缓存之后，要读前 pos + 1 个位置"),
        (dict(tile=True), "GQA 的头对应错了：查询头 h 应当读第 h // n_rep 个 KV 头（repeat_kv 的排列），不是第 h % H_kv 个"),
        (dict(scale=False), "分数没有除以 √D"),
    )
    for switches, message in mistakes:
        if _same(out, reference_step(q, k_new, v_new, k_cache.clone(), v_cache.clone(), pos, **switches)):
            return message
    return f"对一组随机输入，你的输出与正确结果最多相差 {(out - want).abs().max().item():.2e}"


def grade_cached_step(fn) -> Verdict:
    problem = checker.unwritten(fn, STEP_STUB, "cached_attention_step", "写完 cached_attention_step 的函数体，再运行这一格。")
    if problem:
        return problem
    problem = checker.refuses_reference(fn, {"reference_step": reference_step})
    if problem:
        return problem
    for case in LOOP_CASES:
        d = first_divergence(case, fn)
        if d is not None:
            cause = diagnose(fn)
            tokens = (f"生成的 token 从第 {d.token_step} 步起不同" if d.token_step else
                      "生成的 token 碰巧都一样，但 logits 已经不对了")
            return wrong(f"{case.label}：第 {d.step} 步开始与无缓存的参考不同（第 1 步是预填充，由模型完成；"
                         f"从第 2 步起每一层都调用你的函数）。",
                         f"第 {d.step} 步的 logits 最大相差 {d.max_logit_diff:.3g}（浮点误差不超过 {LOGIT_TOLERANCE:g}）；{tokens}",
                         f"无缓存（参考）生成：{d.reference}", f"用你的函数生成：{d.got}",
                         *([f"原因（检查程序用一组随机输入单独运行了一步，pos = 5）：{cause}"] if cause else []))
    steps = sum(c.new_tokens - 1 for c in LOOP_CASES)
    return right(f"全部 {len(LOOP_CASES)} 个用例通过！在 MHA、GQA、MQA 三种头的布局上，你的函数替模型跑了 {steps} 个解码步，"
                 f"每一步的 logits 都与无缓存的参考相差不到 {LOGIT_TOLERANCE:g}，生成的 token 完全相同。")


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
)

WORK_CASES = ((1, 1), (2, 3), (6, 10), (16, 40))
WORK_ITEMS = ("无缓存时投影 K/V 的 token 数", "有缓存时投影 K/V 的 token 数", "无缓存时的注意力分数", "有缓存时的注意力分数")


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
    problem = checker.unwritten(fn, WORK_STUB, "predict_work", "在 predict_work 里把四个 None 换成你的公式。")
    if problem:
        return problem
    problem = checker.refuses_reference(fn, {"traced_work": traced_work, "count_projections": count_projections})
    if problem:
        return problem
    for p, n in WORK_CASES:
        case = f"用例 p = {p}，n = {n}"
        got = _as_counts(checker.call(fn, p, n, case=case))
        if got is None:
            return wrong(f"{case}：predict_work 应当返回四个数（一个元组），请保留最后的 return 那一行。")
        if any(g is None for g in got):
            return todo("predict_work 还有没填的 None。")
        want = traced_work(p, n)
        values = [_count_value(g) for g in got]  # each count's value, whatever real type holds it
        bad = [i for i in range(4) if values[i] != want[i]]
        if not bad:
            continue
        details = [f"{WORK_ITEMS[i]}：trace 里数出 {want[i]:,}，你的预测 {_shown(got[i], values[i])}" for i in bad]
        got = values
        if all(got[i] == _n_passes_mistake(p, n)[i] for i in bad):
            details.append("原因：你多算了一次前向计算。n 个新 token 只需要 n 次：1 次预填充 + n − 1 次解码；"
                           "最后一个 token 生成之后不再送回模型。")
        elif set(bad) <= {2, 3} and all(got[i] == _approx_scores(n)[i - 2] for i in bad):
            details.append("原因：n³/3、n²/2 只是 p ≪ n、n 很大时的近似；这里要精确的数：无缓存是每次前向 t² 的和，"
                           "有缓存是预填充的 p² 加上之后每一步的 t。")
        elif set(bad) <= {2, 3} and all(got[i] == _half_scores(p, n)[i - 2] for i in bad):
            details.append("原因：你只数了因果掩码下可见的分数。kvlab 每次都把 t×t（或 1×t）个分数全部算出来，"
                           "再用掩码遮住看不见的部分，这里要数算出来的分数。")
        return wrong(f"{case}：和 trace 对不上。", *details)
    return right(f"全部 {len(WORK_CASES)} 组 p、n 都与 trace 一致！例如 p = 16、n = 40 时，无缓存算 "
                 f"{traced_work(16, 40)[2]:,} 个分数，有缓存只算 {traced_work(16, 40)[3]:,} 个。")


def check_work(fn):
    return checker.check(WORK, grade_work, fn)


EXERCISES = (CACHED_STEP, WORK)
