"""kvlab against transformers' LlamaForCausalLM on identical weights."""
import pytest
import torch

transformers = pytest.importorskip("transformers")

from kvlab import KVCache, ModelConfig, ToyTransformer, generate  # noqa: E402
from kvlab.interop import hf_cache_of, hf_layer_kv, to_hf_llama  # noqa: E402

CONFIGS = [
    ModelConfig(vocab_size=97, d_model=48, n_layer=3, n_head=6, n_kv_head=2, max_seq_len=128),  # GQA
    ModelConfig(vocab_size=50, d_model=30, n_layer=2, n_head=3, head_dim=6, max_seq_len=64),  # odd sizes, MHA
    ModelConfig(vocab_size=64, d_model=32, n_layer=2, n_head=4, n_kv_head=1, d_ff=40, max_seq_len=64,
                rope_theta=500.0),  # MQA
]


@pytest.mark.parametrize("config", CONFIGS, ids=["gqa", "odd-mha", "mqa"])
def test_logits_match_transformers(config):
    model = ToyTransformer(config, seed=11).eval()
    hf = to_hf_llama(model)
    ids = torch.randint(0, config.vocab_size, (3, 21), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours = model(ids)
        theirs = hf(ids).logits
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)


@pytest.mark.parametrize("config", CONFIGS, ids=["gqa", "odd-mha", "mqa"])
def test_greedy_generation_matches_transformers(config):
    # Scale weights up so the model is far from uniform and greedy choices are decisive.
    model = ToyTransformer(config, seed=5).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(20)
    hf = to_hf_llama(model)
    ids = torch.randint(0, config.vocab_size, (2, 6), generator=torch.Generator().manual_seed(1))
    for use_cache in (True, False):
        # An explicit all-ones mask: otherwise transformers treats token 0 (= pad_token_id) as padding.
        theirs = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=20, do_sample=False,
                             use_cache=use_cache, pad_token_id=0)
        ours = generate(model, ids, 20, cache="kv" if use_cache else "none").tokens
        assert torch.equal(ours, theirs)


def test_per_layer_cache_shape_matches_transformers():
    config = CONFIGS[0]
    model = ToyTransformer(config, seed=2).eval()
    hf = to_hf_llama(model)
    ids = torch.randint(0, config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(3))
    cache = KVCache(config, batch_size=2, max_seq_len=32)
    with torch.no_grad():
        model(ids, cache)
        hf_cache = hf_cache_of(hf(ids, use_cache=True))
    for layer in range(config.n_layer):
        k, v = cache.layer_view(layer)
        hf_k, hf_v = hf_layer_kv(hf_cache, layer)
        assert tuple(k.shape) == tuple(hf_k.shape) == (2, config.n_kv_head, 9, config.head_dim)
        torch.testing.assert_close(k, hf_k, atol=1e-5, rtol=0)  # the same K, RoPE applied
        torch.testing.assert_close(v, hf_v, atol=1e-5, rtol=0)


def test_to_hf_llama_rejects_other_models():
    with pytest.raises(ValueError, match="model"):
        to_hf_llama(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_demo_models_match_transformers(lang):
    """Each shipped demo model, on its own corpus's tokens: the same logits and the same greedy text as
    LlamaForCausalLM with its weights, with and without a cache."""
    from kvlab import load_demo_model
    from kvlab.assets import corpus_text

    model, tok = load_demo_model("cpu", lang=lang)
    hf = to_hf_llama(model)
    ids = torch.tensor([tok.encode(corpus_text(lang))[:48]])
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, atol=1e-4, rtol=0)
    prompt = ids[:, :5]
    for use_cache in (True, False):
        theirs = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=24, do_sample=False,
                             use_cache=use_cache, pad_token_id=0)
        assert torch.equal(generate(model, prompt, 24, cache="kv" if use_cache else "none").tokens, theirs)


def test_the_english_tokenizer_file_reads_the_same_in_transformers():
    """The English tokenizer is a standard tokenizers file: transformers' fast tokenizer gives the same ids."""
    from kvlab import load_demo_model
    from kvlab.assets import DEMO_MODELS, assets_dir, corpus_text

    _, tok = load_demo_model("cpu", lang="en")
    theirs = transformers.PreTrainedTokenizerFast(tokenizer_file=str(assets_dir() / DEMO_MODELS["en"].tokenizer))
    text = corpus_text("en")
    assert theirs.encode(text, add_special_tokens=False) == tok.encode(text)
    assert theirs.decode(tok.encode(text), clean_up_tokenization_spaces=False) == text
