"""The benchmark: its arithmetic on hand-made measurements, its structure on a real quick run, and its
command line. No timing assertions: machines are noisy."""
import json
import re

import peak_memory
import pytest
import torch

from kvlab import CACHE_MODES, bench
from kvlab.measure import DecodeTiming, Rate


def run(name, walls, first_pass, cache_bytes=(), tokens=None, new=11):
    passes = [[fp] + [0.1] * (new - 1) for fp in first_pass]
    return DecodeTiming(name=name, seq_len=list(range(4, 4 + new)), pass_seconds=passes, wall_seconds=walls,
                        batch_size=1, new_tokens=new,
                        tokens=tokens if tokens is not None else torch.arange(4 + new)[None],
                        cache_bytes=list(cache_bytes))


@pytest.fixture
def handmade():
    cfg = bench.BenchConfig(vocab_size=100, d_model=8, n_layer=1, n_head=2, new_tokens=11, repeats=2, hf=False)
    other = torch.arange(4 + 11)[None].clone()
    other[0, -3:] = 0  # the last 3 new tokens differ from "none"
    runs = {
        "kvlab:kv": run("kv", [2.0, 3.0], [0.5, 1.0], cache_bytes=[0] + [1000] * 10),
        "kvlab:none": run("none", [8.0, 12.0], [0.5, 0.5]),
        "kvlab:int8": run("int8", [2.5, 2.5], [0.5, 0.5], cache_bytes=[0] + [500] * 10, tokens=other),
    }
    bw = [Rate(1e6, 1e6, [1e6], "test"), Rate(2e6, 2e6, [2e6], "test")]
    return bench.BenchReport(cfg, n_params=1234, weight_bytes_per_step=9000, machine=bench.machine_info("cpu"),
                             bandwidth=bw, runs=runs)


def test_ratios_by_hand(handmade):
    r = handmade.ratios
    assert r["kv_vs_none"] == pytest.approx(11 / 2.5 / (11 / 10.0))  # medians: 2.5 s vs 10 s -> 4x
    assert r["kv_vs_none"] == pytest.approx(4.0)
    assert r["int8_vs_kv"] == pytest.approx(1.0)
    assert r["kv_vs_hf_cached"] is None and r["k_only_vs_none"] is None


def test_bandwidth_fraction_by_hand(handmade):
    # Step bytes: 9000 weights + 1000 cache = 10,000 B. Repeat 1: decode step (2.0 - 0.5) / 10 = 0.15 s,
    # round bandwidth 1e6 B/s -> 10000 / 0.15 / 1e6 = 0.0667. Repeat 2: (3.0 - 1.0) / 10 = 0.2 s at 2e6 -> 0.025.
    assert handmade.bytes_per_step("kvlab:kv") == 10_000
    assert handmade.bandwidth_fractions("kvlab:kv") == pytest.approx([1 / 15, 0.025])
    assert handmade.bandwidth_fraction("kvlab:kv") == pytest.approx((1 / 15 + 0.025) / 2)
    assert handmade.bytes_per_step("kvlab:none") is None  # no cache: no bandwidth figure claimed


def test_matching_tokens_counts_positions(handmade):
    assert handmade.matching_new_tokens("kvlab:kv") == 11 and handmade.matching_new_tokens("kvlab:int8") == 8


def test_format_report_marks_targets_as_hypothetical_off_the_reference(handmade):
    text = bench.format_report(handmade)
    assert "4.00x   target >= 5.0x   (would miss)" in text
    assert "8/11 positions" in text and not handmade.is_reference_setting()


@pytest.fixture(scope="module")
def quick_report():
    cfg = bench.BenchConfig(**(bench.asdict(bench.BENCH_SETTINGS["quick"]) | {"new_tokens": 12, "repeats": 2,
                                                                              "checkpoints": ()}))
    return bench.run_bench(cfg, progress=False)


def test_quick_run_structure(quick_report):
    r = quick_report
    assert set(r.runs) == {f"kvlab:{m}" for m in CACHE_MODES} | {
        "transformers:cached", "transformers:no-cache"}
    for name, item in r.runs.items():
        assert len(item.wall_seconds) == 2 and len(item.step_seconds) == 12, name
    for name in ("kvlab:kv", "kvlab:none", "kvlab:k_only", "kvlab:dynamic", "transformers:cached",
                 "transformers:no-cache"):
        assert r.matching_new_tokens(name) == 12, name  # identical weights, identical greedy tokens
    assert len(r.bandwidth) == 2
    json.dumps(r.to_json())  # serialisable for --json


def test_weight_bytes_per_step_excludes_embedding_table():
    from kvlab import ModelConfig, ToyTransformer

    m = ToyTransformer(ModelConfig(vocab_size=100, d_model=8, n_layer=1, n_head=2))
    # per layer: wqkv 8x24, wo 8x8, gate/up 8x(2*64), down 64x8, two norms of 8; final norm 8; head 8x100
    d_ff = m.config.d_ff
    layer = 8 * 24 + 8 * 8 + 8 * 2 * d_ff + d_ff * 8 + 2 * 8
    assert bench.weight_bytes_per_step(m) == 4 * (layer + 8 + 8 * 100 + 8)  # + one embedding row


@pytest.mark.parametrize("args", [["--new-tokens", "0"], ["--modes", "kv,vllm"], ["--dtype", "fp64"],
                                  ["--device", "tpu"], ["--prompt-len", "1099511627776"],
                                  ["--batch-size", str(10**12)], ["--vocab-size", "99999999999999"]])
