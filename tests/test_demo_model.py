"""The trained demo model, its tokenizer and the training entry point."""
import json

import pytest
import torch
from safetensors import safe_open

from kvlab import generate, load_demo_model
from kvlab.assets import CORPUS, DEMO_CONFIG, DEMO_WEIGHTS, assets_dir
from kvlab.tokenizer import CharTokenizer, UnknownCharactersError
from kvlab.train import TrainConfig, main as train_main, train


@pytest.fixture(scope="module")
def demo():
    return load_demo_model("cpu")


def test_greedy_continuation_of_rengong_is_zhineng(demo):
    model, tok = demo
    res = generate(model, [tok.encode("人工")], 8)
    text = tok.decode(res.tokens[0])
    assert text.startswith("人工智能"), text
    assert torch.equal(res.tokens, generate(model, [tok.encode("人工")], 8, cache="none").tokens)


def test_step_by_step_zhi_then_neng(demo):
    model, tok = demo
    with torch.no_grad():
        first = model(torch.tensor([tok.encode("人工")]))[0, -1].argmax().item()
        second = model(torch.tensor([tok.encode("人工智")]))[0, -1].argmax().item()
    assert tok.decode([first, second]) == "智能"


def test_cached_and_uncached_text_agree_and_sampling_is_seeded(demo):
    model, tok = demo
    prompt = [tok.encode("缓存")]
    for mode in ("kv", "dynamic", "k_only"):
        assert torch.equal(generate(model, prompt, 40, cache=mode).tokens, generate(model, prompt, 40, cache="none").tokens)
    a = generate(model, prompt, 40, temperature=0.9, seed=3).tokens
    assert torch.equal(a, generate(model, prompt, 40, temperature=0.9, seed=3).tokens)


def test_committed_weights_have_declared_shapes():
    folder = assets_dir()
    config = json.loads((folder / DEMO_CONFIG).read_text(encoding="utf-8"))["model"]
    d, L, V = config["d_model"], config["n_layer"], config["vocab_size"]
    q_dim = config["n_head"] * config["head_dim"]
    kv_dim = config["n_kv_head"] * config["head_dim"]
    with safe_open(str(folder / DEMO_WEIGHTS), "pt") as f:
        shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    assert shapes["embed.weight"] == (V, d)
    assert shapes["lm_head.weight"] == (d, V)
    for i in range(L):
        assert shapes[f"layers.{i}.attn.wqkv.weight"] == (d, q_dim + 2 * kv_dim)
        assert shapes[f"layers.{i}.mlp.w_gate_up.weight"] == (d, 2 * config["d_ff"])
    assert (folder / DEMO_WEIGHTS).stat().st_size < 8 * 2**20


def test_tokenizer_round_trip_and_unknown_characters(demo):
    _, tok = demo
    text = "人工智能的KV缓存。"
    assert tok.decode(tok.encode(text)) == text
    with pytest.raises(UnknownCharactersError) as info:
        tok.encode("人工😀智能龘")
    assert info.value.characters == ["😀", "龘"]
    assert "😀" in str(info.value) and "龘" in str(info.value)
    assert isinstance(info.value, ValueError)
    with pytest.raises(ValueError, match="ids"):
        tok.decode([tok.vocab_size])
    with pytest.raises(ValueError):
        tok.encode("")


def test_tokenizer_save_load(tmp_path):
    tok = CharTokenizer.from_text("abcab")
    tok.save(tmp_path / "t.json")
    assert CharTokenizer.load(tmp_path / "t.json").chars == ["a", "b", "c"]


def test_corpus_is_ours_and_teaches_rengong_zhineng():
    text = (assets_dir() / CORPUS).read_text(encoding="utf-8")
    assert len(text) > 5000
    starts = [i for i in range(len(text)) if text.startswith("人工", i)]
    assert len(starts) > 100 and all(text.startswith("人工智能", i) for i in starts)


def test_training_runs_and_lowers_the_loss():
    text = (assets_dir() / CORPUS).read_text(encoding="utf-8")
    cfg = TrainConfig(steps=30, batch_size=8, seq_len=32, warmup=5, seed=1)
    _, _, losses, _ = train(text, cfg, progress=False)
    assert sum(losses[-5:]) / 5 < losses[0] - 1.0
    _, _, again, _ = train(text, cfg, progress=False)
    assert again == losses  # deterministic


def test_training_entry_point_writes_files(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text((assets_dir() / CORPUS).read_text(encoding="utf-8")[:3000], encoding="utf-8")
    assert train_main(["--steps", "3", "--batch-size", "2", "--seq-len", "8", "--corpus", str(corpus),
                       "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "loss" in out and (tmp_path / DEMO_WEIGHTS).exists()
    with pytest.raises(SystemExit):
        train_main(["--steps", "0", "--corpus", str(corpus), "--out", str(tmp_path)])
