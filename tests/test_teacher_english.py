"""The teacher's guide and keys in English (issue 34): ``python -m kvlab.teacher --lang en`` writes
teacher/GUIDE.en.md and KEYS.en.md from chapters/en/, every word from a phrasebook; the same chapters, exercises and
questions as the Chinese files, in the same order, for the chapters the English edition has; a chapter not yet in
English is named, never guessed at; the English reading rate and its source are printed."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvlab.exercises.checker import Exercise
from kvlab.language import using_language
from kvlab.teacher import guide, minutes
from kvlab.teacher.chapters import CHAPTERS
from kvlab.teacher.phrases import GUIDE, READING_SPEED_EN

ROOT = Path(__file__).resolve().parent.parent
CHINESE = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


@pytest.fixture(scope="module")
def zh():
    return guide.outputs()


@pytest.fixture(scope="module")
def en():
    return guide.outputs(lang="en")


def test_committed_english_guide_and_keys_are_in_sync_with_the_code(en):
    """After a change to an English chapter, its quiz or exercises: ``python -m kvlab.teacher --lang en``."""
    assert set(en) == {"GUIDE.en.md", "KEYS.en.md"}
    for name, text in en.items():
        path = ROOT / "teacher" / name
        assert path.read_text(encoding="utf-8") == text, f"{name} is out of date: run python -m kvlab.teacher --lang en"


def test_no_chinese_character_in_the_english_guide_or_keys(en):
    for name, text in en.items():
        found = [(m.start(), text[max(0, m.start() - 40):m.start() + 10]) for m in CHINESE.finditer(text)]
        assert not found, f"{name}: Chinese at {found[:5]}"


def test_the_english_reading_rate_and_its_source_are_printed(en, zh):
    text = en["GUIDE.en.md"]
    assert f"**{READING_SPEED_EN} words per minute**" in text
    assert "Brysbaert" in text and "How many words do we read per minute?" in text and "2019" in text
    assert "300 a minute" in text and "IReST" in text  # beside the Chinese rate, named with its own source
    assert f"{minutes.READING_SPEED} 汉字/分钟" in zh["GUIDE.md"] and "IReST" in zh["GUIDE.md"]  # Chinese unchanged


def _english_reports():
    return guide.reports(lang="en")


def test_english_minutes_are_words_at_the_english_rate():
    for r in _english_reports():
        m = r.minutes
        assert m.rate == READING_SPEED_EN
        assert m.reading == pytest.approx((m.characters + m.output_characters) / READING_SPEED_EN)
        assert all(s.rate == READING_SPEED_EN and s.source is not None for s in r.sections)
        assert 0.3 < r.words_per_character < 2, f"{r.number}: {r.words_per_character} words per Chinese character"
        assert m.characters == r.intro + sum(s.characters for s in r.sections)


def test_english_words_leave_out_code_formulas_and_links():
    text = ("# 3.9 A title\n\nTwo words `not_code(x)` and $t^2 + n$ then [a link](https://x.org/y_z) "
            "<!-- no -->\n\n```python\nprint('not these')\n```\ndon't stop")
    assert minutes.english_words(text) == len("A title Two words and then a link don't stop".split())


def _chapter_heads(text: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^## (3\.\d) ", text, re.M)]


def _by_chapter(text: str) -> dict[str, str]:
    parts = re.split(r"^(## 3\.\d .*)$", text, flags=re.M)
    return {head.split()[1]: body for head, body in zip(parts[1::2], parts[2::2])}


def test_the_english_guide_names_the_same_chapters_objectives_and_sections(zh, en):
    english = {r.guide.notebook for r in _english_reports()}
    numbers = [r.number for r in guide.reports() if r.guide.notebook in english]
    assert numbers, "the English edition has no chapter"
    assert _chapter_heads(en["GUIDE.en.md"]) == numbers
    zh_parts, en_parts = _by_chapter(zh["GUIDE.md"]), _by_chapter(en["GUIDE.en.md"])
    for n in numbers:
        for pattern in (r"^\d+\. ", r"^\| ", r"^- "):  # objectives and prompts; table rows; prerequisites, references
            assert (len(re.findall(pattern, zh_parts[n], re.M)) == len(re.findall(pattern, en_parts[n], re.M))), \
                f"{n}: {pattern!r} lines differ between the Chinese and the English guide"
        zh_kinds = [row.rsplit("|", 2)[-2].strip().split("：")[0].split("（")[0]
                    for row in zh_parts[n].splitlines() if row.startswith("| ") and row.count("|") == 5]
        en_kinds = [row.rsplit("|", 2)[-2].strip().split(":")[0].split(" (")[0]
                    for row in en_parts[n].splitlines() if row.startswith("| ") and row.count("|") == 5]
        kinds = {"必修": "core", "选学": "optional", "练习": "exercises", "必修/选学": "Core/optional"}
        assert [kinds[k] for k in zh_kinds] == en_kinds, n


def _keys_outline(text: str, lang: str) -> list[tuple]:
    """(section kind, chapter) per ``##`` heading of KEYS, each with its question numbers and exercise keys."""
    heads = {GUIDE.text(key, lang).split("{number} ", 1)[1]: key
             for key in ("keys_quiz_head", "keys_checkpoint_head", "keys_tasks_head", "keys_exercises_head")}
    out = []
    for head, body in zip(*[iter(re.split(r"^## (3\.\d .*)$", text, flags=re.M)[1:])] * 2):
        number, _, kind = head.partition(" ")
        out.append((heads[kind], number, re.findall(r"^\*\*(\d+)\.", body, re.M),
                    re.findall(r"^### .*\(?`(ch\d\d\.\w+)`\)?", body, re.M)))
    return out


