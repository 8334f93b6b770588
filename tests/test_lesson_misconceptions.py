"""Chapter 3.5's lesson: each misconception's experiment on a known case, the lab, the review quiz (its answer
keys against kvlab and against hand arithmetic), every panel fed bad values, every plot builder read back."""
import ipywidgets as W
import pytest
import torch

from kvlab import MODEL_PRESETS, generate, kv_cache_bytes, load_demo_model
from kvlab.inputs import InputError
from kvlab.lessons import misconceptions as lesson
from kvlab.measure import DecodeTiming
from kvlab.presets import GPU_PRESETS, GpuPreset
from kvlab.viz import misconceptions_plots as plots
from kvlab.viz import quiz as Q

GIB, MIB = 2**30, 2**20
T4 = "T4 16 GB (Colab)"
DEMO_TOKEN_BYTES = 2 * 4 * 2 * 32 * 4  # K and V x 4 layers x 2 KV heads x 32 x fp32 = 2 KiB


@pytest.fixture(scope="module")
def demo():
    return load_demo_model("cpu")


# -- misconception 1 ---------------------------------------------------------------------------------
def test_weights_snapshot_sees_one_changed_byte(tiny_model):
    a = lesson.weights_snapshot(tiny_model)
    c = tiny_model.config
    assert a.n_params == c.n_params() and a.n_bytes == 4 * c.n_params()
    assert a.n_tensors == len(tiny_model.state_dict())
    with torch.no_grad():
        w = tiny_model.layers[0].attn.wo.weight
        old = w[0, 0].item()
        w[0, 0] = old + 1e-3
        assert lesson.weights_snapshot(tiny_model).checksum != a.checksum
        w[0, 0] = old
    assert lesson.weights_snapshot(tiny_model) == a


def test_corpus_prompts_are_distinct_windows(demo):
    _, tok = demo
    rows = lesson.corpus_prompts(tok, 7, 3)
    assert [len(r) for r in rows] == [7, 7, 7] and len({tuple(r) for r in rows}) == 3
    assert rows[1][:3] == tok.encode(lesson.corpus_text()[53:56])
    with pytest.raises(ValueError, match="^batch_size"):
        lesson.corpus_prompts(tok, 7, 10**6)


def test_run_with_cache_on_a_hand_case(demo):
    model, tok = demo
    run = lesson.run_with_cache(model, tok, prompt_len=5, batch_size=3, new_tokens=4)
    assert run.per_token_bytes == DEMO_TOKEN_BYTES
    assert run.seq_lens == [5, 6, 7, 8]  # prefill, then 3 decode passes (the 4th new token is never fed back)
    assert run.cache_bytes == [3 * s * DEMO_TOKEN_BYTES for s in (5, 6, 7, 8)]
    assert run.stored_tokens == 8 and run.final_bytes == 3 * 8 * 2048
    assert run.allocated_bytes == 3 * 8 * 2048  # sized to fit exactly
    assert run.weights_unchanged and not run.cache_in_state_dict
    assert (run.length_after_reset, run.bytes_after_reset) == (0, 0)
    other = lesson.run_with_cache(model, tok, prompt_len=6, batch_size=3, new_tokens=4)
    assert other.after == run.after and other.cache_checksum != run.cache_checksum
    assert run.text.startswith(lesson.corpus_text()[:5])


def test_run_with_cache_rejects_too_long(demo):
    model, tok = demo
    with pytest.raises(ValueError, match="^new_tokens"):
        lesson.run_with_cache(model, tok, 250, 1, 10)
    with pytest.raises(ValueError, match="^batch_size"):
        lesson.run_with_cache(model, tok, 5, 0, 10)


def test_render_weights_vs_cache(demo):
    model, tok = demo
    view = lesson.render_weights_vs_cache(model, tok, 10, 2, 3)
    assert "B = 2 条序列 × S = 12 个 token" in view.html and f"{2 * 12 * 2048:,} B" in view.html
    assert "不变 ✓" in view.html and "不在" in view.html and "0 个 token" in view.html
    (fig,) = view.figures
    guide, weights, prefill, decode = fig.data
    assert list(prefill.x) == [0, 20] and list(decode.x) == [20, 22, 24]  # B x S after each pass
    mib = view.result.after.n_bytes / MIB
    assert list(weights.y) == pytest.approx([mib, mib])  # flat
    assert decode.y[-1] == pytest.approx(2 * 12 * 2048 / MIB)
    assert guide.x[1] == 8 * (200 + 48 - 1)  # the axis is fixed by the sliders' limits
    for bad, control in (((0, 2, 3), "提示词长度"), ((10, 9, 3), "批次 B"), ((10, 2, 1.5), "生成 token 数")):
        with pytest.raises(InputError, match=control):
            lesson.render_weights_vs_cache(model, tok, *bad)


