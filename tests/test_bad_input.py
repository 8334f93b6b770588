"""Bad input found by trying to break the API: each gets a ValueError naming the argument, and
nothing is changed, allocated or silently computed wrong. (Numbers refer to the reshape issue's list.)"""
import json
import shutil

import numpy as np
import pytest
import torch

from kvlab import (DynamicKVCache, Int8KVCache, KVCache, ModelConfig, ToyTransformer, format_bytes, generate,
                   load_demo_model)
from kvlab.cache_modes import MODES
from kvlab.tokenizer import CharTokenizer

# Every cache mode's factory (a mode added to kvlab.cache_modes is tested here without an edit)
CACHE_FACTORIES = [pytest.param(m.factory, id=m.name) for m in MODES.values() if m.factory is not None]


def kv(cfg, T, B=1):
    return torch.randn(B, cfg.n_kv_head, T, cfg.head_dim), torch.randn(B, cfg.n_kv_head, T, cfg.head_dim)


# -- 2. a cache that does not match the model ------------------------------------------------------
@pytest.mark.parametrize("cls", [KVCache, DynamicKVCache, Int8KVCache])
def test_cache_of_another_dtype_is_rejected_before_anything_changes(tiny_model, cls):
    cache = cls(tiny_model.config, 1, 8, dtype="fp16")
    counters = (cache.length, cache.allocations, cache.bytes_copied)
    with pytest.raises(ValueError, match=r"^cache: computes in torch.float16 but the model in torch.float32"):
        tiny_model(torch.tensor([[1, 2, 3]]), cache)
    assert (cache.length, cache.allocations, cache.bytes_copied) == counters


def test_cache_for_another_config_is_rejected(tiny_model):
    other = ModelConfig(vocab_size=61, d_model=36, n_layer=3, n_head=6, n_kv_head=2, head_dim=6, max_seq_len=64)
    with pytest.raises(ValueError, match=r"^cache: built for \(n_layer, n_kv_head, head_dim\) = \(3, 2, 6\)"):
        tiny_model(torch.tensor([[1, 2]]), KVCache(other, 1, 8))


def test_cache_on_an_unusable_device_is_rejected(tiny_config):
    with pytest.raises(ValueError, match=r"^device: kvlab runs on cpu, cuda, mps, got meta"):
        DynamicKVCache(tiny_config, 1, 8, device="meta")


def test_update_rejects_tensors_on_another_device_type(tiny_config):
    cache = DynamicKVCache(tiny_config, 1, 8)
    k, v = kv(tiny_config, 1)
    with pytest.raises(ValueError, match="^k is on meta"):
        cache.update(0, k.to("meta"), v)
    assert cache.allocations == 0 and cache.bytes_copied == 0


# -- 3. the size check names the argument to blame --------------------------------------------------
@pytest.mark.parametrize("cls", CACHE_FACTORIES)
def test_huge_batch_blames_batch_size(tiny_config, cls):
    with pytest.raises(ValueError, match="^batch_size: "):
        cls(tiny_config, 2**63)


@pytest.mark.parametrize("cls", CACHE_FACTORIES)
def test_long_cache_blames_max_seq_len(cls):
    cfg = ModelConfig(vocab_size=10, d_model=4096, n_layer=32, n_head=32, max_seq_len=2**40)
    with pytest.raises(ValueError, match="^max_seq_len: "):
        cls(cfg, 1, 2**40)


# -- 4. huge sizes never reach the allocator --------------------------------------------------------
@pytest.mark.parametrize("max_seq_len", [2**40, 2**63])
def test_huge_max_seq_len_is_refused_before_the_rope_tables(max_seq_len):
    cfg = ModelConfig(vocab_size=10, d_model=8, n_layer=1, n_head=2, max_seq_len=max_seq_len)
    with pytest.raises(ValueError, match="^max_seq_len: the RoPE tables need"):
        ToyTransformer(cfg)


# -- 5. non-finite or degenerate floats ------------------------------------------------------------
def test_tiny_temperature_is_greedy_not_nan(tiny_model):
    greedy = generate(tiny_model, [[1, 2, 3]], 10).tokens
    assert torch.equal(generate(tiny_model, [[1, 2, 3]], 10, temperature=1e-45).tokens, greedy)


@pytest.mark.parametrize("kwargs,name", [(dict(temperature=10**400), "temperature"),
                                         (dict(temperature=float("inf")), "temperature"),
                                         (dict(seed=2**64), "seed"), (dict(seed=1.5), "seed")])
def test_generate_rejects_overflowing_numbers(tiny_model, kwargs, name):
    with pytest.raises(ValueError, match=f"^{name} "):
        generate(tiny_model, [[1, 2]], 2, **kwargs)


