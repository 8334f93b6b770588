"""The trained demo models (Chinese characters, English subwords), their tokenizers and the training entry point.
Every check runs for both models (``lang``)."""
import json
from dataclasses import dataclass

import pytest
import torch
from safetensors import safe_open

from kvlab import generate, load_demo_model
from kvlab.assets import DEMO_MODELS, assets_dir, corpus_text
from kvlab.tokenizer import CharTokenizer, SubwordTokenizer, UnknownCharactersError
from kvlab.train import TrainConfig, main as train_main, train

LANGS = list(DEMO_MODELS)


@dataclass(frozen=True)
class Striking:
    """The prompt 3.1 opens with, what the model writes after it, and the tokens it writes one step at a time."""
    prompt: str
    continuation: str
    steps: tuple[str, ...]
    cache_prompt: str  # another prompt, for the cached-vs-uncached check
    round_trip: str  # text the tokenizer writes exactly
    unknown: str  # text with characters it cannot write...
    unknown_chars: tuple[str, ...]  # ...which are these


STRIKING = {
    "zh": Striking("人工", "智能", ("智", "能"), "缓存", "人工智能的KV缓存。", "人工😀智能龘", ("😀", "龘")),
    "en": Striking("Artificial", " intelligence", (" intelligence",), "The cache",
                   "Artificial intelligence and the KV cache: 42 {x}!\n",
                   "caf\u00e9 \u4eba\tA", ("\u00e9", "\u4eba", "\t")),
}


@pytest.fixture(scope="module", params=LANGS)
def demo(request):
    return request.param, *load_demo_model("cpu", lang=request.param)


def test_greedy_continuation_of_the_striking_prompt(demo):
    """「人工」 -> 「人工智能」; "Artificial" -> "Artificial intelligence"."""
    lang, model, tok = demo
    case = STRIKING[lang]
    res = generate(model, [tok.encode(case.prompt)], 8)
    text = tok.decode(res.tokens[0])
    assert text.startswith(case.prompt + case.continuation), text
    assert torch.equal(res.tokens, generate(model, [tok.encode(case.prompt)], 8, cache="none").tokens)


def test_step_by_step(demo):
    """One token per step: 「智」 then 「能」; " intelligence" as one word-sized token."""
    lang, model, tok = demo
    case = STRIKING[lang]
    text, written = case.prompt, []
    with torch.no_grad():
        for _ in case.steps:
            written.append(tok.decode([model(torch.tensor([tok.encode(text)]))[0, -1].argmax().item()]))
            text += written[-1]
    assert tuple(written) == case.steps


def test_cached_and_uncached_text_agree_and_sampling_is_seeded(demo):
    lang, model, tok = demo
    prompt = [tok.encode(STRIKING[lang].cache_prompt)]
    for mode in ("kv", "dynamic", "k_only"):
        assert torch.equal(generate(model, prompt, 40, cache=mode).tokens, generate(model, prompt, 40, cache="none").tokens)
    a = generate(model, prompt, 40, temperature=0.9, seed=3).tokens
    assert torch.equal(a, generate(model, prompt, 40, temperature=0.9, seed=3).tokens)


@pytest.mark.parametrize("lang", ["fr", "EN", "", ["en"]])
def test_unknown_language_is_refused_naming_both(lang):
    with pytest.raises(ValueError, match="lang") as info:
        load_demo_model("cpu", lang=lang)
    assert "'zh'" in str(info.value) and "'en'" in str(info.value)


def test_no_language_means_the_course_language():
    from kvlab.language import using_language

    with using_language("en"):
        assert type(load_demo_model("cpu")[1]).__name__ == "SubwordTokenizer"
    with using_language("zh"):
        assert type(load_demo_model("cpu", lang=None)[1]).__name__ != "SubwordTokenizer"


@pytest.mark.parametrize("lang", LANGS)
def test_committed_weights_have_declared_shapes(lang):
    folder, files = assets_dir(), DEMO_MODELS[lang]
    config = json.loads((folder / files.config).read_text(encoding="utf-8"))["model"]
    d, L, V = config["d_model"], config["n_layer"], config["vocab_size"]
    q_dim = config["n_head"] * config["head_dim"]
    kv_dim = config["n_kv_head"] * config["head_dim"]
    with safe_open(str(folder / files.weights), "pt") as f:
        shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    assert shapes["embed.weight"] == (V, d)
    assert shapes["lm_head.weight"] == (d, V)
    for i in range(L):
        assert shapes[f"layers.{i}.attn.wqkv.weight"] == (d, q_dim + 2 * kv_dim)
        assert shapes[f"layers.{i}.mlp.w_gate_up.weight"] == (d, 2 * config["d_ff"])
    assert (folder / files.weights).stat().st_size < 8 * 2**20
    # the English model keeps to the Chinese one's size budget
    assert (folder / files.weights).stat().st_size <= (folder / DEMO_MODELS["zh"].weights).stat().st_size


