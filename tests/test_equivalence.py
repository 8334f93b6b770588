"""Cached and uncached decoding agree, for every kind of configuration (hypothesis)."""
import torch
from hypothesis import given
from hypothesis import strategies as st

from kvlab import CACHE_MODES, KVCache, ModelConfig, ToyTransformer, generate
from kvlab.cache_modes import EXACT_MODES, LOSSY_MODES, MODES
from kvlab.attention import attention, attention_mask


@st.composite
def configs(draw):
    n_kv_head = draw(st.integers(1, 3))
    n_head = n_kv_head * draw(st.integers(1, 3))  # MHA, GQA and MQA
    head_dim = draw(st.sampled_from([2, 4, 6, 8]))
    return ModelConfig(
        vocab_size=draw(st.integers(5, 70)),
        d_model=draw(st.integers(3, 40)),
        n_layer=draw(st.integers(1, 3)),
        n_head=n_head,
        n_kv_head=n_kv_head,
        head_dim=head_dim,
        d_ff=draw(st.integers(1, 48)),
        max_seq_len=48,
        rope_theta=draw(st.sampled_from([100.0, 10000.0])),
    )


@st.composite
def cases(draw):
    config = draw(configs())
    batch = draw(st.integers(1, 3))
    prompt_len = draw(st.integers(1, 12))
    prompt = draw(st.lists(st.lists(st.integers(0, config.vocab_size - 1), min_size=prompt_len,
                                    max_size=prompt_len), min_size=batch, max_size=batch))
    return config, prompt, draw(st.integers(1, 8)), draw(st.integers(1, 13)), draw(st.integers(0, 10**6))


@given(cases())
def test_all_cache_modes_match_no_cache(case):
    config, prompt, new, chunk, seed = case
    model = ToyTransformer(config, seed=seed).eval()
    ref = generate(model, prompt, new, cache="none", return_logits=True)
    for mode in EXACT_MODES:  # every mode kvlab.cache_modes marks exact, a new one included
        got = generate(model, prompt, new, cache=mode, return_logits=True, prefill_chunk_size=chunk)
        assert torch.equal(got.tokens, ref.tokens), mode
        torch.testing.assert_close(got.logits, ref.logits, atol=1e-5, rtol=0)


@st.composite
def ragged_cases(draw):
    """A batch of prompts of unequal lengths (left padding needed), with a chunk size."""
    config = draw(configs())
    lengths = draw(st.lists(st.integers(1, 10), min_size=2, max_size=4).filter(lambda ls: len(set(ls)) > 1))
    prompts = [draw(st.lists(st.integers(0, config.vocab_size - 1), min_size=n, max_size=n)) for n in lengths]
    return config, prompts, draw(st.integers(1, 6)), draw(st.integers(1, 11)), draw(st.integers(0, 10**6))


@given(ragged_cases())
def test_unequal_prompts_in_one_batch_equal_each_prompt_alone(case):
    """Left padding + mask + per-row positions: every row computes what its prompt computes alone."""
    config, prompts, new, chunk, seed = case
    model = ToyTransformer(config, seed=seed).eval()
    for mode in CACHE_MODES:
        batch = generate(model, prompts, new, cache=mode, return_logits=True, prefill_chunk_size=chunk)
        assert batch.pad_lengths == [max(map(len, prompts)) - len(p) for p in prompts]
        for row, prompt in enumerate(prompts):
            alone = generate(model, [prompt], new, cache=mode, return_logits=True)
            assert torch.equal(batch.new_tokens[row], alone.new_tokens[0]), (mode, row)
            assert batch.sequence(row).tolist() == prompt + alone.new_tokens[0].tolist()
            torch.testing.assert_close(batch.logits[row], alone.logits[0], atol=1e-5, rtol=0)


@given(cases())
def test_chunked_prefill_fills_the_same_cache(case):
    config, prompt, _new, chunk, seed = case
    model = ToyTransformer(config, seed=seed).eval()
    ids = torch.tensor(prompt)
    one, many = (KVCache(config, len(prompt), ids.shape[1]) for _ in range(2))
    with torch.no_grad():
        full = model(ids, one)
        parts = [model(ids[:, i:i + chunk], many) for i in range(0, ids.shape[1], chunk)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=0)
    torch.testing.assert_close(many.k, one.k, atol=1e-5, rtol=0)
    torch.testing.assert_close(many.v, one.v, atol=1e-5, rtol=0)
    assert many.length == one.length == ids.shape[1]


