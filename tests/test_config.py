import pytest

from kvlab import ModelConfig
from kvlab.config import default_d_ff


def test_defaults_follow_llama_rules():
    c = ModelConfig(vocab_size=100, d_model=768, n_layer=12, n_head=12)
    assert c.n_kv_head == 12 and c.head_dim == 64 and c.d_ff == 2048
    assert default_d_ff(4096, 256) == 11008  # LLaMA-7B's intermediate size
    assert c.n_rep == 1


def test_gqa_and_explicit_head_dim():
    c = ModelConfig(vocab_size=10, d_model=20, n_layer=1, n_head=3, n_kv_head=1, head_dim=6)
    assert (c.n_head, c.n_kv_head, c.head_dim, c.n_rep) == (3, 1, 6, 3)


def test_param_count_matches_module():
    from kvlab import ToyTransformer

    c = ModelConfig(vocab_size=37, d_model=20, n_layer=3, n_head=4, n_kv_head=2, head_dim=6, d_ff=50)
    m = ToyTransformer(c)
    assert c.n_params() == sum(p.numel() for p in m.parameters())


def test_round_trip_dict():
    c = ModelConfig(vocab_size=10, d_model=8, n_layer=1, n_head=2)
    assert ModelConfig.from_dict(c.to_dict()) == c


BAD = [
    (dict(vocab_size=0), "vocab_size"),
    (dict(d_model=-8), "d_model"),
    (dict(n_layer=2.0), "n_layer"),
    (dict(n_layer=True), "n_layer"),
    (dict(n_head="4"), "n_head"),
    (dict(n_kv_head=3), "n_kv_head"),
    (dict(n_kv_head=0), "n_kv_head"),
    (dict(head_dim=5), "head_dim"),
    (dict(d_model=30, n_head=4), "head_dim"),
    (dict(d_ff=0), "d_ff"),
    (dict(max_seq_len=-1), "max_seq_len"),
    (dict(rope_theta=0.0), "rope_theta"),
    (dict(rope_theta=float("nan")), "rope_theta"),
    (dict(norm_eps=-1e-5), "norm_eps"),
]


@pytest.mark.parametrize("override,field", BAD)
def test_bad_values_name_the_field(override, field):
    kwargs = dict(vocab_size=10, d_model=32, n_layer=2, n_head=4) | override
    with pytest.raises(ValueError, match=field):
        ModelConfig(**kwargs)


def test_unknown_field_in_dict():
    with pytest.raises(ValueError, match="unknown"):
        ModelConfig.from_dict(dict(vocab_size=10, d_model=8, n_layer=1, n_head=2, colour="red"))
