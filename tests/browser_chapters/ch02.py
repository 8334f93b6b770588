"""Browser interactions for chapter 3.2 (run by tests/test_browser.py after run-all)."""
from __future__ import annotations

import re

from browser_support import ChapterPage, PanelDriver

NOTEBOOK = "02_cache_storage_shape.ipynb"
SCREENSHOT = ".kvlab-panel.kvlab-shape"

# Each named trace of a figure as it is plotted: {(name, x axis): [(x0, x1, y0, y1) per rectangle]} for the
# None-separated polygons, and the y of each horizontal segment for the separator lines.
JS_BOXES = """(el) => {
  const gd = el.matches('.js-plotly-plot') ? el : (el.querySelector('.js-plotly-plot.kvlab-shown') || el.querySelector('.js-plotly-plot'));
  const out = {};
  for (const t of gd.data || []) {
    if (!t.name || !t.x || t.mode === 'text') continue;
    const xs = Array.from(t.x), ys = Array.from(t.y), boxes = [];
    for (let i = 0; i + 4 < xs.length; i += 6) {
      const x = xs.slice(i, i + 5), y = ys.slice(i, i + 5);
      boxes.push([Math.min(...x), Math.max(...x), Math.min(...y), Math.max(...y)]);
    }
    out[`${t.name}|${t.xaxis || 'x'}`] = boxes;
    out[`${t.name}|${t.xaxis || 'x'}|ys`] = ys;
  }
  return out;
}"""
JS_Y_RANGE = """(el) => {
  const gd = el.matches('.js-plotly-plot') ? el : (el.querySelector('.js-plotly-plot.kvlab-shown') || el.querySelector('.js-plotly-plot'));
  return [gd.layout.yaxis.range, gd.layout.yaxis2 ? gd.layout.yaxis2.range : null, gd.layout.xaxis.range];
}"""
REFERENCE = "虚线：原文示例 L=32、H=32、D=128、S=1,024"
EXAMPLE = "原文示例（L=32、B=1、H=32、S=1,024、D=128、fp16）"


def boxes(panel: PanelDriver, index: int) -> dict:
    return panel.root.locator(".kvlab-figure").nth(index).evaluate(JS_BOXES)


def box(panel: PanelDriver, index: int, name: str, axis: str = "x") -> tuple[float, float, float, float]:
    found = boxes(panel, index).get(f"{name}|{axis}")
    assert found, f"no trace {name!r} on axis {axis} in figure #{index}: {sorted(boxes(panel, index))}"
    return tuple(found[0])


def separators(panel: PanelDriver, index: int, name: str, axis: str = "x") -> list[float]:
    """The heights of a separator trace's lines (one per boundary drawn)."""
    ys = boxes(panel, index).get(f"{name}|{axis}|ys", [])
    return [y for y in ys if y is not None][::2]


def y_ranges(panel: PanelDriver, index: int) -> list:
    return panel.root.locator(".kvlab-figure").nth(index).evaluate(JS_Y_RANGE)


def numbers_shown(readout: str) -> int:
    m = re.search(r"2 × L × H × S × D\s*=\s*([\d,]+)\s*个数", readout)
    assert m, f"no count of numbers in the readout: {readout!r}"
    return int(m.group(1).replace(",", ""))


def bytes_shown(readout: str) -> int:
    m = re.search(r"=\s*([\d,]+)\s*B\s*=", readout)
    assert m, f"no byte count in the readout: {readout!r}"
    return int(m.group(1).replace(",", ""))


def filled_of(readout: str) -> tuple[int, int]:
    m = re.search(r"已生成\s*([\d,]+)\s*/\s*([\d,]+)", readout)
    assert m, f"no fill count in the readout: {readout!r}"
    return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))


def expected_bytes(shape: PanelDriver, size: PanelDriver) -> int:
    from kvlab import kv_cache_bytes

    return kv_cache_bytes(shape.int_value("L"), shape.int_value("H"), shape.int_value("D"), shape.int_value("S"),
                          size.int_value("B"), size.value("dtype"))


