"""What a live class's teacher derives from the model: a point question on the class's text, its tokens and right
positions (the key of the class's clicks) and the model's own row beside them. Through Workspace.compute."""
from __future__ import annotations

import numpy as np

from app_core.lessons.answers import computed_answer, point_row
from app_core.lessons.questions import Question
from app_core.lessons.results import PointKey


def class_point(ws, question: Question, text: str) -> tuple[PointKey, np.ndarray]:
    """(the point question's key on text: its tokens and the positions a right click may pick, the model's row [T])."""
    trace = ws.trace(text)
    right = computed_answer(question, ws.model, trace).positions
    return PointKey(tuple(str(t) for t in trace.tokens), frozenset(right)), point_row(question, trace)
