"""Benchmark: ``python -m kvlab.bench [--quick]``.

Measures, in one process and alternating the runs after a warm-up, kvlab's decode in
every cache mode and transformers' ``LlamaForCausalLM.generate`` (cache on and off) on
identical weights, plus this machine's memory read bandwidth once per round, and prints a
table and the ratios the course relies on. ``--json`` writes the report for
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
from pathlib import Path

import torch

from ._validate import positive_int
from .cli import usage_error
from .config import ModelConfig
from .costs import weight_bytes
from .device import as_device, check_fits, synchronize
from .cache_modes import CACHE_MODES
from .generation import generate
from .measure import DecodeTiming, Rate, alternate, measure_read_bandwidth, timed
from .resources import cpu_budget
from .stats import median
from .memory import format_bytes, kv_cache_bytes, stored_tokens, torch_dtype
from .model import ToyTransformer

# The targets, checked on the reference (GPT-2-small-sized) setting.
TARGETS = {
    "kv_vs_none": 5.0,  # "kv" tokens/s >= 5x "none"
    "kv_vs_hf_cached": 1.8,  # kvlab "kv" >= 1.8x transformers' cached generate
    "kv_bandwidth_fraction": 0.5,  # kvlab decode reaches >= 50% of the bandwidth bound
    "k_only_vs_none_within": 0.15,  # "k_only" within 15% of "none"
}
MAX_TOKENS = 1_000_000  # prompt_len + new_tokens: far past any setting worth timing on one machine
BANDWIDTH_BUFFER = 256 * 2**20  # measure_read_bandwidth's default buffer
TRANSFORMERS_LIBRARY = 200 * 2**20  # importing transformers and building its model: ~150 MiB (transformers 5.24)


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
        if self.new_tokens < 2:
            raise ValueError(f"new_tokens: at least 2 (the first new token comes from the prefill; the bench times the "
                             f"decode steps after it), got {self.new_tokens}")
        if self.d_model % self.n_head or (self.d_model // self.n_head) % 2:
            raise ValueError(f"d_model: {self.d_model} must split into n_head = {self.n_head} heads of an even size "
                             "(rotary position embeddings turn pairs of dimensions); e.g. d_model = 64 x n_head")
        if self.prompt_len + self.new_tokens > MAX_TOKENS:
            name = "prompt_len" if self.prompt_len > self.new_tokens else "new_tokens"
            raise ValueError(f"{name}: prompt_len + new_tokens must be at most {MAX_TOKENS:,}, "
                             f"got {self.prompt_len + self.new_tokens:,}")
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

    def peak_bytes(self) -> dict[str, int]:
        """An upper estimate of what the run holds at its peak, by part; every part that grows with a setting:

        - weights: kvlab's model, and transformers' copy of it (and the library itself, loaded for the run);
        - caches: every generation's result keeps its cache until the report is built (``repeats`` per cache mode,
          each at most the full-length cache in the model's dtype), plus the concatenating caches' last step
          (the old and the grown tensors at once) and transformers' DynamicCache doing the same;
        - attention: the longest pass (no-cache modes recompute all P + N - 1 tokens): a boolean mask, a float
          mask (transformers), the scores and their softmax for every head, as the unfused path holds them;
        - activations: that pass's hidden states, projections, MLP and (transformers) logits over all positions;
        - bandwidth: the buffer the memory-read bandwidth is measured with."""
        c = self.model_config()
        element = torch.empty((), dtype=torch_dtype(self.dtype)).element_size()
        B, T = self.batch_size, stored_tokens(self.prompt_len, self.new_tokens)
        full_cache = kv_cache_bytes(c.n_layer, c.n_kv_head, c.head_dim, T, B, "fp32") * element // 4
        kept = sum({"none": 0, "k_only": 0.5}.get(m, 1) for m in self.modes)  # full caches per repeat
        transient = (1 if "dynamic" in self.modes else 0) + (2 if self.hf else 0)
        width = 8 * c.d_model + (c.n_head + 2 * c.n_kv_head) * c.head_dim + 3 * c.d_ff
        return {
            "weights": c.n_params() * element * (2 if self.hf else 1) + (TRANSFORMERS_LIBRARY if self.hf else 0),
            "caches": int(full_cache * (self.repeats * kept + transient)),
            "attention": T * T * (1 + 4 * B * (1 if self.hf else 0) + 2 * 4 * B * c.n_head),
            "activations": B * T * (width * element + (4 * c.vocab_size if self.hf else 0)),
            "bandwidth": BANDWIDTH_BUFFER,
        }

    def check_fits(self, device) -> None:
        """Refuse, before building anything, a run this machine cannot hold; the message names the setting that
        drives the largest part of :meth:`peak_bytes`."""
        parts = self.peak_bytes()
        largest = max(parts, key=parts.get)
        longer = "prompt_len" if self.prompt_len >= self.new_tokens else "new_tokens"
        name = {"weights": "vocab_size" if self.vocab_size > 4 * self.d_model else "d_model",
                "caches": "batch_size" if self.batch_size > 1 else longer}.get(largest, longer)
        shown = ", ".join(f"{part} {format_bytes(n)}" for part, n in parts.items())
        check_fits(sum(parts.values()), device, f"this run ({shown})", name)


BENCH_SETTINGS = {
    # The reference setting: GPT-2-small-sized, 4-token prompt, 200 new tokens, fp32, batch 1.
    "gpt2-small": BenchConfig(),
    # CI-sized: seconds, same code paths.
    "quick": BenchConfig(vocab_size=2048, d_model=128, n_layer=2, n_head=4, new_tokens=24, repeats=2),
}


def weight_bytes_per_step(model: ToyTransformer) -> int:
    """Bytes of weights one decode step reads: every matrix, but only one row of the embedding."""
    return weight_bytes(model.config, 1, model.embed.weight.element_size())


class _StepClock:
    """A transformers streamer that timestamps every token ``generate`` emits."""

    def __init__(self):
        self.stamps: list[float] = []

    def put(self, value):
        self.stamps.append(time.perf_counter())

    def end(self):
        pass


def _run_hf(hf, prompt, n, use_cache):
    """One transformers generation: (per-pass seconds, wall seconds, tokens)."""
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
    return steps, wall, out.cpu()


@dataclass
class BenchReport:
    """Everything one benchmark run measured; ratios and bandwidth use are computed from it."""

    config: BenchConfig
    n_params: int
    weight_bytes_per_step: int
    machine: dict
    bandwidth: list[Rate]  # one per round, measured between the runs of that round
    runs: dict[str, DecodeTiming]  # "kvlab:kv", ..., "transformers:cached", "transformers:no-cache"
    transformers_error: str | None = None

    def ratio(self, a: str, b: str) -> float | None:
        if a not in self.runs or b not in self.runs:
            return None
        return self.runs[a].tokens_per_s / self.runs[b].tokens_per_s

    @property
    def reference_tokens(self) -> torch.Tensor:
        return self.runs.get("kvlab:none", next(iter(self.runs.values()))).tokens

    def matching_new_tokens(self, name: str) -> int:
        """Positions where this run's new tokens equal those of "none" (in every sequence)."""
        p = self.config.prompt_len
        return int((self.runs[name].tokens[:, p:] == self.reference_tokens[:, p:]).all(dim=0).sum())

    def bytes_per_step(self, name: str) -> int | None:
        """Bytes one decode step reads: the weights plus the cache at its mean length (None without a cache)."""
        if name in ("kvlab:none", "kvlab:k_only", "transformers:no-cache"):
            return None
        run, c = self.runs[name], self.config
        if name.startswith("transformers"):  # its cache holds the same tensors as kvlab's "kv"
            mc = self.config.model_config()
            per_token = kv_cache_bytes(mc.n_layer, mc.n_kv_head, mc.head_dim, 1, c.batch_size, "fp32")
            per_token = per_token * torch.empty((), dtype=torch_dtype(c.dtype)).element_size() // 4
            mean_cache = per_token * (c.prompt_len + c.new_tokens / 2)
        else:
            mean_cache = sum(run.cache_bytes[1:]) / max(1, len(run.cache_bytes) - 1)
        return round(self.weight_bytes_per_step + mean_cache)

    def bandwidth_fractions(self, name: str) -> list[float]:
        """Per repeat: bytes per decode step / mean decode step / bandwidth of the same round."""
        step_bytes = self.bytes_per_step(name)
        if step_bytes is None:
            return []
        run, n = self.runs[name], max(1, self.config.new_tokens - 1)
        steps = [(w - p[0]) / n for w, p in zip(run.wall_seconds, run.pass_seconds)]
        return [step_bytes / s / bw.best for s, bw in zip(steps, self.bandwidth)]

    def bandwidth_fraction(self, name: str) -> float | None:
        fractions = self.bandwidth_fractions(name)
        return median(fractions) if fractions else None

    @property
    def ratios(self) -> dict[str, float | None]:
        best = max(b.best for b in self.bandwidth)
        kv_bytes = self.bytes_per_step("kvlab:kv") if "kvlab:kv" in self.runs else None
        return {
            "kv_vs_none": self.ratio("kvlab:kv", "kvlab:none"),
            "kv_vs_hf_cached": self.ratio("kvlab:kv", "transformers:cached"),
            "k_only_vs_none": self.ratio("kvlab:k_only", "kvlab:none"),
            "dynamic_vs_kv": self.ratio("kvlab:dynamic", "kvlab:kv"),
            "int8_vs_kv": self.ratio("kvlab:int8", "kvlab:kv"),
            "hf_cached_vs_hf_no_cache": self.ratio("transformers:cached", "transformers:no-cache"),
            "kv_bandwidth_fraction": self.bandwidth_fraction("kvlab:kv") if kv_bytes else None,
            "hf_bandwidth_fraction": (self.bandwidth_fraction("transformers:cached")
                                      if "transformers:cached" in self.runs else None),
            "kv_bandwidth_fraction_vs_best": (kv_bytes / self.runs["kvlab:kv"].decode_step_seconds / best
                                              if kv_bytes else None),
        }

    def is_reference_setting(self) -> bool:
        """True when the run used the setting the targets are defined for (gpt2-small, fp32, batch 1)."""
        ref, cfg = asdict(BENCH_SETTINGS["gpt2-small"]), asdict(self.config)
        keys = ("vocab_size", "d_model", "n_layer", "n_head", "prompt_len", "new_tokens", "batch_size", "dtype")
        return all(cfg[k] == ref[k] for k in keys) and cfg.get("n_kv_head") in (None, ref["n_head"])

    def to_json(self) -> dict:
        runs = {}
        for name, r in self.runs.items():
            runs[name] = {
                "tokens_per_s": r.tokens_per_s, "tokens_per_s_range": list(r.tokens_per_s_range),
                "wall_s": r.wall_seconds, "ttft_s": r.ttft_seconds, "decode_step_s": r.decode_step_seconds,
                "step_s": r.step_seconds, "seq_len": r.seq_len, "growth_exponent": r.cumulative_exponent,
                "same_tokens_as_none": self.matching_new_tokens(name) == self.config.new_tokens,
                "bandwidth_fraction": self.bandwidth_fraction(name),
            }
        return {"config": asdict(self.config) | {"modes": list(self.config.modes)},
                "model": {"n_params": self.n_params, "weight_bytes_per_step": self.weight_bytes_per_step},
                "machine": self.machine, "bandwidth_bytes_per_s": [b.best for b in self.bandwidth],
                "runs": runs, "ratios": self.ratios, "targets": TARGETS,
                "transformers_error": self.transformers_error}


