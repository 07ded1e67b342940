"""Which models this server offers and which one a session uses: the models folder, the loaded models' memory
budget, uploads. A link names a model by its file name without .gguf and is resolved by listing the folder and
matching names (never by joining a path), so no link can open a file outside the folder.

Settings (environment): ATLAS_MODELS_DIR (default ~/.cache/attention-atlas/models), ATLAS_MODEL_MEMORY_MB (the loaded
models' budget), ATLAS_ALLOW_UPLOAD (1: an upload box in the picker; off by default: a visitor must not write into a
public server's models folder), ATLAS_MAX_UPLOAD_MB (default 2048), ATLAS_ALLOW_DOWNLOAD (1: a box in the picker that
fetches a GGUF from the Hub; off by default: a public server must not fetch what strangers name).

An upload is written into a hidden staging folder (.uploads/), checked as the picker checks a file (GGUF magic,
metadata within the reader's limits, a supported architecture, every tensor there: describe()), then linked into the
folder under its own name only if no file has that name (an upload never replaces a model); any failure, a full disk
included, removes what it wrote.
"""
from __future__ import annotations

import contextlib
import errno
import functools
import gc
import math
import os
import re
import secrets
import shutil
import threading
import weakref
from pathlib import Path

from app_core import demo_models
from app_core.link import Note, note
from app_core.model_pool import ModelPool
from model.files import hub
from model.files.catalog import ModelInfo, describe, model_files

# The built-in SmolLM2-135M (620 MB loaded: 513 MB float32 and the generation step's 107 MB of int8 copies) plus one
# 0.5B-class model kept quantized (Qwen2.5-0.5B Q8_0: 530 MB).
DEFAULT_MODEL_MEMORY_MB = 1152
DEFAULT_MAX_UPLOAD_MB = 2048
UPLOAD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._ +-]{0,150}\.gguf")
UPLOADS = ".uploads"            # the models folder's hidden staging folder for uploads being checked
WRITE_CHUNK = 1 << 24


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
    """Uploads only where the server's owner turned them on (ATLAS_ALLOW_UPLOAD=1)."""
    return os.environ.get("ATLAS_ALLOW_UPLOAD", "0").strip() == "1"


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


def offered() -> list[ModelInfo]:
    """What the model picker lists: every GGUF of the models folder (readable or not), then the built-in demo
    models of the families the folder has none of (app_core/demo_models.py)."""
    listed = catalog()
    return listed + demo_models.offered(listed, info_of)


def resolve(name: str) -> ModelInfo | None:
    """The offered model whose file name (without .gguf) is name, or None."""
    return next((info for info in offered() if info.name == name), None)


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


class UploadRefused(ValueError):
    """An upload that was not kept (nothing of it left in the models folder): a Note saying why."""

    @property
    def note(self) -> Note:
        return self.args[0]


def save_upload(name: str, data: bytes) -> ModelInfo:
    """Keep an uploaded GGUF in the models folder under its own name, once checked; UploadRefused, with nothing
    left behind, when the name is not usable or taken, the file fails the picker's checks or the disk cannot hold
    it. Never replaces a file."""
    if not upload_allowed():
        raise UploadRefused(note("This server does not take uploads (its owner has not set ATLAS_ALLOW_UPLOAD=1)."))
    if not UPLOAD_NAME.fullmatch(name):
        raise UploadRefused(note("{file} is not a usable model file name: use letters, digits, dots, dashes and "
                                 "underscores, ending in .gguf.", file=name))
    folder = models_dir()
    target = folder / name
    if os.path.lexists(target):
        raise UploadRefused(_taken(name))
    staging = folder / UPLOADS / secrets.token_hex(8)
    try:
        staging.mkdir(parents=True)
        if shutil.disk_usage(staging).free < len(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        part = staging / name
        _write_new(part, data)
        info = describe(part)
        if not info.ok:
            raise UploadRefused(note("{file} was not kept: {reason}", file=name, reason=info.error))
        _link_new(part, target)
    except FileExistsError:
        raise UploadRefused(_taken(name)) from None
    except OSError as exc:
        raise UploadRefused(note("{file} was not kept: the models folder cannot take it ({reason}). Free some "
                                 "space, or ask the server's owner.", file=name,
                                 reason=exc.strerror or str(exc))) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        with contextlib.suppress(OSError):
            staging.parent.rmdir()                  # when no other upload is being checked
    return info_of(target)


def _taken(name: str) -> Note:
    return note("{file} is already in the models folder, and an upload never replaces a model. Rename your file "
                "and upload it again.", file=name)


def _write_new(path: Path, data: bytes) -> None:
    """data into a new file at path, flushed to the disk (a full disk fails here, not later)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view, done = memoryview(data), 0
        while done < len(view):
            done += os.write(fd, view[done:done + WRITE_CHUNK])
        os.fsync(fd)
    finally:
        os.close(fd)


def _link_new(part: Path, target: Path) -> None:
    """part at target, atomically, only if nothing is at target (FileExistsError otherwise): a hard link, or where
    the disk has none, target made exclusively and then replaced."""
    try:
        os.link(part, target)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.replace(part, target)
