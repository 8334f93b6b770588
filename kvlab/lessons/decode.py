"""Chapter 3.1 从自回归解码说起: what each decoding step computes with and without a cache, the
chapter's two formulas checked on real Q/K/V, projections counted from the trace, and timings."""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from functools import partial

import torch

from .._validate import non_negative_int, positive_int
from ..cache import KVCache
from ..claims import DIFFERENCE, Catalog, Chooser, Claim, Number, Rule, number, ratio, series, show
from ..config import ModelConfig
from ..costs import attention_crossover, attention_flops, linear_flops_per_token
from ..generation import generate
from ..measure import DecodeTiming, device_label, time_generate
from ..stats import median
from ..memory import format_bytes, kv_bytes_per_token
from ..model import ToyTransformer, apply_rope
from ..inputs import InputError, whole_number
from ..viz import decode_plots as plots
from ..viz.widgets import Panel, View, dropdown, int_slider, play_slider, run_button

DEFAULT_PROMPT = "人工"


# -- one decoding step, both ways ------------------------------------------------------------------
@dataclass
class DecodeStep:
    """What one step of generation computes, both ways."""

    step: int  # 1-based
    tokens: list[str]  # the input this step sees (t tokens)
    next_token: str  # the greedy choice
    topk: list[tuple[str, float]]  # the k most likely next tokens and their probabilities
    full_weights: torch.Tensor  # [L, H, t, t]: attention weights when everything is recomputed
    cached_weights: torch.Tensor  # [L, H, n, t]: what the cached pass computes (n new tokens: t at prefill, then 1)
    kv_without_cache: int  # tokens whose K/V are projected without a cache (= t)
    kv_with_cache: int  # ... and with one (the prompt at the first step, then 1)
    row_max_abs_diff: float  # |cached row - last row of full attention|, max over layers and heads
    k_cache: torch.Tensor  # [L, H_kv, t, D]: what the cache holds after this step
    v_cache: torch.Tensor

    @property
    def t(self) -> int:
        return len(self.tokens)


@torch.no_grad()
def decode_walkthrough(model: ToyTransformer, tokenizer, prompt: str, steps: int, k: int = 5) -> list[DecodeStep]:
    """Greedy-generate ``steps`` tokens after ``prompt``, recording both ways of computing each step."""
    steps = positive_int("steps", steps)
    k = positive_int("k", k)
    ids = tokenizer.encode(prompt)
    limit = model.config.max_seq_len
    if len(ids) + steps > limit:
        raise ValueError(f"steps: prompt ({len(ids)}) + steps ({steps}) passes max_seq_len ({limit})")
    cache = KVCache(model.config, 1, len(ids) + steps, dtype=model.dtype, device=model.device)
    feed = torch.tensor([ids], device=model.device)
    out = []
    for step in range(1, steps + 1):
        _, full = model(torch.tensor([ids], device=model.device), return_attention=True)
        n_new = feed.shape[1]
        cached_logits, rows = model(feed, cache, return_attention=True)
        full_w = torch.stack([w[0] for w in full]).float().cpu()  # [L, H, t, t]
        rows_w = torch.stack([w[0] for w in rows]).float().cpu()  # [L, H, n_new, t]
        probs = torch.softmax(cached_logits[0, -1].float(), dim=-1)
        top = torch.topk(probs, min(k, probs.numel()))
        nxt = int(top.indices[0])
        views = [cache.layer_view(layer) for layer in range(model.config.n_layer)]  # each ([1, H_kv, t, D],) * 2
        out.append(DecodeStep(
            step=step, tokens=[tokenizer.decode([i]) for i in ids], next_token=tokenizer.decode([nxt]),
            topk=[(tokenizer.decode([int(i)]), float(p)) for p, i in zip(top.values, top.indices)],
            full_weights=full_w, cached_weights=rows_w, kv_without_cache=len(ids), kv_with_cache=n_new,
            row_max_abs_diff=(rows_w[:, :, -1] - full_w[:, :, -1]).abs().max().item(),
            k_cache=torch.stack([kk[0] for kk, _ in views]).float().cpu(),  # [L, H_kv, t, D]
            v_cache=torch.stack([vv[0] for _, vv in views]).float().cpu(),
        ))
        ids = ids + [nxt]
        feed = torch.tensor([[nxt]], device=model.device)
    return out


def most_attended(s: DecodeStep, layer: int, head: int) -> tuple[int, str, float]:
    """The position (0-based) and token the newest query of ``head`` looks at most in this step, and its weight."""
    row = s.cached_weights[layer, head, -1]  # [t]
    i = int(row.argmax())
    return i, s.tokens[i], float(row[i])


STEP_LABEL, LAYER_LABEL, HEAD_LABEL = "解码步", "层", "注意力头"  # the walkthrough's controls, as shown