def run_bench(cfg: BenchConfig, progress: bool = True) -> BenchReport:
    """Run every configured mode ``repeats`` times, alternating, with the bandwidth measured each round."""
    device = as_device(cfg.device)
    torch.manual_seed(cfg.seed)
    model = ToyTransformer(cfg.model_config(), seed=cfg.seed).to(device=device, dtype=torch_dtype(cfg.dtype)).eval()
    gen = torch.Generator().manual_seed(cfg.seed)
    prompt = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.prompt_len), generator=gen)
    n = cfg.new_tokens
    runners = {f"kvlab:{m}": (lambda m=m: timed(lambda: generate(model, prompt, n, cache=m), device))
               for m in cfg.modes}
    warmup = {f"kvlab:{m}": (lambda m=m: generate(model, prompt, min(8, n), cache=m)) for m in cfg.modes}
    hf_error = None
    if cfg.hf:
        try:
            from .interop import to_hf_llama

            hf = to_hf_llama(model)
            for label, use_cache in (("transformers:cached", True), ("transformers:no-cache", False)):
                runners[label] = lambda use_cache=use_cache: _run_hf(hf, prompt, n, use_cache)
                warmup[label] = lambda use_cache=use_cache: _run_hf(hf, prompt, min(8, n), use_cache)
        except ImportError as exc:
            hf_error = str(exc)
    # The bandwidth is measured in every round, between the runs: on shared machines it drifts.
    runners["bandwidth"] = lambda: measure_read_bandwidth(device)
    raw = alternate(runners, cfg.repeats, warmup=warmup, progress=progress, desc="bench")
    bandwidth = raw.pop("bandwidth")
    runs = {}
    for name, reps in raw.items():
        if name.startswith("kvlab:"):
            runs[name] = DecodeTiming.from_generations(name.split(":", 1)[1], reps)
        else:
            runs[name] = DecodeTiming(name=name, seq_len=list(range(cfg.prompt_len, cfg.prompt_len + n)),
                                      pass_seconds=[s for s, _, _ in reps], wall_seconds=[w for _, w, _ in reps],
                                      batch_size=cfg.batch_size, new_tokens=n, tokens=reps[0][2])
    return BenchReport(cfg, model.config.n_params(), weight_bytes_per_step(model), machine_info(device),
                       bandwidth, runs, hf_error)


