"""model/maths/sparse_masks.py: each mask against small cases worked by hand."""
from __future__ import annotations

import numpy as np
import pytest

from model.maths import sparse_masks as M
from model.maths.perplexity import moving_average, perplexity, token_losses


def rows(mask) -> list[list[int]]:
    """The allowed keys of each query, as lists."""
    return [list(np.flatnonzero(r)) for r in mask]


def test_causal():
    assert rows(M.causal(3)) == [[0], [0, 1], [0, 1, 2]]


def test_sliding_window():
    assert rows(M.sliding_window(5, 2)) == [[0], [0, 1], [1, 2], [2, 3], [3, 4]]
    assert rows(M.sliding_window(3, 1)) == [[0], [1], [2]]


def test_sink_window():
    assert rows(M.sink_window(6, 2, 1)) == [[0], [0, 1], [0, 1, 2], [0, 2, 3], [0, 3, 4], [0, 4, 5]]
    assert rows(M.sink_window(4, 1, 2)) == [[0], [0, 1], [0, 1, 2], [0, 1, 3]]   # sink keys never in the future


def test_strided():
    assert rows(M.strided(7, 3)) == [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5],
                                     [0, 3, 4, 5, 6]]


def test_dilated():
    assert rows(M.dilated(7, 2, 3)) == [[0], [1], [2], [0, 3], [1, 4], [2, 5], [3, 6]]


@pytest.mark.parametrize("kind", M.MASK_KINDS)
def test_every_mask_is_causal_with_its_diagonal(kind):
    m = M.build_mask(kind, 40, window=5, sinks=2, stride=4)
    assert m.dtype == bool and m.shape == (40, 40)
    assert not np.triu(m, 1).any() and np.diag(m).all()


def test_first_cut_row_and_kept_share():
    assert M.first_cut_row(M.causal(5)) == 5
    assert M.first_cut_row(M.sliding_window(5, 2)) == 2
    assert M.kept_share(M.sliding_window(4, 1)) == pytest.approx(4 / 10)


def test_bad_settings_say_what_to_fix():
    with pytest.raises(ValueError, match="window"):
        M.sliding_window(4, 0)
    with pytest.raises(ValueError, match="kind"):
        M.build_mask("random", 4, 1, 1, 1)


def test_perplexity_by_hand():
    lp = np.log([0.5, 0.25, 0.125])
    np.testing.assert_allclose(token_losses(lp), [np.log(2), np.log(4), np.log(8)])
    assert perplexity(lp) == pytest.approx(4.0)                 # exp(mean(ln 2, ln 4, ln 8)) = exp(ln 4)
    assert perplexity(lp, start=1) == pytest.approx(np.sqrt(32))


def test_moving_average_by_hand():
    np.testing.assert_allclose(moving_average(np.array([1.0, 3.0, 5.0, 7.0]), 2), [1, 2, 4, 6])
    np.testing.assert_allclose(moving_average(np.array([2.0, 4.0]), 5), [2, 3])
