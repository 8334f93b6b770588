"""A decoder-only, LLaMA-style Transformer small enough to read in one sitting.

Token embedding -> n_layer x [RMSNorm -> attention (RoPE, GQA) -> residual,
RMSNorm -> SwiGLU MLP -> residual] -> RMSNorm -> LM head. No biases, untied head:
exactly the math of transformers' ``LlamaForCausalLM`` (see ``kvlab.interop``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import attention as attn_ops
from ._validate import seed_value
from .cache import BaseCache, CacheFullError
from .config import ModelConfig
from .device import check_fits, same_device
from .fast_linear import Linear


@dataclass
class ForwardProbe:
    """What one forward pass reports besides its logits, filled layer by layer.

    ``k_tokens`` / ``v_tokens``: per layer, how many tokens (per sequence) had K / V projected,
    the trace's proof of what a cache saves. ``weights``: per layer, the attention weights
    [B, H, Tq, Tk], kept only when ``keep_weights`` (it forces the explicit attention path).
    """

    keep_weights: bool = False
    k_tokens: list[int] = field(default_factory=list)
    v_tokens: list[int] = field(default_factory=list)
    weights: list[torch.Tensor] = field(default_factory=list)

    def projected(self) -> tuple[int, int]:
        """(K, V) tokens projected per layer in this pass (every layer projects the same number)."""
        return (self.k_tokens[0], self.v_tokens[0]) if self.k_tokens else (0, 0)


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight``, computed in fp32 like LLaMA."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # F.rms_norm is x * rsqrt(mean(x^2) + eps) in one call (a decode step runs 2L + 1 of these).
        if x.dtype == torch.float32:  # the weight inside the call: the same numbers, fewer ops per step
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        # narrower dtypes: normalise in fp32, round back, then scale (transformers' LlamaRMSNorm, in that order)
        return self.weight * F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps).to(x.dtype)


def rope_tables(head_dim: int, max_seq_len: int, theta: float):
    """cos and sin tables [max_seq_len, head_dim] for rotary position embeddings."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))  # [D/2]
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.int64).float(), inv_freq)  # [S, D/2]
    angles = torch.cat([angles, angles], dim=-1)  # [S, D]: LLaMA's rotate-half layout
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [B, H, T, D] by the angles of its positions (cos, sin [T, D] or [B, 1, T, D])."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # rotate_half
    return x * cos + rotated * sin


class Attention(nn.Module):
    """Grouped-query self-attention that writes the new tokens' K/V into a cache and reads all of them back."""

    def __init__(self, config: ModelConfig, layer: int):
        super().__init__()
        c = config
        self.layer = layer
        self.n_head, self.n_kv_head, self.head_dim = c.n_head, c.n_kv_head, c.head_dim
        self.q_dim, self.kv_dim = c.n_head * c.head_dim, c.n_kv_head * c.head_dim
        # W_q, W_k and W_v side by side: one matrix product projects all three.
        self.wqkv = Linear(c.d_model, self.q_dim + 2 * self.kv_dim)
        self.wo = Linear(self.q_dim, c.d_model)

    def heads(self, x: torch.Tensor, n_heads: int) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, n_heads, self.head_dim).transpose(1, 2)  # [B, T, H*D] -> [B, H, T, D]

    def forward(self, x, cos, sin, mask, cache: BaseCache | None, impl: str, probe: ForwardProbe | None):
        """x [B, T, d_model]: the new tokens. Returns [B, T, d_model]."""
        B, T, _ = x.shape
        qk, v = self.wqkv(x).split([self.q_dim + self.kv_dim, self.kv_dim], dim=-1)  # [B, T, *]: Q and K, V
        qk = apply_rope(self.heads(qk, self.n_head + self.n_kv_head), cos, sin)  # [B, H + H_kv, T, D], one rotation
        q, k = qk.split([self.n_head, self.n_kv_head], dim=1)  # [B, H, T, D], [B, H_kv, T, D]
        v = self.heads(v, self.n_kv_head)  # [B, H_kv, T, D]
        if cache is not None:
            k, v = cache.write(self.layer, k, v)  # [B, H_kv, length + T, D]: everything stored so far
        keep = probe is not None and probe.keep_weights
        out = attn_ops.attention(q, k, v, mask, impl="explicit" if keep else impl, return_weights=keep)
        if probe is not None:
            probe.k_tokens.append(T)
            probe.v_tokens.append(T)
            if keep:
                out, weights = out
                probe.weights.append(weights)
        out = out.transpose(1, 2).reshape(B, T, self.q_dim)  # [B, H, T, D] -> [B, T, H*D]
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

    def forward(self, x, cos, sin, mask, cache, impl, probe):
        x = x + self.attn(self.attn_norm(x), cos, sin, mask, cache, impl, probe)
        return x + self.mlp(self.mlp_norm(x))


