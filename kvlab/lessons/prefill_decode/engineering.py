"""Chapter 3.3's engineering notes as experiments: preallocation and the GPU allocator, prompts of
unequal length in one batch (left padding), and FP16/INT8 caches."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import partial

import torch

from ... import assets
from ..._validate import positive_int
from ...claims import Claim, Number, number, ratio
from ...config import ModelConfig
from ...costs import PassCost, decode_cost, pass_cost
from ...generation import generate, make_cache
from ...inputs import whole_number, whole_numbers
from ...measure import device_label, measurement_threads, torch_threads
from ...memory import format_bytes, stored_tokens
from ...model import ToyTransformer
from ...paging import paged_slots
from ...stats import median
from ...viz import prefill_decode_plots as plots
from ...viz.widgets import Panel, PanelOptions, View, int_slider, recent_run, text_box
from ...tokenizer import TOKENIZERS, CharTokenizer
from .phrases import PANELS, label
from .sentences.engineering import ALLOCATOR, PRECISION
from .timeline import Timeline


@dataclass
class AllocatorTrace:
    """Allocator counters after each pass of one generation, in bytes above what was allocated before it
    (one baseline for both counters, so ``reserved >= allocated`` holds on every pass)."""

    mode: str
    lengths: list[int]
    allocated: list[int]
    reserved: list[int]

    @property
    def held_unused(self) -> list[int]:
        """Reserved by the allocator but not used by any tensor, after each pass."""
        return [r - a for a, r in zip(self.allocated, self.reserved)]


@dataclass
class AllocatorComparison:
    device: str
    available: bool
    reason: str  # why it was skipped (empty when it ran)
    traces: dict[str, AllocatorTrace] = field(default_factory=dict)


CPU_ALLOCATOR_REASON = PANELS.text("cpu_allocator", "zh")  # recorded as the reason; shown in the course's language


@torch.no_grad()
def allocator_growth(model: ToyTransformer, prompt_len: int = 16, new_tokens: int = 256, batch_size: int = 8,
                     seed: int = 0, counters=None) -> AllocatorComparison:
    """Generate with a growing ("dynamic") and a preallocated ("kv") cache, reading the CUDA allocator's
    allocated and reserved bytes after every pass. ``counters`` (a function returning ``(allocated, reserved)``)
    replaces the CUDA counters, for tests; without it, anything but a CUDA model is skipped with the reason."""
    prompt_len = positive_int("prompt_len", prompt_len)
    new_tokens = positive_int("new_tokens", new_tokens)
    batch_size = positive_int("batch_size", batch_size)
    if prompt_len + new_tokens > model.config.max_seq_len:
        raise ValueError(f"new_tokens: prompt_len ({prompt_len}) + new_tokens ({new_tokens}) passes the model's "
                         f"max_seq_len ({model.config.max_seq_len})")
    dev = model.device
    if counters is None:
        if dev.type != "cuda":
            return AllocatorComparison(str(dev), False, CPU_ALLOCATOR_REASON)
        counters = partial(_cuda_counters, dev)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (batch_size, prompt_len), generator=gen).to(dev)
    out = AllocatorComparison(device_label(dev), True, "")
    for mode in ("dynamic", "kv"):
        if dev.type == "cuda":
            torch.cuda.empty_cache()  # start each mode from the blocks still in use only
        base, _ = counters()
        cache = make_cache(model, mode, batch_size, stored_tokens(prompt_len, new_tokens))  # as generate() sizes it
        trace = AllocatorTrace(mode, [], [], [])
        feed = ids
        for _ in range(new_tokens):
            feed = model(feed, cache, last_logits_only=True)[:, -1:].argmax(-1)  # [B, 1]: the greedy next tokens
            allocated, reserved = counters()
            trace.lengths.append(cache.length)
            trace.allocated.append(allocated - base)
            trace.reserved.append(reserved - base)
        out.traces[mode] = trace
        del cache, feed
    return out


def _cuda_counters(device) -> tuple[int, int]:
    torch.cuda.synchronize(device)
    return torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device)


def allocator_lines(alloc: AllocatorComparison) -> list[str]:
    """What the allocator counters showed for each mode (readouts), or why nothing was measured."""
    if not alloc.available:
        return [PANELS.say("cpu_allocator") if alloc.reason == CPU_ALLOCATOR_REASON else alloc.reason]
    return [PANELS.say("allocator_line", mode=mode, allocated=format_bytes(t.allocated[-1]),
                       reserved=format_bytes(t.reserved[-1]), unused=format_bytes(max(t.held_unused)), device=alloc.device)
            for mode, t in alloc.traces.items()]


def explain_allocator(alloc: AllocatorComparison) -> list[Claim]:
    """Whether the growing cache left more memory reserved but unused than the preallocated one
    (:data:`~.sentences.ALLOCATOR`); nothing when the counters were not available."""
    if not alloc.available:
        return []
    grow, pre = (max(alloc.traces[m].held_unused) / 2**20 for m in ("dynamic", "kv"))
    return [ALLOCATOR.choose({"grow": number(grow, 2, "MiB"), "pre": number(pre, 2, "MiB")})]


def explain_reservation(timeline: Timeline, config: ModelConfig) -> str:
    """The timeline's cache was sized for a known number of tokens; sized for max_seq_len it would sit mostly empty."""
    used = stored_tokens(timeline.prompt_tokens, timeline.passes)
    share = used / config.max_seq_len
    return PANELS.say("reservation", passes=timeline.passes, prompt=timeline.prompt_tokens, used=used,
                      longest=config.max_seq_len, share=share, rest=1 - share)


