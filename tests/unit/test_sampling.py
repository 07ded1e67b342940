"""Sampling math (model/sampling.py) against hand-worked values."""
import itertools
import math

import numpy as np
import pytest

from model.maths import sampling as S


def test_softmax_hand_worked():
    # exp(0) : exp(ln 2) = 1 : 2
    np.testing.assert_allclose(S.softmax([0.0, math.log(2)]), [1 / 3, 2 / 3], rtol=1e-15)
    # temperature 2 halves the logits: exp(0) : exp(ln 4 / 2) = 1 : 2
    np.testing.assert_allclose(S.softmax([0.0, math.log(4)], temperature=2), [1 / 3, 2 / 3], rtol=1e-15)
    # T = 0.5 doubles them: 1 : 4
    np.testing.assert_allclose(S.softmax([0.0, math.log(2)], temperature=0.5), [0.2, 0.8], rtol=1e-15)
    assert S.softmax([1.0, 2.0, 3.0]).dtype == np.float64


def test_softmax_rows_and_mask():
    x = np.array([[0.0, -np.inf, -np.inf], [1.0, 1.0, -np.inf], [0.0, 0.0, 0.0]])
    p = S.softmax(x, axis=-1)
    np.testing.assert_allclose(p, [[1, 0, 0], [0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3]])
    assert p[0, 1] == 0.0 and p[1, 2] == 0.0  # exactly zero, not tiny


def test_log_softmax_matches_log_of_softmax():
    x = np.array([3.0, -1.0, 0.5, -np.inf])
    np.testing.assert_allclose(S.log_softmax(x, 0.7)[:3], np.log(S.softmax(x, 0.7)[:3]), rtol=1e-12)
    assert S.log_softmax(x)[3] == -np.inf


@pytest.mark.parametrize("t", [S.T_MIN, 0.05, 10.0, S.T_MAX, 1e-4, 1e4])
def test_extreme_temperatures_are_finite(t):
    rng = np.random.default_rng(0)
    x = rng.normal(0, 30, size=49152)
    p = S.softmax(x, t)
    assert np.isfinite(p).all()
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    h = S.entropy_bits(p)
    assert np.isfinite(h) and 0 <= h <= math.log2(len(x)) + 1e-9


def test_low_temperature_is_argmax_high_is_flatter():
    x = np.array([1.0, 3.0, 2.0])
    assert S.softmax(x, 0.05)[1] == pytest.approx(1 - math.exp(-20), rel=1e-9)   # gap 1 / 0.05 = 20
    assert S.entropy_bits(S.softmax(x, 10)) > S.entropy_bits(S.softmax(x, 1)) > S.entropy_bits(S.softmax(x, 0.05))


def test_huge_and_infinite_logits_no_nan():
    p = S.softmax([1e30, -np.inf, 0.0, -1e30], 0.05)
    np.testing.assert_array_equal(p, [1, 0, 0, 0])
    p = S.softmax([1e308, -1e308], 10.0)      # the difference overflows float64
    np.testing.assert_array_equal(p, [1, 0])
    p = S.softmax([np.inf, 1.0, np.inf])      # +inf entries share the mass
    np.testing.assert_array_equal(p, [0.5, 0, 0.5])
    for t in (0.05, 1.0, 10.0):
        assert not np.isnan(S.softmax([1e30, 1e30, -np.inf], t)).any()
        assert S.entropy_bits(S.softmax([1e30, -np.inf], t)) == 0.0


def test_invalid_inputs_raise():
    with pytest.raises(ValueError, match="temperature"):
        S.softmax([1.0, 2.0], 0)
    with pytest.raises(ValueError, match="temperature"):
        S.softmax([1.0, 2.0], float("nan"))
    with pytest.raises(ValueError, match="NaN"):
        S.softmax([1.0, float("nan")])
    with pytest.raises(ValueError, match="masked"):
        S.softmax([-np.inf, -np.inf])


@pytest.mark.parametrize("n", [1, 2, 4, 7, 49152])
def test_entropy_of_uniform_is_log2_n(n):
    p = np.full(n, 1 / n)
    assert S.entropy_bits(p) == pytest.approx(math.log2(n), abs=1e-9)
    assert S.effective_choices(p) == pytest.approx(n, rel=1e-9)


