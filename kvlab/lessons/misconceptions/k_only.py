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
    """Median decode-step time (ms) over the last ``fraction`` of the run, where the sequence is longest."""
    steps = t.step_seconds[1:]  # decode passes only
    tail = steps[-max(1, int(len(steps) * fraction)):]
    return median(tail) * 1e3


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


def tail_times_text(timings: dict[str, DecodeTiming]) -> str:
    """「无缓存 6.49 ms，只缓存 K 6.21 ms，有缓存 1.05 ms」: the median step of the last quarter of each run."""
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
    readout = (
        f"生成 {n} 个 token：{tokens}。最后 1/4 的解码步（t = {tail_range(timings)}）单步耗时中位数："
        f"<b>{tail_times_text(timings)}</b>（{device_label(model.device)}）<br>"
        f"trace 记录的每步投影（序列长度为 t 的那一步）：无缓存 K = V = t；只缓存 K：K = 1，<b>V = t</b>；有缓存：K = V = 1。"
        f"{COUNTING}，t = {counted.seq_len} 时只缓存 K 的一步仍要做无缓存的 <b>{counted.share('k_only'):.1%}</b> 的计算"
        f"（有缓存：{counted.share('kv'):.2%}）"
    )
    return View([plots.k_only_figure(timings)], readout, timings)


def k_only_panel(model: ToyTransformer, prompt_ids, new_tokens: int = 200) -> Panel:
    """Length and repeat sliders; measurements run when the button is clicked."""
    top = model.config.max_seq_len - len(prompt_ids[0])
    return Panel({"new_tokens": int_slider(NEW_TOKENS_LABEL, new_tokens, 40, top - top % 40, step=40),
                  "repeats": int_slider(REPEATS_LABEL, 1, 1, 5, width="300px")},
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
