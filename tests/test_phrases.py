"""One language switch (kvlab.language) and phrasebooks that cannot miss a phrase (kvlab.phrases)."""
import importlib
import pkgutil
import subprocess
import sys

import pytest

import kvlab
import kvlab.language as lang_mod
from kvlab.language import LANGUAGES, check_language, get_language, set_language, using_language
from kvlab.phrases import MissingPhrase, Phrasebook


def all_phrasebooks() -> list[Phrasebook]:
    """Every Phrasebook a kvlab module holds at module level (found by importing the whole package)."""
    books = {}
    for info in pkgutil.walk_packages(kvlab.__path__, "kvlab."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, Phrasebook):
                books[id(value)] = value
    return list(books.values())


def test_every_phrasebook_has_the_same_keys_and_fields_in_every_language():
    books = all_phrasebooks()
    problems = [p for book in books for p in book.problems()]
    assert not problems, "\n".join(problems)
    names = [b.name for b in books]
    assert len(names) == len(set(names)), f"two phrasebooks share a name: {sorted(names)}"


def test_no_phrase_is_empty_and_english_has_no_chinese():
    for book in all_phrasebooks():
        for code in LANGUAGES:
            for key, text in book.texts[code].items():
                assert text.strip(), f"{book.name}: {key!r} is empty in {code!r}"
        for key, text in book.texts["en"].items():
            assert not any("\u4e00" <= ch <= "\u9fff" or "\u3000" <= ch <= "\u303f" for ch in text), \
                f"{book.name}: the English text of {key!r} holds Chinese: {text!r}"


def test_the_parity_check_finds_a_missing_key_and_a_different_field():
    book = Phrasebook("planted", {"zh": {"a": "第 {step} 步", "b": "好"}, "en": {"a": "step {n}"}})
    assert book.problems() == ["planted: 'b' has no 'en' text",
                               "planted: 'a' fills ['step'] in 'zh' but ['n'] in 'en'"]
    with pytest.raises(ValueError, match="lacks the languages"):
        Phrasebook("half", {"zh": {"a": "好"}})


def test_say_follows_the_switch_and_names_a_missing_key():
    book = Phrasebook("t", {"zh": {"device": "运行设备：{d}"}, "en": {"device": "Device: {d}"}})
    with using_language("zh"):
        assert book.say("device", d="cpu") == "运行设备：cpu"
        with using_language("en"):
            assert book.say("device", d="cpu") == "Device: cpu"
        assert book.say("device", d="cpu") == "运行设备：cpu"
    with pytest.raises(MissingPhrase, match="'t' has no 'en' text for 'nope'"):
        book.text("nope", "en")


def test_the_switch_refuses_an_unknown_code_naming_the_ones_there_are():
    for bad in ("fr", "EN", "", None, 1):
        with pytest.raises(ValueError, match="'zh', 'en'"):
            set_language(bad)
        with pytest.raises(ValueError, match="'zh', 'en'"):
            check_language(bad)


def test_set_language_and_the_environment(monkeypatch):
    monkeypatch.setattr(lang_mod, "_chosen", [])
    monkeypatch.delenv("KVLAB_LANG", raising=False)
    assert get_language() == "zh"
    monkeypatch.setenv("KVLAB_LANG", "en")
    assert get_language() == "en"
    set_language("zh")  # the switch wins over the environment
    assert get_language() == "zh"
    monkeypatch.setattr(lang_mod, "_chosen", [])
    monkeypatch.setenv("KVLAB_LANG", "xx")
    with pytest.raises(ValueError, match="KVLAB_LANG: language must be one of 'zh', 'en'; got 'xx'"):
        get_language()


def test_the_demo_model_follows_the_language():
    code = ("import kvlab; kvlab.set_language('en'); m, tok = kvlab.load_demo_model('cpu'); "
            "print(type(tok).__name__, tok.vocab_size)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split()[0] == "SubwordTokenizer"