@pytest.mark.parametrize("field,value", [("rope_theta", 10**400), ("rope_theta", 1e-320), ("rope_theta", 1.0),
                                         ("norm_eps", 10**400), ("norm_eps", 1e-45), ("norm_eps", 2.0)])
def test_config_rejects_degenerate_floats(field, value):
    with pytest.raises(ValueError, match=f"^{field} "):
        ModelConfig(vocab_size=10, d_model=8, n_layer=1, n_head=2, **{field: value})


# -- 6. K and V in pairs ---------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [KVCache, DynamicKVCache, Int8KVCache])
def test_mismatched_k_and_v_write_nothing(tiny_config, cls):
    cache = cls(tiny_config, 1, 8)
    before = [t.clone() for t in (cache.k, cache.v)] if cls is not DynamicKVCache else None
    k, _ = kv(tiny_config, 3)
    _, v = kv(tiny_config, 5)
    with pytest.raises(ValueError, match="^v: holds 5 tokens but k holds 3"):
        cache.update(0, k, v)
    assert cache.allocations in (0, 2, 4) and cache.bytes_copied == 0
    if before is not None:
        assert torch.equal(cache.k, before[0]) and torch.equal(cache.v, before[1])
    else:
        assert cache.k == [None] * tiny_config.n_layer


# -- 8. broken assets -------------------------------------------------------------------------------
@pytest.fixture
def asset_copy(tmp_path, monkeypatch):
    from kvlab.assets import assets_dir

    shutil.copytree(assets_dir(), tmp_path / "assets")
    monkeypatch.setenv("KVLAB_ASSETS", str(tmp_path / "assets"))
    return tmp_path / "assets"


def _must_name(path_name):
    with pytest.raises(ValueError) as info:
        load_demo_model("cpu")
    text = str(info.value)
    assert text.startswith(path_name) and "git checkout assets/" in text and "python -m kvlab.train" in text, text


def test_truncated_weights(asset_copy):
    w = asset_copy / "demo_model.safetensors"
    w.write_bytes(w.read_bytes()[:5000])
    _must_name("demo_model.safetensors")


def test_config_missing_a_field(asset_copy):
    c = asset_copy / "demo_config.json"
    meta = json.loads(c.read_text(encoding="utf-8"))
    del meta["model"]["n_head"]
    c.write_text(json.dumps(meta), encoding="utf-8")
    _must_name("demo_config.json")


def test_tokenizer_of_the_wrong_shape(asset_copy):
    (asset_copy / "demo_tokenizer.json").write_text('["a", "b"]', encoding="utf-8")
    _must_name("demo_tokenizer.json")


def test_nan_weights_do_not_load(asset_copy):
    from safetensors.torch import load_file, save_file

    w = asset_copy / "demo_model.safetensors"
    state = load_file(str(w))
    state["norm.weight"][3] = float("nan")
    save_file(state, str(w))
    _must_name("demo_model.safetensors")


# -- 9. invisible characters ------------------------------------------------------------------------
def test_unknown_invisible_character_is_shown_by_code_point():
    tok = CharTokenizer.from_text("人工")
    with pytest.raises(ValueError, match=r"U\+200B"):
        tok.encode("人\u200b工")


# -- 10. other escapes ------------------------------------------------------------------------------
def test_mixed_nesting(tiny_model):
    with pytest.raises(ValueError, match="^input_ids "):
        generate(tiny_model, [[1], 2], 1)


def test_decode_none():
    with pytest.raises(ValueError, match="^ids "):
        CharTokenizer.from_text("ab").decode(None)


def test_from_dict_names_missing_fields():
    with pytest.raises(ValueError, match=r"^config: missing field\(s\) \['d_model', 'n_layer', 'n_head'\]"):
        ModelConfig.from_dict({"vocab_size": 1})


def test_update_with_lists(tiny_config):
    with pytest.raises(ValueError, match="^k must be a torch.Tensor"):
        KVCache(tiny_config, 1, 4).update(0, [[1.0]], [[1.0]])


def test_uint8_and_numpy_token_ids_work(tiny_model):
    ref = generate(tiny_model, [[1, 2, 3]], 4).tokens
    assert torch.equal(generate(tiny_model, torch.tensor([[1, 2, 3]], dtype=torch.uint8), 4).tokens, ref)
    assert torch.equal(generate(tiny_model, [[np.int64(1), np.int64(2), np.int64(3)]], 4).tokens, ref)
    with torch.no_grad():
        torch.testing.assert_close(tiny_model(torch.tensor([[1, 2, 3]], dtype=torch.uint8)),
                                   tiny_model(torch.tensor([[1, 2, 3]])))


def test_model_seed_must_be_whole(tiny_config):
    with pytest.raises(ValueError, match="^seed "):
        ToyTransformer(tiny_config, seed=1.5)


