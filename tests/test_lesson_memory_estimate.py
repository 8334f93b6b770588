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

GIB, MIB, KIB = 2**30, 2**20, 2**10
T4 = "T4 16 GB (Colab)"
HYPO = "70B, 64 KV heads (chapter's hypothetical)"
HYPO_LABEL = "原文假设的 70B（64 个 KV 头）"
T4_USABLE = 15360 * MIB * 9 // 10  # 14,495,514,624 B: 0.9 of nvidia-smi's total
LLAMA7_FP16 = 2 * 6_738_415_616  # 13,476,831,232 B


# -- helpers ---------------------------------------------------------------------------------------
def test_ratio_text_and_zh_join():
    assert lesson.ratio_text(Fraction(2)) == "2" and lesson.ratio_text(Fraction(1024)) == "1,024"
    assert lesson.ratio_text(Fraction(3, 2)) == "1.5" and lesson.ratio_text(Fraction(32768, 576)) == "56.9"
    assert lesson.ratio_text(Fraction(100001, 100)) == "1,000"
    assert lesson.zh_join(["甲"]) == "甲" and lesson.zh_join(["甲", "乙", "丙"]) == "甲、乙 和 丙"


def test_model_options_show_the_label_and_keep_the_key():
    options = dict(lesson.model_options())
    assert options[HYPO_LABEL] == HYPO and options["LLaMA-7B"] == "LLaMA-7B"
    assert len(options) == len(MODEL_PRESETS)


def test_same_cache_shape_and_the_hypothetical_note():
    assert [p.name for p in lesson.same_cache_shape(HYPO)] == ["LLaMA-65B", "Qwen1.5-72B"]
    assert [p.name for p in lesson.same_cache_shape("Llama-3-70B")] == ["Llama-2-70B", "Llama-3.1-70B"]
    note = lesson.hypothetical_note(HYPO)
    assert "LLaMA-65B 和 Qwen1.5-72B" in note and "Llama-2-70B 和 Llama-3-70B 用 GQA，只有 8 个 KV 头" in note
    assert "70B 也是假设的" in note


def test_beyond_context_lines():
    assert lesson.beyond_context_html("LLaMA-7B", 2048) == ""
    rope = lesson.beyond_context_html("LLaMA-7B", 2049)
    assert "⚠ S = 2,049" in rope and "（2,048 个 token）" in rope and "外推" in rope
    learned = lesson.beyond_context_html("GPT-2 (124M)", 1025)
    assert "根本无法处理" in learned and "1,024 行" in learned and "外推" not in learned
    assert "根本无法处理" in lesson.beyond_context_html("StarCoder (15.5B)", 8193)
    assert lesson.beyond_context_html(HYPO, lesson.MAX_SEQ_LEN) == ""  # never released: no context to exceed


