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
    return batching.throughput_sentence(ratio, rounds, 100.0, 100.0 * ratio, 3.0, 6.0, gpu)


def test_throughput_sentence_branches():
    assert "连续批处理快了 30%" in tp(1.3, [1.3, 1.25])
    assert "反而慢了" in tp(0.7, [0.7, 0.8])
    assert "分不出" in tp(1.05, [1.05, 0.97])
    assert "说不准" in tp(1.3, [1.3, 0.95])  # fast on the best times, but one round disagrees
    assert "在 GPU 上" in tp(1.3, [1.3, 1.25]) and "这是在 GPU 上测的" in tp(1.3, [1.3, 1.25], gpu=True)


def test_ttft_sentence_branches():
    assert "尾部延迟最长" in batching.ttft_sentence(40, 8, 0.8, 0.2, 1.5, 0.4)
    assert "反而更短" in batching.ttft_sentence(4, 8, 0.1, 0.3, 0.2, 0.5)
    assert "分不出" in batching.ttft_sentence(10, 9, 0.30, 0.29, 0.5, 0.6)


def cells(contiguous, paged, gather=(0.1, 0.1, 0.1)):
    """Three cells of growing gather bytes; ``contiguous``/``paged``: per cell, the per-round times."""
    return PagingCost([StepCost(b, n, tuple(c), tuple(p), tuple(gather), (k + 1) * 2**20)
                       for k, ((b, n), c, p) in enumerate(zip([(1, 32), (8, 128), (8, 224)], contiguous, paged))],
                      16, "cpu", 1)


def test_cost_sentence_branches():
    same = [(4.0, 4.1, 4.0)] * 3
    grows = cells(same, [(4.2, 4.3, 4.2), (5.0, 5.1, 5.0), (6.0, 6.1, 6.2)])
    assert "要收集的字节越多慢得越多" in cost.cost_sentence(grows, gpu=False)
    fixed = cells(same, [(4.8, 4.9, 4.8)] * 3)
    assert "不随要收集的字节增长" in cost.cost_sentence(fixed, gpu=False)
    equal = cells(same, [(4.05, 4.0, 4.1)] * 3)
    assert "看不出分页的代价" in cost.cost_sentence(equal, gpu=False)
    noisy = cells(same, [(6.0, 3.0, 4.0)] * 3)
    assert "说不准" in cost.cost_sentence(noisy, gpu=False)
    flat_gpu = cells([(1.0, 1.01, 1.0)] * 3, [(1.3, 1.31, 1.3)] * 3)
    assert "主要花在逐个启动内核上" in cost.cost_sentence(flat_gpu, gpu=True)
    assert "不比连续缓存慢" in cost.cost_sentence(cells(same, [(3.0, 3.1, 3.0)] * 3), gpu=False)
    assert "在 GPU 上" in cost.why_sentence(False) and "在 GPU 上" not in cost.why_sentence(True)


def test_cell_verdicts():
    c = StepCost(1, 32, (1.0, 1.0), (1.2, 1.3), (0.1, 0.1), 1)
    assert cost.cell_verdict(c) == "slower" and c.ratio == pytest.approx(1.25)
    assert cost.cell_verdict(StepCost(1, 32, (1.0, 1.0), (0.8, 0.7), (0.1,), 1)) == "faster"
    assert cost.cell_verdict(StepCost(1, 32, (1.0, 1.0), (1.3, 0.9), (0.1,), 1)) == "unclear"