# -- prompts of unequal length in one batch ---------------------------------------------------------------------
PADDED_LENGTHS = "3, 17, 9, 30"
PADDED_NEW_TOKENS = 12
# the padding panel's controls as the Chinese edition shows them; the panel shows each in the course's language
PADDED_LENGTHS_LABEL, BLOCK_LABEL = PANELS.text("label.padded_lengths", "zh"), PANELS.text("label.block", "zh")
def corpus_text() -> str:
    """The demo model's training text on one line (every character is in its vocabulary)."""
    return assets.corpus_text().replace("\n", "")


def corpus_prompts(lengths: list[int], text: str | None = None, tokenizer=None) -> list[str]:
    """Prompts of the given lengths: pieces of the corpus, each starting after a different full stop. Lengths count
    characters of the Chinese corpus (one token each); with a subword ``tokenizer`` (the English demo model's) they
    count its tokens, in pieces of its own corpus (:func:`_subword_prompts`)."""
    if tokenizer is not None and not isinstance(tokenizer, CharTokenizer):
        return _subword_prompts(lengths, tokenizer, text)
    text = corpus_text() if text is None else text
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "。" and i + 1 < len(text)]
    out = []
    for i, n in enumerate(lengths):
        begin = starts[(7 * i) % len(starts)]
        if begin + n > len(text):
            begin = 0
        out.append(text[begin:begin + n])
    return out


def _subword_prompts(lengths: list[int], tokenizer, text: str | None = None) -> list[str]:
    """Prompts of exactly the given numbers of ``tokenizer``'s tokens, each starting at the beginning of a different
    sentence of its corpus (after 「. 」): the first ``n`` tokens of the text from there, decoded, kept where they
    encode back to the same ``n`` tokens (otherwise the next sentence is tried)."""
    lang = next((code for code, kind in TOKENIZERS.items() if isinstance(tokenizer, kind)), "en")
    text = assets.corpus_text(lang).replace("\n", " ") if text is None else text
    starts = [0] + [i + 2 for i in range(len(text) - 2) if text[i:i + 2] == ". " and not text[i + 2].isspace()]
    out = []
    for i, n in enumerate(lengths):
        for k in range(len(starts)):
            begin = starts[(7 * i + k) % len(starts)]
            ids = tokenizer.encode(text[begin:begin + 16 * n])[:n]
            prompt = tokenizer.decode(ids)
            if len(ids) == n and tokenizer.encode(prompt) == ids:
                out.append(prompt)
                break
        else:
            raise ValueError(f"lengths: no piece of the corpus is {n} tokens long")
    return out


