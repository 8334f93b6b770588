"""Claims a notebook makes, two kinds.

- ``confirm``: the page's named asserts, in Chinese: each (说明, condition) pair prints a ✓ line, the first false one
  fails with an AssertionError (nbval fails the notebook); the learner reads what was checked.
- Claims chosen from measurements: a :class:`Chooser` picks the first :class:`Rule` whose predicate holds on the
  numbers as printed (:class:`Number`: text, unit, absolute or difference), else its "can't tell, rerun" rule; a
  :class:`Catalog` (key -> template, one per language) writes the sentence; :func:`show` displays it with the
  claims in the output's metadata; :func:`check_recorded` re-evaluates every predicate from an executed notebook.
  Such claims never fail a run: they say what is true.
"""
from __future__ import annotations

import math
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from .language import get_language
from .phrases import Phrasebook


CONFIRM = Phrasebook("claims.confirm", {
    "zh": {"title": "本格检查了：", "failed": "没有通过：{what}"},
    "en": {"title": "This cell checked:", "failed": "Not met: {what}"},
})


def confirm(*checks: tuple[str, bool], title: str | None = None) -> None:
    """Print ``title`` (default: "this cell checked", in the course's language) and a ✓ line per check; raise
    AssertionError at the first false one (after printing the ones before it, so the page shows how far it got).
    Returns nothing, so a cell ending with it shows no value."""
    if not checks:
        raise ValueError("checks: needs at least one (description, condition) pair")
    lines = [CONFIRM.say("title") if title is None else title]
    for i, check in enumerate(checks):
        if not (isinstance(check, tuple) and len(check) == 2 and isinstance(check[0], str)):
            raise ValueError(f"checks: item {i} must be a (description, condition) pair, got {check!r}")
        what, holds = check
        if not bool(holds):
            print("\n".join(lines))
            raise AssertionError(CONFIRM.say("failed", what=what))
        lines.append(f"  ✓ {what}")
    print("\n".join(lines))


# -- claims chosen from measurements (issue 31) ----------------------------------------------------------------
# A sentence that interprets a measurement is never written by hand: a Chooser picks a claim key whose predicate
# holds on the numbers as they will be printed, a Catalog turns the claim into a sentence of one language, and
# show() displays the sentences with the claims in the output's metadata, where check_recorded() reads them back.

ABSOLUTE = "absolute"  # a time, a rate, a size, a count: printed finite and >= 0, or not at all
DIFFERENCE = "difference"  # a difference, a fitted slope, an exponent: may be negative (never NaN or infinite)
METADATA_KEY = "kvlab_claims"  # where show() records claims in a display_data output's metadata


SEPARATOR = "、"  # between the numbers of a printed series
MINUS = "\u2212"  # 「−」, the minus sign a sentence prints; read back like ASCII "-"


@dataclass(frozen=True)
class Number:
    """One printed quantity, or a series of them: the digits exactly as printed (``"1,234.5"``, ``"nan"``,
    ``"1.77、1.90、2.05"``, ``"−11"`` with the minus sign U+2212 or ASCII ``"-"``), their unit and kind."""

    text: str
    unit: str = ""
    kind: str = ABSOLUTE

    def __post_init__(self):
        if self.kind not in (ABSOLUTE, DIFFERENCE):
            raise ValueError(f"kind must be {ABSOLUTE!r} or {DIFFERENCE!r}, got {self.kind!r}")

    @property
    def value(self) -> float | tuple[float, ...]:
        """The number (a series: the tuple of numbers) as printed, read back: what predicates and the checker see."""
        values = tuple(float(x.replace(",", "").replace(MINUS, "-")) for x in self.text.split(SEPARATOR))
        return values if SEPARATOR in self.text else values[0]

    @property
    def sound(self) -> bool:
        """Every number finite, and not negative when absolute."""
        values = self.value if isinstance(self.value, tuple) else (self.value,)
        return all(math.isfinite(v) and (self.kind == DIFFERENCE or v >= 0) for v in values)


def _digits(x: float, digits: int) -> str:
    x = float(x)
    text = f"{x:,.{digits}f}" if math.isfinite(x) else str(x)
    return text.lstrip("-") if math.isfinite(x) and float(text.replace(",", "")) == 0 else text  # never "-0.00"


def number(x: float, digits: int = 2, unit: str = "", kind: str = ABSOLUTE) -> Number:
    """``x`` as it will be printed: ``digits`` decimals, thousands separated (``nan``/``inf`` kept as such)."""
    return Number(_digits(x, digits), unit, kind)


