"""Chapter 3.3 实际推理中的 KV Cache 利用流程: one real generation as a timeline, the chapter's four
steps mapped to kvlab's code and checked on a real cache, prefill against decode, a roofline of this
machine, decode batching (and how each sequence's own K/V limits it), and the engineering notes
(preallocation, unequal lengths, FP16/INT8) as experiments.

Sentences whose content depends on this machine's numbers are chosen here (``explain_*`` functions
returning lines to print), so that the notebook's prose only says what holds on any machine."""
from __future__ import annotations

import dataclasses
import html
import os
from dataclasses import dataclass, field
from functools import partial

import torch

from .._validate import positive_int
from .. import assets
from ..attention import attention
from ..cache import BaseCache, KVCache
from ..config import ModelConfig
from ..costs import PassCost, decode_cost, pass_cost
from ..generation import PassRecord, decode_n_tokens, decode_one_token, generate, make_cache, prefill
from ..inputs import InputError, choice, whole_number, whole_numbers
from ..measure import Rate, alternate, measure_matmul_flops, measure_read_bandwidth, measurement_threads, timed, \
    torch_threads
from ..stats import growth_exponent, median
from ..device import last_level_cache  # noqa: F401  (the notebook reads the size through this lesson)
from ..paging import paged_slots
from ..memory import format_bytes
from ..model import Attention, ToyTransformer
from ..viz import prefill_decode_plots as plots
from ..viz.source import show_source
from ..viz.widgets import Panel, View, int_slider, play_slider, recent_run

DEFAULT_PROMPT = "人工智能模型处理一个请求，通常分为两个阶段："
TIMELINE_TOKENS = 24  # new tokens of the timeline by default: 1 prefill pass + 23 decode passes
TIMELINE_MAX_TOKENS = 64  # the most the timeline's 「生成的 token 数」 slider allows
PREFILL_LENGTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PREFILL_DECODE_STEPS = 4  # decode passes timed after each prefill of the sweep
MAX_CUSTOM_LENGTHS = 10  # prompt lengths a learner may list in the prefill panel
BATCH_SIZES = (1, 2, 4, 8, 16, 32)
BATCH_CONTEXTS = (8, 64, 256, 1000)  # tokens already in each sequence's cache, for the batching panel
BATCH_STEPS, BATCH_REPEATS = 3, 3  # decode passes per timed run, runs per batch size (the fastest counts)
PADDED_LENGTHS = "3, 17, 9, 30"
PADDED_NEW_TOKENS = 12
# The roofline model: 8 layers, d_model 512, fp32 weights of 114 MiB (exercise 3.3-1 uses the same config)
ROOFLINE_CONFIG = ModelConfig(vocab_size=4096, d_model=512, n_layer=8, n_head=8, d_ff=1408, max_seq_len=1024)


def device_label(device, threads: int | None = None) -> str:
    """Which device produced a number, for every readout: "cpu，计时用 1 个线程" or the GPU's name."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return f"{torch.cuda.get_device_name(dev)} GPU"
    if dev.type == "cpu":
        return f"cpu，计时用 {threads or measurement_threads()} 个线程"
    return str(dev)


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
    where = "GPU 的 L2 缓存" if torch.device(device).type == "cuda" else "本机 CPU 的最后一级缓存"
    if cache_bytes is None:
        return (f"FP32 权重 {format_bytes(weights)}；读不到{where}的大小，它比大多数 CPU 的最后一级缓存（几 MiB 到几十 MiB）"
                "大：解码每一步都要从内存把权重读一遍。")
    ratio = weights / cache_bytes
    if ratio >= 2:
        return (f"FP32 权重 {format_bytes(weights)}，是{where}（{format_bytes(cache_bytes)}）的 {ratio:.1f} 倍："
                "解码每一步都要从内存把权重读一遍。")
    return (f"FP32 权重 {format_bytes(weights)}，只是{where}（{format_bytes(cache_bytes)}）的 {ratio:.1f} 倍："
            "相当一部分权重可以留在缓存里，解码读权重会比内存带宽快，下面的结论要打些折扣。")


# -- one generation as a timeline -------------------------------------------------------------------
@dataclass
class Timeline:
    """Greedy generations with a preallocated cache: the one shown (the fastest prefill), every forward pass
    with its time and the cache after it, and the prefill and decode times of every generation made."""

    prompt: str
    prompt_tokens: int
    new_text: list[str]  # the token each pass produced
    trace: list[PassRecord]  # the generation shown: the one whose prefill pass was fastest
    cache_allocated_bytes: int
    bytes_per_token: int  # K and V of one token, all layers
    device: str
    runs: int = 1  # generations made
    prefill_runs: list[float] = field(default_factory=list)  # seconds of each generation's prefill pass
    decode_runs: list[float] = field(default_factory=list)  # seconds of every decode pass of every generation

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
        """The prefill pass: the fastest of the generations (another program can only slow one down)."""
        if self.prefill_runs:
            return min(self.prefill_runs) * 1e3
        return sum(r.seconds for r in self.trace if r.phase == "prefill") * 1e3

    @property
    def tpot_ms(self) -> float:
        """Median of every decode pass of every generation."""
        return median(self.decode_runs or [r.seconds for r in self.trace if r.phase == "decode"]) * 1e3

    @property
    def decode_samples(self) -> int:
        return len(self.decode_runs) or self.passes - 1


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
    warm-up. TTFT is the fastest prefill pass and TPOT the median of all decode passes; the generation
    with the fastest prefill is the one shown."""
    new_tokens = positive_int("new_tokens", new_tokens)
    repeats = positive_int("repeats", repeats)
    if not isinstance(prompt, str) or not prompt:
        raise ValueError("prompt: needs at least one character")
    ids = tokenizer.encode(prompt)
    threads = measurement_threads()
    with torch_threads(threads):
        generate(model, ids, min(4, new_tokens))  # warm-up: allocator, kernels
        runs = [generate(model, ids, new_tokens, cache="kv") for _ in range(repeats)]
    result = min(runs, key=lambda r: r.time_to_first_token)
    cache = result.cache
    return Timeline(prompt, len(ids), [tokenizer.decode([t]) for t in result.new_tokens[0].tolist()],
                    result.trace, cache.nbytes, cache.nbytes // cache.max_seq_len,
                    device_label(model.device, threads), repeats,
                    [r.time_to_first_token for r in runs], [s for r in runs for s in r.decode_seconds])


