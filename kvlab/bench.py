"""Benchmark: ``python -m kvlab.bench [--quick]``.

Measures, in one process and alternating the runs after a warm-up, kvlab's decode in
every cache mode and transformers' ``LlamaForCausalLM.generate`` (cache on and off) on
identical weights, plus this machine's memory read bandwidth, and prints a table and
the ratios the course relies on. ``--json`` writes the report for
``kvlab.viz.bench_plots.bench_figure``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field

import torch

from ._validate import positive_int
from .config import ModelConfig
from .device import as_device, synchronize
from .generation import CACHE_MODES, generate
from .memory import format_bytes, torch_dtype
from .model import ToyTransformer
from .timing import cumulative, growth_exponent, median

# The targets, checked on the full (GPT-2-small-sized) preset.
TARGETS = {
    "kv_vs_none": 5.0,  # "kv" tokens/s >= 5x "none"
    "kv_vs_hf_cached": 1.5,  # kvlab "kv" >= 1.5x transformers' cached generate
    "kv_bandwidth_fraction": 0.5,  # kvlab decode reaches >= 50% of the bandwidth bound
    "k_only_vs_none_within": 0.15,  # "k_only" within 15% of "none"
}


@dataclass
class BenchConfig:
    vocab_size: int = 50257
    d_model: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_kv_head: int | None = None
    prompt_len: int = 4
    new_tokens: int = 200
    batch_size: int = 1
    dtype: str = "fp32"
    device: str | None = None
    repeats: int = 3
    modes: tuple = CACHE_MODES
    hf: bool = True
    seed: int = 0
    checkpoints: tuple = field(default=())  # generation lengths reported in the table

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_layer", "n_head", "prompt_len", "new_tokens", "batch_size",
                     "repeats"):
            setattr(self, name, positive_int(name, getattr(self, name)))
        bad = [m for m in self.modes if m not in CACHE_MODES]
        if bad or not self.modes:
            raise ValueError(f"modes must be a non-empty subset of {CACHE_MODES}, got {list(self.modes)}")
        torch_dtype(self.dtype, "dtype")
        if not self.checkpoints:
            n = self.new_tokens
            self.checkpoints = tuple(sorted({max(2, n // 4), max(2, n // 2), n}))
        if any(not 1 < c <= self.new_tokens for c in self.checkpoints):
            raise ValueError(f"checkpoints must lie in (1, new_tokens={self.new_tokens}], got {self.checkpoints}")

    def model_config(self) -> ModelConfig:
        return ModelConfig(vocab_size=self.vocab_size, d_model=self.d_model, n_layer=self.n_layer,
                           n_head=self.n_head, n_kv_head=self.n_kv_head,
                           max_seq_len=self.prompt_len + self.new_tokens + 8)


PRESETS = {
    # The reference setting: GPT-2-small-sized, 4-token prompt, 200 new tokens, fp32, batch 1.
    "gpt2-small": BenchConfig(),
    # CI-sized: seconds, same code paths.
    "quick": BenchConfig(vocab_size=2048, d_model=128, n_layer=2, n_head=4, new_tokens=24, repeats=2),
}


def measure_read_bandwidth(device, nbytes: int = 512 * 2**20, repeats: int = 7) -> dict:
    """Best observed rate (bytes/s) of reading a buffer far larger than the caches.

    A sum over a float32 tensor reads every byte once and writes nothing; the best of
    several runs is the bound a memory-bound kernel can hope to reach.
    """
    dev = torch.device(device)
    buf = torch.ones(nbytes // 4, dtype=torch.float32, device=dev)
    rates = []
    for i in range(repeats + 1):
        synchronize(dev)
        t0 = time.perf_counter()
        buf.sum()
        synchronize(dev)
        if i:  # the first run is the warm-up
            rates.append(nbytes / (time.perf_counter() - t0))
    del buf
    return {"bytes_per_s": max(rates), "median_bytes_per_s": median(rates), "buffer_bytes": nbytes}


def weight_bytes_per_step(model: ToyTransformer) -> int:
    """Bytes of weights one decode step reads: every matrix, but only one row of the embedding."""
    total = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if not n.startswith("embed"))
    return total + model.config.d_model * model.embed.weight.element_size()


class _StepClock:
    """A transformers streamer that timestamps every token ``generate`` emits."""

    def __init__(self):
        self.stamps: list[float] = []

    def put(self, value):
        self.stamps.append(time.perf_counter())

    def end(self):
        pass


def _run_kvlab(model, prompt, n, mode):
    synchronize(model.device)
    t0 = time.perf_counter()
    res = generate(model, prompt, n, cache=mode)
    synchronize(model.device)
    wall = time.perf_counter() - t0
    steps = [r.seconds for r in res.trace]  # prefill, then one decode pass per further token
    return {"wall": wall, "steps": steps, "tokens": res.tokens,
            "cache_bytes": [r.cache_bytes for r in res.trace]}


def _run_hf(hf, prompt, n, use_cache):
    ids = prompt.to(hf.device)
    clock = _StepClock()
    synchronize(hf.device)
    t0 = time.perf_counter()
    out = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                      do_sample=False, use_cache=use_cache, pad_token_id=0, streamer=clock)
    synchronize(hf.device)
    wall = time.perf_counter() - t0
    stamps = clock.stamps[1:]  # the first put() is the prompt itself
    steps = [b - a for a, b in zip([t0] + stamps[:-1], stamps)]  # first = prefill + first token
    return {"wall": wall, "steps": steps, "tokens": out.cpu()}


def run_bench(cfg: BenchConfig, progress: bool = True) -> dict:
    """Run every configured mode ``repeats`` times, alternating, and return the report dict."""
    from tqdm.auto import tqdm

    device = as_device(cfg.device)
    torch.manual_seed(cfg.seed)
    model = ToyTransformer(cfg.model_config(), seed=cfg.seed).to(device=device, dtype=torch_dtype(cfg.dtype)).eval()
    gen = torch.Generator().manual_seed(cfg.seed)
    prompt = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.prompt_len), generator=gen)
    runners = {f"kvlab:{m}": (lambda n, m=m: _run_kvlab(model, prompt, n, m)) for m in cfg.modes}
    hf_error = None
    if cfg.hf:
        try:
            from .interop import to_hf_llama

            hf = to_hf_llama(model)
            runners["transformers:cached"] = lambda n: _run_hf(hf, prompt, n, True)
            runners["transformers:no-cache"] = lambda n: _run_hf(hf, prompt, n, False)
        except ImportError as exc:
            hf_error = str(exc)
    names = list(runners)
    for name in names:  # warm-up: allocator, kernels, caches
        runners[name](min(8, cfg.new_tokens))
    runs = {name: [] for name in names}
    bandwidths = []
    bar = tqdm(total=cfg.repeats * len(names), desc="bench", disable=not progress)
    for r in range(cfg.repeats):
        # The bandwidth is measured in every round, between the runs: on shared machines it drifts.
        bandwidths.append(measure_read_bandwidth(device))
        order = names[r % len(names):] + names[: r % len(names)]  # rotate so no mode always runs first
        for name in order:
            bar.set_postfix_str(name)
            runs[name].append(runners[name](cfg.new_tokens))
            bar.update()
    bar.close()
    return summarize(cfg, model, runs, bandwidths, device, hf_error)


def summarize(cfg, model, runs, bandwidths, device, hf_error=None) -> dict:
    """Medians, spreads, exponents and ratios from the raw runs."""
    n, B = cfg.new_tokens, cfg.batch_size
    reference = runs.get("kvlab:none", next(iter(runs.values())))[0]["tokens"]
    w_bytes = weight_bytes_per_step(model)
    per_round = [b["bytes_per_s"] for b in bandwidths]
    bandwidth = {"bytes_per_s": max(per_round), "median_bytes_per_s": median(per_round), "per_round": per_round,
                 "buffer_bytes": bandwidths[0]["buffer_bytes"]}
    results = {}
    for name, reps in runs.items():
        walls = [r["wall"] for r in reps]
        decode_means = [(r["wall"] - r["steps"][0]) / max(1, n - 1) for r in reps]
        per_step = [median(col) for col in zip(*(r["steps"] for r in reps))]  # median over repeats, per step
        cum = cumulative(per_step)
        k = growth_exponent(range(1, n + 1), cum)
        item = {
            "tokens_per_s": B * n / median(walls),
            "tokens_per_s_min": B * n / max(walls),
            "tokens_per_s_max": B * n / min(walls),
            "wall_s": walls,
            "ttft_s": median([r["steps"][0] for r in reps]),
            "decode_step_s": median(decode_means),
            "decode_step_s_spread": [min(decode_means), max(decode_means)],
            "step_s": per_step,
            "growth_exponent": k,
            "at": {str(c): {"tokens_per_s": B * c / cum[c - 1], "step_ms": 1e3 * median(per_step[max(1, c - 5):c])}
                   for c in cfg.checkpoints},
            "same_tokens_as_none": bool(torch.equal(reps[0]["tokens"], reference)),
            "matching_new_tokens": int((reps[0]["tokens"][:, cfg.prompt_len:] == reference[:, cfg.prompt_len:])
                                       .all(dim=0).sum()),
        }
        if name.startswith("transformers") or name in ("kvlab:kv", "kvlab:dynamic", "kvlab:int8"):
            if name.startswith("transformers"):
                cache_per_token = model.config.n_layer * 2 * model.config.n_kv_head * model.config.head_dim * \
                    model.embed.weight.element_size() * B
                mean_cache = cache_per_token * (cfg.prompt_len + n / 2)
            else:
                mean_cache = sum(reps[0]["cache_bytes"][1:]) / max(1, n - 1)
            step_bytes = w_bytes + mean_cache
            item["bytes_per_step"] = step_bytes
            # Each repeat against the bandwidth measured in the same round (same machine state) ...
            fractions = [step_bytes / d / bw for d, bw in zip(decode_means, per_round)]
            item["bandwidth_fraction"] = median(fractions)
            item["bandwidth_fraction_per_round"] = fractions
            # ... and, conservatively, the median step against the best bandwidth seen in the whole run.
            item["bandwidth_fraction_vs_best"] = step_bytes / item["decode_step_s"] / bandwidth["bytes_per_s"]
        results[name] = item

    def ratio(a, b):
        return results[a]["tokens_per_s"] / results[b]["tokens_per_s"] if a in results and b in results else None

    ratios = {
        "kv_vs_none": ratio("kvlab:kv", "kvlab:none"),
        "kv_vs_hf_cached": ratio("kvlab:kv", "transformers:cached"),
        "k_only_vs_none": ratio("kvlab:k_only", "kvlab:none"),
        "dynamic_vs_kv": ratio("kvlab:dynamic", "kvlab:kv"),
        "int8_vs_kv": ratio("kvlab:int8", "kvlab:kv"),
        "hf_cached_vs_hf_no_cache": ratio("transformers:cached", "transformers:no-cache"),
        "kv_bandwidth_fraction": results.get("kvlab:kv", {}).get("bandwidth_fraction"),
        "hf_bandwidth_fraction": results.get("transformers:cached", {}).get("bandwidth_fraction"),
        "kv_bandwidth_fraction_vs_best": results.get("kvlab:kv", {}).get("bandwidth_fraction_vs_best"),
    }
    return {
        "config": asdict(cfg) | {"modes": list(cfg.modes), "checkpoints": list(cfg.checkpoints)},
        "model": {"n_params": model.config.n_params(), "weight_bytes_per_step": w_bytes,
                  "config": model.config.to_dict()},
        "machine": machine_info(device),
        "bandwidth": bandwidth,
        "results": results,
        "ratios": ratios,
        "targets": TARGETS,
        "transformers_error": hf_error,
    }


def machine_info(device) -> dict:
    dev = torch.device(device)
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    info = {"device": str(dev), "cpu": cpu, "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "python": sys.version.split()[0]}
    if dev.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(dev)
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        pass
    return info


def target_checks(report: dict) -> list[tuple[str, float | None, str, bool | None]]:
    """(description, measured value, target, met?) for each of the issue's targets."""
    r, t = report["ratios"], report["targets"]

    def at_least(v, goal):
        return None if v is None else v >= goal

    k_only = r["k_only_vs_none"]
    return [
        ('"kv" tokens/s over "none"', r["kv_vs_none"], f">= {t['kv_vs_none']}x", at_least(r["kv_vs_none"], t["kv_vs_none"])),
        ('kvlab "kv" over transformers cached generate', r["kv_vs_hf_cached"], f">= {t['kv_vs_hf_cached']}x",
         at_least(r["kv_vs_hf_cached"], t["kv_vs_hf_cached"])),
        ('kvlab "kv" decode / bandwidth bound', r["kv_bandwidth_fraction"], f">= {t['kv_bandwidth_fraction']:.0%}",
         at_least(r["kv_bandwidth_fraction"], t["kv_bandwidth_fraction"])),
        ('"k_only" tokens/s over "none"', k_only, f"1 ± {t['k_only_vs_none_within']}",
         None if k_only is None else abs(k_only - 1) <= t["k_only_vs_none_within"]),
    ]


