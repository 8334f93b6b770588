"""`python -m kvlab.train`: never replaces the shipped model unasked, never saves a model the chapters cannot use,
and turns every bad argument into a usage error (exit code 2, no traceback) before any training starts."""
import hashlib
import json
import shutil

import peak_memory
import pytest

from kvlab import load_demo_model, train
from kvlab.assets import ASSET_FILES, DEMO_CONFIG, DEMO_MODELS, assets_dir

QUICK = ["--steps", "3", "--batch-size", "2", "--seq-len", "16"]


@pytest.fixture(autouse=True, scope="module")
def real_assets_untouched():
    """Every test here trains into a copy: the real shipped files must not change."""
    before = {name: hashlib.sha256((assets_dir() / name).read_bytes()).hexdigest() for name in ASSET_FILES}
    yield
    after = {name: hashlib.sha256((assets_dir() / name).read_bytes()).hexdigest() for name in ASSET_FILES}
    assert after == before


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """A copy of the shipped assets standing in for them (KVLAB_ASSETS), and a fresh working directory."""
    folder = tmp_path / "shipped"
    folder.mkdir()
    for name in ASSET_FILES:
        shutil.copy2(assets_dir() / name, folder / name)
    monkeypatch.setenv("KVLAB_ASSETS", str(folder))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return folder


def digests(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def usage_error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as info:
        train.main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    assert err.startswith("usage: python -m kvlab.train") and "Traceback" not in err, err
    return err.splitlines()[-1]


def test_default_output_leaves_the_shipped_model_alone(shipped, capsys):
    before = digests(shipped)
    assert train.main(QUICK) == 0
    assert digests(shipped) == before
    out = shipped.parent / "work" / train.DEFAULT_OUT
    assert sorted(p.name for p in out.iterdir()) == sorted(DEMO_MODELS["zh"].files)  # the model's whole folder
    printed = capsys.readouterr().out
    assert f"KVLAB_ASSETS={out}" in printed  # how to use it


def test_out_at_the_shipped_folder_needs_the_flag(shipped, capsys):
    before = digests(shipped)
    line = usage_error([*QUICK, "--out", str(shipped)], capsys)
    assert "--replace-shipped" in line
    assert digests(shipped) == before


def test_replace_shipped_writes_a_model_the_course_loads(shipped):
    assert train.main([*QUICK, "--replace-shipped"]) == 0
    meta = json.loads((shipped / DEMO_CONFIG).read_text(encoding="utf-8"))
    assert meta["training"]["steps"] == 3
    model, tok = load_demo_model("cpu")
    assert all(tok.encode(p) for p in train.chapter_prompts())
    assert not list(shipped.glob("*.tmp"))


def test_the_english_model_replaces_only_its_own_files(shipped, capsys):
    before = digests(shipped)
    assert train.main([*QUICK, "--lang", "en", "--replace-shipped"]) == 0
    after = digests(shipped)
    assert {name for name in before if before[name] != after[name]} <= set(DEMO_MODELS["en"].files)
    assert after[DEMO_MODELS["en"].weights] != before[DEMO_MODELS["en"].weights]
    meta = json.loads((shipped / DEMO_MODELS["en"].config).read_text(encoding="utf-8"))
    assert meta["training"]["steps"] == 3 and meta["model"]["vocab_size"] == 512
    model, tok = load_demo_model("cpu", lang="en")
    assert tok.decode(tok.encode("Artificial intelligence")) == "Artificial intelligence"
    assert "a vocabulary of 512" in capsys.readouterr().out


def test_an_english_corpus_outside_ascii_is_refused(shipped, tmp_path, capsys):
    corpus = tmp_path / "naive.txt"
    corpus.write_text("A na\u00efve caf\u00e9 serves the cache. " * 40, encoding="utf-8")
    line = usage_error([*QUICK, "--lang", "en", "--corpus", str(corpus)], capsys)
    assert line.startswith("python -m kvlab.train: error: --corpus:") and "ASCII" in line, line


def test_english_prompts_come_from_the_english_notebooks(tmp_path):
    import nbformat

    (tmp_path / "en").mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('ids = tok.encode("Artificial")')])
    nbformat.write(nb, tmp_path / "en" / "01.ipynb")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('tok.encode("人工")')]),
                   tmp_path / "01.ipynb")
    english = train.chapter_prompts(tmp_path, lang="en")
    assert "Artificial" in english and not any("\u4e00" <= ch <= "\u9fff" for p in english for ch in p)
    assert "人工" in train.chapter_prompts(tmp_path, lang="zh")


def test_english_prompts_come_from_the_prompts_phrasebooks():
    from kvlab.lessons import storage

    english = set(train.chapter_prompts(lang="en"))
    assert set(storage.PROMPTS.texts["en"].values()) <= english
    _, tok = load_demo_model("cpu", lang="en")
    train.check_prompts(tok, sorted(english), "the shipped English tokenizer")


