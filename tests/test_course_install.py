"""The course install: transformers is part of it (3.2's comparison runs by default), the Chinese JupyterLab
interface is one flag away, and where transformers still cannot be imported the chapter says so in Chinese."""
import re
import sys
import tomllib
from pathlib import Path

import pytest
import torch

from kvlab import interop

ROOT = Path(__file__).resolve().parents[1]


def floor_pins(lines) -> dict[str, str]:
    pins = {}
    for line in lines:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)\s*", line.split("#", 1)[0])
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def test_transformers_and_the_language_pack_are_in_the_course_install():
    requirements = floor_pins((ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    dependencies = floor_pins(project["dependencies"])
    assert requirements["transformers"] == dependencies["transformers"] == interop.TRANSFORMERS_FLOOR
    assert "jupyterlab-language-pack-zh-cn" in requirements
    assert "jupyterlab-language-pack-zh-cn" in floor_pins(project["optional-dependencies"]["course"])
    assert set(dependencies) <= set(requirements)  # requirements.txt installs everything kvlab needs


def test_no_message_when_transformers_is_there():
    assert interop.transformers_missing() is None


def test_missing_transformers_is_explained_in_chinese(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now fails
    text = interop.transformers_missing()
    assert "没有安装 transformers" in text and "重启内核" in text
    assert f'%pip install "transformers>={interop.TRANSFORMERS_FLOOR}"' in text
    assert "python -m pip install -r requirements.txt" in text
    assert "No module named" not in text and "halted" not in text  # no raw English error for the usual case


def test_too_old_transformers_is_explained(monkeypatch):
    import transformers

    monkeypatch.setattr(transformers, "__version__", "4.30.2")
    text = interop.transformers_missing()
    assert "4.30.2" in text and f"{interop.TRANSFORMERS_FLOOR} 或更新" in text


@pytest.mark.parametrize("text, expected", [("4.45.2", (4, 45, 2)), ("5.0.0rc1", (5, 0, 0)), ("4.45", (4, 45)),
                                            ("4.46.0.dev0", (4, 46, 0))])
def test_version_tuple(text, expected):
    assert interop._version_tuple(text) == expected


def test_growth_comparison_says_the_same_without_transformers(monkeypatch):
    from kvlab import ModelConfig, ToyTransformer
    from kvlab.lessons import storage

    monkeypatch.setitem(sys.modules, "transformers", None)
    model = ToyTransformer(ModelConfig(vocab_size=32, d_model=16, n_layer=1, n_head=2, max_seq_len=32)).eval()
    growth = storage.compare_cache_growth(model, 4, prompt_len=2, repeats=1)
    assert growth.transformers_skipped == interop.transformers_missing()
    assert set(growth.runs) == {"kv", "dynamic"}


def test_chapter_32_takes_the_message_from_kvlab(monkeypatch):
    import json

    from kvlab import ModelConfig, ToyTransformer
    from kvlab.lessons import storage

    nb = json.loads((ROOT / "chapters" / "02_cache_storage_shape.ipynb").read_text(encoding="utf-8"))
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    assert any("lesson.transformers_layer_kv(" in c for c in code) and not any("ImportError" in c for c in code)
    monkeypatch.setitem(sys.modules, "transformers", None)
    model = ToyTransformer(ModelConfig(vocab_size=32, d_model=16, n_layer=1, n_head=2, max_seq_len=32)).eval()
    skipped = storage.transformers_layer_kv(model, torch.tensor([[1, 2, 3]])).skipped
    assert skipped and skipped == interop.transformers_missing()
    assert not any("没有安装 transformers" in c for c in code)  # the sentence lives in kvlab
