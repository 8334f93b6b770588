"""Browser interactions for chapter 3.6 (run by tests/test_browser.py after run-all)."""
from __future__ import annotations

import re

from browser_support import ChapterPage, Fail

NOTEBOOK = "06_paged_cache_and_batching.ipynb"
SCREENSHOT = ".kvlab-panel.kvlab-blocks"


def number(pattern: str, text: str) -> int:
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not found in: {text!r}"
    return int(m.group(1).replace(",", ""))


def expected_animation():
    from kvlab import load_demo_model
    from kvlab.lessons import paged as lesson

    return lesson.animation_run(*load_demo_model("cpu"))  # the same seeded run the kernel made


# -- the block-table animation ----------------------------------------------------------------------------
def interact_blocks(ch: ChapterPage) -> None:
    run = expected_animation()
    b = ch.panel("kvlab-blocks")
    r0 = b.readout()
    assert r0.startswith("第 0 步") and "请求 0" in r0 and "到达" in r0, r0
    fig0 = b.figure(0)

    b.press_slider("step", "ArrowRight")
    r1 = b.wait_readout(lambda t: t.startswith("第 1 步"), "ArrowRight should show step 1")
    first = run.steps[1]
    for rid, blocks in first.tables.items():
        assert f"请求 {rid} → {blocks}" in r1, r1
    b.wait_figure_changed(0, fig0, "the pool and block tables should redraw for step 1")

    pre = next(i for i, s in enumerate(run.steps) if s.preempted)
    b.press_slider("step", "ArrowRight", times=pre - 1)
    r2 = b.wait_readout(lambda t: t.startswith(f"第 {pre} 步"), f"ArrowRight should reach step {pre}")
    assert f"请求 {run.steps[pre].preempted[0]} 被抢占" in r2 and "空闲列表" in r2, r2
    ch.wait_until(lambda: b.root.locator(".kvlab-figure").first.inner_text(), lambda t: "被抢占，等待" in t, 15,
                  "the block tables should mark the preempted request")

    b.press_slider("step", "End")
    last = len(run.steps) - 1
    r3 = b.wait_readout(lambda t: t.startswith(f"第 {last} 步"), "End should show the last step")
    assert "块表：（空）" in r3 and "等待队列：空" in r3, r3  # every block returned

    b.press_slider("step", "Home")
    b.wait_readout(lambda t: t == r0, "Home should come back to step 0")
    # Play from 8 steps before the end (each frame is drawn at the animation's pace: the whole run takes ~25 s)
    b.type_slider("step", last - 8)
    b.wait_readout(lambda t: t.startswith(f"第 {last - 8} 步"), f"typing {last - 8} should show that step")
    b.click_play()
    b.wait_readout(lambda t: t.startswith(f"第 {last} 步"), "Play should run to the last step", timeout_s=90)
    ch.wait_until(b.playing, lambda p: not p, 10, "Play should stop at the last step")
    b.press_slider("step", "Home")
    b.wait_readout(lambda t: t == r0, "Home should come back to step 0 for the screenshot")


# -- waste of the three schemes -------------------------------------------------------------------------------
def waste_share(readout: str, scheme: str) -> float:
    m = re.search(scheme + r"\s+[\d,]+\s+[\d,]+\s+[\d.]+ \w+\s+([\d.]+)%", readout)
    assert m, f"no waste share for {scheme} in: {readout!r}"
    return float(m.group(1))


def interact_waste(ch: ChapterPage) -> None:
    w = ch.panel("kvlab-waste")
    r0 = w.readout()
    paged0, padded0, reserved0 = (waste_share(r0, s) for s in ("分页", r"填充到最长（3\.2）", r"按固定长度预留（3\.5）"))
    assert paged0 < padded0 < reserved0, r0
    assert w.int_value("reserve") == 256
    fig0 = w.figure(0)

    w.select("block_size", "1")
    r1 = w.wait_readout(lambda t: waste_share(t, "分页") == 0.0, "blocks of 1 token should waste nothing")
    assert waste_share(r1, r"填充到最长（3\.2）") == padded0, r1  # the other schemes do not depend on blocks
    fig1 = w.wait_figure_changed(0, fig0, "the slots plot should redraw for 1-token blocks")
    assert "每块 1 个 token" in fig1["title"], fig1["title"]

    w.select("block_size", "64")
    w.wait_readout(lambda t: waste_share(t, "分页") > paged0, "64-token blocks should waste more than 16")

    w.press_slider("reserve", "Home")  # 8 tokens each: shorter than most requests
    r2 = w.wait_readout(lambda t: "个请求最长时超过每个请求预留的 8 个 token" in t,
                        "a reservation of 8 tokens should flag the requests it cannot hold")
    assert number(r"有 (\d+) 个请求", r2) > 0, r2
    w.wait_figure_changed(0, fig1, "the slots plot should follow the reservation")

    w.press_slider("reserve", "End")
    w.select("block_size", "16")
    w.wait_readout(lambda t: t == r0, "restoring the controls should restore the original readout")
    ch.extra_screenshot("waste", ".kvlab-panel.kvlab-waste")


