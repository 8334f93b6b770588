"""Chapter 3.3 实际推理中的 KV Cache 利用流程: one real generation as a timeline, the chapter's four
steps mapped to kvlab's code and checked on a real cache, prefill against decode, a roofline of this
machine, decode batching, and the engineering notes (preallocation, unequal lengths, FP16/INT8) as
experiments."""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from functools import partial

import torch

from .._validate import positive_int
from ..assets import CORPUS, assets_dir
from ..attention import attention
from ..cache import BaseCache, KVCache
from ..config import ModelConfig
from ..costs import PassCost, decode_cost, pass_cost
from ..generation import PassRecord, generate, make_cache
from ..inputs import InputError, choice, whole_number, whole_numbers
from ..measure import Rate, alternate, measure_matmul_flops, measure_read_bandwidth, measurement_threads, median, \
    torch_threads
from ..memory import format_bytes
from ..model import Attention, ToyTransformer
from ..viz import prefill_decode_plots as plots
from ..viz.source import show_source
from ..viz.widgets import Panel, View, int_slider, play_slider

DEFAULT_PROMPT = "人工智能模型处理一个请求，通常分为两个阶段："
TIMELINE_TOKENS = 24  # new tokens of the timeline: 1 prefill pass + 23 decode passes
PREFILL_LENGTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
BATCH_SIZES = (1, 2, 4, 8, 16, 32)
PADDED_LENGTHS = "3, 17, 9, 30"


def device_label(device, threads: int | None = None) -> str:
    """Which device produced a number, for every readout: "cpu，计时用 1 个线程" or the GPU's name."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return f"{torch.cuda.get_device_name(dev)} GPU"
    if dev.type == "cpu":
        return f"cpu，计时用 {threads or measurement_threads()} 个线程"
    return str(dev)


def roofline_model(device=None, seed: int = 0) -> ToyTransformer:
    """A random-weight model whose fp32 weights (114 MiB) are far larger than a CPU's last-level cache,
    so a decode step has to stream them from memory, while a long prefill is big matrix products."""
    config = ModelConfig(vocab_size=4096, d_model=512, n_layer=8, n_head=8, d_ff=1408, max_seq_len=1024)
    model = ToyTransformer(config, seed=seed).eval()
    return model.to(device) if device is not None else model


def weight_bytes_of(model: ToyTransformer) -> int:
    """Bytes of the model's parameters as they are stored."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


# -- one generation as a timeline -------------------------------------------------------------------
@dataclass
class Timeline:
    """One greedy generation with a preallocated cache: every forward pass with its time and the cache after it."""

    prompt: str
    prompt_tokens: int
    new_text: list[str]  # the token each pass produced
    trace: list[PassRecord]
    cache_allocated_bytes: int
    bytes_per_token: int  # K and V of one token, all layers
    device: str
    runs: int = 1  # generations made; this is the fastest

    @property
    def passes(self) -> int:
        return len(self.trace)

    @property
    def starts_ms(self) -> list[float]:
        """Start of each pass when the passes are laid end to end (only the forward passes are timed)."""
        out, t = [], 0.0
        for r in self.trace:
            out.append(t)
            t += r.seconds * 1e3
        return out

    @property
    def ends_ms(self) -> list[float]:
        return [s + r.seconds * 1e3 for s, r in zip(self.starts_ms, self.trace)]

    @property
    def lengths(self) -> list[int]:
        """``cache.length`` after each pass (the last pass's token is returned, never stored)."""
        return [r.seq_len for r in self.trace]

    @property
    def ttft_ms(self) -> float:
        return sum(r.seconds for r in self.trace if r.phase == "prefill") * 1e3

    @property
    def tpot_ms(self) -> float:
        return median([r.seconds for r in self.trace if r.phase == "decode"]) * 1e3


def prompt_ids(tokenizer, text, control: str = "提示词", max_len: int | None = None) -> list[int]:
    """The learner's prompt as ids, or an :class:`InputError` naming ``control``."""
    if not isinstance(text, str) or not text:
        raise InputError(control, "是空的：请输入至少 1 个字")
    missing = tokenizer.unknown(text)
    if missing:
        shown = "、".join(f"「{c}」" if c.isprintable() and not c.isspace() else repr(c) for c in missing[:8])
        raise InputError(control, f"含有演示模型词表之外的字符：{shown}（它只认识训练语料里出现过的字）")
    if max_len is not None and len(text) > max_len:
        raise InputError(control, f"最长 {max_len} 个字，收到了 {len(text)} 个")
    return tokenizer.encode(text)