def test_weights_panel_follows_its_sliders(demo):
    model, tok = demo
    panel = lesson.weights_panel(model, tok, prompt_len=8, batch_size=1, new_tokens=2)
    assert panel.result.final_bytes == 9 * 2048
    panel.set(batch_size=2)
    assert panel.result.final_bytes == 2 * 9 * 2048 and not panel.stale


# -- misconception 2 ---------------------------------------------------------------------------------
def timing(name, seconds, seq_len=None):
    n = len(seconds)
    seq_len = seq_len or list(range(3, 3 + n))
    return DecodeTiming(name, seq_len, [seconds], [sum(seconds)], 1, n, torch.zeros(1, n + 2, dtype=torch.long),
                        k_tokens=[1] * n, v_tokens=seq_len)


def test_tail_step_ms():
    t = timing("kv", [9.0, 1, 2, 3, 4, 5, 6, 7, 8])  # the prefill (9 s) is left out
    assert lesson.tail_step_ms(t) == pytest.approx(7500)  # the last quarter of 8 decode steps: 7 s and 8 s


def test_step_flops_by_hand(tiny_model):
    c = tiny_model.config  # d 36, L 2, H 6, H_kv 2, D 6, d_ff 128, vocab 61
    q, kv = 6 * 6, 2 * 6
    linear = 2 * 36 * (q + 2 * kv) + 2 * q * 36 + 2 * 3 * 36 * 128  # per token and layer
    t = 10
    head = 2 * 36 * 61  # one position's logits
    assert lesson.step_flops(tiny_model, "kv", t) == c.n_layer * (linear + 4 * 6 * 6 * t) + head
    none = c.n_layer * (t * linear + 4 * 6 * 6 * t * t) + head
    assert lesson.step_flops(tiny_model, "none", t) == none
    assert lesson.step_flops(tiny_model, "k_only", t) == none - (t - 1) * c.n_layer * 2 * 36 * kv
    with pytest.raises(ValueError, match="^mode"):
        lesson.step_flops(tiny_model, "int8", t)


def test_compare_k_only_same_tokens_and_projections(demo):
    model, tok = demo
    timings = lesson.compare_k_only(model, [tok.encode("人工")], 6)
    assert list(timings) == ["none", "k_only", "kv"] and lesson.same_tokens(timings)
    assert timings["k_only"].k_tokens == [2, 1, 1, 1, 1, 1] and timings["k_only"].v_tokens == [2, 3, 4, 5, 6, 7]
    assert timings["none"].k_tokens == timings["none"].v_tokens == [2, 3, 4, 5, 6, 7]
    assert timings["kv"].k_tokens == timings["kv"].v_tokens == [2, 1, 1, 1, 1, 1]


def test_render_k_only_and_its_figure(demo):
    model, tok = demo
    view = lesson.render_k_only(model, [tok.encode("人工")], 8, 1)
    assert "token 完全相同" in view.html and "V = t" in view.html
    fig = view.figures[0]
    assert len(fig.data) == 9  # 3 modes x (time, K, V)
    v_konly = [d for d in fig.data if d.xaxis == "x3" and d.legendgroup == "k_only"][0]
    assert list(v_konly.y) == list(v_konly.x) == [3, 4, 5, 6, 7, 8, 9]  # prompt 2, then one pass per new token
    k_konly = [d for d in fig.data if d.xaxis == "x2" and d.legendgroup == "k_only"][0]
    assert set(k_konly.y) == {1}
    for bad, control in (((7, 1), "生成 token 数"), ((8, 0), "重复次数"), ((8, 10), "重复次数")):
        with pytest.raises(InputError, match=control):
            lesson.render_k_only(model, [tok.encode("人工")], *bad)


def test_prefix_dependency_and_query_check(demo):
    model, tok = demo
    dep = lesson.prefix_dependency(model, tok, "人工智能模型")
    assert dep.changed_text[1:] == "工智能模型" and dep.changed_text[0] != "人"
    assert dep.k_change[0] == 0 and dep.v_change[0] == 0
    assert min(dep.k_change[1:] + dep.v_change[1:]) > 0.1
    fig = plots.dependency_figure(dep)
    assert list(fig.data[1].y) == dep.v_change and list(fig.data[0].x) == [0, 1, 2, 3]
    qc = lesson.past_queries_unused(model, tok, "人工智能模型", layer=1)
    assert qc.t == 6 and qc.last_row_change == 0 and qc.earlier_rows_change > 0.1
    with pytest.raises(ValueError, match="^text"):
        lesson.prefix_dependency(model, tok, "人")


