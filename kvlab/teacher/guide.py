"""The teacher's guide (GUIDE.md) and answer keys (KEYS.md), written from the notebooks, the chapter guides, the
measured run times, the quizzes and the exercises. ``python -m kvlab.teacher`` writes them; ``--check`` says
whether the committed files are what the code gives now.
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from pathlib import Path

from ..exercises import CHAPTER_MODULES, chapter_module
from . import keys
from .chapters import CHAPTERS, ChapterGuide, Objective
from . import plans
from .minutes import (CALC_EXERCISE_MINUTES, CLASS_OPENING_MINUTES, CODE_EXERCISE_MINUTES, DISCUSSION_MINUTES,
                      PANEL_MINUTES, QUIZ_MINUTES, READING_SPEED, Minutes, Section, exercise_minutes, has_quiz,
                      lesson_module_name, panel_cells, quiz_questions, read_notebook, sections)
from .references import REFERENCES
from .classroom import class_section
from .run_times import RUN_TIMES, Measurement

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS_DIR = ROOT / "chapters"
GENERATED = "<!-- 由 `python -m kvlab.teacher` 生成，请勿手改：改 kvlab/teacher/ 或课程本身，再重新生成。 -->"


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


def exercise_module_for(notebook: str):
    return next((m for m in map(chapter_module, CHAPTER_MODULES) if m.NOTEBOOK == notebook), None)


def chapter_report(guide: ChapterGuide, measurement: Measurement | None, chapters_dir: Path = CHAPTERS_DIR):
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
    minutes = Minutes(characters=characters, core_characters=core,
                      output_characters=runs.output_characters if runs else 0, core_output_characters=core_output,
                      run_seconds=runs.fastest if runs else None,
                      panels=panel_cells(nb),
                      exercises=tuple(exercise_minutes(e) for e in ex_module.EXERCISES) if ex_module else (),
                      quiz_questions=quiz_questions(nb, quiz))
    return ChapterReport(guide, number, name, intro, secs, minutes, ex_module, quiz)


def reports(chapters_dir: Path = CHAPTERS_DIR, run_times: Path = RUN_TIMES) -> list[ChapterReport]:
    measurement = Measurement.load(run_times) if Path(run_times).exists() else None
    return [chapter_report(g, measurement, chapters_dir) for g in CHAPTERS]


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
    lines.append("  ──▶  ".join(r.number for r in main) + "      （主线，按顺序学）")
    for r in rs:
        if r.guide.optional_chapter:
            lines.append(f"  {' + '.join(c for c, _ in r.guide.builds_on)}  ──▶  {r.number}（拓展，可选）")
    lines.append("```")
    lines += ["", "| 章节 | 用到前面哪一节的什么 |", "|---|---|"]
    for r in rs:
        uses = "；".join(f"{c}：{what}" for c, what in r.guide.builds_on) or "（起点：只需要先修知识）"
        lines.append(f"| {names[r.number]} | {uses} |")
    return "\n".join(lines)


def time_table(rs: list[ChapterReport], measurement: Measurement | None) -> str:
    lines = ["| 章节 | 汉字（正文 + 输出） | 阅读 | 其中必修部分 | 运行 | 面板 | 练习 | 自测与检查点 | **合计** |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    main_total = core_total = 0.0
    for r in rs:
        m = r.minutes
        run = _m(m.running) if m.run_seconds is not None else "未测"
        ex = f"{_m(m.exercise_minutes)}（{len(m.exercises)} 个）"
        quiz = f"{_m(m.quiz_minutes)}（{m.quiz_questions} 题）" if m.quiz_questions else "—"
        label = f"{r.number}{'（拓展）' if r.guide.optional_chapter else ''}"
        lines.append(f"| {label} | {m.characters:,} + {m.output_characters:,} | {_m(m.reading)} | {_m(m.core_reading)} | {run} | "
                     f"{_m(m.panel_minutes)}（{m.panels} 个） | {ex} | {quiz} | **{_up(m.total)}** |")
        if not r.guide.optional_chapter:
            main_total += m.total
            core_total += m.total - (m.reading - m.core_reading)
    extra = sum(r.minutes.total for r in rs if r.guide.optional_chapter)
    lines += ["", f"主线 3.1–3.5 合计约 **{_up(main_total)} 分钟**（只读必修部分约 {_up(core_total)} 分钟）；"
                  f"拓展 3.6 另需约 {_up(extra)} 分钟。单位都是分钟。"]
    return "\n".join(lines)


def method(measurement: Measurement | None) -> str:
    lines = [
        "每一项都由 `kvlab.teacher.minutes` 从 notebook 和一次实测算出，不是估计：",
        "",
        f"- **阅读** = （这一章 markdown 格里的汉字数 + 实测那次运行打印出的汉字数：读数、表格、由测量结果选出的句子）"
        f"÷ **{READING_SPEED} 汉字/分钟**。这个速度的依据：IReST "
        "（Trauzettel-Klosinski & Dietz, *Standardized Assessment of Reading Performance: The New International Reading "
        "Speed Texts IReST*, Investigative Ophthalmology & Visual Science 53(9), 2012）的表 2 里，以中文为母语的成年人"
        "**朗读**一般文本约 255 ± 29 字/分钟；Brysbaert（*How many words do we read per minute? A review and meta-analysis "
        "of reading rate*, Journal of Memory and Language 109, 2019）的综述里默读约是朗读的 1.3 倍（英语 238 对 183 词/分钟），"
        "折合约 330 字/分钟；带公式、代码名和图的技术文本读得更慢，取 300。只数汉字：英文、数字、公式和代码不计，"
        "所以对公式多的段落（3.3 的 roofline）偏少。",
        "- **运行** = 这一章的全部代码格从头到尾运行一次的时间（各格从开始执行到返回的时间之和，不含内核启动），"
        "用 `python -m kvlab.teacher --measure` 测量：每章运行多次、各章轮流运行，取最快的一次"
        "（别的程序只会让一次运行变慢，最快的一次最接近这台机器本身的速度）；机器空闲一些时可以用 "
        "`python -m kvlab.teacher --measure --append` 再测几次，加进已有的记录。",
        f"- **面板** = 每个交互面板（调用 `*_panel(` 的代码格）{PANEL_MINUTES:g} 分钟：拖一拖控件、看图怎样变。",
        f"- **练习** = 要写函数的练习每个 {CODE_EXERCISE_MINUTES:g} 分钟，算数值的练习每个 {CALC_EXERCISE_MINUTES:g} 分钟"
        "（按练习代码格里有没有 `def` 区分）；这是给大多数学员的估计，卡住的学员会用更久。",
        f"- **自测与检查点** = 每道自测题或检查点题 {QUIZ_MINUTES:g} 分钟。",
        "- **其中必修部分** = 去掉下面标为「选学」的小节之后的阅读时间：选学小节的 markdown 和选学小节里代码格打印的输出"
        "都不算（一格的输出归它所在的小节）。",
    ]
    if measurement:
        runs = {len(ch.seconds) for ch in measurement.chapters}
        lines += ["", f"本次测量：{measurement.date}，机器 {measurement.machine}，每章运行 "
                      f"{'/'.join(map(str, sorted(runs)))} 次。测量前的负载（1/5/15 分钟平均）"
                      f"{', '.join(map(str, measurement.load_before))}，测量后 {', '.join(map(str, measurement.load_after))}。"
                      f"{measurement.busyness()}{measurement.note}"]
        lines += ["", "| notebook | 每次运行（秒） | 每次运行后的负载 | 取最快（秒） | 输出的汉字 |", "|---|---|---|---:|---:|"]
        lines += [f"| `{ch.notebook}` | {', '.join(f'{s:.1f}' for s in ch.seconds)} | "
                  f"{', '.join(f'{x:.1f}' for x in ch.load)} | {ch.fastest:.1f} | {ch.output_characters:,} |"
                  for ch in measurement.chapters]
    else:
        lines += ["", "还没有测量运行时间（`kvlab/teacher/run_times.json` 不存在）：运行 `python -m kvlab.teacher --measure`。"]
    return "\n".join(lines)


def exercise_titles(r: ChapterReport) -> dict[str, str]:
    """The chapter's exercises, key -> title as the notebook shows it (「练习 1：……」)."""
    return {ex.key: ex.title for ex in r.exercise_module.EXERCISES} if r.exercise_module is not None else {}


