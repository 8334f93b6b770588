"""Chapter 3.6's lesson: its runs on the demo model, the waste arithmetic on a run, and every branch of the
sentences chosen from the numbers (fed synthetic timings)."""
import pytest

from kvlab.lessons.paged import batching, cost, runs
from kvlab.lessons.paged.cost import PagingCost, StepCost
from kvlab.paging import padded_slots, paged_slots, reserved_slots


@pytest.fixture(scope="module")
def demo():
    from kvlab import load_demo_model

    return load_demo_model("cpu")


@pytest.fixture(scope="module")
def animation(demo):
    return runs.animation_run(*demo)


# -- the runs -----------------------------------------------------------------------------------------------------
def test_the_animation_shows_reuse_and_a_preemption(animation):
    assert len(animation.steps) <= 40 and animation.preemptions >= 1
    assert runs.reused_blocks(animation)  # a block given back by one request and taken by another
    assert animation.peak_blocks == runs.ANIMATION_BLOCKS  # the pool runs full
    pre = next(s for s in animation.steps if s.preempted)
    assert any("被抢占" in e for e in runs.step_events(pre))


def test_waste_on_a_run_follows_the_three_rules(animation):
    tl = runs.waste_timeline(animation, animation.block_size, 64)
    assert runs.paged_is_measured(tl, animation)
    busy = [s for s in animation.steps if s.running]
    for k, s in enumerate(busy):
        lengths = list(s.lengths.values())
        assert tl.used[k] == sum(lengths)
        assert tl.slots["padding"][k] == padded_slots(lengths) == len(lengths) * max(lengths)
        assert tl.slots["reservation"][k] == reserved_slots(lengths, 64)
        assert tl.slots["paging"][k] == paged_slots(lengths, animation.block_size)
    assert 0 <= tl.waste_share("paging") < tl.waste_share("padding") < tl.waste_share("reservation") < 1
    assert runs.waste_timeline(animation, 1, 64).waste_share("paging") == 0  # blocks of 1 token waste nothing
    assert tl.cut == 0 and runs.waste_timeline(animation, 4, 8).cut > 0


# -- the sentences ----------------------------------------------------------------------------------------------
def tp(ratio, rounds, gpu=False):
    return batching.throughput_sentence(ratio, rounds, 100.0, 100.0 * ratio, 3.0, 6.0, gpu, 174, 110)


def test_throughput_sentence_branches():
    assert "连续批处理快了 30%" in tp(1.3, [1.3, 1.25])
    assert "反而慢了" in tp(0.7, [0.7, 0.8])
    assert "分不出" in tp(1.05, [1.05, 0.97])
    assert "说不准" in tp(1.3, [1.3, 0.95])  # fast on the best times, but one round disagrees
    assert "在 GPU 上" in tp(1.3, [1.3, 1.25]) and "这是在 GPU 上测的" in tp(1.3, [1.3, 1.25], gpu=True)
    assert "步数之比 174 ÷ 110 = 1.58" in tp(1.3, [1.3, 1.25]) and "= 1.58" in tp(1.3, [1.3, 1.25], gpu=True)


def test_ttft_sentence_branches():
    assert "尾部延迟最长" in batching.ttft_sentence(40, 8, 0.8, 0.2, 1.5, 0.4)
    assert "反而更短" in batching.ttft_sentence(4, 8, 0.1, 0.3, 0.2, 0.5)
    assert "分不出" in batching.ttft_sentence(10, 9, 0.30, 0.29, 0.5, 0.6)


def tpot(ratio, rounds, gpu=False):
    return batching.tpot_sentence(0.010, 0.010 * ratio, rounds, 0.012, 0.012 * ratio, 3.0, 6.0, gpu)


def test_tpot_sentence_branches():
    assert "连续批处理每个 token 慢了 40%" in tpot(1.4, [1.4, 1.3]) and "平均 6.0 条对 3.0 条" in tpot(1.4, [1.4, 1.3])
    assert "反而快了" in tpot(0.7, [0.7, 0.8])
    assert "相差不到 15%" in tpot(1.05, [1.05, 0.98]) and "启动内核" in tpot(1.05, [1.05, 0.98], gpu=True)
    assert "说不准" in tpot(1.4, [1.4, 0.9])  # the best times say slower, one round says quicker
    assert "说不准" in tpot(1.05, [1.3, 0.9])  # within the band on the best times, the rounds far apart
    text = tpot(1.4, [1.4, 1.3])
    assert "静态批处理 10.0 ms，连续批处理 14.0 ms" in text and "90% 分位，静态批处理 12.0 ms，连续批处理 16.8 ms" in text
    assert text.index("按 TPOT，连续批处理每个 token 慢了 40%") < text.index("ITL")  # the 40 % is TPOT's, said first


