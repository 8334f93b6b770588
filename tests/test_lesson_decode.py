"""Chapter 3.1's lesson module on known small cases, and its panels fed bad values."""
import dataclasses

import numpy as np
import pytest
import torch

from kvlab import KVCache, claims
from kvlab.inputs import InputError
from kvlab.lessons import decode as lesson
from kvlab.lessons.decode.sentences import _ends_numbers, _exponent_claims, _outlier_numbers
from kvlab.measure import DecodeTiming
from kvlab.tokenizer import CharTokenizer
from kvlab.viz import decode_plots
from kvlab.viz.style import FONT_FAMILY, MODE_COLORS


@pytest.fixture
def tok(tiny_config):
    return CharTokenizer([chr(0x4E00 + i) for i in range(tiny_config.vocab_size)])


def test_walkthrough_counts_and_shapes(tiny_model, tok):
    steps = lesson.decode_walkthrough(tiny_model, tok, tok.decode([1, 2, 3]), steps=4)
    assert [s.t for s in steps] == [3, 4, 5, 6]
    assert [s.kv_without_cache for s in steps] == [3, 4, 5, 6]
    assert [s.kv_with_cache for s in steps] == [3, 1, 1, 1]  # the prompt at prefill, then one token
    L, H = tiny_model.config.n_layer, tiny_model.config.n_head
    assert steps[2].full_weights.shape == (L, H, 5, 5) and steps[2].cached_weights.shape == (L, H, 1, 5)
    assert all(s.row_max_abs_diff < 1e-5 for s in steps)
    # each step's next token is the next step's last input
    assert [s.next_token for s in steps[:-1]] == [s.tokens[-1] for s in steps[1:]]
    assert sum(p for _, p in steps[0].topk) <= 1 + 1e-6 and len(steps[0].topk) == 5


def test_layer_qkv_matches_the_cache_contents(tiny_model):
    ids = [4, 8, 15, 16, 23]
    q, k, v = lesson.layer_qkv(tiny_model, ids, layer=1)
    c = tiny_model.config
    assert q.shape == (c.n_head, 5, c.head_dim) and k.shape == v.shape == (c.n_kv_head, 5, c.head_dim)
    cache = KVCache(c, 1, 5)
    with torch.no_grad():
        tiny_model(torch.tensor([ids]), cache)
    k_c, v_c = cache.layer_view(1)
    torch.testing.assert_close(k_c[0], k, atol=1e-6, rtol=0)
    torch.testing.assert_close(v_c[0], v, atol=1e-6, rtol=0)


@pytest.mark.parametrize("kwargs,name", [
    (dict(ids=[[1, 2], [3, 4]]), "ids"),  # a batch of two is not one sequence (hole 7)
    (dict(ids=[]), "ids"), (dict(ids=[1, 999]), "ids"), (dict(ids=list(range(65))), "ids"),
    (dict(layer=2), "layer"), (dict(layer=-1), "layer"), (dict(layer=1.0), "layer"),
])
def test_layer_qkv_names_its_own_arguments(tiny_model, kwargs, name):
    args = dict(ids=[1, 2, 3], layer=0) | kwargs
    with pytest.raises(ValueError, match=f"^{name} "):
        lesson.layer_qkv(tiny_model, **args)


def test_two_formulas_agree(tiny_model, tok):
    check = lesson.check_two_formulas(tiny_model, tok, tok.decode([5, 6, 7, 8]), layer=1)
    assert check.t == 4 and check.out_new.shape == (tiny_model.config.n_head, tiny_model.config.head_dim)
    assert check.max_abs_diff < 1e-5 and check.k_cache_max_diff < 1e-6


def test_count_projections_by_hand(tiny_model):
    count = lesson.count_projections(tiny_model, [[1, 2]], 4)
    assert count.seq_len == [2, 3, 4, 5]
    assert count.none_per_pass == [2, 3, 4, 5] and count.none_total == 14
    assert count.kv_per_pass == [2, 1, 1, 1] and count.kv_total == 5


def test_latency_measurement_and_bad_lengths(tiny_model):
    res = lesson.measure_decode_latency(tiny_model, 6, repeats=1, prompt_len=3, progress=False)
    assert res["kv"].seq_len == [3, 4, 5, 6, 7, 8] and torch.equal(res["kv"].tokens, res["none"].tokens)
    with pytest.raises(ValueError, match="^new_tokens"):
        lesson.measure_decode_latency(tiny_model, 62, prompt_len=4)


def test_crossover_for_the_timing_model():
    # per layer: 2*256*(256+512) + 2*256*256 + 6*256*704 = 1,605,632 FLOPs per token; 4*H*D = 1024
    assert lesson.crossover_length(lesson.timing_model()) == round(1_605_632 / 1024)


def test_walkthrough_panel_rejects_bad_values(tiny_model, tok):
    steps = lesson.decode_walkthrough(tiny_model, tok, tok.decode([1, 2]), steps=3)
    panel = lesson.walkthrough_panel(tiny_model, steps)
    assert panel.result.step == 1 and "第 1 步" in panel.readout.value
    panel.set(step=3)
    assert panel.result.step == 3 and "t = 4" in panel.readout.value
    with pytest.raises(InputError, match="注意力头"):
        lesson.render_step(steps, 1, 0, 99)


def test_latency_panel_keeps_its_result(tiny_model):
    panel = lesson.latency_panel(tiny_model, new_tokens=32)
    assert set(panel.result) == {"none", "kv"} and panel.result["kv"].new_tokens == 32
    with pytest.raises(InputError, match="生成 token 数"):
        lesson.render_latency(tiny_model, 0, 1)


# -- plot builders ----------------------------------------------------------------------------------
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
    z_left = np.array(left.z, dtype=float)  # None (empty cells) -> nan
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


def test_work_figure_plots_the_trace_counts():
    # a prompt of 2, then 3 decode passes: the trace's seq_len and K/V projections per pass
    fig = decode_plots.work_figure([2, 3, 4, 5], [2, 3, 4, 5], [2, 1, 1, 1])
    none_kv, none_scores, none_total, kv_kv, kv_scores, kv_total, cube, square = fig.data
    assert list(none_kv.x) == [2, 3, 4, 5] and list(none_scores.y) == [4, 9, 16, 25]
    assert list(none_total.y) == [4, 13, 29, 54] and list(none_total.x) == [1, 2, 3, 4]  # against n
    assert list(kv_kv.y) == [2, 1, 1, 1] and list(kv_scores.y) == [4, 3, 4, 5] and list(kv_total.y) == [4, 7, 11, 16]
    assert cube.name == "n³/3" and cube.y[-1] == pytest.approx(64 / 3) and square.y[-1] == pytest.approx(8)


def test_theil_sen_ignores_a_spike():
    xs = list(range(10))
    ys = [1 + 2 * x for x in xs]
    ys[7] = 500  # one timer spike
    a, b = lesson.theil_sen(xs, ys)
    assert a == pytest.approx(1) and b == pytest.approx(2)


def _fake(name, t, ms, prefill=None):
    """A timed run: a prefill pass (default: like the first step), then one decode pass at each t taking ms; its
    trace's K/V projections as kvlab counts them (no cache: every token of each pass; a cache: the prompt, then 1)."""
    first = ms[0] if prefill is None else prefill
    seq_len = [t[0] - 1] + list(t)
    k_tokens = seq_len if name == "none" else [seq_len[0]] + [1] * len(t)
    return DecodeTiming(name=name, seq_len=seq_len, pass_seconds=[[first / 1e3] + [m / 1e3 for m in ms]],
                        wall_seconds=[1.0], batch_size=1, new_tokens=len(t), tokens=torch.zeros(1, 3, dtype=torch.long),
                        k_tokens=k_tokens)


T = list(range(5, 197))  # the default run: a prompt of 4, then 192 tokens


