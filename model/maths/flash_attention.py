"""FlashAttention's forward pass for one causal head, tile by tile, and its memory traffic (pure numpy, float64).

Dao et al. 2022, Algorithm 1: the keys and values are cut into blocks of B rows (outer loop), the queries into
blocks of B rows (inner loop). Each tile of scores S_ij = Q_i K_j^T / sqrt(d) lives only in fast on-chip memory
(SRAM); the softmax is never formed for a whole row at once. Per query row the algorithm keeps the running maximum
m, the running sum l of exp(s - m) and the output O, already divided by l; a new tile with a larger maximum
rescales what was summed before by exp(m_old - m_new). With a causal mask the tiles wholly above the diagonal
(every key after every query of the tile) are skipped. The result equals softmax(S) V exactly, up to rounding.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BLOCK_SIZES = (16, 32, 64)
BYTES_PER_VALUE = 4              # float32 scores, as the standard implementation writes them to slow memory


@dataclass(frozen=True)
class TileStep:
    """The state after one tile: the running statistics and output of the query block's rows."""

    q_block: int             # i: which block of queries
    k_block: int             # j: which block of keys and values
    q_rows: range            # the query positions of block i
    k_cols: range            # the key positions of block j
    row_max: np.ndarray      # [B] m: the largest score seen so far in each query row
    row_sum: np.ndarray      # [B] l: sum of exp(score - m) over the keys seen so far
    out: np.ndarray          # [B, d] O: exp-weighted sum of the values seen so far, divided by l


@dataclass(frozen=True)
class FlashRun:
    """Every tile the algorithm visited, in its order, and the final output."""

    block: int
    steps: tuple[TileStep, ...]
    out: np.ndarray          # [T, d] the attention output of every query


BLOCK_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)
MIN_BLOCKS, MAX_BLOCKS = 3, 32     # the walk needs several query blocks; more than 32 make tiles too small to see
TEACHING_BLOCKS = 4                # the default block size gives at least this many query blocks where it can


