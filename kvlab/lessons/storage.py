"""Chapter 3.2 (the KV cache's storage and shape): the cache tensor's five dimensions in two panels (the shape in
numbers, then the bytes of a batch), real models' numbers, preallocation vs concatenation (kvlab's caches and
transformers', timed in alternating repeats against this machine's last-level cache), and padding waste in a
batch, padded (with room reserved for generation) and paged in a shared pool of blocks."""
from __future__ import annotations

import html
import math
import time
from dataclasses import dataclass
from functools import partial

import torch

from .._validate import non_negative_int, positive_int
from ..cache import DynamicKVCache, KVCache
from ..claims import DIFFERENCE, Catalog, Chooser, Claim, Rule, number, ratio, series, show
from ..config import ModelConfig
from ..device import LastLevelCache, last_level_cache
from ..generation import generate
from ..interop import HF_CACHE_KINDS, distinct_so_far
from ..inputs import choice, whole_number, whole_numbers
from ..measure import alternate, device_label, measurement_threads, torch_threads
from ..stats import median
from ..memory import DTYPE_BITS, format_bytes, kv_bytes_per_token, kv_cache_bytes, stored_tokens
from ..model import ToyTransformer
from ..paging import blocks_per_sequence, padded_slots, paged_slots, pool_order
from ..presets import GPU_PRESETS, LATENT, MODEL_PRESETS, ModelPreset
from ..viz import storage_plots as plots
from ..viz.style import MODE_LABELS
from ..viz.widgets import (Panel, View, bold_label, dropdown, int_box, int_slider, play_slider, run_button,
                           text_box)

MAX_S, MAX_B = 10_000_000, 100_000  # beyond any real model's context or batch: treated as a typing error
# This chapter sets two caches side by side, not a cache against none: its preallocated cache is named for that.
# (Proposed for kvlab.viz.style.MODE_LABELS as a chapter-3.2 label; passed explicitly until then.)
CHAPTER_LABELS = {**MODE_LABELS, "kv": "预分配（kv）"}


# -- the shape panel: L, H, D, S and how much of S is filled -----------------------------------------
CHAPTER_EXAMPLE = (32, 32, 128, 1024, "fp16")  # the original chapter's (L, H, D, S, dtype), B = 1
SHAPE_LABELS = {"L": "层数 L", "H": "KV 头数 H", "D": "头维度 D", "S": "序列长度 S", "filled_pct": "已生成（%）"}


def example_text(example=CHAPTER_EXAMPLE) -> str:
    L, H, D, S, dtype = example
    return f"原文示例（L={L}、B=1、H={H}、S={S:,}、D={D}、{dtype}）"


@dataclass
class CacheShape:
    """The cache of one sequence as the shape panel shows it: its four sizes and the tokens stored so far."""

    L: int
    H: int
    D: int
    S: int
    filled: int  # tokens stored so far (of S)

    @property
    def numbers_per_token(self) -> int:
        """Numbers of K one token stores in all layers (V stores as many again)."""
        return self.L * self.H * self.D

    @property
    def numbers(self) -> int:
        """Numbers of K and V together: 2 x L x H x S x D."""
        return 2 * self.numbers_per_token * self.S


