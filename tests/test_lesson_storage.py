"""Chapter 3.2's lesson module on known small cases, and its panels fed bad values."""
import re

import numpy as np
import pytest
import torch

from kvlab import MODEL_PRESETS, ModelConfig, format_bytes
from kvlab.inputs import InputError
from kvlab.lessons import storage as lesson
from kvlab.lessons.storage import CacheGrowth, padding_waste
from kvlab.viz import storage_plots
from kvlab.viz.style import FONT_FAMILY, MODE_LABELS


# -- the memory panel ---------------------------------------------------------------------------------
def test_render_memory_by_hand():
    view = lesson.render_memory(L=2, H=3, D=4, S=10, B=5, dtype="fp16", filled_pct=30)
    r = view.result
    assert r.total_bytes == 2 * 2 * 5 * 3 * 10 * 4 * 2 == 4800 and r.filled == 3
    assert r.used_bytes == 1440 and r.per_token_bytes == 2 * 2 * 3 * 4 * 2
    assert "= <b>4,800 B = 4.7 KiB</b>" in view.html and "已生成 3 / 10 个 token" in view.html
    assert "1/1.12e+05" in view.html  # 4,800 B against the example's 536,870,912 B
    assert view.figures[0].layout.title.text.endswith("已用 1.4 KiB / 共 4.7 KiB")


def test_render_memory_compares_with_the_chapter_example():
    assert lesson.example_bytes() == 2 * 32 * 32 * 1024 * 128 * 2
    assert "的 1 倍" in lesson.render_memory(32, 32, 128, 1024, 1, "fp16", 0).html
    assert "的 8 倍" in lesson.render_memory(32, 32, 128, 4096, 2, "fp16", 0).html
    assert "的 1/4" in lesson.render_memory(32, 8, 128, 1024, 1, "fp16", 0).html
    assert "的 1.5 倍" in lesson.render_memory(48, 32, 128, 1024, 1, "fp16", 0).html


@pytest.mark.parametrize("override,label", [
    (dict(S=0), "序列长度 S"), (dict(S=10**12), "序列长度 S"), (dict(S=-5), "序列长度 S"), (dict(S=2.5), "序列长度 S"),
    (dict(B=0), "批次 B"), (dict(B=-3), "批次 B"), (dict(B=10**9), "批次 B"), (dict(dtype="fp12"), "数据类型"),
    (dict(L=1.5), "层数 L"), (dict(L=0), "层数 L"), (dict(H=0), "KV 头数 H"), (dict(D=None), "头维度 D"),
    (dict(filled_pct=101), "已生成（%）"),
])
def test_render_memory_rejects_bad_values_in_chinese(override, label):
    args = dict(L=32, H=32, D=128, S=1024, B=1, dtype="fp16", filled_pct=30) | override
    with pytest.raises(InputError, match=f"^「{re.escape(label)}」") as err:
        lesson.render_memory(**args)
    assert not re.search(r"\b(must|got|between|seq_len|batch_size|head_dim|n_layer)\b", str(err.value)), err.value


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


def test_memory_panel_lays_its_controls_out_in_three_rows():
    panel = lesson.memory_panel()
    box = next(c for c in panel.widget.children if panel.controls["L"] in getattr(c, "children", ()))
    assert box.layout.grid_template_columns == "repeat(4, max-content)"  # Panel(layout="grid", columns=4)
    kids = list(box.children)
    order = ["L", "H", "D", "B", "S", "dtype", "filled_pct"]
    positions = [kids.index(panel.controls[name]) for name in order]
    assert positions == [1, 2, 3, 5, 6, 7, 9]  # a caption (or Play) starts each row of four cells
    assert "模型的形状" in kids[0].value and "这次推理" in kids[4].value and "Play" in type(kids[8]).__name__


def test_every_memory_control_changes_the_tensor_picture():
    base = dict(L=32, H=32, D=128, S=1024, B=1, dtype="fp16", filled_pct=30)
    def picture(**kw):
        return lesson.render_memory(**(base | kw)).figures[0].to_plotly_json()["data"]
    reference = picture()
    for change in (dict(L=16), dict(H=8), dict(D=64), dict(S=2048), dict(B=3), dict(dtype="int8"),
                   dict(filled_pct=80)):
        assert picture(**change) != reference, change


