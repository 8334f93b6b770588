"""Chapter 3.2 KV Cache 的存储结构: the cache tensor's five dimensions, the memory formula and its
panel, real models' numbers, preallocation vs concatenation, and padding waste in a batch."""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from functools import partial

import torch

from .._validate import positive_int
from ..cache import KVCache
from ..config import ModelConfig
from ..generation import generate
from ..inputs import choice, whole_number, whole_numbers
from ..measure import measurement_threads, torch_threads
from ..memory import DTYPE_BITS, format_bytes, kv_cache_bytes
from ..model import ToyTransformer
from ..presets import MODEL_PRESETS
from ..viz import storage_plots as plots
from ..viz.widgets import Panel, View, dropdown, int_box, int_slider, play_slider

MAX_S, MAX_B = 10_000_000, 100_000  # beyond any real model's context or batch: treated as a typing error


# -- the memory formula, live ------------------------------------------------------------------------
@dataclass
class MemoryReadout:
    """The formula's inputs and what it gives, as shown by the memory panel."""

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


def render_memory(L, H, D, S, B, dtype, filled_pct) -> View:
    """The memory panel: the formula with the chosen values, the 5-D tensor picture, bytes against S."""
    r = MemoryReadout(L=whole_number("层数 L", L, 1, 1024), B=whole_number("批次 B", B, 1, MAX_B),
                      H=whole_number("KV 头数 H", H, 1, 1024), S=whole_number("序列长度 S", S, 1, MAX_S),
                      D=whole_number("头维度 D", D, 1, 4096), dtype=choice("数据类型", dtype, list(DTYPE_BITS)),
                      filled=0)
    r.filled = r.S * whole_number("已生成 (%)", filled_pct, 0, 100) // 100
    readout = (
        f"2 × L × B × H × S × D × 每元素字节 = 2 × {r.L} × {r.B} × {r.H} × {r.S:,} × {r.D} × "
        f"{DTYPE_BITS[r.dtype] / 8:g} B = <b>{r.total_bytes:,} B = {format_bytes(r.total_bytes)}</b><br>"
        f"每个token（单条序列，所有层的 K+V）：{format_bytes(r.per_token_bytes)}；"
        f"已生成 {r.filled:,} / {r.S:,} 个token，已用 {format_bytes(r.used_bytes)}"
    )
    figures = [plots.cache_grid_figure(r.L, r.B, r.H, r.S, r.D, filled=r.filled, dtype=r.dtype),
               plots.memory_vs_seq_figure(r.L, r.B, r.H, r.D, r.S, r.dtype)]
    return View(figures, readout, r)


def memory_panel() -> Panel:
    """L/H/D sliders, S and B boxes, a dtype menu and a Play button filling the cache."""
    play, fill_slider = play_slider("已生成 (%)", 30, 0, 100, interval_ms=150)
    fill_slider.step = play.step = 5
    return Panel({"L": int_slider("层数 L", 32, 1, 128), "H": int_slider("KV 头数 H", 32, 1, 128),
                  "D": int_slider("头维度 D", 128, 16, 256, step=16), "S": int_box("序列长度 S", 1024),
                  "B": int_box("批次 B", 1), "dtype": dropdown("数据类型", list(DTYPE_BITS), "fp16", width="200px"),
                  "filled_pct": fill_slider},
                 render_memory, extra={"filled_pct": play}, layout="horizontal", css_class="kvlab-memory")


# -- real models -------------------------------------------------------------------------------------
TABLE_MODELS = ["GPT-2 (124M)", "LLaMA-7B", "LLaMA-13B", "LLaMA-65B", "Llama-2-70B", "Llama-3-8B"]
MHA_TWINS = {"Llama-2-70B": "LLaMA-65B", "Llama-3-8B": "LLaMA-7B"}  # same layers and head size, but MHA


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


def model_table_html(names=TABLE_MODELS, seq_lens=(1024, 4096)) -> str:
    """The chapter's table of typical values, recomputed from published configurations (B = 1, FP16)."""
    head = ("<tr><th>模型</th><th>层数 L</th><th>查询头</th><th>KV 头 H</th><th>头维度 D</th><th>隐藏维度</th>"
            "<th>每token（FP16）</th>" + "".join(f"<th>S={s}</th>" for s in seq_lens) + "</tr>")
    rows = []
    for name in names:
        p = MODEL_PRESETS[name]
        cells = [html.escape(p.name), p.n_layer, p.n_head, p.n_kv_head, p.head_dim, p.hidden_size,
                 format_bytes(p.kv_bytes_per_token("fp16")), *[format_bytes(p.kv_cache_bytes(s)) for s in seq_lens]]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    notes = "；".join(f"{g.model} 每 {g.query_heads_per_kv_head} 个查询头共用一组 K/V，每个token的缓存是 "
                     f"{g.mha_twin} 的 1/{g.ratio:g}" for g in gqa_savings())
    return (f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
            f"<p style='font-size:90%'>B = 1，FP16。{notes}。</p>")


# -- preallocation vs concatenation ----------------------------------------------------------------
@dataclass
class CacheGrowth:
    """One generation's cache bookkeeping, per pass."""

    mode: str
    t: list[int]
    allocations: list[int]  # storage tensors allocated so far
    bytes_copied: list[int]  # bytes written into storage so far
    allocated_bytes: list[int]
    step_ms: list[float]
    tokens: torch.Tensor


