"""kvlab: a toy LLaMA-style Transformer with an instrumented KV cache, for learning."""
from .cache import CacheFullError, DynamicKVCache, Int8KVCache, KVCache
from .cache_modes import CACHE_MODES
from .config import ModelConfig
from .device import pick_device
from .generation import GenerationResult, PassRecord, generate
from .language import LANGUAGES, get_language, set_language
from .memory import DTYPE_BITS, format_bytes, kv_bytes_per_token, kv_cache_bytes
from .model import ToyTransformer
from .paged_cache import BlockPool, PagedKVCache, PoolExhaustedError
from .presets import MODEL_PRESETS, ModelPreset
from .resources import apply_thread_budget
from .teaching_caches import KOnlyCache

apply_thread_budget()  # torch counts the node's cores, not this process's quota (a hub's pod, a container)

__all__ = [
    "BlockPool", "CACHE_MODES", "CacheFullError", "DTYPE_BITS", "DynamicKVCache", "GenerationResult", "Int8KVCache",
    "KOnlyCache", "KVCache", "MODEL_PRESETS", "ModelConfig", "ModelPreset", "PagedKVCache", "PassRecord",
    "PoolExhaustedError", "ToyTransformer", "LANGUAGES",
    "format_bytes", "generate", "kv_bytes_per_token", "get_language", "kv_cache_bytes", "load_demo_model", "pick_device",
    "set_language",
]


def load_demo_model(device=None, lang=None):
    """A trained tiny demo model from ``assets/``: returns ``(model, tokenizer)``. ``lang="zh"``: the Chinese
    character model; ``lang="en"``: the English subword model; ``None`` (default): the course's language
    (``set_language``, else ``KVLAB_LANG``, else Chinese); any other code: ValueError."""
    from .demo import load_demo_model as _load

    return _load(device, lang)
