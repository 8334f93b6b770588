"""Browser interactions for chapter 3.3 (run by tests/test_browser.py after run-all)."""
from __future__ import annotations

import math
import re

from browser_support import ChapterPage

NOTEBOOK = "03_prefill_and_decode.ipynb"
SCREENSHOT = ".kvlab-panel.kvlab-batch"

DEFAULT_PROMPT = "人工智能模型处理一个请求，通常分为两个阶段："  # 22 characters, one token each
TIMELINE_TOKENS = 24
PREFILL_LENGTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
UNEQUAL_NEW_TOKENS = 12


def number(pattern: str, text: str) -> float:
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not found in: {text!r}"
    return float(m.group(1).replace(",", ""))


def timeline_state(readout: str) -> tuple[int, int]:
    """(pass shown, cache.length after it)."""
    return int(number(r"第\s*(\d+)\s*/\s*\d+\s*次前向", readout)), int(number(r"cache\.length\s*=\s*(\d+)", readout))


def interact_timeline(ch: ChapterPage) -> None:
    tl = ch.panel("kvlab-timeline")
    r0 = tl.readout()
    P = len(DEFAULT_PROMPT)
    assert timeline_state(r0) == (1, P) and "预填充" in r0 and f"整段提示词 {P} 个 token" in r0, r0
    fig0 = tl.figure(0)

    tl.press_slider("step", "ArrowRight")
    r1 = tl.wait_readout(lambda t: timeline_state(t)[0] == 2, "ArrowRight should show pass 2")
    assert timeline_state(r1) == (2, P + 1) and "解码" in r1 and "上一步生成的 1 个 token" in r1, r1
    tl.wait_figure_changed(0, fig0, "the timeline should redraw for pass 2")

    tl.click_play()
    last = tl.wait_readout(lambda t: timeline_state(t)[0] == TIMELINE_TOKENS, "Play should run to the last pass",
                           timeout_s=60)
    ch.wait_until(tl.playing, lambda p: not p, 10, "Play should stop at the last pass")
    assert timeline_state(last) == (TIMELINE_TOKENS, P + TIMELINE_TOKENS - 1), last
    used = number(r"缓存已用\s*([\d.]+)\s*KiB", last)
    assert used == (P + TIMELINE_TOKENS - 1) * 2.0, last  # 2 KiB of K/V per token in the demo model
    ch.extra_screenshot("timeline", ".kvlab-panel.kvlab-timeline")

    # one more token: the same measured generations, one pass longer; TTFT does not move
    ttft = number(r"TTFT = ([\d.]+) ms", last)
    tl.press_slider("new_tokens", "ArrowRight")
    longer = tl.wait_readout(lambda t: f"/ {TIMELINE_TOKENS + 1} 次前向" in t, "one more token should add a pass")
    assert timeline_state(longer) == (TIMELINE_TOKENS, P + TIMELINE_TOKENS - 1), longer
    assert number(r"TTFT = ([\d.]+) ms", longer) == ttft, (last, longer)
    assert f"要预分配 {(P + TIMELINE_TOKENS) * 2.0:.1f} KiB" in longer, longer  # prompt + 25 - 1 tokens
    tl.press_slider("new_tokens", "ArrowLeft")
    tl.wait_readout(lambda t: t == last, "back at 24 tokens the readout is the one before")

    # a shorter prompt: a new generation, the same number of passes
    fig_last = tl.figure(0)
    tl.type_text("prompt", "人工智能")
    r2 = tl.wait_readout(lambda t: timeline_state(t) == (TIMELINE_TOKENS, 4 + TIMELINE_TOKENS - 1),
                         "a 4-token prompt should end at cache.length = 27")
    fig_new = tl.wait_figure_changed(0, fig_last, "the timeline should redraw for the new prompt")
    assert "提示词 4 个 token" in fig_new["title"], fig_new["title"]

    # characters the demo model does not know: a warning, greyed out, nothing else changes
    tl.type_text("prompt", "hello 😀")
    warn = tl.wait_message("warn", True, "an unknown character should show a warning")
    assert any("提示词" in w and "词表" in w for w in warn), warn
    assert tl.messages("bug") == []
    tl.wait_stale(True, "a bad prompt must grey out the readout and figure")
    assert tl.readout() == r2
    tl.type_text("prompt", "")
    ch.wait_until(lambda: tl.messages("warn"), lambda m: any("空" in w for w in m), 30,
                  "an empty prompt should say that it is empty")

    # back to the default prompt and pass 1
    tl.type_text("prompt", DEFAULT_PROMPT)
    tl.wait_message("warn", False, "a valid prompt should clear the warning")
    tl.wait_stale(False, "a valid prompt must un-grey the panel")
    tl.type_slider("step", 1)
    tl.wait_readout(lambda t: timeline_state(t) == (1, P), "typing 1 should go back to pass 1")

    # fewer tokens: a new generation of 6, and the pass slider ends at pass 6
    fig_24 = tl.figure(0)
    tl.type_slider("new_tokens", 6)
    tl.wait_readout(lambda t: "第 1 / 6 次前向" in t, "typing 6 tokens should generate 6 tokens")
    fig_6 = tl.wait_figure_changed(0, fig_24, "the timeline should redraw for 6 tokens")
    assert "之后逐个生成 6 个 token" in fig_6["title"], fig_6["title"]
    tl.press_slider("step", "ArrowRight", times=10)
    r6 = tl.wait_readout(lambda t: timeline_state(t)[0] == 6, "the pass slider should stop at pass 6")
    assert timeline_state(r6) == (6, P + 5) and "第 6 / 6 次前向" in r6, r6
    assert tl.int_value("step") == 6
    tl.type_slider("new_tokens", TIMELINE_TOKENS)
    tl.wait_readout(lambda t: "第 6 / 24 次前向" in t, "back to 24 tokens, still at pass 6")
    tl.press_slider("step", "ArrowLeft", times=5)
    tl.wait_readout(lambda t: timeline_state(t) == (1, P), "ArrowLeft x5 should go back to pass 1")


