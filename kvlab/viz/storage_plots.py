"""Plot builders of chapter 3.2 (the cache's storage and shape): pure functions, parameters in, figures out."""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..language import get_language
from ..paging import blocks_for
from ..memory import DTYPE_BITS, format_bytes, iec_unit, kv_cache_bytes
from ..phrases import Phrasebook
from .style import MODE_COLORS, MODE_LABELS, PALETTE, WIDE, apply_template, axis_title, new_figure

FILLED, EMPTY, PADDING, TAIL, RESERVED = PALETTE[0], "#e4e4e4", "#d0d0d0", "#F3C77A", "#f2dede"
# The sequences' own colours in the paging figures (no yellow or orange: those mark unused slots and layer 0)
OWNER_COLORS = ["#0072B2", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#882255", "#117733", "#332288"]
PLOT_PX = 250  # height of a tensor figure's plot area in pixels (440 px high, legend below)
MIN_GAP_PX = 4  # separators closer than this merge into a grey smear: draw every k-th instead
HALF_PLOT_PX = 420  # width of one of two side-by-side subplots in a WIDE figure, in pixels
MAX_POOL_BLOCKS = 1024  # physical blocks drawn one by one in the pool figure
GROWTH_DASH = {"transformers:dynamic": "dot", "transformers:static": "dot"}

# Every title, axis, legend entry and hover text of these figures, in both languages (read when a figure is made: the
# notebook sets the language after importing kvlab).
PLOTS = Phrasebook("storage.plots", {
    "zh": {
        "sep.layers": "<br>（每 {step} 层画一条分界）",
        "sep.heads": "<br>（每 {step} 个头画一条分界）",
        "sep.sequences": "<br>（每 {step} 条序列画一条分界）",
        "empty": "已分配、还空着",
        "empty_hover": "还空着的 {n:,} 个位置{note}",
        "filled": "已存的 token",
        "filled_hover": "已存 {n:,} 个 token{note}",
        "same_in_every": "（每条序列都一样）",
        "ref_layer": "<br>原文示例的一层：{H} × {D} = {n:,} 个数，",
        "ref_layer_same": "与这里一样",
        "ref_layer_ratio": "是这里的 {ratio}",
        "tensor_left": "K（V 同形，另存一份）：{L} 层叠起来，1 条序列{note}",
        "tensor_right": "放大第 0 层：{H} 个 KV 头，每个头 {D} 个数{note}{ref}",
        "between_layers": "层与层的分界",
        "current": "当前的张量",
        "dashed_example": "虚线：原文示例 L={L}、H={H}、D={D}、S={S:,}",
        "layer0": "第 0 层（右图放大）",
        "between_heads": "头与头的分界",
        "position": "序列位置",
        "per_token_all": "每个 token 在 K 里存的数，所有层",
        "per_token_layer0": "每个 token 在第 0 层 K 里存的数",
        "count_unit": "个",
        "tensor_title": "一条序列的 K：（L, H, S, D）=（{L}, {H}, {S}, {D}），共 {n:,} 个数，已存 {filled:,} / {S:,} 个 token",
        "batch_top": "K（V 同样大小，另存一份）：{stacked}；每条序列每个 token 存 {n:,} 个数，每个数 {bytes:g} 字节{note}",
        "stacked": "{B:,} 条序列叠起来",
        "stacked_one": "1 条序列叠起来",
        "between_sequences": "序列与序列的分界",
        "dashed_batch_example": "虚线：原文示例（B=1、{dtype}）",
        "example": "原文示例",
        "first_sequence": "第 1 条序列",
        "batch_bytes_axis": "每个位置上 K 的字节，整批",
        "batch_title": "整批的 KV Cache，{dtype}：已用 {used} / 共 {total}（K 和 V 合计）",
        "linear_title": "KV Cache 随序列长度线性增长（双对数坐标，轴固定不动）：L={L}、B={B:,}、H={H}、D={D}、{dtype}",
        "current_setting": "当前的设置",
        "example_line": "原文示例（L={L}、B=1、H={H}、D={D}、{dtype}）",
        "example_S": "原文示例的 S",
        "current_S": "当前 S={S:,}",
        "seq_len": "序列长度 S",
        "kv_cache": "KV Cache",
        "bytes_unit": "字节",
        "growth_blocks": "第 0 层的 K 用过几块存储<br>（data_ptr 变一次算一块）",
        "growth_written": "累计写入缓存的字节<br>（kvlab 自己计数）",
        "growth_time": "每次前向的耗时：{repeats} 轮的中位数<br>（再取前后 {smooth} 次前向的中位数）",
        "cached_tokens": "缓存里的 token",
        "blocks": "存储块数",
        "blocks_unit": "块",
        "written": "写入量",
        "time": "耗时",
        "growth_title": "预分配与逐步拼接：同一份权重、同一串 token",
        "row": "序列 {i}（{n:,}）",
        "padded_title": "按最长者预分配：{B} × {padded:,} 个槽位，浪费 {waste:.1%}",
        "paged_title": "分页：每块 {bs} 个 token，共 {blocks:,} 块，浪费 {waste:.1%}",
        "not_one_by_one": "<br>（每块不到 {px} 像素宽，不逐块画出）",
        "real_tokens": "真实 token",
        "padding": "padding（空着的槽位）",
        "reserved": "为生成预留（每条 {reserve:,} 个）",
        "owner_blocks": "序列 {i} 的块",
        "owner_hover": "序列 {i}：{n:,} 个 token，{blocks} 块",
        "tails": "每条序列最后一块没用完的部分",
        "one_block": "一个块",
        "slots": "缓存槽位",
        "two_ways": "同一批 {B} 条序列的两种存法",
        "sequence": "序列 {i}",
        "pool_tail": "最后一块没用完的部分",
        "owner": "块的主人",
        "pool_more": "（共 {total:,} 块，只画出前 {shown:,} 块）",
        "pool_title": "分页缓存的物理块池：{total:,} 块，按各序列增长时领取的顺序排列，数字是它属于哪条序列{more}",
    },
    "en": {
        "sep.layers": "<br>(a dividing line every {step} layers)",
        "sep.heads": "<br>(a dividing line every {step} heads)",
        "sep.sequences": "<br>(a dividing line every {step} sequences)",
        "empty": "Allocated, still empty",
        "empty_hover": "{n:,} positions still empty{note}",
        "filled": "Tokens stored",
        "filled_hover": "{n:,} tokens stored{note}",
        "same_in_every": " (the same in every sequence)",
        "ref_layer": "<br>Original's layer: {H} × {D} = {n:,}, ",
        "ref_layer_same": "the same as here",
        "ref_layer_ratio": "{ratio} this",
        "tensor_left": "K of every layer stacked, L = {L} (V alike, stored apart){note}",
        "tensor_right": "Layer 0 enlarged: H × D = {H} × {D} per token{note}{ref}",
        "between_layers": "Between layers",
        "current": "The current tensor",
        "dashed_example": "Dashed: the original's example, L={L}, H={H}, D={D}, S={S:,}",
        "layer0": "Layer 0 (enlarged on the right)",
        "between_heads": "Between heads",
        "position": "Sequence position",
        "per_token_all": "Numbers each token stores in K, all layers",
        "per_token_layer0": "Numbers each token stores in layer 0's K",
        "count_unit": "count",
        "tensor_title": "K of one sequence: (L, H, S, D) = ({L}, {H}, {S}, {D}), {n:,} numbers, {filled:,} / {S:,} "
                        "tokens stored",
        "stacked": "{B:,} sequences stacked",
        "stacked_one": "one sequence",
        "batch_top": "K (V is as large, stored apart): {stacked}; each sequence stores {n:,} numbers per "
                     "token, {bytes:g} bytes each{note}",
        "between_sequences": "Between sequences",
        "dashed_batch_example": "Dashed: the original's example (B=1, {dtype})",
        "example": "The original's example",
        "first_sequence": "Sequence 1",
        "batch_bytes_axis": "Bytes of K per position, whole batch",
        "batch_title": "The whole batch's KV cache, {dtype}: {used} used of {total} (K and V together)",
        "linear_title": "The KV cache grows linearly with sequence length (log-log, fixed axes): L={L}, B={B:,}, "
                        "H={H}, D={D}, {dtype}",
        "current_setting": "Current setting",
        "example_line": "The original's example (L={L}, B=1, H={H}, D={D}, {dtype})",
        "example_S": "The original example's S",
        "current_S": "Current S={S:,}",
        "seq_len": "Sequence length S",
        "kv_cache": "KV cache",
        "bytes_unit": "bytes",
        "growth_blocks": "Storage blocks layer 0's K has used<br>(each change of data_ptr counts one)",
        "growth_written": "Bytes written into the cache so far<br>(counted by kvlab)",
        "growth_time": "Time per forward pass: median of {repeats} rounds<br>(then the median of {smooth} "
                       "neighbouring passes)",
        "cached_tokens": "Tokens in the cache",
        "blocks": "Storage blocks",
        "blocks_unit": "blocks",
        "written": "Written",
        "time": "Time",
        "growth_title": "Preallocation against concatenation: the same weights, the same tokens",
        "row": "Sequence {i} ({n:,})",
        "padded_title": "Preallocated for the longest: {B} × {padded:,} slots, {waste:.1%} wasted",
        "paged_title": "Paged: block size {bs} tokens, blocks used: {blocks:,}, {waste:.1%} wasted",
        "not_one_by_one": "<br>(each block is under {px} pixels wide: not drawn one by one)",
        "real_tokens": "Real tokens",
        "padding": "Padding (empty slots)",
        "reserved": "Reserved for generation ({reserve:,} per sequence)",
        "owner_blocks": "Sequence {i}'s blocks",
        "owner_hover": "Sequence {i}: {n:,} tokens, blocks: {blocks}",
        "tails": "Unused part of each sequence's last block",
        "one_block": "One block",
        "slots": "Cache slots",
        "two_ways": "One batch (B = {B}), stored two ways",
        "sequence": "Sequence {i}",
        "pool_tail": "Unused part of a last block",
        "owner": "Block owner",
        "pool_more": " ({total:,} blocks; only the first {shown:,} drawn)",
        "pool_title": "The paged cache's pool of physical blocks: {total:,} blocks, in the order the sequences took "
                      "them as they grew; the number says which sequence a block belongs to{more}",
    },
})
say = PLOTS.say


# -- shared pieces ------------------------------------------------------------------------------------
def _chinese_number(v: float) -> tuple[str, bool]:
    """``v`` (>= 1) in at most 3 significant digits with 万/亿/万亿 for big ones, and whether that is exact."""
    for size, unit in ((1e12, " 万亿"), (1e8, " 亿"), (1e4, " 万")):
        if v >= size:
            return f"{v / size:.3g}{unit}", False
    shown = f"{v:.3g}" if v < 100 else f"{v:,.0f}"
    return shown, float(shown.replace(",", "")) == v


def _english_number(v: float) -> tuple[str, bool]:
    """``v`` (>= 1) in at most 3 significant digits with thousand/million/billion/trillion for big ones, and whether
    that is exact."""
    for size, scale, unit in ((1e12, 1e12, " trillion"), (1e9, 1e9, " billion"), (1e6, 1e6, " million"),
                              (1e4, 1e3, " thousand")):
        if v >= size:
            return f"{v / scale:.3g}{unit}", False
    shown = f"{v:.3g}" if v < 100 else f"{v:,.0f}"
    return shown, float(shown.replace(",", "")) == v


def _ratio_text_en(ratio: float) -> str:
    """:func:`ratio_text` in English: "8×", "about 1.12×", "1/4", "about 0.67×", "about 977 million times",
    "about 1/8.39 million"."""
    if ratio >= 1:
        shown, exact = _english_number(ratio)
        times = f"{shown} times" if ratio >= 1e4 else f"{shown}×"
        return times if exact else f"about {times}"
    n = 1 / ratio
    if float(n).is_integer() and n < 1e4:
        return f"1/{int(n):,}"
    if ratio >= 0.1:
        return f"about {ratio:.2g}×"
    shown, _ = _english_number(n)
    return f"about 1/{shown}"


def ratio_text(ratio: float) -> str:
    """How many times as large, as a Chinese reader says it: "8 倍", "1.5 倍", "1/4", "约 0.67 倍", "约 9.8 亿倍",
    "约 839 万分之一" (no 1e+08 notation); in English (the course's language) "8×", "about 977 million times",
    "about 1/8.39 million". ``ratio`` must be positive and not 1."""
    if get_language() != "zh":
        return _ratio_text_en(ratio)
    if ratio >= 1:
        shown, exact = _chinese_number(ratio)
        times = f"{shown}倍" if ratio >= 1e4 else f"{shown} 倍"  # 「9.8 亿倍」, 「8 倍」
        return times if exact else f"约 {times}"
    n = 1 / ratio
    if float(n).is_integer() and n < 1e4:
        return f"1/{int(n):,}"
    if ratio >= 0.1:
        return f"约 {ratio:.2g} 倍"
    shown, _ = _chinese_number(n)
    return f"约 {shown}分之一" if n >= 1e4 else f"约 1/{shown}"


def compared_with(value: float, reference: float, what: str) -> str:
    """「与原文示例一样大」, 「是原文示例的 8 倍」, 「约是原文示例的 9.8 亿倍」; in English "the same size as
    the original's example", "8× the original's example", "1/4 of the original's example"."""
    if get_language() != "zh":
        return _compared_en(value / reference, what)
    if value == reference:
        return f"与{what}一样大"
    text = ratio_text(value / reference)
    if text.startswith("约 "):
        return f"约是{what}的 {text[2:]}"
    return f"是{what}的 {text}"


def _compared_en(ratio: float, what: str) -> str:
    if ratio == 1:
        return f"the same size as {what}"
    text = _ratio_text_en(ratio)
    return f"{text} of {what}" if "/" in text else f"{text} {what}"


def _ratio_of(ratio: float) -> str:
    """:func:`ratio_text` before 「这里」 ("this one"): in English a fraction takes "of"."""
    text = ratio_text(ratio)
    return text + " of" if get_language() != "zh" and "/" in text else text


def _rects(boxes) -> tuple[list, list]:
    """Rectangles ``(x0, x1, y0, y1)`` as one polygon list (None between them) for a ``fill="toself"`` trace."""
    xs, ys = [], []
    for x0, x1, y0, y1 in boxes:
        xs += [x0, x1, x1, x0, x0, None]
        ys += [y0, y0, y1, y1, y0, None]
    return xs, ys


def _box(fig, boxes, name, fill, line=None, row=None, col=None, legend=True, dash=None, group=None, hover=None):
    xs, ys = _rects(boxes)
    fig.add_scatter(x=xs, y=ys, fill="toself" if fill else None, fillcolor=fill, mode="lines", name=name,
                    line=dict(color=line or fill or "#000", width=1 if line else 0, dash=dash),
                    legendgroup=group or name, showlegend=legend, hoverinfo="text" if hover else "skip",
                    hoveron="fills" if hover else None, text=hover, row=row, col=col)


def separator_step(count: int, spacing: float, top: float, plot_px: float = PLOT_PX) -> int:
    """Every how many of ``count`` equal bands a line is drawn so that lines are ``MIN_GAP_PX`` apart: 1, 2, 4, 8...
    (``spacing`` is one band's height and ``top`` the axis range, in the same unit)."""
    step = 1
    while step < count and step * spacing / top * plot_px < MIN_GAP_PX:
        step *= 2
    return step


def separator_note(count: int, spacing: float, top: float, unit: str) -> str:
    """What a figure title says when only every k-th separator is drawn (empty when every one is); ``unit``: "layers",
    "heads" or "sequences"; the note is in the course's language."""
    step = separator_step(count, spacing, top)
    return say(f"sep.{unit}", step=step) if 1 < step < count else ""


def _separators(fig, col, count, spacing, x1, top, name) -> None:
    """White lines between ``count`` bands of ``spacing`` (every k-th when they would be closer than
    ``MIN_GAP_PX``)."""
    step = separator_step(count, spacing, top)
    if count <= 1 or step >= count:
        return
    xs, ys = [], []
    for i in range(step, count, step):
        xs += [0, x1, None]
        ys += [i * spacing, i * spacing, None]
    fig.add_scatter(x=xs, y=ys, mode="lines", line=dict(color="white", width=1), hoverinfo="skip", name=name,
                    showlegend=False, row=1, col=col)


def _point_at_if_small(fig, col, x, y, x_top, y_top, text):
    """An arrow to a rectangle's corner ``(x, y)`` when it covers under 2 % of the axes (easy to miss); the arrow
    comes from inside the axes (from the left near the right edge, from below near the top)."""
    if x * y < 0.02 * x_top * y_top:
        axis = "" if col == 1 else str(col)
        fig.add_annotation(x=x, y=y, xref=f"x{axis}", yref=f"y{axis}", text=text, showarrow=True, arrowhead=2,
                           ax=-70 if x > 0.6 * x_top else 60, ay=40 if y > 0.6 * y_top else -50,
                           font=dict(color="#333"))


def _filled_and_empty(fig, col, S, filled, height, legend, hover_unit=""):
    if filled < S:
        _box(fig, [(filled, S, 0, height)], say("empty"), EMPTY, row=1, col=col, legend=legend, group="empty",
             hover=say("empty_hover", n=S - filled, note=hover_unit))
    if filled:
        _box(fig, [(0, filled, 0, height)], say("filled"), FILLED, row=1, col=col, legend=legend, group="filled",
             hover=say("filled_hover", n=filled, note=hover_unit))


# -- the shape panel: K of one sequence in numbers -----------------------------------------------------
def cache_tensor_figure(L: int, H: int, D: int, S: int, filled: int,
                        reference: tuple[int, int, int, int] | None = None) -> go.Figure:
    """K of one sequence (V is its twin) drawn to scale in numbers: S slots wide, L layers of H heads of D numbers
    stacked upwards (the area is the count of numbers), the first ``filled`` slots coloured; the dashed outline is
    ``reference`` (L, H, D, S) at the same scale. On the right, layer 0 alone, scaled to itself, with its heads."""
    per_layer, per_token = H * D, L * H * D
    ref_text = ""
    if reference:
        rL, rH, rD, rS = reference
        ref_layer = rH * rD
        ref_text = (say("ref_layer", H=rH, D=rD, n=ref_layer)
                    + (say("ref_layer_same") if ref_layer == per_layer else
                       say("ref_layer_ratio", ratio=_ratio_of(ref_layer / per_layer))))
    width = max(S, reference[3]) if reference else S
    top = max(per_token, reference[0] * reference[1] * reference[2]) if reference else per_token
    layer_note = separator_note(L, per_layer, top * 1.05, "layers")
    head_note = separator_note(H, D, per_layer * 1.05, "heads")
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        say("tensor_left", L=L, note=layer_note), say("tensor_right", H=H, D=D, note=head_note, ref=ref_text)))
    _filled_and_empty(fig, 1, S, filled, per_token, True)
    _separators(fig, 1, L, per_layer, S, top * 1.05, say("between_layers"))
    _box(fig, [(0, S, 0, per_token)], say("current"), None, line="#333", row=1, col=1, legend=False)
    if reference:
        _box(fig, [(0, rS, 0, rL * rH * rD)], say("dashed_example", L=rL, H=rH, D=rD, S=rS), None,
             line="#000", dash="dash", row=1, col=1, group="reference")
    _box(fig, [(0, S, 0, per_layer)], say("layer0"), None, line=PALETTE[1], row=1, col=1, group="layer0")
    _filled_and_empty(fig, 2, S, filled, per_layer, False)
    _separators(fig, 2, H, D, S, per_layer * 1.05, say("between_heads"))
    _box(fig, [(0, S, 0, per_layer)], say("layer0"), None, line=PALETTE[1], row=1, col=2, legend=False,
         group="layer0")
    x_top, y_top = width * 1.03, top * 1.05
    _point_at_if_small(fig, 1, S, per_token, x_top, y_top, say("current"))
    fig.update_xaxes(title=axis_title(say("position"), "tokens"))
    fig.update_xaxes(range=[0, x_top], row=1, col=1)
    fig.update_xaxes(range=[0, S * 1.03], row=1, col=2)
    fig.update_yaxes(title=axis_title(say("per_token_all"), say("count_unit")), range=[0, y_top], row=1, col=1)
    fig.update_yaxes(title=axis_title(say("per_token_layer0"), say("count_unit")), range=[0, per_layer * 1.05],
                     row=1, col=2)
    apply_template(fig, say("tensor_title", L=L, H=H, S=S, D=D, n=L * H * S * D, filled=filled), 440,
                   legend_below=True)
    fig.update_layout(legend=dict(y=-0.22), margin=dict(t=110 if reference else 95))
    return fig


