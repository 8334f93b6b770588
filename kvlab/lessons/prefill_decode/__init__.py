"""Chapter 3.3 实际推理中的 KV Cache 利用流程: one real generation as a timeline, the chapter's four
steps mapped to kvlab's code and checked on a real cache, prefill against decode, a roofline of this
machine, decode batching (and how each sequence's own K/V limits it), and the engineering notes
(preallocation, unequal lengths, FP16/INT8) as experiments.

Sentences that read this machine's measurements are claims (issue 31): the ``explain_*`` functions return
:class:`~kvlab.claims.Claim` s chosen by the choosers of :mod:`.sentences` (:data:`CHOOSERS`) over the numbers they
print, and :func:`show_claims` displays them with their record; readouts and counted facts stay plain lines
(the ``*_lines`` functions), so that the notebook's prose only says what holds on any machine.

A package with one module per section; every public name is re-exported here, so
``from kvlab.lessons import prefill_decode as lesson; lesson.render_timeline(...)`` works as before.
"""
from ...measure import ROOFLINE_CONFIG, Roofs, measure_roofs  # exercise 3.3-1 measures with them too
from .roofline import (roofline_model, weight_bytes_of, explain_weights_vs_cache, explain_roofs, RooflinePoint, FlopCheck,
                       count_flops)
from .timeline import (DEFAULT_PROMPT, TIMELINE_TOKENS, TIMELINE_MAX_TOKENS, TIMELINE_REPEATS, PROMPT_LABEL, TOKENS_LABEL, STEP_LABEL,
                       Timeline, run_timeline, regenerate, render_timeline, timeline_panel, StepBudget, step_budget,
                       explain_step_budget, TAIL_SAMPLES, explain_latency, explain_prefill_parallel, latency_lines,
                       explain_panel, step_budget_lines)
from .four_steps import CodePart, FOUR_STEPS, STEP_ARGUMENT, show_step, FourStepCheck, check_four_steps
from .prefill_sweep import (PREFILL_LENGTHS, PREFILL_DECODE_STEPS, MAX_CUSTOM_LENGTHS, LengthPoint, PrefillSweep,
                            max_prompt_len, measure_prefill_sweep, PrefillLab, LENGTHS_LABEL, PROMPT_LEN_LABEL,
                            render_prefill, prefill_panel, PROPORTIONAL_EXPONENT, proportional_from, explain_prefill,
                            prefill_points, explain_prefill_growth, explain_prefill_rates, explain_speedups)
from .batching import (BATCH_SIZES, BATCH_CONTEXTS, BATCH_STEPS, BATCH_REPEATS, BATCH_MAX_CACHE_BYTES, BatchPoint,
                       BatchSweep, measure_batch_sweep, BatchLab, explain_batch, explain_kv_share, BATCH_LABEL,
                       CONTEXT_LABEL, render_batch, batch_panel, SmallMatmuls, measure_small_matmuls, explain_small_matmuls,
                       per_doubling, batch_ridge_lines, explain_batch_gain, explain_overlap)
from .engineering import (AllocatorTrace, AllocatorComparison, CPU_ALLOCATOR_REASON, allocator_growth,
                          explain_allocator, explain_reservation, PADDED_LENGTHS, PADDED_NEW_TOKENS,
                          PADDED_LENGTHS_LABEL, BLOCK_LABEL, corpus_text, corpus_prompts, PaddedBatch,
                          run_padded_batch, paged_text, render_padded_batch, padded_batch_panel, PRECISION_LABELS,
                          CachePrecision, compare_cache_precision, explain_precision,
                          allocator_lines, precision_lines)
from .readings import (STEADY_SPREAD, BUSY_SPREAD, SAME_BAND, explain_batch_baseline, WorkedStep, worked_decode_step, explain_worked_step, spread,
                       roofs_busy, explain_measured_roofs, explain_prefill_vs_roof, explain_decode_vs_roof, explain_long_rate,
                       explain_batch_vs_prefill, explain_small_matmul_reads, explain_decode_sum, explain_worked_bounds,
                       roof_lines)
