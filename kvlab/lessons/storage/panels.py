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
from .shape import (CHAPTER_EXAMPLE, MAX_B, MemoryReadout, QUANTIZED, example_bytes, example_numbers,
                   example_text, gpu_lines, shape_label, shape_of)
from .phrases import TEXTS


def render_shape(L, H, D, S, filled_pct) -> View:
    """The shape panel: K of one sequence drawn to scale in numbers, the counts, and the fill."""
    s = shape_of(L, H, D, S, filled_pct)
    readout = TEXTS.say("shape_html", L=s.L, H=s.H, S=s.S, D=s.D, per_layer=s.H * s.D, per_token=s.numbers_per_token,
                        numbers=s.numbers, filled=s.filled,
                        compared=plots.compared_with(s.numbers, example_numbers(), TEXTS.say("original_example")))
    figure = plots.cache_tensor_figure(s.L, s.H, s.D, s.S, s.filled, reference=CHAPTER_EXAMPLE[:4])
    return View([figure], readout, s)


def shape_panel() -> Panel:
    """Two rows: the model's shape (L, H, D), then the request (S) with Play filling it."""
    play, fill_slider = play_slider(shape_label("filled_pct"), 30, 0, 100, interval_ms=150)
    fill_slider.step = play.step = 5
    fill_slider.layout.width = "300px"
    L, H, D, S, _ = CHAPTER_EXAMPLE
    controls = {"L": int_slider(shape_label("L"), L, 1, 128, width="300px"),
                "H": int_slider(shape_label("H"), H, 1, 128, width="300px"),
                "D": int_slider(shape_label("D"), D, 16, 256, step=16, width="300px"),
                "S": int_box(shape_label("S"), S, width="220px"), "filled_pct": fill_slider}
    extra = {"L": bold_label(TEXTS.say("row.model")), "S": bold_label(TEXTS.say("row.request")), "filled_pct": play}
    return Panel(controls, render_shape, static=("filled_pct", "L", "D"), in_browser=("L", "H", "D", "filled_pct"),
                 options=PanelOptions(extra=extra, layout="grid", columns=4, css_class="kvlab-shape"))


# The controls' labels as the Chinese edition shows them (tests match errors against them); a panel shows each in the
# course's language, label(...), asked when the panel or its error is made.
BATCH_LABEL, DTYPE_LABEL = TEXTS.text("label.batch", "zh"), TEXTS.text("label.dtype", "zh")  # the bytes panel's
GROWTH_LABEL = TEXTS.text("label.growth", "zh")
LENGTHS_LABEL = TEXTS.text("label.lengths", "zh")
BLOCK_LABEL = TEXTS.text("label.block", "zh")
RESERVE_LABEL = TEXTS.text("label.reserve", "zh")
LABEL_KEYS = {BATCH_LABEL: "label.batch", DTYPE_LABEL: "label.dtype", GROWTH_LABEL: "label.growth",
              LENGTHS_LABEL: "label.lengths", BLOCK_LABEL: "label.block", RESERVE_LABEL: "label.reserve"}


def label(constant: str) -> str:
    """A control's label (one of the ``*_LABEL`` constants) in the course's language."""
    return TEXTS.say(LABEL_KEYS[constant])


def render_bytes(B, dtype, L, H, D, S, filled_pct) -> View:
    """The bytes panel: the formula with the chosen values, the batch drawn to scale in bytes, bytes against S."""
    s = shape_of(L, H, D, S, filled_pct)
    r = MemoryReadout(L=s.L, B=whole_number(label(BATCH_LABEL), B, 1, MAX_B), H=s.H, S=s.S, D=s.D,
                      dtype=choice(label(DTYPE_LABEL), dtype, list(DTYPE_BITS)), filled=s.filled)
    total = r.total_bytes
    readout = TEXTS.say("bytes_html", L=r.L, B=r.B, H=r.H, S=r.S, D=r.D, element=DTYPE_BITS[r.dtype] / 8, total=total,
                        total_text="" if total < 1024 else " = " + format_bytes(total),
                        compared=plots.compared_with(total, example_bytes(), example_text()),
                        per_token=format_bytes(r.per_token_bytes), filled=r.filled, used=format_bytes(r.used_bytes),
                        quantized=TEXTS.say("quantized") if r.dtype in QUANTIZED else "")
    figures = [plots.batch_bytes_figure(r.L, r.B, r.H, r.S, r.D, r.filled, r.dtype, reference=CHAPTER_EXAMPLE),
               plots.memory_vs_seq_figure(r.L, r.B, r.H, r.D, r.S, r.dtype, reference=CHAPTER_EXAMPLE,
                                          capacities=gpu_lines())]
    return View(figures, readout, r)