# -- real models ------------------------------------------------------------------------------------
def test_model_table_has_every_model_and_gqa_ratio():
    html = lesson.model_table_html()
    for name in lesson.TABLE_MODELS:
        assert name in html
    llama7b = MODEL_PRESETS["LLaMA-7B"]
    assert format_bytes(llama7b.kv_cache_bytes(1024)) == "512.0 MiB" and "512.0 MiB" in html
    savings = {g.model: g for g in lesson.gqa_savings()}
    assert savings["Llama-2-70B"].ratio == 8 and savings["Llama-3-8B"].ratio == 4  # 64/8 and 32/8 KV heads


def test_model_table_marks_sizes_past_the_trained_context():
    rows = re.findall(r"<tr>(.*?)</tr>", lesson.model_table_html())[1:]
    cells = {re.findall(r"<td>(.*?)</td>", r)[0]: re.findall(r"<td>(.*?)</td>", r) for r in rows}
    assert cells["GPT-2 (124M)"][1] == "1,024" and cells["LLaMA-7B"][1] == "2,048"
    assert lesson.PAST_CONTEXT in cells["GPT-2 (124M)"][-1] and lesson.PAST_CONTEXT not in cells["GPT-2 (124M)"][-2]
    for name in ("LLaMA-7B", "LLaMA-13B", "LLaMA-65B"):  # 2,048 tokens: S = 1,024 fits, 4,096 does not
        assert lesson.PAST_CONTEXT in cells[name][-1] and lesson.PAST_CONTEXT not in cells[name][-2]
    for name in ("Llama-2-70B", "Llama-3-8B", "Gemma-7B"):  # 4,096 and 8,192 tokens
        assert lesson.PAST_CONTEXT not in cells[name][-1]
    assert lesson.past_context(4096) == ["GPT-2 (124M)", "LLaMA-7B", "LLaMA-13B", "LLaMA-65B"]
    assert lesson.past_context(1024) == []


def test_head_dim_exceptions_are_real_models_with_heads_times_dim_not_hidden():
    names = [p.name for p in lesson.head_dim_exceptions()]
    assert names == ["Gemma-7B", "Gemma-2-9B"]  # 16 x 256 = 4096 vs 3072 and 3584; MLA and the hypothetical left out
    note = lesson.head_dim_note()
    assert "16 × 256 = 4,096，而隐藏维度是 3,072" in note and "LLaMA" not in note


# -- preallocation vs concatenation -------------------------------------------------------------------
def test_cache_growth_counts():
    model = lesson.wide_cache_model()
    growth = lesson.compare_cache_growth(model, new_tokens=5, prompt_len=3, with_transformers=False)
    pre, dyn = growth.runs["kv"], growth.runs["dynamic"]
    per_token = lesson.per_token_bytes(model.config)
    assert per_token == 2 * 8 * 16 * 64 * 4
    assert pre.t == [3, 4, 5, 6, 7] and pre.allocations[-1] == 2 and dyn.allocations[-1] == 2 * 8 * 5
    assert pre.bytes_copied[-1] == 7 * per_token and dyn.bytes_copied[-1] == (3 + 4 + 5 + 6 + 7) * per_token
    assert pre.layer0_k_tensors == [1, 1, 1, 1, 1] and dyn.layer0_k_tensors == [1, 2, 3, 4, 5]
    assert pre.attended == dyn.attended == [3, 4, 5, 6, 7]  # attention reads the stored tokens only
    assert torch.equal(pre.tokens, dyn.tokens) and growth.transformers_skipped and growth.prompt_len == 3