def wide_cache_model(seed: int = 0) -> ToyTransformer:
    """Thin weights, wide cache (16 heads of 64 per layer): cache copies are visible next to weight reads."""
    config = ModelConfig(vocab_size=512, d_model=256, n_layer=8, n_head=16, head_dim=64, max_seq_len=4096)
    return ToyTransformer(config, seed=seed).eval()


def compare_cache_growth(model: ToyTransformer, new_tokens: int, prompt_len: int = 8) -> dict[str, CacheGrowth]:
    """Run "kv" (preallocated) and "dynamic" (concatenation) on the same prompt, after a warm-up each."""
    new_tokens = positive_int("new_tokens", new_tokens)
    prompt_len = positive_int("prompt_len", prompt_len)
    prompt = torch.arange(prompt_len)[None] % model.config.vocab_size
    out = {}
    with torch_threads(measurement_threads()):
        for mode in ("kv", "dynamic"):
            generate(model, prompt, min(8, new_tokens), cache=mode)  # warm-up
            res = generate(model, prompt, new_tokens, cache=mode)
            tr = res.trace
            out[mode] = CacheGrowth(mode, [r.seq_len for r in tr], [r.allocations for r in tr],
                                    [r.bytes_copied for r in tr], [r.cache_allocated_bytes for r in tr],
                                    [r.seconds * 1e3 for r in tr], res.tokens)
    return out


# -- padding in a batch -------------------------------------------------------------------------------
@dataclass
class PaddingWaste:
    """Slots a padded batch allocates vs uses, and what a paged cache of ``block_size`` would allocate."""

    lengths: list[int]
    block_size: int
    bytes_per_slot: int  # K and V of one token, all layers

    @property
    def batch_size(self) -> int:
        return len(self.lengths)

    @property
    def max_len(self) -> int:
        return max(self.lengths)

    @property
    def allocated_slots(self) -> int:
        return self.batch_size * self.max_len

    @property
    def used_slots(self) -> int:
        return sum(self.lengths)

    @property
    def paged_slots(self) -> int:
        return sum(math.ceil(n / self.block_size) * self.block_size for n in self.lengths)

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


def padding_waste(lengths, bytes_per_slot: int, block_size: int = 16) -> PaddingWaste:
    """The waste of padding ``lengths`` to the longest, and of paging them in blocks of ``block_size``."""
    if not isinstance(lengths, (list, tuple)) or not lengths:
        raise ValueError(f"lengths must be a non-empty list of sequence lengths, got {lengths!r}")
    return PaddingWaste([positive_int("lengths", n) for n in lengths], positive_int("block_size", block_size),
                        positive_int("bytes_per_slot", bytes_per_slot))


def render_padding(lengths, block_size) -> View:
    """The padding panel: a padded batch drawn row by row, and LLaMA-7B's bytes for it, padded and paged."""
    values = whole_numbers("序列长度（提示+生成）", lengths, 1, 1_000_000, 64)
    block = whole_number("分页块大小", block_size, 1, 4096)
    llama = MODEL_PRESETS["LLaMA-7B"]
    w = padding_waste(values, llama.kv_bytes_per_token("fp16"), block)
    if w.paged_bytes < w.allocated_bytes:
        paged = f"只需 {format_bytes(w.paged_bytes)}，比按最长者分配少 {format_bytes(w.allocated_bytes - w.paged_bytes)}"
    elif w.paged_bytes > w.allocated_bytes:
        paged = (f"反而需要 {format_bytes(w.paged_bytes)}，比按最长者分配多 "
                 f"{format_bytes(w.paged_bytes - w.allocated_bytes)}（块比序列还长时，每条序列最后一块的空位更多）")
    else:
        paged = f"同样需要 {format_bytes(w.paged_bytes)}"
    readout = (
        f"B = {w.batch_size} 条序列，最长 {w.max_len:,} 个token：分配 {w.allocated_slots:,} 个槽位，"
        f"真正用到 {w.used_slots:,} 个，<b>浪费 {w.waste_fraction:.1%}</b>。<br>"
        f"换成 {llama.name}（FP16，每个token {format_bytes(w.bytes_per_slot)}）：分配 {format_bytes(w.allocated_bytes)}，"
        f"只用 {format_bytes(w.used_bytes)}；按每块 {w.block_size} 个token分页{paged}。"
    )
    return View([plots.padding_figure(w)], readout, w)


def padding_panel() -> Panel:
    import ipywidgets as W

    lengths = W.Text(value="12, 40, 7, 33, 25, 60", description="序列长度（提示+生成）", continuous_update=False,
                     style={"description_width": "initial"}, layout=W.Layout(width="420px"))
    return Panel({"lengths": lengths, "block_size": int_slider("分页块大小", 16, 1, 64)}, render_padding,
                 layout="horizontal", css_class="kvlab-padding")


def measured_padding_bytes(lengths, config: ModelConfig, dtype="fp32") -> tuple[int, int]:
    """Allocate a real padded cache for ``lengths``: (allocated bytes, bytes the real tokens fill)."""
    lengths = [positive_int("lengths", n, maximum=config.max_seq_len) for n in lengths]
    cache = KVCache(config, len(lengths), max(lengths), dtype=dtype)
    per_token_row = cache.nbytes // (len(lengths) * max(lengths))
    return cache.nbytes, per_token_row * sum(lengths)


def per_token_bytes(config: ModelConfig, dtype="fp32") -> int:
    """K and V of one token of one sequence, all layers, for a kvlab model config."""
    return kv_cache_bytes(config.n_layer, config.n_kv_head, config.head_dim, 1, 1, dtype)