def test_tokenizer_round_trip_and_unknown_characters(demo):
    lang, _, tok = demo
    case = STRIKING[lang]
    for text in (case.round_trip, corpus_text(lang)):
        assert tok.decode(tok.encode(text)) == text
    with pytest.raises(UnknownCharactersError) as info:
        tok.encode(case.unknown)
    assert info.value.characters == list(case.unknown_chars)
    assert all(c in str(info.value) for c in case.unknown_chars if c.isprintable())
    assert isinstance(info.value, ValueError)
    with pytest.raises(ValueError, match="ids"):
        tok.decode([tok.vocab_size])
    with pytest.raises(ValueError):
        tok.encode("")


def test_tokenizer_save_load(tmp_path):
    tok = CharTokenizer.from_text("abcab")
    tok.save(tmp_path / "t.json")
    assert CharTokenizer.load(tmp_path / "t.json").chars == ["a", "b", "c"]
    sub = SubwordTokenizer.from_text("the key and the value, the key and the value\n", vocab_size=120)
    sub.save(tmp_path / "s.json")
    again = SubwordTokenizer.load(tmp_path / "s.json")
    assert again.encode("the key!") == sub.encode("the key!") and again.vocab_size == sub.vocab_size
    with pytest.raises(ValueError, match="BPE"):
        SubwordTokenizer.load(tmp_path / "t.json")


def test_the_shipped_english_tokenizer_is_the_one_its_corpus_trains():
    """Byte-level BPE training is deterministic: retraining on the shipped corpus gives the shipped file."""
    shipped = (assets_dir() / DEMO_MODELS["en"].tokenizer).read_text(encoding="utf-8")
    assert SubwordTokenizer.from_text(corpus_text("en")).tokenizer.to_str(pretty=True) + "\n" == shipped


def test_english_tokens_are_word_sized():
    """Subwords, not letters: the corpus's frequent words are single tokens (with their leading space)."""
    _, tok = load_demo_model("cpu", lang="en")
    assert tok.vocab_size == 512
    pieces = [tok.decode([i]) for i in tok.encode("Artificial intelligence reads the key and value of each token")]
    assert pieces == ["Artificial", " intelligence", " reads", " the", " key", " and", " value", " of", " each",
                      " token"], pieces
    assert len(tok.encode(corpus_text("en"))) < len(corpus_text("en")) / 2.5


def test_english_tokenizer_refuses_a_corpus_it_could_not_decode_piece_by_piece():
    with pytest.raises(UnknownCharactersError, match="ASCII"):
        SubwordTokenizer.from_text("na\u00efve caf\u00e9")


@pytest.mark.parametrize("lang, prompt, word, least", [("zh", "人工", "人工智能", 100),
                                                       ("en", "artificial", "artificial intelligence", 30)])
def test_corpus_is_ours_and_teaches_the_striking_continuation(lang, prompt, word, least):
    text = corpus_text(lang)
    assert len(text) > 5000
    folded = text.lower() if lang == "en" else text
    starts = [i for i in range(len(folded)) if folded.startswith(prompt, i)]
    assert len(starts) > least and all(folded.startswith(word, i) for i in starts)


def test_the_english_corpus_is_ascii_and_about_as_long_in_tokens_as_the_chinese_one():
    text = corpus_text("en")
    assert text.isascii()
    _, tok = load_demo_model("cpu", lang="en")
    assert 0.8 < len(tok.encode(text)) / len(corpus_text("zh")) < 1.3  # a Chinese character is one token


@pytest.mark.parametrize("lang, drop", [pytest.param("zh", 1.0, marks=pytest.mark.slow), ("en", 0.5)])  # 30 steps: subwords are learnt more slowly
def test_training_runs_and_lowers_the_loss(lang, drop):
    text = corpus_text(lang)
    cfg = TrainConfig(steps=30, batch_size=8, seq_len=32, warmup=5, seed=1)
    _, _, losses, _ = train(text, cfg, progress=False, lang=lang)
    assert sum(losses[-5:]) / 5 < losses[0] - drop
    _, _, again, _ = train(text, cfg, progress=False, lang=lang)
    assert again == losses  # deterministic


@pytest.mark.parametrize("lang", LANGS)
def test_training_entry_point_writes_files(tmp_path, capsys, lang):
    corpus = tmp_path / "c.txt"
    corpus.write_text(corpus_text(lang)[:3000], encoding="utf-8")
    assert train_main(["--lang", lang, "--steps", "3", "--batch-size", "2", "--seq-len", "8", "--corpus",
                       str(corpus), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "loss" in out and (tmp_path / DEMO_MODELS[lang].weights).exists()
    with pytest.raises(SystemExit):
        train_main(["--lang", lang, "--steps", "0", "--corpus", str(corpus), "--out", str(tmp_path)])
