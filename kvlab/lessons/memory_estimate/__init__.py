"""Chapter 3.4: the LLaMA-7B estimate recomputed, a KV-cache calculator for real models, and GPU budgets.

Every byte count here is an exact integer from :mod:`kvlab.memory` (through the presets of
:mod:`kvlab.presets`, which add the sliding-window and latent-KV rules); nothing is allocated except the
small cache of :func:`measure_cache_allocation`.

A package with one module per section: :mod:`.common` (the chapter's example, limits, labels, helpers),
:mod:`.text_figures` (1: the text's figures recomputed), :mod:`.calculator` (2: real models), :mod:`.fit`
(3: will it fit), :mod:`.gqa` (4: why GQA matters), :mod:`.allocation` (5: the formula against real memory),
:mod:`.summary`, :mod:`.sentences` (what the measured bytes say, as claims: :data:`CHOOSERS`; the catalogs
``ZH`` and ``EN`` built here from its TEMPLATES and TEMPLATES_EN, ``CATALOGS`` by language, :func:`show_claims`), :mod:`.panels` (the calculator and the budget) and :mod:`.phrases` (what the code cells print,
in both languages: :data:`CELLS`, :func:`say`). Every public name is re-exported here,
so ``from kvlab.lessons import memory_estimate as lesson; lesson.fit_panel()`` works as before."""
from .common import (CHAPTER_MODEL, CHAPTER_L, CHAPTER_H, CHAPTER_D, CHAPTER_S, CHAPTER_LONG_S, CHAPTER_70B, REAL_70B,
                     GQA_70BS, SHAPE_EXAMPLE_S, TEXT_LONG_GB, TEXT_70B_GB, GB, GIB, MIB, CUDA_BLOCK, MAX_SEQ_LEN,
                     MAX_BATCH, MAX_BUDGET_MIB, DEFAULT_USABLE, CUSTOM_GPU, SEQ_OPTIONS, CURVE_MODELS, TWINS,
                     CONTEXT_GRID, SEARCH_CAP, QUANTIZED, LONG_S, WINDOW_TERMS, MODEL_LABEL, SEQ_LABEL, BATCH_LABEL,
                     SEQ_SLIDER_LABEL, CURVE_LABEL, CACHE_DTYPE_LABEL, WEIGHT_DTYPE_LABEL, GPU_LABEL, BUDGET_LABEL,
                     USABLE_LABEL, LABEL_KEYS, label, shown, join_names, set_in, preset, model_options, ratio_text,
                     zh_join, spaced, with_kv_heads, same_cache_shape,
                     hypothetical_note, beyond_context_html)
from .text_figures import (TextFigure, chapter_figures, Variant, halving_variants, chapter_figures_html, variants_html,
                           gb_and_gib, SeventyBReading, seventy_b_reading, seventy_b_text)
from .calculator import (CacheEstimate, estimate_cache, CacheCurve, cache_curves, formula_html, attention_zh,
                         explain_formula, calculator_html, LongContextRow, long_context_rows, long_context_line,
                         comparison_lines)
from .fit import (usable_fraction, FitPlan, longest_context, largest_batch, plan_fit, ContextCurve, context_curve,
                  gpu_for_budget, narrower_dtypes, weights_do_not_fit, usable_note, approximation_note, fit_html,
                  gpu_table_html, t4_plans, plan_line, past_context_capacity, int8_gain_line)
from .gqa import TwinComparison, gqa_twins, past_context_note, twin_line
from .allocation import (AllocationCheck, measure_cache_allocation, allocation_lines, DeviceMemory, device_memory,
                         device_memory_text, DEVICE_NAMES, matching_gpu)
from .summary import summary_html
from . import sentences
from .sentences import ALLOCATION, DEVICE_MEMORY, CHOOSERS, explain_allocation, explain_device_memory
from .panels import (curve_choice, render_calculator, seq_len_slider, link_slider_to_box, curve_selector,
                     calculator_panel, share_or, render_fit, fit_panel)
from .phrases import CELLS, say
from ...claims import Catalog, Claim, in_language, show

TOPICS = (sentences,)  # each holds its choosers' sentences: TEMPLATES (zh) and TEMPLATES_EN
ZH = Catalog.of_topics("zh", TOPICS)
EN = Catalog.of_topics("en", TOPICS)
CATALOGS = {"zh": ZH, "en": EN}


def show_claims(claims: list[Claim]) -> None:
    """Display this chapter's claims in the course's language (``kvlab.set_language``), recorded in the output's
    metadata (``kvlab.claims.show``); nothing when there are none (a CPU has no GPU memory to compare)."""
    if claims:
        show(claims, in_language(CATALOGS))


__all__ = [
    "CHAPTER_MODEL", "CHAPTER_L", "CHAPTER_H", "CHAPTER_D", "CHAPTER_S", "CHAPTER_LONG_S", "CHAPTER_70B", "REAL_70B",
    "GQA_70BS", "SHAPE_EXAMPLE_S", "TEXT_LONG_GB", "TEXT_70B_GB", "GB", "GIB", "MIB", "CUDA_BLOCK", "MAX_SEQ_LEN",
    "MAX_BATCH", "MAX_BUDGET_MIB", "DEFAULT_USABLE", "CUSTOM_GPU", "SEQ_OPTIONS", "CURVE_MODELS", "TWINS",
    "CONTEXT_GRID", "SEARCH_CAP", "QUANTIZED", "LONG_S", "WINDOW_TERMS", "MODEL_LABEL", "SEQ_LABEL", "BATCH_LABEL",
    "SEQ_SLIDER_LABEL", "CURVE_LABEL", "CACHE_DTYPE_LABEL", "WEIGHT_DTYPE_LABEL", "GPU_LABEL", "BUDGET_LABEL",
    "USABLE_LABEL", "LABEL_KEYS", "label", "shown", "join_names", "set_in", "preset", "model_options", "ratio_text", "zh_join", "spaced", "with_kv_heads", "same_cache_shape",
    "hypothetical_note", "beyond_context_html", "TextFigure", "chapter_figures", "Variant", "halving_variants",
    "chapter_figures_html", "variants_html", "gb_and_gib", "SeventyBReading", "seventy_b_reading", "seventy_b_text",
    "CacheEstimate", "estimate_cache", "CacheCurve", "cache_curves", "formula_html", "attention_zh", "explain_formula",
    "calculator_html", "LongContextRow", "long_context_rows", "long_context_line", "comparison_lines",
    "usable_fraction", "FitPlan", "longest_context", "largest_batch", "plan_fit", "ContextCurve", "context_curve",
    "gpu_for_budget", "narrower_dtypes", "weights_do_not_fit", "approximation_note", "fit_html", "gpu_table_html",
    "t4_plans", "plan_line", "usable_note", "past_context_capacity", "int8_gain_line", "TwinComparison", "gqa_twins",
    "past_context_note", "twin_line", "AllocationCheck",
    "measure_cache_allocation", "allocation_lines", "DeviceMemory", "device_memory", "device_memory_text",
    "DEVICE_NAMES", "matching_gpu", "summary_html", "ALLOCATION", "DEVICE_MEMORY", "CHOOSERS", "ZH", "EN", "CATALOGS", "TOPICS",
    "explain_allocation", "explain_device_memory", "show_claims", "curve_choice", "render_calculator", "seq_len_slider",
    "link_slider_to_box", "curve_selector", "calculator_panel", "share_or", "render_fit", "fit_panel", "CELLS", "say",
]
