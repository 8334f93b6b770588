"""Train the demo model: ``python -m kvlab.train``.

Deterministic (fixed seed, fixed window order) and small enough for a 2-core CPU in
under three minutes. Writes the weights (safetensors), config and tokenizer to assets/.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tqdm.auto import tqdm

from ._validate import positive_float, positive_int
from .assets import CORPUS, DEMO_CONFIG, DEMO_TOKENIZER, DEMO_WEIGHTS, assets_dir
from .config import ModelConfig
from .model import ToyTransformer
from .tokenizer import CharTokenizer


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
        for name in ("steps", "batch_size", "seq_len", "warmup"):
            setattr(self, name, positive_int(name, getattr(self, name)))
        self.lr = positive_float("lr", self.lr)


def demo_model_config(vocab_size: int) -> ModelConfig:
    """The demo architecture: 4 layers, 4 query heads sharing 2 KV heads (GQA), d_model 128."""
    return ModelConfig(vocab_size=vocab_size, d_model=128, n_layer=4, n_head=4, n_kv_head=2, max_seq_len=256)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up, then cosine decay to 10% of the peak."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train(text: str, cfg: TrainConfig, progress: bool = True):
    """Train a fresh demo model on ``text``. Returns (model, tokenizer, losses, seconds)."""
    torch.manual_seed(cfg.seed)
    tokenizer = CharTokenizer.from_text(text)
    data = torch.tensor(tokenizer.encode(text), dtype=torch.long)
    if len(data) <= cfg.seq_len + 1:
        raise ValueError(f"text: {len(data)} characters is too short for seq_len={cfg.seq_len}")
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


def save(model, tokenizer, cfg: TrainConfig, losses, seconds, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    weights = {k: v.contiguous() for k, v in model.state_dict().items()}
    paths = [out / DEMO_WEIGHTS, out / DEMO_CONFIG, out / DEMO_TOKENIZER]
    save_file(weights, str(paths[0]), metadata={"format": "pt"})
    final = sum(losses[-50:]) / len(losses[-50:])
    meta = {"model": model.config.to_dict(), "training": asdict(cfg) | {
        "final_loss_mean_last_50": round(final, 4), "seconds": round(seconds, 1), "torch": torch.__version__}}
    paths[1].write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tokenizer.save(paths[2])
    return paths


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = TrainConfig()
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--seq-len", type=int, default=d.seq_len)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--corpus", type=Path, default=None, help="training text (default: assets/corpus_zh.txt)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: assets/)")
    args = p.parse_args(argv)
    try:
        cfg = TrainConfig(steps=args.steps, batch_size=args.batch_size, seq_len=args.seq_len, lr=args.lr,
                          seed=args.seed)
    except ValueError as exc:
        p.error(str(exc))
    corpus = args.corpus or assets_dir() / CORPUS
    text = corpus.read_text(encoding="utf-8")
    model, tokenizer, losses, seconds = train(text, cfg)
    paths = save(model, tokenizer, cfg, losses, seconds, args.out or assets_dir())
    print(f"trained {model.config.n_params():,} parameters on {len(text):,} characters "
          f"({tokenizer.vocab_size} distinct) in {seconds:.1f} s")
    print(f"loss: first step {losses[0]:.3f}, mean of last 50 steps {sum(losses[-50:]) / 50:.3f}")
    for path in paths:
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