# Lossy caches store K/V narrower than the model computes. int8: each stored element is off by at most
# max|row|/254 (see test_cache); through the network the logits move by at most 1% of their spread
# (max - min over the vocabulary), the worst case seen over 200 random configurations being 0.25%.
# fp16 rounds each element to 11 significant bits, far inside the same bound.
LOSSY_REL_BOUND = 0.01


@given(cases())
def test_lossy_caches_stay_within_bound(case):
    """Every mode kvlab.cache_modes marks lossy, fed the same tokens as the uncached model (teacher forcing)."""
    config, prompt, _new, _chunk, seed = case
    model = ToyTransformer(config, seed=seed).eval()
    ids = torch.tensor(prompt)
    with torch.no_grad():
        ref = model(ids)  # [B, T, vocab], no cache
        spread = (ref.amax(-1) - ref.amin(-1)).max()
        for mode in LOSSY_MODES:
            cache = MODES[mode].factory(config, len(prompt), ids.shape[1])
            got = torch.cat([model(ids[:, t:t + 1], cache) for t in range(ids.shape[1])], dim=1)
            assert (got - ref).abs().max() <= LOSSY_REL_BOUND * spread + 1e-6, mode


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 6), st.integers(1, 9), st.integers(0, 9),
       st.sampled_from([2, 6, 8]), st.booleans())
def test_explicit_and_sdpa_attention_agree(B, n_kv, rep, tq, past, D, padded):
    g = torch.Generator().manual_seed(B * 100 + tq * 10 + past)
    q = torch.randn(B, n_kv * rep, tq, D, generator=g)
    k = torch.randn(B, n_kv, past + tq, D, generator=g)
    v = torch.randn(B, n_kv, past + tq, D, generator=g)
    pad = torch.randint(0, past + tq, (B,), generator=g) if padded else None
    mask = attention_mask(tq, past + tq, past, pad)
    a = attention(q, k, v, mask, impl="sdpa")
    b, w = attention(q, k, v, mask, impl="explicit", return_weights=True)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert w.shape == (B, n_kv * rep, tq, past + tq)
    torch.testing.assert_close(w.sum(-1), torch.ones(B, n_kv * rep, tq))  # finite, even for padding queries
    for i in range(tq):  # causal: query i (column past + i) gives no weight to later keys
        assert (w[..., i, past + i + 1:] == 0).all()
    if padded:  # no real query looks at a padding key
        for row in range(B):
            for i in range(tq):
                if past + i >= pad[row]:
                    assert (w[row, :, i, :pad[row]] == 0).all()


def test_attention_mask_by_hand():
    # 2 new tokens in columns 3 and 4 of a 5-column cache: column 3 sees 0..3, column 4 sees 0..4
    assert attention_mask(2, 5, 3).tolist() == [[True, True, True, True, False], [True] * 5]
    assert attention_mask(1, 5, 4) is None  # one new token sees everything stored
    # row 0 has 2 padding columns: real tokens skip them; the padding query in column 1 sees only itself
    m = attention_mask(3, 3, 0, torch.tensor([2, 0]))
    assert m.shape == (2, 1, 3, 3)
    assert m[0, 0].tolist() == [[True, False, False], [False, True, False], [False, False, True]]
    assert m[1, 0].tolist() == [[True, False, False], [True, True, False], [True, True, True]]


def test_model_attention_paths_agree(tiny_model):
    ids = torch.randint(0, tiny_model.config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a = tiny_model(ids)
        tiny_model.attention_impl = "explicit"
        b = tiny_model(ids)
        tiny_model.attention_impl = "sdpa"
        c, weights = tiny_model(ids, return_attention=True)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    torch.testing.assert_close(a, c, atol=1e-5, rtol=0)
    assert len(weights) == tiny_model.config.n_layer and weights[0].shape == (2, 6, 9, 9)
    assert tiny_model.attention_impl == "sdpa"


def test_cached_row_is_last_row_of_full_attention(tiny_model):
    """The chapter's two formulas: softmax(q_new K^T/sqrt d) V == last row of full attention."""
    ids = torch.randint(0, tiny_model.config.vocab_size, (1, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        _, full = tiny_model(ids, return_attention=True)
        cache = KVCache(tiny_model.config, 1, 7)
        tiny_model(ids[:, :-1], cache)
        _, row = tiny_model(ids[:, -1:], cache, return_attention=True)
    for layer in range(tiny_model.config.n_layer):
        assert row[layer].shape[-2:] == (1, 7)
        torch.testing.assert_close(row[layer][..., 0, :], full[layer][..., -1, :], atol=1e-6, rtol=0)
