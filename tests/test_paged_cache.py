"""The paged cache: block pool, block tables, reference counts, copy-on-write, and equivalence with KVCache."""
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from test_equivalence import configs

from kvlab import CacheFullError, KVCache, ModelConfig, ToyTransformer, generate
from kvlab.paged_cache import BlockPool, BlockTable, PagedKVCache, PoolExhaustedError
from kvlab.paging import blocks_for, shared_prefix_blocks

C = ModelConfig(vocab_size=13, d_model=12, n_layer=2, n_head=3, n_kv_head=1, head_dim=4, max_seq_len=32)


def kv(T, B=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, 1, T, 4, generator=g), torch.randn(B, 1, T, 4, generator=g)


def write(cache, k, v):
    """What a forward pass does: reserve, write every layer, advance."""
    for layer in range(C.n_layer):
        cache.update(layer, k, v)
    cache.advance(k.shape[2])


def test_block_table_lookup():
    t = BlockTable([7, 2, 5], length=10)
    assert [t.slot(p, 4) for p in (0, 3, 4, 9)] == [(7, 0), (7, 3), (2, 0), (5, 1)]


def test_blocks_taken_on_demand_and_returned():
    cache = PagedKVCache(C, 2, 20, block_size=4)
    assert cache.pool.num_blocks == 2 * blocks_for(20, 4) and cache.pool.in_use == 0
    write(cache, *kv(5))
    assert [len(t.blocks) for t in cache.tables] == [2, 2] and cache.pool.in_use == 4
    write(cache, *kv(3, seed=1))  # 8 tokens: still 2 blocks each
    assert cache.pool.in_use == 4 and cache.lengths == [8, 8]
    write(cache, *kv(1, seed=2))
    assert cache.pool.in_use == 6 and cache.pool.peak_in_use == 6
    freed = list(cache.tables[0].blocks)
    cache.free_row(0)
    assert cache.pool.in_use == 3 and cache.lengths == [0, 9]
    assert cache.pool.take(3) == freed[::-1]  # the freed blocks are handed out again first
    cache.pool.release(freed)
    cache.reset()
    assert cache.pool.in_use == 0 and cache.pool.num_free == cache.pool.num_blocks


def test_reads_through_the_block_table_equal_a_contiguous_cache():
    paged, contiguous = PagedKVCache(C, 2, 20, block_size=3), KVCache(C, 2, 20)
    for T, seed in ((5, 0), (1, 1), (4, 2)):
        k, v = kv(T, seed=seed)
        for layer in range(C.n_layer):
            a = paged.update(layer, k, v)
            b = contiguous.update(layer, k, v)
            torch.testing.assert_close(a, b, atol=0, rtol=0)
        paged.advance(T)
        contiguous.advance(T)
    for layer in range(C.n_layer):
        torch.testing.assert_close(paged.layer_view(layer), contiguous.layer_view(layer), atol=0, rtol=0)


def test_an_exhausted_pool_names_itself_and_the_request_and_changes_nothing():
    cache = PagedKVCache(C, 2, 20, block_size=4, num_blocks=5)
    write(cache, *kv(6))  # 2 blocks each: 4 of 5 in use
    before = ([list(t.blocks) for t in cache.tables], cache.lengths, list(cache.pool.free), cache.pool.k.clone())
    with pytest.raises(PoolExhaustedError, match=r"block pool \(5 blocks of 4 tokens.*needs 2 free block\(s\).*"
                                                  r"only 1 of 5 are free; nothing was written") as err:
        cache.update(0, *kv(3, seed=4))
    assert "6 -> 9" in str(err.value) and isinstance(err.value, CacheFullError)
    after = ([list(t.blocks) for t in cache.tables], cache.lengths, list(cache.pool.free), cache.pool.k)
    assert after[:3] == before[:3] and torch.equal(after[3], before[3])


def test_model_on_an_exhausted_pool_changes_nothing(tiny_model):
    cache = PagedKVCache(tiny_model.config, 1, 40, block_size=4, num_blocks=2)
    tiny_model(torch.tensor([[1, 2, 3, 4, 5]]), cache)
    snapshot = cache.pool.k.clone()
    with pytest.raises(PoolExhaustedError, match="nothing was written"):
        tiny_model(torch.tensor([[6, 7, 8, 9]]), cache)
    assert cache.lengths == [5] and torch.equal(cache.pool.k, snapshot) and cache.pool.num_free == 0


