"""The 动手练习 of every chapter: each checker accepts its reference solution and rejects known-wrong answers with
the specific Chinese feedback a learner would read; untouched stubs report 「还没有完成」 and never raise; the
generator writes, replaces and keeps the notebooks' exercise sections; the shared checker's pieces on their own.

Every exercise is run the way a learner runs it: the chapter's setup cell, then the stub cell (or a filled-in
version of it), then the check cell, all in one namespace. Expected numbers are worked out by hand below."""
from __future__ import annotations

import ast
import html
import json
import shutil
from pathlib import Path

import pytest
import torch

from kvlab import MODEL_PRESETS
from kvlab.exercises import CHAPTER_MODULES, ch01, ch02, ch03, ch04, ch05, chapter_module, checker, notebook
from kvlab.exercises.solutions import SOLUTIONS
from kvlab.generation import GenerationResult, PassRecord

ROOT = Path(__file__).resolve().parent.parent
MODULES = [chapter_module(name) for name in CHAPTER_MODULES]
EXERCISES = [ex for m in MODULES for ex in m.EXERCISES]
GIB, MIB = 2**30, 2**20


@pytest.fixture(autouse=True)
def fresh_attempts(monkeypatch):
    monkeypatch.delenv(checker.TEACHER_ENV, raising=False)  # a learner's kernel unless a test says otherwise
    checker.reset_attempts()
    yield
    checker.reset_attempts()


@pytest.fixture(autouse=True)
def fixed_machine(monkeypatch):
    """3.3's roofs as if measured: 10 GB/s and 100 GFLOP/s, a ridge of exactly 10 FLOP per byte."""
    monkeypatch.setattr(ch03, "this_machine", lambda roofs=None, device=None: ch03.Machine(10e9, 100e9, "test"))


def module_of(ex):
    return chapter_module(ex.chapter)


def run_cells(ex, source: str, **extra) -> checker.Feedback:
    """The setup cell, ``source`` in place of the stub cell, then the check cell, as a learner would run them."""
    ns = {"display": lambda *a, **k: None, "roofs": None, **extra}  # roofs: what the page measured (3.3)
    exec(module_of(ex).SETUP, ns)
    exec(source, ns)
    return eval(ex.check, ns)


def replace(source: str, old: str, new: str) -> str:
    assert old in source, old
    return source.replace(old, new)


# -- every exercise: the stub, the solution -------------------------------------------------------------
@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.key)
def test_untouched_stub_reports_not_done(ex):
    fb = run_cells(ex, ex.stub)
    assert fb.status == checker.TODO and checker.NOT_DONE in fb.text
    assert checker.ATTEMPTS[ex.key] == 0  # not counted as a wrong attempt


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.key)
def test_reference_solution_passes(ex):
    fb = run_cells(ex, SOLUTIONS[ex.key])
    assert fb.status == checker.RIGHT, fb.text
    assert fb.text.startswith(ex.title)


def test_every_exercise_has_a_solution_and_hints():
    assert set(SOLUTIONS) == {ex.key for ex in EXERCISES}
    assert all(len(ex.hints) >= 1 for ex in EXERCISES)
    assert all(len(m.EXERCISES) >= 2 for m in MODULES)  # 2-4 per chapter (the issue)


def _functions(source: str):
    return [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)]


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.key)
def test_cells_are_wiring_only(ex):
    """No raise in any cell the notebook holds; functions short (a stub's body is the learner's to write)."""
    for source in (module_of(ex).SETUP, ex.stub, ex.check, SOLUTIONS[ex.key]):
        tree = ast.parse(source)
        assert not any(isinstance(n, ast.Raise) for n in ast.walk(tree)), source
        assert all(f.end_lineno - f.lineno + 1 <= 15 for f in _functions(source)), source
    assert len(ex.check.splitlines()) == 1


# -- 3.1 --------------------------------------------------------------------------------------------------
STEP = SOLUTIONS["ch01.cached_step"]
ROPE_LINE = "q, k_new = rope(q, pos), rope(k_new, pos)"


@pytest.mark.parametrize("source, expected", [
    (replace(STEP, ROPE_LINE, "q, k_new = rope(q, pos), rope(k_new, 0)"), "漏了位置偏移、按位置 0 旋转了"),
    (replace(STEP, ROPE_LINE, "q, k_new = rope(q, 0), k_new"), "写进缓存的 K 没有按位置 pos = 5 旋转"),
    (replace(STEP, ROPE_LINE, "q, k_new = q, rope(k_new, pos)"), "Q 没有按位置 pos = 5 旋转"),
    (replace(replace(STEP, "repeat_kv(k_cache[:, :, :pos + 1], n_rep)", "k_cache[:, :, :pos + 1]"),
             "repeat_kv(v_cache[:, :, :pos + 1], n_rep)", "v_cache[:, :, :pos + 1]"), "先用 repeat_kv 把 K/V 扩成"),
    (replace(replace(STEP, "repeat_kv(k_cache[:, :, :pos + 1], n_rep)",
                     "k_cache[:, :, :pos + 1].repeat(1, n_rep, 1, 1)"),
             "repeat_kv(v_cache[:, :, :pos + 1], n_rep)", "v_cache[:, :, :pos + 1].repeat(1, n_rep, 1, 1)"),
     "查询头 h 应当读第 h // n_rep 个 KV 头"),
    (STEP.replace(":pos + 1], n_rep)", ":], n_rep)"), "包括还没有填的位置"),
    (STEP.replace(":pos + 1], n_rep)", ":pos], n_rep)"), "漏掉了新 token 自己"),
    (replace(STEP, "k_cache[:, :, pos:pos + 1] = k_new", "k_cache = torch.cat([k_cache[:, :, :pos], k_new], 2)"),
     "新 token 的 K 没有写进缓存"),
], ids=["k at position 0", "q and k unrotated", "q unrotated", "no GQA repeat", "repeat instead of repeat_kv",
        "whole cache read", "new token left out", "not written"])
def test_cached_step_rejects_known_mistakes(source, expected):
    fb = run_cells(ch01.CACHED_STEP, source)
    assert fb.status == checker.WRONG and expected in fb.text, fb.text


def test_cached_step_reports_the_case_and_the_first_diverging_step():
    fb = run_cells(ch01.CACHED_STEP, replace(STEP, ROPE_LINE, "q, k_new = rope(q, pos), rope(k_new, 0)"))
    # the demo model's first case: the prefill (step 1) is the model's own, the first decode step is wrong
    assert "用例 1（演示模型" in fb.message and "第 2 步开始与无缓存的参考不同" in fb.message
    assert any(d.startswith("无缓存（参考）生成：") for d in fb.details)
    assert any(d.startswith("用你的函数生成：") for d in fb.details)


def test_cached_step_layouts_find_what_one_layout_hides():
    """``.repeat`` in place of ``repeat_kv`` gives the same heads with MHA and MQA: only GQA with 2+ KV heads
    catches it, and the checker runs both GQA layouts."""
    tiled = replace(replace(STEP, "repeat_kv(k_cache[:, :, :pos + 1], n_rep)",
                            "k_cache[:, :, :pos + 1].repeat(1, n_rep, 1, 1)"),
                    "repeat_kv(v_cache[:, :, :pos + 1], n_rep)", "v_cache[:, :, :pos + 1].repeat(1, n_rep, 1, 1)")
    ns = {}
    exec(ch01.SETUP, ns)
    exec(tiled, ns)
    fn = ns["cached_attention_step"]
    by_model = {c.model: ch01.first_divergence(c, fn) for c in ch01.LOOP_CASES}
    assert by_model["mha"] is None and by_model["mqa"] is None
    assert by_model["demo"] is not None and by_model["gqa"] is not None and by_model["gqa"].step == 2


def test_cached_step_restores_the_model_after_a_failing_run():
    fn = lambda q, *rest: q[..., :1]  # noqa: E731  (the wrong shape)
    fb = run_cells(ch01.CACHED_STEP, "cached_attention_step = fn", fn=fn)
    assert fb.status == checker.WRONG and "应为 [B, H, 1, D]" in fb.text
    model = ch01.random_model("mha")
    assert all("forward" not in vars(block.attn) for block in model.layers)


WORK = SOLUTIONS["ch01.work"]


def test_work_counts_against_hand_arithmetic():
    # p = 6, n = 10: passes see t = 6 .. 15
    assert ch01.traced_work(6, 10) == (sum(range(6, 16)), 6 + 9, sum(t * t for t in range(6, 16)),
                                       36 + sum(range(7, 16)))
    assert ch01.traced_work(6, 10) == (105, 15, 1185, 135)
    assert ch01.traced_work(1, 1) == (1, 1, 1, 1)  # one token: the prefill only


@pytest.mark.parametrize("source, expected", [
    (replace(replace(WORK, "range(p, p + n)", "range(p, p + n + 1)"), "p + (n - 1)", "p + n"), "你多算了一次前向计算"),
    (replace(replace(WORK, "sum(t * t for t in lengths)", "sum(t * (t + 1) // 2 for t in lengths)"),
             "p * p + sum", "p * (p + 1) // 2 + sum"), "你只数了因果掩码下可见的分数"),
    (replace(WORK, "kv_with_cache = p + (n - 1)", "kv_with_cache = n"), "有缓存时投影 K/V 的 token 数：trace 里数出 4，你的预测 3"),
], ids=["n passes", "masked half", "prompt forgotten"])
def test_work_rejects_known_mistakes(source, expected):
    fb = run_cells(ch01.WORK, source)
    assert fb.status == checker.WRONG and expected in fb.text, fb.text


