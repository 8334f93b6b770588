"""Chapter 3.2 in English beside the Chinese: every panel state, readout, figure (titles, axes, legends, hover text),
the real models' table, the growth run's readout and the exercises (titles, tasks, hints, verdicts) hold no Chinese
in English and print the numbers the Chinese ones print; the Chinese stay as they are."""
import json
import re

import pytest

from kvlab.device import LastLevelCache
from kvlab.exercises import ch02, checker
from kvlab.language import using_language
from kvlab.lessons import storage as lesson
from kvlab.lessons.storage import panels as storage_panels
from kvlab.viz import storage_plots
from tests.test_lesson_storage import GROWTH_SHAPES, _comparison, _timed

CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
SHAPES = [dict(L=32, H=32, D=128, S=1024, filled_pct=30), dict(L=2, H=3, D=4, S=10, filled_pct=30),
          dict(L=128, H=128, D=256, S=100_000, filled_pct=100), dict(L=80, H=8, D=128, S=4096, filled_pct=0)]
BYTES = [(1, "fp16"), (64, "int8"), (1000, "fp32"), (3, "int4")]
PADDING = [("12, 40, 7, 33, 25, 60", 16, 0), ("12, 40, 7", 64, 8), ("3000, 5, 900", 1, 256), ("5, 5", 5, 0)]


def _figure_text(fig) -> str:
    """Every text a learner can see in a figure: titles, annotations, axes, trace names, hover and point text."""
    j = fig.to_plotly_json()
    layout = j["layout"]
    dump = lambda x: json.dumps(x, ensure_ascii=False)  # noqa: E731
    parts = [dump(layout.get("title")), dump(layout.get("annotations"))]
    parts += [dump(v.get("title")) + dump(v.get("ticktext")) for k, v in layout.items() if k.startswith(("xaxis", "yaxis"))]
    parts += [dump({k: d.get(k) for k in ("name", "text", "hovertext")}) for d in j["data"]]
    return "\n".join(parts)


def _views():
    """Every panel's views over a range of states: (readout, figures)."""
    for shape in SHAPES:
        yield lesson.render_shape(**shape)
        for B, dtype in BYTES:
            yield lesson.render_bytes(B, dtype, **shape)
    for args in PADDING:
        yield lesson.render_padding(*args)


def _texts() -> list[str]:
    out = []
    for view in _views():
        out.append(view.html)
        out += [_figure_text(f) for f in view.figures]
    out += [lesson.model_table_html(), lesson.head_dim_note(), repr(lesson.gpu_lines()), lesson.example_text()]
    for shape in GROWTH_SHAPES.values():
        growth = _timed(*shape)
        out += [growth.copy_sentence(), _figure_text(growth.figure())]
        if growth.transformers_skipped:  # the helper's reason is Chinese; compare_cache_growth's is the course's
            growth.transformers_skipped = lesson.TEXTS.say("no_transformers")
            out.append(growth.readout_html())
    for llc in (None, LastLevelCache("L3", 32 * 2**20, "sysfs"), LastLevelCache("L2", 2**10, "sysfs")):
        growth = _comparison(llc=llc)
        growth.transformers_skipped = lesson.TEXTS.say("no_transformers")
        out += [growth.llc_sentence(), growth.readout_html()]
    return out


def test_every_panel_figure_and_readout_in_english_holds_no_chinese_and_the_same_numbers():
    zh = _texts()
    with using_language("en"):
        en = _texts()
    assert len(zh) == len(en)
    for z, e in zip(zh, en):
        assert CJK.search(z) and not CJK.search(e), e[:300]
        # the same numbers, except where a ratio is written the Chinese way (万, 亿) or a count word replaced
        if "万" not in z and "亿" not in z:
            assert set(NUMBER.findall(z)) <= set(NUMBER.findall(e)) | {"1", "0", "3"}, (z[:200], e[:200])


def test_the_controls_are_labelled_in_the_course_language():
    with using_language("en"):
        shape = lesson.shape_panel()
        bytes_ = lesson.bytes_panel(shape)
        padding = lesson.padding_panel()
        growth = lesson.growth_panel(lesson.wide_cache_model())
    labels = [c.description for p in (shape, bytes_, padding, growth) for c in p.controls.values()]
    assert labels == ["Layers L", "KV heads H", "Head size D", "Sequence length S", "Generated (%)", "Batch B",
                      "Data type", "Each sequence's length now (prompt + generated)", "Block size",
                      "Reserved per sequence for generation", "Most tokens the cache holds"]
    assert [o[0] for o in growth.controls["tokens"].options] == [
        "64 tokens (cache up to 16.0 MiB)", "128 tokens (cache up to 32.0 MiB)", "256 tokens (cache up to 64.0 MiB)"]
    assert lesson.BATCH_LABEL == "批次 B" and lesson.SHAPE_LABELS["S"] == "序列长度 S"  # the constants stay Chinese
    assert storage_panels.label(lesson.BLOCK_LABEL) == "分页块大小"