def test_cache_growth_with_transformers_sees_the_same_tokens_and_reallocations():
    pytest.importorskip("transformers")
    growth = lesson.compare_cache_growth(lesson.wide_cache_model(), new_tokens=6, prompt_len=4)
    assert growth.transformers_skipped is None
    new = growth.runs["kv"].tokens[:, 4:]
    hf_dyn, hf_static = growth.runs["transformers:dynamic"], growth.runs["transformers:static"]
    assert hf_dyn.t == hf_static.t == growth.runs["kv"].t == [4, 5, 6, 7, 8, 9]
    assert torch.equal(hf_dyn.tokens, new) and torch.equal(hf_static.tokens, new)
    assert hf_dyn.layer0_k_tensors == [1, 2, 3, 4, 5, 6] and hf_static.layer0_k_tensors == [1] * 6
    assert hf_dyn.attended == [4, 5, 6, 7, 8, 9] and hf_static.attended == [9] * 6  # the whole buffer, masked
    assert hf_dyn.allocations is None and len(growth.transformers_sentences()) == 2


def test_cache_growth_without_transformers_says_why(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_transformers(name, *args, **kwargs):
        if name == "transformers" or name.startswith("transformers."):
            raise ImportError("No module named 'transformers'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_transformers)
    growth = lesson.compare_cache_growth(lesson.wide_cache_model(), new_tokens=2, prompt_len=2)
    assert set(growth.runs) == {"kv", "dynamic"} and growth.transformers_sentences() == []
    assert growth.transformers_skipped.startswith("没有安装 transformers")


def test_growth_medians_by_hand():
    run = CacheGrowth("kv", [1, 2, 3, 4, 5, 6, 7, 8, 9], [50, 1, 2, 3, 4, 9, 8, 7, 6], [1] * 9, None)
    assert run.late_ms() == 7  # the second half [4, 9, 8, 7, 6]
    assert run.early_ms() == 1.5  # the first quarter of the 8 decode passes: [1, 2] (the 50 ms prefill left out)
    assert run.smoothed_ms(3) == [25.5, 2, 2, 3, 4, 8, 8, 7, 6.5]  # medians of [50, 1], [50, 1, 2], ... [7, 6]


@pytest.mark.parametrize("fast,slow,expected", [
    (10.0, 15.0, "慢了 50%"), (7.82, 11.76, "慢了 50%"), (10.0, 11.2, "慢了 12%"),
    (10.0, 10.5, "相差不到 10%"), (10.0, 9.5, "相差不到 10%"), (10.0, 8.0, "这一次 B 快了 20%"),
])
def test_pace_sentence_follows_the_measured_ratio(fast, slow, expected):
    sentence = lesson.pace_sentence("A", fast, "B", slow)
    assert expected in sentence and f"B 是 {slow:.2f} ms，A 是 {fast:.2f} ms" in sentence
    assert ("慢了" in sentence) == (slow / fast >= 1.1)


def test_kvlab_sentence_uses_the_legend_names():
    runs = {m: CacheGrowth(m, [1, 2], [5.0, 10.0], [1, 1], None) for m in ("kv", "dynamic")}
    runs["dynamic"].step_ms = [5.0, 20.0]
    sentence = lesson.GrowthComparison(runs, 1).kvlab_sentence()
    assert MODE_LABELS["dynamic"] in sentence and "慢了 100%" in sentence
    assert " ，" not in sentence and "， " not in sentence


# -- padding ---------------------------------------------------------------------------------------
def test_padding_waste_by_hand():
    w = lesson.padding_waste([12, 40, 7], bytes_per_slot=10, block_size=16)
    assert (w.allocated_slots, w.used_slots, w.paged_slots) == (120, 59, 16 + 48 + 16)
    assert w.blocks_per_sequence == [1, 3, 1]
    assert w.waste_fraction == pytest.approx(61 / 120) and w.paged_bytes == 800


def test_padding_readout_says_when_paging_costs_more():
    """Hole 12: 64 sequences of length 1 in blocks of 16 need more with paging than with padding."""
    more = lesson.render_padding(", ".join(["1"] * 64), 16).html
    assert "反而需要" in more and "多" in more and "只需" not in more
    less = lesson.render_padding("12, 40, 7, 33, 25, 60", 16).html
    assert "只需" in less and "少" in less
    assert "14 块 × 16 = 224 个槽位" in less and "浪费 21.0%" in less  # 1 + 3 + 1 + 3 + 2 + 4 blocks; 1 - 177/224


@pytest.mark.parametrize("text", ["", "abc", "3, -1", "0", "1.5", ",,,", "9" * 9, ", ".join(["1"] * 65)])
def test_padding_rejects_bad_lengths(text):
    with pytest.raises(InputError, match=re.escape("「序列长度（提示词 + 生成）」")):
        lesson.render_padding(text, 16)


@pytest.mark.parametrize("block", [0, -1, 5000, 2.5])
def test_padding_rejects_bad_block_sizes(block):
    with pytest.raises(InputError, match="^「分页块大小」"):
        lesson.render_padding("12, 40", block)


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
def _trace(fig, name, axis="x"):
    return next(t for t in fig.data if t.name == name and (t.xaxis or "x") == axis)


def _boxes(trace):
    """(x0, x1, y0, y1) of each rectangle of a None-separated polygon trace."""
    xs, ys = list(trace.x), list(trace.y)
    out = []
    for i in range(0, len(xs), 6):
        x, y = xs[i:i + 5], ys[i:i + 5]
        out.append((min(x), max(x), min(y), max(y)))
    return out


def test_cache_tensor_figure_is_drawn_to_scale():
    # L=2, H=4, D=8, fp16: 2 * 4 * 8 * 2 = 128 B per token (all layers), 64 B per layer; S = 10, 4 filled
    fig = storage_plots.cache_tensor_figure(L=2, B=1, H=4, S=10, D=8, filled=4, dtype="fp16",
                                            reference=(4, 4, 8, 20, "fp16"))
    assert _boxes(_trace(fig, "已存的 token")) == [(0, 4, 0, 128)]
    assert _boxes(_trace(fig, "已分配、还空着")) == [(4, 10, 0, 128)]
    assert _boxes(_trace(fig, "已存的 token", "x2")) == [(0, 4, 0, 64)]
    reference = next(t for t in fig.data if t.name.startswith("虚线：原文示例 L=4、H=4、D=8、S=20"))
    assert _boxes(reference) == [(0, 20, 0, 256)]  # 4 * 4 * 8 * 2 B by 20 slots, same scale
    assert list(_trace(fig, "层与层的分界").y) == [64, 64, None]  # one boundary between 2 layers
    assert [y for y in _trace(fig, "头与头的分界", "x2").y if y is not None] == [16, 16, 32, 32, 48, 48]
    assert "（2, 1, 4, 10, 8）" in fig.layout.title.text and fig.layout.title.text.endswith("已用 1.0 KiB / 共 2.5 KiB")  # 2 * 2*1*4*{4,10}*8 * 2 B
    assert fig.layout.template.layout.font.family == FONT_FAMILY
    assert "KiB" not in fig.layout.yaxis.title.text and "（B）" in fig.layout.yaxis.title.text


def test_cache_tensor_figure_follows_dtype_and_batch():
    fp32 = storage_plots.cache_tensor_figure(L=2, B=3, H=4, S=10, D=8, filled=10, dtype="fp32")
    assert _boxes(_trace(fp32, "已存的 token")) == [(0, 10, 0, 256)]  # 4 bytes per number: twice fp16's height
    assert not any(t.name == "已分配、还空着" for t in fp32.data)  # full
    shadows = _boxes(next(t for t in fp32.data if t.name == "另外 2 条序列（同样大小）"))
    assert len(shadows) == 2 and all((x1 - x0, y1 - y0) == pytest.approx((10, 256)) for x0, x1, y0, y1 in shadows)
    int4 = storage_plots.cache_tensor_figure(L=2, B=1, H=4, S=10, D=8, filled=0, dtype="int4")
    assert _boxes(_trace(int4, "已分配、还空着")) == [(0, 10, 0, 32)] and not any(
        t.name == "已存的 token" for t in int4.data)


def test_cache_tensor_figure_points_at_a_tensor_too_small_to_see():
    small = storage_plots.cache_tensor_figure(L=4, B=1, H=2, S=100, D=32, filled=50, dtype="fp32",
                                              reference=(32, 32, 128, 1024, "fp16"))
    assert [a.text for a in small.layout.annotations if a.showarrow] == ["当前的张量", "当前的第 0 层"]
    same = storage_plots.cache_tensor_figure(32, 1, 32, 1024, 128, 300, "fp16", reference=(32, 32, 128, 1024, "fp16"))
    assert not [a for a in same.layout.annotations if a.showarrow]
    many = storage_plots.cache_tensor_figure(L=128, B=1, H=128, S=16, D=256, filled=1, dtype="fp16")
    assert not any(t.name in ("层与层的分界", "头与头的分界") for t in many.data)  # too many to draw one by one


def test_memory_vs_seq_is_linear_and_marks_s():
    fig = storage_plots.memory_vs_seq_figure(32, 1, 32, 128, 1024, "fp16")
    fp16 = next(tr for tr in fig.data if tr.name == "fp16")
    x, y = np.array(fp16.x), np.array(fp16.y)
    assert np.allclose(y / x, y[0] / x[0])  # linear in S
    marker = fig.data[-1]
    assert list(marker.x) == [1024] and marker.text[0] == "512.0 MiB"
    assert "GiB" in fig.layout.yaxis.title.text and list(marker.y) == [0.5]  # unit chosen from the largest curve


def test_cache_growth_figure():
    runs = {m: CacheGrowth(m, [5, 6], [1.0, 1.1], [1, 1] if m == "kv" else [1, 2], None, [2, 2],
                           [2**20, 2**21], [0, 0]) for m in ("kv", "dynamic")}
    runs["transformers:static"] = CacheGrowth("transformers:static", [5, 6], [3.0, 3.0], [1, 1], None)
    fig = storage_plots.cache_growth_figure(runs)
    assert len(fig.data) == 3 + 3 + 2  # transformers: no byte count of its own
    copied = [t for t in fig.data if t.xaxis == "x2"]
    assert [list(t.y) for t in copied] == [[1.0, 2.0], [1.0, 2.0]]  # MiB
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert names == [MODE_LABELS[m] for m in runs] and "StaticCache" in names[-1]
    assert list(next(t for t in fig.data if t.xaxis == "x" and t.name == names[1]).y) == [1, 2]
    assert [list(t.y) for t in fig.data if t.xaxis == "x3"] == [[1.05, 1.05], [1.05, 1.05], [3.0, 3.0]]  # medians


def test_padding_figure_draws_padding_and_pages():
    w = padding_waste([5, 50], bytes_per_slot=64, block_size=16)
    assert (w.allocated_slots, w.used_slots, w.paged_slots) == (100, 55, 16 + 64)
    assert w.waste_fraction == pytest.approx(0.45) and w.allocated_bytes == 6400
    fig = storage_plots.padding_figure(w)
    used_padded = _boxes(_trace(fig, "真实 token"))
    assert [(x0, x1) for x0, x1, *_ in used_padded] == [(0, 5), (0, 50)]
    assert [(x0, x1) for x0, x1, *_ in _boxes(_trace(fig, "padding（空着的槽位）"))] == [(5, 50)]
    pages = _boxes(_trace(fig, "一个块", "x2"))
    assert len(pages) == 1 + 4 and all(13 < x1 - x0 <= 16 for x0, x1, *_ in pages)  # 16 slots less a small gap
    tails = _boxes(_trace(fig, "每条序列最后一块没用完的部分", "x2"))
    assert [x0 for x0, *_ in tails] == [5, 50] and [round(x1) for _, x1, *_ in tails] == [16, 64]
    assert "45.0%" in fig.layout.annotations[0].text and "共 5 块" in fig.layout.annotations[1].text


def test_padding_figure_merges_pages_when_there_are_too_many():
    w = padding_waste([1000] * 10, bytes_per_slot=1, block_size=1)
    fig = storage_plots.padding_figure(w)
    assert len(_boxes(_trace(fig, "一个块", "x2"))) == 10 and "不逐块画出" in fig.layout.annotations[1].text
