"""Chapter 3.5 常见误区与复盘: each of the chapter's three misconceptions refuted by an experiment, a lab of
deliberately broken caches to find the bug in, and the chapter's review as a self-check.

1. The cache is not part of the parameters: the weights (count, bytes, a checksum) do not change whatever is
   generated, the cache's bytes follow B x S exactly, the cache is not in the state dict, and a reset empties it.
2. Caching K alone saves nothing worth having: the same tokens as without a cache, V of every token projected
   again at every step (the trace says so), about the same work (counted) as no cache at all; even a minimal
   K-only cache has to re-run the past tokens through every layer below the last.
3. A bigger cache is not better: weights and cache share one memory budget (chapter 3.4's plan: the usable share
   of the card, :data:`~kvlab.lessons.memory_estimate.DEFAULT_USABLE`); reserving more tokens per sequence lets
   fewer sequences run at once and leaves most of each reservation unused.

A package with one module per section; every public name is re-exported here, so
``from kvlab.lessons import misconceptions as lesson; lesson.weights_panel(...)`` works as before. Every word the
lesson shows comes from :mod:`.phrases` (CELLS, PROMPTS, PANELS, REVIEW) or :data:`kvlab.viz.misconceptions_plots.PLOTS`
in the course's language, looked up when shown; the claims' sentences from ``ZH`` and ``EN`` (``CATALOGS``).
"""
from .common import DEFAULT_PROMPT, NEW_TOKENS_LABEL, leave_a_core, corpus_prompts
from .weights import (WeightsSnapshot, weights_snapshot, CacheRun, run_with_cache, M1_LIMITS, PROMPT_LEN_LABEL,
                      BATCH_LABEL, render_weights_vs_cache, weights_panel)
from .k_only import (K_ONLY_MODES, K_ONLY_NAMES, K_ONLY_MINIMAL, FLOP_MODES, FLOP_NAMES, LLAMA_7B_SHAPE,
                     compare_k_only, tail_step_ms, repeat_tail_ms, BAND, FAR, CLEAR, MIN_REPEATS,
                     K_ONLY, KV_SPEEDUP, KV_GAP, explain_k_only, explain_kv_gap, kv_gap_claim, step_flops, StepFlops, count_step, tail_times_text, same_tokens,
                     REPEATS_LABEL, COUNTING, tail_range, render_k_only, k_only_panel, Dependency, prefix_dependency,
                     QueryCheck, past_queries_unused)
from .budget import (BUDGET_MODELS, DEFAULT_GPU, DEFAULT_MODEL, GPU_LABEL, MODEL_LABEL, SPREAD_LABEL, RESERVE_LABEL,
                     CONCURRENT_LABEL, MAX_CONCURRENT, PAGE_TOKENS, TOO_LONG_LIMIT, MIN_RESERVE_EXPONENT,
                     MAX_RESERVE_EXPONENT, MAX_RESERVE, RequestSpread, SPREADS, DEFAULT_SPREAD, SPREAD,
                     ReservationPlan, plan_reservation, reserve_exponent, reserve_options, render_budget, budget_html,
                     budget_panel, ReservationEffect, reservation_effect, RefusedAllocation, refused_allocation,
                     refusal_html)
from .lab import (LAB_PROMPT, PREVIOUS_PROMPT, lab_prompts, LAB_NEW_TOKENS, LOGIT_TOLERANCE, REFERENCE, BugCard, BUG_CARDS,
                  CACHE_LABEL, PROMPT_LABEL, REVEAL_LABEL, REUSE_LABEL, LAB_CACHES, BugRun, cache_class,
                  make_lab_cache, run_lab_cache, lab_line, MAX_LAB_PROMPT, MAX_LAB_TOKENS, render_lab,
                  tokens_table_html, methods_html, lab_html, lab_panel, run_all_lab_caches)
from .review import uncached_over_cached, batch_intensity_gain, review_questions
from .summary import (PrefillDecode, prefill_vs_decode, PREFILL, explain_prefill, CHOOSERS, ZH, EN, CATALOGS, show_claims,
                      SummaryRow, chapter_rows, scenario_plans, scenario_row, summary_rows, summary_html)
from .phrases import CELLS, PANELS, PROMPTS, REVIEW, label, say

from ...measure import device_label  # every readout's device and timing threads, as the notebook prints it

__all__ = [
    "DEFAULT_PROMPT", "NEW_TOKENS_LABEL", "leave_a_core", "corpus_prompts", "WeightsSnapshot", "weights_snapshot",
    "CacheRun", "run_with_cache", "M1_LIMITS", "PROMPT_LEN_LABEL", "BATCH_LABEL", "render_weights_vs_cache",
    "weights_panel", "K_ONLY_MODES", "K_ONLY_NAMES", "K_ONLY_MINIMAL", "FLOP_MODES", "FLOP_NAMES", "LLAMA_7B_SHAPE",
    "compare_k_only", "tail_step_ms", "repeat_tail_ms", "BAND", "FAR", "CLEAR", "MIN_REPEATS", "K_ONLY",
    "KV_SPEEDUP", "KV_GAP", "explain_k_only", "explain_kv_gap", "kv_gap_claim", "step_flops", "StepFlops", "count_step", "tail_times_text", "same_tokens",
    "REPEATS_LABEL", "COUNTING", "tail_range", "render_k_only", "k_only_panel", "Dependency", "prefix_dependency",
    "QueryCheck", "past_queries_unused", "BUDGET_MODELS", "DEFAULT_GPU", "DEFAULT_MODEL", "GPU_LABEL", "MODEL_LABEL",
    "SPREAD_LABEL", "RESERVE_LABEL", "CONCURRENT_LABEL", "MAX_CONCURRENT", "PAGE_TOKENS", "TOO_LONG_LIMIT",
    "MIN_RESERVE_EXPONENT", "MAX_RESERVE_EXPONENT", "MAX_RESERVE", "RequestSpread", "SPREADS", "DEFAULT_SPREAD",
    "SPREAD", "ReservationPlan", "plan_reservation", "reserve_exponent", "reserve_options", "render_budget",
    "budget_html", "budget_panel", "ReservationEffect", "reservation_effect", "RefusedAllocation",
    "refused_allocation", "refusal_html", "LAB_PROMPT", "PREVIOUS_PROMPT", "LAB_NEW_TOKENS", "LOGIT_TOLERANCE",
    "REFERENCE", "BugCard", "BUG_CARDS", "CACHE_LABEL", "PROMPT_LABEL", "REVEAL_LABEL", "REUSE_LABEL", "LAB_CACHES",
    "BugRun", "cache_class", "make_lab_cache", "run_lab_cache", "lab_line", "MAX_LAB_PROMPT", "MAX_LAB_TOKENS",
    "render_lab", "tokens_table_html", "methods_html", "lab_html", "lab_panel", "run_all_lab_caches", "uncached_over_cached",
    "batch_intensity_gain",
    "review_questions", "PrefillDecode", "prefill_vs_decode", "PREFILL", "explain_prefill", "CHOOSERS", "ZH", "EN",
    "CATALOGS",
    "show_claims", "SummaryRow", "chapter_rows", "scenario_plans",
    "scenario_row", "summary_rows", "summary_html", "device_label", "CELLS", "PROMPTS", "say", "PANELS", "REVIEW", "label",
    "lab_prompts",
]
