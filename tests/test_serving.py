"""The scheduler: static and continuous batching on a step clock, its invariants, preemption, no starvation."""
from collections import Counter

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kvlab import ModelConfig, ToyTransformer, generate
from kvlab.paging import blocks_for
from kvlab.serving import Request, ServeRun, Workload, default_pool_blocks, serve
from kvlab.stats import percentile

CONFIG = ModelConfig(vocab_size=29, d_model=16, n_layer=2, n_head=4, n_kv_head=2, head_dim=4, max_seq_len=40)


@pytest.fixture(scope="module")
def model():
    return ToyTransformer(CONFIG, seed=5).eval()


def alone(model, r: Request) -> list[int]:
    return generate(model, [list(r.prompt)], r.max_new_tokens).new_tokens[0].tolist()


def check_invariants(run: ServeRun, requests) -> None:
    """Every step: a block in two tables only if sharing is on, the block is full in each and at the same place
    (the same prefix), held by exactly as many tables as the pool counts; the pool's count = the tables' distinct
    blocks, free and held disjoint and together the whole pool, each table just long enough; at the end every block
    is back and every request done."""
    everything = set(range(run.num_blocks))
    for s in run.steps:
        held = Counter(b for blocks in s.tables.values() for b in blocks)
        assert held == Counter(s.refs), f"step {s.step}: the pool's reference counts are not the tables'"
        places = {}
        for rid, blocks in s.tables.items():
            for i, b in enumerate(blocks):
                if held[b] > 1:
                    assert run.share_prefixes, f"step {s.step}: block {b} owned twice without sharing"
                    assert (i + 1) * run.block_size <= s.lengths[rid], f"step {s.step}: shared block {b} not full"
                    assert places.setdefault(b, i) == i, f"step {s.step}: block {b} at two places"
        assert s.blocks_in_use == len(held) and set(held) | set(s.free) == everything
        assert not set(held) & set(s.free)
        assert all(len(s.tables[rid]) == blocks_for(s.lengths[rid], run.block_size) for rid in s.running)
        assert len(s.running) <= run.max_batch
    last = run.steps[-1]
    assert last.blocks_in_use == 0 and not last.running and not last.waiting and set(last.free) == everything
    assert sorted(o.request.rid for o in run.outcomes) == sorted(r.rid for r in requests)
    ordered = sorted(requests, key=lambda r: (r.arrival, r.rid))
    for i, r in enumerate(ordered):  # no starvation: the bound of FIFO admission with youngest-first preemption
        o = next(o for o in run.outcomes if o.request.rid == r.rid)
        assert len(o.tokens) == r.max_new_tokens
        assert r.arrival <= o.admitted <= o.first_token <= o.finished
        assert o.finished - r.arrival + 1 <= sum(q.max_new_tokens for q in ordered[:i + 1])
        assert o.cached_tokens % run.block_size == 0 and (run.share_prefixes or o.cached_tokens == 0)
        admissions = o.preemptions + 1  # each admission feeds what it did not find in shared blocks
        assert o.prefill_tokens + o.cached_tokens >= admissions * len(r.prompt)
    assert run.cached_tokens == sum(o.cached_tokens for o in run.outcomes)


@st.composite
def workloads(draw):
    """Requests that often start alike: each prompt is the start of one shared system prompt plus its own tokens,
    from a small vocabulary (so that whole blocks repeat)."""
    n = draw(st.integers(1, 6))
    vocab = st.integers(0, draw(st.sampled_from([2, CONFIG.vocab_size - 1])))
    system = draw(st.lists(vocab, min_size=0, max_size=12))
    requests, clock = [], 0
    for rid in range(n):
        clock += draw(st.integers(0, 3))
        prompt = system[:draw(st.integers(0, len(system)))] + draw(st.lists(vocab, min_size=1, max_size=6))
        requests.append(Request(rid, clock, tuple(prompt[:18]), draw(st.integers(1, 7))))
    block_size = draw(st.integers(1, 5))
    least = max(blocks_for(r.peak_tokens, block_size) for r in requests)
    return requests, block_size, least + draw(st.integers(0, 6)), draw(st.integers(1, 4))


