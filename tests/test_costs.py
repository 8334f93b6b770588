"""kvlab.costs counted by hand on a tiny config, and against torch's own FLOP counter on a real pass."""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from kvlab import KVCache, ModelConfig
from kvlab.costs import (PassCost, attention_crossover, attention_flops, decode_cost, linear_flops_per_token,
                         pass_cost, weight_bytes)

# d = 4, one layer, 2 query heads sharing 1 KV head of size 2, d_ff = 6, vocabulary of 10
HAND = ModelConfig(vocab_size=10, d_model=4, n_layer=1, n_head=2, n_kv_head=1, head_dim=2, d_ff=6, max_seq_len=32)


def test_linear_flops_by_hand():
    # W_q,W_k,W_v: 2*4*(2*2 + 2*1*2) = 64; W_o: 2*4*4 = 32; SwiGLU: 2*3*4*6 = 144
    assert linear_flops_per_token(HAND) == 64 + 32 + 144 == 240


def test_attention_flops_by_hand():
    # 3 new tokens against 2 + 3 keys, QK^T and weights@V: 2 * 2 * H(2) * D(2) * 3 * 5
    assert attention_flops(HAND, 3, 2) == 2 * 2 * 2 * 2 * 3 * 5 == 240
    assert attention_flops(HAND, 1, 0) == 16  # one token attending to itself


def test_weight_bytes_by_hand():
    # per layer: W_qkv 4*(2+2)*2 = 32, W_o 2*2*4 = 16, SwiGLU 3*4*6 = 72, two norms 2*4 = 8 -> 128
    # + final norm 4 + LM head 4*10 = 40 -> 172 numbers, + one embedding row (4) per token
    assert weight_bytes(HAND, 1, dtype_bytes=4) == (172 + 4) * 4 == 704
    assert weight_bytes(HAND, 6, dtype_bytes=2) == (172 + 24) * 2 == 392


def test_pass_cost_by_hand():
    c = pass_cost(HAND, new_tokens=3, past_tokens=2, batch_size=2)
    # per sequence: 3 tokens * 240 + attention 240 + LM head for the last position 2*4*10 = 80 -> 1040
    assert c.flops == 2 * 1040 == 2080
    assert c.weight_bytes == (172 + 2 * 3 * 4) * 4 == 784  # weights once for the batch, 6 embedding rows
    kv_token = 2 * 1 * 1 * 2 * 4  # K and V, 1 layer, 1 KV head, D = 2, fp32
    assert (c.cache_read_bytes, c.cache_write_bytes) == (2 * 5 * kv_token, 2 * 3 * kv_token) == (160, 96)
    assert c.bytes == 784 + 160 + 96 == 1040 and c.intensity == 2.0
    assert c.cache_bytes == 256 and c.cache_share == 256 / 1040


def test_the_cache_share_grows_with_the_context_and_caps_batching():
    """Decode of 8 sequences: with 2 cached tokens the weights dominate the bytes; with 30 the K/V do, and the
    intensity falls although the batch is the same."""
    short, long = pass_cost(HAND, 1, 2, 8), pass_cost(HAND, 1, 30, 8)
    kv_token = 16  # K and V, 1 layer, 1 KV head, D = 2, fp32
    assert short.cache_bytes == 8 * (3 + 1) * kv_token == 512 and long.cache_bytes == 8 * (31 + 1) * kv_token == 4096
    assert short.weight_bytes == long.weight_bytes == (172 + 8 * 4) * 4 == 816
    assert short.cache_share == 512 / 1328 and long.cache_share == 4096 / 4912
    assert long.intensity < short.intensity


def test_decode_cost_sums_the_passes_by_hand():
    # after a prompt of 4: decode passes see 4, then 5 cached tokens
    d = decode_cost(HAND, prompt_len=4, steps=2, batch_size=1)
    flops = (240 + 16 * 5 + 80) + (240 + 16 * 6 + 80)  # attention 2*2*2*2*1*(past+1) = 16 per key
    assert d.flops == flops == 816
    assert d.weight_bytes == 2 * 704 and d.cache_read_bytes == (5 + 6) * 16 and d.cache_write_bytes == 2 * 16
    assert d == pass_cost(HAND, 1, 4) + pass_cost(HAND, 1, 5)


def test_pass_cost_add_rejects_other_types():
    with pytest.raises(TypeError):
        pass_cost(HAND, 1) + 3


def test_weight_bytes_match_the_model_parameters(tiny_model):
    """Every parameter but the embedding table is read once; the embedding one row per token."""
    c = tiny_model.config
    params = sum(p.numel() for name, p in tiny_model.named_parameters() if not name.startswith("embed"))
    assert weight_bytes(c, 5) == (params + 5 * c.d_model) * 4


@pytest.mark.parametrize("new,past,batch", [(5, 0, 2), (1, 5, 2), (3, 4, 1)])
def test_flops_equal_torch_flop_counter(tiny_model, new, past, batch):
    """The formula against torch.utils.flop_counter on the explicit attention path (every matmul counted)."""
    model, c = tiny_model, tiny_model.config
    model.attention_impl = "explicit"
    cache = KVCache(c, batch, 16)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        if past:
            model(torch.randint(0, c.vocab_size, (batch, past), generator=gen), cache)
        with FlopCounterMode(display=False) as counter:
            model(torch.randint(0, c.vocab_size, (batch, new), generator=gen), cache, last_logits_only=True)
    assert counter.get_total_flops() == pass_cost(c, new, past, batch).flops


def test_intensity_grows_with_tokens_per_pass():
    decode, prefill = pass_cost(HAND, 1, 20), pass_cost(HAND, 20)
    assert decode.intensity < prefill.intensity
    assert pass_cost(HAND, 1, 20, batch_size=8).intensity > decode.intensity  # weights shared by the batch


@pytest.mark.parametrize("kwargs,name", [(dict(new_tokens=0), "new_tokens"), (dict(new_tokens=1, past_tokens=-1),
                                         "past_tokens"), (dict(new_tokens=1, batch_size=0), "batch_size"),
                                        (dict(new_tokens=2, logits_positions=3), "logits_positions")])
def test_pass_cost_names_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        pass_cost(HAND, **kwargs)


@pytest.mark.parametrize("kwargs,name", [(dict(prompt_len=0, steps=1), "prompt_len"),
                                         (dict(prompt_len=1, steps=0), "steps")])
def test_decode_cost_names_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        decode_cost(HAND, **kwargs)


def test_attention_crossover_by_hand():
    # linear 240 per token; attention 4 * H * D = 16 per token pair per layer -> t = 240 / 16 = 15
    assert attention_crossover(HAND) == 15


def test_pass_cost_is_a_value():
    assert isinstance(pass_cost(HAND, 1), PassCost) and pass_cost(HAND, 2) == pass_cost(HAND, 2)