def run_timeline(model: ToyTransformer, tokenizer, prompt: str = DEFAULT_PROMPT,
                 new_tokens: int = TIMELINE_TOKENS, repeats: int = 3) -> Timeline:
    """Greedy-generate ``new_tokens`` after ``prompt`` with a preallocated cache, ``repeats`` times after a
    warm-up; the fastest generation is kept (another program on the machine can only slow a run down)."""
    new_tokens = positive_int("new_tokens", new_tokens)
    repeats = positive_int("repeats", repeats)
    if not isinstance(prompt, str) or not prompt:
        raise ValueError("prompt: needs at least one character")
    ids = tokenizer.encode(prompt)
    threads = measurement_threads()
    with torch_threads(threads):
        generate(model, ids, min(4, new_tokens))  # warm-up: allocator, kernels
        runs = [generate(model, ids, new_tokens, cache="kv") for _ in range(repeats)]
    result = min(runs, key=lambda r: r.total_seconds)
    cache = result.cache
    return Timeline(prompt, len(ids), [tokenizer.decode([t]) for t in result.new_tokens[0].tolist()],
                    result.trace, cache.nbytes, cache.nbytes // cache.max_seq_len,
                    device_label(model.device, threads), repeats)


def regenerate(model: ToyTransformer, tokenizer, timeline: Timeline, cache: str):
    """The timeline's prompt and number of tokens generated again with another cache mode (a
    :class:`~kvlab.generation.GenerationResult`), with the timing threads."""
    with torch_threads(measurement_threads()):
        return generate(model, tokenizer.encode(timeline.prompt), timeline.passes, cache=cache)


def render_timeline(model: ToyTransformer, tokenizer, runs: dict, prompt, step) -> View:
    """The timeline panel: pass ``step`` of the generation of ``prompt`` (generated once per prompt)."""
    limit = model.config.max_seq_len - TIMELINE_TOKENS
    prompt_ids(tokenizer, prompt, "提示词", limit)
    step = whole_number("第几次前向", step, 1, TIMELINE_TOKENS)
    if prompt not in runs:
        runs.clear()  # keep one run: the slider replays it without measuring again
        runs[prompt] = run_timeline(model, tokenizer, prompt)
    tl = runs[prompt]
    r = tl.trace[step - 1]
    phase = "预填充（prefill）" if r.phase == "prefill" else "解码（decode）"
    fed = f"整段提示词 {r.new_tokens} 个 token" if r.phase == "prefill" else "上一步生成的 1 个 token"
    out = "".join(tl.new_text[:step])
    readout = (
        f"<b>第 {step} / {tl.passes} 次前向：{phase}</b>，输入{fed}，耗时 {r.seconds * 1e3:.2f} ms；"
        f"之后 <code>cache.length</code> = <b>{r.seq_len}</b>，缓存已用 <b>{format_bytes(r.cache_bytes)}</b>"
        f"（{r.seq_len} × {format_bytes(tl.bytes_per_token)}），预分配 {format_bytes(tl.cache_allocated_bytes)}<br>"
        f"已生成 {step} 个 token：「{html.escape(out)}」<br>"
        f"首 token 延迟 TTFT = {tl.ttft_ms:.2f} ms（预填充那一次前向）；每 token 延迟 TPOT = {tl.tpot_ms:.2f} ms"
        f"（{tl.passes - 1} 次解码的中位数）；{tl.runs} 次生成中最快的一次，设备 {html.escape(tl.device)}"
    )
    return View([plots.timeline_figure(tl, step)], readout, tl)


