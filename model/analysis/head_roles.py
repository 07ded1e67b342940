"""Head roles: how much each head of the whole model behaves as a previous-token, induction, duplicate-token or
attention-sink head (TransformerLens' head detectors), scored on one forward pass.

Scores read the causal attention A[l, h, i, j] of one run on token ids (used as given, no BOS added), or on the
standard probe: the model's BOS (when its tokenizer adds one) then PROBE_TOKENS random ordinary tokens (no control
or user-defined ones, no repeats, seed PROBE_SEED) written twice, so that every token of the second half has
occurred once before, PROBE_TOKENS positions back.

- previous_token: mean over i >= 1 of A[i, i-1];
- sink: mean over i >= 1 of A[i, 0];
- duplicate_token: mean, over the positions i whose token occurred earlier, of sum_{j < i, t_j = t_i} A[i, j];
- induction: mean over the same positions of sum_{j < i-1, t_j = t_i} A[i, j+1] (the token after the earlier one).

A role whose set of positions is empty (one token; no token repeats) is NaN: undefined, not zero.
"""
from __future__ import annotations

import numpy as np

ROLES = ("previous_token", "induction", "duplicate_token", "sink")
PROBE_TOKENS = 32      # random tokens in each half of the probe
PROBE_SEED = 0


def probe_tokens(vocab_size: int, special_ids, prefix_ids=()) -> list[int]:
    """The standard probe: prefix_ids, then PROBE_TOKENS distinct random ids (none of special_ids) twice."""
    special = np.fromiter(special_ids, dtype=np.int64) if special_ids else np.empty(0, np.int64)
    ordinary = np.setdiff1d(np.arange(vocab_size), special)                      # [V'] ids a text can hold
    if ordinary.size < PROBE_TOKENS:
        raise ValueError(f"The vocabulary has {ordinary.size} ordinary tokens; the probe needs {PROBE_TOKENS}")
    half = np.random.default_rng(PROBE_SEED).choice(ordinary, PROBE_TOKENS, replace=False)   # [N]
    return [int(i) for i in prefix_ids] + [int(i) for i in half] * 2


def role_scores(attention: np.ndarray, tokens: list[int]) -> dict[str, np.ndarray]:
    """The four role scores [L, H] (float64) of attention [L, H, T, T] (post-softmax, causal) on tokens [T]."""
    attention = np.asarray(attention, dtype=np.float64)                         # [L, H, T, T]
    T = attention.shape[-1]
    if len(tokens) != T:
        raise ValueError(f"{len(tokens)} tokens for attention over {T} positions")
    ids = np.asarray(tokens)
    rows = np.arange(1, T)                                                       # [T-1] queries i >= 1
    earlier_same = (ids[None, :] == ids[:, None]) & np.tri(T, k=-1, dtype=bool)  # [T, T] j < i, t_j = t_i
    repeated = earlier_same.any(axis=1)                                          # [T] token occurred earlier
    # induction keys: k = j + 1 for every j < i - 1 with t_j = t_i
    induction_keys = np.zeros((T, T), dtype=bool)                                # [T, T]
    induction_keys[:, 1:] = earlier_same[:, :-1] & np.tri(T, T - 1, k=-2, dtype=bool)
    nan = np.full(attention.shape[:2], np.nan)                                   # [L, H]

    def mean_over(selected: np.ndarray, keys: np.ndarray) -> np.ndarray:        # rows [T] bool, keys [T, T] bool
        if not selected.any():
            return nan.copy()
        return (attention * keys).sum(-1)[..., selected].mean(-1)               # [L, H]

    return {
        "previous_token": attention[..., rows, rows - 1].mean(-1) if T > 1 else nan.copy(),
        "induction": mean_over(repeated, induction_keys),
        "duplicate_token": mean_over(repeated, earlier_same),
        "sink": attention[..., 1:, 0].mean(-1) if T > 1 else nan.copy(),
    }