def cells(contiguous, paged, gather=(0.1, 0.1, 0.1)):
    """Three cells of growing gather bytes; ``contiguous``/``paged``: per cell, the per-round times."""
    return PagingCost([StepCost(b, n, tuple(c), tuple(p), tuple(gather), (k + 1) * 2**20)
                       for k, ((b, n), c, p) in enumerate(zip([(1, 32), (8, 128), (8, 224)], contiguous, paged))],
                      16, "cpu", 1, "cpu，计时用 1 个线程")


def test_cost_sentence_branches():
    same = [(4.0, 4.1, 4.0)] * 3
    grows = cells(same, [(4.2, 4.3, 4.2), (5.0, 5.1, 5.0), (6.0, 6.1, 6.2)])
    assert "要收集的字节越多慢得越多" in cost.cost_sentence(grows, gpu=False)
    assert "大部分就在这里" in cost.cost_sentence(cells(same, [(4.2,) * 3, (5.0,) * 3, (6.0,) * 3], (1.5,) * 3), False)
    assert "只占多出的时间的 5%" in cost.cost_sentence(grows, gpu=False)  # 0.1 ms of gather in 2.0 ms more
    fixed = cells(same, [(4.8, 4.9, 4.8)] * 3)
    assert "不随要收集的字节增长" in cost.cost_sentence(fixed, gpu=False)
    # the extra time rises with the bytes, but only the smaller cells are beyond the band: no 'fixed cost' claim
    rising = cells([(4.0,) * 3, (4.0,) * 3, (8.0,) * 3], [(4.8,) * 3, (4.9,) * 3, (9.0,) * 3])
    sentence = cost.cost_sentence(rising, gpu=False)
    assert "说不准多出的时间是否随收集的字节增长" in sentence and "不随要收集的字节增长" not in sentence
    equal = cells(same, [(4.05, 4.0, 4.1)] * 3)
    assert "看不出分页的代价" in cost.cost_sentence(equal, gpu=False)
    noisy = cells(same, [(6.0, 3.0, 4.0)] * 3)
    assert "说不准" in cost.cost_sentence(noisy, gpu=False)
    flat_gpu = cells([(1.0, 1.01, 1.0)] * 3, [(1.3, 1.31, 1.3)] * 3)
    assert "主要花在逐个启动内核上" in cost.cost_sentence(flat_gpu, gpu=True)
    assert "慢了的格子多 0.30–0.30 ms" in cost.cost_sentence(flat_gpu, gpu=True)
    assert "不比连续缓存慢" in cost.cost_sentence(cells(same, [(3.0, 3.1, 3.0)] * 3), gpu=False)
    assert "在 GPU 上" in cost.why_sentence(False) and "在 GPU 上" not in cost.why_sentence(True)


def test_cost_sentence_never_calls_a_quicker_step_slower():
    """Failed before the fix: a busy run (one cell's paged step clearly slower, the biggest clearly quicker on its
    fastest round) got the fixed-cost sentence with "1.15 ms 到 -12.94 ms" in it."""
    same = [(4.0, 4.0, 4.0)]
    busy = cells(same * 2 + [(20.0, 21.0, 22.0)], [(5.2, 5.0, 5.1), (4.1, 4.0, 4.1), (7.0, 25.0, 26.0)])
    assert [cost.cell_verdict(c) for c in busy.cells] == ["slower", "same", "unclear"]
    text = cost.cost_sentence(busy, gpu=False)
    assert "互相矛盾" in text and "说不准" in text and "0.35–1.25" in text and "-" not in text.split("（")[0]
    fixed = cells(same * 3, [(3.9,) * 3, (5.0,) * 3, (4.2,) * 3])  # slower only in the middle: no growth
    text = cost.cost_sentence(fixed, gpu=False)
    assert "在 1 个格子里慢了 15% 以上（多 1.00 ms）" in text and "收集最少的格子少 0.10 ms，最多的多 0.20 ms" in text
    grows = cells(same * 3, [(3.8,) * 3, (4.1,) * 3, (6.0,) * 3])
    assert "B = 1、32 个 token 时少 0.20 ms，B = 8、224 个 token 时多 2.00 ms" in cost.cost_sentence(grows, gpu=False)
    flat_same = cells([(1.0,) * 3] * 3, [(1.05,) * 3] * 3)  # a GPU where paging costs nothing visible
    assert "看不出分页的代价" in cost.cost_sentence(flat_same, gpu=True)


