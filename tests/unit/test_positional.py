"""Positional encodings: sinusoidal PE and RoPE, against hand-worked values and their defining properties, and
a proof that the decoder runs the very functions the page explains."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import model.decoder.blocks as decoder_blocks
import model.decoder.core as decoder_core
import model.decoder.rope as decoder_rope
import model.maths.positional as pos


@pytest.fixture(scope="module")
def rope_lm(request):
    """The session-wide model from tests/conftest.py when there is one; else load it for this module."""
    try:
        return request.getfixturevalue("lm")
    except pytest.FixtureLookupError:
        from model import load_model

        return load_model()


TEXT = ("The quick brown fox jumps over the lazy dog. Rotary embeddings turn each pair of dimensions by an angle "
        "that grows with the position, so only the distance between two tokens survives in their dot product.")


# ------------------------------------------------------------------------------------------------ sinusoidal PE

def test_sinusoidal_pe_hand_worked_d4():
    # d=4, base 10000: w_0 = 1, w_1 = 10000^(-2/4) = 0.01
    pe = pos.sinusoidal_pe(3, 4, 10000.0)
    assert pe.shape == (3, 4)
    np.testing.assert_allclose(pe[0], [0, 1, 0, 1], atol=0)
    np.testing.assert_allclose(pe[1], [np.sin(1), np.cos(1), np.sin(0.01), np.cos(0.01)], rtol=1e-15)
    np.testing.assert_allclose(pe[2], [np.sin(2), np.cos(2), np.sin(0.02), np.cos(0.02)], rtol=1e-15)


def test_sinusoidal_pe_hand_worked_other_base():
    # d=6, base 64: w = 1, 64^(-1/3) = 1/4, 64^(-2/3) = 1/16
    pe = pos.sinusoidal_pe(4, 6, 64.0)
    p = 3
    np.testing.assert_allclose(pe[p], [np.sin(3), np.cos(3), np.sin(3 / 4), np.cos(3 / 4), np.sin(3 / 16),
                                       np.cos(3 / 16)], rtol=1e-14)


def test_sinusoidal_pe_at_is_rows_of_the_full_pe():
    pe = pos.sinusoidal_pe(50, 32, 500.0)
    np.testing.assert_array_equal(pos.sinusoidal_pe_at([0, 7, 49], 32, 500.0), pe[[0, 7, 49]])


def test_sinusoidal_pe_dims_are_columns_of_the_full_pe():
    pe = pos.sinusoidal_pe(50, 32, 500.0)
    dims = [0, 1, 7, 30, 31]
    np.testing.assert_array_equal(pos.sinusoidal_pe_dims(50, 32, 500.0, dims), pe[:, dims].T)
    assert pos.sinusoidal_pe_dims(50, 32, 500.0, []).shape == (0, 50)
    with pytest.raises(ValueError):
        pos.sinusoidal_pe_dims(50, 32, 500.0, [32])


@pytest.mark.parametrize("bad", [0, 1, 3, 17])
def test_sinusoidal_pe_rejects_odd_d(bad):
    with pytest.raises(ValueError, match="even"):
        pos.sinusoidal_pe(4, bad)


def test_pe_dot_depends_only_on_offset():
    starts = [0, 37, 500]
    dots = pos.pe_offset_dots(64, 10000.0, starts, 300)                         # [3, 301]
    assert dots.shape == (3, 301)
    np.testing.assert_allclose(dots[1], dots[0], atol=1e-10)
    np.testing.assert_allclose(dots[2], dots[0], atol=1e-10)
    k = np.arange(301)
    np.testing.assert_allclose(dots[0], np.cos(np.outer(k, pos.sinusoidal_frequencies(64))).sum(1), atol=1e-10)
    assert dots[0, 0] == pytest.approx(32.0)                                    # |PE(p)|^2 = d/2


def test_pe_similarity_is_toeplitz():
    pe = pos.sinusoidal_pe(40, 16)
    sim = pos.pe_similarity(pe)
    for k in range(-5, 6):
        diag = np.diagonal(sim, k)
        np.testing.assert_allclose(diag, diag[0], atol=1e-10)
    sub = pos.pe_similarity(pe, [0, 5, 10])
    np.testing.assert_allclose(sub, sim[np.ix_([0, 5, 10], [0, 5, 10])])


# ------------------------------------------------------------------------------------------------ RoPE basics

def test_rope_frequencies_and_wavelengths():
    f = decoder_rope.rope_frequencies(64, 100000.0)
    assert f.shape == (32,) and f[0] == 1.0
    np.testing.assert_allclose(f[1], 100000.0 ** (-2 / 64))
    np.testing.assert_allclose(pos.wavelengths(f)[0], 2 * np.pi)
    np.testing.assert_allclose(pos.wavelengths(f)[-1], 2 * np.pi * 100000.0 ** (62 / 64))


@pytest.mark.parametrize("convention", decoder_rope.CONVENTIONS)
def test_apply_rope_preserves_norms(convention):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 50, 64)).astype(np.float32)
    cos, sin = decoder_rope.rope_cos_sin(np.arange(50) * 37, 64, 10000.0)
    y = decoder_rope.apply_rope(x, cos, sin, convention)
    assert isinstance(y, np.ndarray) and y.shape == x.shape and y.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)
    # the norm of every 2-D pair is preserved too: RoPE only rotates within pairs
    np.testing.assert_allclose(np.linalg.norm(pos.split_pairs(y, convention), axis=-1),
                               np.linalg.norm(pos.split_pairs(x, convention), axis=-1), rtol=1e-5, atol=1e-6)


def test_apply_rope_position_zero_is_identity_and_torch_in_torch_out():
    x = torch.randn(2, 1, 8)
    cos, sin = decoder_rope.rope_cos_sin([0], 8, 10000.0)
    y = decoder_rope.apply_rope(x, cos, sin)
    assert isinstance(y, torch.Tensor)
    torch.testing.assert_close(y, x)


def test_apply_rope_hand_worked_pair():
    # d=2: one pair, theta_0 = 1 rad/token. (1, 0) at position m lands on (cos m, sin m).
    x = np.array([[1.0, 0.0]] * 3)
    cos, sin = decoder_rope.rope_cos_sin([0, 1, 2], 2, 10000.0)
    y = decoder_rope.apply_rope(x, cos.double(), sin.double())
    np.testing.assert_allclose(y, [[1, 0], [np.cos(1), np.sin(1)], [np.cos(2), np.sin(2)]], atol=1e-7)
    np.testing.assert_allclose(pos.rotation_path(1.0, 3), y, atol=1e-7)


@pytest.mark.parametrize("convention", decoder_rope.CONVENTIONS)
def test_rope_dot_depends_only_on_distance(convention):
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((2, 64))
    base = 100000.0

    def score(m, n):
        cq, sq = decoder_rope.rope_cos_sin([m], 64, base)
        ck, sk = decoder_rope.rope_cos_sin([n], 64, base)
        qr = decoder_rope.apply_rope(q[None], cq.double(), sq.double(), convention)[0]
        kr = decoder_rope.apply_rope(k[None], ck.double(), sk.double(), convention)[0]
        return qr @ kr

    ref = score(7, 3)
    for s in (1, 10, 100, 1000, 5000):
        assert score(7 + s, 3 + s) == pytest.approx(ref, abs=1e-5)
    assert abs(score(8, 3) - ref) > 1e-3                                        # a different distance differs


def test_shifted_scores_flat_and_match_direct():
    rng = np.random.default_rng(2)
    q, k = rng.standard_normal((2, 64)).astype(np.float32)
    shifts = np.arange(0, 4000, 13)
    s = pos.shifted_scores(q, k, 20, 5, shifts, 100000.0)
    assert s.shape == shifts.shape
    assert np.ptp(s) < 1e-4 * max(1.0, abs(s[0]))
    d = pos.scores_by_distance(q, k, [15], 100000.0)
    assert d[0] == pytest.approx(s[0], abs=1e-5)
    assert pos.scores_by_distance(q, k, [0], 1e5)[0] == pytest.approx(float(q @ k) / 8, rel=1e-5)


def test_aligned_envelope_is_upper_bound_at_zero():
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2, 64))
    env = pos.aligned_envelope(q, k, np.arange(100), 10000.0)
    weight = np.linalg.norm(pos.split_pairs(q), axis=-1) @ np.linalg.norm(pos.split_pairs(k), axis=-1)
    assert env[0] == pytest.approx(weight / 8)
    assert np.all(env <= env[0] + 1e-12)
    assert np.all(np.abs(pos.scores_by_distance(q, k, np.arange(100), 10000.0)) <= env[0] + 1e-4)


def test_conventions_agree_under_the_permutation():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 20, 64)).astype(np.float32)
    cos, sin = decoder_rope.rope_cos_sin(np.arange(20) * 11, 64, 100000.0)
    lhs = decoder_rope.apply_rope(decoder_rope.half_to_adjacent(x), cos, sin, "adjacent")
    rhs = decoder_rope.half_to_adjacent(decoder_rope.apply_rope(x, cos, sin, "half"))
    np.testing.assert_array_equal(lhs, rhs)


def test_half_to_adjacent_order_and_pair_indices():
    x = np.arange(8)
    np.testing.assert_array_equal(decoder_rope.half_to_adjacent(x), [0, 4, 1, 5, 2, 6, 3, 7])
    np.testing.assert_array_equal(pos.pair_indices(8, "half"), [[0, 4], [1, 5], [2, 6], [3, 7]])
    np.testing.assert_array_equal(pos.pair_indices(8, "adjacent"), [[0, 1], [2, 3], [4, 5], [6, 7]])
    # half-split pair i, moved to the adjacent layout, sits at (2i, 2i+1)
    moved = decoder_rope.half_to_adjacent(x)
    np.testing.assert_array_equal(pos.split_pairs(moved, "adjacent"), pos.split_pairs(x, "half"))
    with pytest.raises(ValueError):
        pos.pair_indices(8, "interleaved")


def test_pair_contributions_sum_to_dot():
    rng = np.random.default_rng(5)
    q, k = rng.standard_normal((2, 64))
    for conv in decoder_rope.CONVENTIONS:
        c = pos.pair_contributions(q, k, conv)
        assert c.shape == (32,)
        assert c.sum() == pytest.approx(q @ k)


def test_masked_softmax_and_without_rope():
    rng = np.random.default_rng(6)
    q, k = rng.standard_normal((2, 6, 8))
    mask = np.tril(np.ones((6, 6), bool))
    p = pos.attention_without_rope(q, k, mask)
    np.testing.assert_allclose(p.sum(-1), 1.0)
    assert np.all(p[~mask] == 0)
    ref = torch.softmax(torch.from_numpy(q @ k.T / np.sqrt(8)).masked_fill(~torch.from_numpy(mask), -np.inf), -1)
    np.testing.assert_allclose(p, ref.numpy(), rtol=1e-12)


# ------------------------------------------------------------------------------------------------ on the model

def test_decoder_imports_the_same_functions():
    assert decoder_blocks.apply_rope is decoder_rope.apply_rope
    assert decoder_core.rope_cos_sin is decoder_rope.rope_cos_sin


def test_layer_detail_q_rot_is_apply_rope_of_q(rope_lm):
    lm = rope_lm
    tr = lm.run(TEXT)
    cfg = lm.config
    assert tr.n_tokens > 30
    cos, sin = decoder_rope.rope_cos_sin(range(tr.n_tokens), cfg.head_dim, cfg.rope_theta)
    for layer in (0, 17):
        det = lm.layer_detail(tr, layer)
        np.testing.assert_array_equal(det.q_rot, decoder_rope.apply_rope(det.q, cos, sin, "half"))
        np.testing.assert_array_equal(det.k_rot, decoder_rope.apply_rope(det.k, cos, sin, "half"))
        # the page's helpers reproduce the model's scores from the pre-RoPE content
        h, m, n = 4, tr.n_tokens - 1, 9
        kv = h // cfg.group_size
        got = pos.rope_scores_at(det.q[h, m], det.k[kv, n], [m], [n], cfg.rope_theta)[0]
        assert got == pytest.approx(float(det.scores[h, m, n]), abs=1e-4)
        contrib = pos.pair_contributions(det.q_rot[h, m], det.k_rot[kv, n])
        assert contrib.sum() == pytest.approx(float(det.scores[h, m, n]) * np.sqrt(cfg.head_dim), abs=1e-3)
        # RoPE switched off: same recipe as the model, without the rotation
        p = pos.attention_without_rope(det.q[h], det.k[kv], det.mask)
        np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-9)


def test_perturbing_apply_rope_changes_the_model(rope_lm, monkeypatch):
    """If the decoder's torch path stopped calling model.decoder.rope.apply_rope, this wrapper would not be seen.
    (Where the kernels are built, the pass rotates natively (elementwise.split_rotate); the layer details above
    equal apply_rope's numbers bit for bit either way.)"""
    lm = rope_lm
    monkeypatch.setattr(decoder_blocks.elementwise, "available", lambda: False)
    ids = lm.encode(TEXT)[:24]
    base = lm.run_ids(ids)
    calls = []

    def swapped(x, cos, sin, convention="half"):
        calls.append(convention)
        return decoder_rope.apply_rope(x, cos, sin, "adjacent")           # wrong pairing for these weights

    monkeypatch.setattr(decoder_blocks, "apply_rope", swapped)
    wrong = lm.run_ids(ids)
    assert len(calls) == 2 * lm.config.n_layers                  # q and k in every layer
    assert set(calls) == {"half"}                                # the decoder asks for half-split pairs
    assert np.abs(wrong.next_token_logits - base.next_token_logits).max() > 0.1
    # position 0 is not rotated, so the trap is invisible on a single token
    monkeypatch.undo()
    monkeypatch.setattr(decoder_blocks.elementwise, "available", lambda: False)
    one = lm.run_ids(ids[:1])
    monkeypatch.setattr(decoder_blocks, "apply_rope", swapped)
    np.testing.assert_allclose(lm.run_ids(ids[:1]).next_token_logits, one.next_token_logits, atol=1e-4)


def test_pe_similarity_figure_is_square_with_a_matching_colour_bar():
    """Drawn at its own size (not stretched into a narrow column): margins leave a square plot area, and the colour
    bar spans exactly that height."""
    from viz.positional import pe_similarity_figure

    positions = np.arange(0, 256, 2)
    sim = pos.pe_similarity(pos.sinusoidal_pe_at(positions, 64, 10_000.0))
    fig = pe_similarity_figure(sim, positions, size=500)
    m = fig.layout.margin
    assert fig.layout.width == 500
    assert fig.layout.width - m.l - m.r == fig.layout.height - m.t - m.b >= 300     # a square plot area
    bar = fig.data[0].colorbar
    assert bar.len == 1 and bar.lenmode == "fraction" and bar.ypad == 0 and bar.title.side == "right"
    assert fig.layout.yaxis.scaleanchor == "x"


def test_learned_positions_similarity_and_principal_waves():
    n, d = 64, 16
    t = np.arange(n)[:, None]
    freqs = np.array([0.05, 0.2])
    table = np.concatenate([3 * np.sin(freqs[0] * t), 3 * np.cos(freqs[0] * t), np.sin(freqs[1] * t),
                            np.cos(freqs[1] * t), np.zeros((n, d - 4))], axis=1) + 0.5
    sim, waves, explained = pos.learned_positions(np.concatenate([table, table[:8]]), n, k=3)
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    np.testing.assert_allclose(sim, unit @ unit.T, atol=1e-12)
    np.testing.assert_allclose(np.diag(sim), 1.0, atol=1e-12)
    assert waves.shape == (3, n) and explained.shape == (3,)
    assert explained[0] >= explained[1] >= explained[2] and explained[:2].sum() > 0.85   # the slow pair first
    centred = table - table.mean(axis=0)
    np.testing.assert_allclose((waves**2).sum(axis=1), np.linalg.svd(centred, compute_uv=False)[:3] ** 2, rtol=1e-9)
