"""Chapter 3.1 从自回归解码说起: what each decoding step computes with and without a cache, the
chapter's two formulas checked on real Q/K/V, projections counted from the trace, and timings."""
from __future__ import annotations

import html
from dataclasses import dataclass
from functools import partial

import torch

from .._validate import non_negative_int, positive_int
from ..cache import KVCache
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
    fixed_ms: float  # what a step costs before t matters: many small operations, reading the weights
    slope_ms: float  # ms per unit of work
    work: list[float]  # work(t) at each measured t

    def at(self, t: float, work: float | None = None) -> float:
        return self.fixed_ms + self.slope_ms * (t if work is None else work)

    @property
    def fit_ms(self) -> list[float]:
        return [self.fixed_ms + self.slope_ms * w for w in self.work]

    @property
    def growing_share_at_end(self) -> float:
        """Share of the fitted step time at the last t that the growing part accounts for."""
        grow = max(0.0, self.slope_ms * self.work[-1])
        return grow / max(self.fixed_ms + grow, 1e-12)


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


def exponent_phrase(k: float) -> str:
    """Where a fitted step-time exponent sits, in words chosen from its value."""
    if k < -0.1:
        return "为负：后面的步反而更快，这是计时噪声"
    if k < 0.3:
        return "接近 0（固定开销为主）"
    if k < 0.85:
        return "在 0 和 1 之间（固定开销和线性部分都有份）"
    if k < 1.15:
        return "接近 1（线性部分为主）"
    if k < 1.85:
        return "在 1 和 2 之间（t² 部分已经显现）"
    return "接近 2（t² 部分为主）"


def cumulative_phrase(k: float) -> str:
    if k < 0.85:
        return "小于 1：第一步（预填充和预热后的第一次计时）的耗时占了大头"
    if k < 1.15:
        return "接近 1"
    return "在 1 和 2 之间" if k < 1.85 else "接近 2"


def estimated_seconds(fit: StepFit, t_values, work=None) -> float:
    """What generating through ``t_values`` would take by the fit (for the slider's right end)."""
    return sum(fit.at(t, None if work is None else work(t)) for t in t_values) / 1e3


def dominant_part(fixed: float, linear: float, quadratic: float) -> str:
    """Which part of a step's time is largest, in words."""
    parts = {"固定开销": fixed, "与 t 成正比的部分": linear, "t² 部分": quadratic}
    name = max(parts, key=parts.get)
    return f"{name}占大头"