def test_past_max_seq_len_is_a_cache_full_error():
    cache = PagedKVCache(C, 1, 6, block_size=4)
    write(cache, *kv(5, B=1))
    with pytest.raises(CacheFullError, match="max_seq_len=6"):
        cache.update(0, *kv(2, B=1))
    assert cache.lengths == [5]


def test_shared_prefix_reference_counts_and_copy_on_write():
    cache = PagedKVCache(C, 3, 20, block_size=4)
    k, v = kv(10, B=1)
    first = PagedKVCache.over(cache.pool, [cache.tables[0]])
    write(first, k, v)  # row 0: blocks for 10 tokens (3)
    assert cache.share_prefix(0, 1, 6) == 2 and cache.share_prefix(0, 2, 8) == 2
    b0, b1 = cache.tables[0].blocks[:2]
    assert cache.pool.refs[b0] == 3 and cache.pool.refs[b1] == 3 and cache.pool.in_use == 3
    # Row 1 writes at position 6, inside the shared block b1: it gets a private copy first.
    second = PagedKVCache.over(cache.pool, [cache.tables[1]])
    assert second.blocks_needed(1) == 1
    write(second, *kv(1, B=1, seed=9))
    assert cache.pool.copies == 1 and cache.tables[1].blocks[0] == b0 and cache.tables[1].blocks[1] != b1
    assert cache.pool.refs[b1] == 2 and cache.pool.refs[b0] == 3
    copied = cache.tables[1].blocks[1]
    torch.testing.assert_close(cache.pool.k[:, copied, :2], cache.pool.k[:, b1, :2])  # its two shared tokens
    # Row 2 shares 8 tokens: two whole blocks, its next token opens a block of its own (no copy).
    third = PagedKVCache.over(cache.pool, [cache.tables[2]])
    write(third, *kv(1, B=1, seed=10))
    assert cache.pool.copies == 1 and cache.tables[2].blocks[:2] == [b0, b1]
    for row in range(3):
        cache.free_row(row)
    assert cache.pool.in_use == 0 and set(cache.pool.refs) == {0}


def test_sharing_refuses_what_it_cannot_share():
    cache = PagedKVCache(C, 2, 20, block_size=4)
    write(cache, *kv(3))
    with pytest.raises(ValueError, match="^dst"):
        cache.share_prefix(0, 1, 2)
    cache.free_row(1)
    with pytest.raises(ValueError, match="^n_tokens"):
        cache.share_prefix(0, 1, 4)
    with pytest.raises(ValueError, match="^blocks"):
        cache.pool.release([cache.pool.free[0]])


def test_bad_arguments_name_themselves():
    for kwargs, name in (({"block_size": 0}, "block_size"), ({"num_blocks": -1}, "num_blocks"),
                         ({"block_size": 1000}, "block_size"), ({"pool": "x"}, "pool")):
        with pytest.raises(ValueError, match=f"^{name}"):
            PagedKVCache(C, 1, 8, **kwargs)
    with pytest.raises(ValueError, match="^num_blocks"):
        BlockPool(C, 10**13, 16)  # more than this machine's memory: refused before allocating
    with pytest.raises(AttributeError, match="^length"):
        PagedKVCache(C, 1, 8).length = 3


# -- equivalence: a real model on a paged cache computes what it computes alone, without a cache ----------
@st.composite
def paged_cases(draw):
    """Prompts of unequal lengths (no padding anywhere) that start with the same first part, a chunk size and a
    block size."""
    config = draw(configs())
    prefix = draw(st.lists(st.integers(0, config.vocab_size - 1), max_size=9))
    tails = draw(st.lists(st.lists(st.integers(0, config.vocab_size - 1), min_size=1, max_size=8), min_size=1,
                          max_size=4))
    return (config, [prefix + t for t in tails], len(prefix), draw(st.integers(1, 6)), draw(st.integers(1, 11)),
            draw(st.integers(1, 7)), draw(st.integers(0, 10**6)))


