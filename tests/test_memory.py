import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kvlab import MODEL_PRESETS, KVCache, ModelConfig, format_bytes, kv_cache_bytes
from kvlab.memory import DTYPE_BITS, dtype_name


def test_chapter_32_formula():
    # The chapter's 3.2 code: memory_bytes = 2 * L * B * H * S * D * 2 (FP16)
    L, B, H, S, D = 32, 1, 32, 1024, 128
    assert kv_cache_bytes(L, H, D, S, B, "fp16") == 2 * L * B * H * S * D * 2
    assert kv_cache_bytes(L, H, D, S, B, "fp16") / 1024**3 == 0.5


def test_chapter_34_formula_gives_its_own_code_not_its_printed_comment():
    # The chapter's 3.4 code: per_layer = 2 * H * S * D * bytes; total = L * per_layer.
    L, H, D, S, bpe = 32, 32, 128, 2048, 2
    per_layer = 2 * H * S * D * bpe
    total = L * per_layer
    assert kv_cache_bytes(1, H, D, S, 1, "fp16") == per_layer
    assert kv_cache_bytes(L, H, D, S, 1, "fp16") == total
    # What that code really prints (the chapter's comment says 16.0 MB and 0.50 GB).
    assert f"{per_layer / 1024**2:.1f}" == "32.0"
    assert f"{total / 1024**3:.2f}" == "1.00"
    assert format_bytes(per_layer) == "32.0 MiB" and format_bytes(total) == "1.00 GiB"
    # 8192 tokens: the chapter says about 2 GB; the formula gives 4 GiB.
    assert kv_cache_bytes(L, H, D, 8192) == 4 * 1024**3
    # The hypothetical 70B with 64 KV heads at 8192 tokens: 20 GiB ("over 16 GB" holds).
    assert kv_cache_bytes(80, 64, 128, 8192) == 20 * 1024**3
    # Real Llama-2-70B keeps 8 KV heads (GQA): 8x less.
    assert MODEL_PRESETS["Llama-2-70B"].kv_cache_bytes(8192) == 20 * 1024**3 // 8


@pytest.mark.parametrize("dtype,bits", sorted(DTYPE_BITS.items()))
def test_dtype_bits(dtype, bits):
    assert kv_cache_bytes(1, 1, 2, 1, 1, dtype) == 2 * 2 * bits // 8


def test_dtype_aliases():
    assert dtype_name(torch.float16) == dtype_name("half") == dtype_name("float16") == "fp16"
    assert dtype_name("BF16") == dtype_name(torch.bfloat16) == "bf16"
    assert kv_cache_bytes(2, 2, 2, 3, dtype=torch.float32) == 2 * 2 * 2 * 2 * 3 * 4


@given(st.integers(1, 10**6), st.integers(1, 10**4), st.integers(1, 10**4), st.integers(1, 10**9),
       st.integers(1, 10**6), st.sampled_from(sorted(DTYPE_BITS)))
def test_huge_sizes_are_exact_integers(L, H, D, S, B, dtype):
    got = kv_cache_bytes(L, H, D, S, B, dtype)
    assert isinstance(got, int)
    assert got * 8 == 2 * L * B * H * S * D * DTYPE_BITS[dtype]


def test_formula_equals_allocated_tensor_bytes():
    c = ModelConfig(vocab_size=11, d_model=12, n_layer=3, n_head=3, n_kv_head=1, head_dim=6, max_seq_len=40)
    for dtype in ("fp32", "fp16", "bf16"):
        cache = KVCache(c, batch_size=2, max_seq_len=37, dtype=dtype)
        assert cache.nbytes == kv_cache_bytes(3, 1, 6, 37, 2, dtype)


BAD_ARGS = [
    (dict(n_layer=0), "n_layer"), (dict(n_kv_head=-1), "n_kv_head"), (dict(head_dim=1.5), "head_dim"),
    (dict(seq_len=True), "seq_len"), (dict(batch_size="2"), "batch_size"), (dict(dtype="fp12"), "dtype"),
    (dict(seq_len=None), "seq_len"), (dict(dtype=torch.int32), "dtype"),
]


@pytest.mark.parametrize("override,name", BAD_ARGS)
def test_kv_cache_bytes_rejects_bad_input(override, name):
    kwargs = dict(n_layer=2, n_kv_head=2, head_dim=4, seq_len=8, batch_size=1, dtype="fp16") | override
    with pytest.raises(ValueError, match=name):
        kv_cache_bytes(**kwargs)


@pytest.mark.parametrize("n,text", [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (32 * 1024**2, "32.0 MiB"),
    (1024**3, "1.00 GiB"), (int(1.5 * 1024**4), "1.50 TiB"), (1024**2 - 1, "1.0 MiB"), (1024**3 - 1, "1.00 GiB"),
    (10**30, "827180.61 YiB"),
])
def test_format_bytes(n, text):
    assert format_bytes(n) == text


@pytest.mark.parametrize("bad", [-1, float("nan"), "12", None, True])
def test_format_bytes_rejects(bad):
    with pytest.raises(ValueError, match="n "):
        format_bytes(bad)
