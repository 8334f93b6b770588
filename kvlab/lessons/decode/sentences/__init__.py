"""Chapter 3.1's claims (issue 31): every sentence that reads a timed run is chosen by a
:class:`~kvlab.claims.Chooser` whose predicate is stated over the very numbers printed with it (measured medians,
never a fit's intercept as a time; shares and ratios of them; extrapolations only from a growth this run measured).
One module per topic holds its choosers and their Chinese sentences (``TEMPLATES``): :mod:`.series` (the totals,
both modes' eighths, the counted crossover), :mod:`.exponents` (step and cumulative exponents, or why one is not
read), :mod:`.growth` (the fixed cost, the extrapolation, the long cached run, the rerun); :mod:`.common` holds what
they share (number printing, how a series of eighths reads, printed ratios checked). Here they become one list,
:data:`CHOOSERS`, and one catalog per language, :data:`ZH` and :data:`EN` (:data:`CATALOGS`), which :func:`show_claims` writes with; :mod:`.explain` builds the
numbers of a run and asks the choosers (:func:`explain_latency`, :func:`explain_growth`)."""
from __future__ import annotations

from ....claims import Catalog, Claim, in_language, show
from . import exponents, growth, series
from .common import RISING_DIP, RISING_JUMP, lone_outlier
from .series import CACHED, CROSSOVER, GROWING, OUTLIER_KEYS, ROUGH_KEYS, STALLED, TOTALS, UNCACHED
from .exponents import (BEND, CUMULATIVE, CUMULATIVE_LEVEL, SHARE_BAND, STEP_EXPONENT, STEP_JUMP, STEP_OUTLIER,
                        STEP_STEEP, STEP_UNREAD, ENDS_BAND, ends_exponent, implied_exponent)
from .growth import EXTRAPOLATION, FIXED_COST, GROWTH, GROWTH_RULES, RERUN
from .explain import (_ends_numbers, _exponent_claims, _outlier_numbers, _totals,  # noqa: F401 (tests import them here)
                      explain_growth, explain_latency)

TOPICS = (series, exponents, growth)

# in the order the notebook says them (the cached eighths come after the uncached exponents)
CHOOSERS = (TOTALS, UNCACHED, CROSSOVER, STEP_EXPONENT, STEP_UNREAD, STEP_JUMP, STEP_OUTLIER, STEP_STEEP, CUMULATIVE,
            CACHED, FIXED_COST, EXTRAPOLATION, GROWTH, RERUN)
if sorted(c.name for c in CHOOSERS) != sorted(c.name for topic in TOPICS for c in topic.CHOOSERS):
    raise ValueError("CHOOSERS: not exactly the topics' choosers")


ZH = Catalog.of_topics("zh", TOPICS)
EN = Catalog.of_topics("en", TOPICS)  # each topic's TEMPLATES_EN (and WORDS_EN): the same keys and fields
CATALOGS = {"zh": ZH, "en": EN}


def show_claims(claims: list[Claim]) -> None:
    """Display this chapter's claims in the course's language (``kvlab.set_language``), recorded in the output's
    metadata (``kvlab.claims.show``)."""
    show(claims, in_language(CATALOGS))


__all__ = [
    "CHOOSERS", "ZH", "EN", "CATALOGS", "show_claims", "TOPICS", "explain_latency", "explain_growth",
    "RISING_DIP", "RISING_JUMP", "lone_outlier", "TOTALS", "UNCACHED", "CROSSOVER", "CACHED", "STALLED", "GROWING",
    "OUTLIER_KEYS", "ROUGH_KEYS", "STEP_EXPONENT", "STEP_UNREAD", "STEP_JUMP", "STEP_OUTLIER", "STEP_STEEP",
    "CUMULATIVE", "CUMULATIVE_LEVEL", "SHARE_BAND", "BEND", "implied_exponent", "ENDS_BAND", "ends_exponent", "FIXED_COST", "EXTRAPOLATION",
    "GROWTH", "GROWTH_RULES", "RERUN",
]
