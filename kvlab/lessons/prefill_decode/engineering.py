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


CPU_ALLOCATOR_REASON = ("当前设备不是 CUDA GPU，跳过：CPU 上 PyTorch 通过 C 库的 malloc 申请内存，没有 CUDA 缓存分配器那样"
                        "可查询的「保留（reserved）／已分配（allocated）」计数器，所以这里量不出碎片（malloc 内部仍可能有碎片）。")


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
        return [alloc.reason]
    return [f"{mode}：最后 allocated {format_bytes(t.allocated[-1])}，reserved {format_bytes(t.reserved[-1])}，"
            f"保留未用最多 {format_bytes(max(t.held_unused))}（{alloc.device}）" for mode, t in alloc.traces.items()]


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
    return (f"上面的时间线事先知道要生成 {timeline.passes} 个 token，所以预分配的缓存正好是 {timeline.prompt_tokens} + "
            f"{timeline.passes} − 1 = {used} 个 token，结束时恰好存满。若像不知道输出多长时那样，按演示模型的最大长度 "
            f"{config.max_seq_len} 为这条序列预留，这次生成只用了 {used} / {config.max_seq_len} = {share:.0%}，"
            f"其余 {1 - share:.0%} 预留着却一直空着。")


# -- prompts of unequal length in one batch ---------------------------------------------------------------------
PADDED_LENGTHS = "3, 17, 9, 30"
PADDED_NEW_TOKENS = 12
PADDED_LENGTHS_LABEL, BLOCK_LABEL = "提示词长度（逗号分隔）", "分页块大小"  # the padding panel's controls, as shown
def corpus_text() -> str:
    """The demo model's training text on one line (every character is in its vocabulary)."""
    return assets.corpus_text().replace("\n", "")


def corpus_prompts(lengths: list[int], text: str | None = None) -> list[str]:
    """Prompts of the given lengths: pieces of the corpus, each starting after a different full stop."""
    text = corpus_text() if text is None else text
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "。" and i + 1 < len(text)]
    out = []
    for i, n in enumerate(lengths):
        begin = starts[(7 * i) % len(starts)]
        if begin + n > len(text):
            begin = 0
        out.append(text[begin:begin + n])
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

    @property
    def lengths(self) -> list[int]:
        return [len(p) for p in self.prompts]

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
        _generation_cost(c, width, new_tokens, len(ids)), alone_cost)


def paged_text(b: PaddedBatch) -> str:
    """How many slots paging needs against padding, with the reason taken from the numbers."""
    if b.paged_slots < b.cache_slots:
        return f"只需 {b.paged_slots} 个"
    if b.paged_slots == b.cache_slots:
        return f"同样需要 {b.paged_slots} 个"
    why = "长度相同时补齐本来没有浪费" if b.padding_slots == 0 else f"比补齐浪费的 {b.padding_slots} 个还多"
    return (f"反而需要 {b.paged_slots} 个（分页按整块分配，每条序列最后一块没填满的 {b.tail_slots} 个槽位也算在内；"
            f"{why}）")


def render_padded_batch(model: ToyTransformer, tokenizer, runs: dict, lengths, block_size) -> View:
    """The padding panel: prompts of the typed lengths, generated as one batch and each alone (once per list of
    lengths: the block size only changes the paged count)."""
    limit = model.config.max_seq_len - PADDED_NEW_TOKENS
    values = whole_numbers(PADDED_LENGTHS_LABEL, lengths, 1, limit, 8)
    block = whole_number(BLOCK_LABEL, block_size, 1, 64)
    run = recent_run(runs, tuple(values), lambda: run_padded_batch(model, tokenizer, corpus_prompts(values)), keep=8)
    b = dataclasses.replace(run, block_size=block)
    same = sum(b.same_as_alone)
    readout = (
        f"B = {len(b.prompts)} 条提示词，长度 {', '.join(map(str, b.lengths))}，左侧补齐到 {max(b.lengths)}；"
        f"各自生成 {b.new_tokens} 个 token：<b>{same} / {len(b.prompts)} 条与单独运行逐 token 相同</b><br>"
        f"缓存槽位：分配 {b.cache_slots} 个（{format_bytes(b.cache_bytes)}），真正存 token 的 {b.used_slots} 个，"
        f"<b>浪费 {b.slot_waste:.1%}</b>；按每块 {b.block_size} 个 token 分页{paged_text(b)}<br>"
        f"计算量：整批 {b.batch_cost.flops / 1e6:,.1f} MFLOP，不补齐时 {b.alone_cost.flops / 1e6:,.1f} MFLOP，"
        f"<b>{b.extra_flops:.1%}</b> 花在了 padding 上"
    )
    return View([plots.padded_batch_figure(b), plots.padding_cost_figure(b)], readout, b)


def padded_batch_panel(model: ToyTransformer, tokenizer, lengths: str = PADDED_LENGTHS) -> Panel:
    """A box of prompt lengths and the block size of the paged count."""
    controls = {"lengths": text_box(PADDED_LENGTHS_LABEL, lengths),
                "block_size": int_slider(BLOCK_LABEL, 16, 1, 64, width="360px")}
    return Panel(controls, partial(render_padded_batch, model, tokenizer, {}), in_browser="block_size",
                 options=PanelOptions(layout="horizontal", css_class="kvlab-unequal"))


# -- FP16 and INT8 caches ----------------------------------------------------------------------------------
PRECISION_LABELS = {"kv": "FP32 缓存", "fp16": "FP16 缓存", "int8": "INT8 缓存"}


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
        return PRECISION_LABELS[self.mode]

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
    return [f"INT8 缓存每个元素占 1 + 4/D 字节：演示模型 D = {D}，是 {1 + 4 / D:g} 字节；D = 128（LLaMA 等大模型的头维度）时"
            f"是 {1 + 4 / 128:.2f} 字节，约为 FP16 的一半。"]


def explain_precision(results: dict[str, CachePrecision], config: ModelConfig) -> list[Claim]:
    """INT8's largest logit error against FP16's (:data:`~.sentences.PRECISION`), on the model the comparison ran on."""
    fp16, int8 = results["fp16"], results["int8"]
    a, b = Number(f"{int8.max_logit_error:.2e}"), Number(f"{fp16.max_logit_error:.2e}")
    return [PRECISION.choose({"int8": a, "fp16": b, "ratio": number(ratio(a.value, b.value), 0),
                              "params": Number(f"{config.n_params() / 1e6:.2f}", "M")})]
