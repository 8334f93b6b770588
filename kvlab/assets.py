"""Where the course's data files live (a source checkout or an installed wheel), and the one error for a missing
or broken one: :class:`AssetError`, naming the file and how to restore it."""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class DemoAssets:
    """The files of one language's demo model in an assets folder."""
    lang: str
    weights: str
    config: str
    tokenizer: str
    corpus: str

    @property
    def files(self) -> tuple[str, ...]:
        return (self.weights, self.config, self.tokenizer, self.corpus)

    @property
    def retrain(self) -> str:
        """The command that trains this model over the shipped one."""
        flag = "" if self.lang == "zh" else f" --lang {self.lang}"
        return f"python -m kvlab.train{flag} --replace-shipped"


DEMO_MODELS = {  # the first is the default: the Chinese edition's character model
    "zh": DemoAssets("zh", "demo_model.safetensors", "demo_config.json", "demo_tokenizer.json", "corpus_zh.txt"),
    "en": DemoAssets("en", "demo_model_en.safetensors", "demo_config_en.json", "demo_tokenizer_en.json",
                     "corpus_en.txt"),
}
DEMO_WEIGHTS, DEMO_CONFIG, DEMO_TOKENIZER, CORPUS = DEMO_MODELS["zh"].files
ASSET_FILES = tuple(name for m in DEMO_MODELS.values() for name in m.files)  # what the shipped assets folder holds


def demo_assets(lang: str = "zh") -> DemoAssets:
    """The demo model of ``lang``; ValueError naming the languages that have one."""
    if not isinstance(lang, str) or lang not in DEMO_MODELS:
        raise ValueError(f"lang: {lang!r} has no demo model; choose one of {', '.join(map(repr, DEMO_MODELS))}")
    return DEMO_MODELS[lang]


def _owner(name: str) -> DemoAssets:
    """The demo model a course file belongs to (the Chinese one for any other name)."""
    return next((m for m in DEMO_MODELS.values() if name in m.files), DEMO_MODELS["zh"])


RESTORE = ("restore it with `git checkout assets/` (in a clone of the course) or retrain it with "
           "`python -m kvlab.train --replace-shipped`")


def restore_hint(name: str = CORPUS) -> str:
    """How to get the course file ``name`` back: ``git checkout`` (or retraining its model) in a clone of the
    course; in an installed wheel (Colab, a hub image), which has no git, reinstalling kvlab."""
    here = Path(__file__).resolve().parent
    if (here.parent / "pyproject.toml").is_file():
        return RESTORE.replace("python -m kvlab.train --replace-shipped", _owner(name).retrain)
    from .colab import install_command

    spec = install_command()[-1]
    return (f'restore it by reinstalling kvlab: `python -m pip install --force-reinstall --no-deps "{spec}"` '
            "(or the way you installed it), then restart the kernel")


class AssetError(ValueError):
    """A course data file (``assets/``) is missing, truncated or malformed: the message starts with its name and
    says how to restore it. Panels show it as a problem with the course's files, not with the learner's input."""


def broken(path: Path, problem: str) -> AssetError:
    """The error for a file that is there but cannot be used."""
    return AssetError(f"{path.name}: {problem}. The file at {path} is broken; {restore_hint(path.name)}")


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
        raise AssetError(f"{what}: not found in {folder}; {restore_hint(missing[0])}")
    return paths


@lru_cache(maxsize=4)
def _read_text(path: Path, mtime_ns: int) -> str:
    return path.read_text(encoding="utf-8")


def corpus_text(lang: str = "zh") -> str:
    """The training text of ``lang``'s demo model, as written (its tokenizer writes every character of it)."""
    (path,) = asset_path(demo_assets(lang).corpus)
    try:
        text = _read_text(path, path.stat().st_mtime_ns)  # read once per file version
    except (OSError, UnicodeDecodeError) as exc:
        raise broken(path, f"cannot be read as UTF-8 text ({type(exc).__name__}: {exc})") from None
    if not text.strip():
        raise broken(path, "is empty")
    return text
