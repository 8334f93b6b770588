"""What every section of chapter 3.5 shares: the running prompt, corpus prompts, one core left free
(:func:`kvlab.measure.leave_a_core`)."""
from __future__ import annotations

from ..._validate import positive_int
from ...assets import corpus_text
from ...measure import leave_a_core  # noqa: F401  (one home, in measure: 3.5's sections import it from here)
from ...tokenizer import TOKENIZERS


DEFAULT_PROMPT = "人工"  # the course's running example
NEW_TOKENS_LABEL = "生成 token 数"  # the slider of the new tokens, in every panel of the chapter that has one


def corpus_prompts(tokenizer, prompt_len: int, batch_size: int, stride: int = 53) -> list[list[int]]:
    """``batch_size`` different prompts of exactly ``prompt_len`` tokens: windows of the corpus ``stride`` apart.
    The corpus is the training text of the demo model ``tokenizer`` belongs to (Chinese for any other tokenizer)."""
    need = stride * (positive_int("batch_size", batch_size) - 1) + positive_int("prompt_len", prompt_len)
    text = corpus_text(next((lang for lang, kind in TOKENIZERS.items() if isinstance(tokenizer, kind)), "zh"))
    if need > len(text):
        raise ValueError(f"batch_size: {batch_size} windows of {prompt_len} tokens need {need} characters of the "
                         f"corpus, which has {len(text)}")
    ids = tokenizer.encode(text[:need])
    if len(ids) < need:  # a subword tokenizer (the English model's) writes several characters per token
        ids = tokenizer.encode(text)
        if len(ids) < need:
            raise ValueError(f"batch_size: {batch_size} windows of {prompt_len} tokens need {need} tokens of the "
                             f"corpus, which has {len(ids)}")
    return [ids[b * stride: b * stride + prompt_len] for b in range(batch_size)]