class ToyTransformer(nn.Module):
    """LLaMA-style decoder. ``forward(input_ids, cache)`` -> logits [B, T, vocab].

    Without a cache, ``input_ids`` is the whole sequence. With a cache, it is the new
    chunk: it is appended to the cache and attends over everything stored.
    """

    def __init__(self, config: ModelConfig, seed: int | None = 0):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise ValueError(f"config must be a ModelConfig, got {type(config).__name__}")
        seed = None if seed is None else seed_value("seed", seed)
        check_fits(config.n_params() * 4, "cpu", f"a model of {config.n_params():,} fp32 parameters", "config")
        check_fits(2 * config.max_seq_len * config.head_dim * 4, "cpu", "the RoPE tables", "max_seq_len")
        self.config = config
        self.attention_impl = "sdpa"
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
        return self._attention_impl

    @attention_impl.setter
    def attention_impl(self, impl: str) -> None:
        if impl not in attn_ops.IMPLEMENTATIONS:
            raise ValueError(f"attention_impl must be one of {attn_ops.IMPLEMENTATIONS}, got {impl!r}")
        self._attention_impl = impl

    # -- checks, once per forward pass --------------------------------------------------------
    def check_ids(self, input_ids, name: str = "input_ids") -> torch.Tensor:
        """``input_ids`` as a LongTensor [B, T] of ids in [0, vocab) on the model's device."""
        if not isinstance(input_ids, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor of token ids [B, T], got {type(input_ids).__name__}")
        if input_ids.dim() != 2 or input_ids.shape[1] == 0 or input_ids.shape[0] == 0:
            raise ValueError(f"{name} must be shaped [B, T] with B, T >= 1, got {list(input_ids.shape)}")
        if input_ids.dtype.is_floating_point or input_ids.dtype.is_complex or input_ids.dtype == torch.bool:
            raise ValueError(f"{name} must hold integer token ids, got dtype {input_ids.dtype}")
        lo, hi = (int(v) for v in torch.aminmax(input_ids))  # one small reduction, on every device
        if lo < 0 or hi >= self.config.vocab_size:
            raise ValueError(f"{name} must lie in [0, {self.config.vocab_size}), got values in [{lo}, {hi}]")
        return input_ids.to(device=self.device, dtype=torch.long)

    def check_cache(self, cache, batch_size: int) -> None:
        """Reject a cache this model cannot write into, before any layer writes anything."""
        if not isinstance(cache, BaseCache):
            raise ValueError(f"cache must be a kvlab cache, got {type(cache).__name__}")
        c, mine = cache.config, self.config
        if (c.n_layer, c.n_kv_head, c.head_dim) != (mine.n_layer, mine.n_kv_head, mine.head_dim):
            raise ValueError(
                f"cache: built for (n_layer, n_kv_head, head_dim) = {(c.n_layer, c.n_kv_head, c.head_dim)}, "
                f"but this model has {(mine.n_layer, mine.n_kv_head, mine.head_dim)}")
        if cache.batch_size != batch_size:
            raise ValueError(f"cache: holds {cache.batch_size} sequences but input_ids has a batch of {batch_size}")
        if cache.dtype != self.dtype:
            raise ValueError(f"cache: computes in {cache.dtype} but the model in {self.dtype}; "
                             f"build the cache with dtype={self.dtype}")
        if not same_device(cache.device, self.device):
            raise ValueError(f"cache: lives on {cache.device} but the model on {self.device}; "
                             f"build the cache with device={self.device}")

    def check_pad(self, pad_lengths, batch_size: int) -> torch.Tensor | None:
        """Left-padding lengths [B] as a LongTensor.

        A row may be all padding so far (the first chunk of a chunked prefill): its padding
        queries attend only to themselves and nothing real ever reads them.
        """
        if pad_lengths is None:
            return None
        pad = torch.as_tensor(pad_lengths)
        if pad.shape != (batch_size,) or pad.dtype.is_floating_point or pad.dtype == torch.bool:
            raise ValueError(f"pad_lengths must be {batch_size} integers (one per sequence), got {pad_lengths!r}")
        lo, hi = (int(v) for v in torch.aminmax(pad))
        if lo < 0 or hi >= self.config.max_seq_len:
            raise ValueError(f"pad_lengths must lie in [0, {self.config.max_seq_len}), got values in [{lo}, {hi}]")
        return pad.to(device=self.device, dtype=torch.long)

    def rope_and_mask(self, start, T: int, pad: torch.Tensor | None, end: int | None = None):
        """RoPE angles and attention mask for new tokens in columns ``start .. start + T - 1``.

        With left padding, row b's real tokens are at positions ``column - pad[b]``: the
        same positions they would have alone, so every row computes what it would alone.
        ``start`` may be a LongTensor [B] (a paged cache whose rows hold different numbers of
        tokens): row b's new tokens sit at positions ``start[b] ..``, no padding anywhere, and
        ``end`` is the longest row's end (the keys the cache reads back).
        """
        if isinstance(start, torch.Tensor):
            pos = start[:, None] + torch.arange(T, device=self.device)[None]  # [B, T]
            cos, sin = self.rope_cos[pos][:, None], self.rope_sin[pos][:, None]  # [B, 1, T, D]
            mask = attn_ops.attention_mask(T, end, start, None, self.device)
            return cos.to(self.dtype), sin.to(self.dtype), mask
        end = start + T
        if pad is None:
            cos, sin = self.rope_cos[start:end], self.rope_sin[start:end]  # [T, D]
        else:
            pos = (torch.arange(start, end, device=self.device)[None] - pad[:, None]).clamp_min(0)  # [B, T]
            cos, sin = self.rope_cos[pos][:, None], self.rope_sin[pos][:, None]  # [B, 1, T, D]
        mask = attn_ops.attention_mask(T, end, start, pad, self.device)
        return cos.to(self.dtype), sin.to(self.dtype), mask

    def forward(self, input_ids, cache: BaseCache | None = None, *, pad_lengths=None, last_logits_only: bool = False,
                return_attention: bool = False, probe: ForwardProbe | None = None):
        """Logits [B, T, vocab] (or [B, 1, vocab] with ``last_logits_only``).

        ``pad_lengths`` [B]: how many leading columns of each row are left padding.
        ``probe`` collects what each layer projected; with ``return_attention`` the explicit
        path runs and ``(logits, weights)`` is returned, ``weights`` a list over layers of
        [B, H, T, T_total] tensors. Every argument is checked here, then :meth:`forward_unchecked` runs.
        """
        ids = self.check_ids(input_ids)
        B, T = ids.shape
        start = 0
        if cache is not None:
            self.check_cache(cache, B)
            if not cache.stores_values:
                raise ValueError(f"cache: a {type(cache).__name__} keeps no V, so forward() cannot use it; "
                                 "use generate(..., cache='k_only') or kvlab.teaching_caches.k_only_forward")
            cache.check_room(T)  # fail before any layer writes: the cache stays as it was
            start = cache.starts()  # an int; a LongTensor [B] when rows hold different numbers of tokens
        end = (cache.length if cache is not None else 0) + T  # the longest row's end
        if end > self.config.max_seq_len:
            raise CacheFullError(f"sequence of {end} tokens passes max_seq_len={self.config.max_seq_len}")
        pad = self.check_pad(pad_lengths, B)
        if pad is not None and isinstance(start, torch.Tensor):
            raise ValueError("pad_lengths: this cache's rows hold different numbers of tokens (no padding needed); "
                             "left padding cannot be combined with it")
        if return_attention and probe is None:
            probe = ForwardProbe(keep_weights=True)
        logits = self.forward_unchecked(ids, cache, pad, last_logits_only=last_logits_only, probe=probe)
        return (logits, probe.weights) if return_attention else logits

    def forward_unchecked(self, ids: torch.Tensor, cache: BaseCache | None, pad: torch.Tensor | None, *,
                          last_logits_only: bool = False, probe: ForwardProbe | None = None) -> torch.Tensor:
        """The forward pass itself, on arguments already checked (by :meth:`forward`, or once by ``generate``).

        ``ids`` [B, T] long on the model's device, ``cache`` with room for T more tokens, ``pad`` [B] long
        or None. Nothing here checks a value or waits for the device, so a timed pass times the model only.
        """
        T = ids.shape[1]
        start, end = 0, T
        if cache is not None:
            cache.reserve(T)  # a paged cache takes its blocks here (or raises, before any layer writes)
            start, end = cache.starts(), cache.length + T  # starts: an int, or a LongTensor [B] per row
        cos, sin, mask = self.rope_and_mask(start, T, pad, end)
        x = self.embed(ids)  # [B, T, d_model]
        for block in self.layers:
            x = block(x, cos, sin, mask, cache, self.attention_impl, probe)
        if cache is not None:
            cache.advance(T)
        if last_logits_only:
            x = x[:, -1:]  # [B, 1, d_model]
        return self.lm_head(self.norm(x))  # [B, T, vocab]
