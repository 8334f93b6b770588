"""Caches that exist to teach, kept out of the core model.

- :class:`KOnlyCache` and :func:`k_only_forward`: chapter 3.5's misconception 2, "caching K is
  enough". The outputs are right, but nothing is saved that matters: V of a past token at
  layer l needs that token's hidden state at layer l, which needs every earlier layer run
  over the whole prefix again. Only the K projection of past tokens is skipped.
- Deliberately broken caches for chapter 3.5's find-the-bug lab: each is a :class:`~kvlab.cache.KVCache`
  with one realistic bug in one overridden method. They run without any error, and the model's
  output quietly goes wrong; :data:`BROKEN_CACHES` names them by a short id.
"""
from __future__ import annotations

import torch

from . import attention as attn_ops
from .cache import BaseCache, KVCache, _nbytes
from .config import ModelConfig
from .model import ForwardProbe, apply_rope, rope_tables


class KOnlyCache(BaseCache):
    """Caches K but not V, preallocated like :class:`~kvlab.cache.KVCache`: ``k`` is (L, B, H_kv, S_max, D)."""

    stores_values = False

    def __init__(self, config: ModelConfig, batch_size, max_seq_len=None, dtype=None, device=None):
        super().__init__(config, batch_size, max_seq_len, dtype, device)
        c = config
        self._check_storage_fits(c.n_layer * c.n_kv_head * c.head_dim * self.element_bytes, "the K cache")
        shape = (c.n_layer, self.batch_size, c.n_kv_head, self.max_seq_len, c.head_dim)  # (L, B, H_kv, S_max, D)
        self.k = torch.zeros(shape, dtype=self.dtype, device=self.device)
        self.allocations += 1

    def update(self, layer, k, v):
        raise TypeError("KOnlyCache stores no V: k_only_forward calls write_k() and recomputes V every step")

    def write_k(self, layer: int, k: torch.Tensor) -> torch.Tensor:
        """Store the new tokens' K [B, H_kv, T, D]; return K of all ``length + T`` tokens (a view)."""
        end = self.length + k.shape[2]
        self.k[layer, :, :, self.length:end] = k
        self.bytes_copied += k.numel() * self.k.element_size()
        return self.k[layer, :, :, :end]  # [B, H_kv, end, D]

    @property
    def element_bytes(self) -> float:
        return torch.empty((), dtype=self.dtype).element_size()

    @property
    def nbytes(self) -> int:
        return _nbytes(self.k)

    @property
    def used_bytes(self) -> int:
        return self.nbytes * self.length // self.max_seq_len


def k_only_forward(model, input_ids, cache: KOnlyCache, *, pad_lengths=None, last_logits_only: bool = False,
                   probe: ForwardProbe | None = None) -> torch.Tensor:
    """One forward pass with a K-only cache. ``input_ids`` [B, T] is the *whole* sequence.

    K of the first ``cache.length`` tokens is read from the cache; every hidden state, every Q
    and every V is computed again for all T tokens, at every layer. Returns logits like
    ``model.forward``. Checks its arguments, then runs :func:`k_only_forward_unchecked`.
    """
    ids = model.check_ids(input_ids)
    B, T = ids.shape
    if not isinstance(cache, KOnlyCache):
        raise ValueError(f"cache must be a KOnlyCache, got {type(cache).__name__}")
    model.check_cache(cache, B)
    past = cache.length
    if T <= past:
        raise ValueError(f"input_ids: a K-only cache needs the whole sequence ({past + 1}+ tokens), got {T}")
    cache.check_room(T - past)
    pad = model.check_pad(pad_lengths, B)
    return k_only_forward_unchecked(model, ids, cache, pad, last_logits_only=last_logits_only, probe=probe)


def k_only_forward_unchecked(model, ids: torch.Tensor, cache: KOnlyCache, pad: torch.Tensor | None, *,
                             last_logits_only: bool = False, probe: ForwardProbe | None = None) -> torch.Tensor:
    """:func:`k_only_forward` on arguments already checked (``generate`` checks them once per generation)."""
    B, T = ids.shape
    past = cache.length
    cos, sin, mask = model.rope_and_mask(0, T, pad)
    x = model.embed(ids)  # [B, T, d_model]: the whole sequence, every pass
    for block in model.layers:
        attn = block.attn
        h = block.attn_norm(x)
        w_q, w_k, w_v = attn.wqkv.weight.split([attn.q_dim, attn.kv_dim, attn.kv_dim], dim=1)
        q = apply_rope(attn.heads(h @ w_q, attn.n_head), cos, sin)  # [B, H, T, D]: Q of every token
        k_new = apply_rope(attn.heads(h[:, past:] @ w_k, attn.n_kv_head),
                           cos[..., past:, :], sin[..., past:, :])  # [B, H_kv, T - past, D]: only new tokens' K
        k = cache.write_k(attn.layer, k_new)  # [B, H_kv, T, D]
        v = attn.heads(h @ w_v, attn.n_kv_head)  # [B, H_kv, T, D]: V of every token, again
        if probe is not None:
            probe.k_tokens.append(T - past)
            probe.v_tokens.append(T)
        out = attn_ops.attention(q, k, v, mask, impl=model.attention_impl)  # [B, H, T, D]
        x = x + attn.wo(out.transpose(1, 2).reshape(B, T, attn.q_dim))  # [B, H, T, D] -> [B, T, H*D]
        x = x + block.mlp(block.mlp_norm(x))
    cache.advance(T - past)
    if last_logits_only:
        x = x[:, -1:]  # [B, 1, d_model]
    return model.lm_head(model.norm(x))


