"""Hand a kvlab model to transformers: ``LlamaForCausalLM`` with identical weights."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch


TRANSFORMERS_FLOOR = "4.45"  # the course install's floor pin (requirements.txt and pyproject.toml say the same)


def _version_tuple(text: str) -> tuple[int, ...]:
    """"4.45.2" -> (4, 45, 2); "5.0.0rc1" -> (5, 0, 0): the leading numbers of each dotted part."""
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(itertools.takewhile(str.isdigit, piece))
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def transformers_missing() -> str | None:
    """None when transformers can be used here; otherwise, in Chinese for the chapters, what is missing and the
    commands that install it (transformers is part of the course install, so this shows only in another setup)."""
    try:
        import transformers
    except ImportError as exc:
        what = ("没有安装 transformers" if getattr(exc, "name", None) == "transformers"
                else f"导入 transformers 时出错（{type(exc).__name__}: {exc}）")
    else:
        if _version_tuple(transformers.__version__) >= _version_tuple(TRANSFORMERS_FLOOR):
            return None
        what = f"transformers 的版本是 {transformers.__version__}，课程需要 {TRANSFORMERS_FLOOR} 或更新的版本"
    return (f"{what}：这一步要拿 Hugging Face 的 transformers 库做对照，所以先跳过了。transformers 属于课程的安装："
            f"在一个新的代码格里运行 %pip install \"transformers>={TRANSFORMERS_FLOOR}\"（或在终端、课程目录里运行 "
            "python -m pip install -r requirements.txt），然后重启内核（菜单「Kernel → Restart Kernel」，中文界面是"
            "「内核 → 重启内核」），再从本章开头运行一遍。")


def _require_transformers():
    try:
        import transformers  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised only without the optional dependency
        raise ImportError(
            "kvlab.interop needs 'transformers', part of the course install: "
            f"`python -m pip install -r requirements.txt` or `pip install \"transformers>={TRANSFORMERS_FLOOR}\"`."
        ) from exc


def hf_llama_config(config):
    """A ``transformers.LlamaConfig`` describing the same architecture as a kvlab ``ModelConfig``."""
    _require_transformers()
    from transformers import LlamaConfig

    import inspect

    # transformers 5 takes RoPE settings as `rope_parameters`; 4.x as `rope_theta`.
    if "rope_parameters" in inspect.signature(LlamaConfig.__init__).parameters:
        rope = {"rope_parameters": {"rope_type": "default", "rope_theta": config.rope_theta}}
    else:
        rope = {"rope_theta": config.rope_theta}
    return LlamaConfig(
        **rope,
        vocab_size=config.vocab_size,
        hidden_size=config.d_model,
        intermediate_size=config.d_ff,
        num_hidden_layers=config.n_layer,
        num_attention_heads=config.n_head,
        num_key_value_heads=config.n_kv_head,
        head_dim=config.head_dim,
        max_position_embeddings=config.max_seq_len,
        rms_norm_eps=config.norm_eps,
        tie_word_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
        hidden_act="silu",
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )


@torch.no_grad()
def to_hf_llama(model, attn_implementation: str = "sdpa"):
    """A transformers ``LlamaForCausalLM`` holding exactly ``model``'s weights (same device and dtype)."""
    _require_transformers()
    from transformers import LlamaForCausalLM

    from .model import ToyTransformer

    if not isinstance(model, ToyTransformer):
        raise ValueError(f"model must be a kvlab ToyTransformer, got {type(model).__name__}")
    hf_config = hf_llama_config(model.config)
    hf_config._attn_implementation = attn_implementation
    hf = LlamaForCausalLM(hf_config).to(device=model.device, dtype=model.dtype).eval()

    # kvlab's Linear stores W as (in, out); nn.Linear stores (out, in): transpose.
    src = model.state_dict()
    dst = {
        "model.embed_tokens.weight": src["embed.weight"],
        "model.norm.weight": src["norm.weight"],
        "lm_head.weight": src["lm_head.weight"].T,
    }
    c = model.config
    q_dim, kv_dim = c.n_head * c.head_dim, c.n_kv_head * c.head_dim
    for i in range(c.n_layer):
        ours, theirs = f"layers.{i}.", f"model.layers.{i}."
        dst[theirs + "input_layernorm.weight"] = src[ours + "attn_norm.weight"]
        dst[theirs + "post_attention_layernorm.weight"] = src[ours + "mlp_norm.weight"]
        w_q, w_k, w_v = src[ours + "attn.wqkv.weight"].split([q_dim, kv_dim, kv_dim], dim=1)
        w_gate, w_up = src[ours + "mlp.w_gate_up.weight"].chunk(2, dim=1)
        for name, w in (("self_attn.q_proj", w_q), ("self_attn.k_proj", w_k), ("self_attn.v_proj", w_v),
                        ("self_attn.o_proj", src[ours + "attn.wo.weight"]), ("mlp.gate_proj", w_gate),
                        ("mlp.up_proj", w_up), ("mlp.down_proj", src[ours + "mlp.w_down.weight"])):
            dst[theirs + name + ".weight"] = w.T
    missing, unexpected = hf.load_state_dict({k: v.contiguous() for k, v in dst.items()}, strict=False)
    missing = [m for m in missing if "rotary_emb" not in m]
    if missing or unexpected:
        raise RuntimeError(f"weight mapping incomplete: missing {missing}, unexpected {unexpected}")
    return hf


