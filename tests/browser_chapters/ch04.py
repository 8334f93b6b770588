"""Browser interactions for chapter 3.4 (run by tests/test_browser.py after run-all)."""
from __future__ import annotations

import re

from browser_support import ChapterPage, Fail, PanelDriver

NOTEBOOK = "04_llama7b_memory_estimate.ipynb"
SCREENSHOT = ".kvlab-panel.kvlab-calc"


def number_after(pattern: str, text: str) -> int:
    m = re.search(pattern + r"\s*([\d,]+)", text)
    assert m, f"no number after {pattern!r} in: {text!r}"
    return int(m.group(1).replace(",", ""))


def total_shown(readout: str) -> int:
    return number_after(r"=", re.search(r"=\s*[\d,]+\s*B\s*=", readout).group(0))


def total_expected(calc: PanelDriver) -> int:
    from kvlab import MODEL_PRESETS

    return MODEL_PRESETS[calc.value("model")].kv_cache_bytes(calc.int_value("seq_len"), calc.int_value("batch_size"),
                                                            calc.value("dtype"))


def slide_to(calc: PanelDriver, target: int) -> str:
    """Press ← / → on the log-scale slider until it shows ``target``; return the readout for it."""
    from kvlab import MODEL_PRESETS

    while calc.int_value("seq_len") != target:
        before = calc.int_value("seq_len")
        calc.press_slider("seq_slider", "ArrowRight" if before < target else "ArrowLeft")
        calc.chapter.wait_until(lambda: calc.int_value("seq_len"), lambda v: v != before, 10, "slider key press")
    p = MODEL_PRESETS[calc.value("model")]
    want = p.kv_cache_bytes(target, calc.int_value("batch_size"), calc.value("dtype"))
    return calc.wait_readout(lambda t: total_shown(t) == want, f"the readout should show {want:,} B for S = {target}")


