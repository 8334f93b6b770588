import pytest
import torch

from kvlab import CacheFullError, DynamicKVCache, Int8KVCache, KOnlyCache, KVCache, ModelConfig, kv_cache_bytes
from kvlab.cache import dequantize_int8, quantize_int8

C = ModelConfig(vocab_size=13, d_model=12, n_layer=2, n_head=3, n_kv_head=1, head_dim=4, max_seq_len=32)


def kv(T, B=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, 1, T, 4, generator=g), torch.randn(B, 1, T, 4, generator=g)


def test_shape_and_views():
    cache = KVCache(C, batch_size=2, max_seq_len=10)
    assert cache.k.shape == (2, 2, 1, 10, 4)  # (L, B, H_kv, S_max, D)
    k, v = kv(3)
    k_all, v_all = cache.update(0, k, v)
    assert k_all.shape == (2, 1, 3, 4)
    assert k_all.data_ptr() == cache.k.data_ptr()  # a view of the preallocated buffer, not a copy
    assert cache.length == 0  # the model advances once per pass, after every layer
    cache.update(1, k, v)
    cache.advance(3)
    k2, v2 = kv(1, seed=1)
    k_all, v_all = cache.update(0, k2, v2)
    assert k_all.shape == (2, 1, 4, 4)
    torch.testing.assert_close(k_all[:, :, :3], k)
    torch.testing.assert_close(v_all[:, :, 3:], v2)


def test_overflow_leaves_cache_untouched():
    cache = KVCache(C, batch_size=2, max_seq_len=5)
    k, v = kv(4)
    for layer in range(2):
        cache.update(layer, k, v)
    cache.advance(4)
    before_k, before_v = cache.k.clone(), cache.v.clone()
    with pytest.raises(CacheFullError, match="max_seq_len=5"):
        cache.update(0, *kv(2, seed=5))
    with pytest.raises(CacheFullError):
        cache.advance(2)
    assert cache.length == 4
    assert torch.equal(cache.k, before_k) and torch.equal(cache.v, before_v)


def test_model_overflow_leaves_cache_untouched(tiny_model):
    cache = KVCache(tiny_model.config, batch_size=1, max_seq_len=6)
    tiny_model(torch.tensor([[1, 2, 3, 4]]), cache)
    snapshot = cache.k.clone()
    with pytest.raises(CacheFullError):
        tiny_model(torch.tensor([[5, 6, 7]]), cache)
    assert cache.length == 4 and torch.equal(cache.k, snapshot)


def test_reset_and_bytes():
    cache = KVCache(C, batch_size=2, max_seq_len=8, dtype="fp16")
    assert cache.nbytes == kv_cache_bytes(2, 1, 4, 8, 2, "fp16")
    assert cache.used_bytes == 0
    for layer in range(2):
        cache.update(layer, *kv(3))
    cache.advance(3)
    assert cache.used_bytes == kv_cache_bytes(2, 1, 4, 3, 2, "fp16")
    cache.reset()
    assert cache.length == 0 and cache.used_bytes == 0


def test_dynamic_cache_counts_copies():
    cache = DynamicKVCache(C, batch_size=1, max_seq_len=10)
    for step in range(4):
        for layer in range(2):
            cache.update(layer, *kv(1, B=1, seed=step))
        cache.advance(1)
    assert cache.allocations == 4 * 2 * 2  # every update allocates a new K and a new V per layer
    element = 4  # fp32
    per_token = 2 * 1 * 1 * 4 * element  # K and V of one token, one layer
    assert cache.bytes_copied == 2 * per_token * (1 + 2 + 3 + 4)  # quadratic: all old tokens recopied
    assert cache.nbytes == cache.used_bytes == kv_cache_bytes(2, 1, 4, 4, 1, "fp32")


