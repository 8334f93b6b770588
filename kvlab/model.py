"""A decoder-only, LLaMA-style Transformer small enough to read in one sitting.

Token embedding -> n_layer x [RMSNorm -> attention (RoPE, GQA) -> residual,
RMSNorm -> SwiGLU MLP -> residual] -> RMSNorm -> LM head. No biases, untied head:
exactly the math of transformers' ``LlamaForCausalLM`` (see ``kvlab.interop``).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import attention as attn_ops
from .cache import BaseCache, CacheFullError
from .config import ModelConfig
from .device import check_fits


SPLIT_K_MAX_ROWS = 8  # decode-sized inputs (a few rows) take the split-K path on CPU


def split_k_matmul(x: torch.Tensor, w: torch.Tensor, parts: int) -> torch.Tensor:
    """``x @ w`` with the input dimension cut into ``parts`` slices.

    The slices are multiplied in one batched matmul, which spreads them over CPU
    cores, and the partial products are summed. A decode step multiplies one row by
    each weight matrix; a plain matrix-vector product runs on a single core, so this
    lets every core stream its share of the weights.
    """
    *lead, n_in = x.shape
    xs = x.reshape(-1, parts, n_in // parts).transpose(0, 1)  # [rows, in] -> [parts, rows, in/parts]
    ws = w.view(parts, n_in // parts, w.shape[1])  # [in, out] -> [parts, in/parts, out]
    return (xs @ ws).sum(0).view(*lead, w.shape[1])  # [parts, rows, out] -> [..., out]


class Linear(nn.Module):
    """``y = x @ W`` without bias, ``W`` stored as (in_features, out_features).

    Same math as ``nn.Linear`` (which stores W transposed). Input-major storage lets
    a one-row product stream W contiguously; on CPU, decode-sized inputs also use
    :func:`split_k_matmul` to put every core to work (see ``python -m kvlab.bench``).
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if w.device.type == "cpu" and x.numel() <= SPLIT_K_MAX_ROWS * w.shape[0]:
            parts = torch.get_num_threads()
            if parts > 1 and w.shape[0] % parts == 0:
                return split_k_matmul(x, w, parts)
        return x @ w


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight``, computed in fp32 like LLaMA."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def rope_tables(head_dim: int, max_seq_len: int, theta: float):
    """cos and sin tables [max_seq_len, head_dim] for rotary position embeddings."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))  # [D/2]
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.int64).float(), inv_freq)  # [S, D/2]
    angles = torch.cat([angles, angles], dim=-1)  # [S, D]: LLaMA's rotate-half layout
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [B, H, T, D] by the angles of its positions (cos, sin [T, D])."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # rotate_half
    return x * cos + rotated * sin


class Attention(nn.Module):
    """Grouped-query self-attention that reads and writes a KV cache.

    ``last_projected`` records how many tokens (per sequence) had K and V projected
    in the last call: the trace's proof of what a cache saves.
    """

    def __init__(self, config: ModelConfig, layer: int):
        super().__init__()
        c = config
        self.layer = layer
        self.n_head, self.n_kv_head, self.head_dim = c.n_head, c.n_kv_head, c.head_dim
        self.q_dim, self.kv_dim = c.n_head * c.head_dim, c.n_kv_head * c.head_dim
        # W_q, W_k and W_v side by side: one matrix product projects all three.
        self.wqkv = Linear(c.d_model, self.q_dim + 2 * self.kv_dim)
        self.wo = Linear(self.q_dim, c.d_model)
        self.impl = "sdpa"
        self.last_projected = (0, 0)
        self.last_weights: torch.Tensor | None = None

    def _heads(self, x: torch.Tensor, n_heads: int) -> torch.Tensor:
        B, T, _ = x.shape
        return x.reshape(B, T, n_heads, self.head_dim).transpose(1, 2)  # [B, T, H*D] -> [B, H, T, D]

    def forward(self, x, cos, sin, cache: BaseCache | None, start: int, return_weights: bool = False):
        """x [B, T, d_model] holds tokens at positions ``start .. start + T - 1``."""
        B, T, _ = x.shape
        if cache is not None and not cache.caches_values:
            # K-only cache: x is the whole sequence (start == 0). K of the first
            # `past` tokens comes from the cache; V must be projected for all T.
            past = cache.length
            w_q, w_k, w_v = self.wqkv.weight.split([self.q_dim, self.kv_dim, self.kv_dim], dim=1)
            q = apply_rope(self._heads(x @ w_q, self.n_head), cos, sin)  # [B, H, T, D]
            k_new = apply_rope(self._heads(x[:, past:] @ w_k, self.n_kv_head), cos[past:], sin[past:])
            k = cache.update_k(self.layer, k_new)  # [B, H_kv, T, D]
            v = self._heads(x @ w_v, self.n_kv_head)  # [B, H_kv, T, D]
            self.last_projected = (T - past, T)
        else:
            q, k, v = self.wqkv(x).split([self.q_dim, self.kv_dim, self.kv_dim], dim=-1)  # [B, T, *]
            q = apply_rope(self._heads(q, self.n_head), cos, sin)  # [B, H, T, D]
            k = apply_rope(self._heads(k, self.n_kv_head), cos, sin)  # [B, H_kv, T, D]
            v = self._heads(v, self.n_kv_head)  # [B, H_kv, T, D]
            if cache is not None:
                k, v = cache.update(self.layer, k, v)  # [B, H_kv, start + T, D]
            self.last_projected = (T, T)
        out = attn_ops.attention(q, k, v, q_offset=start, impl=self.impl, return_weights=return_weights)
        if return_weights:
            out, self.last_weights = out
        out = out.transpose(1, 2).reshape(B, T, self.n_head * self.head_dim)  # [B, H, T, D] -> [B, T, H*D]
        return self.wo(out)


class SwiGLU(nn.Module):
    """``down(silu(x W_gate) * (x W_up))``, with W_gate and W_up side by side in one matrix."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.w_gate_up = Linear(config.d_model, 2 * config.d_ff)
        self.w_down = Linear(config.d_ff, config.d_model)

    def forward(self, x):
        gate, up = self.w_gate_up(x).chunk(2, dim=-1)  # [B, T, d_ff] each
        return self.w_down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, config: ModelConfig, layer: int):
        super().__init__()
        self.attn_norm = RMSNorm(config.d_model, config.norm_eps)
        self.attn = Attention(config, layer)
        self.mlp_norm = RMSNorm(config.d_model, config.norm_eps)
        self.mlp = SwiGLU(config)

    def forward(self, x, cos, sin, cache, start, return_weights=False):
        x = x + self.attn(self.attn_norm(x), cos, sin, cache, start, return_weights)
        return x + self.mlp(self.mlp_norm(x))