from .sentences import CATALOGS, CHOOSERS, EN, ZH, show_claims
from .phrases import CELLS, PROMPTS, say  # what the code cells print and the prompts they feed, in both languages
from ...claims import confirm  # the page's checks, a ✓ line each in the course's language
from ...device import last_level_cache  # the notebook reads the last-level cache through the lesson
from ...measure import device_label  # every readout's device, as the notebook prints it

__all__ = [
    "ROOFLINE_CONFIG", "roofline_model", "weight_bytes_of", "explain_weights_vs_cache", "Roofs", "measure_roofs",
    "explain_roofs", "RooflinePoint", "FlopCheck", "count_flops", "DEFAULT_PROMPT", "TIMELINE_TOKENS", "TIMELINE_REPEATS",
    "TIMELINE_MAX_TOKENS", "PROMPT_LABEL", "TOKENS_LABEL", "STEP_LABEL", "Timeline", "run_timeline", "regenerate",
    "render_timeline", "timeline_panel", "StepBudget", "step_budget", "explain_step_budget", "CodePart", "FOUR_STEPS",
    "STEP_ARGUMENT", "show_step", "FourStepCheck", "check_four_steps", "PREFILL_LENGTHS", "PREFILL_DECODE_STEPS",
    "MAX_CUSTOM_LENGTHS", "LengthPoint", "PrefillSweep", "max_prompt_len", "measure_prefill_sweep", "PrefillLab",
    "LENGTHS_LABEL", "PROMPT_LEN_LABEL", "render_prefill", "prefill_panel", "PROPORTIONAL_EXPONENT",
    "proportional_from", "explain_prefill", "prefill_points", "BATCH_SIZES", "BATCH_CONTEXTS", "BATCH_STEPS",
    "BATCH_REPEATS", "BATCH_MAX_CACHE_BYTES", "BatchPoint", "BatchSweep", "measure_batch_sweep", "BatchLab",
    "explain_batch",
    "explain_kv_share", "BATCH_LABEL", "CONTEXT_LABEL", "render_batch", "batch_panel", "SmallMatmuls",
    "measure_small_matmuls", "explain_small_matmuls", "AllocatorTrace", "AllocatorComparison", "CPU_ALLOCATOR_REASON",
    "allocator_growth", "explain_allocator", "explain_reservation", "PADDED_LENGTHS", "PADDED_NEW_TOKENS",
    "PADDED_LENGTHS_LABEL", "BLOCK_LABEL", "corpus_text", "corpus_prompts", "PaddedBatch", "run_padded_batch",
    "paged_text", "render_padded_batch", "padded_batch_panel", "PRECISION_LABELS", "CachePrecision",
    "compare_cache_precision", "explain_precision", "BUSY_SPREAD", "SAME_BAND", "WorkedStep", "worked_decode_step",
    "explain_worked_step", "spread", "roofs_busy", "explain_measured_roofs", "explain_prefill_vs_roof",
    "explain_decode_vs_roof", "explain_batch_vs_prefill", "explain_small_matmul_reads", "explain_worked_bounds", "confirm",
    "last_level_cache", "device_label",
    "TAIL_SAMPLES", "explain_latency", "explain_prefill_parallel", "explain_prefill_growth", "per_doubling", "STEADY_SPREAD",
    "explain_batch_baseline", "latency_lines", "explain_panel", "step_budget_lines", "explain_prefill_rates",
    "batch_ridge_lines", "allocator_lines", "precision_lines", "roof_lines", "CHOOSERS", "ZH", "EN", "CATALOGS", "show_claims",
    "explain_speedups", "explain_long_rate", "explain_batch_gain", "explain_overlap", "explain_decode_sum",
    "CELLS", "PROMPTS", "say",
]
