"""kvlab.interop's runs of transformers' own caches (DynamicCache, StaticCache) on kvlab's weights."""
import inspect

import pytest
import torch

from kvlab import ModelConfig, ToyTransformer, generate
from kvlab.interop import distinct_so_far

CONFIG = ModelConfig(vocab_size=53, d_model=32, n_layer=2, n_head=4, n_kv_head=2, max_seq_len=64)


def test_distinct_so_far_by_hand():
    assert distinct_so_far([]) == []
    assert distinct_so_far([7, 7, 7]) == [1, 1, 1]
    assert distinct_so_far([7, 8, 9, 9, 7]) == [1, 2, 3, 3, 4]  # back to an old address is still a change


@pytest.fixture(scope="module")
def decisive():
    """A model whose greedy choices are far from ties, its transformers twin, and 12 tokens it generated."""
    pytest.importorskip("transformers")
    from kvlab.interop import to_hf_llama

    model = ToyTransformer(CONFIG, seed=4).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(20)
    prompt = torch.randint(0, CONFIG.vocab_size, (2, 5), generator=torch.Generator().manual_seed(2))
    return model, to_hf_llama(model), generate(model, prompt, 7, cache="kv").tokens


def test_new_caches_are_transformers_own(decisive):
    from transformers import DynamicCache, StaticCache

    from kvlab.interop import hf_new_cache

    _, hf, _ = decisive
    assert type(hf_new_cache(hf, "dynamic", 2, 10)) is DynamicCache
    assert type(hf_new_cache(hf, "static", 2, 10)) is StaticCache
    with pytest.raises(ValueError, match="^kind"):
        hf_new_cache(hf, "paged", 2, 10)
    with pytest.raises(ValueError, match="^max_cache_len"):
        hf_new_cache(hf, "static", 2, 0)


@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_decode_run_sees_kvlab_tokens_and_counts_reallocations(decisive, kind):
    from kvlab.interop import hf_decode_run

    _, hf, tokens = decisive  # [2, 12]: a 5-token prompt and 7 new tokens
    run = hf_decode_run(hf, tokens, 5, kind)
    assert run.kind == kind and run.seq_len == [5, 6, 7, 8, 9, 10, 11]  # the prefill, then one token per pass
    assert len(run.seconds) == 7 and all(s > 0 for s in run.seconds)
    assert torch.equal(run.predicted, tokens[:, 5:])  # transformers' greedy choices are the tokens kvlab chose
    if kind == "dynamic":  # torch.cat: a new K tensor after every pass, holding the tokens so far
        assert run.reallocations == [1, 2, 3, 4, 5, 6, 7] and run.layer0_k_len == run.seq_len
    else:  # written in place into room for all 11 tokens, all of it handed to attention (masked)
        assert run.reallocations == [1] * 7 and run.layer0_k_len == [11] * 7


def test_decode_run_rejects_bad_arguments(decisive):
    from kvlab.interop import hf_decode_run

    _, hf, tokens = decisive
    with pytest.raises(ValueError, match="^tokens"):
        hf_decode_run(hf, tokens[0], 5, "dynamic")
    with pytest.raises(ValueError, match="^prompt_len"):
        hf_decode_run(hf, tokens, 12, "dynamic")  # nothing left to feed
    with pytest.raises(ValueError, match="^kind"):
        hf_decode_run(hf, tokens, 5, "paged")


class _StaticCache4x:
    """transformers 4.45's StaticCache signature: batch size and device given up front."""

    def __init__(self, config, max_batch_size=None, max_cache_len=None, device=None, dtype=torch.float32):
        self.kwargs = dict(config=config, max_batch_size=max_batch_size, max_cache_len=max_cache_len,
                           device=device, dtype=dtype)


class _DynamicCache4x:
    """transformers 4.4x's DynamicCache: no config."""

    def __init__(self):
        self.made = True


def test_new_caches_follow_the_4x_signatures(decisive, monkeypatch):
    import transformers

    from kvlab.interop import hf_new_cache

    _, hf, _ = decisive
    monkeypatch.setattr(transformers, "StaticCache", _StaticCache4x)
    monkeypatch.setattr(transformers, "DynamicCache", _DynamicCache4x)
    static = hf_new_cache(hf, "static", 3, 17)
    assert static.kwargs == dict(config=hf.config, max_batch_size=3, max_cache_len=17, device=hf.device,
                                 dtype=hf.dtype)
    assert hf_new_cache(hf, "dynamic", 3, 17).made


class _OldStyleForward(torch.nn.Module):
    """The real model behind a transformers 4.x forward signature (``past_key_values``, ``cache_position``)."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf
        self.config, self.device, self.dtype = hf.config, hf.device, hf.dtype
        self.cache_positions = []

    def forward(self, input_ids, past_key_values=None, use_cache=None, position_ids=None, cache_position=None):
        self.cache_positions.append(cache_position.tolist())
        name = "cache" if "cache" in inspect.signature(self.hf.forward).parameters else "past_key_values"
        return self.hf(input_ids=input_ids, use_cache=use_cache, position_ids=position_ids, **{name: past_key_values})


def test_decode_run_speaks_the_4x_forward(decisive):
    from kvlab.interop import hf_decode_run

    _, hf, tokens = decisive
    old = _OldStyleForward(hf)
    run = hf_decode_run(old, tokens[:, :8], 5, "static")
    assert old.cache_positions == [[0, 1, 2, 3, 4], [5], [6]]  # where each pass writes in the static cache
    assert torch.equal(run.predicted, tokens[:, 5:8]) and run.reallocations == [1, 1, 1]
