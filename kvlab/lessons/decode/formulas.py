"""Chapter 3.1's two formulas and its counted work: the real Q, K, V of one layer, formula 1 (no cache:
full attention, last row) against formula 2 (the new query over K/V read back from a real cache), and the K/V
projections and attention scores each pass computes, counted from the traces of a run with and without a cache."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..._validate import non_negative_int
from ...cache import KVCache
from ...model import ToyTransformer, apply_rope


# -- the chapter's two formulas ------------------------------------------------------------------------
@torch.no_grad()
def layer_qkv(model: ToyTransformer, ids, layer: int = 0):
    """Q [H, t, D] and K, V [H_kv, t, D] (RoPE applied) that ``layer`` computes for one sequence of ``ids``."""
    if not isinstance(model, ToyTransformer):
        raise ValueError(f"model must be a kvlab ToyTransformer, got {type(model).__name__}")
    layer = non_negative_int("layer", layer)
    if layer >= model.config.n_layer:
        raise ValueError(f"layer must be in [0, {model.config.n_layer}), got {layer}")
    ids = torch.as_tensor(ids) if not isinstance(ids, torch.Tensor) else ids
    if ids.dim() == 2 and ids.shape[0] == 1:
        ids = ids[0]
    if ids.dim() != 1:
        raise ValueError(f"ids must be one sequence of token ids (a list, or shape [t] or [1, t]), "
                         f"got shape {list(ids.shape)}")
    ids = model.check_ids(ids[None], "ids")  # [1, t]
    t = ids.shape[1]
    if t > model.config.max_seq_len:
        raise ValueError(f"ids: {t} tokens pass max_seq_len ({model.config.max_seq_len})")
    cos, sin, mask = model.rope_and_mask(0, t, None)
    x = model.embed(ids)  # [1, t, d_model]
    for block in model.layers[:layer]:
        x = block(x, cos, sin, mask, None, model.attention_impl, None)
    attn = model.layers[layer].attn
    q, k, v = attn.wqkv(model.layers[layer].attn_norm(x)).split([attn.q_dim, attn.kv_dim, attn.kv_dim], dim=-1)
    q = apply_rope(attn.heads(q, attn.n_head), cos, sin)[0]  # [1, t, H*D] -> [H, t, D]
    k = apply_rope(attn.heads(k, attn.n_kv_head), cos, sin)[0]  # [H_kv, t, D]
    v = attn.heads(v, attn.n_kv_head)[0]  # [H_kv, t, D]
    return q, k, v


@dataclass
class FormulaCheck:
    """Formula 1 (no cache: full attention, last row) against formula 2 (the new query over K/V read from a
    real cache), at one layer, for all heads."""

    text: str
    layer: int
    t: int
    out_all_last: torch.Tensor  # [H, D]: formula 1's last row
    out_new: torch.Tensor  # [H, D]: formula 2
    k_cache_max_diff: float  # |K in the cache - K recomputed|
    v_cache_max_diff: float

    @property
    def max_abs_diff(self) -> float:
        return (self.out_new - self.out_all_last).abs().max().item()


@torch.no_grad()
def check_two_formulas(model: ToyTransformer, tokenizer, text: str = "人工智能", layer: int = 0) -> FormulaCheck:
    """Run both of the chapter's formulas on the real Q, K, V of ``text`` at ``layer``."""
    ids = tokenizer.encode(text)
    if len(ids) < 2:
        raise ValueError("text: needs at least 2 tokens (a prompt and a new token)")
    q, k, v = layer_qkv(model, ids, layer)  # Q: [H, t, D]; K, V: [H_kv, t, D]
    t, d, group = len(ids), q.shape[-1], model.config.n_rep
    # Formula 1, no cache: every position at once, then the last row
    k_all, v_all = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)  # [H, t, D]
    causal = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    scores = (q @ k_all.transpose(-1, -2) / d**0.5).masked_fill(~causal, float("-inf"))  # [H, t, t]
    out_all = torch.softmax(scores, dim=-1) @ v_all  # [H, t, D]
    # Formula 2, with a cache: prefill t-1 tokens, decode the t-th, read K/V back from the cache
    cache = KVCache(model.config, 1, t, dtype=model.dtype, device=model.device)
    model(torch.tensor([ids[:-1]], device=model.device), cache)
    model(torch.tensor([ids[-1:]], device=model.device), cache)
    k_cache, v_cache = (x[0] for x in cache.layer_view(layer))  # [H_kv, t, D]
    k_c, v_c = k_cache.repeat_interleave(group, dim=0), v_cache.repeat_interleave(group, dim=0)  # [H, t, D]
    out_new = torch.softmax(q[:, -1:] @ k_c.transpose(-1, -2) / d**0.5, dim=-1) @ v_c  # [H, 1, D]
    return FormulaCheck(text, layer, t, out_all[:, -1].cpu(), out_new[:, 0].cpu(),
                        (k_cache - k).abs().max().item(), (v_cache - v).abs().max().item())


# counted work (ProjectionCount, count_projections) lives in kvlab.measure: exercise 3.1-2 counts with it too
