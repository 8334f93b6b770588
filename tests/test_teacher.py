"""The teacher's guide and keys (kvlab.teacher): the committed files are what the code gives now, the minutes are
computed by the stated rules, every optional section and reference named exists, and every numeric quiz key shows
the expression kvlab computes it with."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from kvlab.exercises import CHAPTER_MODULES, chapter_module
from kvlab.exercises.quiz import NumberQuestion
from kvlab.teacher import guide, keys, minutes
from kvlab.teacher.chapters import CHAPTERS
from kvlab.teacher.references import REFERENCES
from kvlab.teacher.run_times import ChapterRuns, Measurement, cells_seconds, output_characters

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def generated():
    return guide.outputs(readme=ROOT / "README.md")


def test_committed_guide_keys_and_readme_are_in_sync_with_the_code(generated):
    """After a change to a chapter, its quiz or its exercises: ``python -m kvlab.teacher`` and commit teacher/ and
    README.md."""
    for name, text in generated.items():
        path = name if isinstance(name, Path) else ROOT / "teacher" / name
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is out of date: run python -m kvlab.teacher"


def test_check_flag_finds_a_stale_file(tmp_path, capsys):
    from kvlab.teacher.__main__ import main

    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{guide.README_BEGIN}\nold\n{guide.README_END}\n", encoding="utf-8")
    args = ["--out", str(tmp_path / "teacher"), "--readme", str(readme)]
    assert main(args + ["--check"]) == 1  # nothing there yet
    assert main(args) == 0 and "old" not in readme.read_text(encoding="utf-8")
    assert main(args + ["--check"]) == 0
    (tmp_path / "teacher" / "KEYS.md").write_text("typed by hand", encoding="utf-8")
    capsys.readouterr()
    assert main(args + ["--check"]) == 1 and "KEYS.md" in capsys.readouterr().out


def test_the_command_line_runs(tmp_path):
    done = subprocess.run([sys.executable, "-m", "kvlab.teacher", "--runs", "0"], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 2 and "--runs must be at least 1" in done.stderr


def _readme(tmp_path, text=None):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{guide.README_BEGIN}\nold\n{guide.README_END}\n" if text is None else text,
                      encoding="utf-8")
    return readme


def _usage_error(capsys, args) -> str:
    """Run the command in-process: it must stop with argparse's exit code 2 (no traceback); its message."""
    from kvlab.teacher.__main__ import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code == 2
    return capsys.readouterr().err


def test_check_never_writes_even_with_measure(tmp_path, monkeypatch, capsys):
    """--check --measure is refused before anything runs: the recorded run times stay as they are."""
    from kvlab.teacher import __main__ as cli

    recorded = tmp_path / "run_times.json"
    recorded.write_text(_measurement([1.0]).to_json(), encoding="utf-8")
    before = recorded.read_text(encoding="utf-8")
    measured = []
    monkeypatch.setattr(cli, "RUN_TIMES", recorded)
    monkeypatch.setattr(cli, "measure", lambda paths, **kw: measured.append(paths) or _measurement([2.0]))
    args = ["--out", str(tmp_path / "teacher"), "--readme", str(_readme(tmp_path))]
    err = _usage_error(capsys, args + ["--check", "--measure"])
    assert "--check" in err and "--measure" in err
    assert measured == [] and recorded.read_text(encoding="utf-8") == before
    assert not (tmp_path / "teacher").exists()
    with pytest.raises(SystemExit):  # --help states the rule
        cli.main(["--help"])
    assert "not with --measure" in " ".join(capsys.readouterr().out.split())
    assert cli.main(args + ["--measure", "--runs", "1"]) == 0  # without --check it measures and writes
    assert len(measured) == 1 and recorded.read_text(encoding="utf-8") == _measurement([2.0]).to_json()


