"""Chapter 3.2's experiment, preallocation against concatenation: kvlab's preallocated and concatenating
caches and (when transformers is installed) its DynamicCache and StaticCache, on the same weights and tokens, timed
in alternating rounds against this machine's last-level cache on a thin model with a wide cache; what each run
observed (layer 0's K storage) and what kvlab counts itself (allocations, bytes copied); the readout, the figure and
the claims of a comparison (:meth:`GrowthComparison.claims`, chosen by :mod:`.sentences`)."""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from functools import partial

import torch

from ..._validate import positive_int
from ...cache import DynamicKVCache, KVCache
from ...claims import Claim
from ...config import ModelConfig
from ...device import LastLevelCache, last_level_cache
from ...generation import generate
from ...interop import HF_CACHE_KINDS, distinct_so_far
from ...language import get_language
from ...measure import alternate, device_label, measurement_threads, torch_threads
from ...stats import median
from ...memory import format_bytes, kv_bytes_per_token, stored_tokens
from ...model import ToyTransformer
from ...viz import storage_plots as plots
from .phrases import TEXTS
from .sentences import CHAPTER_LABELS, SameWork, pace_claim, work_claim


@dataclass
class CacheGrowth:
    """One way of caching, run ``repeats`` times: each pass's time in every repeat, and (from the first repeat)
    what was observed (layer 0's K storage) for every cache and what kvlab counts itself for kvlab's."""

    name: str  # "kv", "dynamic" (kvlab) or "transformers:dynamic", "transformers:static"
    t: list[int]  # tokens in the cache after each pass
    repeat_ms: list[list[float]]  # [repeat][pass]: wall time of each forward pass
    layer0_k_tensors: list[int]  # distinct K tensors layer 0 has used so far (its data_ptr() changed)
    tokens: torch.Tensor  # kvlab: the tokens generated [B, prompt + new]; transformers: its greedy choices [B, passes]
    allocations: list[int] | None = None  # kvlab: storage tensors allocated so far (all layers, K and V)
    bytes_copied: list[int] | None = None  # kvlab: bytes written into storage so far
    allocated_bytes: list[int] | None = None  # kvlab: bytes allocated for storage
    attended: list[int] | None = None  # kvlab: positions of K its attention was given; transformers: K's length

    @property
    def step_ms(self) -> list[float]:
        """Each pass's median over the repeats."""
        return [median(column) for column in zip(*self.repeat_ms)]

    def smoothed_ms(self, window: int = 5) -> list[float]:
        """Each pass's median over repeats, then the median of the ``window`` passes around it."""
        step, half = self.step_ms, window // 2
        return [median(step[max(0, i - half): i + half + 1]) for i in range(len(step))]

    def late_ms(self) -> list[float]:
        """Per repeat: the median pass over the second half of the run (the longest caches)."""
        return [median(r[len(r) // 2:]) for r in self.repeat_ms]

    def early_ms(self) -> list[float]:
        """Per repeat: the median of the first quarter of the decode passes (short caches)."""
        return [median(r[1:][: max(1, (len(r) - 1) // 4)]) for r in self.repeat_ms]


@dataclass
class GrowthComparison:
    """kvlab's two caches and, when transformers is installed, its DynamicCache and StaticCache on the same
    weights and tokens, run in alternating rounds. ``transformers_skipped`` says why they are missing."""

    runs: dict[str, CacheGrowth]
    prompt_len: int
    repeats: int
    per_token_bytes: int  # K and V of one token, all layers
    weight_bytes: int
    config: ModelConfig
    device: torch.device
    threads: int
    llc: LastLevelCache | None
    transformers_skipped: str | None = None

    @property
    def peak_bytes(self) -> int:
        """The largest cache of the run: kvlab's preallocated one, sized for the last pass."""
        return self.runs["kv"].allocated_bytes[-1]

    def working_set(self, tokens: int) -> int:
        """Bytes one concatenating step touches at ``tokens`` cached: the old copy, the new copy, the weights."""
        return 2 * tokens * self.per_token_bytes + self.weight_bytes

    @property
    def llc_tokens(self) -> float | None:
        """Cached tokens at which a concatenating step's working set fills the last-level cache (None when its
        size is unknown; 0 when the weights alone do not fit)."""
        if self.llc is None:
            return None
        return max(0.0, (self.llc.bytes - self.weight_bytes) / (2 * self.per_token_bytes))

    def _windows(self) -> dict[str, tuple[int, int]]:
        """The cached lengths of the passes :meth:`CacheGrowth.early_ms` and :meth:`CacheGrowth.late_ms` take."""
        t = self.runs["kv"].t
        early = t[1:][: max(1, (len(t) - 1) // 4)]
        return {"early": (early[0], early[-1]), "late": (t[len(t) // 2], t[-1])}

    def claims(self) -> list[Claim]:
        """What the times say (:data:`PACE`): kvlab's concatenating cache against its preallocated one late in the
        run; with transformers, the same-work check (:data:`WORK`: StaticCache does the same work at every pass, so
        its early and late times must agree in every round), printed once before the early comparisons; kvlab's two
        caches early (short caches, where the copies are smallest); then StaticCache against DynamicCache early and
        DynamicCache against StaticCache late. :func:`show_claims` prints them."""
        w = self._windows()
        kv, dyn = self.runs["kv"], self.runs["dynamic"]
        static = self.runs.get("transformers:static")
        work = None if static is None else SameWork("transformers:static", static.early_ms(), static.late_ms())
        said = [pace_claim("kv", kv.late_ms(), "dynamic", dyn.late_ms(), "late", w["late"], more_work=True)]
        if work is not None:
            said.append(work_claim(work, w["early"]))
        said.append(pace_claim("kv", kv.early_ms(), "dynamic", dyn.early_ms(), "early", w["early"], work,
                               more_work=True))
        if static is not None:
            dynamic = self.runs["transformers:dynamic"]
            said += [pace_claim("transformers:dynamic", dynamic.early_ms(), "transformers:static", static.early_ms(),
                                "early", w["early"], work),
                     pace_claim("transformers:static", static.late_ms(), "transformers:dynamic", dynamic.late_ms(),
                                "late", w["late"])]
        return said

    def copied_per_step(self) -> dict[str, list[int]]:
        """Bytes kvlab's concatenating cache copied at each decode pass of the early and the late window (counted,
        not timed)."""
        copied = self.runs["dynamic"].bytes_copied
        steps = [b - a for a, b in zip(copied, copied[1:])]  # steps[i]: the pass after pass i (decode pass i + 1)
        early = steps[: max(1, len(steps) // 4)]
        late = steps[len(copied) // 2 - 1:]
        return {"early": early, "late": late}

    def copy_sentence(self) -> str:
        """How much more a late concatenating step copies than an early one, whether the last-level cache is involved
        or not: what the early-against-late comparison has to allow for."""
        per = self.copied_per_step()
        e, l = per["early"], per["late"]
        w = self._windows()
        times = median(l) / median(e) if median(e) else math.nan
        return TEXTS.say("copy", e_from=w["early"][0], e_to=w["early"][1], e_min=format_bytes(min(e)),
                         e_max=format_bytes(max(e)), l_from=w["late"][0], l_to=w["late"][1], l_min=format_bytes(min(l)),
                         l_max=format_bytes(max(l)), times=_times(times))

    def llc_sentence(self) -> str:
        """The cache's peak size against the last-level cache, and what that means for the copies."""
        gpu = self.device.type == "cuda"
        where, memory = ("GPU", TEXTS.say("gpu_memory_word")) if gpu else ("CPU", TEXTS.say("cpu_memory_word"))
        peak = format_bytes(self.peak_bytes)
        if self.llc is None:
            return TEXTS.say("llc_unknown", peak=peak, where=where)
        level, size = self.llc.level, format_bytes(self.llc.bytes)
        t = self.runs["kv"].t[-1]
        touched = self.working_set(t)
        head = TEXTS.say("llc_head", peak=peak, where=where, level=level, size=size, source=self.llc.source,
                         weights=format_bytes(self.weight_bytes), t=t, touched=format_bytes(touched))
        if touched <= self.llc.bytes:
            return head + TEXTS.say("llc_fits", level=level, memory=memory)
        return head + TEXTS.say("llc_exceeds", level=level, times=_times(touched / self.llc.bytes),
                                tokens=math.floor(self.llc_tokens), memory=memory)

    def readout_html(self) -> str:
        c, kv, dyn = self.config, self.runs["kv"], self.runs["dynamic"]
        on = device_label(self.device, self.threads)
        lines = [
            TEXTS.say("model_line", n_layer=c.n_layer, n_kv_head=c.n_kv_head, head_dim=c.head_dim, d_model=c.d_model,
                      per_token=format_bytes(self.per_token_bytes), weights=format_bytes(self.weight_bytes),
                      weight_tokens=self.weight_bytes / self.per_token_bytes,
                      generated=kv.t[-1] - self.prompt_len + 1, prompt=self.prompt_len, longest=kv.t[-1],
                      repeats=self.repeats, on=on),
            self.llc_sentence(),
            TEXTS.say("kv_line", label=_line_start(CHAPTER_LABELS["kv"]), allocations=kv.allocations[-1],
                      written=format_bytes(kv.bytes_copied[-1]), blocks=kv.layer0_k_tensors[-1]),
            TEXTS.say("dynamic_line", label=_line_start(CHAPTER_LABELS["dynamic"]), allocations=dyn.allocations[-1],
                      written=format_bytes(dyn.bytes_copied[-1]), blocks=dyn.layer0_k_tensors[-1]),
        ]
        if self.transformers_skipped:
            lines.append(self.transformers_skipped)
        else:
            hf_dyn, hf_static = self.runs["transformers:dynamic"], self.runs["transformers:static"]
            lines += [TEXTS.say("hf_dynamic_line", blocks=hf_dyn.layer0_k_tensors[-1], first=hf_dyn.attended[0],
                                last=hf_dyn.attended[-1]),
                      TEXTS.say("hf_static_line", blocks=hf_static.layer0_k_tensors[-1], all=hf_static.attended[0])]
        lines.append(TEXTS.say("next_cell"))
        return "<br>".join(html.escape(line) for line in lines)

    def figure(self):
        llc = None
        if self.llc is not None:
            llc = (f"{self.llc.level} = {format_bytes(self.llc.bytes)}", self.llc_tokens)
        return plots.cache_growth_figure(self.runs, CHAPTER_LABELS, llc)


def _line_start(name: str) -> str:
    """A mode's name opening a readout line: its first letter capitalised (a Chinese name is unchanged)."""
    return name[:1].upper() + name[1:]


def _times(ratio: float) -> str:
    """「 8 倍」 or 「约 1.51 倍」 after 「是 … 的」: a space before a digit, none before 「约」 (in English "8×" or
    "about 1.51×", no space)."""
    if not (math.isfinite(ratio) and ratio > 0):
        return TEXTS.say("times_unknown")
    text = TEXTS.say("times_one") if ratio == 1 else plots.ratio_text(ratio)
    if get_language() != "zh":
        return text
    return text if text.startswith("约") else " " + text


def wide_cache_model(seed: int = 0, device=None) -> ToyTransformer:
    """Thin weights, wide cache: 4 layers of 32 heads of 256 numbers (256 KiB of K/V per token in FP32) on a model
    width of 32, so 64 tokens of cache outweigh all the weights and cache copies are visible next to weight reads."""
    config = ModelConfig(vocab_size=512, d_model=32, n_layer=4, n_head=32, head_dim=256, max_seq_len=512)
    model = ToyTransformer(config, seed=seed).eval()
    with torch.no_grad():  # a random model's logits are nearly tied: scaled up, greedy choices are decisive,
        model.lm_head.weight.mul_(20)  # so float rounding (kvlab vs transformers, CPU vs GPU) picks the same tokens
    return model if device is None else model.to(device)


def watch_layer0_k(cache) -> tuple[list[int], list[int]]:
    """After each write to layer 0 (one per forward pass), record ``cache.k[0].data_ptr()`` (a reallocated
    tensor shows up as a new address) and how many positions of K the write handed to attention."""
    addresses: list[int] = []
    attended: list[int] = []
    write = cache.write

    def write_and_watch(layer, k, v):
        out = write(layer, k, v)  # (K, V) [B, H_kv, positions, D] for attention
        if layer == 0:
            addresses.append(cache.k[0].data_ptr())
            attended.append(out[0].shape[2])
        return out

    cache.write = write_and_watch
    return addresses, attended


def _kvlab_run(model, prompt, new_tokens, mode):
    """One generation with a fresh kvlab cache, watched: (GenerationResult, layer 0's K addresses, K positions)."""
    cache_class = {"kv": KVCache, "dynamic": DynamicKVCache}[mode]
    cache = cache_class(model.config, 1, stored_tokens(prompt.shape[1], new_tokens), dtype=model.dtype, device=model.device)
    addresses, attended = watch_layer0_k(cache)
    return generate(model, prompt, new_tokens, cache=cache), addresses, attended


def _kvlab_growth(mode: str, repeats: list) -> CacheGrowth:
    res, addresses, attended = repeats[0]
    tr = res.trace
    return CacheGrowth(mode, [r.seq_len for r in tr], [[r.seconds * 1e3 for r in rep[0].trace] for rep in repeats],
                       distinct_so_far(addresses), res.tokens, [r.allocations for r in tr],
                       [r.bytes_copied for r in tr], [r.cache_allocated_bytes for r in tr], attended)


def _transformers_growth(kind: str, repeats: list) -> CacheGrowth:
    first = repeats[0]
    return CacheGrowth(f"transformers:{kind}", first.seq_len, [[s * 1e3 for s in run.seconds] for run in repeats],
                       first.reallocations, first.predicted, attended=first.layer0_k_len)


def compare_cache_growth(model: ToyTransformer, new_tokens: int, prompt_len: int = 8, repeats: int = 3,
                         with_transformers: bool = True) -> GrowthComparison:
    """Generate with kvlab's preallocated ("kv") and concatenating ("dynamic") caches on one prompt and (if
    transformers is installed) feed the same tokens through its DynamicCache and StaticCache: ``repeats`` rounds,
    the caches alternating within each round after a warm-up (``kvlab.measure.alternate``)."""
    from ...interop import hf_decode_run, to_hf_llama, transformers_missing

    new_tokens = positive_int("new_tokens", new_tokens)
    prompt_len = positive_int("prompt_len", prompt_len)
    repeats = positive_int("repeats", repeats)
    if new_tokens < 2:
        raise ValueError(f"new_tokens must be at least 2 (a prefill and a decode pass), got {new_tokens}")
    if stored_tokens(prompt_len, new_tokens) > model.config.max_seq_len:
        raise ValueError(f"new_tokens: prompt_len ({prompt_len}) + new_tokens ({new_tokens}) - 1 passes the model's "
                         f"max_seq_len ({model.config.max_seq_len})")
    prompt = (torch.arange(prompt_len)[None] % model.config.vocab_size).to(model.device)
    skipped = None
    threads = measurement_threads()
    with torch_threads(threads):
        reference = generate(model, prompt, new_tokens, cache="kv").tokens  # transformers is fed these; a warm-up
        runners = {mode: partial(_kvlab_run, model, prompt, new_tokens, mode) for mode in ("kv", "dynamic")}
        warm = {"kv": lambda: None, "dynamic": partial(generate, model, prompt, min(8, new_tokens), cache="dynamic")}
        if with_transformers:
            skipped = transformers_missing()  # None, or what to install, in Chinese
            if skipped is None:
                hf = to_hf_llama(model)
                for kind in HF_CACHE_KINDS:
                    runners[f"transformers:{kind}"] = partial(hf_decode_run, hf, reference, prompt_len, kind)
                    warm[f"transformers:{kind}"] = partial(hf_decode_run, hf, reference[:, : prompt_len + 4],
                                                           prompt_len, kind)
        else:
            skipped = TEXTS.say("no_transformers")
        results = alternate(runners, repeats, warmup=warm)
    runs = {mode: _kvlab_growth(mode, results[mode]) for mode in ("kv", "dynamic")}
    runs |= {name: _transformers_growth(name.split(":")[1], reps) for name, reps in results.items()
             if name.startswith("transformers:")}
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return GrowthComparison(runs, prompt_len, repeats, kv_bytes_per_token(model.config, model.dtype), weights,
                            model.config, model.device, threads, last_level_cache(model.device), skipped)
