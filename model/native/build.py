"""Native kernels: the C sources next to this file, compiled together at first use by the system's C compiler
(gcc / cc, or $CC) into one library in a cache folder and loaded with ctypes (no Python headers, no torch headers: a
compile takes about two seconds).

The library is kept under the hash of the sources, the headers beside them and the flags, so later processes load it
at once. Without a compiler, on a CPU the kernels have no code for, or with ATLAS_NATIVE=0, `library` returns None
and callers keep their torch path. Kernels split their work with worker_pool.h (their own threads), not OpenMP
(`-fopenmp-simd` only vectorises the loops marked `omp simd`); one library, so one pool: two pools' idle workers
spun against each other between a step's kernel calls.
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
def library() -> ctypes.CDLL | None:
    """The compiled kernels, built once per sources and flags; None where they cannot be built or loaded (the reason
    is logged once)."""
    if not enabled() or platform.machine().lower() not in {"x86_64", "amd64"}:
        return None
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        _log.warning("No C compiler found (gcc / cc): generation runs without the native kernels.")
        return None
    folder = Path(__file__).parent
    sources = sorted(folder.glob("*.c"))
    text = b"".join(f.read_bytes() for f in sources + sorted(folder.glob("*.h")))
    key = hashlib.sha256(text + " ".join((compiler, *FLAGS, "-lm")).encode()).hexdigest()[:16]
    target = cache_dir() / f"kernels-{key}.so"
    try:
        if not target.exists():
            _compile(compiler, sources, target)
        return ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError) as error:
        _log.warning("Could not build the native kernels (%s): generation runs without them.", str(error)[-500:])
        return None


def _compile(compiler: str, sources: list[Path], target: Path) -> None:
    """Compiles into a temporary file beside target, then renames it (another process may build the same)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        done = subprocess.run([compiler, *FLAGS, *map(str, sources), "-o", tmp, "-lm"], capture_output=True,
                              text=True, timeout=COMPILE_TIMEOUT_S)
        if done.returncode != 0:
            raise OSError(f"{compiler} failed: {done.stderr.strip()}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