def test_cli_rejects_bad_arguments_with_a_usage_error(args, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.parse_config(["--quick", *args])
    assert exc.value.code == 2
    assert "usage: python -m kvlab.bench" in capsys.readouterr().err


def test_bench_figure_accepts_a_real_report(quick_report):
    from kvlab.viz.bench_plots import bench_figure

    fig = bench_figure(quick_report)
    assert len(fig.data) == 1 + len(quick_report.runs)
    assert list(fig.data[0].y) == pytest.approx([r.tokens_per_s for r in quick_report.runs.values()])


# -- the command line refuses, before running, what cannot run ------------------------------------------------
def cli_error(argv, capsys) -> str:
    """argparse's usage error (exit code 2), its last line; every option it names is one the command has."""
    with pytest.raises(SystemExit) as exc:
        bench.parse_config(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "usage: python -m kvlab.bench" in err and "Traceback" not in err, err
    line = err.strip().splitlines()[-1]
    flags = {s for a in bench.build_parser()._actions for s in a.option_strings}
    named = set(re.findall(r"--[a-z][a-z-]*", line))
    assert named <= flags, (named - flags, line)
    assert not re.findall(r"\b[a-z]+_[a-z_]+\b", line), line  # no field name the command line does not show
    return line


@pytest.mark.parametrize("args, flag", [
    (["--new-tokens", "1"], "--new-tokens"),  # used to name `checkpoints`, an option the command lacks
    (["--prompt-len", "200000", "--no-hf"], "--prompt-len"),  # its attention scores: about 1.3 TB
    (["--batch-size", "3000000", "--no-hf"], "--batch-size"),  # caches and activations
    (["--d-model", "100", "--n-head", "3"], "--d-model"),
    (["--d-model", "12", "--n-head", "4"], "--d-model"),  # 3 dimensions per head: RoPE needs an even number
    (["--n-kv-head", "3"], "--n-kv-head"),
    (["--prompt-len", "999990", "--new-tokens", "20"], "--prompt-len"),
])
def test_cli_names_the_option_to_change(args, flag, capsys):
    line = cli_error(["--quick", *args], capsys)
    assert line.startswith(f"python -m kvlab.bench: error: {flag}"), line


@pytest.mark.parametrize("target", ["/nonexistent/dir/r.json", "."])
def test_json_path_is_checked_before_the_run(target, capsys, monkeypatch):
    monkeypatch.setattr(bench, "run_bench", lambda *a, **k: pytest.fail("the benchmark ran before --json was checked"))
    line = cli_error(["--quick", "--json", target], capsys)
    assert line.startswith("python -m kvlab.bench: error: --json"), line


def test_json_to_a_writable_place_is_accepted(tmp_path):
    cfg, path = bench.parse_config(["--quick", "--json", str(tmp_path / "r.json")])
    assert path == str(tmp_path / "r.json") and not (tmp_path / "r.json").exists()


def test_peak_counts_what_scales_with_the_settings():
    """Each part grows with the setting that drives it: the attention of the longest pass with (P + N)^2, the
    caches the run keeps with repeats x modes x batch x length, transformers' copy of the weights."""
    base = bench.BenchConfig(**(bench.asdict(bench.BENCH_SETTINGS["quick"]) | {"hf": False, "checkpoints": ()}))
    longer = bench.BenchConfig(**(bench.asdict(base) | {"prompt_len": 2 * base.prompt_len + base.new_tokens,
                                                        "checkpoints": ()}))
    t0, t1 = base.prompt_len + base.new_tokens - 1, longer.prompt_len + longer.new_tokens - 1
    assert longer.peak_bytes()["attention"] / base.peak_bytes()["attention"] == pytest.approx((t1 / t0) ** 2)
    mc = base.model_config()
    one_cache = bench.kv_cache_bytes(mc.n_layer, mc.n_kv_head, mc.head_dim, t0, base.batch_size, base.dtype)
    assert base.peak_bytes()["caches"] >= base.repeats * one_cache * (len(base.modes) - 1)
    with_hf = bench.BenchConfig(**(bench.asdict(base) | {"hf": True, "checkpoints": ()}))
    element = 4  # fp32
    assert base.peak_bytes()["weights"] == element * mc.n_params()
    assert with_hf.peak_bytes()["weights"] == 2 * element * mc.n_params() + bench.TRANSFORMERS_LIBRARY


PEAK_SETUP = """
import json
from kvlab import bench
cfg = bench.BenchConfig(**(bench.asdict(bench.BENCH_SETTINGS["quick"]) | json.loads(sys.argv[1])))
"""


@pytest.mark.slow
@pytest.mark.skipif(not peak_memory.AVAILABLE, reason="reads the process's memory from Linux's /proc")
@pytest.mark.parametrize("settings", [
    {"prompt_len": 1500, "new_tokens": 4, "repeats": 1, "hf": False},  # one long no-cache pass
    {"prompt_len": 400, "new_tokens": 8, "repeats": 1, "batch_size": 8, "hf": True},  # transformers too
])
def test_peak_estimate_bounds_a_real_run(settings):
    """What a real run allocates at its peak stays under the estimate check_fits refuses runs with."""
    settings |= {"checkpoints": []}
    measured = peak_memory.peak_bytes(PEAK_SETUP, "bench.run_bench(cfg, progress=False)", json.dumps(settings))
    cfg = bench.BenchConfig(**(bench.asdict(bench.BENCH_SETTINGS["quick"]) | settings))
    estimate = sum(cfg.peak_bytes().values())
    print(f"measured {measured / 2**20:.0f} MiB, estimate {estimate / 2**20:.0f} MiB")
    assert measured < estimate, (measured, estimate)
