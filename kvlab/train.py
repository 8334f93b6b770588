"""Train a demo model: ``python -m kvlab.train [--lang zh|en] [--replace-shipped]``.

``--lang zh`` (the default) trains the Chinese character model on corpus_zh.txt; ``--lang en`` the English
subword model on corpus_en.txt (its byte-level BPE tokenizer is trained first, on the same text: see
:class:`~kvlab.tokenizer.SubwordTokenizer`). Same architecture and training recipe for both.
Deterministic (fixed seed, fixed window order) and small enough for a 2-core CPU in under three minutes.
Writes the language's model files (weights as safetensors, config, tokenizer, the training text) to
``./trained-demo-model/`` by default; the course uses it with ``KVLAB_ASSETS=<that folder>``. Only
``--replace-shipped`` writes over the model the chapters ship with (restore it with ``git checkout assets/``).

Nothing is saved unless the model can serve the chapters: every loss finite, every weight finite, and a
vocabulary that holds every prompt the chapters give the model (collected from kvlab's lessons and exercises
and from the notebooks' code cells by :func:`chapter_prompts`). Bad arguments are usage errors, checked
before training starts, including the memory a batch would need.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import json
import math
import os
import pkgutil
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tqdm.auto import tqdm

from ._validate import positive_float, positive_int, seed_value
from .assets import DEMO_MODELS, assets_dir, corpus_text, demo_assets
from .cli import usage_error
from .config import ModelConfig
from .device import check_fits
from .model import ToyTransformer
from .tokenizer import TOKENIZERS, show_character

DEFAULT_OUT = "trained-demo-model"  # relative to the current directory
MAX_STEPS = 100_000  # about 3 hours on a 2-core CPU at the default batch
RUNTIME_BYTES = 96 * 2**20  # autograd's and the kernels' workspaces on first use (about 65 MiB measured)
CHAPTERS = Path(__file__).resolve().parent.parent / "chapters"  # absent in an installed wheel
LANG_CHAPTERS = {"zh": "", "en": "en"}  # each edition's notebooks, under CHAPTERS


class TrainingRefused(Exception):
    """The trained model (or the corpus it would be trained on) cannot serve the chapters; nothing is saved."""


@dataclass
class TrainConfig:
    steps: int = 1200
    batch_size: int = 32
    seq_len: int = 64
    lr: float = 3e-3
    warmup: int = 50
    weight_decay: float = 0.01
    seed: int = 0

    def __post_init__(self):
        self.steps = positive_int("steps", self.steps, maximum=MAX_STEPS)
        self.batch_size = positive_int("batch_size", self.batch_size)
        self.seq_len = positive_int("seq_len", self.seq_len, maximum=demo_model_config(1).max_seq_len)
        self.warmup = positive_int("warmup", self.warmup)
        self.lr = positive_float("lr", self.lr)
        self.seed = seed_value("seed", self.seed)


def demo_model_config(vocab_size: int) -> ModelConfig:
    """The demo architecture: 4 layers, 4 query heads sharing 2 KV heads (GQA), d_model 128."""
    return ModelConfig(vocab_size=vocab_size, d_model=128, n_layer=4, n_head=4, n_kv_head=2, max_seq_len=256)


def parameter_bytes(vocab_size: int) -> int:
    """fp32 weights, their gradients and AdamW's two moments."""
    return 4 * 4 * demo_model_config(vocab_size).n_params()


def training_bytes(cfg: TrainConfig, vocab_size: int, text_chars: int = 0) -> int:
    """An upper estimate of what training allocates: the runtime's first-use workspaces, :func:`parameter_bytes`,
    the token ids, and per token of a batch the fp32 activations kept for the backward pass (per layer about
    24 d_model + 6 d_ff values, and the attention scores and weights of its row; the logits, log-softmax and
    their gradients over the vocabulary). Measured on the demo model (tests/test_train.py): about 65 MiB fixed
    and 65 KB per token; this says 96 MiB and 105-130 KB."""
    c = demo_model_config(vocab_size)
    per_layer = 24 * c.d_model + 6 * c.d_ff + 2 * c.n_head * cfg.seq_len
    per_token = 4 * (c.n_layer * per_layer + 4 * vocab_size)
    batch = cfg.batch_size * (cfg.seq_len + 1) * per_token
    return RUNTIME_BYTES + parameter_bytes(vocab_size) + 8 * text_chars + batch


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up, then cosine decay to 10% of the peak."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def final_loss(losses: list[float], last: int = 50) -> tuple[float, int]:
    """The mean loss of the last ``last`` steps (all of them when there are fewer), and how many that was."""
    tail = losses[-last:]
    return sum(tail) / len(tail), len(tail)