# -- the find-the-bug lab of chapter 3.5 ---------------------------------------------------------------
class RopeOffsetBugCache(KVCache):
    """Bug: the new tokens' keys are stored rotated for positions ``0 .. T-1`` instead of
    ``length .. length + T - 1``: the position offset was left out of RoPE for K.

    The model has already rotated K at the right positions before it writes, so this cache undoes
    that rotation and applies the one the buggy code would have (a rotation by -angle undoes one by
    +angle). A prefill starts at position 0 and comes out right; every decoded key claims position 0.
    Written for unpadded batches (the lab's single prompt).
    """

    bug_id = "rope_offset"

    def __init__(self, config: ModelConfig, batch_size, max_seq_len=None, dtype=None, device=None):
        super().__init__(config, batch_size, max_seq_len, dtype, device)
        cos, sin = rope_tables(config.head_dim, self.max_seq_len, config.rope_theta)  # [S_max, D] each
        self._cos, self._sin = cos.to(self.device, self.dtype), sin.to(self.device, self.dtype)

    def _store(self, layer, k, v, end) -> None:
        T = k.shape[2]
        right = slice(self.length, end)  # the positions the model rotated K for
        unrotated = apply_rope(k, self._cos[right], -self._sin[right])  # [B, H_kv, T, D]
        wrong = apply_rope(unrotated, self._cos[:T], self._sin[:T])  # as if this pass started at position 0
        super()._store(layer, wrong, v, end)


class NoResetBugCache(KVCache):
    """Bug: ``reset()`` forgets to set ``length`` back to 0.

    A server that reuses one cache for the next request calls ``reset()`` in between; here the new
    prompt is appended after the previous request's tokens, attends to them, and starts at the wrong
    RoPE positions.
    """

    bug_id = "no_reset"

    def reset(self) -> None:
        pass  # the line `self.length = 0` is missing


class KInPlaceOfVBugCache(KVCache):
    """Bug: K is written where V belongs (a copy-paste slip in the store), so attention averages keys."""

    bug_id = "k_as_v"

    def _store(self, layer, k, v, end) -> None:
        self.k[layer, :, :, self.length:end] = k
        self.v[layer, :, :, self.length:end] = k  # should be v


class OffByOneBugCache(KVCache):
    """Bug: new tokens are written one slot early, at ``length - 1`` (the index of the last stored token,
    not the next free slot).

    A prefill of P tokens starts at slot 0 (``max(0 - 1, 0)``) and comes out right. The first decode
    step writes its token at slot P - 1, over the prompt's last token; every later token also lands
    one slot before its place, so only that one real token is ever overwritten. Attention reads
    ``length + 1`` slots, and the last of them, ``length``, has never been written: zeros in a fresh
    cache, the previous request's K/V in a reused one. After the prefill, then, the prompt's last
    token is missing and every step attends to one token that is not there.
    """

    bug_id = "off_by_one"

    def _store(self, layer, k, v, end) -> None:
        start = max(self.length - 1, 0)  # should be self.length
        T = k.shape[2]
        self.k[layer, :, :, start:start + T] = k
        self.v[layer, :, :, start:start + T] = v


class OneLayerSlotBugCache(KVCache):
    """Bug: every layer writes and reads layer 0's slot (the layer index is never used).

    Inside one pass each layer overwrites the new tokens' slot just before reading it, so a prefill
    comes out right; from the first decode step on, every layer attends to the *last* layer's K/V of
    the earlier tokens.
    """

    bug_id = "one_slot"

    def _store(self, layer, k, v, end) -> None:
        super()._store(0, k, v, end)  # should be layer

    def _read(self, layer, end):
        return super()._read(0, end)  # should be layer


BROKEN_CACHES: dict[str, type[KVCache]] = {cls.bug_id: cls for cls in (
    RopeOffsetBugCache, NoResetBugCache, KInPlaceOfVBugCache, OffByOneBugCache, OneLayerSlotBugCache)}