@dataclass
class PaddedBatch:
    """Prompts of unequal length generated as one left-padded batch, and each one alone."""

    prompts: list[str]
    new_tokens: int
    block_size: int
    pad_lengths: list[int]
    batch_text: list[str]  # each row's new tokens, from the batch
    alone_text: list[str]  # each prompt's new tokens when generated alone
    cache_slots: int  # token rows the batch's cache allocated (B × its max_seq_len), read from the cache
    cache_bytes: int
    bytes_per_slot: int
    batch_cost: PassCost  # prefill + decode of the padded batch
    alone_cost: PassCost  # the same tokens without padding (each sequence's own passes)
    prompt_pieces: list[list[str]] | None = None  # each prompt's tokens as text (None: one character a token)
    new_pieces: list[list[str]] | None = None  # each row's new tokens as text, from the batch

    @property
    def lengths(self) -> list[int]:
        """Each prompt's length in tokens."""
        if self.prompt_pieces is not None:
            return [len(p) for p in self.prompt_pieces]
        return [len(p) for p in self.prompts]

    def pieces(self, row: int) -> tuple[list[str], list[str]]:
        """Row ``row``'s prompt tokens and new tokens, each as its text."""
        if self.prompt_pieces is not None and self.new_pieces is not None:
            return self.prompt_pieces[row], self.new_pieces[row]
        return list(self.prompts[row]), list(self.batch_text[row])

    @property
    def same_as_alone(self) -> list[bool]:
        return [a == b for a, b in zip(self.batch_text, self.alone_text)]

    @property
    def stored_lengths(self) -> list[int]:
        """Tokens each sequence really stores: its prompt and every new token but the last."""
        return [stored_tokens(n, self.new_tokens) for n in self.lengths]

    @property
    def used_slots(self) -> int:
        return sum(self.stored_lengths)

    @property
    def paged_slots(self) -> int:
        return paged_slots(self.stored_lengths, self.block_size)

    def paged_slots_at(self, block_size: int) -> int:
        """Slots the same sequences would take in blocks of ``block_size`` tokens."""
        return paged_slots(self.stored_lengths, block_size)

    @property
    def padding_slots(self) -> int:
        """Slots the padded cache holds for no token (padding, and room beyond a short sequence)."""
        return self.cache_slots - self.used_slots

    @property
    def tail_slots(self) -> int:
        """Empty slots in the last block of each sequence, when paged."""
        return self.paged_slots - self.used_slots

    @property
    def slot_waste(self) -> float:
        return 1 - self.used_slots / self.cache_slots

    @property
    def extra_flops(self) -> float:
        """Fraction of the batch's FLOPs spent on padding."""
        return 1 - self.alone_cost.flops / self.batch_cost.flops


def _generation_cost(config: ModelConfig, prompt_len: int, new_tokens: int, batch_size: int = 1) -> PassCost:
    cost = pass_cost(config, prompt_len, 0, batch_size)
    return cost + decode_cost(config, prompt_len, new_tokens - 1, batch_size) if new_tokens > 1 else cost