def _latency_shapes():
    """Synthetic runs of every shape the chapter meets, {name: (none, kv)}."""
    model = lesson.timing_model()
    flops = lesson.uncached_flops(model.config)
    cpu = [2 + flops(x) / 30e6 for x in T]  # fixed 2 ms + 30 GFLOP/s without a cache
    slow_start = [12.2, 6.5, 9.9] + [2.5] * (len(T) - 3)  # issue 31's busy run: steps 2-4 slow, then about 2.5 ms
    kv_stalls = [1.8 if i < 120 or i % 7 else 40.0 for i in range(len(T))]  # review r13: a few stalls late in the run
    none_stalls = [m if i < 100 or i % 9 else 300.0 for i, m in enumerate(cpu)]
    return {
        "idle": (_fake("none", T, cpu), _fake("kv", T, [2 + 0.0005 * x for x in T])),
        "cached grows": (_fake("none", T, cpu), _fake("kv", T, [2 + 0.01 * x for x in T])),
        "busy, slow early steps": (_fake("none", T, cpu), _fake("kv", T, slow_start, prefill=8.5)),
        "busy, a burst at the end": (_fake("none", T, [15.9] * 168 + [27.0] * 24),
                                     _fake("kv", T, [2.7] * 168 + [6.7] * 24)),
        "fixed cost large": (_fake("none", T, [50 + flops(x) / 30e6 for x in T]), _fake("kv", T, [50.0] * len(T))),
        "launch-bound GPU": (_fake("none", T, [0.30 + 1e-5 * x for x in T]), _fake("kv", T, [0.25] * len(T))),
        "negative slope": (_fake("none", T, [5.0 - 0.003 * x for x in T]), _fake("kv", T, [3.0 - 0.005 * x for x in T])),
        "cached slower": (_fake("none", T, [2.0] * len(T)), _fake("kv", T, [2.5] * len(T))),
        "no time at all": (_fake("none", T, [0.0] * len(T)), _fake("kv", T, [0.0] * len(T))),
        "busy, cached stalls": (_fake("none", T, cpu), _fake("kv", T, kv_stalls)),
        "busy, uncached stalls": (_fake("none", T, none_stalls), _fake("kv", T, [2 + 0.0005 * x for x in T])),
        # review r13b N3: rises ×6.5 with one jump and one dip (cell 16 had said 「说不清随 t 增长了多少」)
        "busy, rough rise": (_fake("none", T, _by_eighths([4.38, 5.69, 7.35, 11.34, 12.69, 26.66, 20.34, 28.63])),
                             _fake("kv", T, [2 + 0.0005 * x for x in T])),
        "busy, uneven rise": (_fake("none", T, _by_eighths([4.0, 4.5, 5.0, 5.5, 6.0, 20.0, 21.0, 22.0])),
                              _fake("kv", T, [2 + 0.0005 * x for x in T])),
        # review r14 (HIGH): a growth share of 83 % beside a step exponent of 0.44: the eighths bend down, about
        # 0.12 ms per token in the first half and 0.05 in the second (MEDIUM): seven cached eighths rising
        # smoothly, 1.44 -> 1.61 ms, and one spike (2.58 ms) ending them
        "review r14: bending, one cached spike": (
            _fake("none", T, [_bent(x) for x in T]),
            _fake("kv", T, _by_eighths([1.44, 1.47, 1.49, 1.52, 1.55, 1.58, 1.61, 2.58]))),
        # review 6 (busy run, cell 17): one jump of 14.91 ms between the 4th and 5th eighth, 62 % of the whole rise
        "review 6: one jump halfway": (_fake("none", T, _by_eighths(REVIEW6_NONE)),
                                       _fake("kv", T, _by_eighths(REVIEW6_KV))),
        # a rough rise: one dip (11.0 -> 8.0 ms) and no step over half the whole rise; the cached steps grow
        "busy, a dip, no jump": (_fake("none", T, _by_eighths([4.0, 7.0, 11.0, 8.0, 12.0, 15.0, 18.0, 22.0])),
                                 _fake("kv", T, [2 + 0.01 * x for x in T])),
        "busy, one uncached spike": (_fake("none", T, _by_eighths([10.0, 10.5, 11.0, 20.0, 12.0, 12.5, 13.0, 13.5])),
                                     _fake("kv", T, _by_eighths([2.0] * 4 + [2.9] + [2.0] * 3))),
        "level, then rising": (_fake("none", T, [10 + 0.08 * max(0, x - 100) for x in T]),
                               _fake("kv", T, [2 + 0.0005 * x for x in T])),
        # review 4 (chapter run beside 8 busy processes): cached eighths that dip and come back, called level
        "review 4: cached dips and returns": (_fake("none", T, _by_eighths(REVIEW4_NONE)),
                                              _fake("kv", T, _by_eighths(REVIEW4_KV))),
        # review 5 (beside 8 busy processes): cached eighths falling about 40 % halfway, said too noisy
        "review 5: cached falls halfway": (_fake("none", T, _by_eighths(REVIEW5_NONE)),
                                           _fake("kv", T, _by_eighths(REVIEW5_KV))),
    }


REVIEW4_NONE = [3.31, 4.85, 7.47, 10.40, 11.70, 14.53, 17.92, 19.29]  # /tmp/r4's cell 17, uncached eighths (ms)
REVIEW4_KV = [1.57, 1.14, 1.13, 1.23, 1.32, 1.21, 1.28, 1.59]  # and cached ones, median of all steps 1.27 ms
REVIEW6_NONE = [4.95, 5.87, 8.06, 9.11, 24.02, 24.77, 28.35, 28.94]  # /tmp/r6's cell 17, uncached eighths (ms)
REVIEW6_KV = [1.72, 1.44, 1.42, 1.46, 1.60, 1.60, 1.82, 1.71]  # and cached ones, median of all steps 1.60 ms
REVIEW5_NONE = [3.35, 5.38, 7.28, 9.72, 11.52, 14.31, 15.92, 19.67]  # /tmp/r5's cell 17, uncached eighths (ms)
REVIEW5_KV = [2.02, 2.07, 2.20, 1.35, 1.30, 1.14, 1.23, 1.38]  # and cached ones, median of all steps 1.38 ms


def _bent(t):
    """Review r14's uncached step (ms): 0.12 ms more per token up to t = 112, then 0.04."""
    return 2.4 + 0.12 * (min(t, 112) - 16) + 0.04 * max(0, t - 112)