class ToyTransformer(nn.Module):
    """LLaMA-style decoder. ``forward(input_ids, cache)`` -> logits [B, T, vocab].

    Without a cache, ``input_ids`` is the whole sequence. With a cache, it is the
    new chunk: it is appended to the cache and attends over everything stored.
    (With a K-only cache it is again the whole sequence; see ``KOnlyCache``.)
    """

    def __init__(self, config: ModelConfig, seed: int | None = 0):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise ValueError(f"config must be a ModelConfig, got {type(config).__name__}")
        check_fits(config.n_params() * 4, "cpu", f"a model of {config.n_params():,} fp32 parameters", "config")
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.layers = nn.ModuleList(Block(config, i) for i in range(config.n_layer))
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self.lm_head = Linear(config.d_model, config.vocab_size)
        cos, sin = rope_tables(config.head_dim, config.max_seq_len, config.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.reset_parameters(seed)

    @torch.no_grad()
    def reset_parameters(self, seed: int | None = 0) -> None:
        """GPT-2-style init (std 0.02, residual projections scaled by 1/sqrt(2L)); seeded."""
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        resid_std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                std = resid_std if name.endswith(("wo.weight", "w_down.weight")) else 0.02
                p.copy_(torch.randn(p.shape, generator=gen) * std)

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.weight.dtype

    @property
    def attention_impl(self) -> str:
        """Which attention path runs: "sdpa" (fused) or "explicit" (softmax(QK^T/sqrt d)V spelled out)."""
        return self.layers[0].attn.impl

    @attention_impl.setter
    def attention_impl(self, impl: str) -> None:
        if impl not in attn_ops.IMPLEMENTATIONS:
            raise ValueError(f"attention_impl must be one of {attn_ops.IMPLEMENTATIONS}, got {impl!r}")
        for block in self.layers:
            block.attn.impl = impl

    @property
    def last_projected(self) -> tuple[int, int]:
        """(tokens whose K, tokens whose V) were projected per sequence in the last forward."""
        return self.layers[0].attn.last_projected

    def _check_input(self, input_ids) -> torch.Tensor:
        if not isinstance(input_ids, torch.Tensor):
            raise ValueError(f"input_ids must be a torch.Tensor of token ids [B, T], got {type(input_ids).__name__}")
        if input_ids.dim() != 2 or input_ids.shape[1] == 0 or input_ids.shape[0] == 0:
            raise ValueError(f"input_ids must be shaped [B, T] with B, T >= 1, got {list(input_ids.shape)}")
        if input_ids.dtype.is_floating_point or input_ids.dtype == torch.bool:
            raise ValueError(f"input_ids must hold integer token ids, got dtype {input_ids.dtype}")
        if input_ids.device.type == "cpu":
            lo, hi = int(input_ids.min()), int(input_ids.max())
            if lo < 0 or hi >= self.config.vocab_size:
                raise ValueError(f"input_ids must lie in [0, {self.config.vocab_size}), got values in [{lo}, {hi}]")
        return input_ids

    def forward(self, input_ids, cache: BaseCache | None = None, *, last_logits_only: bool = False,
                return_attention: bool = False):
        """Logits [B, T, vocab] (or [B, 1, vocab] with ``last_logits_only``).

        With ``return_attention`` the explicit path runs and ``(logits, weights)`` is
        returned, ``weights`` a list over layers of [B, H, T, T_total] tensors.
        """
        input_ids = self._check_input(input_ids)
        B, T = input_ids.shape
        start = 0
        if cache is not None:
            if not isinstance(cache, BaseCache):
                raise ValueError(f"cache must be a kvlab cache, got {type(cache).__name__}")
            if cache.batch_size != B:
                raise ValueError(f"input_ids: batch of {B} sequences but the cache holds {cache.batch_size}")
            if cache.caches_values:
                start = cache.length
                cache.check_room(T)  # fail before any layer writes: the cache stays as it was
            elif T <= cache.length:
                raise ValueError(f"input_ids: a K-only cache needs the whole sequence ({cache.length}+ tokens), got {T}")
            else:
                cache.check_room(T - cache.length)
        end = start + T
        if end > self.config.max_seq_len:
            raise CacheFullError(f"sequence of {end} tokens passes max_seq_len={self.config.max_seq_len}")
        cos = self.rope_cos[start:end].to(self.dtype)  # [T, D]
        sin = self.rope_sin[start:end].to(self.dtype)
        x = self.embed(input_ids)  # [B, T, d_model]
        if return_attention:
            saved, self.attention_impl = self.attention_impl, "explicit"
        try:
            for block in self.layers:
                x = block(x, cos, sin, cache, start, return_attention)
        finally:
            if return_attention:
                self.attention_impl = saved
        if cache is not None:
            cache.advance(end - cache.length)
        if last_logits_only:
            x = x[:, -1:]  # [B, 1, d_model]
        logits = self.lm_head(self.norm(x))  # [B, T, vocab]
        if return_attention:
            return logits, [block.attn.last_weights for block in self.layers]
        return logits