def train(text: str, cfg: TrainConfig, progress: bool = True, lang: str = "zh"):
    """Train a fresh demo model of ``lang`` (its tokenizer first) on ``text``. Returns (model, tokenizer, losses,
    seconds).

    Stops with :class:`TrainingRefused` at the first loss that is not finite (the weights are lost by then)."""
    torch.manual_seed(cfg.seed)
    tokenizer = TOKENIZERS[demo_assets(lang).lang].from_text(text)
    data = torch.tensor(tokenizer.encode(text), dtype=torch.long)
    if len(data) <= cfg.seq_len + 1:
        raise ValueError(f"text: {len(data)} tokens is too short for seq_len={cfg.seq_len}")
    model = ToyTransformer(demo_model_config(tokenizer.vocab_size), seed=cfg.seed)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(cfg.seed)
    offsets = torch.arange(cfg.seq_len + 1)
    losses = []
    start = time.perf_counter()
    bar = tqdm(range(cfg.steps), desc="training", disable=not progress)
    model.train()
    for step in bar:
        starts = torch.randint(0, len(data) - cfg.seq_len - 1, (cfg.batch_size,), generator=gen)
        windows = data[starts[:, None] + offsets]  # [B, seq_len + 1]
        logits = model(windows[:, :-1])  # [B, seq_len, vocab]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1))
        if not math.isfinite(loss.item()):
            raise TrainingRefused(f"the loss is not finite ({loss.item()}) at step {step + 1} of {cfg.steps}; "
                                  f"try a smaller learning rate --lr (this run: {cfg.lr:g})")
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % 10 == 0 or step == cfg.steps - 1:
            bar.set_postfix(loss=f"{sum(losses[-10:]) / len(losses[-10:]):.3f}")
    model.eval()
    return model, tokenizer, losses, time.perf_counter() - start


# -- what the chapters give the model -------------------------------------------------------------------------
PROMPT_CONSTANT = re.compile(r"(^|_)PROMPTS?$")  # DEFAULT_PROMPT, LAB_PROMPT, PROMPTS, ...
PROMPT_FIELDS = ("prompt", "prompts", "previous", "text")  # parameters, dataclass fields, notebook variables


def _texts(value) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, (tuple, list)):
        return [v for v in value if isinstance(v, str) and v]
    return []


def _module_prompts(module, lang: str = "zh") -> list[str]:
    """``lang``'s texts of a prompts phrasebook (a :class:`~kvlab.phrases.Phrasebook` named ``*.prompts``); in
    Chinese also constants named ``*PROMPT``/``*PROMPTS``, string defaults of prompt/text parameters, and prompt
    fields of the dataclass cases a module lists (exercise cases on the demo model)."""
    from .phrases import Phrasebook

    found = []
    for name, value in vars(module).items():
        if isinstance(value, Phrasebook):
            if value.name.endswith(".prompts"):
                found += [t for t in value.texts[lang].values() if t]
        elif lang != "zh":
            continue
        elif PROMPT_CONSTANT.search(name):
            found += _texts(value)
        elif inspect.isfunction(value) and value.__module__ == module.__name__:
            found += [t for p in inspect.signature(value).parameters.values() if p.name in PROMPT_FIELDS
                      for t in _texts(p.default)]
        elif isinstance(value, (tuple, list)):
            found += [t for item in value if dataclasses.is_dataclass(item) and not isinstance(item, type)
                      for f in PROMPT_FIELDS for t in _texts(getattr(item, f, None))]
    return found


