"""A generation step's token choice for every row of a batch in two native calls (token_choice.c): each row's most
probable ids, how many tokens can be drawn, then the draw with one uniform and the drawn token's rank. numpy took
~12 passes over the vocabulary a row for these, ~0.4 ms, holding the GIL. None where the kernels are not built: the
caller then uses numpy (generation.choose_token, record_step)."""
from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence

import numpy as np

from model.native.build import library
from model.native.threads import kernel_threads

MAX_TOP = 64               # as token_choice.c's


@functools.cache
def _kernel():
    lib = library()
    if lib is None:
        return None
    lib.token_choice_blocks.argtypes = [ctypes.c_int64]
    lib.token_choice_blocks.restype = ctypes.c_int64
    lib.survey_rows.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64] + \
        [ctypes.c_void_p] * 3 + [ctypes.c_int]
    lib.survey_rows.restype = ctypes.c_int
    lib.draw_rows.argtypes = [ctypes.c_void_p] + [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 5 + [ctypes.c_int]
    lib.draw_rows.restype = None
    return lib


class TokenChoice:
    """Rows of distributions p, each [V] float64 (entries of 0 never drawn), surveyed at once: top [n, n_top] ids by
    probability then id, positive [n] (entries above 0). draw(u) then picks each row's token. Build only where
    available()."""

    def __init__(self, rows: Sequence[np.ndarray], n_top: int):
        V = len(rows[0])
        if not 1 <= n_top <= min(MAX_TOP, V) or any(
                r.shape != (V,) or r.dtype != np.float64 or not r.flags.c_contiguous for r in rows):
            raise ValueError(f"TokenChoice needs C-order float64 rows of one length >= n_top (1 to {MAX_TOP}), "
                             f"got n_top {n_top} and {[(r.shape, r.dtype) for r in rows[:3]]}")
        self._rows = list(rows)                                                        # kept alive for draw
        self._addresses = np.array([r.ctypes.data for r in rows], np.uint64)         # [n]
        self.V, self.n_top = V, n_top
        n = len(rows)
        self.top = np.empty((n, n_top), np.int64)                                      # [n, n_top]
        self.positive = np.empty(n, np.int64)                                          # [n]
        self._sums = np.empty((n, _kernel().token_choice_blocks(V)), np.float64)      # [n, blocks]
        _kernel().survey_rows(self._addresses.ctypes.data, V, n, n_top, self.top.ctypes.data,
                              self.positive.ctypes.data, self._sums.ctypes.data, kernel_threads())

    def draw(self, u: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        """(token [n], rank [n]): row i's first entry whose cumulative probability exceeds u[i] times the total, or
        with u[i] < 0 its most probable (the first of equals); its rank: entries more probable, and equal ones
        before it."""
        u = np.ascontiguousarray(u, dtype=np.float64)                                  # [n]
        if u.shape != (len(self._rows),):
            raise ValueError(f"draw needs one u a row ({len(self._rows)}), got {u.shape}")
        token = np.empty(len(u), np.int64)                                             # [n]
        rank = np.empty(len(u), np.int64)                                              # [n]
        _kernel().draw_rows(self._addresses.ctypes.data, self.V, len(u), self.n_top, self.top.ctypes.data,
                            self._sums.ctypes.data, u.ctypes.data, token.ctypes.data, rank.ctypes.data,
                            kernel_threads())
        return token, rank


def available() -> bool:
    """Whether the kernels are built."""
    return _kernel() is not None
