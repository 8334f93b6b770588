"""Learner-facing checks for the values a panel's controls hold.

The API (``kv_cache_bytes``, ``generate`` ...) raises ``ValueError`` naming its argument in
English. A lesson's ``render_*`` function instead checks the values the learner typed or
dragged with these helpers, which raise :class:`InputError`: a ``ValueError`` whose message
is in the course's language (:data:`INPUTS`) and names the control as the learner sees it (「批次 B」, not
``batch_size``). :class:`kvlab.viz.widgets.Panel` shows that message in place of the figures' numbers.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .phrases import Phrasebook

# What a refused control value is told, looked up when it is refused. A lesson's own InputError(label, problem)
# writes its problem in the course's language too; the message puts the control's label before it ("message").
INPUTS = Phrasebook("inputs", {
    "zh": {
        "message": "「{control}」{problem}",
        "whole": "整数",
        "number": "数",
        "need": "需要一个{kind}，收到的是 {got}",
        "need_finite": "需要一个有限的{kind}，收到的是 {got}",
        "long_whole": "一个约 {digits:,} 位的整数",
        "between": "应在 {low:,} 到 {high:,} 之间，收到的是 {got}",
        "positive": "应大于 0 且不超过 {high:,g}，收到的是 {got}",
        "yes_no": "只能是 True 或 False（勾上或不勾），收到的是 {got}",
        "one_of": "只能从 {options} 中选择，收到的是 {got}",
        "list_sep": "、",
        "quoted": "「{text}」",
        "prompt_empty": "是空的：请输入至少 1 个字，例如「{example}」",
        "prompt_long": "最长 {max_chars} 个字，收到了 {n} 个",
        "prompt_unknown": "含有演示模型词表之外的字符：{chars}（它只认识训练语料里出现过的字）",
        "numbers_needed": "需要用逗号分隔的整数，例如 12, 40, 7；收到的是 {got}",
        "numbers_empty": "是空的：请输入用逗号分隔的整数，例如 12, 40, 7",
        "numbers_many": "最多 {max_count} 个数，收到了 {n} 个",
        "typed_not_whole": "里的「{text}」不是整数（请只用 0-9 这十个数字）",
        "typed_negative": "里的 {text} 不是正整数",
        "typed_digits": "里的数有 {digits:,} 位，远超这个控件的范围",
        "prompt_example": "人工",
    },
    "en": {
        "message": "{control}: {problem}",
        "whole": "whole number",
        "number": "number",
        "need": "expects a {kind}, got {got}",
        "need_finite": "expects a finite {kind}, got {got}",
        "long_whole": "a whole number of about {digits:,} digits",
        "between": "must be from {low:,} to {high:,}, got {got}",
        "positive": "must be above 0 and at most {high:,g}, got {got}",
        "yes_no": "must be True or False (ticked or not), got {got}",
        "one_of": "must be one of {options}, got {got}",
        "list_sep": ", ",
        "quoted": "\"{text}\"",
        "prompt_empty": "is empty: type at least one word, for example \"{example}\"",
        "prompt_long": "takes at most {max_chars} characters, got {n}",
        "prompt_unknown": "holds characters outside the demo model's vocabulary: {chars} (it knows only the characters "
                          "of its training corpus)",
        "numbers_needed": "expects whole numbers separated by commas, e.g. 12, 40, 7; got {got}",
        "numbers_empty": "is empty: type whole numbers separated by commas, e.g. 12, 40, 7",
        "numbers_many": "takes at most {max_count} numbers, got {n}",
        "typed_not_whole": "\"{text}\" is not a whole number (use only the digits 0-9)",
        "typed_negative": "{text} is not a positive whole number",
        "typed_digits": "a number of {digits:,} digits is far beyond this control's range",
        "prompt_example": "Artificial",
    },
})


class InputError(ValueError):
    """A control holds a value the lesson cannot use. ``control`` is the label on screen."""

    def __init__(self, control: str, problem: str):
        self.control = control
        self.problem = problem
        super().__init__(INPUTS.say("message", control=control, problem=problem))


MAX_DIGITS = 15  # a typed whole number longer than this is far beyond every control's range (and int() stays cheap)


def shown(value) -> str:
    """``value`` as a message shows it: whole numbers with separators, floats with every digit that tells them apart
    from a bound (1.0000001, not 1), anything long cut short."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if abs(int(value)) < 10 ** MAX_DIGITS:
            return f"{int(value):,}"
        return INPUTS.say("long_whole", digits=int(abs(int(value)).bit_length() * 0.30103) + 1)  # (str() is slow)
    if isinstance(value, float):
        return f"{value:.12g}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _real(control: str, value, kind: str):
    """``value`` as an exact ``int`` when it is a whole number of any real type (numpy, Fraction, float), else the
    ``float`` it is; :class:`InputError` for what is not a real number or does not fit a float. ``kind``: the
    :data:`INPUTS` key of what is expected ("whole" or "number")."""
    kind = INPUTS.say(kind)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(control, INPUTS.say("need", kind=kind, got=shown(value)))
    if isinstance(value, numbers.Integral):
        return int(value)
    try:
        as_float = float(value)
    except (OverflowError, ValueError):
        raise InputError(control, INPUTS.say("need_finite", kind=kind, got=shown(value))) from None
    if not math.isfinite(as_float):
        raise InputError(control, INPUTS.say("need_finite", kind=kind, got=as_float))
    if as_float.is_integer() and value == int(as_float):  # exact: Fraction(5, 2) is not 2.0
        return int(as_float)
    return as_float


