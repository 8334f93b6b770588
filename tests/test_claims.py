"""kvlab.claims: claims chosen by predicates over printed numbers, written by a catalog, recorded in an output's
metadata and checked again from it (issue 31 part 1). ``confirm`` is tested with the chapters that use it."""
from __future__ import annotations

import math

import nbformat
import pytest

from kvlab import claims
from kvlab.claims import ABSOLUTE, DIFFERENCE, Catalog, Chooser, Claim, Number, Rule, number

SPEED = Chooser("demo.speed", (
    Rule("demo.speed.faster", ("a", "b"), lambda v: v["b"] < v["a"]),
    Rule("demo.speed.same", ("a", "b"), lambda v: abs(v["a"] - v["b"]) <= 0.1 * v["a"]),
    Rule("demo.speed.unclear", ("a",), substantive=False),
))
ZH = Catalog("zh", {"demo.speed.faster": "有缓存 {b}，比无缓存 {a} 快。",
                    "demo.speed.same": "两者差不多（{a} 对 {b}）。",
                    "demo.speed.unclear": "说不准（{a}）：再测一次。"}, words={"min": "分钟"})


def test_a_number_is_what_is_printed():
    n = number(1234.567, 1, "ms")
    assert (n.text, n.value, n.sound) == ("1,234.6", 1234.6, True)
    assert number(-0.001).text == "0.00"  # never "-0.00"
    assert not number(-1.5).sound and number(-1.5, kind=DIFFERENCE).sound  # only a difference may be negative
    assert not number(math.nan, kind=DIFFERENCE).sound and not number(math.inf).sound
    assert number(math.nan).text == "nan" and number(-math.inf).text == "-inf"
    with pytest.raises(ValueError, match="kind"):
        Number("1", kind="time")
    points = claims.series([1.771, 1.9, -0.001], 2, "ms")
    assert (points.text, points.value, points.sound) == ("1.77、1.90、0.00", (1.77, 1.9, 0.0), True)
    assert not claims.series([1.0, -2.0]).sound and not claims.series([1.0, math.nan], kind=DIFFERENCE).sound
    with pytest.raises(ValueError, match="at least 2"):
        claims.series([1.0])
    assert Number("\u221211", "%", DIFFERENCE).value == -11.0  # 「−」 (U+2212), the minus sign a sentence prints
    assert claims.series([1.0, -2.0]).value == Number("1.00、\u22122.00").value == (1.0, -2.0)
    assert not Number("\u22121.5", "ms").sound and Number("+3", "%", DIFFERENCE).value == 3.0
    assert claims.ratio(1, 0) == math.inf and math.isnan(claims.ratio(0, 0)) and claims.ratio(3, 2) == 1.5


def test_the_chooser_takes_the_first_rule_that_holds_on_the_printed_numbers():
    faster = SPEED.choose({"a": number(3.0, 2, "ms"), "b": number(1.0, 2, "ms")})
    assert faster.key == "demo.speed.faster" and ZH.say(faster) == "有缓存 1.00 ms，比无缓存 3.00 ms 快。"
    # 2.004 vs 2.001 prints as 2.00 and 2.00: the predicate sees the printed numbers, so not "faster"
    assert SPEED.choose({"a": number(2.004, 2, "ms"), "b": number(2.001, 2, "ms")}).key == "demo.speed.same"
    # a negative absolute is never shown: the rules showing it are skipped, down to the one that can be said
    unclear = SPEED.choose({"a": number(3.0, 2, "ms"), "b": number(-1.0, 2, "ms")})
    assert unclear.key == "demo.speed.unclear" and dict(unclear.fields) == {"a": number(3.0, 2, "ms")}
    assert not SPEED.rule("demo.speed.unclear").substantive and SPEED.keys[0] == "demo.speed.faster"
    with pytest.raises(ValueError, match="no rule holds"):
        SPEED.choose({"a": number(math.nan), "b": number(1.0)})
    with pytest.raises(ValueError, match="distinct keys"):
        Chooser("demo", (Rule("other.x"),))


def test_a_predicate_reads_only_what_its_sentence_shows():
    sneaky = Rule("demo.x.sneaky", ("a",), lambda v: v["b"] > 0)  # b is not printed
    with pytest.raises(KeyError):
        Chooser("demo.x", (sneaky,)).choose({"a": number(1), "b": number(2)})
    assert not Rule("demo.x.div", ("a",), lambda v: 1 / v["a"] > 0).holds_on({"a": 0.0})  # no ZeroDivisionError


