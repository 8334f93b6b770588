"""kvlab.measure and kvlab.stats on known inputs: statistics, thread handling, alternation order, DecodeTiming summaries."""
import math

import pytest
import torch

from kvlab.measure import DecodeTiming, alternate, measure_matmul_flops, measure_read_bandwidth, time_generate, \
    torch_threads
from kvlab.stats import cumulative, growth_exponent, median


def test_median_by_hand():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
    assert math.isnan(median([]))


def test_cumulative_by_hand():
    assert cumulative([1.0, 2.0, 3.5]) == [1.0, 3.0, 6.5]


@pytest.mark.parametrize("k", [0.0, 0.5, 1.0, 2.0, 3.0])
def test_growth_exponent_recovers_power_laws(k):
    xs = [1, 2, 4, 8, 16, 32]
    assert growth_exponent(xs, [5 * x**k for x in xs]) == pytest.approx(k)


def test_growth_exponent_of_fixed_cost_plus_linear_term_rises_with_length():
    # y = 100 + x: flat where the fixed cost dominates, slope 1 where x does
    short = growth_exponent(range(1, 11), [100 + x for x in range(1, 11)])
    long = growth_exponent(range(10_000, 20_001, 1000), [100 + x for x in range(10_000, 20_001, 1000)])
    assert short < 0.1 and 0.95 < long <= 1.0


def test_growth_exponent_needs_two_points():
    assert math.isnan(growth_exponent([3], [9])) and math.isnan(growth_exponent([2, 2], [1, 5]))


def test_torch_threads_restores_even_after_an_error():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError):
        with torch_threads(1):
            assert torch.get_num_threads() == 1
            raise RuntimeError("boom")
    assert torch.get_num_threads() == before


def test_alternate_rotates_the_order_and_warms_up_first():
    calls = []
    runners = {name: (lambda name=name: calls.append(name) or name) for name in "abc"}
    out = alternate(runners, repeats=3, warmup={"a": lambda: calls.append("warm a")})
    assert calls == ["warm a", "b", "c"] + list("abc") + list("bca") + list("cab")
    assert out == {"a": ["a"] * 3, "b": ["b"] * 3, "c": ["c"] * 3}


def timing(walls, passes, batch=2, new=4):
    return DecodeTiming(name="x", seq_len=[3, 4, 5, 6], pass_seconds=passes, wall_seconds=walls, batch_size=batch,
                        new_tokens=new, tokens=torch.zeros(batch, 7, dtype=torch.long))


def test_decode_timing_summaries_by_hand():
    t = timing(walls=[1.0, 3.0, 2.0], passes=[[0.4, 0.2, 0.2, 0.2], [0.6, 0.8, 0.8, 0.8], [0.5, 0.5, 0.5, 0.5]])
    assert t.step_seconds == [0.5, 0.5, 0.5, 0.5]  # the median repeat of each pass
    assert t.cumulative_seconds == pytest.approx([0.5, 1.0, 1.5, 2.0])
    assert t.tokens_per_s == pytest.approx(2 * 4 / 2.0)  # B * new / median wall
    assert t.tokens_per_s_range == pytest.approx((8 / 3.0, 8 / 1.0))
    assert t.ttft_seconds == 0.5
    assert t.decode_step_seconds == pytest.approx(0.5)  # (2.0 - 0.5) / 3 for the median repeat
    assert t.cumulative_exponent == pytest.approx(1.0)  # constant steps: total grows linearly


def test_rates_are_positive_and_labelled():
    bw = measure_read_bandwidth("cpu", nbytes=8 * 2**20, repeats=3)
    flops = measure_matmul_flops("cpu", n=128, repeats=3)
    assert len(bw.runs) == 3 and bw.best == max(bw.runs) and bw.best >= bw.median > 0
    assert flops.best > 0 and flops.what == "128×128 的 float32 矩阵乘" and bw.what == "对 8 MiB 的 float32 数组求和"


def test_time_generate_returns_one_timing_per_mode(tiny_model):
    out = time_generate(tiny_model, [[1, 2, 3]], 5, modes=("none", "kv"), repeats=2)
    assert set(out) == {"none", "kv"}
    kv, none = out["kv"], out["none"]
    assert kv.seq_len == [3, 4, 5, 6, 7] and len(kv.pass_seconds) == 2 and len(kv.wall_seconds) == 2
    assert kv.k_tokens == [3, 1, 1, 1, 1] and none.k_tokens == [3, 4, 5, 6, 7]
    assert torch.equal(kv.tokens, none.tokens)