def test_int8_quantization_error_bound():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 2, 17, 8, generator=g) * torch.logspace(-3, 3, 8)
    q, s = quantize_int8(x)
    assert q.dtype == torch.int8 and s.shape == (3, 2, 17, 1)
    err = (dequantize_int8(q, s) - x).abs()
    assert (err <= s / 2 * (1 + 1e-6) + 1e-12).all()


def test_int8_cache_bytes_are_about_half_of_fp16():
    c = ModelConfig(vocab_size=13, d_model=128, n_layer=2, n_head=1, head_dim=128, max_seq_len=64)
    cache = Int8KVCache(c, batch_size=1, max_seq_len=64)
    fp16 = kv_cache_bytes(2, 1, 128, 64, 1, "fp16")
    assert cache.nbytes == fp16 // 2 + 2 * 2 * 64 * 4  # int8 payload + one fp32 scale per (token, head)
    assert cache.nbytes / fp16 == pytest.approx(0.515625)


def test_k_only_cache_rejects_kv_update():
    cache = KOnlyCache(C, batch_size=1, max_seq_len=4)
    with pytest.raises(TypeError):
        cache.update(0, *kv(1, B=1))


@pytest.mark.parametrize("kwargs,name", [
    (dict(batch_size=0), "batch_size"), (dict(batch_size=1.5), "batch_size"),
    (dict(max_seq_len=-3), "max_seq_len"), (dict(max_seq_len=33), "max_seq_len"),
    (dict(dtype="int3"), "dtype"), (dict(device="tpu9"), "device"),
])
def test_bad_cache_args(kwargs, name):
    args = dict(batch_size=1, max_seq_len=8) | kwargs
    with pytest.raises(ValueError, match=name):
        KVCache(C, **args)


def test_absurd_cache_is_refused_not_allocated():
    big = ModelConfig(vocab_size=10, d_model=8192, n_layer=80, n_head=64, max_seq_len=10**6)
    with pytest.raises(ValueError, match="max_seq_len.*needs"):
        KVCache(big, batch_size=64, max_seq_len=10**6)