def explain_latency(results: dict[str, DecodeTiming], model: ToyTransformer) -> list[str]:
    """Chinese sentences saying what this run measured: which part of the step time dominates where.

    Every phrase is chosen from the numbers, so the sentences stay true on any machine.
    """
    c = model.config
    flops = uncached_flops(c)
    none, kv = fit_step_time(results["none"], flops), fit_step_time(results["kv"])
    n, cross = none.t[-1], crossover_length(model)
    k_none, k_cum = results["none"].step_exponent, results["none"].cumulative_exponent
    lines = []
    fitted = none.slope_ms > 0 and none.fixed_ms >= 0
    if fitted:
        lin = none.slope_ms * n * linear_flops_per_token(c)
        quad = none.slope_ms * attention_flops(c, n)
        turn = none.fixed_ms / (none.slope_ms * linear_flops_per_token(c))
        fitted = turn < n  # past the turn the run can tell a speed apart from the fixed cost
    if not fitted:
        lines.append(f"无缓存：这一次测到的长度太短或计时太乱，分不开「固定开销」和「与计算量成正比的部分」"
                     f"（拟合：固定 {none.fixed_ms:.2f} ms）；把生成长度调大或增加重复次数再测一次。")
        lines.append(f"无缓存的单步指数 {k_none:.2f} {exponent_phrase(k_none)}，累计指数 {k_cum:.2f} {cumulative_phrase(k_cum)}。")
    else:
        lines.append(
            f"无缓存：把单步耗时拟合成「固定开销 + 计算量 ÷ 速度」，得到固定开销 {none.fixed_ms:.2f} ms、"
            f"速度约 {1 / none.slope_ms / 1e6:.1f} GFLOP/s。t 小于约 {turn:.0f} 时固定开销占大头，之后与 t 成正比的投影和"
            f"前馈网络占大头。在 t = {n} 处三部分约为：固定 {none.fixed_ms:.2f} ms，线性 {lin:.2f} ms，t² 项 {quad:.2f} ms，"
            f"{dominant_part(none.fixed_ms, lin, quad)}。")
        lines.append(f"单步指数 {k_none:.2f} {exponent_phrase(k_none)}，累计指数 {k_cum:.2f} {cumulative_phrase(k_cum)}。")
    lines.append(f"t² 项按 FLOP 数要到 t ≈ {cross} 才追上线性项"
                 + ("，远超这次测量的长度。" if cross > 2 * n else "，已经接近这次测量的长度。"))
    k_kv = results["kv"].step_exponent
    if kv.slope_ms <= 0 or kv.growing_share_at_end < 0.05:
        grows = (f"单步耗时约 {kv.fixed_ms:.2f} ms，读缓存那一项在 t ≤ {n} 内不到单步的 5%"
                 f"（拟合斜率 {kv.slope_ms * 1e3:.2f} µs/token），淹没在固定开销和计时噪声里")
    else:
        grows = (f"单步耗时 ≈ {kv.fixed_ms:.2f} ms + {kv.slope_ms * 1e3:.2f} µs × t；在 t = {n} 处随 t 增长的部分"
                 f"占单步的 {kv.growing_share_at_end:.0%}")
    lines.append(f"有缓存：{grows}。单步指数 {k_kv:.2f} {exponent_phrase(k_kv)}，累计指数 "
                 f"{results['kv'].cumulative_exponent:.2f} {cumulative_phrase(results['kv'].cumulative_exponent)}。")
    if fitted:
        top = c.max_seq_len - 8
        est = estimated_seconds(none, range(5, top + 4), flops)
        lines.append(f"按这次的拟合，把滑块拉到最右（{top:,} 个 token），无缓存一次约需 {est / 60:.0f} 分钟，"
                     f"有缓存约 {estimated_seconds(kv, range(5, top + 4)):.0f} 秒。")
    return lines


def cached_step_growth(model: ToyTransformer, new_tokens: int = 1024, prompt_len: int = 4,
                       repeats: int = 2) -> StepFit:
    """A long generation with a cache only, ``repeats`` times: how fast does the step time grow with t?"""
    new_tokens = positive_int("new_tokens", new_tokens)
    if prompt_len + new_tokens > model.config.max_seq_len:
        raise ValueError(f"new_tokens: prompt_len ({prompt_len}) + new_tokens ({new_tokens}) passes the model's "
                         f"max_seq_len ({model.config.max_seq_len})")
    prompt = torch.randint(0, model.config.vocab_size, (1, prompt_len), generator=torch.Generator().manual_seed(1))
    return fit_step_time(time_generate(model, prompt, new_tokens, ("kv",), repeats=repeats)["kv"])


def explain_growth(fit: StepFit, model: ToyTransformer) -> list[str]:
    """Chinese sentences for the long cached run, chosen from its numbers."""
    start, end = fit.t[0], fit.t[-1]
    if fit.slope_ms <= 0:
        return [f"这一次没有测出随 t 的增长（拟合斜率 {fit.slope_ms * 1e3:.2f} µs/token ≤ 0）：计时噪声盖过了它，"
                "重跑这一格，或者加大 new_tokens 再试。"]
    per_token = kv_bytes_per_token(model.config)
    rate = per_token / (fit.slope_ms / 1e3) / 1e9
    share = fit.growing_share_at_end
    size = "占了大头" if share > 0.5 else ("已经不小" if share > 0.2 else "还不大")
    return [f"有缓存，t 从 {start} 到 {end}：拟合单步耗时从 {fit.at(start):.2f} ms 变为 {fit.at(end):.2f} ms，"
            f"斜率 {fit.slope_ms * 1e3:.2f} µs/token，为正：缓存里每多一个 token，每一步就多花这么多时间。",
            f"在 t = {end} 处这一项占单步的 {share:.0%}，{size}。每多一个 token 要多读它 {format_bytes(per_token)} 的 K/V，"
            f"相当于以约 {rate:.1f} GB/s 的速度读缓存（再加上和它做注意力的计算）。"]


def crossover_length(model: ToyTransformer) -> int:
    """Where attention's t² term overtakes the linear terms in an uncached pass (see ``kvlab.costs``)."""
    return attention_crossover(model.config)