def timeline_panel(model: ToyTransformer, tokenizer, timeline: Timeline | None = None) -> Panel:
    """A prompt box and a Play-able pass slider over one generation."""
    import ipywidgets as W

    runs = {timeline.prompt: timeline} if timeline is not None else {}
    prompt = W.Text(value=timeline.prompt if timeline else DEFAULT_PROMPT, description="提示词",
                    continuous_update=False, style={"description_width": "initial"}, layout=W.Layout(width="520px"))
    play, step = play_slider("第几次前向", 1, 1, TIMELINE_TOKENS, interval_ms=400)
    return Panel({"prompt": prompt, "step": step}, partial(render_timeline, model, tokenizer, runs),
                 extra={"step": play}, layout="horizontal", css_class="kvlab-timeline")


# -- the chapter's four steps, in kvlab's code --------------------------------------------------------
@dataclass(frozen=True)
class CodePart:
    obj: object
    start: str
    stop: str
    caption: str


FOUR_STEPS = {
    "prefill": [
        CodePart(generate, "# Prefill", 'logits = run("prefill"', "generate()：预填充，整段提示词一次前向"),
        CodePart(ToyTransformer.forward, "x = self.embed(ids)", "cache.advance(T)",
                 "ToyTransformer.forward：每一层处理这 T 个 token，最后把 length 加 T"),
    ],
    "decode": [
        CodePart(generate, "for step in range(max_new_tokens)", 'logits = run("decode"',
                 "generate()：解码循环，每步只把上一步生成的 1 个 token 送进模型"),
    ],
    "attention": [
        CodePart(Attention.forward, "q, k, v = self.wqkv(x)", "out = attn_ops.attention(",
                 "Attention.forward：只为新 token 算 Q、K、V，K/V 写进缓存后取回全部已存的 K/V"),
        CodePart(attention, "k = repeat_kv(k", "out = weights @ v",
                 "attention()：softmax(QKᵀ/√d)·V 的显式写法（默认走等价的 SDPA）"),
    ],
    "update": [
        CodePart(KVCache.write, "def write", "return self._read", "KVCache.write：写进 [length, length + T) 这几行"),
        CodePart(KVCache._store, "def _store", "self.v[layer", "KVCache._store：原地写入预分配的张量"),
        CodePart(BaseCache.advance, "def advance", "self.length += n", "BaseCache.advance：整次前向结束后 length += T"),
    ],
}


def show_step(name: str):
    """The code of one of the chapter's four steps, from the installed kvlab (an ``IPython.display.HTML``)."""
    from IPython.display import HTML

    parts = FOUR_STEPS[choice("步骤", name, list(FOUR_STEPS))]
    return HTML("".join(show_source(p.obj, p.start, p.stop, caption=p.caption).data for p in parts))


@dataclass
class FourStepCheck:
    """A prompt prefilled into a real cache, then a few decode steps, with the cache inspected after each pass."""

    prompt_len: int
    lengths: list[int]  # cache.length after each pass (prefill, then each decode step)
    written_rows: list[list[int]]  # per pass: the token rows (positions) where K or V changed, any layer or head
    rows_per_layer_head: list[torch.Tensor]  # per pass: [L, H_kv] rows changed in each layer and head
    old_rows_identical: list[bool]  # per pass: every row stored before the pass is bit-identical after it
    rest_untouched: list[bool]  # per pass: rows from length on are still the zeros they were allocated as
    logits_max_diff: list[float]  # per decode step: |logits with the cache - logits recomputed without one|