def test_work_reports_expected_and_got_for_the_failing_case():
    fb = run_cells(ch01.WORK, replace(WORK, "kv_with_cache = p + (n - 1)", "kv_with_cache = p + n"))
    assert fb.message == "用例 p = 1，n = 1：和 trace 对不上。"
    assert fb.details[0] == "有缓存时投影 K/V 的 token 数：trace 里数出 1，你的预测 2"  # then the likely cause


# -- 3.2 --------------------------------------------------------------------------------------------------
def size_answer(value) -> str:
    return f"answer = {value!r}"


@pytest.mark.parametrize("value", [4 * GIB, "4 GiB", "4GiB", "4096 MiB", "4,294,967,296 B", "4294967296", "４ GiB",
                                   "4.00 GiB", 4294967296.0])
def test_cache_size_accepts_bytes_and_binary_units(value):
    # Llama-3-8B: 2 (K, V) x 32 layers x B 4 x 8 KV heads x S 8192 x D 128 x 2 bytes = 4 GiB
    assert run_cells(ch02.CACHE_SIZE, size_answer(value)).status == checker.RIGHT


@pytest.mark.parametrize("value, expected", [
    ("4 GB", "数值对了，单位错了：1 GB = 1,000,000,000 字节"),
    ("4.29 GB", "大约对，但题目要精确值"),
    ("16 GiB", "你用的是查询头数 32"),
    (2 * GIB, "K 和 V 各存一份"),
    ("1 GiB", "少乘了批次 B = 4"),
    ("8 GiB", "多了一倍"),
    (4, "不带单位的数按字节算"),
    ("4 GiBs", "不认识单位「GiBs」"),
    ("about 4 GiB", "读不懂「about 4 GiB」"),
    ("3.99 GiB", "很接近，但不精确"),
])
def test_cache_size_rejects_known_mistakes(value, expected):
    fb = run_cells(ch02.CACHE_SIZE, size_answer(value))
    assert fb.status == checker.WRONG and expected in fb.text, fb.text


def test_padding_by_hand():
    # 4 x 1800 slots allocated, 2955 used: 4245 slots of 2 x 32 x 8 x 128 x 2 = 131,072 bytes
    assert ch02.padding_expected()[2] == 4245 * 131_072
    assert run_cells(ch02.PADDING, SOLUTIONS["ch02.padding"]).right


@pytest.mark.parametrize("value, expected", [
    (2955 * 131_072, "真正存了 token 的字节数"),
    (7200 * 131_072, "整个批次分配的字节数"),
    (4245 * 131_072 * 4, "查询头数 32"),
    (4245 * 65_536, "少了一半"),
])
def test_padding_rejects_known_mistakes(value, expected):
    fb = run_cells(ch02.PADDING, f"padding = {value}")
    assert fb.status == checker.WRONG and expected in fb.text, fb.text


# -- 3.3 --------------------------------------------------------------------------------------------------
RIDGE = SOLUTIONS["ch03.batch_ridge"]
# By hand for ch03.CONFIG (d 512, 8 layers, 8 heads of 64, d_ff 1408, vocabulary 4096, fp32), a decode step of B
# sequences with C cached tokens: per sequence 51,380,224 FLOPs (projections, MLP) + 4,194,304
# (LM head) + 16,384 (C + 1) (attention); bytes: weights 111,183,872 once, then per sequence 32,768 (C + 2) of K/V
# (read C + 1, write 1) + 2,048 (its embedding row).
# C = 100: 57,229,312 FLOPs and 3,344,384 bytes per sequence; ridge 10: B >= 1,111,838,720 / 23,785,472 = 46.7 -> 47;
#          weights only: B >= 1,111,838,720 / (57,229,312 - 20,480) = 19.4 -> 20. Ridge 2: 5 (weights only: 4).
# C = 1000: 71,974,912 FLOPs and 32,835,584 bytes per sequence: the intensity tends to 2.19 as B grows, so ridge 10
#          is never reached (0); ridge 2: B >= 222,367,744 / 6,303,744 = 35.3 -> 36.
REAL_THIS_MACHINE = ch03.this_machine  # before the fixture replaces it


class Code(str):
    """An answer written as code in the cell (``float('inf')``), not as a literal."""

    def __repr__(self) -> str:
        return str(self)


def ridge_cells(ridge=None, b_short=None, b_long=None, machine="ch03.this_machine(roofs)") -> checker.Feedback:
    src = f"machine = {machine}\nridge = {ridge!r}\nb_short = {b_short!r}\nb_long = {b_long!r}"
    return run_cells(ch03.BATCH_RIDGE, src)


def test_batch_ridge_against_hand_arithmetic():
    assert ch03.smallest_batch(10, 100).smallest == 47 and ch03.smallest_batch(10, 1000).smallest == 0
    assert ch03.smallest_batch(2, 100).smallest == 5 and ch03.smallest_batch(2, 1000).smallest == 36
    assert round(ch03.smallest_batch(10, 1000).limit, 2) == 2.19 and ch03.weights_only_batch(10, 100) == 20
    assert ridge_cells(10.0, 47, 0).right and ridge_cells("10", "47", 0.0).right


@pytest.mark.parametrize("answers, expected", [
    ((0.1, 47, 0), "倒过来了：转折点 = 算力 ÷ 带宽"),
    ((1e-8, 47, 0), "单位不一致"),
    ((10, 46, 0), "B = 46 时算术强度"),
    ((10, 48, 0), "B = 47 就已经够了"),
    ((10, 20, 0), "字节数只算了权重"),
    ((10, 0, 0), "有 B 能做到"),
    ((10, 47, 36), "B 再大也做不到：B 无限大时，算术强度趋近于 2.19"),
    ((10, 47.5, 0), "要写一个整数 B"),
    ((10, "many", 0), "「many」不是一个数"),
    ((10, 47, Code("float('inf')")), "需要一个有限的数"),
])
def test_batch_ridge_rejects_known_mistakes(answers, expected):
    fb = ridge_cells(*answers)
    assert fb.status == checker.WRONG and expected in fb.text, fb.text
    assert "：：" not in fb.text and "b_long：b_long" not in fb.text


def test_batch_ridge_on_a_machine_where_batching_crosses_at_long_contexts():
    """Ridge 2 (20 GFLOP/s over 10 GB/s): 1000 cached tokens no longer rule batching out, and the message says so."""
    machine = "ch03.Machine(10e9, 20e9, 'test')"
    fb = ridge_cells(2.0, 5, 36, machine=machine)
    assert fb.right and "缓存里有 1000 个 token 时，B = 36 起一步解码就算力受限" in fb.text, fb.text
    assert "B 再大也越不过" not in fb.text
    assert "有 B 能做到" in ridge_cells(2.0, 5, 0, machine=machine).text
    assert "两个上下文长度弄反了" in ridge_cells(2.0, 36, 36, machine=machine).text
    on_ten = ridge_cells(10.0, 47, 0)
    assert "缓存里有 1000 个 token 时，B 再大也越不过转折点" in on_ten.text and "B = 47 起" in on_ten.text


def test_batch_ridge_partly_filled_is_not_done_yet():
    fb = ridge_cells(10.0, 47)
    assert fb.status == checker.TODO and "b_long" in fb.text


def test_this_machine_takes_the_roofs_the_page_measured(monkeypatch):
    from kvlab.lessons import prefill_decode as lesson
    from kvlab.measure import Rate

    roofs = lesson.Roofs(Rate(25e9, 24e9, [25e9], "x"), Rate(75e9, 70e9, [75e9], "y"), "cpu（测试）", 1)
    machine = REAL_THIS_MACHINE(roofs)
    assert (machine.bandwidth, machine.flops) == (25e9, 75e9) and "本页上面测出的" in str(machine)


@pytest.mark.parametrize("roofs", [
    "not roofs", ch03.Machine(25e9, 75e9, "a look-alike"),  # not kvlab's result type
    "nan", "zero", "absurd",  # kvlab's type with numbers no machine has
])
def test_this_machine_measures_again_rather_than_trust_what_it_is_given(monkeypatch, roofs):
    from kvlab.lessons import prefill_decode as lesson
    from kvlab.measure import Rate

    fake = {"nan": float("nan"), "zero": 0.0, "absurd": 1e30}
    if roofs in fake:
        roofs = lesson.Roofs(Rate(fake[roofs], 1, [1], "x"), Rate(75e9, 70e9, [75e9], "y"), "cpu（测试）", 1)
    measured = lesson.Roofs(Rate(11e9, 10e9, [11e9], "x"), Rate(33e9, 30e9, [33e9], "y"), "cpu（现测）", 1)
    monkeypatch.setattr(ch03, "measure_roofs", lambda device: measured)
    machine = REAL_THIS_MACHINE(roofs)
    assert (machine.bandwidth, machine.flops) == (11e9, 33e9) and "没有采用" in str(machine)


def test_batch_ridge_config_is_the_pages_big_model():
    from kvlab.lessons import prefill_decode as lesson

    assert ch03.CONFIG == lesson.roofline_model().config
    assert "29,893,120 个参数，FP32 权重 114.0 MiB" in ch03.BATCH_RIDGE.task  # 4 x 29,893,120 = 119,572,480 bytes