def objective_line(r: ChapterReport, i: int, o: Objective, last: bool) -> str:
    """One numbered objective, with the titles of the exercises that practise it (KeyError for a key that is not
    an exercise of this chapter: the test names it first)."""
    titles = exercise_titles(r)
    practised = f"（{'；'.join(titles[k] for k in o.exercises)}）" if o.exercises else ""
    return f"{i}. {o.text}{practised}{'。' if last else '；'}"


def chapter_section(r: ChapterReport) -> str:
    g, m = r.guide, r.minutes
    head = f"## {r.number} {r.title}"
    lines = [head, "", f"notebook：`chapters/{g.notebook}`"]
    if g.optional_chapter:
        lines += ["", f"> **拓展，可选。** {g.optional_chapter}"]
    lines += ["", f"**时间**：阅读 {_m(m.reading)} 分钟（必修部分 {_m(m.core_reading)}），运行 "
                  f"{_m(m.running) if m.run_seconds is not None else '未测'} 分钟，面板 {_m(m.panel_minutes)}，练习 "
                  f"{_m(m.exercise_minutes)}" + (f"，自测与检查点 {_m(m.quiz_minutes)}" if m.quiz_questions else "")
              + f"：合计约 **{_up(m.total)} 分钟**。"]
    lines += ["", "**先修**", ""] + [f"- {p}" for p in g.prerequisites]
    lines += ["", "**学完后你能……**（括号里是练习它的动手练习）", ""]
    lines += [objective_line(r, i, o, last=i == len(g.objectives)) for i, o in enumerate(g.objectives, 1)]
    if g.discussion:
        lines += ["", f"**课堂讨论**（每个问题约 {DISCUSSION_MINUTES:g} 分钟：先各自写下预测或解释，再两人对照，"
                      "最后全班和本机的读数比较）", ""]
        lines += [f"{i}. {q}" for i, q in enumerate(g.discussion, 1)]
    lines += ["", "**小节**（阅读分钟数按上面的速度算；练习见 [KEYS.md](KEYS.md)）", "",
              "| 小节 | 汉字 | 阅读 | 必修/选学 |", "|---|---:|---:|---|",
              f"| （开头：标题与引言） | {r.intro:,} | {_m(r.intro / READING_SPEED)} | 必修 |"]
    for s in r.sections:
        indent = "　" if s.level == 3 else ""
        own = next((why for head, why in g.optional_sections.items() if s.heading.startswith(head)), None)
        kind = ("练习" if s.is_exercises else f"选学：{own}" if own else f"选学（属于「{s.parent}」）" if s.optional
                else "必修")
        lines.append(f"| {indent}{s.heading} | {s.characters:,} | {_m(s.reading_minutes)} | {kind} |")
    lines += ["", "**参考文献与它支持的说法**", ""]
    for sup in g.references:
        lines.append(f"- {sup.reference.citation()} —— {sup.claim}")
    if g.further_reading:
        lines += ["", "延伸阅读（课程指向它，但不依赖它的结论）：", ""]
        lines += [f"- {sup.reference.citation()} —— {sup.claim}" for sup in g.further_reading]
    return "\n".join(lines)