def _notebook_prompts(source: str) -> list[str]:
    """String literals a code cell passes to ``.encode(...)`` or as ``prompt=``/``text=``, or assigns to a
    variable named prompt/text."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        values = []
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "encode":
                values += node.args
            values += [k.value for k in node.keywords if k.arg in PROMPT_FIELDS]
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in PROMPT_FIELDS
                                                  for t in node.targets):
            values.append(node.value)
        found += [v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value]
    return found


def chapter_prompts(chapters: Path = CHAPTERS, lang: str = "zh") -> list[str]:
    """Every prompt the chapters of ``lang``'s edition give its demo model, collected (not listed by hand): from
    kvlab's lesson and exercise modules (their prompts phrasebooks in ``lang``; in Chinese also the prompt constants
    and defaults) and, in a checkout, from the code cells of ``lang``'s notebooks (``chapters/``, ``chapters/en/``)."""
    from . import exercises, lessons

    lang = demo_assets(lang).lang
    found = []
    for package in (lessons, exercises):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith(".__main__"):
                found += _module_prompts(importlib.import_module(info.name), lang)
    chapters = chapters / LANG_CHAPTERS[lang]
    for notebook in sorted(chapters.glob("*.ipynb")) if chapters.is_dir() else []:
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        for cell in cells:
            if cell["cell_type"] == "code":
                found += _notebook_prompts("".join(cell["source"]))
    return sorted(set(found))


def check_prompts(tokenizer, prompts: list[str], what: str) -> None:
    """:class:`TrainingRefused` unless ``tokenizer`` can write every one of ``prompts``."""
    unreadable = [p for p in prompts if tokenizer.unknown(p)]
    if unreadable:
        chars = tokenizer.unknown("".join(unreadable))
        shown = "".join(show_character(c) for c in chars[:12]) + (f" (+{len(chars) - 12} more)" if len(chars) > 12
                                                                   else "")
        raise TrainingRefused(f"{what} cannot write {len(unreadable)} of the chapters' {len(prompts)} prompts "
                              f"(e.g. 「{unreadable[0]}」): {shown} are not in its vocabulary")


@torch.no_grad()
def check_trained(model: ToyTransformer, tokenizer, prompts: list[str], cfg: TrainConfig) -> None:
    """:class:`TrainingRefused` unless every weight, and the logits of every chapter prompt, are finite."""
    bad = [name for name, t in model.state_dict().items() if not torch.isfinite(t).all()]
    if bad:
        raise TrainingRefused(f"the trained weights are not finite ({', '.join(bad[:3])}); try a smaller learning "
                              f"rate --lr (this run: {cfg.lr:g})")
    check_prompts(tokenizer, prompts, "the trained tokenizer")
    for prompt in prompts:
        logits = model(torch.tensor([tokenizer.encode(prompt)[-model.config.max_seq_len:]]))
        if not torch.isfinite(logits).all():
            raise TrainingRefused(f"the model's logits for 「{prompt}」 are not finite; try a smaller learning rate "
                                  f"--lr (this run: {cfg.lr:g})")


# -- saving ---------------------------------------------------------------------------------------------------
def _replace(path: Path, write) -> None:
    """Write through a temporary file beside ``path``, then rename: a failure never leaves half a file."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def save(model, tokenizer, cfg: TrainConfig, losses, seconds, out: Path, text: str, lang: str = "zh") -> list[Path]:
    """Write ``lang``'s model files: weights, config (with the training record), tokenizer, training text."""
    out.mkdir(parents=True, exist_ok=True)
    weights = {k: v.contiguous() for k, v in model.state_dict().items()}
    mean, n = final_loss(losses)
    meta = {"model": model.config.to_dict(), "training": asdict(cfg) | {
        "final_loss_mean": round(mean, 4), "final_loss_steps": n, "seconds": round(seconds, 1),
        "torch": torch.__version__}}
    paths = [out / name for name in demo_assets(lang).files]
    _replace(paths[0], lambda p: save_file(weights, str(p), metadata={"format": "pt"}))
    _replace(paths[1], lambda p: p.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n",
                                              encoding="utf-8"))
    _replace(paths[2], tokenizer.save)
    _replace(paths[3], lambda p: p.write_text(text, encoding="utf-8"))
    return paths