def fake_run() -> GenerationResult:
    """A trace with known times: 3 prefill chunks (2, 3, 1 ms), 4 decode steps (0.5, 0.7, 0.6, 10 ms)."""
    ms = {"prefill": [2.0, 3.0, 1.0], "decode": [0.5, 0.7, 0.6, 10.0]}
    trace, seq = [], 0
    for phase, times in ms.items():
        for t in times:
            new = 7 if phase == "prefill" else 1
            seq += new
            trace.append(PassRecord(phase, seq, new, t / 1e3, 0, 0, 0, 0, 0, 0))
    tokens = torch.zeros(1, 21 + 5, dtype=torch.long)  # a prompt of 21, 5 new tokens
    return GenerationResult(tokens=tokens, trace=trace, prompt_len=21, cache_mode="kv")


def timing_cells(ttft, tpot, itl=None) -> checker.Feedback:
    return run_cells(ch03.TTFT_TPOT, f"traced = run\nttft_ms = {ttft!r}\ntpot_ms = {tpot!r}\nitl_median_ms = {itl!r}",
                     run=fake_run())


def test_ttft_tpot_against_hand_arithmetic():
    # TTFT = 2 + 3 + 1 = 6 ms; TPOT = the mean of 0.5, 0.6, 0.7, 10 = 2.95 ms; ITL's median = 0.65 ms
    assert timing_cells(6.0, 2.95, 0.65).right and timing_cells(6.004, 2.95, 0.652).right
    assert "TPOT 是它的 4.54 倍" in timing_cells(6.0, 2.95, 0.65).text
    assert timing_cells(6.0, 2.95).status == checker.TODO  # ITL not filled in yet
    assert run_cells(ch03.TTFT_TPOT, SOLUTIONS["ch03.ttft_tpot"]).right  # on a real trace


@pytest.mark.parametrize("ttft, tpot, itl, expected", [
    (2.0, 2.95, 0.65, "只算了第一次预填充：提示词分成了 3 块"),
    (6.5, 2.95, 0.65, "多算了第一次解码"),
    (0.006, 2.95, 0.65, "这是秒"),
    (6.0, 0.65, 0.65, "tpot_ms：这是解码步的中位数，也就是 ITL 的中位数"),  # the old page's TPOT
    (6.0, 2.95, 2.95, "itl_median_ms：这是解码步的平均值，也就是 TPOT"),
    (6.0, 2.95, 1.0, "itl_median_ms：把预填充也算进来了"),  # median of all 7 passes
    (6.0, 17.8 / 5, 0.65, "这是总时间除以 5 个新 token"),
    (6.0, 11.8 / 5, 0.65, "分母多了 1"),
    (6.0, "abc", 0.65, "「abc」不是一个数"),
    (Code("float('nan')"), 2.95, 0.65, "ttft_ms：需要一个有限的数"),
])
def test_ttft_tpot_rejects_known_mistakes(ttft, tpot, itl, expected):
    fb = timing_cells(ttft, tpot, itl)
    assert fb.status == checker.WRONG and expected in fb.text, fb.text


# -- 3.4 --------------------------------------------------------------------------------------------------
WINDOW = SOLUTIONS["ch04.window"]


def test_window_solution_by_hand():
    # Gemma-2-9B: 42 layers, 21 windowed (4096), 8 KV heads of 256; S = 8192, B = 4, fp16:
    # per token and layer 2 x 4 x 8 x 256 x 2 = 32,768 bytes; 21 x 8192 + 21 x 4096 = 258,048 token-layers
    assert 258_048 * 32_768 == MODEL_PRESETS["Gemma-2-9B"].kv_cache_bytes(8192, 4) == 8_455_716_864
    assert run_cells(ch04.WINDOW, WINDOW).right


@pytest.mark.parametrize("old, new, expected", [
    ("if windowed else seq_len", "if False else seq_len", "这是普通公式：窗口层只存最近 W 个 token"),
    ("windowed = preset.layer_is_windowed(layer)", "windowed = preset.sliding_window is not None",
     "你把每一层都当成了窗口层；Gemma-2-9B 只有 21 层是"),
    ("min(seq_len, preset.sliding_window)", "preset.sliding_window", "S = 3,000 还没到窗口 W = 4,096"),
    ("2 * batch_size * preset.n_kv_head", "2 * preset.n_kv_head", "少乘了批次 B = 2"),
    ("preset.n_kv_head * kept", "preset.n_head * kept", "你用的是查询头数 32"),
])
def test_window_rejects_known_mistakes(old, new, expected):
    fb = run_cells(ch04.WINDOW, replace(WINDOW, old, new))
    assert fb.status == checker.WRONG and expected in fb.text, fb.text


def test_window_stub_and_none_are_not_done():
    assert run_cells(ch04.WINDOW, ch04.WINDOW_STUB).status == checker.TODO
    assert run_cells(ch04.WINDOW, ch04.WINDOW_STUB.replace("return None", "return None  # mine")).status == checker.TODO


@pytest.mark.parametrize("value, expected", [
    (13, "当成了 10⁹ 字节的 GB"),  # (72e9 - 26,031,728,640) // 3,355,443,200
    (17, "你用了整张卡：只按总显存的 0.9"),  # (85,899,345,920 - 26,031,728,640) // 3,355,443,200
    (23, "忘了先减去权重"),  # 77,309,411,328 // 3,355,443,200
    (16, "向上取整了"),
    (7, "权重算大了一倍"),
])
def test_largest_batch_rejects_known_mistakes(value, expected):
    fb = run_cells(ch04.LARGEST_BATCH, f"largest_batch = {value}")
    assert fb.status == checker.WRONG and expected in fb.text, fb.text


def test_largest_batch_against_hand_arithmetic():
    # 0.9 x 81,920 MiB = 77,309,411,328 bytes, minus 13,015,864,320 x 2 of weights = 51,277,682,688;
    # one sequence: 2 x 40 x 40 x 4096 x 128 x 2 = 3,355,443,200 bytes -> 15.28 -> 15
    assert (81_920 * MIB * 9 // 10 - 13_015_864_320 * 2) // (2 * 40 * 40 * 4096 * 128 * 2) == 15
    assert run_cells(ch04.LARGEST_BATCH, "largest_batch = 15").right


# -- 3.5 --------------------------------------------------------------------------------------------------
def test_mysteries_have_the_signatures_the_task_relies_on():
    assert ch05.signature("no_reset") == ch05.Signature(None, 1)  # right when fresh, wrong from the prefill once reused
    assert ch05.signature("k_as_v") == ch05.Signature(1, 1)  # even the prefill is wrong
    for bug in ("rope_offset", "off_by_one", "one_slot"):
        assert ch05.signature(bug) == ch05.Signature(2, 2)  # prefill right, the first decode step wrong
    assert "神秘缓存 X：全新的缓存：8 步全部相同" in repr(ch05.mystery_report())


@pytest.mark.parametrize("x, y, expected", [
    ("rope_offset", "k_as_v", "如果 X 是 rope_offset，会看到「全新的缓存：第 2 步开始不同"),
    ("no_reset", "off_by_one", "如果 Y 是 off_by_one"),
    ("no_reset", "stale", "没有「stale」这个选项"),
])
def test_identify_rejects_known_mistakes(x, y, expected):
    fb = run_cells(ch05.IDENTIFY, f"bug_x = {x!r}\nbug_y = {y!r}")
    assert fb.status == checker.WRONG and expected in fb.text, fb.text


FIX = SOLUTIONS["ch05.fix"]


@pytest.mark.parametrize("old, new, expected", [
    ("start = cache.length", "start = cache.length + 1", "应写进第 0–2 格（[length, length + T)），你的代码写到了第 1–3 格"),
    ("cache.v[layer, :, :, start:start + T] = v", "cache.v[layer, :, :, start:start + T] = k", "V 的位置写进了 K"),
    ("cache.k[layer, :, :, start:start + T] = k\n    cache.v[layer, :, :, start:start + T] = v",
     "cache.k[0, :, :, start:start + T] = k\n    cache.v[0, :, :, start:start + T] = v", "每一层有自己的一份缓存"),
    ("start = cache.length", "start = max(cache.length - 1, 0) if cache.length else 0", "你的代码写到了第 2 格"),
    ("cache.v[layer, :, :, start:start + T] = v", "cache.v[min(layer, 1), :, :, start:start + T] = v",
     "V 却写进了第 1 层"),  # the stub's second bug, alone: only the upper layers are wrong
])
def test_fix_rejects_known_mistakes(old, new, expected):
    fb = run_cells(ch05.FIX, replace(FIX, old, new))
    assert fb.status == checker.WRONG and expected in fb.text, fb.text
    assert "步开始与无缓存的参考不同" in fb.message


def test_the_fix_stub_has_two_bugs_reported_one_after_the_other():
    stub = ch05.FIX_STUB
    assert "off_by_one" not in ch05.FIX.task and "off_by_one" not in stub  # the bug is not named
    untouched = ch05.grade_fix(_defined(stub))
    assert untouched.status == checker.TODO and "全新的缓存第 1 步开始与无缓存的参考不同" in untouched.message, untouched
    assert "从第 1 步就不同" in untouched.message  # (the clue holds: the stub's V bug breaks the prefill)
    first = ch05.grade_fix(_defined(stub.replace("k.shape[2]", "k.size(2)")))  # the learner's own, both bugs in it
    assert first.status == checker.WRONG and "你的代码写到了第 2 格" in " ".join(first.details), first
    one_fixed = stub.replace("start = max(cache.length - 1, 0)", "start = cache.length")
    second = ch05.grade_fix(_defined(one_fixed))
    assert second.status == checker.WRONG and "V 却写进了第 1 层" in " ".join(second.details), second
    assert "第 1 步开始" in second.message  # upper layers' V missing: wrong from the prefill on


def _defined(source: str):
    scope = {}
    exec(source, scope)  # noqa: S102  (the exercise's own stub text)
    return next(v for k, v in scope.items() if k.startswith("store"))


# -- the shared checker ------------------------------------------------------------------------------------
def test_hint_from_the_second_wrong_attempt_and_reset_by_a_right_one():
    first = run_cells(ch04.LARGEST_BATCH, "largest_batch = 1")
    second = run_cells(ch04.LARGEST_BATCH, "largest_batch = 2")
    third = run_cells(ch04.LARGEST_BATCH, "largest_batch = 3")
    hints = ch04.LARGEST_BATCH.hints
    assert first.hint is None and second.hint == hints[0]
    assert third.hint == f"{hints[0]} {hints[1]}"  # one more each time, the earlier ones kept
    assert run_cells(ch04.LARGEST_BATCH, "largest_batch = 15").right
    assert run_cells(ch04.LARGEST_BATCH, "largest_batch = 1").hint is None


def test_feedback_html_holds_the_solution_collapsed_and_escaped():
    fb = run_cells(ch04.LARGEST_BATCH, "largest_batch = 1")
    page = fb._repr_html_()
    assert 'class="kvlab-exercise-feedback kvlab-exercise-wrong"' in page and "✗" in page
    assert "<details" in page and "<summary" in page and "显示参考答案" in page
    assert "room // per_sequence" in page and "<details open" not in page  # collapsed until opened
    bug = checker.Feedback(ch04.LARGEST_BATCH, checker.WRONG, "<script>x</script>", ("a<b",), None, "x < y")
    assert "<script>" not in bug._repr_html_() and "&lt;script&gt;" in bug._repr_html_()


# -- issue 31 part 5: a solution only after a real attempt -------------------------------------------------------
def shows_solution(fb: checker.Feedback, key: str) -> bool:
    """Whether the feedback, as text and as HTML, carries the solution of ``key`` (its last line, distinctive)."""
    last = SOLUTIONS[key].strip().splitlines()[-1].strip()
    page = fb._repr_html_()
    found = html.escape(last) in page
    assert found == (fb.solution is not None) == ("kvlab-exercise-solution\"" in page), page
    assert found != ("kvlab-exercise-solution-locked" in page), page  # before: says when it appears
    return found


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.key)
def test_no_solution_before_a_real_attempt_not_even_after_checking_the_stub(ex):
    first = run_cells(ex, ex.stub)
    assert not shows_solution(first, ex.key) and checker.SOLUTION_LOCKED in first.text
    again = run_cells(ex, ex.stub)  # a TODO check is not an attempt
    assert again.status == checker.TODO and not shows_solution(again, ex.key)


