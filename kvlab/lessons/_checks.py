"""Named checks a notebook prints in Chinese: each claim a cell asserts, with the sentence a learner reads.

A cell collects ``checks = Checks()``, calls ``checks("权重一个字节都没变", r.weights_unchanged)`` for each claim,
shows ``checks`` (one ✓ or ✗ line per claim) and keeps one real ``assert checks.ok, checks.failed``: the
chapter's checks stay checks, and the learner sees what was checked instead of English assert lines."""
from __future__ import annotations


class Checks:
    """An ordered list of (sentence, passed) pairs."""

    def __init__(self, title: str = "本格核对了"):
        self.title = title
        self.items: list[tuple[str, bool]] = []

    def __call__(self, sentence: str, passed) -> bool:
        if not isinstance(sentence, str) or not sentence:
            raise ValueError(f"sentence: a non-empty Chinese sentence naming the claim, got {sentence!r}")
        self.items.append((sentence, bool(passed)))
        return bool(passed)

    @property
    def ok(self) -> bool:
        return bool(self.items) and all(p for _, p in self.items)

    @property
    def failed(self) -> str:
        """The claims that did not hold (empty when all did)."""
        return "；".join(s for s, p in self.items if not p)

    def __str__(self) -> str:
        return f"{self.title}：\n" + "\n".join(f"  {'✓' if p else '✗'} {s}" for s, p in self.items)

    def _repr_pretty_(self, printer, cycle) -> None:  # shown as text in a notebook
        printer.text(str(self))
