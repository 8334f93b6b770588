"""Browser interactions for chapter 3.5 (run by tests/test_browser.py after run-all)."""
from __future__ import annotations

import re

from browser_support import ChapterPage, Fail

NOTEBOOK = "05_misconceptions.ipynb"
SCREENSHOT = ".kvlab-panel.kvlab-lab"
DEMO_TOKEN_BYTES = 2 * 4 * 2 * 32 * 4  # K and V x 4 layers x 2 KV heads x head size 32 x fp32


def number(pattern: str, text: str) -> int:
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not found in: {text!r}"
    return int(m.group(1).replace(",", ""))


# -- misconception 1 ---------------------------------------------------------------------------------
def cache_state(readout: str) -> tuple[int, int, int]:
    """(B, S, cache bytes) as the readout states them."""
    return (number(r"B = (\d+) 条序列", readout), number(r"S = (\d+) 个 token", readout),
            number(r"= ([\d,]+) B =", readout))


def weights_checksums(readout: str) -> tuple[str, str]:
    m = re.search(r"校验和 (\w+) → (\w+)（不变 ✓）", readout)
    assert m, f"no unchanged checksum pair in: {readout!r}"
    return m.group(1), m.group(2)


def interact_weights(ch: ChapterPage) -> None:
    w = ch.panel("kvlab-weights")
    r0 = w.readout()
    B, S, nbytes = cache_state(r0)
    assert (B, S) == (w.int_value("batch_size"), w.int_value("prompt_len") + w.int_value("new_tokens") - 1), r0
    assert nbytes == B * S * DEMO_TOKEN_BYTES and f"预填充之前就已经是 {nbytes:,} B" in r0, r0
    before, after = weights_checksums(r0)
    assert before == after
    fig0 = w.figure(0)

    w.press_slider("batch_size", "ArrowRight")  # B 4 -> 5: the cache follows, the weights do not move
    r1 = w.wait_readout(lambda t: cache_state(t)[0] == B + 1, "ArrowRight on the batch should add a sequence")
    assert cache_state(r1) == (B + 1, S, (B + 1) * S * DEMO_TOKEN_BYTES), r1
    assert weights_checksums(r1) == (before, after)
    fig1 = w.wait_figure_changed(0, fig0, "the bytes plot should redraw for B + 1")
    assert f"B = {B + 1}" in fig1["title"], fig1["title"]

    w.press_slider("prompt_len", "ArrowLeft", times=3)  # 3 tokens shorter
    r2 = w.wait_readout(lambda t: cache_state(t)[1] == S - 3, "ArrowLeft x3 on the prompt should shorten S by 3")
    assert cache_state(r2)[2] == (B + 1) * (S - 3) * DEMO_TOKEN_BYTES, r2

    # Play: one more token per frame until the slider's end; S ends at prompt + 48 - 1
    n_max = 48
    w.type_slider("new_tokens", n_max - 8)  # Play from 8 tokens before the end: each frame is a generation
    w.wait_readout(lambda t: cache_state(t)[1] == w.int_value("prompt_len") + n_max - 9,
                   f"typing {n_max - 8} tokens should generate them")
    w.click_play()
    last = w.wait_readout(lambda t: cache_state(t)[1] == w.int_value("prompt_len") + n_max - 1,
                          "Play should generate up to 48 tokens", timeout_s=90)
    ch.wait_until(w.playing, lambda p: not p, 10, "Play should stop at the last value")
    assert cache_state(last)[2] == (B + 1) * (S - 3 - 16 + n_max) * DEMO_TOKEN_BYTES, last
    assert weights_checksums(last) == (before, after)

    # back to the defaults
    w.press_slider("batch_size", "ArrowLeft")
    w.press_slider("prompt_len", "ArrowRight", times=3)
    w.type_slider("new_tokens", 16)
    w.wait_readout(lambda t: t == r0, "restoring the sliders should restore the original readout")
    ch.extra_screenshot("weights", ".kvlab-panel.kvlab-weights")


