"""A character-level tokenizer: one token per character, saved as JSON."""
from __future__ import annotations

import json
import numbers
import unicodedata
from pathlib import Path


def show_character(c: str) -> str:
    """「人」; invisible or blank characters also by code point: 「\u200b」(U+200B)."""
    visible = c.isprintable() and not c.isspace() and unicodedata.category(c) not in ("Cf", "Mn", "Me", "Zs")
    return f"「{c}」" if visible else f"{c!r}(U+{ord(c):04X})"


class UnknownCharactersError(ValueError):
    """The text holds characters the vocabulary does not know (listed in ``.characters``)."""

    def __init__(self, characters: list[str]):
        self.characters = characters
        shown = "、".join(show_character(c) for c in characters[:20])
        more = f" (+{len(characters) - 20} more)" if len(characters) > 20 else ""
        super().__init__(
            f"text: {len(characters)} character(s) are not in the model's vocabulary: {shown}{more}. "
            "The demo model only knows the characters of its training corpus."
        )


class CharTokenizer:
    """Maps each character of a fixed vocabulary to an id and back."""

    def __init__(self, chars):
        chars = list(chars)
        if not chars or len(set(chars)) != len(chars) or any(not isinstance(c, str) or len(c) != 1 for c in chars):
            raise ValueError("chars must be a non-empty list of distinct single characters")
        self.chars = chars
        self.index = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        """Vocabulary = the distinct characters of ``text``, sorted by code point."""
        if not isinstance(text, str) or not text:
            raise ValueError("text must be a non-empty string")
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def unknown(self, text: str) -> list[str]:
        """Characters of ``text`` outside the vocabulary, in order of first appearance."""
        return list(dict.fromkeys(c for c in text if c not in self.index))

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        if not text:
            raise ValueError("text must not be empty")
        missing = self.unknown(text)
        if missing:
            raise UnknownCharactersError(missing)
        return [self.index[c] for c in text]

    def decode(self, ids) -> str:
        """Ids (a list, a 1-D tensor or array) -> text."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if isinstance(ids, numbers.Integral) and not isinstance(ids, bool):
            ids = [ids]
        if not isinstance(ids, (list, tuple)):
            raise ValueError(f"ids must be a list of token ids, got {type(ids).__name__}")
        out = []
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, numbers.Integral) or not 0 <= i < len(self.chars):
                raise ValueError(f"ids: {i!r} is not a token id in [0, {len(self.chars)})")
            out.append(self.chars[int(i)])
        return "".join(out)

    def save(self, path) -> None:
        Path(path).write_text(json.dumps({"type": "char", "chars": self.chars}, ensure_ascii=False, indent=0),
                              encoding="utf-8")

    @classmethod
    def load(cls, path) -> "CharTokenizer":
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("type") != "char" or not isinstance(data.get("chars"), list):
            raise ValueError(f"path: {path} is not a kvlab character tokenizer (a JSON object with type 'char' "
                             "and a list of chars)")
        return cls(data["chars"])
