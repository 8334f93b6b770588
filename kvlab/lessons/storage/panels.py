"""Chapter 3.2's panels: the shape (L, H, D, S and the fill, drawn to scale in numbers), the bytes (B and
the dtype, following the shape panel), the growth run (a length and a run button: every cache measured again) and
the padding of a batch (typed lengths, block size, room reserved). Each control's label is one constant, used by
the control and by its check."""
from __future__ import annotations

import time
from functools import partial

from ...inputs import choice, whole_number, whole_numbers
from ...memory import DTYPE_BITS, format_bytes, kv_bytes_per_token
from ...model import ToyTransformer
from ...presets import MODEL_PRESETS
from ...viz import storage_plots as plots
from ...viz.widgets import (Panel, PanelOptions, View, bold_label, dropdown, int_box, int_slider, play_slider,
                            run_button, text_box)
from .growth import compare_cache_growth
from .padding import padding_waste
from .shape import (CHAPTER_EXAMPLE, MAX_B, MemoryReadout, QUANTIZED, SHAPE_LABELS, example_bytes, example_numbers,
                   example_text, gpu_lines, shape_of)


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
    return Panel(controls, render_shape, static=("filled_pct", "L", "D"), in_browser=("L", "H", "D", "filled_pct"),
                 options=PanelOptions(extra=extra, layout="grid", columns=4, css_class="kvlab-shape"))


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

    panel = Panel(controls, render, options=PanelOptions(extra=[bold_label("形状取自上面的面板")], layout="horizontal",
                                       css_class="kvlab-bytes"))
    panel.follow(shape)
    return panel


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
    return Panel({"tokens": length}, partial(render_growth, model),
                 options=PanelOptions(layout="horizontal", css_class="kvlab-growth", button=run_button()))


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
                  "reserve": int_slider(RESERVE_LABEL, 0, 0, 256, step=8, width="380px")},
                 render_padding, in_browser=("block_size", "reserve"),
                 options=PanelOptions(layout="horizontal", css_class="kvlab-padding"))
