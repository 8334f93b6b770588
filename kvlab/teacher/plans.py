"""Lesson plans: the main line (or any run of chapters) laid out over a number of classes of a given length, with
what to assign before and after each class, computed from the guide's own per-chapter minutes
(:mod:`kvlab.teacher.minutes`), never typed.

The plan is a flipped class:

- **before** a class, learners run its chapters on their own machine and read the core part (reading of the core
  sections and the printed readouts, plus the measured run);
- **in** class: :data:`~kvlab.teacher.minutes.CLASS_OPENING_MINUTES` of questions left from that reading, then per
  chapter its panels (predict, then move the controls together), its discussion prompts
  (:data:`~kvlab.teacher.minutes.DISCUSSION_MINUTES` each), its exercises and its quiz;
- **after** it: the optional sections. An exercise that does not fit in its class is moved here.

Chapters stay whole and in order: of every way to cut them into ``classes`` consecutive groups, the plan takes the
one whose fullest class is least full (the first such). Every minute of a chapter is assigned exactly once
(``tests/test_teacher.py`` adds them up).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

from .minutes import CLASS_OPENING_MINUTES, DISCUSSION_MINUTES, exercise_minutes
from .phrases import GUIDE


@dataclass(frozen=True)
class Activity:
    chapter: str  # "3.1"; "" for the opening of a class
    what: str  # in the course's language
    minutes: float


@dataclass(frozen=True)
class ClassPlan:
    number: int  # 1, 2, ...
    chapters: tuple[str, ...]  # "3.1", ...
    length: float  # minutes of one class
    before: tuple[Activity, ...]
    in_class: tuple[Activity, ...]
    after: tuple[Activity, ...]

    @property
    def in_class_minutes(self) -> float:
        return sum(a.minutes for a in self.in_class)

    @property
    def spare(self) -> float:
        return self.length - self.in_class_minutes


def optional_headings(report) -> list[str]:
    """The headings of a chapter's sections marked optional in its guide (not their subsections)."""
    return [s.heading for s in report.sections
            if s.optional and any((s.source or s).heading.startswith(h) for h in report.guide.optional_sections)]


def before_class(report) -> list[Activity]:
    m = report.minutes
    return [Activity(report.number, GUIDE.say("plan_before"), m.core_reading + m.running)]


def in_class(report) -> list[Activity]:
    m, n = report.minutes, report.number
    out = []
    if m.panels:
        out.append(Activity(n, GUIDE.say("plan_panels", n=m.panels), m.panel_minutes))
    if report.guide.discussion:
        out.append(Activity(n, GUIDE.say("plan_discussion", n=len(report.guide.discussion)),
                            len(report.guide.discussion) * DISCUSSION_MINUTES))
    if report.exercise_module is not None:
        out += [Activity(n, ex.words().title, exercise_minutes(ex)) for ex in report.exercise_module.EXERCISES]
    if m.quiz_questions:
        out.append(Activity(n, GUIDE.say("plan_quiz", n=m.quiz_questions), m.quiz_minutes))
    return out


def after_class(report) -> list[Activity]:
    m = report.minutes
    optional = m.reading - m.core_reading
    if optional <= 0:
        return []
    names = GUIDE.say("plan_optional_sep").join(GUIDE.say("plan_optional_name", heading=h)
                                                 for h in optional_headings(report))
    return [Activity(report.number, GUIDE.say("plan_optional", names=names), optional)]


def _load(group) -> float:
    return CLASS_OPENING_MINUTES + sum(a.minutes for r in group for a in in_class(r))


def lesson_plan(reports, classes: int, length: float) -> list[ClassPlan]:
    """``reports`` (the chapters, in order) over ``classes`` classes of ``length`` minutes each. ValueError when
    there are fewer chapters than classes, or a class cannot hold its chapters even with their exercises moved
    to after it."""
    reports = list(reports)
    if not 1 <= classes <= len(reports):
        raise ValueError(f"classes must be between 1 and {len(reports)} (one chapter or more each), got {classes!r}")
    if not length > 0:
        raise ValueError(f"length must be a positive number of minutes, got {length!r}")
    best = None
    for cuts in combinations(range(1, len(reports)), classes - 1):
        bounds = (0, *cuts, len(reports))
        groups = [reports[a:b] for a, b in zip(bounds, bounds[1:])]
        fullest = max(map(_load, groups))
        if best is None or fullest < best[0] - 1e-9:
            best = (fullest, groups)
    plans = []
    for number, group in enumerate(best[1], 1):
        inside = [Activity("", GUIDE.say("plan_opening"), CLASS_OPENING_MINUTES)]
        inside += [a for r in group for a in in_class(r)]
        after = [a for r in group for a in after_class(r)]
        exercise_titles = {ex.words().title for r in group if r.exercise_module is not None for ex in r.exercise_module.EXERCISES}
        while sum(a.minutes for a in inside) > length + 1e-9:
            movable = [a for a in inside if a.what in exercise_titles]
            if not movable:
                raise ValueError(f"class {number} ({', '.join(r.number for r in group)}) needs "
                                 f"{sum(a.minutes for a in inside):.1f} minutes in class without its exercises, "
                                 f"more than {length:g}")
            moved = movable[-1]
            inside.remove(moved)
            after.append(Activity(moved.chapter, GUIDE.say("plan_moved", what=moved.what), moved.minutes))
        plans.append(ClassPlan(number, tuple(r.number for r in group), float(length),
                               tuple(a for r in group for a in before_class(r)), tuple(inside), tuple(after)))
    return plans


def _m(x: float) -> str:
    return f"{x:.1f}"


def _activities(items) -> str:
    return GUIDE.say("plan_item_sep").join(
        GUIDE.say("plan_item", chapter=a.chapter, what=a.what, minutes=_m(a.minutes)) if a.chapter
        else GUIDE.say("plan_item_bare", what=a.what, minutes=_m(a.minutes)) for a in items)


def render(plans: list[ClassPlan], first_number: int = 1) -> str:
    """The plans as markdown (in the course's language): one ``###`` per class, numbered from ``first_number``."""
    say = GUIDE.say
    parts = []
    for p in plans:
        number = first_number + p.number - 1
        used = math.ceil(p.in_class_minutes - 1e-9)
        lines = [say("plan_class_head", number=number, chapters=say("plan_chapter_sep").join(p.chapters), used=used,
                     spare=p.length - used), ""]
        lines.append(say("plan_before_line", minutes=math.ceil(sum(a.minutes for a in p.before) - 1e-9),
                         items=_activities(p.before)))
        lines += [say("plan_in_class"), "", say("plan_table_head"), "  |---|---:|"]
        lines += [say("plan_row", chapter=a.chapter, what=a.what, minutes=_m(a.minutes)) if a.chapter
                  else say("plan_row_bare", what=a.what, minutes=_m(a.minutes)) for a in p.in_class]
        lines.append(say("plan_total", minutes=_m(p.in_class_minutes)))
        lines.append("")
        after = say("plan_after_items", items=_activities(p.after)) if p.after else say("plan_after_none")
        lines.append(say("plan_after", items=after))
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