# -- shared prefixes ----------------------------------------------------------------------------------------
def sharing_blocks(readout: str) -> tuple[int, int]:
    return number(r"不共享 (\d+) 块", readout), number(r"共享 (\d+) 块，省下", readout)


def interact_sharing(ch: ChapterPage) -> None:
    from kvlab.lessons.paged.panels import sharing_lengths
    from kvlab.paging import shared_prefix_blocks

    s = ch.panel("kvlab-sharing")
    r0 = s.readout()
    want = shared_prefix_blocks(40, sharing_lengths(40, 4), 16)
    assert sharing_blocks(r0) == (want.unshared, want.shared) and "写时复制，共 3 次" in r0, r0
    fig0 = s.figure(0)

    s.press_slider("prefix", "ArrowLeft", times=8)  # 32 tokens: exactly two blocks
    r1 = s.wait_readout(lambda t: "系统提示词 32" in t, "ArrowLeft x8 should share 32 tokens")
    assert "不需要复制" in r1, r1
    want = shared_prefix_blocks(32, sharing_lengths(32, 4), 16)
    assert sharing_blocks(r1) == (want.unshared, want.shared), r1
    fig1 = s.wait_figure_changed(0, fig0, "the block picture should redraw for 32 shared tokens")
    assert "不需要写时复制" in fig1["title"], fig1["title"]

    s.press_slider("requests", "ArrowRight", times=4)  # 8 requests: the saving grows
    r2 = s.wait_readout(lambda t: t.startswith("8 个请求"), "ArrowRight x4 should serve 8 requests")
    want = shared_prefix_blocks(32, sharing_lengths(32, 8), 16)
    assert sharing_blocks(r2) == (want.unshared, want.shared) and want.saved == 14, r2

    s.select("block_size", "32")  # 32 tokens: one whole block of 32
    r3 = s.wait_readout(lambda t: "共享 " in t and t != r2, "32-token blocks should recount")
    want = shared_prefix_blocks(32, sharing_lengths(32, 8), 32)
    assert sharing_blocks(r3) == (want.unshared, want.shared), r3

    s.press_slider("prefix", "Home")
    r4 = s.wait_readout(lambda t: "填不满一整块" in t, "no system prompt: nothing to share")
    unshared, shared = sharing_blocks(r4)
    assert unshared == shared, r4

    s.type_slider("prefix", 40)
    s.select("block_size", "16")
    s.press_slider("requests", "ArrowLeft", times=4)
    s.wait_readout(lambda t: t == r0, "restoring the controls should restore the original readout")
    ch.extra_screenshot("sharing", ".kvlab-panel.kvlab-sharing")


# -- the review quiz ---------------------------------------------------------------------------------------
def interact_quiz(ch: ChapterPage) -> None:
    from kvlab.lessons import paged as lesson

    questions = lesson.review_questions()
    quiz = ch.page.locator(".kvlab-quiz")
    if quiz.count() != 1:
        raise Fail(f"expected one .kvlab-quiz, found {quiz.count()}")
    quiz.scroll_into_view_if_needed()
    score = quiz.locator(".kvlab-quiz-score")

    def feedback(n: int) -> str:
        return quiz.locator(f".kvlab-quiz-q{n} .kvlab-quiz-feedback").inner_text().strip()

    box = quiz.locator(".kvlab-quiz-q2 .kvlab-quiz-input input")
    box.fill(str(questions[1].answer - 1))  # one block short: forgot a last, part-filled block
    box.press("Enter")
    ch.wait_until(lambda: feedback(2), lambda t: t.startswith("✗"), 15, "a wrong block count should say 不对")
    box.fill(str(questions[1].answer))
    box.press("Enter")
    ch.wait_until(lambda: feedback(2), lambda t: t.startswith("✓ 正确"), 15, "the right block count should say 正确")
    right = next(c for c in questions[0].choices if c.correct)
    quiz.locator(".kvlab-quiz-q1 .kvlab-quiz-choices label").filter(has_text=right.key).first.click()
    ch.wait_until(score.inner_text, lambda t: f"得分：2 / {len(questions)}" in t, 15, "the score should be 2")


def interact(ch: ChapterPage) -> None:
    interact_waste(ch)
    interact_sharing(ch)
    interact_quiz(ch)
    interact_blocks(ch)  # last: it ends on step 0, where the README screenshot is taken