# -- misconception 2 ---------------------------------------------------------------------------------
def interact_k_only(ch: ChapterPage) -> None:
    k = ch.panel("kvlab-konly")
    r0 = k.readout()
    n0 = k.int_value("new_tokens")
    assert f"生成 {n0} 个 token：三种方式生成的 token 完全相同" in r0, r0
    fig0 = k.figure(0)
    assert "重复 3 次" in r0 and "下一格的输出里" in r0, r0  # what the times mean: a claim in the next cell
    k.press_slider("new_tokens", "ArrowLeft")  # 120 -> 80
    k.press_slider("repeats", "ArrowLeft")  # 3 -> 2
    ch.wait_until(lambda: (k.int_value("new_tokens"), k.int_value("repeats")), lambda v: v == (n0 - 40, 2), 10,
                  "the sliders should move")
    ch.page.wait_for_timeout(500)
    assert k.readout() == r0, "the K-only panel must not re-measure before Run is clicked"
    k.click_run()
    r1 = k.wait_readout(lambda t: f"生成 {n0 - 40} 个 token" in t, "Run should measure 80 tokens", timeout_s=120)
    assert "token 完全相同" in r1 and "V = t" in r1, r1
    assert "重复 2 次" in r1, r1  # the next cell's claim reads these times (two repeats: it says it cannot tell)
    ms = [float(x) for x in re.findall(r"([\d.]+) ms", r1)]
    assert len(ms) >= 3 and all(v > 0 for v in ms[:3]), r1
    fig1 = k.wait_figure_changed(0, fig0, "the timing plot should redraw")
    assert all(n == n0 - 40 - 1 for n in fig1["lengths"]), fig1["lengths"]  # one point per decode pass


# -- misconception 3 ---------------------------------------------------------------------------------
def budget_numbers(readout: str) -> tuple[int, int]:
    """(reserved tokens per sequence, sequences that fit)."""
    return number(r"预留 R = ([\d,]+) 个 token", readout), number(r"最多同时 (?:<b>)?(\d+)", readout)


