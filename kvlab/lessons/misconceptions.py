"""Chapter 3.5 常见误区与复盘: each of the chapter's three misconceptions refuted by an experiment, a lab of
deliberately broken caches to find the bug in, and the chapter's review as a self-check.

1. The cache is not part of the parameters: the weights (count, bytes, a checksum) do not change whatever is
   generated, the cache's bytes follow B x S exactly, the cache is not in the state dict, and a reset empties it.
2. Caching K alone saves nothing worth having: the same tokens as without a cache, V of every token projected
   again at every step (the trace says so), about the same work and time as no cache at all.
3. A bigger cache is not better: weights and cache share one memory budget; reserving more tokens per sequence
   lets fewer sequences run at once and leaves most of each reservation unused.
"""
from __future__ import annotations

import hashlib
import html
import math
import random
from dataclasses import dataclass
from functools import lru_cache, partial, wraps

import ipywidgets as W
import torch

from .. import inputs
from .._validate import positive_int
from ..assets import CORPUS, assets_dir
from ..attention import attention, attention_mask
from ..cache import KVCache
from ..costs import pass_cost
from ..device import available_memory
from ..generation import generate
from ..measure import DecodeTiming, measurement_threads, median, time_generate, torch_threads
from ..memory import dtype_name, format_bytes, kv_cache_bytes
from ..model import ToyTransformer
from ..presets import GPU_PRESETS, MODEL_PRESETS, ModelPreset
from ..teaching_caches import BROKEN_CACHES
from ..tokenizer import UnknownCharactersError
from ..viz import misconceptions_plots as plots
from ..viz.quiz import Choice, ChoiceQuestion, NumberQuestion
from ..viz.widgets import Panel, View, dropdown, int_slider, play_slider
from .decode import layer_qkv

DEFAULT_PROMPT = "人工"  # the course's running example
LAB_PROMPT = "计算"  # the lab's default: each broken cache first changes a token at a different step


def leave_a_core(fn):
    """Run ``fn`` on :func:`~kvlab.measure.measurement_threads` CPU threads: this tiny model gains nothing from a
    second thread, and a thread that has to share its core with the browser makes every step wait for it."""
    @wraps(fn)
    def wrapper(*args, **kwargs):
        with torch_threads(measurement_threads()):
            return fn(*args, **kwargs)
    return wrapper


@lru_cache(maxsize=1)
def corpus_text() -> str:
    """The demo model's training text (every character is in its vocabulary)."""
    return (assets_dir() / CORPUS).read_text(encoding="utf-8")


def corpus_prompts(tokenizer, prompt_len: int, batch_size: int, stride: int = 53) -> list[list[int]]:
    """``batch_size`` different prompts of exactly ``prompt_len`` tokens: windows of the corpus ``stride`` apart."""
    need = stride * (positive_int("batch_size", batch_size) - 1) + positive_int("prompt_len", prompt_len)
    text = corpus_text()
    if need > len(text):
        raise ValueError(f"batch_size: {batch_size} windows of {prompt_len} tokens need {need} characters of the "
                         f"corpus, which has {len(text)}")
    ids = tokenizer.encode(text[:need])
    return [ids[b * stride: b * stride + prompt_len] for b in range(batch_size)]


# == Misconception 1: the cache is not part of the parameters ====================================
@dataclass(frozen=True)
class WeightsSnapshot:
    """What the model's parameters are: how many, their bytes, and a checksum of every byte of the state dict."""

    n_params: int
    n_bytes: int
    checksum: str  # sha256 over the names and raw bytes of every state-dict tensor, in order
    n_tensors: int


def weights_snapshot(model: ToyTransformer) -> WeightsSnapshot:
    state = model.state_dict()
    digest = hashlib.sha256()
    for name, t in state.items():
        digest.update(name.encode())
        digest.update(t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes())
    return WeightsSnapshot(sum(p.numel() for p in model.parameters()),
                           sum(t.numel() * t.element_size() for t in state.values()), digest.hexdigest(), len(state))