@torch.no_grad()
def check_four_steps(model: ToyTransformer, ids, decode_steps: int = 3) -> FourStepCheck:
    """Prefill ``ids`` into a preallocated cache, then decode greedily, comparing the cache before and after
    every pass and each decode step's logits with a recomputation of the whole sequence without a cache."""
    decode_steps = positive_int("decode_steps", decode_steps)
    ids = model.check_ids(torch.as_tensor(ids).reshape(1, -1), "ids")  # [1, P]
    P = ids.shape[1]
    if P + decode_steps > model.config.max_seq_len:
        raise ValueError(f"decode_steps: prompt ({P}) + decode_steps ({decode_steps}) passes max_seq_len")
    cache = KVCache(model.config, 1, P + decode_steps, dtype=model.dtype, device=model.device)
    out = FourStepCheck(P, [], [], [], [], [], [])
    seq, feed = ids, ids
    for step in range(decode_steps + 1):
        k0, v0, before = cache.k.clone(), cache.v.clone(), cache.length
        logits = model(feed, cache)
        changed = ((cache.k != k0) | (cache.v != v0)).any(-1)[:, 0]  # [L, H_kv, S]: rows where K or V changed
        out.lengths.append(cache.length)
        out.written_rows.append(changed.any(0).any(0).nonzero().flatten().tolist())
        out.rows_per_layer_head.append(changed.sum(-1).cpu())
        out.old_rows_identical.append(bool(torch.equal(cache.k[..., :before, :], k0[..., :before, :])
                                           and torch.equal(cache.v[..., :before, :], v0[..., :before, :])))
        out.rest_untouched.append(bool((cache.k[..., cache.length:, :] == 0).all()
                                       and (cache.v[..., cache.length:, :] == 0).all()))
        if step:
            full = model(seq)  # [1, t, vocab]: the whole sequence again, without a cache
            out.logits_max_diff.append((logits[0, -1] - full[0, -1]).abs().max().item())
        feed = logits[:, -1:].argmax(-1)  # [1, 1]: the greedy next token
        seq = torch.cat([seq, feed], dim=1)
    return out


# -- prefill is parallel, decode is sequential ----------------------------------------------------------
@dataclass
class LengthPoint:
    """A prompt of P tokens: its prefill pass, and the decode steps after it (the fastest of the repeats: other
    programs on the machine can only make a run slower, so the fastest is the one closest to the machine's own)."""

    prompt_len: int
    prefill_seconds: float
    decode_step_seconds: float  # one decode pass: median over the passes of a run, fastest run
    decode_steps: int
    prefill_cost: PassCost
    decode_cost: PassCost  # all decode_steps passes together

    @property
    def sequential_seconds(self) -> float:
        """The prompt fed one token per pass instead: P decode-sized passes."""
        return self.prompt_len * self.decode_step_seconds

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_len / self.prefill_seconds

    @property
    def decode_tokens_per_s(self) -> float:
        return 1 / self.decode_step_seconds

    @property
    def speedup(self) -> float:
        """How many times faster the prompt goes through as one pass than token by token."""
        return self.sequential_seconds / self.prefill_seconds

    @property
    def prefill_flops_per_s(self) -> float:
        return self.prefill_cost.flops / self.prefill_seconds

    @property
    def decode_flops_per_s(self) -> float:
        return self.decode_cost.flops / (self.decode_steps * self.decode_step_seconds)

    @property
    def decode_bytes_per_s(self) -> float:
        """Bytes a decode step moves (weights and cache, counted) per second of its measured time."""
        return self.decode_cost.bytes / (self.decode_steps * self.decode_step_seconds)


@dataclass
class PrefillSweep:
    points: list[LengthPoint]
    config: ModelConfig
    device: str

    @property
    def lengths(self) -> list[int]:
        return [p.prompt_len for p in self.points]

    def at(self, prompt_len: int) -> LengthPoint:
        return self.points[self.lengths.index(prompt_len)]


def _timed_generations(model, prompts: dict, new_tokens: int, repeats: int) -> dict:
    """``{key: [GenerationResult per repeat]}``: every prompt generated ``repeats`` times, interleaved, with the
    timing threads of :func:`~kvlab.measure.measurement_threads`, after warming up on the smallest and the
    largest prompt (allocator, kernels; rerunning every shape first would double the cost of the sweep)."""
    runners = {k: partial(generate, model, p, new_tokens) for k, p in prompts.items()}
    sizes = sorted(prompts, key=lambda k: prompts[k].numel())
    with torch_threads(measurement_threads()):
        for k in dict.fromkeys((sizes[0], sizes[-1])):
            generate(model, prompts[k], 2)
        return alternate(runners, repeats, warmup={k: lambda: None for k in prompts})