@torch.no_grad()
def paged_generation(model, prompts, new, chunk, block_size, shared_tokens=0):
    """Each prompt prefilled in its own passes (chunked); rows after the first hold row 0's first ``shared_tokens``
    tokens through shared blocks and prefill only the rest. Then every row decodes together, each at its own
    position. Returns (tokens [B, new], logits [B, new, vocab], cache)."""
    cache = PagedKVCache(model.config, len(prompts), max(map(len, prompts)) + new, block_size=block_size)
    last = []
    for row, prompt in enumerate(prompts):
        start = shared_tokens if row and shared_tokens >= block_size else 0  # generate's rule: a whole block
        if start:
            cache.share_prefix(0, row, start)
        view = PagedKVCache.over(cache.pool, [cache.tables[row]])
        for i in range(start, len(prompt), chunk):
            logits = model(torch.tensor([prompt[i:i + chunk]]), view)
        last.append(logits[0, -1])
    logits = torch.stack(last)  # [B, vocab]
    tokens, all_logits = [], []
    for step in range(new):
        all_logits.append(logits)
        nxt = logits.argmax(-1, keepdim=True)  # [B, 1]
        tokens.append(nxt)
        if step < new - 1:
            logits = model(nxt, cache)[:, -1]
    return torch.cat(tokens, 1), torch.stack(all_logits, 1), cache


def held_blocks_are_counted(cache) -> None:
    held = [b for t in cache.tables for b in t.blocks]
    assert all(cache.pool.refs[b] == held.count(b) for b in set(held))  # each reference is one table's
    assert len(set(held)) == cache.pool.in_use and not set(held) & set(cache.pool.free)


@given(paged_cases(), st.booleans())
def test_paged_cache_matches_each_prompt_alone_without_a_cache(case, share):
    config, prompts, prefix, new, chunk, block_size, seed = case
    model = ToyTransformer(config, seed=seed).eval()
    tokens, logits, cache = paged_generation(model, prompts, new, chunk, block_size, prefix if share else 0)
    for row, prompt in enumerate(prompts):
        alone = generate(model, [prompt], new, cache="none", return_logits=True)
        assert torch.equal(tokens[row], alone.new_tokens[0]), row
        torch.testing.assert_close(logits[row], alone.logits[0], atol=1e-5, rtol=0)
    assert cache.lengths == [len(p) + new - 1 for p in prompts]
    held_blocks_are_counted(cache)
    if not share:
        assert cache.pool.in_use == sum(blocks_for(n, block_size) for n in cache.lengths)


@given(paged_cases())
def test_sharing_a_prefix_saves_the_blocks_the_arithmetic_says_and_changes_no_output(case):
    config, prompts, prefix, new, chunk, block_size, seed = case
    model = ToyTransformer(config, seed=seed).eval()
    plain = paged_generation(model, prompts, new, chunk, block_size)
    shared = paged_generation(model, prompts, new, chunk, block_size, prefix)
    assert torch.equal(plain[0], shared[0])
    torch.testing.assert_close(plain[1], shared[1], atol=1e-5, rtol=0)
    expected = shared_prefix_blocks(prefix, shared[2].lengths, block_size)
    assert plain[2].pool.in_use == expected.unshared
    assert shared[2].pool.in_use == expected.shared and shared[2].pool.copies == expected.copies
    held_blocks_are_counted(shared[2])


def test_truncate_returns_the_blocks_past_the_kept_tokens():
    cache = PagedKVCache(C, 2, 20, block_size=4)
    write(cache, *kv(9))
    assert cache.pool.in_use == 6
    cache.truncate(5)
    assert cache.lengths == [5, 5] and cache.pool.in_use == 4 and [len(t.blocks) for t in cache.tables] == [2, 2]
    write(cache, *kv(4, seed=3))  # the same blocks are taken again
    assert cache.pool.in_use == 6 and cache.lengths == [9, 9]


# -- through generate ---------------------------------------------------------------------------------------------
@st.composite
def sharing_cases(draw):
    """Prompts that start alike in every way: each takes a first part of one common prefix (of any length, so that
    prompts share whole blocks, part of a block or nothing with each other), or repeats an earlier prompt."""
    config, prompts, prefix, new, chunk, block_size, seed = draw(paged_cases())
    head = prompts[0][:prefix]
    prompts = [head[:draw(st.integers(0, prefix))] + p[prefix:] for p in prompts]
    prompts += [prompts[draw(st.integers(0, len(prompts) - 1))] for _ in range(draw(st.integers(0, 2)))]
    return config, prompts, new, chunk, block_size, seed