# -- 1. the chapter's figures ----------------------------------------------------------------------
def test_chapter_figures_against_hand_arithmetic():
    per_layer, total, long, mha_70b, real_70b = lesson.chapter_figures()
    assert (per_layer.text_bytes, per_layer.kvlab_bytes) == (16 * MIB, 2 * 32 * 2048 * 128 * 2)
    assert (total.text_bytes, total.kvlab_bytes) == (GIB // 2, 32 * 2 * 32 * 2048 * 128 * 2)
    assert (long.text_bytes, long.kvlab_bytes) == (2 * GIB, 4 * GIB)
    assert per_layer.ratio == total.ratio == long.ratio == 2
    assert not (per_layer.holds or total.holds or long.holds)
    assert mha_70b.kvlab_bytes == 2 * 80 * 64 * 8192 * 128 * 2 == 20 * GIB and mha_70b.holds
    assert real_70b.model.name == "Llama-3-70B" and real_70b.kvlab_bytes == 2 * 80 * 8 * 8192 * 128 * 2
    assert not real_70b.holds
    # 8192 tokens is past LLaMA-7B's 2048; the hypothetical has no context; Llama-3-70B's is 8192
    assert [f.beyond_context for f in (per_layer, total, long, mha_70b, real_70b)] == [False, False, True, False, False]


def test_text_figure_relations():
    about = lesson.TextFigure("x", "x", "≈", 100, 109)
    assert about.holds and not lesson.TextFigure("x", "x", "≈", 100, 111).holds
    assert lesson.TextFigure("x", "x", ">", 100, 101).holds and not lesson.TextFigure("x", "x", ">", 100, 100).holds
    assert lesson.TextFigure("x", "x", "=", 100, 100).holds and about.ratio == Fraction(109, 100)
    assert not about.beyond_context  # no model given


def test_each_halving_reproduces_the_comment_and_the_code_prints_its_own_numbers():
    as_written, s_1024, k_only, one_byte, half_h, half_d, half_l = lesson.halving_variants()
    assert as_written.printed == ("32.0 MB", "1.00 GB")
    for v in (s_1024, k_only, one_byte, half_h, half_d):
        assert v.printed == ("16.0 MB", "0.50 GB")
        assert v.per_layer_bytes == 32 * 2048 * 128 * 2  # one factor of 2 fewer: 16 MiB
        assert v.total_bytes == 32 * v.per_layer_bytes
    assert (half_l.per_layer_bytes, half_l.total_bytes) == (32 * MIB, 16 * 32 * MIB)  # only the total halves
    assert half_l.printed == ("32.0 MB", "0.50 GB")


def test_tables_show_each_figure():
    html = lesson.chapter_figures_html(lesson.chapter_figures())
    assert html.count("<tr>") == 6 and "不成立" in html and "33,554,432 B" in html and "2 倍" in html
    assert html.count("⚠") == 1 and "超过 LLaMA-7B 发布时的上下文（2,048 个 token）" in html
    assert HYPO_LABEL in html and "chapter's hypothetical" not in html
    variants = lesson.variants_html(lesson.halving_variants())
    assert variants.count("16.0 MB") == 5 and variants.count("<tr>") == 8


def test_gb_and_gib():
    assert lesson.gb_and_gib(GIB) == (Fraction(GIB, 10**9), 1)
    assert lesson.gb_and_gib(3 * 10**9) == (3, Fraction(3 * 10**9, GIB))


def test_seventy_b_reading():
    r = lesson.seventy_b_reading()
    assert r.at_chapter_s == 2 * 80 * 64 * 2048 * 128 * 2 == 5 * GIB
    assert r.at_long_s == 20 * GIB and r.scale == Fraction(80 * 64, 32 * 32) == 5
    assert r.text_scaled_gb == 10 and r.corrected_scaled == 20 * GIB and r.text_threshold_bytes == 16 * GIB
    text = lesson.seventy_b_text(r)
    assert "5.00 GiB" in text and "20.00 GiB" in text and "约 10 GB，并不超过 16 GB" in text


# -- 2. the calculator ------------------------------------------------------------------------------
def test_estimate_cache_on_hand_cases():
    e = lesson.estimate_cache("LLaMA-7B", 2048, 3, "int8")
    assert e.total_bytes == 2 * 32 * 3 * 32 * 2048 * 128 * 1
    assert e.layer_bytes == (2 * 3 * 32 * 2048 * 128,) * 32
    assert e.per_token_bytes == 2 * 32 * 32 * 128 and e.plain_bytes == e.total_bytes
    assert e.mean_per_token == e.per_token_bytes
    assert not e.beyond_context and lesson.estimate_cache("LLaMA-7B", 2049).beyond_context
    assert not lesson.estimate_cache(HYPO, 10**6).beyond_context
    m = lesson.estimate_cache("Mistral-7B", 8192)
    assert 2 * m.total_bytes == m.plain_bytes
    assert m.per_token_bytes == 2 * 32 * 8 * 128 * 2 == 128 * KIB and m.mean_per_token == 64 * KIB
    with pytest.raises(ValueError, match="^model"):
        lesson.estimate_cache("GPT-5", 10)
    with pytest.raises(ValueError, match="^seq_len"):
        lesson.estimate_cache("LLaMA-7B", 0)


def test_cache_curves():
    c, h = lesson.cache_curves(["GPT-2 (124M)", HYPO], batch_size=2, seq_lens=[1, 10])
    per_token = 2 * 12 * 12 * 64 * 2  # 36 KiB
    assert c.bytes == (2 * per_token, 20 * per_token) and c.per_token_bytes == per_token
    assert (c.context_length, c.context_bytes) == (1024, 2 * 1024 * per_token) and c.label == c.name
    assert h.label == HYPO_LABEL and (h.context_length, h.context_bytes) == (None, None)


def test_render_calculator_default():
    view = lesson.render_calculator("LLaMA-7B", 2048, 1, "fp16")
    assert "1,073,741,824 B = 1.00 GiB" in view.html and "512.0 KiB" in view.html and "32.0 MiB" in view.html
    assert "⚠" not in view.html and "窗口填满之前" not in view.html and view.result.total_bytes == GIB
    curves, layers = view.figures
    groups = [t.legendgroup for t in curves.data if t.mode == "lines" and t.legendgroup]
    assert set(groups) == set(lesson.CURVE_MODELS)
    thick = [t for t in curves.data if t.mode == "lines" and t.legendgroup and t.line.width == 5]
    assert [t.legendgroup for t in thick] == ["LLaMA-7B"]
    marker = [t for t in curves.data if t.mode == "markers+text"][0]
    assert list(marker.x) == [2048] and list(marker.y) == [GIB]
    assert len(layers.data) == 1 and list(layers.data[0].y) == [32.0] * 32  # MiB per layer


def test_render_calculator_curve_choice():
    only = lesson.render_calculator("Mistral-7B", 2048, 1, "fp16", ("GPT-2 (124M)",))
    assert [t.legendgroup for t in only.figures[0].data if t.mode == "lines" and t.legendgroup] == ["Mistral-7B", "GPT-2 (124M)"]
    reordered = lesson.render_calculator("LLaMA-7B", 2048, 1, "fp16", tuple(reversed(lesson.CURVE_MODELS)))
    assert reordered.figures[0].data == lesson.render_calculator("LLaMA-7B", 2048, 1, "fp16").figures[0].data
    # a picked model keeps its colour and dash whichever model is selected
    def styles(selected):
        fig = lesson.render_calculator(selected, 2048, 1, "fp16").figures[0]
        return {t.legendgroup: (t.line.color, t.line.dash) for t in fig.data if t.mode == "lines" and t.legendgroup and t.line.width < 5}
    assert styles("Gemma-2-9B")["Llama-3.1-405B"] == styles("LLaMA-7B")["Llama-3.1-405B"]
    assert styles("Gemma-2-9B")[HYPO] == styles("Mistral-7B")[HYPO]
    alone = lesson.render_calculator("Mistral-7B", 2048, 1, "fp16", ())
    assert [t.legendgroup for t in alone.figures[0].data if t.mode == "lines" and t.legendgroup] == ["Mistral-7B"]
    for bad in (("GPT-5",), "LLaMA-7B", None):
        with pytest.raises(InputError) as err:
            lesson.render_calculator("LLaMA-7B", 2048, 1, "fp16", bad)
        assert err.value.control == "曲线上的模型"


def test_render_calculator_flags_and_own_formulas():
    beyond = lesson.render_calculator("GPT-2 (124M)", 4096, 1, "fp16").html
    assert "⚠" in beyond and "1,024" in beyond and "根本无法处理" in beyond
    gemma = lesson.render_calculator("Gemma-2-9B", 8192, 1, "fp16")
    assert "滑动窗口" in gemma.html and "min(S, 4,096)" in gemma.html and "Mistral 论文" not in gemma.html
    assert "推理引擎是否实现了滚动缓存" in gemma.html and "是实际的 1.33 倍" in gemma.html  # 42 x 8192 / (21 x 4096 + 21 x 8192)
    assert len(gemma.figures[1].data) == 2  # windowed and global layers in two colours
    assert "Gemma-2-9B" in [t.legendgroup for t in gemma.figures[0].data]  # added to the curves
    mistral = lesson.render_calculator("Mistral-7B", 8192, 1, "fp16").html
    assert "Mistral 论文称之为滚动缓存" in mistral and "窗口填满之前）：128.0 KiB" in mistral
    assert "S = 8,192 时平均每个 token：64.0 KiB" in mistral
    assert "是实际的 1,024 倍" in lesson.render_calculator("Mistral-7B", 2**22, 1, "fp16").html  # 2**22 / 4096
    mla = lesson.render_calculator("DeepSeek-V3 (671B)", 1000, 1, "fp16").html
    assert "MLA" in mla and "61 × 1 × 1,000 × (512 + 64) × 2 B" in mla
    assert "一个 512 维的压缩向量（所有头的 K 和 V 都由它还原）和一个所有头共用的 64 维旋转位置编码（RoPE）键" in mla
    assert "共 576 个数" in mla and "D = 128 维" in mla and "是实际的 56.9 倍" in mla  # 2*128*128 / 576


def test_render_calculator_hypothetical_and_quantized_caches():
    hypo = lesson.render_calculator(HYPO, 16384, 1, "fp16").html
    assert HYPO_LABEL in hypo and "chapter's hypothetical" not in hypo
    assert "⚠" not in hypo and "没有发布时的上下文" in hypo and "LLaMA-65B 和 Qwen1.5-72B" in hypo
    assert "缩放系数" in lesson.render_calculator("LLaMA-7B", 10, 1, "int4").html
    assert "缩放系数" not in lesson.render_calculator("LLaMA-7B", 10, 1, "bf16").html


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
    slider = panel.widget.children[1].children[1]  # placed just before the S box
    assert slider.value == 2048 and not slider.readout and "1.00 GiB" in panel.readout.value
    panel.set(seq_len=8192)
    assert "4.00 GiB" in panel.readout.value and "⚠" in panel.readout.value  # past LLaMA-7B's 2048
    assert slider.value == 8192  # a typed length the slider has moves the slider
    slider.value = 3072  # dragging writes into the box, which renders
    assert panel.controls["seq_len"].value == 3072 and "1.50 GiB" in panel.readout.value
    panel.set(seq_len=5000)  # any length can be typed; the slider keeps its place
    assert slider.value == 3072 and f"{5000 * 512 * KIB:,} B" in panel.readout.value
    panel.set(batch_size=0)
    assert panel.stale and "批次 B" in panel.message.value
    panel.set(batch_size=2, seq_len=8192)
    assert not panel.stale and "8.00 GiB" in panel.readout.value
    panel.set(curve_models=("GPT-2 (124M)",))
    assert len([t for t in panel.views[0].figure.data if t.mode == "lines" and t.legendgroup]) == 2
    assert 1 in slider.options[0] and lesson.MAX_SEQ_LEN == lesson.SEQ_OPTIONS[-1]
    assert lesson.seq_len_slider(5000).value == 4096  # a start between two options: the one below


def test_comparisons_and_long_context_rows():
    falcon, big, mistral, longer, half = lesson.comparison_lines()
    assert "8.0 KiB" in falcon and "的 1/64：" in falcon and "贡献 1/32" in falcon and "贡献 1/2" in falcon
    assert "504.0 KiB" in big and "512.0 KiB" in big  # 2*126*8*128*2 = 504 KiB < 2*32*32*128*2 = 512 KiB
    assert "512.0 MiB" in mistral and "是实际的 2 倍" in mistral and "推理引擎" in mistral
    assert "16.00 GiB" in longer and "14.96 GiB" in longer
    assert "8.58 GiB" in half and "一半左右" in half and half.startswith("671B 的 DeepSeek-V3")
    rows = {r.model.name: r for r in lesson.long_context_rows()}
    v3 = rows["DeepSeek-V3 (671B)"]
    assert v3.released_weight_bytes == 671_026_419_200 and v3.fp16_weight_bytes == 2 * 671_026_419_200
    assert rows["Llama-3.1-8B"].released_weight_bytes is None
    assert "FP8 权重：624.94 GiB" in lesson.long_context_line(v3)


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


def test_usable_fraction():
    assert lesson.usable_fraction(0.9) == Fraction(9, 10) and lesson.usable_fraction(1) == 1
    assert lesson.usable_fraction(Fraction(1, 3)) == Fraction(1, 3)
    for bad in (0, -0.5, 1.5, True, "0.9", None):
        with pytest.raises(ValueError, match="^usable_fraction"):
            lesson.usable_fraction(bad)


def test_plan_fit_llama7b_on_a_t4():
    plan = lesson.plan_fit("LLaMA-7B", GPU_PRESETS[T4].memory_bytes, 2048)  # 0.9 of the card by default
    assert plan.weight_bytes == LLAMA7_FP16 and plan.cache_bytes == GIB
    assert plan.budget_bytes == T4_USABLE and plan.reserved_bytes == 15360 * MIB - T4_USABLE
    room = T4_USABLE - LLAMA7_FP16  # 1,018,683,392 B: 971.5 MiB
    assert plan.room_bytes == room and plan.free_bytes == room - GIB and not plan.fits and plan.weights_fit
    assert plan.longest_context == room // (512 * KIB) == 1942 and plan.largest_batch == 0
    whole = lesson.plan_fit("LLaMA-7B", GPU_PRESETS[T4].memory_bytes, 2048, usable=1)
    assert (whole.longest_context, whole.largest_batch) == ((15360 * MIB - LLAMA7_FP16) // (512 * KIB), 2) == (5014, 2)
    over = lesson.plan_fit("LLaMA-65B", GPU_PRESETS[T4].memory_bytes, 2048)
    assert not over.weights_fit and over.longest_context == 0 and over.largest_batch == 0
    with pytest.raises(ValueError, match="^total_bytes"):
        lesson.plan_fit("LLaMA-7B", 0, 10)
    with pytest.raises(ValueError, match="^usable_fraction"):
        lesson.plan_fit("LLaMA-7B", GIB, 10, usable=0)


def test_t4_plans_and_lines():
    llama7, llama3, llama3_int8 = lesson.t4_plans()
    assert llama7.longest_context == 1942 and llama7.largest_batch == 0
    assert not llama3.weights_fit and llama3.weight_bytes == 2 * 8_030_261_248
    assert llama3.weight_bytes > GPU_PRESETS[T4].torch_total_bytes_at_most  # 14.96 GiB > 14.755 GiB
    per_seq = 2 * 32 * 8 * 128 * 2 * 2048  # 256 MiB
    assert llama3_int8.largest_batch == (T4_USABLE - 8_030_261_248) // per_seq == 24
    assert "最长上下文 1,942 个 token" in lesson.plan_line(llama7)
    assert "权重本身就放不下，还差 1.46 GiB" in lesson.plan_line(llama3)  # 16,060,522,496 - 14,495,514,624 B
    # past the model's context (8,192): the line says it is only the formula's capacity (review r45, 4)
    assert llama3_int8.longest_context > 8192 == llama3_int8.model.context_length
    assert "（超过模型的上下文 8,192：显存不是瓶颈，这只是按公式算出的容量）" in lesson.plan_line(llama3_int8)
    assert "超过模型的上下文" not in lesson.plan_line(llama7)
    windowed = lesson.plan_fit("Mistral-7B", GPU_PRESETS["A100 80 GB"].memory_bytes, 2048)
    assert windowed.longest_context is None and "不受显存限制" in lesson.plan_line(windowed)
    # most of the twenty-odd sequences come from GQA, not int8 (review r45, 5)
    gain = lesson.int8_gain_line(llama7, llama3_int8)
    assert "14.96 GiB → 7.48 GiB" in gain and "8 个 KV 头" in gain and "256.0 MiB" in gain
    assert "LLaMA-7B（32 个 KV 头，1.00 GiB）的 1/4" in gain


def test_usable_note_says_what_the_rest_is_for_and_what_vllm_takes_from_the_share():
    """Review r45, 3: vLLM takes the CUDA context and the activation peak from inside the planned share; the rest is
    a margin. One wording for 3.4's readout and 3.5's."""
    note = lesson.usable_note(0.9)
    assert note.startswith("其余 10% 不做规划，留作余量") and "扣掉 CUDA 上下文和启动时实测的激活峰值" in note
    assert lesson.usable_note().startswith("其余部分不做规划")
    assert lesson.usable_note() in lesson.approximation_note("fp16")
    assert "其余留给 CUDA" not in lesson.approximation_note("int8")


def test_weights_do_not_fit_message_names_the_shortfall_and_only_narrower_dtypes():
    assert lesson.narrower_dtypes("fp16") == ["fp8", "int8", "int4"] and lesson.narrower_dtypes("int8") == ["int4"]
    assert lesson.narrower_dtypes("int4") == []
    # a budget whose usable part is 1 MiB short of LLaMA-7B's fp16 weights
    plan = lesson.plan_fit("LLaMA-7B", LLAMA7_FP16 - MIB, 10, usable=1)
    msg = lesson.weights_do_not_fit(plan)
    assert "还差 1.0 MiB" in msg and "fp8 或 int8 或 int4" in msg and "按显存使用比例 1，只有" in msg
    assert "连 LLaMA-7B 的 fp16 权重" in msg
    hypo = lesson.weights_do_not_fit(lesson.plan_fit(HYPO, GIB, 10))
    assert f"连{HYPO_LABEL}的 fp16 权重（130.39 GiB）" in hypo  # 70e9 x 2 B: no spaces around a Chinese label
    assert lesson.spaced("Llama-3-70B") == " Llama-3-70B " and lesson.spaced(HYPO_LABEL) == HYPO_LABEL
    int4 = lesson.plan_fit("LLaMA-7B", GIB, 10, weight_dtype="int4")
    msg4 = lesson.weights_do_not_fit(int4)
    assert "int8" not in msg4 and "把权重换成" not in msg4 and "或者把模型切分到多张卡上" in msg4


def test_render_fit_default_and_labels():
    view = lesson.render_fit("LLaMA-7B", "fp16", "fp16", T4, 15360, 0.9, 2048, 1)
    assert "最长上下文：<b>1,942</b>" in view.html and "<b>0</b> 条序列" in view.html and "还差" in view.html
    assert "× 0.9" in view.html and "vLLM" in view.html and "缩放系数" not in view.html
    bar, growth = view.figures
    assert T4 in bar.layout.title.text and view.result.budget_bytes == T4_USABLE
    whole = lesson.render_fit("LLaMA-7B", "fp16", "fp16", T4, 15360, 1, 2048, 1)
    assert "5,014" in whole.html and "<b>2</b> 条序列" in whole.html
    assert "自定义 15,000 MiB" in lesson.render_fit("LLaMA-7B", "fp16", "fp16", T4, 15000, 1, 2048, 1) \
        .figures[0].layout.title.text
    assert [p.x[0] for p in growth.data if p.mode == "markers" and p.marker.symbol == "x"] == [2048]
    int8 = lesson.render_fit("Llama-3-8B", "int8", "fp16", T4, 15360, 0.9, 2048, 1).html
    assert "缩放系数" in int8 and "lm_head" in int8 and "偏小的估计" in int8


def test_render_fit_flags_context_and_the_hypothetical():
    past = lesson.render_fit("LLaMA-7B", "fp16", "fp16", "A100 80 GB", 81920, 0.9, 4096, 1).html
    assert "⚠ S = 4,096 超过了 LLaMA-7B 发布时的上下文" in past
    assert "根本无法处理" in lesson.render_fit("GPT-2 (124M)", "fp16", "fp16", T4, 15360, 0.9, 2048, 1).html
    hypo = lesson.render_fit(HYPO, "fp16", "fp16", "H200 141 GB", 143_771, 1, 8192, 1)
    assert "70,000,000,000 个参数（假设的参数量）" in hypo.html and "⚠" not in hypo.html
    context_line = hypo.figures[1].data[4]  # no context line for a hypothetical model
    assert context_line.visible is False and list(context_line.x) == []
    assert any("假设的参数量" in t.name for t in hypo.figures[0].data)


@pytest.mark.parametrize("values, control", [
    (("LLaMA-65B", "fp16", "fp16", T4, 15360, 0.9, 2048, 1), "总显存（MiB）"),  # weights alone do not fit
    (("LLaMA-7B", "fp16", "fp16", T4, 14000, 0.9, 2048, 1), "总显存（MiB）"),  # 12.30 GiB usable < 12.55 GiB
    (("LLaMA-7B", "fp16", "fp16", T4, 0, 0.9, 2048, 1), "总显存（MiB）"),
    (("LLaMA-7B", "fp16", "fp16", T4, -3, 0.9, 2048, 1), "总显存（MiB）"),
    (("LLaMA-7B", "fp16", "fp16", T4, 15360, 0, 2048, 1), "显存使用比例"),
    (("LLaMA-7B", "fp16", "fp16", T4, 15360, 1.5, 2048, 1), "显存使用比例"),
    (("LLaMA-7B", "fp16", "fp16", T4, 15360, float("nan"), 2048, 1), "显存使用比例"),
    (("LLaMA-7B", "fp16", "fp16", "TPU", 15360, 0.9, 2048, 1), "GPU"),
    (("LLaMA-7B", "fp13", "fp16", T4, 15360, 0.9, 2048, 1), "权重数据类型"),
    (("LLaMA-7B", "fp16", "fp16", T4, 15360, 0.9, 10**9, 1), "序列长度 S"),
    (("LLaMA-7B", "fp16", "fp16", T4, 15360, 0.9, 2048, -1), "批次 B"),
])
def test_render_fit_bad_values(values, control):
    with pytest.raises(InputError) as err:
        lesson.render_fit(*values)
    assert err.value.control == control
    if values[0] == "LLaMA-65B":
        assert "放不下" in str(err.value) and "121.60 GiB" in str(err.value) and "还差" in str(err.value)


def test_fit_panel_card_fills_the_budget_and_bad_budget_greys_out():
    panel = lesson.fit_panel()
    assert panel.controls["budget_mib"].value == 15360 and panel.controls["usable"].value == 0.9
    assert panel.result.longest_context == 1942
    panel.set(gpu="H200 141 GB")
    assert panel.controls["budget_mib"].value == 143_771 and "H200 141 GB" in panel.views[0].figure.layout.title.text
    panel.set(model="LLaMA-65B")
    assert not panel.stale
    panel.set(gpu="A100 40 GB")  # 36 GiB usable cannot hold 121.6 GiB of fp16 weights
    assert panel.stale and "总显存（MiB）" in panel.message.value
    panel.set(weight_dtype="int4")  # 30.4 GiB of weights: fits again
    assert not panel.stale
    panel.set(usable=0)
    assert panel.stale and "显存使用比例" in panel.message.value
    panel.set(usable=1.0)
    assert not panel.stale and panel.result.budget_bytes == 40 * GIB
    panel.set(gpu=lesson.CUSTOM_GPU)
    assert panel.controls["budget_mib"].value == 40_960  # the box keeps its value for editing


def test_gpu_table_and_device_memory_text():
    table = lesson.gpu_table_html()
    assert table.count("<tr>") == 1 + len(GPU_PRESETS) and "143,771 MiB" in table and "约 14.75 GiB" in table
    assert lesson.device_memory("cpu") is None
    assert "不是 CUDA GPU" in lesson.device_memory_text(None, "cpu")
    t4 = GPU_PRESETS[T4]
    more = lesson.DeviceMemory("Tesla T4", 15360 * MIB + 2 * MIB, GIB, t4)  # ECC off, say: more than the table
    assert lesson.device_memory_text(more, "cuda").endswith("表里 nvidia-smi 的总量是 15,360 MiB。")
    assert "比它多 2.0 MiB" in _say(lesson.explain_device_memory(more))  # and no error
    less = lesson.DeviceMemory("Tesla T4", 15360 * MIB - 251 * MIB, GIB, t4)
    assert "比它少 251.0 MiB" in _say(lesson.explain_device_memory(less))
    assert lesson.explain_device_memory(None) == [] and lesson.explain_device_memory(
        lesson.DeviceMemory("X", GIB, GIB, None)) == []
    assert "表里没有这张卡" in lesson.device_memory_text(lesson.DeviceMemory("X", GIB, GIB, None), "cuda")


# -- 4. GQA twins -----------------------------------------------------------------------------------
def test_gqa_twins():
    chapter, small = lesson.gqa_twins()
    assert chapter.ratio == 8 and small.ratio == 4 and chapter.gqa.name == "Llama-3-70B"
    assert small.mha_bytes == 2 * 32 * 32 * 8192 * 128 * 2 and small.gqa_bytes == 2 * 32 * 8 * 8192 * 128 * 2
    assert chapter.beyond_context == () and [p.name for p in small.beyond_context] == ["Llama-2-7B"]  # 4096 < 8192
    assert lesson.twin_line(chapter).startswith(f"{HYPO_LABEL}：20.00 GiB；Llama-3-70B（8 个 KV 头）：2.50 GiB")
    assert lesson.twin_line(small).endswith("前者是后者的 4 倍（超过 Llama-2-7B 的上下文 4,096）")
    with pytest.raises(ValueError, match="^pairs"):
        lesson.gqa_twins(pairs=[("LLaMA-7B", "Llama-2-70B")])


# -- 5. real memory ---------------------------------------------------------------------------------
def test_measure_cache_allocation_on_cpu():
    check = lesson.measure_cache_allocation("GPT-2 (124M)", seq_len=16, batch_size=2, dtype="fp32", device="cpu")
    assert check.shape == (12, 2, 12, 16, 64)
    assert check.formula_bytes == check.measured_bytes == 2 * 12 * 2 * 12 * 16 * 64 * 4
    assert check.tensor_bytes == (12 * 2 * 12 * 16 * 64 * 4,) * 2 and check.allocator_bytes == check.formula_bytes
    assert "untyped_storage" in check.method and "并不是分配器的实测" in check.method
    assert check.released_bytes is None and not check.is_measurement
    assert lesson.allocation_lines(check)[2].startswith("公式 2,359,296 B，张量存储 2,359,296 B")
    with pytest.raises(ValueError, match="^model"):
        lesson.measure_cache_allocation("Mistral-7B", seq_len=4, device="cpu")


def test_allocator_rounding_to_512_bytes():
    check = lesson.AllocationCheck("cuda:0", "", (1,), "fp16", 0, 0, 0, (1, 513))
    assert check.allocator_bytes == 512 + 1024 and check.is_measurement
    assert "向上取整到 512 字节" in lesson.allocation_lines(check)[-1]


def test_device_memory_and_gpu_names():
    assert lesson.matching_gpu("Tesla T4").memory_mib == 15360
    assert lesson.matching_gpu("NVIDIA H200").name == "H200 141 GB"
    assert lesson.matching_gpu("NVIDIA H100 NVL") is None


def test_summary():
    cpu = lesson.measure_cache_allocation("GPT-2 (124M)", seq_len=4, device="cpu")
    text = lesson.summary_html(cpu)
    assert "每层 32.0 MiB，共 1.00 GiB" in text and "4.00 GiB" in text and "S = 1,024 时的输出相同，这是最可能的来历" in text
    assert "0.50 GB 上乘 4" in text and "恰好少了一半" in text and "约 7%" in text and "1/8" in text
    assert "PagedAttention" in text and "并不是分配器的实测" in text
    gpu = lesson.AllocationCheck("cuda:0", "", (1,), "fp16", 512, 512, 512, (256, 256))
    assert "结果见上一节按实测数字写出的说明" in lesson.summary_html(gpu)  # the measured result: only as a claim
    assert "一致" not in lesson.summary_html(gpu)


# -- plot builders, read back -----------------------------------------------------------------------
def test_iec_log_ticks():
    vals, texts = plots.iec_log_ticks(40 * 1024, 2 * GIB)  # one tick at or below each end, every factor of 32
    assert vals == [32 * 1024, MIB, 32 * MIB, GIB, 32 * GIB]
    assert texts == ["32 KiB", "1 MiB", "32 MiB", "1 GiB", "32 GiB"]


def test_cache_curves_figure_reads_back():
    curves = lesson.cache_curves(["LLaMA-7B", "Mistral-7B", "Llama-3.1-405B", HYPO], seq_lens=[1024, 8192])
    fig = plots.cache_curves_figure(curves, "Mistral-7B", 8192, 512 * MIB, 1, "fp16")
    lines = {t.legendgroup: t for t in fig.data if t.mode == "lines" and t.legendgroup}
    assert list(lines["LLaMA-7B"].y) == [512 * MIB, 4 * GIB]
    assert list(lines["Mistral-7B"].y) == [128 * MIB, 512 * MIB]
    assert lines["Llama-3.1-405B"].name == "Llama-3.1-405B：每个 token 504.0 KiB"
    assert lines[HYPO].name.startswith(HYPO_LABEL)
    assert fig.data[0].legendgroup == "Mistral-7B"  # the selected model is drawn first, under the others
    assert lines["Mistral-7B"].line.dash == "solid" and lines["Mistral-7B"].line.width == 5
    thin = [lines[n].line.dash for n in ("LLaMA-7B", "Llama-3.1-405B", HYPO)]
    assert len(set(thin)) == 3  # overlapping thin lines stay apart by their dashes
    diamonds = [t for t in fig.data if t.mode == "markers"]
    assert sorted(d.x[0] for d in diamonds) == [2048, 8192, 131072]  # none for the hypothetical
    assert not any((t.name or "").startswith("Mistral-7B 的") for t in fig.data)  # no weights line unless given


def test_calculator_draws_the_weights_its_cache_is_measured_against():
    """The selected model's FP16 weights are a level line: a batch or dtype change moves the curves against it."""
    level = lambda view: next(t for t in view.figures[0].data if "FP16 权重" in (t.name or ""))  # noqa: E731
    one = lesson.render_calculator("LLaMA-7B", 2048, 1, "fp16")
    line = level(one)
    assert list(line.y) == [LLAMA7_FP16] * 2 and line.name == "LLaMA-7B 的 FP16 权重：12.55 GiB"
    assert list(line.x) == [lesson.SEQ_OPTIONS[0], lesson.SEQ_OPTIONS[::2][-1]]  # across the whole axis
    # batch 4: the same line, the LLaMA-7B curve four times higher against it (it passes the weights 4x sooner)
    four = lesson.render_calculator("LLaMA-7B", 2048, 4, "fp16")
    assert list(level(four).y) == list(line.y)
    curve = lambda view: next(t for t in view.figures[0].data if t.legendgroup == "LLaMA-7B" and t.mode == "lines")  # noqa: E731
    assert [4 * y for y in curve(one).y] == list(curve(four).y)
    hypo = level(lesson.render_calculator(HYPO, 2048, 1, "fp16"))
    assert "假设的参数量" in hypo.name and hypo.y[0] == 140 * 10**9  # 70e9 parameters x 2 B


def test_layer_bytes_figure_reads_back():
    g = lesson.estimate_cache("Gemma-2-9B", 8192)
    windowed = [MODEL_PRESETS["Gemma-2-9B"].layer_is_windowed(i) for i in range(42)]
    fig = plots.layer_bytes_figure("Gemma-2-9B", g.layer_bytes, windowed, 8192)
    global_layers, window_layers = fig.data
    assert list(global_layers.x) == list(range(1, 42, 2)) and set(global_layers.y) == {64.0}  # MiB
    assert list(window_layers.x) == list(range(0, 42, 2)) and set(window_layers.y) == {32.0}


def test_fit_bar_figure_reads_back():
    from kvlab.language import using_language

    plan = lesson.plan_fit("LLaMA-7B", 15 * GIB, 2048, usable=1)
    fig = plots.fit_bar_figure(plan, "T4")
    assert [t.x[0] for t in fig.data] == [plan.weight_bytes / GIB, 1.0, (15 * GIB - plan.weight_bytes - GIB) / GIB, 0]
    assert sum(t.x[0] for t in fig.data) == pytest.approx(15)
    roomy = lesson.plan_fit("LLaMA-7B", 20 * GIB, 2048, usable=Fraction(3, 4))  # 15 GiB usable, 5 GiB held back
    fig = plots.fit_bar_figure(roomy, "T4")
    assert fig.data[3].name == "预留 25% 5.00 GiB" and fig.data[3].x[0] == 5
    assert sum(t.x[0] for t in fig.data) == pytest.approx(20)
    assert [(s.x0, s.visible) for s in fig.layout.shapes] == [(15, None), (20, True)]  # usable limit, total
    assert [s.visible for s in plots.fit_bar_figure(plan, "T4").layout.shapes] == [None, False]  # nothing held back
    over = lesson.plan_fit("LLaMA-7B", 13 * GIB, 2048, usable=1)  # 0.45 GiB of room for a 1 GiB cache
    fig = plots.fit_bar_figure(over, "T4")
    assert fig.data[2].name.startswith("放不下") and sum(t.x[0] for t in fig.data) == pytest.approx(
        (over.weight_bytes + GIB) / GIB)
    assert "还差" in fig.layout.title.text and len(fig.data) == 3  # nothing held back
    # 0.9 of a T4: 52.5 MiB of the 1 GiB cache is missing, inside the 1.5 GiB held back; the rest is drawn
    t4 = lesson.plan_fit("LLaMA-7B", 15360 * MIB, 2048)
    fig = plots.fit_bar_figure(t4, "T4")
    missing = GIB - (T4_USABLE - LLAMA7_FP16)
    assert [t.x[0] * GIB for t in fig.data][2:] == pytest.approx([missing, 15360 * MIB - T4_USABLE - missing])
    assert fig.data[3].name == "预留 10%（1.50 GiB），其中 52.5 MiB 被放不下的缓存占用"  # the whole band, not 1.45 GiB
    with using_language("en"):
        assert plots.fit_bar_figure(t4, "T4").data[3].name == "Held back 10% (1.50 GiB), 52.5 MiB of it taken by " \
                                                              "the overflow"
    assert sum(t.x[0] for t in fig.data) == pytest.approx(15)


def test_context_curve_keeps_the_points_where_the_figure_bends_or_ends():
    t4 = lesson.plan_fit("LLaMA-7B", 15360 * MIB, 2048)  # room 0.95 GiB: 1,942 tokens of 512 KiB
    curve = lesson.context_curve(t4)
    assert curve.seq_lens[0] == 0 and curve.cache_bytes[0] == 0
    assert {1942, 2048} <= set(curve.seq_lens) and curve.seq_lens[-1] == -(-2048 * 23 // 20)  # 15 % past S
    assert all(c == s * 512 * KIB for s, c in zip(curve.seq_lens, curve.cache_bytes))
    # the cache passes the 12.55 GiB of weights at 25,706 tokens: 25,705 x 512 KiB <= 13,476,831,232 B < 25,706 x ...
    assert curve.overtakes_weights == 25_706 and curve.context_length == 2048
    assert 25_705 * 512 * KIB <= LLAMA7_FP16 < 25_706 * 512 * KIB
    mistral = lesson.context_curve(lesson.plan_fit("Mistral-7B", 80 * GIB, 8192, 4))
    assert 4096 in mistral.seq_lens and mistral.seq_lens[-1] >= 2 * 4096  # the bend and as much again after it
    assert mistral.overtakes_weights is None and len(set(mistral.cache_bytes[-5:])) == 1  # capped at the window
    assert lesson.context_curve(lesson.plan_fit(HYPO, 200 * GIB, 1000)).context_length is None


def test_fit_context_figure_reads_back():
    t4 = lesson.plan_fit("LLaMA-7B", 15360 * MIB, 2048)
    fig = plots.fit_context_figure(t4, lesson.context_curve(t4))
    fits, over, room, weights, context, runs_out, passes, now = fig.data
    at = list(fits.x).index(2048)
    room_bytes = T4_USABLE - LLAMA7_FP16  # 971.5 MiB
    assert fits.y[at] * GIB == room_bytes and (fits.y[at] + over.y[at]) * GIB == GIB  # the 1 GiB cache, red past it
    assert over.y[list(fits.x).index(1942)] == 0 and over.name == "放不下的 KV Cache"
    assert room.y[0] * GIB == room_bytes and room.name.startswith("留给缓存的空间 971.5 MiB")
    assert list(context.x) == [2048, 2048] and context.visible
    assert list(runs_out.x) == [1942] and runs_out.y[0] * GIB == room_bytes and "1,942 时填满" in runs_out.name
    # the cache passes the 12.55 GiB of weights only at 25,706 tokens, far off this figure: no level, no ●
    assert weights.visible is False and list(weights.x) == [] and list(passes.x) == []
    assert passes.name == "S = 25,706 起缓存比权重大（在图的右边之外）"
    assert list(now.x) == [2048] and now.y[0] == 1 and "放不下" in now.name
    assert fig.layout.xaxis.range[1] == fits.x[-1] and 1 < fig.layout.yaxis.range[1] < 2  # zoomed on the cache
    # an H200: the cache passes the weights on the figure, long before the room runs out
    h200 = lesson.plan_fit("LLaMA-7B", GPU_PRESETS["H200 141 GB"].memory_bytes, 2048)
    fig = plots.fit_context_figure(h200, lesson.context_curve(h200))
    weights, runs_out, passes, now = fig.data[3], *fig.data[5:]
    assert weights.visible and weights.y[0] * GIB == LLAMA7_FP16
    assert list(passes.x) == [25_706] and passes.y[0] * GIB == LLAMA7_FP16
    assert list(runs_out.x) == [h200.longest_context] and h200.longest_context > 200_000 and "放得下" in now.name
    # a sliding window on a big card: capped, no point where it fills the room, never as large as the weights
    mistral = lesson.plan_fit("Mistral-7B", 80 * GIB, 8192, 4)
    fig = plots.fit_context_figure(mistral, lesson.context_curve(mistral))
    assert list(fig.data[5].x) == [] and "缓存封顶" in fig.data[5].name and list(fig.data[6].x) == []
    # a hypothetical model has no released context line
    hypo = lesson.plan_fit(HYPO, 200 * GIB, 1000)
    assert plots.fit_context_figure(hypo, lesson.context_curve(hypo)).data[4].visible is False
    # every figure has the same eight traces, so a figure redrawn in place never keeps a stale mark
    assert len(fig.data) == len(plots.fit_context_figure(t4, lesson.context_curve(t4)).data) == 8


@pytest.mark.parametrize("change", [dict(model="Llama-2-7B"), dict(weight_dtype="int8"), dict(cache_dtype="int8"),
                                    dict(gpu="A100 40 GB"), dict(budget_mib=20000), dict(usable=1.0),
                                    dict(seq_len=1024), dict(batch_size=2)], ids=lambda c: next(iter(c)))
def test_every_fit_control_moves_the_growth_figure(change):
    """The fit panel's second figure follows each of its eight controls (the first is checked by the browser)."""
    panel = lesson.fit_panel()
    before = panel.views[1].figure.to_plotly_json()["data"]
    panel.set(**change)
    assert not panel.stale and panel.views[1].figure.to_plotly_json()["data"] != before

# -- claims about what was measured (kvlab.claims) -------------------------------------------------------------
def _say(claims):
    return "\n".join(lesson.ZH.say(c) for c in claims)


ALLOCATION_SHAPES = {  # (formula, measured, released, K's and V's bytes): what a device may report
    "GPU, exact": (2**25, 2**25, 2**25, (2**24, 2**24)),
    "GPU, rounded to 512 B": (514, 1536, 1536, (1, 513)),
    "GPU, another tensor at the same time (busy)": (2**25, 2**25 + 2 * MIB, 2**25, (2**24, 2**24)),
    "GPU, not all released": (2**25, 2**25, 2**25 - 512, (2**24, 2**24)),
}


def _allocation_claims():
    cpu = lesson.measure_cache_allocation("GPT-2 (124M)", seq_len=4, device="cpu")
    yield "CPU (idle)", lesson.explain_allocation(cpu)
    for name, (formula, measured, released, sizes) in ALLOCATION_SHAPES.items():
        yield name, lesson.explain_allocation(lesson.AllocationCheck("cuda:0", "", (1,), "fp16", formula, measured,
                                                                     released, sizes))


def _device_claims():
    t4 = GPU_PRESETS[T4]
    for name, total in {"less": 15360 * MIB - 251 * MIB, "more": 15360 * MIB + 2 * MIB, "equal": 15360 * MIB}.items():
        yield name, lesson.explain_device_memory(lesson.DeviceMemory("Tesla T4", total, GIB, t4))
    h200 = GPU_PRESETS["H200 141 GB"]
    yield "H200", lesson.explain_device_memory(lesson.DeviceMemory("NVIDIA H200", 150_121_545_728, GIB, h200))


def test_every_template_shows_exactly_what_its_rule_shows():
    for chooser in lesson.CHOOSERS:
        for rule in chooser.rules:
            assert lesson.ZH.placeholders(rule.key) == set(rule.shows), rule.key
    assert set(lesson.ZH.templates) == {k for c in lesson.CHOOSERS for k in c.keys}


def test_allocation_claims_by_hand():
    said = dict(_allocation_claims())
    assert [c.key for c in said["CPU (idle)"]] == ["memory_estimate.allocation.storage"]
    assert "并不是分配器的实测" in _say(said["CPU (idle)"]) and "147,456 B" in _say(said["CPU (idle)"])
    assert [c.key for c in said["GPU, exact"]] == ["memory_estimate.allocation.exact"]
    assert "相差 33,554,432 B，与公式的 33,554,432 B 一个字节都不差" in _say(said["GPU, exact"])
    assert "向上取整到 512 字节的倍数之后的 1,536 B" in _say(said["GPU, rounded to 512 B"])
    for name in ("GPU, another tensor at the same time (busy)", "GPU, not all released"):
        assert [c.key for c in said[name]] == ["memory_estimate.allocation.differs"] and "重新运行" in _say(said[name])


def test_every_key_is_reached_and_every_claim_checks():
    from kvlab import claims as claims_mod

    shapes = [*_allocation_claims(), *_device_claims()]
    unread = {"total": claims_mod.number(16 * GIB, 0, "B"), "table": claims_mod.number(15360, 0, "MiB"),
              "diff": claims_mod.number(3, 1, "MiB")}  # a difference printed that the totals do not give
    shapes.append(("a difference that does not add up", [lesson.DEVICE_MEMORY.choose(unread)]))
    reached = {c.key for _, said in shapes for c in said}
    assert reached == {k for c in lesson.CHOOSERS for k in c.keys}
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data",
                                                       "data": {"text/plain": _say(said)},
                                                       "metadata": {"kvlab_claims": [c.record() for c in said]}}]}
                    for _, said in shapes]}
    assert len(claims_mod.recorded(nb)) == len(shapes) and claims_mod.check_recorded(nb, lesson.CHOOSERS) == []
    idle = dict(shapes)
    for name in ("CPU (idle)", "GPU, exact", "H200"):  # an idle run of either device says something substantive
        assert idle[name]
        assert all((lesson.ALLOCATION if "allocation" in c.key else lesson.DEVICE_MEMORY).rule(c.key).substantive
                   for c in idle[name]), name


