"""Chapter 3.4, section 5, the formula against real memory (what runs and measures): a real cache of a
model's shape, scaled down, allocated and counted (the allocator's counter on CUDA/MPS, the tensors' storage on the
CPU), and the current GPU's memory as torch reports it next to the matching preset."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ...cache import KVCache
from ...config import ModelConfig
from ...device import as_device, synchronize
from ...memory import format_bytes
from ...presets import GPU_PRESETS, STANDARD, GpuPreset
from .common import CHAPTER_MODEL, CHAPTER_S, CUDA_BLOCK, preset
from .phrases import TEXTS


@dataclass(frozen=True)
class AllocationCheck:
    """A real cache allocated on a device: the formula's bytes and the bytes the device reports."""

    device: str
    method: str  # how the bytes were obtained (in the course's language when measured)
    shape: tuple[int, ...]  # of K (V has the same): (L, B, H_kv, S, D)
    dtype: str
    formula_bytes: int
    measured_bytes: int
    released_bytes: int | None  # what the allocator got back after the cache was freed (None: no counter)
    tensor_bytes: tuple[int, int]  # K's and V's own sizes

    @property
    def is_measurement(self) -> bool:
        """True where an allocator counted the bytes (CUDA, MPS); on the CPU only the tensors' sizes are read."""
        return self.released_bytes is not None

    @property
    def allocator_bytes(self) -> int:
        """What PyTorch's CUDA allocator books for K and V: each rounded up to a multiple of 512 bytes."""
        return sum(-(-n // CUDA_BLOCK) * CUDA_BLOCK for n in self.tensor_bytes)


def _allocated(dev: torch.device) -> int | None:
    """The allocator's own count of allocated bytes on ``dev`` (None on the CPU, which has none)."""
    if dev.type == "cuda":
        return torch.cuda.memory_allocated(dev)
    if dev.type == "mps":
        return torch.mps.current_allocated_memory()
    return None


def measure_cache_allocation(model=CHAPTER_MODEL, seq_len: int = CHAPTER_S // 8, batch_size: int = 1,
                             dtype: str = "fp16", device=None) -> AllocationCheck:
    """Allocate a real :class:`KVCache` of ``model``'s shape, scaled down to ``seq_len`` tokens, and measure it:
    on CUDA/MPS with the allocator's counter before and after, on the CPU from the tensors' storage (which only
    checks their shape and dtype)."""
    p = preset(model)
    if p.cache_formula != STANDARD:
        raise ValueError(f"model: {p.name} keeps a {p.cache_formula} cache; choose a model with the plain layout")
    dev = as_device(device)
    config = ModelConfig(vocab_size=1, d_model=p.hidden_size, n_layer=p.n_layer, n_head=p.n_head,
                         n_kv_head=p.n_kv_head, head_dim=p.head_dim, max_seq_len=seq_len)
    synchronize(dev)
    before = _allocated(dev)
    cache = KVCache(config, batch_size, seq_len, dtype=dtype, device=dev)  # checks it fits in free memory first
    synchronize(dev)
    after = _allocated(dev)
    sizes = (cache.k.untyped_storage().nbytes(), cache.v.untyped_storage().nbytes())
    if before is None:
        measured = sum(sizes)
        method = TEXTS.say("method.cpu")
    else:
        measured = after - before
        counter = "torch.cuda.memory_allocated()" if dev.type == "cuda" else "torch.mps.current_allocated_memory()"
        method = TEXTS.say("method.counter", device=dev.type, counter=counter)
    shape = tuple(cache.k.shape)
    formula = p.kv_cache_bytes(seq_len, batch_size, dtype)
    del cache
    released = None if before is None else after - _allocated(dev)
    return AllocationCheck(str(dev), method, shape, dtype, formula, measured, released, sizes)


def allocation_lines(check: AllocationCheck) -> list[str]:
    what = TEXTS.say("alloc.measured" if check.is_measurement else "alloc.storage")
    lines = [TEXTS.say("alloc.device", device=check.device, shape=check.shape, dtype=check.dtype),
             TEXTS.say("alloc.method", method=check.method),
             TEXTS.say("alloc.bytes", formula=check.formula_bytes, what=what, measured=check.measured_bytes,
                       size=format_bytes(check.measured_bytes))]
    if check.device.startswith("cuda"):
        lines.append(TEXTS.say("alloc.rounding", block=CUDA_BLOCK, n=check.allocator_bytes))
    return lines


@dataclass(frozen=True)
class DeviceMemory:
    """What torch reports about the current GPU, next to the matching preset's nvidia-smi total."""

    name: str
    total_bytes: int  # torch.cuda.get_device_properties(...).total_memory
    free_bytes: int  # torch.cuda.mem_get_info()[0]
    preset: GpuPreset | None


def device_memory(device=None) -> DeviceMemory | None:
    """The current CUDA GPU's memory as torch sees it (None on CPU/MPS)."""
    dev = as_device(device)
    if dev.type != "cuda":
        return None
    props = torch.cuda.get_device_properties(dev)
    free, _total = torch.cuda.mem_get_info(dev)
    return DeviceMemory(props.name, int(props.total_memory), int(free), matching_gpu(props.name))


def device_memory_text(gpu: DeviceMemory | None, device) -> str:
    """What this machine reports, as plain numbers (:func:`explain_device_memory` compares them with the table);
    never an error, whatever the card or driver says."""
    if gpu is None:
        return TEXTS.say("device.none", device=device)
    line = TEXTS.say("device.line", name=gpu.name, total=gpu.total_bytes, size=format_bytes(gpu.total_bytes),
                     free=format_bytes(gpu.free_bytes))
    if gpu.preset is None:
        return line + TEXTS.say("device.unknown")
    return line + TEXTS.say("device.table", mib=gpu.preset.memory_mib)


# CUDA device names (torch.cuda.get_device_properties(...).name) of the cards in GPU_PRESETS.
DEVICE_NAMES = {"Tesla T4": "T4 16 GB (Colab)", "NVIDIA GeForce RTX 4090": "RTX 4090 24 GB",
                "NVIDIA A100-SXM4-40GB": "A100 40 GB", "NVIDIA A100-SXM4-80GB": "A100 80 GB",
                "NVIDIA H100 80GB HBM3": "H100 80 GB", "NVIDIA H200": "H200 141 GB"}


def matching_gpu(device_name: str) -> GpuPreset | None:
    """The preset of a CUDA device name such as "Tesla T4" (None for any other card)."""
    preset_name = DEVICE_NAMES.get(device_name.strip())
    return GPU_PRESETS[preset_name] if preset_name else None