@pytest.mark.parametrize("n,text", [(2**1100, "1.124e+307 YiB"), (1023.99, "1.0 KiB"), (1023.4, "1023 B")])
def test_format_bytes_extremes(n, text):
    assert format_bytes(n) == text


def test_float64_model_is_blamed_not_a_dtype_argument(tiny_model):
    model = ToyTransformer(tiny_model.config, seed=3).double()
    with pytest.raises(ValueError, match="^model: computes in torch.float64"):
        generate(model, [[1, 2]], 2, cache="kv")
    generate(model, [[1, 2]], 2, cache="none")  # without a cache there is nothing to store


def test_cache_for_a_model_with_more_layers(tiny_config):
    small = ToyTransformer(ModelConfig(vocab_size=61, d_model=36, n_layer=1, n_head=6, n_kv_head=2, head_dim=6,
                                       max_seq_len=64))
    with pytest.raises(ValueError, match="^cache: built for"):
        small(torch.tensor([[1, 2]]), KVCache(tiny_config, 1, 8))


# -- 11. token ids are range-checked on every device ------------------------------------------------
def test_token_range_check_does_not_depend_on_the_device(tiny_model):
    import inspect

    source = inspect.getsource(type(tiny_model).check_ids)
    assert "device.type" not in source  # the check runs wherever the ids live (a CUDA assert kills the kernel)
    with pytest.raises(ValueError, match=r"^input_ids must lie in \[0, 61\), got values in \[0, 61\]"):
        tiny_model(torch.tensor([[0, 61]]))


# -- issue 19 hole 9: the input helpers ------------------------------------------------------------------
@pytest.mark.parametrize("text", ["²", "③", "++5", "1, ²", "٣", "9" * 5000],
                         ids=["superscript", "circled", "two-plus", "one-bad", "arabic-indic", "5000-digits"])
def test_odd_digits_in_a_lengths_box_name_the_control_in_chinese(text):
    from kvlab.lessons import storage

    with pytest.raises(ValueError) as caught:
        storage.render_padding(text, 16)
    message = str(caught.value)
    assert message.startswith(f"「{storage.LENGTHS_LABEL}」") and "invalid literal" not in message
    assert len(message) < 200  # a 5,000-digit number is not echoed in full


@pytest.mark.parametrize("value", [np.float32(2.5), __import__("fractions").Fraction(5, 2), 2.5, np.float64(2.5)])
def test_a_fraction_is_refused_not_truncated(value):
    from kvlab import inputs

    with pytest.raises(inputs.InputError, match="整数"):
        inputs.whole_number("批次 B", value, 1, 10)
    assert inputs.whole_number("批次 B", np.float32(2.0), 1, 10) == 2  # a whole value of any real type is fine
    assert inputs.whole_number("批次 B", np.int64(3), 1, 10) == 3


def test_every_render_refuses_a_fraction():
    from kvlab.lessons import memory_estimate, storage
    from fractions import Fraction

    for bad in (np.float32(2.5), Fraction(5, 2)):
        with pytest.raises(ValueError, match="整数"):
            storage.render_shape(32, 32, 128, bad, 30)
        with pytest.raises(ValueError, match="整数"):
            storage.render_padding([12, bad], 16)
        with pytest.raises(ValueError, match="整数"):
            memory_estimate.render_calculator("LLaMA-7B", 1024, bad, "fp16")


@pytest.mark.parametrize("value", ["False", "True", 0.5, None])
def test_a_checkbox_value_must_be_a_bool(value):
    from kvlab import inputs

    with pytest.raises(inputs.InputError, match="「先服务上一个请求」"):
        inputs.yes_no("先服务上一个请求", value)
    assert inputs.yes_no("先服务上一个请求", np.bool_(False)) is False


def test_usable_share_out_of_range_is_a_message_showing_the_value():
    from kvlab import inputs

    with pytest.raises(inputs.InputError, match="「显存使用比例」.*收到的是 一个约 401 位的整数"):
        inputs.positive_number("显存使用比例", 10**400, 1)
    with pytest.raises(inputs.InputError, match="收到的是 1.0000001"):
        inputs.positive_number("显存使用比例", 1.0000001, 1)


def test_a_tiny_usable_share_is_blamed_on_the_share():
    from kvlab.lessons import memory_estimate as m

    with pytest.raises(ValueError, match=f"^「{m.USABLE_LABEL}」"):
        m.render_fit("LLaMA-7B", "fp16", "fp16", "T4 16 GB (Colab)", 15360, 1e-9, 1024, 1)
    with pytest.raises(ValueError, match=f"^「{m.BUDGET_LABEL}」"):  # the whole card is too small: the card's memory
        m.render_fit("LLaMA-7B", "fp16", "fp16", "T4 16 GB (Colab)", 1024, 0.9, 1024, 1)
    from kvlab.lessons.misconceptions import budget

    args = dict(gpu=budget.DEFAULT_GPU, model=budget.DEFAULT_MODEL, spread=budget.DEFAULT_SPREAD, weight_dtype="fp16",
                cache_dtype="fp16", reserved_tokens=1024, wanted=1)
    with pytest.raises(ValueError, match=f"^「{budget.USABLE_LABEL}」"):
        budget.render_budget(usable=1e-9, **args)


