"""Hand a kvlab model to transformers: ``LlamaForCausalLM`` with identical weights."""
from __future__ import annotations

import torch


def _require_transformers():
    try:
        import transformers  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised only without the optional dependency
        raise ImportError(
            "kvlab.interop needs the optional dependency 'transformers'. Install it with "
            "`pip install transformers` (or `pip install -e .[test]`)."
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