def _by_eighths(medians):
    """Step times constant within each eighth of T, at these medians."""
    return [medians[8 * i // len(T)] for i in range(len(T))]


def _said(claims_):
    """{key: sentence} (the last one of a key said twice, as the exponents are for both modes)."""
    return {c.key: lesson.ZH.say(c) for c in claims_}


def test_every_template_shows_exactly_what_its_rule_shows():
    for chooser in lesson.CHOOSERS:
        for rule in chooser.rules:
            terms = {"mode"} if chooser in (lesson.STEP_EXPONENT, lesson.STEP_UNREAD, lesson.STEP_JUMP, lesson.STEP_OUTLIER,
                                            lesson.STEP_STEEP, lesson.CUMULATIVE) else set()
            assert lesson.ZH.placeholders(rule.key) == set(rule.shows) | terms, rule.key
    assert set(lesson.ZH.templates) == {k for c in lesson.CHOOSERS for k in c.keys}


def test_explain_latency_on_an_idle_run_says_something_substantive_and_true():
    model = lesson.timing_model()
    none, kv = _latency_shapes()["idle"]
    said = lesson.explain_latency({"none": none, "kv": kv}, model)
    keys = [c.key for c in said]
    assert keys == ["decode.totals.faster", "decode.uncached.growth_dominates", "decode.crossover.far",
                    "decode.step_exponent.linear", "decode.cumulative.between", "decode.cached.flat",
                    "decode.exponent_unread.level", "decode.cumulative.linear", "decode.fixed_cost.share",
                    "decode.extrapolation.kv_flat"]
    rules = {r.key: r for c in lesson.CHOOSERS for r in c.rules}
    # beside 「看不出随 t 的增长」 the cached exponent is not read (review 4); every other sentence is substantive
    assert all(rules[k].substantive for k in keys if k != "decode.exponent_unread.level")
    text = "\n".join(lesson.ZH.say(c) for c in said)
    assert "30.0 GFLOP/s" in text and "基本上一段比一段长：5.57、10.89、16.38" in text  # measured medians, not a fit
    assert "无缓存的单步指数 1.02 接近 1（后半段 t ≈ 112 → 184，" in text and "有缓存的累计指数 1.01 接近 1" in text
    assert "无缓存用时是有缓存的 12.3 倍（按各步耗时的中位数估算是 12.3 倍，两者相符）" in text
    assert "每段单步耗时的中位数 2.01、2.02、2.03" in text  # the cached eighths, not only their ends


def test_the_sentences_issue_31_found_contradicted_cannot_be_printed():
    model = lesson.timing_model()
    none, kv = _latency_shapes()["busy, slow early steps"]
    said = _said(lesson.explain_latency({"none": none, "kv": kv}, model))
    # the low cumulative exponent is explained by the slow early steps it came from, with their numbers
    assert "前 4 次前向计算（含预填充）平均 9.28 ms，比后半段的单步中位数 2.50 ms 慢得多" in said["decode.cumulative.early_slow"]
    assert "全部步的中位数 2.50 ms" in said["decode.cached.flat"]  # the median, not a fit's intercept
    # a falling cached step time: no slope quoted, no extrapolation from it, no negative time anywhere
    none, kv = _latency_shapes()["negative slope"]
    said = _said(lesson.explain_latency({"none": none, "kv": kv}, model))
    assert {"decode.uncached.noisy", "decode.cached.noisy", "decode.extrapolation.none"} <= set(said)
    assert "µs/token" not in "".join(said.values())
    # a fitted exponent near 0 next to second-half medians that doubled is not called level (nor a positive one
    # next to medians that fell a growth): the exponent's words must agree with the medians printed beside it
    num = claims.number
    for k, start, end, key in [(0.1, 10.0, 20.0, "not_level"), (1.0, 20.0, 10.0, "not_rising")]:
        said = lesson.STEP_EXPONENT.choose(_step(k, start, end), {"mode": "none"})
        assert said.key == f"decode.step_exponent.{key}" and f"{start:.2f} ms" in lesson.ZH.say(said)
    # rising at every point: a dip of at most a tenth of the whole rise is allowed, a larger one is not
    rising = [2.0, 3.0, 4.0, 3.9, 5.0, 6.0, 7.0, 8.0]
    for dip, key in [(3.9, "decode.cached.grows"), (3.3, "decode.cached.noisy")]:
        assert lesson.CACHED.choose(_series_numbers(rising[:3] + [dip] + rising[4:], 5.0)).key == key
    # load that slowed only the last steps is not a growth with t: the medians' middle gives it away, and the last
    # eighth is named as the one outlier, the other seven read as level (no growth, no extrapolation)
    none, kv = _latency_shapes()["busy, a burst at the end"]
    said = _said(lesson.explain_latency({"none": none, "kv": kv}, model))
    assert {"decode.uncached.flat_outlier", "decode.cached.flat_outlier", "decode.extrapolation.none"} <= set(said)
    assert "其中 6.70 ms 那一段偏离了其余七段的走势" in said["decode.cached.flat_outlier"]
    assert "decode.exponent_unread.level" in said and "涨到" not in said["decode.uncached.flat_outlier"]
    # launch-bound (a GPU): both step times flat, said as such, not as noise
    none, kv = _latency_shapes()["launch-bound GPU"]
    assert {"decode.uncached.flat", "decode.cached.flat"} <= set(_said(lesson.explain_latency({"none": none, "kv": kv}, model)))


def _counted(none_kv=19_104, kv_kv=195, none_gflop=134.72, kv_gflop=1.74):
    """The totals' counted K/V projections of the default run (a prompt of 4, 192 new tokens) and their ratio, and
    the two generations' FLOPs and theirs."""
    num = claims.number
    return {"none_kv": num(none_kv, 0), "kv_kv": num(kv_kv, 0), "counted": num(none_kv / kv_kv, 1),
            "none_flop": num(none_gflop, 2, "GFLOP"), "kv_flop": num(kv_gflop, 2, "GFLOP"),
            "flops": num(none_gflop / kv_gflop, 1)}


def _series_numbers(eighths, median_ms):
    """What the eighths' choosers are offered for these eighths (at t = 16, 40, ..., 184) and this median step."""
    ends = lesson.StepEnds(16, 184, tuple(eighths), median_ms, tuple(range(16, 185, 24)))
    return {**_ends_numbers(ends), **_outlier_numbers(ends)[0]}


def _step(k, start, end, t_from=112, t_to=184, first=None, t0=16, t1=184):
    """The step exponent's numbers: k beside the second half's first and last medians and their t, and the growth
    share of the whole run from ``first`` (default: a straight line through start and end) to ``end``."""
    num = claims.number
    first = start - (end - start) / (t_to - t_from) * (t_from - t0) if first is None else first
    share = 100 * (end - first) / end
    implied = lesson.implied_exponent(float(num(share, 0).text), t0, t1, t_from, t_to)
    return {"k": num(k, kind=claims.DIFFERENCE), "t_from": num(t_from, 0), "t_to": num(t_to, 0),
            "from": num(start, 2, "ms"), "to": num(end, 2, "ms"), "t0": num(t0, 0), "t1": num(t1, 0),
            "share": num(share, 0, "%"), "implied": num(implied, kind=claims.DIFFERENCE), "first": num(first, 2, "ms"),
            "slope_early": num((start - first) / (t_from - t0), 3, "ms", claims.DIFFERENCE),
            "slope_late": num((end - start) / (t_to - t_from), 3, "ms", claims.DIFFERENCE),
            "ends_k": num(lesson.ends_exponent(round(start, 2), round(end, 2), t_from, t_to), kind=claims.DIFFERENCE),
            "eighths": claims.series([_on_two_lines(x, t0, first, t_from, start, t_to, end) for x in range(t0, t1 + 1, 24)],
                                     2, "ms")}


def _on_two_lines(t, t0, first, t_from, start, t_to, end):
    """The median at t on the line first -> start (up to t_from), then start -> end."""
    if t <= t_from:
        return first + (start - first) * (t - t0) / (t_from - t0)
    return start + (end - start) * (t - t_from) / (t_to - t_from)


def _cumulative(k, early, late, total=0.4, passes=192):
    """The cumulative exponent's numbers, the total against passes x the median step (here: ``late``) included."""
    num = claims.number
    product = passes * late / 1e3
    return {"k": num(k, kind=claims.DIFFERENCE), "early": num(early, 2, "ms"), "late": num(late, 2, "ms"),
            "spread": num(100 * abs(late - early) / early, 0, "%"), "total": num(total, 2, "s"),
            "passes": num(passes, 0), "median": num(late, 2, "ms"), "product": num(product, 2, "s"),
            "excess": num(total / product, 1)}


def _growth_shapes():
    """The long cached run (cell 18): growing by a large, a half, a notable and a small share, flat, falling."""
    t = range(5, 1029)
    return {"large": [1 + 0.004 * x for x in t], "half": [1 + 0.001 * x for x in t],
            "notable": [2 + 0.001 * x for x in t], "small": [10 + 0.001 * x for x in t],
            "flat (GPU)": [0.25] * len(t), "falling": [3 - 0.001 * x for x in t]}


def test_a_rough_rise_is_said_as_a_rise_with_its_dip():
    """Review r13b N3: eighths rising ×6.5 with one dip were called 「计时太乱，说不清随 t 增长了多少」."""
    none, kv = _latency_shapes()["busy, rough rise"]
    said = _said(lesson.explain_latency({"none": none, "kv": kv}, lesson.timing_model()))
    text = said["decode.uncached.rises_rough"]
    assert "从 4.38 ms 涨到 28.63 ms（×6.5）" in text and "26.66 ms → 20.34 ms 一处回落" in text, text
    assert "decode.exponent_unread.noisy" not in said and "decode.cumulative.noisy" not in said, said
    uneven = _said(lesson.explain_latency(dict(zip(("none", "kv"), _latency_shapes()["busy, uneven rise"])),
                                          lesson.timing_model()))
    assert "×5.5" in uneven["decode.uncached.rises_uneven"]


def test_every_key_of_every_chooser_is_reached():
    model = lesson.timing_model()
    reached = {}
    for name, (none, kv) in _latency_shapes().items():
        for c in lesson.explain_latency({"none": none, "kv": kv}, model):
            reached.setdefault(c.key, name)
    num = claims.number
    # the counted crossover moves only with the model and the length: its other keys from their numbers
    reached.setdefault(lesson.CROSSOVER.choose({"cross": num(300, 0), "n": num(196, 0)}).key, "near")
    reached.setdefault(lesson.CROSSOVER.choose({"cross": num(100, 0), "n": num(196, 0)}).key, "passed")
    # t² dominates; noise both ways; an exponent past 2; a level exponent beside medians that rose
    # (and a level second half beside an exponent near 0: read as level where the sentence before was no level one)
    for k, early, late in [(2.0, 1.0, 2.7), (1.4, 3.0, 2.0), (0.5, 2.0, 2.0), (2.5, 2.0, 2.0), (0.1, 2.0, 3.0),
                           (0.1, 2.0, 2.05)]:
        reached.setdefault(lesson.STEP_EXPONENT.choose(_step(k, early, late), {"mode": "none"}).key, "k")
        reached.setdefault(lesson.CUMULATIVE.choose(_cumulative(k, early, late), {"mode": "none"}).key, "k")
    # an exponent that disagrees with the growth share beside a straight line (no bend either way): noise
    reached.setdefault(lesson.STEP_EXPONENT.choose(_step(1.0, 15.0, 20.0), {"mode": "none"}).key, "off share")
    reached.setdefault(lesson.STEP_EXPONENT.choose(_step(0.67, 13.42, 20.07), {"mode": "none"}).key, "off ends")
    # the totals: faster by their sum, but their ratio and the medians' disagree with no stall to blame
    uncertain = {"n": num(192, 0), **_counted(), "none_s": num(2.0, 2, "s"), "kv_s": num(0.5, 2, "s"), "speedup": num(4.0, 1),
                 "none_est": num(3.0, 2, "s"), "kv_est": num(0.5, 2, "s"), "robust": num(6.0, 1)}
    reached.setdefault(lesson.TOTALS.choose(uncertain).key, "uncertain")
    # the two cached runs compared where they cannot be (numbers that disagree with each other)
    unclear = {"lo": num(5, 0), "hi": num(196, 0), "here": num(2.0, 2, "ms"), "there": num(2.0, 2, "ms"),
               "diff": num(50, 0, "%")}
    reached.setdefault(lesson.RERUN.choose(unclear).key, "unclear")
    # a steep exponent: read as the t² term only where the counted crossover is near (cell 16's review)
    steep = _step(1.45, 17.92, 37.75)
    reached.setdefault(lesson.STEP_EXPONENT.choose(steep, {"mode": "none"}).key, "steep, crossover near")
    reached.setdefault(lesson.STEP_STEEP.choose(steep, {"mode": "none"}).key, "steep, crossover far")
    # the long cached run (cell 18): growing by a large, a notable and a small share, flat, noisy
    t = list(range(5, 1029))
    for name, ms in _growth_shapes().items():
        for earlier, scale in (("same", 1.0), ("slower", 0.5), ("faster", 2.0)):
            said = lesson.explain_growth(lesson.fit_step_time(_fake("kv", t, ms)), model,
                                         _fake("kv", T, [scale * m for m in ms[:len(T)]]))
            for c in said:
                reached.setdefault(c.key, f"{name}, {earlier}")
    assert set(reached) == {k for c in lesson.CHOOSERS for k in c.keys}, reached


def test_every_claim_of_every_shape_passes_the_checker():
    """What the busy-machine test does to an executed notebook, on the synthetic shapes: the recorded claims,
    re-evaluated from their printed numbers alone, hold, and no printed absolute is negative or not finite."""
    model = lesson.timing_model()
    cells = []
    for none, kv in _latency_shapes().values():
        said = lesson.explain_latency({"none": none, "kv": kv}, model)
        cells.append(("\n".join(lesson.ZH.say(c) for c in said), said))
    t = list(range(5, 1029))
    for ms in _growth_shapes().values():
        for scale in (1.0, 0.5, 2.0):  # the latency panel's cached run: the same steps, faster, slower
            said = lesson.explain_growth(lesson.fit_step_time(_fake("kv", t, ms)), model,
                                         _fake("kv", T, [scale * m for m in ms[:len(T)]]))
            cells.append(("\n".join(lesson.ZH.say(c) for c in said), said))
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {"text/plain": text},
                                                        "metadata": {"kvlab_claims": [c.record() for c in said]}}]}
                    for text, said in cells]}
    assert len(claims.recorded(nb)) == 10 * len(_latency_shapes()) + 2 * 3 * len(_growth_shapes())
    assert claims.check_recorded(nb, lesson.CHOOSERS) == []