def test_the_solution_appears_after_one_wrong_real_attempt_and_stays():
    key = ch04.LARGEST_BATCH.key
    assert not shows_solution(run_cells(ch04.LARGEST_BATCH, ch04.LARGEST_BATCH.stub), key)
    wrong = run_cells(ch04.LARGEST_BATCH, "largest_batch = 1")
    assert wrong.status == checker.WRONG and shows_solution(wrong, key)
    assert checker.SOLUTION_LOCKED not in wrong.text
    assert shows_solution(run_cells(ch04.LARGEST_BATCH, ch04.LARGEST_BATCH.stub), key)  # once is enough
    other = ch04.WINDOW  # an attempt at one exercise unlocks only that one
    assert not shows_solution(run_cells(other, other.stub), other.key)
    checker.reset_attempts()  # a restarted kernel starts over
    assert not shows_solution(run_cells(ch04.LARGEST_BATCH, ch04.LARGEST_BATCH.stub), key)


def test_a_partly_filled_answer_that_is_still_todo_is_not_an_attempt():
    fb = run_cells(ch05.IDENTIFY, 'bug_x = "no_reset"\nbug_y = None')
    assert fb.status == checker.TODO and not shows_solution(fb, ch05.IDENTIFY.key)
    fb = run_cells(ch05.IDENTIFY, 'bug_x = "k_as_v"\nbug_y = None')  # a filled field is wrong: a real attempt
    assert fb.status == checker.WRONG and shows_solution(fb, ch05.IDENTIFY.key)


def test_a_right_first_attempt_shows_the_solution_to_compare_with():
    fb = run_cells(ch04.LARGEST_BATCH, "largest_batch = 15")
    assert fb.right and shows_solution(fb, ch04.LARGEST_BATCH.key)


@pytest.mark.parametrize("value", ["1", "true", " Yes ", "ON"])
def test_the_teacher_variable_shows_every_solution_at_once(monkeypatch, value):
    monkeypatch.setenv(checker.TEACHER_ENV, value)
    for ex in EXERCISES[:3] + [ch04.LARGEST_BATCH]:
        assert shows_solution(run_cells(ex, ex.stub), ex.key)


@pytest.mark.parametrize("value", ["", "0", "false", "no", "off", "maybe"])
def test_the_teacher_variable_off_or_unreadable_keeps_them_withheld(monkeypatch, value):
    monkeypatch.setenv(checker.TEACHER_ENV, value)
    assert not shows_solution(run_cells(ch04.LARGEST_BATCH, ch04.LARGEST_BATCH.stub), ch04.LARGEST_BATCH.key)


def test_show_solutions_turns_teacher_mode_on_and_off_in_the_kernel(monkeypatch, capsys):
    import kvlab.exercises

    ex = ch04.LARGEST_BATCH
    kvlab.exercises.show_solutions()
    assert "附上参考答案" in capsys.readouterr().out
    assert shows_solution(run_cells(ex, ex.stub), ex.key)
    kvlab.exercises.show_solutions(False)  # hidden again, whatever the environment says
    monkeypatch.setenv(checker.TEACHER_ENV, "1")
    assert not shows_solution(run_cells(ex, ex.stub), ex.key)
    kvlab.exercises.show_solutions(None)  # the environment decides again
    assert shows_solution(run_cells(ex, ex.stub), ex.key)
    assert "附上参考答案" in capsys.readouterr().out
    with pytest.raises(ValueError, match="True, False or None"):
        kvlab.exercises.show_solutions("yes")
    assert checker.SOLUTION_GATE.teacher is None  # a bad value changes nothing


def test_the_keys_header_states_what_is_hidden_and_when():
    """KEYS.md's header (issue 31 part 5): the quiz's answer after REVEAL_AFTER wrong tries, the checkpoint's with the
    prediction, an exercise's solution after one real checked attempt, the teacher's switches, the static edition's
    flag; no longer the quiz's rule said of everything."""
    from kvlab.questions import REVEAL_AFTER
    from kvlab.teacher.guide import keys_markdown

    header = keys_markdown([])
    assert "答错两次后才会出现「显示答案」" not in header
    quiz, checkpoint, exercises, teacher, static, open_ = (
        next(line for line in header.splitlines() if line.startswith(f"- **{kind}**"))
        for kind in ("自测题", "检查点", "动手练习", "老师", "静态版", "不隐藏的"))
    assert f"答错 {REVEAL_AFTER} 次之后" in quiz and "显示答案" in quiz
    assert "第一次有效作答" in checkpoint and "判分后立刻给出解释" in checkpoint
    assert "第一次检查了自己的答案" in exercises and checker.NOT_DONE in exercises and "kernel" in exercises
    assert f"{checker.TEACHER_ENV}=1" in teacher and "kvlab.exercises.show_solutions()" in teacher
    assert "python -m kvlab.book" in static and "--teacher" in static and "没有练习的参考答案" in static
    assert "solutions.py" in open_


def test_a_bug_in_a_grader_is_reported_not_raised():
    def broken(_answer):
        raise KeyError("oops")

    fb = checker.check(ch04.LARGEST_BATCH, broken, 1)
    assert fb.status == checker.BUG and "kvlab 的 bug" in fb.text and checker.ATTEMPTS[ch04.LARGEST_BATCH.key] == 0


def test_learner_errors_name_the_case():
    fb = run_cells(ch01.WORK, "def predict_work(p, n):\n    return 1 // 0")
    assert fb.status == checker.WRONG and "你的代码出错了（用例 p = 1，n = 1）：ZeroDivisionError" in fb.text