def test_entropy_hand_worked_and_zero_terms():
    assert S.entropy_bits([0.5, 0.25, 0.25]) == pytest.approx(1.5)
    assert S.entropy_bits([1.0, 0.0, 0.0]) == 0.0            # 0 log 0 = 0, no NaN
    np.testing.assert_allclose(S.entropy_bits([[0.5, 0.5], [1.0, 0.0]]), [1.0, 0.0])


def test_temperature_grid_is_log_spaced_and_includes_ends():
    g = S.temperature_grid()
    assert g[0] == 0.05 and g[-1] == 10.0 and 1.0 in g
    assert all(b > a for a, b in itertools.pairwise(g))
    ratios = np.diff(np.log10(g))
    assert ratios.max() < 0.08 and ratios.min() > 0.03      # ~1/20 decade each (2-digit rounding)
    assert S.nearest_temperature(g, 0.9) == 0.89
    assert S.nearest_temperature(g, 1e9) == 10.0 and S.nearest_temperature(g, 0.0) == 0.05
    assert S.nearest_temperature(g, "junk") == 1.0


def test_temperature_sweep():
    x = np.array([0.0, math.log(2), -np.inf])
    sw = S.temperature_sweep(x, [1.0, 1e-3, 1e3])
    np.testing.assert_allclose(sw["top1"], [2 / 3, 1.0, 0.5], atol=1e-3)
    h1 = -(1 / 3 * math.log2(1 / 3) + 2 / 3 * math.log2(2 / 3))
    assert sw["entropy_bits"][0] == pytest.approx(h1)
    np.testing.assert_allclose(sw["effective"], np.exp2(sw["entropy_bits"]))
    assert sw["effective"][2] == pytest.approx(2.0, abs=1e-3)   # the masked entry never counts


def test_top_k():
    p = np.array([0.1, 0.4, 0.2, 0.3])
    np.testing.assert_array_equal(S.top_k_keep(p, 2), [False, True, False, True])
    np.testing.assert_array_equal(S.top_k_keep(p, 0), [True] * 4)     # 0 = off
    np.testing.assert_array_equal(S.top_k_keep(p, 99), [True] * 4)
    np.testing.assert_array_equal(S.top_k_keep([0.5, 0.5, 0.0], 3), [True, True, False])  # never keeps p = 0
    np.testing.assert_array_equal(S.top_k_keep([0.25] * 4, 2), [True, True, False, False])  # ties: lower index


def test_top_p_keeps_smallest_set_reaching_p():
    p = np.array([0.1, 0.5, 0.15, 0.25])   # sorted: 0.5, 0.25, 0.15, 0.1 -> cumulative 0.5, 0.75, 0.9, 1.0
    assert S.top_p_keep(p, 0.5).tolist() == [False, True, False, False]      # 0.5 >= 0.5 exactly
    assert S.top_p_keep(p, 0.51).tolist() == [False, True, False, True]
    assert S.top_p_keep(p, 0.75).tolist() == [False, True, False, True]
    assert S.top_p_keep(p, 0.8).tolist() == [False, True, True, True]
    assert S.top_p_keep(p, 0.01).tolist() == [False, True, False, False]     # the top entry always stays
    assert S.top_p_keep(p, 1.0).all()
    # smallest: no proper subset of the kept set reaches p
    rng = np.random.default_rng(1)
    for _ in range(50):
        q = rng.dirichlet(np.ones(12))
        top_p = rng.uniform(0.05, 0.99)
        keep = S.top_p_keep(q, top_p)
        assert q[keep].sum() >= top_p - 1e-12
        assert q[keep].sum() - q[keep].min() < top_p
        assert q[keep].min() >= q[~keep].max(initial=0)


