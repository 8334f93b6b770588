"""The model and GPU presets: parameter counts recomputed layer by layer from each released config, and the
cache formulas (plain, sliding window, latent) checked on cases worked out by hand."""
import pytest

from kvlab import MODEL_PRESETS, format_bytes
from kvlab.presets import GPU_PRESETS, LATENT, SLIDING_WINDOW, STANDARD, ModelPreset, latent_cache_bytes

GIB, MIB = 2**30, 2**20


# -- parameter counts from the released configs, by family ------------------------------------------
def llama_like(vocab, d, layers, heads, kv_heads, head_dim, ff, tied=False, qkv_bias=False, norms_per_layer=2):
    """Embedding (+ untied head), per layer q/k/v/o + SwiGLU (3 matrices) + RMSNorm weights, final norm."""
    attention = d * heads * head_dim * 2 + d * kv_heads * head_dim * 2  # q and o; k and v
    bias = heads * head_dim + 2 * kv_heads * head_dim if qkv_bias else 0
    per_layer = attention + bias + 3 * d * ff + norms_per_layer * d
    return (1 if tied else 2) * vocab * d + layers * per_layer + d


def gpt2_like(vocab, positions, d, layers):
    """Token + position embeddings (head tied); per layer 2 LayerNorms, c_attn, c_proj, 4d MLP, all with biases."""
    per_layer = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    return vocab * d + positions * d + layers * per_layer + 2 * d


def falcon7b_like(vocab, d, layers, head_dim):
    """Tied embedding; per layer one LayerNorm (parallel attention), fused qkv for MQA, dense, 4d MLP, no biases."""
    per_layer = 2 * d + d * (d + 2 * head_dim) + d * d + 2 * 4 * d * d
    return vocab * d + layers * per_layer + 2 * d


def bigcode_like(vocab, positions, d, layers, head_dim, inner):
    """GPT-BigCode with multi-query attention: qkv projects to d + 2 head_dim; biases everywhere; tied head."""
    qkv = d * (d + 2 * head_dim) + d + 2 * head_dim
    per_layer = 2 * 2 * d + qkv + (d * d + d) + (d * inner + inner) + (inner * d + d)
    return vocab * d + positions * d + layers * per_layer + 2 * d


def mla_moe(vocab, d, layers, heads, q_rank, kv_rank, rope, nope, v_dim, dense_ff, n_dense, expert_ff, n_routed,
            n_shared, gate_bias):
    """DeepSeek: MLA projections, dense MLP in the first n_dense layers, routed + shared experts after."""
    attention = (d * q_rank + q_rank + q_rank * heads * (nope + rope) + d * (kv_rank + rope) + kv_rank
                 + kv_rank * heads * (nope + v_dim) + heads * v_dim * d)
    moe = (n_routed + n_shared) * 3 * d * expert_ff + n_routed * d + (n_routed if gate_bias else 0)
    return (2 * vocab * d + layers * (attention + 2 * d) + n_dense * 3 * d * dense_ff
            + (layers - n_dense) * moe + d)