def _cache_checksum(cache: KVCache) -> str:
    """sha256 of the stored K and V (the filled part only)."""
    digest = hashlib.sha256()
    for t in (cache.k[:, :, :, :cache.length], cache.v[:, :, :, :cache.length]):
        digest.update(t.contiguous().cpu().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


@dataclass
class CacheRun:
    """One generation with a cache we hold: the weights before and after, and the cache as it grew."""

    prompt_len: int
    batch_size: int
    new_tokens: int
    before: WeightsSnapshot
    after: WeightsSnapshot
    seq_lens: list[int]  # tokens per sequence stored after each pass
    cache_bytes: list[int]  # bytes of the stored tokens after each pass (from the trace)
    allocated_bytes: int
    per_token_bytes: int  # K and V of one token of one sequence, all layers (the formula)
    cache_checksum: str
    cache_in_state_dict: bool  # does any state-dict tensor share memory with the cache?
    length_after_reset: int
    bytes_after_reset: int
    text: str  # what the first sequence reads (prompt and new tokens)

    @property
    def stored_tokens(self) -> int:
        """S: tokens per sequence in the cache at the end (the last new token is never fed back)."""
        return self.seq_lens[-1]

    @property
    def final_bytes(self) -> int:
        return self.cache_bytes[-1]

    @property
    def weights_unchanged(self) -> bool:
        return self.before == self.after


@leave_a_core
@torch.no_grad()
def run_with_cache(model: ToyTransformer, tokenizer, prompt_len: int, batch_size: int,
                   new_tokens: int = 16) -> CacheRun:
    """Generate ``new_tokens`` after ``batch_size`` corpus prompts of ``prompt_len`` tokens, watching both."""
    c = model.config
    prompt_len = positive_int("prompt_len", prompt_len)
    batch_size = positive_int("batch_size", batch_size)
    new_tokens = positive_int("new_tokens", new_tokens)
    if prompt_len + new_tokens > c.max_seq_len:
        raise ValueError(f"new_tokens: prompt_len ({prompt_len}) + new_tokens ({new_tokens}) passes the model's "
                         f"max_seq_len ({c.max_seq_len})")
    prompts = corpus_prompts(tokenizer, prompt_len, batch_size)
    before = weights_snapshot(model)
    cache = KVCache(c, batch_size, prompt_len + new_tokens - 1, dtype=model.dtype, device=model.device)
    result = generate(model, prompts, new_tokens, cache=cache)
    after = weights_snapshot(model)
    storages = {cache.k.untyped_storage().data_ptr(), cache.v.untyped_storage().data_ptr()}
    shared = any(t.untyped_storage().data_ptr() in storages for t in model.state_dict().values())
    checksum = _cache_checksum(cache)
    per_token = kv_cache_bytes(c.n_layer, c.n_kv_head, c.head_dim, 1, 1, dtype_name(model.dtype))
    run = CacheRun(prompt_len, batch_size, new_tokens, before, after, [r.seq_len for r in result.trace],
                   [r.cache_bytes for r in result.trace], cache.nbytes, per_token, checksum, shared, 0, 0,
                   tokenizer.decode(result.tokens[0]))
    cache.reset()
    run.length_after_reset, run.bytes_after_reset = cache.length, cache.used_bytes
    return run


M1_LIMITS = {"prompt_len": 200, "batch_size": 8, "new_tokens": 48}
PROMPT_LEN_LABEL, BATCH_LABEL, NEW_TOKENS_LABEL = "提示词长度", "批次 B", "生成 token 数"


def render_weights_vs_cache(model: ToyTransformer, tokenizer, prompt_len, batch_size, new_tokens) -> View:
    """The misconception-1 panel: one real generation, the weights checked before and after, the cache's bytes."""
    P = inputs.whole_number(PROMPT_LEN_LABEL, prompt_len, 1, M1_LIMITS["prompt_len"])
    B = inputs.whole_number(BATCH_LABEL, batch_size, 1, M1_LIMITS["batch_size"])
    n = inputs.whole_number(NEW_TOKENS_LABEL, new_tokens, 1, M1_LIMITS["new_tokens"])
    run = run_with_cache(model, tokenizer, P, B, n)
    S = run.stored_tokens
    same = "不变 ✓" if run.weights_unchanged else '<span style="color:#b00">变了！</span>'
    readout = (
        f"参数：{run.after.n_params:,} 个，{format_bytes(run.after.n_bytes)}；state_dict 校验和 "
        f"<code>{run.before.checksum[:12]}</code> → <code>{run.after.checksum[:12]}</code>（{same}）<br>"
        f"KV Cache：B = {B} 条序列 × S = {S} 个 token（提示词 {P} + 生成 {n} − 1：最后一个新 token 还没有送回模型）"
        f" × 每个 token {format_bytes(run.per_token_bytes)} = <b>{run.final_bytes:,} B = "
        f"{format_bytes(run.final_bytes)}</b>；缓存内容的校验和 <code>{run.cache_checksum[:12]}</code>（随输入而变）<br>"
        f"缓存在 state_dict 里吗？{'是' if run.cache_in_state_dict else '不在'}（没有哪个参数张量与缓存共用内存）；"
        f"reset() 之后：{run.length_after_reset} 个 token，已用 {run.bytes_after_reset} B"
    )
    limits = M1_LIMITS
    x_max = limits["batch_size"] * (limits["prompt_len"] + limits["new_tokens"] - 1)
    return View([plots.weights_vs_cache_figure(run, x_max)], readout, run)


def weights_panel(model: ToyTransformer, tokenizer, prompt_len: int = 120, batch_size: int = 4,
                  new_tokens: int = 16) -> Panel:
    """Prompt length and batch sliders, and a Play button that generates one more token per frame."""
    play, tokens = play_slider(NEW_TOKENS_LABEL, new_tokens, 1, M1_LIMITS["new_tokens"], interval_ms=400)
    tokens.layout.width = "330px"
    controls = {"prompt_len": int_slider(PROMPT_LEN_LABEL, prompt_len, 1, M1_LIMITS["prompt_len"], width="340px"),
                "batch_size": int_slider(BATCH_LABEL, batch_size, 1, M1_LIMITS["batch_size"], width="260px"),
                "new_tokens": tokens}
    return Panel(controls, partial(render_weights_vs_cache, model, tokenizer), layout="horizontal",
                 extra={"new_tokens": play}, css_class="kvlab-weights")


# == Misconception 2: caching K alone =============================================================
K_ONLY_MODES = ("none", "k_only", "kv")
K_ONLY_NAMES = {"none": "无缓存", "k_only": "只缓存 K", "kv": "有缓存"}  # as in the figures' legends


def compare_k_only(model: ToyTransformer, prompt_ids, new_tokens: int, repeats: int = 1) -> dict[str, DecodeTiming]:
    """Generate with no cache, a K-only cache and a K+V cache on the same prompt, alternating, after a warm-up."""
    new_tokens = positive_int("new_tokens", new_tokens)
    return time_generate(model, prompt_ids, new_tokens, K_ONLY_MODES, repeats=repeats)


def tail_step_ms(t: DecodeTiming, fraction: float = 0.25) -> float:
    """Median decode-step time (ms) over the last ``fraction`` of the run, where the sequence is longest."""
    steps = t.step_seconds[1:]  # decode passes only
    tail = steps[-max(1, int(len(steps) * fraction)):]
    return median(tail) * 1e3


def step_flops(model: ToyTransformer, mode: str, seq_len: int) -> int:
    """FLOPs (counted, see ``kvlab.costs``) of the decode pass that brings a sequence to ``seq_len`` tokens.

    "none" runs all ``seq_len`` tokens; "kv" runs 1 token after ``seq_len - 1`` cached ones; "k_only" runs all of
    them too but skips the K projection of the ``seq_len - 1`` past tokens.
    """
    c = model.config
    t = positive_int("seq_len", seq_len)
    if mode == "kv":
        return pass_cost(c, 1, t - 1).flops
    whole = pass_cost(c, t).flops
    if mode == "none":
        return whole
    if mode == "k_only":
        return whole - (t - 1) * c.n_layer * 2 * c.d_model * c.n_kv_head * c.head_dim
    raise ValueError(f"mode must be one of {K_ONLY_MODES}, got {mode!r}")


def tail_times_text(timings: dict[str, DecodeTiming]) -> str:
    """「无缓存 6.49 ms，只缓存 K 6.21 ms，有缓存 1.05 ms」: the median step of the last quarter of each run."""
    return "，".join(f"{K_ONLY_NAMES.get(m, m)} {tail_step_ms(t):.2f} ms" for m, t in timings.items())


def same_tokens(timings: dict[str, DecodeTiming]) -> bool:
    first = next(iter(timings.values())).tokens
    return all(torch.equal(t.tokens, first) for t in timings.values())


REPEATS_LABEL = "重复次数（取中位数）"


def render_k_only(model: ToyTransformer, prompt_ids, new_tokens, repeats) -> View:
    """The misconception-2 panel: time the three modes, plot step time and K/V projections per step."""
    n = inputs.whole_number(NEW_TOKENS_LABEL, new_tokens, 8, model.config.max_seq_len - len(prompt_ids[0]))
    r = inputs.whole_number(REPEATS_LABEL, repeats, 1, 9)
    timings = compare_k_only(model, prompt_ids, n, r)
    last = timings["none"].seq_len[-1]
    share = step_flops(model, "k_only", last) / step_flops(model, "none", last)
    tokens = "三种方式生成的 token 完全相同" if same_tokens(timings) else '<span style="color:#b00">token 不同！</span>'
    readout = (
        f"生成 {n} 个 token：{tokens}。最后 1/4 的解码步（t ≈ {last}）单步耗时中位数："
        f"<b>{tail_times_text(timings)}</b>（{model.device}，{measurement_threads()} 个 CPU 线程）<br>"
        f"trace 记录的每步投影（第 t 步）：无缓存 K = V = t；只缓存 K：K = 1，<b>V = t</b>；有缓存：K = V = 1。"
        f"按定义计数，t = {last} 时只缓存 K 的一步仍要做无缓存的 <b>{share:.1%}</b> 的计算"
    )
    return View([plots.k_only_figure(timings)], readout, timings)


def k_only_panel(model: ToyTransformer, prompt_ids, new_tokens: int = 200) -> Panel:
    """Length and repeat sliders; measurements run when the button is clicked."""
    top = model.config.max_seq_len - len(prompt_ids[0])
    return Panel({"new_tokens": int_slider(NEW_TOKENS_LABEL, new_tokens, 40, top - top % 40, step=40),
                  "repeats": int_slider(REPEATS_LABEL, 1, 1, 5, width="300px")},
                 partial(render_k_only, model, prompt_ids), layout="horizontal", css_class="kvlab-konly",
                 button=W.Button(description="运行测量", button_style="primary", icon="play"))


@dataclass(frozen=True)
class Dependency:
    """How much K and V of the last token change, layer by layer, when only the first token is changed."""

    text: str
    changed_text: str
    k_change: list[float]  # per layer: max |K_changed - K| of the last token
    v_change: list[float]


@leave_a_core
@torch.no_grad()
def prefix_dependency(model: ToyTransformer, tokenizer, text: str = "人工智能模型") -> Dependency:
    """Change the first token of ``text`` and measure K and V of its last token at every layer.

    At layer 0 they depend on the last token alone (no change); from layer 1 on they depend on every earlier
    token through the attention of the layers below: recomputing them means re-running those layers over the
    whole prefix.
    """
    ids = tokenizer.encode(text)
    if len(ids) < 2:
        raise ValueError("text: needs at least 2 tokens (one to change, one to watch)")
    changed = [(ids[0] + 1) % model.config.vocab_size] + ids[1:]
    k_change, v_change = [], []
    for layer in range(model.config.n_layer):
        _, k, v = layer_qkv(model, ids, layer)  # K, V: [H_kv, t, D]
        _, k2, v2 = layer_qkv(model, changed, layer)
        k_change.append((k2[:, -1] - k[:, -1]).abs().max().item())
        v_change.append((v2[:, -1] - v[:, -1]).abs().max().item())
    return Dependency(text, tokenizer.decode(changed), k_change, v_change)


@dataclass(frozen=True)
class QueryCheck:
    """Attention at one layer with the queries of every earlier token replaced by noise."""

    layer: int
    t: int
    last_row_change: float  # max |output change| of the newest token: its row uses only its own query
    earlier_rows_change: float  # ... of the earlier tokens' rows


@leave_a_core
@torch.no_grad()
def past_queries_unused(model: ToyTransformer, tokenizer, text: str = "人工智能模型", layer: int = 1,
                        seed: int = 0) -> QueryCheck:
    """Replace Q of every token but the last with noise: the last token's attention output does not move."""
    ids = tokenizer.encode(text)
    q, k, v = layer_qkv(model, ids, layer)  # Q: [H, t, D]; K, V: [H_kv, t, D]
    t = q.shape[1]
    noisy = q.clone()
    gen = torch.Generator().manual_seed(seed)
    noisy[:, :-1] = torch.randn(noisy[:, :-1].shape, generator=gen).to(q)
    mask = attention_mask(t, t, 0, device=q.device)
    out = attention(q[None], k[None], v[None], mask, impl="explicit")[0]  # [H, t, D]
    out_noisy = attention(noisy[None], k[None], v[None], mask, impl="explicit")[0]
    diff = (out_noisy - out).abs()  # [H, t, D]
    return QueryCheck(layer, t, diff[:, -1].max().item(), diff[:, :-1].max().item())


# == Misconception 3: a bigger cache is not better ===============================================
BUDGET_MODELS = ("LLaMA-7B", "Llama-2-7B", "Llama-3-8B", "Qwen2.5-7B")
DEFAULT_GPU, DEFAULT_MODEL = "T4 16 GB (Colab)", "LLaMA-7B"
GPU_LABEL, MODEL_LABEL = "GPU", "模型"
RESERVE_LABEL, CONCURRENT_LABEL = "每条序列预留（tokens）", "同时服务的序列数"
MAX_RESERVE, MAX_CONCURRENT = 8192, 64
PAGE_TOKENS = 16  # block size of the paged comparison (vLLM's default)


@dataclass(frozen=True)
class RequestSpread:
    """A made-up but typical spread of request lengths (prompt + answer, tokens): log-normal, so most requests
    are short and a few are long. Seeded, so every run draws the same requests."""

    median: int = 256
    sigma: float = 0.9
    count: int = 1000
    seed: int = 0

    def lengths(self, longest: int) -> list[int]:
        """``count`` lengths, each at least 1 and at most ``longest`` (the model's context)."""
        rng = random.Random(self.seed)
        return [min(longest, max(1, round(rng.lognormvariate(math.log(self.median), self.sigma))))
                for _ in range(self.count)]


SPREAD = RequestSpread()


@dataclass(frozen=True)
class ReservationPlan:
    """One memory budget holding a model's weights and, for each running sequence, a fixed cache reservation."""

    model: ModelPreset
    gpu: str
    budget_bytes: int
    weight_bytes: int
    per_token_bytes: int
    reserved_tokens: int  # R: cache slots reserved per sequence
    wanted: int  # sequences we would like to serve at once
    lengths: tuple[int, ...]  # the request spread (tokens)

    @property
    def room_bytes(self) -> int:
        return self.budget_bytes - self.weight_bytes

    @property
    def slot_bytes(self) -> int:
        """Bytes one sequence's reservation takes."""
        return self.reserved_tokens * self.per_token_bytes

    @property
    def capacity(self) -> int:
        """How many sequences fit at once."""
        return max(0, self.room_bytes) // self.slot_bytes

    @property
    def admitted(self) -> int:
        return min(self.wanted, self.capacity)

    @property
    def needed_bytes(self) -> int:
        return self.weight_bytes + self.wanted * self.slot_bytes

    @property
    def over_budget_bytes(self) -> int:
        return max(0, self.needed_bytes - self.budget_bytes)

    @property
    def too_long_share(self) -> float:
        """Share of requests longer than the reservation (cut off, or refused)."""
        return sum(n > self.reserved_tokens for n in self.lengths) / len(self.lengths)

    @property
    def used_share(self) -> float:
        """Mean share of a reservation that a request fills (a request longer than R fills all of it)."""
        return sum(min(n, self.reserved_tokens) for n in self.lengths) / (len(self.lengths) * self.reserved_tokens)

    @property
    def unused_bytes(self) -> int:
        """Reserved but, on average, never written, over all admitted sequences."""
        return round(self.admitted * self.slot_bytes * (1 - self.used_share))

    @property
    def paged_capacity(self) -> float:
        """Sequences that fit on average if each took only the blocks of ``PAGE_TOKENS`` it fills (paging)."""
        pages = sum(math.ceil(n / PAGE_TOKENS) * PAGE_TOKENS for n in self.lengths) / len(self.lengths)
        return max(0, self.room_bytes) / (pages * self.per_token_bytes)


def plan_reservation(model: str = DEFAULT_MODEL, gpu: str = DEFAULT_GPU, reserved_tokens: int = 2048,
                     wanted: int = 4, spread: RequestSpread = SPREAD) -> ReservationPlan:
    """FP16 weights and FP16 cache on one of ``GPU_PRESETS`` (its memory as nvidia-smi reports it)."""
    if model not in MODEL_PRESETS:
        raise ValueError(f"model must be one of MODEL_PRESETS, got {model!r}")
    if gpu not in GPU_PRESETS:
        raise ValueError(f"gpu must be one of GPU_PRESETS ({', '.join(GPU_PRESETS)}), got {gpu!r}")
    p = MODEL_PRESETS[model]
    R = positive_int("reserved_tokens", reserved_tokens)
    return ReservationPlan(p, gpu, GPU_PRESETS[gpu].memory_bytes, p.weight_bytes("fp16"), p.kv_bytes_per_token("fp16"),
                           R, positive_int("wanted", wanted), tuple(spread.lengths(p.context_length)))


RESERVE_SWEEP = (64, 128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)


def render_budget(gpu, model, reserved_tokens, wanted) -> View:
    """The misconception-3 panel: the budget as a bar, and the trade-off as the reservation grows."""
    gpu = inputs.choice(GPU_LABEL, gpu, list(GPU_PRESETS))
    model = inputs.choice(MODEL_LABEL, model, list(BUDGET_MODELS))
    R = inputs.whole_number(RESERVE_LABEL, reserved_tokens, 1, MAX_RESERVE)
    N = inputs.whole_number(CONCURRENT_LABEL, wanted, 1, MAX_CONCURRENT)
    plan = plan_reservation(model, gpu, R, N)
    if plan.room_bytes < plan.per_token_bytes:
        raise inputs.InputError(GPU_LABEL, f"{gpu} 只有 {format_bytes(plan.budget_bytes)}，{model} 的 FP16 权重"
                                f"（{format_bytes(plan.weight_bytes)}）放进去之后，连 1 个 token 的缓存都放不下：换一张更大的卡")
    sweep = [plan_reservation(model, gpu, r, N) for r in RESERVE_SWEEP]
    return View([plots.budget_figure(plan), plots.reservation_figure(sweep, plan)], budget_html(plan), plan)


def budget_html(plan: ReservationPlan) -> str:
    p, R = plan.model, plan.reserved_tokens
    lines = [
        f"{html.escape(plan.gpu)}：{format_bytes(plan.budget_bytes)}；{html.escape(p.name)} 的 FP16 权重 "
        f"{format_bytes(plan.weight_bytes)}；留给 KV Cache 的只有 <b>{format_bytes(plan.room_bytes)}</b>。",
        f"每条序列预留 R = {R:,} 个 token × {format_bytes(plan.per_token_bytes)} = {format_bytes(plan.slot_bytes)}"
        f" → 最多同时 <b>{plan.capacity}</b> 条序列。",
        f"按示例的请求长度分布（{SPREAD.count} 个请求，中位数 {SPREAD.median} 个 token）："
        f"<b>{plan.too_long_share:.1%}</b> 的请求比 R 长（会被截断或拒绝）；其余的平均只填满预留的 "
        f"{plan.used_share:.1%}，<b>{1 - plan.used_share:.1%} 闲置</b>（{plan.admitted} 条序列共闲置约 "
        f"{format_bytes(plan.unused_bytes)}）。",
    ]
    if R > p.context_length:
        lines.append(f'<span style="color:#8a4b00">⚠ R 超过了 {html.escape(p.name)} 的上下文'
                     f"（{p.context_length:,} 个 token）：多出的部分永远用不上。</span>")
    if plan.over_budget_bytes:
        lines.append(f'<span style="color:#b00">想同时服务 {plan.wanted} 条：需要 {format_bytes(plan.needed_bytes)}，'
                     f"超出预算 <b>{format_bytes(plan.over_budget_bytes)}</b>——第 {plan.capacity + 1} 条序列起就放不下了。"
                     "预算检查在分配之前拒绝它们，而不是让程序因显存不足（OOM）崩溃。</span>")
    else:
        lines.append(f"想同时服务 {plan.wanted} 条：需要 {format_bytes(plan.needed_bytes)}，放得下，"
                     f"剩余 {format_bytes(plan.budget_bytes - plan.needed_bytes)}。")
    lines.append(f"对比：按需分页（每块 {PAGE_TOKENS} 个 token，只给用到的块）时，同样的显存平均能放下约 "
                 f"<b>{plan.paged_capacity:.1f}</b> 条这样的请求。")
    return "<br>".join(lines)


def budget_panel(gpu: str = DEFAULT_GPU, model: str = DEFAULT_MODEL, reserved_tokens: int = 2048,
                 wanted: int = 4) -> Panel:
    controls = {"gpu": dropdown(GPU_LABEL, list(GPU_PRESETS), gpu, width="230px"),
                "model": dropdown(MODEL_LABEL, list(BUDGET_MODELS), model, width="220px"),
                "reserved_tokens": int_slider(RESERVE_LABEL, reserved_tokens, 64, 4096, step=64),
                "wanted": int_slider(CONCURRENT_LABEL, wanted, 1, 32, width="360px")}
    return Panel(controls, render_budget, layout="horizontal", css_class="kvlab-budget")


@dataclass(frozen=True)
class ReservationEffect:
    """The same generation with caches reserved for different numbers of tokens."""

    reserved: list[int]
    allocated_bytes: list[int]
    used_bytes: list[int]
    same_tokens: bool


@leave_a_core
@torch.no_grad()
def reservation_effect(model: ToyTransformer, tokenizer, prompt: str = DEFAULT_PROMPT, new_tokens: int = 24,
                       extra: tuple[int, ...] = (0, 64, 200)) -> ReservationEffect:
    """Generate the same text with a cache that fits exactly and with caches ``extra`` tokens bigger."""
    ids = tokenizer.encode(prompt)
    need = len(ids) + new_tokens - 1
    reserved, allocated, used, outputs = [], [], [], []
    for more in extra:
        cache = KVCache(model.config, 1, need + more, dtype=model.dtype, device=model.device)
        outputs.append(generate(model, [ids], new_tokens, cache=cache).tokens)
        reserved.append(need + more)
        allocated.append(cache.nbytes)
        used.append(cache.used_bytes)
    return ReservationEffect(reserved, allocated, used, all(torch.equal(o, outputs[0]) for o in outputs))


@dataclass(frozen=True)
class RefusedAllocation:
    requested_bytes: int
    free_bytes: int
    message: str  # what kvlab said instead of allocating


def refused_allocation(model: ToyTransformer) -> RefusedAllocation | None:
    """Ask for a cache twice as big as this machine's free memory: kvlab refuses before allocating anything.
    ``None`` where the device does not report its free memory."""
    free = available_memory(model.device)
    if free is None:
        return None
    c = model.config
    per_sequence = kv_cache_bytes(c.n_layer, c.n_kv_head, c.head_dim, c.max_seq_len, 1, dtype_name(model.dtype))
    batch = 2 * free // per_sequence + 1
    try:
        KVCache(c, batch, c.max_seq_len, dtype=model.dtype, device=model.device)
    except ValueError as exc:
        return RefusedAllocation(batch * per_sequence, free, str(exc))
    raise RuntimeError("a cache twice the size of free memory was allocated; kvlab's check did not refuse it")


# == Find the bug ===================================================================================
PREVIOUS_PROMPT = "大语言模型"  # the request served before the lab's prompt, with the same cache
LAB_NEW_TOKENS = 24
LOGIT_TOLERANCE = 1e-4  # |logit difference| below this is float rounding (a correct cache stays under 1e-5)
REFERENCE = "kv"  # the correct cache, as a control


@dataclass(frozen=True)
class BugCard:
    """What the lab shows for one cache: a neutral label, and the explanation revealed on request."""

    label: str
    explanation: str
    fix: str


BUG_CARDS: dict[str, BugCard] = {
    REFERENCE: BugCard(
        "对照：正确的 KVCache",
        "这是 kvlab 的 KVCache，没有 bug：每一步的 logits 与无缓存的参考只差浮点舍入（小于 1e-5），生成的 token 完全相同。",
        "无需修复。"),
    "rope_offset": BugCard(
        "缓存 A",
        "新 token 的 K 存进缓存时，旋转位置编码（RoPE）用的是位置 0、1、2……而不是它在序列中的真实位置 "
        "length、length + 1……：写 K 时漏掉了位置偏移。预填充从位置 0 开始，所以第 1 步完全正确；"
        "从第 2 步（第一次解码）起，每个新 K 都自称在位置 0，注意力分数里的相对位置全错了。"
        "模型很有把握时，错误的 logits 仍可能选出同一个 token，所以 token 往往要晚几步才变。",
        "旋转 K 时用 positions = length + arange(T)（kvlab 的 rope_and_mask(start=cache.length, ...)）。"),
    "no_reset": BugCard(
        "缓存 B",
        "reset() 忘了把 length 置 0。服务完上一个请求（「大语言模型」）后，同一块缓存接着服务这个提示词："
        "新的提示词被接在上一个请求的 token 后面，既能看到上一个请求的内容，位置编码也从错误的位置开始。"
        "所以第 1 步的 logits 就不同了。",
        "reset() 里写上 self.length = 0（存储本身可以留着复用：读取只看前 length 个位置）。"),
    "k_as_v": BugCard(
        "缓存 C",
        "写缓存时把 K 写进了 V 的位置（复制粘贴时少改了一个字母）。注意力用权重对「K」求加权平均，"
        "输出完全不对，第 1 步（预填充）就已经出错，而且错得很离谱。",
        "self.v[layer, :, :, length:end] = v（而不是 = k）。"),
    "off_by_one": BugCard(
        "缓存 D",
        "新 token 写在 length − 1 而不是 length：把「最后一个已存 token 的下标」当成了「下一个空位」。"
        "预填充从位置 0 开始写，所以第 1 步正确；之后每一步都用新 token 覆盖上一个 token 的 K/V，"
        "而注意力读到的最后一个位置（length）是 0 或者上一个请求留下的旧数据。",
        "写入区间是 [length, length + T)。"),
    "one_slot": BugCard(
        "缓存 E",
        "所有层都读写第 0 层的那一格（忘了用 layer 下标）。同一次前向计算里，每一层都先写入新 token 再读取，"
        "所以预填充（第 1 步）恰好正确；从第一次解码起，每一层看到的旧 token 的 K/V 都是最后一层写下的，"
        "而不是本层的。",
        "按 self.k[layer] / self.v[layer] 读写：每一层有自己的一份缓存。"),
}
CACHE_LABEL, PROMPT_LABEL, REVEAL_LABEL = "缓存", "提示词", "显示解释"
LAB_CACHES = (REFERENCE, *BROKEN_CACHES)


@dataclass(frozen=True)
class BugRun:
    """One cache against the uncached reference, on the second of two requests served with the same cache."""

    cache: str  # "kv", a key of BROKEN_CACHES, or the name of the KVCache subclass that was run
    prompt: str
    reference: list[str]  # the new tokens without a cache, one string each
    output: list[str]  # ... with this cache
    logit_diff: list[float]  # per step: max |logit difference| against the reference

    @property
    def first_token_step(self) -> int | None:
        """1-based step of the first new token that differs (None: all the same)."""
        return next((i + 1 for i, (a, b) in enumerate(zip(self.reference, self.output)) if a != b), None)

    @property
    def first_logit_step(self) -> int | None:
        """1-based step of the first distribution that differs beyond float rounding."""
        return next((i + 1 for i, d in enumerate(self.logit_diff) if d > LOGIT_TOLERANCE), None)


def make_lab_cache(cache, model: ToyTransformer, max_seq_len: int) -> KVCache:
    """A fresh cache for the lab: the correct ``KVCache`` ("kv"), one of ``BROKEN_CACHES`` by its id, or any
    ``KVCache`` subclass (a learner's fixed version of a broken one)."""
    if isinstance(cache, type) and issubclass(cache, KVCache):
        cls = cache
    elif cache == REFERENCE:
        cls = KVCache
    elif cache in BROKEN_CACHES:
        cls = BROKEN_CACHES[cache]
    else:
        raise ValueError(f"cache must be one of {', '.join(LAB_CACHES)} or a KVCache subclass; got {cache!r}")
    return cls(model.config, 1, max_seq_len, dtype=model.dtype, device=model.device)


@leave_a_core
@torch.no_grad()
def run_lab_cache(model: ToyTransformer, tokenizer, cache, prompt: str = LAB_PROMPT,
                  new_tokens: int = LAB_NEW_TOKENS, previous: str = PREVIOUS_PROMPT) -> BugRun:
    """Serve ``previous`` and then ``prompt`` with one cache (``reset()`` in between, as a server would), and
    compare the second request with ``generate(..., cache="none")``. ``cache``: an id (see
    :func:`make_lab_cache`) or a ``KVCache`` subclass."""
    new_tokens = positive_int("new_tokens", new_tokens)
    first, second = tokenizer.encode(previous), tokenizer.encode(prompt)
    kv = make_lab_cache(cache, model, len(first) + len(second) + 2 * (new_tokens - 1))
    generate(model, [first], new_tokens, cache=kv)
    kv.reset()
    out = generate(model, [second], new_tokens, cache=kv, return_logits=True)
    ref = generate(model, [second], new_tokens, cache="none", return_logits=True)
    diff = (out.logits - ref.logits).abs().amax(dim=-1)[0]  # [new_tokens]
    as_text = lambda ids: [tokenizer.decode([int(i)]) for i in ids]  # noqa: E731
    name = cache.__name__ if isinstance(cache, type) else cache
    return BugRun(name, prompt, as_text(ref.new_tokens[0]), as_text(out.new_tokens[0]), diff.tolist())


def lab_line(run: BugRun) -> str:
    """One line per cache for a printed overview: where its tokens and its logits first part from the reference."""
    label = BUG_CARDS[run.cache].label if run.cache in BUG_CARDS else run.cache
    if run.first_token_step is None and run.first_logit_step is None:
        return f"{label}：{len(run.output)} 步全部与参考相同（logits 的差异都在浮点误差以内）"
    tokens = ("token 全部相同" if run.first_token_step is None
              else f"token 从第 {run.first_token_step} 步起不同")
    return f"{label}：{tokens}，logits 从第 {run.first_logit_step} 步起偏离"


MAX_LAB_PROMPT, MAX_LAB_TOKENS = 64, 48


def lab_prompt(tokenizer, prompt) -> str:
    """The prompt box's text, checked against the demo model's vocabulary."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise inputs.InputError(PROMPT_LABEL, "是空的：请输入几个汉字，例如「人工」")
    prompt = prompt.strip()
    if len(prompt) > MAX_LAB_PROMPT:
        raise inputs.InputError(PROMPT_LABEL, f"最多 {MAX_LAB_PROMPT} 个字，收到了 {len(prompt)} 个")
    try:
        tokenizer.encode(prompt)
    except UnknownCharactersError as exc:
        shown = "、".join(f"「{c}」" for c in exc.characters[:10])
        raise inputs.InputError(PROMPT_LABEL, f"里的 {shown} 不在演示模型的词表里（它只认识训练语料中的字）") from None
    return prompt


def render_lab(model: ToyTransformer, tokenizer, cache, prompt, new_tokens, reveal, run=run_lab_cache) -> View:
    """The lab panel: the reference and this cache's tokens with the first difference marked, the logit
    differences per step, and (when ``reveal``) what the bug is."""
    cache = inputs.choice(CACHE_LABEL, cache, list(LAB_CACHES))
    prompt = lab_prompt(tokenizer, prompt)
    n = inputs.whole_number(NEW_TOKENS_LABEL, new_tokens, 1, MAX_LAB_TOKENS)
    result = run(model, tokenizer, cache, prompt, n)
    figure = plots.divergence_figure(result, BUG_CARDS[cache].label, LOGIT_TOLERANCE)
    return View([figure], lab_html(result, bool(reveal)), result)


def _shown(token: str) -> str:
    """A token as one visible cell: a newline as ↵, a space as ␣."""
    return html.escape(token.replace("\n", "↵").replace(" ", "␣"))


def tokens_table_html(run: BugRun, label: str) -> str:
    """The prompt and the new tokens, one column per step, the reference above this cache; the first step that
    differs in a strong colour, later differences (the two texts have parted by then) in a light one."""
    first = run.first_token_step
    cell = "padding:1px 3px;text-align:center;min-width:1.2em"

    def row(name: str, tokens: list[str], strong: str) -> str:
        tds = []
        for i, (tok, ref) in enumerate(zip(tokens, run.reference)):
            bg = strong if first == i + 1 else ("#fbe3d6" if first and i + 1 > first and tok != ref else "")
            style = f"{cell};background:{bg};color:white" if bg == strong else f"{cell};background:{bg}"
            tds.append(f'<td style="{style}">{_shown(tok)}</td>')
        return (f'<tr><td style="padding-right:8px;white-space:nowrap">{html.escape(name)}</td>'
                f'<td style="color:#888;padding-right:6px;white-space:nowrap">{html.escape(run.prompt)}</td>'
                + "".join(tds) + "</tr>")

    steps = "".join(f'<td style="{cell};color:#999;font-size:75%">{i}</td>' for i in range(1, len(run.output) + 1))
    return ('<table style="border-collapse:collapse;margin:4px 0">'
            f'<tr><td style="color:#999;font-size:75%">第几步</td><td style="color:#999;font-size:75%">提示词</td>'
            f"{steps}</tr>{row('无缓存（参考）', run.reference, '#0072B2')}{row(label, run.output, '#D55E00')}</table>")


def lab_html(run: BugRun, reveal: bool) -> str:
    card = BUG_CARDS[run.cache]
    step, logit_step = run.first_token_step, run.first_logit_step
    lines = [f"提示词「{html.escape(run.prompt)}」：先服务上一个请求「{PREVIOUS_PROMPT}」，reset() 后再服务它，"
             "与不用缓存的参考逐个 token 对比：", tokens_table_html(run, card.label)]
    if step is None:
        lines.append(f"<b>{html.escape(card.label)}：{len(run.output)} 步全部相同</b>；"
                     f"logits 最大差异 {max(run.logit_diff):.1e}")
        if run.cache != REFERENCE:
            lines.append("这个提示词恰好没有让 bug 暴露出来——bug 仍然在：换一个提示词，或者多生成几个 token 试试。")
    else:
        lines.append(f"<b>{html.escape(card.label)}：第 {step} 步开始不同</b>：参考「{_shown(run.reference[step - 1])}」，"
                     f"这个缓存「{_shown(run.output[step - 1])}」；logits 从第 {logit_step} 步起就超出了浮点误差")
    if reveal:
        lines.append(f"<b>解释：</b>{html.escape(card.explanation)}<br><b>修复：</b>{html.escape(card.fix)}")
    else:
        lines.append("<i>先自己猜一猜 bug 在哪里，再勾选「显示解释」。</i>")
    return "<br>".join(lines)


def lab_panel(model: ToyTransformer, tokenizer, cache: str = "rope_offset", prompt: str = LAB_PROMPT,
              new_tokens: int = LAB_NEW_TOKENS) -> Panel:
    """Cache menu, prompt box, length slider and a reveal box (cleared whenever another cache is chosen)."""
    menu = dropdown(CACHE_LABEL, [(BUG_CARDS[c].label, c) for c in LAB_CACHES], cache, width="280px")
    reveal = W.Checkbox(value=False, description=REVEAL_LABEL, indent=False, layout=W.Layout(width="120px"))
    menu.observe(lambda _change: setattr(reveal, "value", False), names="value")
    text = W.Text(value=prompt, description=PROMPT_LABEL, continuous_update=False,
                  style={"description_width": "initial"}, layout=W.Layout(width="260px"))
    run = lru_cache(maxsize=64)(run_lab_cache)  # the same settings twice (reveal toggled) run once
    controls = {"cache": menu, "prompt": text,
                "new_tokens": int_slider(NEW_TOKENS_LABEL, new_tokens, 1, MAX_LAB_TOKENS, width="340px"),
                "reveal": reveal}
    return Panel(controls, partial(render_lab, model, tokenizer, run=run), layout="horizontal",
                 css_class="kvlab-lab")


def run_all_lab_caches(model: ToyTransformer, tokenizer, prompt: str = LAB_PROMPT,
                       new_tokens: int = LAB_NEW_TOKENS) -> dict[str, BugRun]:
    return {c: run_lab_cache(model, tokenizer, c, prompt, new_tokens) for c in LAB_CACHES}


# == Review ===========================================================================================
def review_questions() -> list:
    """The chapter's self-check, 3.1 to 3.5; every numeric answer key computed by kvlab."""
    llama3, llama7, t4 = MODEL_PRESETS["Llama-3-8B"], MODEL_PRESETS["LLaMA-7B"], GPU_PRESETS[DEFAULT_GPU]
    mha70, gqa70 = MODEL_PRESETS["70B, 64 KV heads (chapter's hypothetical)"], MODEL_PRESETS["Llama-2-70B"]
    t4_plan = plan_reservation("LLaMA-7B", DEFAULT_GPU, 2048, 1)
    C = Choice
    return [
        ChoiceQuestion("3.1", "用 KV Cache 生成时，解码阶段的第 t 步要为多少个 token 计算 K 和 V？", (
            C("t 个", False, "那是不用缓存时：每一步把全部上文重新投影一遍。"),
            C("1 个", True, "只有新 token 的 K、V 要算，之前的都从缓存读取（trace 里每个解码步 k_tokens = 1）。"),
            C("t − 1 个", False, "之前的 t − 1 个 token 的 K、V 正是缓存里存着、不用再算的部分。"),
            C("t² 个", False, "t × t 是不用缓存时每层每头的注意力分数个数，不是投影的 token 数。"))),
        ChoiceQuestion("3.1", "有缓存时，每一步每层每个头要算多少个注意力分数？", (
            C("t × t 个", False, "那是无缓存时重算的完整矩阵。"),
            C("1 × t 个", True, "新 token 的一个查询对 t 个键：单步从 O(t²) 降为 O(t)。"),
            C("1 个", False, "新 token 要和全部 t 个 token（包括自己）的 K 做点积。"))),
        NumberQuestion("3.2", f"Llama-3-8B（{llama3.n_layer} 层，{llama3.n_kv_head} 个 KV 头，头维度 {llama3.head_dim}）"
                              "在 FP16 下，1 条序列的 1 个 token 要占多少字节的 KV Cache（所有层，K 和 V）？",
                       llama3.kv_bytes_per_token("fp16"), "字节",
                       f"2（K 和 V）× {llama3.n_layer} 层 × {llama3.n_kv_head} 个 KV 头 × {llama3.head_dim} × 2 字节"
                       f" = {format_bytes(llama3.kv_bytes_per_token('fp16'))}。",
                       "公式是 2 × L × H × D × 每元素字节，其中 H 是 KV 头数，不是查询头数。"),
        ChoiceQuestion("3.2", "缓存张量的形状是（L, B, H, S, D）。解码时每生成一个 token，哪一维加 1？", (
            C("L", False, "层数由模型结构决定，不会变。"),
            C("B", False, "批次是同时处理的序列数，解码一步不会增加序列。"),
            C("S", True, "S 是已存的 token 数：每一步追加 1 个。"),
            C("D", False, "头维度由模型结构决定。"))),
        ChoiceQuestion("3.3", "预填充（prefill）阶段做的是什么？", (
            C("一次处理完整的提示词，算出所有提示词 token 的 K/V 存入缓存", True,
              "提示词的所有 token 可以在一次前向计算里并行处理；之后的解码每步只处理 1 个新 token。"),
            C("为每个提示词 token 各做一次前向计算", False, "提示词一开始就全部已知，不必逐个处理。"),
            C("把缓存清零、分配显存", False, "分配是准备工作；预填充是一次真正的前向计算。"))),
        NumberQuestion("3.4", f"LLaMA-7B（{llama7.n_layer} 层，{llama7.n_kv_head} 个 KV 头，D = {llama7.head_dim}），"
                              "序列长度 2048，批次 1，FP16：KV Cache 一共多少 GiB？",
                       llama7.kv_cache_bytes(2048, 1, "fp16") / 2**30, "GiB",
                       f"2 × {llama7.n_layer} × 1 × {llama7.n_kv_head} × 2048 × {llama7.head_dim} × 2 B = "
                       f"{format_bytes(llama7.kv_cache_bytes(2048))}。原文注释里的 0.50 GB 少了一半。",
                       "把 2（K 和 V）、L、B、H、S、D 和每元素 2 字节全部乘起来，再除以 1024³。", rel_tol=0.005),
        NumberQuestion("3.4", f"原文假设的 70B 模型有 {mha70.n_kv_head} 个 KV 头；真实的 Llama-2-70B 用 GQA，只有 "
                              f"{gqa70.n_kv_head} 个。同样的序列长度下，前者的 KV Cache 是后者的几倍？",
                       mha70.kv_bytes_per_token() / gqa70.kv_bytes_per_token(), "倍",
                       f"层数、头维度都相同，缓存与 KV 头数成正比：{mha70.n_kv_head} / {gqa70.n_kv_head} = "
                       f"{mha70.n_kv_head // gqa70.n_kv_head} 倍。",
                       "只有 KV 头数不同，比一比两者的 KV 头数。"),
        ChoiceQuestion("3.5", "用同一个模型生成了几段不同长度、不同批次的文字之后，模型 state_dict 的校验和会怎样？", (
            C("不变", True, "推理不改权重：缓存是每次生成时另外分配的张量，不在 state_dict 里。"),
            C("随生成的 token 数变大", False, "变大的是 KV Cache（B × S × 每个 token 的字节数），不是参数。"),
            C("每次生成都不同", False, "只有缓存的内容随输入变；参数一个字节都没变。"))),
        ChoiceQuestion("3.5", "为什么只缓存 K、不缓存 V 几乎不省时间？", (
            C("因为 V 比 K 大", False, "K 和 V 的形状完全相同。"),
            C("因为旧 token 在第 l 层的 V 取决于它在第 l 层的隐藏状态，而那要把前面所有层在整个前缀上重算一遍",
              True, "要重算 V 就得重跑几乎整个模型：只缓存 K 省下的只是旧 token 的 K 投影那一小部分。"),
            C("因为注意力用不到 V", False, "注意力的输出就是对 V 的加权平均，离不开 V。"))),
        NumberQuestion("3.5", f"T4（{t4.memory_mib:,} MiB）上放了 FP16 的 LLaMA-7B 权重，剩下的显存给 KV Cache。"
                              "每条序列预留 2048 个 token，最多能同时服务几条序列？", t4_plan.capacity, "条",
                       f"权重 {format_bytes(t4_plan.weight_bytes)}，剩 {format_bytes(t4_plan.room_bytes)}；每条序列预留 "
                       f"{format_bytes(t4_plan.slot_bytes)}，只放得下 {t4_plan.capacity} 条。",
                       f"先算剩下多少显存，再算 2048 个 token 的缓存有多大（每个 token "
                       f"{format_bytes(t4_plan.per_token_bytes)}）。"),
        ChoiceQuestion("3.5", "一个缓存的第 1 步（预填充）完全正确，从第 2 步起 logits 才开始偏离。"
                              "下面哪个 bug 最不可能？", (
            C("K 写进了 V 的位置", True, "这个 bug 在预填充时就生效：第 1 步就错了。"),
            C("所有层都读写第 0 层的那一格", False, "预填充时每层先写后读，恰好正确，解码时才出错。"),
            C("新 token 写在 length − 1", False, "预填充从 0 开始写，恰好正确，解码时才出错。"))),
    ]


# == The chapter's numbers, on this machine =======================================================
@dataclass(frozen=True)
class SummaryRow:
    topic: str
    measured: str  # what this notebook measured here (HTML-safe text)
    conclusion: str


def summary_rows(runs: list[CacheRun], timings: dict[str, DecodeTiming], budget_plans: list[ReservationPlan],
                 lab: dict[str, BugRun]) -> list[SummaryRow]:
    """The chapter's claims next to what this notebook measured for them, from the results it already has."""
    checks = "、".join(f"{r.batch_size} × {r.stored_tokens}" for r in runs)
    same = all(r.weights_unchanged for r in runs)
    exact = all(r.final_bytes == r.batch_size * r.stored_tokens * r.per_token_bytes for r in runs)
    v_last = {m: t.v_tokens[-1] for m, t in timings.items()}
    plans = "；".join(f"预留 {p.reserved_tokens:,} → {p.capacity} 条，闲置 {1 - p.used_share:.0%}，"
                     f"{p.too_long_share:.1%} 的请求放不下" for p in budget_plans)
    broken = {c: r for c, r in lab.items() if c != REFERENCE}
    steps = "，".join(f"{BUG_CARDS[c].label} 第 {r.first_token_step} 步" for c, r in broken.items())
    return [
        SummaryRow("误区 1：缓存是参数", f"{len(runs)} 次生成（B × S = {checks}）：参数校验和{'全部不变' if same else '变了'}；"
                   f"缓存字节数{'全部等于' if exact else '不等于'} B × S × {format_bytes(runs[0].per_token_bytes)}；"
                   f"reset() 后 {runs[-1].length_after_reset} 个 token",
                   "缓存是推理时另外分配的临时张量，随输入增长；权重一个字节都不变"),
        SummaryRow("误区 2：只缓存 K", f"最后 1/4 解码步的单步耗时：{tail_times_text(timings)}；最后一步投影 V 的 token 数 "
                   f"{v_last['none']} / {v_last['k_only']} / {v_last['kv']}",
                   "V 必须和 K 一起缓存，否则每步仍要把整个前缀重算一遍"),
        SummaryRow("误区 3：缓存越大越好", f"{budget_plans[0].gpu} + {budget_plans[0].model.name}（FP16）：{plans}",
                   "预留多少要看显存预算和请求长度的分布；按需分页（PagedAttention）避免闲置"),
        SummaryRow("找 bug", f"{len(broken)} 个坏缓存在「{lab[REFERENCE].prompt}」上第一次生成不同的 token：{steps}；正确的缓存："
                   f"{'全部相同' if lab[REFERENCE].first_token_step is None else '不同！'}",
                   "缓存的 bug 不会报错，只会悄悄改变输出：与无缓存的参考逐步对比才能发现"),
    ]


def summary_html(rows: list[SummaryRow]) -> str:
    body = "".join(f"<tr><td>{html.escape(r.topic)}</td><td>{html.escape(r.measured)}</td>"
                   f"<td>{html.escape(r.conclusion)}</td></tr>" for r in rows)
    return ("<table><thead><tr><th>本章</th><th>本机实测（本笔记本刚刚算出）</th><th>结论</th></tr></thead>"
            f"<tbody>{body}</tbody></table>")
