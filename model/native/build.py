"""Native kernels: C sources next to this file, compiled at first use by the system's C compiler (gcc / cc, or $CC)
into a cache folder and loaded with ctypes (no Python headers, no torch headers: a compile takes about a second).

A built library is kept under the hash of its source, the headers beside it and the flags, so later processes load it
at once. Without a compiler, on a CPU the kernel has no code for, or with ATLAS_NATIVE=0, `library` returns None and
callers keep their torch path. Kernels split their work with worker_pool.h (their own threads), not OpenMP
(`-fopenmp-simd` only vectorises the loops marked `omp simd`).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = ("-O3", "-fPIC", "-shared", "-pthread", "-fopenmp-simd")
COMPILE_TIMEOUT_S = 120
_log = logging.getLogger(__name__)


def enabled() -> bool:
    """False when ATLAS_NATIVE is 0 / false / off / no (then nothing is built and the torch paths run)."""
    return os.environ.get("ATLAS_NATIVE", "1").strip().lower() not in {"0", "false", "off", "no"}


def cache_dir() -> Path:
    """Where built libraries are kept: $ATLAS_CACHE_DIR, else $XDG_CACHE_HOME or ~/.cache, under attention-atlas."""
    if os.environ.get("ATLAS_CACHE_DIR"):
        return Path(os.environ["ATLAS_CACHE_DIR"]) / "native"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "attention-atlas" / "native"


@functools.cache
def library(source_name: str) -> ctypes.CDLL | None:
    """The compiled C source `source_name` (a file in this folder), built once per source and flags; None where it
    cannot be built or loaded (the reason is logged once)."""
    if not enabled() or platform.machine().lower() not in {"x86_64", "amd64"}:
        return None
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        _log.warning("No C compiler found (gcc / cc): generation runs without the native int8 kernel.")
        return None
    source = Path(__file__).with_name(source_name)
    headers = b"".join(h.read_bytes() for h in sorted(source.parent.glob("*.h")))
    key = hashlib.sha256(source.read_bytes() + headers + " ".join((compiler, *FLAGS, "-lm")).encode()).hexdigest()[:16]
    target = cache_dir() / f"{source.stem}-{key}.so"
    try:
        if not target.exists():
            _compile(compiler, source, target)
        return ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError) as error:
        _log.warning("Could not build %s (%s): generation runs without the native int8 kernel.", source.name,
                     str(error)[-500:])
        return None


def _compile(compiler: str, source: Path, target: Path) -> None:
    """Compiles into a temporary file beside target, then renames it (another process may build the same)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        done = subprocess.run([compiler, *FLAGS, str(source), "-o", tmp, "-lm"], capture_output=True, text=True,
                              timeout=COMPILE_TIMEOUT_S)
        if done.returncode != 0:
            raise OSError(f"{compiler} failed: {done.stderr.strip()}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