EXPECTED_PARAMS = {
    # config.json: vocab_size, hidden_size, num_hidden_layers, heads, kv heads, head_dim, intermediate_size
    "GPT-2 (124M)": gpt2_like(50257, 1024, 768, 12),
    "GPT-2 XL (1.5B)": gpt2_like(50257, 1024, 1600, 48),
    "LLaMA-7B": llama_like(32000, 4096, 32, 32, 32, 128, 11008),
    "LLaMA-13B": llama_like(32000, 5120, 40, 40, 40, 128, 13824),
    "LLaMA-33B": llama_like(32000, 6656, 60, 52, 52, 128, 17920),
    "LLaMA-65B": llama_like(32000, 8192, 80, 64, 64, 128, 22016),
    "Qwen1.5-72B": llama_like(152064, 8192, 80, 64, 64, 128, 24576, qkv_bias=True),
    "Llama-2-7B": llama_like(32000, 4096, 32, 32, 32, 128, 11008),
    "Llama-2-13B": llama_like(32000, 5120, 40, 40, 40, 128, 13824),
    "Llama-2-70B": llama_like(32000, 8192, 80, 64, 8, 128, 28672),
    "Llama-3-8B": llama_like(128256, 4096, 32, 32, 8, 128, 14336),
    "Llama-3-70B": llama_like(128256, 8192, 80, 64, 8, 128, 28672),
    "Llama-3.1-8B": llama_like(128256, 4096, 32, 32, 8, 128, 14336),
    "Llama-3.1-70B": llama_like(128256, 8192, 80, 64, 8, 128, 28672),
    "Llama-3.1-405B": llama_like(128256, 16384, 126, 128, 8, 128, 53248),
    "Mistral-7B": llama_like(32000, 4096, 32, 32, 8, 128, 14336),
    "Qwen2.5-7B": llama_like(152064, 3584, 28, 28, 4, 128, 18944, qkv_bias=True),
    "Gemma-2B": llama_like(256000, 2048, 18, 8, 1, 256, 16384, tied=True),
    "Gemma-7B": llama_like(256000, 3072, 28, 16, 16, 256, 24576, tied=True),
    "Gemma-2-9B": llama_like(256000, 3584, 42, 16, 8, 256, 14336, tied=True, norms_per_layer=4),
    "Falcon-7B": falcon7b_like(65024, 4544, 32, 64),
    "StarCoder (15.5B)": bigcode_like(49152, 8192, 6144, 40, 128, 24576),
    "DeepSeek-V2 (236B)": mla_moe(102400, 5120, 60, 128, 1536, 512, 64, 128, 128, 12288, 1, 1536, 160, 2, False),
    "DeepSeek-V3 (671B)": mla_moe(129280, 7168, 61, 128, 1536, 512, 64, 128, 128, 18432, 3, 2048, 256, 1, True),
}


def test_every_real_preset_has_its_parameter_count_checked():
    real = {name for name, p in MODEL_PRESETS.items() if not p.hypothetical}
    assert real == set(EXPECTED_PARAMS)
    assert len(real) >= 15


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMS))
def test_parameter_count_matches_the_layer_arithmetic(name):
    assert MODEL_PRESETS[name].n_params == EXPECTED_PARAMS[name]


@pytest.mark.parametrize("name, billions", [
    ("LLaMA-7B", 6.7), ("LLaMA-13B", 13.0), ("LLaMA-33B", 32.5), ("LLaMA-65B", 65.3), ("Mistral-7B", 7.2),
    ("Qwen2.5-7B", 7.6), ("Llama-3.1-405B", 405.9), ("DeepSeek-V2 (236B)", 235.7), ("DeepSeek-V3 (671B)", 671.0),
])
def test_parameter_counts_round_to_the_published_sizes(name, billions):
    assert round(MODEL_PRESETS[name].n_params / 1e9, 1) == billions


# -- architecture numbers ---------------------------------------------------------------------------
def test_names_other_chapters_use_are_kept():
    for name in ("GPT-2 (124M)", "LLaMA-7B", "LLaMA-13B", "LLaMA-65B", "Llama-2-70B", "Llama-3-8B", "Llama-3-70B",
                 "Mistral-7B", "Qwen2.5-7B", "70B, 64 KV heads (chapter's hypothetical)"):
        assert name in MODEL_PRESETS


def test_heads_divide_and_kinds_cover_mha_gqa_mqa_and_latent():
    for p in MODEL_PRESETS.values():
        assert p.n_head % p.n_kv_head == 0, p.name
        assert p.source
    kinds = {p.attention.split(" ")[0] for p in MODEL_PRESETS.values()}
    assert kinds == {"MHA", "GQA", "MQA", "MLA"}
    assert {p.cache_formula for p in MODEL_PRESETS.values()} == {STANDARD, SLIDING_WINDOW, LATENT}


def test_head_dim_is_hidden_over_heads_except_where_the_config_says_otherwise():
    different = {n for n, p in MODEL_PRESETS.items() if p.n_head * p.head_dim != p.hidden_size}
    # Gemma sets head_dim 256 explicitly; DeepSeek's heads are 128 wide whatever its hidden size
    assert different == {"Gemma-7B", "Gemma-2-9B", "DeepSeek-V2 (236B)", "DeepSeek-V3 (671B)"}


def test_display_labels_keep_the_keys_and_only_the_hypothetical_is_relabelled():
    relabelled = {n: p.label for n, p in MODEL_PRESETS.items() if p.label != n}
    assert relabelled == {"70B, 64 KV heads (chapter's hypothetical)": "原文假设的 70B（64 个 KV 头）"}
    assert [p.name for p in MODEL_PRESETS.values() if not p.has_released_context] == [
        "70B, 64 KV heads (chapter's hypothetical)"]