def test_the_english_keys_name_the_same_questions_and_exercises_in_the_same_order(zh, en):
    english = {r.number for r in _english_reports()}
    zh_outline = [o for o in _keys_outline(zh["KEYS.md"], "zh") if o[1] in english]
    en_outline = _keys_outline(en["KEYS.en.md"], "en")
    assert en_outline == zh_outline
    assert any(o[3] for o in en_outline) and any(o[2] for o in en_outline)


def test_the_english_keys_show_the_exercises_english_words(en):
    text = en["KEYS.en.md"]
    for r in _english_reports():
        for ex in (r.exercise_module.EXERCISES if r.exercise_module else ()):
            words = ex.words("en")
            assert f"### {words.title} (`{ex.key}`)" in text
            assert all(h in text for h in words.hints)


def test_a_chapter_not_yet_in_english_is_named_not_guessed(tmp_path):
    chapters = tmp_path / "chapters"
    shutil.copytree(ROOT / "chapters", chapters, ignore=shutil.ignore_patterns("translations"))
    first, *rest = CHAPTERS
    for g in rest:
        (chapters / "en" / g.notebook).unlink(missing_ok=True)
    assert (chapters / "en" / first.notebook).exists()
    out = guide.outputs(chapters_dir=chapters, lang="en")
    text = out["GUIDE.en.md"]
    assert _chapter_heads(text) == ["3.1"]
    said = re.search(r"^\*\*Not yet in English\*\*: (.*)$", text, re.M).group(1)
    assert [m.group(1) for m in re.finditer(r"(3\.\d) \(`chapters/", said)] == ["3.2", "3.3", "3.4", "3.5", "3.6"]
    assert not CHINESE.search(text + out["KEYS.en.md"])
    with using_language("zh"):  # the Chinese edition has every chapter: no such line
        assert "Not yet" not in guide.outputs(chapters_dir=chapters)["GUIDE.md"]


def test_an_unknown_language_is_a_usage_error_naming_zh_and_en():
    done = subprocess.run([sys.executable, "-m", "kvlab.teacher", "--lang", "fr", "--check"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "'fr'" in done.stderr and "zh, en" in done.stderr
    assert "Traceback" not in done.stderr


def test_check_with_lang_en_checks_the_english_files_and_leaves_the_readme_alone(tmp_path, capsys):
    from kvlab.teacher.__main__ import main

    readme = tmp_path / "README.md"
    readme.write_text("# no summary block here\n", encoding="utf-8")  # --lang en never reads it
    args = ["--lang", "en", "--out", str(tmp_path / "teacher"), "--readme", str(readme)]
    assert main(args + ["--check"]) == 1 and "GUIDE.en.md" in capsys.readouterr().out
    assert main(args) == 0
    assert sorted(p.name for p in (tmp_path / "teacher").iterdir()) == ["GUIDE.en.md", "KEYS.en.md"]
    assert readme.read_text(encoding="utf-8") == "# no summary block here\n"
    assert main(args + ["--check"]) == 0
    (tmp_path / "teacher" / "KEYS.en.md").write_text(GUIDE.text("generated", "en") + "\nold\n", encoding="utf-8")
    capsys.readouterr()
    assert main(args + ["--check"]) == 1
    said = capsys.readouterr().out
    assert "KEYS.en.md" in said and "GUIDE.en.md" not in said and "python -m kvlab.teacher --lang en" in said


def test_an_english_exercise_title_is_what_the_plan_and_objectives_show():
    rs = _english_reports()
    for r in rs:
        if r.exercise_module is None:
            continue
        for ex in r.exercise_module.EXERCISES:
            assert isinstance(ex, Exercise) and guide.exercise_titles(r)[ex.key] == ex.words("en").title


def test_lang_en_fills_the_readmes_english_block_only_where_there_is_one(tmp_path, capsys):
    from kvlab.teacher.__main__ import main

    readme = tmp_path / "README.md"
    text = f"# x\n\n{guide.README_EN_BEGIN}\nold\n{guide.README_EN_END}\n\nafter\n"
    readme.write_text(text, encoding="utf-8")
    args = ["--lang", "en", "--out", str(tmp_path / "teacher"), "--readme", str(readme)]
    assert main(args + ["--check"]) == 1 and "README.md" in capsys.readouterr().out
    assert main(args) == 0
    filled = readme.read_text(encoding="utf-8")
    assert "old" not in filled and filled.endswith(f"{guide.README_EN_END}\n\nafter\n")
    assert "GUIDE.en.md" in filled and f"{READING_SPEED_EN} words per minute" in filled and "Brysbaert" in filled
    assert not CHINESE.search(filled)
    assert main(args + ["--check"]) == 0
