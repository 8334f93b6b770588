"""Chapter 3.6 (extension): a paged KV cache on the real model, shared prefixes, continuous batching, measured.

One module per section, re-exported here (the notebook imports ``kvlab.lessons.paged as lesson``):
:mod:`.basics` (the paged cache next to the contiguous one, a pool that runs out), :mod:`.runs` (the
chapter's requests, the animated run, the waste of three schemes), :mod:`.sharing` (shared prefixes;
the serving engine's own sharing measured),
:mod:`.batching` (static against continuous batching), :mod:`.cost` (the cost of paging; these three choose their
claims with :mod:`kvlab.claims`, gathered here as ``CHOOSERS`` and the catalogs ``ZH`` and ``EN``, ``CATALOGS`` by
language; :mod:`.texts` holds what else they show, in both languages), :mod:`.panels` (render functions and panels),
:mod:`.review` (the self-check), :mod:`.phrases` (what the code cells print, in both languages:
``lesson.say(key, **fields)``).
"""
from . import batching, cost, sharing
from .batching import BatchingComparison, compare_batching, explain_batching
from .cost import PagingCost, StepCost, cell_order, cell_verdict, explain_cost, gather_bytes, paging_cost, why_sentence
from .basics import Exhausted, FirstLook, exhausted_html, exhausted_pool, first_look, texts_table
from .panels import batching_html, blocks_panel, render_blocks, render_sharing, render_waste, sharing_panel, \
    waste_panel
from .phrases import CELLS, PROMPTS, say
from .review import review_questions
from .runs import (ANIMATION, ANIMATION_BLOCKS, BLOCK_SIZE, DEMO, MAX_BATCH, WasteTimeline, animation_readout,
                   animation_run, demo_requests, outputs_match_alone, paged_is_measured, reused_blocks, step_events,
                   waste_timeline)
from .sharing import (SharedServing, SharingRun, explain_sharing, serve_sharing, sharing_run,
                      system_prompt_requests)
from ...claims import Catalog, Claim, in_language, show
from ...measure import device_label  # the device and timing threads, as the notebook prints it

CHOOSERS = batching.CHOOSERS + sharing.CHOOSERS + cost.CHOOSERS  # every claim this chapter chooses from a measurement
TOPICS = (batching, sharing, cost)  # each holds its choosers' sentences: TEMPLATES (zh), TEMPLATES_EN, WORDS_EN
ZH = Catalog.of_topics("zh", TOPICS)
EN = Catalog.of_topics("en", TOPICS)
CATALOGS = {"zh": ZH, "en": EN}


def show_claims(claims: list[Claim]) -> None:
    """Display this chapter's claims in the course's language (``kvlab.set_language``), recorded in the output's
    metadata (``kvlab.claims.show``)."""
    show(claims, in_language(CATALOGS))


__all__ = [
    "ANIMATION", "ANIMATION_BLOCKS", "BLOCK_SIZE", "BatchingComparison", "CATALOGS", "CELLS", "CHOOSERS", "DEMO", "EN",
    "Exhausted",
    "FirstLook", "MAX_BATCH", "PROMPTS", "PagingCost", "SharedServing", "SharingRun", "StepCost", "WasteTimeline", "ZH",
    "animation_readout", "animation_run", "batching_html", "blocks_panel", "cell_order", "cell_verdict",
    "compare_batching", "demo_requests", "exhausted_html", "exhausted_pool", "explain_batching", "explain_cost",
    "explain_sharing", "first_look", "gather_bytes", "outputs_match_alone", "paged_is_measured", "paging_cost",
    "render_blocks", "render_sharing", "render_waste", "reused_blocks", "review_questions", "serve_sharing",
    "sharing_panel", "say", "sharing_run", "show_claims", "step_events", "system_prompt_requests", "texts_table", "TOPICS",
    "waste_panel", "waste_timeline", "why_sentence", "device_label",
]