# -- the same texts in English (issue 34): every text, figure and refusal in English says the same numbers ---------
CJK = __import__("re").compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
NUMBERS = __import__("re").compile(r"\d+(?:[.,]\d+)*")


def _both(make):
    """What ``make()`` shows in Chinese and in English."""
    from kvlab.language import using_language

    with using_language("en"):
        en = make()
    return make(), en


def _texts():
    """Every text the chapter's code shows, as a callable (tables, lines, readouts, notes, the summary)."""
    cpu = lambda: lesson.measure_cache_allocation("GPT-2 (124M)", seq_len=4, device="cpu")  # noqa: E731
    gpu = lesson.AllocationCheck("cuda:0", "m", (1,), "fp16", 514, 1536, 1536, (1, 513))
    t4 = GPU_PRESETS[T4]
    yield "figures", lambda: lesson.chapter_figures_html(lesson.chapter_figures())
    yield "variants", lambda: lesson.variants_html(lesson.halving_variants())
    yield "70B", lambda: lesson.seventy_b_text(lesson.seventy_b_reading())
    yield "twins", lambda: "\n".join(lesson.twin_line(t) for t in lesson.gqa_twins())
    yield "comparisons", lambda: "\n".join(lesson.comparison_lines())
    yield "long context", lambda: "\n".join(lesson.long_context_line(r) for r in lesson.long_context_rows())
    yield "GPU table", lesson.gpu_table_html
    yield "no GPU", lambda: lesson.device_memory_text(None, "cpu")
    yield "T4", lambda: lesson.device_memory_text(lesson.DeviceMemory("Tesla T4", 15360 * MIB, GIB, t4), "cuda:0")
    yield "unknown card", lambda: lesson.device_memory_text(lesson.DeviceMemory("x", 10**10, GIB, None), "cuda:0")
    yield "T4 plans", lambda: "\n".join(map(lesson.plan_line, lesson.t4_plans()))
    yield "int8 gain", lambda: lesson.int8_gain_line(*lesson.t4_plans()[::2])
    yield "CPU allocation", lambda: "\n".join(lesson.allocation_lines(cpu()))
    yield "GPU allocation", lambda: "\n".join(lesson.allocation_lines(gpu))
    yield "summary CPU", lambda: lesson.summary_html(cpu())
    yield "summary GPU", lambda: lesson.summary_html(gpu)
    yield "notes", lambda: lesson.usable_note(0.85) + lesson.approximation_note("int4")
    for name in MODEL_PRESETS:
        yield name, lambda name=name: "\n".join(
            [lesson.render_calculator(name, S, B, dt).html for S, B, dt in ((2048, 1, "fp16"), (100000, 3, "int8"))]
            + [lesson.render_fit(name, "int4", "fp8", lesson.CUSTOM_GPU, 2**21, 0.9, 131072, 2).html])