def test_mean_of_the_last_steps_with_fewer_than_50(shipped, capsys):
    assert train.main(QUICK) == 0
    meta = json.loads((shipped.parent / "work" / train.DEFAULT_OUT / DEMO_CONFIG).read_text(encoding="utf-8"))
    mean = meta["training"]["final_loss_mean"]
    assert meta["training"]["final_loss_steps"] == 3
    assert f"mean of the last 3 steps {mean:.3f}" in capsys.readouterr().out
    assert train.final_loss([4.0, 2.0]) == (3.0, 2) and train.final_loss([1.0] * 60 + [3.0] * 50) == (3.0, 50)


def test_non_finite_loss_is_refused(shipped, capsys):
    out = shipped.parent / "work" / train.DEFAULT_OUT
    assert train.main(["--steps", "6", "--batch-size", "2", "--seq-len", "16", "--lr", "1e30"]) == 1
    err = capsys.readouterr().err
    assert "not finite" in err and "--lr" in err and "Traceback" not in err, err
    assert not out.exists()


def test_corpus_that_cannot_write_the_chapters_prompts_is_refused(shipped, tmp_path, capsys):
    small = tmp_path / "other.txt"
    small.write_text("人工智能的缓存。" * 40, encoding="utf-8")
    line = usage_error([*QUICK, "--corpus", str(small)], capsys)
    assert line.startswith("python -m kvlab.train: error: --corpus:") and "「模」「型」" in line, line


def test_a_model_that_cannot_read_the_prompts_is_not_saved():
    from kvlab.tokenizer import CharTokenizer

    tok = CharTokenizer.from_text("人工智能")
    with pytest.raises(train.TrainingRefused, match="「计」"):
        train.check_prompts(tok, ["人工", "计算"], "the trained tokenizer")


@pytest.mark.parametrize("args, flag", [
    (["--corpus", "no/such/corpus.txt"], "--corpus"),
    (["--seq-len", "100000"], "--seq-len"),
    (["--seed", "-1"], "--seed"),
    (["--seed", str(2**64)], "--seed"),
    (["--steps", "0"], "--steps"),
    (["--steps", str(10**9)], "--steps"),
    (["--lr", "nan"], "--lr"),
    (["--lr", "-1"], "--lr"),
    (["--batch-size", "0"], "--batch-size"),
    (["--batch-size", "100000000"], "--batch-size"),  # a training batch of about 650 TB
    (["--out", "a-file"], "--out"),
    (["--replace-shipped", "--out", "elsewhere"], "--out"),
    (["--lang", "fr"], "--lang"),
    (["--lang", "en", "--seq-len", "256", "--corpus", "short.txt"], "--seq-len"),
])
def test_bad_arguments_are_usage_errors(shipped, capsys, args, flag):
    (shipped.parent / "work" / "a-file").write_text("not a folder")
    (shipped.parent / "work" / "short.txt").write_text("The key and the value. " * 20)  # about 120 tokens
    line = usage_error(["--steps", "2", *args], capsys)
    assert line.startswith(f"python -m kvlab.train: error: {flag}"), line


STEP_SETUP = """
import torch
from kvlab import train
torch.set_num_threads(1)
cfg = train.TrainConfig(steps=1, batch_size=int(sys.argv[1]), seq_len=int(sys.argv[2]))
text = train.corpus_text()
"""


@pytest.mark.skipif(not peak_memory.AVAILABLE, reason="reads the process's memory from Linux's /proc")
@pytest.mark.parametrize("batch, seq_len", [(1, 16), (32, 64), (16, 256)])
def test_memory_estimate_bounds_a_real_training_step(batch, seq_len):
    """What a training step really allocates stays under the estimate that refuses big batches, and the estimate
    is not wildly above it."""
    measured = peak_memory.peak_bytes(STEP_SETUP, "train.train(text, cfg, progress=False)", str(batch), str(seq_len))
    estimate = train.training_bytes(train.TrainConfig(batch_size=batch, seq_len=seq_len), vocab_size=675)
    print(f"measured {measured / 2**20:.0f} MiB, estimate {estimate / 2**20:.0f} MiB")
    assert measured < estimate < 4 * measured, (measured, estimate)


def test_chapter_prompts_come_from_kvlab_and_the_notebooks():
    from kvlab.exercises import ch03, ch05
    from kvlab.lessons import decode, misconceptions, prefill_decode

    prompts = set(train.chapter_prompts())
    assert {decode.DEFAULT_PROMPT, prefill_decode.DEFAULT_PROMPT, misconceptions.LAB_PROMPT,
            misconceptions.PREVIOUS_PROMPT, ch03.TRACE_PROMPT, *ch05.PROMPTS} <= prompts
    assert {"计算机", "大语言"} <= prompts  # 3.1 exercise cases on the demo model
    assert {"人工智能", "解码阶段"} <= prompts  # 3.2's prompts phrasebook (the code cells read them from it)
    _, tok = load_demo_model("cpu")
    train.check_prompts(tok, sorted(prompts), "the shipped tokenizer")  # the shipped model reads them all