def render_step(steps: list[DecodeStep], step, layer, head) -> View:
    """The walkthrough panel: top-k bars, the two attention pictures, and the cache's K/V rows of one step."""
    s = steps[whole_number(STEP_LABEL, step, 1, len(steps)) - 1]
    layer = whole_number(LAYER_LABEL, layer, 0, s.full_weights.shape[0] - 1)
    head = whole_number(HEAD_LABEL, head, 0, s.full_weights.shape[1] - 1)
    n_rep = s.full_weights.shape[1] // s.k_cache.shape[1]  # query heads per KV head
    group = head // n_rep
    figures = [
        plots.topk_figure(s.topk, "".join(s.tokens)),
        plots.attention_compare_figure(s.full_weights[layer, head].numpy(), s.cached_weights[layer, head].numpy(),
                                       s.tokens, layer, head, s.kv_without_cache, s.kv_with_cache),
        plots.cache_rows_figure(s.k_cache[layer, group].numpy(), s.v_cache[layer, group].numpy(), s.tokens, layer,
                                group, s.kv_with_cache),
    ]
    n = s.kv_with_cache
    diff = (s.cached_weights[layer, head, -1] - s.full_weights[layer, head, -1]).abs().max().item()
    mates = [h for h in range(group * n_rep, (group + 1) * n_rep) if h != head]
    looks = "；".join(f"第 {h} 头最关注第 {i + 1} 个 token「{html.escape(tok)}」（权重 {w:.2f}）"
                     for h in [head, *mates] for i, tok, w in [most_attended(s, layer, h)])
    if n == s.t:
        work = (f"预填充：缓存还是空的，两边都为全部 <b>{n}</b> 个 token 计算 K/V、算 {n}×{n} 的分数；"
                f"有缓存时这 {n} 行 K/V 同时写入缓存")
    else:
        work = (f"无缓存：为 <b>{s.kv_without_cache}</b> 个 token 计算 K/V，每层每头 {s.t}×{s.t} = "
                f"<b>{s.t * s.t}</b> 个分数<br>有缓存：只为 <b>{n}</b> 个 token 计算 K/V，每层每头 {n}×{s.t} = "
                f"<b>{n * s.t}</b> 个分数；其余 {s.t - n} 个 token 的 K/V 从缓存读取")
    readout = (
        f"<b>第 {s.step} 步</b>　输入 t = {s.t} 个 token：{html.escape(' '.join(s.tokens))}　→　"
        f"预测「{html.escape(s.next_token)}」（概率 {s.topk[0][1]:.1%}）<br>{work}<br>"
        f"第 {layer} 层第 {head} 头：有缓存算出的这一行与完整矩阵最后一行的最大差异 <b>{diff:.1e}</b><br>"
        f"KV 组 {group}（第 {group * n_rep}–{(group + 1) * n_rep - 1} 头共用同一份 K/V）：{looks}"
    )
    return View(figures, readout, s)


def steps_where_heads_agree(steps: list[DecodeStep], layer: int, head_a: int, head_b: int) -> list[int]:
    """Steps at which two heads' newest queries look most at the same position (the walkthrough's task)."""
    return [s.step for s in steps if most_attended(s, layer, head_a)[0] == most_attended(s, layer, head_b)[0]]


def walkthrough_panel(model: ToyTransformer, steps: list[DecodeStep]) -> Panel:
    """Play / step slider, layer and head menus wired to :func:`render_step`."""
    cfg = model.config
    play, step_slider = play_slider(STEP_LABEL, 1, 1, len(steps))
    heads = [(f"{h}（KV 组 {h // cfg.n_rep}）", h) for h in range(cfg.n_head)]
    return Panel({"step": step_slider, "layer": dropdown(LAYER_LABEL, list(range(cfg.n_layer)), 0, width="120px"),
                  "head": dropdown(HEAD_LABEL, heads, 0, width="200px")},
                 partial(render_step, steps), extra=[play], layout="horizontal", css_class="kvlab-walkthrough",
                 static=("step",), in_browser="step")


# -- the chapter's two formulas ------------------------------------------------------------------------
@torch.no_grad()
def layer_qkv(model: ToyTransformer, ids, layer: int = 0):
    """Q [H, t, D] and K, V [H_kv, t, D] (RoPE applied) that ``layer`` computes for one sequence of ``ids``."""
    if not isinstance(model, ToyTransformer):
        raise ValueError(f"model must be a kvlab ToyTransformer, got {type(model).__name__}")
    layer = non_negative_int("layer", layer)
    if layer >= model.config.n_layer:
        raise ValueError(f"layer must be in [0, {model.config.n_layer}), got {layer}")
    ids = torch.as_tensor(ids) if not isinstance(ids, torch.Tensor) else ids
    if ids.dim() == 2 and ids.shape[0] == 1:
        ids = ids[0]
    if ids.dim() != 1:
        raise ValueError(f"ids must be one sequence of token ids (a list, or shape [t] or [1, t]), "
                         f"got shape {list(ids.shape)}")
    ids = model.check_ids(ids[None], "ids")  # [1, t]
    t = ids.shape[1]
    if t > model.config.max_seq_len:
        raise ValueError(f"ids: {t} tokens pass max_seq_len ({model.config.max_seq_len})")
    cos, sin, mask = model.rope_and_mask(0, t, None)
    x = model.embed(ids)  # [1, t, d_model]
    for block in model.layers[:layer]:
        x = block(x, cos, sin, mask, None, model.attention_impl, None)
    attn = model.layers[layer].attn
    q, k, v = attn.wqkv(model.layers[layer].attn_norm(x)).split([attn.q_dim, attn.kv_dim, attn.kv_dim], dim=-1)
    q = apply_rope(attn.heads(q, attn.n_head), cos, sin)[0]  # [1, t, H*D] -> [H, t, D]
    k = apply_rope(attn.heads(k, attn.n_kv_head), cos, sin)[0]  # [H_kv, t, D]
    v = attn.heads(v, attn.n_kv_head)[0]  # [H_kv, t, D]
    return q, k, v


@dataclass
class FormulaCheck:
    """Formula 1 (no cache: full attention, last row) against formula 2 (the new query over K/V read from a
    real cache), at one layer, for all heads."""

    text: str
    layer: int
    t: int
    out_all_last: torch.Tensor  # [H, D]: formula 1's last row
    out_new: torch.Tensor  # [H, D]: formula 2
    k_cache_max_diff: float  # |K in the cache - K recomputed|
    v_cache_max_diff: float

    @property
    def max_abs_diff(self) -> float:
        return (self.out_new - self.out_all_last).abs().max().item()