@pytest.mark.parametrize("case", ["missing", "folder", "no markers", "end before begin"])
def test_a_bad_readme_is_a_usage_error_before_anything_is_written(tmp_path, monkeypatch, capsys, case):
    from kvlab.teacher import __main__ as cli

    readme = {"missing": tmp_path / "nope.md", "folder": tmp_path,
              "no markers": _readme(tmp_path, "# x\nno block here\n"),
              "end before begin": _readme(tmp_path, f"{guide.README_END}\n{guide.README_BEGIN}\n")}[case]
    monkeypatch.setattr(cli, "measure", lambda *a, **kw: pytest.fail("measured before the arguments were checked"))
    for extra in ([], ["--measure"]):
        err = _usage_error(capsys, ["--out", str(tmp_path / "teacher"), "--readme", str(readme)] + extra)
        assert "--readme" in err and "Traceback" not in err
    assert not (tmp_path / "teacher").exists()


def test_out_naming_a_file_is_a_usage_error(tmp_path, capsys):
    readme = _readme(tmp_path)
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    for out in (tmp_path / "notes.txt", tmp_path / "notes.txt" / "teacher"):
        err = _usage_error(capsys, ["--out", str(out), "--readme", str(readme)])
        assert "--out" in err and "is a file" in err
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine" and "old" in readme.read_text("utf-8")


def test_a_guide_or_keys_file_it_did_not_make_is_never_overwritten(tmp_path, capsys, generated):
    from kvlab.teacher.__main__ import OUT_FILES, main

    assert sorted(OUT_FILES) == sorted(n for n in generated if isinstance(n, str))  # every file it writes is guarded

    readme, out = _readme(tmp_path), tmp_path / "docs"
    out.mkdir()
    (out / "KEYS.md").write_text("# my own keys\n", encoding="utf-8")
    err = _usage_error(capsys, ["--out", str(out), "--readme", str(readme)])
    assert "--out" in err and "KEYS.md" in err
    assert (out / "KEYS.md").read_text(encoding="utf-8") == "# my own keys\n"
    assert not (out / "GUIDE.md").exists() and "old" in readme.read_text(encoding="utf-8")
    (out / "KEYS.md").unlink()
    assert main(["--out", str(out), "--readme", str(readme)]) == 0  # its own files it rewrites
    (out / "GUIDE.md").write_text(guide.GENERATED + "\n\nan older guide\n", encoding="utf-8")
    assert main(["--out", str(out), "--readme", str(readme)]) == 0
    assert "an older guide" not in (out / "GUIDE.md").read_text(encoding="utf-8")


def test_the_command_line_gives_no_traceback(tmp_path):
    done = subprocess.run([sys.executable, "-m", "kvlab.teacher", "--readme", str(tmp_path / "nope.md"), "--out",
                           str(tmp_path / "teacher")], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2 and "--readme" in done.stderr and "Traceback" not in done.stderr


def test_readme_carries_the_generated_summary(generated):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert guide.README_BEGIN in text and "python -m kvlab.book" in text.split(guide.README_BEGIN)[1]


# -- the chapters ---------------------------------------------------------------------------------------------
def test_every_chapter_has_a_guide_and_every_guide_a_chapter():
    assert sorted(g.notebook for g in CHAPTERS) == sorted(p.name for p in (ROOT / "chapters").glob("*.ipynb"))


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda g: g.notebook[:2])
def test_optional_sections_named_exist(chapter):
    """A renamed heading must fail here, not silently turn an optional section into a core one."""
    _, _, secs = minutes.sections(minutes.read_notebook(ROOT / "chapters" / chapter.notebook))
    for heading in chapter.optional_sections:
        assert any(s.heading.startswith(heading) for s in secs), f"{chapter.notebook}: no section {heading!r}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda g: g.notebook[:2])
def test_a_chapter_guide_is_complete(chapter):
    assert chapter.prerequisites and len(chapter.objectives) >= 3 and chapter.references
    for support in chapter.references + chapter.further_reading:
        assert support.key in REFERENCES and support.claim


