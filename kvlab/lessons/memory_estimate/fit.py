"""Chapter 3.4, section 3, will it fit: weights plus cache against the usable share of a card's memory
(:class:`FitPlan`), the longest context and the largest batch that fit (exact, by binary search on byte counts),
the cache as the context grows, what to say when the weights alone do not fit, the GPU table (datasheet, nvidia-smi,
PyTorch) and the chapter's T4 plans."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ...memory import DTYPE_BITS, format_bytes
from ...presets import GPU_PRESETS, ModelPreset
from .common import (CHAPTER_S, CONTEXT_GRID, DEFAULT_USABLE, GB, QUANTIZED, SEARCH_CAP, beyond_context_html, preset,
                    ratio_text, set_in, shown)
from .phrases import TEXTS


def usable_fraction(value) -> Fraction:
    """``value`` (0 < value <= 1) as an exact fraction: 0.9 -> 9/10 (from its shortest decimal form)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise ValueError(f"usable_fraction must be a number in (0, 1], got {value!r}")
    frac = Fraction(str(value)) if isinstance(value, float) else Fraction(value)
    if not 0 < frac <= 1:
        raise ValueError(f"usable_fraction must be in (0, 1], got {value!r}")
    return frac


@dataclass(frozen=True)
class FitPlan:
    """Weights plus cache against the usable part of a card's memory, and how far each of S and B could go."""

    model: ModelPreset
    total_bytes: int  # the card's memory (nvidia-smi's total)
    usable: Fraction  # the share an engine plans with (weights, cache; vLLM: also CUDA context, activations); the rest
    # is a margin (fragmentation, other processes on the card)
    weight_dtype: str
    cache_dtype: str
    seq_len: int
    batch_size: int
    weight_bytes: int
    cache_bytes: int
    longest_context: int | None  # at batch_size; None: the cache stops growing before it fills the room
    largest_batch: int  # at seq_len

    @property
    def budget_bytes(self) -> int:
        """What weights and cache may use: ``total_bytes * usable``, rounded down to whole bytes."""
        return self.total_bytes * self.usable.numerator // self.usable.denominator

    @property
    def reserved_bytes(self) -> int:
        return self.total_bytes - self.budget_bytes

    @property
    def room_bytes(self) -> int:
        """What the weights leave for the cache (negative when they alone do not fit)."""
        return self.budget_bytes - self.weight_bytes

    @property
    def free_bytes(self) -> int:
        return self.room_bytes - self.cache_bytes

    @property
    def weights_fit(self) -> bool:
        return self.room_bytes >= 0

    @property
    def fits(self) -> bool:
        return self.free_bytes >= 0


def longest_context(model, room_bytes: int, batch_size: int = 1, dtype: str = "fp16") -> int | None:
    """The largest S whose cache fits in ``room_bytes`` (0: not even one token; None: the cache stops growing,
    every layer windowed, before it fills the room). Exact: a binary search on the exact byte counts."""
    p = preset(model)
    cache = lambda s: p.kv_cache_bytes(s, batch_size, dtype)  # noqa: E731
    if room_bytes < cache(1):
        return 0
    if cache(SEARCH_CAP) <= room_bytes:
        return None
    lo, hi = 1, SEARCH_CAP  # cache(lo) fits, cache(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if cache(mid) <= room_bytes else (lo, mid)
    return lo


def largest_batch(model, room_bytes: int, seq_len: int, dtype: str = "fp16") -> int:
    """The most sequences of ``seq_len`` tokens whose cache fits in ``room_bytes`` (the cache is linear in B)."""
    return max(0, room_bytes) // preset(model).kv_cache_bytes(seq_len, 1, dtype)


def plan_fit(model, total_bytes: int, seq_len: int, batch_size: int = 1, weight_dtype: str = "fp16",
             cache_dtype: str = "fp16", usable=DEFAULT_USABLE) -> FitPlan:
    """Weights and cache of ``model`` on a card of ``total_bytes``, of which the share ``usable`` is planned with."""
    p = preset(model)
    if isinstance(total_bytes, bool) or not isinstance(total_bytes, int) or total_bytes < 1:
        raise ValueError(f"total_bytes must be a positive whole number of bytes, got {total_bytes!r}")
    frac = usable_fraction(usable)
    weights = p.weight_bytes(weight_dtype)
    cache = p.kv_cache_bytes(seq_len, batch_size, cache_dtype)
    room = total_bytes * frac.numerator // frac.denominator - weights
    return FitPlan(p, total_bytes, frac, weight_dtype, cache_dtype, seq_len, batch_size, weights, cache,
                   longest_context(p, room, batch_size, cache_dtype), largest_batch(p, room, seq_len, cache_dtype))