def interact_calculator(ch: ChapterPage) -> None:
    calc = ch.panel("kvlab-calc")
    r0 = calc.readout()
    assert total_shown(r0) == total_expected(calc) == 2 * 32 * 32 * 2048 * 128 * 2, r0
    curves0, layers0 = calc.figure(0), calc.figure(1)

    # one key press on the log slider: 2048 -> 3072 tokens, both figures redraw
    calc.press_slider("seq_slider", "ArrowRight")
    r1 = calc.wait_readout(lambda t: total_shown(t) != total_shown(r0), "ArrowRight on S should change the bytes")
    assert calc.int_value("seq_len") == 3072 and total_shown(r1) == total_expected(calc), r1
    assert "⚠" in r1, "3072 tokens is past LLaMA-7B's 2048-token context: the readout must flag it"
    curves1 = calc.wait_figure_changed(0, curves0, "the curves should redraw for S = 3072")
    calc.wait_figure_changed(1, layers0, "the per-layer bars should redraw for S = 3072")

    # Mistral-7B: its own (rolling buffer) formula, flat past 4096 tokens
    calc.select("model", "Mistral-7B")
    r2 = calc.wait_readout(lambda t: "Mistral-7B" in t and total_shown(t) == total_expected(calc), "Mistral readout")
    assert "滑动窗口" in r2, r2
    at_8192 = total_shown(slide_to(calc, 8192))
    assert at_8192 == total_shown(slide_to(calc, 16384)) == 4096 * 2 * 32 * 8 * 128 * 2
    curves2 = calc.wait_figure_changed(0, curves1, "the curves should redraw for Mistral-7B")
    assert "Mistral-7B" in calc.readout()

    # Gemma-2-9B: windowed and global layers drawn in two colours
    calc.select("model", "Gemma-2-9B")
    calc.wait_readout(lambda t: "Gemma-2-9B" in t and total_shown(t) == total_expected(calc), "Gemma readout")
    calc.wait_figure(1, lambda s: s["ntraces"] == 2, "Gemma-2's layer bars should come in two groups")

    # dtype: int8 halves fp16
    b = total_shown(calc.readout())
    calc.select("dtype", "int8")
    calc.wait_readout(lambda t: total_shown(t) == b // 2 == total_expected(calc), "int8 should halve the bytes")

    # batch 0: a warning, the readout greyed out and left as it was; then batch 2 doubles the int8 bytes
    calc.select("model", "LLaMA-7B")
    r3 = calc.wait_readout(lambda t: "LLaMA-7B" in t and total_shown(t) == total_expected(calc), "LLaMA readout")
    calc.wait_figure(0, lambda s: "int8" in s["title"], "the curves should redraw for LLaMA-7B in int8")
    ch.extra_screenshot("calc_int8", ".kvlab-panel.kvlab-calc")  # int8: the curves drop against the weights line
    curves3 = calc.figure(0)
    calc.type_text("batch_size", "0")
    warn = calc.wait_message("warn", True, "batch 0 should show a .kvlab-msg-warn message")
    assert any("批次 B" in w for w in warn) and calc.messages("bug") == [], warn
    calc.wait_stale(True, "batch 0 must grey out the readout and both figures")
    assert calc.readout() == r3
    ch.page.wait_for_timeout(300)
    assert calc.figure(0)["data"] == curves3["data"], "the curves must keep the last valid values"
    calc.type_text("batch_size", "2")
    calc.wait_message("warn", False, "a valid batch should clear the warning")
    calc.wait_stale(False, "a valid batch must un-grey the panel")
    calc.wait_readout(lambda t: total_shown(t) == 2 * total_shown(r3), "batch 2 doubles the bytes")

    # back to the defaults (also for the README screenshot): the original readout exactly
    calc.type_text("batch_size", "1")
    calc.select("dtype", "fp16")
    slide_to(calc, 2048)
    calc.wait_readout(lambda t: t == r0, "restoring the controls should restore the original readout")
    calc.wait_figure(0, lambda s: s["data"] == curves0["data"], "restoring the controls should restore the curves")
    assert curves2["data"] != curves0["data"]

    # an exact length typed into the S box (the log slider has no 5,000): the readout follows, the slider stays
    calc.type_text("seq_len", "5000")
    calc.wait_readout(lambda t: total_shown(t) == 5000 * 512 * 1024, "a typed S = 5000 should give 5000 x 512 KiB")
    calc.type_text("seq_len", "2048")
    calc.wait_readout(lambda t: t == r0, "typing 2048 back should restore the original readout")
    # the curves show only the models picked in 「曲线上的模型」 (plus the selected one)
    calc.control("curve_models").locator("select").select_option(label=["GPT-2 (124M)", "Mistral-7B"])
    calc.wait_figure(0, lambda s: s["ntraces"] == 3 * 2 + 2,
                     "three models (lines + context diamonds), the weights line and the marker")
    calc.control("curve_models").locator("select").select_option(value=[])
    calc.wait_figure(0, lambda s: s["ntraces"] == 1 * 2 + 2, "no pick: only the selected model (and its weights)")
    # the chapter's hypothetical 70B: its Chinese label, no context warning even far past 8192 tokens
    calc.select("model", "原文假设的 70B（64 个 KV 头）")
    calc.type_text("seq_len", "65536")
    hypo = calc.wait_readout(lambda t: total_shown(t) == 2 * 80 * 64 * 65536 * 128 * 2, "hypothetical 70B at 65,536")
    assert "原文假设的 70B" in hypo and "⚠" not in hypo and "chapter's hypothetical" not in hypo, hypo
    calc.select("model", "LLaMA-7B")
    calc.type_text("seq_len", "2048")
    calc.wait_readout(lambda t: t == r0, "LLaMA-7B at 2048 again")
    from kvlab import MODEL_PRESETS
    from kvlab.lessons import memory_estimate as lesson

    default_picks = [MODEL_PRESETS[n].label for n in lesson.CURVE_MODELS]
    calc.control("curve_models").locator("select").select_option(label=default_picks)
    calc.wait_figure(0, lambda s: s["data"] == curves0["data"], "the default picks should restore the curves")


def fit_numbers(readout: str) -> tuple[int, int]:
    return number_after("放得下的最长上下文：", readout), number_after("放得下的最大批次：", readout)


def interact_fit(ch: ChapterPage) -> None:
    from kvlab import MODEL_PRESETS
    from kvlab.lessons import memory_estimate as lesson
    from kvlab.presets import GPU_PRESETS

    fit = ch.panel("kvlab-fit")
    r0 = fit.readout()
    t4 = GPU_PRESETS["T4 16 GB (Colab)"]
    plan = lesson.plan_fit("LLaMA-7B", t4.memory_bytes, 2048)
    assert fit_numbers(r0) == (plan.longest_context, plan.largest_batch) == (1942, 0), r0  # 0.9 of the card
    assert fit.int_value("budget_mib") == t4.memory_mib
    bar0, growth0 = fit.figure(0), fit.figure(1)
    ch.extra_screenshot("fit_t4", ".kvlab-panel.kvlab-fit")  # the growth figure: ◆ before the released context

    # a bigger card: its nvidia-smi total fills the budget box, both numbers and both figures follow
    fit.select("gpu", "H200 141 GB")
    ch.wait_until(lambda: fit.int_value("budget_mib"), lambda v: v == 143_771, 10, "the H200 fills the budget box")
    h200 = lesson.plan_fit("LLaMA-7B", GPU_PRESETS["H200 141 GB"].memory_bytes, 2048)
    fit.wait_readout(lambda t: fit_numbers(t) == (h200.longest_context, h200.largest_batch), "H200 numbers")
    bar1 = fit.wait_figure_changed(0, bar0, "the budget bar should redraw for the H200")
    assert "H200" in bar1["title"], bar1["title"]
    fit.wait_figure_changed(1, growth0, "the growth figure should redraw for the H200")
    ch.extra_screenshot("fit_h200", ".kvlab-panel.kvlab-fit")  # ● (cache = weights) on the figure, ◆ far right

    # LLaMA-65B in fp16 on a T4: the weights alone do not fit -> a message, greyed out
    fit.select("model", "LLaMA-65B")
    r1 = fit.wait_readout(lambda t: "65,285,660,672" in t and fit_numbers(t)[0] > 0, "LLaMA-65B on the H200")
    fit.select("gpu", "T4 16 GB (Colab)")
    warn = fit.wait_message("warn", True, "65B fp16 weights on a T4 should show a warning")
    assert any("总显存" in w and "放不下" in w and "还差" in w for w in warn) and fit.messages("bug") == [], warn
    fit.wait_stale(True, "weights that do not fit must grey out the fit panel")
    assert fit.readout() == r1
    # int4 weights on a 40 GB A100 fit again
    fit.open_more("weight_dtype")  # dtypes, budget, usable share and batch are folded under 更多设置
    fit.select("weight_dtype", "int4")
    fit.select("gpu", "A100 40 GB")
    fit.wait_message("warn", False, "int4 weights on an A100 40 GB should fit")
    fit.wait_stale(False, "a fitting budget must un-grey the panel")
    a100 = lesson.plan_fit("LLaMA-65B", GPU_PRESETS["A100 40 GB"].memory_bytes, 2048, weight_dtype="int4")
    fit.wait_readout(lambda t: fit_numbers(t) == (a100.longest_context, a100.largest_batch), "65B int4 on an A100")

    # typing: a budget of 0 is refused; a typed context and batch drive the numbers
    fit.type_text("budget_mib", "0")
    fit.wait_message("warn", True, "a budget of 0 MiB should show a warning")
    fit.wait_stale(True, "a budget of 0 must grey out the panel")
    fit.type_text("budget_mib", "40960")
    fit.wait_stale(False, "a valid budget must un-grey the panel")
    fit.type_text("seq_len", "8192")
    at_8k = lesson.plan_fit("LLaMA-65B", 40960 * 2**20, 8192, weight_dtype="int4")
    fit.wait_readout(lambda t: fit_numbers(t)[1] == at_8k.largest_batch, "S = 8192 gives the largest batch")
    assert at_8k.largest_batch < a100.largest_batch

    # the usable share: 1 plans with the whole card, 0 is refused
    fit.type_text("usable", "1")
    whole = lesson.plan_fit("LLaMA-65B", 40960 * 2**20, 8192, weight_dtype="int4", usable=1)
    fit.wait_readout(lambda t: fit_numbers(t) == (whole.longest_context, whole.largest_batch), "usable share 1")
    fit.type_text("usable", "0")
    assert any("显存使用比例" in w for w in fit.wait_message("warn", True, "a usable share of 0 should warn"))
    fit.wait_stale(True, "a usable share of 0 must grey out the panel")
    fit.type_text("usable", "0.9")
    fit.wait_stale(False, "a usable share of 0.9 must un-grey the panel")

    # back to the defaults
    fit.type_text("seq_len", "2048")
    fit.select("model", "LLaMA-7B")
    fit.select("weight_dtype", "fp16")
    fit.select("gpu", "T4 16 GB (Colab)")
    fit.wait_readout(lambda t: t == r0, "restoring the controls should restore the original readout")
    assert plan.longest_context < MODEL_PRESETS["LLaMA-7B"].context_length  # not one 2048-token sequence


# -- the exercises (动手练习): answered in the notebook's own editor, checked by the check cell ------------------
JS_MARK_CELL = """([tag, mark]) => {
  const w = window.__kvlabNb;
  const i = w.content.widgets.findIndex(c => c.model.getMetadata('kvlab_exercises') === tag);
  if (i >= 0) w.content.widgets[i].node.setAttribute('data-kvlab-cell', mark);
  return i;
}"""


def exercise_cell(ch: ChapterPage, tag: str, mark: str):
    """The notebook cell the exercise generator tagged ``tag`` (e.g. "ch04.largest_batch/stub")."""
    if ch.page.evaluate(JS_MARK_CELL, [tag, mark]) < 0:
        raise Fail(f"no cell with metadata kvlab_exercises = {tag!r}: run `python -m kvlab.exercises`")
    return ch.page.locator(f'[data-kvlab-cell="{mark}"]')


def feedback(check) -> tuple[str, str]:
    """(status, text) of the feedback a check cell shows: status is todo, right, wrong or bug."""
    box = check.locator(".jp-OutputArea .kvlab-exercise-feedback")
    if box.count() != 1:
        return "", ""
    status = next((c.removeprefix("kvlab-exercise-") for c in box.get_attribute("class").split()
                   if c.startswith("kvlab-exercise-") and c != "kvlab-exercise-feedback"), "")
    return status, box.inner_text().strip()


def prompt_count(cell) -> str:
    return cell.locator(".jp-InputArea-prompt").inner_text().strip()


def answer_last_line(ch: ChapterPage, stub, check, line: str) -> tuple[str, str]:
    """Replace the stub's last line by typing ``line`` in its editor, then Shift+Enter twice (the stub, then the
    check cell), as a learner would; return the new feedback."""
    before = prompt_count(check)
    stub.locator(".cm-content").click()
    ch.page.keyboard.press("Control+End")
    ch.page.keyboard.press("Shift+Home")
    ch.page.keyboard.type(line)
    ch.page.keyboard.press("Shift+Enter")  # runs the stub; the check cell below is selected
    ch.page.keyboard.press("Shift+Enter")  # runs the check cell
    ch.wait_until(lambda: prompt_count(check), lambda p: p != before and "*" not in p, 60,
                  f"the check cell should run again after typing {line!r}")
    return ch.wait_until(lambda: feedback(check), lambda f: f[0] != "", 10, "the check cell should show feedback")


def interact_exercises(ch: ChapterPage) -> None:
    from kvlab.exercises import ch04 as ex
    from kvlab.exercises.solutions import SOLUTIONS

    # after run-all, both untouched stubs report 「还没有完成」
    for key in ("ch04.window", "ch04.largest_batch"):
        status, text = feedback(exercise_cell(ch, f"{key}/check", key.replace(".", "-")))
        assert status == "todo" and "还没有完成" in text, (key, status, text)

    stub = exercise_cell(ch, "ch04.largest_batch/stub", "batch-stub")
    check = exercise_cell(ch, "ch04.largest_batch/check", "batch-check")
    stub.scroll_into_view_if_needed()
    # wrong: the whole card instead of its usable 0.9 -> 17; the specific message, no hint yet
    status, text = answer_last_line(ch, stub, check, "largest_batch = 17")
    assert status == "wrong" and "你用了整张卡" in text and "你的答案：17" in text, text
    assert "提示" not in text, text
    # wrong again (the A100's "80 GB" read as 80 x 10^9 bytes -> 13): its own message, and now the first hint
    status, text = answer_last_line(ch, stub, check, "largest_batch = 13")
    assert status == "wrong" and "当成了 10⁹ 字节的 GB" in text and f"提示：{ex.LARGEST_BATCH.hints[0]}" in text, text
    exercise_screenshot(ch, "wrong")
    # right: (0.9 x 81,920 MiB - 2 x 13,015,864,320) // (2 x 40 x 40 x 4096 x 128 x 2) = 15
    status, text = answer_last_line(ch, stub, check, "largest_batch = 15")
    assert status == "right" and "正确！15" in text, text
    # the reference solution stays folded until 「显示参考答案」 is clicked
    solution = check.locator(".kvlab-exercise-solution")
    code = solution.locator("pre")
    assert not code.is_visible()
    solution.locator("summary").click()
    ch.wait_until(code.is_visible, bool, 10, "clicking 「显示参考答案」 should unfold the solution")
    assert "largest_batch = room // per_sequence" in code.inner_text()
    assert code.inner_text().strip() == SOLUTIONS["ch04.largest_batch"].strip()
    exercise_screenshot(ch, "right")


def exercise_screenshot(ch: ChapterPage, name: str) -> None:
    """The exercise from its task to the check's feedback, for a reviewer, under $KVLAB_SCREENSHOTS."""
    exercise_cell(ch, "ch04.largest_batch/task", "batch-task").evaluate("(e) => e.scrollIntoView({block: 'start'})")
    ch.extra_screenshot(f"exercise_{name}")


def interact(ch: ChapterPage) -> None:
    interact_calculator(ch)
    interact_fit(ch)
    interact_exercises(ch)