def machine_info(device) -> dict:
    dev = torch.device(device)
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    budget = cpu_budget()
    info = {"device": str(dev), "cpu": cpu, "cpu_count": os.cpu_count(), "cpu_budget": budget.value,
            "cpu_budget_source": budget.source, "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "python": sys.version.split()[0]}
    if dev.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(dev)
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        pass
    return info


def target_checks(report: BenchReport) -> list[tuple[str, float | None, str, bool | None]]:
    """(description, measured value, target, met?) for each target."""
    r, t = report.ratios, TARGETS

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


def format_report(report: BenchReport) -> str:
    cfg, m = report.config, report.machine
    lines = [
        f"machine: {m['cpu']} | {m['cpu_count']} CPUs, this process may use {m.get('cpu_budget', '?')}, "
        f"torch threads {m['torch_threads']} | device {m['device']}"
        + (f" ({m['gpu']})" if "gpu" in m else "") + f" | torch {m['torch']}"
        + (f", transformers {m['transformers']}" if "transformers" in m else ""),
        f"model: d_model {cfg.d_model}, {cfg.n_layer} layers, {cfg.n_head} heads, vocab {cfg.vocab_size}, "
        f"{report.n_params:,} parameters, {cfg.dtype}; prompt {cfg.prompt_len} tokens, "
        f"{cfg.new_tokens} new, batch {cfg.batch_size}, {cfg.repeats} alternating repeats",
        f"memory read bandwidth ({report.bandwidth[0].what}, once per round): "
        + ", ".join(f"{b.best_g:.1f}" for b in report.bandwidth) + " GB/s; weights read per decode step "
        f"{format_bytes(report.weight_bytes_per_step)}",
        "",
    ]
    cps = cfg.checkpoints
    head = f"{'run':<24}{'tok/s (min-max)':>22}{'TTFT ms':>9}{'decode ms':>11}{'exponent':>10}{'BW use':>8}"
    head += "".join(f"{'ms@' + str(c):>9}" for c in cps) + "  same tokens"
    lines += [head, "-" * len(head)]
    for name, r in report.runs.items():
        bwf = report.bandwidth_fraction(name)
        lo, hi = r.tokens_per_s_range
        steps = r.step_seconds
        row = (f"{name:<24}{f'{r.tokens_per_s:.1f} ({lo:.1f}-{hi:.1f})':>22}{r.ttft_seconds * 1e3:>9.1f}"
               f"{r.decode_step_seconds * 1e3:>11.2f}{r.cumulative_exponent:>10.2f}"
               f"{(f'{bwf:.0%}' if bwf is not None else '-'):>8}")
        row += "".join(f"{1e3 * median(steps[max(1, c - 5):c]):>9.2f}" for c in cps)
        same = report.matching_new_tokens(name)
        row += "  " + ("yes" if same == cfg.new_tokens else f"{same}/{cfg.new_tokens} positions")
        lines.append(row)
    lines += ["", "exponent: slope of log(cumulative time) vs log(tokens generated); ms@N: median decode step "
              "near token N; BW use: bytes per decode step / step time / bandwidth of the same round", ""]
    reference = report.is_reference_setting()
    if not reference:
        lines.append("(the targets are defined for the gpt2-small setting on CPU; this run is only compared to them)")
    for desc, value, goal, ok in target_checks(report):
        shown = "n/a" if value is None else (f"{value:.0%}" if "bandwidth" in desc else f"{value:.2f}x")
        mark = "not measured" if ok is None else ("met" if ok else "NOT met")
        if not reference and ok is not None:
            mark = "(would meet)" if ok else "(would miss)"
        lines.append(f"{desc:<48}{shown:>9}   target {goal:<9} {mark}")
    r = report.ratios
    if r["kv_bandwidth_fraction_vs_best"] is not None:
        desc = 'kvlab "kv" decode / best bandwidth of the run'
        lines.append(f"{desc:<48}{r['kv_bandwidth_fraction_vs_best']:>9.0%}   (conservative)")
    if r["hf_bandwidth_fraction"] is not None:
        lines.append(f"{'transformers cached decode / bandwidth bound':<48}{r['hf_bandwidth_fraction']:>9.0%}")
    if report.transformers_error:
        lines.append(f"transformers not measured: {report.transformers_error}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kvlab.bench",
                                description="Benchmark kvlab's decode modes against transformers and the "
                                            "machine's memory bandwidth.")
    p.add_argument("--quick", action="store_true", help="a CI-sized run (seconds)")
    for flag in ("--d-model", "--n-layer", "--n-head", "--n-kv-head", "--vocab-size", "--prompt-len",
                 "--new-tokens", "--batch-size", "--repeats"):
        p.add_argument(flag, type=int)
    p.add_argument("--dtype", choices=["fp32", "fp16", "bf16"])
    p.add_argument("--device", help="cpu, cuda, mps (default: the best available)")
    p.add_argument("--modes", help=f"comma-separated subset of {','.join(CACHE_MODES)}")
    p.add_argument("--no-hf", action="store_true", help="skip transformers")
    p.add_argument("--json", help="write the full report to this file (its folder must exist)")
    return p


def json_target_problem(path: str) -> str | None:
    """Why the report could not be written to ``path`` (checked before the run, so no result is lost)."""
    target = Path(path)
    if target.is_dir():
        return f"json: {path} is a folder; give a file name, e.g. {target / 'bench.json'}"
    folder = target.resolve().parent
    if not folder.is_dir():
        return f"json: the folder {folder} does not exist"
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        return f"json: {path} is not writable"
    return None


def parse_config(argv=None) -> tuple[BenchConfig, str | None]:
    """Command-line arguments -> (config, --json path); argparse's usage error, naming the option as typed, for
    any value that would fail later: a bad size, a run larger than the free memory, an unwritable --json."""
    p = build_parser()
    args = p.parse_args(argv)
    base = asdict(BENCH_SETTINGS["quick" if args.quick else "gpt2-small"])
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
        cfg.check_fits(as_device(cfg.device))
    except ValueError as exc:
        usage_error(p, exc)
    if args.json and json_target_problem(args.json):
        usage_error(p, json_target_problem(args.json))
    return cfg, args.json


def main(argv=None) -> int:
    cfg, json_path = parse_config(argv)
    report = run_bench(cfg)
    print(format_report(report))
    if json_path:
        with open(json_path, "w", encoding="utf-8") as fh:
            json.dump(report.to_json(), fh, indent=1)
        print(f"\nwrote {json_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
