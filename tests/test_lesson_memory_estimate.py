"""Chapter 3.4's lesson: the chapter's figures, the calculator, the GPU budget, GQA twins, a real allocation,
and every plot builder read back. Expected values are worked out by hand in the comments."""
import math
from fractions import Fraction

import pytest

from kvlab import MODEL_PRESETS
from kvlab.inputs import InputError
from kvlab.lessons import memory_estimate as lesson
from kvlab.presets import GPU_PRESETS
from kvlab.viz import memory_estimate_plots as plots

GIB, MIB = 2**30, 2**20
T4 = "T4 16 GB (Colab)"


# -- 1. the chapter's figures ----------------------------------------------------------------------
def test_chapter_figures_against_hand_arithmetic():
    per_layer, total, long, mha_70b, real_70b = lesson.chapter_figures()
    assert (per_layer.text_bytes, per_layer.kvlab_bytes) == (16 * MIB, 2 * 32 * 2048 * 128 * 2)
    assert (total.text_bytes, total.kvlab_bytes) == (GIB // 2, 32 * 2 * 32 * 2048 * 128 * 2)
    assert (long.text_bytes, long.kvlab_bytes) == (2 * GIB, 4 * GIB)
    assert per_layer.ratio == total.ratio == long.ratio == 2
    assert not (per_layer.holds or total.holds or long.holds)
    assert mha_70b.kvlab_bytes == 2 * 80 * 64 * 8192 * 128 * 2 == 20 * GIB and mha_70b.holds
    assert real_70b.kvlab_bytes == 2 * 80 * 8 * 8192 * 128 * 2 and not real_70b.holds


def test_text_figure_relations():
    about = lesson.TextFigure("x", "x", "≈", 100, 109)
    assert about.holds and not lesson.TextFigure("x", "x", "≈", 100, 111).holds
    assert lesson.TextFigure("x", "x", ">", 100, 101).holds and not lesson.TextFigure("x", "x", ">", 100, 100).holds
    assert lesson.TextFigure("x", "x", "=", 100, 100).holds and about.ratio == Fraction(109, 100)


def test_each_halving_reproduces_the_comment_and_the_code_prints_its_own_numbers():
    as_written, s_1024, k_only, one_byte = lesson.halving_variants()
    assert as_written.printed == ("32.0 MB", "1.00 GB")
    for v in (s_1024, k_only, one_byte):
        assert v.printed == ("16.0 MB", "0.50 GB")
        assert v.per_layer_bytes == 32 * 2048 * 128 * 2  # one factor of 2 fewer: 16 MiB
        assert v.total_bytes == 32 * v.per_layer_bytes


def test_tables_show_each_figure():
    html = lesson.chapter_figures_html(lesson.chapter_figures())
    assert html.count("<tr>") == 6 and "不成立" in html and "33,554,432 B" in html and "2 倍" in html
    assert lesson.variants_html(lesson.halving_variants()).count("16.0 MB") == 3


def test_gb_and_gib():
    assert lesson.gb_and_gib(GIB) == (Fraction(GIB, 10**9), 1)
    assert lesson.gb_and_gib(3 * 10**9) == (3, Fraction(3 * 10**9, GIB))


# -- 2. the calculator ------------------------------------------------------------------------------
def test_estimate_cache_on_hand_cases():
    e = lesson.estimate_cache("LLaMA-7B", 2048, 3, "int8")
    assert e.total_bytes == 2 * 32 * 3 * 32 * 2048 * 128 * 1
    assert e.layer_bytes == (2 * 3 * 32 * 2048 * 128,) * 32
    assert e.per_token_bytes == 2 * 32 * 32 * 128 and e.plain_bytes == e.total_bytes
    assert not e.beyond_context and lesson.estimate_cache("LLaMA-7B", 2049).beyond_context
    m = lesson.estimate_cache("Mistral-7B", 8192)
    assert 2 * m.total_bytes == m.plain_bytes
    with pytest.raises(ValueError, match="^model"):
        lesson.estimate_cache("GPT-5", 10)
    with pytest.raises(ValueError, match="^seq_len"):
        lesson.estimate_cache("LLaMA-7B", 0)


def test_cache_curves():
    (c,) = lesson.cache_curves(["GPT-2 (124M)"], batch_size=2, seq_lens=[1, 10])
    per_token = 2 * 12 * 12 * 64 * 2  # 36 KiB
    assert c.bytes == (2 * per_token, 20 * per_token)
    assert (c.context_length, c.context_bytes) == (1024, 2 * 1024 * per_token)


def test_render_calculator_default():
    view = lesson.render_calculator("LLaMA-7B", 2048, 1, "fp16")
    assert "1,073,741,824 B = 1.00 GiB" in view.html and "512.0 KiB" in view.html and "32.0 MiB" in view.html
    assert "⚠" not in view.html
    curves, layers = view.figures
    names = [t.name for t in curves.data if t.mode == "lines"]
    assert set(names) == set(lesson.CURVE_MODELS)
    thick = [t for t in curves.data if t.mode == "lines" and t.line.width == 5]
    assert [t.name for t in thick] == ["LLaMA-7B"]
    marker = [t for t in curves.data if t.mode == "markers+text"][0]
    assert list(marker.x) == [2048] and list(marker.y) == [GIB]
    assert len(layers.data) == 1 and list(layers.data[0].y) == [32.0] * 32  # MiB per layer


def test_render_calculator_flags_and_own_formulas():
    beyond = lesson.render_calculator("GPT-2 (124M)", 4096, 1, "fp16").html
    assert "⚠" in beyond and "1,024" in beyond
    gemma = lesson.render_calculator("Gemma-2-9B", 8192, 1, "fp16")
    assert "滑动窗口" in gemma.html and "min(S, 4,096)" in gemma.html
    assert len(gemma.figures[1].data) == 2  # windowed and global layers in two colours
    assert "Gemma-2-9B" in [t.name for t in gemma.figures[0].data]  # added to the curves
    mla = lesson.render_calculator("DeepSeek-V3 (671B)", 1000, 1, "fp16").html
    assert "MLA" in mla and "61 × 1 × 1,000 × 576 × 2 B" in mla


@pytest.mark.parametrize("values, control", [
    (("GPT-5", 2048, 1, "fp16"), "模型"),
    (("LLaMA-7B", 0, 1, "fp16"), "序列长度 S"),
    (("LLaMA-7B", -5, 1, "fp16"), "序列长度 S"),
    (("LLaMA-7B", 2**22 + 1, 1, "fp16"), "序列长度 S"),
    (("LLaMA-7B", 1.5, 1, "fp16"), "序列长度 S"),
    (("LLaMA-7B", 2048, 0, "fp16"), "批次 B"),
    (("LLaMA-7B", 2048, 10**9, "fp16"), "批次 B"),
    (("LLaMA-7B", 2048, 1, "fp12"), "缓存数据类型"),
])
def test_render_calculator_bad_values(values, control):
    with pytest.raises(InputError) as err:
        lesson.render_calculator(*values)
    assert err.value.control == control


def test_calculator_panel_updates_and_greys_out():
    panel = lesson.calculator_panel()
    assert "1.00 GiB" in panel.readout.value
    panel.set(seq_len=8192)
    assert "4.00 GiB" in panel.readout.value and "⚠" in panel.readout.value  # past LLaMA-7B's 2048
    panel.set(batch_size=0)
    assert panel.stale and "批次 B" in panel.message.value
    panel.set(batch_size=2)
    assert not panel.stale and "8.00 GiB" in panel.readout.value
    assert 1 in panel.controls["seq_len"].options[0] and lesson.MAX_SEQ_LEN == lesson.SEQ_OPTIONS[-1]


# -- 3. will it fit? --------------------------------------------------------------------------------
def test_longest_context_and_largest_batch_by_hand():
    per_token = 2 * 32 * 32 * 128 * 2  # LLaMA-7B, fp16: 512 KiB
    assert lesson.longest_context("LLaMA-7B", 7 * per_token + per_token - 1) == 7
    assert lesson.longest_context("LLaMA-7B", 7 * per_token, batch_size=7) == 1
    assert lesson.longest_context("LLaMA-7B", per_token - 1) == 0
    assert lesson.largest_batch("LLaMA-7B", 5 * GIB, 2048) == 5
    assert lesson.largest_batch("LLaMA-7B", -1, 2048) == 0
    # Mistral: every layer windowed, the cache stops at 4096 tokens
    window = 4096 * 2 * 32 * 8 * 128 * 2
    assert lesson.longest_context("Mistral-7B", window) is None
    assert lesson.longest_context("Mistral-7B", window - 1) == 4095
    # Gemma-2: the global layers keep growing; the answer is the last length that fits
    g = MODEL_PRESETS["Gemma-2-9B"]
    room = 3 * GIB
    s = lesson.longest_context(g, room)
    assert g.kv_cache_bytes(s) <= room < g.kv_cache_bytes(s + 1)


def test_plan_fit_llama7b_on_a_t4():
    plan = lesson.plan_fit("LLaMA-7B", GPU_PRESETS[T4].memory_bytes, 2048)
    weights = 2 * 6_738_415_616
    assert plan.weight_bytes == weights and plan.cache_bytes == GIB
    room = 15360 * MIB - weights  # 2,629,296,128 B
    assert plan.room_bytes == room and plan.free_bytes == room - GIB and plan.fits
    assert plan.longest_context == room // (512 * 1024) == 5014
    assert plan.largest_batch == room // GIB == 2
    over = lesson.plan_fit("LLaMA-65B", GPU_PRESETS[T4].memory_bytes, 2048)
    assert not over.weights_fit and over.longest_context == 0 and over.largest_batch == 0
    with pytest.raises(ValueError, match="^budget_bytes"):
        lesson.plan_fit("LLaMA-7B", 0, 10)


def test_render_fit_default_and_labels():
    view = lesson.render_fit("LLaMA-7B", "fp16", "fp16", T4, 15360, 2048, 1)
    assert "5,014" in view.html and "<b>2</b> 条序列" in view.html
    bar, tradeoff = view.figures
    assert T4 in bar.layout.title.text
    assert "自定义预算 15,000 MiB" in lesson.render_fit("LLaMA-7B", "fp16", "fp16", T4, 15000, 2048, 1) \
        .figures[0].layout.title.text
    assert [p.x[0] for p in tradeoff.data if p.mode == "markers"] == [1]


@pytest.mark.parametrize("values, control", [
    (("LLaMA-65B", "fp16", "fp16", T4, 15360, 2048, 1), "可用显存（MiB）"),  # weights alone do not fit
    (("LLaMA-7B", "fp16", "fp16", T4, 0, 2048, 1), "可用显存（MiB）"),
    (("LLaMA-7B", "fp16", "fp16", T4, -3, 2048, 1), "可用显存（MiB）"),
    (("LLaMA-7B", "fp16", "fp16", "TPU", 15360, 2048, 1), "GPU"),
    (("LLaMA-7B", "fp13", "fp16", T4, 15360, 2048, 1), "权重数据类型"),
    (("LLaMA-7B", "fp16", "fp16", T4, 15360, 10**9, 1), "序列长度 S"),
    (("LLaMA-7B", "fp16", "fp16", T4, 15360, 2048, -1), "批次 B"),
])
def test_render_fit_bad_values(values, control):
    with pytest.raises(InputError) as err:
        lesson.render_fit(*values)
    assert err.value.control == control
    if values[0] == "LLaMA-65B":
        assert "放不下" in str(err.value) and "121.60 GiB" in str(err.value)


def test_fit_panel_card_fills_the_budget_and_bad_budget_greys_out():
    panel = lesson.fit_panel()
    assert panel.controls["budget_mib"].value == 15360
    panel.set(gpu="H200 141 GB")
    assert panel.controls["budget_mib"].value == 143_771 and "H200 141 GB" in panel.views[0].figure.layout.title.text
    panel.set(model="LLaMA-65B")
    assert not panel.stale
    panel.set(gpu="A100 40 GB")  # 40 GiB cannot hold 121.6 GiB of fp16 weights
    assert panel.stale and "可用显存（MiB）" in panel.message.value
    panel.set(weight_dtype="int4")  # 30.4 GiB of weights: fits again
    assert not panel.stale
    panel.set(gpu=lesson.CUSTOM_GPU)
    assert panel.controls["budget_mib"].value == 40_960  # the box keeps its value for editing


# -- 4. GQA twins -----------------------------------------------------------------------------------
def test_gqa_twins():
    chapter, llama, small = lesson.gqa_twins()
    assert chapter.ratio == llama.ratio == 8 and small.ratio == 4
    assert small.mha_bytes == 2 * 32 * 32 * 8192 * 128 * 2 and small.gqa_bytes == 2 * 32 * 8 * 8192 * 128 * 2
    with pytest.raises(ValueError, match="^pairs"):
        lesson.gqa_twins(pairs=[("LLaMA-7B", "Llama-2-70B")])


# -- 5. real memory ---------------------------------------------------------------------------------
def test_measure_cache_allocation_on_cpu():
    check = lesson.measure_cache_allocation("GPT-2 (124M)", seq_len=16, batch_size=2, dtype="fp32", device="cpu")
    assert check.shape == (12, 2, 12, 16, 64)
    assert check.formula_bytes == check.measured_bytes == 2 * 12 * 2 * 12 * 16 * 64 * 4
    assert "untyped_storage" in check.method and check.released_bytes is None
    with pytest.raises(ValueError, match="^model"):
        lesson.measure_cache_allocation("Mistral-7B", seq_len=4, device="cpu")


def test_device_memory_and_gpu_names():
    assert lesson.device_memory("cpu") is None
    assert lesson.matching_gpu("Tesla T4").memory_mib == 15360
    assert lesson.matching_gpu("NVIDIA H200").name == "H200 141 GB"
    assert lesson.matching_gpu("NVIDIA H100 NVL") is None
    assert lesson.gpu_table_html().count("<tr>") == 1 + len(GPU_PRESETS) and "143,771 MiB" in lesson.gpu_table_html()


# -- plot builders, read back -----------------------------------------------------------------------
def test_iec_log_ticks():
    vals, texts = plots.iec_log_ticks(40 * 1024, 2 * GIB)  # one tick at or below each end, every factor of 32
    assert vals == [32 * 1024, MIB, 32 * MIB, GIB, 32 * GIB]
    assert texts == ["32 KiB", "1 MiB", "32 MiB", "1 GiB", "32 GiB"]


def test_cache_curves_figure_reads_back():
    curves = lesson.cache_curves(["LLaMA-7B", "Mistral-7B"], seq_lens=[1024, 8192])
    fig = plots.cache_curves_figure(curves, "Mistral-7B", 8192, 512 * MIB, 1, "fp16")
    lines = {t.name: t for t in fig.data if t.mode == "lines"}
    assert list(lines["LLaMA-7B"].y) == [512 * MIB, 4 * GIB]
    assert list(lines["Mistral-7B"].y) == [128 * MIB, 512 * MIB]
    assert fig.data[0].name == "Mistral-7B"  # the selected model is drawn first, under the others
    diamonds = [t for t in fig.data if t.mode == "markers"]
    assert sorted(d.x[0] for d in diamonds) == [2048, 8192]


def test_layer_bytes_figure_reads_back():
    g = lesson.estimate_cache("Gemma-2-9B", 8192)
    windowed = [MODEL_PRESETS["Gemma-2-9B"].layer_is_windowed(i) for i in range(42)]
    fig = plots.layer_bytes_figure("Gemma-2-9B", g.layer_bytes, windowed, 8192)
    global_layers, window_layers = fig.data
    assert list(global_layers.x) == list(range(1, 42, 2)) and set(global_layers.y) == {64.0}  # MiB
    assert list(window_layers.x) == list(range(0, 42, 2)) and set(window_layers.y) == {32.0}


def test_fit_bar_figure_reads_back():
    plan = lesson.plan_fit("LLaMA-7B", 15 * GIB, 2048)
    fig = plots.fit_bar_figure(plan, "T4")
    assert [t.x[0] for t in fig.data] == [plan.weight_bytes / GIB, 1.0, (15 * GIB - plan.weight_bytes - GIB) / GIB]
    assert sum(t.x[0] for t in fig.data) == pytest.approx(15)
    over = lesson.plan_fit("LLaMA-7B", 13 * GIB, 2048)  # 0.45 GiB of room for a 1 GiB cache
    fig = plots.fit_bar_figure(over, "T4")
    assert fig.data[2].name.startswith("放不下") and sum(t.x[0] for t in fig.data) == pytest.approx(
        (over.weight_bytes + GIB) / GIB)
    assert "还差" in fig.layout.title.text


def test_fit_tradeoff_and_twins_figures_read_back():
    fig = plots.fit_tradeoff_figure([(1, 5014), (2, 2507), (4, None)], 2048, 2, 2048, True, "LLaMA-7B")
    curve = fig.data[0]
    assert list(curve.x) == [1, 2] and list(curve.y) == [5014, 2507]
    assert any("不受显存限制" in a.text for a in fig.layout.annotations)
    context = [a for a in fig.layout.annotations if "上下文 2,048" in a.text]
    assert len(context) == 1 and context[0].y == pytest.approx(math.log10(2048))  # log axes place annotations in log10
    twins = lesson.gqa_twins()
    fig = plots.twins_figure(twins)
    mha, gqa = fig.data
    assert list(mha.y) == [20.0, 20.0, 4.0] and list(gqa.y) == [2.5, 2.5, 1.0]
    assert gqa.text[0].endswith("（÷8）")
