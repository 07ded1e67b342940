"""model/maths/flash_attention.py: the tiled forward equals plain softmax attention; the memory counts by hand."""
from __future__ import annotations

import numpy as np
import pytest

from model.maths.flash_attention import (
    block_history,
    block_ranges,
    block_sizes,
    default_block,
    flash_attention,
    memory_traffic,
    nearest_block,
    softmax_attention,
    visit_order,
)


def naive_attention(q, k, v):
    """Row by row, the textbook definition (an independent reference)."""
    T, d = q.shape
    out = np.zeros((T, v.shape[1]))
    for i in range(T):
        s = np.array([q[i] @ k[j] / np.sqrt(d) for j in range(i + 1)])
        w = np.exp(s - s.max())
        out[i] = (w / w.sum()) @ v[: i + 1]
    return out


@pytest.mark.parametrize("T, block", [(1, 16), (16, 16), (37, 16), (70, 32), (130, 64), (5, 2)])
def test_tiled_output_equals_softmax_attention(T, block):
    rng = np.random.default_rng(T)
    q, k, v = (rng.normal(scale=3.0, size=(T, 8)) for _ in range(3))
    run = flash_attention(q, k, v, block)
    np.testing.assert_allclose(run.out, naive_attention(q, k, v), atol=1e-12)
    np.testing.assert_allclose(softmax_attention(q, k, v), naive_attention(q, k, v), atol=1e-12)


def test_tiles_in_algorithm_order_and_causal_skip():
    run = flash_attention(np.zeros((40, 4)), np.zeros((40, 4)), np.zeros((40, 4)), 16)
    assert [(s.k_block, s.q_block) for s in run.steps] == [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]
    assert run.steps[-1].q_rows == range(32, 40) and run.steps[-1].k_cols == range(32, 40)


def test_running_statistics_by_hand():
    # one query row at position 2, block 2: tile 1 sees keys 0-1 (scores 0, ln 3), tile 2 sees key 2 (score ln 8)
    q = np.array([[0.0], [0.0], [1.0]])
    k = np.array([[0.0], [np.log(3.0)], [np.log(8.0)]])
    v = np.array([[1.0], [2.0], [3.0]])
    run = flash_attention(q, k, v, 2)
    first = next(s for s in run.steps if s.q_block == 1 and s.k_block == 0)        # rows 2..3 -> row 2 only
    assert first.row_max[0] == pytest.approx(np.log(3.0))
    assert first.row_sum[0] == pytest.approx(1 / 3 + 1)                            # exp(0 - ln3) + exp(0)
    assert first.out[0, 0] == pytest.approx((1 * 1 + 3 * 2) / 4)                   # weights 1 : 3
    last = run.steps[-1]
    assert last.row_max[0] == pytest.approx(np.log(8.0))
    assert last.row_sum[0] == pytest.approx((1 + 3 + 8) / 8)                      # rescaled by exp(ln3 - ln8)
    assert last.out[0, 0] == pytest.approx((1 * 1 + 3 * 2 + 8 * 3) / 12)


def test_memory_traffic_by_hand():
    m = memory_traffic(T=4, d=2, block=2)
    assert m.standard == 4 * 4 * 2 + 4 * 16                    # Q, K, V, O: 4 N d; S and P written and read: 4 N^2
    # init O, l, m: 8 + 8; j=0: K,V 8, tiles (0,0), (1,0): 2 x (3*2*2 + 4*2); j=1: K,V 8, tile (1,1): 20
    assert m.flash == 16 + 8 + 40 + 8 + 20
    assert m.sram_values == 4 * 2 * 2 and m.flash_theta == 16 * 4 / 16
    assert m.score_bytes == 64 and m.tile_bytes == 16


def test_flash_traffic_grows_slower_than_standard():
    small, big = memory_traffic(256, 64, 64), memory_traffic(4096, 64, 64)
    assert small.flash < small.standard and big.flash / big.standard < small.flash / small.standard


def test_visit_order_history_and_ranges():
    run = flash_attention(np.zeros((40, 4)), np.zeros((40, 4)), np.zeros((40, 4)), 16)
    assert block_ranges(40, 16) == [range(0, 16), range(16, 32), range(32, 40)]
    order = visit_order(run, 40, 3)                                 # steps (0,0) (1,0) (2,0) (1,1) so far
    np.testing.assert_array_equal(order[np.tril_indices(3)], [0, 1, 3, 2, np.nan, np.nan])
    assert (order[np.triu_indices(3, 1)] == -1).all()
    assert [(s.q_block, s.k_block) for s in block_history(run, 4)] == [(2, 0), (2, 1)]


@pytest.mark.parametrize("T, sizes, default", [
    (22, (1, 2, 4, 8), 4),          # 22 tokens: B=8 gives 3 blocks, B=16 only 2; the default gives 6 >= 4 blocks
    (512, (16, 32, 64), 64),        # 512 / 64 = 8 blocks; B=8 would give 64 blocks (> 32)
    (1, (1,), 1), (2, (1,), 1),     # shorter than three blocks can be: one-token blocks
    (3, (1,), 1), (12, (1, 2, 4), 2),
])
def test_block_sizes_cut_the_text_into_several_blocks(T, sizes, default):
    assert block_sizes(T) == sizes
    assert default_block(T) == default
    assert nearest_block(64, T) == max(sizes) and nearest_block(3, 22) == 2
