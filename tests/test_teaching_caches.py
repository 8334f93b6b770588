"""The deliberately broken caches of chapter 3.5's lab: each bug does exactly what its docstring says (checked
on hand-made K/V), runs without an error, and changes what the demo model generates."""
import pytest
import torch

from kvlab import KVCache, ModelConfig, generate, load_demo_model
from kvlab.model import apply_rope, rope_tables
from kvlab.teaching_caches import (BROKEN_CACHES, KInPlaceOfVBugCache, NoResetBugCache, OffByOneBugCache,
                                   OneLayerSlotBugCache, RopeOffsetBugCache)

C = ModelConfig(vocab_size=13, d_model=16, n_layer=2, n_head=2, n_kv_head=1, head_dim=8, max_seq_len=16)


def kv(T, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 1, T, 8, generator=g), torch.randn(1, 1, T, 8, generator=g)


def fill(cache, T, seed=0):
    """One pass of T tokens through every layer, as the model writes them."""
    k, v = kv(T, seed)
    for layer in range(C.n_layer):
        cache.update(layer, k, v)
    cache.advance(T)
    return k, v


def test_registry():
    assert set(BROKEN_CACHES) == {"rope_offset", "no_reset", "k_as_v", "off_by_one", "one_slot"}
    for bug_id, cls in BROKEN_CACHES.items():
        assert cls.bug_id == bug_id and issubclass(cls, KVCache)


def test_rope_offset_stores_new_keys_as_if_at_position_0():
    cache = RopeOffsetBugCache(C, 1, 8)
    fill(cache, 3)
    x, v = kv(1, seed=5)  # the new token's K before RoPE
    cos, sin = rope_tables(C.head_dim, 8, C.rope_theta)
    k_right = apply_rope(x, cos[3:4], sin[3:4])  # what the model hands over: rotated for position 3
    k_all, v_all = cache.update(0, k_right, v)
    # rotating for position 0 is the identity (cos 0 = 1, sin 0 = 0): the bug stores x unrotated
    torch.testing.assert_close(k_all[:, :, 3], x[:, :, 0], atol=1e-6, rtol=0)
    torch.testing.assert_close(v_all[:, :, 3], v[:, :, 0])  # V is untouched
    assert not torch.allclose(k_all[:, :, 3], k_right[:, :, 0], atol=1e-3)


def test_rope_offset_prefill_is_right():
    cache = RopeOffsetBugCache(C, 1, 8)
    k, v = kv(3)
    k_all, _ = cache.update(0, k, v)  # positions 0..2: the offset is 0, so nothing changes
    torch.testing.assert_close(k_all, k, atol=1e-6, rtol=0)


def test_no_reset_keeps_the_length():
    broken, right = NoResetBugCache(C, 1, 8), KVCache(C, 1, 8)
    for cache in (broken, right):
        fill(cache, 3)
        cache.reset()
    assert right.length == 0 and broken.length == 3


def test_k_as_v_reads_back_k_for_v():
    cache = KInPlaceOfVBugCache(C, 1, 8)
    k, v = kv(2)
    k_all, v_all = cache.update(1, k, v)
    torch.testing.assert_close(v_all, k)
    torch.testing.assert_close(k_all, k)


def test_off_by_one_loses_only_the_prompts_last_token_and_reads_an_unwritten_slot():
    cache = OffByOneBugCache(C, 1, 8)
    prompt_k, _ = fill(cache, 3)  # prefill: slots 0, 1, 2 (right)
    decoded = []
    for step in range(3):
        k_new, v_new = kv(1, seed=10 + step)
        k_all, v_all = cache.update(0, k_new, v_new)
        for layer in range(1, C.n_layer):
            cache.update(layer, k_new, v_new)
        assert k_all.shape[2] == 3 + step + 1  # attention reads length + 1 slots ...
        assert torch.count_nonzero(k_all[:, :, -1]) == 0 and torch.count_nonzero(v_all[:, :, -1]) == 0  # ... the
        cache.advance(1)  # last of them, slot `length`, never written: zeros in a fresh cache
        decoded.append(k_new[:, :, 0])
    torch.testing.assert_close(cache.k[0, :, :, :2], prompt_k[:, :, :2])  # the prompt's first two tokens stay
    for i, k in enumerate(decoded):  # every new token one slot early: 2, 3, 4 instead of 3, 4, 5
        torch.testing.assert_close(cache.k[0, :, :, 2 + i], k)
    assert not any(torch.equal(cache.k[0, :, :, s], prompt_k[:, :, 2]) for s in range(8))  # prompt token 3: gone
    assert torch.count_nonzero(cache.k[0, :, :, 5:]) == 0


def test_off_by_one_reads_the_previous_requests_data_in_a_reused_cache():
    cache = OffByOneBugCache(C, 1, 8)
    old_k, old_v = fill(cache, 5, seed=4)  # the previous request: slots 0 .. 4
    cache.reset()
    fill(cache, 2, seed=5)  # this request's prefill: slots 0, 1
    k_all, v_all = cache.update(0, *kv(1, seed=6))  # first decode step: written at slot 1, reads slots 0 .. 2
    torch.testing.assert_close(k_all[:, :, 2], old_k[:, :, 2])  # slot 2: the previous request's K
    torch.testing.assert_close(v_all[:, :, 2], old_v[:, :, 2])


def test_one_slot_uses_layer_0_for_every_layer():
    cache = OneLayerSlotBugCache(C, 1, 8)
    k0, v0 = kv(2, seed=1)
    k1, v1 = kv(2, seed=2)
    cache.update(0, k0, v0)
    k_all, v_all = cache.update(1, k1, v1)
    torch.testing.assert_close(cache.k[0, :, :, :2], k1)  # layer 1 overwrote layer 0's slot
    assert torch.count_nonzero(cache.k[1]) == 0  # layer 1's own slot was never written
    torch.testing.assert_close(k_all, k1)


@pytest.fixture(scope="module")
def demo():
    return load_demo_model("cpu")


@pytest.mark.parametrize("bug_id", sorted(BROKEN_CACHES))
def test_every_bug_runs_and_changes_the_demo_models_text(demo, bug_id):
    model, tok = demo
    previous, prompt, n = tok.encode("大语言模型"), tok.encode("计算"), 24
    reference = generate(model, [prompt], n, cache="none")
    cache = BROKEN_CACHES[bug_id](model.config, 1, len(previous) + len(prompt) + 2 * (n - 1))
    generate(model, [previous], n, cache=cache)  # the request served before, with the same cache
    cache.reset()
    out = generate(model, [prompt], n, cache=cache)
    assert not torch.equal(out.new_tokens, reference.new_tokens)


def test_the_correct_cache_served_twice_gives_the_reference(demo):
    model, tok = demo
    previous, prompt, n = tok.encode("大语言模型"), tok.encode("计算"), 24
    cache = KVCache(model.config, 1, len(previous) + len(prompt) + 2 * (n - 1))
    generate(model, [previous], n, cache=cache)
    cache.reset()
    out = generate(model, [prompt], n, cache=cache)
    assert torch.equal(out.new_tokens, generate(model, [prompt], n, cache="none").new_tokens)