@dataclass(frozen=True)
class ContextCurve:
    """The fit panel's second figure: what the card holds as the context grows, at the plan's batch size and dtypes."""

    seq_lens: tuple[int, ...]  # from 0 to past every point of interest
    cache_bytes: tuple[int, ...]  # at each length (0 at S = 0)
    overtakes_weights: int | None  # the first S whose cache is larger than the weights (None: it stops growing first)
    context_length: int | None  # the model's released context (None: hypothetical)


def context_curve(plan: FitPlan) -> ContextCurve:
    """Sample ``plan``'s cache from S = 0 to a little past its seq_len, its context, the length where the room runs
    out and (for sliding windows) the window, keeping those points exactly; plus where the cache passes the weights."""
    p, B, dtype = plan.model, plan.batch_size, plan.cache_dtype
    under = longest_context(p, plan.weight_bytes, B, dtype)
    overtakes = None if under is None else under + 1
    context = p.context_length if p.has_released_context else None
    window = 2 * p.sliding_window if p.sliding_window else 0  # the bend and as much again after it
    marks = [plan.seq_len, context or 0, plan.longest_context or 0, window]
    end = max(16, -(-max(marks) * 23 // 20))  # 15 % past the farthest, so no point sits on the edge
    exact = {m for m in (*marks, p.sliding_window or 0, overtakes or 0) if 0 < m <= end}
    grid = sorted({end * i // CONTEXT_GRID for i in range(CONTEXT_GRID + 1)} | exact)
    cache = tuple(p.kv_cache_bytes(s, B, dtype) if s else 0 for s in grid)
    return ContextCurve(tuple(grid), cache, overtakes, context)


def gpu_for_budget(gpu: str, budget_mib: int) -> str:
    """How the budget is labelled: the card's name when the box holds that card's memory."""
    card = GPU_PRESETS.get(gpu)
    return card.name if card and card.memory_mib == budget_mib else TEXTS.say("gpu.custom", mib=budget_mib)


def narrower_dtypes(dtype: str) -> list[str]:
    """The weight dtypes with fewer bits than ``dtype`` (none for int4)."""
    return [d for d in QUANTIZED if DTYPE_BITS[d] < DTYPE_BITS[dtype]]


def weights_do_not_fit(plan: FitPlan) -> str:
    """The message when the weights alone exceed the usable memory: by how much, and only the remedies left."""
    p, wd = plan.model, plan.weight_dtype
    narrower = narrower_dtypes(wd)
    remedies = [TEXTS.say("remedy.card")] + \
        ([TEXTS.say("remedy.dtype", dtypes=TEXTS.say("remedy.or").join(narrower))] if narrower else []) + \
        [TEXTS.say("remedy.split")]
    return TEXTS.say("no_fit", usable=float(plan.usable), budget=format_bytes(plan.budget_bytes), model=set_in(shown(p)),
                     dtype=wd, weights=format_bytes(plan.weight_bytes),
                     short=format_bytes(plan.weight_bytes - plan.budget_bytes),
                     remedies=TEXTS.say("remedy.sep").join(remedies[:-1]), last=remedies[-1])


def usable_note(usable: Fraction | None = None) -> str:
    """What the share left out of the plan is for, and what vLLM takes from the planned share (the one wording, 3.4
    and 3.5): 「其余 10% 不做规划……」, or 「其余部分……」 without ``usable``."""
    rest = (TEXTS.say("usable.rest_any") if usable is None
            else TEXTS.say("usable.rest", rest=float(1 - usable_fraction(usable))))
    return TEXTS.say("usable.note", rest=rest)


def approximation_note(weight_dtype: str) -> str:
    """The small print under the fit readout: what the weight figure leaves out, and what the usable share is for."""
    note = TEXTS.say("approx.weights")
    if weight_dtype in QUANTIZED:
        note += TEXTS.say("approx.quantized", dtype=weight_dtype)
    return note + TEXTS.say("approx.usable", note=usable_note())


def fit_html(plan: FitPlan) -> str:
    p, B, S = plan.model, plan.batch_size, plan.seq_len
    rest = (TEXTS.say("fit.free", free=format_bytes(plan.free_bytes)) if plan.fits
            else TEXTS.say("fit.short", short=format_bytes(-plan.free_bytes)))
    lines = [TEXTS.say("fit.head", params=p.n_params, assumed=TEXTS.say("fit.assumed") if p.hypothetical else "",
                       byte=DTYPE_BITS[plan.weight_dtype] / 8, wd=plan.weight_dtype,
                       weights=format_bytes(plan.weight_bytes), B=B, S=S, cd=plan.cache_dtype,
                       cache=format_bytes(plan.cache_bytes), budget=format_bytes(plan.budget_bytes),
                       total=format_bytes(plan.total_bytes), usable=float(plan.usable), rest=rest)]
    warning = beyond_context_html(p, S)
    if warning:
        lines.append(warning)
    if plan.longest_context is None:
        longest = TEXTS.say("fit.unbounded")
    elif plan.longest_context == 0:
        longest = TEXTS.say("fit.none")
    else:
        longest = TEXTS.say("fit.tokens", n=plan.longest_context, note=past_context_capacity(plan))
    lines.append(TEXTS.say("fit.longest", B=B, longest=longest))
    lines.append(TEXTS.say("fit.largest", S=S, n=plan.largest_batch))
    lines.append(f'<span style="font-size:90%;color:#555">{approximation_note(plan.weight_dtype)}</span>')
    return "<br>".join(lines)


def gpu_table_html() -> str:
    """Each GPU preset: the datasheet's number, what nvidia-smi reports (in MiB, GiB and GB), and what PyTorch
    reports where a reading is cited."""
    rows = "".join(
        f"<tr><td>{g.name}</td><td>{g.marketed}</td><td>{g.memory_mib:,} MiB</td>"
        f"<td>{format_bytes(g.memory_bytes)}</td><td>{float(Fraction(g.memory_bytes, GB)):.2f} GB</td>"
        f"<td>{TEXTS.say('gpu.about', gib=g.torch_total_gib) if g.torch_total_gib else '—'}</td></tr>"
        for g in GPU_PRESETS.values())
    return TEXTS.say("gpu.table", rows=rows)


def t4_plans(seq_len: int = CHAPTER_S) -> list[FitPlan]:
    """The chapter's deployment question on a Colab T4 at the default usable share: LLaMA-7B in FP16, Llama-3-8B in
    FP16 and in int8 (FP16 caches, one sequence of ``seq_len`` tokens)."""
    t4 = GPU_PRESETS["T4 16 GB (Colab)"].memory_bytes
    return [plan_fit(name, t4, seq_len, 1, weights) for name, weights in
            (("LLaMA-7B", "fp16"), ("Llama-3-8B", "fp16"), ("Llama-3-8B", "int8"))]


def plan_line(plan: FitPlan) -> str:
    """One line per plan for the notebook: weights, room left for the cache, longest context, largest batch."""
    head = TEXTS.say("plan.head", model=shown(plan.model), dtype=plan.weight_dtype,
                     weights=format_bytes(plan.weight_bytes), budget=format_bytes(plan.budget_bytes))
    if not plan.weights_fit:
        return TEXTS.say("plan.no_weights", head=head, short=format_bytes(-plan.room_bytes))
    longest = TEXTS.say("fit.unbounded") if plan.longest_context is None else \
        TEXTS.say("plan.tokens", n=plan.longest_context, note=past_context_capacity(plan))
    return TEXTS.say("plan.line", head=head, room=format_bytes(plan.room_bytes), longest=longest, S=plan.seq_len,
                     batch=plan.largest_batch)


def past_context_capacity(plan: FitPlan) -> str:
    """The note after a longest context at or past the model's released one ("" otherwise): memory is not the
    limit, and the number is only the formula's capacity."""
    p, longest = plan.model, plan.longest_context
    if longest is None or not p.has_released_context or longest < p.context_length:
        return ""
    return TEXTS.say("past_context", ctx=p.context_length)


def int8_gain_line(fp16_7b: FitPlan, int8_8b: FitPlan) -> str:
    """Why int8 Llama-3-8B holds many sequences where FP16 LLaMA-7B holds none: the weights halve, and GQA cuts each
    sequence's cache by the ratio of KV heads (both at the plans' seq_len, FP16 caches)."""
    a, b = fp16_7b.model, int8_8b.model
    ratio = Fraction(fp16_7b.cache_bytes, int8_8b.cache_bytes)
    return TEXTS.say("int8_gain", model=set_in(shown(b)), fp16=format_bytes(b.weight_bytes("fp16")),
                     int8=format_bytes(int8_8b.weight_bytes), kv=b.n_kv_head, S=int8_8b.seq_len,
                     cache=format_bytes(int8_8b.cache_bytes), other=shown(a), other_kv=a.n_kv_head,
                     other_cache=format_bytes(fp16_7b.cache_bytes), ratio=ratio_text(ratio))
