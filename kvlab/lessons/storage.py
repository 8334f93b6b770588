"""Chapter 3.2 (the KV cache's storage and shape): the cache tensor's five dimensions, the memory formula and its
panel, real models' numbers, preallocation vs concatenation (kvlab's caches and transformers'), and
padding waste in a batch, padded and paged."""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import partial

import torch

from .._validate import positive_int
from ..cache import DynamicKVCache, KVCache
from ..config import ModelConfig
from ..generation import generate
from ..interop import distinct_so_far
from ..inputs import choice, whole_number, whole_numbers
from ..measure import measurement_threads, median, torch_threads
from ..memory import DTYPE_BITS, format_bytes, kv_cache_bytes
from ..model import ToyTransformer
from ..presets import LATENT, MODEL_PRESETS, ModelPreset
from ..viz import storage_plots as plots
from ..viz.style import MODE_LABELS
from ..viz.widgets import Panel, View, dropdown, int_box, int_slider, play_slider

MAX_S, MAX_B = 10_000_000, 100_000  # beyond any real model's context or batch: treated as a typing error


# -- the memory formula, live ------------------------------------------------------------------------
CHAPTER_EXAMPLE = (32, 32, 128, 1024, "fp16")  # the original chapter's (L, H, D, S, dtype), B = 1


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


def example_bytes(example=CHAPTER_EXAMPLE) -> int:
    """Bytes of the chapter's example cache (B = 1)."""
    L, H, D, S, dtype = example
    return kv_cache_bytes(L, H, D, S, 1, dtype)


def times_text(ratio: float) -> str:
    """A size ratio as a learner reads it: "8 倍", "1/4", "1.5 倍"."""
    if ratio >= 1:
        return f"{ratio:,.3g} 倍"
    return f"1/{1 / ratio:,.3g}"


def render_memory(L, H, D, S, B, dtype, filled_pct) -> View:
    """The memory panel: the formula with the chosen values, the tensor drawn to scale, bytes against S."""
    r = MemoryReadout(L=whole_number("层数 L", L, 1, 1024), B=whole_number("批次 B", B, 1, MAX_B),
                      H=whole_number("KV 头数 H", H, 1, 1024), S=whole_number("序列长度 S", S, 1, MAX_S),
                      D=whole_number("头维度 D", D, 1, 4096), dtype=choice("数据类型", dtype, list(DTYPE_BITS)),
                      filled=0)
    r.filled = r.S * whole_number("已生成（%）", filled_pct, 0, 100) // 100
    eL, eH, eD, eS, edtype = CHAPTER_EXAMPLE
    readout = (
        f"2 × L × B × H × S × D × 每元素字节 = 2 × {r.L} × {r.B:,} × {r.H} × {r.S:,} × {r.D} × "
        f"{DTYPE_BITS[r.dtype] / 8:g} B = <b>{r.total_bytes:,} B"
        f"{'' if r.total_bytes < 1024 else ' = ' + format_bytes(r.total_bytes)}</b>，"
        f"是原文示例（L={eL}、B=1、H={eH}、S={eS:,}、D={eD}、{edtype}）的 {times_text(r.total_bytes / example_bytes())}<br>"
        f"每个 token（1 条序列，所有层的 K 和 V）：{format_bytes(r.per_token_bytes)}；"
        f"已生成 {r.filled:,} / {r.S:,} 个 token，已用 {format_bytes(r.used_bytes)}"
    )
    figures = [plots.cache_tensor_figure(r.L, r.B, r.H, r.S, r.D, r.filled, r.dtype, reference=CHAPTER_EXAMPLE),
               plots.memory_vs_seq_figure(r.L, r.B, r.H, r.D, r.S, r.dtype)]
    return View(figures, readout, r)


def _caption(text: str):
    import ipywidgets as W

    return W.HTML(f"<b>{text}</b>", layout=W.Layout(width="auto"))


