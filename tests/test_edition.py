"""The English edition is generated from the Chinese chapters and kept in step by hashes (kvlab.edition, issue 34)."""
import io

import nbformat
import pytest

from kvlab import edition
from kvlab.edition import (Translation, english_notebook, read_translations, source_hash, write_translations)

# The chapters whose English translation file does not exist yet: the list may only shrink (the test below fails
# when a chapter gains a translation and stays listed, or a new chapter is neither translated nor listed).
NOT_YET_IN_ENGLISH: set[str] = set()


def planted():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 标题", id="m0"),
                nbformat.v4.new_code_cell('import kvlab\nkvlab.set_language("zh")\nprint(1)', id="c1"),
                nbformat.v4.new_markdown_cell("正文", id="m2"),
                nbformat.v4.new_code_cell("x = 2  # same in both", id="c3")]
    return nb


def test_a_complete_translation_gives_the_same_code_and_english_prose():
    nb = planted()
    tr = {"m0": Translation("m0", source_hash("# 标题"), "# Title"), "m2": Translation("m2", source_hash("正文"), "Body")}
    en, report = english_notebook(nb, tr, "x.ipynb")
    assert report.lines() == []
    assert [c.source for c in en.cells] == ["# Title", 'import kvlab\nkvlab.set_language("en")\nprint(1)', "Body",
                                            "x = 2  # same in both"]
    assert [c.id for c in en.cells] == [c.id for c in nb.cells]
    assert en.metadata["kvlab_edition"] == {"language": "en", "from": "x.ipynb"}
    assert nb.cells[1].source.endswith('"zh")\nprint(1)')  # the Chinese notebook is left as it was


def test_stale_missing_orphan_and_unwritten_translations_are_named():
    nb = planted()
    tr = {"m0": Translation("m0", source_hash("# 旧标题"), "# Title"), "gone": Translation("gone", "0" * 12, "x")}
    _, report = english_notebook(nb, tr, "x.ipynb")
    assert (report.stale, report.missing, report.orphan) == (["m0"], ["m2"], ["gone"])
    tr = {"m0": Translation("m0", source_hash("# 标题"), "TRANSLATE\n\n> # 标题"),
          "m2": Translation("m2", source_hash("正文"), "Body")}
    _, report = english_notebook(nb, tr, "x.ipynb")
    assert report.untranslated == ["m0"] and "unwritten translation for cells m0" in report.lines()[0]
    nb.cells[3].source = 'kvlab.set_language("zh")'
    assert "2 language lines" in english_notebook(nb, tr, "x.ipynb")[1].lines()[-1]


def test_the_translation_file_round_trips_and_refuses_bad_text():
    blocks = [Translation("a", "0123456789ab", "First\n\nparagraphs"), Translation("b", "ba9876543210", "Second")]
    assert list(read_translations(write_translations(blocks)).values()) == blocks
    with pytest.raises(ValueError, match="starts with"):
        read_translations("stray text\n" + write_translations(blocks))
    with pytest.raises(ValueError, match="translated twice"):
        read_translations(write_translations(blocks + blocks[:1]))


def test_generate_writes_only_its_own_files_and_start_never_overwrites(tmp_path):
    nbformat.write(planted(), tmp_path / "01_x.ipynb")
    out = io.StringIO()
    assert edition.start("01_x", tmp_path, out) == 0
    path = tmp_path / "en" / "translations" / "01_x.md"
    assert edition.start("01_x", tmp_path, out) == 1 and "not overwritten" in out.getvalue()
    assert edition.generate(tmp_path, out=out) == 1 and "unwritten translation" in out.getvalue()  # not filled in
    path.write_text(write_translations([Translation("m0", source_hash("# 标题"), "# Title"),
                                        Translation("m2", source_hash("正文"), "Body")]), encoding="utf-8")
    foreign = tmp_path / "en" / "01_x.ipynb"
    foreign.write_text(nbformat.writes(nbformat.v4.new_notebook()), encoding="utf-8")
    before = foreign.read_text()
    assert edition.generate(tmp_path, out=out) == 1 and foreign.read_text() == before  # not kvlab's: left alone
    foreign.unlink()
    assert edition.generate(tmp_path, out=out) == 0 and foreign.exists()
    assert edition.generate(tmp_path, check=True, out=out) == 0


def test_every_chapter_is_in_the_english_edition_or_listed_as_not_yet():
    assert {p.stem for p in edition.untranslated_chapters()} == NOT_YET_IN_ENGLISH


@pytest.mark.parametrize("zh", edition.edition_chapters(), ids=lambda p: p.stem)
def test_the_english_chapter_is_complete_and_up_to_date(zh):
    nb, report = edition.chapter(zh)
    assert report.lines() == []
    target = edition.english_path(zh)
    assert target.exists() and target.read_text(encoding="utf-8") == edition.rendered(nb), \
        f"{target.name}: out of date; run python -m kvlab.edition"
    zh_code = [c.source for c in nbformat.read(zh, 4).cells if c.cell_type == "code"]
    en_code = [c.source.replace('kvlab.set_language("en")', 'kvlab.set_language("zh")')
               for c in nbformat.read(target, 4).cells if c.cell_type == "code"]
    assert en_code == zh_code


@pytest.mark.parametrize("zh", edition.edition_chapters(), ids=lambda p: p.stem)
def test_the_exercise_section_is_the_generators_english_and_not_translated(zh):
    """One source for the exercises' words: the English section is what kvlab.exercises writes in English (the
    intro and each task from ExerciseText), so the translation file holds none of its cells."""
    from kvlab.exercises.notebook import META_KEY as EXERCISE_KEY, module_for, section_cells

    target = edition.english_path(zh)
    shown = [c.source for c in nbformat.read(target, 4).cells if EXERCISE_KEY in c.metadata]
    assert shown == ["".join(c["source"]) for c in section_cells(module_for(zh), "en")]
    assert not any(cid.startswith("kvlab-ex-") for cid in read_translations(
        edition.translation_path(zh).read_text(encoding="utf-8")))


def test_a_translation_of_a_generated_exercise_cell_is_named():
    from kvlab.exercises import ch01
    from kvlab.exercises.notebook import section_cells

    nb = planted()
    nb.cells += [nbformat.from_dict({**c, "source": "".join(c["source"])}) for c in section_cells(ch01, "zh")]
    intro = nb.cells[4]
    tr = {"m0": Translation("m0", source_hash("# 标题"), "# Title"), "m2": Translation("m2", source_hash("正文"), "Body"),
          intro.id: Translation(intro.id, source_hash(intro.source), "## Exercises")}
    en, report = english_notebook(nb, tr, ch01.NOTEBOOK)
    assert report.generated == [intro.id] and "needless" in report.lines()[0]
    del tr[intro.id]
    en, report = english_notebook(nb, tr, ch01.NOTEBOOK)
    assert report.lines() == [] and en.cells[4].source == "".join(section_cells(ch01, "en")[0]["source"])
