"""Where the course's data files live (a source checkout or an installed wheel)."""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

DEMO_WEIGHTS = "demo_model.safetensors"
DEMO_CONFIG = "demo_config.json"
DEMO_TOKENIZER = "demo_tokenizer.json"
CORPUS = "corpus_zh.txt"


def assets_dir() -> Path:
    """``$KVLAB_ASSETS``, else ``assets/`` beside the package (checkout), else the copy packaged in the wheel."""
    env = os.environ.get("KVLAB_ASSETS")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "assets", here / "assets"):
        if (candidate / CORPUS).exists():
            return candidate
    return here.parent / "assets"


@lru_cache(maxsize=1)
def corpus_text() -> str:
    """The demo model's training text, as written (every character is in its vocabulary)."""
    return (assets_dir() / CORPUS).read_text(encoding="utf-8")
