"""Browser interactions for chapter 3.2 (run by tests/test_browser.py after run-all)."""
from __future__ import annotations

import re

from browser_support import ChapterPage, PanelDriver

NOTEBOOK = "02_cache_storage_shape.ipynb"
SCREENSHOT = ".kvlab-panel.kvlab-memory"

# Each named polygon trace of a figure as it is plotted: {(name, x axis): [(x0, x1, y0, y1), ...]}.
JS_BOXES = """(el) => {
  const gd = el.matches('.js-plotly-plot') ? el : el.querySelector('.js-plotly-plot');
  const out = {};
  for (const t of gd.data || []) {
    if (!t.name || !t.x) continue;
    const xs = Array.from(t.x), ys = Array.from(t.y), boxes = [];
    for (let i = 0; i + 4 < xs.length; i += 6) {
      const x = xs.slice(i, i + 5), y = ys.slice(i, i + 5);
      boxes.push([Math.min(...x), Math.max(...x), Math.min(...y), Math.max(...y)]);
    }
    out[`${t.name}|${t.xaxis || 'x'}`] = boxes;
  }
  return out;
}"""


def boxes(panel: PanelDriver, index: int) -> dict:
    return panel.root.locator(".kvlab-figure").nth(index).evaluate(JS_BOXES)


def box(panel: PanelDriver, index: int, name: str, axis: str = "x") -> tuple[float, float, float, float]:
    found = boxes(panel, index).get(f"{name}|{axis}")
    assert found, f"no trace {name!r} on axis {axis} in figure #{index}: {sorted(boxes(panel, index))}"
    return tuple(found[0])


def height_kib(panel: PanelDriver, axis: str = "x") -> float:
    """The height of the drawn K tensor (all layers on x, layer 0 on x2), in the figure's KiB."""
    x0, x1, y0, y1 = box(panel, 0, "当前的张量", axis)
    return y1 - y0


def memory_bytes_shown(readout: str) -> int:
    m = re.search(r"=\s*([\d,]+)\s*B\s*=", readout)
    assert m, f"no byte count in the readout: {readout!r}"
    return int(m.group(1).replace(",", ""))


def memory_bytes_expected(mem: PanelDriver) -> int:
    from kvlab import kv_cache_bytes

    return kv_cache_bytes(mem.int_value("L"), mem.int_value("H"), mem.int_value("D"), mem.int_value("S"),
                          mem.int_value("B"), mem.value("dtype"))


def filled_of(readout: str) -> tuple[int, int]:
    m = re.search(r"已生成\s*([\d,]+)\s*/\s*([\d,]+)", readout)
    assert m, f"no fill count in the readout: {readout!r}"
    return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))


def bad_value(ch: ChapterPage, panel: PanelDriver, control: str, text: str, label: str, readout: str,
              figures: list[dict]) -> None:
    """Type ``text`` into ``control``: a Chinese warning naming ``label``, greyed-out and unchanged results."""
    panel.type_text(control, text)
    warn = panel.wait_message("warn", True, f"{control} = {text!r} should show a .kvlab-msg-warn message")
    assert any(f"「{label}」" in w and "上一次有效" in w for w in warn), warn
    assert not any(re.search(r"\b(must|got|between)\b", w) for w in warn), warn  # Chinese, not an API message
    assert panel.messages("bug") == []
    panel.wait_stale(True, f"{control} = {text!r} must grey out the readout and every figure")
    assert panel.readout() == readout, "the readout must keep the last valid values (greyed out)"
    ch.page.wait_for_timeout(300)
    for i, before in enumerate(figures):
        assert panel.figure(i)["data"] == before["data"], f"figure #{i} must keep the last valid values"


