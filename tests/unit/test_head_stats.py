"""model.analysis.head_stats against small hand-worked attention patterns."""
import numpy as np
import pytest

from model.analysis.head_stats import (
    STATISTICS,
    apply_sink,
    has_repeats,
    head_stats,
    induction_score,
    induction_targets,
    mean_row_entropy_bits,
    prev_token_score,
    row_entropy_bits,
    self_score,
    sink_hidden_row,
    sink_score,
    top_predictions,
)
from model.maths.sampling import entropy_bits, softmax


def prev_token_pattern(T):
    """Each token attends only to the token before it (row 0 to itself)."""
    p = np.zeros((T, T))
    p[0, 0] = 1
    p[np.arange(1, T), np.arange(T - 1)] = 1
    return p


def uniform_causal(T):
    """Row i spreads its weight evenly over keys 0..i."""
    return np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]


def test_pure_previous_token_head():
    p = prev_token_pattern(6)
    assert prev_token_score(p) == pytest.approx(1.0)
    assert self_score(p) == pytest.approx(0.0)
    assert sink_score(p) == pytest.approx(1 / 5)        # only row 1's previous token is key 0
    assert mean_row_entropy_bits(p) == pytest.approx(0.0)


def test_identity_and_sink_heads():
    eye = np.eye(5)
    assert self_score(eye) == pytest.approx(1.0)
    assert prev_token_score(eye) == pytest.approx(0.0)
    sink = np.zeros((5, 5))
    sink[:, 0] = 1
    assert sink_score(sink) == pytest.approx(1.0)
    assert mean_row_entropy_bits(sink) == pytest.approx(0.0)


def test_uniform_rows_entropy_is_log2_of_row_length():
    T = 5
    expected = np.mean([np.log2(i + 1) for i in range(1, T)])   # rows 1..T-1
    assert mean_row_entropy_bits(uniform_causal(T)) == pytest.approx(expected)
    # 1/(i+1) per key: prev-token score is the mean of 1/(i+1) over i >= 1
    assert prev_token_score(uniform_causal(T)) == pytest.approx(np.mean([1 / (i + 1) for i in range(1, T)]))


def test_functions_vectorize_over_leading_axes():
    stack = np.stack([np.stack([prev_token_pattern(4), np.eye(4)]), np.stack([np.eye(4), uniform_causal(4)])])
    assert stack.shape == (2, 2, 4, 4)
    prev = prev_token_score(stack)
    assert prev.shape == (2, 2)
    assert prev[0, 0] == pytest.approx(1) and prev[0, 1] == pytest.approx(0)
    assert mean_row_entropy_bits(stack).shape == (2, 2)
    assert self_score(stack)[1, 0] == pytest.approx(1)


def test_nan_masked_cells_count_as_zero():
    p = prev_token_pattern(4).astype(np.float32)
    p[np.triu_indices(4, 1)] = np.nan
    assert prev_token_score(p) == pytest.approx(1.0)
    assert mean_row_entropy_bits(p) == pytest.approx(0.0)


def test_apply_sink_zeroes_column_zero_and_renormalizes():
    p = np.array([[1.0, 0, 0],
                  [0.8, 0.2, 0],
                  [0.5, 0.25, 0.25]], dtype=np.float16)
    out = apply_sink(p, True)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[1, 0, 0], [0, 1, 0], [0, 0.5, 0.5]], atol=1e-6)
    np.testing.assert_allclose(apply_sink(p, False), p.astype(np.float32))
    assert p[1, 0] == np.float16(0.8)                     # the input is not modified


def test_apply_sink_keeps_nan_and_all_sink_rows():
    p = np.array([[1.0, np.nan], [1.0, 0.0]])             # row 1: all its weight was on the sink
    out = apply_sink(p, True)
    assert out[0, 0] == 1 and np.isnan(out[0, 1])
    np.testing.assert_array_equal(out[1], [0, 0])         # nothing left to renormalize: zeros, not NaN
    assert apply_sink(np.ones((1, 1)), True)[0, 0] == 1    # one token: nothing to hide


def test_apply_sink_on_stack_matches_per_head():
    rng = np.random.default_rng(0)
    raw = rng.random((2, 3, 6, 6)) * np.tril(np.ones((6, 6)))
    raw /= raw.sum(-1, keepdims=True)
    out = apply_sink(raw, True)
    np.testing.assert_allclose(out[..., 1:, :].sum(-1), 1, rtol=1e-5)
    np.testing.assert_allclose(out[1, 2], apply_sink(raw[1, 2], True))


def test_induction_targets_and_score_on_repeated_sequence():
    seq = [5, 9, 7, 3]
    ids = seq + seq                                       # A B C D A B C D
    targets = induction_targets(ids)
    # second-copy token at i = 4 + k attends to the token after its first occurrence, k + 1
    expected = {(4, 1), (5, 2), (6, 3), (7, 4)}
    assert {tuple(x) for x in np.argwhere(targets)} == expected
    p = np.zeros((8, 8))
    p[np.arange(8), np.arange(8)] = 1                     # a self head ...
    for i, j in expected:                                 # ... except on the repeats: a perfect induction head
        p[i] = 0
        p[i, j] = 1
    assert induction_score(p, ids) == pytest.approx(1.0)
    assert induction_score(np.eye(8), ids) == pytest.approx(0.0)
    assert has_repeats(ids)