@torch.no_grad()
def check_two_formulas(model: ToyTransformer, tokenizer, text: str = "人工智能", layer: int = 0) -> FormulaCheck:
    """Run both of the chapter's formulas on the real Q, K, V of ``text`` at ``layer``."""
    ids = tokenizer.encode(text)
    if len(ids) < 2:
        raise ValueError("text: needs at least 2 tokens (a prompt and a new token)")
    q, k, v = layer_qkv(model, ids, layer)  # Q: [H, t, D]; K, V: [H_kv, t, D]
    t, d, group = len(ids), q.shape[-1], model.config.n_rep
    # Formula 1, no cache: every position at once, then the last row
    k_all, v_all = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)  # [H, t, D]
    causal = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    scores = (q @ k_all.transpose(-1, -2) / d**0.5).masked_fill(~causal, float("-inf"))  # [H, t, t]
    out_all = torch.softmax(scores, dim=-1) @ v_all  # [H, t, D]
    # Formula 2, with a cache: prefill t-1 tokens, decode the t-th, read K/V back from the cache
    cache = KVCache(model.config, 1, t, dtype=model.dtype, device=model.device)
    model(torch.tensor([ids[:-1]], device=model.device), cache)
    model(torch.tensor([ids[-1:]], device=model.device), cache)
    k_cache, v_cache = (x[0] for x in cache.layer_view(layer))  # [H_kv, t, D]
    k_c, v_c = k_cache.repeat_interleave(group, dim=0), v_cache.repeat_interleave(group, dim=0)  # [H, t, D]
    out_new = torch.softmax(q[:, -1:] @ k_c.transpose(-1, -2) / d**0.5, dim=-1) @ v_c  # [H, 1, D]
    return FormulaCheck(text, layer, t, out_all[:, -1].cpu(), out_new[:, 0].cpu(),
                        (k_cache - k).abs().max().item(), (v_cache - v).abs().max().item())


# -- counted work --------------------------------------------------------------------------------------
@dataclass
class ProjectionCount:
    """K/V projections and attention scores per pass, read from the traces of a run with and without a cache."""

    new_tokens: int
    seq_len: list[int]  # per pass
    none_per_pass: list[int]  # tokens whose K/V the pass projected
    kv_per_pass: list[int]

    @property
    def none_total(self) -> int:
        return sum(self.none_per_pass)

    @property
    def kv_total(self) -> int:
        return sum(self.kv_per_pass)

    @property
    def none_scores(self) -> int:
        """Attention scores per layer and head over the run: each pass's new queries times its keys."""
        return sum(q * t for q, t in zip(self.none_per_pass, self.seq_len))

    @property
    def kv_scores(self) -> int:
        return sum(q * t for q, t in zip(self.kv_per_pass, self.seq_len))


def count_projections(model: ToyTransformer, prompt_ids, new_tokens: int) -> ProjectionCount:
    """Generate ``new_tokens`` both ways and count, from the trace, the tokens whose K/V each pass projects."""
    new_tokens = positive_int("new_tokens", new_tokens)
    none = generate(model, prompt_ids, new_tokens, cache="none").trace
    kv = generate(model, prompt_ids, new_tokens, cache="kv").trace
    return ProjectionCount(new_tokens, [r.seq_len for r in none], [r.k_tokens for r in none],
                           [r.k_tokens for r in kv])


# -- timings ------------------------------------------------------------------------------------------
def timing_model(device=None, seed: int = 0) -> ToyTransformer:
    """A random-weight model big enough that decode cost visibly grows with t on a CPU."""
    config = ModelConfig(vocab_size=4096, d_model=256, n_layer=4, n_head=4, max_seq_len=2048)
    model = ToyTransformer(config, seed=seed).eval()
    return model.to(device) if device is not None else model


def measure_decode_latency(model: ToyTransformer, new_tokens: int, repeats: int = 1, prompt_len: int = 4,
                           seed: int = 0, progress: bool = True) -> dict[str, DecodeTiming]:
    """Time ``new_tokens`` tokens without ("none") and with ("kv") a cache, alternating, after a warm-up."""
    new_tokens = positive_int("new_tokens", new_tokens)
    prompt_len = positive_int("prompt_len", prompt_len)
    if prompt_len + new_tokens > model.config.max_seq_len:
        raise ValueError(f"new_tokens: prompt_len ({prompt_len}) + new_tokens ({new_tokens}) passes the model's "
                         f"max_seq_len ({model.config.max_seq_len})")
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, model.config.vocab_size, (1, prompt_len), generator=gen)
    return time_generate(model, prompt, new_tokens, ("none", "kv"), repeats=repeats, progress=progress)


NEW_TOKENS_LABEL, REPEATS_LABEL = "生成 token 数", "重复次数（取中位数）"  # the latency panel's controls, as shown


LATENCY_MAX_WORK = 300_000  # token positions one click may feed the model without a cache (about 50 s on 2 cores)


def latency_work(new_tokens: int, repeats: int, prompt_len: int = 4) -> int:
    """Token positions the uncached runs of one click feed the model (a warm-up and ``repeats`` runs): without a
    cache, the pass that makes token t re-reads all t tokens, so one run costs the sum of t over its passes. The
    cached runs feed one token a pass and are left out (at most a few per cent as much)."""
    per_run = sum(range(prompt_len, prompt_len + positive_int("new_tokens", new_tokens)))
    return (positive_int("repeats", repeats) + 1) * per_run