def test_cell_verdicts():
    c = StepCost(1, 32, (1.0, 1.0), (1.2, 1.3), (0.1, 0.1), 1)
    assert cost.cell_verdict(c) == "slower" and c.ratio == pytest.approx(1.2)  # the fastest rounds: 1.2 / 1.0
    assert cost.cell_verdict(StepCost(1, 32, (1.0, 1.0), (0.8, 0.7), (0.1,), 1)) == "faster"
    assert cost.cell_verdict(StepCost(1, 32, (1.0, 1.0), (1.4, 0.8), (0.1,), 1)) == "unclear"  # rounds disagree
    assert cost.cell_verdict(StepCost(1, 32, (1.0, 1.0), (1.3, 0.9), (0.1,), 1)) == "same"  # fastest within ±15 %


# -- the panels: every control changes its figure, every bad value is named ------------------------------------
def figure_json(view) -> list[str]:
    return [f.to_json() for f in view.figures]


def test_block_panel_renders_each_step_and_refuses_others(animation):
    from kvlab.inputs import InputError
    from kvlab.lessons.paged import panels

    views = [panels.render_blocks(animation, i) for i in (0, 1, len(animation.steps) - 1)]
    assert len({tuple(figure_json(v)) for v in views}) == 3
    assert views[0].html.startswith("<b>第 0 步</b>") and "块表：（空）" in views[2].html
    for bad in (-1, len(animation.steps), 1.5, "3"):
        with pytest.raises(InputError, match=panels.STEP_LABEL):
            panels.render_blocks(animation, bad)
    assert len(panels.blocks_panel(animation).controls) == 1


def test_waste_panel_controls_and_bad_values(animation, demo):
    from kvlab.inputs import InputError
    from kvlab.lessons.paged import panels

    cfg = demo[0].config
    base = panels.render_waste(animation, cfg, 4, 64)
    assert figure_json(panels.render_waste(animation, cfg, 8, 64)) != figure_json(base)
    assert figure_json(panels.render_waste(animation, cfg, 4, 32)) != figure_json(base)
    assert "超过每个请求预留的 8 个 token" in panels.render_waste(animation, cfg, 4, 8).html
    for bs, reserve, label in ((3, 64, panels.BLOCK_LABEL), (4, 4, panels.RESERVE_LABEL),
                               (4, cfg.max_seq_len + 1, panels.RESERVE_LABEL), ("16", 64, panels.BLOCK_LABEL)):
        with pytest.raises(InputError, match=label):
            panels.render_waste(animation, cfg, bs, reserve)


def test_sharing_panel_counts_what_the_real_run_measured(demo):
    from kvlab.inputs import InputError
    from kvlab.lessons.paged import panels, sharing

    run = sharing.sharing_run(*demo)
    view = panels.render_sharing(sharing.SHARE_PREFIX, sharing.SHARE_REQUESTS, runs.BLOCK_SIZE)
    assert run.matches_arithmetic and run.same_tokens and run.max_logit_diff < 1e-4
    assert view.result == run.arithmetic  # the panel counts with the arithmetic the run was checked against
    assert f"不共享 <b>{run.plain_blocks}</b> 块，共享 <b>{run.shared_blocks}</b> 块" in view.html
    assert run.shared_prefill_tokens == run.plain_prefill_tokens - (sharing.SHARE_REQUESTS - 1) * sharing.SHARE_PREFIX
    others = [panels.render_sharing(32, 4, 16), panels.render_sharing(40, 5, 16), panels.render_sharing(40, 4, 8)]
    assert len({tuple(figure_json(v)) for v in [view, *others]}) == 4
    assert "不需要复制" in others[0].html and "填不满一整块" in panels.render_sharing(10, 4, 16).html
    for args, label in (((-1, 4, 16), panels.PREFIX_LABEL), ((201, 4, 16), panels.PREFIX_LABEL),
                        ((40, 0, 16), panels.REQUESTS_LABEL), ((40, 17, 16), panels.REQUESTS_LABEL),
                        ((40, 4, 5), panels.BLOCK_LABEL)):
        with pytest.raises(InputError, match=label):
            panels.render_sharing(*args)


def test_the_static_edition_precomputes_every_panel_control(animation, demo):
    """Every control a reader would drag is declared ``static``; each has at most MAX_STATES values (all the
    animation's steps among them) and every precomputed value renders (none is refused)."""
    from kvlab.book.capture import MAX_STATES, STATIC_MIME, static_bundle
    from kvlab.lessons.paged import panels

    made = {"blocks": panels.blocks_panel(animation), "waste": panels.waste_panel(animation, demo[0].config),
            "sharing": panels.sharing_panel()}
    for name, panel in made.items():
        assert set(panel.static) == set(panel.controls), name
        for control in static_bundle(panel)[STATIC_MIME]["controls"]:
            assert 1 < len(control["states"]) <= MAX_STATES and control["default"] is not None, control["name"]
            assert not any("error" in s for s in control["states"]), control["name"]
    steps = next(c for c in static_bundle(made["blocks"])[STATIC_MIME]["controls"])
    assert steps["values"] == list(range(len(animation.steps)))  # the whole animation, not a window of it


