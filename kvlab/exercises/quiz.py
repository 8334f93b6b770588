"""The self-check questions' old address: they live in :mod:`kvlab.questions` (the neutral home that lessons, the
widgets and the exercises all import). These names stay importable from here for notebooks and outside code."""
from __future__ import annotations

from ..questions import (ChoiceQuestion, NumberQuestion, Question, answer_verdict, grade, graded,  # noqa: F401
                         prediction_verdict, response_key)

__all__ = ["ChoiceQuestion", "NumberQuestion", "Question", "answer_verdict", "grade", "graded", "prediction_verdict",
           "response_key"]