def render_latency(model: ToyTransformer, new_tokens, repeats) -> View:
    """The latency panel: measure both ways, plot per-step and cumulative time with fitted exponents. The work is
    counted first: a setting past LATENCY_MAX_WORK is refused with the count (in Chinese) before anything runs,
    instead of blocking the kernel for minutes; the measurement itself stays interruptible (the stop button)."""
    new_tokens = whole_number(NEW_TOKENS_LABEL, new_tokens, 1, model.config.max_seq_len - 8)
    repeats = whole_number(REPEATS_LABEL, repeats, 1, 9)
    work = latency_work(new_tokens, repeats)
    if work > LATENCY_MAX_WORK:
        raise InputError(NEW_TOKENS_LABEL, f"与「{REPEATS_LABEL}」合起来，无缓存时要重算约 {work:,} 个 token 位置（每一步都重算"
                         f"前面的全部 token，热身 1 次加重复 {repeats} 次），是一次点击上限 {LATENCY_MAX_WORK:,} 的 "
                         f"{work / LATENCY_MAX_WORK:.1f} 倍（在 2 核 CPU 上要好几分钟）：请减少生成 token 数或重复次数")
    results = measure_decode_latency(model, new_tokens, repeats)
    none, kv = results["none"], results["kv"]
    total_none, total_kv = none.cumulative_seconds[-1], kv.cumulative_seconds[-1]
    readout = (
        f"生成 {new_tokens} 个 token：无缓存累计 <b>{total_none:.2f} s</b>，有缓存累计 <b>{total_kv:.2f} s</b>，"
        f"有缓存快 <b>{total_none / total_kv:.1f}×</b><br>"
        f"单步耗时增长指数（后半段拟合）：无缓存 {none.step_exponent:.2f}，有缓存 {kv.step_exponent:.2f}；"
        f"累计耗时增长指数：无缓存 {none.cumulative_exponent:.2f}，有缓存 {kv.cumulative_exponent:.2f}"
        f"（{device_label(model.device)}）"
    )
    return View([plots.latency_figure(results)], readout, results)


def latency_panel(model: ToyTransformer, new_tokens: int = 192) -> Panel:
    """Length and repeat sliders; measurements run when the button is clicked."""
    return Panel({"new_tokens": int_slider(NEW_TOKENS_LABEL, new_tokens, 32, model.config.max_seq_len - 8, step=32),
                  "repeats": int_slider(REPEATS_LABEL, 1, 1, 5, width="300px")},
                 partial(render_latency, model), layout="horizontal", css_class="kvlab-latency", button=run_button())