def shared_blocks_are_full_and_alike(cache, sequences) -> None:
    """Every block more than one row holds is full, at the same place in each, and holds the same tokens there."""
    bs, places = cache.block_size, {}
    for row, t in enumerate(cache.tables):
        for i, b in enumerate(t.blocks):
            places.setdefault(b, []).append((row, i))
    for b, holders in places.items():
        if len(holders) > 1:
            (i,) = {i for _, i in holders}
            assert all(cache.tables[r].length >= (i + 1) * bs for r, _ in holders), (b, holders)
            assert len({tuple(sequences[r][:(i + 1) * bs]) for r, _ in holders}) == 1, (b, holders)


@given(sharing_cases(), st.booleans())
def test_generate_on_a_paged_cache_matches_no_cache(case, share):
    """generate(cache=PagedKVCache(...)): prompts of unequal lengths, no padding, chunked, any block size, with and
    without shared prefixes: every row's tokens and logits are those of the prompt alone without a cache; a block
    two rows hold is full and alike in both; every block goes back to the pool."""
    config, prompts, new, chunk, block_size, seed = case
    model = ToyTransformer(config, seed=seed).eval()
    peak = max(map(len, prompts)) + new - 1
    cache = PagedKVCache(config, len(prompts), peak, block_size=block_size, share_prefixes=share)
    got = generate(model, prompts, new, cache=cache, prefill_chunk_size=chunk, return_logits=True)
    alone_runs = {tuple(p): generate(model, [p], new, cache="none", return_logits=True) for p in prompts}
    for row, prompt in enumerate(prompts):
        alone = alone_runs[tuple(prompt)]
        assert torch.equal(got.new_tokens[row], alone.new_tokens[0]), row
        torch.testing.assert_close(got.logits[row], alone.logits[0], atol=1e-5, rtol=0)
        assert got.sequence(row).tolist() == prompt + alone.new_tokens[0].tolist()
    assert cache.lengths == [len(p) + new - 1 for p in prompts]
    held_blocks_are_counted(cache)
    shared_blocks_are_full_and_alike(cache, [got.sequence(r).tolist() for r in range(len(prompts))])
    unshared = sum(blocks_for(n, block_size) for n in cache.lengths)
    assert cache.pool.in_use == unshared if not share else cache.pool.in_use <= unshared
    fed = sum(r.new_tokens * r.rows for r in got.trace if r.phase == "prefill")
    assert fed == sum(map(len, prompts)) if not share else 0 < fed <= sum(map(len, prompts))
    cache.reset()
    assert cache.pool.num_free == cache.pool.num_blocks and set(cache.pool.refs) == {0}


def test_generate_shares_a_system_prompt_and_counts_what_it_saves(tiny_model):
    system = list(range(1, 21))  # 20 tokens: 2 whole blocks of 8 and 4 tokens of a third
    prompts = [system + [30 + i, 40 + i, 50] for i in range(4)]
    plain = generate(tiny_model, prompts, 6, cache="paged", return_logits=True)
    cache = PagedKVCache(tiny_model.config, 4, 28, block_size=8, share_prefixes=True)
    shared = generate(tiny_model, prompts, 6, cache=cache, return_logits=True)
    assert torch.equal(plain.tokens, shared.tokens)
    torch.testing.assert_close(plain.logits, shared.logits, atol=1e-5, rtol=0)
    expected = shared_prefix_blocks(20, cache.lengths, 8)
    assert cache.pool.in_use == expected.shared == expected.unshared - 3 * 2 and cache.pool.copies == 3
    prefills = [r for r in shared.trace if r.phase == "prefill"]
    # row 0 in full; after its pass, the other three together, each fed only what it adds
    assert [(r.new_tokens, r.rows) for r in prefills] == [(23, 1), (3, 3)]


def prefill_feeds(result) -> list[tuple[int, int]]:
    """(tokens fed per row, rows) of each prefill pass."""
    return [(r.new_tokens, r.rows) for r in result.trace if r.phase == "prefill"]