def test_explain_growth_by_hand():
    model = lesson.timing_model()
    t = list(range(5, 1029))
    rising = lesson.fit_step_time(_fake("kv", t, [2 + 0.001 * x for x in t]))
    text = lesson.ZH.say(lesson.explain_growth(rising, model)[0])
    assert "拟合斜率 1.00 µs/token" in text and "8.0 KiB" in text and "8.2 GB/s" in text  # 8 KiB / 1 µs
    assert "从 2.07 ms 涨到 2.96 ms" in text and "占 t = 964 附近实测单步中位数 2.96 ms 的 30%，已经不小" in text
    flat = lesson.explain_growth(lesson.fit_step_time(_fake("kv", t, [2.0 for _ in t])), model)[0]
    assert flat.key == "decode.growth.flat" and "µs/token" not in lesson.ZH.say(flat)


def test_step_ends_are_medians_of_the_first_and_last_eighth():
    ends = lesson.step_ends(list(range(1, 17)), [1.0, 9.0] + [2.0] * 12 + [3.0, 5.0])
    assert (ends.t0, ends.first_ms, ends.t1, ends.last_ms, ends.median_ms) == (2, 5.0, 16, 4.0, 2.0)
    assert ends.eighths_ms == (5.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 4.0)
    assert lesson.step_ends([5], [1.0]).eighths_ms == (1.0, 1.0)  # one step: a series of two equal medians
    with pytest.raises(ValueError, match="t, ms"):
        lesson.step_ends([], [])


def test_cache_rows_figure_outlines_the_new_rows():
    k = np.arange(12, dtype=float).reshape(4, 3)
    fig = decode_plots.cache_rows_figure(k, -k, list("人工智能"), layer=2, group=1, new_rows=1)
    assert np.array(fig.data[0].z).shape == (4, 3) and np.array(fig.data[1].z)[0, 1] == -1
    box = fig.layout.shapes[0]
    assert (box.y0, box.y1) == (2.5, 3.5)  # the last row only
    assert "本步追加" in fig.layout.title.text and "KV 组 1" in fig.layout.title.text
    prefill = decode_plots.cache_rows_figure(k, k, list("人工智能"), 0, 0, new_rows=4)
    assert (prefill.layout.shapes[0].y0, prefill.layout.shapes[0].y1) == (-0.5, 3.5) and "预填充" in prefill.layout.title.text
    assert "其余行" not in prefill.layout.title.text  # at the prefill there are no other rows


def test_attention_figure_sends_no_nan_and_labels_the_prefill():
    full = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]
    fig = decode_plots.attention_compare_figure(full, full, list("人工智"), 0, 0, kv_full=3, kv_cached=3)
    for trace in fig.data:
        assert all(v is None or np.isfinite(v) for row in trace.z for v in row)  # NaN is not valid JSON
    assert "预填充" in fig.layout.annotations[1].text and "只算" not in fig.layout.annotations[1].text


def test_axis_titles_use_full_width_brackets():
    from kvlab.viz.style import axis_title

    assert axis_title("单步耗时", "ms") == "单步耗时（ms）" and axis_title("层 L") == "层 L"


def test_walkthrough_figures_are_valid_plotly_built_quickly():
    """The walkthrough's figures skip plotly's validation to redraw within a key press; validated plotly must
    accept everything they hold, and the kvlab template must be on them."""
    import plotly.graph_objects as go

    full = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]
    k = np.arange(9, dtype=float).reshape(3, 3)
    figures = [decode_plots.topk_figure([("智", 0.9), ("能", 0.1)], "人工"),
               decode_plots.attention_compare_figure(full, full[-1:], list("人工智"), 0, 0, kv_full=3, kv_cached=1),
               decode_plots.cache_rows_figure(k, -k, list("人工智"), 0, 0, new_rows=1)]
    for fig in figures:
        checked = go.Figure(fig.to_dict())  # raises on any property plotly does not know
        template = checked.to_plotly_json()["layout"]["template"]["layout"]
        assert template["font"]["family"].startswith("Noto Sans CJK SC") and checked.layout.width == 980
    attention = go.Figure(figures[1].to_dict())
    assert [a.text.split("<br>")[0] for a in attention.layout.annotations[:2]] == ["无缓存：重算 3 个 token 的 K/V",
                                                                                 "有缓存：只算 1 个 token 的 K/V"]
    assert attention.layout.xaxis2.domain == (0.56, 1.0) and attention.data[1].xaxis == "x2"


def test_latency_panel_bounds_the_work_one_click_starts():
    """Issue 19 hole 3: the slider's maximum (2,040 tokens) blocked the kernel for 690 s after one click. The work is
    counted first; above the cap the click measures nothing and says why."""
    import time

    model = lesson.timing_model()
    start = time.perf_counter()
    with pytest.raises(InputError, match="token 位置.*上限 300,000"):
        lesson.render_latency(model, model.config.max_seq_len - 8, 5)
    assert time.perf_counter() - start < 1
    assert lesson.latency_work(6, 1) == 2 * (4 + 5 + 6 + 7 + 8 + 9)  # passes over 4 .. 9 tokens, warm-up and one run
    assert lesson.latency_work(192, 1) < lesson.latency_work(544, 1) <= lesson.LATENCY_MAX_WORK  # default fits
    assert lesson.latency_work(576, 1) > lesson.LATENCY_MAX_WORK >= lesson.latency_work(352, 3)