def test_every_text_in_english_holds_no_chinese_and_the_same_numbers():
    for name, make in _texts():
        zh, en = _both(make)
        assert CJK.search(zh) and not CJK.search(en), (name, en)
        zh, en = (t.replace("&#x27;", "'").replace("&quot;", '"') for t in (zh, en))
        assert sorted(set(NUMBERS.findall(zh))) == sorted(set(NUMBERS.findall(en))), (name, zh, en)


def test_english_texts_say_it_in_english():
    from kvlab.language import using_language

    with using_language("en"):
        assert lesson.label(lesson.USABLE_LABEL) == "Usable fraction" and lesson.shown(HYPO).startswith("Hypothetical")
        assert dict(lesson.model_options())["Hypothetical 70B (64 KV heads)"] == HYPO
        assert lesson.join_names(["A", "B", "C"]) == "A, B and C"
        cpu = lesson.measure_cache_allocation("GPT-2 (124M)", seq_len=4, device="cpu")
        assert "of that of the hypothetical 70B (64 KV heads);" in lesson.summary_html(cpu)  # lower case in a sentence
        assert lesson.usable_note(Fraction(9, 10)).startswith("The remaining 10% is left out of the plan:")
        assert "5.00 GiB, less than the 16 GB the original names" in lesson.seventy_b_text(lesson.seventy_b_reading())
        plans = lesson.t4_plans()
        assert lesson.plan_line(plans[1]).endswith("the weights alone do not fit, 1.46 GiB short")
    assert lesson.label(lesson.USABLE_LABEL) == lesson.USABLE_LABEL == "显存使用比例"  # Chinese by default