def memory_panel() -> Panel:
    """Three rows: the model's shape (L, H, D), the request (B, S, dtype), and Play filling the cache."""
    play, fill_slider = play_slider("已生成（%）", 30, 0, 100, interval_ms=150)
    fill_slider.step = play.step = 5
    fill_slider.layout.width = "300px"
    L, H, D, S, dtype = CHAPTER_EXAMPLE
    controls = {"L": int_slider("层数 L", L, 1, 128, width="300px"),
                "H": int_slider("KV 头数 H", H, 1, 128, width="300px"),
                "D": int_slider("头维度 D", D, 16, 256, step=16, width="300px"),
                "B": int_box("批次 B", 1, width="200px"), "S": int_box("序列长度 S", S, width="220px"),
                "dtype": dropdown("数据类型", list(DTYPE_BITS), dtype, width="200px"),
                "filled_pct": fill_slider}
    extra = {"L": _caption("模型的形状"), "B": _caption("这次推理"), "filled_pct": play}
    return Panel(controls, render_memory, extra=extra, layout="grid", columns=4, css_class="kvlab-memory")


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
    """One generation's cache, pass by pass: what was observed (time, layer 0's K storage) for every cache,
    and what kvlab counts itself (allocations, bytes written) for kvlab's."""

    name: str  # "kv", "dynamic" (kvlab) or "transformers:dynamic", "transformers:static"
    t: list[int]  # tokens in the cache after each pass
    step_ms: list[float]  # wall time of each forward pass
    layer0_k_tensors: list[int]  # distinct K tensors layer 0 has used so far (its data_ptr() changed)
    tokens: torch.Tensor  # kvlab: the tokens generated [B, prompt + new]; transformers: its greedy choices [B, passes]
    allocations: list[int] | None = None  # kvlab: storage tensors allocated so far (all layers, K and V)
    bytes_copied: list[int] | None = None  # kvlab: bytes written into storage so far
    allocated_bytes: list[int] | None = None  # kvlab: bytes allocated for storage
    attended: list[int] | None = None  # positions of K that layer 0's attention was given in each pass

    def smoothed_ms(self, window: int = 15) -> list[float]:
        """Each pass's time as the median of the ``window`` passes around it (timer spikes removed)."""
        half = window // 2
        return [median(self.step_ms[max(0, i - half): i + half + 1]) for i in range(len(self.step_ms))]

    def late_ms(self) -> float:
        """Median time of a pass over the second half of the run (the longest caches)."""
        return median(self.step_ms[len(self.step_ms) // 2:])

    def early_ms(self) -> float:
        """Median time of the first quarter of the decode passes (short caches)."""
        decode = self.step_ms[1:]
        return median(decode[: max(1, len(decode) // 4)])


@dataclass
class GrowthComparison:
    """kvlab's two caches and, when transformers is installed, its DynamicCache and StaticCache on the same
    weights and tokens. ``transformers_skipped`` says why they are missing."""

    runs: dict[str, CacheGrowth]
    prompt_len: int
    transformers_skipped: str | None = None

    def kvlab_sentence(self) -> str:
        """How much slower kvlab's concatenating cache measured than its preallocated one, late in the run."""
        kv, dyn = self.runs["kv"], self.runs["dynamic"]
        return pace_sentence(MODE_LABELS["kv"], kv.late_ms(), MODE_LABELS["dynamic"], dyn.late_ms())

    def transformers_sentences(self) -> list[str]:
        """StaticCache against DynamicCache, early (short caches) and late in the run."""
        if "transformers:static" not in self.runs:
            return []
        static, dynamic = self.runs["transformers:static"], self.runs["transformers:dynamic"]
        return [pace_sentence("DynamicCache", dynamic.early_ms(), "StaticCache", static.early_ms(),
                              "前四分之一的解码步"),
                pace_sentence("StaticCache", static.late_ms(), "DynamicCache", dynamic.late_ms())]


def wide_cache_model(seed: int = 0, device=None) -> ToyTransformer:
    """Thin weights, wide cache (16 heads of 64 per layer): cache copies are visible next to weight reads."""
    config = ModelConfig(vocab_size=512, d_model=256, n_layer=8, n_head=16, head_dim=64, max_seq_len=4096)
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


def _kvlab_growth(model, prompt, new_tokens, mode) -> CacheGrowth:
    cache_class = {"kv": KVCache, "dynamic": DynamicKVCache}[mode]
    make = partial(cache_class, model.config, 1, prompt.shape[1] + new_tokens - 1, dtype=model.dtype,
                   device=model.device)
    generate(model, prompt, min(8, new_tokens), cache=mode)  # warm-up
    cache = make()
    addresses, attended = watch_layer0_k(cache)
    res = generate(model, prompt, new_tokens, cache=cache)
    tr = res.trace
    return CacheGrowth(mode, [r.seq_len for r in tr], [r.seconds * 1e3 for r in tr], distinct_so_far(addresses),
                       res.tokens, [r.allocations for r in tr], [r.bytes_copied for r in tr],
                       [r.cache_allocated_bytes for r in tr], attended)


def _transformers_growth(model, tokens, prompt_len) -> dict[str, CacheGrowth]:
    from ..interop import hf_decode_run, to_hf_llama

    hf = to_hf_llama(model)
    out = {}
    for kind in ("dynamic", "static"):
        hf_decode_run(hf, tokens[:, : prompt_len + 8], prompt_len, kind)  # warm-up
        run = hf_decode_run(hf, tokens, prompt_len, kind)
        out[f"transformers:{kind}"] = CacheGrowth(f"transformers:{kind}", run.seq_len,
                                                  [s * 1e3 for s in run.seconds], run.reallocations, run.predicted,
                                                  attended=run.layer0_k_len)
    return out


def compare_cache_growth(model: ToyTransformer, new_tokens: int, prompt_len: int = 8,
                         with_transformers: bool = True) -> GrowthComparison:
    """Generate with kvlab's preallocated ("kv") and concatenating ("dynamic") caches on one prompt, then (if
    transformers is installed) feed the same tokens through its DynamicCache and StaticCache."""
    new_tokens = positive_int("new_tokens", new_tokens)
    prompt_len = positive_int("prompt_len", prompt_len)
    prompt = torch.arange(prompt_len)[None] % model.config.vocab_size
    skipped = None
    with torch_threads(measurement_threads()):
        runs = {mode: _kvlab_growth(model, prompt, new_tokens, mode) for mode in ("kv", "dynamic")}
        if with_transformers:
            try:
                runs |= _transformers_growth(model, runs["kv"].tokens, prompt_len)
            except ImportError as exc:
                skipped = f"没有安装 transformers，跳过它的 DynamicCache 和 StaticCache（{exc}）"
        else:
            skipped = "这次没有要求运行 transformers"
    return GrowthComparison(runs, prompt_len, skipped)


def _spaced(label: str) -> str:
    """A label inside a Chinese sentence: a space on a side where it begins or ends with a Latin letter."""
    return (" " if label[0].isascii() else "") + label + (" " if label[-1].isascii() else "")


def pace_sentence(fast_label: str, fast_ms: float, slow_label: str, slow_ms: float, when: str = "后半程") -> str:
    """One Chinese sentence saying how much slower ``slow`` measured than ``fast``, in the words that fit the
    measured ratio (within 10 %: no difference worth naming)."""
    ratio = slow_ms / fast_ms
    fast, slow = _spaced(fast_label), _spaced(slow_label)
    numbers = f"{slow}是 {slow_ms:.2f} ms，{fast}是 {fast_ms:.2f} ms".strip()
    if ratio >= 1.1:
        text = f"{when}每次前向：{numbers}，{slow}慢了 {ratio - 1:.0%}。"
    elif ratio > 1 / 1.1:
        text = f"{when}每次前向：{numbers}，相差不到 10%，在这台机器上分不出快慢。"
    else:
        text = f"{when}每次前向：{numbers}，这一次{slow}快了 {1 - ratio:.0%}。"
    return re.sub(r" *([，。：]) *", r"\1", text)  # no space next to full-width punctuation


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
    def blocks_per_sequence(self) -> list[int]:
        """Pages each sequence needs: its length rounded up to whole blocks."""
        return [-(-n // self.block_size) for n in self.lengths]

    @property
    def paged_slots(self) -> int:
        return sum(self.blocks_per_sequence) * self.block_size

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


LENGTHS_LABEL = "序列长度（提示词 + 生成）"


def render_padding(lengths, block_size) -> View:
    """The padding panel: one batch drawn padded and paged, and LLaMA-7B's bytes for it both ways."""
    values = whole_numbers(LENGTHS_LABEL, lengths, 1, 1_000_000, 64)
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
        f"B = {w.batch_size} 条序列，最长 {w.max_len:,} 个 token：分配 {w.allocated_slots:,} 个槽位，"
        f"真正用到 {w.used_slots:,} 个，<b>浪费 {w.waste_fraction:.1%}</b>。<br>"
        f"分页：{sum(w.blocks_per_sequence):,} 块 × {w.block_size} = {w.paged_slots:,} 个槽位，"
        f"<b>浪费 {w.paged_waste_fraction:.1%}</b>（只在每条序列的最后一块里）。<br>"
        f"换成 {llama.name}（FP16，每个 token {format_bytes(w.bytes_per_slot)}）：按最长者分配 "
        f"{format_bytes(w.allocated_bytes)}，只用 {format_bytes(w.used_bytes)}；按每块 {w.block_size} 个 token 分页{paged}。"
    )
    return View([plots.padding_figure(w)], readout, w)


def padding_panel() -> Panel:
    import ipywidgets as W

    lengths = W.Text(value="12, 40, 7, 33, 25, 60", description=LENGTHS_LABEL, continuous_update=False,
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
