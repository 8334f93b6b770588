"""Published architecture numbers of real models, and the memory of the GPUs learners meet.

Every model figure comes from the model's paper or its released ``config.json``; ``source`` says
which. ``n_params`` is the exact count of the released weights, which ``tests/test_presets.py``
recomputes layer by layer from the same config.

Most models keep, in every layer, one K and one V of ``head_dim`` numbers per KV head for every
token, and :func:`kvlab.memory.kv_cache_bytes` sizes their cache. Two kinds of model do not, and
their presets say so (``cache_formula``) and size themselves with their own rule:

* **sliding window** (Mistral-7B v0.1, Gemma-2): a windowed layer attends to the last ``sliding_window``
  tokens only, so it keeps at most that many (Mistral's "rolling buffer cache");
* **latent KV** (MLA, DeepSeek-V2/V3): a layer stores two things per token: one compressed vector of
  ``kv_lora_rank`` numbers, from which K and V of every head are up-projected, and one RoPE key of
  ``kv_rope_dim`` numbers shared by all heads (not reconstructed from the latent).

A hypothetical preset (the original chapter's 70B with 64 KV heads) has a Chinese ``display_name``
(what learners see; its key stays English, other chapters use it), a typed parameter count, and no
released context: nothing warns about a context it never had.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ._validate import positive_int
from .memory import DTYPE_BITS, dtype_name, kv_cache_bytes

STANDARD, SLIDING_WINDOW, LATENT = "standard", "sliding_window", "latent"


def latent_cache_bytes(n_layer, latent_dim, seq_len, batch_size=1, dtype="fp16") -> int:
    """Exact bytes of an MLA cache: ``L * B * S * latent_dim * bytes_per_element``.

    One vector per token per layer, read by K and V of every head alike (DeepSeek-V2, section 2.1).
    """
    bits = DTYPE_BITS[dtype_name(dtype)]
    elements = math.prod([positive_int("n_layer", n_layer), positive_int("batch_size", batch_size),
                          positive_int("seq_len", seq_len), positive_int("latent_dim", latent_dim)])
    return -(-elements * bits // 8)  # whole bytes (exact whenever elements * bits is a multiple of 8)


@dataclass(frozen=True)
class ModelPreset:
    name: str
    n_layer: int
    n_head: int  # query heads
    n_kv_head: int  # K/V heads (== n_head: MHA; 1: MQA; in between: GQA)
    head_dim: int
    hidden_size: int
    n_params: int  # parameters of the released weights, embeddings included
    context_length: int  # the context the model was released for, tokens
    source: str
    hypothetical: bool = False
    sliding_window: int | None = None  # tokens a windowed layer keeps
    sliding_period: int = 1  # layer i is windowed when i % sliding_period == 0 (1: every layer)
    kv_lora_rank: int | None = None  # MLA: the compressed vector K and V of every head are rebuilt from
    kv_rope_dim: int | None = None  # MLA: the decoupled RoPE key shared by all heads, stored beside it
    display_name: str = ""  # what learners see when it differs from the key (the hypothetical's Chinese label)
    learned_positions: bool = False  # a learned position table of context_length rows: no input can be longer
    released_dtype: str | None = None  # set when the released weights are narrower than 16 bits (DeepSeek-V3: fp8)

    @property
    def label(self) -> str:
        """The name shown to learners (``name`` is the dictionary key and stays as it is)."""
        return self.display_name or self.name

    @property
    def kv_latent_dim(self) -> int | None:
        """MLA: numbers cached per token per layer (``kv_lora_rank + kv_rope_dim``); None for other models."""
        return None if self.kv_lora_rank is None else self.kv_lora_rank + (self.kv_rope_dim or 0)

    @property
    def has_released_context(self) -> bool:
        """False for a hypothetical model: its ``context_length`` is a placeholder, never a warning threshold."""
        return not self.hypothetical

    @property
    def cache_formula(self) -> str:
        """``"standard"``, ``"sliding_window"`` or ``"latent"``: which rule sizes this model's cache."""
        if self.kv_latent_dim is not None:
            return LATENT
        return SLIDING_WINDOW if self.sliding_window is not None else STANDARD

    @property
    def attention(self) -> str:
        if self.kv_latent_dim is not None:
            return (f"MLA (per token per layer: a latent of {self.kv_lora_rank} numbers + a shared RoPE key of "
                    f"{self.kv_rope_dim})")
        if self.n_kv_head == self.n_head:
            return "MHA"
        return "MQA" if self.n_kv_head == 1 else f"GQA ({self.n_head // self.n_kv_head} query heads per KV head)"

    @property
    def n_windowed_layers(self) -> int:
        """How many layers keep only the last ``sliding_window`` tokens."""
        return 0 if self.sliding_window is None else -(-self.n_layer // self.sliding_period)

    def layer_is_windowed(self, layer: int) -> bool:
        return self.sliding_window is not None and layer % self.sliding_period == 0

    def kv_cache_bytes(self, seq_len, batch_size=1, dtype="fp16") -> int:
        """Exact bytes of this model's KV cache after ``seq_len`` tokens, with this model's own rule."""
        if self.kv_latent_dim is not None:
            return latent_cache_bytes(self.n_layer, self.kv_latent_dim, seq_len, batch_size, dtype)
        if self.sliding_window is None:
            return self.plain_formula_bytes(seq_len, batch_size, dtype)
        seq_len = positive_int("seq_len", seq_len)
        windowed, full = self.n_windowed_layers, self.n_layer - self.n_windowed_layers
        total = kv_cache_bytes(windowed, self.n_kv_head, self.head_dim, min(seq_len, self.sliding_window),
                               batch_size, dtype)
        if full:
            total += kv_cache_bytes(full, self.n_kv_head, self.head_dim, seq_len, batch_size, dtype)
        return total

    def layer_kv_cache_bytes(self, layer: int, seq_len, batch_size=1, dtype="fp16") -> int:
        """Exact bytes one layer (0-based) keeps after ``seq_len`` tokens."""
        if not 0 <= layer < self.n_layer:
            raise ValueError(f"layer must be in [0, {self.n_layer}), got {layer}")
        if self.kv_latent_dim is not None:
            return latent_cache_bytes(1, self.kv_latent_dim, seq_len, batch_size, dtype)
        seq_len = positive_int("seq_len", seq_len)
        kept = min(seq_len, self.sliding_window) if self.layer_is_windowed(layer) else seq_len
        return kv_cache_bytes(1, self.n_kv_head, self.head_dim, kept, batch_size, dtype)

    def plain_formula_bytes(self, seq_len, batch_size=1, dtype="fp16") -> int:
        """``2 * L * B * H_kv * S * D * bytes``: right for standard models; for the others, what it would be
        if every layer kept every token (windows) or every head its own K and V of ``head_dim`` (MLA)."""
        return kv_cache_bytes(self.n_layer, self.n_kv_head, self.head_dim, seq_len, batch_size, dtype)

    def kv_bytes_per_token(self, dtype="fp16") -> int:
        """Bytes one token of one sequence adds to the cache (every layer; before any window fills)."""
        return self.kv_cache_bytes(1, 1, dtype)

    def weight_bytes(self, dtype="fp16") -> int:
        """Bytes of ``n_params`` numbers of ``dtype`` each: an underestimate for int8/int4/fp8, whose scales are
        not counted (and most schemes keep the embedding and output layer in 16 bits)."""
        return -(-self.n_params * DTYPE_BITS[dtype_name(dtype)] // 8)


_PRESETS = [
    # -- MHA: every query head keeps its own K and V ------------------------------------------
    ModelPreset("GPT-2 (124M)", 12, 12, 12, 64, 768, 124_439_808, 1024,
                "Radford et al. 2019; openai-community/gpt2 config.json (n_layer 12, n_head 12, n_embd 768, "
                "n_ctx 1024; learned position embeddings: n_positions 1024)", learned_positions=True),
    ModelPreset("GPT-2 XL (1.5B)", 48, 25, 25, 64, 1600, 1_557_611_200, 1024,
                "Radford et al. 2019; openai-community/gpt2-xl config.json (n_layer 48, n_head 25, n_embd 1600; "
                "learned position embeddings: n_positions 1024)", learned_positions=True),
    ModelPreset("LLaMA-7B", 32, 32, 32, 128, 4096, 6_738_415_616, 2048,
                "Touvron et al. 2023 (LLaMA), Table 2: 32 layers, 32 heads, dimension 4096; 6.7B parameters"),
    ModelPreset("LLaMA-13B", 40, 40, 40, 128, 5120, 13_015_864_320, 2048,
                "Touvron et al. 2023 (LLaMA), Table 2: 40 layers, 40 heads, dimension 5120; 13.0B parameters"),
    ModelPreset("LLaMA-33B", 60, 52, 52, 128, 6656, 32_528_943_616, 2048,
                "Touvron et al. 2023 (LLaMA), Table 2: 60 layers, 52 heads, dimension 6656; 32.5B parameters"),
    ModelPreset("LLaMA-65B", 80, 64, 64, 128, 8192, 65_285_660_672, 2048,
                "Touvron et al. 2023 (LLaMA), Table 2: 80 layers, 64 heads, dimension 8192; 65.2B parameters"),
    ModelPreset("Llama-2-7B", 32, 32, 32, 128, 4096, 6_738_415_616, 4096,
                "Touvron et al. 2023 (Llama 2); meta-llama/Llama-2-7b-hf config.json (32 KV heads: MHA, 4096 tokens)"),
    ModelPreset("Llama-2-13B", 40, 40, 40, 128, 5120, 13_015_864_320, 4096,
                "Touvron et al. 2023 (Llama 2); meta-llama/Llama-2-13b-hf config.json (40 KV heads: MHA, 4096 tokens)"),
    ModelPreset("Gemma-7B", 28, 16, 16, 256, 3072, 8_537_680_896, 8192,
                "Gemma Team 2024, Table 1; google/gemma-7b config.json (16 heads of 256: 4096 wide, more than "
                "its hidden size 3072)"),
    ModelPreset("Qwen1.5-72B", 80, 64, 64, 128, 8192, 72_287_920_128, 32768,
                "Qwen Team 2024 (Qwen1.5); Qwen/Qwen1.5-72B-Chat config.json: num_hidden_layers 80, "
                "num_attention_heads 64, num_key_value_heads 64 (MHA), hidden_size 8192 (head_dim 128), "
                "intermediate_size 24576, vocab_size 152064, untied, biases on q/k/v; max_position_embeddings 32768"),
    # -- GQA: a group of query heads shares one K and V ----------------------------------------
    ModelPreset("Llama-2-70B", 80, 64, 8, 128, 8192, 68_976_648_192, 4096,
                "Touvron et al. 2023 (Llama 2); meta-llama/Llama-2-70b-hf config.json (8 KV heads, GQA)"),
    ModelPreset("Llama-3-8B", 32, 32, 8, 128, 4096, 8_030_261_248, 8192,
                "Meta Llama 3 (2024); meta-llama/Meta-Llama-3-8B config.json"),
    ModelPreset("Llama-3-70B", 80, 64, 8, 128, 8192, 70_553_706_496, 8192,
                "Meta Llama 3 (2024); meta-llama/Meta-Llama-3-70B config.json"),
    ModelPreset("Llama-3.1-8B", 32, 32, 8, 128, 4096, 8_030_261_248, 131072,
                "Dubey et al. 2024 (The Llama 3 Herd of Models), Table 3; meta-llama/Llama-3.1-8B config.json "
                "(max_position_embeddings 131072)"),
    ModelPreset("Llama-3.1-70B", 80, 64, 8, 128, 8192, 70_553_706_496, 131072,
                "Dubey et al. 2024, Table 3; meta-llama/Llama-3.1-70B config.json"),
    ModelPreset("Llama-3.1-405B", 126, 128, 8, 128, 16384, 405_853_388_800, 131072,
                "Dubey et al. 2024, Table 3: 126 layers, dimension 16,384, FFN 53,248, 128 heads, 8 KV heads; "
                "meta-llama/Llama-3.1-405B config.json (vocabulary 128,256, untied output layer)"),
    ModelPreset("Qwen2.5-7B", 28, 28, 4, 128, 3584, 7_615_616_512, 131072,
                "Qwen2.5 technical report (2024); Qwen/Qwen2.5-7B config.json (use_sliding_window false) and "
                "model card: 7.61B parameters, 131,072 tokens (32,768 natively, the rest with YaRN)"),
    # -- MQA: all query heads share a single K and V -------------------------------------------
    ModelPreset("Falcon-7B", 32, 71, 1, 64, 4544, 6_921_720_704, 2048,
                "Almazrouei et al. 2023; tiiuae/falcon-7b config.json (multi_query true: 71 query heads, 1 KV head)"),
    ModelPreset("StarCoder (15.5B)", 40, 48, 1, 128, 6144, 15_517_456_384, 8192,
                "Li et al. 2023 (StarCoder); bigcode/starcoder config.json (multi_query true; learned position "
                "embeddings: n_positions 8192)", learned_positions=True),
    ModelPreset("Gemma-2B", 18, 8, 1, 256, 2048, 2_506_172_416, 8192,
                "Gemma Team 2024, Table 1; google/gemma-2b config.json (num_key_value_heads 1)"),
    # -- sliding-window layers: the cache of a windowed layer stops growing -------------------
    ModelPreset("Mistral-7B", 32, 32, 8, 128, 4096, 7_241_732_096, 8192,
                "Jiang et al. 2023 (Mistral 7B v0.1), Table 1: window_size 4096, context_len 8192, 8 KV heads; "
                "mistralai/Mistral-7B-v0.1 config.json (sliding_window 4096 on every layer). Later Mistral-7B "
                "versions (v0.2+) drop the window.",
                sliding_window=4096, sliding_period=1),
    ModelPreset("Gemma-2-9B", 42, 16, 8, 256, 3584, 9_241_705_984, 8192,
                "Gemma Team 2024 (Gemma 2), Table 1; google/gemma-2-9b config.json: sliding_window 4096 on every "
                "other layer (layers 0, 2, 4, ...), the others attend to the whole 8192-token context",
                sliding_window=4096, sliding_period=2),
    # -- latent KV (MLA): one compressed vector per token per layer -----------------------------
    ModelPreset("DeepSeek-V2 (236B)", 60, 128, 128, 128, 5120, 235_741_434_880, 131072,
                "DeepSeek-AI 2024 (DeepSeek-V2), section 2.1: MLA caches kv_lora_rank 512 + qk_rope_head_dim 64 "
                "numbers per token per layer; deepseek-ai/DeepSeek-V2 config.json (60 layers, 128 heads of 128); "
                "128K context",
                kv_lora_rank=512, kv_rope_dim=64),
    ModelPreset("DeepSeek-V3 (671B)", 61, 128, 128, 128, 7168, 671_026_419_200, 131072,
                "DeepSeek-AI 2024 (DeepSeek-V3): MLA with kv_lora_rank 512 + qk_rope_head_dim 64; "
                "deepseek-ai/DeepSeek-V3 config.json (61 layers, 128 heads); 671B parameters without the "
                "multi-token-prediction module; 128K context; weights released in FP8 (block-scaled, "
                "quantization_config fmt e4m3)",
                kv_lora_rank=512, kv_rope_dim=64, released_dtype="fp8"),
    # -- the chapter's hypothetical ---------------------------------------------------------
    ModelPreset("70B, 64 KV heads (chapter's hypothetical)", 80, 64, 64, 128, 8192, 70_000_000_000, 8192,
                "Hypothetical: the original chapter's '70B model (L=80, H=64, D=128)' with every head keeping its "
                "own K/V; n_params is the round 70B of its name, not a count. Released models with exactly this "
                "cache shape: LLaMA-65B and Qwen1.5-72B (80 layers, 64 heads of 128, 64 KV heads); Llama-2/3-70B "
                "use GQA with 8 KV heads. context_length is a placeholder (the chapter's 8192 tokens), not a "
                "released context: no beyond-context warning is shown for it.",
                hypothetical=True, display_name="原文假设的 70B（64 个 KV 头）"),
]

MODEL_PRESETS: dict[str, ModelPreset] = {p.name: p for p in _PRESETS}


@dataclass(frozen=True)
class GpuPreset:
    """A GPU's memory three ways: the datasheet's number, and what ``nvidia-smi`` reports as its total."""

    name: str
    marketed: str  # as the datasheet says it
    memory_mib: int  # ``nvidia-smi --query-gpu=memory.total`` (MiB: 2**20 bytes)
    source: str
    torch_total_gib: str | None = None  # what PyTorch reports as the card's total, as its messages print it
    torch_source: str = ""

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * 2**20

    @property
    def torch_total_bytes_at_most(self) -> int | None:
        """The most bytes PyTorch's two-decimal reading can stand for (14.75 GiB: less than 14.755 GiB)."""
        if self.torch_total_gib is None:
            return None
        return int((Fraction(self.torch_total_gib) + Fraction(5, 1000)) * 2**30)


_GPUS = [
    GpuPreset("T4 16 GB (Colab)", "16 GB GDDR6", 15_360,
              "NVIDIA T4 datasheet (16 GB GDDR6); with ECC on, as on Colab and cloud T4s, 1/16 of the 16 GiB "
              "holds check bits and a recent driver's nvidia-smi reports 15360 MiB (more with ECC off; older "
              "drivers report a little less)",
              torch_total_gib="14.75",
              torch_source="PyTorch's out-of-memory message on Colab T4s: 'GPU 0; 14.75 GiB total capacity' "
                           "(e.g. googlecolab/colabtools#3439, 2023); the CUDA context takes a few hundred MiB more"),
    GpuPreset("RTX 4090 24 GB", "24 GB GDDR6X", 24_564,
              "NVIDIA GeForce RTX 4090 specifications (24 GB); nvidia-smi reports 24564 MiB"),
    GpuPreset("A100 40 GB", "40 GB HBM2", 40_960,
              "NVIDIA A100 datasheet (40 GB HBM2); nvidia-smi on an A100-SXM4-40GB reports 40960 MiB"),
    GpuPreset("A100 80 GB", "80 GB HBM2e", 81_920,
              "NVIDIA A100 datasheet (80 GB HBM2e); nvidia-smi on an A100-SXM4-80GB reports 81920 MiB"),
    GpuPreset("H100 80 GB", "80 GB HBM3", 81_559,
              "NVIDIA H100 datasheet (SXM: 80 GB HBM3); nvidia-smi on an H100 80GB HBM3 reports 81559 MiB"),
    GpuPreset("H200 141 GB", "141 GB HBM3e", 143_771,
              "NVIDIA H200 datasheet (141 GB HBM3e); nvidia-smi on an H200 reports 143771 MiB"),
]

GPU_PRESETS: dict[str, GpuPreset] = {g.name: g for g in _GPUS}
# the share of a card's memory an engine plans with (vLLM's gpu_memory_utilization default; 3.4's fit panel and
# exercise 3.4-2)
DEFAULT_USABLE = Fraction(9, 10)
