import pytest
import torch

from kvlab import CACHE_MODES, CacheFullError, KVCache, ToyTransformer, generate
from kvlab.cache_modes import EXACT_MODES, LOSSY_MODES
from kvlab.generation import PassRecord


def test_trace_counts_projections(tiny_model):
    prompt = [[3, 1, 4, 1, 5]]
    kv = generate(tiny_model, prompt, 6, cache="kv").trace
    none = generate(tiny_model, prompt, 6, cache="none").trace
    k_only = generate(tiny_model, prompt, 6, cache="k_only").trace
    assert [r.phase for r in kv] == ["prefill"] + ["decode"] * 5
    assert (kv[0].k_tokens, kv[0].v_tokens) == (5, 5)
    for a, b, c in zip(kv[1:], none[1:], k_only[1:]):
        assert (a.k_tokens, a.v_tokens) == (1, 1)  # one new token
        assert (b.k_tokens, b.v_tokens) == (b.seq_len, b.seq_len)  # everything again
        assert (c.k_tokens, c.v_tokens) == (1, c.seq_len)  # K saved, V rebuilt for all t
    assert [r.seq_len for r in kv] == [5, 6, 7, 8, 9, 10]
    assert all(r.new_tokens == 1 for r in kv[1:])


def test_trace_cache_bytes_grow_linearly(tiny_model):
    c = tiny_model.config
    res = generate(tiny_model, [[1, 2]], 5, cache="kv")
    per_token = 2 * c.n_layer * c.n_kv_head * c.head_dim * 4
    assert [r.cache_bytes for r in res.trace] == [per_token * r.seq_len for r in res.trace]
    assert all(r.cache_allocated_bytes == per_token * 6 for r in res.trace)  # 2 + 5 - 1: the last token is never fed
    none = generate(tiny_model, [[1, 2]], 5, cache="none")
    assert all(r.cache_bytes == 0 for r in none.trace)
    dyn = generate(tiny_model, [[1, 2]], 5, cache="dynamic").trace
    assert [r.allocations for r in dyn] == [2 * c.n_layer * (i + 1) for i in range(5)]
    assert all(isinstance(r, PassRecord) and r.seconds > 0 for r in dyn)


def test_seeded_sampling_is_reproducible(tiny_model):
    a = generate(tiny_model, [[1, 2, 3]], 12, temperature=1.5, seed=7).tokens
    b = generate(tiny_model, [[1, 2, 3]], 12, temperature=1.5, seed=7).tokens
    c = generate(tiny_model, [[1, 2, 3]], 12, temperature=1.5, seed=8).tokens
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert set(EXACT_MODES) | set(LOSSY_MODES) == set(CACHE_MODES)
    for mode in EXACT_MODES:  # the same logits, so the same draws
        assert torch.equal(generate(tiny_model, [[1, 2, 3]], 12, temperature=1.5, seed=7, cache=mode).tokens, a)
    for mode in LOSSY_MODES:  # seeded too: the same mode and seed give the same draws
        one = generate(tiny_model, [[1, 2, 3]], 12, temperature=1.5, seed=7, cache=mode).tokens
        assert torch.equal(one, generate(tiny_model, [[1, 2, 3]], 12, temperature=1.5, seed=7, cache=mode).tokens)


def test_top_k_restricts_choices(tiny_model):
    res = generate(tiny_model, [[1, 2, 3]], 8, temperature=5.0, top_k=1, seed=1)
    assert torch.equal(res.tokens, generate(tiny_model, [[1, 2, 3]], 8).tokens)


def test_result_summary(tiny_model):
    res = generate(tiny_model, [[1, 2, 3], [4, 5, 6]], 4, return_logits=True)
    assert res.tokens.shape == (2, 7) and res.new_tokens.shape == (2, 4)
    assert res.logits.shape == (2, 4, tiny_model.config.vocab_size)
    assert torch.equal(res.logits.argmax(-1), res.new_tokens)
    assert res.total_seconds == pytest.approx(sum(r.seconds for r in res.trace))
    assert len(res.trace_rows()) == 4 and res.pad_lengths == [0, 0]


