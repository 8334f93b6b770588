"""Where the course's data files live (a source checkout or an installed wheel), and the one error for a missing
or broken one: :class:`AssetError`, naming the file and how to restore it."""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

DEMO_WEIGHTS = "demo_model.safetensors"
DEMO_CONFIG = "demo_config.json"
DEMO_TOKENIZER = "demo_tokenizer.json"
CORPUS = "corpus_zh.txt"
ASSET_FILES = (DEMO_WEIGHTS, DEMO_CONFIG, DEMO_TOKENIZER, CORPUS)  # what a complete assets folder holds

RESTORE = ("restore it with `git checkout assets/` (in a clone of the course) or retrain it with "
           "`python -m kvlab.train --replace-shipped`")


def restore_hint() -> str:
    """How to get a course file back: ``git checkout`` in a clone of the course; in an installed wheel (Colab, a
    hub image), which has no git, reinstalling kvlab."""
    here = Path(__file__).resolve().parent
    if (here.parent / "pyproject.toml").is_file():
        return RESTORE
    from .colab import install_command

    spec = install_command()[-1]
    return (f'restore it by reinstalling kvlab: `python -m pip install --force-reinstall --no-deps "{spec}"` '
            "(or the way you installed it), then restart the kernel")


class AssetError(ValueError):
    """A course data file (``assets/``) is missing, truncated or malformed: the message starts with its name and
    says how to restore it. Panels show it as a problem with the course's files, not with the learner's input."""


def broken(path: Path, problem: str) -> AssetError:
    """The error for a file that is there but cannot be used."""
    return AssetError(f"{path.name}: {problem}. The file at {path} is broken; {restore_hint()}")


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


def asset_path(*names: str) -> list[Path]:
    """The paths of these course files in :func:`assets_dir`; :class:`AssetError` naming every one that is missing."""
    folder = assets_dir()
    paths = [folder / name for name in names]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        what = missing[0] if len(missing) == 1 else str(missing)
        raise AssetError(f"{what}: not found in {folder}; {restore_hint()}")
    return paths


@lru_cache(maxsize=4)
def _read_text(path: Path, mtime_ns: int) -> str:
    return path.read_text(encoding="utf-8")


def corpus_text() -> str:
    """The demo model's training text, as written (every character is in its vocabulary)."""
    (path,) = asset_path(CORPUS)
    try:
        text = _read_text(path, path.stat().st_mtime_ns)  # read once per file version
    except (OSError, UnicodeDecodeError) as exc:
        raise broken(path, f"cannot be read as UTF-8 text ({type(exc).__name__}: {exc})") from None
    if not text.strip():
        raise broken(path, "is empty")
    return text