def test_the_exponents_reading_agrees_with_the_sentences_before_it():
    """Review of a busy run: 「看不出随 t 的增长」 was followed by 「单步指数 1.06 接近 1：与 t 成正比的部分为主」, and
    「t² 部分已经显现」 stood next to a counted crossover far beyond the lengths measured."""
    num, d = claims.number, claims.DIFFERENCE
    far = lesson.CROSSOVER.choose({"cross": num(1568, 0), "n": num(195, 0)})
    near = lesson.CROSSOVER.choose({"cross": num(300, 0), "n": num(195, 0)})
    said = {k: lesson.CACHED.choose(_series_numbers([f] + [2.0] * 6 + [2.91], 2.32))
            for k, f in (("flat", 2.81), ("noisy", 1.5))}
    assert said["flat"].key == "decode.cached.flat" and said["noisy"].key == "decode.cached.noisy"
    timing = _latency_shapes()["idle"][1]  # any timing: the reading is what is tested
    for growth in said.values():
        reading = _exponent_claims(timing, "kv", growth, far)[0]
        rules = {r.key: r for c in lesson.CHOOSERS for r in c.rules}
        assert reading.key == "decode.step_exponent.flat" or not rules[reading.key].substantive, reading.key
    steep = _step(1.45, 17.92, 37.75)
    assert lesson.STEP_EXPONENT.choose(steep, {"mode": "none"}).key == "decode.step_exponent.between"
    assert lesson.STEP_STEEP.choose(steep, {"mode": "none"}).key == "decode.exponent_steep.not_t2"
    grows = claims.Claim(lesson.UNCACHED.rules[0].key, {}, {})
    for name, (none, _kv) in _latency_shapes().items():  # next to a far crossover, never 「t² 部分已经显现」
        reading = _exponent_claims(none, "none", grows, far)[0]
        assert reading.key not in ("decode.step_exponent.between", "decode.step_exponent.quadratic"), name
    assert near.key == "decode.crossover.near"
    text = lesson.ZH.say(lesson.STEP_STEEP.choose(steep, {"mode": "none"}))
    assert "不是 t² 项" in text and "1.45" in text


def test_a_saved_notebooks_sorted_metadata_still_checks():
    """nbformat writes metadata with sorted keys: the checker compares the fields as a set."""
    import nbformat

    model = lesson.timing_model()
    none, kv = _latency_shapes()["idle"]
    said = lesson.explain_latency({"none": none, "kv": kv}, model)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("")])
    nb.cells[0].outputs = [nbformat.v4.new_output("display_data", data={"text/plain": "\n".join(lesson.ZH.say(c) for c in said)},
                                                  metadata={"kvlab_claims": [c.record() for c in said]})]
    again = nbformat.reads(nbformat.writes(nb), as_version=4)
    assert len(claims.recorded(again)) == len(said) and claims.check_recorded(again, lesson.CHOOSERS) == []


def test_a_cumulative_exponent_the_step_medians_cannot_give_is_not_read_as_growth():
    """Review r13, cell 16: 「有缓存的累计指数 1.18 在 1 和 2 之间：后面的步更慢（…1.83 ms，…1.70 ms）」 beside a
    cached step time said to be level; the total (0.66 s) was twice 192 x the median step (0.35 s): stalls. And
    「有缓存快 6.3×」 came from that stalled total, while the medians gave about 12."""
    num = claims.number
    assert lesson.CUMULATIVE.choose(_cumulative(1.18, 1.70, 1.83, total=0.66), {"mode": "kv"}).key \
        == "decode.cumulative.stalls"  # 8 % apart cannot give 1.18: not 「后面的步更慢」
    model = lesson.timing_model()
    none, kv = _latency_shapes()["busy, cached stalls"]
    said = _said(lesson.explain_latency({"none": none, "kv": kv}, model))
    assert {"decode.totals.kv_stalled", "decode.cached.flat", "decode.cumulative.stalls"} <= set(said)
    assert "有缓存那次的累计时间 0.73 s 比按中位数估算的 0.35 s 长出一截" in said["decode.totals.kv_stalled"]
    # review r13b N7: 「长出一截」 was 0.61 s against 0.32 s, now printed
    stalled = {"n": num(192, 0), **_counted(), "none_s": num(4.0, 2, "s"), "kv_s": num(0.61, 2, "s"), "speedup": num(6.6, 1),
               "none_est": num(3.9, 2, "s"), "kv_est": num(0.32, 2, "s"), "robust": num(12.2, 1)}
    assert "累计时间 0.61 s 比按中位数估算的 0.32 s 长出一截" in lesson.ZH.say(lesson.TOTALS.choose(stalled))
    assert "次前向计算 × 单步中位数 1.80 ms（约 0.35 s）" in said["decode.cumulative.stalls"]
    # beside a level cached step time, never 「后面的步更慢」, whatever the two averages
    flat = claims.Claim("decode.cached.flat", {}, {})
    for _name, (_none, kv) in _latency_shapes().items():
        assert _exponent_claims(kv, "kv", flat, lesson.CROSSOVER.choose({"cross": num(1568, 0), "n": num(195, 0)}))[1].key \
            not in ("decode.cumulative.between", "decode.cumulative.quadratic")
    # the uncached twin: its stalled total is named, the cached one's is not blamed
    none, kv = _latency_shapes()["busy, uncached stalls"]
    assert "decode.totals.none_stalled" in _said(lesson.explain_latency({"none": none, "kv": kv}, model))


def test_the_long_run_is_compared_with_the_panels_at_the_same_lengths():
    """Review r13, cells 16 and 18: 2.59 ms at t ≈ 68 here, about 1.5 ms at the same lengths in the panel's run,
    unremarked. The two runs' medians over the lengths both took are printed and the difference named."""
    model = lesson.timing_model()
    t = list(range(5, 1029))
    growth = lesson.fit_step_time(_fake("kv", t, [2.6 + 0.0024 * x for x in t]))
    panel = _fake("kv", T, [1.5] * len(T))
    said = lesson.explain_growth(growth, model, panel)
    assert [c.key for c in said][1:] == ["decode.rerun.slower"]
    text = lesson.ZH.say(said[1])
    assert "t = 5 到 196" in text and "1.50 ms" in text and "慢 " in text and "机器的忙闲变了" in text
    assert lesson.explain_growth(growth, model)[1:] == []  # no earlier run: nothing compared


@pytest.mark.parametrize("k,key", [
    (0.67, "decode.step_exponent.off_ends"),  # the review's run: 0.67 beside ends that give 0.81
    (0.69, "decode.step_exponent.off_ends"), (0.72, "decode.step_exponent.mixed"),  # 0.1 from 0.81, with rounding
    (0.78, "decode.step_exponent.mixed"), (0.92, "decode.step_exponent.linear"),
    (1.02, "decode.step_exponent.off_ends"),  # the other way: an exponent "close to 1" beside ends that give 0.81
])
def test_a_rising_exponent_is_read_only_beside_ends_that_give_about_as_much(k, key):
    """Review of the English 3.1: the step exponent 0.67 was read beside second-half medians (13.42 -> 20.07 ms over
    t = 112 -> 184, say) that alone give about 0.81. A rising exponent is read only within ENDS_BAND of the one its
    printed ends give; beyond it, both numbers are printed and the exponent is not read."""
    step = _step(k, 13.42, 20.07)
    assert step["ends_k"].text == "0.81"
    said = lesson.STEP_EXPONENT.choose(step, {"mode": "kv"})
    assert said.key == key and lesson.STEP_EXPONENT.rule(key).admits(said)
    zh, en = lesson.ZH.say(said), lesson.EN.say(said)
    if key.endswith("off_ends"):
        assert f"有缓存的单步指数 {k:.2f}（对后半段 t ≈ 112 → 184 的每一步做的拟合）和这半段头尾的中位数对不上" in zh
        assert "只看这两个数，指数约为 0.81，相差超过 0.1" in zh and "不作解读" in zh
        assert "those two medians alone give an exponent of about 0.81, more than 0.1 away" in en and "not read" in en
    else:
        assert "大致相符" in zh and "roughly agree" in en


