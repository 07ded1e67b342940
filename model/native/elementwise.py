"""silu(gate) * up of a full pass's rows in one native call split across the cores (decoder_step.c's swiglu_rows,
the generation step's own: exp within 2 ulp of libm's), instead of torch's two element-wise passes on the calling
thread while the kernels' workers wait (a 256-token trace of Qwen2.5-0.5B's shapes: ~33 ms of them)."""
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
