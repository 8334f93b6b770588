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
from .lab import REUSE_LABEL
from .phrases import REVIEW, label

QUIZ_NEW_TOKENS = 200  # 3.1: tokens generated after a one-token prompt
QUIZ_LENGTHS = (100, 20, 20, 20)  # 3.2: a padded batch
QUIZ_CONTEXT, QUIZ_BATCH = 1000, 8  # 3.3: decode step at this length, batch 1 vs this batch
QUIZ_GEMMA_S = 8192  # 3.4: Gemma-2-9B at its whole context
QUIZ_GENERATED, QUIZ_PROMPTS = 64, (100, 2000)  # 3.3: the same tokens generated after a short and a long prompt
QUIZ_SLOW_STEPS = (1, 3, 50)  # 3.3: most steps this many ms, this many steps interrupted, each this many ms
QUIZ_UTILIZATION = (0.9, 0.95)  # 3.5: vLLM's gpu_memory_utilization raised from, to


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
    """The chapter's self-check, 3.1 to 3.5, in the course's language (asked when the quiz is made): predict, then
    explain; every numeric key computed by kvlab, every number in the text a field."""
    C, say = Choice, REVIEW.say
    n, gain = QUIZ_NEW_TOKENS, batch_intensity_gain()
    pad = padding_waste(list(QUIZ_LENGTHS), 1)
    lengths = say("list_sep").join(str(x) for x in QUIZ_LENGTHS)
    llama7, qwen = MODEL_PRESETS["LLaMA-7B"], MODEL_PRESETS["Qwen2.5-7B"]
    v3, gemma = MODEL_PRESETS["DeepSeek-V3 (671B)"], MODEL_PRESETS["Gemma-2-9B"]
    int8_gain = llama7.kv_bytes_per_token("fp16") / qwen.kv_bytes_per_token("int8")
    S = QUIZ_GEMMA_S
    gemma_share = gemma.kv_cache_bytes(S) / gemma.plain_formula_bytes(S) * 100
    mla_gain = v3.plain_formula_bytes(S) / v3.kv_cache_bytes(S)
    times, percent = say("unit.times"), say("unit.percent")
    short, long = QUIZ_PROMPTS
    fast, slow, slow_ms = QUIZ_SLOW_STEPS
    low, high = QUIZ_UTILIZATION
    models = dict(l_layers=llama7.n_layer, l_heads=llama7.n_kv_head, l_dim=llama7.head_dim, q_layers=qwen.n_layer,
                  q_heads=qwen.n_kv_head, q_dim=qwen.head_dim)
    mla = dict(layers=v3.n_layer, heads=v3.n_head, dim=v3.head_dim, latent=v3.kv_latent_dim)
    window = dict(window=gemma.sliding_window, S=S)
    return [
        ChoiceQuestion("3.1", say("kv_q"), (
            C(say("kv_t"), False, say("kv_t_why")),
            C(say("kv_one"), True, say("kv_one_why")),
            C(say("kv_past"), False, say("kv_past_why")),
            C(say("kv_square"), False, say("kv_square_why")))),
        NumberQuestion("3.1", say("work_q", n=n), uncached_over_cached(), times, say("work_why", n=n),
                       say("work_hint", n=n), rel_tol=0.1),
        NumberQuestion("3.2", say("pad_q", count=len(QUIZ_LENGTHS), lengths=lengths), pad.waste_fraction * 100, percent,
                       say("pad_why", batch=pad.batch_size, longest=pad.max_len, allocated=pad.allocated_slots,
                           used=pad.used_slots, waste=pad.waste_fraction),
                       say("pad_hint"), rel_tol=0.01),
        NumberQuestion("3.3", say("batch_q", cached=QUIZ_CONTEXT - 1, batch=QUIZ_BATCH), gain, times,
                       say("batch_why", gain=gain, batch=QUIZ_BATCH),
                       say("batch_hint", weights=format_bytes(llama7.weight_bytes("fp16")),
                           per_token_kib=llama7.kv_bytes_per_token("fp16") // 1024), rel_tol=0.03),
        ChoiceQuestion("3.3", say("ttft_q", new=QUIZ_GENERATED, short=short, long=long), (
            C(say("ttft"), True, say("ttft_why", long=long)),
            C(say("tpot"), False, say("tpot_why")),
            C(say("itl"), False, say("itl_why")),
            C(say("per_token"), False, say("per_token_why")))),
        ChoiceQuestion("3.3", say("slow_q", fast=fast, slow=slow, slow_ms=slow_ms), (
            C(say("slow_tpot"), True, say("slow_tpot_why")),
            C(say("slow_itl"), False, say("slow_itl_why", slow=slow)),
            C(say("slow_same"), False, say("slow_same_why")))),
        NumberQuestion("3.4", say("int8_q", **models), int8_gain, times,
                       say("int8_why", **models, l_bytes=format_bytes(llama7.kv_bytes_per_token("fp16")),
                           q_bytes=format_bytes(qwen.kv_bytes_per_token("int8")), gain=int8_gain),
                       say("int8_hint"), rel_tol=0.01),
        NumberQuestion("3.4", say("mla_q", **mla), mla_gain, times,
                       say("mla_why", **mla, plain=2 * v3.n_head * v3.head_dim, gain=mla_gain), say("mla_hint"),
                       rel_tol=0.02),
        NumberQuestion("3.4", say("window_q", **window), gemma_share, percent,
                       say("window_why", **window, mean=(S + gemma.sliding_window) // 2, share=gemma_share),
                       say("window_hint"), rel_tol=0.01),
        ChoiceQuestion("3.5", say("v_q"), (
            C(say("v_cheap"), False, say("v_cheap_why")),
            C(say("v_prefix"), True, say("v_prefix_why")),
            C(say("v_from_k"), False, say("v_from_k_why")),
            C(say("v_queries"), False, say("v_queries_why")))),
        ChoiceQuestion("3.5", say("pool_q", low=low, high=high), (
            C(say("pool_right"), True, say("pool_right_why")),
            C(say("pool_both_better"), False, say("pool_both_better_why")),
            C(say("pool_both_waste"), False, say("pool_both_waste_why")))),
        ChoiceQuestion("3.5", say("reset_q"), (
            C(say("reset_right"), True, say("reset_right_why", reuse=label(REUSE_LABEL))),
            C(say("reset_first"), False, say("reset_first_why")),
            C(say("reset_second"), False, say("reset_second_why")))),
    ]