def test_the_step_exponent_agrees_with_the_growth_share_printed_beside_it():
    """Review r14 (HIGH): 「无缓存的单步指数 0.44 在 0 和 1 之间：固定开销和随 t 增长的部分都有份」 beside 「这部分占单步的
    83%，随 t 增长的部分占大头」. With a step time fixed + b·t, a share of 83 % from t = 16 to 184 implies an exponent
    near 0.9 over t = 112 -> 184; the measured eighths bent (0.12 ms per token, then 0.05): that is said instead."""
    assert lesson.implied_exponent(83, 16, 184, 112, 184) == pytest.approx(0.8855, abs=1e-4)
    assert lesson.implied_exponent(0, 16, 184, 112, 184) != lesson.implied_exponent(0, 16, 184, 112, 184)  # NaN
    reviewed = _step(0.44, 13.42, 17.02, first=2.9)  # 2.90 -> 13.42: 0.110 ms per token; then 0.050
    assert reviewed["share"].text == "83" and reviewed["implied"].text == "0.89"
    said = lesson.STEP_EXPONENT.choose(reviewed, {"mode": "none"})
    text = lesson.ZH.say(said)
    assert said.key == "decode.step_exponent.bends", said.key
    assert "占单步的 83% 推算，后半段的指数应约为 0.89" in text and "单步耗时变化约 0.110 ms" in text, text
    assert "每多一个 token 变化约 0.050 ms" in text and "不作解读" in text and "都有份" not in text
    # the same exponent beside a straight line and a share that implies it: read, with the share
    agreeing = _step(0.44, 13.42, 17.02, first=12.0)
    assert lesson.STEP_EXPONENT.choose(agreeing, {"mode": "none"}).key == "decode.step_exponent.mixed"
    assert "两者大致相符" in lesson.ZH.say(lesson.STEP_EXPONENT.choose(agreeing, {"mode": "none"}))
    # within the band the reading stands; past it, without a bend, it is noise
    for k, key in [(0.65, "mixed"), (1.0, "linear")]:  # the second half's ends give k too (13.42 -> 18.53, 22.05)
        step = _step(k, 13.42, round(13.42 * (184 / 112) ** k, 2), first=2.9)
        assert step["implied"].value - lesson.SHARE_BAND <= k and step["ends_k"].value == k
        assert lesson.STEP_EXPONENT.choose(step, {"mode": "none"}).key.endswith(key)
    assert lesson.STEP_EXPONENT.choose(_step(1.0, 15.0, 20.0), {"mode": "none"}).key == "decode.step_exponent.off_share"
    # the run these fixes were first tried on (load 1-2): 13.70 -> 31.00 -> 48.72 ms, 72 %, exponent 0.95
    h31 = lesson.STEP_EXPONENT.choose(_step(0.95, 31.00, 48.72, first=13.70), {"mode": "none"})
    assert h31.key == "decode.step_exponent.linear" and "应约为 0.74，两者大致相符" in lesson.ZH.say(h31)
    # from a run: the growth sentence and the exponent sentence print the same share
    none, kv = _latency_shapes()["review r14: bending, one cached spike"]
    said = _said(lesson.explain_latency({"none": none, "kv": kv}, lesson.timing_model()))
    assert "占单步的 85%，随 t 增长的部分占大头" in said["decode.uncached.growth_dominates"]
    assert "占单步的 85% 推算" in said["decode.step_exponent.bends"]
    assert "decode.step_exponent.mixed" not in said
    # and where the curve bends upward (level, then rising), that is said too, not 「接近 1」
    none, kv = _latency_shapes()["level, then rising"]
    said = _said(lesson.explain_latency({"none": none, "kv": kv}, lesson.timing_model()))
    assert "decode.step_exponent.steepens" in said and "后半段每个 token 的变化比前半段大得多" in said["decode.step_exponent.steepens"]


def test_one_outlying_eighth_is_named_and_the_other_seven_are_read():
    """Review r14 (MEDIUM): seven cached eighths rising smoothly (1.44 -> 1.61 ms) and one spike (2.58 ms) ending
    them were called 「计时噪声太大」. The spike is named, the seven are read; what follows reads those seven."""
    e = [1.44, 1.47, 1.49, 1.52, 1.55, 1.58, 1.61, 2.58]
    assert lesson.lone_outlier(e, 1.54) == 7
    claim = lesson.CACHED.choose(_series_numbers(e, 1.54))
    text = lesson.ZH.say(claim)
    assert claim.key == "decode.cached.grows_outlier", claim.key
    assert "其中 2.58 ms 那一段偏离了其余七段的走势" in text and "从 t = 16 附近的 1.44 ms 涨到 t = 160 附近的 1.61 ms" in text
    assert "约占单步的 11%" in text, text
    # the same seven without the spike are not an outlier case; a steady fall is not one either
    assert lesson.CACHED.choose(_series_numbers(e[:7] + [1.64], 1.54)).key == "decode.cached.grows"
    falling = [4.95, 4.88, 4.81, 4.73, 4.66, 4.59, 4.52, 4.45]
    assert lesson.CACHED.choose(_series_numbers(falling, 4.70)).key == "decode.cached.noisy"
    # two spikes: no one outlier to name
    assert lesson.CACHED.choose(_series_numbers(e[:3] + [2.6] + e[4:], 1.54)).key == "decode.cached.noisy"
    # a printed outlier that is not one of the eighths, or a seven whose printed ends are not theirs, never holds
    numbers = _series_numbers(e, 1.54)
    rule = lesson.CACHED.rule("decode.cached.grows_outlier")
    for name, wrong in (("outlier", 2.57), ("rest_last", 2.58)):
        bad = {n: numbers[n] for n in rule.shows} | {name: claims.number(wrong, 2, "ms")}
        assert not rule.admits(claims.Claim(rule.key, bad))
    # from a run: the exponent fitted over all steps is not read; the extrapolation uses the seven's slope
    none, kv = _latency_shapes()["review r14: bending, one cached spike"]
    said = _said(lesson.explain_latency({"none": none, "kv": kv}, lesson.timing_model()))
    assert "离群的 2.58 ms" in said["decode.exponent_outlier.unread"]
    assert "有缓存每步的耗时随 t 增长约 1.18 µs/token" in said["decode.extrapolation.both"]  # (1.61 - 1.44) / 144
    # the uncached twin: a spike in the middle of a rise too small for 「rises_rough」
    none, kv = _latency_shapes()["busy, one uncached spike"]
    said = _said(lesson.explain_latency({"none": none, "kv": kv}, lesson.timing_model()))
    assert "其中 20.00 ms 那一段" in said["decode.uncached.rises_outlier"] and "约占单步的 26%" in said["decode.uncached.rises_outlier"]
    # level but for one: the flat twin (issue 31's burst at the end)
    num = claims.number
    flat = lesson.UNCACHED.choose({**_series_numbers([15.9] * 7 + [27.0], 15.9), "rate": num(30, 1, "GFLOP/s"),
                                   "growth": num(1.7, 1), "dip_from": num(15.9, 2, "ms"), "dip_to": num(15.9, 2, "ms")})
    assert flat.key == "decode.uncached.flat_outlier" and "其中 27.00 ms 那一段" in lesson.ZH.say(flat)


def test_the_totals_print_the_work_counted_for_the_run_that_was_timed(tiny_model):
    """Review r14 (MEDIUM): the prediction compared the timed ratio with the count printed for n = 64, while the run
    timed 192 tokens (counted about 98×). The totals print the count of the timed run's own trace."""
    from kvlab.lessons.decode.sentences import _totals

    # a real run, prompt 3 and 6 new tokens: 6 passes over 3 .. 8 tokens without a cache, 3 + 5 with one
    res = lesson.measure_decode_latency(tiny_model, 6, repeats=1, prompt_len=3, progress=False)
    ends = {m: lesson.timing_ends(res[m]) for m in res}
    real = _totals(res["none"], res["kv"], ends["none"], ends["kv"], tiny_model.config)
    assert (real.fields["n"].text, real.fields["none_kv"].text, real.fields["kv_kv"].text) == ("6", "33", "8")
    assert real.fields["counted"].text == "4.1"
    # the default run's shape: a prompt of 4, then the synthetic decode passes at t = 5 .. 196
    none, kv = _latency_shapes()["idle"]
    totals = lesson.explain_latency({"none": none, "kv": kv}, lesson.timing_model())[0]
    text = lesson.ZH.say(totals)
    assert totals.fields["none_kv"].text == f"{sum(range(4, 197)):,}" and totals.fields["kv_kv"].text == "196"
    assert "同样的 192 个新 token（按这次的 trace 数，每层无缓存共为 19,300 个 token 投影 K/V，有缓存只投影 196 个，" \
           "投影 K/V 的 token 数相差 98.5 倍；" in text, text
    wrong = dict(totals.fields) | {"counted": claims.number(33.0, 1)}  # the count of another length
    assert not lesson.TOTALS.rule(totals.key).admits(claims.Claim(totals.key, wrong))
    bare = dataclasses.replace(none, k_tokens=[])
    with pytest.raises(ValueError, match="k_tokens"):
        lesson.explain_latency({"none": bare, "kv": kv}, lesson.timing_model())


def test_the_long_runs_share_says_between_which_lengths():
    """Review r14 (LOW): 「20%」 was the growth share between t = 68 and 964; the sentence says so."""
    t = list(range(5, 1029))
    text = lesson.ZH.say(lesson.explain_growth(lesson.fit_step_time(_fake("kv", t, [2 + 0.001 * x for x in t])),
                                               lesson.timing_model())[0])
    assert "从 t = 68 到 964 多出的这部分，占 t = 964 附近实测单步中位数 2.96 ms 的 30%" in text, text


