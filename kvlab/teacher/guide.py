"""The teacher's guide (GUIDE.md) and answer keys (KEYS.md), written from the notebooks, the chapter guides, the
measured run times, the quizzes and the exercises. ``python -m kvlab.teacher`` writes them; ``--check`` says
whether the committed files are what the code gives now. ``--lang en`` writes GUIDE.en.md and KEYS.en.md from the
English edition (``chapters/en/``): every word from the phrasebooks (:mod:`.phrases`, :mod:`.chapter_texts`), the
reading counted in English words at :data:`~kvlab.teacher.phrases.READING_SPEED_EN` a minute; a chapter not yet in
English is named, not guessed at.
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from pathlib import Path

from ..exercises import CHAPTER_MODULES, chapter_module
from ..language import check_language, get_language, using_language
from . import keys
from .chapter_texts import chapter_id, say as chapter_say
from .chapters import CHAPTERS, ChapterGuide, Objective
from . import plans
from .minutes import (CALC_EXERCISE_MINUTES, CLASS_OPENING_MINUTES, CODE_EXERCISE_MINUTES, DISCUSSION_MINUTES,
                      PANEL_MINUTES, QUIZ_MINUTES, READING_SPEED, Minutes, Section, english_words, exercise_minutes,
                      has_quiz, lesson_module_name, panel_cells, quiz_questions, read_notebook, sections)
from .phrases import GUIDE, READING_SPEED_EN
from .references import REFERENCES
from .classroom import class_section
from .run_times import RUN_TIMES, Measurement

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS_DIR = ROOT / "chapters"
ENGLISH_DIR = "en"  # the English edition: chapters/en/
GENERATED = GUIDE.text("generated", "zh")
OUT_NAMES = {"zh": ("GUIDE.md", "KEYS.md"), "en": ("GUIDE.en.md", "KEYS.en.md")}


def chapters_of(lang: str, chapters_dir: Path = CHAPTERS_DIR) -> Path:
    """Where ``lang``'s notebooks are: ``chapters/`` for Chinese, ``chapters/en/`` for English."""
    return chapters_dir if check_language(lang) == "zh" else chapters_dir / ENGLISH_DIR


def say(key: str, /, **fields) -> str:
    return GUIDE.say(key, **fields)


@dataclass
class ChapterReport:
    """Everything the guide says about one chapter."""

    guide: ChapterGuide
    number: str  # "3.1"
    title: str  # without the number
    intro: int  # 汉字 before the first section (the title and 「你将会」)
    sections: list[Section]
    minutes: Minutes
    exercise_module: object | None
    quiz_module: object | None
    lang: str = "zh"
    words_per_character: float | None = None  # English: the chapter's prose words per Chinese prose character

    @property
    def path(self) -> str:
        """The notebook's path in the repository."""
        return (f"chapters/{self.guide.notebook}" if self.lang == "zh"
                else f"chapters/{ENGLISH_DIR}/{self.guide.notebook}")

    def text(self, kind: str, i: int | None = None) -> str:
        """The chapter guide's sentence ``kind`` (number ``i``) in the report's language."""
        key = f"{chapter_id(self.guide)}.{kind}" + (f".{i}" if i is not None else "")
        return chapter_say(key, self.lang)


def exercise_module_for(notebook: str):
    return next((m for m in map(chapter_module, CHAPTER_MODULES) if m.NOTEBOOK == notebook), None)