def test_ttft_and_tpot_come_from_the_right_passes(tiny_model):
    res = generate(tiny_model, [[1, 2, 3, 4, 5, 6]], 5, prefill_chunk_size=4)
    # two prefill passes (4 + 2 tokens), then 4 decode passes; fake the clock to know the answers
    for rec, seconds in zip(res.trace, [0.5, 0.25, 0.1, 0.3, 0.2, 0.4]):
        rec.seconds = seconds
    assert [r.phase for r in res.trace] == ["prefill", "prefill", "decode", "decode", "decode", "decode"]
    assert res.time_to_first_token == 0.75  # all prefill passes
    assert res.decode_seconds == [0.1, 0.3, 0.2, 0.4]
    assert res.time_per_output_token == pytest.approx(0.25)  # (end-to-end - TTFT) / (new tokens - 1): a mean
    res.trace[-1].seconds = 1.4  # one slow step moves the mean (TPOT), not the median step (ITL)
    assert res.time_per_output_token == pytest.approx(2.0 / 4)


def test_int8_and_fp16_end_to_end(tiny_model):
    ref = generate(tiny_model, [[1, 2, 3]], 6, cache="none", return_logits=True)
    for mode, storage in (("int8", torch.int8), ("fp16", torch.float16)):
        res = generate(tiny_model, [[1, 2, 3]], 6, cache=mode, return_logits=True)
        assert res.cache.k.dtype == storage and res.cache.dtype == torch.float32
        spread = (ref.logits.amax(-1) - ref.logits.amin(-1)).max()
        assert (res.logits - ref.logits).abs().max() <= 0.01 * spread
        assert res.trace[-1].cache_bytes < generate(tiny_model, [[1, 2, 3]], 6).trace[-1].cache_bytes


def test_a_given_cache_is_used_as_is(tiny_model):
    cache = KVCache(tiny_model.config, 1, 20)
    first = generate(tiny_model, [[1, 2, 3]], 4, cache=cache)
    assert cache.length == 6 and first.cache is cache and first.cache_mode == "KVCache"
    again = generate(tiny_model, [[1, 2, 3]], 4, cache=cache)  # not reset: the prompt follows the old tokens
    assert [r.seq_len for r in again.trace] == [9, 10, 11, 12]
    alone = generate(tiny_model, [[1, 2, 3]], 4).tokens
    assert torch.equal(first.tokens, alone)
    cache.reset()
    assert torch.equal(generate(tiny_model, [[1, 2, 3]], 4, cache=cache).tokens, alone)
    with pytest.raises(ValueError, match="^cache: holds 6 of 20 tokens; 15 more do not fit"):
        generate(tiny_model, [[1, 2, 3]], 13, cache=cache)


@pytest.mark.parametrize("kwargs,name", [
    (dict(max_new_tokens=0), "max_new_tokens"), (dict(max_new_tokens=-2), "max_new_tokens"),
    (dict(max_new_tokens=2.5), "max_new_tokens"), (dict(max_new_tokens=10**9), "max_new_tokens"),
    (dict(cache="vllm"), "cache"), (dict(temperature=-1.0), "temperature"), (dict(seed=-1), "seed"),
    (dict(top_k=0), "top_k"), (dict(prefill_chunk_size=0), "prefill_chunk_size"),
    (dict(input_ids=[[1, 2], 3]), "input_ids"), (dict(input_ids=[[1, 999]]), "input_ids"),
    (dict(input_ids=[]), "input_ids"), (dict(input_ids=torch.zeros(1, 3)), "input_ids"),
    (dict(input_ids="人工"), "input_ids"), (dict(input_ids=[[-1, 2]]), "input_ids"),
])
def test_bad_generate_args(tiny_model, kwargs, name):
    args = dict(input_ids=[[1, 2, 3]], max_new_tokens=3) | kwargs
    with pytest.raises(ValueError, match=name):
        generate(tiny_model, **args)


def test_model_rejects_bad_forward_args(tiny_model):
    from kvlab import KVCache

    with pytest.raises(ValueError, match="input_ids"):
        tiny_model(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="input_ids"):
        tiny_model(torch.tensor([[1, 2, 999]]))
    with pytest.raises(ValueError, match="input_ids"):
        tiny_model(torch.tensor([[1, 2]]), KVCache(tiny_model.config, batch_size=2, max_seq_len=8))
    with pytest.raises(CacheFullError):
        tiny_model(torch.zeros(1, tiny_model.config.max_seq_len + 1, dtype=torch.long))
    with pytest.raises(ValueError, match="attention_impl"):
        tiny_model.attention_impl = "flash"
    with pytest.raises(ValueError, match="model"):
        generate(torch.nn.Linear(2, 2), [[1]], 1)


