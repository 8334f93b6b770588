"""Chapter 3.6 (extension): a paged KV cache on the real model, shared prefixes, continuous batching, measured.

One module per section, re-exported here (the notebook imports ``kvlab.lessons.paged as lesson``):
:mod:`.basics` (the paged cache next to the contiguous one, a pool that runs out), :mod:`.runs` (the
chapter's requests, the animated run, the waste of three schemes), :mod:`.sharing` (shared prefixes),
:mod:`.batching` (static against continuous batching), :mod:`.cost` (the cost of paging), :mod:`.panels`
(render functions and panels), :mod:`.review` (the self-check).
"""
from .batching import BatchingComparison, batching_sentences, compare_batching, throughput_sentence, \
    tpot_sentence, ttft_sentence
from .cost import PagingCost, StepCost, cell_verdict, cost_sentence, cost_sentences, paging_cost, why_sentence
from .basics import Exhausted, FirstLook, exhausted_html, exhausted_pool, first_look, texts_table
from .panels import batching_html, blocks_panel, render_blocks, render_sharing, render_waste, sharing_panel, \
    waste_panel
from .review import review_questions
from .runs import (ANIMATION, ANIMATION_BLOCKS, BLOCK_SIZE, DEMO, MAX_BATCH, WasteTimeline, animation_run,
                   demo_requests, outputs_match_alone, paged_is_measured, reused_blocks, step_events, waste_timeline)
from .sharing import SharingRun, sharing_run
from ...measure import device_label  # the device and timing threads, as the notebook prints it

__all__ = [
    "ANIMATION", "ANIMATION_BLOCKS", "BLOCK_SIZE", "BatchingComparison", "DEMO", "Exhausted", "FirstLook",
    "MAX_BATCH", "PagingCost", "SharingRun", "StepCost", "WasteTimeline", "animation_run", "batching_html",
    "batching_sentences", "blocks_panel", "cell_verdict", "compare_batching", "cost_sentence", "cost_sentences",
    "demo_requests", "exhausted_html", "exhausted_pool", "first_look", "outputs_match_alone", "paged_is_measured",
    "paging_cost", "render_blocks", "render_sharing", "render_waste", "reused_blocks", "review_questions",
    "sharing_panel", "sharing_run", "step_events", "texts_table", "throughput_sentence", "tpot_sentence",
    "ttft_sentence", "waste_panel", "waste_timeline", "why_sentence",
    "device_label",
]
