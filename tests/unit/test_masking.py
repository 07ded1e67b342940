"""model/masking.py (the causal mask step by step) and head_stats.sink_hidden_view, on hand-worked matrices."""
from __future__ import annotations

import numpy as np

from model.analysis.head_stats import sink_hidden_view
from model.maths.masking import masked_views, most_leaking_row, softmax_steps


def test_masked_views_by_hand():
    scores = np.array([[0.0, np.log(3.0)], [np.log(2.0), 0.0]])
    mask = np.tri(2, dtype=bool)
    v = masked_views(scores, mask)
    assert v.masked[0, 1] == -np.inf and v.masked[1, 0] == np.log(2.0)
    np.testing.assert_allclose(v.probs, [[1.0, 0.0], [2 / 3, 1 / 3]])          # exp: [1 | 2, 1]
    np.testing.assert_allclose(v.unmasked, [[0.25, 0.75], [2 / 3, 1 / 3]])     # row 0 leaks 3/4 to the future
    np.testing.assert_allclose(v.leak, [0.75, 0.0])


def test_softmax_steps_by_hand():
    steps = softmax_steps([1.0, 2.0, 5.0], [True, True, False])
    np.testing.assert_array_equal(steps.masked, [1.0, 2.0, -np.inf])
    np.testing.assert_allclose(steps.exp, [np.exp(-1.0), 1.0, 0.0])
    assert steps.total == np.exp(-1.0) + 1.0
    np.testing.assert_allclose(steps.probs, [np.exp(-1) / (1 + np.exp(-1)), 1 / (1 + np.exp(-1)), 0.0])


def test_most_leaking_row_has_a_past_and_a_future():
    assert most_leaking_row(np.array([0.9, 0.2, 0.5, 0.0])) == 2                # row 0 has no past
    assert most_leaking_row(np.array([0.9, 0.0])) == 0


def test_sink_hidden_view_blanks_what_has_nothing_to_show():
    p = np.array([[1.0, 0, 0, 0],
                  [0.6, 0.4, 0, 0],
                  [0.5, 0.25, 0.25, 0],
                  [0.4, 0.3, 0.2, 0.1]])
    v = sink_hidden_view(p)
    assert np.isnan(v[:, 0]).all() and np.isnan(v[:2]).all()
    np.testing.assert_allclose(v[2, 1:3], [0.5, 0.5])
    np.testing.assert_allclose(v[3, 1:], [0.5, 1 / 3, 1 / 6])
    stack = sink_hidden_view(np.stack([p, p]))                                 # works on [H, T, T] too
    np.testing.assert_array_equal(np.isnan(stack[1]), np.isnan(v))