def _binned_medians(xs, ys, bins: int = 32) -> tuple[list[float], list[float]]:
    """Median x and median y of consecutive chunks: one timer spike cannot pull a fit through it."""
    size = max(1, len(xs) // bins)
    chunks = [(xs[i:i + size], ys[i:i + size]) for i in range(0, len(xs), size)]
    return [median(x) for x, _ in chunks], [median(y) for _, y in chunks]


def theil_sen(xs, ys) -> tuple[float, float]:
    """Robust straight line y = a + b x: b the median of pairwise slopes, a the median of y - b x."""
    slopes = [(ys[j] - ys[i]) / (xs[j] - xs[i]) for i in range(len(xs)) for j in range(i + 1, len(xs))
              if xs[j] != xs[i]]
    if not slopes:
        raise ValueError("xs: needs at least two different values to fit a line")
    b = median(slopes)
    return median(y - b * x for x, y in zip(xs, ys)), b


@dataclass
class StepFit:
    """Decode step time as a fixed cost plus a part proportional to ``work(t)`` (robust fit over binned medians).

    For a cached step ``work(t) = t`` (the K/V it reads); for an uncached one, the pass's FLOPs.
    """

    t: list[int]
    step_ms: list[float]
    fixed_ms: float  # the line's intercept: drawn, never printed as a step time (explain_* quote measured medians)
    slope_ms: float  # ms per unit of work
    work: list[float]  # work(t) at each measured t

    @property
    def fit_ms(self) -> list[float]:
        """The fitted line at each measured t (drawn over the points; never quoted as a time)."""
        return [self.fixed_ms + self.slope_ms * w for w in self.work]


def fit_step_time(timing: DecodeTiming, work=None) -> StepFit:
    """Fit ``fixed + slope * work(t)`` to the decode passes of a timed generation (``work`` default: t)."""
    t, ms = timing.seq_len[1:], [s * 1e3 for s in timing.step_seconds[1:]]
    if len(t) < 2:
        raise ValueError("timing: needs at least 2 decode passes to fit a line")
    w = [float(x) if work is None else float(work(x)) for x in t]
    a, b = theil_sen(*_binned_medians(w, ms))
    return StepFit(list(t), ms, a, b, w)


def uncached_flops(config: ModelConfig):
    """FLOPs of one uncached pass over t tokens: linear terms plus attention's t² (``kvlab.costs``)."""
    return lambda t: t * linear_flops_per_token(config) + attention_flops(config, t)


# -- what a timed run says, as claims (kvlab.claims) ----------------------------------------------------------
# Each sentence below is chosen by a predicate over the very numbers it prints: measured medians (never a fit's
# intercept as a time), shares and ratios of them, and extrapolations only from a growth this run measured.
@dataclass(frozen=True)
class StepEnds:
    """Measured medians of a run's decode steps: of each eighth of them in order of t, and of all of them; t0 and
    t1 are the median t of the first and the last eighth."""

    t0: int
    t1: int
    eighths_ms: tuple[float, ...]
    median_ms: float

    @property
    def first_ms(self) -> float:
        return self.eighths_ms[0]

    @property
    def last_ms(self) -> float:
        return self.eighths_ms[-1]

    @property
    def share(self) -> float:
        """Share of the last steps' time that the first steps did not need (what grew with t)."""
        return ratio(self.last_ms - self.first_ms, self.last_ms)

    @property
    def slope_ms(self) -> float:
        """ms per token between the first and the last eighth."""
        return ratio(self.last_ms - self.first_ms, self.t1 - self.t0)


def step_ends(t, ms) -> StepEnds:
    """:class:`StepEnds` of decode steps at lengths ``t`` taking ``ms`` milliseconds each."""
    if not t or len(t) != len(ms):
        raise ValueError(f"t, ms: need as many (at least one) step times as lengths, got {len(t)} and {len(ms)}")
    cuts = [round(i * len(t) / 8) for i in range(9)]
    parts = [(t[a:b], ms[a:b]) for a, b in zip(cuts, cuts[1:]) if b > a]
    eighths = tuple(median(m) for _, m in parts)
    return StepEnds(round(median(parts[0][0])), round(median(parts[-1][0])),
                    eighths if len(eighths) > 1 else eighths * 2, median(ms))


def timing_ends(timing: DecodeTiming) -> StepEnds:
    """:func:`step_ends` of a timed generation's decode passes (the prefill left out)."""
    return step_ends(timing.seq_len[1:], [s * 1e3 for s in timing.step_seconds[1:]])


def _ms(x: float) -> Number:
    return number(x, 2, "ms")


def _count(x: float) -> Number:
    return number(x, 0)


def _pct(share: float) -> Number:
    return number(100 * share, 0, "%")


RISING_DIP, RISING_JUMP = 0.1, 0.5  # of the whole rise: the most one eighth may fall, and rise, from the one before


def _rising(v) -> bool:
    """The eighths' medians rise from first to last at every point (what 「基本上一段比一段长」 allows): none falls
    below the one before by more than RISING_DIP of the whole rise, none jumps by more than RISING_JUMP of it (load
    that slowed one stretch is not a growth with t)."""
    e = v["eighths"]
    rise = e[-1] - e[0]
    steps = [later - earlier for earlier, later in zip(e, e[1:])]
    return rise > 0 and all(-RISING_DIP * rise <= step <= RISING_JUMP * rise for step in steps)


def _share_agrees(v) -> bool:
    """The printed share is (last - first) / last of the printed first and last medians, within their rounding."""
    first, last = (v["eighths"][0], v["eighths"][-1]) if "eighths" in v else (v["first"], v["last"])
    return abs(v["share"] - 100 * (last - first) / last) <= 1 + 2 / last


def _ends_numbers(ends: StepEnds) -> dict[str, Number]:
    return {"t0": _count(ends.t0), "first": _ms(ends.first_ms), "t1": _count(ends.t1), "last": _ms(ends.last_ms),
            "median": _ms(ends.median_ms), "eighths": series(ends.eighths_ms, 2, "ms"), "share": _pct(ends.share)}


TOTALS = Chooser("decode.totals", (
    Rule("decode.totals.faster", ("n", "none_s", "kv_s", "speedup"),
         lambda v: v["kv_s"] < v["none_s"] and v["speedup"] > 1),
    Rule("decode.totals.unclear", ("n", "none_s", "kv_s"), substantive=False),
))

UNCACHED = Chooser("decode.uncached", (
    Rule("decode.uncached.growth_dominates", ("eighths", "t0", "t1", "rate", "share"),
         lambda v: _rising(v) and v["share"] >= 50 and v["rate"] > 0 and _share_agrees(v)),
    Rule("decode.uncached.fixed_dominates", ("eighths", "t0", "t1", "rate", "share"),
         lambda v: _rising(v) and v["share"] < 50 and v["rate"] > 0 and _share_agrees(v)),
    Rule("decode.uncached.flat", ("median", "t0", "first", "t1", "last"),
         lambda v: abs(v["last"] - v["first"]) <= 0.1 * v["median"]),
    Rule("decode.uncached.noisy", ("t0", "first", "t1", "last", "median"), substantive=False),
))

CROSSOVER = Chooser("decode.crossover", (
    Rule("decode.crossover.far", ("cross", "n"), lambda v: v["cross"] > 2 * v["n"]),
    Rule("decode.crossover.near", ("cross", "n"), lambda v: v["n"] < v["cross"] <= 2 * v["n"]),
    Rule("decode.crossover.passed", ("cross", "n"), lambda v: v["cross"] <= v["n"]),
))

def _exponent_holds(low: float, high: float):
    """The fitted exponent within [low, high), and the second half's measured medians agreeing: about level for an
    exponent near 0 (within the rise t^0.3 allows over a doubling of t), rising for a larger one."""
    def holds(v) -> bool:
        level = 0.8 * v["from"] <= v["to"] <= 1.25 * v["from"]
        return low <= v["k"] < high and (level if high <= 0.3 else v["to"] > v["from"])
    return holds


# Said instead of the exponent's reading when the mode's growth sentence above says otherwise: no exponent reading
# beside a "can't tell", only "level" beside "level"; and "t² shows" only where the counted crossover is near.
STEP_UNREAD = Chooser("decode.exponent_unread", (Rule("decode.exponent_unread.noisy", ("k",), substantive=False),))
STEP_STEEP = Chooser("decode.exponent_steep", (
    Rule("decode.exponent_steep.not_t2", ("k", "from", "to"), lambda v: v["k"] >= 1.15 and v["to"] > v["from"]),
))

STEP_EXPONENT = Chooser("decode.step_exponent", (
    Rule("decode.step_exponent.flat", ("k", "from", "to"), _exponent_holds(-0.3, 0.3)),
    Rule("decode.step_exponent.mixed", ("k", "from", "to"), _exponent_holds(0.3, 0.85)),
    Rule("decode.step_exponent.linear", ("k", "from", "to"), _exponent_holds(0.85, 1.15)),
    Rule("decode.step_exponent.between", ("k", "from", "to"), _exponent_holds(1.15, 1.85)),
    Rule("decode.step_exponent.quadratic", ("k", "from", "to"), _exponent_holds(1.85, 2.3)),
    Rule("decode.step_exponent.noisy", ("k",), substantive=False),
    Rule("decode.step_exponent.unfit", substantive=False),
))

CUMULATIVE = Chooser("decode.cumulative", (
    Rule("decode.cumulative.early_slow", ("k", "early", "late"),
         lambda v: v["k"] < 0.85 and v["early"] >= 1.5 * v["late"]),
    Rule("decode.cumulative.linear", ("k",), lambda v: 0.85 <= v["k"] < 1.15),
    Rule("decode.cumulative.between", ("k", "late", "early"), lambda v: 1.15 <= v["k"] < 1.85 and v["late"] > v["early"]),
    Rule("decode.cumulative.quadratic", ("k", "late", "early"), lambda v: 1.85 <= v["k"] < 2.3 and v["late"] > v["early"]),
    Rule("decode.cumulative.noisy", ("k",), substantive=False),
    Rule("decode.cumulative.unfit", substantive=False),
))

CACHED = Chooser("decode.cached", (
    Rule("decode.cached.flat", ("median", "t0", "first", "t1", "last"),
         lambda v: abs(v["last"] - v["first"]) <= 0.1 * v["median"]),
    Rule("decode.cached.grows", ("eighths", "t0", "t1", "share"), lambda v: _rising(v) and _share_agrees(v)),
    Rule("decode.cached.noisy", ("median", "t0", "first", "t1", "last"), substantive=False),
))

EXTRAPOLATION = Chooser("decode.extrapolation", (
    Rule("decode.extrapolation.both", ("rate", "slope", "top", "none_min", "kv_s"),
         lambda v: v["rate"] > 0 and v["slope"] > 0 and v["kv_s"] > 0 and v["none_min"] * 60 > v["kv_s"]),
    Rule("decode.extrapolation.kv_flat", ("rate", "top", "none_min", "median", "kv_s"),
         lambda v: v["rate"] > 0 and v["kv_s"] > 0 and v["none_min"] * 60 > v["kv_s"]
         and 0.9 <= v["kv_s"] * 1e3 / (v["median"] * v["top"]) <= 1.1),
    Rule("decode.extrapolation.none", ("top",), substantive=False),
))

GROWTH_RULES = {"large": lambda s: s >= 55, "half": lambda s: 45 <= s < 55, "notable": lambda s: 20 <= s < 45,
                "small": lambda s: s < 20}


def _growth_holds(size: str):
    def holds(v) -> bool:
        measured = (v["last"] - v["first"]) / (v["t1"] - v["t0"]) * 1e3  # µs/token between the two ends
        return (v["slope"] > 0 and v["last"] > 1.05 * v["first"] and 0.5 <= v["slope"] / measured <= 2
                and _share_agrees(v) and GROWTH_RULES[size](v["share"]) and v["rate"] > 0)
    return holds


GROWTH = Chooser("decode.growth", (
    *(Rule(f"decode.growth.{size}", ("t0", "t1", "first", "last", "slope", "share", "per_token", "rate"),
           _growth_holds(size)) for size in GROWTH_RULES),
    Rule("decode.growth.flat", ("t0", "t1", "first", "last"), lambda v: abs(v["last"] - v["first"]) <= 0.05 * v["first"]),
    Rule("decode.growth.noisy", ("t0", "t1", "first", "last"), substantive=False),
))

GROWING = {"decode.uncached.growth_dominates", "decode.uncached.fixed_dominates", "decode.cached.grows"}
CHOOSERS = (TOTALS, UNCACHED, CROSSOVER, STEP_EXPONENT, STEP_UNREAD, STEP_STEEP, CUMULATIVE, CACHED, EXTRAPOLATION,
            GROWTH)

_GROWTH_ZH = ("有缓存，t 从 {t0} 附近到 {t1} 附近：单步耗时的中位数从 {first} 涨到 {last}，拟合斜率 {slope}：缓存里每多一个 "
              "token，每一步就多花这么多时间。在 t = {t1} 附近，这部分占单步的 {share}，{size}。每多一个 token 要多读 "
              "{per_token} 的 K/V；若把这部分时间全算作读缓存，等效读取速度约 {rate}，其中还包括和这些 K/V 做注意力的计算，"
              "所以真正的读取速度只会更快。")
_RERUN = "把上面面板里的「重复次数（取中位数）」调大，点「运行测量」，再运行这一格；机器忙时先关掉别的占 CPU 的程序。"
ZH = Catalog("zh", {
    "decode.totals.faster": "两种方式生成了同样的 {n} 个新 token：无缓存累计 {none_s}，有缓存 {kv_s}，有缓存快 {speedup}。",
    "decode.totals.unclear": "两种方式生成了同样的 {n} 个新 token：无缓存累计 {none_s}，有缓存 {kv_s}；这一次有缓存没有更快，"
                             "多半是计时被别的程序打断了，" + _RERUN,
    "decode.uncached.growth_dominates": "无缓存：把各步按 t 分成八段，每段单步耗时的中位数基本上一段比一段长：{eighths}（从 t = {t0} "
                                        "附近到 t = {t1} 附近）。多出的时间花在随 t 增长的投影、前馈网络和注意力上，按它们的 "
                                        "FLOP 数折算约 {rate}；在 t = {t1} 附近这部分占单步的 {share}，随 t 增长的部分占大头。",
    "decode.uncached.fixed_dominates": "无缓存：把各步按 t 分成八段，每段单步耗时的中位数基本上一段比一段长：{eighths}（从 t = {t0} "
                                       "附近到 t = {t1} 附近）。多出的时间按随 t 增长的 FLOP 数折算约 {rate}；在 t = {t1} "
                                       "附近这部分只占单步的 {share}，固定开销仍占大头。",
    "decode.uncached.flat": "无缓存：单步耗时的中位数 {median}，t = {t0} 附近 {first}，t = {t1} 附近 {last}，在这么短的长度内"
                            "看不出随 t 的增长：固定开销（例如在 GPU 上逐个启动核函数）盖过了随 t 增长的计算；把生成长度"
                            "调大，才看得出增长从哪里开始。",
    "decode.uncached.noisy": "无缓存：t = {t0} 附近单步耗时的中位数 {first}，t = {t1} 附近 {last}，全部步的中位数 {median}："
                             "这一次计时太乱（或长度太短），说不清随 t 增长了多少；把生成长度调大或" + _RERUN,
    "decode.crossover.far": "按 FLOP 数，t² 项要到 t ≈ {cross} 才追上线性项，远超这次测量的最大长度 t = {n}。",
    "decode.crossover.near": "按 FLOP 数，t² 项要到 t ≈ {cross} 才追上线性项，已经接近这次测量的最大长度 t = {n}。",
    "decode.crossover.passed": "按 FLOP 数，t² 项在 t ≈ {cross} 追上线性项，这次测量（最大 t = {n}）已经越过了它。",
    "decode.step_exponent.flat": "{mode}的单步指数 {k} 接近 0（后半段从 {from} 到 {to}）：后半段的单步耗时几乎不随 t 变，"
                                 "固定开销为主。",
    "decode.step_exponent.mixed": "{mode}的单步指数 {k} 在 0 和 1 之间（后半段从 {from} 涨到 {to}）：固定开销和随 t 增长的"
                                  "部分都有份。",
    "decode.step_exponent.linear": "{mode}的单步指数 {k} 接近 1（后半段从 {from} 涨到 {to}）：后半段的单步耗时大致随 t "
                                   "成正比地变长。",
    "decode.exponent_unread.noisy": "{mode}的单步指数 {k}：上一句已经说明，这么短的长度内随 t 增长的那一项分不出来，这个指数"
                                   "反映的是计时波动，不作解读（下一节用 1,024 个 token 专门测有缓存的增长）。",
    "decode.exponent_steep.not_t2": "{mode}的单步指数 {k} 大于 1（后半段从 {from} 涨到 {to}），比按 FLOP 数预计"
                                                 "的更陡：在这个长度上 t² 项还很小（见上面的转折点），多出来的陡度来自计时"
                                                 "波动和矩阵乘法在不同长度下效率不同，不是 t² 项。",
    "decode.step_exponent.between": "{mode}的单步指数 {k} 在 1 和 2 之间（后半段从 {from} 涨到 {to}）：t² 部分已经显现。",
    "decode.step_exponent.quadratic": "{mode}的单步指数 {k} 接近 2（后半段从 {from} 涨到 {to}）：t² 部分为主。",
    "decode.step_exponent.noisy": "{mode}的单步指数 {k} 和后半段实测的单步耗时对不上，或者不在 0 到 2 之间：这是计时噪声；"
                                  + _RERUN,
    "decode.step_exponent.unfit": "{mode}的单步指数这一次拟合不出来；" + _RERUN,
    "decode.cumulative.early_slow": "{mode}的累计指数 {k} 小于 1：前 4 次前向计算（含预填充）平均 {early}，比后半段的单步"
                                    "中位数 {late} 慢得多，累计曲线先陡后缓。",
    "decode.cumulative.linear": "{mode}的累计指数 {k} 接近 1：总时间大致与生成的 token 数 n 成正比。",
    "decode.cumulative.between": "{mode}的累计指数 {k} 在 1 和 2 之间：后面的步更慢（后半段的单步中位数 {late}，前 4 次前向"
                                 "计算平均 {early}），总时间增长得比 n 快。",
    "decode.cumulative.quadratic": "{mode}的累计指数 {k} 接近 2：后面的步慢得多（后半段的单步中位数 {late}，前 4 次前向计算"
                                   "平均 {early}），总时间接近随 n² 增长。",
    "decode.cumulative.noisy": "{mode}的累计指数 {k}：这一次的计时太乱，说不清是哪一段拖慢的；" + _RERUN,
    "decode.cumulative.unfit": "{mode}的累计指数这一次拟合不出来；" + _RERUN,
    "decode.cached.flat": "有缓存：单步耗时的中位数 {median}，t = {t0} 附近 {first}，t = {t1} 附近 {last}，看不出随 t 的增长："
                          "读缓存那一项在这么短的长度内淹没在固定开销和计时噪声里。",
    "decode.cached.grows": "有缓存：把各步按 t 分成八段，每段单步耗时的中位数基本上一段比一段长：{eighths}（从 t = {t0} 附近到 "
                           "t = {t1} 附近）；随 t 增长的部分在 t = {t1} 附近约占单步的 {share}。",
    "decode.cached.noisy": "有缓存：单步耗时的中位数 {median}，t = {t0} 附近 {first}，t = {t1} 附近 {last}：这一次计时噪声太大，"
                           "说不清随 t 增长了多少；" + _RERUN,
    "decode.extrapolation.both": "按这次测得的增长外推（无缓存随 t 增长的计算约 {rate}，有缓存每步的耗时随 t 增长约 {slope}），"
                                 "把滑块拉到最右（{top} 个 token），无缓存一次约需 {none_min}，有缓存约 {kv_s}。",
    "decode.extrapolation.kv_flat": "按这次测得的增长外推（无缓存随 t 增长的计算约 {rate}），把滑块拉到最右（{top} 个 token），"
                                    "无缓存一次约需 {none_min}；有缓存这次没测出随 t 的增长，按单步中位数 {median} 算约 "
                                    "{kv_s}（读缓存那一项没算进去，实际会更长，长多少见下一节测出的斜率）。",
    "decode.extrapolation.none": "这一次说不清无缓存的单步耗时随 t 怎样增长，就不按它外推到滑块最右（{top} 个 token）；"
                                 "把生成长度调大或" + _RERUN,
    **{f"decode.growth.{size}": _GROWTH_ZH.replace("{size}", word)
       for size, word in (("large", "占了大头"), ("half", "约占一半"), ("notable", "已经不小"), ("small", "还不大"))},
    "decode.growth.flat": "有缓存，t 从 {t0} 附近到 {t1} 附近：单步耗时的中位数从 {first} 到 {last}，几乎不变：读缓存那一项"
                          "淹没在固定开销里（在 GPU 上，时间主要花在逐个启动核函数上，常常就是这样）。",
    "decode.growth.noisy": "有缓存，t 从 {t0} 附近到 {t1} 附近：单步耗时的中位数从 {first} 到 {last}，这一次没有测出清楚的"
                           "增长，计时噪声盖过了它；重跑这一格，或者把这一格里的 new_tokens=1024 改大（最多约 2000）再试。",
}, words={"none": "无缓存", "kv": "有缓存", "min": "分钟"})


def show_claims(claims: list[Claim]) -> None:
    """Display this chapter's claims in Chinese, recorded in the output's metadata (``kvlab.claims.show``)."""
    show(claims, ZH)


def _exponent_claims(timing: DecodeTiming, mode: str, growth: Claim, crossover: Claim) -> list[Claim]:
    """The step exponent (fitted over the second half) beside the medians of that half's first and last eighth;
    the cumulative exponent beside the first 4 passes' mean and the second half's median step. The exponent's
    reading agrees with the sentences before it: ``growth`` (this mode's steps: can't tell -> not read; level ->
    only "level") and the counted ``crossover`` (far -> a steep exponent is not the t² term)."""
    steps_ms = [s * 1e3 for s in timing.step_seconds]
    early, late = sum(steps_ms[:4]) / len(steps_ms[:4]), median(steps_ms[1 + (len(steps_ms) - 1) // 2:])
    eighths = timing_ends(timing).eighths_ms
    step = {"k": number(timing.step_exponent, kind=DIFFERENCE), "from": _ms(eighths[len(eighths) // 2]),
            "to": _ms(eighths[-1])}
    k_cum = number(timing.cumulative_exponent, kind=DIFFERENCE)
    reading = STEP_EXPONENT.choose(step, {"mode": mode})
    read = STEP_EXPONENT.rule(reading.key).substantive  # an exponent already said to be noise or unfit stays so
    if read and (growth.key.endswith(".noisy")
                 or (growth.key.endswith(".flat") and reading.key != "decode.step_exponent.flat")):
        reading = STEP_UNREAD.choose(step, {"mode": mode})
    elif reading.key in ("decode.step_exponent.between", "decode.step_exponent.quadratic") \
            and crossover.key == "decode.crossover.far":
        reading = STEP_STEEP.choose(step, {"mode": mode})
    return [reading,
            CUMULATIVE.choose({"k": k_cum, "early": _ms(early), "late": _ms(late)}, {"mode": mode})]


def explain_latency(results: dict[str, DecodeTiming], model: ToyTransformer) -> list[Claim]:
    """What this run measured, as claims (:data:`CHOOSERS`; :func:`show_claims` prints them): the totals, the
    uncached steps' growth from measured medians, the counted crossover, both modes' exponents, the cached steps,
    and the slider's right end extrapolated from the growth this run measured (or not at all)."""
    c = model.config
    flops = uncached_flops(c)
    none_t, kv_t = results["none"], results["kv"]
    none, kv = timing_ends(none_t), timing_ends(kv_t)
    total_none, total_kv = none_t.cumulative_seconds[-1], kv_t.cumulative_seconds[-1]
    rate = ratio(flops(none.t1) - flops(none.t0), none.last_ms - none.first_ms) / 1e6
    uncached = UNCACHED.choose({**_ends_numbers(none), "rate": number(rate, 1, "GFLOP/s")})
    cached = CACHED.choose(_ends_numbers(kv))
    if uncached.key not in GROWING:
        rate = math.nan  # extrapolate only from a growth this run measured and said
    kv_slope = kv.slope_ms if cached.key in GROWING else math.nan
    top = c.max_seq_len - 8
    lengths = range(5, top + 4)  # the slider's right end: a prompt of 4, then top - 1 decode passes
    none_s = sum(none.first_ms + (flops(t) - flops(none.t0)) / (rate * 1e6) for t in lengths) / 1e3
    kv_s = (sum(kv.first_ms + kv_slope * (t - kv.t0) for t in lengths) / 1e3 if cached.key in GROWING
            else kv.median_ms * top / 1e3)
    n = none_t.seq_len[-1]
    crossover = CROSSOVER.choose({"cross": _count(crossover_length(model)), "n": _count(n)})
    return [
        TOTALS.choose({"n": _count(kv_t.new_tokens), "none_s": number(total_none, 2, "s"),
                       "kv_s": number(total_kv, 2, "s"), "speedup": number(ratio(total_none, total_kv), 1, "×")}),
        uncached,
        crossover,
        *_exponent_claims(none_t, "none", uncached, crossover),
        cached,
        *_exponent_claims(kv_t, "kv", cached, crossover),
        EXTRAPOLATION.choose({"rate": number(rate, 1, "GFLOP/s"), "slope": number(kv_slope * 1e3, 2, "µs/token"),
                              "top": _count(top), "none_min": number(none_s / 60, 1, "min"),
                              "median": _ms(kv.median_ms), "kv_s": number(kv_s, 1, "s")}),
    ]


def cached_step_growth(model: ToyTransformer, new_tokens: int = 1024, prompt_len: int = 4,
                       repeats: int = 2) -> StepFit:
    """A long generation with a cache only, ``repeats`` times: how fast does the step time grow with t?"""
    new_tokens = positive_int("new_tokens", new_tokens)
    if prompt_len + new_tokens > model.config.max_seq_len:
        raise ValueError(f"new_tokens: prompt_len ({prompt_len}) + new_tokens ({new_tokens}) passes the model's "
                         f"max_seq_len ({model.config.max_seq_len})")
    prompt = torch.randint(0, model.config.vocab_size, (1, prompt_len), generator=torch.Generator().manual_seed(1))
    return fit_step_time(time_generate(model, prompt, new_tokens, ("kv",), repeats=repeats)["kv"])


def explain_growth(fit: StepFit, model: ToyTransformer) -> list[Claim]:
    """The long cached run as a claim (:data:`GROWTH`): measured medians at both ends, the fitted slope only where
    it agrees with them, and the cache read rate it implies."""
    ends = step_ends(fit.t, fit.step_ms)
    per_token = format_bytes(kv_bytes_per_token(model.config)).split()
    rate = ratio(kv_bytes_per_token(model.config), fit.slope_ms / 1e3) / 1e9 if fit.slope_ms > 0 else math.nan
    return [GROWTH.choose({**_ends_numbers(ends), "slope": number(fit.slope_ms * 1e3, 2, "µs/token", DIFFERENCE),
                           "per_token": Number(per_token[0], per_token[1]), "rate": number(rate, 1, "GB/s")})]


def crossover_length(model: ToyTransformer) -> int:
    """Where attention's t² term overtakes the linear terms in an uncached pass (see ``kvlab.costs``)."""
    return attention_crossover(model.config)