def regenerate(model: ToyTransformer, tokenizer, timeline: Timeline, cache: str):
    """The timeline's prompt and number of tokens generated again with another cache mode (a
    :class:`~kvlab.generation.GenerationResult`), with the timing threads."""
    with torch_threads(measurement_threads()):
        return generate(model, tokenizer.encode(timeline.prompt), timeline.passes, cache=cache)


def render_timeline(model: ToyTransformer, tokenizer, runs: dict, prompt, new_tokens, step) -> View:
    """The timeline panel: pass ``step`` of the generation of ``new_tokens`` after ``prompt`` (generated once
    per prompt and length; the slider replays it without measuring again)."""
    prompt_ids(tokenizer, prompt, "提示词", model.config.max_seq_len - TIMELINE_MAX_TOKENS)
    n = whole_number("生成的 token 数", new_tokens, 2, TIMELINE_MAX_TOKENS)
    step = whole_number("第几次前向", step, 1, n)
    tl = recent_run(runs, (prompt, n), lambda: run_timeline(model, tokenizer, prompt, n), keep=4)
    r = tl.trace[step - 1]
    phase = "预填充（prefill）" if r.phase == "prefill" else "解码（decode）"
    fed = f"整段提示词 {r.new_tokens} 个 token" if r.phase == "prefill" else "上一步生成的 1 个 token"
    out = "".join(tl.new_text[:step])
    readout = (
        f"<b>第 {step} / {tl.passes} 次前向：{phase}</b>，输入{fed}，耗时 {r.seconds * 1e3:.2f} ms；"
        f"之后 <code>cache.length</code> = <b>{r.seq_len}</b>，缓存已用 <b>{format_bytes(r.cache_bytes)}</b>"
        f"（{r.seq_len} × {format_bytes(tl.bytes_per_token)}），预分配 {format_bytes(tl.cache_allocated_bytes)}<br>"
        f"已生成 {step} 个 token：「{html.escape(out)}」<br>"
        f"首 token 延迟 TTFT = {tl.ttft_ms:.2f} ms（{tl.runs} 次生成中最快的预填充，图中画的就是这一次）；"
        f"每 token 延迟 TPOT = {tl.tpot_ms:.2f} ms（{tl.runs} 次生成共 {tl.decode_samples} 个解码步的中位数）；"
        f"设备 {html.escape(tl.device)}"
    )
    return View([plots.timeline_figure(tl, step)], readout, tl)


def _keep_step_in_range(step, play, change) -> None:
    """The pass slider (and its Play button) span the passes of the generation chosen."""
    n = change["new"]
    if isinstance(n, int) and 2 <= n <= TIMELINE_MAX_TOKENS:
        play.max = n
        step.max = n  # a value above the new maximum is clamped by the slider


def timeline_panel(model: ToyTransformer, tokenizer, timeline: Timeline | None = None) -> Panel:
    """A prompt box, the number of tokens to generate, and a Play-able pass slider over one generation."""
    import ipywidgets as W

    n = timeline.passes if timeline is not None else TIMELINE_TOKENS
    runs = {(timeline.prompt, n): timeline} if timeline is not None else {}
    prompt = W.Text(value=timeline.prompt if timeline else DEFAULT_PROMPT, description="提示词",
                    continuous_update=False, style={"description_width": "initial"}, layout=W.Layout(width="520px"))
    tokens = int_slider("生成的 token 数", n, 2, TIMELINE_MAX_TOKENS, width="360px")
    play, step = play_slider("第几次前向", 1, 1, n, interval_ms=400)
    tokens.observe(partial(_keep_step_in_range, step, play), names="value")  # before the panel's own observer
    return Panel({"prompt": prompt, "new_tokens": tokens, "step": step},
                 partial(render_timeline, model, tokenizer, runs), extra={"step": play}, layout="grid", columns=2,
                 css_class="kvlab-timeline")


