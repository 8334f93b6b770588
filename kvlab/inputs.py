"""Learner-facing checks for the values a panel's controls hold.

The API (``kv_cache_bytes``, ``generate`` ...) raises ``ValueError`` naming its argument in
English. A lesson's ``render_*`` function instead checks the values the learner typed or
dragged with these helpers, which raise :class:`InputError`: a ``ValueError`` whose message
is Chinese and names the control as the learner sees it (「批次 B」, not ``batch_size``).
:class:`kvlab.viz.widgets.Panel` shows that message in place of the figures' numbers.
"""
from __future__ import annotations

import math
import numbers


class InputError(ValueError):
    """A control holds a value the lesson cannot use. ``control`` is the label on screen."""

    def __init__(self, control: str, problem: str):
        self.control = control
        self.problem = problem
        super().__init__(f"「{control}」{problem}")


def whole_number(control: str, value, low: int, high: int) -> int:
    """``value`` as an ``int`` in ``[low, high]``, else :class:`InputError`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(control, f"需要一个整数，收到的是 {value!r}")
    if isinstance(value, float) and not value.is_integer():
        raise InputError(control, f"需要一个整数，收到的是 {value}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(control, f"需要一个有限的整数，收到的是 {value}")
    value = int(value)
    if not low <= value <= high:
        raise InputError(control, f"应在 {low:,} 到 {high:,} 之间，收到的是 {value:,}")
    return value


def positive_number(control: str, value, high: float) -> float:
    """``value`` as a finite ``float`` in ``(0, high]``, else :class:`InputError`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(control, f"需要一个数，收到的是 {value!r}")
    value = float(value)
    if not math.isfinite(value) or not 0 < value <= high:
        raise InputError(control, f"应大于 0 且不超过 {high:,g}，收到的是 {value:g}")
    return value


def choice(control: str, value, options):
    """``value`` if it is one of ``options``, else :class:`InputError`."""
    if value not in options:
        shown = "、".join(str(o) for o in options)
        raise InputError(control, f"只能从 {shown} 中选择，收到的是 {value!r}")
    return value


def one_of_numbers(control: str, value, options) -> int:
    """``value`` as one of the whole numbers ``options`` (a slider's stops), else :class:`InputError`."""
    return choice(control, whole_number(control, value, min(options), max(options)), list(options))


def prompt_tokens(control: str, text, tokenizer, max_chars: int) -> tuple[str, list[int]]:
    """A prompt typed into ``control``: ``(text without surrounding blanks, its token ids)``, else
    :class:`InputError` (empty, longer than ``max_chars``, or holding characters the tokenizer does not know)."""
    if not isinstance(text, str) or not text.strip():
        raise InputError(control, "是空的：请输入至少 1 个字，例如「人工」")
    text = text.strip()
    if len(text) > max_chars:
        raise InputError(control, f"最长 {max_chars} 个字，收到了 {len(text)} 个")
    missing = tokenizer.unknown(text)
    if missing:
        shown = "、".join(f"「{c}」" if c.isprintable() and not c.isspace() else repr(c) for c in missing[:8])
        raise InputError(control, f"含有演示模型词表之外的字符：{shown}（它只认识训练语料里出现过的字）")
    return text, tokenizer.encode(text)


def whole_numbers(control: str, text, low: int, high: int, max_count: int) -> list[int]:
    """"12, 40, 7" (commas, Chinese commas or spaces) -> ``[12, 40, 7]``, each in ``[low, high]``."""
    if isinstance(text, (list, tuple)):
        parts = list(text)
    elif isinstance(text, str):
        parts = [p for p in text.replace("，", ",").replace("、", ",").replace(" ", ",").split(",") if p.strip()]
    else:
        raise InputError(control, f"需要用逗号分隔的整数，例如 12, 40, 7；收到的是 {text!r}")
    if not parts:
        raise InputError(control, "是空的：请输入用逗号分隔的整数，例如 12, 40, 7")
    if len(parts) > max_count:
        raise InputError(control, f"最多 {max_count} 个数，收到了 {len(parts)} 个")
    values = []
    for p in parts:
        if isinstance(p, str):
            p = p.strip()
            if not p.lstrip("+").isdigit():
                if p.startswith("-") and p[1:].isdigit():
                    raise InputError(control, f"里的 {p} 不是正整数")
                raise InputError(control, f"里的「{p}」不是整数")
            p = int(p)
        values.append(whole_number(control, p, low, high))
    return values