def chapter_report(guide: ChapterGuide, measurement: Measurement | None, chapters_dir: Path = CHAPTERS_DIR,
                   lang: str = "zh"):
    nb = read_notebook(chapters_dir / guide.notebook)
    title, intro, secs = sections(nb)
    number, _, name = title.partition(" ")
    optional = guide.optional_sections
    for s in secs:
        s.optional = any(h.startswith(o) for h in (s.heading, s.parent) if h for o in optional)
    ex_module = exercise_module_for(guide.notebook)
    quiz = None
    if has_quiz(nb):
        quiz = importlib.import_module(lesson_module_name(nb))
    characters = intro + sum(s.characters for s in secs)
    core = intro + sum(s.characters for s in secs if not s.optional)
    runs = measurement.chapter(guide.notebook) if measurement else None
    optional_heading = {s.heading for s in secs if s.optional}
    core_output = (sum(n for heading, n in runs.section_output.items() if heading not in optional_heading)
                   if runs and runs.section_output else None)  # None: recorded before sections were, all core
    output = runs.output_characters if runs else 0
    rate, ratio = READING_SPEED, None
    if lang == "en":  # the English chapter's words, its sections paired with the Chinese ones they translate
        en_title, en_intro, en_secs = sections(read_notebook(chapters_dir / ENGLISH_DIR / guide.notebook),
                                               english_words)
        if len(en_secs) != len(secs):
            raise ValueError(f"chapters/{ENGLISH_DIR}/{guide.notebook} has {len(en_secs)} sections, the Chinese "
                             f"chapter {len(secs)}")
        for en, zh in zip(en_secs, secs):
            en.optional, en.source, en.rate = zh.optional, zh, READING_SPEED_EN
        en_characters = en_intro + sum(s.characters for s in en_secs)
        ratio = en_characters / characters if characters else 0.0
        output = round(output * ratio)
        core_output = round(core_output * ratio) if core_output is not None else None
        number, _, name = en_title.partition(" ")
        intro, secs, characters = en_intro, en_secs, en_characters
        core = intro + sum(s.characters for s in secs if not s.optional)
        rate = READING_SPEED_EN
    minutes = Minutes(characters=characters, core_characters=core,
                      output_characters=output, core_output_characters=core_output,
                      run_seconds=runs.fastest if runs else None,
                      panels=panel_cells(nb),
                      exercises=tuple(exercise_minutes(e) for e in ex_module.EXERCISES) if ex_module else (),
                      quiz_questions=quiz_questions(nb, quiz), rate=rate)
    return ChapterReport(guide, number, name, intro, secs, minutes, ex_module, quiz, lang, ratio)


def in_edition(guide: ChapterGuide, lang: str, chapters_dir: Path = CHAPTERS_DIR) -> bool:
    """Whether ``lang``'s edition has the chapter yet."""
    return (chapters_of(lang, chapters_dir) / guide.notebook).exists()


def reports(chapters_dir: Path = CHAPTERS_DIR, run_times: Path = RUN_TIMES, lang: str = "zh") -> list[ChapterReport]:
    """The chapters of ``lang``'s edition, in course order (English: those ``chapters/en/`` holds)."""
    measurement = Measurement.load(run_times) if Path(run_times).exists() else None
    return [chapter_report(g, measurement, chapters_dir, lang) for g in CHAPTERS if in_edition(g, lang, chapters_dir)]


def missing_chapters(chapters_dir: Path = CHAPTERS_DIR, lang: str = "zh") -> list[ChapterGuide]:
    """The chapters ``lang``'s edition does not have yet."""
    return [g for g in CHAPTERS if not in_edition(g, lang, chapters_dir)]


def _m(x: float) -> str:
    return f"{x:.1f}"


def _up(x: float) -> int:
    """Whole minutes, rounded up (a plan should not run short)."""
    return math.ceil(x - 1e-9)


# -- GUIDE.md --------------------------------------------------------------------------------------------------
def course_map(rs: list[ChapterReport]) -> str:
    names = {r.number: f"{r.number} {r.title}" for r in rs}
    lines = ["```"]
    main = [r for r in rs if not r.guide.optional_chapter]
    lines.append("  ──▶  ".join(r.number for r in main) + say("map_main"))
    for r in rs:
        if r.guide.optional_chapter:
            lines.append(say("map_extra", builds=" + ".join(c for c, _ in r.guide.builds_on), number=r.number))
    lines.append("```")
    lines += ["", say("map_table_head"), "|---|---|"]
    for r in rs:
        uses = say("map_uses_sep").join(say("map_use", chapter=c, what=r.text("builds_on", i))
                                        for i, (c, _) in enumerate(r.guide.builds_on, 1)) or say("map_start")
        lines.append(f"| {names[r.number]} | {uses} |")
    return "\n".join(lines)