# -- the demo model's decode step against this machine's roofs -----------------------------------------
@dataclass(frozen=True)
class StepBudget:
    """One decode step of a model: what it has to compute and read, the least time the two roofs allow for
    each, and the time measured."""

    cost: PassCost
    compute_seconds: float  # cost.flops / the matmul roof
    read_seconds: float  # cost.bytes / the bandwidth roof
    measured_seconds: float

    @property
    def bound_seconds(self) -> float:
        return max(self.compute_seconds, self.read_seconds)

    @property
    def overhead_ratio(self) -> float:
        """How many times the measured step is of the roofline's bound."""
        return self.measured_seconds / self.bound_seconds


def step_budget(config: ModelConfig, timeline: Timeline, roofs: "Roofs") -> StepBudget:
    """The first decode step of ``timeline`` (one token after the prompt) against the roofs."""
    cost = pass_cost(config, 1, timeline.prompt_tokens)
    return StepBudget(cost, cost.flops / roofs.flops.best, cost.bytes / roofs.bandwidth.best, timeline.tpot_ms / 1e3)


def explain_step_budget(budget: StepBudget) -> list[str]:
    c = budget.cost
    lines = [f"演示模型一步解码：{c.flops / 1e6:.2f} MFLOP（1 MFLOP = 10⁶ 次浮点运算），按本机的矩阵乘速率只要 "
             f"{budget.compute_seconds * 1e6:.1f} µs；读写 {format_bytes(c.bytes)}，按本机的内存带宽只要 "
             f"{budget.read_seconds * 1e6:.1f} µs。"]
    if budget.overhead_ratio >= 3:
        lines.append(f"实测 TPOT {budget.measured_seconds * 1e3:.2f} ms，是两者中较长那个的 {budget.overhead_ratio:.0f} 倍："
                     "这个模型太小，一次前向的时间绝大部分不是花在运算和读写本身，而是花在固定开销上"
                     "（Python、逐个算子的调度；在 GPU 上还有每个内核的启动）。")
    else:
        lines.append(f"实测 TPOT {budget.measured_seconds * 1e3:.2f} ms，只是两者中较长那个的 {budget.overhead_ratio:.1f} 倍："
                     "这台机器上，连这么小的模型也接近两道屋顶。")
    return lines


# -- the chapter's four steps, in kvlab's code --------------------------------------------------------
@dataclass(frozen=True)
class CodePart:
    obj: object
    start: str
    stop: str
    caption: str