def test_learned_positions_released_dtypes_and_the_70b_shape():
    learned = {n for n, p in MODEL_PRESETS.items() if p.learned_positions}
    assert learned == {"GPT-2 (124M)", "GPT-2 XL (1.5B)", "StarCoder (15.5B)"}  # learned absolute position tables
    assert {n: p.released_dtype for n, p in MODEL_PRESETS.items() if p.released_dtype} == {"DeepSeek-V3 (671B)": "fp8"}
    hypothetical = MODEL_PRESETS["70B, 64 KV heads (chapter's hypothetical)"]
    shape = (80, 64, 64, 128)  # layers, query heads, KV heads, head size
    for name in ("LLaMA-65B", "Qwen1.5-72B"):
        p = MODEL_PRESETS[name]
        assert (p.n_layer, p.n_head, p.n_kv_head, p.head_dim) == shape == (
            hypothetical.n_layer, hypothetical.n_head, hypothetical.n_kv_head, hypothetical.head_dim)
    assert MODEL_PRESETS["Qwen1.5-72B"].context_length == 32768


def test_attention_labels():
    assert MODEL_PRESETS["LLaMA-7B"].attention == "MHA"
    assert MODEL_PRESETS["Falcon-7B"].attention == "MQA"
    assert MODEL_PRESETS["Llama-2-70B"].attention == "GQA (8 query heads per KV head)"
    assert MODEL_PRESETS["DeepSeek-V3 (671B)"].attention.startswith("MLA")


# -- the cache formulas, by hand ---------------------------------------------------------------------
def test_plain_formula_on_the_chapter_example():
    llama = MODEL_PRESETS["LLaMA-7B"]
    assert llama.kv_cache_bytes(2048) == 2 * 32 * 32 * 2048 * 128 * 2 == GIB
    assert llama.layer_kv_cache_bytes(0, 2048) == 32 * MIB
    assert llama.kv_bytes_per_token() == 512 * 1024
    assert MODEL_PRESETS["Llama-2-70B"].kv_cache_bytes(8192) == 2 * 80 * 8 * 8192 * 128 * 2 == 5 * GIB // 2
    assert MODEL_PRESETS["Falcon-7B"].kv_bytes_per_token() == 2 * 32 * 1 * 64 * 2  # one KV head: 8 KiB


def test_mistral_rolling_buffer_keeps_at_most_the_window():
    m = MODEL_PRESETS["Mistral-7B"]
    per_token = 2 * 32 * 8 * 128 * 2  # 128 KiB: every layer, K and V
    assert m.kv_cache_bytes(4096) == 4096 * per_token == m.plain_formula_bytes(4096)
    assert m.kv_cache_bytes(100) == 100 * per_token
    assert m.kv_cache_bytes(8192) == m.kv_cache_bytes(10**6) == 4096 * per_token
    # computed, not quoted: at 8192 tokens the window keeps half of what the plain formula counts
    assert 2 * m.kv_cache_bytes(8192) == m.plain_formula_bytes(8192)
    assert m.n_windowed_layers == 32


def test_gemma2_windows_every_other_layer():
    g = MODEL_PRESETS["Gemma-2-9B"]
    per_layer_token = 2 * 8 * 256 * 2  # K and V of 8 KV heads of 256, fp16
    assert g.n_windowed_layers == 21
    assert [g.layer_is_windowed(i) for i in range(4)] == [True, False, True, False]
    assert g.kv_cache_bytes(8192) == per_layer_token * (21 * 4096 + 21 * 8192)
    assert g.kv_cache_bytes(1000) == per_layer_token * 42 * 1000
    assert g.layer_kv_cache_bytes(0, 8192) == per_layer_token * 4096
    assert g.layer_kv_cache_bytes(1, 8192) == per_layer_token * 8192


def test_mla_caches_one_latent_vector_per_token_per_layer():
    v3, v2 = MODEL_PRESETS["DeepSeek-V3 (671B)"], MODEL_PRESETS["DeepSeek-V2 (236B)"]
    assert (v3.kv_lora_rank, v3.kv_rope_dim, v3.kv_latent_dim) == (512, 64, 576)  # latent + shared RoPE key
    assert v3.kv_bytes_per_token() == 61 * (512 + 64) * 2 == 70_272
    assert v2.kv_bytes_per_token("bf16") == 60 * 576 * 2
    assert v3.kv_cache_bytes(1000, 3, "fp8") == 61 * 3 * 1000 * 576
    # DeepSeek-V2's comparison: MHA with 128 heads of 128 caches 2 * 128 * 128 numbers per token per layer
    assert v2.plain_formula_bytes(1) == 60 * 2 * 128 * 128 * 2
    assert v3.layer_kv_cache_bytes(60, 10) == 10 * 576 * 2