def _figure_words(fig) -> list[str]:
    d = fig.to_plotly_json()
    layout = d["layout"]
    words = [layout["title"]["text"], *(a.get("text", "") for a in layout.get("annotations", ()))]
    words += [str(layout[ax].get("title", {}).get("text", "")) for ax in ("xaxis", "yaxis") if ax in layout]
    words += [str(t.get(k) or "") for t in d["data"] for k in ("name", "hovertemplate")]
    return words


@pytest.mark.parametrize("model", ["LLaMA-7B", HYPO, "Gemma-2-9B", "Mistral-7B", "GPT-2 (124M)"])
def test_panels_and_figures_in_english(model):
    def views():
        calc = lesson.render_calculator(model, 8192, 2, "fp16")
        fits = [lesson.render_fit(model, "int4", "fp16", gpu, mib, 0.9, S, 1)
                for gpu, mib, S in (("H200 141 GB", 143771, 4096), (lesson.CUSTOM_GPU, 2**21, 10**6),
                                    (lesson.CUSTOM_GPU, 2**21, 2**22))]
        return [w for v in (calc, *fits) for f in v.figures for w in _figure_words(f)]

    zh, en = _both(views)
    assert len(zh) == len(en) and not any(CJK.search(w) for w in en), [w for w in en if CJK.search(w)]
    for a, b in zip(zh, en):
        assert sorted(NUMBERS.findall(a)) == sorted(NUMBERS.findall(b)), (a, b)


def test_controls_and_refusals_in_english():
    from kvlab.language import using_language

    with using_language("en"):
        calc, fit = lesson.calculator_panel(), lesson.fit_panel()
        shown = [c.description for p in (calc, fit) for c in p.controls.values()]
        assert "Sequence length S" in shown and "Usable fraction" in shown and not any(map(CJK.search, shown))
        assert fit.controls["gpu"].options[-1] == ("Custom", lesson.CUSTOM_GPU)
        assert ("Hypothetical 70B (64 KV heads)", HYPO) in calc.controls["model"].options
        with pytest.raises(InputError, match="^GPU memory \\(MiB\\)") as refused:
            lesson.render_fit("Llama-3-70B", "fp16", "fp16", T4, 15360, 0.9, 2048, 1)
        assert not CJK.search(str(refused.value)) and "split the model across several cards" in str(refused.value)
        with pytest.raises(InputError, match="^Models on the curves"):
            lesson.render_calculator("LLaMA-7B", 1024, 1, "fp16", "LLaMA-7B")