def shape_of(L, H, D, S, filled_pct) -> CacheShape:
    """The shape panel's values checked as a learner typed or dragged them (Chinese messages naming the control)."""
    S = whole_number(SHAPE_LABELS["S"], S, 1, MAX_S)
    return CacheShape(L=whole_number(SHAPE_LABELS["L"], L, 1, 1024), H=whole_number(SHAPE_LABELS["H"], H, 1, 1024),
                      D=whole_number(SHAPE_LABELS["D"], D, 1, 4096), S=S,
                      filled=S * whole_number(SHAPE_LABELS["filled_pct"], filled_pct, 0, 100) // 100)


def example_numbers(example=CHAPTER_EXAMPLE) -> int:
    L, H, D, S, _ = example
    return 2 * L * H * S * D


def render_shape(L, H, D, S, filled_pct) -> View:
    """The shape panel: K of one sequence drawn to scale in numbers, the counts, and the fill."""
    s = shape_of(L, H, D, S, filled_pct)
    readout = (
        f"K 的形状（L, B, H, S, D）=（{s.L}, 1, {s.H}, {s.S}, {s.D}），V 与它同形。每个 token 在每一层的 K 里存 "
        f"H × D = {s.H * s.D:,} 个数，所有层共 L × H × D = {s.numbers_per_token:,} 个，V 也一样多。<br>整个缓存（K 和 V）："
        f"2 × L × H × S × D = <b>{s.numbers:,} 个数</b>，{plots.compared_with(s.numbers, example_numbers(), '原文示例')}。"
        f"<br>已生成 {s.filled:,} / {s.S:,} 个 token：所有层、所有头的前 {s.filled:,} 个位置已经写入。"
    )
    figure = plots.cache_tensor_figure(s.L, s.H, s.D, s.S, s.filled, reference=CHAPTER_EXAMPLE[:4])
    return View([figure], readout, s)




def shape_panel() -> Panel:
    """Two rows: the model's shape (L, H, D), then the request (S) with Play filling it."""
    play, fill_slider = play_slider(SHAPE_LABELS["filled_pct"], 30, 0, 100, interval_ms=150)
    fill_slider.step = play.step = 5
    fill_slider.layout.width = "300px"
    L, H, D, S, _ = CHAPTER_EXAMPLE
    controls = {"L": int_slider(SHAPE_LABELS["L"], L, 1, 128, width="300px"),
                "H": int_slider(SHAPE_LABELS["H"], H, 1, 128, width="300px"),
                "D": int_slider(SHAPE_LABELS["D"], D, 16, 256, step=16, width="300px"),
                "S": int_box(SHAPE_LABELS["S"], S, width="220px"), "filled_pct": fill_slider}
    extra = {"L": bold_label("模型的形状"), "S": bold_label("这次请求"), "filled_pct": play}
    return Panel(controls, render_shape, extra=extra, layout="grid", columns=4, css_class="kvlab-shape",
                 static=("filled_pct", "L", "D"), in_browser=("L", "H", "D", "filled_pct"))


# -- the bytes panel: B and the dtype, reading the shape panel --------------------------------------
QUANTIZED = ("int8", "int4", "fp8")  # formats whose caches also store scales (not counted by the formula)
GPU_LINES = ("T4 16 GB (Colab)", "H100 80 GB")  # memory sizes drawn on the bytes-against-S figure


@dataclass
class MemoryReadout:
    """The formula's inputs and what it gives, as shown by the bytes panel."""

    L: int
    B: int
    H: int
    S: int
    D: int
    dtype: str
    filled: int  # tokens stored so far (of S)

    @property
    def total_bytes(self) -> int:
        return kv_cache_bytes(self.L, self.H, self.D, self.S, self.B, self.dtype)

    @property
    def used_bytes(self) -> int:
        return kv_cache_bytes(self.L, self.H, self.D, self.filled, self.B, self.dtype) if self.filled else 0

    @property
    def per_token_bytes(self) -> int:
        """K and V of one token of one sequence, all layers."""
        return kv_cache_bytes(self.L, self.H, self.D, 1, 1, self.dtype)


def example_bytes(example=CHAPTER_EXAMPLE) -> int:
    """Bytes of the chapter's example cache (B = 1)."""
    L, H, D, S, dtype = example
    return kv_cache_bytes(L, H, D, S, 1, dtype)


def gpu_lines(names=GPU_LINES) -> tuple[tuple[str, int], ...]:
    return tuple((f"{GPU_PRESETS[n].name} 的显存", GPU_PRESETS[n].memory_bytes) for n in names)


BATCH_LABEL, DTYPE_LABEL = "批次 B", "数据类型"  # the bytes panel's controls, as shown


def render_bytes(B, dtype, L, H, D, S, filled_pct) -> View:
    """The bytes panel: the formula with the chosen values, the batch drawn to scale in bytes, bytes against S."""
    s = shape_of(L, H, D, S, filled_pct)
    r = MemoryReadout(L=s.L, B=whole_number(BATCH_LABEL, B, 1, MAX_B), H=s.H, S=s.S, D=s.D,
                      dtype=choice(DTYPE_LABEL, dtype, list(DTYPE_BITS)), filled=s.filled)
    total = r.total_bytes
    readout = (
        f"2 × L × B × H × S × D × 每元素字节 = 2 × {r.L} × {r.B:,} × {r.H} × {r.S:,} × {r.D} × "
        f"{DTYPE_BITS[r.dtype] / 8:g} B = <b>{total:,} B{'' if total < 1024 else ' = ' + format_bytes(total)}</b>，"
        f"{plots.compared_with(total, example_bytes(), example_text())}<br>"
        f"每个 token（1 条序列，所有层的 K 和 V）：{format_bytes(r.per_token_bytes)}；"
        f"已生成 {r.filled:,} / {r.S:,} 个 token，已用 {format_bytes(r.used_bytes)}"
        + ("；量化缓存另存的缩放系数不在其内" if r.dtype in QUANTIZED else "")
    )
    figures = [plots.batch_bytes_figure(r.L, r.B, r.H, r.S, r.D, r.filled, r.dtype, reference=CHAPTER_EXAMPLE),
               plots.memory_vs_seq_figure(r.L, r.B, r.H, r.D, r.S, r.dtype, reference=CHAPTER_EXAMPLE,
                                          capacities=gpu_lines())]
    return View(figures, readout, r)


def bytes_panel(shape: Panel) -> Panel:
    """B and the dtype; the shape (L, H, D, S, fill) is read from ``shape`` and followed as it changes."""
    controls = {"B": int_box(BATCH_LABEL, 1, width="200px"),
                "dtype": dropdown(DTYPE_LABEL, list(DTYPE_BITS), CHAPTER_EXAMPLE[4], width="200px")}

    def render(B, dtype) -> View:
        return render_bytes(B, dtype, **shape.values())

    panel = Panel(controls, render, extra=[bold_label("形状取自上面的面板")], layout="horizontal",
                  css_class="kvlab-bytes")
    panel.follow(shape)
    return panel


# -- the same cache in transformers ----------------------------------------------------------------------
@dataclass(frozen=True)
class TransformersKV:
    """K and V of one layer as transformers caches them after the same tokens on the same weights; or why not."""

    k: torch.Tensor | None  # [B, H_kv, T, D]
    v: torch.Tensor | None
    skipped: str = ""  # the reason there is nothing to compare (Chinese), empty when k and v are there


@torch.no_grad()
def transformers_layer_kv(model: ToyTransformer, tokens: torch.Tensor, layer: int = 0) -> TransformersKV:
    """Feed ``tokens`` [B, T] to transformers' ``LlamaForCausalLM`` holding ``model``'s weights
    (:func:`kvlab.interop.to_hf_llama`) and read ``layer``'s K and V from its cache. transformers is an optional
    dependency: without it the result says so instead of raising."""
    from ..interop import hf_cache_of, hf_layer_kv, to_hf_llama, transformers_missing

    missing = transformers_missing()  # missing, too old or broken: what to install, in Chinese
    if missing:
        return TransformersKV(None, None, missing)
    hf = to_hf_llama(model)
    k, v = hf_layer_kv(hf_cache_of(hf(tokens.to(model.device), use_cache=True)), layer)
    return TransformersKV(k, v)


# -- real models -------------------------------------------------------------------------------------
TABLE_MODELS = ["GPT-2 (124M)", "LLaMA-7B", "LLaMA-13B", "LLaMA-65B", "Llama-2-70B", "Llama-3-8B", "Gemma-7B"]
MHA_TWINS = {"Llama-2-70B": "LLaMA-65B", "Llama-3-8B": "LLaMA-7B"}  # same layers and head size, but MHA
PAST_CONTEXT = "＊"  # marks a size past the model's trained context


@dataclass
class GQASaving:
    """A GQA model against an MHA model of the same depth and head size: how much smaller its cache is."""

    model: str
    query_heads_per_kv_head: int
    mha_twin: str
    ratio: float  # MHA bytes per token / GQA bytes per token


def gqa_savings(twins: dict[str, str] = MHA_TWINS) -> list[GQASaving]:
    out = []
    for name, twin in twins.items():
        p, t = MODEL_PRESETS[name], MODEL_PRESETS[twin]
        out.append(GQASaving(name, p.n_head // p.n_kv_head, twin, t.kv_bytes_per_token() / p.kv_bytes_per_token()))
    return out


def head_dim_exceptions() -> list[ModelPreset]:
    """Real models (standard caches) whose head size is not hidden size / query heads."""
    return [p for p in MODEL_PRESETS.values()
            if not p.hypothetical and p.cache_formula != LATENT and p.n_head * p.head_dim != p.hidden_size]


def past_context(seq_len: int, names=TABLE_MODELS) -> list[str]:
    """The models whose trained context is shorter than ``seq_len`` tokens."""
    return [n for n in names if MODEL_PRESETS[n].context_length < seq_len]


def head_dim_note() -> str:
    """A sentence naming the real models whose head size is not hidden size / query heads."""
    cases = "；".join(f"{p.name} 有 {p.n_head} 个查询头、每个 {p.head_dim} 维，{p.n_head} × {p.head_dim} = "
                     f"{p.n_head * p.head_dim:,}，而隐藏维度是 {p.hidden_size:,}" for p in head_dim_exceptions())
    return f"头维度 ≠ 隐藏维度 / 查询头数的真实模型：{cases}。"


def model_table_html(names=TABLE_MODELS, seq_lens=(1024, 4096)) -> str:
    """The chapter's table of typical values, recomputed from published configurations (B = 1, FP16); a size
    past a model's trained context is marked."""
    head = ("<tr><th>模型</th><th>训练上下文</th><th>层数 L</th><th>查询头</th><th>KV 头 H</th><th>头维度 D</th>"
            "<th>隐藏维度</th><th>每个 token（FP16）</th>" + "".join(f"<th>S={s:,}</th>" for s in seq_lens) + "</tr>")
    rows = []
    for name in names:
        p = MODEL_PRESETS[name]
        sizes = [format_bytes(p.kv_cache_bytes(s)) if s <= p.context_length else
                 f"<span style='color:#999'>{format_bytes(p.kv_cache_bytes(s))}{PAST_CONTEXT}</span>" for s in seq_lens]
        cells = [html.escape(p.name), f"{p.context_length:,}", p.n_layer, p.n_head, p.n_kv_head, p.head_dim,
                 p.hidden_size, format_bytes(p.kv_bytes_per_token("fp16")), *sizes]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    notes = "；".join(f"{g.model} 每 {g.query_heads_per_kv_head} 个查询头共用一组 K/V，每个 token 的缓存是 "
                     f"{g.mha_twin} 的 1/{g.ratio:g}" for g in gqa_savings())
    return (f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
            f"<p style='font-size:90%'>B = 1，FP16。{PAST_CONTEXT} 超过了该模型训练时的上下文长度：模型没在这么长的序列上"
            f"训练过（GPT-2 的位置嵌入只有 1,024 个，更长的序列根本输入不了），这一格只是照公式算出的字节数。{notes}。</p>")


# -- preallocation vs concatenation ----------------------------------------------------------------
@dataclass
class CacheGrowth:
    """One way of caching, run ``repeats`` times: each pass's time in every repeat, and (from the first repeat)
    what was observed (layer 0's K storage) for every cache and what kvlab counts itself for kvlab's."""

    name: str  # "kv", "dynamic" (kvlab) or "transformers:dynamic", "transformers:static"
    t: list[int]  # tokens in the cache after each pass
    repeat_ms: list[list[float]]  # [repeat][pass]: wall time of each forward pass
    layer0_k_tensors: list[int]  # distinct K tensors layer 0 has used so far (its data_ptr() changed)
    tokens: torch.Tensor  # kvlab: the tokens generated [B, prompt + new]; transformers: its greedy choices [B, passes]
    allocations: list[int] | None = None  # kvlab: storage tensors allocated so far (all layers, K and V)
    bytes_copied: list[int] | None = None  # kvlab: bytes written into storage so far
    allocated_bytes: list[int] | None = None  # kvlab: bytes allocated for storage
    attended: list[int] | None = None  # kvlab: positions of K its attention was given; transformers: K's length

    @property
    def step_ms(self) -> list[float]:
        """Each pass's median over the repeats."""
        return [median(column) for column in zip(*self.repeat_ms)]

    def smoothed_ms(self, window: int = 5) -> list[float]:
        """Each pass's median over repeats, then the median of the ``window`` passes around it."""
        step, half = self.step_ms, window // 2
        return [median(step[max(0, i - half): i + half + 1]) for i in range(len(step))]

    def late_ms(self) -> list[float]:
        """Per repeat: the median pass over the second half of the run (the longest caches)."""
        return [median(r[len(r) // 2:]) for r in self.repeat_ms]

    def early_ms(self) -> list[float]:
        """Per repeat: the median of the first quarter of the decode passes (short caches)."""
        return [median(r[1:][: max(1, (len(r) - 1) // 4)]) for r in self.repeat_ms]


# -- what the growth run says about time, as claims (kvlab.claims) ---------------------------------------------
# Two ways timed in the same rounds are compared on the numbers printed: both medians, each round's difference in
# per cent (printed as a series) and the overall difference. "Slower" or "faster" only when every round differs by
# PACE_APART % or more the same way (three rounds pointing the same way by chance alone happens one time in four;
# by 10 % each, far more rarely); "about the same" only when every round is within PACE_SAME %.
PACE_APART, PACE_SAME = 10, 5  # per cent
PACE_FIELDS = ("t_from", "t_to", "n", "other_ms", "base_ms", "rounds")


def _rounds(v) -> tuple[float, ...]:
    r = v["rounds"]
    return r if isinstance(r, tuple) else (r,)


def _diff_agrees(v, sign: int) -> bool:
    """The printed overall difference ``diff`` (per cent; ``sign`` +1: slower by, -1: faster by) is the printed
    medians' ``other / base - 1``, within the rounding of all three."""
    o, b = v["other_ms"], v["base_ms"]
    if b <= 0.005:
        return False
    lo, hi = max(o - 0.005, 0) / (b + 0.005), (o + 0.005) / (b - 0.005)
    return 100 * (lo - 1) - 0.5 <= sign * v["diff"] <= 100 * (hi - 1) + 0.5


def _same(v) -> bool:
    o, b = v["other_ms"], v["base_ms"]
    return all(abs(r) <= PACE_SAME for r in _rounds(v)) and abs(o - b) <= PACE_SAME / 100 * b + 0.01


PACE = Chooser("storage.pace", (
    Rule("storage.pace.slower", (*PACE_FIELDS, "diff"),
         lambda v: min(_rounds(v)) >= PACE_APART and v["diff"] >= PACE_APART and _diff_agrees(v, 1)),
    Rule("storage.pace.faster", (*PACE_FIELDS, "diff"),
         lambda v: max(_rounds(v)) <= -PACE_APART and v["diff"] >= PACE_APART and _diff_agrees(v, -1)),
    Rule("storage.pace.same", PACE_FIELDS, _same),
    Rule("storage.pace.unclear", PACE_FIELDS, substantive=False),
    Rule("storage.pace.untimed", ("t_from", "t_to"), substantive=False),
))
CHOOSERS = (PACE,)

_PACE_HEAD = ("{when}（缓存里 {t_from}–{t_to} 个 token）每次前向的耗时（{n} 轮各取中位数，再取中位数）：{other} {other_ms}，"
              "{base} {base_ms}。每一轮「{other}」比「{base}」多用的时间：{rounds}（负数表示更快）")
_PACE_RERUN = ("：在这台机器上，这一次分不出快慢。点上面面板的「运行测量」再测一次（先关掉别的占 CPU 的程序），或者在下拉框里"
               "选更长的 256 个 token，测完再运行这一格。")
ZH = Catalog("zh", {
    "storage.pace.slower": _PACE_HEAD + f"，每一轮都慢 {PACE_APART}% 以上：「{{other}}」慢了 {{diff}}。",
    "storage.pace.faster": _PACE_HEAD + f"，每一轮都快 {PACE_APART}% 以上：「{{other}}」快了 {{diff}}。",
    "storage.pace.same": _PACE_HEAD + f"，每一轮都在 ±{PACE_SAME}% 以内：两者几乎一样快。",
    "storage.pace.unclear": _PACE_HEAD + f"，有的轮相差不到 {PACE_APART}%，或者各轮快慢方向不一致" + _PACE_RERUN,
    "storage.pace.untimed": "{when}（缓存里 {t_from}–{t_to} 个 token）：这一次没有测到可以比较的耗时（有一方是 0）"
                            + _PACE_RERUN,
}, words={"kv": CHAPTER_LABELS["kv"], "dynamic": CHAPTER_LABELS["dynamic"], "transformers:dynamic": "DynamicCache",
          "transformers:static": "StaticCache", "early": "前四分之一的解码步", "late": "后半程"})


def pace_claim(base: str, base_ms: list[float], other: str, other_ms: list[float], when: str,
               window: tuple[int, int]) -> Claim:
    """:data:`PACE`'s claim on two ways timed in the same rounds (one value per round each, in ms): ``other``
    against ``base`` (mode names, as :data:`ZH` writes them) over ``window`` (first and last cached length)."""
    if not base_ms or len(base_ms) != len(other_ms):
        raise ValueError(f"base_ms, other_ms: one time per round each, got {len(base_ms)} and {len(other_ms)}")
    b, o = median(base_ms), median(other_ms)
    rounds = [100 * (ratio(x, y) - 1) for x, y in zip(other_ms, base_ms)]
    rounds_number = series(rounds, 0, "%", DIFFERENCE) if len(rounds) > 1 else number(rounds[0], 0, "%", DIFFERENCE)
    slower = 100 * (ratio(o, b) - 1)
    numbers = {"t_from": number(window[0], 0), "t_to": number(window[1], 0), "n": number(len(rounds), 0),
               "other_ms": number(o, 2, "ms"), "base_ms": number(b, 2, "ms"), "rounds": rounds_number,
               "diff": number(abs(slower), 0, "%")}
    return PACE.choose(numbers, {"other": other, "base": base, "when": when})


def show_claims(claims: list[Claim]) -> None:
    """Display this chapter's claims in Chinese, recorded in the output's metadata (``kvlab.claims.show``)."""
    show(claims, ZH)


@dataclass
class GrowthComparison:
    """kvlab's two caches and, when transformers is installed, its DynamicCache and StaticCache on the same
    weights and tokens, run in alternating rounds. ``transformers_skipped`` says why they are missing."""

    runs: dict[str, CacheGrowth]
    prompt_len: int
    repeats: int
    per_token_bytes: int  # K and V of one token, all layers
    weight_bytes: int
    config: ModelConfig
    device: torch.device
    threads: int
    llc: LastLevelCache | None
    transformers_skipped: str | None = None

    @property
    def peak_bytes(self) -> int:
        """The largest cache of the run: kvlab's preallocated one, sized for the last pass."""
        return self.runs["kv"].allocated_bytes[-1]

    def working_set(self, tokens: int) -> int:
        """Bytes one concatenating step touches at ``tokens`` cached: the old copy, the new copy, the weights."""
        return 2 * tokens * self.per_token_bytes + self.weight_bytes

    @property
    def llc_tokens(self) -> float | None:
        """Cached tokens at which a concatenating step's working set fills the last-level cache (None when its
        size is unknown; 0 when the weights alone do not fit)."""
        if self.llc is None:
            return None
        return max(0.0, (self.llc.bytes - self.weight_bytes) / (2 * self.per_token_bytes))

    def _windows(self) -> dict[str, tuple[int, int]]:
        """The cached lengths of the passes :meth:`CacheGrowth.early_ms` and :meth:`CacheGrowth.late_ms` take."""
        t = self.runs["kv"].t
        early = t[1:][: max(1, (len(t) - 1) // 4)]
        return {"early": (early[0], early[-1]), "late": (t[len(t) // 2], t[-1])}

    def claims(self) -> list[Claim]:
        """What the times say (:data:`PACE`): kvlab's concatenating cache against its preallocated one late in the
        run; with transformers, StaticCache against DynamicCache early (short caches) and DynamicCache against
        StaticCache late. :func:`show_claims` prints them."""
        w = self._windows()
        kv, dyn = self.runs["kv"], self.runs["dynamic"]
        said = [pace_claim("kv", kv.late_ms(), "dynamic", dyn.late_ms(), "late", w["late"])]
        if "transformers:static" in self.runs:
            static, dynamic = self.runs["transformers:static"], self.runs["transformers:dynamic"]
            said += [pace_claim("transformers:dynamic", dynamic.early_ms(), "transformers:static", static.early_ms(),
                                "early", w["early"]),
                     pace_claim("transformers:static", static.late_ms(), "transformers:dynamic", dynamic.late_ms(),
                                "late", w["late"])]
        return said

    def llc_sentence(self) -> str:
        """The cache's peak size against the last-level cache, and what that means for the copies."""
        gpu = self.device.type == "cuda"
        where, memory = ("GPU", "显存") if gpu else ("CPU", "内存")
        peak = format_bytes(self.peak_bytes)
        if self.llc is None:
            return (f"缓存最大 {peak}（K 和 V，所有层）；没有读到这台机器 {where} 最后一级缓存的大小，"
                    "无法判断整个缓存装不装得进去。")
        level, size = self.llc.level, format_bytes(self.llc.bytes)
        t = self.runs["kv"].t[-1]
        touched = self.working_set(t)
        head = (f"缓存最大 {peak}（K 和 V，所有层），这台机器 {where} 的 {level} 缓存是 {size}（读自 {self.llc.source}）。"
                f"逐步拼接的一步要碰到旧的一份缓存、新拷贝的一份，再加上 {format_bytes(self.weight_bytes)} 权重："
                f"缓存里有 {t} 个 token 时共 {format_bytes(touched)}")
        if touched <= self.llc.bytes:
            return (head + f"，装得进 {level}：拷贝的数据可以一直留在 {level} 里，不必到{memory}里读写，"
                           "所以拷贝的代价可能小到测不出来。")
        return (head + f"，是 {level} 的 {plots.ratio_text(touched / self.llc.bytes)}：缓存里超过约 "
                       f"{math.floor(self.llc_tokens):,} 个 token 后就装不进 {level}，此后每步拷贝的数据都要到"
                       f"{memory}里读写。")

    def readout_html(self) -> str:
        c, kv, dyn = self.config, self.runs["kv"], self.runs["dynamic"]
        on = device_label(self.device, self.threads)
        lines = [
            f"模型：{c.n_layer} 层，每层 {c.n_kv_head} 个 {c.head_dim} 维的 KV 头，d_model = {c.d_model}；每个 token 的"
            f"缓存 {format_bytes(self.per_token_bytes)}（FP32），全部权重 {format_bytes(self.weight_bytes)}，只相当于 "
            f"{self.weight_bytes / self.per_token_bytes:.0f} 个 token 的缓存。"
            f"每种缓存生成 {kv.t[-1] - self.prompt_len + 1} 个 token，交替运行 {self.repeats} 轮（{on}）。",
            self.llc_sentence(),
            f"{CHAPTER_LABELS['kv']}：共 {kv.allocations[-1]} 次分配，写入 {format_bytes(kv.bytes_copied[-1])}，"
            f"第 0 层的 K 始终是同一块（{kv.layer0_k_tensors[-1]} 块）。",
            f"{CHAPTER_LABELS['dynamic']}：共 {dyn.allocations[-1]:,} 次分配，写入 {format_bytes(dyn.bytes_copied[-1])}，"
            f"第 0 层的 K 换了 {dyn.layer0_k_tensors[-1]} 块。",
        ]
        if self.transformers_skipped:
            lines.append(self.transformers_skipped)
        else:
            hf_dyn, hf_static = self.runs["transformers:dynamic"], self.runs["transformers:static"]
            lines += [f"transformers DynamicCache：第 0 层的 K 换了 {hf_dyn.layer0_k_tensors[-1]} 块，缓存张量的长度从 "
                      f"{hf_dyn.attended[0]} 个位置长到 {hf_dyn.attended[-1]} 个。",
                      f"transformers StaticCache：第 0 层的 K 始终是 {hf_static.layer0_k_tensors[-1]} 块，缓存张量从第一步起"
                      f"就是全部 {hf_static.attended[0]} 个位置（没填的位置在注意力里用掩码遮住）。",
                      ]
        lines.append("各种缓存每次前向的耗时谁快谁慢，按这次测到的数字写在下一格的输出里（重新测量之后，再运行下一格）。")
        return "<br>".join(html.escape(line) for line in lines)

    def figure(self):
        llc = None
        if self.llc is not None:
            llc = (f"{self.llc.level} = {format_bytes(self.llc.bytes)}", self.llc_tokens)
        return plots.cache_growth_figure(self.runs, CHAPTER_LABELS, llc)


def wide_cache_model(seed: int = 0, device=None) -> ToyTransformer:
    """Thin weights, wide cache: 4 layers of 32 heads of 256 numbers (256 KiB of K/V per token in FP32) on a model
    width of 32, so 64 tokens of cache outweigh all the weights and cache copies are visible next to weight reads."""
    config = ModelConfig(vocab_size=512, d_model=32, n_layer=4, n_head=32, head_dim=256, max_seq_len=512)
    model = ToyTransformer(config, seed=seed).eval()
    with torch.no_grad():  # a random model's logits are nearly tied: scaled up, greedy choices are decisive,
        model.lm_head.weight.mul_(20)  # so float rounding (kvlab vs transformers, CPU vs GPU) picks the same tokens
    return model if device is None else model.to(device)


def watch_layer0_k(cache) -> tuple[list[int], list[int]]:
    """After each write to layer 0 (one per forward pass), record ``cache.k[0].data_ptr()`` (a reallocated
    tensor shows up as a new address) and how many positions of K the write handed to attention."""
    addresses: list[int] = []
    attended: list[int] = []
    write = cache.write

    def write_and_watch(layer, k, v):
        out = write(layer, k, v)  # (K, V) [B, H_kv, positions, D] for attention
        if layer == 0:
            addresses.append(cache.k[0].data_ptr())
            attended.append(out[0].shape[2])
        return out

    cache.write = write_and_watch
    return addresses, attended


def _kvlab_run(model, prompt, new_tokens, mode):
    """One generation with a fresh kvlab cache, watched: (GenerationResult, layer 0's K addresses, K positions)."""
    cache_class = {"kv": KVCache, "dynamic": DynamicKVCache}[mode]
    cache = cache_class(model.config, 1, stored_tokens(prompt.shape[1], new_tokens), dtype=model.dtype, device=model.device)
    addresses, attended = watch_layer0_k(cache)
    return generate(model, prompt, new_tokens, cache=cache), addresses, attended


def _kvlab_growth(mode: str, repeats: list) -> CacheGrowth:
    res, addresses, attended = repeats[0]
    tr = res.trace
    return CacheGrowth(mode, [r.seq_len for r in tr], [[r.seconds * 1e3 for r in rep[0].trace] for rep in repeats],
                       distinct_so_far(addresses), res.tokens, [r.allocations for r in tr],
                       [r.bytes_copied for r in tr], [r.cache_allocated_bytes for r in tr], attended)


def _transformers_growth(kind: str, repeats: list) -> CacheGrowth:
    first = repeats[0]
    return CacheGrowth(f"transformers:{kind}", first.seq_len, [[s * 1e3 for s in run.seconds] for run in repeats],
                       first.reallocations, first.predicted, attended=first.layer0_k_len)


def compare_cache_growth(model: ToyTransformer, new_tokens: int, prompt_len: int = 8, repeats: int = 3,
                         with_transformers: bool = True) -> GrowthComparison:
    """Generate with kvlab's preallocated ("kv") and concatenating ("dynamic") caches on one prompt and (if
    transformers is installed) feed the same tokens through its DynamicCache and StaticCache: ``repeats`` rounds,
    the caches alternating within each round after a warm-up (``kvlab.measure.alternate``)."""
    from ..interop import hf_decode_run, to_hf_llama, transformers_missing

    new_tokens = positive_int("new_tokens", new_tokens)
    prompt_len = positive_int("prompt_len", prompt_len)
    repeats = positive_int("repeats", repeats)
    if new_tokens < 2:
        raise ValueError(f"new_tokens must be at least 2 (a prefill and a decode pass), got {new_tokens}")
    if stored_tokens(prompt_len, new_tokens) > model.config.max_seq_len:
        raise ValueError(f"new_tokens: prompt_len ({prompt_len}) + new_tokens ({new_tokens}) - 1 passes the model's "
                         f"max_seq_len ({model.config.max_seq_len})")
    prompt = (torch.arange(prompt_len)[None] % model.config.vocab_size).to(model.device)
    skipped = None
    threads = measurement_threads()
    with torch_threads(threads):
        reference = generate(model, prompt, new_tokens, cache="kv").tokens  # transformers is fed these; a warm-up
        runners = {mode: partial(_kvlab_run, model, prompt, new_tokens, mode) for mode in ("kv", "dynamic")}
        warm = {"kv": lambda: None, "dynamic": partial(generate, model, prompt, min(8, new_tokens), cache="dynamic")}
        if with_transformers:
            skipped = transformers_missing()  # None, or what to install, in Chinese
            if skipped is None:
                hf = to_hf_llama(model)
                for kind in HF_CACHE_KINDS:
                    runners[f"transformers:{kind}"] = partial(hf_decode_run, hf, reference, prompt_len, kind)
                    warm[f"transformers:{kind}"] = partial(hf_decode_run, hf, reference[:, : prompt_len + 4],
                                                           prompt_len, kind)
        else:
            skipped = "这次没有要求运行 transformers"
        results = alternate(runners, repeats, warmup=warm)
    runs = {mode: _kvlab_growth(mode, results[mode]) for mode in ("kv", "dynamic")}
    runs |= {name: _transformers_growth(name.split(":")[1], reps) for name, reps in results.items()
             if name.startswith("transformers:")}
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return GrowthComparison(runs, prompt_len, repeats, kv_bytes_per_token(model.config, model.dtype), weights,
                            model.config, model.device, threads, last_level_cache(model.device), skipped)


GROWTH_PROMPT = 8  # prompt tokens of the growth runs
GROWTH_LENGTHS = (64, 128, 256)  # tokens in the cache after the last pass: the panel's choices
GROWTH_LABEL = "缓存最多存多少个 token"


def growth_choices(model: ToyTransformer, lengths=GROWTH_LENGTHS) -> list[tuple[str, int]]:
    """The dropdown's options: each length with the cache's size at that length."""
    per_token = kv_bytes_per_token(model.config, model.dtype)
    return [(f"{n} 个 token（缓存最大 {format_bytes(n * per_token)}）", n) for n in lengths]


def render_growth(model: ToyTransformer, tokens) -> View:
    """The growth panel: run the comparison up to ``tokens`` cached tokens; counts and times (the claims about
    the times are shown by the next cell: :meth:`GrowthComparison.claims`)."""
    tokens = choice(GROWTH_LABEL, tokens, GROWTH_LENGTHS)
    start = time.perf_counter()
    growth = compare_cache_growth(model, tokens - GROWTH_PROMPT + 1, GROWTH_PROMPT)
    took = time.perf_counter() - start
    return View([growth.figure()], growth.readout_html() + f"<br>这次测量一共用了 {took:.0f} 秒。", growth)


def growth_panel(model: ToyTransformer, tokens: int = GROWTH_LENGTHS[0]) -> Panel:
    """A length and a button: each click runs all caches again (a longer run takes longer)."""
    length = dropdown(GROWTH_LABEL, growth_choices(model), tokens, width="420px")
    return Panel({"tokens": length}, partial(render_growth, model), layout="horizontal", css_class="kvlab-growth",
                 button=run_button())


# -- padding in a batch -------------------------------------------------------------------------------
@dataclass
class PoolBlock:
    """One physical block of a paged cache: which sequence owns it, its place in that sequence, slots in use."""

    owner: int  # index of the sequence in the batch
    index: int  # the sequence's 0th, 1st ... block
    used: int  # slots holding tokens (block_size except in a sequence's last block)


@dataclass
class PaddingWaste:
    """Slots a padded batch allocates (the longest sequence plus ``reserve`` slots each for generation) vs uses,
    and what a paged cache of ``block_size`` holds for the same tokens (pages are taken as tokens arrive)."""

    lengths: list[int]
    block_size: int
    bytes_per_slot: int  # K and V of one token, all layers
    reserve: int = 0  # slots each sequence keeps free for the tokens it may still generate (padded layout only)

    @property
    def batch_size(self) -> int:
        return len(self.lengths)

    @property
    def max_len(self) -> int:
        return max(self.lengths)

    @property
    def padded_length(self) -> int:
        """Slots per sequence in the padded layout: the longest sequence plus the reserve."""
        return self.max_len + self.reserve

    @property
    def allocated_slots(self) -> int:
        return padded_slots(self.lengths, self.reserve)

    @property
    def used_slots(self) -> int:
        return sum(self.lengths)

    @property
    def blocks_per_sequence(self) -> list[int]:
        """Pages each sequence needs: its length rounded up to whole blocks."""
        return blocks_per_sequence(self.lengths, self.block_size)

    @property
    def paged_slots(self) -> int:
        return paged_slots(self.lengths, self.block_size)

    @property
    def waste_fraction(self) -> float:
        return 1 - self.used_slots / self.allocated_slots

    @property
    def paged_waste_fraction(self) -> float:
        return 1 - self.used_slots / self.paged_slots

    @property
    def allocated_bytes(self) -> int:
        return self.allocated_slots * self.bytes_per_slot

    @property
    def used_bytes(self) -> int:
        return self.used_slots * self.bytes_per_slot

    @property
    def paged_bytes(self) -> int:
        return self.paged_slots * self.bytes_per_slot

    @property
    def pool_size(self) -> int:
        """Blocks in the shared pool (counted, not built)."""
        return sum(self.blocks_per_sequence)

    def pool_blocks(self, limit: int | None = None) -> list[PoolBlock]:
        """The first ``limit`` blocks of the shared pool (all of them by default) in the order they were taken if all
        sequences grew one token per step together (``paging.pool_order``)."""
        count = self.pool_size if limit is None else min(limit, self.pool_size)
        return [PoolBlock(*block) for block in pool_order(self.lengths, self.block_size, count)]


def padding_waste(lengths, bytes_per_slot: int, block_size: int = 16, reserve: int = 0) -> PaddingWaste:
    """The waste of padding ``lengths`` to the longest (plus ``reserve`` slots each), and of paging them in blocks
    of ``block_size``."""
    if not isinstance(lengths, (list, tuple)) or not lengths:
        raise ValueError(f"lengths must be a non-empty list of sequence lengths, got {lengths!r}")
    return PaddingWaste([positive_int("lengths", n) for n in lengths], positive_int("block_size", block_size),
                        positive_int("bytes_per_slot", bytes_per_slot), non_negative_int("reserve", reserve))


LENGTHS_LABEL = "每条序列现在的长度（提示词 + 已生成）"
BLOCK_LABEL = "分页块大小"
RESERVE_LABEL = "每条序列为生成预留"


def render_padding(lengths, block_size, reserve=0) -> View:
    """The padding panel: one batch drawn padded and paged (per sequence and in the shared pool), and LLaMA-7B's
    bytes for it both ways."""
    values = whole_numbers(LENGTHS_LABEL, lengths, 1, 1_000_000, 64)
    block = whole_number(BLOCK_LABEL, block_size, 1, 4096)
    reserve = whole_number(RESERVE_LABEL, reserve, 0, 1_000_000)
    llama = MODEL_PRESETS["LLaMA-7B"]
    w = padding_waste(values, llama.kv_bytes_per_token("fp16"), block, reserve)
    if w.paged_bytes < w.allocated_bytes:
        paged = f"只需 {format_bytes(w.paged_bytes)}，比按最长者分配少 {format_bytes(w.allocated_bytes - w.paged_bytes)}"
    elif w.paged_bytes > w.allocated_bytes:
        paged = (f"反而需要 {format_bytes(w.paged_bytes)}，比按最长者分配多 "
                 f"{format_bytes(w.paged_bytes - w.allocated_bytes)}（块比序列还长时，每条序列最后一块的空位更多）")
    else:
        paged = f"同样需要 {format_bytes(w.paged_bytes)}"
    reserved = f"，每条再为生成预留 {w.reserve:,} 个" if w.reserve else ""
    readout = (
        f"B = {w.batch_size} 条序列，现在最长 {w.max_len:,} 个 token{reserved}：按最长者分配 {w.batch_size} × "
        f"{w.padded_length:,} = {w.allocated_slots:,} 个槽位，真正用到 {w.used_slots:,} 个，"
        f"<b>浪费 {w.waste_fraction:.1%}</b>。<br>"
        f"分页：{sum(w.blocks_per_sequence):,} 块 × {w.block_size} = {w.paged_slots:,} 个槽位，"
        f"<b>浪费 {w.paged_waste_fraction:.1%}</b>（只在每条序列的最后一块里；块在生成时按需领取，不必预留）。<br>"
        f"换成 {llama.name}（FP16，每个 token {format_bytes(w.bytes_per_slot)}）：按最长者分配 "
        f"{format_bytes(w.allocated_bytes)}，只用 {format_bytes(w.used_bytes)}；按每块 {w.block_size} 个 token 分页{paged}。"
    )
    return View([plots.padding_figure(w), plots.pool_figure(w)], readout, w)


def padding_panel() -> Panel:
    """A box of sequence lengths, the block size and the room reserved for generation."""
    return Panel({"lengths": text_box(LENGTHS_LABEL, "12, 40, 7, 33, 25, 60", width="480px"), "block_size": int_slider(BLOCK_LABEL, 16, 1, 64, width="380px"),
                  "reserve": int_slider(RESERVE_LABEL, 0, 0, 256, step=8, width="380px")}, render_padding,
                 layout="horizontal", css_class="kvlab-padding", in_browser=("block_size", "reserve"))


def measured_padding_bytes(lengths, config: ModelConfig, dtype="fp32") -> tuple[int, int]:
    """Allocate a real padded cache for ``lengths``: (allocated bytes, bytes the real tokens fill)."""
    lengths = [positive_int("lengths", n, maximum=config.max_seq_len) for n in lengths]
    cache = KVCache(config, len(lengths), max(lengths), dtype=dtype)
    per_token_row = cache.nbytes // (len(lengths) * max(lengths))
    return cache.nbytes, per_token_row * sum(lengths)