def test_generate_shares_full_blocks_found_by_hash_then_part_of_the_next(tiny_model):
    cache = PagedKVCache(tiny_model.config, 4, 8, block_size=2, share_prefixes=True)
    res = generate(tiny_model, [[1, 2, 3, 4, 5], [1, 2, 3, 4, 9], [1, 2, 7], [1, 2, 3, 4, 5]], 2, cache=cache)
    # row 0 first; the others after its pass, each fed only its last token (an identical prompt keeps it too)
    assert prefill_feeds(res) == [(5, 1), (1, 3)] and cache.pool.copies == 0
    assert cache.tables[1].blocks[:2] == cache.tables[3].blocks[:2] == cache.tables[0].blocks[:2]
    assert cache.tables[2].blocks[0] == cache.tables[0].blocks[0]

    cache = PagedKVCache(tiny_model.config, 2, 8, block_size=2, share_prefixes=True)
    res = generate(tiny_model, [[1, 2, 3, 4, 5, 6], [1, 2, 3, 7, 8]], 2, cache=cache)
    assert prefill_feeds(res) == [(6, 1), (2, 1)]  # one whole block and one token of the next: copied, then written
    assert cache.pool.copies == 1 and cache.tables[1].blocks[0] == cache.tables[0].blocks[0]

    cache = PagedKVCache(tiny_model.config, 2, 8, block_size=4, share_prefixes=True)
    res = generate(tiny_model, [[1, 2, 3], [1, 2, 4]], 2, cache=cache)
    assert prefill_feeds(res) == [(3, 2)] and cache.pool.copies == 0  # less than a whole block alike: nothing


def test_paged_mode_on_the_demo_shapes_in_generate(tiny_model):
    kv = generate(tiny_model, [[1, 2, 3, 4, 5, 6], [7, 8]], 5, cache="kv", return_logits=True)
    paged = generate(tiny_model, [[1, 2, 3, 4, 5, 6], [7, 8]], 5, cache="paged", return_logits=True)
    assert torch.equal(kv.tokens, paged.tokens) and paged.cache_mode == "paged"
    torch.testing.assert_close(kv.logits, paged.logits, atol=1e-5, rtol=0)
    assert paged.pad_lengths == [0, 4]  # the returned tokens are left-padded for display; the passes were not
    assert [r.new_tokens for r in paged.trace if r.phase == "prefill"] == [6, 2]


def test_generate_on_a_pool_too_small_names_the_pool(tiny_model):
    cache = PagedKVCache(tiny_model.config, 2, 30, block_size=4, num_blocks=5)
    with pytest.raises(PoolExhaustedError, match=r"^block pool \(5 blocks of 4 tokens"):
        generate(tiny_model, [[1, 2, 3, 4, 5, 6], [7, 8, 9]], 8, cache=cache)
    held = [b for t in cache.tables for b in t.blocks]
    assert len(held) + cache.pool.num_free == 5 and len(set(held)) == len(held)  # no block lost or owned twice


# -- the core change: per-row positions ----------------------------------------------------------------------------
def test_attention_mask_with_per_row_offsets_by_hand():
    from kvlab.attention import attention_mask

    m = attention_mask(2, 5, torch.tensor([3, 1]))  # row 0: keys 0..3 then 0..4; row 1: keys 0..1 then 0..2
    assert m.shape == (2, 1, 2, 5)
    assert m[0, 0].tolist() == [[True] * 4 + [False], [True] * 5]
    assert m[1, 0].tolist() == [[True, True, False, False, False], [True, True, True, False, False]]
    with pytest.raises(ValueError, match="^pad_lengths"):
        attention_mask(1, 4, torch.tensor([3, 1]), torch.tensor([0, 2]))


@given(st.lists(st.integers(0, 9), min_size=1, max_size=4), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3),
       st.sampled_from([2, 4, 6]))
def test_explicit_and_sdpa_agree_with_per_row_offsets(starts, tq, n_kv, rep, D):
    from kvlab.attention import attention, attention_mask

    B, g = len(starts), torch.Generator().manual_seed(sum(starts) * 7 + tq)
    k_len = max(starts) + tq
    q = torch.randn(B, n_kv * rep, tq, D, generator=g)
    k, v = (torch.randn(B, n_kv, k_len, D, generator=g) for _ in range(2))
    mask = attention_mask(tq, k_len, torch.tensor(starts))
    a = attention(q, k, v, mask, impl="sdpa")
    b, w = attention(q, k, v, mask, impl="explicit", return_weights=True)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    for row, s in enumerate(starts):  # a row never looks past its own end: the other rows' extra columns
        for i in range(tq):
            assert (w[row, :, i, s + i + 1:] == 0).all()