def test_a_series_that_swings_between_level_ends_is_not_called_level():
    """A third-review run (cached, at load ~1.5): 5.74, 2.16, 1.72, 5.33, 6.04, 6.71, 7.12, 6.04 ms around a median of
    5.69 was called level because its ends are within a tenth of the median. The middle swings by two thirds: the
    series is noise, not a level line; a level one still reads as level."""
    swinging = [5.74, 2.16, 1.72, 5.33, 6.04, 6.71, 7.12, 6.04]
    claim = lesson.CACHED.choose(_series_numbers(swinging, 5.69))
    assert claim.key == "decode.cached.noisy", claim.key
    level = [5.74, 5.61, 5.52, 5.80, 5.66, 5.70, 5.59, 5.69]
    claim = lesson.CACHED.choose(_series_numbers(level, 5.66))
    assert claim.key == "decode.cached.flat" and "每一段离它也都不到三成" in lesson.ZH.say(claim)


def test_after_a_level_series_the_exponent_is_never_read_and_no_reason_contradicts_the_page():
    """Review 4 (HIGH), cell 17: cached eighths 1.57, 1.14, 1.13, 1.23, 1.32, 1.21, 1.28, 1.59 ms (median 1.27) were
    said level, and then 「有缓存的单步指数 0.39 … 和各段中位数对不上 … 各段的斜率又看不出明显的弯：这是计时噪声」:
    0.39 matches the second half's ends (1.32 -> 1.59 ms over t 112 -> 184), and the slope per token goes from
    -0.0026 to +0.0037 ms: it bends. After a level sentence the exponent is not read, whatever it is."""
    num = claims.number
    level = lesson.CACHED.choose(_series_numbers(REVIEW4_KV, 1.27))
    assert level.key == "decode.cached.flat", level.key
    # the run's exponent numbers: a negative first-half slope is printed, sound, and read as the upward bend it is
    step = _step(0.39, 1.32, 1.59, first=1.57)
    assert (step["slope_early"].text, step["slope_late"].text, step["share"].text) == ("-0.003", "0.004", "1")
    assert step["slope_early"].sound
    alone = lesson.STEP_EXPONENT.choose(step, {"mode": "kv"})
    assert alone.key == "decode.step_exponent.steepens", alone.key
    text = lesson.ZH.say(alone)
    assert "每多一个 token 单步耗时变化约 -0.003 ms" in text and "涨到" not in text and "看不出明显的弯" not in text, text
    # beside the level sentence: not read, pointing back to it (whatever STEP_EXPONENT would have said)
    far = lesson.CROSSOVER.choose({"cross": num(1568, 0), "n": num(195, 0)})
    for timing in (_fake("kv", T, _by_eighths(REVIEW4_KV)), *(kv for _none, kv in _latency_shapes().values())):
        for key in ("decode.cached.flat", "decode.cached.flat_outlier", "decode.uncached.flat"):
            reading = _exponent_claims(timing, "kv", claims.Claim(key, {}, {}), far)[0]
            assert reading.key in ("decode.exponent_unread.level", "decode.step_exponent.unfit"), (key, reading.key)
    said = _said(lesson.explain_latency(dict(zip(("none", "kv"), _latency_shapes()["review 4: cached dips and returns"])),
                                        lesson.timing_model()))
    text = said["decode.exponent_unread.level"]
    assert text.startswith("有缓存的单步指数 ") and "前面讲有缓存各段耗时的那句已经说明，这么短的长度内看不出随 t 的增长，这个指数不作解读。" in text
    assert "对不上" not in "".join(said.values())
    # an exponent off the share beside slopes that do not bend says only that they disagree, and why it is not read
    off = lesson.STEP_EXPONENT.choose(_step(1.0, 15.0, 20.0), {"mode": "none"})
    assert off.key == "decode.step_exponent.off_share" and "斜率" not in lesson.ZH.say(off)
    assert "和按增长占比推算的对不上" in lesson.ZH.say(off)


def test_the_totals_say_the_ratio_of_kv_projections_and_the_flops_of_the_whole_generation(tiny_model):
    """Review 4 (MEDIUM), cell 17: 「每层无缓存共为 19,104 个 token 投影 K/V，有缓存只投影 195 个，计算量相差 98.0 倍」:
    98× is the K/V projections' ratio; the whole generation's FLOPs (LM head included) differ about 77×."""
    from kvlab.costs import pass_cost
    from kvlab.lessons.decode.sentences import _totals

    c = lesson.timing_model().config
    t = list(range(5, 196))  # the reviewed run: a prompt of 4, then passes at t = 5 .. 195 (192 tokens)
    none, kv = _fake("none", t, [10.0] * len(t)), _fake("kv", t, [1.3] * len(t))
    assert (sum(none.k_tokens), sum(kv.k_tokens)) == (19_104, 195)
    none_flops = sum(pass_cost(c, s).flops for s in range(4, 196))
    kv_flops = pass_cost(c, 4).flops + sum(pass_cost(c, 1, s - 1).flops for s in range(5, 196))
    assert (lesson.generation_flops(c, none), lesson.generation_flops(c, kv)) == (none_flops, kv_flops)
    claim = _totals(none, kv, lesson.timing_ends(none), lesson.timing_ends(kv), c)
    text = lesson.ZH.say(claim)
    assert "投影 K/V 的 token 数相差 98.0 倍" in text and "计算量相差" not in text, text
    assert claim.fields["flops"].text == f"{none_flops / kv_flops:.1f}" and 70 < none_flops / kv_flops < 85
    assert f"整次生成的浮点运算量无缓存 {none_flops / 1e9:.2f} GFLOP、有缓存 {kv_flops / 1e9:.2f} GFLOP，" \
           f"相差 {none_flops / kv_flops:.1f} 倍" in text, text
    wrong = dict(claim.fields) | {"flops": claims.number(98.0, 1)}  # the projections' ratio called the FLOPs'
    assert not lesson.TOTALS.rule(claim.key).admits(claims.Claim(claim.key, wrong))
    # a tiny run's FLOPs are printed in a unit that leaves both at least 1
    res = lesson.measure_decode_latency(tiny_model, 6, repeats=1, prompt_len=3, progress=False)
    small = _totals(res["none"], res["kv"], lesson.timing_ends(res["none"]), lesson.timing_ends(res["kv"]),
                    tiny_model.config)
    assert small.fields["kv_flop"].value >= 1 and small.fields["kv_flop"].unit.endswith("FLOP")


def test_beside_a_noisy_series_neither_exponent_is_read_and_each_unread_reason_is_the_one_given():
    """Review 5 (MEDIUM), cell 17: cached eighths 2.02, 2.07, 2.20, 1.35, 1.30, 1.14, 1.23, 1.38 ms (median 1.38) were
    said too noisy (decode.cached.noisy), then 「有缓存的累计指数 0.88 接近 1：总时间大致与 n 成正比」. (LOW) the step
    exponent's unread reason said 「这么短的长度内…分不出来」 where the sentence it points to said the timing was
    too noisy, and 「上一句」 pointed at the crossover sentence for the uncached mode."""
    num = claims.number
    noisy = lesson.CACHED.choose(_series_numbers(REVIEW5_KV, 1.38))
    assert noisy.key == "decode.cached.noisy", noisy.key
    said = lesson.explain_latency(dict(zip(("none", "kv"), _latency_shapes()["review 5: cached falls halfway"])),
                                  lesson.timing_model())
    keys = [(c.key, c.terms.get("mode")) for c in said]
    assert ("decode.cached.noisy", None) in keys and ("decode.exponent_unread.noisy", "kv") in keys
    assert ("decode.exponent_unread.cumulative_noisy", "kv") in keys
    assert not any(k.startswith("decode.cumulative.") and mode == "kv" for k, mode in keys), keys
    text = "\n".join(lesson.ZH.say(c) for c in said)
    assert "有缓存的累计指数" in text and "同样因为有缓存这一次计时噪声太大，这个指数也不作解读" in text, text
    assert "前面讲有缓存各段耗时的那句已经说明，这一次计时噪声太大" in text and "分不出来" not in text
    assert "上一句" not in text
    # every substantive cumulative reading is withheld beside a noisy series (of either mode), whatever k is
    far = lesson.CROSSOVER.choose({"cross": num(1568, 0), "n": num(195, 0)})
    for name, (none, kv) in _latency_shapes().items():
        for mode, timing, key in (("none", none, "decode.uncached.noisy"), ("kv", kv, "decode.cached.noisy")):
            step, overall = _exponent_claims(timing, mode, claims.Claim(key, {}, {}), far)
            rules = {r.key: r for c in lesson.CHOOSERS for r in c.rules}
            assert not rules[step.key].substantive and not rules[overall.key].substantive, (name, mode, overall.key)
            # seventh review (MEDIUM): off_share quoted a growth share right after 「噪声太大」; now never
            assert step.key in ("decode.exponent_unread.noisy", "decode.step_exponent.unfit"), (name, mode, step.key)
    # the sentence each unread key points back to says what it says it did
    zh = lesson.ZH.templates
    assert "这一次计时噪声太大" in zh["decode.cached.noisy"] and "这一次计时噪声太大" in zh["decode.uncached.noisy"]
    assert "看不出随 t 的增长" in zh["decode.cached.flat"] and "看不出随 t 的增长" in zh["decode.uncached.flat"]
    # the crossover prints with a thousands separator, as cell 16 does
    assert "t ≈ 1,568" in lesson.ZH.say(far)