@given(workloads(), st.sampled_from(["static", "continuous"]), st.booleans())
def test_every_request_gets_its_own_tokens_and_the_pool_stays_consistent(model, workload, policy, share):
    """With prefix sharing on or off: every request's tokens are those of generating it alone, no block is owned
    twice except a shared full block held by as many tables as its reference count, every block returns."""
    requests, block_size, num_blocks, max_batch = workload
    run = serve(model, requests, policy, max_batch=max_batch, num_blocks=num_blocks, block_size=block_size,
                share_prefixes=share)
    check_invariants(run, requests)
    for o in run.outcomes:
        assert o.tokens == alone(model, o.request), o.request.rid
    if policy == "static":
        assert run.preemptions == 0


def test_a_later_request_shares_the_full_blocks_of_a_prefix_but_never_a_block_being_written(model):
    """nano-vllm issue #208: a block is matched only after the pass that filled it. Requests 0 and 1 arrive together
    with the same prompt: both are prefilled in step 0, so 1 finds nothing written yet and computes its own blocks.
    Request 2 arrives a step later and holds the 2 full blocks of the shared 9 tokens (not the last, part-filled one)."""
    system = (3, 1, 4, 1, 5, 9, 2, 6, 5)
    requests = [Request(0, 0, system + (7,), 6), Request(1, 0, system + (7,), 6), Request(2, 1, system + (8, 8), 6)]
    run = serve(model, requests, "continuous", max_batch=4, block_size=4)
    assert [o.cached_tokens for o in run.outcomes] == [0, 0, 8]
    assert [o.prefill_tokens for o in run.outcomes] == [10, 10, 3]
    step1 = run.steps[1]
    assert step1.tables[2][:2] == step1.tables[0][:2] and step1.refs[step1.tables[0][0]] == 2
    check_invariants(run, requests)
    assert [o.tokens for o in run.outcomes] == [alone(model, r) for r in requests]
    off = serve(model, requests, "continuous", max_batch=4, block_size=4, share_prefixes=False)
    assert off.cached_tokens == 0 and off.prefill_tokens == 31 and off.peak_blocks > run.peak_blocks
    assert [o.tokens for o in off.outcomes] == [o.tokens for o in run.outcomes]


def test_a_finished_requests_blocks_stay_findable_until_reused(model):
    """Like vLLM's prefix cache: a request arriving after the first one finished still finds its prefix blocks (free,
    but not handed out for other tokens yet), and takes them back from the free list."""
    requests = [Request(0, 0, tuple(range(1, 10)), 2), Request(1, 5, tuple(range(1, 10)) + (20,), 2)]
    run = serve(model, requests, "continuous", block_size=4)
    assert run.outcomes[1].admitted > run.outcomes[0].finished and run.outcomes[1].cached_tokens == 8
    check_invariants(run, requests)
    assert [o.tokens for o in run.outcomes] == [alone(model, r) for r in requests]


def test_nothing_is_checked_or_synchronised_inside_a_timed_step(model, monkeypatch):
    """Issue 32's decision: the runner's timed passes call no argument check (the model's checked forward, its id
    check, the block arithmetic's or the cache's validation) and read nothing back to the host."""
    import kvlab.cache
    import kvlab.paged_cache
    from kvlab.serving.runner import Runner

    def refuse(*args, **kwargs):
        raise AssertionError("checked or synchronised inside a timed step")

    run_passes = Runner.run

    def guarded(self, passes):
        with monkeypatch.context() as m:
            for module, name in ((kvlab.paged_cache, "blocks_for"), (kvlab.paged_cache, "non_negative_int"),
                                 (kvlab.paged_cache, "positive_int"), (kvlab.cache, "non_negative_int")):
                m.setattr(module, name, refuse)
            for name in ("forward", "check_ids", "check_cache"):
                m.setattr(ToyTransformer, name, refuse)
            for name in ("item", "tolist", "cpu", "__bool__", "__int__"):
                m.setattr(torch.Tensor, name, refuse)
            return run_passes(self, passes)

    monkeypatch.setattr(Runner, "run", guarded)
    requests = [Request(0, 0, (1, 2, 3, 4, 5), 5), Request(1, 1, (1, 2, 3, 4, 6), 4), Request(2, 1, (7,), 3)]
    run = serve(model, requests, "continuous", max_batch=2, num_blocks=5, block_size=2)
    assert run.preemptions and run.cached_tokens  # the guarded steps include preemption and sharing
    monkeypatch.undo()
    assert [o.tokens for o in run.outcomes] == [alone(model, r) for r in requests]


