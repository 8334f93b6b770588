"""Chapter 3.1 从自回归解码说起: what each decoding step computes with and without a cache, the
chapter's two formulas checked on real Q/K/V, projections counted from the trace, and timings.

Sentences that read this machine's timings are claims (issue 31): :func:`explain_latency` and :func:`explain_growth`
return :class:`~kvlab.claims.Claim` s chosen by the choosers of :mod:`.sentences` (:data:`CHOOSERS`) over the numbers
they print, and :func:`show_claims` displays them with their record.

A package with one module per part: :mod:`.walkthrough` (one decoding step, both ways), :mod:`.formulas` (the two
formulas and the counted work), :mod:`.timings` (the measurements and their fits), :mod:`.sentences` (the claims)
and :mod:`.panels` (the walkthrough and latency panels); :mod:`.phrases` holds what the chapter's code cells print
(:data:`CELLS`, ``say``) and the prompts they give the demo model (:data:`PROMPTS`), in both languages. Every public
name is re-exported here, so
``from kvlab.lessons import decode as lesson; lesson.walkthrough_panel(...)`` works as before."""
from .walkthrough import DEFAULT_PROMPT, DecodeStep, decode_walkthrough, most_attended, steps_where_heads_agree
from .formulas import layer_qkv, FormulaCheck, check_two_formulas
from ...measure import ProjectionCount, count_projections  # exercise 3.1-2 counts with them too
from .timings import (timing_model, measure_decode_latency, theil_sen, StepFit, fit_step_time, uncached_flops,
                      generation_flops, StepEnds, step_ends, steps_between, timing_ends, cached_step_growth, crossover_length)
from .panels import (STEP_LABEL, LAYER_LABEL, HEAD_LABEL, render_step, walkthrough_panel, NEW_TOKENS_LABEL,
                     REPEATS_LABEL, LATENCY_MAX_WORK, latency_work, render_latency, latency_panel)
from .sentences import (RISING_DIP, RISING_JUMP, TOTALS, UNCACHED, CROSSOVER, STEP_UNREAD, STEP_JUMP,
                        STEP_OUTLIER, STEP_STEEP,
                        STEP_EXPONENT, SHARE_BAND, BEND, implied_exponent, ENDS_BAND, ends_exponent, lone_outlier, CUMULATIVE, CUMULATIVE_LEVEL,
                        CACHED, FIXED_COST, EXTRAPOLATION, GROWTH_RULES, GROWTH, RERUN, STALLED, GROWING, OUTLIER_KEYS, CHOOSERS, ZH, EN, CATALOGS,
                        show_claims, explain_latency, explain_growth)
from .phrases import CELLS, PROMPTS, say

__all__ = [
    "DEFAULT_PROMPT", "DecodeStep", "decode_walkthrough", "most_attended", "steps_where_heads_agree", "layer_qkv",
    "FormulaCheck", "check_two_formulas", "ProjectionCount", "count_projections", "timing_model",
    "measure_decode_latency", "theil_sen", "StepFit", "fit_step_time", "uncached_flops", "generation_flops", "StepEnds", "step_ends",
    "steps_between", "timing_ends", "cached_step_growth", "crossover_length", "STEP_LABEL", "LAYER_LABEL",
    "HEAD_LABEL", "render_step", "walkthrough_panel", "NEW_TOKENS_LABEL", "REPEATS_LABEL", "LATENCY_MAX_WORK",
    "latency_work", "render_latency", "latency_panel", "RISING_DIP", "RISING_JUMP", "TOTALS", "UNCACHED", "CROSSOVER",
    "STEP_UNREAD", "STEP_JUMP", "STEP_OUTLIER", "STEP_STEEP", "STEP_EXPONENT", "SHARE_BAND", "BEND", "implied_exponent", "ENDS_BAND", "ends_exponent",
    "lone_outlier", "CUMULATIVE", "CUMULATIVE_LEVEL", "CACHED", "FIXED_COST", "EXTRAPOLATION", "GROWTH_RULES", "GROWTH", "RERUN",
    "STALLED", "GROWING", "OUTLIER_KEYS", "CHOOSERS", "ZH", "EN", "CATALOGS", "show_claims", "explain_latency", "explain_growth",
    "CELLS", "PROMPTS", "say",
]