def interact_budget(ch: ChapterPage) -> None:
    from kvlab.lessons import misconceptions as lesson

    rtx, t4 = "RTX 4090 24 GB", "T4 16 GB (Colab)"
    b = ch.panel("kvlab-budget")
    r0 = b.readout()
    assert budget_numbers(r0) == (2048, 9) and "第 10 条序列起就放不下了" in r0, r0
    assert "按 0.9 规划" in r0 and "其余 10% 不做规划，留作余量" in r0 and "比 R 长的按填满计" in r0, r0
    assert b.int_value("reserved_tokens") == 2048
    bar0, curves0 = b.figure(0), b.figure(1)

    b.press_slider("reserved_tokens", "ArrowLeft")  # 2,048 -> 1,024: the slider halves per step
    want = lesson.plan_reservation("LLaMA-7B", rtx, 1024, 12)
    r1 = b.wait_readout(lambda t: budget_numbers(t)[0] == 1024, "ArrowLeft should reserve 1,024 tokens")
    assert want.capacity == 18 and budget_numbers(r1) == (1024, 18) and "放得下" in r1, r1
    assert f"{want.too_long_share:.1%} 的请求比 R 长" in r1 and f"平均填满预留的 {want.used_share:.1%}" in r1, r1
    b.wait_figure_changed(0, bar0, "the budget bar should redraw for 1,024 tokens")
    curves1 = b.wait_figure_changed(1, curves0, "the trade-off curves should move their marker")

    b.select("spread", "多轮对话（每轮很短，历史很长）")
    multi = lesson.plan_reservation("LLaMA-7B", rtx, 1024, 12, lesson.SPREADS["multi_turn"])
    r2 = b.wait_readout(lambda t: "「多轮对话」" in t, "choosing 多轮对话 should change the request spread")
    assert f"{multi.too_long_share:.1%} 的请求比 R 长" in r2 and "1–12 轮对话的全部历史" in r2, r2
    curves2 = b.wait_figure_changed(1, curves1, "the trade-off curves should follow the spread")
    assert "多轮对话" in curves2["title"], curves2["title"]

    b.press_slider("wanted", "End")  # 128 sequences: past the budget
    r3 = b.wait_readout(lambda t: "想同时服务 128 条" in t, "End on the sequences slider should ask for 128")
    assert "第 19 条序列起就放不下了" in r3, r3

    # the card, model, dtypes and usable share are folded under 更多设置
    b.open_more("usable")
    # a bad usable share: a warning, the readout and both figures greyed out, nothing recomputed
    b.type_text("usable", "1.5")
    warn = b.wait_message("warn", True, "a usable share above 1 should show a warning")
    assert any("显存使用比例" in w for w in warn), warn
    b.wait_stale(True, "a bad usable share must grey out the readout and figures")
    assert b.readout() == r3
    b.type_text("usable", "0.9")
    b.wait_message("warn", False, "a valid share should clear the warning")
    b.wait_stale(False, "a valid share must un-grey the panel")

    # Llama-3-8B: a reservation of its whole context; its fp16 weights do not fit on a T4, int8 ones do
    b.select("model", "Llama-3-8B")
    b.wait_readout(lambda t: "Llama-3-8B" in t, "choosing Llama-3-8B should update the readout")
    for R in (2048, 4096, 8192):  # from 1,024, doubling per step
        b.press_slider("reserved_tokens", "ArrowRight")
        r4 = b.wait_readout(lambda t, R=R: budget_numbers(t)[0] == R, f"ArrowRight should reserve {R:,} tokens")
    llama3 = lesson.plan_reservation("Llama-3-8B", rtx, 8192, 128, lesson.SPREADS["multi_turn"])
    assert budget_numbers(r4)[1] == llama3.capacity and "超过了" not in r4, r4
    b.select("gpu", t4)
    warn = b.wait_message("warn", True, "fp16 Llama-3-8B on a T4 should not fit")
    assert any("GPU" in w and "都放不下" in w for w in warn), warn
    b.wait_stale(True, "weights that do not fit must grey out the panel")
    b.select("weight_dtype", "int8")
    r5 = b.wait_readout(lambda t: "T4" in t and "int8 权重" in t, "int8 weights should fit on the T4")
    int8 = lesson.plan_reservation("Llama-3-8B", t4, 8192, 128, lesson.SPREADS["multi_turn"], "int8")
    assert budget_numbers(r5)[1] == int8.capacity, r5
    b.wait_stale(False, "int8 weights must un-grey the panel")

    # back to the defaults; 8,192 tokens are past LLaMA-7B's context, and the readout says so
    b.select("weight_dtype", "fp16")
    b.select("gpu", rtx)
    b.select("model", "LLaMA-7B")
    b.wait_readout(lambda t: "R 超过了 LLaMA-7B 的上下文" in t and "6,144 个 token 的预留永远用不上" in t,
                   "a reservation past LLaMA-7B's context should be flagged")
    for R in (4096, 2048):
        b.press_slider("reserved_tokens", "ArrowLeft")
        b.wait_readout(lambda t, R=R: budget_numbers(t)[0] == R, f"ArrowLeft should reserve {R:,} tokens")
    b.select("spread", "单轮问答（示例：多数很短，少数很长）")
    b.press_slider("wanted", "Home")
    b.press_slider("wanted", "ArrowRight", times=11)
    b.wait_readout(lambda t: t == r0, "restoring the controls should restore the original readout")
    ch.extra_screenshot("budget", ".kvlab-panel.kvlab-budget")


# -- the lab -------------------------------------------------------------------------------------------
def first_step(readout: str) -> int | None:
    if "全部相同" in readout:
        return None
    return number(r"第 (\d+) 步开始不同", readout)


