"""A missing or broken course file gets one error, naming the file and how to restore it, wherever it is read:
the model loader, the corpus readers of 3.3 and 3.5, and the panels built on them (never an internal-bug message)."""
import shutil

import pytest

from kvlab import assets, load_demo_model
from kvlab.assets import CORPUS, DEMO_MODELS, AssetError


@pytest.fixture
def asset_copy(tmp_path, monkeypatch):
    shutil.copytree(assets.assets_dir(), tmp_path / "assets",
                    ignore=shutil.ignore_patterns("*.png"))  # the screenshots are not course data
    monkeypatch.setenv("KVLAB_ASSETS", str(tmp_path / "assets"))
    return tmp_path / "assets"


def restore_named(error, name):
    text = str(error)
    assert text.startswith(name), text
    retrain = "python -m kvlab.train --lang en --replace-shipped" if name in DEMO_MODELS["en"].files else \
        "python -m kvlab.train --replace-shipped"
    assert "git checkout assets/" in text and retrain in text, text


def test_missing_corpus(asset_copy):
    (asset_copy / CORPUS).unlink()
    with pytest.raises(AssetError) as info:
        assets.corpus_text()
    restore_named(info.value, CORPUS)


@pytest.mark.parametrize("content, problem", [(b"", "is empty"), (b"\xff\xfe\xfa", "UTF-8")])
def test_broken_corpus(asset_copy, content, problem):
    (asset_copy / CORPUS).write_bytes(content)
    with pytest.raises(AssetError, match=problem) as info:
        assets.corpus_text()
    restore_named(info.value, CORPUS)


def test_corpus_is_read_again_after_it_changes(asset_copy):
    first = assets.corpus_text()
    (asset_copy / CORPUS).write_text("人工智能。" * 3, encoding="utf-8")
    assert assets.corpus_text() == "人工智能。" * 3 != first


MODEL_FILES = [(m.lang, name) for m in DEMO_MODELS.values() for name in (m.weights, m.config, m.tokenizer)]


@pytest.mark.parametrize("lang, name", MODEL_FILES)
def test_missing_model_file(asset_copy, lang, name):
    (asset_copy / name).unlink()
    with pytest.raises(AssetError) as info:
        load_demo_model("cpu", lang=lang)
    restore_named(info.value, name)


@pytest.mark.parametrize("lang, name", MODEL_FILES)
def test_broken_model_file(asset_copy, lang, name):
    (asset_copy / name).write_bytes(b"{not json")
    with pytest.raises(AssetError) as info:
        load_demo_model("cpu", lang=lang)
    restore_named(info.value, name)


def test_each_language_loads_from_kvlab_assets(asset_copy):
    """KVLAB_ASSETS points at both models; a folder without the English files still serves the Chinese one."""
    for name in DEMO_MODELS["en"].files:
        (asset_copy / name).unlink()
    assert load_demo_model("cpu")[1].encode("人工")
    with pytest.raises(AssetError) as info:
        load_demo_model("cpu", lang="en")
    text = str(info.value)
    assert DEMO_MODELS["en"].weights in text and "python -m kvlab.train --lang en --replace-shipped" in text, text


def test_missing_english_corpus(asset_copy):
    (asset_copy / DEMO_MODELS["en"].corpus).unlink()
    with pytest.raises(AssetError) as info:
        assets.corpus_text("en")
    restore_named(info.value, DEMO_MODELS["en"].corpus)


def panels(model, tok):
    """The panels whose renders read the corpus, and a control change that makes each read it again."""
    from kvlab.lessons import misconceptions, prefill_decode

    return {
        "3.3 padded batch": (lambda: prefill_decode.padded_batch_panel(model, tok), {"lengths": "5, 11"}),
        "3.5 weights": (lambda: misconceptions.weights_panel(model, tok), {"batch_size": 2}),
    }


@pytest.mark.parametrize("which", ["3.3 padded batch", "3.5 weights"])
def test_panels_show_the_asset_error_when_the_corpus_goes_missing(asset_copy, which):
    model, tok = load_demo_model("cpu")
    make, change = panels(model, tok)[which]
    panel = make()
    assert panel.error is None
    (asset_copy / CORPUS).unlink()
    panel.set(**change)
    assert panel.error is not None and panel.stale
    shown = panel.message.value
    assert "kvlab-msg-bug" not in shown and "内部错误" not in shown, shown
    assert "课程的数据文件" in shown and CORPUS in shown and "git checkout assets/" in shown, shown


@pytest.mark.parametrize("which", ["3.3 padded batch", "3.5 weights"])
def test_panels_built_without_the_corpus_raise_the_asset_error(asset_copy, which):
    model, tok = load_demo_model("cpu")
    (asset_copy / CORPUS).unlink()
    make, _ = panels(model, tok)[which]
    with pytest.raises(AssetError) as info:
        make()
    restore_named(info.value, CORPUS)


def test_an_installed_wheel_is_told_to_reinstall_not_to_git_checkout(asset_copy, monkeypatch, tmp_path):
    """A wheel (Colab, a hub image) has no git and no assets/ folder of a clone: the hint is the reinstall."""
    site = tmp_path / "site-packages" / "kvlab"
    site.mkdir(parents=True)
    monkeypatch.setattr(assets, "__file__", str(site / "assets.py"))
    (asset_copy / CORPUS).unlink()
    with pytest.raises(AssetError) as info:
        assets.corpus_text()
    text = str(info.value)
    assert text.startswith(CORPUS) and "git checkout" not in text
    assert "pip install --force-reinstall --no-deps" in text and "kvlab @ git+https://github.com/" in text