def guide_markdown(rs: list[ChapterReport], measurement: Measurement | None) -> str:
    parts = [
        GENERATED,
        "# 教师指南：KV Cache 基础（第 3 章，3.1–3.6）",
        "这份指南给考虑把本课程布置给学生的老师：每一章要先会什么、学完能做什么、要多长时间（实测，不是估计）、"
        "哪些小节必修哪些选学、各章之间的关系、每一章的说法出自哪些论文，以及怎样排课、课上讨论什么、机器的读数「说不准」时怎么办。练习和自测的答案在 [KEYS.md](KEYS.md)。",
        "**对象**：学过 Transformer 自注意力、会用 Python 和 PyTorch 的本科高年级学生、研究生和工程师。"
        "**形式**：每章一个 Jupyter notebook，正文中文，代码英文；所有数字都在学员自己的机器上运行得出。"
        "**运行时间**：" + run_time_sentence(rs, measurement) + "。**没有 Python 环境的课堂**：`python -m kvlab.book --out book` 生成离线的静态网站"
        "和每章一份 PDF 讲义（见 README）。",
        "## 课程地图",
        course_map(rs),
        "## 每章要多长时间",
        time_table(rs, measurement),
        "### 这些分钟数怎样算出来",
        method(measurement),
        class_section(measurement),
        lesson_plans_section(rs),
        noisy_section(rs, measurement),
    ]
    parts += [chapter_section(r) for r in rs]
    parts += ["## 全部参考文献", "\n".join(f"- {ref.citation()}" for ref in REFERENCES.values())]
    return "\n\n".join(parts) + "\n"


def _number(rs: list[ChapterReport], notebook: str) -> str:
    return next((r.number for r in rs if r.guide.notebook == notebook), notebook)