def run_padded_batch(model: ToyTransformer, tokenizer, prompts: list[str], new_tokens: int = PADDED_NEW_TOKENS,
                     block_size: int = 16) -> PaddedBatch:
    """Generate ``prompts`` (unequal lengths) as one batch and each alone; count slots and FLOPs."""
    new_tokens = positive_int("new_tokens", new_tokens)
    block_size = positive_int("block_size", block_size)
    if not isinstance(prompts, (list, tuple)) or not prompts or not all(isinstance(p, str) and p for p in prompts):
        raise ValueError(f"prompts must be a non-empty list of non-empty strings, got {prompts!r}")
    ids = [tokenizer.encode(p) for p in prompts]
    c = model.config
    with torch_threads(measurement_threads()):
        result = generate(model, ids, new_tokens, cache="kv")
        alone = [generate(model, row, new_tokens, cache="kv").new_tokens[0].tolist() for row in ids]
    cache = result.cache
    width = max(len(r) for r in ids)
    alone_cost = _generation_cost(c, len(ids[0]), new_tokens)
    for row in ids[1:]:
        alone_cost = alone_cost + _generation_cost(c, len(row), new_tokens)
    return PaddedBatch(
        list(prompts), new_tokens, block_size, result.pad_lengths,
        [tokenizer.decode(r) for r in result.new_tokens.tolist()], [tokenizer.decode(r) for r in alone],
        cache.batch_size * cache.max_seq_len, cache.nbytes, cache.nbytes // (cache.batch_size * cache.max_seq_len),
        _generation_cost(c, width, new_tokens, len(ids)), alone_cost,
        [[tokenizer.decode([t]) for t in row] for row in ids],
        [[tokenizer.decode([t]) for t in r] for r in result.new_tokens.tolist()])


def paged_text(b: PaddedBatch) -> str:
    """How many slots paging needs against padding, with the reason taken from the numbers."""
    if b.paged_slots < b.cache_slots:
        return PANELS.say("paged.fewer", paged=b.paged_slots)
    if b.paged_slots == b.cache_slots:
        return PANELS.say("paged.same", paged=b.paged_slots)
    why = PANELS.say("paged.why_equal") if b.padding_slots == 0 else PANELS.say("paged.why_more", padding=b.padding_slots)
    return PANELS.say("paged.more", paged=b.paged_slots, tail=b.tail_slots, why=why)


def render_padded_batch(model: ToyTransformer, tokenizer, runs: dict, lengths, block_size) -> View:
    """The padding panel: prompts of the typed lengths, generated as one batch and each alone (once per list of
    lengths: the block size only changes the paged count)."""
    limit = model.config.max_seq_len - PADDED_NEW_TOKENS
    values = whole_numbers(label(PADDED_LENGTHS_LABEL), lengths, 1, limit, 8)
    block = whole_number(label(BLOCK_LABEL), block_size, 1, 64)
    run = recent_run(runs, tuple(values),
                     lambda: run_padded_batch(model, tokenizer, corpus_prompts(values, tokenizer=tokenizer)), keep=8)
    b = dataclasses.replace(run, block_size=block)
    same = sum(b.same_as_alone)
    readout = PANELS.say(
        "padded_html", B=len(b.prompts), lengths=", ".join(map(str, b.lengths)), longest=max(b.lengths),
        new=b.new_tokens, same=same, slots=b.cache_slots, size=format_bytes(b.cache_bytes), used=b.used_slots,
        waste=b.slot_waste, block=b.block_size, paged=paged_text(b), flops=b.batch_cost.flops / 1e6,
        alone=b.alone_cost.flops / 1e6, extra=b.extra_flops)
    return View([plots.padded_batch_figure(b), plots.padding_cost_figure(b)], readout, b)


def padded_batch_panel(model: ToyTransformer, tokenizer, lengths: str = PADDED_LENGTHS) -> Panel:
    """A box of prompt lengths and the block size of the paged count."""
    controls = {"lengths": text_box(label(PADDED_LENGTHS_LABEL), lengths),
                "block_size": int_slider(label(BLOCK_LABEL), 16, 1, 64, width="360px")}
    return Panel(controls, partial(render_padded_batch, model, tokenizer, {}), in_browser="block_size",
                 options=PanelOptions(layout="horizontal", css_class="kvlab-unequal"))


# -- FP16 and INT8 caches ----------------------------------------------------------------------------------
PRECISION_LABELS = {m: PANELS.text(f"precision.{m}", "zh") for m in ("kv", "fp16", "int8")}  # the Chinese edition's