# -- the bytes panel: the whole batch in bytes, and bytes against S ------------------------------------
def batch_bytes_figure(L: int, B: int, H: int, S: int, D: int, filled: int, dtype: str,
                       reference: tuple[int, int, int, int, str] | None = None) -> go.Figure:
    """K of the whole batch drawn to scale in bytes: S slots wide, the B sequences stacked upwards, each L x H x D
    numbers of ``dtype`` per slot; every sequence filled to the same ``filled`` slots. ``reference``
    (L, H, D, S, dtype) is outlined dashed (B = 1)."""
    per_number = DTYPE_BITS[dtype] / 8
    per_sequence = L * H * D * per_number  # bytes per slot, one sequence
    tall = B * per_sequence
    ref_tall = ref_S = 0
    if reference:
        rL, rH, rD, ref_S, rdtype = reference
        ref_tall = rL * rH * rD * DTYPE_BITS[rdtype] / 8
    unit, scale = iec_unit(max(tall, ref_tall))
    top, width = max(tall, ref_tall) / scale * 1.05, max(S, ref_S) * 1.03
    note = separator_note(B, per_sequence / scale, top, "sequences")
    fig = make_subplots(rows=1, cols=1, subplot_titles=(
        say("batch_top", stacked=say("stacked_one" if B == 1 else "stacked", B=B), n=L * H * D, bytes=per_number,
            note=note),))
    _filled_and_empty(fig, 1, S, filled, tall / scale, True, say("same_in_every"))
    _separators(fig, 1, B, per_sequence / scale, S, top, say("between_sequences"))
    _box(fig, [(0, S, 0, tall / scale)], say("current"), None, line="#333", row=1, col=1, legend=False)
    if reference:
        _box(fig, [(0, ref_S, 0, ref_tall / scale)], say("dashed_batch_example", dtype=rdtype), None, line="#000",
             dash="dash", row=1, col=1, group="reference")
        _point_at_if_small(fig, 1, ref_S, ref_tall / scale, width, top, say("example"))
    _box(fig, [(0, S, 0, per_sequence / scale)], say("first_sequence"), None, line=PALETTE[1], row=1, col=1,
         group="first")
    _point_at_if_small(fig, 1, S, tall / scale, width, top, say("current"))
    fig.update_xaxes(title=axis_title(say("position"), "tokens"), range=[0, width])
    fig.update_yaxes(title=axis_title(say("batch_bytes_axis"), unit), range=[0, top])
    total = kv_cache_bytes(L, H, D, S, B, dtype)
    used = kv_cache_bytes(L, H, D, filled, B, dtype) if filled else 0
    apply_template(fig, say("batch_title", dtype=dtype, used=format_bytes(used), total=format_bytes(total)), 400,
                   legend_below=True)
    fig.update_layout(legend=dict(y=-0.25))
    return fig