def test_every_reference_supports_something():
    used = {s.key for g in CHAPTERS for s in g.references + g.further_reading}
    assert used == set(REFERENCES)


def test_only_3_6_is_optional_and_it_says_so(generated):
    assert [g.notebook[:2] for g in CHAPTERS if g.optional_chapter] == ["06"]
    assert "拓展，可选" in generated["GUIDE.md"]


# -- minutes ------------------------------------------------------------------------------------------------
def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(c) if kind == "md" else nbformat.v4.new_code_cell(c) for kind, c in cells]
    return json.loads(nbformat.writes(nb))


def test_sections_count_han_characters_per_heading():
    nb = _nb(("md", "# 3.9 标题\n\n引言两句。English words 123"), ("code", "x = lesson.a_panel()  # 中文注释"),
             ("md", "## 第一节\n\n正文\n\n### 小节\n\n更多"), ("md", "续上\n```python\n# 不是标题\n```"),
             ("md", "## 动手练习\n\n### 练习 1：做"))
    title, intro, secs = minutes.sections(nb)
    assert title == "3.9 标题" and intro == len("标题引言两句")
    assert [(s.level, s.heading, s.parent, s.characters) for s in secs] == [
        (2, "第一节", "", 5), (3, "小节", "第一节", 10), (2, "动手练习", "", 4), (3, "练习 1：做", "动手练习", 3)]
    assert [s.is_exercises for s in secs] == [False, False, True, True]
    assert minutes.panel_cells(nb) == 1


def test_minutes_add_up_by_the_stated_rules():
    m = minutes.Minutes(characters=3000, core_characters=2400, output_characters=600, run_seconds=90, panels=3,
                        exercises=(minutes.CODE_EXERCISE_MINUTES, minutes.CALC_EXERCISE_MINUTES), quiz_questions=4)
    speed = minutes.READING_SPEED
    assert m.reading == pytest.approx(3600 / speed) and m.core_reading == pytest.approx(3000 / speed)
    assert m.total == pytest.approx(3600 / speed + 1.5 + 3 * minutes.PANEL_MINUTES + minutes.CODE_EXERCISE_MINUTES
                                    + minutes.CALC_EXERCISE_MINUTES + 4 * minutes.QUIZ_MINUTES)


def test_an_exercise_with_a_function_to_write_gets_the_code_allowance():
    from kvlab.exercises.checker import Exercise

    code = Exercise("ch09.f", "t", "task", "def f(x):\n    return None  # your code", "ch09.check_f(f)", ("h",))
    calc = Exercise("ch09.n", "t", "task", "answer = None  # bytes", "ch09.check_n(answer)", ("h",))
    assert minutes.exercise_minutes(code) == minutes.CODE_EXERCISE_MINUTES
    assert minutes.exercise_minutes(calc) == minutes.CALC_EXERCISE_MINUTES


def test_run_time_and_printed_characters_of_an_executed_notebook():
    nb = nbformat.from_dict(_nb(("code", "a"), ("code", "b")))
    nb.cells[0].metadata["execution"] = {"iopub.execute_input": "2026-01-01T00:00:00.000Z",
                                         "shell.execute_reply": "2026-01-01T00:00:01.500Z"}
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="测得 3 ms\n")]
    nb.cells[1].outputs = [nbformat.v4.new_output("display_data", data={
        "text/html": "<b>读数</b><details><summary>答案</summary>参考答案</details>", "text/plain": "<HTML>"})]
    assert cells_seconds(nb) == pytest.approx(1.5)
    assert output_characters(nb) == len("测得读数")  # the folded reference solution is not counted


def _measurement(loads):
    return Measurement("2026-01-01 00:00 UTC", "CPU，2 核，Linux x86_64", [0.5, 0.5, 0.5], [0.5, 0.5, 0.5], "",
                       [ChapterRuns("01.ipynb", [30.0, 20.0], 100, list(loads))])