def is_reference_setting(report: dict) -> bool:
    """True when the run used the setting the targets are defined for (gpt2-small preset, fp32, batch 1)."""
    ref = asdict(PRESETS["gpt2-small"])
    cfg = report["config"]
    keys = ("vocab_size", "d_model", "n_layer", "n_head", "prompt_len", "new_tokens", "batch_size", "dtype")
    return all(cfg[k] == ref[k] for k in keys) and cfg.get("n_kv_head") in (None, ref["n_head"])


def format_report(report: dict) -> str:
    cfg, m, bw = report["config"], report["machine"], report["bandwidth"]
    lines = [
        f"machine: {m['cpu']} | {m['cpu_count']} CPUs, torch threads {m['torch_threads']} | device {m['device']}"
        + (f" ({m['gpu']})" if "gpu" in m else "") + f" | torch {m['torch']}"
        + (f", transformers {m['transformers']}" if "transformers" in m else ""),
        f"model: d_model {cfg['d_model']}, {cfg['n_layer']} layers, {cfg['n_head']} heads, vocab {cfg['vocab_size']}, "
        f"{report['model']['n_params']:,} parameters, {cfg['dtype']}; prompt {cfg['prompt_len']} tokens, "
        f"{cfg['new_tokens']} new, batch {cfg['batch_size']}, {cfg['repeats']} alternating repeats",
        f"memory read bandwidth (sum over {format_bytes(bw['buffer_bytes'])}, once per round): "
        + ", ".join(f"{b / 1e9:.1f}" for b in bw["per_round"]) + " GB/s; weights read per decode step "
        f"{format_bytes(report['model']['weight_bytes_per_step'])}",
        "",
    ]
    cps = cfg["checkpoints"]
    head = f"{'run':<24}{'tok/s (min-max)':>22}{'TTFT ms':>9}{'decode ms':>11}{'exponent':>10}{'BW use':>8}"
    head += "".join(f"{'ms@' + str(c):>9}" for c in cps) + "  same tokens"
    lines.append(head)
    lines.append("-" * len(head))
    for name, r in report["results"].items():
        bwf = r.get("bandwidth_fraction")
        tps = f"{r['tokens_per_s']:.1f} ({r['tokens_per_s_min']:.1f}-{r['tokens_per_s_max']:.1f})"
        row = (f"{name:<24}{tps:>22}{r['ttft_s'] * 1e3:>9.1f}{r['decode_step_s'] * 1e3:>11.2f}"
               f"{r['growth_exponent']:>10.2f}{(f'{bwf:.0%}' if bwf is not None else '-'):>8}")
        row += "".join(f"{r['at'][str(c)]['step_ms']:>9.2f}" for c in cps)
        row += "  " + ("yes" if r["same_tokens_as_none"] else f"{r['matching_new_tokens']}/{cfg['new_tokens']} positions")
        lines.append(row)
    lines += ["", "exponent: slope of log(cumulative time) vs log(tokens generated); "
              "ms@N: median decode step near token N; BW use: bytes per decode step / step time / bandwidth of the same round", ""]
    reference = is_reference_setting(report)
    if not reference:
        lines.append("(the targets are defined for the gpt2-small preset on CPU; this run is only compared to them)")
    for desc, value, goal, ok in target_checks(report):
        shown = "n/a" if value is None else (f"{value:.0%}" if "bandwidth" in desc else f"{value:.2f}x")
        mark = "not measured" if ok is None else ("met" if ok else "NOT met")
        if not reference and ok is not None:
            mark = "(would meet)" if ok else "(would miss)"
        lines.append(f"{desc:<48}{shown:>9}   target {goal:<9} {mark}")
    r = report["ratios"]
    if r.get("kv_bandwidth_fraction_vs_best") is not None:
        desc = 'kvlab "kv" decode / best bandwidth of the run'
        lines.append(f"{desc:<48}{r['kv_bandwidth_fraction_vs_best']:>9.0%}   (conservative)")
    if r.get("hf_bandwidth_fraction") is not None:
        lines.append(f"{'transformers cached decode / bandwidth bound':<48}{r['hf_bandwidth_fraction']:>9.0%}")
    if report.get("transformers_error"):
        lines.append(f"transformers not measured: {report['transformers_error']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Benchmark kvlab's decode modes against transformers and the "
                                            "machine's memory bandwidth.")
    p.add_argument("--quick", action="store_true", help="a CI-sized run (seconds)")
    p.add_argument("--d-model", type=int)
    p.add_argument("--n-layer", type=int)
    p.add_argument("--n-head", type=int)
    p.add_argument("--n-kv-head", type=int)
    p.add_argument("--vocab-size", type=int)
    p.add_argument("--prompt-len", type=int)
    p.add_argument("--new-tokens", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--dtype", choices=["fp32", "fp16", "bf16"])
    p.add_argument("--device", help="cpu, cuda, mps (default: the best available)")
    p.add_argument("--repeats", type=int)
    p.add_argument("--modes", help=f"comma-separated subset of {','.join(CACHE_MODES)}")
    p.add_argument("--no-hf", action="store_true", help="skip transformers")
    p.add_argument("--json", help="write the full report to this file")
    args = p.parse_args(argv)
    base = asdict(PRESETS["quick" if args.quick else "gpt2-small"])
    for key in ("d_model", "n_layer", "n_head", "n_kv_head", "vocab_size", "prompt_len", "new_tokens", "batch_size",
                "dtype", "device", "repeats"):
        if getattr(args, key) is not None:
            base[key] = getattr(args, key)
    if args.modes:
        base["modes"] = tuple(m.strip() for m in args.modes.split(","))
    if args.no_hf:
        base["hf"] = False
    base["checkpoints"] = ()
    try:
        cfg = BenchConfig(**base)
        cfg.model_config()
        as_device(cfg.device)
    except ValueError as exc:
        p.error(str(exc))
    report = run_bench(cfg)
    print(format_report(report))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