def prefill_numbers(readout: str) -> dict:
    return {"P": int(number(r"P\s*=\s*(\d+)", readout)),
            "prefill_ms": number(r"预填充一次前向\s*([\d.]+)\s*ms", readout),
            "prefill_tps": number(r"即\s*([\d,]+)\s*token/s", readout),
            "ratio": number(r"是一次预填充的\s*([\d.]+)\s*倍", readout)}


def interact_prefill(ch: ChapterPage) -> None:
    pf = ch.panel("kvlab-prefill")
    r0 = pf.readout()
    n0 = prefill_numbers(r0)
    assert n0["P"] == 64 and pf.value("prompt_len") == "64", r0
    assert math.isclose(n0["prefill_tps"], 64 / (n0["prefill_ms"] / 1e3), rel_tol=0.02), n0
    assert n0["ratio"] > 0, n0  # a measured ratio (which way it goes is the claims' business, never a test's)
    fig0 = pf.figure(0)
    pf.press_slider("prompt_len", "ArrowRight")
    r1 = pf.wait_readout(lambda t: prefill_numbers(t)["P"] == 128, "ArrowRight should select P = 128")
    n1 = prefill_numbers(r1)
    assert math.isclose(n1["prefill_tps"], 128 / (n1["prefill_ms"] / 1e3), rel_tol=0.02), n1
    pf.wait_figure_changed(0, fig0, "the prefill figure should mark P = 128")
    pf.press_slider("prompt_len", "ArrowLeft", times=7)
    r2 = pf.wait_readout(lambda t: prefill_numbers(t)["P"] == 1, "ArrowLeft x7 should reach P = 1")
    assert "1 × " in r2, r2  # one token fed one by one: a single decode step
    pf.press_slider("prompt_len", "ArrowRight", times=6)
    pf.wait_readout(lambda t: t == r0, "back at P = 64 the readout is the original one")

    # a length the notebook did not measure: typed, measured on the spot, offered by the slider
    fig1 = pf.figure(0)
    pf.type_text("lengths", "8, 64, 512")
    pf.wait_figure(0, lambda f: f["lengths"][0] == 3, "the figure should show the 3 lengths typed", timeout_s=120)
    pf.wait_readout(lambda t: t == r0, "P = 64 stays selected, with its numbers measured before")
    assert pf.value("prompt_len") == "64"
    pf.wait_figure_changed(0, fig1, "the prefill figure should redraw for the lengths typed")
    pf.press_slider("prompt_len", "ArrowRight")
    r3 = pf.wait_readout(lambda t: prefill_numbers(t)["P"] == 512, "ArrowRight should select the new P = 512")
    n3 = prefill_numbers(r3)
    assert math.isclose(n3["prefill_tps"], 512 / (n3["prefill_ms"] / 1e3), rel_tol=0.02) and n3["ratio"] > 0, n3
    pf.type_text("lengths", "8, x")
    warn = pf.wait_message("warn", True, "an unreadable length should show a warning")
    assert any("测量的提示词长度" in w for w in warn) and pf.messages("bug") == [], warn
    pf.wait_stale(True, "a bad length list must grey out the readout and figure")
    pf.type_text("lengths", ", ".join(str(n) for n in PREFILL_LENGTHS))
    pf.wait_stale(False, "the original lengths must un-grey the panel")
    pf.wait_readout(lambda t: prefill_numbers(t)["P"] == 256, "512 is gone: the longest length, 256, is selected")
    pf.press_slider("prompt_len", "ArrowLeft", times=2)
    pf.wait_readout(lambda t: t == r0, "back at P = 64 the readout is the original one (measured once)")


