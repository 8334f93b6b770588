"""Published architecture numbers of real models, for the memory calculator.

Figures come from each model's paper or released ``config.json``; ``source`` says which.
"""
from __future__ import annotations

from dataclasses import dataclass

from .memory import kv_cache_bytes


@dataclass(frozen=True)
class ModelPreset:
    name: str
    n_layer: int
    n_head: int  # query heads
    n_kv_head: int  # K/V heads (== n_head: MHA; fewer: GQA)
    head_dim: int
    hidden_size: int
    n_params: int  # parameters, embeddings included
    context_length: int  # trained context window, tokens
    source: str
    hypothetical: bool = False

    @property
    def attention(self) -> str:
        if self.n_kv_head == self.n_head:
            return "MHA"
        return "MQA" if self.n_kv_head == 1 else f"GQA ({self.n_head // self.n_kv_head} query heads per KV head)"

    def kv_cache_bytes(self, seq_len, batch_size=1, dtype="fp16") -> int:
        return kv_cache_bytes(self.n_layer, self.n_kv_head, self.head_dim, seq_len, batch_size, dtype)

    def kv_bytes_per_token(self, dtype="fp16") -> int:
        return self.kv_cache_bytes(1, 1, dtype)


_PRESETS = [
    ModelPreset("GPT-2 (124M)", 12, 12, 12, 64, 768, 124_439_808, 1024,
                "Radford et al. 2019; openai-community/gpt2 config.json"),
    ModelPreset("LLaMA-7B", 32, 32, 32, 128, 4096, 6_738_415_616, 2048,
                "Touvron et al. 2023 (LLaMA), Table 2; 6.7B parameters"),
    ModelPreset("LLaMA-13B", 40, 40, 40, 128, 5120, 13_015_864_320, 2048,
                "Touvron et al. 2023 (LLaMA), Table 2; 13.0B parameters"),
    ModelPreset("LLaMA-65B", 80, 64, 64, 128, 8192, 65_285_660_672, 2048,
                "Touvron et al. 2023 (LLaMA), Table 2; 65.2B parameters"),
    ModelPreset("Llama-2-70B", 80, 64, 8, 128, 8192, 68_976_648_192, 4096,
                "Touvron et al. 2023 (Llama 2); meta-llama/Llama-2-70b-hf config.json (8 KV heads, GQA)"),
    ModelPreset("Llama-3-8B", 32, 32, 8, 128, 4096, 8_030_261_248, 8192,
                "Meta Llama 3 (2024); meta-llama/Meta-Llama-3-8B config.json"),
    ModelPreset("Llama-3-70B", 80, 64, 8, 128, 8192, 70_553_706_496, 8192,
                "Meta Llama 3 (2024); meta-llama/Meta-Llama-3-70B config.json"),
    ModelPreset("Mistral-7B", 32, 32, 8, 128, 4096, 7_241_732_096, 32768,
                "Jiang et al. 2023; mistralai/Mistral-7B-v0.1 config.json (sliding window of 4096 tokens)"),
    ModelPreset("Qwen2.5-7B", 28, 28, 4, 128, 3584, 7_615_616_512, 131072,
                "Qwen2.5 technical report (2024); Qwen/Qwen2.5-7B model card: 7.61B parameters, 131,072 tokens"),
    ModelPreset("70B, 64 KV heads (chapter's hypothetical)", 80, 64, 64, 128, 8192, 70_000_000_000, 4096,
                "Hypothetical: the original chapter's '70B model (L=80, H=64, D=128)' with every head keeping "
                "its own K/V. No released 70B model is built this way: Llama-2/3-70B use 8 KV heads.",
                hypothetical=True),
]

MODEL_PRESETS: dict[str, ModelPreset] = {p.name: p for p in _PRESETS}
