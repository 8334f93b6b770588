"""Browser interactions for chapter 3.2 (run by tests/test_browser.py after run-all)."""
from __future__ import annotations

import re

from browser_support import ChapterPage, PanelDriver

NOTEBOOK = "02_cache_storage_shape.ipynb"
SCREENSHOT = ".kvlab-panel.kvlab-memory"


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


def interact(ch: ChapterPage) -> None:
    from kvlab import format_bytes

    mem = ch.panel("kvlab-memory")
    r0 = mem.readout()
    b0 = memory_bytes_shown(r0)
    assert b0 == memory_bytes_expected(mem) == 2 * 32 * 1 * 32 * 1024 * 128 * 2, r0
    grid0, curve0 = mem.figure(0), mem.figure(1)

    # L by keyboard: the byte count follows the formula
    mem.press_slider("L", "ArrowRight")
    r1 = mem.wait_readout(lambda t: memory_bytes_shown(t) != b0, "ArrowRight on L should change the bytes")
    assert mem.int_value("L") == 33
    assert memory_bytes_shown(r1) == memory_bytes_expected(mem) == b0 * 33 // 32, r1
    grid1 = mem.wait_figure_changed(0, grid0, "the cache grid should redraw for L = 33")
    assert "(33,1,32,1024,128)" in grid1["title"].replace(" ", ""), grid1["title"]
    assert grid1["lengths"][0] == 33, grid1["lengths"]  # one heatmap row per layer
    mem.wait_figure_changed(1, curve0, "the memory-vs-S curve should redraw for L = 33")

    # dtype: int8 halves fp16
    b1 = memory_bytes_shown(r1)
    mem.select("dtype", "int8")
    r2 = mem.wait_readout(lambda t: memory_bytes_shown(t) != b1, "choosing int8 should change the bytes")
    assert memory_bytes_shown(r2) == b1 // 2 == memory_bytes_expected(mem), r2
    total = f"共 {format_bytes(memory_bytes_shown(r2))}"
    grid2 = mem.wait_figure_changed(0, grid1, "the cache grid should redraw for int8")
    assert "int8" in grid2["title"] and total in grid2["title"], grid2["title"]

    # S = 0: a warning, no bug, nothing else changes
    mem.type_text("S", "0")
    warn = mem.wait_message("warn", True, "S = 0 should show a .kvlab-msg-warn message")
    assert any("序列长度" in w for w in warn), warn
    assert mem.messages("bug") == []
    assert any("上一次有效" in w for w in warn), warn  # says that what stays on screen is stale
    mem.wait_stale(True, "S = 0 must grey out the readout and every figure")
    assert mem.readout() == r2, "the readout must keep the last valid values (greyed out)"
    ch.page.wait_for_timeout(300)
    assert mem.figure(0)["data"] == grid2["data"], "the figure must keep the last valid values"

    # a valid S again: the message goes, the bytes follow
    mem.type_text("S", "2048")
    mem.wait_message("warn", False, "a valid S should clear the warning")
    mem.wait_stale(False, "a valid S must un-grey the panel")
    r3 = mem.wait_readout(lambda t: memory_bytes_shown(t) == 2 * memory_bytes_shown(r2), "S = 2048 doubles the bytes")
    assert memory_bytes_shown(r3) == memory_bytes_expected(mem), r3
    grid3 = mem.wait_figure_changed(0, grid2, "the cache grid should redraw for S = 2048")

    # Play: from the default fill (a part of S) the cache fills up to 100 %
    start_pct = mem.int_value("filled_pct")
    assert 0 < start_pct < 100 and filled_of(r3) == (2048 * start_pct // 100, 2048), r3
    mem.click_play()
    mem.wait_readout(lambda t: filled_of(t)[0] == 2048, "Play should fill the cache to 100 %", timeout_s=60)
    ch.wait_until(mem.playing, lambda p: not p, 10, "Play should stop at 100 %")
    full = mem.wait_figure_changed(0, grid3, "the grid should redraw as the cache fills")
    used_total = re.search(r"已用 (.+?) / 共 (.+)$", full["title"])
    assert used_total and used_total.group(1) == used_total.group(2), full["title"]  # a full cache: used == total

    # back to the defaults (also for the README screenshot): the original numbers exactly
    while mem.int_value("filled_pct") > start_pct:
        before = mem.int_value("filled_pct")
        mem.press_slider("filled_pct", "ArrowLeft")
        ch.wait_until(lambda: mem.int_value("filled_pct"), lambda v: v < before, 10, "ArrowLeft on the fill slider")
    mem.press_slider("L", "ArrowLeft")
    mem.select("dtype", "fp16")
    mem.type_text("S", "1024")
    mem.wait_readout(lambda t: t == r0, "restoring the controls should restore the original readout")
    mem.wait_figure(0, lambda s: s["data"] == grid0["data"], "restoring the values should restore the grid")

    # Padding waste
    pad = ch.panel("kvlab-padding")
    p0 = pad.readout()
    pfig0 = pad.figure(0)
    pad.type_text("lengths", "5, 50")
    p1 = pad.wait_readout(lambda t: t != p0, "new lengths should update the padding readout")
    assert "浪费 45.0%" in p1 and "B = 2 条序列" in p1 and "最长 50 " in p1, p1  # 1 - 55/100
    pad.wait_figure_changed(0, pfig0, "the padding figure should redraw")
    pad.type_text("lengths", "abc")
    warn = pad.wait_message("warn", True, "lengths 'abc' should show a .kvlab-msg-warn message")
    assert warn and pad.messages("bug") == [], warn
    pad.wait_stale(True, "bad lengths must grey out the padding readout and figure")
    assert pad.readout() == p1
    pad.type_text("lengths", "12, 40, 7, 33, 25, 60")
    pad.wait_message("warn", False, "valid lengths should clear the warning")
    pad.wait_stale(False, "valid lengths must un-grey the padding panel")
    pad.wait_readout(lambda t: t == p0, "the original lengths should give the original readout")