@pytest.mark.parametrize("batch,seq_len,blamed", [(100, 32, "batch_size"), (7, 32, "batch_size"), (1, 32, "max_seq_len")])
def test_a_refusal_blames_the_argument_that_is_too_large_and_its_numbers_fit(monkeypatch, batch, seq_len, blamed):
    """Free memory made small: a batch that is too large for max_seq_len names batch_size and how many sequences fit;
    when not even one sequence of max_seq_len fits, it names max_seq_len. The largest sizes it names are allocated."""
    per_token = 2 * C.n_layer * C.n_kv_head * C.head_dim * 4  # bytes of one token of one sequence, K and V, fp32
    free = (per_token * 32 * 6 if blamed == "batch_size" else per_token * 20)  # 6 sequences of 32 tokens, or 20 tokens
    monkeypatch.setattr("kvlab.cache.available_memory", lambda device: free)
    with pytest.raises(ValueError) as refused:
        KVCache(C, batch_size=batch, max_seq_len=seq_len)
    message = str(refused.value)
    assert message.startswith(f"{blamed}: the KV cache for {batch:,} sequences of {seq_len} tokens needs ")
    room = free * 0.9
    most_tokens = int(room // (per_token * batch))
    if blamed == "batch_size":
        most_sequences = int(room // (per_token * seq_len))
        assert f"at most {most_sequences:,} sequences of {seq_len} tokens fit" in message
        KVCache(C, batch_size=most_sequences, max_seq_len=seq_len)  # the sizes it names do fit
        with pytest.raises(ValueError, match="^batch_size"):
            KVCache(C, batch_size=most_sequences + 1, max_seq_len=seq_len)
    else:
        assert "not even one sequence of 32 tokens fits" in message
    assert f"at most {most_tokens:,} tokens for {batch:,} sequences" in message
    KVCache(C, batch_size=batch, max_seq_len=most_tokens)
    with pytest.raises(ValueError):
        KVCache(C, batch_size=batch, max_seq_len=most_tokens + 1)


def test_update_checks_layer_and_shape():
    cache = KVCache(C, batch_size=2, max_seq_len=8)
    with pytest.raises(ValueError, match="layer"):
        cache.update(2, *kv(1))
    with pytest.raises(ValueError, match="k must be shaped"):
        cache.update(0, torch.zeros(2, 3, 1, 4), torch.zeros(2, 1, 1, 4))


def test_dynamic_cache_reset_empty_view_and_partial_pass():
    cache = DynamicKVCache(C, batch_size=2, max_seq_len=10)
    k, v = cache.layer_view(1)
    assert k.shape == (2, 1, 0, 4) and v.shape == (2, 1, 0, 4)  # nothing stored yet: an empty view
    for layer in range(2):
        cache.update(layer, *kv(3))
    cache.advance(3)
    # a pass that wrote layer 0 but was never advanced (it failed part-way): the next write starts over
    cache.update(0, *kv(2, seed=7))
    k0, _ = cache.layer_view(0)
    assert k0.shape[2] == 3  # the view only shows `length` tokens
    k_new, v_new = kv(1, seed=8)
    k_all, _ = cache.update(0, k_new, v_new)
    assert k_all.shape[2] == 4 and torch.equal(k_all[:, :, 3:], k_new)  # the half-written tokens were dropped
    cache.reset()
    assert cache.length == 0 and cache.nbytes == 0 and cache.layer_view(0)[0].shape[2] == 0


def test_fp16_storage_for_an_fp32_model():
    cache = KVCache(C, batch_size=2, max_seq_len=8, storage_dtype="fp16")
    assert cache.k.dtype == torch.float16 and cache.dtype == torch.float32
    assert cache.nbytes == kv_cache_bytes(2, 1, 4, 8, 2, "fp16")
    k, v = kv(3)
    k_all, v_all = cache.update(0, k, v)
    assert k_all.dtype == torch.float32  # read back in the compute dtype
    torch.testing.assert_close(k_all, k.half().float())  # exactly fp16 rounding, nothing else


def test_k_only_cache_bytes_and_overflow():
    cache = KOnlyCache(C, batch_size=2, max_seq_len=6, dtype="fp16")
    assert cache.nbytes == kv_cache_bytes(2, 1, 4, 6, 2, "fp16") // 2  # K only: half a KV cache
    k, _ = kv(4)
    for layer in range(2):
        cache.write_k(layer, k.half())
    cache.advance(4)
    assert cache.used_bytes == cache.nbytes * 4 // 6
    before = cache.k.clone()
    with pytest.raises(CacheFullError):
        cache.advance(3)
    assert cache.length == 4 and torch.equal(cache.k, before)


@pytest.mark.parametrize("rows,n_in,n_out,parts", [
    (1, 8, 5, 1), (1, 8, 5, 2), (3, 12, 7, 2), (3, 12, 7, 3), (8, 64, 33, 2), (8, 64, 33, 4), (2, 6, 1, 3)])
def test_split_k_matmul_equals_a_plain_matmul(rows, n_in, n_out, parts):
    from kvlab.fast_linear import split_k_matmul

    g = torch.Generator().manual_seed(rows * 100 + n_in)
    x, w = torch.randn(2, rows, n_in, generator=g), torch.randn(n_in, n_out, generator=g)
    torch.testing.assert_close(split_k_matmul(x, w, parts), x @ w, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_linear_layer_equals_a_plain_matmul_for_any_thread_count(threads):
    from kvlab.fast_linear import Linear
    from kvlab.measure import torch_threads

    layer = Linear(12, 5)
    torch.nn.init.normal_(layer.weight)
    for rows in (1, 4, 9):  # 9 rows: past SPLIT_K_MAX_ROWS, the plain path
        x = torch.randn(rows, 12)
        with torch_threads(threads):
            torch.testing.assert_close(layer(x), x @ layer.weight, atol=1e-5, rtol=1e-5)
