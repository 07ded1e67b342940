"""A live class's point question: the model's row beside the class's clicks (app_core/lessons/answers.point_row) and
the figure that draws both (viz/class_points.py), checked on small arrays worked by hand."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from app_core.lessons.answers import point_row
from app_core.lessons.questions import Question
from viz.class_points import class_points

ASK = {"en": "?", "zh": "？"}


def trace_of(attention, logits=None, ids=(0, 1, 2)):
    return SimpleNamespace(attention=np.asarray(attention, dtype=np.float32), n_tokens=len(ids), token_ids=list(ids),
                           next_token_logits=np.asarray(logits if logits is not None else np.zeros(4)))


def test_a_heads_row_from_the_questions_position_with_and_without_the_sink():
    attention = np.zeros((2, 2, 3, 3))                                       # [L, H, T, T]
    attention[1, 0, 1] = [0.75, 0.25, 0.0]
    attention[1, 0, 2] = [0.5, 0.3, 0.2]
    trace = trace_of(attention)
    q = Question(kind="point", ask=ASK, why=ASK, compute="top_attended", layer=-1, head=0, position=1)
    assert point_row(q, trace).tolist() == [0.75, 0.25, 0.0]                 # the future position stays 0
    q = Question(kind="point", ask=ASK, why=ASK, compute="top_attended", layer=1, head=0, position=-1,
                 without_sink=True)
    assert np.allclose(point_row(q, trace), [0.0, 0.3, 0.2])


def test_the_next_token_row_is_the_probability_of_each_texts_token():
    logits = np.log([1.0, 2.0, 3.0, 4.0])                                    # softmax: 0.1, 0.2, 0.3, 0.4
    q = Question(kind="point", ask=ASK, why=ASK, compute="next_token")
    assert np.allclose(point_row(q, trace_of(np.zeros((1, 1, 3, 3)), logits, ids=(3, 0, 3))), [0.4, 0.1, 0.4])


def test_the_figure_draws_the_class_share_and_the_model_row_with_the_right_tokens_marked():
    fig = class_points(["a", "<b>", "c"], [0, 3, 1])
    assert len(fig.data) == 1
    assert np.allclose(np.asarray(fig.data[0].y), [0.0, 0.75, 0.25])
    assert "&lt;b&gt;" in str(fig.data[0].customdata[1][0])                 # markup in a token is shown, not run
    fig = class_points(["a", "b", "c"], [1, 1, 0], model_row=[0.2, 0.5, 0.3], right=[1])
    colors = fig.data[1].marker.color
    assert len(fig.data) == 2 and colors[1] != colors[0] == colors[2]
    empty = class_points(["a"], [0])
    assert np.asarray(empty.data[0].y).tolist() == [0.0]
    with pytest.raises(ValueError):
        class_points(["a", "b"], [1, 2, 3])
