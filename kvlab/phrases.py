"""Strings shown to a person, one table per language with the same keys and the same format fields.

A :class:`Phrasebook` belongs to one topic (a lesson's readouts, a panel's labels, a chapter's code cells) and
answers in the language :func:`kvlab.language.get_language` names. ``tests/test_phrases.py`` finds every phrasebook in
kvlab and fails on a key or a format field that one language has and the other lacks, so a missing phrase cannot
reach a learner; if one did, the error names the book, the key and the language, never an empty string."""
from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Mapping

from .language import LANGUAGES, get_language


class MissingPhrase(LookupError):
    """A phrasebook has no text for a key in the language asked for (the parity test keeps this from happening)."""


@dataclass(frozen=True)
class Phrasebook:
    """``texts``: language -> key -> ``str.format`` template. Every language in :data:`LANGUAGES` is present."""

    name: str
    texts: Mapping[str, Mapping[str, str]]

    def __post_init__(self):
        missing = [code for code in LANGUAGES if code not in self.texts]
        if missing:
            raise ValueError(f"phrasebook {self.name!r} lacks the languages {missing}")

    def text(self, key: str, lang: str | None = None) -> str:
        """The template for ``key`` in ``lang`` (default: the course's language now)."""
        lang = lang or get_language()
        try:
            return self.texts[lang][key]
        except KeyError:
            raise MissingPhrase(f"phrasebook {self.name!r} has no {lang!r} text for {key!r}") from None

    def say(self, key: str, /, **fields) -> str:
        """``key``'s template in the course's language, filled with ``fields``."""
        return self.text(key).format(**fields)

    def fields(self, key: str, lang: str) -> set[str]:
        """The names ``key``'s template in ``lang`` fills in."""
        return {name.split(".")[0].split("[")[0]
                for _, name, _, _ in string.Formatter().parse(self.texts[lang][key]) if name}

    def problems(self) -> list[str]:
        """Keys one language has and another lacks, and templates whose fields differ between languages."""
        out = []
        base, *others = LANGUAGES
        for lang in others:
            for key in sorted(self.texts[base].keys() - self.texts[lang].keys()):
                out.append(f"{self.name}: {key!r} has no {lang!r} text")
            for key in sorted(self.texts[lang].keys() - self.texts[base].keys()):
                out.append(f"{self.name}: {key!r} has no {base!r} text")
            for key in sorted(self.texts[base].keys() & self.texts[lang].keys()):
                if self.fields(key, base) != self.fields(key, lang):
                    out.append(f"{self.name}: {key!r} fills {sorted(self.fields(key, base))} in {base!r} "
                               f"but {sorted(self.fields(key, lang))} in {lang!r}")
        return out