def test_latent_cache_bytes_rounds_to_whole_bytes_and_checks_arguments():
    assert latent_cache_bytes(1, 3, 1, 1, "int4") == 2  # 12 bits -> 2 bytes
    assert latent_cache_bytes(2, 576, 7, 5, "int4") == 2 * 576 * 7 * 5 // 2
    with pytest.raises(ValueError, match="^seq_len"):
        latent_cache_bytes(61, 576, 0)
    with pytest.raises(ValueError, match="^dtype"):
        latent_cache_bytes(61, 576, 1, 1, "fp12")


@pytest.mark.parametrize("name", sorted(MODEL_PRESETS))
@pytest.mark.parametrize("seq_len", [1, 3000, 4096, 4097, 131072])
def test_layers_add_up_to_the_total(name, seq_len):
    p = MODEL_PRESETS[name]
    assert sum(p.layer_kv_cache_bytes(i, seq_len, 2, "bf16") for i in range(p.n_layer)) == \
        p.kv_cache_bytes(seq_len, 2, "bf16")
    assert p.kv_cache_bytes(seq_len, 6) == 6 * p.kv_cache_bytes(seq_len, 1)  # linear in the batch


def test_bad_arguments_name_themselves():
    for p in (MODEL_PRESETS["LLaMA-7B"], MODEL_PRESETS["Mistral-7B"], MODEL_PRESETS["DeepSeek-V3 (671B)"]):
        with pytest.raises(ValueError, match="^seq_len"):
            p.kv_cache_bytes(0)
        with pytest.raises(ValueError, match="^batch_size"):
            p.kv_cache_bytes(10, -1)
        with pytest.raises(ValueError, match="^layer"):
            p.layer_kv_cache_bytes(p.n_layer, 10)


def test_huge_sizes_stay_exact_integers():
    p = MODEL_PRESETS["Llama-3.1-405B"]
    got = p.kv_cache_bytes(2**22, 2**16)
    assert isinstance(got, int) and got == 2 * 126 * 8 * 128 * 2 * 2**22 * 2**16
    assert format_bytes(got).endswith("PiB")


def test_weight_bytes():
    llama = MODEL_PRESETS["LLaMA-7B"]
    assert llama.weight_bytes("fp16") == 2 * 6_738_415_616
    assert llama.weight_bytes("int4") == 6_738_415_616 // 2
    assert llama.weight_bytes("fp32") == 4 * llama.n_params
    odd = ModelPreset("odd", 1, 1, 1, 2, 2, 3, 1, "test")
    assert odd.weight_bytes("int4") == 2  # 1.5 bytes round up to whole bytes


# -- GPUs -------------------------------------------------------------------------------------------
def test_gpu_presets_cover_the_cards_of_the_issue():
    marketed = sorted(int(g.marketed.split()[0]) for g in GPU_PRESETS.values())
    assert marketed == [16, 24, 40, 80, 80, 141]


def test_gpu_memory_is_what_nvidia_smi_reports_in_mib():
    t4 = GPU_PRESETS["T4 16 GB (Colab)"]
    assert t4.memory_bytes == 15360 * MIB == 16 * GIB * 15 // 16  # ECC keeps 1/16 of the 16 GiB
    assert GPU_PRESETS["A100 80 GB"].memory_bytes == 80 * GIB
    for g in GPU_PRESETS.values():
        assert g.memory_bytes <= int(g.marketed.split()[0]) * GIB, g.name  # never more than the label as GiB


def test_torch_reading_of_the_t4_is_kept_as_printed_with_its_upper_bound():
    t4 = GPU_PRESETS["T4 16 GB (Colab)"]
    assert t4.torch_total_gib == "14.75" and "14.75 GiB" in t4.torch_source
    assert t4.torch_total_bytes_at_most == 1073741824 * 14755 // 1000 == 15_843_060_613  # < 14.755 GiB
    assert GPU_PRESETS["A100 80 GB"].torch_total_bytes_at_most is None
