"""Attention in one native call a layer (one_query_attention.c): a generation step's (CachedAttention: every row of the
batch writes its key and value into its sequence's cache and its query attends over it, instead of a dozen small
numpy operations per row), and a full pass's (prompt_attention: every query of a text over its keys under a mask,
the rows split across the cores, the masked half of a causal pass never computed)."""
from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence

import numpy as np

from model.native.build import library
from model.native.threads import kernel_threads, team_threads


@functools.cache
def _kernel():
    lib = library()
    if lib is None:
        return None
    fn = lib.cached_attention
    fn.argtypes = [ctypes.c_void_p] * 8 + [ctypes.c_int64] * 7 + [ctypes.c_float] + [ctypes.c_void_p] * 3 + \
        [ctypes.c_int]
    fn.restype = None
    return fn


@functools.cache
def _halves():
    lib = library()
    if lib is None:
        return None
    for fn in (lib.patterns_to_half, lib.float16_from_float32):
        fn.restype = None
    lib.patterns_to_half.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 4
    lib.float16_from_float32.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int]
    return lib


@functools.cache
def _prompt_kernel():
    lib = library()
    if lib is None:
        return None
    fn = lib.prompt_attention
    fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 4 + [ctypes.c_float] + [ctypes.c_void_p] * 4 + \
        [ctypes.c_int] * 2
    fn.restype = ctypes.c_int
    return fn


def prompt_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray, scale: float,
                     pattern: np.ndarray, scores: np.ndarray | None = None, torch_threads: int = 1) -> np.ndarray:
    """A full pass's attention, one layer: q [H, T, hd], k and v [KV, T, hd] (float32), mask [T, T] bool (True where
    query i may attend key j; never a later key) -> the mix of values [T, H, hd]; the softmax into pattern [H, T, T]
    (float32, or float16 rounded as torch rounds; C order; 0 where masked), every scaled dot product into scores
    [H, T, T] (float32 pattern only) when given. Causal rows hold CachedAttention's numbers. torch_threads: torch's
    thread count in the calling thread (from 2 up the rows go to torch's own team: threads.team_threads). Call only
    where available()."""
    H, T, hd = q.shape
    KV = k.shape[0]
    if k.shape != (KV, T, hd) or v.shape != k.shape or H % KV or mask.shape != (T, T) or mask.dtype != np.bool_ or \
            np.triu(mask, 1).any():
        raise ValueError(f"prompt_attention needs q [H, T, hd], k and v [KV, T, hd] with KV dividing H and a [T, T] "
                         f"bool mask allowing no later key, got {q.shape}, {k.shape}, {v.shape}, {mask.shape} "
                         f"{mask.dtype}")
    half = pattern.dtype == np.float16
    for name, buffer, dtypes in (("pattern", pattern, (np.float32, np.float16)), ("scores", scores, (np.float32,))):
        if buffer is not None and (buffer.shape != (H, T, T) or buffer.dtype not in dtypes or
                                   not buffer.flags.c_contiguous or not buffer.flags.writeable):
            raise ValueError(f"{name} must be a writable C-order {' or '.join(map(str, dtypes))} [{H}, {T}, {T}], "
                             f"got {buffer.dtype} {buffer.shape}")
    if half and scores is not None:
        raise ValueError("scores come with a float32 pattern only")
    q, k, v = (np.ascontiguousarray(a, dtype=np.float32) for a in (q, k, v))
    mask = np.ascontiguousarray(mask)
    out = np.empty((T, H, hd), np.float32)                                           # [T, H, hd]
    status = _prompt_kernel()(q.ctypes.data, k.ctypes.data, v.ctypes.data, mask.ctypes.data, T, H, KV, hd, scale,
                              None if half else pattern.ctypes.data, pattern.ctypes.data if half else None,
                              None if scores is None else scores.ctypes.data, out.ctypes.data,
                              *team_threads(torch_threads))
    if status != 0:
        raise MemoryError(f"prompt_attention could not allocate a row of {H} x {T} floats")
    return out


