"""KV caches: preallocated, grow-by-concatenation, and int8-quantized.

All caches share one position counter, ``length``: the number of tokens whose K and V
are stored. During a forward pass each layer calls ``write`` to store the new tokens at
``[length, length + T)`` and read back everything stored so far; the model calls
``advance(T)`` once after the last layer. ``update`` is ``write`` for callers outside
the model: it checks its arguments first and changes nothing when they are wrong.
(Caches that exist only to teach, K-only and deliberately broken ones, are in
``kvlab.teaching_caches``.)
"""
from __future__ import annotations

import numbers

import torch

from ._validate import non_negative_int, positive_int
from .config import ModelConfig
from .device import as_device, available_memory, same_device
from .memory import format_bytes, torch_dtype


class CacheFullError(RuntimeError):
    """A write would pass ``max_seq_len``; the cache was left exactly as it was."""


class BaseCache:
    """What every cache shares: sizes, the ``length`` counter, argument checks and byte accounting."""

    stores_values = True  # False only for the K-only cache of kvlab.teaching_caches

    def __init__(self, config: ModelConfig, batch_size, max_seq_len=None, dtype=None, device=None):
        if not isinstance(config, ModelConfig):
            raise ValueError(f"config must be a ModelConfig, got {type(config).__name__}")
        self.config = config
        self.batch_size = positive_int("batch_size", batch_size)
        limit = config.max_seq_len
        self.max_seq_len = limit if max_seq_len is None else positive_int("max_seq_len", max_seq_len, maximum=limit)
        self.dtype = torch.float32 if dtype is None else torch_dtype(dtype)  # the dtype K and V are read back in
        self.device = as_device("cpu" if device is None else device)
        self.length = 0
        self.allocations = 0  # tensors allocated for storage so far
        self.bytes_copied = 0  # bytes written into storage so far (new tokens and re-copies)

    # -- the position counter -------------------------------------------------
    def check_room(self, n_new: int) -> None:
        """Raise :class:`CacheFullError` if ``n_new`` more tokens would not fit."""
        if self.length + n_new > self.max_seq_len:
            raise CacheFullError(
                f"cache full: {self.length} tokens stored, {n_new} more would pass max_seq_len={self.max_seq_len}"
            )

    def starts(self):
        """Column where each row's next token goes: ``length`` for every row (an int). A cache whose rows
        hold different numbers of tokens (:class:`~kvlab.paged_cache.PagedKVCache`) returns a LongTensor [B]."""
        return self.length

    def reserve(self, n_new: int) -> None:
        """Take what ``n_new`` more tokens per row need (called once per pass, before any layer writes). A
        preallocated cache has it all already; a paged cache takes blocks here, or raises changing nothing."""

    def advance(self, n) -> None:
        """Count ``n`` more tokens as stored (called once per forward pass)."""
        n = non_negative_int("n", n)
        self.check_room(n)
        self.length += n

    def reset(self) -> None:
        """Forget all tokens (storage is kept for reuse)."""
        self.length = 0

    # -- writing --------------------------------------------------------------
    def update(self, layer, k, v):
        """Store ``k``/``v`` [B, H_kv, T, D] after the tokens of ``layer``; return K and V of all of them.

        Every argument is checked before anything is written: a bad call leaves the cache,
        its storage and its counters exactly as they were.
        """
        if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) \
                or not 0 <= layer < self.config.n_layer:
            raise ValueError(f"layer must be an integer in [0, {self.config.n_layer}), got {layer!r}")
        self._check_tensor(k, "k")
        self._check_tensor(v, "v")
        if k.shape[2] != v.shape[2]:
            raise ValueError(f"v: holds {v.shape[2]} tokens but k holds {k.shape[2]}; K and V come in pairs")
        self.check_room(k.shape[2])
        self.reserve(k.shape[2])
        return self.write(int(layer), k.to(self.dtype), v.to(self.dtype))

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """``update`` without the checks: the model calls it after checking the cache once per pass."""
        raise NotImplementedError

    def _check_tensor(self, t, name: str) -> None:
        c = self.config
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor [B, H_kv, T, D], got {type(t).__name__}")
        if t.dim() != 4 or t.shape[0] != self.batch_size or t.shape[1] != c.n_kv_head or t.shape[3] != c.head_dim:
            raise ValueError(
                f"{name} must be shaped [B={self.batch_size}, H_kv={c.n_kv_head}, T, D={c.head_dim}], "
                f"got {list(t.shape)}"
            )
        if not t.dtype.is_floating_point:
            raise ValueError(f"{name} must hold floating-point numbers, got dtype {t.dtype}")
        if not same_device(t.device, self.device):
            raise ValueError(f"{name} is on {t.device} but the cache lives on {self.device}")

    def _check_storage_fits(self, bytes_per_slot: float, what: str) -> None:
        """Refuse storage that cannot fit in free memory, naming the argument to blame.

        ``bytes_per_slot``: bytes of one token of one sequence, all layers, K and V.
        """
        free = available_memory(self.device)
        if free is None:
            return
        room = free * 0.9
        if bytes_per_slot * self.batch_size > room:  # not even one token per sequence fits
            raise ValueError(
                f"batch_size: {what} for {self.batch_size:,} sequences needs "
                f"{format_bytes(bytes_per_slot * self.batch_size)} per token, but only {format_bytes(free)} "
                f"is free on {self.device}; choose a smaller batch_size")
        if bytes_per_slot * self.batch_size * self.max_seq_len > room:
            B, S = self.batch_size, self.max_seq_len
            shorter = f"at most {int(room // (bytes_per_slot * B)):,} tokens for {B:,} sequences"
            if bytes_per_slot * S <= room:  # one sequence of S tokens fits: the batch is what is too large
                blamed, advice = "batch_size", (f"at most {int(room // (bytes_per_slot * S)):,} sequences of {S:,} "
                                                f"tokens fit: choose a smaller batch_size (or a smaller max_seq_len: "
                                                f"{shorter})")
            else:
                blamed, advice = "max_seq_len", (f"not even one sequence of {S:,} tokens fits: choose a smaller "
                                                 f"max_seq_len ({shorter})")
            raise ValueError(f"{blamed}: {what} for {B:,} sequences of {S:,} tokens needs "
                             f"{format_bytes(bytes_per_slot * B * S)}, but only {format_bytes(free)} is free on "
                             f"{self.device}; {advice}")

    # -- bytes ----------------------------------------------------------------
    @property
    def element_bytes(self) -> float:
        """Bytes per stored element per token, scales included."""
        raise NotImplementedError

    @property
    def nbytes(self) -> int:
        """Bytes allocated for storage."""
        raise NotImplementedError

    @property
    def used_bytes(self) -> int:
        """Bytes holding the ``length`` stored tokens."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(length={self.length}, max_seq_len={self.max_seq_len}, "
            f"batch_size={self.batch_size}, dtype={self.dtype}, device={self.device})"
        )


def _nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


class KVCache(BaseCache):
    """Preallocated cache: ``k`` and ``v`` shaped (L, B, H_kv, S_max, D), written in place.

    Allocated once, up front, for ``max_seq_len`` tokens; attention only ever sees
    the filled part ``[:length]``. ``storage_dtype`` (default: ``dtype``) may be narrower
    than the dtype the model computes in: an fp32 model with an fp16 cache stores half the
    bytes and reads K/V back converted to fp32.
    """

    def __init__(self, config: ModelConfig, batch_size, max_seq_len=None, dtype=None, device=None,
                 storage_dtype=None):
        super().__init__(config, batch_size, max_seq_len, dtype, device)
        self.storage_dtype = self.dtype if storage_dtype is None else torch_dtype(storage_dtype, "storage_dtype")
        c = config
        shape = (c.n_layer, self.batch_size, c.n_kv_head, self.max_seq_len, c.head_dim)  # (L, B, H_kv, S_max, D)
        self._check_storage_fits(2 * c.n_layer * c.n_kv_head * c.head_dim * self.element_bytes, "the KV cache")
        self._allocate(shape)

    def _allocate(self, shape) -> None:
        self.k = torch.zeros(shape, dtype=self.storage_dtype, device=self.device)
        self.v = torch.zeros(shape, dtype=self.storage_dtype, device=self.device)
        self.allocations += 2

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.k.shape)

    def write(self, layer, k, v):
        """Store k/v [B, H_kv, T, D] at ``[length, length + T)``; return views [B, H_kv, length + T, D]."""
        end = self.length + k.shape[2]
        self._store(layer, k, v, end)
        self.bytes_copied += round(2 * k.numel() * self.element_bytes)
        return self._read(layer, end)

    def _store(self, layer, k, v, end) -> None:
        self.k[layer, :, :, self.length:end] = k
        self.v[layer, :, :, self.length:end] = v

    def _read(self, layer, end):
        k, v = self.k[layer, :, :, :end], self.v[layer, :, :, :end]  # views [B, H_kv, end, D]
        if self.storage_dtype != self.dtype:  # a narrower cache: converted back for the computation
            return k.to(self.dtype), v.to(self.dtype)
        return k, v

    def layer_view(self, layer: int):
        """(K, V) of one layer as stored so far, each [B, H_kv, length, D] (what transformers keeps per layer)."""
        return self._read(layer, self.length)

    @property
    def element_bytes(self) -> float:
        return self.storage_dtype.itemsize

    @property
    def nbytes(self) -> int:
        return _nbytes(self.k, self.v)

    @property
    def used_bytes(self) -> int:
        return self.nbytes * self.length // self.max_seq_len


class Int8KVCache(KVCache):
    """Preallocated cache storing K/V as int8 with one fp32 scale per (token, head).

    Each head vector ``x`` of D numbers is stored as ``round(x / s)`` with
    ``s = max|x| / 127``, so every element is off by at most ``s / 2`` after
    dequantization. Storage is (1 + 4/D) bytes per element instead of 2 for fp16.
    """

    def __init__(self, config: ModelConfig, batch_size, max_seq_len=None, dtype=None, device=None):
        super().__init__(config, batch_size, max_seq_len, dtype, device)
        self.storage_dtype = torch.int8  # plus one fp32 scale per (token, head)

    def _allocate(self, shape) -> None:
        scale_shape = shape[:-1] + (1,)  # (L, B, H_kv, S_max, 1)
        self.k = torch.zeros(shape, dtype=torch.int8, device=self.device)
        self.v = torch.zeros(shape, dtype=torch.int8, device=self.device)
        self.k_scale = torch.zeros(scale_shape, dtype=torch.float32, device=self.device)
        self.v_scale = torch.zeros(scale_shape, dtype=torch.float32, device=self.device)
        self.allocations += 4

    def _store(self, layer, k, v, end) -> None:
        for store, scales, x in ((self.k, self.k_scale, k), (self.v, self.v_scale, v)):
            q, s = quantize_int8(x)
            store[layer, :, :, self.length:end] = q
            scales[layer, :, :, self.length:end] = s

    def _read(self, layer, end):
        k = dequantize_int8(self.k[layer, :, :, :end], self.k_scale[layer, :, :, :end], self.dtype)
        v = dequantize_int8(self.v[layer, :, :, :end], self.v_scale[layer, :, :, :end], self.dtype)
        return k, v  # [B, H_kv, end, D] in the compute dtype

    @property
    def element_bytes(self) -> float:
        return 1 + 4 / self.config.head_dim

    @property
    def nbytes(self) -> int:
        return _nbytes(self.k, self.v, self.k_scale, self.v_scale)


def quantize_int8(x: torch.Tensor):
    """Symmetric per-vector int8: returns (q int8 [..., D], scale fp32 [..., 1]) with x ~= q * scale."""
    absmax = x.detach().abs().amax(dim=-1, keepdim=True).float()
    scale = (absmax / 127).clamp_min(torch.finfo(torch.float32).tiny)
    q = torch.round(x.float() / scale).clamp_(-127, 127).to(torch.int8)
    return q, scale


def dequantize_int8(q: torch.Tensor, scale: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """Inverse of :func:`quantize_int8` (up to the rounding error, at most scale/2 per element)."""
    return (q.float() * scale).to(dtype)


class DynamicKVCache(BaseCache):
    """Cache that grows by concatenation: every write allocates new K and V tensors.

    This is what a naive implementation (and transformers' default ``DynamicCache``) does.
    Every step copies all previous tokens again, which ``allocations`` and
    ``bytes_copied`` make visible.
    """

    def __init__(self, config: ModelConfig, batch_size, max_seq_len=None, dtype=None, device=None):
        super().__init__(config, batch_size, max_seq_len, dtype, device)
        c = config
        self._check_storage_fits(2 * c.n_layer * c.n_kv_head * c.head_dim * self.element_bytes, "the KV cache")
        self.k: list[torch.Tensor | None] = [None] * config.n_layer  # per layer [B, H_kv, length, D]
        self.v: list[torch.Tensor | None] = [None] * config.n_layer

    def write(self, layer, k, v):
        old_k, old_v = self.k[layer], self.v[layer]
        if old_k is not None and old_k.shape[2] > self.length:  # a previous write of this pass was not advanced
            old_k, old_v = old_k[:, :, : self.length], old_v[:, :, : self.length]
        if old_k is None or self.length == 0:
            new_k, new_v = k.clone(), v.clone()
        else:
            new_k = torch.cat([old_k, k], dim=2)  # [B, H_kv, length+T, D]: a fresh tensor, old tokens copied
            new_v = torch.cat([old_v, v], dim=2)
        self.k[layer], self.v[layer] = new_k, new_v
        self.allocations += 2
        self.bytes_copied += _nbytes(new_k, new_v)
        return new_k, new_v

    def layer_view(self, layer: int):
        k, v = self.k[layer], self.v[layer]
        if k is None:
            c = self.config
            empty = torch.zeros(self.batch_size, c.n_kv_head, 0, c.head_dim, dtype=self.dtype, device=self.device)
            return empty, empty
        return k[:, :, : self.length], v[:, :, : self.length]

    def reset(self) -> None:
        super().reset()
        self.k = [None] * self.config.n_layer
        self.v = [None] * self.config.n_layer

    @property
    def element_bytes(self) -> float:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return sum(_nbytes(t) for t in self.k + self.v if t is not None)

    @property
    def used_bytes(self) -> int:
        c = self.config
        return round(2 * c.n_layer * self.batch_size * c.n_kv_head * self.length * c.head_dim * self.element_bytes)
