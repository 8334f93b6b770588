"""Architecture hyper-parameters of the toy LLaMA-style model."""
from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, fields

from ._validate import positive_float, positive_int

FP32_TINY = 1.1754943508222875e-38  # smallest normal float32


def default_d_ff(d_model: int, multiple_of: int = 64) -> int:
    """LLaMA's SwiGLU width: 2/3 of 4*d_model, rounded up to ``multiple_of``.

    Three SwiGLU matrices of this width hold as many weights as two of 4*d_model
    (GPT-2's MLP); d_model=768 gives 2048.
    """
    hidden = (8 * d_model) // 3
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


@dataclass
class ModelConfig:
    """Hyper-parameters of :class:`~kvlab.model.ToyTransformer`.

    ``n_kv_head`` defaults to ``n_head`` (classic multi-head attention); fewer KV
    heads give grouped-query attention (GQA), one gives multi-query (MQA).
    ``head_dim`` defaults to ``d_model // n_head`` and ``d_ff`` to LLaMA's rule.
    Every impossible value raises ``ValueError`` naming the field.
    """

    vocab_size: int
    d_model: int
    n_layer: int
    n_head: int
    n_kv_head: int | None = None
    head_dim: int | None = None
    d_ff: int | None = None
    max_seq_len: int = 2048
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_layer", "n_head", "max_seq_len"):
            setattr(self, name, positive_int(name, getattr(self, name)))
        self.n_kv_head = self.n_head if self.n_kv_head is None else positive_int("n_kv_head", self.n_kv_head)
        if self.n_head % self.n_kv_head:
            raise ValueError(
                f"n_kv_head ({self.n_kv_head}) must divide n_head ({self.n_head}): "
                "each KV head is shared by a whole group of query heads"
            )
        if self.head_dim is None:
            if self.d_model % self.n_head:
                raise ValueError(
                    f"head_dim: d_model ({self.d_model}) is not divisible by n_head ({self.n_head}); "
                    "pass head_dim explicitly or choose sizes that divide"
                )
            self.head_dim = self.d_model // self.n_head
        else:
            self.head_dim = positive_int("head_dim", self.head_dim)
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for rotary position embeddings (RoPE), got {self.head_dim}")
        self.d_ff = default_d_ff(self.d_model) if self.d_ff is None else positive_int("d_ff", self.d_ff)
        # RoPE's frequencies are theta ** (-2i / D): a base at or below 1 makes them 1 or growing
        # (a denormal base makes them infinite, and every logit NaN). LLaMA uses 10,000.
        self.rope_theta = positive_float("rope_theta", self.rope_theta, minimum=1.0)
        # eps keeps 1/sqrt(mean(x^2) + eps) finite; below fp32's smallest normal number it rounds to 0.
        self.norm_eps = positive_float("norm_eps", self.norm_eps, minimum=FP32_TINY / 2, maximum=1.0)

    @property
    def n_rep(self) -> int:
        """How many query heads share one KV head."""
        return self.n_head // self.n_kv_head

    def n_params(self) -> int:
        """Exact parameter count (embedding and untied LM head included)."""
        d, f, v = self.d_model, self.d_ff, self.vocab_size
        attn = d * self.n_head * self.head_dim * 2 + d * self.n_kv_head * self.head_dim * 2
        per_layer = attn + 3 * d * f + 2 * d  # q,o + k,v; SwiGLU; two RMSNorm weights
        return 2 * v * d + self.n_layer * per_layer + d  # embedding + head; layers; final norm

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ModelConfig":
        """A config from its ``to_dict()`` form; ValueError naming unknown or missing fields."""
        if not isinstance(data, dict):
            raise ValueError(f"config must be a dict of fields, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"config: unknown field(s) {sorted(unknown)}")
        missing = [f.name for f in fields(cls) if f.default is MISSING and f.name not in data]
        if missing:
            raise ValueError(f"config: missing field(s) {missing}")
        return cls(**data)
