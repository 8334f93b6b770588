"""动手练习: the exercises at the end of every chapter, checked at once with feedback in Chinese.

- :mod:`.checker`: the one checker all chapters share (verdicts, attempts, hints, feedback as HTML, the one
  number parser).
- :mod:`.quiz`: self-check questions graded by the checker's rules (the widget is :mod:`kvlab.viz.quiz`).
- :mod:`.ch01`, :mod:`.ch02` ...: one module per chapter, found by its name ``chNN.py`` (a new chapter's module
  needs no list edited): each exercise's task, stub cell, check cell, hints and its grader.
- :mod:`.tools`: the helpers a stub may call.
- :mod:`.solutions`: the reference solutions (for teachers). A learner's check cell shows an exercise's solution,
  folded, only after it has checked a real attempt (the stub changed) once; :func:`show_solutions` (or
  ``KVLAB_TEACHER=1`` in the environment) shows every one at once, for a teacher (see :mod:`.checker`).
- :mod:`.notebook`: ``python -m kvlab.exercises [NOTEBOOK ...]`` (re)writes the 「动手练习」 section at the end of
  the chapters' notebooks from these modules.
"""
import pkgutil
import re
from importlib import import_module

from .checker import show_solutions  # noqa: F401  (kvlab.exercises.show_solutions(), for a teacher)

CHAPTER_MODULES = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if re.fullmatch(r"ch\d\d", m.name)))


def chapter_module(name: str):
    """The exercise module (``kvlab.exercises.chNN``) of a chapter module name."""
    if name not in CHAPTER_MODULES:
        raise ValueError(f"name must be one of {', '.join(CHAPTER_MODULES)}, got {name!r}")
    return import_module(f"{__name__}.{name}")