def test_the_gap_between_the_timed_and_the_flops_ratio_is_split_by_printed_numbers():
    """Review 5 (LOW), cell 17: 7.0× timed against 76.9× FLOPs, unexplained. The cached generation's 1.73 GFLOP at the
    74.5 GFLOP/s measured without a cache is 23.22 ms, 0.121 ms per pass over 192 passes, against a median step of
    1.38 ms: about 91 % of a cached step is fixed cost."""
    num = claims.number
    review = {"speedup": num(7.0, 1), "flops": num(76.9, 1), "kv_flop": num(1.73, 2, "GFLOP"),
              "rate": num(74.5, 1, "GFLOP/s"), "compute": num(23.22, 2, "ms"), "passes": num(192, 0),
              "per_step": num(0.121, 3, "ms"), "median": num(1.38, 2, "ms"), "share": num(91, 0, "%")}
    claim = lesson.FIXED_COST.choose(review)
    assert claim.key == "decode.fixed_cost.share", claim.key
    text = lesson.ZH.say(claim)
    assert "用时只差 7.0 倍，浮点运算量却差 76.9 倍" in text and "只需约 23.22 ms" in text and "约 91% 不是算术本身的时间" in text, text
    for name, wrong in (("share", num(50, 0, "%")), ("compute", num(2.32, 2, "ms")), ("per_step", num(0.5, 3, "ms")),
                        ("speedup", num(80.0, 1))):  # a share, a division or a ratio the printed numbers do not give
        assert lesson.FIXED_COST.choose(review | {name: wrong}).key == "decode.fixed_cost.unclear", name
    said = _said(lesson.explain_latency(dict(zip(("none", "kv"), _latency_shapes()["review 5: cached falls halfway"])),
                                        lesson.timing_model()))
    assert "decode.fixed_cost.share" in said and "全部步的中位数" in said["decode.cached.noisy"]
    # no growth measured without a cache: no rate, the gap is not split
    none, kv = _latency_shapes()["negative slope"]
    assert "decode.fixed_cost.unclear" in _said(lesson.explain_latency({"none": none, "kv": kv}, lesson.timing_model()))


def test_one_jump_halfway_is_named_and_neither_a_bend_nor_the_rate_is_read_as_exact():
    """Review 6 (HIGH), cell 17: uncached eighths 4.95, 5.87, 8.06, 9.11 | 24.02, 24.77, 28.35, 28.94 ms, said
    rising unevenly (timing noise), then 「后半段每个 token 的变化比前半段小得多…曲线向下弯」: one jump of 14.91 ms
    (62 % of the whole rise) is no bend. (MEDIUM) the rate and the extrapolation from its ends are said rough."""
    none, kv = _latency_shapes()["review 6: one jump halfway"]
    said_ = lesson.explain_latency({"none": none, "kv": kv}, lesson.timing_model())
    said = _said(said_)
    assert "decode.uncached.rises_uneven" in said, said
    assert not {"decode.step_exponent.bends", "decode.step_exponent.steepens"} & set(said), said
    jump = said["decode.exponent_jump.unread"]
    assert "第 4 段 9.11 ms 到第 5 段 24.02 ms 一下跳了 14.91 ms" in jump and "（4.95 ms → 28.94 ms）的 62%" in jump, jump
    assert "每步只测了 1 次" in jump and "不作解读" in jump, jump
    assert "粗估" in said["decode.fixed_cost.share_rough"] and "与 t 无关的固定开销" in said["decode.fixed_cost.share_rough"]
    assert "速率和外推只是粗估" in said["decode.extrapolation.kv_flat_rough"], said
    # the bend alone refuses a jump: the same exponent numbers with the eighths as printed
    step = _step(0.47, 24.02, 28.94, first=4.95)
    assert lesson.STEP_EXPONENT.choose(step, {"mode": "none"}).key == "decode.step_exponent.bends"
    step["eighths"] = claims.series(REVIEW6_NONE, 2, "ms")
    assert lesson.STEP_EXPONENT.choose(step, {"mode": "none"}).key not in ("decode.step_exponent.bends",
                                                                             "decode.step_exponent.steepens")
    # a rough rise without a step over half the rise: not read, no jump named; an even rise keeps the plain rate
    dip = _said(lesson.explain_latency(dict(zip(("none", "kv"), _latency_shapes()["busy, a dip, no jump"])),
                                       lesson.timing_model()))
    assert {"decode.uncached.rises_rough", "decode.exponent_jump.rough", "decode.extrapolation.both_rough"} <= set(dip)
    idle = _said(lesson.explain_latency(dict(zip(("none", "kv"), _latency_shapes()["idle"])), lesson.timing_model()))
    assert "decode.fixed_cost.share" in idle and not any(k.endswith("_rough") for k in idle), idle
    # the jump's predicate checks its printed numbers
    wrong = {**said_[3].fields, "jump_share": claims.number(40, 0, "%")}
    assert not lesson.STEP_JUMP.rule("decode.exponent_jump.unread").holds_on({k: n.value for k, n in wrong.items()})


# -- the English edition ----------------------------------------------------------------------------------------
CJK = __import__("re").compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
NUMBERS = __import__("re").compile(r"\d+(?:\.\d+)?")


def _view_text(view) -> str:
    return view.html + "".join(f.to_json() for f in view.figures)


def test_the_walkthrough_in_english_has_no_chinese_and_the_same_numbers():
    from kvlab import load_demo_model
    from kvlab.language import using_language

    model, tok = load_demo_model("cpu", lang="en")
    steps = lesson.decode_walkthrough(model, tok, lesson.PROMPTS.text("walkthrough", "en"), steps=3)
    for step, layer, head in ((1, 0, 0), (2, 1, 3), (3, 3, 1)):
        zh = lesson.render_step(steps, step, layer, head)
        with using_language("en"):
            en = lesson.render_step(steps, step, layer, head)
            panel = lesson.walkthrough_panel(model, steps)
        assert not CJK.search(_view_text(en)), en.html
        # the same numbers in the same order, once the tokens' own text is left out
        plain = [NUMBERS.findall(v.html.replace("<b>", "").replace("</b>", "")) for v in (zh, en)]
        assert plain[0] == plain[1], plain
    assert "<b>Step 3</b>" in en.html
    described = [w.description for w in panel.controls.values()]
    described += [str(label) for label, _ in panel.controls["head"].options]
    assert described[:3] == ["Decode step", "Layer", "Attention head"] and "1 (KV group 0)" in described, described
    assert not any(CJK.search(d) for d in described), described


def test_the_latency_refusal_and_the_figures_in_english():
    from kvlab.language import using_language

    timing = lesson.timing_model()
    with pytest.raises(InputError) as zh:
        lesson.render_latency(timing, 1000, 9)
    with using_language("en"):
        with pytest.raises(InputError) as en:
            lesson.render_latency(timing, 1000, 9)
        results = {"none": _timing("none", [0.01, 0.02, 0.04, 0.08]), "kv": _timing("kv", [0.01, 0.01, 0.01, 0.01])}
        figures = [decode_plots.latency_figure(results), decode_plots.work_figure([2, 3, 4], [2, 3, 4], [2, 1, 1]),
                   decode_plots.step_growth_figure([1, 2, 3], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0],
                                                   lesson.say("growth_label")),
                   decode_plots.topk_figure([("A", 0.5), (" b", 0.25)], "A b"),
                   decode_plots.cache_rows_figure(np.ones((3, 4)), np.ones((3, 4)), ["A", " b", " c"], 0, 1, 1)]
    assert not CJK.search(str(en.value)) and "Repeats (median taken)" in str(en.value)
    assert sorted(NUMBERS.findall(str(zh.value))) == sorted(NUMBERS.findall(str(en.value)))
    for fig in figures:
        assert not CJK.search(fig.to_json()), fig.layout.title.text