def _span(rs: list[ChapterReport]) -> str:
    return rs[0].number if len(rs) == 1 else f"{rs[0].number}–{rs[-1].number}"


def time_table(rs: list[ChapterReport], measurement: Measurement | None) -> str:
    lines = [say("time_table_head"), "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    main_total = core_total = 0.0
    for r in rs:
        m = r.minutes
        run = _m(m.running) if m.run_seconds is not None else say("not_measured")
        ex = say("count_exercises", minutes=_m(m.exercise_minutes), n=len(m.exercises))
        quiz = say("count_quiz", minutes=_m(m.quiz_minutes), n=m.quiz_questions) if m.quiz_questions else "—"
        label = f"{r.number}{say('extension_mark') if r.guide.optional_chapter else ''}"
        lines.append(f"| {label} | {say('amount', prose=m.characters, output=m.output_characters)} | {_m(m.reading)} | "
                     f"{_m(m.core_reading)} | {run} | {say('count_panels', minutes=_m(m.panel_minutes), n=m.panels)} | "
                     f"{ex} | {quiz} | **{_up(m.total)}** |")
        if not r.guide.optional_chapter:
            main_total += m.total
            core_total += m.total - (m.reading - m.core_reading)
    main = [r for r in rs if not r.guide.optional_chapter]
    extra_rs = [r for r in rs if r.guide.optional_chapter]
    extra = sum(r.minutes.total for r in extra_rs)
    if main and extra_rs:
        lines += ["", say("time_total", main_span=_span(main), main=_up(main_total), core=_up(core_total),
                          extra_span=say("list_sep").join(r.number for r in extra_rs), extra=_up(extra))]
    return "\n".join(lines)


def method(measurement: Measurement | None, lang: str = "zh") -> str:
    lines = [
        say("method_lead"),
        "",
        say("method_reading", speed=READING_SPEED_EN if lang == "en" else READING_SPEED),
        say("method_running"),
        say("method_panels", minutes=PANEL_MINUTES),
        say("method_exercises", code=CODE_EXERCISE_MINUTES, calc=CALC_EXERCISE_MINUTES),
        say("method_quiz", minutes=QUIZ_MINUTES),
        say("method_core"),
    ]
    if lang == "en":
        lines.append(say("method_output_en"))
    if measurement:
        runs = {len(ch.seconds) for ch in measurement.chapters}
        lines += ["", say("measured_on", date=measurement.date, machine=measurement.machine_words(lang),
                          runs="/".join(map(str, sorted(runs))),
                          before=", ".join(map(str, measurement.load_before)),
                          after=", ".join(map(str, measurement.load_after)), busyness=measurement.busyness(),
                          note=measurement.note if lang == "zh" else "")]
        lines += ["", say("runs_table_head"), "|---|---|---|---:|---:|"]
        lines += [f"| `{ch.notebook}` | {', '.join(f'{s:.1f}' for s in ch.seconds)} | "
                  f"{', '.join(f'{x:.1f}' for x in ch.load)} | {ch.fastest:.1f} | {ch.output_characters:,} |"
                  for ch in measurement.chapters]
    else:
        lines += ["", say("not_measured_yet")]
    return "\n".join(lines)


def exercise_titles(r: ChapterReport) -> dict[str, str]:
    """The chapter's exercises, key -> title as the notebook of the report's language shows it (「练习 1：……」)."""
    return ({ex.key: ex.words(r.lang).title for ex in r.exercise_module.EXERCISES}
            if r.exercise_module is not None else {})


def objective_line(r: ChapterReport, i: int, o: Objective, last: bool) -> str:
    """One numbered objective, with the titles of the exercises that practise it (KeyError for a key that is not
    an exercise of this chapter: the test names it first)."""
    titles = exercise_titles(r)
    practised = (say("objective_practised", titles=say("objective_sep").join(titles[k] for k in o.exercises))
                 if o.exercises else "")
    return f"{i}. {r.text('objective', i)}{practised}{say('objective_end') if last else say('objective_more')}"


def chapter_section(r: ChapterReport) -> str:
    g, m = r.guide, r.minutes
    head = say("ch_head", number=r.number, title=r.title)
    lines = [head, "", say("ch_notebook", path=r.path)]
    if g.optional_chapter:
        lines += ["", say("ch_optional", why=r.text("optional_chapter"))]
    quiz = say("ch_time_quiz", minutes=_m(m.quiz_minutes)) if m.quiz_questions else ""
    lines += ["", say("ch_time", reading=_m(m.reading), core=_m(m.core_reading),
                      running=_m(m.running) if m.run_seconds is not None else say("not_measured"),
                      panels=_m(m.panel_minutes), exercises=_m(m.exercise_minutes), quiz=quiz, total=_up(m.total))]
    if r.words_per_character is not None:
        lines += ["", say("ch_output_estimate", output=m.output_characters, ratio=r.words_per_character)]
    lines += ["", say("ch_prereq_head"), ""] + [f"- {r.text('prerequisite', i)}"
                                                for i in range(1, len(g.prerequisites) + 1)]
    lines += ["", say("ch_objectives_head"), ""]
    lines += [objective_line(r, i, o, last=i == len(g.objectives)) for i, o in enumerate(g.objectives, 1)]
    if g.discussion:
        lines += ["", say("ch_discussion_head", minutes=DISCUSSION_MINUTES), ""]
        lines += [f"{i}. {r.text('discussion', i)}" for i in range(1, len(g.discussion) + 1)]
    lines += ["", say("ch_sections_head"), "", say("ch_sections_table"), "|---|---:|---:|---|",
              say("ch_opening_row", amount=r.intro, minutes=_m(r.intro / r.minutes.rate))]
    whys = list(g.optional_sections)
    for s in r.sections:
        heading = (s.source or s).heading
        own = next((r.text("optional", i) for i, head in enumerate(whys, 1) if heading.startswith(head)), None)
        kind = (say("kind_exercises") if s.is_exercises else say("kind_optional_own", why=own) if own
                else say("kind_optional_parent", parent=s.parent) if s.optional else say("kind_core"))
        shown = say("sub_heading", heading=s.heading) if s.level == 3 else s.heading
        lines.append(f"| {shown} | {s.characters:,} | {_m(s.reading_minutes)} | {kind} |")
    lines += ["", say("ch_refs_head"), ""]
    for i, sup in enumerate(g.references, 1):
        lines.append(say("ref_line", citation=sup.reference.citation(), claim=r.text("reference", i)))
    if g.further_reading:
        lines += ["", say("ch_further_head"), ""]
        lines += [say("ref_line", citation=sup.reference.citation(), claim=r.text("further", i))
                  for i, sup in enumerate(g.further_reading, 1)]
    return "\n".join(lines)


def guide_markdown(rs: list[ChapterReport], measurement: Measurement | None, lang: str = "zh",
                   missing: list[ChapterGuide] = ()) -> str:
    parts = [
        say("generated"),
        say("title"),
        say("intro"),
        say("audience", run_time=run_time_sentence(rs, measurement)),
    ]
    if missing:
        parts.append(say("not_yet", chapters=say("list_sep").join(
            f"{_number(rs, g.notebook)} (`chapters/{g.notebook}`)" for g in missing)))
    parts += [
        say("map_head"),
        course_map(rs),
        say("time_head"),
        time_table(rs, measurement),
        say("method_head"),
        method(measurement, lang),
        class_section(measurement),
        lesson_plans_section(rs),
        noisy_section(rs, measurement),
    ]
    parts += [chapter_section(r) for r in rs]
    parts += [say("refs_head"), "\n".join(f"- {ref.citation()}" for ref in REFERENCES.values())]
    return "\n\n".join(p for p in parts if p) + "\n"


def _number(rs: list[ChapterReport], notebook: str) -> str:
    """The chapter's number (3.1 ...): from the reports, else from the Chinese notebook's title."""
    found = next((r.number for r in rs if r.guide.notebook == notebook), None)
    if found is None and (CHAPTERS_DIR / notebook).exists():
        found = sections(read_notebook(CHAPTERS_DIR / notebook))[0].partition(" ")[0] or None
    return found or notebook


def run_time_sentence(rs: list[ChapterReport], measurement: Measurement | None) -> str:
    """How long a chapter runs, from ``run_times.json``: the slowest chapter's fastest run, in words and in seconds,
    and (when some run took much longer) the slowest run of all."""
    if measurement is None or not measurement.chapters:
        return say("run_unmeasured")
    slowest = max(measurement.chapters, key=lambda ch: ch.fastest)
    fast = slowest.fastest
    bound = say("run_under_minute") if fast < 60 else say("run_about_minutes", n=math.ceil(fast / 60))
    load = slowest.load[slowest.seconds.index(fast)] if len(slowest.load) == len(slowest.seconds) else None
    said = say("run_said", cores=measurement.cores, bound=bound, number=_number(rs, slowest.notebook), fast=fast,
               load=say("run_load", load=load) if load is not None else "")
    worst = max(measurement.chapters, key=lambda ch: max(ch.seconds))
    if max(worst.seconds) >= 2 * worst.fastest:  # at least twice as long: 「慢得多」
        said += say("run_busy", number=_number(rs, worst.notebook), slow=max(worst.seconds),
                    times=max(worst.seconds) / worst.fastest)
    return said


PLAN_CLASSES, PLAN_LENGTH = 4, 90  # the example the guide lays out: four classes of 90 minutes for the main line


def lesson_plans_section(rs: list[ChapterReport]) -> str:
    main = [r for r in rs if not r.guide.optional_chapter]
    extra = [r for r in rs if r.guide.optional_chapter]
    classes = min(PLAN_CLASSES, len(main))  # an edition with fewer main chapters so far: one class each
    parts = []
    if main:
        plan = plans.lesson_plan(main, classes, PLAN_LENGTH)
        parts += [
            say("plans_head", first=main[0].number, last=main[-1].number, classes=classes, length=PLAN_LENGTH),
            say("plans_lead", opening=CLASS_OPENING_MINUTES, discussion=DISCUSSION_MINUTES),
            plans.render(plan),
        ]
    if extra:
        more = plans.lesson_plan(extra, len(extra), PLAN_LENGTH)
        parts += [say("plans_extra", chapters=say("list_sep").join(r.number for r in extra), n=len(extra)),
                  plans.render(more, first_number=classes + 1)]
    return "\n\n".join(parts)


def noisy_section(rs: list[ChapterReport], measurement: Measurement | None) -> str:
    """What to do when a lab machine prints 「说不准」 or a readout that jumps about (in the course's language)."""
    example = ""
    if measurement is not None and measurement.chapters:
        ch = max(measurement.chapters, key=lambda c: max(c.seconds) / c.fastest)
        slow, fast = max(ch.seconds), ch.fastest
        loads = ch.load if len(ch.load) == len(ch.seconds) else []
        at = (lambda s: say("noisy_at", load=loads[ch.seconds.index(s)])) if loads else (lambda s: "")
        example = say("noisy_example", cores=measurement.cores, number=_number(rs, ch.notebook), fast=fast,
                      at_fast=at(fast), slow=slow, at_slow=at(slow), times=slow / fast)
    measured = [(r.number, t) for r in rs for k, t in exercise_titles(r).items() if k in keys.MEASURED]
    counted = say("noisy_measured", items=say("list_sep").join(
        say("noisy_measured_item", number=n, title=t) for n, t in measured)) if measured else ""
    return "\n\n".join([
        say("noisy_head"),
        say("noisy_why"),
        say("noisy_causes", example=example),
        say("noisy_course", measured=counted),
        say("noisy_rerun"),
        say("noisy_tell"),
    ])


# -- KEYS.md ---------------------------------------------------------------------------------------------------
def keys_markdown(rs: list[ChapterReport]) -> str:
    parts = [say("generated"), say("keys_title"), say("keys_lead"), *keys.what_is_hidden()]
    for r in rs:
        if r.quiz_module is not None:
            parts += [say("keys_quiz_head", number=r.number), keys.quiz_keys(r.quiz_module)]
    for r in rs:
        parts += keys.chapter_extra_sections(r.number, r.guide.notebook)
    for r in rs:
        if r.exercise_module is not None:
            parts += [say("keys_exercises_head", number=r.number), keys.exercise_keys(r.exercise_module)]
    return "\n\n".join(parts) + "\n"


def outputs(chapters_dir: Path = CHAPTERS_DIR, run_times: Path = RUN_TIMES, readme: Path | None = None,
            lang: str = "zh") -> dict:
    """``{"GUIDE.md": text, "KEYS.md": text}`` (English: ``GUIDE.en.md``, ``KEYS.en.md``, written in English from
    ``chapters/en/``), and with ``readme`` ``{readme: its text with the summary}``: the teacher-summary block for
    Chinese (which must be there), the teacher-summary-en block for English (only where the README has one)."""
    lang = check_language(lang)
    guide_name, keys_name = OUT_NAMES[lang]
    with using_language(lang):
        rs = reports(chapters_dir, run_times, lang)
        measurement = Measurement.load(run_times) if Path(run_times).exists() else None
        out = {guide_name: guide_markdown(rs, measurement, lang, missing_chapters(chapters_dir, lang)),
               keys_name: keys_markdown(rs)}
    if readme is not None and lang == "zh":
        with using_language("zh"):
            out[Path(readme)] = with_readme_summary(Path(readme).read_text(encoding="utf-8"), rs)
    elif readme is not None and has_english_summary(text := Path(readme).read_text(encoding="utf-8")):
        head, tail = around(text, README_EN_BEGIN, README_EN_END)
        out[Path(readme)] = head + readme_summary_en(rs, missing_chapters(chapters_dir, lang)) + tail
    return out


# -- README.md's summary for teachers -----------------------------------------------------------------------------
README_BEGIN, README_END = "<!-- teacher-summary:begin -->", "<!-- teacher-summary:end -->"


def readme_summary(rs: list[ChapterReport]) -> str:
    """The English summary README.md carries between its teacher-summary markers."""
    main = [r for r in rs if not r.guide.optional_chapter]
    extra = [r for r in rs if r.guide.optional_chapter]
    per = ", ".join(f"{r.number} ≈ {_up(r.minutes.total)}" for r in rs)
    main_total = _up(sum(r.minutes.total for r in main))
    n_optional = sum(1 for r in main for s in r.sections if s.optional and s.heading.startswith(
        tuple(r.guide.optional_sections)))
    return "\n".join([
        README_BEGIN,
        "**Audience.** Upper-year undergraduates, graduate students and engineers who know Transformer self-attention "
        "(softmax(QKᵀ/√d)·V, multi-head, the causal mask) and can read Python and PyTorch tensor code. Chapter 3.1 "
        "needs nothing else; each later chapter builds on the ones before it (the course map in the guide).",
        "",
        f"**Time, measured** (reading = the chapter's Chinese characters, prose and printed readouts, at "
        f"{READING_SPEED} characters per minute; plus the measured run time of its cells; plus a stated allowance per "
        f"panel, exercise and quiz question): {per} minutes. The main line 3.1–3.5 takes about {main_total} minutes "
        f"(about {main_total / 60:.1f} hours); "
        + " ".join(f"{r.number} (the optional extension, 拓展) adds about {_up(r.minutes.total)}." for r in extra)
        + " The run times were measured on a shared 2-core CPU while other work ran (the guide gives the load); "
        "running the cells is a small part of each total.",
        "",
        f"**Core and optional.** 3.1–3.5 are the course; "
        + ", ".join(r.number for r in extra) + " is an optional extension (paging, shared prefixes, continuous "
        f"batching). Inside the main chapters {n_optional} sections are marked optional in the guide, with the reason.",
        "",
        "**Guide and keys.** [`teacher/GUIDE.md`](teacher/GUIDE.md) (in Chinese, 教师指南): per chapter the prerequisites, "
        "outcome objectives (「学完后你能……」), minutes per chapter and section and how they were measured, core and "
        "optional sections, the course map, the publications behind each chapter's claims, which exercise practises which "
        "objective, two or three discussion prompts per chapter, a lesson plan (the main line in "
        f"{PLAN_CLASSES} classes of {PLAN_LENGTH} minutes, with what to assign before and after each, computed from the "
        "same minutes) and what to do when a lab machine's readout says it cannot tell (「说不准」). "
        "[`teacher/KEYS.md`](teacher/KEYS.md): every quiz and checkpoint answer (numeric ones with the kvlab expression "
        "that computes them), the in-text 小任务 keys, and every exercise's reference solution and grader; its header "
        "says what a learner can and cannot see. Both are generated by `python -m kvlab.teacher` "
        "from the course's code, never typed; `tests/test_teacher.py` fails when they are out of date. "
        "`python -m kvlab.teacher --measure` re-times the chapters on your machine.",
        "",
        "**A class without Python.** `python -m pip install -e \".[book]\" && python -m kvlab.book --out book` runs the "
        "course once and writes an offline website (`book/index.html`, opens from disk) with every figure and the key "
        "sliders precomputed, and a printable PDF handout per chapter in `book/handouts/`.",
        README_END,
    ])


def readme_around_summary(readme: str) -> tuple[str, str]:
    """The text of ``readme`` before and after its summary block; ValueError when it has no such block."""
    head, begin, rest = readme.partition(README_BEGIN)
    _, end, tail = rest.partition(README_END)
    if not (begin and end):
        raise ValueError(f"readme: no {README_BEGIN} ... {README_END} block to fill")
    return head, tail


def with_readme_summary(readme: str, rs: list[ChapterReport]) -> str:
    """``readme`` with the text between the markers replaced (the markers must be there)."""
    head, tail = readme_around_summary(readme)
    return head + readme_summary(rs) + tail


# -- README.md's summary of the English guide (filled by --lang en where the README has its markers) ---------------
README_EN_BEGIN, README_EN_END = "<!-- teacher-summary-en:begin -->", "<!-- teacher-summary-en:end -->"


def around(text: str, begin: str, end: str) -> tuple[str, str]:
    """The text before ``begin`` and after ``end``; ValueError when the block is not there in that order."""
    head, found_begin, rest = text.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not (found_begin and found_end):
        raise ValueError(f"readme: no {begin} ... {end} block to fill")
    return head, tail


def has_english_summary(readme: str) -> bool:
    try:
        around(readme, README_EN_BEGIN, README_EN_END)
    except ValueError:
        return False
    return True


def readme_summary_en(rs: list[ChapterReport], missing: list[ChapterGuide] = ()) -> str:
    """The README's block on the English guide and keys: which chapters they cover and their measured minutes."""
    per = ", ".join(f"{r.number} ≈ {_up(r.minutes.total)}" for r in rs)
    not_yet = (" Not yet in English: " + ", ".join(_number(rs, g.notebook) for g in missing)
               + " (the Chinese guide covers them)." if missing else "")
    return "\n".join([
        README_EN_BEGIN,
        "**For teachers, English edition.** [`teacher/GUIDE.en.md`](teacher/GUIDE.en.md) and "
        "[`teacher/KEYS.en.md`](teacher/KEYS.en.md) are the guide and answer keys of the English chapters "
        f"(`chapters/en/`: {', '.join(r.number for r in rs)}), with everything the Chinese guide gives per chapter: "
        "prerequisites, objectives, discussion prompts, core and optional sections, references, a lesson plan and what "
        f"to do when a machine cannot tell. Time, measured: {per} minutes (reading = the chapter's English words, prose "
        f"and printed readouts, at {READING_SPEED_EN} words per minute, the silent reading rate of non-fiction in "
        "Brysbaert 2019; plus the measured run time of its cells; plus a stated allowance per panel, exercise and quiz "
        f"question).{not_yet} Both files are generated by `python -m kvlab.teacher --lang en` from the English "
        "edition's own words, never typed; `tests/test_teacher_english.py` fails when they are out of date.",
        README_EN_END,
    ])