def whole_number(control: str, value, low: int, high: int) -> int:
    """``value`` (a whole number of any real type: 3, 3.0, numpy's 3) as an ``int`` in ``[low, high]``, else
    :class:`InputError`; 2.5 is refused, never truncated."""
    number = _real(control, value, "whole")
    if not isinstance(number, int):
        raise InputError(control, INPUTS.say("need", kind=INPUTS.say("whole"), got=shown(number)))
    if not low <= number <= high:
        raise InputError(control, INPUTS.say("between", low=low, high=high, got=shown(number)))
    return number


def positive_number(control: str, value, high: float) -> float:
    """``value`` as a finite ``float`` in ``(0, high]``, else :class:`InputError`."""
    number = _real(control, value, "number")
    if not 0 < number <= high:
        raise InputError(control, INPUTS.say("positive", high=high, got=shown(number)))
    return float(number)


def yes_no(control: str, value) -> bool:
    """A checkbox's value: ``True`` or ``False`` (numpy's too), else :class:`InputError` ("False" is not True)."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(control, INPUTS.say("yes_no", got=shown(value)))
    return bool(value)


def choice(control: str, value, options):
    """``value`` if it is one of ``options``, else :class:`InputError`."""
    if value not in options:
        listed = INPUTS.say("list_sep").join(str(o) for o in options)
        raise InputError(control, INPUTS.say("one_of", options=listed, got=repr(value)))
    return value


def one_of_numbers(control: str, value, options) -> int:
    """``value`` as one of the whole numbers ``options`` (a slider's stops), else :class:`InputError`."""
    return choice(control, whole_number(control, value, min(options), max(options)), list(options))


def prompt_tokens(control: str, text, tokenizer, max_chars: int) -> tuple[str, list[int]]:
    """A prompt typed into ``control``: ``(text without surrounding blanks, its token ids)``, else
    :class:`InputError` (empty, longer than ``max_chars``, or holding characters the tokenizer does not know)."""
    if not isinstance(text, str) or not text.strip():
        raise InputError(control, INPUTS.say("prompt_empty", example=INPUTS.say("prompt_example")))
    text = text.strip()
    if len(text) > max_chars:
        raise InputError(control, INPUTS.say("prompt_long", max_chars=max_chars, n=len(text)))
    missing = tokenizer.unknown(text)
    if missing:
        chars = INPUTS.say("list_sep").join(INPUTS.say("quoted", text=c) if c.isprintable() and not c.isspace()
                                            else repr(c) for c in missing[:8])
        raise InputError(control, INPUTS.say("prompt_unknown", chars=chars))
    return text, tokenizer.encode(text)


def whole_numbers(control: str, text, low: int, high: int, max_count: int) -> list[int]:
    """"12, 40, 7" (commas, Chinese commas or spaces) -> ``[12, 40, 7]``, each in ``[low, high]``."""
    if isinstance(text, (list, tuple)):
        parts = list(text)
    elif isinstance(text, str):
        parts = [p for p in text.replace("，", ",").replace("、", ",").replace(" ", ",").split(",") if p.strip()]
    else:
        raise InputError(control, INPUTS.say("numbers_needed", got=repr(text)))
    if not parts:
        raise InputError(control, INPUTS.say("numbers_empty"))
    if len(parts) > max_count:
        raise InputError(control, INPUTS.say("numbers_many", max_count=max_count, n=len(parts)))
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
        raise InputError(control, INPUTS.say("typed_not_whole", text=shown_text))
    if text.startswith("-"):
        raise InputError(control, INPUTS.say("typed_negative", text=shown_text))
    if len(digits.lstrip("0")) > MAX_DIGITS:
        raise InputError(control, INPUTS.say("typed_digits", digits=len(digits.lstrip("0"))))
    return int(digits)
