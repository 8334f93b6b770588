"""The course's language: one switch for everything kvlab shows a person.

``kvlab.set_language("en")`` (or ``KVLAB_LANG=en`` in the environment, read at the first question) picks the
language of readouts, chosen sentences, labels, feedback, the guide and the static edition; Chinese (``zh``) is the
default. Errors an API raises for a bad argument stay English whatever the switch says."""
from __future__ import annotations

import os
from contextlib import contextmanager

LANGUAGES = ("zh", "en")
DEFAULT_LANGUAGE = "zh"
ENV_VAR = "KVLAB_LANG"

_chosen: list[str] = []  # the language set_language chose for this process (empty: KVLAB_LANG or the default)


def check_language(code) -> str:
    """``code`` if it names a language the course is written in; otherwise a ValueError naming the codes."""
    if not isinstance(code, str) or code not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(map(repr, LANGUAGES))}; got {code!r}")
    return code


def get_language() -> str:
    """The language kvlab writes in now: the last ``set_language``, else ``KVLAB_LANG``, else ``zh``."""
    if _chosen:
        return _chosen[-1]
    code = os.environ.get(ENV_VAR, "").strip()
    if not code:
        return DEFAULT_LANGUAGE
    try:
        return check_language(code)
    except ValueError as e:
        raise ValueError(f"{ENV_VAR}: {e}") from None


def set_language(code: str) -> None:
    """Write in ``code`` (``"zh"`` or ``"en"``) from now on in this process."""
    check_language(code)
    _chosen[:] = [code]


@contextmanager
def using_language(code: str):
    """Write in ``code`` inside the ``with`` block, then in the language before it."""
    check_language(code)
    before = list(_chosen)
    _chosen[:] = [code]
    try:
        yield code
    finally:
        _chosen[:] = before