def test_top_k_and_top_p_match_a_full_sort_on_large_vectors_with_ties():
    # reference: rank every entry with a full stable sort (ties: lower index first), keep a prefix
    rng = np.random.default_rng(3)
    for _ in range(20):
        p = rng.choice([0.0, 1.0, 2.0, 3.0, 5.0], size=5000) * rng.choice([1.0, 1.0001], size=5000)
        p /= p.sum()
        order = sorted(range(len(p)), key=lambda i: (-p[i], i))
        k = int(rng.integers(1, 4000))
        expected = np.zeros(len(p), dtype=bool)
        expected[order[:k]] = True
        np.testing.assert_array_equal(S.top_k_keep(p, k), expected & (p > 0))
        top_p = float(rng.uniform(0.01, 0.999))
        n_keep = next(n for n in range(1, len(p) + 1) if p[order[:n]].sum() >= top_p - 1e-12)
        expected = np.zeros(len(p), dtype=bool)
        expected[order[:n_keep]] = True
        np.testing.assert_array_equal(S.top_p_keep(p, top_p), expected)


def test_sample_with_continues_one_generator():
    p = S.softmax([0.3, 1.0, -0.5, 2.0])
    rng = np.random.default_rng(5)
    one_by_one = [int(S.sample_with(p, 1, rng)[0]) for _ in range(200)]
    assert one_by_one == S.sample(p, 200, seed=5).tolist()   # 200 single draws == one seeded batch of 200
    # inverse CDF by hand: uniforms of the same seed, placed in the cumulative sums
    u = np.random.default_rng(5).random(200)
    assert one_by_one == np.searchsorted(np.cumsum(p), u, side="right").tolist()


def test_filter_top_k_then_top_p_renormalized():
    keep, kept = S.filter_probs([0.4, 0.3, 0.2, 0.1], top_k=3, top_p=0.7)
    # after top-3: 4/9, 3/9, 2/9 -> 4/9 < 0.7 <= 7/9: keep two, renormalize to 4/7, 3/7
    assert keep.tolist() == [True, True, False, False]
    np.testing.assert_allclose(kept, [4 / 7, 3 / 7, 0, 0])
    keep, kept = S.filter_probs([0.4, 0.3, 0.2, 0.1])
    assert keep.all() and kept.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("top_k, top_p", [(50, 0.9), (1, 1.0), (40, 0.3), (6000, 0.999)])
def test_filter_on_a_large_vocabulary_matches_the_definition(top_k, top_p):
    rng = np.random.default_rng(top_k)
    logits = np.round(rng.standard_normal(49152) * 3, 1)                  # many ties, as rounded logits have
    logits[rng.integers(0, 49152, 500)] = -np.inf
    p = S.softmax(logits)
    order = np.lexsort((np.arange(len(p)), -p))                             # by probability, then id
    top = order[:top_k][p[order[:top_k]] > 0]
    mass = np.cumsum(p[top]) / p[top].sum()
    chosen = top[:int(np.argmax(mass >= top_p - 1e-12)) + 1]
    keep, kept = S.filter_probs(p, top_k, top_p)
    assert np.flatnonzero(keep).tolist() == sorted(chosen.tolist())
    np.testing.assert_allclose(kept[chosen], p[chosen] / p[chosen].sum(), rtol=1e-13)
    assert kept[~keep].max() == 0


def test_sampling_is_seeded_and_converges():
    p = S.softmax([2.0, 1.0, 0.0, -np.inf, 0.5])
    a = S.sample(p, 1000, seed=42)
    np.testing.assert_array_equal(a, S.sample(p, 1000, seed=42))
    assert not np.array_equal(a, S.sample(p, 1000, seed=43))
    counts = S.sample_counts(p, 200_000, seed=7)
    assert counts[3] == 0                           # probability 0 is never drawn
    assert counts.sum() == 200_000
    np.testing.assert_allclose(counts / counts.sum(), p, atol=0.005)


def test_sampling_never_draws_filtered_entries():
    keep, kept = S.filter_probs(S.softmax(np.arange(10.0)), top_k=3)
    counts = S.sample_counts(kept, 5000, seed=0)
    assert counts[~keep].sum() == 0 and counts[keep].min() > 0


def test_sampling_bad_inputs():
    with pytest.raises(ValueError):
        S.sample([0.0, 0.0], 5, 0)
    with pytest.raises(ValueError):
        S.sample([0.5, 0.5], -1, 0)
    assert S.sample([1.0], 0, 0).shape == (0,)