def test_a_small_pool_preempts_instead_of_failing(model):
    g = torch.Generator().manual_seed(0)
    requests = [Request(i, 0, tuple(torch.randint(0, 29, (6,), generator=g).tolist()), 12) for i in range(4)]
    run = serve(model, requests, "continuous", max_batch=4, num_blocks=8, block_size=4)  # 5 blocks each at the end
    assert run.preemptions > 0 and any(s.preempted for s in run.steps)
    check_invariants(run, requests)
    assert [o.tokens for o in run.outcomes] == [alone(model, r) for r in requests]
    victim = next(s for s in run.steps if s.preempted)
    assert max(victim.preempted) == max(r.rid for r in requests if r.rid in victim.preempted + victim.running)


def test_continuous_batching_fills_the_batch_static_waits_for_it(model):
    requests = [Request(0, 0, (1, 2, 3), 12), Request(1, 0, (4, 5), 2), Request(2, 1, (6,), 3)]
    static = serve(model, requests, "static", max_batch=2, block_size=4)
    cont = serve(model, requests, "continuous", max_batch=2, block_size=4)
    s2 = next(o for o in static.outcomes if o.request.rid == 2)
    c2 = next(o for o in cont.outcomes if o.request.rid == 2)
    assert s2.admitted == 12 and c2.admitted == 2  # static: after request 0 is done; continuous: when 1 leaves
    assert len(cont.steps) < len(static.steps) and c2.ttft_steps < s2.ttft_steps
    assert static.new_tokens == cont.new_tokens == 17


def test_workload_is_seeded_and_fits():
    ids = list(range(50)) * 4
    a, b = Workload(count=30, seed=3).requests(ids, 64), Workload(count=30, seed=3).requests(ids, 64)
    assert a == b and a != Workload(count=30, seed=4).requests(ids, 64)
    assert all(r.peak_tokens < 64 for r in a) and [r.arrival for r in a] == sorted(r.arrival for r in a)
    gaps = [y.arrival - x.arrival for x, y in zip(a, a[1:])]
    assert 0.5 < sum(gaps) / len(gaps) < 4  # mean_gap 2 steps


def test_run_numbers(model):
    requests = Workload(count=5, prompt_median=4, new_median=4).requests(list(range(29)), CONFIG.max_seq_len)
    run = serve(model, requests, "continuous", max_batch=3, block_size=4)
    assert run.new_tokens == sum(r.max_new_tokens for r in requests) and run.tokens_per_second > 0
    assert 0 < run.ttft_mean <= max(o.finish_seconds for o in run.outcomes)
    assert run.num_blocks == default_pool_blocks(requests, 3, 4) and run.peak_blocks <= run.num_blocks
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([5], 90) == 5 and run.ttft_percentile(100) == max(run.ttfts)


def test_bad_arguments_name_themselves(model):
    r = Request(0, 0, (1, 2), 3)
    for kwargs, name in (({"policy": "fifo"}, "policy"), ({"max_batch": 0}, "max_batch"),
                         ({"num_blocks": 0}, "num_blocks"), ({"block_size": 100}, "block_size")):
        with pytest.raises(ValueError, match=f"^{name}"):
            serve(model, [r], **kwargs)
    with pytest.raises(ValueError, match="^num_blocks: request 0 alone needs 2 blocks"):
        serve(model, [r], num_blocks=1, block_size=2)
    with pytest.raises(ValueError, match="^requests"):
        serve(model, [r, r])
    with pytest.raises(ValueError, match="^requests"):
        serve(model, [Request(0, 0, (1,), 41)])  # past max_seq_len
    with pytest.raises(ValueError, match="^requests"):
        serve(model, [Request(0, 0, (99,), 2)])


@pytest.mark.parametrize("prompt,problem", [
    ((1.5, 2), "must hold integer token ids, found 1.5"), ((2.0, 2), "must hold integer token ids, found 2.0"),
    ((True, 2), "must hold integer token ids, found True"), (("a", 2), "must hold integer token ids, found 'a'"),
    ((None,), "must hold integer token ids, found None"), ((), "needs at least one token"),
    ((99,), r"must lie in \[0, 29\)"), ((-1, 2), r"must lie in \[0, 29\)"), ((10**30,), "must hold token ids in"),
    ("ab", "must be a list or tuple of token ids"), (None, "must be a list or tuple of token ids")])