def measure_prefill_sweep(model: ToyTransformer, lengths=PREFILL_LENGTHS, decode_steps: int = 4, repeats: int = 3,
                          seed: int = 0) -> PrefillSweep:
    """Time the prefill pass and the decode steps after it for prompts of each length (random token ids),
    ``repeats`` times each, interleaved; see :class:`LengthPoint` for which run counts."""
    decode_steps = positive_int("decode_steps", decode_steps)
    repeats = positive_int("repeats", repeats)
    c = model.config
    if not isinstance(lengths, (list, tuple)) or not lengths:
        raise ValueError(f"lengths must be a non-empty list of prompt lengths, got {lengths!r}")
    lengths = [positive_int("lengths", n, maximum=c.max_seq_len - decode_steps - 1) for n in lengths]
    gen = torch.Generator().manual_seed(seed)
    prompts = {P: torch.randint(0, c.vocab_size, (1, P), generator=gen) for P in lengths}
    runs = _timed_generations(model, prompts, decode_steps + 1, repeats)
    points = []
    for P in lengths:
        prefill = min(res.trace[0].seconds for res in runs[P])
        step = min(res.time_per_output_token for res in runs[P])
        points.append(LengthPoint(P, prefill, step, decode_steps, pass_cost(c, P), decode_cost(c, P, decode_steps)))
    return PrefillSweep(points, c, device_label(model.device))


def _selected(control: str, value, options) -> int:
    return choice(control, whole_number(control, value, min(options), max(options)), list(options))


def render_prefill(sweep: PrefillSweep, prompt_len) -> View:
    """The prefill panel: one measured prompt length against the whole sweep."""
    p = sweep.at(_selected("提示词长度 P", prompt_len, sweep.lengths))
    readout = (
        f"<b>P = {p.prompt_len}</b>：预填充一次前向 <b>{p.prefill_seconds * 1e3:.2f} ms</b>，"
        f"即 <b>{p.prefill_tokens_per_s:,.0f} token/s</b>；一步解码 {p.decode_step_seconds * 1e3:.2f} ms，"
        f"即 <b>{p.decode_tokens_per_s:,.0f} token/s</b><br>"
        f"若把提示词一个一个地送进去：{p.prompt_len} × {p.decode_step_seconds * 1e3:.2f} ms = "
        f"{p.sequential_seconds * 1e3:.1f} ms，是一次预填充的 <b>{p.speedup:.1f} 倍</b>（设备 {html.escape(sweep.device)}）"
    )
    return View([plots.prefill_decode_figure(sweep, p.prompt_len)], readout, p)


def prefill_panel(sweep: PrefillSweep, prompt_len: int = 64) -> Panel:
    import ipywidgets as W

    value = prompt_len if prompt_len in sweep.lengths else sweep.lengths[-1]
    slider = W.SelectionSlider(options=sweep.lengths, value=value, description="提示词长度 P", continuous_update=True,
                               style={"description_width": "initial"}, layout=W.Layout(width="420px"))
    return Panel({"prompt_len": slider}, partial(render_prefill, sweep), layout="horizontal",
                 css_class="kvlab-prefill")


# -- this machine's roofline ---------------------------------------------------------------------------
@dataclass
class Roofs:
    """This machine's two roofs: memory read bandwidth (bytes/s) and matmul rate (FLOP/s)."""

    bandwidth: Rate
    flops: Rate
    device: str

    @property
    def ridge(self) -> float:
        """The intensity (FLOP/byte) where the two roofs meet."""
        return self.flops.best / self.bandwidth.best

    def attainable(self, intensity: float) -> float:
        """The roofline: min(compute roof, bandwidth × intensity), FLOP/s."""
        return min(self.flops.best, self.bandwidth.best * intensity)


def measure_roofs(device, nbytes: int = 256 * 2**20, n: int = 1024, repeats: int = 15) -> Roofs:
    """Measure both roofs with the timing threads of the other measurements, keeping the fastest of
    ``repeats`` short runs each (a run that another program interrupted is only ever slower)."""
    threads = measurement_threads()
    with torch_threads(threads):
        bandwidth = measure_read_bandwidth(device, nbytes=nbytes, repeats=repeats)
        flops = measure_matmul_flops(device, n=n, repeats=repeats)
    return Roofs(bandwidth, flops, device_label(device, threads))


@dataclass(frozen=True)
class RooflinePoint:
    label: str
    kind: str  # "prefill", "decode" (B = 1 after a prompt of P) or "batch" (decode of B sequences)
    intensity: float  # FLOP / byte
    flops_per_s: float  # achieved
    tag: str = ""  # a short name drawn beside the point ("P=32", "B=8")