def test_appended_runs_keep_the_recorded_ones(monkeypatch):
    from kvlab.teacher import run_times

    from kvlab.resources import Limit

    monkeypatch.setattr(run_times, "run_once", lambda path: run_times.Run(12.0, 99, 2**30, 6.0))
    monkeypatch.setattr(run_times, "cpu_name", lambda: "CPU")
    monkeypatch.setattr(run_times, "cpu_budget", lambda: Limit(2, "cgroup CPU 配额"))
    previous = _measurement([5.0, 6.0])
    previous.machine = f"CPU，2 核，{run_times.platform.system()} {run_times.platform.machine()}"
    new = run_times.measure([Path("01.ipynb"), Path("02.ipynb")], runs=1, log=lambda *a: None, previous=previous)
    assert new.chapter("01.ipynb").seconds == [30.0, 20.0, 12.0] and new.chapter("01.ipynb").fastest == 12.0
    assert new.chapter("02.ipynb").seconds == [12.0] and new.date.startswith("2026-01-01 00:00 UTC – ")
    assert new.chapter("02.ipynb").peak_rss == [2**30] and new.chapter("02.ipynb").cpu_seconds == [6.0]
    assert new.chapter("01.ipynb").cpu_cores == [0.5]  # paired with the run that recorded it, not the first
    previous.machine = "another CPU，64 核，Linux x86_64"
    with pytest.raises(ValueError, match="^previous: measured on another CPU"):
        run_times.measure([Path("01.ipynb")], runs=1, log=lambda *a: None, previous=previous)


def test_busyness_says_idle_or_busy_from_the_recorded_load():
    assert "基本空闲" in _measurement([0.4, 1.9]).busyness()
    busy = _measurement([3.0, 9.0]).busyness()
    assert "4.5 个可运行的进程" in busy and "最快" in busy
    assert _measurement([1.0]).chapter("01.ipynb").fastest == 20.0


def test_the_guide_states_its_reading_speed_and_measured_machine(generated):
    text = generated["GUIDE.md"]
    assert f"{minutes.READING_SPEED} 汉字/分钟" in text and "IReST" in text and "Brysbaert" in text
    assert "未测" not in text, "run python -m kvlab.teacher --measure"


# -- keys ---------------------------------------------------------------------------------------------------
def test_answer_expressions_pair_with_the_number_questions():
    def review_questions():
        """doc"""
        k = 3
        return [NumberQuestion("3.9", "q", k * 2, "个", "e", "h"), NumberQuestion("3.9", "q", answer=k + 1, unit="个",
                                                                              explanation="e", hint="h")]

    setup, exprs = keys.answer_expressions(review_questions)
    assert setup == ["k = 3"] and exprs == ["k * 2", "k + 1"]


def quiz_modules():
    out = []
    for g in CHAPTERS:
        nb = minutes.read_notebook(ROOT / "chapters" / g.notebook)
        if minutes.has_quiz(nb):
            out.append(importlib.import_module(minutes.lesson_module_name(nb)))
    return out


def test_every_numeric_quiz_key_shows_how_kvlab_computes_it(generated):
    modules = quiz_modules()
    assert modules  # the course has a quiz
    for module in modules:
        numbers = [q for q in module.review_questions() if isinstance(q, NumberQuestion)]
        _, exprs = keys.answer_expressions(module.review_questions)
        assert len(exprs) == len(numbers) and all(exprs)
        for q, expr in zip(numbers, exprs):
            assert f"`{expr}` = `{q.answer!r}`" in generated["KEYS.md"]


