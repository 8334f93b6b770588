"""Chapter 3.4's summary as bullets, every number computed from the sections before it."""
from __future__ import annotations

import html

from ...memory import format_bytes
from ...presets import MODEL_PRESETS
from .allocation import AllocationCheck
from .common import CHAPTER_LONG_S, CHAPTER_MODEL, CHAPTER_S, GIB, SHAPE_EXAMPLE_S, TEXT_LONG_GB, ratio_text, set_in, shown
from .gqa import gqa_twins
from .phrases import TEXTS
from .text_figures import gb_and_gib, halving_variants


def summary_html(check: AllocationCheck) -> str:
    """The chapter's summary as bullets; every number computed here."""
    llama = MODEL_PRESETS[CHAPTER_MODEL]
    as_written, at_1024 = halving_variants()[:2]
    comment_layer, comment_total = at_1024.printed
    gb, gib = gb_and_gib(GIB)
    twin = gqa_twins()[0]
    long_factor = CHAPTER_LONG_S // CHAPTER_S
    say = TEXTS.say
    measured = say("summary.measured" if check.is_measurement else "summary.storage")
    bullets = [
        say("summary.code", S=CHAPTER_S, layer=format_bytes(llama.layer_kv_cache_bytes(0, CHAPTER_S)),
            total=format_bytes(llama.kv_cache_bytes(CHAPTER_S)), long_s=CHAPTER_LONG_S,
            long_total=format_bytes(llama.kv_cache_bytes(CHAPTER_LONG_S)), comment_layer=comment_layer,
            comment_total=comment_total, short_s=SHAPE_EXAMPLE_S, text_gb=TEXT_LONG_GB, factor=long_factor),
        say("summary.units", pct=float((gb / gib - 1) * 100)),
        say("summary.gqa", gqa=shown(twin.gqa), mha=set_in(shown(twin.mha)), ratio=ratio_text(twin.ratio)),
        say("summary.paging"),
        say("summary.deploy"),
        say("summary.run", run=measured),
    ]
    return "<ul>" + "".join(f"<li>{html.escape(b)}</li>" for b in bullets) + "</ul>"