def test_left_padding_and_per_row_positions_do_not_mix(tiny_model):
    cache = PagedKVCache(tiny_model.config, 2, 20, block_size=4)
    for row, n in enumerate((3, 5)):
        tiny_model(torch.tensor([list(range(1, n + 1))]), PagedKVCache.over(cache.pool, [cache.tables[row]]))
    with pytest.raises(ValueError, match="^pad_lengths"):
        tiny_model(torch.tensor([[1], [2]]), cache, pad_lengths=[0, 1])
    assert cache.lengths == [3, 5]


# -- issue 33: holes found by probing the pool and the cache ------------------------------------------------------
def test_generate_shares_only_the_blocks_of_rows_that_were_empty():
    """A row still holding earlier tokens lends no blocks: its first blocks hold those tokens, not this prompt."""
    from kvlab import load_demo_model

    model, tok = load_demo_model("cpu")
    a, b, p = (tok.encode(s) for s in ("缓存的作用", "注意力机制", "人工智能的性质"))
    cache = PagedKVCache(model.config, 2, 128, block_size=4, share_prefixes=True)
    generate(model, [a, b], 4, cache=cache)
    cache.free_row(1)  # row 0 keeps a and its new tokens; row 1 is empty again
    got = generate(model, [p, p], 8, cache=cache, return_logits=True)
    alone = generate(model, [p], 8, cache="none", return_logits=True)
    assert torch.equal(got.new_tokens[1], alone.new_tokens[0]), tok.decode(got.new_tokens[1])
    torch.testing.assert_close(got.logits[1], alone.logits[0], atol=1e-5, rtol=0)
    held_blocks_are_counted(cache)


def test_rows_that_hold_tokens_neither_lend_nor_borrow(tiny_model):
    """Issue 33's plan test, on the hash-keyed sharing: a row holding earlier tokens is prefilled in the first wave
    and lends nothing; the next prompt alike finds the blocks of the empty row instead."""
    prompts = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5], [1, 2, 3, 4, 6]]
    for busy, lender in ((0, 1), (1, 0)):
        cache = PagedKVCache(tiny_model.config, 3, 16, block_size=2, share_prefixes=True)
        tiny_model(torch.tensor([[9, 9, 9]]), PagedKVCache.over(cache.pool, [cache.tables[busy]]))
        res = generate(tiny_model, prompts, 3, cache=cache, return_logits=True)
        assert prefill_feeds(res) == [(5, 2), (1, 1)], busy
        assert cache.tables[2].blocks[:2] == cache.tables[lender].blocks[:2], busy
        assert not set(cache.tables[busy].blocks) & set(cache.tables[2].blocks), busy
        for row, prompt in enumerate(prompts):
            alone = generate(tiny_model, [[9, 9, 9] + prompt if row == busy else prompt], 3, cache="none",
                             return_logits=True)
            assert torch.equal(res.new_tokens[row], alone.new_tokens[0]), (busy, row)
            torch.testing.assert_close(res.logits[row], alone.logits[0], atol=1e-5, rtol=0)
        held_blocks_are_counted(cache)


def pool_state(pool):
    return list(pool.refs), list(pool.free), pool.blocks_taken, pool.peak_in_use, pool.copies


def test_pool_refuses_bad_block_ids_and_counts():
    pool = BlockPool(C, 4, 4)
    assert pool.take(2) == [0, 1]
    before = pool_state(pool)
    for bad in ([-1], [4], [True], [1.0], ["0"], [None], [2], 3, "01"):  # block 2 is free
        with pytest.raises(ValueError, match="^blocks"):
            pool.release(bad)
        assert pool_state(pool) == before, bad
    for bad in (-2, 1.5, True, "1", None):
        with pytest.raises(ValueError, match="^n"):
            pool.take(bad)
        assert pool_state(pool) == before, bad
    for method in (pool.retain, pool.copy_on_write):
        for bad in (-1, 4, True, 0.0, 2):
            with pytest.raises(ValueError, match="^block"):
                method(bad)
            assert pool_state(pool) == before, (method, bad)
    assert pool.take(0) == [] and pool.take(2) == [2, 3]  # no block handed out twice


def test_failed_pool_calls_change_nothing():
    pool = BlockPool(C, 4, 4)
    pool.take(2)
    pool.retain(1)  # refs: block 0 once, block 1 twice
    before = pool_state(pool)
    for bad in ([0, 1, 0], [1, 1, 1], [0, 1, 2]):
        with pytest.raises(ValueError, match="^blocks"):
            pool.release(bad)
        assert pool_state(pool) == before, bad
    with pytest.raises(ValueError, match="^block"):
        pool.copy_on_write(3)  # a free block: refused before a block is taken
    assert pool_state(pool) == before
    pool.release([1, 1, 0])  # a block held twice may be released twice in one call
    assert pool.num_free == 4 and set(pool.refs) == {0}


