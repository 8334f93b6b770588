"""The benchmark's structure and arithmetic (no timing assertions: machines are noisy)."""
import json

import pytest

from kvlab import bench


@pytest.fixture(scope="module")
def quick_report():
    cfg = bench.BenchConfig(**(bench.asdict(bench.PRESETS["quick"]) | {"new_tokens": 12, "repeats": 2,
                                                                       "checkpoints": ()}))
    return bench.run_bench(cfg, progress=False)


def test_report_structure(quick_report):
    r = quick_report
    expected = {f"kvlab:{m}" for m in ("kv", "none", "k_only", "dynamic", "int8")}
    expected |= {"transformers:cached", "transformers:no-cache"}
    assert set(r["results"]) == expected
    for name, item in r["results"].items():
        assert len(item["wall_s"]) == 2 and len(item["step_s"]) == 12
        assert item["tokens_per_s_min"] <= item["tokens_per_s"] <= item["tokens_per_s_max"]
    for name in ("kvlab:kv", "kvlab:none", "kvlab:k_only", "kvlab:dynamic", "transformers:cached",
                 "transformers:no-cache"):
        assert r["results"][name]["same_tokens_as_none"], name
    assert len(r["bandwidth"]["per_round"]) == 2
    json.dumps(r)  # serialisable for --json


def test_ratios_are_computed_from_measurements(quick_report):
    res, ratios = quick_report["results"], quick_report["ratios"]
    assert ratios["kv_vs_none"] == pytest.approx(res["kvlab:kv"]["tokens_per_s"] / res["kvlab:none"]["tokens_per_s"])
    assert ratios["kv_vs_hf_cached"] == pytest.approx(
        res["kvlab:kv"]["tokens_per_s"] / res["transformers:cached"]["tokens_per_s"])
    kv = res["kvlab:kv"]
    n = quick_report["config"]["new_tokens"]
    assert kv["tokens_per_s"] == pytest.approx(n / sorted(kv["wall_s"])[len(kv["wall_s"]) // 2]) or \
        kv["tokens_per_s"] == pytest.approx(n / (sum(kv["wall_s"]) / 2))
    fractions = kv["bandwidth_fraction_per_round"]
    assert kv["bandwidth_fraction"] == pytest.approx(sum(fractions) / 2)
    assert ratios["kv_bandwidth_fraction"] == kv["bandwidth_fraction"]


def test_format_report_mentions_every_target(quick_report):
    text = bench.format_report(quick_report)
    for piece in ('"kv" tokens/s over "none"', "transformers cached generate", "bandwidth bound", '"k_only"',
                  "would", "kvlab:int8"):
        assert piece in text
    assert not bench.is_reference_setting(quick_report)


def test_weight_bytes_per_step_excludes_embedding_table():
    from kvlab import ModelConfig, ToyTransformer

    m = ToyTransformer(ModelConfig(vocab_size=100, d_model=8, n_layer=1, n_head=2))
    total = sum(p.numel() * 4 for p in m.parameters())
    assert bench.weight_bytes_per_step(m) == total - 100 * 8 * 4 + 8 * 4


@pytest.mark.parametrize("args", [["--new-tokens", "0"], ["--modes", "kv,paged"], ["--dtype", "fp64"],
                                  ["--device", "tpu"]])
def test_cli_rejects_bad_arguments(args, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--quick", *args])
    assert exc.value.code == 2


def test_bench_figure_accepts_a_real_report(quick_report):
    from kvlab.viz.bench_plots import bench_figure

    fig = bench_figure(quick_report)
    assert len(fig.data) == 1 + len(quick_report["results"])