def test_every_exercise_has_its_solution_and_grader_in_the_keys(generated):
    text = generated["KEYS.md"]
    from kvlab.exercises.solutions import SOLUTIONS

    for module in map(chapter_module, CHAPTER_MODULES):
        for ex in module.EXERCISES:
            assert f"`{ex.key}`" in text and SOLUTIONS[ex.key].strip() in text
            assert f"{module.__name__}.grade_{ex.name}" in text
    assert set(keys.MEASURED) <= set(SOLUTIONS)  # a renamed exercise must not lose its "measured" note
    shown = 0
    for module in map(chapter_module, CHAPTER_MODULES):
        for ex in module.EXERCISES:
            if ex.key not in keys.MEASURED:
                values = keys.solution_values(module, ex.key)
                shown += len(values)
                assert all(f"- `{k}` = `{v!r}`" in text for k, v in values.items())
    assert shown  # some solutions compute plain values, and the keys show them


def test_every_notebook_with_a_quiz_has_its_keys(generated):
    """A notebook showing a Quiz must be found by minutes.has_quiz (questions from lesson.review_questions())."""
    for g in CHAPTERS:
        nb = minutes.read_notebook(ROOT / "chapters" / g.notebook)
        shows = any("Quiz(" in "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        assert shows == minutes.has_quiz(nb), g.notebook
        if shows:
            number = g.notebook[1]
            assert f"## 3.{number} 自测" in generated["KEYS.md"]


def test_run_once_reads_the_kernels_peak_memory_and_cpu_time(tmp_path):
    """A real kernel: the probe after the last cell reports VmHWM and CPU time, and is not counted as a cell."""
    import nbformat

    from kvlab.teacher import run_times

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = bytearray(200 * 2**20)\nprint('读数')")])
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    run = run_times.run_once(path)
    assert run.peak_rss > 200 * 2**20 and run.cpu_seconds > 0 and run.output_characters == 2


def _class(peaks, cpu, seconds=(40.0, 20.0)):
    chapters = [ChapterRuns(f"0{i}.ipynb", [s], 10, [1.0], [p], [c])
                for i, (p, c, s) in enumerate(zip(peaks, cpu, seconds), 1)]
    return Measurement("2026-01-01 00:00 UTC", "CPU，2 核，Linux x86_64", [0.5] * 3, [0.5] * 3, "", chapters)


def test_student_needs_are_computed_from_the_measured_kernels():
    from kvlab.teacher import classroom

    gib = 2**30
    needs = classroom.student_needs(_class([int(0.76 * gib), int(0.36 * gib)], [30.0, 12.0]))
    assert needs.peak_chapter == "01.ipynb" and needs.peak_bytes == int(0.76 * gib)
    assert needs.memory_guarantee == 1.5  # 0.76 + 0.5 -> 1.26 -> 1.5
    assert needs.memory_limit == 2.5  # 1.5 + 0.76 -> 2.26 -> 2.5
    assert needs.cpu_cores == 0.75 and needs.cpu_guarantee == 0.75 and needs.cpu_limit == 1
    small = classroom.student_needs(_class([int(0.2 * gib)], [4.0], seconds=(40.0,)))
    assert small.memory_guarantee == 0.75 and small.memory_limit == 2.0 and small.cpu_guarantee == 0.25
    yaml = classroom.singleuser_yaml(needs)
    assert "guarantee: 1.5G" in yaml and "limit: 2.5G" in yaml and "guarantee: 0.75" in yaml


def test_class_section_without_memory_runs_says_how_to_measure():
    from kvlab.teacher import classroom

    old = _measurement([1.0])  # runs recorded before peak memory was
    text = classroom.class_section(old)
    assert "TLJH" in text and "Zero to JupyterHub" in text and "python -m kvlab.teacher --measure" in text
    assert "singleuser" not in text


def test_the_guide_has_the_class_section_with_measured_numbers(generated):
    text = generated["GUIDE.md"]
    assert "## 给一个班开课：JupyterHub" in text and "python -m kvlab.teacher.link" in text
    assert "内核峰值内存" in text and "singleuser:" in text, "run python -m kvlab.teacher --measure"
