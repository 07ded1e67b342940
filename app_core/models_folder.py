"""Which models this server offers and which one a session uses: the models folder, the loaded models' memory
budget, uploads. A link names a model by its file name without .gguf and is resolved by listing the folder and
matching names (never by joining a path), so no link can open a file outside the folder.

Settings (environment): ATLAS_MODELS_DIR (default ~/.cache/attention-atlas/models), ATLAS_MODEL_MEMORY_MB (the loaded
models' budget), ATLAS_ALLOW_UPLOAD (0: no upload box, for hosted servers), ATLAS_MAX_UPLOAD_MB (default 2048),
ATLAS_ALLOW_DOWNLOAD (1: a box in the picker that fetches a GGUF from the Hub; off by default: a public server must
not fetch what strangers name).
"""
from __future__ import annotations

import functools
import gc
import math
import os
import re
import threading
import weakref
from pathlib import Path

from app_core.model_pool import ModelPool
from model.files import hub
from model.files.catalog import ModelInfo, describe, model_files

# The built-in SmolLM2-135M (620 MB loaded: 513 MB float32 and the generation step's 107 MB of int8 copies) plus one
# 0.5B-class model kept quantized (Qwen2.5-0.5B Q8_0: 530 MB).
DEFAULT_MODEL_MEMORY_MB = 1152
DEFAULT_MAX_UPLOAD_MB = 2048
UPLOAD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._ +-]{0,150}\.gguf")


def _env_mb(name: str, default: int) -> int:
    """Bytes of the environment variable's megabytes (a positive number, decimals allowed), else of default."""
    try:
        mb = float(os.environ.get(name, "").strip())
    except ValueError:
        mb = default
    return int((mb if math.isfinite(mb) and mb > 0 else default) * 2**20)


def models_dir() -> Path:
    """ATLAS_MODELS_DIR, else ~/.cache/attention-atlas/models (the folder `python -m model fetch` writes to)."""
    return hub.models_folder()


def memory_budget_bytes() -> int:
    return _env_mb("ATLAS_MODEL_MEMORY_MB", DEFAULT_MODEL_MEMORY_MB)


def upload_allowed() -> bool:
    return os.environ.get("ATLAS_ALLOW_UPLOAD", "1").strip() != "0"


def download_allowed() -> bool:
    return os.environ.get("ATLAS_ALLOW_DOWNLOAD", "0").strip() == "1"


def max_upload_bytes() -> int:
    return _env_mb("ATLAS_MAX_UPLOAD_MB", DEFAULT_MAX_UPLOAD_MB)


def identity(path: Path) -> tuple[str, int, int]:
    """A model file's identity: path, mtime and size (a file replaced under the same name is another model)."""
    stat = path.stat()
    return str(path), stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=256)
def _describe(path: str, mtime_ns: int, size: int) -> ModelInfo:
    return describe(path)


def info_of(path: Path) -> ModelInfo:
    """describe(path), read once per version of the file."""
    try:
        return _describe(*identity(path))
    except OSError:
        return describe(path)                  # gone or unreadable: describe says why


def catalog() -> list[ModelInfo]:
    """Every GGUF in the models folder, readable or not (with the reason)."""
    return [info_of(p) for p in model_files(models_dir())]


def resolve(name: str) -> ModelInfo | None:
    """The folder's model whose file name (without .gguf) is name, or None."""
    return next((info for info in catalog() if info.name == name), None)


@functools.lru_cache(maxsize=1)
def pool() -> ModelPool:
    """The server's loaded models (one pool per process)."""
    return ModelPool(memory_budget_bytes(), on_unload=gc.collect)


_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_KEYS_LOCK = threading.Lock()


def remember(lm, key: tuple) -> None:
    with _KEYS_LOCK:
        _KEYS[lm] = key


def model_key(lm) -> tuple:
    """The identity of a loaded model's file, for cache keys (its source path where it was not loaded here)."""
    with _KEYS_LOCK:
        return _KEYS.get(lm, (lm.source,))


def save_upload(name: str, data: bytes) -> Path:
    """Write an uploaded GGUF into the models folder under its own (checked) name, atomically."""
    folder = models_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    partial = folder / f".{name}.part"
    partial.write_bytes(data)
    os.replace(partial, target)
    return target
