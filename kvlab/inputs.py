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

import numpy as np


class InputError(ValueError):
    """A control holds a value the lesson cannot use. ``control`` is the label on screen."""

    def __init__(self, control: str, problem: str):
        self.control = control
        self.problem = problem
        super().__init__(f"「{control}」{problem}")


MAX_DIGITS = 15  # a typed whole number longer than this is far beyond every control's range (and int() stays cheap)


def shown(value) -> str:
    """``value`` as a message shows it: whole numbers with separators, floats with every digit that tells them apart
    from a bound (1.0000001, not 1), anything long cut short."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if abs(int(value)) < 10 ** MAX_DIGITS:
            return f"{int(value):,}"
        return f"一个约 {int(abs(int(value)).bit_length() * 0.30103) + 1:,} 位的整数"  # (str() of it can be slow)
    if isinstance(value, float):
        return f"{value:.12g}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _real(control: str, value, kind: str):
    """``value`` as an exact ``int`` when it is a whole number of any real type (numpy, Fraction, float), else the
    ``float`` it is; :class:`InputError` for what is not a real number or does not fit a float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(control, f"需要一个{kind}，收到的是 {shown(value)}")
    if isinstance(value, numbers.Integral):
        return int(value)
    try:
        as_float = float(value)
    except (OverflowError, ValueError):
        raise InputError(control, f"需要一个有限的{kind}，收到的是 {shown(value)}") from None
    if not math.isfinite(as_float):
        raise InputError(control, f"需要一个有限的{kind}，收到的是 {as_float}")
    if as_float.is_integer() and value == int(as_float):  # exact: Fraction(5, 2) is not 2.0
        return int(as_float)
    return as_float


def whole_number(control: str, value, low: int, high: int) -> int:
    """``value`` (a whole number of any real type: 3, 3.0, numpy's 3) as an ``int`` in ``[low, high]``, else
    :class:`InputError`; 2.5 is refused, never truncated."""
    number = _real(control, value, "整数")
    if not isinstance(number, int):
        raise InputError(control, f"需要一个整数，收到的是 {shown(number)}")
    if not low <= number <= high:
        raise InputError(control, f"应在 {low:,} 到 {high:,} 之间，收到的是 {shown(number)}")
    return number


def positive_number(control: str, value, high: float) -> float:
    """``value`` as a finite ``float`` in ``(0, high]``, else :class:`InputError`."""
    number = _real(control, value, "数")
    if not 0 < number <= high:
        raise InputError(control, f"应大于 0 且不超过 {high:,g}，收到的是 {shown(number)}")
    return float(number)


def yes_no(control: str, value) -> bool:
    """A checkbox's value: ``True`` or ``False`` (numpy's too), else :class:`InputError` ("False" is not True)."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(control, f"只能是 True 或 False（勾上或不勾），收到的是 {shown(value)}")
    return bool(value)


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
            values.append(whole_number(control, _typed_whole(control, p.strip()), low, high))
        else:
            values.append(whole_number(control, p, low, high))
    return values


def _typed_whole(control: str, text: str) -> int:
    """One number typed into a box: ASCII digits with at most one sign; superscripts, circled or other scripts'
    digits and "++5" are refused with a message, and so is a number of more than MAX_DIGITS digits."""
    shown_text = text if len(text) <= 20 else text[:17] + "…"
    digits = text[1:] if text[:1] in "+-" else text
    if not (digits.isascii() and digits.isdigit()):
        raise InputError(control, f"里的「{shown_text}」不是整数（请只用 0-9 这十个数字）")
    if text.startswith("-"):
        raise InputError(control, f"里的 {shown_text} 不是正整数")
    if len(digits.lstrip("0")) > MAX_DIGITS:
        raise InputError(control, f"里的数有 {len(digits.lstrip('0')):,} 位，远超这个控件的范围")
    return int(digits)