def run_time_sentence(rs: list[ChapterReport], measurement: Measurement | None) -> str:
    """How long a chapter runs, from ``run_times.json``: the slowest chapter's fastest run, in words and in seconds,
    and (when some run took much longer) the slowest run of all."""
    if measurement is None or not measurement.chapters:
        return "CPU 即可；运行时间还没有测量：`python -m kvlab.teacher --measure`"
    slowest = max(measurement.chapters, key=lambda ch: ch.fastest)
    fast = slowest.fastest
    bound = "不到一分钟" if fast < 60 else f"约 {math.ceil(fast / 60)} 分钟"
    load = slowest.load[slowest.seconds.index(fast)] if len(slowest.load) == len(slowest.seconds) else None
    said = (f"CPU 即可，在 {measurement.cores} 核 CPU 上每章默认设置下的代码格运行{bound}（实测最慢的一章 "
            f"{_number(rs, slowest.notebook)} 最快一次 {fast:.1f} 秒"
            + (f"，运行后 1 分钟平均负载 {load:.1f}" if load is not None else "") + "）")
    worst = max(measurement.chapters, key=lambda ch: max(ch.seconds))
    if max(worst.seconds) >= 2 * worst.fastest:  # at least twice as long: 「慢得多」
        said += (f"；机器忙时会慢得多（{_number(rs, worst.notebook)} 最慢一次 {max(worst.seconds):.1f} 秒，是它最快一次的 "
                 f"{max(worst.seconds) / worst.fastest:.0f} 倍；见下文关于「说不准」的一节）")
    return said


PLAN_CLASSES, PLAN_LENGTH = 4, 90  # the example the guide lays out: four classes of 90 minutes for the main line


def lesson_plans_section(rs: list[ChapterReport]) -> str:
    main = [r for r in rs if not r.guide.optional_chapter]
    extra = [r for r in rs if r.guide.optional_chapter]
    plan = plans.lesson_plan(main, PLAN_CLASSES, PLAN_LENGTH)
    parts = [
        f"## 课时安排：主线 {main[0].number}–{main[-1].number}，{PLAN_CLASSES} 次课，每次 {PLAN_LENGTH} 分钟",
        "按翻转课堂安排：**课前**学员在自己的机器上运行本次课的各章，读完必修部分；**课上**先用 "
        f"{CLASS_OPENING_MINUTES:g} 分钟收集课前阅读留下的问题，再一起拖交互面板（先预测再看）、讨论每章的「课堂讨论」"
        f"（每个问题 {DISCUSSION_MINUTES:g} 分钟）、做动手练习和自测；**课后**读选学小节，并做下一次课的课前部分。"
        "每一项的分钟数都是上面「每章要多长时间」里同一章的数（同样的规则算出，不另外估计）；各章不拆开、按顺序排，"
        "在所有排法里取最满的那次课最空的一种；课上剩下的时间留给卡住的学员把练习做完。计时的实验放在课前各自运行，"
        "课上讨论已经打印出来的读数：全班同时运行计时实验时，共用的机器最忙（见下一节）。",
        plans.render(plan),
    ]
    if extra:
        more = plans.lesson_plan(extra, len(extra), PLAN_LENGTH)
        parts += [f"拓展 {'、'.join(r.number for r in extra)}（可选）：主线之后再加 {len(extra)} 次课，同样安排。",
                  plans.render(more, first_number=PLAN_CLASSES + 1)]
    return "\n\n".join(parts)


