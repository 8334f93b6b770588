"""Chapter 3.5, misconception 2: caching K alone saves nothing worth having. No cache, a K-only cache and a
K+V cache timed side by side, their FLOPs counted, and why V of a past token needs the whole prefix again."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch

from ... import inputs
from ..._validate import positive_int
from ...attention import attention, attention_mask
from ...config import ModelConfig
from ...costs import linear_flops_per_token, pass_cost
from ...measure import DecodeTiming, device_label, time_generate
from ...model import ToyTransformer
from ...stats import median
from ...viz import misconceptions_plots as plots
from ...viz.widgets import Panel, View, int_slider, run_button
from ..decode import layer_qkv
from .common import NEW_TOKENS_LABEL, leave_a_core


K_ONLY_MODES = ("none", "k_only", "kv")
K_ONLY_NAMES = {"none": "无缓存", "k_only": "只缓存 K", "kv": "有缓存"}  # as in the figures' legends
K_ONLY_MINIMAL = "k_only_min"  # a K-only cache that recomputes no more than V needs (counted, not run)
FLOP_MODES = ("none", "k_only", K_ONLY_MINIMAL, "kv")
FLOP_NAMES = {"none": "无缓存", "k_only": "只缓存 K（kvlab 的实现）", K_ONLY_MINIMAL: "只缓存 K（最省的做法）",
              "kv": "有缓存"}

# LLaMA-7B's shape as a ModelConfig, to count its FLOPs (nothing is allocated): Touvron et al. 2023 and the
# released config.json (hidden 4096, 32 layers, 32 heads, intermediate_size 11008, vocab 32000); its parameter
# count equals MODEL_PRESETS["LLaMA-7B"].n_params (tests check it).
LLAMA_7B_SHAPE = ModelConfig(vocab_size=32000, d_model=4096, n_layer=32, n_head=32, d_ff=11008, max_seq_len=2048)


def compare_k_only(model: ToyTransformer, prompt_ids, new_tokens: int, repeats: int = 1) -> dict[str, DecodeTiming]:
    """Generate with no cache, a K-only cache and a K+V cache on the same prompt, alternating, after a warm-up."""
    new_tokens = positive_int("new_tokens", new_tokens)
    return time_generate(model, prompt_ids, new_tokens, K_ONLY_MODES, repeats=repeats)


def tail_step_ms(t: DecodeTiming, fraction: float = 0.25) -> float:
    """The page's one aggregate of a mode's step time (ms): the median decode step of the last ``fraction`` of each
    repeat (where the sequence is longest), then the median over the repeats (:func:`repeat_tail_ms`)."""
    return median(repeat_tail_ms(t, fraction))


def step_flops(model, mode: str, seq_len: int) -> int:
    """FLOPs, counted as :mod:`kvlab.costs` counts them (2 per multiply-add, the masked half of a block too), of
    the decode pass that brings a sequence to ``seq_len`` tokens. ``model``: a ToyTransformer or a ModelConfig.

    - "none" runs all ``t = seq_len`` tokens through every layer; "kv" runs 1 token after ``t - 1`` cached ones;
    - "k_only", as :func:`kvlab.teaching_caches.k_only_forward` runs it: all t tokens through every layer, only
      the K projection of the ``t - 1`` past tokens skipped;
    - "k_only_min", the least a K-only cache could do: the new token as with a full cache, plus V of the past
      tokens at every layer, which needs their hidden states: the layers below the last re-run over the past
      tokens (their Q, V, attention among themselves, W_o, MLP; K stays cached); at the last layer only their V.
    """
    c = model.config if isinstance(model, ToyTransformer) else model
    if not isinstance(c, ModelConfig):
        raise ValueError(f"model must be a ToyTransformer or a ModelConfig, got {type(model).__name__}")
    t = positive_int("seq_len", seq_len)
    past = t - 1
    kv_proj = 2 * c.d_model * c.n_kv_head * c.head_dim  # one token's K (or V) projection in one layer
    if mode == "kv":
        return pass_cost(c, 1, past).flops
    if mode == "none":
        return pass_cost(c, t).flops
    if mode == "k_only":
        return pass_cost(c, t).flops - past * c.n_layer * kv_proj
    if mode == K_ONLY_MINIMAL:
        per_layer = linear_flops_per_token(c) // c.n_layer  # projections and MLP of one token in one layer
        among_past = 4 * c.n_head * c.head_dim * past * past  # Q K^T and weights @ V of the past tokens
        below = (c.n_layer - 1) * (past * (per_layer - kv_proj) + among_past)
        return pass_cost(c, 1, past).flops + below + past * kv_proj
    raise ValueError(f"mode must be one of {FLOP_MODES}, got {mode!r}")


@dataclass(frozen=True)
class StepFlops:
    """One decode step at ``seq_len`` counted in every way of :func:`step_flops`."""

    seq_len: int
    flops: dict  # mode -> FLOPs

    def share(self, mode: str) -> float:
        """The step's FLOPs as a share of the uncached step's."""
        return self.flops[mode] / self.flops["none"]


def count_step(model, seq_len: int) -> StepFlops:
    return StepFlops(seq_len, {m: step_flops(model, m, seq_len) for m in FLOP_MODES})


def repeat_tail_ms(t: DecodeTiming, fraction: float = 0.25) -> list[float]:
    """:func:`tail_step_ms` of each repeat on its own (ms): how far the repeats agree tells how busy the machine is."""
    out = []
    for seconds in t.pass_seconds:
        steps = seconds[1:]  # decode passes only
        out.append(median(steps[-max(1, int(len(steps) * fraction)):]) * 1e3)
    return out


BAND = 0.15  # a ratio within 1 ± 15 % is "about the same"
FAR = 2.0  # K+V at least this many times faster than no cache (in every repeat): "far faster"
MIN_REPEATS = 3  # fewer repeats cannot show how much the machine moves the times


@dataclass(frozen=True)
class KOnlyVerdict:
    """What the timings of misconception 2 say, chosen from the per-repeat medians (see :func:`k_only_verdict`).

    ``kind``: "same" (K-only within ±15 % of no cache, most repeats agreeing), "k_faster" / "k_slower" (beyond the
    band, every repeat the same way), "unclear" (the repeats disagree), "few_repeats" (under 3 repeats),
    "gpu_flat" (on a GPU, all three modes within the band: launch-bound). ``kv``: "far" (K+V at least 2x faster
    than no cache in every repeat), "faster" (beyond the band), "unclear"."""

    kind: str
    kv: str
    ratio: float  # median K-only step / median uncached step
    repeat_ratios: tuple  # the same ratio, repeat by repeat
    kv_speedup: float  # median uncached step / median K+V step
    sentence: str


def _kv_part(kv: str, speedup: float) -> str:
    if kv == "far":
        return f"缓存 K 和 V 的一步快得多：只有不缓存的 1/{speedup:.1f}，每次重复都是如此。"
    if kv == "faster":
        return f"缓存 K 和 V 的一步{'明显快' if speedup >= 1.5 else '快一些'}（不缓存是它的 {speedup:.2f} 倍）。"
    return "缓存 K 和 V 的一步这次也分不出比不缓存快多少：几次重复不一致，或相差在 ±15% 之内。"


def k_only_verdict(none_ms, k_only_ms, kv_ms, gpu: bool = False) -> KOnlyVerdict:
    """Choose the sentence about step times from per-repeat tail medians (ms) of each mode, in repeat order."""
    n = len(none_ms)
    if not n or len(k_only_ms) != n or len(kv_ms) != n:
        raise ValueError("none_ms, k_only_ms, kv_ms: one median per repeat each, the same number of repeats")
    mid = {m: median(v) for m, v in (("none", none_ms), ("k_only", k_only_ms), ("kv", kv_ms))}
    ratio = mid["k_only"] / mid["none"]
    rr = tuple(k / u for k, u in zip(k_only_ms, none_ms))
    speedups = [u / v for u, v in zip(none_ms, kv_ms)]
    speedup = mid["none"] / mid["kv"]
    kv = ("far" if min(speedups) >= FAR else "faster" if min(speedups) >= 1 + BAND and speedup >= 1 + BAND
          else "unclear")
    times = f"各次重复的中位数：无缓存 {mid['none']:.2f} ms，只缓存 K {mid['k_only']:.2f} ms，有缓存 {mid['kv']:.2f} ms"
    if gpu and max(mid.values()) <= (1 + BAND) * min(mid.values()):
        kind = "gpu_flat"
        text = (f"在这块 GPU 上三种方式的一步几乎一样快（{times}）：演示模型太小，一步的时间主要花在逐个启动核函数上，"
                "计算量的差别显不出来。起作用的是上面按 FLOP 的计数：模型一大，时间就跟着计算量走。")
        return KOnlyVerdict(kind, kv, ratio, rr, speedup, text)
    within = [abs(r - 1) < BAND for r in rr]
    if n < MIN_REPEATS:
        kind = "few_repeats"
        head = (f"只重复了 {n} 次（{times}）：看不出这台机器让耗时波动多大，说不准只缓存 K 和不缓存是不是一样快；"
                f"把「{REPEATS_LABEL}」调到 {MIN_REPEATS} 以上再运行。")
    elif abs(ratio - 1) < BAND and sum(within) * 2 > n:
        kind = "same"
        head = (f"只缓存 K 和不缓存差不多一样慢（{times}）：相差 {abs(ratio - 1):.0%}，在 ±{BAND:.0%} 之内，"
                f"{n} 次重复里有 {sum(within)} 次也在这个范围内。")
    elif ratio <= 1 / (1 + BAND) and all(r < 1 for r in rr):
        kind = "k_faster"
        head = (f"这次只缓存 K 比不缓存快 {1 - ratio:.0%}（{times}，每次重复都是它快）：按计数它只少做几个百分点的计算，"
                "快出的这么多不能用少算的那一点解释；"
                f"原因在计算量以外，这里没有查明：kvlab 的只缓存 K 走的是另一段代码（把 W_qkv 拆成三次矩阵乘），{n} 次重复方向一致也可能是凑巧（重复越多越可信）。")
    elif ratio >= 1 + BAND and all(r > 1 for r in rr):
        kind = "k_slower"
        head = (f"这次只缓存 K 反而比不缓存慢 {ratio - 1:.0%}（{times}，每次重复都是它慢）：按计数它只少做几个百分点的计算，却"
                "还要多读写一次缓存；慢这么多，超出了多读写一次缓存能解释的范围；"
                f"原因在计算量以外，这里没有查明：kvlab 的只缓存 K 走的是另一段代码（把 W_qkv 拆成三次矩阵乘），{n} 次重复方向一致也可能是凑巧（重复越多越可信）。")
    else:
        kind = "unclear"
        head = (f"几次重复的结论不一致（只缓存 K ÷ 无缓存：{min(rr):.2f}–{max(rr):.2f}；{times}）："
                "这台机器太忙，这次说不准只缓存 K 和不缓存谁快。")
    return KOnlyVerdict(kind, kv, ratio, rr, speedup, head + _kv_part(kv, speedup))


def judge_k_only(timings: dict[str, DecodeTiming], device) -> KOnlyVerdict:
    """:func:`k_only_verdict` on a run of :func:`compare_k_only`."""
    per = {m: repeat_tail_ms(timings[m]) for m in K_ONLY_MODES}
    return k_only_verdict(per["none"], per["k_only"], per["kv"], gpu=torch.device(device).type == "cuda")


def tail_times_text(timings: dict[str, DecodeTiming]) -> str:
    """「无缓存 6.49 ms，只缓存 K 6.21 ms，有缓存 1.05 ms」: :func:`tail_step_ms` of each mode (the verdict's numbers)."""
    return "，".join(f"{K_ONLY_NAMES.get(m, m)} {tail_step_ms(t):.2f} ms" for m, t in timings.items())


def same_tokens(timings: dict[str, DecodeTiming]) -> bool:
    first = next(iter(timings.values())).tokens
    return all(torch.equal(t.tokens, first) for t in timings.values())


REPEATS_LABEL = "重复次数（取中位数）"
COUNTING = "按 kvlab.costs 的计数（一次乘加记 2 FLOP，掩码遮住的一半也算）"


def tail_range(timings: dict[str, DecodeTiming]) -> str:
    """The sequence lengths whose steps the last-quarter medians cover: "153–201"."""
    t = next(iter(timings.values())).seq_len[1:]  # decode passes, as tail_step_ms takes them
    tail = t[-max(1, int(len(t) * 0.25)):]
    return f"{tail[0]}–{tail[-1]}"


def render_k_only(model: ToyTransformer, prompt_ids, new_tokens, repeats) -> View:
    """The misconception-2 panel: time the three modes, plot step time and K/V projections per step."""
    n = inputs.whole_number(NEW_TOKENS_LABEL, new_tokens, 8, model.config.max_seq_len - len(prompt_ids[0]))
    r = inputs.whole_number(REPEATS_LABEL, repeats, 1, 9)
    timings = compare_k_only(model, prompt_ids, n, r)
    counted = count_step(model, timings["none"].seq_len[-1])
    tokens = "三种方式生成的 token 完全相同" if same_tokens(timings) else '<span style="color:#b00">token 不同！</span>'
    verdict = judge_k_only(timings, model.device)
    readout = (
        f"生成 {n} 个 token：{tokens}。最后 1/4 的解码步（t = {tail_range(timings)}）单步耗时中位数"
        f"（每次重复各取一个，再取 {r} 次的中位数）：<b>{tail_times_text(timings)}</b>（{device_label(model.device)}，重复 {r} 次）<br>{verdict.sentence}<br>"
        f"trace 记录的每步投影（序列长度为 t 的那一步）：无缓存 K = V = t；只缓存 K：K = 1，<b>V = t</b>；有缓存：K = V = 1。"
        f"{COUNTING}，t = {counted.seq_len} 时只缓存 K 的一步仍要做无缓存的 <b>{counted.share('k_only'):.1%}</b> 的计算"
        f"（有缓存：{counted.share('kv'):.2%}）"
    )
    return View([plots.k_only_figure(timings)], readout, timings)


def k_only_panel(model: ToyTransformer, prompt_ids, new_tokens: int = 120, repeats: int = MIN_REPEATS) -> Panel:
    """Length and repeat sliders; measurements run when the button is clicked."""
    top = model.config.max_seq_len - len(prompt_ids[0])
    return Panel({"new_tokens": int_slider(NEW_TOKENS_LABEL, new_tokens, 40, top - top % 40, step=40),
                  "repeats": int_slider(REPEATS_LABEL, repeats, 1, 5, width="300px")},
                 partial(render_k_only, model, prompt_ids), layout="horizontal", css_class="kvlab-konly",
                 button=run_button())


@dataclass(frozen=True)
class Dependency:
    """How much K and V of the last token change, layer by layer, when only the first token is changed:
    ``||changed - original|| / ||original||`` over all KV heads of that token (0.5: by half its own size)."""

    text: str
    changed_text: str
    k_change: list[float]  # per layer, relative to ||K||
    v_change: list[float]  # per layer, relative to ||V||


@leave_a_core
@torch.no_grad()
def prefix_dependency(model: ToyTransformer, tokenizer, text: str = "人工智能模型") -> Dependency:
    """Change the first token of ``text`` and measure K and V of its last token at every layer.

    At layer 0 they depend on the last token and its position alone (no change); from layer 1 on they depend on
    every earlier token through the attention of the layers below: recomputing them means re-running those
    layers over the whole prefix.
    """
    ids = tokenizer.encode(text)
    if len(ids) < 2:
        raise ValueError("text: needs at least 2 tokens (one to change, one to watch)")
    changed = [(ids[0] + 1) % model.config.vocab_size] + ids[1:]
    k_change, v_change = [], []
    for layer in range(model.config.n_layer):
        _, k, v = layer_qkv(model, ids, layer)  # K, V: [H_kv, t, D]
        _, k2, v2 = layer_qkv(model, changed, layer)
        k_change.append(((k2[:, -1] - k[:, -1]).norm() / k[:, -1].norm()).item())
        v_change.append(((v2[:, -1] - v[:, -1]).norm() / v[:, -1].norm()).item())
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
