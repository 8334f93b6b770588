"""Chapter 3.3, this machine's roofline: the two roofs (memory read bandwidth, matmul rate), the
larger random-weight model the sweeps run on, and the FLOP formula checked against torch's own count."""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from ..._validate import positive_int
from ...cache import KVCache
from ...costs import pass_cost
from ...measure import ROOFLINE_CONFIG, Roofs, measurement_threads, torch_threads
from ...memory import format_bytes
from ...model import ToyTransformer
from ...resources import cpu_budget
from .phrases import PANELS


def roofline_model(device=None, seed: int = 0) -> ToyTransformer:
    """A random-weight model whose fp32 weights (114 MiB) are larger than most CPUs' last-level cache,
    so a decode step has to stream them from memory, while a long prefill is big matrix products."""
    model = ToyTransformer(ROOFLINE_CONFIG, seed=seed).eval()
    return model.to(device) if device is not None else model


def weight_bytes_of(model: ToyTransformer) -> int:
    """Bytes of the model's parameters as they are stored."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def explain_weights_vs_cache(model: ToyTransformer, cache_bytes: int | None, device="cpu") -> str:
    """Whether the model's weights fit in the last-level cache, from its size in bytes (``last_level_cache``;
    None where the system does not say)."""
    weights = weight_bytes_of(model)
    where = PANELS.say("where.gpu" if torch.device(device).type == "cuda" else "where.cpu")
    if cache_bytes is None:
        return PANELS.say("weights.unknown", weights=format_bytes(weights), where=where)
    ratio = weights / cache_bytes
    return PANELS.say("weights.larger" if ratio >= 2 else "weights.fits", weights=format_bytes(weights), where=where,
                      cache=format_bytes(cache_bytes), ratio=ratio)



def _count(noun: str, n: int) -> str:
    """``n`` with its noun ("1 thread", "4 threads"), from the phrasebook."""
    return PANELS.say(f"count.{noun}_one" if n == 1 else f"count.{noun}", n=n)


def explain_roofs(roofs: Roofs) -> list[str]:
    """What the roofs stand for: how many threads measured them, and the ridge they give."""
    if roofs.threads is not None:
        budget = cpu_budget()  # the cores this process may use (a hub's quota), not the node's count
        cores = budget.value
        who = (PANELS.say("roofs.threads", threads=_count("threads", roofs.threads), cores=_count("cores", cores),
                           source=budget.source)
               + PANELS.say("roofs.part" if roofs.threads < cores
                            else "roofs.process" if cores < (os.cpu_count() or cores) else "roofs.machine"))
    else:
        who = PANELS.say("roofs.device", device=roofs.device)
    return [who, PANELS.say("roofs.ridge", ridge=roofs.ridge)]


@dataclass(frozen=True)
class RooflinePoint:
    label: str
    kind: str  # "prefill", "decode" (B = 1 after a prompt of P) or "batch" (decode of B sequences)
    intensity: float  # FLOP / byte
    flops_per_s: float  # achieved
    tag: str = ""  # a short name drawn beside the point ("P=32", "B=8")


@dataclass(frozen=True)
class FlopCheck:
    """The FLOP formula of :mod:`kvlab.costs` against torch's own count of every matrix product of a real pass."""

    prompt_len: int
    prefill_formula: int
    prefill_counted: int
    decode_formula: int
    decode_counted: int


@torch.no_grad()
def count_flops(model: ToyTransformer, prompt_len: int = 32, seed: int = 0) -> FlopCheck:
    """Count a prefill of ``prompt_len`` tokens and the decode step after it with
    ``torch.utils.flop_counter`` (explicit attention, so every matmul is visible to it)."""
    from torch.utils.flop_counter import FlopCounterMode

    c = model.config
    prompt_len = positive_int("prompt_len", prompt_len, maximum=c.max_seq_len - 1)
    ids = torch.randint(0, c.vocab_size, (1, prompt_len + 1), generator=torch.Generator().manual_seed(seed))
    ids = ids.to(model.device)
    cache = KVCache(c, 1, prompt_len + 1, dtype=model.dtype, device=model.device)
    counted = []
    impl, model.attention_impl = model.attention_impl, "explicit"
    try:
        with torch_threads(measurement_threads()):
            for feed in (ids[:, :prompt_len], ids[:, prompt_len:]):
                with FlopCounterMode(display=False) as counter:
                    model(feed, cache, last_logits_only=True)
                counted.append(counter.get_total_flops())
    finally:
        model.attention_impl = impl
    return FlopCheck(prompt_len, pass_cost(c, prompt_len).flops, counted[0], pass_cost(c, 1, prompt_len).flops,
                     counted[1])