def test_induction_is_nan_without_repeats_and_ignores_adjacent_repeats():
    assert np.isnan(induction_score(np.eye(4), [1, 2, 3, 4]))
    assert not has_repeats([1, 2, 3, 4])
    assert not has_repeats([1, 1, 2])                     # "x x": the target would be the token itself


def test_head_stats_shapes_and_sink_switch():
    T = 6
    att = np.stack([np.stack([prev_token_pattern(T), uniform_causal(T)])] * 3).astype(np.float16)  # [3, 2, T, T]
    ids = [1, 2, 3, 1, 2, 3]
    stats = head_stats(att, ids)
    assert set(stats) == set(STATISTICS)
    assert all(v.shape == (3, 2) for v in stats.values())
    assert stats["prev_token"][:, 0] == pytest.approx(1.0)
    hidden = head_stats(att, ids, hide_sink=True)
    assert hidden["sink"] == pytest.approx(stats["sink"])  # the sink score always reads the raw pattern
    assert hidden["self"][0, 1] > stats["self"][0, 1]       # weight moves off key 0 onto the rest
    with pytest.raises(ValueError):
        head_stats(att[0], ids)
    with pytest.raises(ValueError):
        head_stats(att, ids[:-1])


def test_single_token_stats_are_nan_not_errors():
    stats = head_stats(np.ones((2, 3, 1, 1), dtype=np.float32), [7])
    assert all(np.isnan(v).all() for v in stats.values())


def test_top_predictions_sorted_probabilities():
    logits = np.array([0.0, 3.0, 1.0, 2.0, -1.0], dtype=np.float32)
    ids, probs = top_predictions(logits, k=3)
    assert ids.tolist() == [1, 3, 2]
    assert probs.dtype == np.float64
    np.testing.assert_allclose(probs, softmax(logits)[[1, 3, 2]])
    assert softmax(np.array([1000.0, 1000.0])) == pytest.approx([0.5, 0.5])   # no overflow
    assert top_predictions(logits, k=99)[0].size == 5


def test_sink_hidden_row_renormalizes_one_querys_weights():
    """Query 2 of a 4-token text, two heads, worked by hand: key 0 hidden, keys 1..2 rescaled to sum to 1; the future
    key 3 (weight 0) stays 0."""
    weights = np.array([[0.6, 0.3, 0.1, 0.0],
                        [0.5, 0.0, 0.5, 0.0]])
    out = sink_hidden_row(weights)
    assert np.isnan(out[:, 0]).all()
    np.testing.assert_allclose(out[:, 1:], [[0.75, 0.25, 0.0], [0.0, 1.0, 0.0]], rtol=1e-6)
    assert weights[0, 0] == 0.6                                              # the input is not changed


def random_pattern(rng, H, T, causal=True, masked_nan=False):
    """[H, T, T] post-softmax rows (causal: zero, or NaN, after the diagonal)."""
    logits = rng.normal(0, 4, (H, T, T))
    if causal:
        logits[:, np.triu(np.ones((T, T), dtype=bool), 1)] = -np.inf
    p = softmax(logits, axis=-1)
    if causal and masked_nan:
        p[:, np.triu(np.ones((T, T), dtype=bool), 1)] = np.nan
    return p


@pytest.mark.parametrize("T", [1, 2, 63, 64, 65, 130])
@pytest.mark.parametrize("kind", ["causal", "nan-masked", "bidirectional"])
def test_row_entropy_matches_entropy_bits_of_each_row_in_float16_and_float32(T, kind):
    """Blocks of rows cut short at the last row's key, and float16 cells read from a table of -p log2 p: the same
    numbers as sampling.entropy_bits of each whole row converted to float64 (NaN cells read as 0)."""
    rng = np.random.default_rng(T)
    p = random_pattern(rng, 3, T, causal=kind != "bidirectional", masked_nan=kind == "nan-masked")
    for dtype in (np.float16, np.float32):
        cells = p.astype(dtype)
        expected = entropy_bits(np.nan_to_num(cells.astype(np.float64), nan=0.0), axis=-1)    # [3, T]
        got = row_entropy_bits(cells)
        assert got.shape == (3, T) and got.dtype == np.float64
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_float16_entropy_of_hand_worked_rows():
    """Rows of float16 weights worked by hand: one key (0 bits), two halves (1 bit), four quarters (2 bits), and a
    row with weight on a later key than its own (bidirectional) read in full."""
    rows = np.array([[[1, 0, 0, 0], [0.5, 0.5, 0, 0], [0.25, 0.25, 0.25, 0.25], [0, 0, 0, 1]],
                     [[0.5, 0, 0, 0.5], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]], dtype=np.float16)
    np.testing.assert_allclose(row_entropy_bits(rows), [[0, 1, 2, 0], [1, 0, 0, 0]], atol=1e-12)