X_TICKS = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000]
Y_POWERS = range(0, 9)  # 1 B, 1 KiB ... 1 YiB: tick marks at powers of 1024
X_RANGE = (1, 10_000_000)  # the S box's range
Y_RANGE = (2**10, 2**50)  # 1 KiB .. 1 PiB unless the current point lies outside


def memory_vs_seq_figure(L: int, B: int, H: int, D: int, S: int, dtype: str = "fp16",
                         reference: tuple[int, int, int, int, str] | None = None,
                         capacities: tuple[tuple[str, int], ...] = ()) -> go.Figure:
    """Cache bytes against S on fixed log-log axes (1 to 10^7 tokens, 1 KiB to 1 PiB): the current model's line,
    ``reference`` (L, H, D, S, dtype; B = 1) as a fixed dashed line with its point, GPU memory sizes
    ``capacities`` ((label, bytes), ...) as horizontal lines, and the chosen S marked."""
    xs = np.unique(np.logspace(0, 7, 120).round().astype(np.int64))
    fig = new_figure(say("linear_title", L=L, B=B, H=H, D=D, dtype=dtype), height=400, width=WIDE)
    current = kv_cache_bytes(L, H, D, S, B, dtype)
    fig.add_scatter(x=xs, y=[float(kv_cache_bytes(L, H, D, int(x), B, dtype)) for x in xs], mode="lines",
                    name=say("current_setting"), line=dict(color=PALETTE[0], width=3))
    if reference:
        rL, rH, rD, rS, rdtype = reference
        fig.add_scatter(x=xs, y=[float(kv_cache_bytes(rL, rH, rD, int(x), 1, rdtype)) for x in xs], mode="lines",
                        name=say("example_line", L=rL, H=rH, D=rD, dtype=rdtype),
                        line=dict(color="#555", width=1.5, dash="dash"))
        fig.add_scatter(x=[rS], y=[float(kv_cache_bytes(rL, rH, rD, rS, 1, rdtype))], mode="markers", showlegend=False,
                        marker=dict(size=8, color="#555"), name=say("example_S"), hoverinfo="skip")
    for i, (label, size) in enumerate(capacities):
        fig.add_scatter(x=list(X_RANGE), y=[float(size), float(size)], mode="lines", name=label,
                        line=dict(color=PALETTE[2 + i % 3], width=1.5, dash="dot"))
    fig.add_scatter(x=[S], y=[float(current)], mode="markers+text", marker=dict(size=12, color=PALETTE[3]),
                    text=[format_bytes(current)], textposition="top left", name=say("current_S", S=S))
    y_low, y_high = min(Y_RANGE[0], current / 2), max(Y_RANGE[1], current * 2)
    fig.update_xaxes(type="log", range=[-0.05, 7.05], tickvals=X_TICKS, ticktext=[f"{t:,}" for t in X_TICKS],
                     title=axis_title(say("seq_len"), "tokens"))
    fig.update_yaxes(type="log", range=[math.log10(y_low), math.log10(y_high)],
                     tickvals=[float(1024**p) for p in Y_POWERS],
                     ticktext=[f"1 {iec_unit(1024**p)[0]}" for p in Y_POWERS],
                     title=axis_title(say("kv_cache"), say("bytes_unit")))
    fig.update_layout(legend=dict(x=0.01, y=0.99, xanchor="left", yanchor="top"), margin=dict(r=50))
    return fig


