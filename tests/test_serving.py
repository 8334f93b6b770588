"""The scheduler: static and continuous batching on a step clock, its invariants, preemption, no starvation."""
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kvlab import ModelConfig, ToyTransformer, generate
from kvlab.paging import blocks_for
from kvlab.serving import Request, ServeRun, Workload, default_pool_blocks, quantile, serve

CONFIG = ModelConfig(vocab_size=29, d_model=16, n_layer=2, n_head=4, n_kv_head=2, head_dim=4, max_seq_len=40)


@pytest.fixture(scope="module")
def model():
    return ToyTransformer(CONFIG, seed=5).eval()


def alone(model, r: Request) -> list[int]:
    return generate(model, [list(r.prompt)], r.max_new_tokens).new_tokens[0].tolist()


def check_invariants(run: ServeRun, requests) -> None:
    """Every step: no block in two tables, the pool's count = the tables' blocks, free and held disjoint and
    together the whole pool, each table just long enough; at the end every block is back and every request done."""
    everything = set(range(run.num_blocks))
    for s in run.steps:
        held = [b for blocks in s.tables.values() for b in blocks]
        assert len(held) == len(set(held)), f"step {s.step}: a block owned twice"
        assert s.blocks_in_use == len(held) and set(held) | set(s.free) == everything
        assert not set(held) & set(s.free)
        assert all(len(s.tables[rid]) == blocks_for(s.lengths[rid], run.block_size) for rid in s.running)
        assert len(s.running) <= run.max_batch
    assert run.steps[-1].blocks_in_use == 0 and not run.steps[-1].running and not run.steps[-1].waiting
    assert sorted(o.request.rid for o in run.outcomes) == sorted(r.rid for r in requests)
    ordered = sorted(requests, key=lambda r: (r.arrival, r.rid))
    for i, r in enumerate(ordered):  # no starvation: the bound of FIFO admission with youngest-first preemption
        o = next(o for o in run.outcomes if o.request.rid == r.rid)
        assert len(o.tokens) == r.max_new_tokens
        assert r.arrival <= o.admitted <= o.first_token <= o.finished
        assert o.finished - r.arrival + 1 <= sum(q.max_new_tokens for q in ordered[:i + 1])


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 6))
    requests, clock = [], 0
    for rid in range(n):
        clock += draw(st.integers(0, 3))
        prompt = draw(st.lists(st.integers(0, CONFIG.vocab_size - 1), min_size=1, max_size=9))
        requests.append(Request(rid, clock, tuple(prompt), draw(st.integers(1, 7))))
    block_size = draw(st.integers(1, 5))
    least = max(blocks_for(r.peak_tokens, block_size) for r in requests)
    return requests, block_size, least + draw(st.integers(0, 6)), draw(st.integers(1, 4))


@given(workloads(), st.sampled_from(["static", "continuous"]))
def test_every_request_gets_its_own_tokens_and_the_pool_stays_consistent(model, workload, policy):
    requests, block_size, num_blocks, max_batch = workload
    run = serve(model, requests, policy, max_batch=max_batch, num_blocks=num_blocks, block_size=block_size)
    check_invariants(run, requests)
    for o in run.outcomes:
        assert o.tokens == alone(model, o.request), o.request.rid
    if policy == "static":
        assert run.preemptions == 0


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
    assert quantile([1, 2, 3, 4], 0.5) == 2.5 and quantile([5], 0.9) == 5


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