# -- misconception 3 ---------------------------------------------------------------------------------
def test_request_spread_is_seeded_and_clipped():
    a, b = lesson.RequestSpread().lengths(2048), lesson.RequestSpread().lengths(2048)
    assert a == b and len(a) == 1000 and 1 <= min(a) and max(a) <= 2048
    assert 230 <= sorted(a)[500] <= 280  # median 256 by construction
    assert lesson.RequestSpread(seed=1).lengths(2048) != a
    assert max(lesson.RequestSpread().lengths(100)) == 100


def hand_plan(wanted=4):
    return lesson.ReservationPlan(MODEL_PRESETS["LLaMA-7B"], "test", budget_bytes=1000, weight_bytes=400,
                                  per_token_bytes=10, reserved_tokens=20, wanted=wanted, lengths=(5, 20, 40, 15))


def test_reservation_plan_on_a_hand_case():
    p = hand_plan()
    assert (p.room_bytes, p.slot_bytes, p.capacity, p.admitted) == (600, 200, 3, 3)
    assert (p.needed_bytes, p.over_budget_bytes) == (1200, 200)
    assert p.too_long_share == 0.25  # only 40 > 20
    assert p.used_share == (5 + 20 + 20 + 15) / 80  # 0.75: a request longer than R fills all of it
    assert p.unused_bytes == 150  # 3 x 200 x 0.25
    assert p.paged_capacity == pytest.approx(600 / (28 * 10))  # pages of 16: 16, 32, 48, 16 -> 28 tokens
    assert hand_plan(wanted=2).over_budget_bytes == 0


def test_plan_reservation_t4_llama_7b():
    weights = 6_738_415_616 * 2
    room = 15_360 * MIB - weights
    for R, capacity in ((2048, 2), (512, 9), (256, 19)):
        plan = lesson.plan_reservation("LLaMA-7B", T4, R)
        assert plan.weight_bytes == weights and plan.room_bytes == room
        assert plan.slot_bytes == R * 2 * 32 * 32 * 128 * 2 and plan.capacity == capacity == room // plan.slot_bytes
    with pytest.raises(ValueError, match="^gpu"):
        lesson.plan_reservation("LLaMA-7B", "T5")
    with pytest.raises(ValueError, match="^reserved_tokens"):
        lesson.plan_reservation("LLaMA-7B", T4, 0)


def test_render_budget_and_its_figures():
    view = lesson.render_budget(T4, "LLaMA-7B", 2048, 4)
    plan = view.result
    assert "最多同时 <b>2</b> 条序列" in view.html and "第 3 条序列起就放不下了" in view.html
    bar, curves = view.figures
    names = [d.name for d in bar.data]
    assert names[0].startswith("权重") and names[-1].startswith("放不下的 2 条序列")
    assert bar.data[-1].x[0] == pytest.approx(2 * plan.slot_bytes / GIB)
    assert sum(d.x[0] for d in bar.data[:-1]) == pytest.approx(plan.budget_bytes / GIB)  # fills up to the budget
    assert list(curves.data[0].y) == [lesson.plan_reservation("LLaMA-7B", T4, r).capacity
                                      for r in lesson.RESERVE_SWEEP]
    fits = lesson.render_budget(T4, "LLaMA-7B", 512, 4)
    assert "放得下" in fits.html and not fits.result.over_budget_bytes
    assert fits.figures[0].data[-1].name.startswith("剩余")
    beyond = lesson.render_budget(T4, "LLaMA-7B", 4096, 1)
    assert "超过了 LLaMA-7B 的上下文" in beyond.html


@pytest.mark.parametrize("args, control", [
    (("T5", "LLaMA-7B", 2048, 4), "GPU"), ((T4, "GPT-5", 2048, 4), "模型"),
    ((T4, "LLaMA-7B", 0, 4), "每条序列预留"), ((T4, "LLaMA-7B", 2048, 0), "同时服务的序列数"),
    ((T4, "LLaMA-7B", 2048, 65), "同时服务的序列数")])
def test_render_budget_bad_values(args, control):
    with pytest.raises(InputError, match=control):
        lesson.render_budget(*args)