def interact_lab(ch: ChapterPage) -> None:
    from kvlab import load_demo_model
    from kvlab.lessons import misconceptions as lesson

    model, tok = load_demo_model("cpu")
    expected = lesson.run_all_lab_caches(model, tok)
    lab = ch.panel("kvlab-lab")
    r0 = lab.readout()
    shown = lab.value("cache").replace("\xa0", " ")  # ipywidgets shows spaces in options as no-break spaces
    assert shown == "缓存 A" and first_step(r0) == expected["rope_offset"].first_token_step, r0
    assert "显示解释" in r0 and "解释：" not in r0 and "先服务上一个请求「大语言模型」" in r0, r0
    fig0 = lab.figure(0)

    lab.select("cache", "缓存 C")  # K written for V: wrong from the first step
    r1 = lab.wait_readout(lambda t: "缓存 C：" in t, "choosing 缓存 C should run it")
    assert first_step(r1) == expected["k_as_v"].first_token_step == 1, r1
    fig1 = lab.wait_figure_changed(0, fig0, "the divergence plot should redraw for 缓存 C")
    assert "缓存 C：第 1 步起 token 与参考不同" in fig1["title"], fig1["title"]

    reveal = lab.control("reveal").locator("input")
    reveal.check()
    r2 = lab.wait_readout(lambda t: "解释：" in t, "ticking 显示解释 should show the explanation")
    assert lesson.BUG_CARDS["k_as_v"].explanation[:20] in r2 and "KInPlaceOfVBugCache._store" in r2, r2
    assert "should be v" in r2 and lab.root.locator(".kvlab-readout .kvlab-source").count() == 1, r2

    # 缓存 B on a fresh cache: its bug needs a reused cache to show
    lab.select("cache", "缓存 B")
    r3 = lab.wait_readout(lambda t: "缓存 B：" in t, "choosing 缓存 B should run it")
    assert first_step(r3) == expected["no_reset"].first_token_step and "解释：" not in r3, r3
    assert not reveal.is_checked()  # another cache hides the explanation again
    reuse = lab.control("reused").locator("input")
    reuse.uncheck()
    r4 = lab.wait_readout(lambda t: "全新的缓存" in t, "unticking 先服务上一个请求 should use a fresh cache")
    assert first_step(r4) is None and "bug 仍然在" in r4, r4
    reuse.check()
    lab.wait_readout(lambda t: t == r3, "ticking it again should bring back the reused cache's result")

    lab.select("cache", "对照：正确的 KVCache")
    r5 = lab.wait_readout(lambda t: "对照：正确的 KVCache：" in t, "the control cache should run")
    assert first_step(r5) is None, r5
    lab.press_slider("new_tokens", "ArrowLeft", times=4)  # 24 -> 20 tokens
    lab.wait_readout(lambda t: "20 步全部相同" in t, "ArrowLeft x4 should generate 20 tokens")

    # a character the demo model does not know: a warning, the last result greyed out
    before = lab.readout()
    lab.type_text("prompt", "计算@")
    warn = lab.wait_message("warn", True, "an unknown character should show a warning")
    assert any("提示词" in w and "「@」" in w for w in warn) and lab.messages("bug") == [], warn
    lab.wait_stale(True, "a bad prompt must grey out the readout and figure")
    assert lab.readout() == before
    lab.type_text("prompt", "")
    ch.wait_until(lambda: lab.messages("warn"), lambda m: any("是空的" in w for w in m), 30,
                  "an empty prompt should say that it is empty")
    lab.type_text("prompt", "计算")
    lab.wait_message("warn", False, "a valid prompt should clear the warning")
    lab.wait_stale(False, "a valid prompt must un-grey the lab")

    # back to the defaults (the README screenshot: 缓存 A, its first diverging step marked)
    lab.press_slider("new_tokens", "ArrowRight", times=4)
    lab.select("cache", "缓存 A")
    lab.wait_readout(lambda t: t == r0, "restoring the controls should restore the original readout")