def test_serve_refuses_the_prompts_generate_refuses(model, prompt, problem):
    """Hole 5 of issue 33: serve ran the prompt (1.5, 2) as (1, 2), while generate refuses 1.5. Both check prompts
    with the same two checks now (token_ids, then the model's check_ids), and serve's message names the request."""
    with pytest.raises(ValueError, match=f"^requests: request 7's prompt {problem}"):
        serve(model, [Request(0, 0, (1, 2), 2), Request(7, 1, prompt, 2)])
    if isinstance(prompt, tuple):
        with pytest.raises(ValueError, match=rf"^input_ids\[0\] {problem}|^input_ids {problem}"):
            generate(model, [list(prompt)], 2)


def test_serve_takes_any_whole_number_type_as_an_id(model):
    import numpy as np

    r = Request(0, 0, (np.int64(3), 4, torch.tensor(5).item()), 3)
    assert serve(model, [r]).outcomes[0].tokens == alone(model, r)


WORKLOAD_FIELDS = ("count", "mean_gap", "prompt_median", "prompt_sigma", "new_median", "new_sigma", "seed")


@pytest.mark.parametrize("name,value", [
    ("mean_gap", float("inf")), ("mean_gap", 1e17), ("mean_gap", float("nan")), ("mean_gap", -1.0), ("mean_gap", "2"),
    ("prompt_median", 0), ("prompt_median", -3), ("prompt_median", 2.5),
    pytest.param("prompt_median", 10**400, id="prompt_median-10**400"),
    ("new_median", 0), ("new_median", True), ("prompt_sigma", float("nan")), ("prompt_sigma", -0.1),
    ("new_sigma", float("inf")), ("new_sigma", 1e6), ("count", 0), ("count", 257), ("count", 3.0),
    ("seed", -1), ("seed", 0.5)])
def test_a_bad_workload_field_is_named_when_the_workload_is_built(name, value):
    """Hole 10 of issue 33: mean_gap inf or 1e17 gave ZeroDivisionError, NaN "cannot convert float NaN to integer",
    prompt_median=0 "math domain error", all from requests(), none naming the field. Now the constructor refuses
    each, naming the field and the values it accepts."""
    with pytest.raises(ValueError, match=rf"^{name} must be .*in \["):
        Workload(**{name: value})


def _any_value():
    return st.one_of(st.floats(), st.integers(-10**30, 10**30), st.integers(), st.booleans(), st.none(),
                     st.text(max_size=3), st.fractions())


def _check_workload(w: Workload) -> None:
    ids = list(range(50)) * 2
    requests = w.requests(ids, 64)
    assert len(requests) == w.count and [r.rid for r in requests] == list(range(w.count))
    arrivals = [r.arrival for r in requests]
    assert arrivals[0] == 0 and arrivals == sorted(arrivals) and all(isinstance(a, int) for a in arrivals)
    assert all(1 <= len(r.prompt) and r.max_new_tokens >= 1 and r.peak_tokens <= 64 for r in requests)
    assert all(isinstance(t, int) and 0 <= t < 50 for r in requests for t in r.prompt)


@given(st.sampled_from(WORKLOAD_FIELDS), _any_value())
def test_any_workload_value_is_either_usable_or_named(name, value):
    """Every value of every field either builds a workload whose requests are sensible, or is refused at
    construction with a ValueError that starts with the field's name."""
    try:
        w = Workload(**{name: value})
    except ValueError as e:
        assert str(e).startswith(f"{name} must be "), e
        return
    _check_workload(w)


@given(st.fixed_dictionaries({
    "count": st.integers(1, 256), "mean_gap": st.floats(0, 1e6), "seed": st.integers(0, 2**64 - 1),
    "prompt_median": st.integers(1, 10**6), "prompt_sigma": st.floats(0, 10),
    "new_median": st.integers(1, 10**6), "new_sigma": st.floats(0, 10)}))
def test_every_accepted_workload_is_sensible(fields):
    _check_workload(Workload(**fields))