def interact_batch(ch: ChapterPage) -> None:
    bt = ch.panel("kvlab-batch")
    r0 = bt.readout()
    assert number(r"B\s*=\s*(\d+)", r0) == 1 and "吞吐 ×1.0" in r0, r0
    curves0, roof0 = bt.figure(0), bt.figure(1)
    bt.press_slider("batch_size", "ArrowRight", times=5)
    r1 = bt.wait_readout(lambda t: number(r"B\s*=\s*(\d+)", t) == 32, "ArrowRight x5 should select B = 32")
    step_ms, tps = number(r"一步解码\s*([\d.]+)\s*ms", r1), number(r"即\s*([\d,]+)\s*token/s", r1)
    assert math.isclose(tps, 32 / (step_ms / 1e3), rel_tol=0.02), r1
    assert number(r"吞吐 ×([\d.]+)", r1) > 0, r1  # measured: a timing comparison is never asserted here
    bt.wait_figure_changed(0, curves0, "the batch curves should mark B = 32")
    roof1 = bt.wait_figure_changed(1, roof0, "the roofline should ring B = 32")
    assert roof1["title"] == roof0["title"], "the roofline itself must not change with B"
    ch.extra_screenshot("batch_b32", ".kvlab-panel.kvlab-batch")

    # a longer context: every B measured again; the K/V share and intensity come from the formula
    assert "已有 8 个 token" in r1 and number(r"K/V 占一步读写字节的\s*([\d.]+)%", r1) == 9, r1
    roof32 = bt.figure(1)
    bt.press_slider("context_len", "ArrowRight", times=2)
    note = bt.wait_message("info", True, "a context not measured yet should say it is being measured", timeout_s=60)
    assert "正在测量" in note[0], note
    r4 = bt.wait_readout(lambda t: "已有 256 个 token" in t, "ArrowRight x2 should measure a context of 256",
                         timeout_s=180)
    # B = 32, the 3 steps timed after 256, 257 and 258 cached tokens: K/V are 71 % of the bytes, intensity 5.00
    assert number(r"K/V 占一步读写字节的\s*([\d.]+)%", r4) == 71 and "算术强度 5.00 FLOP/字节" in r4, r4
    bt.wait_figure_changed(1, roof32, "the batch points should move left on the roofline")
    bt.wait_message("info", False, "the note should go once the numbers are shown")
    ch.extra_screenshot("batch_context", ".kvlab-panel.kvlab-batch")
    bt.press_slider("context_len", "ArrowLeft", times=2)
    bt.wait_readout(lambda t: t == r1, "back at a context of 8 the readout is the B = 32 one (measured once)")
    bt.press_slider("batch_size", "ArrowLeft", times=5)
    bt.wait_readout(lambda t: t == r0, "back at B = 1 the readout is the original one")
    assert "为这 1 条序列生成 1 个 token" in r0, r0