def noisy_section(rs: list[ChapterReport], measurement: Measurement | None) -> str:
    """What to do when a lab machine prints 「说不准」 or a readout that jumps about (Chinese)."""
    example = ""
    if measurement is not None and measurement.chapters:
        ch = max(measurement.chapters, key=lambda c: max(c.seconds) / c.fastest)
        slow, fast = max(ch.seconds), ch.fastest
        loads = ch.load if len(ch.load) == len(ch.seconds) else []
        at = (lambda s: f"（运行后负载 {loads[ch.seconds.index(s)]:.1f}）") if loads else (lambda s: "")
        example = (f"本指南自己的测量就是一例：同一台 {measurement.cores} 核机器、同一章 {_number(rs, ch.notebook)}，"
                   f"最快一次 {fast:.1f} 秒{at(fast)}，最慢一次 {slow:.1f} 秒{at(slow)}，相差 {slow / fast:.1f} 倍。")
    measured = [(r.number, t) for r in rs for k, t in exercise_titles(r).items() if k in keys.MEASURED]
    counted = ("动手练习里，" + "、".join(f"{n} 的「{t}」" for n, t in measured)
               + "的答案取自学员自己的那次测量（检查格用同一次测量算出期望值），其余练习都与机器无关。") if measured else ""
    return "\n\n".join([
        "## 机器打印「说不准」或读数起伏很大时",
        "**为什么会这样。** 计时读数都是在学员自己的机器上现场测出来的，而课堂上的机器很少空闲：",
        "- **共用的 CPU**：JupyterHub 的一个节点上，几十个学员的内核同时在运行；学员自己的电脑上，浏览器、"
        "Jupyter 服务器和别的程序也在用 CPU。别的程序只会让一次运行变慢，而且时快时慢。" + example + "\n"
        "- **线程配额**：kvlab 按本进程真正能用的核数开线程（见上面的「线程」）；配额只有 1 核时，内核还要和 notebook "
        "服务器、面板的更新抢同一个核，任何一步都可能被打断。\n"
        "- **Colab**：免费的运行时只有 2 个虚拟核，与别的用户共用一台物理机，同一个格子两次运行可能差好几倍；"
        "分配到 GPU 时，小模型的耗时主要是启动开销（3.3 的选学小节「在 GPU 上会看到什么」）。",
        "**课程怎样处理。** 解读读数的每一句话都是按打印出来的数字选出来的：数字支持哪个结论就说哪个；波动比要比较的"
        "差别还大时，就说「说不准」，并说明怎样重测，而不是硬给一个结论。所以「说不准」是正确的输出，不是程序出错。"
        "数出来的量（运算次数、字节数、token 数、缓存形状）与机器无关，在哪台机器上都一样。" + counted,
        "**怎样重测。**\n\n"
        "1. **关掉别的内核和程序**：JupyterLab 左侧栏的「运行中的终端和内核」里关掉其他章的内核（或 Kernel → Shut Down "
        "Kernel），关掉别的占 CPU 的程序，再从这一小节的开头重新运行。\n"
        "2. **多重复几次**：面板上有重复次数的控件时调大再运行；读数取中位数，重复越多，偶尔一次被打断的影响越小。\n"
        "3. **设 `KVLAB_THREADS`**：在 notebook 里运行 `%env KVLAB_THREADS=1`，再重跑计时的格子（或在启动 Jupyter 之前 "
        "`export KVLAB_THREADS=1`）。只用 1 个线程，就不会有线程互相等待；读数会写明「按 KVLAB_THREADS=1」。在独占的"
        "多核机器上可以设大一些，kvlab 不会超过本进程能用的核数。\n"
        "4. **错开时间**：不要让全班同时运行计时实验（上面的课时安排把它放在课前）；或者由老师在空闲的机器上运行一次，"
        "投影出来讨论。\n"
        "5. **还是说不准**：就接受它。静态版（`python -m kvlab.book`）里有在一台机器上完整运行过一遍的读数，可以对照。",
        "**对学员说什么。**\n\n"
        "- 「说不准」的意思是：这一次测到的波动比要比较的差别还大，这台机器此刻给不出结论。这本身就是一个测量结果，"
        "不是你做错了什么。\n"
        "- 本课程的结论不靠某一次计时：先看数出来的量，计时只是在你的机器上印证；换一台空闲的机器或多重复几次，"
        "通常就能印证。\n"
        "- 可以借机讨论：读数为什么取中位数而不是平均值？为什么最快的一次最接近机器本身的速度（本指南的运行时间也这样取）？"
        "邻座两人的读数差多少，差别从哪里来？",
    ])


# -- KEYS.md ---------------------------------------------------------------------------------------------------
def keys_markdown(rs: list[ChapterReport]) -> str:
    parts = [GENERATED, "# 答案（教师用）",
             "自测题、检查点、小任务和动手练习的标准答案，全部由 kvlab 的代码生成：自测题来自各章的 `review_questions()`，"
             "检查点和小任务来自 `kvlab/lessons/checkpoints.py`，练习的参考答案来自 `kvlab/exercises/solutions.py`，"
             "评分方法来自 `kvlab/exercises/chNN.py`。", *keys.what_is_hidden()]
    for r in rs:
        if r.quiz_module is not None:
            parts += [f"## {r.number} 自测", keys.quiz_keys(r.quiz_module)]
    for r in rs:
        parts += keys.chapter_extra_sections(r.number, r.guide.notebook)
    for r in rs:
        if r.exercise_module is not None:
            parts += [f"## {r.number} 动手练习", keys.exercise_keys(r.exercise_module)]
    return "\n\n".join(parts) + "\n"


def outputs(chapters_dir: Path = CHAPTERS_DIR, run_times: Path = RUN_TIMES, readme: Path | None = None) -> dict:
    """``{"GUIDE.md": text, "KEYS.md": text}``, and with ``readme`` ``{readme: its text with the summary}``."""
    rs = reports(chapters_dir, run_times)
    measurement = Measurement.load(run_times) if Path(run_times).exists() else None
    out = {"GUIDE.md": guide_markdown(rs, measurement), "KEYS.md": keys_markdown(rs)}
    if readme is not None:
        out[Path(readme)] = with_readme_summary(Path(readme).read_text(encoding="utf-8"), rs)
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