def test_absurd_model_is_refused():
    from kvlab import ModelConfig

    with pytest.raises(ValueError, match="config"):
        ToyTransformer(ModelConfig(vocab_size=10**7, d_model=65536, n_layer=1, n_head=1))


def test_arguments_are_checked_once_not_per_pass(tiny_model, monkeypatch):
    """The token-range check waits on the device (a host sync): it runs at generate's entry, never in a timed pass."""
    calls = {"check_ids": 0, "check_pad": 0, "check_cache": 0}
    for name in calls:
        original = getattr(type(tiny_model), name)

        def counting(self, *a, _name=name, _original=original, **k):
            calls[_name] += 1
            return _original(self, *a, **k)
        monkeypatch.setattr(type(tiny_model), name, counting)
    for mode in CACHE_MODES:
        calls.update(dict.fromkeys(calls, 0))
        res = generate(tiny_model, [[1, 2, 3], [4, 5]], 9, cache=mode, prefill_chunk_size=2)
        assert len(res.trace) >= 9
        assert calls["check_ids"] == 1 and calls["check_pad"] == 1 and calls["check_cache"] == 0, (mode, calls)
    generate(tiny_model, [[1, 2]], 5, cache=KVCache(tiny_model.config, 1, 8))
    assert calls["check_cache"] == 1  # a cache passed in is checked once too


def test_the_phases_run_by_hand_are_generate(tiny_model):
    """prefill, then decode_n_tokens (gpt-fast's names) on a Decoding are exactly what generate runs."""
    from kvlab.generation import Decoding, decode_n_tokens, prefill

    ids = torch.tensor([[5, 6, 7, 8]])
    cache = KVCache(tiny_model.config, 1, 4 + 6 - 1)
    run = Decoding(tiny_model, cache, None, 0.0, None, torch.Generator().manual_seed(0))
    with torch.no_grad():
        tokens = decode_n_tokens(run, ids, prefill(run, ids, chunk_size=4), 6)
    ref = generate(tiny_model, ids, 6)
    assert torch.equal(tokens, ref.tokens)
    assert [(r.phase, r.seq_len, r.new_tokens) for r in run.trace] == \
        [(r.phase, r.seq_len, r.new_tokens) for r in ref.trace]



def test_every_pass_records_the_columns_it_fed(tiny_model):
    """PassRecord.new_tokens: a prefill pass counts the prompt columns it fed, every decode pass 1, whatever the cache
    and chunking; a paged run's first decode pass too (it once counted 15 after prompts of lengths 7, 1, 17 and 3)."""
    from kvlab import PagedKVCache

    def counts(res):
        return ([r.new_tokens for r in res.trace if r.phase == "prefill"],
                [r.new_tokens for r in res.trace if r.phase == "decode"])

    def chunks(n, size):
        size = size or n
        return [min(size, n - i) for i in range(0, n, size)]

    prompts = [list(range(1, n + 1)) for n in (7, 1, 17, 3)]
    for chunk in (None, 5):  # paged: no padding, the prompts of one length fed together
        res = generate(tiny_model, prompts, 6, cache="paged", prefill_chunk_size=chunk)
        assert counts(res) == ([c for p in prompts for c in chunks(len(p), chunk)], [1] * 5), chunk
        assert all(r.new_tokens == r.k_tokens for r in res.trace), chunk  # what the model projected: what was fed
    for mode in (m for m in CACHE_MODES if m != "paged"):  # left-padded to 7 columns
        for chunk in (None, 2, 5):
            res = generate(tiny_model, [[1, 2, 3, 4, 5, 6, 7], [4, 5]], 4, cache=mode, prefill_chunk_size=chunk)
            assert counts(res) == (chunks(7, None if mode == "none" else chunk), [1] * 3), (mode, chunk)
    shared = PagedKVCache(tiny_model.config, 3, 64, block_size=4, share_prefixes=True)
    res = generate(tiny_model, [prompts[2], prompts[2][:10], prompts[0]], 5, cache=shared, prefill_chunk_size=3)
    assert counts(res)[1] == [1] * 4
    assert all(r.new_tokens == r.k_tokens for r in res.trace)  # a row sharing a prefix is fed only the rest