def test_render_budget_when_the_weights_leave_no_room(monkeypatch):
    monkeypatch.setitem(GPU_PRESETS, "tiny", GpuPreset("tiny", "1 GB", 1024, "test"))
    with pytest.raises(InputError, match="GPU.*放不下"):
        lesson.render_budget("tiny", "LLaMA-7B", 2048, 1)


def test_reservation_effect(demo):
    model, tok = demo
    e = lesson.reservation_effect(model, tok, "人工", new_tokens=5, extra=(0, 10))
    assert e.reserved == [6, 16] and e.same_tokens
    assert e.allocated_bytes == [6 * 2048, 16 * 2048] and e.used_bytes == [6 * 2048, 6 * 2048]


def test_refused_allocation_allocates_nothing(demo, monkeypatch):
    model, _ = demo
    import kvlab.cache

    free = 10 * MIB
    monkeypatch.setattr(lesson, "available_memory", lambda device: free)
    monkeypatch.setattr(kvlab.cache, "available_memory", lambda device: free)
    refused = lesson.refused_allocation(model)
    per_sequence = 256 * 2048  # 256 tokens x 2 KiB
    assert refused.requested_bytes == (2 * free // per_sequence + 1) * per_sequence == 41 * per_sequence
    assert refused.free_bytes == free and refused.message.startswith(("batch_size", "max_seq_len"))
    monkeypatch.setattr(lesson, "available_memory", lambda device: None)
    assert lesson.refused_allocation(model) is None


# -- the lab -------------------------------------------------------------------------------------------
def test_bug_run_steps_on_a_hand_case():
    run = lesson.BugRun("k_as_v", "p", ["a", "b", "c"], ["a", "x", "c"], [0.0, 1e-6, 2.0])
    assert run.first_token_step == 2 and run.first_logit_step == 3
    assert lesson.lab_line(run) == "缓存 C：token 从第 2 步起不同，logits 从第 3 步起偏离"
    same = lesson.BugRun("kv", "p", ["a"], ["a"], [1e-6])
    assert same.first_token_step is None and same.first_logit_step is None
    assert lesson.lab_line(same) == "对照：正确的 KVCache：1 步全部与参考相同（logits 的差异都在浮点误差以内）"
    hidden = lesson.BugRun("Fixed", "p", ["a"], ["a"], [3.0])
    assert lesson.lab_line(hidden) == "Fixed：token 全部相同，logits 从第 1 步起偏离"


def test_lab_on_its_default_prompt(demo):
    model, tok = demo
    runs = lesson.run_all_lab_caches(model, tok)
    assert list(runs) == ["kv", *lesson.BROKEN_CACHES]
    assert runs["kv"].first_token_step is None and max(runs["kv"].logit_diff) < 1e-5
    for bug in ("rope_offset", "off_by_one", "one_slot"):  # the prefill is right, the first decode is not
        assert runs[bug].first_logit_step == 2 and runs[bug].logit_diff[0] < lesson.LOGIT_TOLERANCE
    for bug in ("no_reset", "k_as_v"):  # wrong from the prefill on
        assert runs[bug].first_logit_step == 1
    steps = [runs[b].first_token_step for b in lesson.BROKEN_CACHES]
    assert None not in steps and len(set(steps)) == len(steps)  # each bug shows at its own step
    assert all(runs[b].reference == runs["kv"].output for b in lesson.BROKEN_CACHES)


def test_make_lab_cache():
    from kvlab import KVCache
    from kvlab.teaching_caches import NoResetBugCache

    model = load_demo_model("cpu")[0]
    assert type(lesson.make_lab_cache("kv", model, 8)) is KVCache
    assert isinstance(lesson.make_lab_cache("no_reset", model, 8), NoResetBugCache)
    with pytest.raises(ValueError, match="^cache"):
        lesson.make_lab_cache("none", model, 8)


def test_a_fixed_subclass_runs_in_the_lab(demo):
    from kvlab.teaching_caches import NoResetBugCache

    class Fixed(NoResetBugCache):
        def reset(self):
            self.length = 0

    model, tok = demo
    run = lesson.run_lab_cache(model, tok, Fixed, new_tokens=8)
    assert run.cache == "Fixed" and run.first_token_step is None and run.first_logit_step is None


def test_render_lab(demo):
    model, tok = demo
    hidden = lesson.render_lab(model, tok, "k_as_v", "计算", 6, False)
    assert "第 1 步开始不同" in hidden.html and "解释" not in hidden.html.replace("显示解释", "")
    shown = lesson.render_lab(model, tok, "k_as_v", "计算", 6, True)
    assert lesson.BUG_CARDS["k_as_v"].explanation in shown.html and lesson.BUG_CARDS["k_as_v"].fix in shown.html
    ok = lesson.render_lab(model, tok, "kv", "计算", 6, False)
    assert "6 步全部相同" in ok.html and "bug 仍然在" not in ok.html
    fig = hidden.figures[0]
    bars = fig.data[0]
    assert list(bars.x) == [1, 2, 3, 4, 5, 6] and bars.marker.color[0] == plots.DIFF_COLOR
    assert "第 1 步起 token 与参考不同" in fig.layout.title.text
    assert min(bars.y) >= 1e-7  # floored for the log axis
    assert all(c == plots.SAME_COLOR for c in ok.figures[0].data[0].marker.color)


@pytest.mark.parametrize("args, control", [
    (("zzz", "计算", 6, False), "缓存"), (("kv", "", 6, False), "提示词"), (("kv", "   ", 6, False), "提示词"),
    (("kv", "@", 6, False), "提示词"), (("kv", "人" * 65, 6, False), "提示词"), (("kv", "计算", 0, False), "生成"),
    (("kv", "计算", 49, False), "生成")])
def test_render_lab_bad_values(demo, args, control):
    model, tok = demo
    with pytest.raises(InputError, match=control):
        lesson.render_lab(model, tok, *args)


def test_unknown_characters_are_named(demo):
    model, tok = demo
    with pytest.raises(InputError, match="「@」、「#」 不在演示模型的词表里"):
        lesson.lab_prompt(tok, "缓存@#")
    assert lesson.lab_prompt(tok, " KV缓存 ") == "KV缓存"  # letters of the corpus are known


def test_lab_panel_hides_the_explanation_for_another_cache(demo):
    model, tok = demo
    panel = lesson.lab_panel(model, tok, new_tokens=4)
    panel.set(reveal=True)
    assert "<b>解释：</b>" in panel.readout.value
    panel.set(cache="one_slot")
    assert panel.controls["reveal"].value is False and "<b>解释：</b>" not in panel.readout.value
    assert panel.result.cache == "one_slot"
    panel.set(prompt="")
    assert panel.stale and "提示词" in panel.message.value


# -- the review -------------------------------------------------------------------------------------
def test_review_answer_keys_against_kvlab_and_by_hand():
    questions = lesson.review_questions()
    assert len(questions) >= 8 and {q.section for q in questions} == {"3.1", "3.2", "3.3", "3.4", "3.5"}
    numeric = [q for q in questions if isinstance(q, Q.NumberQuestion)]
    assert len(numeric) >= 3
    keys = {q.unit: q.answer for q in numeric}
    assert keys["字节"] == MODEL_PRESETS["Llama-3-8B"].kv_bytes_per_token("fp16") == 2 * 32 * 8 * 128 * 2
    assert keys["GiB"] == kv_cache_bytes(32, 32, 128, 2048, 1, "fp16") / GIB == 1
    assert keys["倍"] == (MODEL_PRESETS["70B, 64 KV heads (chapter's hypothetical)"].kv_bytes_per_token()
                         / MODEL_PRESETS["Llama-2-70B"].kv_bytes_per_token()) == 8
    assert keys["条"] == lesson.plan_reservation("LLaMA-7B", T4, 2048).capacity \
        == (15_360 * MIB - 6_738_415_616 * 2) // (2048 * 2 * 32 * 32 * 128 * 2) == 2


def test_review_first_choice_question_matches_the_trace(demo):
    model, tok = demo
    q = lesson.review_questions()[0]
    right = next(c for c in q.choices if c.correct)
    trace = generate(model, [tok.encode("人工")], 4, cache="kv").trace
    assert right.text == f"{trace[-1].k_tokens} 个"


def test_every_question_grades_right_wrong_and_empty():
    for q in lesson.review_questions():
        if isinstance(q, Q.ChoiceQuestion):
            right = next(i for i, c in enumerate(q.choices) if c.correct)
            assert Q.check(q, right).status == Q.RIGHT
            assert Q.check(q, (right + 1) % len(q.choices)).status == Q.WRONG
            assert Q.check(q, None).status == Q.INVALID
        else:
            assert Q.check(q, f"{float(q.answer):,}").status == Q.RIGHT
            assert Q.check(q, str(float(q.answer) * 2 + 1)).status == Q.WRONG
            assert Q.check(q, "").status == Q.INVALID and Q.check(q, "abc").status == Q.INVALID


# -- the quiz widget (general) ---------------------------------------------------------------------------
def test_parse_number():
    assert Q.parse_number("131,072") == Q.parse_number("１３１０７２") == Q.parse_number(" 131 072 ") == 131072
    assert Q.parse_number("1e3") == 1000 and Q.parse_number("0.5") == 0.5
    for bad in ("", "  ", "abc", "12 KiB", "inf", "nan", None):
        with pytest.raises(ValueError):
            Q.parse_number(bad)


def test_check_numeric_tolerance():
    q = Q.NumberQuestion("3.4", "?", 1.0, "GiB", "yes", "hint", rel_tol=0.005)
    assert Q.check(q, "1").right and Q.check(q, "1.004").right and not Q.check(q, "1.01").right
    exact = Q.NumberQuestion("3.2", "?", 131072, "字节", "yes", "hint")
    assert Q.check(exact, "131072").right and not Q.check(exact, "131073").right
    assert "提示：hint" in Q.check(exact, "5").message and "5 不是正确答案" in Q.check(exact, "5").message


def test_question_validation():
    with pytest.raises(ValueError, match="^choices"):
        Q.ChoiceQuestion("3.1", "?", (Q.Choice("a", True, ""), Q.Choice("b", True, "")))
    with pytest.raises(ValueError, match="^answer"):
        Q.NumberQuestion("3.1", "?", "12", "B", "", "")
    with pytest.raises(ValueError, match="^response"):
        Q.check(Q.ChoiceQuestion("3.1", "?", (Q.Choice("a", True, ""), Q.Choice("b", False, ""))), 5)


def test_quiz_widget_scores_and_shows_feedback():
    questions = [Q.ChoiceQuestion("3.1", "pick", (Q.Choice("a", False, "no"), Q.Choice("b", True, "yes"))),
                 Q.NumberQuestion("3.2", "how many", 8, "倍", "right", "hint")]
    quiz = Q.Quiz(questions)
    assert "得分：0 / 2" in quiz.score.value
    radio, text = quiz.inputs
    assert isinstance(radio, W.RadioButtons) and radio.value is None
    radio.value = 0  # a learner clicks "a"
    assert "kvlab-quiz-wrong" in quiz.feedback[0].value and "no" in quiz.feedback[0].value
    radio.value = 1
    assert "kvlab-quiz-right" in quiz.feedback[0].value and "得分：1 / 2" in quiz.score.value
    text.value = "abc"  # typed, Enter
    assert "kvlab-msg-warn" in quiz.feedback[1].value and "不是一个数" in quiz.feedback[1].value
    assert "已作答 1 题" in quiz.score.value  # an invalid answer is not graded
    text.value = "8"
    assert "kvlab-quiz-right" in quiz.feedback[1].value and "全部答对" in quiz.score.value
    assert quiz.answer(1, "").status == Q.INVALID and "得分：1 / 2" in quiz.score.value
    assert "kvlab-quiz" in quiz.widget._dom_classes
    with pytest.raises(ValueError, match="^questions"):
        Q.Quiz([])


# -- the summary ------------------------------------------------------------------------------------------
def test_summary_rows(demo):
    model, tok = demo
    runs = [lesson.run_with_cache(model, tok, 4, 1, 3)]
    timings = {m: timing(m, [0.01, 0.002, 0.003], seq_len=[2, 3, 4]) for m in ("none", "k_only", "kv")}
    lab = {"kv": lesson.BugRun("kv", "计算", ["a"], ["a"], [0.0]),
           "k_as_v": lesson.BugRun("k_as_v", "计算", ["a"], ["b"], [9.0])}
    rows = lesson.summary_rows(runs, timings, [lesson.plan_reservation(reserved_tokens=2048)], lab)
    assert len(rows) == 4
    assert "B × S = 1 × 6" in rows[0].measured and "全部不变" in rows[0].measured and "全部等于" in rows[0].measured
    assert "无缓存 3.00 ms，只缓存 K 3.00 ms，有缓存 3.00 ms" in rows[1].measured  # the last of 2 decode steps
    assert "4 / 4 / 4" in rows[1].measured
    assert "预留 2,048 → 2 条" in rows[2].measured
    assert "1 个坏缓存" in rows[3].measured and "缓存 C 第 1 步" in rows[3].measured and "全部相同" in rows[3].measured
    html = lesson.summary_html(rows)
    assert html.count("<tr>") == 5