def bytes_panel(shape: Panel) -> Panel:
    """B and the dtype; the shape (L, H, D, S, fill) is read from ``shape`` and followed as it changes."""
    controls = {"B": int_box(label(BATCH_LABEL), 1, width="200px"),
                "dtype": dropdown(label(DTYPE_LABEL), list(DTYPE_BITS), CHAPTER_EXAMPLE[4], width="200px")}

    def render(B, dtype) -> View:
        return render_bytes(B, dtype, **shape.values())

    panel = Panel(controls, render, options=PanelOptions(extra=[bold_label(TEXTS.say("bytes_follow"))], layout="horizontal",
                                       css_class="kvlab-bytes"))
    panel.follow(shape)
    return panel


GROWTH_PROMPT = 8  # prompt tokens of the growth runs
GROWTH_LENGTHS = (64, 128, 256)  # tokens in the cache after the last pass: the panel's choices


def growth_choices(model: ToyTransformer, lengths=GROWTH_LENGTHS) -> list[tuple[str, int]]:
    """The dropdown's options: each length with the cache's size at that length."""
    per_token = kv_bytes_per_token(model.config, model.dtype)
    return [(TEXTS.say("growth_choice", n=n, size=format_bytes(n * per_token)), n) for n in lengths]


def render_growth(model: ToyTransformer, tokens) -> View:
    """The growth panel: run the comparison up to ``tokens`` cached tokens; counts and times (the claims about
    the times are shown by the next cell: :meth:`GrowthComparison.claims`)."""
    tokens = choice(label(GROWTH_LABEL), tokens, GROWTH_LENGTHS)
    start = time.perf_counter()
    growth = compare_cache_growth(model, tokens - GROWTH_PROMPT + 1, GROWTH_PROMPT)
    took = time.perf_counter() - start
    return View([growth.figure()], growth.readout_html() + TEXTS.say("growth_took", took=took), growth)


def growth_panel(model: ToyTransformer, tokens: int = GROWTH_LENGTHS[0]) -> Panel:
    """A length and a button: each click runs all caches again (a longer run takes longer)."""
    length = dropdown(label(GROWTH_LABEL), growth_choices(model), tokens, width="420px")
    return Panel({"tokens": length}, partial(render_growth, model),
                 options=PanelOptions(layout="horizontal", css_class="kvlab-growth", button=run_button()))




def render_padding(lengths, block_size, reserve=0) -> View:
    """The padding panel: one batch drawn padded and paged (per sequence and in the shared pool), and LLaMA-7B's
    bytes for it both ways."""
    values = whole_numbers(label(LENGTHS_LABEL), lengths, 1, 1_000_000, 64)
    block = whole_number(label(BLOCK_LABEL), block_size, 1, 4096)
    reserve = whole_number(label(RESERVE_LABEL), reserve, 0, 1_000_000)
    llama = MODEL_PRESETS["LLaMA-7B"]
    w = padding_waste(values, llama.kv_bytes_per_token("fp16"), block, reserve)
    if w.paged_bytes < w.allocated_bytes:
        paged = TEXTS.say("paged_less", paged=format_bytes(w.paged_bytes),
                          diff=format_bytes(w.allocated_bytes - w.paged_bytes))
    elif w.paged_bytes > w.allocated_bytes:
        paged = TEXTS.say("paged_more", paged=format_bytes(w.paged_bytes),
                          diff=format_bytes(w.paged_bytes - w.allocated_bytes))
    else:
        paged = TEXTS.say("paged_same", paged=format_bytes(w.paged_bytes))
    reserved = TEXTS.say("reserved", reserve=w.reserve) if w.reserve else ""
    readout = TEXTS.say("padding_html", batch=w.batch_size, longest=w.max_len, reserved=reserved,
                        padded=w.padded_length, allocated=w.allocated_slots, used=w.used_slots, waste=w.waste_fraction,
                        blocks=sum(w.blocks_per_sequence), block_size=w.block_size, paged_slots=w.paged_slots,
                        paged_waste=w.paged_waste_fraction, model=llama.name, per_slot=format_bytes(w.bytes_per_slot),
                        allocated_bytes=format_bytes(w.allocated_bytes), used_bytes=format_bytes(w.used_bytes),
                        paged=paged)
    return View([plots.padding_figure(w), plots.pool_figure(w)], readout, w)


def padding_panel() -> Panel:
    """A box of sequence lengths, the block size and the room reserved for generation."""
    return Panel({"lengths": text_box(label(LENGTHS_LABEL), "12, 40, 7, 33, 25, 60", width="480px"),
                  "block_size": int_slider(label(BLOCK_LABEL), 16, 1, 64, width="380px"),
                  "reserve": int_slider(label(RESERVE_LABEL), 0, 0, 256, step=8, width="380px")},
                 render_padding, in_browser=("block_size", "reserve"),
                 options=PanelOptions(layout="horizontal", css_class="kvlab-padding"))
