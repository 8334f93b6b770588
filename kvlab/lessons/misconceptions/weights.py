"""Chapter 3.5, misconception 1: the cache is not part of the parameters. One real generation with the
weights checksummed before and after, and the cache's bytes following B x S exactly."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import partial

import torch

from ... import inputs
from ..._validate import positive_int
from ...cache import KVCache
from ...generation import generate
from ...memory import dtype_name, format_bytes, kv_cache_bytes, stored_tokens
from ...model import ToyTransformer
from ...viz import misconceptions_plots as plots
from ...viz.widgets import Panel, PanelOptions, View, int_slider, play_slider
from .common import NEW_TOKENS_LABEL, corpus_prompts, leave_a_core
from .phrases import PANELS, label


@dataclass(frozen=True)
class WeightsSnapshot:
    """What the model's parameters are: how many, their bytes, and a checksum of every byte of the state dict."""

    n_params: int
    n_bytes: int
    checksum: str  # sha256 over the names and raw bytes of every state-dict tensor, in order
    n_tensors: int


def weights_snapshot(model: ToyTransformer) -> WeightsSnapshot:
    state = model.state_dict()
    digest = hashlib.sha256()
    for name, t in state.items():
        digest.update(name.encode())
        digest.update(t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes())
    return WeightsSnapshot(sum(p.numel() for p in model.parameters()),
                           sum(t.numel() * t.element_size() for t in state.values()), digest.hexdigest(), len(state))


def _cache_checksum(cache: KVCache) -> str:
    """sha256 of the stored K and V (the filled part only)."""
    digest = hashlib.sha256()
    for t in (cache.k[:, :, :, :cache.length], cache.v[:, :, :, :cache.length]):
        digest.update(t.contiguous().cpu().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


@dataclass
class CacheRun:
    """One generation with a cache we hold: the weights before and after, and the cache as it grew."""

    prompt_len: int
    batch_size: int
    new_tokens: int
    before: WeightsSnapshot
    after: WeightsSnapshot
    seq_lens: list[int]  # tokens per sequence stored after each pass
    cache_bytes: list[int]  # bytes written so far after each pass (the trace's cache bytes: the filled part)
    allocated_bytes: int  # the preallocated tensors, this size from before the prefill on
    per_token_bytes: int  # K and V of one token of one sequence, all layers (the formula)
    cache_checksum: str
    cache_in_state_dict: bool  # does any state-dict tensor share memory with the cache?
    length_after_reset: int
    bytes_after_reset: int
    text: str  # what the first sequence reads (prompt and new tokens)

    @property
    def stored_tokens(self) -> int:
        """S: tokens per sequence in the cache at the end (the last new token is never fed back)."""
        return self.seq_lens[-1]

    @property
    def final_bytes(self) -> int:
        return self.cache_bytes[-1]

    @property
    def weights_unchanged(self) -> bool:
        return self.before == self.after


@leave_a_core
@torch.no_grad()
def run_with_cache(model: ToyTransformer, tokenizer, prompt_len: int, batch_size: int,
                   new_tokens: int = 16) -> CacheRun:
    """Generate ``new_tokens`` after ``batch_size`` corpus prompts of ``prompt_len`` tokens, watching both."""
    c = model.config
    prompt_len = positive_int("prompt_len", prompt_len)
    batch_size = positive_int("batch_size", batch_size)
    new_tokens = positive_int("new_tokens", new_tokens)
    if prompt_len + new_tokens > c.max_seq_len:
        raise ValueError(f"new_tokens: prompt_len ({prompt_len}) + new_tokens ({new_tokens}) passes the model's "
                         f"max_seq_len ({c.max_seq_len})")
    prompts = corpus_prompts(tokenizer, prompt_len, batch_size)
    before = weights_snapshot(model)
    cache = KVCache(c, batch_size, stored_tokens(prompt_len, new_tokens), dtype=model.dtype, device=model.device)
    result = generate(model, prompts, new_tokens, cache=cache)
    after = weights_snapshot(model)
    storages = {cache.k.untyped_storage().data_ptr(), cache.v.untyped_storage().data_ptr()}
    shared = any(t.untyped_storage().data_ptr() in storages for t in model.state_dict().values())
    checksum = _cache_checksum(cache)
    per_token = kv_cache_bytes(c.n_layer, c.n_kv_head, c.head_dim, 1, 1, dtype_name(model.dtype))
    run = CacheRun(prompt_len, batch_size, new_tokens, before, after, [r.seq_len for r in result.trace],
                   [r.cache_bytes for r in result.trace], cache.nbytes, per_token, checksum, shared, 0, 0,
                   tokenizer.decode(result.tokens[0]))
    cache.reset()
    run.length_after_reset, run.bytes_after_reset = cache.length, cache.used_bytes
    return run


M1_LIMITS = {"prompt_len": 200, "batch_size": 8, "new_tokens": 48}
PROMPT_LEN_LABEL, BATCH_LABEL = "提示词长度", "批次 B"


def render_weights_vs_cache(model: ToyTransformer, tokenizer, prompt_len, batch_size, new_tokens) -> View:
    """The misconception-1 panel: one real generation, the weights checked before and after, the cache's bytes."""
    P = inputs.whole_number(label(PROMPT_LEN_LABEL), prompt_len, 1, M1_LIMITS["prompt_len"])
    B = inputs.whole_number(label(BATCH_LABEL), batch_size, 1, M1_LIMITS["batch_size"])
    n = inputs.whole_number(label(NEW_TOKENS_LABEL), new_tokens, 1, M1_LIMITS["new_tokens"])
    run = run_with_cache(model, tokenizer, P, B, n)
    S = run.stored_tokens
    readout = PANELS.say(
        "weights_readout", n_params=run.after.n_params, n_bytes=format_bytes(run.after.n_bytes),
        before=run.before.checksum[:12], after=run.after.checksum[:12],
        same=PANELS.say("weights_same" if run.weights_unchanged else "weights_changed"), B=B, S=S, P=P, n=n,
        per_token=format_bytes(run.per_token_bytes), written=run.final_bytes, written_shown=format_bytes(run.final_bytes),
        allocated=run.allocated_bytes, reserved=P + n - 1, cache_checksum=run.cache_checksum[:12],
        in_state_dict=PANELS.say("in_state_dict" if run.cache_in_state_dict else "not_in_state_dict"),
        length=run.length_after_reset, used=run.bytes_after_reset)
    limits = M1_LIMITS
    x_max = limits["batch_size"] * (limits["prompt_len"] + limits["new_tokens"] - 1)
    return View([plots.weights_vs_cache_figure(run, x_max)], readout, run)


def weights_panel(model: ToyTransformer, tokenizer, prompt_len: int = 120, batch_size: int = 4,
                  new_tokens: int = 16) -> Panel:
    """Prompt length and batch sliders, and a Play button that generates one more token per frame."""
    play, tokens = play_slider(label(NEW_TOKENS_LABEL), new_tokens, 1, M1_LIMITS["new_tokens"], interval_ms=400)
    tokens.layout.width = "330px"
    controls = {"prompt_len": int_slider(label(PROMPT_LEN_LABEL), prompt_len, 1, M1_LIMITS["prompt_len"], width="340px"),
                "batch_size": int_slider(label(BATCH_LABEL), batch_size, 1, M1_LIMITS["batch_size"], width="260px"),
                "new_tokens": tokens}
    return Panel(controls, partial(render_weights_vs_cache, model, tokenizer),
                 in_browser=("prompt_len", "batch_size", "new_tokens"),
                 options=PanelOptions(layout="horizontal", extra={"new_tokens": play}, css_class="kvlab-weights"))