def test_a_bad_value_names_the_control_as_the_learner_sees_it():
    from kvlab.inputs import InputError

    with using_language("en"), pytest.raises(InputError, match="Sequence length S"):
        lesson.render_shape(**(SHAPES[0] | dict(S=0)))
    with using_language("en"), pytest.raises(InputError, match="Batch B"):
        lesson.render_bytes(0, "fp16", **SHAPES[0])


def test_gpu_lines_the_fit_readout_and_one_sequence_read_right_in_english():
    with using_language("en"):
        # the memory lines carry the size in GiB, computed from the card's MiB (the chapter keeps GB and GiB apart)
        assert [label for label, _ in lesson.gpu_lines()] == ["T4 16 GB (Colab) memory: 15.00 GiB",
                                                            "H100 80 GB memory: 79.65 GiB"]
        fits = _comparison(per_token=2**18, peak_tokens=48, llc=LastLevelCache("L3", 32 * 2**20, "sysfs"),
                           weights=4 * 2**20).llc_sentence()
        assert "too little to measure" not in fits
        assert fits.endswith("which fits in L3: the copies never have to go out to main memory, so what they cost "
                             "here is the copying and allocating itself (the next cell measures it).")
        one = storage_plots.batch_bytes_figure(2, 1, 4, 10, 8, 10, "fp32").layout.annotations[0].text
        three = storage_plots.batch_bytes_figure(2, 3, 4, 10, 8, 10, "fp32").layout.annotations[0].text
        assert one.startswith("K (V is as large, stored apart): one sequence;") and "sequences stacked" not in one
        assert "3 sequences stacked;" in three
    assert [label for label, _ in lesson.gpu_lines()] == ["T4 16 GB (Colab) 的显存：15.00 GiB", "H100 80 GB 的显存：79.65 GiB"]
    assert "1 条序列叠起来" in storage_plots.batch_bytes_figure(2, 1, 4, 10, 8, 10, "fp32").layout.annotations[0].text


def test_english_ratios_read_as_an_engineer_says_them():
    with using_language("en"):
        said = [storage_plots.ratio_text(r) for r in (8, 1.125, 0.25, 2 / 3, 9.77e8, 1 / 8_388_608, 1 / 500.5)]
        assert said == ["8×", "about 1.12×", "1/4", "about 0.67×", "about 977 million times", "about 1/8.39 million",
                        "about 1/500"]
        assert storage_plots.compared_with(5, 5, "the original's example") == "the same size as the original's example"
        assert storage_plots.compared_with(1, 4, "x") == "1/4 of x" and storage_plots.compared_with(40, 5, "x") == "8× x"
    assert storage_plots.ratio_text(8) == "8 倍"  # Chinese as before


def test_the_models_table_marks_past_context_in_english():
    with using_language("en"):
        table = lesson.model_table_html()
    assert "144.0 MiB*" in table and "＊" not in table and "<th>Trained context</th>" in table
    assert "Llama-3-8B shares one set of K/V among every 4 query heads" in table
    assert lesson.PAST_CONTEXT == "＊" and "144.0 MiB＊" in lesson.model_table_html()


# -- the exercises -------------------------------------------------------------------------------------------
def test_titles_tasks_and_hints_have_english_words():
    for exercise in ch02.EXERCISES:
        words = exercise.words("en")
        assert len(words.hints) == len(exercise.hints)
        for text in (words.title, words.task, *words.hints):
            assert text.strip() and not CJK.search(text), text
    assert "1,800, 420, 95, 640 tokens" in ch02.PADDING.words("en").task
    assert "S = 8,192, batch B = 4" in ch02.CACHE_SIZE.words("en").task


@pytest.mark.parametrize("mistakes,grade", [(ch02.cache_size_mistakes, ch02.grade_cache_size),
                                            (ch02.padding_mistakes, ch02.grade_padding)])
def test_every_verdict_in_english_says_the_chinese_numbers(mistakes, grade):
    checker.reset_attempts()
    answers = [*mistakes(), None, "1 GB", 12345]
    zh = [grade(a) for a in answers]
    with using_language("en"):
        en = [grade(a) for a in answers]
        assert set(mistakes().values()) == {v.message for v in en[:len(mistakes())]}
    for z, e in zip(zh, en):
        assert z.status == e.status
        text_z, text_e = z.message + "".join(z.details), e.message + "".join(e.details)
        assert not CJK.search(text_e), text_e
        assert sorted(NUMBER.findall(text_z)) == sorted(NUMBER.findall(text_e)), (text_z, text_e)
