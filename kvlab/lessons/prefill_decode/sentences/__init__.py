"""Chapter 3.3's claims (issue 31): every sentence that reads a measurement is chosen by a
:class:`~kvlab.claims.Chooser` whose predicate is stated over the very numbers printed with it. One module per topic
holds its choosers and their sentences (``TEMPLATES`` in Chinese, ``TEMPLATES_EN`` in English): :mod:`.timeline`, :mod:`.prefill_sweep`,
:mod:`.readings` (measured points against the roofs), :mod:`.batching`, :mod:`.engineering`; :mod:`.common` holds
what they share (number printing, reading printed numbers back). Here they become one list, :data:`CHOOSERS`, and
the catalogs :data:`ZH` and :data:`EN` (:data:`CATALOGS` by language), which :func:`show_claims` writes with. The ``explain_*`` functions of the section modules
build the numbers and call these choosers."""
from __future__ import annotations

from ....claims import Catalog, Claim, in_language, show
from . import batching, engineering, prefill_sweep, readings, timeline
from .batching import (BATCH_GAIN, BATCH_LEFT, BATCH_ORDER, BATCH_RIGHT, BATCH_SHAPE, MATMUL_ROWS, MATMUL_SLOWDOWN,
                       OVERLAP)
from .engineering import ALLOCATOR, PRECISION
from .prefill_sweep import (ONE_PASS, PREFILL_GROWTH, PREFILL_RATES, PREFILL_TAIL, RIDGE, SAME_WORK, SPEEDUP,
                            SPEEDUP_GROWTH)
from .readings import (BATCH_BASELINE, BATCH_VS_PREFILL, DECODE_ROOF, DECODE_SUM, DECODE_VS_MATVEC, LONG_RATE,
                       MATVEC_READ, PREFILL_ROOF, PREFILL_TREND, ROOF_SPREAD, WORKED_BOUNDS)
from .timeline import ITL_TAIL, PANEL, PARALLEL, STEP_BUDGET

TOPICS = (timeline, prefill_sweep, readings, batching, engineering)  # in the order the notebook says them


CHOOSERS = tuple(chooser for topic in TOPICS for chooser in topic.CHOOSERS)
ZH = Catalog.of_topics("zh", TOPICS)
EN = Catalog.of_topics("en", TOPICS)
CATALOGS = {"zh": ZH, "en": EN}


__all__ = [
    "CHOOSERS", "ZH", "EN", "CATALOGS", "show_claims", "TOPICS",
    "BATCH_GAIN", "BATCH_LEFT", "BATCH_ORDER", "BATCH_RIGHT", "BATCH_SHAPE", "MATMUL_ROWS", "MATMUL_SLOWDOWN", "OVERLAP",
    "ALLOCATOR", "PRECISION", "ONE_PASS", "PREFILL_GROWTH", "PREFILL_RATES", "PREFILL_TAIL", "RIDGE", "SAME_WORK",
    "SPEEDUP", "SPEEDUP_GROWTH", "BATCH_BASELINE", "BATCH_VS_PREFILL", "DECODE_ROOF", "DECODE_SUM", "DECODE_VS_MATVEC",
    "LONG_RATE", "MATVEC_READ", "PREFILL_ROOF", "PREFILL_TREND", "ROOF_SPREAD", "WORKED_BOUNDS", "ITL_TAIL",
    "PANEL", "PARALLEL", "STEP_BUDGET",
]


def show_claims(claims: list[Claim]) -> None:
    """Display this chapter's claims in the course's language (``kvlab.set_language``), recorded in the output's
    metadata (``kvlab.claims.show``); nothing when there are none."""
    if claims:
        show(claims, in_language(CATALOGS))
