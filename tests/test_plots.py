"""Plot builders are pure functions: call them and read back what they plot."""
import numpy as np
import pytest

from kvlab import kv_cache_bytes
from kvlab.lessons.storage import CacheGrowth, padding_waste
from kvlab.measure import DecodeTiming
from kvlab.viz import bench_plots, decode_plots, storage_plots
from kvlab.viz.style import FONT_FAMILY, MODE_COLORS


def test_topk_figure_plots_probabilities_in_order():
    fig = decode_plots.topk_figure([("智", 0.9), ("能", 0.06), ("人", 0.04)], "人工")
    bar = fig.data[0]
    assert list(bar.x) == [0.04, 0.06, 0.9]  # drawn bottom-up: most likely on top
    assert list(bar.y) == ["「人」", "「能」", "「智」"]
    assert "人工" in fig.layout.title.text
    assert fig.layout.template.layout.font.family == FONT_FAMILY


def test_attention_compare_masks_future_and_places_cached_row():
    t = 4
    full = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]
    row = full[-1:]
    fig = decode_plots.attention_compare_figure(full, row, list("人工智能"), layer=1, head=2, kv_full=4, kv_cached=1)
    left, right = fig.data
    z_left = np.array(left.z, dtype=float)
    assert np.isnan(z_left[0, 1]) and z_left[3, 3] == pytest.approx(0.25)  # causal: no future keys
    z_right = np.array(right.z, dtype=float)
    assert np.isnan(z_right[:3]).all() and np.allclose(z_right[3], row[0])  # only the new row is computed
    titles = [a.text for a in fig.layout.annotations]
    assert "4×4" in titles[0] and "1×4" in titles[1] and "第 1 层" in fig.layout.title.text


def _timing(name, step_s):
    import torch

    return DecodeTiming(name=name, seq_len=[2, 4, 8, 16], pass_seconds=[step_s], wall_seconds=[sum(step_s)],
                        batch_size=1, new_tokens=4, tokens=torch.zeros(1, 5, dtype=torch.long))


def test_latency_figure_reports_exponents():
    # decode steps double with t (exponent 1) without a cache and stay flat (exponent 0) with one
    res = {"none": _timing("none", [0.001, 0.004, 0.008, 0.016]), "kv": _timing("kv", [0.001, 0.002, 0.002, 0.002])}
    fig = decode_plots.latency_figure(res)
    assert len(fig.data) == 4
    assert fig.data[0].line.color == MODE_COLORS["none"]
    assert list(fig.data[0].y) == pytest.approx([1, 4, 8, 16])  # ms
    assert list(fig.data[1].y) == pytest.approx([0.001, 0.005, 0.013, 0.029])  # cumulative s
    assert "t^1.00" in fig.data[0].name and "t^0.00" in fig.data[2].name
    assert "（ms）" in fig.layout.yaxis.title.text and "（s）" in fig.layout.yaxis2.title.text


def test_work_figure_counts():
    fig = decode_plots.work_figure(5)
    assert list(fig.data[0].y) == [1, 2, 3, 4, 5] and list(fig.data[1].y) == [1, 4, 9, 16, 25]
    assert list(fig.data[2].y) == [1] * 5 and list(fig.data[3].y) == [1, 2, 3, 4, 5]


def test_cache_grid_figure_shape_fill_and_bytes():
    fig = storage_plots.cache_grid_figure(L=3, B=2, H=5, S=100, D=64, filled=25, dtype="fp16")
    grid = np.array(fig.data[0].z)
    assert grid.shape == (3, 5) and np.allclose(grid, 0.25)
    assert "(3,2,5,100,64)" in fig.layout.title.text
    from kvlab import format_bytes
    assert format_bytes(kv_cache_bytes(3, 5, 64, 100, 2, "fp16")) in fig.layout.title.text
    assert fig.layout.template.layout.font.family == FONT_FAMILY


def test_memory_vs_seq_is_linear_and_marks_s():
    fig = storage_plots.memory_vs_seq_figure(32, 1, 32, 128, 1024, "fp16")
    fp16 = next(tr for tr in fig.data if tr.name == "fp16")
    x, y = np.array(fp16.x), np.array(fp16.y)
    assert np.allclose(y / x, y[0] / x[0])  # linear in S
    marker = fig.data[-1]
    assert list(marker.x) == [1024] and marker.text[0] == "512.0 MiB"
    assert "GiB" in fig.layout.yaxis.title.text and list(marker.y) == [0.5]  # unit chosen from the largest curve


def test_cache_growth_figure():
    res = {m: CacheGrowth(m, [5, 6], [2, 2] if m == "kv" else [2, 4], [2**20, 2**21], [0, 0], [1.0, 1.1], None)
           for m in ("kv", "dynamic")}
    fig = storage_plots.cache_growth_figure(res)
    assert list(fig.data[1].y) == [1.0, 2.0]  # MiB
    assert len(fig.data) == 6


def test_padding_figure_and_waste():
    w = padding_waste([5, 50], bytes_per_slot=64, block_size=16)
    assert (w.allocated_slots, w.used_slots, w.paged_slots) == (100, 55, 16 + 64)
    assert w.waste_fraction == pytest.approx(0.45) and w.allocated_bytes == 6400
    fig = storage_plots.padding_figure(w)
    z = np.array(fig.data[0].z)
    assert z.shape[0] == 2 and z[0].sum() == 5 and z[1].sum() == 50
    assert "45.0%" in fig.layout.title.text


def test_axis_titles_use_full_width_brackets():
    from kvlab.viz.style import axis_title

    assert axis_title("单步耗时", "ms") == "单步耗时（ms）" and axis_title("层 L") == "层 L"
