"""Every block of a RMSNorm / RoPE / SwiGLU decoder for a step's rows in one native call (decoder_step.c): the numpy
step's norms, rotations, SiLU and additions between the kernels cost a quarter of a one-row step."""
from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from model.native.attention import CachedAttention
from model.native.build import library
from model.native.int8_linear import Int8Matrix
from model.native.threads import kernel_threads

MAX_PARTS = 3              # parts of a stacked matrix (q, k, v), as decoder_step.c's MAX_PARTS


class _Matrix(ctypes.Structure):
    _fields_ = [("codes", ctypes.c_void_p * MAX_PARTS), ("scales", ctypes.c_void_p * MAX_PARTS),
                ("offsets", ctypes.c_void_p * MAX_PARTS), ("rows", ctypes.c_int64 * MAX_PARTS),
                ("nibbles", ctypes.c_int64 * MAX_PARTS), ("n_parts", ctypes.c_int64)]

    @classmethod
    def of(cls, parts: Sequence[Int8Matrix]) -> _Matrix:
        m = cls()
        for i, part in enumerate(parts):
            m.codes[i], m.scales[i], m.offsets[i] = part.pointers
            m.rows[i], m.nibbles[i] = part.n, part.nibbles
        m.n_parts = len(parts)
        return m


class _Block(ctypes.Structure):
    _fields_ = [("qkv", _Matrix), ("o", _Matrix), ("up", _Matrix), ("down", _Matrix),
                ("attn_norm", ctypes.c_void_p), ("mlp_norm", ctypes.c_void_p), ("qkv_bias", ctypes.c_void_p),
                ("o_bias", ctypes.c_void_p), ("q_norm", ctypes.c_void_p), ("k_norm", ctypes.c_void_p),
                ("attn_eps", ctypes.c_float), ("mlp_eps", ctypes.c_float), ("qk_eps", ctypes.c_float)]


class _Shape(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in ("D", "H", "KV", "hd", "F", "n_layers")]


class BlockArrays(NamedTuple):
    """One block as decoder_step.c reads it: int8 matrices qkv [(H + 2 KV) hd, D], o [D, H hd], up [2 F, D] (gate
    rows, then up rows), down [D, F], each one Int8Matrix or its parts stacked by rows (a kept-quantized model's q, k,
    v and gate, up: not copied into one); float32 RMSNorm weights and their eps; optional float32 biases (qkv, o)
    and per-head q / k RMSNorm weights [hd] (with qk_eps)."""

    qkv: Int8Matrix | tuple[Int8Matrix, ...]
    o: Int8Matrix
    up: Int8Matrix | tuple[Int8Matrix, ...]
    down: Int8Matrix
    attn_norm: np.ndarray
    attn_eps: float
    mlp_norm: np.ndarray
    mlp_eps: float
    qkv_bias: np.ndarray | None
    o_bias: np.ndarray | None
    q_norm: np.ndarray | None
    k_norm: np.ndarray | None
    qk_eps: float


@functools.cache
def _kernel():
    lib = library()
    if lib is None:
        return None
    lib.decoder_step.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] + [ctypes.c_void_p] * 7 + \
        [ctypes.c_int64] + [ctypes.c_void_p] * 3 + [ctypes.c_int]
    lib.decoder_step.restype = ctypes.c_int
    lib.decoder_step_work_floats.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.decoder_step_work_floats.restype = ctypes.c_int64
    return lib


def available() -> bool:
    """Whether the native kernels are built here."""
    return _kernel() is not None


class DecoderStep:
    """The blocks of one model, checked and laid out once; call it for each step (see decoder_step.c)."""

    def __init__(self, blocks: Sequence[BlockArrays], d_model: int, n_heads: int, kv_heads: int, head_dim: int,
                 d_ff: int):
        shapes = {"qkv": ((n_heads + 2 * kv_heads) * head_dim, d_model), "o": (d_model, n_heads * head_dim),
                  "up": (2 * d_ff, d_model), "down": (d_model, d_ff)}
        vectors = {"attn_norm": d_model, "mlp_norm": d_model, "qkv_bias": shapes["qkv"][0], "o_bias": d_model,
                   "q_norm": head_dim, "k_norm": head_dim}
        self._keep = []
        self._blocks = (_Block * len(blocks))()
        for block, arrays in zip(self._blocks, blocks, strict=True):
            for name, shape in shapes.items():
                m = getattr(arrays, name)
                parts = m if isinstance(m, tuple) else (m,)
                got = (sum(p.n for p in parts), *{p.k for p in parts})
                if got != shape or not 1 <= len(parts) <= MAX_PARTS:
                    raise ValueError(f"decoder_step: {name} must be {shape} in 1 to {MAX_PARTS} parts, got "
                                     f"{[(p.n, p.k) for p in parts]}")
                setattr(block, name, _Matrix.of(parts))
                self._keep.extend(parts)
            for name, size in vectors.items():
                v = getattr(arrays, name)
                if v is None and name in ("attn_norm", "mlp_norm"):
                    raise ValueError(f"decoder_step: {name} is required")
                if v is not None:
                    v = np.ascontiguousarray(v, dtype=np.float32)
                    if v.shape != (size,):
                        raise ValueError(f"decoder_step: {name} must be [{size}], got {v.shape}")
                    self._keep.append(v)
                    setattr(block, name, v.ctypes.data)
            if (arrays.q_norm is None) != (arrays.k_norm is None):
                raise ValueError("decoder_step: q_norm and k_norm come together")
            block.attn_eps, block.mlp_eps, block.qk_eps = arrays.attn_eps, arrays.mlp_eps, arrays.qk_eps
        self._shape = _Shape(d_model, n_heads, kv_heads, head_dim, d_ff, len(blocks))
        self.d_model, self.head_dim = d_model, head_dim

    def __call__(self, x: np.ndarray, cos: np.ndarray, sin: np.ndarray, attend: CachedAttention) -> np.ndarray:
        """Rows x [B, D] through every block (their keys and values into attend's caches, their attention patterns
        into attend's kept rows); cos, sin [B, hd / 2] at each row's position. Returns the last block's x [B, D]."""
        B = len(x)
        x = np.array(x, dtype=np.float32, order="C")                                  # [B, D], updated in place
        cos, sin = (np.ascontiguousarray(t, dtype=np.float32) for t in (cos, sin))  # [B, hd/2] each
        if x.shape != (B, self.d_model) or cos.shape != (B, self.head_dim // 2) or sin.shape != cos.shape or \
                len(attend.positions) != B:
            raise ValueError(f"decoder_step needs x [B, {self.d_model}], cos and sin [B, {self.head_dim // 2}] and "
                             f"attention for B rows, got {x.shape}, {cos.shape}, {sin.shape}, {len(attend.positions)}")
        lib = _kernel()
        work = np.empty(lib.decoder_step_work_floats(ctypes.byref(self._shape), B), np.float32)
        status = lib.decoder_step(ctypes.byref(self._blocks), ctypes.byref(self._shape), x.ctypes.data, B,
                                  cos.ctypes.data, sin.ctypes.data, *attend.pointers, work.ctypes.data,
                                  kernel_threads())
        if status == -2:
            raise MemoryError(f"decoder_step could not allocate a copy of {B} rows")
        if status != 0:
            raise RuntimeError("decoder_step: this CPU has neither AVX2 + FMA nor AVX-512")
        return x
