"""The teacher's view: ``python -m kvlab.teacher`` writes ``teacher/GUIDE.md`` (教师指南: prerequisites, objectives,
measured minutes, core and optional sections, the course map, references per chapter) and ``teacher/KEYS.md`` (the
quiz and exercise keys), generated from the course, never typed by hand. ``--lang en`` writes ``teacher/GUIDE.en.md``
and ``teacher/KEYS.en.md`` from the English edition (``chapters/en/``), in English words only.

- :mod:`.chapters`: what the notebooks cannot say about themselves (prerequisites, objectives, optional sections);
- :mod:`.references`: the publications and the claims each supports;
- :mod:`.minutes`: reading, running, panel, exercise and quiz minutes, and the rules that compute them;
- :mod:`.run_times`: ``--measure`` runs every chapter and records the times in ``run_times.json``;
- :mod:`.keys`: the keys, from the quizzes' and the exercises' code;
- :mod:`.guide`: the two markdown files;
- :mod:`.phrases` and :mod:`.chapter_texts`: every word they show, in Chinese and English (the same keys and fields).
"""
