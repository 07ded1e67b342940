"""A full pass's element-wise work in one native call each, split across the cores (decoder_step.c): silu(gate) *
up (swiglu_rows, the generation step's own: exp within 2 ulp of libm's), instead of torch's two element-wise passes
on the calling thread while the kernels' workers wait (a 256-token trace of Qwen2.5-0.5B's shapes: ~33 ms of them);
and the fused projection's queries and keys rotated by RoPE and laid out head-major with its values
(split_rotate: torch's numbers, in one pass instead of nine operations)."""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from model.native.build import library
from model.native.threads import team_threads


@functools.cache
def _kernel():
    lib = library()
    if lib is None:
        return None
    fn = lib.swiglu_rows
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.c_int]
    fn.restype = None
    return fn


@functools.cache
def _split_rotate():
    lib = library()
    if lib is None:
        return None
    fn = lib.split_rotate
    fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 4 + [ctypes.c_void_p] * 3 + [ctypes.c_int] * 2
    fn.restype = None
    return fn


def available() -> bool:
    """Whether the kernel is built (a C compiler was found)."""
    return _kernel() is not None


def swiglu_rows(gate_up: np.ndarray, torch_threads: int = 1) -> np.ndarray:
    """gate_up [T, 2F] float32 (each row's gate, then its up) -> silu(gate) * up [T, F] float32; torch_threads:
    torch's thread count in the calling thread (threads.team_threads). Call only where available()."""
    if gate_up.ndim != 2 or gate_up.shape[1] % 2 or gate_up.dtype != np.float32:
        raise ValueError(f"swiglu_rows needs float32 [T, 2F], got {gate_up.dtype} {gate_up.shape}")
    gate_up = np.ascontiguousarray(gate_up)
    T, F = gate_up.shape[0], gate_up.shape[1] // 2
    out = np.empty((T, F), np.float32)                                               # [T, F]
    _kernel()(gate_up.ctypes.data, out.ctypes.data, T, F, *team_threads(torch_threads))
    return out


def split_rotate(qkv: np.ndarray, cos: np.ndarray, sin: np.ndarray, n_heads: int, n_kv_heads: int,
                 k_rot: np.ndarray, v: np.ndarray, torch_threads: int = 1) -> np.ndarray:
    """qkv [T, (H + 2 KV) hd] float32 (each row: H query heads, KV key heads, KV value heads) and cos, sin [T, hd/2]
    -> q_rot [H, T, hd]; the rotated keys written into k_rot and the values into v ([KV, T, hd] each, C order). The
    half-split rotation with apply_rope's arithmetic (torch's numbers). Call only where available()."""
    T, width = qkv.shape
    hd = width // (n_heads + 2 * n_kv_heads)
    want = (n_kv_heads, T, hd)
    for name, a in (("k_rot", k_rot), ("v", v)):
        if a.shape != want or a.dtype != np.float32 or not a.flags.c_contiguous or not a.flags.writeable:
            raise ValueError(f"{name} must be a writable C-order float32 {want}, got {a.dtype} {a.shape}")
    if hd * (n_heads + 2 * n_kv_heads) != width or hd % 2 or cos.shape != (T, hd // 2) or sin.shape != cos.shape:
        raise ValueError(f"split_rotate needs qkv [T, (H + 2 KV) hd] and cos, sin [T, hd / 2], got {qkv.shape}, "
                         f"{cos.shape}, {sin.shape} for H={n_heads}, KV={n_kv_heads}")
    qkv, cos, sin = (np.ascontiguousarray(a, dtype=np.float32) for a in (qkv, cos, sin))
    q_rot = np.empty((n_heads, T, hd), np.float32)                                   # [H, T, hd]
    _split_rotate()(qkv.ctypes.data, cos.ctypes.data, sin.ctypes.data, T, n_heads, n_kv_heads, hd,
                    q_rot.ctypes.data, k_rot.ctypes.data, v.ctypes.data, *team_threads(torch_threads))
    return q_rot
