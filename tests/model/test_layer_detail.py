"""layer_detail recomputes exactly what the forward pass did, and its parts are consistent with each other."""
import numpy as np
import pytest

TEXT = "In a hole in the ground there lived a hobbit. Not a nasty, dirty, wet hole, filled with the ends of worms."


@pytest.fixture(scope="module")
def trace(lm):
    return lm.run(TEXT)


@pytest.mark.parametrize("layer", [0, 7, 14, 29])
def test_pattern_equals_trace_and_masked_softmax(lm, trace, layer):
    d = lm.layer_detail(trace, layer)
    T = trace.n_tokens
    assert d.pattern.shape == (lm.config.n_heads, T, T)
    np.testing.assert_array_equal(d.pattern, trace.attention[layer])
    masked = np.where(d.mask, d.scores.astype(np.float64), -np.inf)
    softmax = np.exp(masked - masked.max(-1, keepdims=True))
    softmax /= softmax.sum(-1, keepdims=True)
    np.testing.assert_allclose(d.pattern, softmax, atol=1e-6)


def test_mask_is_causal(lm, trace):
    d = lm.layer_detail(trace, 3)
    T = trace.n_tokens
    expected = np.array([[j <= i for j in range(T)] for i in range(T)])
    np.testing.assert_array_equal(d.mask, expected)
    assert np.all(d.pattern[:, ~expected] == 0)


def test_scores_are_scaled_dot_products_with_gqa_mapping(lm, trace):
    cfg = lm.config
    d = lm.layer_detail(trace, 12)
    for h in range(cfg.n_heads):
        kv = h // (cfg.n_heads // cfg.n_kv_heads)
        expected = d.q_rot[h].astype(np.float64) @ d.k_rot[kv].astype(np.float64).T / np.sqrt(cfg.head_dim)
        np.testing.assert_allclose(d.scores[h], expected, atol=2e-4, rtol=1e-5)


def test_rope_preserves_norms_and_leaves_position_zero(lm, trace):
    d = lm.layer_detail(trace, 5)
    np.testing.assert_allclose(np.linalg.norm(d.q_rot, axis=-1), np.linalg.norm(d.q, axis=-1), rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(d.k_rot, axis=-1), np.linalg.norm(d.k, axis=-1), rtol=1e-5)
    np.testing.assert_allclose(d.q_rot[:, 0], d.q[:, 0], atol=1e-6)
    assert not np.allclose(d.q_rot[:, 5], d.q[:, 5], atol=1e-3)


def test_layer_out_of_range(lm, trace):
    with pytest.raises(ValueError, match="from 0 to 29"):
        lm.layer_detail(trace, 30)


def test_kv_groups_batched_in_any_number_of_products_give_the_same_numbers(lm, trace, monkeypatch):
    import model.decoder.blocks as blocks

    T = trace.n_tokens
    monkeypatch.setattr(blocks, "SCORES_BYTES", 4 * lm.config.group_size * T * T)   # one KV group a product
    one_by_one = lm.run(TEXT)
    np.testing.assert_array_equal(one_by_one.attention, trace.attention)
    np.testing.assert_array_equal(one_by_one.next_token_logits, trace.next_token_logits)
    d = lm.layer_detail(one_by_one, 7)
    np.testing.assert_array_equal(d.pattern, trace.attention[7])