# -- the review quiz ---------------------------------------------------------------------------------------
def interact_quiz(ch: ChapterPage) -> None:
    from kvlab.lessons import misconceptions as lesson
    from kvlab.exercises.quiz import ChoiceQuestion

    questions = lesson.review_questions()
    quiz = ch.page.locator(".kvlab-quiz")
    if quiz.count() != 1:
        raise Fail(f"expected one .kvlab-quiz, found {quiz.count()}")
    quiz.scroll_into_view_if_needed()
    score = quiz.locator(".kvlab-quiz-score")
    assert f"得分：0 / {len(questions)}" in score.inner_text()

    def feedback(n: int) -> str:
        return quiz.locator(f".kvlab-quiz-q{n} .kvlab-quiz-feedback").inner_text().strip()

    def reveal_button(n: int):
        return quiz.locator(f".kvlab-quiz-q{n} .kvlab-quiz-reveal")

    from kvlab.exercises.quiz import NumberQuestion

    numbers = [i + 1 for i, q in enumerate(questions) if isinstance(q, NumberQuestion)]
    picks = [i + 1 for i, q in enumerate(questions) if isinstance(q, ChoiceQuestion) and len(q.choices) >= 3]
    n3, (n1, n2) = numbers[0], picks[:2]

    # a numeric question: wrong, empty, text, wrong again (the answer is offered), then right
    q3 = quiz.locator(f".kvlab-quiz-q{n3}")
    key = questions[n3 - 1]
    box = q3.locator(".kvlab-quiz-input input")
    box.fill(f"{float(key.answer) * 3 + 1.4}")
    box.press("Enter")
    ch.wait_until(lambda: feedback(n3), lambda t: t.startswith("✗"), 15, "a wrong number should say 不对")
    assert f"「{float(key.answer) * 3 + 1.4}」不是正确答案" in feedback(n3) and "提示" in feedback(n3), feedback(n3)
    assert not reveal_button(n3).is_visible()
    box.fill("")
    q3.locator(".kvlab-quiz-check").click()
    ch.wait_until(lambda: feedback(n3), lambda t: "还没有填答案" in t, 15, "an empty answer should get a message")
    assert q3.locator(".kvlab-msg-warn").count() == 1
    box.fill("一百")
    box.press("Enter")
    ch.wait_until(lambda: feedback(n3), lambda t: "不是一个数" in t, 15, "text should get a message")
    assert not reveal_button(n3).is_visible(), "an answer that is not a number does not count as wrong"
    box.fill(f"{float(key.answer) * 5 + 7}")
    box.press("Enter")
    ch.wait_until(lambda: reveal_button(n3).is_visible(), bool, 15, "a second wrong answer should offer 显示答案")
    box.fill(key.answer_text)
    box.press("Enter")
    ch.wait_until(lambda: feedback(n3), lambda t: t.startswith("✓ 正确"), 15, "the right number should say 正确")
    ch.wait_until(score.inner_text, lambda t: f"得分：1 / {len(questions)}" in t, 15, "the score should be 1")
    assert not reveal_button(n3).is_visible(), "a right answer withdraws 显示答案"

    # a multiple-choice question: a wrong option, then the right one
    q1 = questions[n1 - 1]
    wrong = next(c for c in q1.choices if not c.correct)
    right = next(c for c in q1.choices if c.correct)
    options = quiz.locator(f".kvlab-quiz-q{n1} .kvlab-quiz-choices label")
    options.filter(has_text=wrong.key).first.click()
    ch.wait_until(lambda: feedback(n1), lambda t: t.startswith("✗") and wrong.feedback[:10] in t, 15,
                  "a wrong option should explain why")
    options.filter(has_text=right.key).first.click()
    ch.wait_until(lambda: feedback(n1), lambda t: t.startswith("✓") and right.feedback[:10] in t, 15,
                  "the right option should say why it is right")
    ch.wait_until(score.inner_text, lambda t: f"得分：2 / {len(questions)}" in t and "已作答 2 题" in t, 15,
                  "the score should be 2 of 2 answered")

    # another: wrong twice, then 显示答案 shows the answer and earns no point
    q2 = questions[n2 - 1]
    wrongs = [c for c in q2.choices if not c.correct][:2]
    options2 = quiz.locator(f".kvlab-quiz-q{n2} .kvlab-quiz-choices label")
    for choice in wrongs:
        options2.filter(has_text=choice.key).first.click()
        ch.wait_until(lambda: feedback(n2), lambda t, c=choice: t.startswith("✗") and c.feedback[:8] in t, 15,
                      "a wrong option should explain why")
    ch.wait_until(lambda: reveal_button(n2).is_visible(), bool, 15, "two wrong answers should offer 显示答案")
    reveal_button(n2).click()
    answer = next(c for c in q2.choices if c.correct)
    ch.wait_until(lambda: feedback(n2), lambda t: t.startswith(f"答案：{answer.key}"), 15, "显示答案 should show it")
    ch.wait_until(score.inner_text, lambda t: f"得分：2 / {len(questions)}" in t and "看了 1 题的答案" in t, 15,
                  "a shown answer earns no point and is counted")
    ch.extra_screenshot("quiz", ".kvlab-quiz")


def interact(ch: ChapterPage) -> None:
    interact_weights(ch)
    interact_k_only(ch)
    interact_budget(ch)
    interact_lab(ch)
    interact_quiz(ch)