def bad_value(ch: ChapterPage, panel: PanelDriver, control: str, text: str, label: str, readout: str,
              figures: list[dict], follower: PanelDriver | None = None) -> None:
    """Type ``text`` into ``control``: a Chinese warning naming ``label``, greyed-out and unchanged results (and
    the same in ``follower``, a panel that reads this one)."""
    panel.type_text(control, text)
    for p in [panel] + ([follower] if follower else []):
        warn = p.wait_message("warn", True, f"{control} = {text!r} should show a .kvlab-msg-warn message in {p.name}")
        assert any(f"「{label}」" in w and "上一次有效" in w for w in warn), warn
        assert not any(re.search(r"\b(must|got|between)\b", w) for w in warn), warn  # Chinese, not an API message
        assert p.messages("bug") == []
        p.wait_stale(True, f"{control} = {text!r} must grey out the readout and every figure")
    assert panel.readout() == readout, "the readout must keep the last valid values (greyed out)"
    ch.page.wait_for_timeout(300)
    for i, before in enumerate(figures):
        assert panel.figure(i)["data"] == before["data"], f"figure #{i} must keep the last valid values"


def drive_shape_and_bytes(ch: ChapterPage) -> None:
    from kvlab import format_bytes

    shape, size = ch.panel("kvlab-shape"), ch.panel("kvlab-bytes")
    r0, b0 = shape.readout(), size.readout()
    assert numbers_shown(r0) == 2 * 32 * 32 * 1024 * 128 and "与原文示例一样大" in r0, r0
    assert bytes_shown(b0) == expected_bytes(shape, size) == 2 * 32 * 32 * 1024 * 128 * 2, b0
    assert f"与{EXAMPLE}一样大" in b0 and "1 倍" not in b0, b0
    tensor0, batch0, curve0 = shape.figure(0), size.figure(0), size.figure(1)
    # the default is the chapter's example: the tensor fills the dashed outline exactly (131,072 numbers per token)
    assert box(shape, 0, "当前的张量") == box(shape, 0, REFERENCE) == (0, 1024, 0, 131072)
    assert box(shape, 0, "已存的 token") == (0, 1024 * 30 // 100, 0, 131072)
    assert len(separators(shape, 0, "头与头的分界", "x2")) == 31  # all 32 heads of layer 0 apart
    assert box(size, 0, "已存的 token") == (0, 307, 0, 256)  # KiB: 131,072 numbers x 2 bytes

    # L by keyboard: the count and the bytes (other panel) follow, the tensor grows taller than the outline
    shape.press_slider("L", "ArrowRight")
    r1 = shape.wait_readout(lambda t: numbers_shown(t) != numbers_shown(r0), "ArrowRight on L should change the count")
    assert shape.int_value("L") == 33 and numbers_shown(r1) == numbers_shown(r0) * 33 // 32, r1
    tensor1 = shape.wait_figure_changed(0, tensor0, "the tensor should redraw for L = 33")
    assert "（33, 32, 1024, 128）" in tensor1["title"] and any("33 层叠起来" in a for a in tensor1["annotations"])
    assert box(shape, 0, "当前的张量")[3] == 33 * 4096 and box(shape, 0, REFERENCE)[3] == 131072
    assert box(shape, 0, "第 0 层（右图放大）", "x2")[3] == 4096  # one layer: unchanged
    b1 = size.wait_readout(lambda t: bytes_shown(t) != bytes_shown(b0), "the bytes panel should follow L = 33")
    assert bytes_shown(b1) == expected_bytes(shape, size) == bytes_shown(b0) * 33 // 32, b1
    size.wait_figure_changed(1, curve0, "the bytes-against-S line should move for L = 33")

    # H and D by keyboard: layer 0 (right) is drawn at its own scale, head by head
    shape.press_slider("H", "ArrowLeft")
    r_h = shape.wait_readout(lambda t: numbers_shown(t) == numbers_shown(r0) * 33 * 31 // (32 * 32), "H = 31")
    tensor_h = shape.wait_figure_changed(0, tensor1, "the tensor should redraw for H = 31")
    assert box(shape, 0, "第 0 层（右图放大）", "x2")[3] == 31 * 128 and any("31 个 KV 头" in a for a in tensor_h["annotations"])
    shape.press_slider("D", "ArrowRight")
    r_d = shape.wait_readout(lambda t: t != r_h, "ArrowRight on D should change the count")
    assert shape.int_value("D") == 144 and numbers_shown(r_d) == 2 * 33 * 31 * 1024 * 144, r_d
    tensor_d = shape.wait_figure_changed(0, tensor_h, "the tensor should redraw for D = 144")
    assert box(shape, 0, "第 0 层（右图放大）", "x2")[3] == 31 * 144 and any("每个头 144 个数" in a for a in tensor_d["annotations"])
    shape.press_slider("H", "ArrowRight")
    shape.press_slider("D", "ArrowLeft")
    shape.press_slider("L", "ArrowLeft")
    shape.wait_readout(lambda t: t == r0, "L, H and D back should give the original readout")
    size.wait_readout(lambda t: t == b0, "... and the bytes panel its original readout")

    # the prose's task: H = 8 (Llama-3-8B): a quarter of the outline; the zoom scaled to its 8 heads
    shape.type_slider("H", 8)
    r8 = shape.wait_readout(lambda t: numbers_shown(t) == numbers_shown(r0) // 4, "H = 8 should quarter the count")
    assert "是原文示例的 1/4" in r8, r8
    ch.wait_until(lambda: separators(shape, 0, "头与头的分界", "x2"), lambda s: len(s) == 7, 10, "8 heads apart")
    assert y_ranges(shape, 0)[1] == [0, 8 * 128 * 1.05]  # the zoom's axis follows layer 0 itself
    tensor8 = shape.figure(0)
    assert any("原文示例的一层：32 × 128 = 4,096 个数，是这里的 4 倍" in a for a in tensor8["annotations"])
    shape.type_slider("H", 32)
    shape.wait_readout(lambda t: t == r0, "H = 32 again should give the original readout", timeout_s=90)
    # the bytes panel follows H too, on its own round trip: a loaded machine can still show H = 8 there
    size.wait_readout(lambda t: t == b0, "the bytes panel should follow H = 32 again", timeout_s=90)

    # dtype (bytes panel): int8 halves fp16, and so does the batch's height; the log-log axes stay put
    axes0 = y_ranges(size, 1)
    size.select("dtype", "int8")
    b2 = size.wait_readout(lambda t: bytes_shown(t) != bytes_shown(b0), "choosing int8 should change the bytes")
    assert bytes_shown(b2) == bytes_shown(b0) // 2 == expected_bytes(shape, size) and "缩放系数" in b2, b2
    batch2 = size.wait_figure_changed(0, batch0, "the batch should redraw for int8")
    assert "int8" in batch2["title"] and f"共 {format_bytes(bytes_shown(b2))}" in batch2["title"], batch2["title"]
    assert box(size, 0, "已存的 token")[3] == 128 and any("每个数 1 字节" in a for a in batch2["annotations"])
    curve2 = size.wait_figure_changed(1, curve0, "the bytes-against-S line should move down for int8")
    assert y_ranges(size, 1) == axes0, "the log-log axes must not move"

    # B: a bad value warns; three sequences stack three times as tall, each filled alike
    bad_value(ch, size, "B", "0", "批次 B", b2, [batch2, curve2])
    size.type_text("B", "3")
    size.wait_stale(False, "B = 3 must un-grey the bytes panel")
    b3 = size.wait_readout(lambda t: bytes_shown(t) == 3 * bytes_shown(b2), "B = 3 triples the bytes")
    batch3 = size.wait_figure_changed(0, batch2, "the batch should redraw for B = 3")
    assert box(size, 0, "已存的 token") == (0, 307, 0, 3 * 128)  # every sequence filled to the same length
    assert separators(size, 0, "序列与序列的分界") == [128, 256] and any("3 条序列叠起来" in a for a in batch3["annotations"])
    assert y_ranges(size, 1) == axes0 and bytes_shown(b3) == expected_bytes(shape, size)

    # bad S (shape panel): both panels warn and grey out; then S = 2048 doubles the width and the bytes
    bad_value(ch, shape, "S", "0", "序列长度 S", r0, [tensor0], follower=size)
    bad_value(ch, shape, "S", "99999999", "序列长度 S", r0, [tensor0], follower=size)
    shape.type_text("S", "2048")
    for p in (shape, size):
        p.wait_message("warn", False, f"a valid S should clear the warning in {p.name}")
        p.wait_stale(False, f"a valid S must un-grey {p.name}")
    shape.wait_readout(lambda t: numbers_shown(t) == 2 * numbers_shown(r0), "S = 2048 doubles the count")
    size.wait_readout(lambda t: bytes_shown(t) == 2 * bytes_shown(b3), "S = 2048 doubles the bytes")
    tensor3 = shape.wait_figure_changed(0, tensor0, "the tensor should redraw for S = 2048")
    assert box(shape, 0, "当前的张量")[1] == 2048 and box(shape, 0, REFERENCE)[1] == 1024

    # Play: from the default fill (a part of S) the cache fills up to 100 %, the blue part grows to S in both panels
    start_pct = shape.int_value("filled_pct")
    assert 0 < start_pct < 100 and filled_of(shape.readout()) == (2048 * start_pct // 100, 2048)
    shape.click_play()
    shape.wait_readout(lambda t: filled_of(t)[0] == 2048, "Play should fill the cache to 100 %", timeout_s=60)
    ch.wait_until(shape.playing, lambda p: not p, 10, "Play should stop at 100 %")
    full = shape.wait_figure_changed(0, tensor3, "the tensor should redraw as the cache fills")
    assert "已存 2,048 / 2,048 个 token" in full["title"], full["title"]
    ch.wait_until(lambda: box(shape, 0, "已存的 token")[1], lambda x: x == 2048, 10, "the blue part should reach S")
    assert "已分配、还空着|x" not in boxes(shape, 0)
    size.wait_readout(lambda t: filled_of(t)[0] == 2048, "the bytes panel should follow the fill")
    ch.wait_until(lambda: box(size, 0, "已存的 token")[1], lambda x: x == 2048, 10, "the whole batch is filled")

    # back to the defaults (also for the README screenshot): the original numbers and pictures exactly
    while shape.int_value("filled_pct") > start_pct:
        before = shape.int_value("filled_pct")
        shape.press_slider("filled_pct", "ArrowLeft")
        ch.wait_until(lambda: shape.int_value("filled_pct"), lambda v: v < before, 10, "ArrowLeft on the fill slider")
    shape.type_text("S", "1024")
    size.type_text("B", "1")
    size.select("dtype", "fp16")
    shape.wait_readout(lambda t: t == r0, "restoring the controls should restore the shape readout")
    size.wait_readout(lambda t: t == b0, "restoring the controls should restore the bytes readout")
    shape.wait_figure(0, lambda s: s["data"] == tensor0["data"], "restoring the values should restore the tensor")
    size.wait_figure(0, lambda s: s["data"] == batch0["data"], "... and the batch")
    size.wait_figure(1, lambda s: s["data"] == curve0["data"], "... and the bytes-against-S line")


def growth_counts(readout: str) -> tuple[int, int, int]:
    """(concatenating cache's allocations, K tensors of layer 0, cached tokens at the end) from the readout."""
    m = re.search(r"逐步拼接（dynamic）：共 ([\d,]+) 次分配.*?第 0 层的 K 换了 ([\d,]+) 块", readout, re.S)
    t = re.search(r"缓存最多存 (\d+) 个", readout)
    assert m and t, readout
    return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")), int(t.group(1))


def drive_growth(ch: ChapterPage) -> None:
    grow = ch.panel("kvlab-growth")
    g0 = grow.readout()
    # the default run: 64 tokens, 8 of them the prompt: 57 passes; 4 layers x K and V per pass when concatenating
    assert growth_counts(g0) == (2 * 4 * 57, 57, 64), g0
    assert "预分配（kv）：共 2 次分配，写入 16.0 MiB" in g0 and "交替运行 3 轮" in g0 and "缓存最大 16.0 MiB" in g0, g0
    assert "下一格的输出里" in g0, g0  # which cache is faster: the next cell's claims, chosen by the printed numbers
    fig0 = grow.figure(0)
    assert set(fig0["lengths"]) == {57}, fig0["lengths"]
    grow.select("tokens", "128 个 token（缓存最大 32.0 MiB）")
    ch.page.wait_for_timeout(500)
    assert grow.readout() == g0, "the growth panel must not re-measure before Run is clicked"
    grow.click_run()
    g1 = grow.wait_readout(lambda t: growth_counts(t)[2] == 128, "Run should measure up to 128 tokens", timeout_s=240)
    assert growth_counts(g1) == (2 * 4 * 121, 121, 128) and "缓存最大 32.0 MiB" in g1, g1
    fig1 = grow.wait_figure_changed(0, fig0, "the growth figure should redraw")
    assert set(fig1["lengths"]) == {121}, fig1["lengths"]
    grow.select("tokens", "64 个 token（缓存最大 16.0 MiB）")
    grow.click_run()
    g2 = grow.wait_readout(lambda t: growth_counts(t)[2] == 64, "Run should measure 64 tokens again", timeout_s=240)
    assert growth_counts(g2) == growth_counts(g0)  # the counts come back exactly (the times are measured anew)


def drive_padding(ch: ChapterPage) -> None:
    pad = ch.panel("kvlab-padding")
    p0 = pad.readout()
    pfig0, pool0 = pad.figure(0), pad.figure(1)
    assert "14 块 × 16 = 224 个槽位" in p0 and "浪费 21.0%" in p0, p0  # 1+3+1+3+2+4 pages of 16 for 177 tokens
    assert "6 × 60 = 360 个槽位" in p0 and "浪费 50.8%" in p0, p0
    assert len(boxes(pad, 0)["一个块|x2"]) == 14
    pool = boxes(pad, 1)
    assert sum(len(v) for k, v in pool.items() if k.startswith("序列 ") and not k.endswith("|ys")) == 14
    # the second sequence's 3 blocks in the shared pool: 8 blocks a row, taken 1st, 7th and 11th
    assert [round(x0, 2) for x0, *_ in pool["序列 2|x"]] == [1.05, 6.05, 2.05]

    # block size by keyboard: 17 slots a page -> 1+3+1+2+2+4 = 13 pages, both drawings follow
    pad.press_slider("block_size", "ArrowRight")
    p_b = pad.wait_readout(lambda t: t != p0, "ArrowRight on the block size should update the readout")
    assert pad.int_value("block_size") == 17 and "13 块 × 17 = 221 个槽位" in p_b, p_b
    pfig_b = pad.wait_figure_changed(0, pfig0, "the pages should redraw for blocks of 17")
    pages = boxes(pad, 0)["一个块|x2"]
    assert len(pages) == 13 and all(15 < x1 - x0 <= 17 for x0, x1, *_ in pages), pages
    tails = boxes(pad, 0)["每条序列最后一块没用完的部分|x2"]
    assert [x0 for x0, *_ in tails] == [12, 40, 7, 33, 25, 60], tails  # every last page has room left
    assert any("每块 17 个 token" in a for a in pfig_b["annotations"]), pfig_b["annotations"]
    pool_b = pad.wait_figure_changed(1, pool0, "the pool should redraw for blocks of 17")
    assert "13 块" in pool_b["title"], pool_b["title"]
    pad.press_slider("block_size", "ArrowLeft")
    pad.wait_readout(lambda t: t == p0, "block size 16 again should give the original readout")

    # the reserve for generation: 8 more slots per sequence in the padded layout only
    pad.press_slider("reserve", "ArrowRight")
    p_r = pad.wait_readout(lambda t: t != p0, "ArrowRight on the reserve should update the readout")
    assert pad.int_value("reserve") == 8 and "每条再为生成预留 8 个" in p_r and "6 × 68 = 408 个槽位" in p_r, p_r
    assert "浪费 56.6%" in p_r and "14 块 × 16 = 224 个槽位" in p_r, p_r  # 1 - 177/408; paging unchanged
    pad.wait_figure_changed(0, pfig0, "the padded layout should draw the reserve")
    reserve = boxes(pad, 0)["为生成预留（每条 8 个）|x"]
    assert [(x0, x1) for x0, x1, *_ in reserve] == [(60, 68)] * 6, reserve
    pad.press_slider("reserve", "ArrowLeft")
    pad.wait_readout(lambda t: t == p0, "no reserve again should give the original readout")

    pad.type_text("lengths", "5, 50")
    p1 = pad.wait_readout(lambda t: t != p0, "new lengths should update the padding readout")
    assert "浪费 45.0%" in p1 and "B = 2 条序列" in p1 and "最长 50 " in p1, p1  # 1 - 55/100
    pfig1 = pad.wait_figure_changed(0, pfig0, "the padding figure should redraw")
    pool1 = pad.wait_figure_changed(1, pool0, "the pool should redraw")
    assert [(x0, x1) for x0, x1, *_ in boxes(pad, 0)["padding（空着的槽位）|x"]] == [(5, 50)]
    bad_value(ch, pad, "lengths", "abc", "每条序列现在的长度（提示词 + 已生成）", p1, [pfig1, pool1])
    bad_value(ch, pad, "lengths", "3, -1", "每条序列现在的长度（提示词 + 已生成）", p1, [pfig1, pool1])
    pad.type_text("lengths", "12, 40, 7, 33, 25, 60")
    pad.wait_message("warn", False, "valid lengths should clear the warning")
    pad.wait_stale(False, "valid lengths must un-grey the padding panel")
    pad.wait_readout(lambda t: t == p0, "the original lengths should give the original readout")
    pad.wait_figure(0, lambda s: s["data"] == pfig0["data"], "the original lengths should give the original figure")
    pad.wait_figure(1, lambda s: s["data"] == pool0["data"], "... and the original pool")


def interact(ch: ChapterPage) -> None:
    drive_padding(ch)
    drive_growth(ch)
    drive_shape_and_bytes(ch)  # last: it ends at the defaults, as the README screenshot shows them