def block_sizes(n_tokens: int) -> tuple[int, ...]:
    """The block sizes B that cut a text of n_tokens into MIN_BLOCKS..MAX_BLOCKS query blocks (several tiles to walk,
    each still visible); (1,) for a text shorter than MIN_BLOCKS tokens."""
    n = max(1, int(n_tokens))
    fits = tuple(b for b in BLOCK_CANDIDATES if MIN_BLOCKS <= -(-n // b) <= MAX_BLOCKS)
    return fits or ((BLOCK_CANDIDATES[-1],) if n > BLOCK_CANDIDATES[-1] * MAX_BLOCKS else (1,))


def default_block(n_tokens: int) -> int:
    """The largest offered B that still gives TEACHING_BLOCKS query blocks, else the smallest offered."""
    sizes = block_sizes(n_tokens)
    teaching = [b for b in sizes if -(-max(1, n_tokens) // b) >= TEACHING_BLOCKS]
    return max(teaching) if teaching else min(sizes)


def nearest_block(block: int, n_tokens: int) -> int:
    """The offered block size nearest to block (a link's or a longer text's B)."""
    return min(block_sizes(n_tokens), key=lambda b: (abs(b - block), b))


def flash_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, block: int) -> FlashRun:
    """Causal FlashAttention forward of one head: q, k, v [T, d] (after RoPE) -> FlashRun, in Algorithm 1's order
    (outer loop over key/value blocks j, inner loop over query blocks i >= j)."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if q.ndim != 2 or q.shape != k.shape or k.shape[0] != v.shape[0]:
        raise ValueError(f"q and k must be [T, d] and v [T, d_v] with the same T, got {q.shape}, {k.shape}, "
                         f"{v.shape}")
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    T, d = q.shape
    scale = 1.0 / np.sqrt(d)
    n_blocks = -(-T // block)
    m = np.full(T, -np.inf)                                           # [T] running row maximum
    z = np.zeros(T)                                                   # [T] running row sum
    o = np.zeros((T, v.shape[1]))                                     # [T, d_v] running output (normalized)
    steps = []
    for j in range(n_blocks):                                         # outer: key/value blocks
        cols = range(j * block, min(T, (j + 1) * block))
        k_j, v_j = k[cols.start:cols.stop], v[cols.start:cols.stop]   # [Bc, d], [Bc, d_v]
        for i in range(j, n_blocks):                                  # inner: query blocks on or below the diagonal
            rows = range(i * block, min(T, (i + 1) * block))
            r = slice(rows.start, rows.stop)
            s = q[r] @ k_j.T * scale                                  # [Br, Bc] the tile's scores
            s = np.where(np.arange(cols.start, cols.stop)[None, :] <= np.arange(rows.start, rows.stop)[:, None],
                         s, -np.inf)                                  # causal mask inside the tile
            m_tile = s.max(axis=1)                                    # [Br] (finite: key j*B <= every row here)
            p = np.exp(s - m_tile[:, None])                           # [Br, Bc]
            l_tile = p.sum(axis=1)                                    # [Br]
            m_new = np.maximum(m[r], m_tile)                          # [Br]
            old, new = np.exp(m[r] - m_new), np.exp(m_tile - m_new)   # [Br] rescaling factors
            l_new = old * z[r] + new * l_tile                         # [Br]
            o[r] = ((old * z[r])[:, None] * o[r] + new[:, None] * (p @ v_j)) / l_new[:, None]   # [Br, d_v]
            m[r], z[r] = m_new, l_new
            steps.append(TileStep(i, j, rows, cols, m_new.copy(), l_new.copy(), o[r].copy()))
    return FlashRun(block=block, steps=tuple(steps), out=o)


def block_ranges(T: int, block: int) -> list[range]:
    """The token positions of each block of `block` rows: [range(0, B), range(B, 2B), ...], the last one shorter."""
    return [range(start, min(T, start + block)) for start in range(0, T, block)]


def visit_order(run: FlashRun, T: int, upto: int) -> np.ndarray:
    """[n, n] float: the step at which tile (query block i, key block j) was visited, for steps 0..upto; NaN for
    tiles not visited yet, -1 for tiles the causal mask skips (j > i)."""
    n = len(block_ranges(T, run.block))
    order = np.full((n, n), np.nan)
    order[np.triu_indices(n, 1)] = -1
    for k, step in enumerate(run.steps[: upto + 1]):
        order[step.q_block, step.k_block] = k
    return order


def block_history(run: FlashRun, upto: int) -> list[TileStep]:
    """The steps so far (0..upto) of the query block that step `upto` works on: its running statistics over time."""
    q_block = run.steps[upto].q_block
    return [step for step in run.steps[: upto + 1] if step.q_block == q_block]


def softmax_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The ordinary way: the whole [T, T] score matrix, causal mask, softmax, times V -> [T, d_v] (float64)."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    T, d = q.shape
    s = np.where(np.tri(T, dtype=bool), q @ k.T / np.sqrt(d), -np.inf)    # [T, T]
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ np.asarray(v, dtype=np.float64)


@dataclass(frozen=True)
class MemoryTraffic:
    """Values read from / written to slow memory (HBM) by one head's attention, and what fast memory holds."""

    standard: int                # Algorithm 0: Q, K, V read, S and P written and read back, O written
    flash: int                   # Algorithm 1 on the tiles actually visited (causal)
    standard_theta: float        # the paper's Theta(N d + N^2)
    flash_theta: float           # the paper's Theta(N^2 d^2 / M)
    sram_values: int             # M: the fast memory Algorithm 1 needs for blocks of this size, 4 B d values
    score_bytes: int             # the full [T, T] score matrix in float32
    tile_bytes: int              # one [B, B] tile of scores in float32


def memory_traffic(T: int, d: int, block: int) -> MemoryTraffic:
    """Slow-memory accesses (in values) of standard attention and of causal FlashAttention for one head of T tokens
    and head size d (Theorem 2 of Dao et al. 2022, counted for this text's numbers)."""
    if T < 1 or d < 1 or block < 1:
        raise ValueError(f"T, d and block must be >= 1, got {T}, {d}, {block}")
    standard = 4 * T * d + 4 * T * T          # read Q, K; write S; read S, write P; read P, V; write O
    n_blocks = -(-T // block)
    sizes = [min(block, T - b * block) for b in range(n_blocks)]
    flash = T * d + 2 * T                     # initialise O, l, m in slow memory
    for j in range(n_blocks):
        flash += 2 * sizes[j] * d             # load K_j, V_j once per outer iteration
        for i in range(j, n_blocks):          # per tile: read Q_i, O_i, l_i, m_i; write O_i, l_i, m_i
            flash += 3 * sizes[i] * d + 4 * sizes[i]
    sram = 4 * block * d                      # Algorithm 1 sets B = M / 4d
    return MemoryTraffic(standard=standard, flash=flash, standard_theta=float(T * d + T * T),
                         flash_theta=T * T * d * d / sram, sram_values=sram,
                         score_bytes=T * T * BYTES_PER_VALUE, tile_bytes=block * block * BYTES_PER_VALUE)