# -- the section runs ----------------------------------------------------------------------------------------
def test_first_look_and_an_exhausted_pool(demo):
    from kvlab.lessons.paged import basics

    look = basics.first_look(*demo)
    assert look.same_tokens and look.max_logit_diff < 1e-4 and look.blocks_match
    assert look.paged_slots < look.contiguous_slots
    e = basics.exhausted_pool(*demo, num_blocks=6)
    assert e.consistent and e.free_blocks == 0 and "nothing was written" in e.message
    assert basics.exhausted_pool(*demo, num_blocks=100) is None  # a pool big enough: no error


def test_batching_comparison_on_a_small_workload(demo):
    from kvlab.serving import Workload
    from kvlab.viz import paged_plots as plots

    model, tok = demo
    requests = runs.demo_requests(model, tok, Workload(count=8, mean_gap=1.0, prompt_median=8, new_median=8))
    c = batching.compare_batching(model, requests, max_batch=3, rounds=2)
    assert c.same_tokens() and c.schedule_repeats()
    assert len(c.step_seconds("static")) == len(c.first("static").steps)
    assert all(a <= b for a, b in zip(c.step_seconds("static"), (s.seconds for s in c.runs["static"][1].steps)))
    assert c.first("continuous").ttft_steps_mean < c.first("static").ttft_steps_mean
    assert len(c.ttfts("static")) == 8 and all(t > 0 for t in c.ttfts("static"))
    sentences = batching.batching_sentences(c)
    assert len(sentences) == 3 and sentences[0].startswith("吞吐") and sentences[1].startswith("首 token 延迟")
    assert sentences[2].startswith("每个 token 的时间（TPOT）")
    for policy in ("static", "continuous"):  # TPOT = (end to end - TTFT) / (tokens - 1), on each round's own times
        for i, run in enumerate(c.runs[policy]):
            times = c.token_times(policy, i)
            assert [len(times[o.request.rid]) for o in run.outcomes] == [len(o.tokens) for o in run.outcomes]
            expected = [(o.finish_seconds - o.first_token_seconds) / (len(o.tokens) - 1)
                        for o in run.outcomes if len(o.tokens) > 1]
            assert c.tpots(policy, i) == pytest.approx(expected)
        assert len(c.itls(policy)) == sum(len(o.tokens) - 1 for o in c.first(policy).outcomes)
        steps = c.step_seconds(policy)
        assert all(any(g == pytest.approx(x) for x in steps) for g in c.itls(policy))  # no preemption: one step each
    assert len(plots.timeline_figure(c).data) > 8
    assert runs.outputs_match_alone(model, c.first("continuous"))


def test_paging_cost_on_a_small_grid(demo):
    from kvlab.viz import paged_plots as plots

    c = cost.paging_cost(*demo, batches=(1, 2), lengths=(16, 40), rounds=2, steps=2)
    assert [(x.batch, x.length) for x in c.cells] == [(1, 16), (1, 40), (2, 16), (2, 40)]
    assert c.cell(2, 40).gather_bytes == 2 * c.cell(1, 40).gather_bytes  # twice the rows, twice the copy
    assert all(len(x.paged_ms) == 2 and min(x.paged_ms) > 0 for x in c.cells)
    assert len(cost.cost_sentences(c)) == 2 and len(plots.cost_figure(c).data) == 6
    with pytest.raises(ValueError, match="^batches"):
        cost.paging_cost(*demo, batches=(17,))
    with pytest.raises(ValueError, match="^lengths"):
        cost.paging_cost(*demo, lengths=(300,))


def test_review_keys_come_from_the_arithmetic():
    from kvlab.lessons.paged import review
    from kvlab.exercises.quiz import ChoiceQuestion, NumberQuestion

    qs = review.review_questions()
    numbers = [q for q in qs if isinstance(q, NumberQuestion)]
    assert [q.answer for q in numbers] == [sum(-(-n // 16) for n in review.QUIZ_LENGTHS), (5 - 1) * (70 // 16)]
    assert all(isinstance(q, (ChoiceQuestion, NumberQuestion)) and q.section == "3.6" for q in qs)
