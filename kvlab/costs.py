"""What one forward pass of :class:`~kvlab.model.ToyTransformer` costs: FLOPs and bytes moved.

Counted as the model executes them, 2 FLOPs per multiply-add:

- projections and MLP, per token and layer: ``2 * d * (H*D + 2*H_kv*D)`` (W_q, W_k, W_v)
  ``+ 2 * H*D * d`` (W_o) ``+ 2 * 3 * d * d_ff`` (SwiGLU's three matrices);
- attention, per layer: every one of the T new tokens against all ``past + T`` keys, for
  ``Q K^T`` and for ``weights @ V``: ``2 * 2 * H * D * T * (past + T)``. The masked half of a
  prefill's T x T block is computed too (then masked), so it is counted;
- the LM head, ``2 * d * vocab`` per position whose logits are computed (generate asks for the
  last position only).

Norms (RMSNorm), RoPE, softmax, the SwiGLU activation and residual adds are a few operations per
element and are left out.
Bytes: every weight matrix once per pass (one embedding row per token), the cache's K/V read
(``past + T`` tokens) and written (``T`` tokens). Activations stay in the CPU caches and are
left out. Arithmetic intensity = FLOPs / bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

from ._validate import non_negative_int, positive_int
from .config import ModelConfig


@dataclass(frozen=True)
class PassCost:
    """FLOPs and bytes of one forward pass over a batch."""

    flops: int
    weight_bytes: int
    cache_read_bytes: int
    cache_write_bytes: int

    @property
    def cache_bytes(self) -> int:
        """Bytes of K/V read from and written to the cache."""
        return self.cache_read_bytes + self.cache_write_bytes

    @property
    def bytes(self) -> int:
        return self.weight_bytes + self.cache_bytes

    @property
    def cache_share(self) -> float:
        """Fraction of the bytes moved that are K/V (the rest are weights)."""
        return self.cache_bytes / self.bytes

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte moved."""
        return self.flops / self.bytes

    def __add__(self, other: "PassCost") -> "PassCost":
        """Two passes together (e.g. all decode steps of a generation)."""
        if not isinstance(other, PassCost):
            return NotImplemented
        return PassCost(self.flops + other.flops, self.weight_bytes + other.weight_bytes,
                        self.cache_read_bytes + other.cache_read_bytes,
                        self.cache_write_bytes + other.cache_write_bytes)


def linear_flops_per_token(config: ModelConfig) -> int:
    """FLOPs of every layer's projections and MLP for one token (attention scores excluded)."""
    c = config
    q_dim, kv_dim = c.n_head * c.head_dim, c.n_kv_head * c.head_dim
    per_layer = 2 * c.d_model * (q_dim + 2 * kv_dim) + 2 * q_dim * c.d_model + 2 * 3 * c.d_model * c.d_ff
    return c.n_layer * per_layer


def attention_flops(config: ModelConfig, new_tokens: int, past_tokens: int = 0) -> int:
    """FLOPs of ``Q K^T`` and ``weights @ V`` in every layer: T new tokens against ``past + T`` keys."""
    c = config
    T = positive_int("new_tokens", new_tokens)
    past = non_negative_int("past_tokens", past_tokens)
    return c.n_layer * 2 * 2 * c.n_head * c.head_dim * T * (past + T)


def weight_bytes(config: ModelConfig, new_tokens: int, dtype_bytes: int = 4) -> int:
    """Bytes of weights one pass reads: every matrix and norm once, one embedding row per new token."""
    c = config
    per_layer = c.d_model * (c.n_head + 2 * c.n_kv_head) * c.head_dim + c.n_head * c.head_dim * c.d_model \
        + 3 * c.d_model * c.d_ff + 2 * c.d_model
    matrices = c.n_layer * per_layer + c.d_model + c.d_model * c.vocab_size  # layers, final norm, LM head
    return (matrices + new_tokens * c.d_model) * dtype_bytes


def pass_cost(config: ModelConfig, new_tokens: int, past_tokens: int = 0, batch_size: int = 1,
              dtype_bytes: int = 4, logits_positions: int = 1) -> PassCost:
    """FLOPs and bytes of one pass feeding ``new_tokens`` per sequence after ``past_tokens`` cached ones.

    A prefill of P tokens is ``pass_cost(c, P)``; a decode step at length t is ``pass_cost(c, 1, t - 1)``.
    The weights are read once for the whole batch; everything else scales with ``batch_size``.
    """
    c = config
    T = positive_int("new_tokens", new_tokens)
    past = non_negative_int("past_tokens", past_tokens)
    B = positive_int("batch_size", batch_size)
    positive_int("dtype_bytes", dtype_bytes)
    positive_int("logits_positions", logits_positions, maximum=T)
    flops = B * (T * linear_flops_per_token(c) + attention_flops(c, T, past)
                 + logits_positions * 2 * c.d_model * c.vocab_size)
    kv_token = 2 * c.n_layer * c.n_kv_head * c.head_dim * dtype_bytes  # K and V of one token, all layers
    return PassCost(flops=flops, weight_bytes=weight_bytes(c, B * T, dtype_bytes),
                    cache_read_bytes=B * (past + T) * kv_token, cache_write_bytes=B * T * kv_token)


def decode_cost(config: ModelConfig, prompt_len: int, steps: int, batch_size: int = 1,
                dtype_bytes: int = 4) -> PassCost:
    """All ``steps`` decode passes after a prefill of ``prompt_len`` tokens, summed.

    Decode pass i (1-based) feeds the i-th generated token, which sits after
    ``prompt_len + i - 1`` cached tokens: ``pass_cost(config, 1, prompt_len + i - 1, batch_size)``.
    """
    P = positive_int("prompt_len", prompt_len)
    n = positive_int("steps", steps)
    total = pass_cost(config, 1, P, batch_size, dtype_bytes)
    for i in range(2, n + 1):
        total = total + pass_cost(config, 1, P + i - 1, batch_size, dtype_bytes)
    return total


def attention_crossover(config: ModelConfig) -> int:
    """Length t where, in a pass over all t tokens without a cache, attention's ``4*H*D*t^2`` FLOPs
    overtake the projections' and MLP's ``t * linear_flops_per_token``: ``t = linear / (4*H*D)`` per layer."""
    c = config
    return round(linear_flops_per_token(c) / (c.n_layer * 4 * c.n_head * c.head_dim))