@dataclass
class CachePrecision:
    """One cache dtype against the FP32 cache on the same model and prompt."""

    mode: str
    cache_bytes: int  # nbytes of the cache the free run used (data and, for int8, its scales)
    element_bytes: float
    logit_error: list[float]  # per new position: max |logit - FP32 cache's logit|, on FP32's tokens
    logit_spread: float  # median over those positions of (max - min) of the FP32 logits
    top1_agreement: float  # fraction of those positions where the most likely token is FP32's
    reference_margin: float  # smallest gap between the FP32 logits' best and second-best token, over positions
    new_tokens: list[int]  # free greedy run with this cache
    reference_tokens: list[int]  # free greedy run with the FP32 cache

    @property
    def label(self) -> str:
        return PANELS.say(f"precision.{self.mode}")

    @property
    def max_logit_error(self) -> float:
        return max(self.logit_error)

    @property
    def greedy_safe(self) -> bool:
        """No logit moved by half the smallest best-vs-second gap: no greedy choice can change."""
        return self.max_logit_error < self.reference_margin / 2

    @property
    def matching_tokens(self) -> int:
        return sum(a == b for a, b in zip(self.new_tokens, self.reference_tokens))

    @property
    def first_divergence(self) -> int | None:
        """1-based index of the first new token that differs from FP32's free run (None: none does)."""
        return next((i + 1 for i, (a, b) in enumerate(zip(self.new_tokens, self.reference_tokens)) if a != b), None)


@torch.no_grad()
def compare_cache_precision(model: ToyTransformer, prompt, new_tokens: int = 200) -> dict[str, CachePrecision]:
    """FP32, FP16 and INT8 caches: bytes, logit error on the FP32 run's tokens, and free greedy runs."""
    new_tokens = positive_int("new_tokens", new_tokens)
    with torch_threads(measurement_threads()):
        runs = {m: generate(model, prompt, new_tokens, cache=m) for m in PRECISION_LABELS}
        ref = runs["kv"]
        seq = ref.tokens[:, :-1].to(model.device)  # [1, P + n - 1]: what the FP32 run fed, the last token aside
        P = ref.prompt_len
        logits = {}
        for mode in PRECISION_LABELS:
            cache = make_cache(model, mode, 1, seq.shape[1])
            logits[mode] = model(seq, cache)[0, P - 1:].float()  # [n, vocab]: the positions that chose new tokens
    base = logits["kv"]
    spread = median((base.amax(-1) - base.amin(-1)).tolist())
    top2 = base.topk(2, dim=-1).values  # [n, 2]
    margin = (top2[:, 0] - top2[:, 1]).min().item()
    out = {}
    for mode, res in runs.items():
        diff = (logits[mode] - base).abs().amax(-1)  # [n]
        agree = (logits[mode].argmax(-1) == base.argmax(-1)).float().mean().item()
        out[mode] = CachePrecision(mode, res.cache.nbytes, res.cache.element_bytes, diff.tolist(), spread, agree,
                                   margin, res.new_tokens[0].tolist(), ref.new_tokens[0].tolist())
    return out


def precision_lines(config: ModelConfig) -> list[str]:
    """INT8's bytes per element, counted for the demo model and for a large model's head dimension."""
    D = config.head_dim
    return [PANELS.say("precision_line", D=D, bytes=1 + 4 / D, large=1 + 4 / 128)]


def explain_precision(results: dict[str, CachePrecision], config: ModelConfig) -> list[Claim]:
    """INT8's largest logit error against FP16's (:data:`~.sentences.PRECISION`), on the model the comparison ran on."""
    fp16, int8 = results["fp16"], results["int8"]
    a, b = Number(f"{int8.max_logit_error:.2e}"), Number(f"{fp16.max_logit_error:.2e}")
    return [PRECISION.choose({"int8": a, "fp16": b, "ratio": number(ratio(a.value, b.value), 0),
                              "params": Number(f"{config.n_params() / 1e6:.2f}", "M")})]