def test_the_catalog_writes_units_and_terms_in_its_language():
    cat = Catalog("zh", {"k": "{mode}约需 {t}，占 {share}，快 {x}"}, words={"min": "分钟", "kv": "有缓存"})
    claim = Claim("k", {"t": number(3, 1, "min"), "share": number(45, 0, "%"), "x": number(2.5, 1, "×")}, {"mode": "kv"})
    assert cat.say(claim) == "有缓存约需 3.0 分钟，占 45%，快 2.5×"
    assert cat.placeholders("k") == {"mode", "t", "share", "x"}
    assert Claim.from_record(claim.record()) == claim


def _executed(*outputs):
    cell = nbformat.v4.new_code_cell("lesson.show_claims(...)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/plain": text},
                                           metadata={claims.METADATA_KEY: [c.record() for c in said]})
                    for said, text in outputs]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("x"), cell])


def test_show_records_the_claims_in_the_outputs_metadata(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, raw, metadata: shown.append((data, raw, metadata)))
    said = [SPEED.choose({"a": number(3.0, 2, "ms"), "b": number(1.0, 2, "ms")})]
    claims.show(said, ZH)
    data, raw, metadata = shown[0]
    assert raw and data == {"text/plain": "有缓存 1.00 ms，比无缓存 3.00 ms 快。"}
    assert metadata == {"kvlab_claims": [{"key": "demo.speed.faster", "terms": {}, "fields": {
        "a": {"text": "3.00", "unit": "ms", "kind": ABSOLUTE}, "b": {"text": "1.00", "unit": "ms", "kind": ABSOLUTE}}}]}
    nb = _executed((said, data["text/plain"]))
    nbformat.validate(nb)  # the metadata is valid output metadata
    assert [(cell, c.key) for cell, c, _ in claims.recorded(nb)] == [(1, "demo.speed.faster")]
    assert claims.check_recorded(nb, [SPEED]) == []


def test_the_checker_finds_each_kind_of_problem_without_trusting_the_chooser():
    def rec(key, **fields):
        return Claim(key, fields)

    ms = lambda text: Number(text, "ms")
    nb = _executed(
        ([rec("demo.speed.faster", a=ms("1.00"), b=ms("3.00"))], "有缓存 3.00 ms，比无缓存 1.00 ms 快。"),  # false
        ([rec("demo.speed.unclear", a=ms("-2.00"))], "说不准（-2.00 ms）"),  # a negative time
        ([rec("demo.speed.unclear", a=ms("nan"))], "说不准（nan ms）"),
        ([rec("demo.speed.unclear", a=ms("2.00"))], "说不准（2.50 ms）"),  # not the number shown
        ([rec("demo.speed.gone", a=ms("2.00"))], "2.00"),
        ([rec("demo.speed.same", a=ms("2.00"))], "2.00"),  # b missing
    )
    problems = claims.check_recorded(nb, [SPEED])
    expected = ["predicate does not hold", "-2.00 ms (absolute) is negative", "nan ms (absolute) is not finite",
                "2.00 is not in the text shown", "no chooser has this key", "its rule shows ('a', 'b')"]
    assert len(problems) == len(expected)
    for problem, what in zip(problems, expected):
        assert problem.startswith("cell 1, demo.speed.") and what in problem, (what, problem)



def test_a_catalog_of_topics_refuses_a_key_two_topics_write():
    from types import SimpleNamespace

    a = SimpleNamespace(__name__="a", TEMPLATES={"x.one": "一 {n}"}, WORDS={"min": "分钟"})
    b = SimpleNamespace(__name__="b", TEMPLATES={"x.two": "二"})
    catalog = claims.Catalog.of_topics("zh", (a, b))
    assert set(catalog.templates) == {"x.one", "x.two"} and catalog.words == {"min": "分钟"}
    with pytest.raises(ValueError, match="^b: keys already written by another topic: \\['x.one'\\]"):
        claims.Catalog.of_topics("zh", (a, SimpleNamespace(__name__="b", TEMPLATES={"x.one": "又一"})))