# -- preallocation vs concatenation ---------------------------------------------------------------------
def cache_growth_figure(runs: dict, labels: dict | None = None, llc: tuple[str, float] | None = None,
                        smooth: int = 5) -> go.Figure:
    """Preallocated vs concatenating caches, kvlab's and transformers': how many K tensors layer 0 went through
    (seen by address), the bytes kvlab copied (counted), and the time of each pass (the median over repeats,
    then over ``smooth`` neighbouring passes). ``llc`` (label, tokens): where the cache outgrows the CPU's last-level
    cache, drawn on the time panel when inside the run.

    ``runs``: ``{name: kvlab.lessons.storage.CacheGrowth}``; names are kvlab modes or "transformers:...".
    ``labels``: legend names (default ``MODE_LABELS``).
    """
    labels = labels or MODE_LABELS
    repeats = max(len(r.repeat_ms) for r in runs.values())
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08, subplot_titles=(
        say("growth_blocks"), say("growth_written"), say("growth_time", repeats=repeats, smooth=smooth)))
    for name, r in runs.items():
        style = dict(color=MODE_COLORS.get(name, "#000"), dash=GROWTH_DASH.get(name))
        label = labels.get(name, name)
        fig.add_scatter(x=r.t, y=r.layer0_k_tensors, name=label, line=style, legendgroup=name, row=1, col=1)
        if r.bytes_copied is not None:
            fig.add_scatter(x=r.t, y=[b / 2**20 for b in r.bytes_copied], name=label, line=style,
                            legendgroup=name, showlegend=False, row=1, col=2)
        fig.add_scatter(x=r.t, y=r.smoothed_ms(smooth), name=label, line=dict(style, width=1.5), legendgroup=name,
                        showlegend=False, row=1, col=3)
    if llc:
        text, tokens = llc
        first = min(r.t[0] for r in runs.values())
        last = max(r.t[-1] for r in runs.values())
        if first < tokens < last:
            fig.add_vline(x=tokens, line=dict(color="#666", dash="dash", width=1), row=1, col=3)
            fig.add_annotation(x=tokens, y=1, yref="y3 domain", text=text, showarrow=False, xanchor="right",
                               yanchor="top", font=dict(size=11, color="#444"), xref="x3")
    fig.update_xaxes(title=axis_title(say("cached_tokens"), say("count_unit")))
    fig.update_yaxes(title=axis_title(say("blocks"), say("blocks_unit")), rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title=axis_title(say("written"), "MiB"), row=1, col=2)
    fig.update_yaxes(title=axis_title(say("time"), "ms"), rangemode="tozero", row=1, col=3)
    return apply_template(fig, say("growth_title"), 400, legend_below=True)