# -- the command line -----------------------------------------------------------------------------------------
def read_corpus(parser, path: Path | None, lang: str = "zh") -> str:
    if path is None:
        try:
            return corpus_text(lang)
        except ValueError as exc:  # the shipped corpus is missing or broken: its restore command
            usage_error(parser, f"corpus: {exc}")
    if not path.is_file():
        usage_error(parser, f"corpus: {path} is not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        usage_error(parser, f"corpus: {path} cannot be read as UTF-8 text ({exc})")
    if not text.strip():
        usage_error(parser, f"corpus: {path} is empty")
    return text


def output_folder(parser, out: Path | None, replace_shipped: bool) -> Path:
    """Where to write: ``--out`` or ./trained-demo-model; the shipped assets only with ``--replace-shipped``."""
    shipped = assets_dir()
    if replace_shipped:
        if out is not None and out.resolve() != shipped.resolve():
            usage_error(parser, f"out: --replace-shipped writes to the shipped assets ({shipped}); drop --out {out}")
        out = shipped
    else:
        out = Path(DEFAULT_OUT) if out is None else out
        if out.resolve() == shipped.resolve():
            usage_error(parser, f"out: {out} holds the model the chapters ship with; add --replace-shipped to "
                                "write over it (`git checkout assets/` restores it)")
    if out.exists() and not out.is_dir():
        usage_error(parser, f"out: {out} is a file, not a folder")
    existing = next(p for p in [out.resolve(), *out.resolve().parents] if p.exists())
    if not os.access(existing, os.W_OK):
        usage_error(parser, f"out: {existing} is not writable")
    return out


def parse_args(argv=None):
    """The command line -> (config, training text, output folder, chapter prompts); a usage error (exit code 2)
    for anything that would fail or be refused later, before any training starts."""
    p = argparse.ArgumentParser(prog="python -m kvlab.train", description=__doc__.splitlines()[0])
    d = TrainConfig()
    p.add_argument("--steps", type=int, default=d.steps, help=f"optimizer steps (1 to {MAX_STEPS:,})")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--seq-len", type=int, default=d.seq_len,
                   help=f"tokens per training window (1 to {demo_model_config(1).max_seq_len})")
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate")
    p.add_argument("--seed", type=int, default=d.seed, help="0 to 2**64 - 1")
    p.add_argument("--lang", default="zh", help=f"which demo model: {' or '.join(DEMO_MODELS)} (default: zh)")
    p.add_argument("--corpus", type=Path, default=None,
                   help="training text (default: the shipped corpus_zh.txt, or corpus_en.txt with --lang en)")
    p.add_argument("--out", type=Path, default=None, help=f"output folder (default: ./{DEFAULT_OUT}/)")
    p.add_argument("--replace-shipped", action="store_true",
                   help="write over the model the chapters ship with (assets/); restore it with git checkout assets/")
    args = p.parse_args(argv)
    try:
        cfg = TrainConfig(steps=args.steps, batch_size=args.batch_size, seq_len=args.seq_len, lr=args.lr,
                          seed=args.seed)
        lang = demo_assets(args.lang).lang
    except ValueError as exc:
        usage_error(p, exc)
    out = output_folder(p, args.out, args.replace_shipped)
    text = read_corpus(p, args.corpus, lang)
    try:
        tokenizer = TOKENIZERS[lang].from_text(text)
        tokens = len(tokenizer.encode(text))
    except ValueError as exc:
        usage_error(p, f"corpus: {exc}")
    if tokens <= cfg.seq_len + 1:
        usage_error(p, f"seq_len: {cfg.seq_len} needs a corpus of more than {cfg.seq_len + 1} tokens; "
                       f"it has {tokens}")
    prompts = chapter_prompts(lang=lang)
    try:
        check_prompts(tokenizer, prompts, "a model trained on this corpus")
        check_fits(training_bytes(cfg, tokenizer.vocab_size, len(text)), "cpu",
                   f"training on batches of {cfg.batch_size:,} windows of {cfg.seq_len + 1} tokens", "batch_size")
    except TrainingRefused as exc:
        usage_error(p, f"corpus: {exc}")
    except ValueError as exc:
        usage_error(p, exc)
    return cfg, text, out, prompts, lang


def main(argv=None) -> int:
    cfg, text, out, prompts, lang = parse_args(argv)
    try:
        model, tokenizer, losses, seconds = train(text, cfg, lang=lang)
        check_trained(model, tokenizer, prompts, cfg)
    except TrainingRefused as exc:
        print(f"kvlab.train: nothing was saved: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kvlab.train: interrupted; nothing was saved", file=sys.stderr)
        return 130
    paths = save(model, tokenizer, cfg, losses, seconds, out, text, lang)
    mean, n = final_loss(losses)
    print(f"trained {model.config.n_params():,} parameters on {len(text):,} characters "
          f"({len(tokenizer.encode(text)):,} tokens, a vocabulary of {tokenizer.vocab_size}) in {seconds:.1f} s")
    print(f"loss: first step {losses[0]:.3f}, mean of the last {n} steps {mean:.3f}")
    for path in paths:
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    if out.resolve() != assets_dir().resolve():
        print(f"use it in the course: KVLAB_ASSETS={out.resolve()} python -m kvlab.launch")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