def float16_bits(x: np.ndarray, portable: bool = False) -> np.ndarray:
    """x float32 as float16 (half_rows.c: IEEE round to nearest even; portable: its integer arithmetic even where the
    CPU converts). Call only where available()."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty(x.shape, np.float16)
    _halves().float16_from_float32(x.ctypes.data, x.size, out.ctypes.data, int(portable))
    return out


def available() -> bool:
    """Whether the kernel is built (a C compiler was found)."""
    return _kernel() is not None


class CachedAttention:
    """The caches of a step's rows, checked once for the step's layers: row b is a new token at positions[b] of the
    sequence whose caches are keys[b] and values[b] ([n_layers, KV, capacity, hd] float32, C order; rows of one
    sequence in position order), its attention pattern kept when keep[b]. Call only where available()."""

    def __init__(self, keys: Sequence[np.ndarray], values: Sequence[np.ndarray], positions: Sequence[int],
                 keep: Sequence[bool], n_heads: int):
        checked: dict[int, tuple[int, int, int]] = {}
        for k, v, p in zip(keys, values, positions, strict=True):
            if id(k) not in checked:
                if k.dtype != np.float32 or k.shape != v.shape or v.dtype != np.float32 or k.ndim != 4 or \
                        not (k.flags.c_contiguous and v.flags.c_contiguous) or n_heads % k.shape[1]:
                    raise ValueError(f"CachedAttention needs float32 C-order caches [L, KV, C, hd] for {n_heads} "
                                     f"query heads, got {k.shape} {k.dtype} and {v.shape} {v.dtype}")
                checked[id(k)] = (k.ctypes.data, v.ctypes.data, k.shape[2])
            if not 0 <= p < k.shape[2]:
                raise ValueError(f"position {p} is outside a cache of {k.shape[2]} positions")
        if len({k.shape[:2] + k.shape[3:] for k in keys}) != 1:
            raise ValueError("CachedAttention needs caches of the same layers, KV heads and head size")
        self.n_layers, self.kv_heads, _, self.head_dim = keys[0].shape
        self.n_heads = n_heads
        addresses = [checked[id(k)] for k in keys]
        self.k_addr = np.array([a[0] for a in addresses], np.uint64)                 # [B]
        self.v_addr = np.array([a[1] for a in addresses], np.uint64)                 # [B]
        self.capacity = np.array([a[2] for a in addresses], np.int64)                # [B]
        self.positions = np.array(positions, np.int64)                               # [B]
        self.slot = np.cumsum(keep, dtype=np.int64) - 1                              # [B] index among kept rows
        self.slot[~np.asarray(keep, bool)] = -1
        self.max_len = int(self.positions.max()) + 1
        self.patterns = np.empty((int(np.sum(keep)), self.n_layers, n_heads, self.max_len), np.float32)
        self._scratch = np.empty((len(self.positions), n_heads, self.max_len), np.float32)

    def __call__(self, layer: int, q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float) -> np.ndarray:
        """Layer `layer`: q [B, H, hd], the rows' new keys and values k, v [B, KV, hd] (written into the caches) ->
        the mix of values [B, H, hd], rows split across kernel_threads()."""
        B, hd = len(self.positions), self.head_dim
        if q.shape != (B, self.n_heads, hd) or k.shape != (B, self.kv_heads, hd) or v.shape != k.shape or \
                not 0 <= layer < self.n_layers:
            raise ValueError(f"CachedAttention needs q [{B}, {self.n_heads}, {hd}], k and v [{B}, {self.kv_heads}, "
                             f"{hd}] and a layer below {self.n_layers}, got {q.shape}, {k.shape}, {v.shape}, {layer}")
        q, k, v = (np.ascontiguousarray(a, dtype=np.float32) for a in (q, k, v))
        out = np.empty((B, self.n_heads, hd), np.float32)                            # [B, H, hd]
        k_addr, v_addr, capacity, positions, slot, max_len, patterns, scratch = self.pointers
        _kernel()(q.ctypes.data, k.ctypes.data, v.ctypes.data, k_addr, v_addr, capacity, positions, slot, B,
                  self.n_heads, self.kv_heads, hd, layer, self.n_layers, max_len, scale, patterns, scratch,
                  out.ctypes.data, kernel_threads())
        return out

    @property
    def pointers(self) -> tuple[int, ...]:
        """What cached_attention takes after the rows' vectors: caches, positions, kept slots, max_len, buffers."""
        return (self.k_addr.ctypes.data, self.v_addr.ctypes.data, self.capacity.ctypes.data,
                self.positions.ctypes.data, self.slot.ctypes.data, self.max_len, self.patterns.ctypes.data,
                self._scratch.ctypes.data)

    def write_patterns(self, rows: Sequence[np.ndarray | None]) -> None:
        """Each kept row b's attention (pattern(b)) into rows[b], a C-order float16 [n_layers, H, positions[b] + 1]
        (None: not wanted), all in one native call (a torch copy per row handed the GIL on at each)."""
        if len(rows) != len(self.positions):
            raise ValueError(f"write_patterns needs one entry a row ({len(self.positions)}), got {len(rows)}")
        addresses = np.zeros(len(rows), np.uint64)                                   # [B], 0: not written
        for b, row in enumerate(rows):
            if row is None:
                continue
            want = (self.n_layers, self.n_heads, int(self.positions[b]) + 1)
            if self.slot[b] < 0 or row.dtype != np.float16 or row.shape != want or not row.flags.c_contiguous or \
                    not row.flags.writeable:
                raise ValueError(f"row {b} must be a kept row's writable C-order float16 {want}, got {row.dtype} "
                                 f"{row.shape}")
            addresses[b] = row.ctypes.data
        lengths = self.positions + 1                                                 # [B]
        _halves().patterns_to_half(self.patterns.ctypes.data, self.slot.ctypes.data, lengths.ctypes.data,
                                   addresses.ctypes.data, len(rows), self.n_layers, self.n_heads, self.max_len)

    def pattern(self, b: int) -> np.ndarray:
        """Kept row b's attention, every layer: [n_layers, H, positions[b] + 1] float32."""
        if self.slot[b] < 0:
            raise ValueError(f"row {b}'s attention was not kept")
        return self.patterns[self.slot[b], :, :, :self.positions[b] + 1]