# -- padding and paging ---------------------------------------------------------------------------------
def owner_color(i: int) -> str:
    return OWNER_COLORS[i % len(OWNER_COLORS)]


def _page_boxes(lengths, bs, row_width, one_by_one, bar):
    """Per sequence: the used part of each page and its unused tail (pages apart by a small gap when drawn one by
    one, else one bar)."""
    used, tails, outlines = [], [], []
    gap = min(0.1 * bs, 0.004 * row_width) if one_by_one else 0.0
    for i, n in enumerate(lengths):
        end = blocks_for(n, bs) * bs
        pages = [(s, s + bs) for s in range(0, end, bs)] if one_by_one else [(0, end)]
        for start, stop in pages:
            outlines.append((start + gap, stop - gap, i - bar, i + bar))
            if start < n:
                used.append((i, (start + gap, min(stop - gap, n), i - bar, i + bar)))
        if end > n:
            tails.append((n, end - gap, i - bar, i + bar))
    return used, tails, outlines


def padding_figure(waste) -> go.Figure:
    """One batch stored two ways (``kvlab.lessons.storage.PaddingWaste``): padded to the longest sequence plus the
    room reserved for generation (left) and in pages of ``block_size`` slots, each sequence in its own colour with
    its pages' numbers in the shared pool (right), on the same scale. Pages are outlined one by one only when a
    page is at least ``MIN_GAP_PX`` pixels wide."""
    lengths, bs = waste.lengths, waste.block_size
    rows = [say("row", i=i + 1, n=n) for i, n in enumerate(lengths)]
    paged_rows = [blocks * bs for blocks in waste.blocks_per_sequence]
    width = max(waste.padded_length, *paged_rows)
    px_per_block = HALF_PLOT_PX * bs / width
    one_by_one = px_per_block >= MIN_GAP_PX
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04, subplot_titles=(
        say("padded_title", B=waste.batch_size, padded=waste.padded_length, waste=waste.waste_fraction),
        say("paged_title", bs=bs, blocks=sum(waste.blocks_per_sequence), waste=waste.paged_waste_fraction)
        + ("" if one_by_one else say("not_one_by_one", px=MIN_GAP_PX))))
    bar = 0.34  # half the height of a row's bar
    _box(fig, [(0, n, i - bar, i + bar) for i, n in enumerate(lengths)], say("real_tokens"), FILLED, row=1, col=1,
         group="used")
    _box(fig, [(n, waste.max_len, i - bar, i + bar) for i, n in enumerate(lengths) if n < waste.max_len],
         say("padding"), PADDING, row=1, col=1, group="padding")
    if waste.reserve:
        _box(fig, [(waste.max_len, waste.padded_length, i - bar, i + bar) for i in range(len(lengths))],
             say("reserved", reserve=waste.reserve), RESERVED, line="#b08080", row=1, col=1, group="reserve")
    used, tails, outlines = _page_boxes(lengths, bs, width, one_by_one, bar)
    for i in range(len(lengths)):
        mine = [b for owner, b in used if owner == i]
        _box(fig, mine, say("owner_blocks", i=i + 1), owner_color(i), row=1, col=2, legend=False, group=f"owner{i}",
             hover=say("owner_hover", i=i + 1, n=lengths[i], blocks=waste.blocks_per_sequence[i]))
    if tails:
        _box(fig, tails, say("tails"), TAIL, row=1, col=2, group="tail")
    if one_by_one:
        _box(fig, outlines, say("one_block"), None, line="#333", row=1, col=2, group="block")
    fig.update_xaxes(title=axis_title(say("slots"), "tokens"), range=[0, width * 1.01])
    fig.update_yaxes(tickvals=list(range(len(lengths))), ticktext=rows, autorange="reversed", automargin=True,
                     row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=2)
    plot_height = len(lengths) * max(10, min(30, 600 // len(lengths))) + 40
    apply_template(fig, say("two_ways", B=waste.batch_size), plot_height + 175, legend_below=True)
    fig.update_layout(legend=dict(y=-90 / plot_height))  # under the x-axis titles
    return fig


def pool_figure(waste, max_blocks: int = MAX_POOL_BLOCKS) -> go.Figure:
    """The paged cache's shared pool of physical blocks, in the order the sequences took them as they grew: each
    block in its owner's colour up to the slots it holds, the unused tail of a sequence's last block in yellow.
    One sequence's blocks are scattered among the others'. At most ``max_blocks`` are drawn."""
    total = waste.pool_size
    shown = waste.pool_blocks(max_blocks)  # only the drawn blocks are built
    columns = max(1, min(32, math.ceil(math.sqrt(len(shown) * 4))))
    rows = math.ceil(len(shown) / columns)
    bs = waste.block_size
    by_owner: dict[int, list] = {}
    tails, labels_x, labels_y, labels = [], [], [], []
    for k, block in enumerate(shown):
        r, c = divmod(k, columns)
        x0, y0 = c, r
        fill = block.used / bs
        by_owner.setdefault(block.owner, []).append((x0 + 0.05, x0 + 0.05 + 0.9 * fill, y0 + 0.1, y0 + 0.9))
        if block.used < bs:
            tails.append((x0 + 0.05 + 0.9 * fill, x0 + 0.95, y0 + 0.1, y0 + 0.9))
        labels_x.append(x0 + 0.5)
        labels_y.append(y0 + 0.5)
        labels.append(str(block.owner + 1))
    fig = new_figure("", height=max(180, 26 * rows + 150), width=WIDE)
    for owner in sorted(by_owner):
        fig.add_scatter(**dict(zip(("x", "y"), _rects(by_owner[owner]))), fill="toself", mode="lines",
                        fillcolor=owner_color(owner), line=dict(width=0, color=owner_color(owner)),
                        name=say("sequence", i=owner + 1), legendgroup=f"owner{owner}", hoveron="fills",
                        hoverinfo="text", text=say("owner_blocks", i=owner + 1), showlegend=owner < 8)
    if tails:
        fig.add_scatter(**dict(zip(("x", "y"), _rects(tails))), fill="toself", mode="lines", fillcolor=TAIL,
                        line=dict(width=0, color=TAIL), name=say("pool_tail"), hoverinfo="skip")
    cell_px = (WIDE - 80) / columns
    if cell_px >= 16:
        fig.add_scatter(x=labels_x, y=labels_y, mode="text", text=labels, showlegend=False, hoverinfo="skip",
                        textfont=dict(color="white", size=11 if cell_px >= 24 else 9), name=say("owner"))
    more = say("pool_more", total=total, shown=len(shown)) if len(shown) < total else ""
    fig.update_layout(title=say("pool_title", total=total, more=more), margin=dict(l=20, r=20, t=60, b=20),
                      legend=dict(orientation="h", x=0, y=-0.02, yanchor="top"))
    fig.update_xaxes(visible=False, range=[-0.1, columns + 0.1])
    fig.update_yaxes(visible=False, range=[rows + 0.1, -0.1])
    return fig
