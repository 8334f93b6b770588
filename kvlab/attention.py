"""Scaled dot-product attention with an offset causal mask, in two implementations.

``explicit`` spells out ``softmax(Q K^T / sqrt(d)) V`` and can return the attention
weights for plots; ``sdpa`` calls ``torch.nn.functional.scaled_dot_product_attention``.
A test proves they agree. Queries sit at positions ``q_offset .. q_offset + Tq - 1``
and keys at ``0 .. Tk - 1`` (columns of the cache); with left padding, the first
``pad_lengths[b]`` columns of row ``b`` are padding that no real token may see. With a
paged cache each row may have its own offset (no padding at all).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

IMPLEMENTATIONS = ("sdpa", "explicit")


def attention_mask(q_len: int, k_len: int, q_offset, pad_lengths: torch.Tensor | None = None, device=None
                   ) -> torch.Tensor | None:
    """Boolean mask, True where a query may see a key; ``None`` when every query may see every key.

    Without padding: [Tq, Tk], query i (column q_offset + i) sees keys 0 .. q_offset + i.
    With ``pad_lengths`` [B]: [B, 1, Tq, Tk], additionally hiding row b's first pad_lengths[b]
    columns. A padding query sees only itself, so its softmax stays finite; no real token
    ever reads its output.
    With per-row offsets (``q_offset`` a LongTensor [B], a paged cache whose sequences hold
    different numbers of tokens): [B, 1, Tq, Tk], row b's query i sees keys 0 .. q_offset[b] + i;
    columns past a row's own end (``k_len`` is the longest row's) are hidden from it.
    """
    if isinstance(q_offset, torch.Tensor):
        if pad_lengths is not None:
            raise ValueError("pad_lengths: per-row offsets need no left padding; pass one or the other")
        q_col = q_offset.to(device)[:, None, None] + torch.arange(q_len, device=device)[None, :, None]  # [B, Tq, 1]
        k_col = torch.arange(k_len, device=device)[None, None, :]  # [1, 1, Tk]
        return (k_col <= q_col)[:, None]  # [B, 1, Tq, Tk]: the same for every head
    if q_offset + q_len != k_len:
        raise ValueError(f"queries end at column {q_offset + q_len - 1} but keys end at {k_len - 1}")
    if pad_lengths is None and q_len == 1:
        return None
    q_col = torch.arange(q_offset, q_offset + q_len, device=device)[:, None]  # [Tq, 1]
    k_col = torch.arange(k_len, device=device)[None, :]  # [1, Tk]
    causal = k_col <= q_col  # [Tq, Tk]
    if pad_lengths is None:
        return causal
    real_key = k_col[None] >= pad_lengths[:, None, None]  # [B, 1, Tk]
    mask = causal[None] & (real_key | (k_col == q_col)[None])  # [B, Tq, Tk]
    return mask[:, None]  # [B, 1, Tq, Tk]: the same for every head


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """[B, H_kv, T, D] -> [B, H_kv * n_rep, T, D]: each KV head serves n_rep query heads."""
    if n_rep == 1:
        return x
    B, H_kv, T, D = x.shape
    return x[:, :, None].expand(B, H_kv, n_rep, T, D).reshape(B, H_kv * n_rep, T, D)


def attention(q, k, v, mask: torch.Tensor | None, impl: str = "sdpa", return_weights: bool = False):
    """Attention of q [B, H, Tq, D] over k, v [B, H_kv, Tk, D] -> out [B, H, Tq, D].

    ``mask`` comes from :func:`attention_mask`. With ``return_weights`` (explicit path only)
    also returns the weights [B, H, Tq, Tk].
    """
    B, H, Tq, D = q.shape
    H_kv = k.shape[1]
    if impl == "sdpa" and not return_weights:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=H != H_kv)
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"impl must be one of {IMPLEMENTATIONS}, got {impl!r}")
    k = repeat_kv(k, H // H_kv)  # [B, H, Tk, D]
    v = repeat_kv(v, H // H_kv)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # [B, H, Tq, Tk]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores.float(), dim=-1).to(q.dtype)  # [B, H, Tq, Tk]
    out = weights @ v  # [B, H, Tq, D]
    return (out, weights) if return_weights else out
