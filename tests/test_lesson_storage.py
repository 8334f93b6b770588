"""Chapter 3.2's lesson module on known small cases, and its panels fed bad values."""
import re

import numpy as np
import pytest
import torch

from kvlab import MODEL_PRESETS, ModelConfig, format_bytes
from kvlab import kv_cache_bytes
from kvlab.inputs import InputError
from kvlab.lessons import storage as lesson
from kvlab.lessons.storage import CacheGrowth, padding_waste
from kvlab.viz import storage_plots
from kvlab.viz.style import FONT_FAMILY


def test_render_memory_by_hand():
    view = lesson.render_memory(L=2, H=3, D=4, S=10, B=5, dtype="fp16", filled_pct=30)
    r = view.result
    assert r.total_bytes == 2 * 2 * 5 * 3 * 10 * 4 * 2 == 4800 and r.filled == 3
    assert r.used_bytes == 1440 and r.per_token_bytes == 2 * 2 * 3 * 4 * 2
    assert "= <b>4,800 B = 4.7 KiB</b>" in view.html and "已生成 3 / 10" in view.html
    assert view.figures[0].layout.title.text.endswith("已用 1.4 KiB / 共 4.7 KiB")


@pytest.mark.parametrize("override,label", [
    (dict(S=0), "序列长度 S"), (dict(S=10**12), "序列长度 S"), (dict(B=0), "批次 B"), (dict(B=-3), "批次 B"),
    (dict(dtype="fp12"), "数据类型"), (dict(L=1.5), "层数 L"),
])
def test_render_memory_rejects_bad_values_in_chinese(override, label):
    args = dict(L=32, H=32, D=128, S=1024, B=1, dtype="fp16", filled_pct=30) | override
    with pytest.raises(InputError, match=f"^「{label}」"):
        lesson.render_memory(**args)


def test_memory_panel_greys_out_after_a_bad_batch():
    """Hole 1: B=8 then B=0 must not leave 4,294,967,296 B on screen as if it were current."""
    panel = lesson.memory_panel()
    panel.set(B=8)
    assert "4,294,967,296 B" in panel.readout.value and not panel.stale
    panel.set(B=0)
    assert "「批次 B」" in panel.message.value and "上一次有效" in panel.message.value
    assert panel.stale and "kvlab-stale" in panel.widget._dom_classes
    panel.set(B=1)
    assert not panel.stale and "536,870,912 B" in panel.readout.value


def test_model_table_has_every_model_and_gqa_ratio():
    html = lesson.model_table_html()
    for name in lesson.TABLE_MODELS:
        assert name in html
    llama7b = MODEL_PRESETS["LLaMA-7B"]
    assert format_bytes(llama7b.kv_cache_bytes(1024)) == "512.0 MiB" and "512.0 MiB" in html
    savings = {g.model: g for g in lesson.gqa_savings()}
    assert savings["Llama-2-70B"].ratio == 8 and savings["Llama-3-8B"].ratio == 4  # 64/8 and 32/8 KV heads


def test_cache_growth_counts():
    model = lesson.wide_cache_model()
    growth = lesson.compare_cache_growth(model, new_tokens=5, prompt_len=3)
    pre, dyn = growth["kv"], growth["dynamic"]
    per_token = lesson.per_token_bytes(model.config)
    assert per_token == 2 * 8 * 16 * 64 * 4
    assert pre.t == [3, 4, 5, 6, 7] and pre.allocations[-1] == 2 and dyn.allocations[-1] == 2 * 8 * 5
    assert pre.bytes_copied[-1] == 7 * per_token and dyn.bytes_copied[-1] == (3 + 4 + 5 + 6 + 7) * per_token
    assert torch.equal(pre.tokens, dyn.tokens)


def test_padding_waste_by_hand():
    w = lesson.padding_waste([12, 40, 7], bytes_per_slot=10, block_size=16)
    assert (w.allocated_slots, w.used_slots, w.paged_slots) == (120, 59, 16 + 48 + 16)
    assert w.waste_fraction == pytest.approx(61 / 120) and w.paged_bytes == 800


def test_padding_readout_says_when_paging_costs_more():
    """Hole 12: 64 sequences of length 1 in blocks of 16 need more with paging than with padding."""
    more = lesson.render_padding(", ".join(["1"] * 64), 16).html
    assert "反而需要" in more and "多" in more and "只需" not in more
    less = lesson.render_padding("12, 40, 7, 33, 25, 60", 16).html
    assert "只需" in less and "少" in less


@pytest.mark.parametrize("text", ["", "abc", "3, -1", "0", "1.5", ",,,", "9" * 9, ", ".join(["1"] * 65)])
def test_padding_rejects_bad_lengths(text):
    with pytest.raises(InputError, match=re.escape("「序列长度（提示+生成）」")):
        lesson.render_padding(text, 16)


def test_padding_accepts_chinese_commas_and_spaces():
    assert lesson.render_padding("12，40 7", 16).result.lengths == [12, 40, 7]


def test_padding_panel_greys_out_after_bad_lengths():
    panel = lesson.padding_panel()
    panel.set(lengths="abc")
    assert panel.stale and "kvlab-msg-warn" in panel.message.value
    panel.set(lengths="5, 50")
    assert not panel.stale and "浪费 45.0%" in panel.readout.value


def test_measured_padding_bytes():
    cfg = ModelConfig(vocab_size=10, d_model=8, n_layer=2, n_head=2, max_seq_len=64)
    allocated, used = lesson.measured_padding_bytes([3, 5], cfg)
    per_token = lesson.per_token_bytes(cfg)
    assert allocated == 2 * 5 * per_token and used == 8 * per_token


# -- plot builders ----------------------------------------------------------------------------------
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

