import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kvlab import MODEL_PRESETS, KVCache, ModelConfig, format_bytes, kv_cache_bytes
from kvlab.memory import DTYPE_BITS, dtype_name


# Bits per element written out by hand (not read from kvlab's own table).
BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4}


def test_every_dtype_is_known_with_its_width():
    assert set(DTYPE_BITS) == set(BITS)


def test_chapter_32_example():
    # The chapter's 3.2 code: L=32, B=1, H=32, S=1024, D=128, FP16 -> 0.50 GB (GiB) as printed.
    assert kv_cache_bytes(32, 32, 128, 1024, 1, "fp16") == 536_870_912
    assert format_bytes(536_870_912) == "512.0 MiB"


def test_chapter_34_example_prints_twice_its_comment():
    # The chapter's 3.4 code (L=32, H=32, D=128, S=2048, FP16) prints 32.0 MB per layer and 1.00 GB,
    # while its comment says 16.0 MB and 0.50 GB.
    assert kv_cache_bytes(1, 32, 128, 2048, 1, "fp16") == 33_554_432 and format_bytes(33_554_432) == "32.0 MiB"
    assert kv_cache_bytes(32, 32, 128, 2048, 1, "fp16") == 1_073_741_824
    assert kv_cache_bytes(32, 32, 128, 8192) == 4_294_967_296  # "about 2 GB" in the text: 4 GiB
    assert kv_cache_bytes(80, 64, 128, 8192) == 21_474_836_480  # the 70B with 64 KV heads: 20 GiB
    assert MODEL_PRESETS["Llama-2-70B"].kv_cache_bytes(8192) == 2_684_354_560  # 8 KV heads: 2.5 GiB


@pytest.mark.parametrize("dtype,bits", sorted(BITS.items()))
def test_one_element_per_dtype(dtype, bits):
    # L=1, H=1, D=2, S=1, B=1: K and V of 2 elements each = 4 elements
    assert kv_cache_bytes(1, 1, 2, 1, 1, dtype) == 4 * bits // 8


def test_dtype_aliases():
    assert dtype_name(torch.float16) == dtype_name("half") == dtype_name("float16") == "fp16"
    assert dtype_name("BF16") == dtype_name(torch.bfloat16) == "bf16"
    assert kv_cache_bytes(2, 2, 2, 3, dtype=torch.float32) == 192  # 2 (K, V) x 2 x 2 x 2 x 3 elements x 4 B


@given(st.integers(1, 10**6), st.integers(1, 10**4), st.integers(1, 10**4), st.integers(1, 10**9),
       st.integers(1, 10**6), st.sampled_from(sorted(BITS)))
def test_huge_sizes_are_exact_and_linear_in_every_dimension(L, H, D, S, B, dtype):
    got = kv_cache_bytes(L, H, D, S, B, dtype)
    assert isinstance(got, int)
    one = kv_cache_bytes(1, 1, 2, 1, 1, dtype)  # K and V of D=2: 4 elements
    assert got * 2 == one * L * H * D * S * B  # 2*L*B*H*S*D elements = (L*B*H*S*D / 2) x 4 elements
    assert kv_cache_bytes(L, H, D, 2 * S, B, dtype) == 2 * got  # doubling S doubles the bytes, exactly


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


def test_stored_tokens_is_what_generate_preallocates():
    """The last new token is returned, never fed back: a generation stores prompt + new - 1 tokens."""
    from kvlab import ModelConfig, ToyTransformer, generate
    from kvlab.memory import stored_tokens

    assert stored_tokens(4, 1) == 4 and stored_tokens(4, 24) == 27
    model = ToyTransformer(ModelConfig(vocab_size=32, d_model=16, n_layer=1, n_head=2, max_seq_len=32), seed=0).eval()
    for prompt_len, new in ((1, 1), (3, 5), (7, 25)):
        result = generate(model, list(range(1, prompt_len + 1)), new)
        assert result.cache.max_seq_len == stored_tokens(prompt_len, new) == result.trace[-1].seq_len
