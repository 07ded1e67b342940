"""ALiBi slopes against the paper's values; linear attention against the direct O(T^2) formula; KV-head helpers."""
from __future__ import annotations

import numpy as np
import pytest

from model.calculator.costs import kv_values_per_token
from model.maths.alibi import alibi_bias, alibi_slopes, alibi_weight_by_distance, rope_decay
from model.maths.kv_heads import cache_bytes_per_token, kv_head_counts, pool_kv_rows
from model.maths.linear_attention import (
    cost_per_token,
    elu_feature_map,
    linear_attention,
    linear_pattern,
    pattern_error,
    recurrence_gap,
    softmax_pattern,
)


def test_alibi_slopes_for_8_heads_are_the_papers():
    np.testing.assert_allclose(alibi_slopes(8), [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256])


def test_alibi_slopes_for_12_heads_by_hand():
    # the 8 slopes of 8 heads, then every other slope of 16 heads (2^-0.5, 2^-1, 2^-1.5, ...): 2^-0.5, 2^-1.5, ...
    expected = [2.0 ** -e for e in (1, 2, 3, 4, 5, 6, 7, 8, 0.5, 1.5, 2.5, 3.5)]
    np.testing.assert_allclose(alibi_slopes(12), expected)
    np.testing.assert_allclose(alibi_slopes(1), [2.0 ** -8])
    np.testing.assert_allclose(alibi_slopes(16)[:2], [2 ** -0.5, 2 ** -1])


def test_alibi_bias_and_weights():
    b = alibi_bias(np.array([0.5]), 3)[0]
    np.testing.assert_allclose(b, [[0, -np.inf, -np.inf], [-0.5, 0, -np.inf], [-1, -0.5, 0]])
    np.testing.assert_allclose(alibi_weight_by_distance(np.array([np.log(2)]), np.arange(3)), [[1, 0.5, 0.25]])


def test_rope_decay_starts_at_one_and_shrinks():
    decay = rope_decay(64, 10_000.0, np.arange(0, 2000))
    assert decay[0] == pytest.approx(1.0)
    assert np.abs(decay[1000:]).max() < 0.5
    # d = 2: one pair, the decay is cos(Δ θ_0) with θ_0 = 1
    np.testing.assert_allclose(rope_decay(2, 10_000.0, np.arange(4)), np.cos(np.arange(4)))


def direct_linear_attention(q, k, v):
    """O(T^2) by the definition: out_i = sum_{j<=i} phi(q_i).phi(k_j) v_j / sum_{j<=i} phi(q_i).phi(k_j)."""
    phi = lambda x: np.where(x > 0, x + 1, np.exp(x))  # noqa: E731
    out = np.zeros((len(q), v.shape[1]))
    for i in range(len(q)):
        w = np.array([phi(q[i]) @ phi(k[j]) for j in range(i + 1)])
        out[i] = w @ v[: i + 1] / w.sum()
    return out


def test_linear_attention_equals_the_direct_formula():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(30, 6)) for _ in range(3))
    ref = direct_linear_attention(q, k, v)
    np.testing.assert_allclose(linear_attention(q, k, v), ref, atol=1e-12)
    np.testing.assert_allclose(linear_pattern(q, k) @ v, ref, atol=1e-12)
    np.testing.assert_allclose(linear_pattern(q, k).sum(axis=1), 1.0)
    assert recurrence_gap(q, k, v) < 1e-12


def test_feature_map_and_error_by_hand():
    np.testing.assert_allclose(elu_feature_map(np.array([-1.0, 0.0, 2.0])), [np.exp(-1), 1.0, 3.0])
    p = softmax_pattern(np.zeros((2, 1)), np.zeros((2, 1)))
    np.testing.assert_allclose(p, [[1, 0], [0.5, 0.5]])
    err = pattern_error(p, np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([[1.0], [3.0]]))
    np.testing.assert_allclose(err.row_distance, [0, 0.5])
    np.testing.assert_allclose(err.output_error, [0, 0.5])               # |1 - 2| / 2
    assert err.total_output_error == pytest.approx(1 / np.sqrt(5))       # |(0, -1)| / |(1, 2)|


def test_cost_per_token_crosses_where_t_reaches_d():
    soft, lin = cost_per_token(np.array([0, 63, 64, 1000]), 64)
    np.testing.assert_allclose(soft, [128, 8192, 8320, 128128])
    np.testing.assert_allclose(lin, 2 * 64 * 64 + 128)


def test_kv_cache_and_pooling():
    assert kv_values_per_token(30, 3, 64) * 2 == 2 * 30 * 3 * 64 * 2
    counts = kv_head_counts(9, 3)
    assert counts == {"mha": 9, "gqa": 3, "mqa": 1}
    assert cache_bytes_per_token(30, 64, counts) == {"mha": 69120, "gqa": 23040, "mqa": 7680}
    w = np.arange(12.0).reshape(6, 2)                                       # 3 heads of hd 2 (rows 0-1, 2-3, 4-5)
    np.testing.assert_allclose(pool_kv_rows(w, 3, 1), [[4, 5], [6, 7]])     # mean of rows (0,2,4) and (1,3,5)
    np.testing.assert_allclose(pool_kv_rows(w, 3, 6)[:4], [[0, 1], [2, 3], [0, 1], [2, 3]])  # head 0, twice
    with pytest.raises(ValueError, match="groups"):
        pool_kv_rows(w, 3, 2)