FOUR_STEPS = {
    "prefill": [
        CodePart(prefill, "def prefill", "return logits", "prefill()：预填充，整段提示词一次前向（也可分块）"),
        CodePart(ToyTransformer.forward_unchecked, "x = self.embed(ids)", "cache.advance(T)",
                 "ToyTransformer.forward_unchecked：每一层处理这 T 个 token，最后把 length 加 T"),
    ],
    "decode": [
        CodePart(decode_n_tokens, "for step in range(n)", "logits = decode_one_token(",
                 "decode_n_tokens()：解码循环，每步选出下一个 token"),
        CodePart(decode_one_token, "def decode_one_token", "return forward_pass(",
                 "decode_one_token()：只把上一步生成的 1 个 token 送进模型"),
    ],
    "attention": [
        CodePart(Attention.forward, "q, k, v = self.wqkv(x)", "out = attn_ops.attention(",
                 "Attention.forward：只为新 token 算 Q、K、V，K/V 写进缓存后取回全部已存的 K/V"),
        CodePart(attention, "k = repeat_kv(k", "out = weights @ v",
                 "attention()：softmax(QKᵀ/√D)·V 的显式写法（默认走等价的 SDPA）"),
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


def max_prompt_len(config: ModelConfig, decode_steps: int = PREFILL_DECODE_STEPS) -> int:
    """The longest prompt the sweep can time: the prompt and the decode steps after it fit in max_seq_len."""
    return config.max_seq_len - decode_steps - 1


def measure_prefill_sweep(model: ToyTransformer, lengths=PREFILL_LENGTHS, decode_steps: int = PREFILL_DECODE_STEPS,
                          repeats: int = 3, seed: int = 0) -> PrefillSweep:
    """Time the prefill pass and the decode steps after it for prompts of each length (random token ids),
    ``repeats`` times each, interleaved; see :class:`LengthPoint` for which run counts."""
    decode_steps = positive_int("decode_steps", decode_steps)
    repeats = positive_int("repeats", repeats)
    c = model.config
    if not isinstance(lengths, (list, tuple)) or not lengths:
        raise ValueError(f"lengths must be a non-empty list of prompt lengths, got {lengths!r}")
    lengths = [positive_int("lengths", n, maximum=max_prompt_len(c, decode_steps)) for n in lengths]
    gen = torch.Generator().manual_seed(seed)
    prompts = {P: torch.randint(0, c.vocab_size, (1, P), generator=gen) for P in lengths}
    runs = _timed_generations(model, prompts, decode_steps + 1, repeats)
    points = []
    for P in lengths:
        prefill = min(res.trace[0].seconds for res in runs[P])
        step = min(res.time_per_output_token for res in runs[P])
        points.append(LengthPoint(P, prefill, step, decode_steps, pass_cost(c, P), decode_cost(c, P, decode_steps)))
    return PrefillSweep(points, c, device_label(model.device))


class PrefillLab:
    """The prefill sweep the notebook measured, and more prompt lengths measured when a learner lists them
    (each length once; lengths measured earlier are reused)."""

    def __init__(self, sweep: PrefillSweep, model: ToyTransformer | None = None):
        self.model = model
        self.config = sweep.config
        self.device = sweep.device
        self.points = {p.prompt_len: p for p in sweep.points}

    def sweep(self, lengths: list[int]) -> PrefillSweep:
        wanted = sorted(set(lengths))
        missing = [P for P in wanted if P not in self.points]
        if missing:
            if self.model is None:
                raise ValueError(f"lengths: {missing} were not measured and there is no model to measure them")
            self.points.update({p.prompt_len: p for p in measure_prefill_sweep(self.model, missing).points})
        return PrefillSweep([self.points[P] for P in wanted], self.config, self.device)


def _lengths_text(lengths) -> str:
    return ", ".join(str(n) for n in lengths)


def _selected(control: str, value, options) -> int:
    return choice(control, whole_number(control, value, min(options), max(options)), list(options))


LENGTHS_CONTROL = "测量的提示词长度"


def render_prefill(lab: PrefillLab, lengths, prompt_len) -> View:
    """The prefill panel: the listed prompt lengths (measured on first use), one of them marked."""
    values = whole_numbers(LENGTHS_CONTROL, lengths, 1, max_prompt_len(lab.config), MAX_CUSTOM_LENGTHS)
    sweep = lab.sweep(values)
    p = sweep.at(_selected("提示词长度 P", prompt_len, sweep.lengths))
    readout = (
        f"<b>P = {p.prompt_len}</b>：预填充一次前向 <b>{p.prefill_seconds * 1e3:.2f} ms</b>，"
        f"即 <b>{p.prefill_tokens_per_s:,.0f} token/s</b>；一步解码 {p.decode_step_seconds * 1e3:.2f} ms，"
        f"即 <b>{p.decode_tokens_per_s:,.0f} token/s</b><br>"
        f"若把提示词一个一个地送进去：{p.prompt_len} × {p.decode_step_seconds * 1e3:.2f} ms = "
        f"{p.sequential_seconds * 1e3:.1f} ms，是一次预填充的 <b>{p.speedup:.1f} 倍</b>（设备 {html.escape(sweep.device)}）"
    )
    return View([plots.prefill_decode_figure(sweep, p.prompt_len)], readout, p)


def _follow_lengths(slider, config: ModelConfig, change) -> None:
    """The P slider offers exactly the lengths typed (when they can be read; otherwise the panel says why)."""
    try:
        values = sorted(set(whole_numbers(LENGTHS_CONTROL, change["new"], 1, max_prompt_len(config),
                                          MAX_CUSTOM_LENGTHS)))
    except InputError:
        return
    keep = slider.value if slider.value in values else values[-1]
    if list(slider.options) != values:
        slider.index = 0  # first, on its own: the browser's slider must never hold an index past the new list's end
        slider.options = values
    slider.value = keep


def prefill_panel(sweep: PrefillSweep, model: ToyTransformer | None = None, prompt_len: int = 64) -> Panel:
    """A box of prompt lengths (more are measured on ``model`` when typed) and a slider choosing one of them."""
    import ipywidgets as W

    lab = PrefillLab(sweep, model)
    value = prompt_len if prompt_len in sweep.lengths else sweep.lengths[-1]
    box = W.Text(value=_lengths_text(sweep.lengths), description=f"{LENGTHS_CONTROL}（逗号分隔）",
                 continuous_update=False, style={"description_width": "initial"}, layout=W.Layout(width="520px"))
    slider = W.SelectionSlider(options=sweep.lengths, value=value, description="提示词长度 P", continuous_update=True,
                               style={"description_width": "initial"}, layout=W.Layout(width="420px"))
    box.observe(partial(_follow_lengths, slider, sweep.config), names="value")  # before the panel's own observer
    return Panel({"lengths": box, "prompt_len": slider}, partial(render_prefill, lab), layout="horizontal",
                 css_class="kvlab-prefill")


PROPORTIONAL_EXPONENT = 0.6  # a segment of the prefill curve grows "about in proportion to P" from this exponent


def proportional_from(sweep: PrefillSweep) -> int | None:
    """The smallest measured P from which every later segment of the prefill time grows with an exponent of at
    least :data:`PROPORTIONAL_EXPONENT` (1 = in proportion to P); None when the last segment does not."""
    P = sweep.lengths
    t = [p.prefill_seconds for p in sweep.points]
    start = None
    for i in range(len(P) - 1, 0, -1):
        if growth_exponent(P[i - 1:i + 1], t[i - 1:i + 1]) < PROPORTIONAL_EXPONENT:
            break
        start = P[i - 1]
    return start


def explain_prefill(sweep: PrefillSweep, roofs: "Roofs") -> list[str]:
    """Where prefill crosses this machine's ridge, from when its time grows with P, and the speedup's ceiling."""
    ridge = roofs.ridge
    crossing = next((p.prompt_len for p in sweep.points if p.prefill_cost.intensity >= ridge), None)
    where = (f"测过的长度里，从 P = {crossing} 起预填充的算术强度不低于转折点" if crossing is not None
             else "测过的长度都还在转折点左边")
    lines = [f"预填充的算术强度约为 P / 2：P 超过约 2 × 转折点 = {2 * ridge:.0f} 时就越过本机的转折点（{where}）。"]
    start = proportional_from(sweep)
    if start is None:
        lines.append("实测：在测过的长度里，预填充的耗时一直比 P 涨得慢得多，还没有被算力卡住。")
    else:
        lines.append(f"实测：从 P = {start} 起，预填充的耗时与 P 差不多成正比地增长（之后每一段的增长指数都不低于 "
                     f"{PROPORTIONAL_EXPONENT}，完全成正比时是 1）：它被算力卡住了。")
    best = max(sweep.points, key=lambda p: p.speedup)
    last = sweep.points[-1]
    ceiling = last.prefill_flops_per_s / last.decode_flops_per_s
    lines.append(f"倍数（逐个送入 ÷ 一次预填充）最大是 {best.speedup:.1f}（P = {best.prompt_len}）。倍数约等于预填充与解码"
                 f"每秒运算数之比（P = {last.prompt_len} 时 {ceiling:.1f}）；预填充碰到矩阵乘屋顶时，倍数最多约为 矩阵乘速率 ÷ "
                 f"解码每秒运算数 = {roofs.flops.best / last.decode_flops_per_s:.0f}。")
    return lines


# -- this machine's roofline ---------------------------------------------------------------------------
@dataclass
class Roofs:
    """This machine's two roofs: memory read bandwidth (bytes/s) and matmul rate (FLOP/s)."""

    bandwidth: Rate
    flops: Rate
    device: str
    threads: int | None = None  # CPU threads both were measured with (None on a GPU)

    @property
    def ridge(self) -> float:
        """The intensity (FLOP/byte) where the two roofs meet."""
        return self.flops.best / self.bandwidth.best

    def attainable(self, intensity: float) -> float:
        """The roofline: min(compute roof, bandwidth × intensity), FLOP/s."""
        return min(self.flops.best, self.bandwidth.best * intensity)


last_roofs: Roofs | None = None  # the roofs measured most recently in this kernel (exercise 3.3-1 reuses them)


def measure_roofs(device, nbytes: int = 256 * 2**20, n: int = 1024, repeats: int = 15) -> Roofs:
    """Measure both roofs with the timing threads of the other measurements, keeping the fastest of
    ``repeats`` short runs each (a run that another program interrupted is only ever slower)."""
    global last_roofs
    threads = measurement_threads()
    with torch_threads(threads):
        bandwidth = measure_read_bandwidth(device, nbytes=nbytes, repeats=repeats)
        flops = measure_matmul_flops(device, n=n, repeats=repeats)
    last_roofs = Roofs(bandwidth, flops, device_label(device, threads),
                       threads if torch.device(device).type == "cpu" else None)
    return last_roofs


def explain_roofs(roofs: Roofs) -> list[str]:
    """What the roofs stand for: how many threads measured them, and the ridge they give."""
    if roofs.threads is not None:
        cores = os.cpu_count() or roofs.threads
        who = (f"两个屋顶都是用 {roofs.threads} 个线程测的（本机有 {cores} 个逻辑核），和本页的其他计时一样："
               + ("这是本页计时所用的那部分机器，不是整台机器的峰值。" if roofs.threads < cores else "整台机器都用上了。"))
    else:
        who = f"两个屋顶都是在 {roofs.device} 上测的，用的是 FP32。"
    return [who, f"转折点 = 矩阵乘速率 ÷ 带宽 = {roofs.ridge:.1f} FLOP/字节（FP32）。"]


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
    context_len: int  # tokens in each sequence's cache when the first timed decode step starts
    config: ModelConfig
    device: str

    @property
    def batch_sizes(self) -> list[int]:
        return [p.batch_size for p in self.points]

    def at(self, batch_size: int) -> BatchPoint:
        return self.points[self.batch_sizes.index(batch_size)]

    def label(self, batch_size: int) -> str:
        return f"解码 B={batch_size}（上下文 {self.context_len}）"

    def roofline_points(self) -> list[RooflinePoint]:
        return [RooflinePoint(self.label(p.batch_size), "batch", p.cost.intensity, p.flops_per_s, f"B={p.batch_size}")
                for p in self.points]


@torch.no_grad()
def _decode_passes(model: ToyTransformer, cache: KVCache, context_len: int, feed: torch.Tensor, steps: int):
    """``steps`` greedy decode passes starting from a cache holding ``context_len`` tokens: seconds of each."""
    cache.reset()
    cache.advance(context_len)
    seconds = []
    for _ in range(steps):
        logits, s = timed(partial(model, feed, cache, last_logits_only=True), model.device)
        feed = logits[:, -1:].argmax(-1)  # [B, 1]
        seconds.append(s)
    return seconds


def measure_batch_sweep(model: ToyTransformer, batch_sizes=BATCH_SIZES, context_len: int = 8,
                        decode_steps: int = BATCH_STEPS, repeats: int = BATCH_REPEATS, seed: int = 0) -> BatchSweep:
    """Time decode steps of B sequences at once, each with ``context_len`` tokens already in its cache, for
    each B: ``repeats`` runs of ``decode_steps`` passes, the batch sizes interleaved (a burst of load elsewhere
    then spoils one run of each, not every run of one), the fastest run kept. The caches' first rows are left
    as allocated (zeros): their values do not change the work or the time of a step, and filling them by a
    real prefill of B × context tokens would cost far more than the measurement."""
    decode_steps = positive_int("decode_steps", decode_steps)
    repeats = positive_int("repeats", repeats)
    c = model.config
    context_len = positive_int("context_len", context_len, maximum=c.max_seq_len - decode_steps)
    if not isinstance(batch_sizes, (list, tuple)) or not batch_sizes:
        raise ValueError(f"batch_sizes must be a non-empty list, got {batch_sizes!r}")
    sizes = [positive_int("batch_sizes", b, maximum=4096) for b in batch_sizes]
    gen = torch.Generator().manual_seed(seed)
    caches = {B: KVCache(c, B, context_len + decode_steps, dtype=model.dtype, device=model.device) for B in sizes}
    feeds = {B: torch.randint(0, c.vocab_size, (B, 1), generator=gen).to(model.device) for B in sizes}
    run = {B: partial(_decode_passes, model, caches[B], context_len, feeds[B]) for B in sizes}
    with torch_threads(measurement_threads()):
        runs = alternate({B: partial(run[B], decode_steps) for B in sizes}, repeats,
                         warmup={B: partial(run[B], 1) for B in sizes})
    del caches
    points = [BatchPoint(B, min(median(r) for r in runs[B]), decode_cost(c, context_len, decode_steps, B), decode_steps)
              for B in sizes]
    return BatchSweep(points, context_len, c, device_label(model.device))


class BatchLab:
    """Batch sweeps per context length: the one the notebook measured, more measured when a learner asks."""

    def __init__(self, sweep: BatchSweep, model: ToyTransformer | None = None):
        self.model = model
        self.sweeps = {sweep.context_len: sweep}
        self.batch_sizes = sweep.batch_sizes
        room = sweep.config.max_seq_len - BATCH_STEPS  # the longest context the model has room to decode after
        self.contexts = sorted({C for C in BATCH_CONTEXTS if C <= room} | {sweep.context_len})

    def sweep(self, context_len: int) -> BatchSweep:
        if context_len not in self.sweeps:
            if self.model is None:
                raise ValueError(f"context_len: {context_len} was not measured and there is no model to measure it")
            self.sweeps[context_len] = measure_batch_sweep(self.model, self.batch_sizes, context_len)
        return self.sweeps[context_len]


def explain_batch(sweep: BatchSweep, roofs: Roofs) -> list[str]:
    """How the step time moved while the batch stayed left of the ridge, and after it crossed."""
    ridge, one = roofs.ridge, sweep.points[0]
    left = [p for p in sweep.points if p.cost.intensity < ridge]
    right = [p for p in sweep.points if p.cost.intensity >= ridge]
    lines = []
    if len(left) >= 2:
        p = left[-1]
        r = p.step_seconds / one.step_seconds
        how = "几乎不变，和理想的 roofline 一样" if r < 1.15 else (
            f"增加了 {r - 1:.0%}：实际的机器达不到屋顶，单步耗时并不完全由读的字节决定（下面的矩阵乘实验是原因之一）")
        lines.append(f"B = {one.batch_size} 到 B = {p.batch_size}（算术强度 {p.cost.intensity:.2f}，还在转折点 {ridge:.1f} "
                     f"左边）：单步耗时 ×{r:.2f}，{how}。")
    elif left:
        lines.append(f"B = {sweep.points[1].batch_size} 时算术强度就已越过本机的转折点 {ridge:.1f}。")
    else:
        lines.append(f"连 B = {one.batch_size} 的算术强度也不低于本机的转折点 {ridge:.1f}。")
    if len(right) >= 2:
        a, b = right[0], right[-1]
        lines.append(f"越过转折点以后（B = {a.batch_size} 到 B = {b.batch_size}，B 大了 {b.batch_size / a.batch_size:g} 倍）："
                     f"单步耗时 ×{b.step_seconds / a.step_seconds:.2f}，吞吐 ×{b.tokens_per_s / a.tokens_per_s:.2f}。")
    elif right and left:
        a, b = left[-1], right[0]
        lines.append(f"越过转折点的那一步（B = {a.batch_size} 到 B = {b.batch_size}）：单步耗时 "
                     f"×{b.step_seconds / a.step_seconds:.2f}，吞吐 ×{b.tokens_per_s / a.tokens_per_s:.2f}。")
    elif not right:
        lines.append(f"到 B = {sweep.points[-1].batch_size} 都还在转折点左边。")
    return lines


def explain_kv_share(config: ModelConfig, batch_size: int, contexts=(8, 256, 1000)) -> list[str]:
    """A decode step of ``batch_size`` sequences at several context lengths: the K/V share of the bytes and
    the arithmetic intensity (counted with :func:`~kvlab.costs.pass_cost`)."""
    lines = []
    for C in contexts:
        cost = pass_cost(config, 1, C, batch_size)
        lines.append(f"B = {batch_size}，每条序列的缓存里已有 {C} 个 token：K/V 占一步读写字节的 {cost.cache_share:.0%}，"
                     f"算术强度 {cost.intensity:.1f} FLOP/字节（B / 2 = {batch_size / 2:g}）")
    return lines


BATCH_CONTEXT_CONTROL = "上下文长度"


def render_batch(lab: BatchLab, roofs: Roofs, prefill: PrefillSweep, batch_size, context_len) -> View:
    """The batching panel: one batch size and context length against the sweep, and on this machine's roofline."""
    B = _selected("批次 B", batch_size, lab.batch_sizes)
    sweep = lab.sweep(_selected(BATCH_CONTEXT_CONTROL, context_len, lab.contexts))
    p = sweep.at(B)
    one = sweep.points[0]
    who = ("为这 1 条序列生成 1 个 token" if p.batch_size == 1
           else f"同时为 {p.batch_size} 条序列各生成 1 个 token")
    readout = (
        f"<b>B = {p.batch_size}，每条序列的缓存里已有 {sweep.context_len} 个 token</b>：一步解码 "
        f"<b>{p.step_seconds * 1e3:.2f} ms</b>，{who}，即 <b>{p.tokens_per_s:,.0f} token/s</b><br>"
        f"与 B = {one.batch_size} 相比：吞吐 ×{p.tokens_per_s / one.tokens_per_s:.1f}，单步耗时 "
        f"×{p.step_seconds / one.step_seconds:.1f}；K/V 占一步读写字节的 <b>{p.cost.cache_share:.0%}</b>，"
        f"算术强度 <b>{p.cost.intensity:.2f} FLOP/字节</b>（转折点 {roofs.ridge:.1f}），"
        f"实际达到 {p.flops_per_s / 1e9:.1f} GFLOP/s（设备 {html.escape(sweep.device)}）"
    )
    figures = [plots.batch_figure(sweep, p.batch_size),
               plots.roofline_figure(roofs, prefill_points(prefill) + sweep.roofline_points(),
                                     highlight=sweep.label(p.batch_size))]
    return View(figures, readout, p)


def batch_panel(sweep: BatchSweep, roofs: Roofs, prefill: PrefillSweep, model: ToyTransformer | None = None) -> Panel:
    """A batch-size slider and a context-length slider (other lengths are measured on ``model`` when chosen)."""
    import ipywidgets as W

    lab = BatchLab(sweep, model)
    slider = W.SelectionSlider(options=sweep.batch_sizes, value=sweep.batch_sizes[0], description="批次 B",
                               continuous_update=True, style={"description_width": "initial"},
                               layout=W.Layout(width="420px"))
    context = W.SelectionSlider(options=lab.contexts, value=sweep.context_len,
                                description=f"{BATCH_CONTEXT_CONTROL}（每条序列缓存里已有的 token）",
                                continuous_update=False, style={"description_width": "initial"},
                                layout=W.Layout(width="520px"))
    return Panel({"batch_size": slider, "context_len": context}, partial(render_batch, lab, roofs, prefill),
                 layout="horizontal", css_class="kvlab-batch")


@dataclass
class SmallMatmuls:
    """``x @ W`` for a few rows of x, with W larger than the CPU caches: the fastest of the repeats per row count."""

    rows: list[int]
    seconds: list[float]
    weight_bytes: int
    device: str

    def slowdown(self, rows: int) -> float:
        """Time for ``rows`` rows over the time for the first row count."""
        return self.seconds[self.rows.index(rows)] / self.seconds[0]


def measure_small_matmuls(device, rows=(1, 2, 4, 8), nbytes: int = 128 * 2**20, repeats: int = 7) -> SmallMatmuls:
    """Time ``x @ W`` (fp32, W of ``nbytes``: the same bytes are read whatever the rows), interleaved."""
    dev = torch.device(device)
    rows = [positive_int("rows", r, maximum=64) for r in rows]
    n_in = 4096
    n_out = positive_int("nbytes", nbytes) // (4 * n_in)
    if n_out < 1:
        raise ValueError(f"nbytes: needs at least {4 * n_in} bytes, got {nbytes}")
    w = torch.full((n_in, n_out), 0.01, device=dev)  # [in, out], as kvlab's Linear stores its weights
    xs = {r: torch.full((r, n_in), 0.5, device=dev) for r in rows}
    threads = measurement_threads()
    with torch_threads(threads):
        runs = alternate({r: partial(timed, partial(torch.matmul, xs[r], w), dev) for r in rows}, repeats)
    del w
    return SmallMatmuls(rows, [min(s for _, s in runs[r]) for r in rows], 4 * n_in * n_out,
                        device_label(dev, threads))


def explain_small_matmuls(m: SmallMatmuls) -> list[str]:
    times = "，".join(f"{r} 行 {s * 1e3:.2f} ms" for r, s in zip(m.rows, m.seconds))
    lines = [f"x @ W，W 是 {format_bytes(m.weight_bytes)} 的 FP32 矩阵：{times}（{m.device}，每种取最快的一次）。"]
    r = m.slowdown(m.rows[-1])
    if r >= 1.3:
        lines.append(f"要读的权重一样多，{m.rows[-1]} 行却要 {m.rows[0]} 行的 {r:.1f} 倍时间：在这台机器上，行数很少的"
                     "矩阵乘读权重的速度不如矩阵乘向量，这是 B 增大时单步耗时增长的原因之一。")
    else:
        lines.append(f"{m.rows[-1]} 行只要 {m.rows[0]} 行的 {r:.1f} 倍时间：这台机器上读权重的速度几乎不受行数影响，"
                     "单步耗时随 B 的增长主要来自运算次数和每条序列自己的 K/V。")
    return lines


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


def explain_allocator(alloc: AllocatorComparison) -> list[str]:
    """What the allocator counters showed, the sentence chosen from the measured bytes held unused."""
    if not alloc.available:
        return [alloc.reason]
    lines = [f"{mode}：最后 allocated {format_bytes(t.allocated[-1])}，reserved {format_bytes(t.reserved[-1])}，"
             f"保留未用最多 {format_bytes(max(t.held_unused))}" for mode, t in alloc.traces.items()]
    grow, pre = (max(alloc.traces[m].held_unused) for m in ("dynamic", "kv"))
    if grow >= 2**20 and grow > 2 * pre:
        lines.append(f"这次测量里，逐步拼接的缓存最多有 {format_bytes(grow)} 保留着却没有张量在用，预分配的只有 "
                     f"{format_bytes(pre)}：释放掉的旧块没能全部用来放新的、更大的缓存，这就是碎片（{alloc.device}）。")
    else:
        lines.append(f"这次测量里，两者保留未用的显存相差不大（逐步拼接最多 {format_bytes(grow)}，预分配 {format_bytes(pre)}）："
                     f"分配器把释放的块合并、复用了，这一次没有积累出碎片（{alloc.device}）。")
    return lines


def explain_reservation(timeline: Timeline, config: ModelConfig) -> str:
    """The timeline's cache was sized for a known number of tokens; sized for max_seq_len it would sit mostly empty."""
    used = timeline.prompt_tokens + timeline.passes - 1
    share = used / config.max_seq_len
    return (f"上面的时间线事先知道要生成 {timeline.passes} 个 token，所以预分配的缓存正好是 {timeline.prompt_tokens} + "
            f"{timeline.passes} − 1 = {used} 个 token，结束时恰好存满。若像不知道输出多长时那样，按演示模型的最大长度 "
            f"{config.max_seq_len} 为这条序列预留，这次生成只用了 {used} / {config.max_seq_len} = {share:.0%}，"
            f"其余 {1 - share:.0%} 预留着却一直空着。")


# -- prompts of unequal length in one batch ---------------------------------------------------------------------
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
        return [n + self.new_tokens - 1 for n in self.lengths]

    @property
    def used_slots(self) -> int:
        return sum(self.stored_lengths)

    @property
    def paged_slots(self) -> int:
        return paged_slots(self.stored_lengths, self.block_size)

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
    values = whole_numbers("提示词长度（逗号分隔）", lengths, 1, limit, 8)
    block = whole_number("分页块大小", block_size, 1, 64)
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
    import ipywidgets as W

    box = W.Text(value=lengths, description="提示词长度（逗号分隔）", continuous_update=False,
                 style={"description_width": "initial"}, layout=W.Layout(width="420px"))
    return Panel({"lengths": box, "block_size": int_slider("分页块大小", 16, 1, 64, width="360px")},
                 partial(render_padded_batch, model, tokenizer, {}), layout="horizontal", css_class="kvlab-unequal")


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


def explain_precision(results: dict[str, CachePrecision], config: ModelConfig) -> list[str]:
    """Bytes per element and the two errors against each other, for the model the comparison ran on."""
    fp16, int8 = results["fp16"], results["int8"]
    D = config.head_dim
    return [
        f"INT8 缓存每个元素占 1 + 4/D 字节：演示模型 D = {D}，是 {1 + 4 / D:g} 字节；D = 128（LLaMA 等大模型的头维度）时"
        f"是 {1 + 4 / 128:.2f} 字节，约为 FP16 的一半。",
        f"INT8 的最大 logit 误差是 FP16 的 {int8.max_logit_error / fp16.max_logit_error:.0f} 倍"
        f"（在一个 {config.n_params() / 1e6:.2f} M 参数的小模型上）。",
    ]