def series(xs, digits: int = 2, unit: str = "", kind: str = ABSOLUTE) -> Number:
    """Several numbers printed as one series (``1.77、1.90、2.05 ms``): a predicate reads them as a tuple."""
    if len(xs) < 2:
        raise ValueError(f"xs: a series needs at least 2 numbers, got {len(xs)}")
    return Number(SEPARATOR.join(_digits(x, digits) for x in xs), unit, kind)


def ratio(a: float, b: float) -> float:
    """a / b, with inf or nan instead of an exception when b is 0 (a chooser then skips the claims that show it)."""
    return a / b if b else (math.copysign(math.inf, a) if a else math.nan)


@dataclass(frozen=True)
class Claim:
    """A claim key plus the printed numbers it was decided on, and terms (words of a fixed vocabulary, e.g. a
    cache mode) that a catalog translates."""

    key: str
    fields: Mapping[str, Number]
    terms: Mapping[str, str] = field(default_factory=dict)

    @property
    def sound(self) -> bool:
        return all(n.sound for n in self.fields.values())

    def values(self) -> Mapping[str, float]:
        """The printed numbers by name, read-only: a predicate reading a field the claim does not show fails."""
        return MappingProxyType({name: n.value for name, n in self.fields.items()})

    def record(self) -> dict:
        """JSON for the output's metadata: key, terms and each field's printed text, unit and kind."""
        return {"key": self.key, "terms": dict(self.terms),
                "fields": {name: {"text": n.text, "unit": n.unit, "kind": n.kind} for name, n in self.fields.items()}}

    @classmethod
    def from_record(cls, record: Mapping) -> "Claim":
        return cls(record["key"], {name: Number(f["text"], f["unit"], f["kind"]) for name, f in record["fields"].items()},
                   dict(record.get("terms", {})))


def always(values: Mapping[str, float]) -> bool:
    return True


@dataclass(frozen=True)
class Rule:
    """One claim key: the fields its sentence shows, and the predicate over them under which it may be said.
    ``substantive=False`` marks a "can't tell, rerun" key."""

    key: str
    shows: tuple[str, ...] = ()
    holds: Callable[[Mapping[str, float]], bool] = always
    substantive: bool = True

    def admits(self, claim: Claim) -> bool:
        """The claim shows exactly this rule's fields, every one sound, and the predicate holds on them."""
        return (claim.key == self.key and tuple(claim.fields) == self.shows and claim.sound
                and self.holds_on(claim.values()))

    def holds_on(self, values: Mapping[str, float]) -> bool:
        """The predicate on printed numbers; arithmetic that fails on them (a division by 0) means it does not hold."""
        try:
            return bool(self.holds(values))
        except ArithmeticError:
            return False


@dataclass(frozen=True)
class Chooser:
    """Rules tried in order; the first whose predicate holds on the printed numbers is the claim."""

    name: str
    rules: tuple[Rule, ...]

    def __post_init__(self):
        keys = self.keys
        if not keys or len(set(keys)) != len(keys) or not all(k.startswith(self.name + ".") for k in keys):
            raise ValueError(f"rules: {self.name} needs distinct keys starting with {self.name + '.'!r}, got {keys}")

    @property
    def keys(self) -> list[str]:
        return [r.key for r in self.rules]

    def rule(self, key: str) -> Rule:
        return next(r for r in self.rules if r.key == key)

    def choose(self, numbers: Mapping[str, Number], terms: Mapping[str, str] | None = None) -> Claim:
        """The claim of the first rule that admits ``numbers`` (each rule takes the fields it shows)."""
        for rule in self.rules:
            claim = Claim(rule.key, {name: numbers[name] for name in rule.shows}, dict(terms or {}))
            if rule.admits(claim):
                return claim
        raise ValueError(f"{self.name}: no rule holds on {dict(numbers)} (the last rule should be one that always can)")