def prefill_points(sweep: PrefillSweep) -> list[RooflinePoint]:
    """Every prefill pass of the sweep and the decode steps after it, as roofline points."""
    out = [RooflinePoint(f"预填充 P={p.prompt_len}", "prefill", p.prefill_cost.intensity, p.prefill_flops_per_s,
                         f"P={p.prompt_len}") for p in sweep.points]
    return out + [RooflinePoint(f"解码 B=1，P={p.prompt_len}", "decode", p.decode_cost.intensity,
                                p.decode_flops_per_s) for p in sweep.points]


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


# -- decode batching ------------------------------------------------------------------------------------------
@dataclass
class BatchPoint:
    batch_size: int
    step_seconds: float  # one decode pass for the whole batch: median over a run's passes, fastest run
    cost: PassCost  # all decode passes together

    steps: int = 1

    @property
    def tokens_per_s(self) -> float:
        return self.batch_size / self.step_seconds

    @property
    def flops_per_s(self) -> float:
        return self.cost.flops / (self.steps * self.step_seconds)


@dataclass
class BatchSweep:
    points: list[BatchPoint]
    prompt_len: int
    config: ModelConfig
    device: str

    @property
    def batch_sizes(self) -> list[int]:
        return [p.batch_size for p in self.points]

    def at(self, batch_size: int) -> BatchPoint:
        return self.points[self.batch_sizes.index(batch_size)]

    def roofline_points(self) -> list[RooflinePoint]:
        return [RooflinePoint(f"解码 B={p.batch_size}", "batch", p.cost.intensity, p.flops_per_s, f"B={p.batch_size}")
                for p in self.points]


def measure_batch_sweep(model: ToyTransformer, batch_sizes=BATCH_SIZES, prompt_len: int = 8, decode_steps: int = 4,
                        repeats: int = 2, seed: int = 0) -> BatchSweep:
    """Time decode steps of B sequences at once (random prompts of ``prompt_len`` tokens) for each B."""
    prompt_len = positive_int("prompt_len", prompt_len, maximum=model.config.max_seq_len - decode_steps - 1)
    decode_steps = positive_int("decode_steps", decode_steps)
    repeats = positive_int("repeats", repeats)
    if not isinstance(batch_sizes, (list, tuple)) or not batch_sizes:
        raise ValueError(f"batch_sizes must be a non-empty list, got {batch_sizes!r}")
    sizes = [positive_int("batch_sizes", b, maximum=4096) for b in batch_sizes]
    c = model.config
    gen = torch.Generator().manual_seed(seed)
    prompts = {B: torch.randint(0, c.vocab_size, (B, prompt_len), generator=gen) for B in sizes}
    runs = _timed_generations(model, prompts, decode_steps + 1, repeats)
    points = [BatchPoint(B, min(r.time_per_output_token for r in runs[B]),
                         decode_cost(c, prompt_len, decode_steps, B), decode_steps) for B in sizes]
    return BatchSweep(points, prompt_len, c, device_label(model.device))


def render_batch(sweep: BatchSweep, roofs: Roofs, prefill: PrefillSweep, batch_size) -> View:
    """The batching panel: one batch size against the sweep, and on this machine's roofline."""
    p = sweep.at(_selected("批次 B", batch_size, sweep.batch_sizes))
    one = sweep.points[0]
    readout = (
        f"<b>B = {p.batch_size}</b>：一步解码 <b>{p.step_seconds * 1e3:.2f} ms</b>，同时为 {p.batch_size} 条序列各生成 1 个 token，"
        f"即 <b>{p.tokens_per_s:,.0f} token/s</b><br>"
        f"与 B = {one.batch_size} 相比：吞吐 ×{p.tokens_per_s / one.tokens_per_s:.1f}，单步耗时 "
        f"×{p.step_seconds / one.step_seconds:.1f}；算术强度 {p.cost.intensity:.2f} FLOP/字节"
        f"（转折点 {roofs.ridge:.1f}），实际达到 {p.flops_per_s / 1e9:.1f} GFLOP/s（设备 {html.escape(sweep.device)}）"
    )
    figures = [plots.batch_figure(sweep, p.batch_size),
               plots.roofline_figure(roofs, prefill_points(prefill) + sweep.roofline_points(),
                                     highlight=f"解码 B={p.batch_size}")]
    return View(figures, readout, p)