def test_a_pool_built_for_another_model_or_dtype_is_refused():
    for other, kwargs, what in (
            (ModelConfig(vocab_size=13, d_model=12, n_layer=3, n_head=3, n_kv_head=1, head_dim=4, max_seq_len=32),
             {}, "n_layer"),
            (ModelConfig(vocab_size=13, d_model=12, n_layer=2, n_head=2, n_kv_head=2, head_dim=6, max_seq_len=32),
             {}, "n_kv_head"),
            (C, {"dtype": "bfloat16"}, "dtype")):
        pool = BlockPool(other, 8, 4, **kwargs)
        with pytest.raises(ValueError, match=f"^pool.*{what}"):
            PagedKVCache(C, 1, 32, pool=pool)
        assert pool.num_free == 8 and pool.blocks_taken == 0
    ok = BlockPool(ModelConfig(vocab_size=50, d_model=8, n_layer=2, n_head=2, n_kv_head=1, head_dim=4,
                               max_seq_len=32), 8, 4)  # only the K/V shapes matter
    assert PagedKVCache(C, 1, 32, pool=ok).pool is ok


def test_two_rows_sharing_a_part_filled_block_grow_together_with_one_free_block():
    cache = PagedKVCache(C, 2, 20, block_size=4, num_blocks=3)
    k, v = kv(6, B=1)
    write(PagedKVCache.over(cache.pool, [cache.tables[0]]), k, v)  # 2 blocks, the second holding 2 tokens
    cache.share_prefix(0, 1, 6)
    assert cache.pool.num_free == 1 and cache.blocks_needed(1) == 1  # one copy; the last writer keeps the original
    k1, v1 = kv(1, seed=5)
    write(cache, k1, v1)
    assert cache.lengths == [7, 7] and cache.pool.num_free == 0 and cache.pool.copies == 1
    held_blocks_are_counted(cache)
    contiguous = KVCache(C, 2, 20)
    for layer in range(C.n_layer):
        contiguous.update(layer, k.expand(2, -1, -1, -1), v.expand(2, -1, -1, -1))
    contiguous.advance(6)
    for layer in range(C.n_layer):
        contiguous.update(layer, k1, v1)
    contiguous.advance(1)
    for layer in range(C.n_layer):
        torch.testing.assert_close(cache.layer_view(layer), contiguous.layer_view(layer), atol=0, rtol=0)


@given(st.integers(2, 4), st.integers(1, 24),
       st.lists(st.tuples(st.sampled_from(["write", "write", "share", "free"]),
                          st.lists(st.integers(0, 2), min_size=1, max_size=3, unique=True), st.integers(0, 6)),
                max_size=16))
def test_blocks_needed_is_what_reserve_takes(block_size, num_blocks, ops):
    """Writes to any rows, shared prefixes and frees: a write takes exactly blocks_needed() blocks, or raises
    PoolExhaustedError exactly when they are not free, changing nothing."""
    cache = PagedKVCache(C, 3, C.max_seq_len, block_size=block_size, num_blocks=num_blocks)
    pool = cache.pool
    for op, rows, n in ops:
        if op == "free":
            cache.free_row(rows[0])
        elif op == "share":
            src, dst = rows[0], rows[-1]
            if src != dst:
                cache.free_row(dst)
                cache.share_prefix(src, dst, min(n, cache.tables[src].length))
        else:
            view = PagedKVCache.over(pool, [cache.tables[r] for r in rows])
            if view.length + n > view.max_seq_len:
                continue
            need, taken = view.blocks_needed(n), pool.blocks_taken
            tables = [(list(t.blocks), t.length) for t in cache.tables]
            if need > pool.num_free:
                before = pool_state(pool)
                with pytest.raises(PoolExhaustedError):
                    view.reserve(n)
                assert pool_state(pool) == before and [(t.blocks, t.length) for t in cache.tables] == tables
                continue
            view.reserve(n)
            assert pool.blocks_taken - taken == need
            view.advance(n)
        held_blocks_are_counted(cache)