# -- the same checks in English (issue 34): the message names the control and says the same numbers --------------
CJK = __import__("re").compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def _refusal(check, *args) -> str:
    from kvlab import inputs

    with pytest.raises(inputs.InputError) as caught:
        check(*args)
    return str(caught.value)


def test_every_control_check_refuses_in_english_naming_the_control():
    from kvlab import inputs
    from kvlab.language import using_language

    tok = CharTokenizer.from_text("abc")
    with using_language("en"):
        said = {
            "range": _refusal(inputs.whole_number, "batch B", 0, 1, 10),
            "fraction": _refusal(inputs.whole_number, "batch B", 2.5, 1, 10),
            "not a number": _refusal(inputs.whole_number, "batch B", "3", 1, 10),
            "infinite": _refusal(inputs.positive_number, "usable share", float("inf"), 1),
            "huge": _refusal(inputs.positive_number, "usable share", 10**400, 1),
            "share": _refusal(inputs.positive_number, "usable share", 1.0000001, 1),
            "checkbox": _refusal(inputs.yes_no, "serve the earlier request first", "False"),
            "choice": _refusal(inputs.choice, "data type", "fp8", ["fp16", "fp32"]),
            "stop": _refusal(inputs.one_of_numbers, "prompt length P", 3, [1, 2, 4]),
            "empty prompt": _refusal(inputs.prompt_tokens, "prompt", "  ", tok, 10),
            "long prompt": _refusal(inputs.prompt_tokens, "prompt", "abcabcabcabc", tok, 10),
            "unknown": _refusal(inputs.prompt_tokens, "prompt", "az b", tok, 10),
            "lengths type": _refusal(inputs.whole_numbers, "lengths", 7, 1, 100, 4),
            "no lengths": _refusal(inputs.whole_numbers, "lengths", " , ", 1, 100, 4),
            "many lengths": _refusal(inputs.whole_numbers, "lengths", "1,2,3,4,5", 1, 100, 4),
            "digits": _refusal(inputs.whole_numbers, "lengths", "12, ²3", 1, 100, 4),
            "negative": _refusal(inputs.whole_numbers, "lengths", "12, -3", 1, 100, 4),
            "too long": _refusal(inputs.whole_numbers, "lengths", "9" * 40, 1, 100, 4),
        }
    for case, message in said.items():
        assert not CJK.search(message), (case, message)
        assert message.split(": ", 1)[0] in ("batch B", "usable share", "serve the earlier request first",
                                             "data type", "prompt length P", "prompt", "lengths"), (case, message)
    assert said["range"] == "batch B: must be from 1 to 10, got 0"
    assert said["fraction"] == "batch B: expects a whole number, got 2.5"
    assert said["huge"] == "usable share: must be above 0 and at most 1, got a whole number of about 401 digits"
    assert said["share"].endswith("got 1.0000001") and said["infinite"].endswith("expects a finite number, got inf")
    assert said["choice"] == "data type: must be one of fp16, fp32, got 'fp8'"
    assert said["unknown"] == "prompt: holds characters outside the demo model's vocabulary: \"z\", ' ' " \
                              "(it knows only the characters of its training corpus)"
    assert "at most 10 characters, got 12" in said["long prompt"] and "at most 4 numbers, got 5" in said["many lengths"]
    assert said["digits"] == 'lengths: "²3" is not a whole number (use only the digits 0-9)'
    assert said["too long"] == "lengths: a number of 40 digits is far beyond this control's range"


def test_the_chinese_messages_stay_as_they_were_after_english_ones():
    """The switch is read when a message is made: Chinese again after an English one, word for word."""
    from kvlab import inputs
    from kvlab.language import using_language

    with using_language("en"):
        _refusal(inputs.whole_number, "batch B", 0, 1, 10)
    assert _refusal(inputs.whole_number, "批次 B", 0, 1, 10) == "「批次 B」应在 1 到 10 之间，收到的是 0"
    assert _refusal(inputs.whole_numbers, "序列长度", "12, -3", 1, 100, 4) == "「序列长度」里的 -3 不是正整数"
    assert _refusal(inputs.choice, "数据类型", "fp8", ["fp16", "fp32"]) == "「数据类型」只能从 fp16、fp32 中选择，收到的是 'fp8'"