def hf_cache_of(outputs):
    """The cache a transformers forward returned (``past_key_values``; some versions call it ``cache``)."""
    return getattr(outputs, "cache", None) or outputs.past_key_values


def hf_layer_kv(hf_cache, layer: int):
    """(K, V) of one layer of a transformers cache, each [B, H_kv, S, D].

    transformers >= 4.56 keeps one object per layer (``.layers[i].keys``); older versions keep lists of
    tensors (``.key_cache[i]``); the oldest return tuples of (K, V) per layer.
    """
    if hasattr(hf_cache, "layers"):
        return hf_cache.layers[layer].keys, hf_cache.layers[layer].values
    if hasattr(hf_cache, "key_cache"):
        return hf_cache.key_cache[layer], hf_cache.value_cache[layer]
    return hf_cache[layer][0], hf_cache[layer][1]


# -- running transformers' own caches -------------------------------------------------------------
HF_CACHE_KINDS = ("dynamic", "static")  # DynamicCache (grows by torch.cat), StaticCache (preallocated)


def _accepts(fn, name: str) -> bool:
    import inspect

    return name in inspect.signature(fn).parameters


def hf_new_cache(hf, kind: str, batch_size: int, max_cache_len: int):
    """An empty transformers cache for ``hf``: ``DynamicCache`` ("dynamic") or ``StaticCache`` ("static").

    StaticCache's constructor changed across versions (``max_batch_size``/``batch_size``, ``device`` and
    ``dtype`` in 4.x; allocation on the first update in 5.x), so only the arguments it takes are passed.
    """
    _require_transformers()
    from transformers import DynamicCache, StaticCache

    from ._validate import one_of, positive_int

    one_of("kind", kind, HF_CACHE_KINDS)
    batch_size = positive_int("batch_size", batch_size)
    max_cache_len = positive_int("max_cache_len", max_cache_len)
    if kind == "dynamic":
        return DynamicCache(config=hf.config) if _accepts(DynamicCache.__init__, "config") else DynamicCache()
    kwargs = {"config": hf.config, "max_cache_len": max_cache_len}
    for name, value in (("batch_size", batch_size), ("device", hf.device), ("dtype", hf.dtype)):
        if _accepts(StaticCache.__init__, name):
            kwargs[name] = value
    if "batch_size" not in kwargs and _accepts(StaticCache.__init__, "max_batch_size"):  # before 4.45
        kwargs["max_batch_size"] = batch_size
    return StaticCache(**kwargs)


@dataclass
class HFDecodeRun:
    """A decode with a transformers cache, fed a given token sequence; one entry per forward pass."""

    kind: str  # "dynamic" or "static"
    seq_len: list[int]  # tokens in the cache after each pass
    seconds: list[float]  # wall time of each forward pass (device synchronised)
    layer0_k_address: list[int]  # data_ptr() of layer 0's K tensor after each pass
    layer0_k_len: list[int]  # positions in layer 0's K tensor after each pass (what its attention was given)
    predicted: torch.Tensor  # [B, passes]: transformers' greedy choice after each pass

    @property
    def reallocations(self) -> list[int]:
        """After each pass: how many different K tensors layer 0 has used so far (a new address = a new tensor)."""
        return distinct_so_far(self.layer0_k_address)


def distinct_so_far(addresses: list[int]) -> list[int]:
    """After each entry of a list of tensor addresses: the first address plus every change since."""
    out, count = [], 0
    for i, address in enumerate(addresses):
        count += i == 0 or address != addresses[i - 1]
        out.append(count)
    return out


@torch.no_grad()
def hf_decode_run(hf, tokens: torch.Tensor, prompt_len: int, kind: str) -> HFDecodeRun:
    """Prefill ``tokens[:, :prompt_len]``, then feed the following tokens one per pass (teacher forcing), as
    kvlab's ``generate`` does with the tokens it chose: the same passes, so the same work for the cache.

    ``tokens`` [B, T] (e.g. ``GenerationResult.tokens``): T - prompt_len passes, the last token is never fed.
    """
    from ._validate import positive_int
    from .measure import timed

    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
        raise ValueError(f"tokens must be a [B, T] tensor of token ids, got {getattr(tokens, 'shape', tokens)!r}")
    prompt_len = positive_int("prompt_len", prompt_len, maximum=tokens.shape[1] - 1)
    ids = tokens.to(hf.device)
    B, T = ids.shape
    cache = hf_new_cache(hf, kind, B, T - 1)
    cache_arg = "cache" if _accepts(hf.forward, "cache") else "past_key_values"  # renamed in transformers 5
    with_position = _accepts(hf.forward, "cache_position")  # 4.x wants it with a StaticCache
    seq_len, seconds, addresses, lengths, predicted = [], [], [], [], []
    begin = 0
    for end in [prompt_len, *range(prompt_len + 1, T)]:
        positions = torch.arange(begin, end, device=hf.device)
        kwargs = {cache_arg: cache, "use_cache": True, "position_ids": positions[None].expand(B, -1)}
        if with_position:
            kwargs["cache_position"] = positions
        out, secs = timed(lambda: hf(input_ids=ids[:, begin:end], **kwargs), hf.device)
        seq_len.append(end)
        seconds.append(secs)
        k = hf_layer_kv(cache, 0)[0]  # [B, H_kv, positions, D]
        addresses.append(k.data_ptr())
        lengths.append(k.shape[2])
        predicted.append(out.logits[:, -1].argmax(-1).cpu())
        begin = end
    return HFDecodeRun(kind, seq_len, seconds, addresses, lengths, torch.stack(predicted, dim=1))