@pytest.mark.parametrize("text, unit, n_bytes", [
    ("1.5 GiB", "GiB", 3 * GIB // 2), ("1536MiB", "MiB", 3 * GIB // 2), ("2 KB", "KB", 2000), ("7 字节", "B", 7),
    ("1,024 B", "B", 1024), ("1e3 MB", "MB", 10**9), (12, "B", 12), ("0.5 gib", "GiB", GIB // 2),
])
def test_parse_bytes(text, unit, n_bytes):
    q = checker.parse_bytes(text)
    assert (q.unit, q.bytes) == (unit, n_bytes)


@pytest.mark.parametrize("bad", ["GiB", "1.5 GiBytes", "", [1], True])
def test_parse_bytes_explains_what_it_cannot_read(bad):
    with pytest.raises(checker.AnswerError):
        checker.parse_bytes(bad)


def test_is_stub_ignores_comments_and_docstrings_only():
    stub = "def f(x):\n    # todo\n    return None"
    ns = {}
    exec("def f(x):\n    '''doc'''\n    return None  # still the stub", ns)
    assert checker.is_stub(ns["f"], stub, "f")
    exec("def f(x):\n    return x", ns)
    assert not checker.is_stub(ns["f"], stub, "f") and not checker.is_stub(len, stub, "f")


def test_choices_accept_case_quotes_and_aliases():
    why = [checker.Choice("A", True, ""), checker.Choice("B", False, "no"), checker.Choice("C", False, "no")]
    sides = [checker.Choice("code", True, "", aliases=("代码",)), checker.Choice("comment", False, "no")]
    assert checker.grade_choice(" 'a' ", why).status == checker.RIGHT
    assert checker.grade_choice("代码", sides).status == checker.RIGHT
    assert "请从" in checker.grade_choice("E", why).message
    assert checker.grade_choice(1, why).status == checker.WRONG


# -- the generator ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.NOTEBOOK)
def test_notebook_exercise_section_is_current(module):
    path = ROOT / "chapters" / module.NOTEBOOK
    assert path.exists(), f"{module.__name__}.NOTEBOOK names a missing notebook"
    assert notebook.section_is_current(path), (
        f"the 动手练习 section of {path.name} is out of date: run `python -m kvlab.exercises chapters/{path.name}`")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def test_generator_appends_then_replaces_only_its_own_cells(tmp_path):
    path = tmp_path / ch04.NOTEBOOK
    nb = json.loads((ROOT / "chapters" / ch04.NOTEBOOK).read_text(encoding="utf-8"))
    nb["cells"] = [c for c in nb["cells"] if not notebook.is_generated(c)]
    original = [c for c in nb["cells"]]
    path.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    assert notebook.main([str(path)]) == 0
    cells = _cells(path)
    assert cells[:len(original)] == original  # nothing before it touched; the section at the end
    section = cells[len(original):]
    assert [c["metadata"][notebook.META_KEY] for c in section] == [
        "ch04/intro", "ch04/setup", "ch04.window/task", "ch04.window/stub", "ch04.window/check",
        "ch04.largest_batch/task", "ch04.largest_batch/stub", "ch04.largest_batch/check"]
    assert "## 动手练习" in "".join(section[0]["source"]) and all(c["id"].startswith("kvlab-ex-") for c in section)
    assert all(c.get("outputs") == [] and c.get("execution_count") is None for c in section if c["cell_type"] == "code")
    once = path.read_text(encoding="utf-8")
    assert notebook.main([str(path)]) == 0 and path.read_text(encoding="utf-8") == once  # idempotent

    # an author adds a cell after the section and a learner's answer lands in a stub: both are kept (issue 33)
    nb = json.loads(once)
    nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": ["下一节见。"], "id": "outro"})
    stub = next(c for c in nb["cells"] if c.get("metadata", {}).get(notebook.META_KEY) == "ch04.window/stub")
    stub["source"] = ["def cache_bytes(preset, seq_len, batch_size):\n", "    return 0"]
    path.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    edited = path.read_text(encoding="utf-8")
    assert notebook.section_is_current(path)
    assert notebook.main(["--check", str(path)]) == 0
    assert notebook.main([str(path)]) == 0 and path.read_text(encoding="utf-8") == edited


def test_generator_targets_only_the_notebooks_named(tmp_path):
    for name in (ch01.NOTEBOOK, ch04.NOTEBOOK):
        shutil.copy(ROOT / "chapters" / name, tmp_path / name)
    target = tmp_path / ch04.NOTEBOOK
    nb = json.loads(target.read_text(encoding="utf-8"))
    nb["cells"] = [c for c in nb["cells"] if not notebook.is_generated(c)]
    target.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    other = (tmp_path / ch01.NOTEBOOK).read_text(encoding="utf-8")
    assert notebook.main([str(target)]) == 0
    assert notebook.section_is_current(target) and (tmp_path / ch01.NOTEBOOK).read_text(encoding="utf-8") == other


def test_generator_refuses_a_notebook_without_exercises(tmp_path):
    path = tmp_path / "99_other.ipynb"
    path.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    with pytest.raises(ValueError, match="path: no exercise module"):
        notebook.sync_notebook(path)
    assert notebook.main([str(tmp_path / "missing.ipynb")]) == 2


def test_every_chapter_module_names_its_notebook_and_setup():
    assert [m.NOTEBOOK[:2] for m in MODULES] == [name[2:] for name in CHAPTER_MODULES]  # ch06 -> 06_...
    assert all(f"from kvlab.exercises import {m.__name__.rsplit('.', 1)[1]}" in m.SETUP for m in MODULES)


# -- 3.6 ----------------------------------------------------------------------------------------------------------
def test_lookup_rejects_known_mistakes():
    from kvlab.exercises import ch06

    logical = ch06.grade_lookup(lambda table, p, bs: (p // bs, p % bs))
    assert logical.status == checker.WRONG and "不是物理块号" in logical.message
    swapped = ch06.grade_lookup(lambda table, p, bs: (p % bs, table[p // bs]))
    assert swapped.status == checker.WRONG and "顺序反了" in swapped.message
    crashing = ch06.check_lookup(lambda table, p, bs: table[p + 10])  # through the checker: an error is feedback
    assert crashing.status == checker.WRONG and "出错了" in crashing.message and "position = 0" in crashing.message


def test_lookup_is_checked_inside_a_generation():
    """A lookup right on every listed case but wrong past them is caught by the generation (the pool is
    shuffled, so a token's block id is never its place in the table)."""
    from kvlab.exercises import ch06

    cases = {(tuple(t), p, bs) for t, p, bs in ch06.LOOKUP_CASES}

    def almost(table, p, bs):
        if (tuple(table), p, bs) in cases:
            return table[p // bs], p % bs
        return table[0], p % bs  # every token in the first block
    verdict = ch06.grade_lookup(almost)
    assert verdict.status == checker.WRONG and "从第 1 步起与连续的 KVCache 不同" in verdict.message  # the prefill


def test_blocks_known_mistakes_are_distinct_from_the_answer():
    from kvlab.exercises import ch06
    from kvlab.paging import shared_prefix_blocks

    s = shared_prefix_blocks(ch06.SYSTEM, ch06.request_lengths(), ch06.COUNT_BLOCK)
    known = ch06.blocks_mistakes()
    assert s.unshared not in known["without"] and s.shared not in known["with"]
    assert len(known["with"]) == 3 and len(known["without"]) == 2  # no two mistakes give the same number
    assert ch06.grade_blocks(s.unshared, s.shared).status == checker.RIGHT
    for wrong_answer, why in known["with"].items():
        verdict = ch06.grade_blocks(s.unshared, wrong_answer)
        assert verdict.status == checker.WRONG and why[:8] in " ".join(verdict.details)


# -- issue 19 holes 6, 7, 8: numbers in the checkers and the quiz ---------------------------------------------
import time  # noqa: E402
from fractions import Fraction  # noqa: E402

import numpy as np  # noqa: E402


@pytest.mark.parametrize("text", ["1e30000000", "1e100000000", "1/0", "9" * 5000, "1e-100000000", "1" * 100_000])
def test_parse_number_refuses_unbounded_numbers_at_once(text):
    start = time.perf_counter()
    with pytest.raises(checker.AnswerError):
        checker.parse_number(text)
    assert time.perf_counter() - start < 0.1


@pytest.mark.parametrize("value", [np.int64(3), np.float32(3.0), torch.tensor(3), torch.tensor(3.0), Fraction(3),
                                   np.array(3), "3", "３", 3.0])
def test_parse_number_accepts_any_real_number_type(value):
    assert checker.parse_number(value) == 3


def test_a_float_that_lies_about_equality_is_read_as_its_value():
    class Always(float):
        def __eq__(self, other):
            return True
        __hash__ = float.__hash__

    assert checker.parse_number(Always(2.5)) == Fraction(5, 2)
    src = "def predict_work(p, n):\n    return (Always(0), Always(0), Always(0), Always(0))"
    assert not run_cells(ch01.WORK, src, Always=Always).right


def test_work_accepts_numpy_and_tensor_counts():
    src = SOLUTIONS["ch01.work"] + "\n_orig = predict_work\npredict_work = lambda p, n: tuple(np.int64(x) for x in _orig(p, n))"
    assert run_cells(ch01.WORK, src, np=np).right
    src = SOLUTIONS["ch01.work"] + "\n_orig = predict_work\npredict_work = lambda p, n: tuple(torch.tensor(x) for x in _orig(p, n))"
    assert run_cells(ch01.WORK, src).right


@pytest.mark.parametrize("src", [
    "def predict_work(p, n):\n    return ch01.traced_work(p, n)",
    "from kvlab.exercises.ch01 import traced_work as tw\ndef predict_work(p, n):\n    return tw(p, n)",
])
def test_work_refuses_an_answer_that_calls_the_reference(src):
    fb = run_cells(ch01.WORK, src)
    assert fb.status == checker.WRONG and "参考" in fb.message


def test_cached_step_refuses_an_answer_that_calls_the_reference():
    src = ("def cached_attention_step(q, k_new, v_new, k_cache, v_cache, pos):\n"
           "    return ch01.reference_step(q, k_new, v_new, k_cache, v_cache, pos)")
    fb = run_cells(ch01.CACHED_STEP, src)
    assert fb.status == checker.WRONG and "参考" in fb.message


def test_fix_refuses_a_store_that_delegates_to_kvcache():
    src = ("from kvlab.cache import KVCache\n"
           "def store(cache, layer, k, v):\n    KVCache._store(cache, layer, k, v, cache.length + k.shape[2])")
    fb = run_cells(ch05.FIX, src)
    assert fb.status == checker.WRONG and "参考" in fb.message


@pytest.mark.parametrize("ridge", [Code("1e400"), "1e400", Code("float('inf')"), "1/0", "1e30000000"])
def test_ridge_bad_numbers_are_the_learners_error(ridge):
    start = time.perf_counter()
    fb = ridge_cells(ridge=ridge)
    assert fb.status == checker.WRONG and "bug" not in fb.message
    assert time.perf_counter() - start < 1


@pytest.mark.parametrize("machine", ["ch03.Machine(1e-300, 1e300, 'made up')", "ch03.Machine(0, 1e9, 'x')",
                                     "ch03.Machine(1e9, 0, 'x')"])
def test_ridge_is_graded_against_a_believable_machine(machine):
    fb = ridge_cells(ridge=1e600 if False else 1.0, machine=machine)
    assert fb.status == checker.WRONG and "bug" not in fb.message and "正确" not in fb.message


def _with_seconds(run, seconds=None, phases=None):
    import dataclasses
    trace = [dataclasses.replace(r, **({} if seconds is None else {"seconds": seconds})) for r in run.trace
             if phases is None or r.phase in phases]
    return dataclasses.replace(run, trace=trace)


def test_ttft_tpot_refuses_a_trace_no_measurement_gives():
    zero = _with_seconds(fake_run(), seconds=0.0)
    fb = run_cells(ch03.TTFT_TPOT, "traced = run\nttft_ms = 0\ntpot_ms = 0\nitl_median_ms = 0", run=zero)
    assert fb.status == checker.WRONG and "正确" not in fb.message
    no_decode = _with_seconds(fake_run(), phases=("prefill",))
    fb = run_cells(ch03.TTFT_TPOT, "traced = run\nttft_ms = 6\ntpot_ms = 1\nitl_median_ms = 1", run=no_decode)
    assert fb.status == checker.WRONG and "bug" not in fb.message


def test_system_exit_in_learner_code_does_not_escape_check():
    fb = run_cells(ch01.WORK, "import sys\ndef predict_work(p, n):\n    sys.exit(1)")
    assert fb.status == checker.WRONG and "exit" in fb.message


# -- the quiz ------------------------------------------------------------------------------------------------
def _number_question():
    from kvlab.exercises.quiz import NumberQuestion
    return NumberQuestion("3.4", "多少？", 0.5, "", "因为。", "想一想。", rel_tol=0.01)


@pytest.mark.parametrize("text", ["0,5", "0，5", "1,5"])
def test_quiz_decimal_comma_is_never_read_as_a_whole_number(text):
    from kvlab.exercises import quiz
    verdict = quiz.grade(_number_question(), text)
    assert verdict.status == checker.TODO and "小数点" in verdict.message  # refused with a message, not counted


def test_quiz_thousands_separators_still_read():
    assert checker.parse_number("131,072") == 131072 and checker.parse_number("1,234.5") == Fraction(2469, 2)


def test_quiz_same_number_written_three_ways_is_one_attempt():
    from kvlab.viz.quiz import Quiz
    q = Quiz([_number_question()])
    for text in ("7", "7.0", "７", " 7 "):
        q.answer(0, text)
    assert q.state.wrong[0] == 1


def test_quiz_long_answer_is_not_echoed_in_full():
    from kvlab.exercises import quiz
    verdict = quiz.grade(_number_question(), "7" * 100_000)
    assert len(verdict.message) < 300
    verdict = quiz.grade(_number_question(), "x" * 100_000)
    assert len(verdict.message) < 300


# -- issue 33 hole 1: the generator never erases a learner's work ------------------------------------------------
from kvlab.exercises import ch06  # noqa: E402

LEARNER_LOOKUP = "def lookup(block_table, position, block_size):\n    return block_table[position // block_size], 0\n"


def _copy_chapter(tmp_path: Path, module=ch06) -> Path:
    path = tmp_path / module.NOTEBOOK
    shutil.copy(ROOT / "chapters" / module.NOTEBOOK, path)
    return path


def _save(path: Path, nb: dict) -> str:
    text = json.dumps(nb, ensure_ascii=False, indent=1) + "\n"
    path.write_text(text, encoding="utf-8")
    return text


def _tagged(nb: dict, tag: str) -> dict:
    return next(c for c in nb["cells"] if c.get("metadata", {}).get(notebook.META_KEY) == tag)


def test_generator_keeps_an_answer_written_into_a_stub(tmp_path, capsys):
    """3.6's lookup answered and run (outputs in the stub and check cells): not flagged, not overwritten."""
    path = _copy_chapter(tmp_path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    _tagged(nb, "ch06.lookup/stub").update(source=LEARNER_LOOKUP.splitlines(keepends=True), execution_count=3)
    _tagged(nb, "ch06.lookup/check").update(execution_count=4, outputs=[
        {"output_type": "execute_result", "execution_count": 4, "metadata": {}, "data": {"text/plain": ["✗ 不对"]}}])
    written = _save(path, nb)

    assert notebook.main(["--check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "out of date" not in out and "ch06.lookup/stub" in out and "edited" in out  # said to be left alone
    assert notebook.main([str(path)]) == 0
    assert path.read_text(encoding="utf-8") == written
    assert "ch06.lookup/stub" in capsys.readouterr().out


def test_generator_rewrites_only_unedited_generated_cells_and_says_which(tmp_path, capsys):
    path = _copy_chapter(tmp_path)
    committed = _cells(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    older = "ch06.check_lookup(lookup)  # what an older kvlab wrote"
    _tagged(nb, "ch06.lookup/check").update(source=[older])  # generated by an older kvlab, not edited since
    _tagged(nb, "ch06.lookup/check")["metadata"][notebook.HASH_KEY] = notebook.source_hash(older)
    _tagged(nb, "ch06.lookup/stub")["source"] = [LEARNER_LOOKUP]
    nb["cells"].remove(_tagged(nb, "ch06.blocks/check"))  # deleted by the learner: written again
    before = _save(path, nb)

    assert notebook.main(["--check", str(path)]) == 1 and path.read_text(encoding="utf-8") == before
    out = capsys.readouterr().out
    assert "out of date" in out and "ch06.lookup/check" in out and "ch06.blocks/check" in out

    assert notebook.main([str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("ch06.lookup/check" in line for line in lines) and any("ch06.blocks/check" in line for line in lines)
    assert any("ch06.lookup/stub" in line and "edited" in line for line in lines)
    cells = _cells(path)
    learner = _tagged({"cells": cells}, "ch06.lookup/stub")
    assert "".join(learner["source"]) == LEARNER_LOOKUP
    assert [c for c in cells if c is not learner] == [c for c in committed if c["id"] != learner["id"]]
    assert cells.index(learner) == [c["id"] for c in committed].index(learner["id"])  # in its place
    once = path.read_text(encoding="utf-8")
    assert notebook.main([str(path)]) == 0 and path.read_text(encoding="utf-8") == once


def test_every_committed_generated_cell_carries_the_hash_of_its_source():
    for module in MODULES:
        cells = [c for c in _cells(ROOT / "chapters" / module.NOTEBOOK) if notebook.is_generated(c)]
        assert len(cells) == 2 + 3 * len(module.EXERCISES)
        for c in cells:
            assert c["metadata"][notebook.HASH_KEY] == notebook.source_hash("".join(c["source"])), c["id"]


def test_generator_on_a_notebook_from_before_hashes(tmp_path, capsys):
    """No hash: a cell equal to what the generator writes is its own (the hash is added); any other is the learner's."""
    path = _copy_chapter(tmp_path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    for c in nb["cells"]:
        c.get("metadata", {}).pop(notebook.HASH_KEY, None)
    _tagged(nb, "ch06.lookup/stub")["source"] = [LEARNER_LOOKUP]
    note = _tagged(nb, "ch06.blocks/task")
    note["source"] = note["source"] + ["\n\n我的笔记：先算不共享的。"]
    _save(path, nb)

    assert notebook.main(["--check", str(path)]) == 1
    assert notebook.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "ch06.lookup/stub" in out and "ch06.blocks/task" in out
    after = {"cells": _cells(path)}
    for tag in ("ch06.lookup/stub", "ch06.blocks/task"):
        learner = _tagged(after, tag)
        assert learner == _tagged(nb, tag) and notebook.HASH_KEY not in learner["metadata"]  # untouched
    generated = [c for c in after["cells"] if notebook.is_generated(c) and notebook.HASH_KEY in c["metadata"]]
    assert len(generated) == 2 + 3 * len(ch06.EXERCISES) - 2
    once = path.read_text(encoding="utf-8")
    assert notebook.main(["--check", str(path)]) == 0 and path.read_text(encoding="utf-8") == once


@pytest.mark.parametrize("content", ["not a notebook", "[]", "{\"cells\": \"x\"}", "{\"nbformat\": 4}",
                                     "{\"nbformat\": 3, \"cells\": []}", "\ufffd\x00"],
                         ids=["text", "list", "cells not a list", "no cells", "nbformat 3", "binary"])
def test_generator_never_writes_a_file_that_is_not_a_notebook(tmp_path, capsys, content):
    path = tmp_path / ch06.NOTEBOOK
    path.write_text(content, encoding="utf-8")
    assert notebook.main([str(path)]) == 2 and notebook.main(["--check", str(path)]) == 2
    assert path.read_text(encoding="utf-8") == content
    assert "not a Jupyter notebook" in capsys.readouterr().err


def test_generator_refuses_paths_it_does_not_write(tmp_path, capsys):
    other = tmp_path / "my_notes.ipynb"  # a notebook, but not a chapter of the course
    text = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    other.write_text(text, encoding="utf-8")
    folder = tmp_path / "x" / ch06.NOTEBOOK
    folder.mkdir(parents=True)
    for path in (other, folder):
        assert notebook.main([str(path)]) == 2
        assert str(path.name) in capsys.readouterr().err
    assert other.read_text(encoding="utf-8") == text


# -- issue 33 hole 11: the quiz grades any answer --------------------------------------------------------------
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ANY_ANSWER = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(), st.fractions(), st.decimals(),
    st.complex_numbers(), st.binary(), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(), st.integers()),
    st.tuples(st.integers()), st.sampled_from([" 7 ", "0.5", " 0.5 ", "５", "", "  ", [0.5], (0.5,), object()]))


def _quiz_question(answer=7):
    from kvlab.exercises.quiz import NumberQuestion
    return NumberQuestion("3.2", "多少？", answer, "倍", "因为。", "想一想。")


@given(ANY_ANSWER)
def test_quiz_grades_any_answer_with_chinese_feedback(response):
    from kvlab.exercises import quiz
    verdict = quiz.grade(_quiz_question(), response)
    assert verdict.status in (checker.RIGHT, checker.WRONG, checker.TODO)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in verdict.message) and len(verdict.message) < 300
    quiz.response_key(_quiz_question(), response)


@pytest.mark.parametrize("response, status, said", [
    (5, checker.WRONG, "「5」不是正确答案"), (5.5, checker.WRONG, "「5.5」不是正确答案"),
    (" 5 ", checker.WRONG, "「5」不是正确答案"), (7, checker.RIGHT, "正确"), (7.0, checker.RIGHT, "正确"),
    (True, checker.TODO, "需要一个数"), (None, checker.TODO, "需要一个数"), ([7], checker.TODO, "需要一个数"),
    (float("nan"), checker.TODO, "有限的数"), ("   ", checker.TODO, "还没有填答案"),
])
def test_quiz_wrong_numbers_of_any_type_are_wrong_and_bad_input_says_why(response, status, said):
    from kvlab.exercises import quiz
    verdict = quiz.grade(_quiz_question(), response)
    assert verdict.status == status and said in verdict.message


def test_quiz_widget_takes_a_number_typed_as_an_int():
    from kvlab.viz.quiz import Quiz
    from kvlab.exercises.quiz import ChoiceQuestion
    q = Quiz([ChoiceQuestion("3.1", "?", (checker.Choice("a", True, ""), checker.Choice("b", False, ""))),
              _quiz_question()])
    assert q.answer(1, 5).status == checker.WRONG and q.state.wrong[1] == 1
    assert q.answer(1, "5").status == checker.WRONG and q.state.wrong[1] == 1  # the same answer again
    assert q.answer(1, 7).status == checker.RIGHT and q.state.right == 1


# -- issue 33 hole 12: every exercise answered with a function refuses one that calls kvlab's own answer --------
CALLS_THE_REFERENCE = {  # exercise key -> an answer that hands the work to kvlab's implementation
    "ch01.cached_step": "def cached_attention_step(q, k_new, v_new, k_cache, v_cache, pos):\n"
                        "    return ch01.reference_step(q, k_new, v_new, k_cache, v_cache, pos)",
    "ch01.work": "def predict_work(p, n):\n    return ch01.traced_work(p, n)",
    "ch04.window": "from kvlab import kv_cache_bytes  # as chapter 3.4 imports it\n"
                   "def cache_bytes(preset, seq_len, batch_size):\n"
                   "    return preset.kv_cache_bytes(seq_len, batch_size)",
    "ch05.fix": "from kvlab.cache import KVCache\n"
                "def store(cache, layer, k, v):\n    KVCache._store(cache, layer, k, v, cache.length + k.shape[2])",
    "ch06.lookup": "from kvlab.paged_cache import BlockTable\n"
                   "def lookup(block_table, position, block_size):\n"
                   "    return BlockTable(block_table).slot(position, block_size)",
}
MORE_REFERENCE_CALLS = [
    ("ch04.window", "def cache_bytes(preset, seq_len, batch_size):\n"
                    "    return sum(preset.layer_kv_cache_bytes(layer, seq_len, batch_size)\n"
                    "               for layer in range(preset.n_layer))"),
    ("ch06.lookup", "from kvlab.paged_cache import BlockTable as T\nfind = T.slot\n"
                    "def lookup(block_table, position, block_size):\n"
                    "    return find(T(block_table), position, block_size)"),
]


def test_every_function_exercise_is_tried_with_a_reference_call():
    with_functions = {ex.key for ex in EXERCISES if _functions(ex.stub)}
    assert with_functions == set(CALLS_THE_REFERENCE)


@pytest.mark.parametrize("key, source", [*CALLS_THE_REFERENCE.items(), *MORE_REFERENCE_CALLS],
                         ids=[*CALLS_THE_REFERENCE, *(k + " again" for k, _ in MORE_REFERENCE_CALLS)])
def test_an_answer_that_calls_the_reference_is_refused(key, source):
    ex = next(e for e in EXERCISES if e.key == key)
    fb = run_cells(ex, source)
    assert fb.status == checker.WRONG and "参考实现" in fb.message, fb.text


def test_an_installed_kvlab_without_chapters_says_it_found_none(monkeypatch, tmp_path, capsys):
    """A wheel in site-packages has no chapters/ beside it: not 'all exercise sections up to date'."""
    site = tmp_path / "site-packages" / "kvlab" / "exercises"
    site.mkdir(parents=True)
    monkeypatch.setattr(notebook, "__file__", str(site / "notebook.py"))
    assert notebook.main(["--check"]) == 2 and notebook.main([]) == 2
    err = capsys.readouterr().err
    assert "no course notebooks found" in err and "up to date" not in err


# -- the English edition (issue 34): the checker's own words follow kvlab.set_language -----------------------------
CJK = __import__("re").compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def _bilingual(key="ch99.sizes", hints=("先数 K 和 V。", "再乘层数。")) -> checker.Exercise:
    return checker.Exercise(
        key=key, title="练习 1：算字节", task="算出缓存的**字节数**。", stub="answer = None",
        check="ch99.check_sizes(answer)", hints=hints,
        english=checker.ExerciseText("Exercise 1: count the bytes", "Work out the cache's size **in bytes**.",
                                     ("Count K and V first.", "Then multiply by the layers.")))


def _text_of(fb: checker.Feedback) -> str:
    return fb.text + "\n" + fb._repr_html_()


def test_the_checkers_feedback_is_english_from_heading_to_hint():
    from kvlab.language import using_language

    ex = _bilingual()
    with using_language("en"):
        units = checker.check(ex, checker.grade_bytes, "4 GB", 4 * GIB)
        rounded = checker.check(ex, checker.grade_bytes, "4.29 GB", 4 * GIB)
        close = checker.check(ex, checker.grade_bytes, "3.99 GiB", 4 * GIB)
        right = checker.check(ex, checker.grade_bytes, "4 GiB", 4 * GIB)
        bare = checker.check(ex, checker.grade_bytes, 4, 4 * GIB)
        unread = checker.check(ex, checker.grade_bytes, "about 4 GiB", 4 * GIB)
        unit = checker.check(ex, checker.grade_bytes, "4 GiBs", 4 * GIB)
        todo = checker.check(ex, lambda answer: checker.todo("fill in answer"), None)
        said = [units, rounded, close, right, bare, unread, unit, todo]
        shown = [_text_of(fb) for fb in said]  # (a feedback is written out when it is displayed, right after)
    assert shown[0].startswith("Exercise 1: count the bytes: Right number, wrong unit: 1 GB = 1,000,000,000 bytes")
    assert units.details == ("Your answer: 4 GB = 4,000,000,000 bytes",)
    assert units.hint is None and rounded.hint == "Count K and V first."  # from the second wrong answer on
    assert close.hint == "Count K and V first. Then multiply by the layers." and "Hint: Count K" in shown[2]
    assert rounded.message.startswith("About right, but the task asks for the exact value")
    assert close.message.startswith("Very close, but not exact")
    assert right.right and right.message == "Right! 4,294,967,296 bytes = 4.00 GiB."
    assert bare.message.startswith("You wrote 4 bytes: a number without a unit counts as bytes.")
    assert unread.message.startswith('Cannot read "about 4 GiB": write a number and a unit')
    assert unit.message == 'Unknown unit "GiBs": use B, KiB, MiB, GiB (or KB, MB, GB)'
    assert todo.status == checker.TODO and todo.message == "Not done yet: fill in answer"
    assert '<b>✗ Exercise 1: count the bytes</b> Right number' in shown[0]
    for text in shown:
        assert not CJK.search(text), text
    again = checker.check(ex, checker.grade_bytes, "4 GB", 4 * GIB)  # Chinese again, as before
    assert again.text.startswith("练习 1：算字节：数值对了，单位错了") and "提示：先数 K 和 V。" in again.text


def test_counts_choices_and_learner_errors_in_english():
    from kvlab.language import using_language

    choices = [checker.Choice("no_reset", True, "It keeps the old length."), checker.Choice("k_as_v", False, "No.")]

    def crash(x):
        return 1 // 0

    def leave(x):
        raise SystemExit(3)

    with using_language("en"):
        said = {
            "half": checker.grade_count(7.5, 7),
            "right": checker.grade_count("7", 7),
            "known": checker.grade_count(8, 7, {8: "You rounded up."}),
            "wrong": checker.grade_count(9, 7, what="batch size"),
            "not a number": checker.grade_count("many", 7),
            "infinite": checker.grade_count(float("inf"), 7, what="ttft_ms"),
            "not text": checker.grade_choice(3, choices),
            "unknown": checker.grade_choice("stale", choices),
            "picked": checker.grade_choice(" 'NO_RESET' ", choices),
            "not callable": checker.not_callable(3, "lookup"),
            "reference": checker.refuses_reference(lambda: checker.parse_bytes("1 B"), {"parse_bytes": None}),
        }
        with pytest.raises(checker.LearnerError) as crashed:
            checker.call(crash, 1, case="p = 1, n = 1")
        with pytest.raises(checker.LearnerError) as left:
            checker.call(leave, 1)
        bug = checker.check(_bilingual(), lambda answer: {}["oops"], 1)
    assert said["half"].message.startswith("The answer must be a whole number, and you wrote 7.5")
    assert said["right"].message == "Right! 7." and said["known"].details == ("Your answer: 8",)
    assert said["wrong"].message == "Not quite: your batch size is 9."
    assert said["not a number"].message == '"many" is not a number: write digits only, e.g. 1024 or 0.5'
    assert said["infinite"].message == "Expected a finite number for ttft_ms, got inf"
    assert said["not text"].message == "Write the option as a string, e.g. \"no_reset\"; got 3"
    assert said["unknown"].message == 'There is no option "stale": pick one of "no_reset", "k_as_v"'
    assert said["picked"].message == "Right! It keeps the old length."
    assert said["not callable"].message.startswith("Expected a function, got int: pass in the function lookup")
    assert said["reference"].message.startswith("Your function calls the reference implementation parse_bytes")
    assert crashed.value.verdict.message == "Your code raised an error (p = 1, n = 1): ZeroDivisionError: " \
                                            "integer division or modulo by zero"
    assert left.value.verdict.message.startswith("Your code called exit() or sys.exit() (SystemExit 3)")
    assert bug.status == checker.BUG and bug.message.startswith("The checker itself failed (a bug in kvlab")
    for verdict in [*said.values(), crashed.value.verdict, left.value.verdict, bug]:
        assert not CJK.search(verdict.message + " ".join(verdict.details)), verdict


def test_the_solution_gate_and_the_teacher_switch_speak_english(capsys):
    import kvlab.exercises
    from kvlab.language import using_language

    ex = _bilingual(key=ch04.LARGEST_BATCH.key)  # an exercise with a reference solution
    with using_language("en"):
        locked = checker.check(ex, lambda answer: checker.todo(), None)
        shown = checker.check(ex, lambda answer: checker.wrong("Not quite."), 1)
        kvlab.exercises.show_solutions()
        kvlab.exercises.show_solutions(None)
        locked_text, shown_page = _text_of(locked), shown._repr_html_()
    said = capsys.readouterr().out
    assert locked.message == "Not done yet." and locked.solution is None
    assert "The reference solution appears once you have checked an answer of your own" in locked_text
    assert "kvlab-exercise-solution-locked" in locked_text and not CJK.search(locked_text)
    assert "<summary style=\"cursor:pointer\">Show the reference solution</summary>" in shown_page
    assert "every exercise's feedback includes its reference solution" in said
    assert said.splitlines()[1].startswith("kvlab: from now on in this kernel, a reference solution appears")
    assert not CJK.search(said)


def test_an_exercises_english_words_are_whole_and_a_missing_language_is_named():
    from kvlab.language import using_language
    from kvlab.phrases import MissingPhrase

    ex = _bilingual()
    assert ex.words("zh").title == "练习 1：算字节" and ex.words("en").hints[1] == "Then multiply by the layers."
    with pytest.raises(ValueError, match="has 1 Chinese hints but 2 English"):
        _bilingual(hints=("只有一个提示。",))
    with pytest.raises(ValueError, match="english: ch99.sizes has an empty English"):
        checker.Exercise("ch99.sizes", "标题", "说明", "x = None", "check(x)", ("提示",),
                         english=checker.ExerciseText("Title", " ", ("Hint",)))
    chinese_only = checker.Exercise("ch99.only", "练习：只有中文", "说明", "x = None", "check(x)", ("提示一", "提示二"))
    with pytest.raises(MissingPhrase, match="exercise 'ch99.only' has no 'en' text"):
        chinese_only.words("en")
    with using_language("en"):  # at run time: the key stands in for the title, the hint says what is missing
        checker.check(chinese_only, lambda answer: checker.wrong("Not quite."), 1)
        fb = checker.check(chinese_only, lambda answer: checker.wrong("Not quite."), 1)
        text = _text_of(fb)
    assert text.startswith("ch99.only: Not quite.") and "exercise 'ch99.only' has no 'en' text" in fb.hint
    assert not CJK.search(text)


def _fake_chapter():
    import types

    return types.SimpleNamespace(__name__="kvlab.exercises.ch99", SETUP="from kvlab.exercises import ch99",
                                 EXERCISES=[_bilingual()])


def test_the_section_is_written_in_either_language_with_the_same_code_and_tags():
    from kvlab.language import using_language

    module = _fake_chapter()
    zh, en = notebook.section_cells(module, "zh"), notebook.section_cells(module, "en")
    with using_language("en"):
        assert notebook.section_cells(module) == en  # the course's language by default
    assert [c["id"] for c in zh] == [c["id"] for c in en]
    assert [c["metadata"][notebook.META_KEY] for c in zh] == [c["metadata"][notebook.META_KEY] for c in en]
    assert [c["source"] for c in zh if c["cell_type"] == "code"] == [c["source"] for c in en if c["cell_type"] == "code"]
    intro, task = "".join(en[0]["source"]), "".join(en[2]["source"])
    assert intro.startswith(f"{notebook.SECTION_MARKER}\n## Exercises\n") and '"Not done yet"' in intro
    assert '"Show the reference solution"' in intro and intro == notebook.intro("en")
    assert task == "<!-- kvlab-exercise: ch99.sizes -->\n### Exercise 1: count the bytes\n\n" \
                   "Work out the cache's size **in bytes**."
    assert not any(CJK.search("".join(c["source"])) for c in en)
    assert "".join(zh[0]["source"]) == notebook.INTRO and "### 练习 1：算字节" in "".join(zh[2]["source"])
    assert notebook.notebook_language(ROOT / "chapters" / "en" / ch04.NOTEBOOK) == "en"
    assert notebook.notebook_language(ROOT / "chapters" / ch04.NOTEBOOK) == "zh"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.NOTEBOOK)
def test_the_chinese_sections_stay_as_they_are_while_the_course_speaks_english(module):
    """The generator writes a Chinese notebook in Chinese whatever the switch says (its --check passes under en)."""
    from kvlab.language import using_language

    with using_language("en"):
        assert notebook.section_is_current(ROOT / "chapters" / module.NOTEBOOK)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.NOTEBOOK)
def test_every_exercise_of_a_chapter_in_english_has_its_english_words(module):
    """A chapter whose notebook is in the English edition (or any of whose exercises has English words) gives every
    exercise its English title, task and hints, with no Chinese in them."""
    from kvlab.edition import edition_chapters

    in_edition = module.NOTEBOOK in {p.name for p in edition_chapters()}
    if not in_edition and not any(ex.english for ex in module.EXERCISES):
        pytest.xfail(f"{module.NOTEBOOK}: not in the English edition yet")
    for ex in module.EXERCISES:
        assert ex.english is not None, f"{ex.key}: no english=ExerciseText(...)"
        words = ex.words("en")
        for text in (words.title, words.task, *words.hints):
            assert not CJK.search(text), f"{ex.key}: {text[:80]!r}"


def test_the_english_trees_sections_are_checked_never_written(tmp_path, capsys):
    """python -m kvlab.exercises covers chapters/en/ too: its sections are kvlab.edition's to write (the same
    with_section), so a stale one is named with the command that fixes it and the file is left as it was."""
    import json

    assert notebook.main(["--check"]) == 0
    assert "up to date" in capsys.readouterr().out
    english = ROOT / "chapters" / "en" / MODULES[0].NOTEBOOK
    stale = tmp_path / "en" / english.name
    stale.parent.mkdir()
    nb = json.loads(english.read_text(encoding="utf-8"))
    nb["cells"] = [c for c in nb["cells"] if not c["id"].endswith("intro")]  # the section's intro lost
    stale.write_text(json.dumps(nb, ensure_ascii=False, indent=1), encoding="utf-8")
    before = stale.read_text(encoding="utf-8")
    assert notebook.main([str(stale)]) == 1
    assert "python -m kvlab.edition" in capsys.readouterr().out and stale.read_text(encoding="utf-8") == before
