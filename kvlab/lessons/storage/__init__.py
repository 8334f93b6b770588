"""Chapter 3.2 (the KV cache's storage and shape): the cache tensor's five dimensions in two panels (the shape in
numbers, then the bytes of a batch), real models' numbers, preallocation vs concatenation (kvlab's caches and
transformers', timed in alternating repeats against this machine's last-level cache), and padding waste in a
batch, padded (with room reserved for generation) and paged in a shared pool of blocks.

A package with one module per part: :mod:`.shape` (the shape and the bytes, and the same K/V in transformers),
:mod:`.models` (real models' table), :mod:`.growth` (the preallocation experiment), :mod:`.padding` (padding
waste), :mod:`.sentences` (what the growth run's times say, as claims: :data:`CHOOSERS`, the catalogs :data:`ZH` and
:data:`EN`, :func:`show_claims` in the course's language), :mod:`.panels` and :mod:`.phrases` (what the chapter's code
cells print, :data:`CELLS` and :func:`say`, the prompts they feed the model, :data:`PROMPTS`, and what the panels,
readouts and tables show, :data:`TEXTS`, all in both languages). Every public name is re-exported here, so
``from kvlab.lessons import storage as lesson; lesson.shape_panel()`` works as before."""
from .shape import (MAX_S, MAX_B, CHAPTER_EXAMPLE, SHAPE_LABELS, example_text, CacheShape, shape_of, example_numbers,
                    QUANTIZED, GPU_LINES, MemoryReadout, example_bytes, gpu_lines, TransformersKV,
                    transformers_layer_kv)
from .models import (TABLE_MODELS, MHA_TWINS, PAST_CONTEXT, GQASaving, gqa_savings, head_dim_exceptions, past_context,
                     head_dim_note, model_table_html)
from .growth import CacheGrowth, GrowthComparison, wide_cache_model, watch_layer0_k, compare_cache_growth
from .padding import PoolBlock, PaddingWaste, padding_waste, measured_padding_bytes
from .sentences import (CHAPTER_LABELS, PACE_APART, PACE_SAME, SAME_WORK, PACE_FIELDS, SameWork, WORK, PACE, CHOOSERS,
                        ZH, EN, CATALOGS, work_claim, pace_claim, show_claims)
from .panels import (render_shape, shape_panel, BATCH_LABEL, DTYPE_LABEL, render_bytes, bytes_panel, GROWTH_PROMPT,
                     GROWTH_LENGTHS, GROWTH_LABEL, growth_choices, render_growth, growth_panel, LENGTHS_LABEL,
                     BLOCK_LABEL, RESERVE_LABEL, render_padding, padding_panel, label)
from .phrases import CELLS, PROMPTS, TEXTS, say

__all__ = [
    "MAX_S", "MAX_B", "CHAPTER_EXAMPLE", "SHAPE_LABELS", "example_text", "CacheShape", "shape_of", "example_numbers",
    "QUANTIZED", "GPU_LINES", "MemoryReadout", "example_bytes", "gpu_lines", "TransformersKV", "transformers_layer_kv",
    "TABLE_MODELS", "MHA_TWINS", "PAST_CONTEXT", "GQASaving", "gqa_savings", "head_dim_exceptions", "past_context",
    "head_dim_note", "model_table_html", "CacheGrowth", "GrowthComparison", "wide_cache_model", "watch_layer0_k",
    "compare_cache_growth", "PoolBlock", "PaddingWaste", "padding_waste", "measured_padding_bytes", "CHAPTER_LABELS",
    "PACE_APART", "PACE_SAME", "SAME_WORK", "PACE_FIELDS", "SameWork", "WORK", "PACE", "CHOOSERS", "ZH", "EN", "CATALOGS", "work_claim", "pace_claim", "show_claims", "render_shape",
    "shape_panel", "BATCH_LABEL", "DTYPE_LABEL", "render_bytes", "bytes_panel", "GROWTH_PROMPT", "GROWTH_LENGTHS",
    "GROWTH_LABEL", "growth_choices", "render_growth", "growth_panel", "LENGTHS_LABEL", "BLOCK_LABEL", "RESERVE_LABEL",
    "render_padding", "padding_panel", "label", "CELLS", "PROMPTS", "TEXTS", "say",
]