def batch_panel(sweep: BatchSweep, roofs: Roofs, prefill: PrefillSweep) -> Panel:
    import ipywidgets as W

    slider = W.SelectionSlider(options=sweep.batch_sizes, value=sweep.batch_sizes[0], description="批次 B",
                               continuous_update=True, style={"description_width": "initial"},
                               layout=W.Layout(width="420px"))
    return Panel({"batch_size": slider}, partial(render_batch, sweep, roofs, prefill), layout="horizontal",
                 css_class="kvlab-batch")


# -- preallocation and the GPU allocator -------------------------------------------------------------------
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


CPU_ALLOCATOR_REASON = ("当前设备不是 CUDA GPU，跳过：CPU 上 PyTorch 的张量直接向操作系统申请内存，没有像 CUDA 缓存分配器"
                        "那样「保留（reserved）却未使用」的显存可以查询，所以这里看不到碎片。")


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
        cache = make_cache(model, mode, batch_size, prompt_len + new_tokens)
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


# -- prompts of unequal length in one batch ---------------------------------------------------------------------
def corpus_text() -> str:
    """The demo model's training text on one line (every character is in its vocabulary)."""
    return (assets_dir() / CORPUS).read_text(encoding="utf-8").replace("\n", "")


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
        return [n + self.new_tokens - 1 for n in self.lengths]

    @property
    def used_slots(self) -> int:
        return sum(self.stored_lengths)

    @property
    def paged_slots(self) -> int:
        return sum(math.ceil(n / self.block_size) * self.block_size for n in self.stored_lengths)

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


def run_padded_batch(model: ToyTransformer, tokenizer, prompts: list[str], new_tokens: int = 12,
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


def render_padded_batch(model: ToyTransformer, tokenizer, lengths, block_size) -> View:
    """The padding panel: prompts of the typed lengths, generated as one batch and each alone."""
    limit = model.config.max_seq_len - 12
    values = whole_numbers("提示词长度（逗号分隔）", lengths, 1, limit, 8)
    block = whole_number("分页块大小", block_size, 1, 64)
    b = run_padded_batch(model, tokenizer, corpus_prompts(values), block_size=block)
    same = sum(b.same_as_alone)
    if b.paged_slots < b.cache_slots:
        paged = f"只需 {b.paged_slots} 个"
    elif b.paged_slots > b.cache_slots:
        paged = f"反而需要 {b.paged_slots} 个（块比序列还长时，每条序列最后一块的空位更多）"
    else:
        paged = f"同样需要 {b.paged_slots} 个"
    readout = (
        f"B = {len(b.prompts)} 条提示词，长度 {', '.join(map(str, b.lengths))}，左侧补齐到 {max(b.lengths)}；"
        f"各自生成 {b.new_tokens} 个 token：<b>{same} / {len(b.prompts)} 条与单独运行逐 token 相同</b><br>"
        f"缓存槽位：分配 {b.cache_slots} 个（{format_bytes(b.cache_bytes)}），真正存 token 的 {b.used_slots} 个，"
        f"<b>浪费 {b.slot_waste:.1%}</b>；按每块 {b.block_size} 个 token 分页{paged}<br>"
        f"计算量：整批 {b.batch_cost.flops / 1e6:,.1f} MFLOP，不补齐时 {b.alone_cost.flops / 1e6:,.1f} MFLOP，"
        f"<b>{b.extra_flops:.1%}</b> 花在了 padding 上"
    )
    return View([plots.padded_batch_figure(b), plots.padding_cost_figure(b)], readout, b)


def padded_batch_panel(model: ToyTransformer, tokenizer, lengths: str = PADDED_LENGTHS) -> Panel:
    import ipywidgets as W

    box = W.Text(value=lengths, description="提示词长度（逗号分隔）", continuous_update=False,
                 style={"description_width": "initial"}, layout=W.Layout(width="420px"))
    return Panel({"lengths": box, "block_size": int_slider("分页块大小", 16, 1, 64, width="360px")},
                 partial(render_padded_batch, model, tokenizer), layout="horizontal", css_class="kvlab-unequal")


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