def interact(ch: ChapterPage) -> None:
    from kvlab import format_bytes

    mem = ch.panel("kvlab-memory")
    r0 = mem.readout()
    b0 = memory_bytes_shown(r0)
    assert b0 == memory_bytes_expected(mem) == 2 * 32 * 1 * 32 * 1024 * 128 * 2, r0
    assert "原文示例" in r0 and "的 1 倍" in r0, r0
    tensor0, curve0 = mem.figure(0), mem.figure(1)
    reference = "虚线：原文示例 L=32、H=32、D=128、S=1,024、fp16"
    # the default is the chapter's example: the tensor fills the dashed outline exactly (256 KiB per token of K)
    assert box(mem, 0, "当前的张量") == box(mem, 0, reference) == (0, 1024, 0, 256)
    assert box(mem, 0, "已存的 token") == (0, 1024 * 30 // 100, 0, 256)

    # L by keyboard: the byte count follows the formula, the tensor grows taller than the outline
    mem.press_slider("L", "ArrowRight")
    r1 = mem.wait_readout(lambda t: memory_bytes_shown(t) != b0, "ArrowRight on L should change the bytes")
    assert mem.int_value("L") == 33
    assert memory_bytes_shown(r1) == memory_bytes_expected(mem) == b0 * 33 // 32, r1
    tensor1 = mem.wait_figure_changed(0, tensor0, "the tensor should redraw for L = 33")
    assert "（33, 1, 32, 1024, 128）" in tensor1["title"], tensor1["title"]
    assert any("33 层叠起来" in a for a in tensor1["annotations"]), tensor1["annotations"]
    assert height_kib(mem) == 33 * 8 and box(mem, 0, reference)[3] == 256  # 8 KiB per layer; outline stays
    assert height_kib(mem, "x2") == 8  # one layer: unchanged
    mem.wait_figure_changed(1, curve0, "the memory-vs-S curve should redraw for L = 33")

    # H and D by keyboard: each layer (right) gets shorter, then taller; the bytes follow
    mem.press_slider("H", "ArrowLeft")
    r_h = mem.wait_readout(lambda t: memory_bytes_shown(t) == b0 * 33 * 31 // (32 * 32), "H = 31 changes the bytes")
    tensor_h = mem.wait_figure_changed(0, tensor1, "the tensor should redraw for H = 31")
    assert height_kib(mem, "x2") == 31 * 128 * 2 / 1024 and any("31 个 KV 头" in a for a in tensor_h["annotations"])
    mem.press_slider("D", "ArrowRight")
    r_d = mem.wait_readout(lambda t: t != r_h, "ArrowRight on D should change the bytes")
    assert mem.int_value("D") == 144 and memory_bytes_shown(r_d) == memory_bytes_expected(mem), r_d
    tensor_d = mem.wait_figure_changed(0, tensor_h, "the tensor should redraw for D = 144")
    assert height_kib(mem, "x2") == 31 * 144 * 2 / 1024 and any("每个头 144 个数" in a for a in tensor_d["annotations"])
    mem.press_slider("H", "ArrowRight")
    mem.press_slider("D", "ArrowLeft")
    mem.wait_readout(lambda t: t == r1, "H and D back should give the L = 33 readout again")

    # dtype: int8 halves fp16, and so does the tensor's height
    b1 = memory_bytes_shown(r1)
    tensor1 = mem.figure(0)
    mem.select("dtype", "int8")
    r2 = mem.wait_readout(lambda t: memory_bytes_shown(t) != b1, "choosing int8 should change the bytes")
    assert memory_bytes_shown(r2) == b1 // 2 == memory_bytes_expected(mem), r2
    total = f"共 {format_bytes(memory_bytes_shown(r2))}"
    tensor2 = mem.wait_figure_changed(0, tensor1, "the tensor should redraw for int8")
    assert "int8" in tensor2["title"] and total in tensor2["title"], tensor2["title"]
    assert height_kib(mem) == 33 * 4 and any("× 1 字节" in a for a in tensor2["annotations"])
    curve2 = mem.figure(1)

    # bad S: a Chinese warning naming the box, nothing else changes; then a valid S doubles the width
    bad_value(ch, mem, "S", "0", "序列长度 S", r2, [tensor2, curve2])
    bad_value(ch, mem, "S", "99999999", "序列长度 S", r2, [tensor2, curve2])
    mem.type_text("S", "2048")
    mem.wait_message("warn", False, "a valid S should clear the warning")
    mem.wait_stale(False, "a valid S must un-grey the panel")
    r3 = mem.wait_readout(lambda t: memory_bytes_shown(t) == 2 * memory_bytes_shown(r2), "S = 2048 doubles the bytes")
    assert memory_bytes_shown(r3) == memory_bytes_expected(mem), r3
    tensor3 = mem.wait_figure_changed(0, tensor2, "the tensor should redraw for S = 2048")
    assert box(mem, 0, "当前的张量")[1] == 2048 and box(mem, 0, reference)[1] == 1024

    # B: three sequences, two drawn behind the first; a bad B warns the same way
    mem.type_text("B", "3")
    r_b = mem.wait_readout(lambda t: memory_bytes_shown(t) == 3 * memory_bytes_shown(r3), "B = 3 triples the bytes")
    tensor_b = mem.wait_figure_changed(0, tensor3, "the tensor should redraw for B = 3")
    assert len(boxes(mem, 0)["另外 2 条序列（同样大小）|x"]) == 2
    assert any("共 3 条序列" in a for a in tensor_b["annotations"]), tensor_b["annotations"]
    bad_value(ch, mem, "B", "0", "批次 B", r_b, [tensor_b, mem.figure(1)])
    mem.type_text("B", "1")
    mem.wait_stale(False, "B = 1 must un-grey the panel")
    mem.wait_readout(lambda t: t == r3, "B = 1 gives the S = 2048 readout again")
    tensor3 = mem.wait_figure(0, lambda s: s["data"] == tensor3["data"], "B = 1 redraws the single sheet")

    # Play: from the default fill (a part of S) the cache fills up to 100 %, the blue part grows to S
    start_pct = mem.int_value("filled_pct")
    assert 0 < start_pct < 100 and filled_of(r3) == (2048 * start_pct // 100, 2048), r3
    mem.click_play()
    mem.wait_readout(lambda t: filled_of(t)[0] == 2048, "Play should fill the cache to 100 %", timeout_s=60)
    ch.wait_until(mem.playing, lambda p: not p, 10, "Play should stop at 100 %")
    full = mem.wait_figure_changed(0, tensor3, "the tensor should redraw as the cache fills")
    used_total = re.search(r"已用 (.+?) / 共 (.+)$", full["title"])
    assert used_total and used_total.group(1) == used_total.group(2), full["title"]  # a full cache: used == total
    ch.wait_until(lambda: box(mem, 0, "已存的 token")[1], lambda x: x == 2048, 10, "the blue part should reach S")
    assert "已分配、还空着|x" not in boxes(mem, 0)

    # back to the defaults (also for the README screenshot): the original numbers and picture exactly
    while mem.int_value("filled_pct") > start_pct:
        before = mem.int_value("filled_pct")
        mem.press_slider("filled_pct", "ArrowLeft")
        ch.wait_until(lambda: mem.int_value("filled_pct"), lambda v: v < before, 10, "ArrowLeft on the fill slider")
    mem.press_slider("L", "ArrowLeft")
    mem.select("dtype", "fp16")
    mem.type_text("S", "1024")
    mem.wait_readout(lambda t: t == r0, "restoring the controls should restore the original readout")
    mem.wait_figure(0, lambda s: s["data"] == tensor0["data"], "restoring the values should restore the tensor")

    # Padding waste: the padded layout and the pages side by side
    pad = ch.panel("kvlab-padding")
    p0 = pad.readout()
    pfig0 = pad.figure(0)
    assert "14 块 × 16 = 224 个槽位" in p0 and "浪费 21.0%" in p0, p0  # 1+3+1+3+2+4 pages of 16 for 177 tokens
    assert len(boxes(pad, 0)["一个块|x2"]) == 14

    # block size by keyboard: 17 slots a page -> 1+3+1+2+2+4 = 13 pages, the drawing follows
    pad.press_slider("block_size", "ArrowRight")
    p_b = pad.wait_readout(lambda t: t != p0, "ArrowRight on the block size should update the readout")
    assert pad.int_value("block_size") == 17 and "13 块 × 17 = 221 个槽位" in p_b, p_b
    pfig_b = pad.wait_figure_changed(0, pfig0, "the pages should redraw for blocks of 17")
    pages = boxes(pad, 0)["一个块|x2"]
    assert len(pages) == 13 and all(15 < x1 - x0 <= 17 for x0, x1, *_ in pages), pages
    tails = boxes(pad, 0)["每条序列最后一块没用完的部分|x2"]
    assert [x0 for x0, *_ in tails] == [12, 40, 7, 33, 25, 60], tails  # every last page has room left
    assert any("每块 17 个 token" in a for a in pfig_b["annotations"]), pfig_b["annotations"]
    pad.press_slider("block_size", "ArrowLeft")
    pad.wait_readout(lambda t: t == p0, "block size 16 again should give the original readout")

    pad.type_text("lengths", "5, 50")
    p1 = pad.wait_readout(lambda t: t != p0, "new lengths should update the padding readout")
    assert "浪费 45.0%" in p1 and "B = 2 条序列" in p1 and "最长 50 " in p1, p1  # 1 - 55/100
    pfig1 = pad.wait_figure_changed(0, pfig0, "the padding figure should redraw")
    assert [(x0, x1) for x0, x1, *_ in boxes(pad, 0)["padding（空着的槽位）|x"]] == [(5, 50)]
    bad_value(ch, pad, "lengths", "abc", "序列长度（提示词 + 生成）", p1, [pfig1])
    bad_value(ch, pad, "lengths", "3, -1", "序列长度（提示词 + 生成）", p1, [pfig1])
    pad.type_text("lengths", "12, 40, 7, 33, 25, 60")
    pad.wait_message("warn", False, "valid lengths should clear the warning")
    pad.wait_stale(False, "valid lengths must un-grey the padding panel")
    pad.wait_readout(lambda t: t == p0, "the original lengths should give the original readout")
    pad.wait_figure(0, lambda s: s["data"] == pfig0["data"], "the original lengths should give the original figure")
