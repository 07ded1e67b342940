"""The Softmax page's sampling comparison (model/sampling.py): buckets of the shown candidates plus one 'others'
bucket, whose gap to the probabilities settles as the number of draws grows."""
from __future__ import annotations

import numpy as np
import pytest

from model.maths.sampling import expected_total_variation, sample_counts, softmax, top_buckets, total_variation


def test_top_buckets_by_hand():
    probs = np.array([0.1, 0.4, 0.0, 0.3, 0.2])
    counts = np.array([1, 5, 0, 3, 1])
    ids, expected, observed = top_buckets(probs, counts, 2)
    assert list(ids) == [1, 3]
    np.testing.assert_allclose(expected, [0.4, 0.3, 0.3])                      # others: 0.1 + 0.2 (p = 0 left out)
    np.testing.assert_allclose(observed, [0.5, 0.3, 0.2])
    assert total_variation(expected, observed) == pytest.approx(0.1)


def test_expected_total_variation_formula_and_scaling():
    p = np.array([0.5, 0.5])
    # two buckets: |f - 0.5| with f ~ N(0.5, 0.25/n): mean |error| = sqrt(2 * 0.25 / (pi n)) each, TV = that
    assert expected_total_variation(p, 100) == pytest.approx(np.sqrt(0.5 / (np.pi * 100)))
    assert expected_total_variation(p, 10_000) == pytest.approx(expected_total_variation(p, 100) / 10)


def test_gap_over_buckets_settles_while_the_full_gap_does_not():
    """At a high temperature over 49,152 candidates: over all candidates the frequencies stay far from the
    probabilities even at 100,000 draws (most candidates are never drawn); over 21 buckets they settle."""
    probs = softmax(np.random.default_rng(3).normal(size=49_152), 10.0)
    gaps = {}
    for n in (1_000, 100_000):
        counts = sample_counts(probs, n, seed=1)
        _, expected, observed = top_buckets(probs, counts, 20)
        gaps[n] = total_variation(expected, observed)
        assert gaps[n] < 4 * expected_total_variation(expected, n)
        assert total_variation(probs, counts / n) > 0.2                         # the misleading measure
    assert gaps[100_000] < gaps[1_000]