def unequal_numbers(readout: str) -> dict:
    return {"same": re.search(r"(\d+)\s*/\s*(\d+)\s*条与单独运行", readout).groups(),
            "allocated": int(number(r"分配\s*(\d+)\s*个", readout)),
            "used": int(number(r"真正存 token 的\s*(\d+)\s*个", readout)),
            "waste": number(r"浪费\s*([\d.]+)%", readout)}


def expected_slots(lengths: list[int]) -> tuple[int, int]:
    stored = [n + UNEQUAL_NEW_TOKENS - 1 for n in lengths]
    return len(lengths) * max(stored), sum(stored)


def interact_unequal(ch: ChapterPage) -> None:
    uq = ch.panel("kvlab-unequal")
    r0 = uq.readout()
    n0 = unequal_numbers(r0)
    assert n0["same"] == ("4", "4") and (n0["allocated"], n0["used"]) == expected_slots([3, 17, 9, 30]), r0
    grid0, cost0 = uq.figure(0), uq.figure(1)

    uq.type_text("lengths", "1, 60")
    r1 = uq.wait_readout(lambda t: "B = 2 条" in t, "two lengths should give a batch of 2")
    n1 = unequal_numbers(r1)
    allocated, used = expected_slots([1, 60])
    assert n1["same"] == ("2", "2") and (n1["allocated"], n1["used"]) == (allocated, used), r1
    assert n1["waste"] == round(100 * (1 - used / allocated), 1), r1
    grid1 = uq.wait_figure_changed(0, grid0, "the padded grid should redraw")
    assert grid1["lengths"][0] == 2, grid1["lengths"]  # one heatmap row per sequence
    uq.wait_figure_changed(1, cost0, "the cost bars should redraw")

    # a block of 64 is longer than the short sequence: paging needs more than padding here
    uq.type_slider("block_size", 64)
    r2 = uq.wait_readout(lambda t: "每块 64 个 token" in t, "typing 64 should give blocks of 64")
    assert "反而需要 192 个" in r2 and "比补齐浪费的 59 个还多" in r2, r2  # 64 + 128 > 142; 142 - 83 = 59 padded
    ch.extra_screenshot("unequal", ".kvlab-panel.kvlab-unequal")
    assert uq.figure(0)["ntraces"] == 2  # the cache's slots, and apart from them each sequence's returned token
    uq.type_text("lengths", "30, 30")
    r3 = uq.wait_readout(lambda t: "长度 30, 30" in t, "two equal lengths should give their batch")
    assert "长度相同时补齐本来没有浪费" in r3 and "浪费 0.0%" in r3, r3

    uq.type_text("lengths", "abc")
    warn = uq.wait_message("warn", True, "lengths 'abc' should show a warning")
    assert any("提示词长度" in w for w in warn) and uq.messages("bug") == [], warn
    uq.wait_stale(True, "bad lengths must grey out the readout and figures")
    assert uq.readout() == r3
    uq.type_text("lengths", "0, 5")
    ch.wait_until(lambda: uq.messages("warn"), lambda m: any("0" in w and "之间" in w for w in m), 30,
                  "a length of 0 should say the allowed range")

    uq.type_text("lengths", "3, 17, 9, 30")
    uq.wait_message("warn", False, "valid lengths should clear the warning")
    uq.wait_stale(False, "valid lengths must un-grey the panel")
    uq.type_slider("block_size", 16)
    uq.wait_readout(lambda t: t == r0, "the original lengths and block size give the original readout")
    ch.extra_screenshot("unequal_default", ".kvlab-panel.kvlab-unequal")


def interact(ch: ChapterPage) -> None:
    interact_timeline(ch)
    interact_prefill(ch)
    interact_batch(ch)
    interact_unequal(ch)
    ch.extra_screenshot("prefill", ".kvlab-panel.kvlab-prefill")
    plain = ".jp-Cell:has(.js-plotly-plot):not(:has(.kvlab-panel))"  # figures outside the panels
    ch.extra_screenshot("roofline", f"{plain} >> nth=0")
    ch.extra_screenshot("precision", f"{plain} >> nth=1")
    ch.extra_screenshot("source_prefill", ".jp-Cell:has(.kvlab-source) >> nth=0")
    ch.extra_screenshot("source_attention", ".jp-Cell:has(.kvlab-source) >> nth=2")