@dataclass(frozen=True)
class Catalog:
    """Sentence templates of one language, key -> ``str.format`` template over the claim's fields and terms;
    ``words`` writes unit symbols and terms in this language (a unit not listed is written as it is);
    ``separator`` goes between the numbers of a printed series (recorded with :data:`SEPARATOR`)."""

    language: str
    templates: Mapping[str, str]
    words: Mapping[str, str] = field(default_factory=dict)
    separator: str = SEPARATOR

    def quantity(self, n: Number) -> str:
        unit = self.words.get(n.unit, n.unit)
        return n.text.replace(SEPARATOR, self.separator) + ("" if unit in ("", "%", "×") else " ") + unit

    def say(self, claim: Claim) -> str:
        parts = {name: self.quantity(n) for name, n in claim.fields.items()}
        parts.update({name: self.words.get(term, term) for name, term in claim.terms.items()})
        return self.templates[claim.key].format(**parts)

    def placeholders(self, key: str) -> set[str]:
        """The names a template fills in (to check that it shows what its rule shows)."""
        return {name for _, name, _, _ in string.Formatter().parse(self.templates[key]) if name}

    @classmethod
    def of_topics(cls, language: str, topics) -> "Catalog":
        """One catalog from a lesson's topic modules (each with ``TEMPLATES`` and, optionally, ``WORDS`` in Chinese;
        ``TEMPLATES_EN`` and ``WORDS_EN`` in English); a key two topics both write is a mistake."""
        suffix = "" if language == "zh" else "_" + language.upper()
        templates, words = {}, {}
        for topic in topics:
            written = getattr(topic, "TEMPLATES" + suffix)
            twice = templates.keys() & written.keys()
            if twice:
                raise ValueError(f"{topic.__name__}: keys already written by another topic: {sorted(twice)}")
            templates.update(written)
            words.update(getattr(topic, "WORDS" + suffix, {}))
        return cls(language, templates, words, SEPARATOR if language == "zh" else ", ")


def in_language(catalogs: Mapping[str, Catalog]) -> Catalog:
    """The catalog of the course's language (``kvlab.set_language``) from a lesson's ``{language: Catalog}``; an error
    naming the language when the lesson has none in it (``tests/test_claims_languages.py`` keeps that from shipping)."""
    from .phrases import MissingPhrase

    code = get_language()
    if code not in catalogs:
        raise MissingPhrase(f"these sentences have no {code!r} catalog yet (only {sorted(catalogs)})")
    return catalogs[code]


def show(claims: Sequence[Claim], catalog: Catalog) -> None:
    """Display the claims' sentences, one a line, as plain text carrying the claims in the output's metadata
    (``{"kvlab_claims": [record, ...]}``) for :func:`check_recorded`."""
    from IPython.display import display

    display({"text/plain": "\n".join(catalog.say(c) for c in claims)}, raw=True,
            metadata={METADATA_KEY: [c.record() for c in claims]})


def recorded(nb) -> list[tuple[int, Claim, str]]:
    """Every claim recorded in an executed notebook: (cell index, claim, the text shown with it)."""
    out = []
    for i, cell in enumerate(nb["cells"]):
        for output in cell.get("outputs", []):
            records = output.get("metadata", {}).get(METADATA_KEY, [])
            text = "".join(output.get("data", {}).get("text/plain", ""))
            out += [(i, Claim.from_record(r), text) for r in records]
    return out


def check_recorded(nb, choosers: Sequence[Chooser]) -> list[str]:
    """Problems with the claims an executed notebook recorded, found again from their printed numbers (never from
    a chooser's verdict): an unknown key, fields other than its rule shows, a number not in the shown text, a
    number NaN or infinite, an absolute one negative, a predicate that does not hold. Empty when all is well."""
    rules = {r.key: r for c in choosers for r in c.rules}
    problems = []
    for cell, claim, text in recorded(nb):
        where = f"cell {cell}, {claim.key}"
        rule = rules.get(claim.key)
        if rule is None:
            problems.append(f"{where}: no chooser has this key")
            continue
        if set(claim.fields) != set(rule.shows):  # a saved notebook's metadata has its keys sorted
            problems.append(f"{where}: records {tuple(claim.fields)}, its rule shows {rule.shows}")
            continue
        problems += [f"{where}: {name} = {n.text} is not in the text shown" for name, n in claim.fields.items()
                     if n.text not in text and n.text.replace(SEPARATOR, ", ") not in text]
        problems += [f"{where}: {name} = {n.text} {n.unit} ({n.kind}) is {'not finite' if not math.isfinite(n.value) else 'negative'}"
                     for name, n in claim.fields.items() if not n.sound]
        if claim.sound and not rule.holds_on(claim.values()):
            problems.append(f"{where}: its predicate does not hold on {dict(claim.values())}")
    return problems
