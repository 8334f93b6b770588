"""The demo models' tokenizers, saved as JSON: :class:`CharTokenizer` (Chinese, one token per character) and
:class:`SubwordTokenizer` (English, byte-level BPE). Both encode, decode, report the characters they cannot write
(:meth:`unknown`), and save/load without a network."""
from __future__ import annotations

import json
import numbers
import string
import unicodedata
from pathlib import Path


def show_character(c: str) -> str:
    """「人」; invisible or blank characters also by code point: 「\u200b」(U+200B)."""
    visible = c.isprintable() and not c.isspace() and unicodedata.category(c) not in ("Cf", "Mn", "Me", "Zs")
    return f"「{c}」" if visible else f"{c!r}(U+{ord(c):04X})"


class UnknownCharactersError(ValueError):
    """The text holds characters the vocabulary does not know (listed in ``.characters``)."""

    def __init__(self, characters: list[str], known: str = "the characters of its training corpus"):
        self.characters = characters
        shown = "、".join(show_character(c) for c in characters[:20])
        more = f" (+{len(characters) - 20} more)" if len(characters) > 20 else ""
        super().__init__(
            f"text: {len(characters)} character(s) are not in the model's vocabulary: {shown}{more}. "
            f"The demo model only knows {known}."
        )


def _check_ids(ids, vocab_size: int) -> list[int]:
    """Ids (a list, a 1-D tensor or array, one int) -> a list of ints; ValueError for anything else."""
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    if isinstance(ids, numbers.Integral) and not isinstance(ids, bool):
        ids = [ids]
    if not isinstance(ids, (list, tuple)):
        raise ValueError(f"ids must be a list of token ids, got {type(ids).__name__}")
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, numbers.Integral) or not 0 <= i < vocab_size:
            raise ValueError(f"ids: {i!r} is not a token id in [0, {vocab_size})")
    return [int(i) for i in ids]


def _check_text(text) -> None:
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    if not text:
        raise ValueError("text must not be empty")


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
        _check_text(text)
        missing = self.unknown(text)
        if missing:
            raise UnknownCharactersError(missing)
        return [self.index[c] for c in text]

    def decode(self, ids) -> str:
        """Ids (a list, a 1-D tensor or array) -> text."""
        return "".join(self.chars[i] for i in _check_ids(ids, len(self.chars)))

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


SUBWORD_VOCAB = 512  # the English demo model's vocabulary (its weights stay under the Chinese model's)
ALPHABET = string.ascii_letters + string.digits + string.punctuation + " \n"  # every printable ASCII character
ASCII = "printable ASCII characters and the newline"


class SubwordTokenizer:
    """Byte-level BPE (as GPT-2 and LLaMA 3 use), trained with the ``tokenizers`` library on the English corpus.

    Why subword, not characters: an English character model would write "a", "r", "t", ... one letter per step,
    and the chapters' step-by-step story (「人工」 -> 「智」 -> 「能」: one meaningful piece per step) would fall
    apart. BPE merges the corpus's frequent letter pairs until the vocabulary holds :data:`SUBWORD_VOCAB` (512)
    tokens, so common words are one token with their leading space ("Artificial" -> " intelligence"), rare words
    a few pieces. Its alphabet is all of printable ASCII plus the newline (:data:`ALPHABET`), so any such text can
    be written, exactly: ``decode(encode(text)) == text``. Other characters are refused
    (:class:`UnknownCharactersError`), never dropped. Saved in the ``tokenizers`` JSON format
    (``transformers.PreTrainedTokenizerFast(tokenizer_file=...)`` reads it too)."""

    def __init__(self, tokenizer):
        from tokenizers.pre_tokenizers import ByteLevel

        self.tokenizer = tokenizer
        self._bytes = ByteLevel(add_prefix_space=False, use_regex=False)  # a character -> its byte symbols
        vocab = tokenizer.get_vocab()
        self._symbols = {t for t in vocab if len(t) == 1}
        self._known: dict[str, bool] = {}

    @classmethod
    def from_text(cls, text: str, vocab_size: int = SUBWORD_VOCAB) -> "SubwordTokenizer":
        """Train BPE on ``text`` (deterministic: the same text gives the same vocabulary and merges)."""
        from tokenizers import Tokenizer, decoders, models, trainers
        from tokenizers.pre_tokenizers import ByteLevel

        if not isinstance(text, str) or not text:
            raise ValueError("text must be a non-empty string")
        outside = [c for c in dict.fromkeys(text) if c not in ALPHABET]
        if outside:  # their UTF-8 bytes would be tokens that decode to no character on their own
            raise UnknownCharactersError(outside, ASCII)
        symbols = ByteLevel(add_prefix_space=False, use_regex=False).pre_tokenize_str(ALPHABET)[0][0]
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = ByteLevel(add_prefix_space=False)  # GPT-2's split: a word keeps its leading space
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator([text], trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                                            initial_alphabet=list(symbols), special_tokens=[]))
        return cls(tok)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def _writable(self, c: str) -> bool:
        if c not in self._known:
            self._known[c] = all(s in self._symbols for s in self._bytes.pre_tokenize_str(c)[0][0])
        return self._known[c]

    def unknown(self, text: str) -> list[str]:
        """Characters of ``text`` the vocabulary cannot write, in order of first appearance."""
        return [c for c in dict.fromkeys(text) if not self._writable(c)]

    def encode(self, text: str) -> list[int]:
        _check_text(text)
        missing = self.unknown(text)
        if missing:
            raise UnknownCharactersError(missing, ASCII)
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        """Ids (a list, a 1-D tensor or array) -> text; one id gives its token with its leading space."""
        return self.tokenizer.decode(_check_ids(ids, self.vocab_size), skip_special_tokens=False)

    def save(self, path) -> None:
        Path(path).write_text(self.tokenizer.to_str(pretty=True) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path) -> "SubwordTokenizer":
        from tokenizers import Tokenizer

        text = Path(path).read_text(encoding="utf-8")
        model = json.loads(text).get("model")
        if not isinstance(model, dict) or model.get("type") != "BPE":
            raise ValueError(f"path: {path} is not a BPE tokenizer (a tokenizers JSON file with a BPE model)")
        try:
            return cls(Tokenizer.from_str(text))
        except Exception as exc:  # the library raises its own Exception subclass for a malformed file
            raise ValueError(f"path: {path} cannot be read by the tokenizers library ({exc})") from None


TOKENIZERS = {"zh": CharTokenizer, "en": SubwordTokenizer}  # the tokenizer of each language's demo model
