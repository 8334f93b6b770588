"""The cache modes of ``generate(model, ids, n, cache=mode)``: one :class:`CacheMode` entry each.

This list is the only place a mode is defined. ``generate`` builds a mode's cache through its
``factory``; the figures draw it in its ``color`` under its ``label`` (``kvlab.viz.style``); the
equivalence tests compare every ``exact`` mode with "none" to fp32 tolerance and bound the
others; the bad-input tests feed every factory absurd sizes; the glossary test looks for every
label in GLOSSARY.md. Adding a mode is one entry below (and its cache class):
ARCHITECTURE.md, "Adding a cache mode".
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

from .cache import BaseCache, DynamicKVCache, Int8KVCache, KVCache
from .paged_cache import PagedKVCache
from .teaching_caches import KOnlyCache

# (config, batch_size, max_seq_len=None, dtype=None, device=None) -> a cache, like the cache classes themselves
CacheFactory = Callable[..., BaseCache]


@dataclass(frozen=True)
class CacheMode:
    """One way ``generate`` keeps (or does not keep) K and V between passes."""

    name: str  # the value of generate's ``cache`` argument
    factory: CacheFactory | None  # builds the cache; None: no cache, every pass recomputes the whole sequence
    exact: bool  # True: the same logits as "none" up to float rounding order; False: K/V stored narrower (lossy)
    label: str  # its name in every legend, readout and paragraph (GLOSSARY.md)
    color: str  # its colour in every figure
    summary: str  # one line of English for docstrings and the command line's help

    @property
    def lossy(self) -> bool:
        return not self.exact


MODES: dict[str, CacheMode] = {m.name: m for m in (
    CacheMode("kv", KVCache, True, "有缓存（kv）", "#0072B2",
              "preallocated K/V for the whole sequence, written in place"),
    CacheMode("none", None, True, "无缓存（none）", "#D55E00",
              "no cache: every pass runs the whole sequence again"),
    CacheMode("k_only", KOnlyCache, True, "只缓存 K（k_only）", "#CC79A7",
              "K cached, V recomputed for every token at every pass (chapter 3.5's misconception)"),
    CacheMode("dynamic", DynamicKVCache, True, "逐步拼接（dynamic）", "#E69F00",
              "K/V grown by torch.cat: every pass copies all stored tokens again"),
    CacheMode("int8", Int8KVCache, False, "INT8 缓存（int8）", "#009E73",
              "K/V stored as int8 with one fp32 scale per token and head"),
    CacheMode("fp16", partial(KVCache, storage_dtype="fp16"), False, "FP16 缓存（fp16）", "#56B4E9",
              "preallocated K/V stored in fp16 whatever the model computes in"),
    CacheMode("paged", PagedKVCache, True, "分页缓存（paged）", "#882255",
              "K/V in blocks of a shared pool, one block table per sequence, no padding (chapter 3.6)"),
)}

CACHE_MODES = tuple(MODES)  # the names, in the order figures and tables list them
EXACT_MODES = tuple(name for name, m in MODES.items() if m.exact)
LOSSY_MODES = tuple(name for name, m in MODES.items() if m.lossy)
