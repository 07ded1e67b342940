"""Fetch a GGUF from the Hugging Face Hub (or a mirror) into the models folder, through the `huggingface_hub` client.

    remote_file(repo_id, filename)      what the Hub says of the file (a HEAD): size, sha256, commit, where to GET it
    download(repo_id, filename, folder) the file in folder under its own name, checked, or DownloadError

Settings (environment, read at every call): HF_ENDPOINT (e.g. https://hf-mirror.com), HF_HUB_OFFLINE, HF_TOKEN.

Folder layout: the bytes arrive in `<folder>/.downloads/<name>.<sha256[:16]>.part` (a dot-named folder: the model
picker lists only *.gguf files directly in the folder), are checked (size, the Hub's sha256 of an LFS file or git
blob sha1 of another, the GGUF magic), then moved into place with os.replace (atomic), after the record of where
they came from (`<folder>/.<name>.fetched.json`: repository, file, revision, commit, size, sha256). A download cut
off by the network keeps its .part and the next call resumes it with a Range request; every other failure removes
it, so the folder is left as it was.

One download of a name at a time, across threads and processes: `.downloads/<name>.lock` (fcntl) is held from the
look at what is in the folder to the rename, so a second session waits and then finds the first one's file (never
resuming from a stale offset or checking a part that is still growing). A file already in the folder is replaced
only by a newer fetch of the repository file it was fetched from (its record says so); any other is kept and the
download refused. fetched_file() is the server's default model: the file when it matches the sha256 recorded when it
was fetched (the Hub not asked), else fetched again.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from model.errors import ModelLoadError
from model.files.fetch import sha256_of

GGUF_MAGIC = b"GGUF"
STAGING = ".downloads"
DEFAULT_ENDPOINT = "https://huggingface.co"
SHA256 = re.compile(r"[0-9a-f]{64}")
GIT_SHA1 = re.compile(r"[0-9a-f]{40}")
LOCAL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._ +-]{0,150}\.gguf")
# Small GGUFs of each family the engine reads, as (repository, file, what it is): the model picker's download box
# and `python -m model fetch` suggest them. Each id was seen on its repository's Hub page ("Files and versions").
SUGGESTED = (
    ("Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf", "decoder"),
    ("Qwen/Qwen2.5-0.5B-Instruct-GGUF", "qwen2.5-0.5b-instruct-q8_0.gguf", "decoder"),
    ("Qwen/Qwen2.5-0.5B-Instruct-GGUF", "qwen2.5-0.5b-instruct-q4_k_m.gguf", "decoder"),
    ("bartowski/Llama-3.2-1B-Instruct-GGUF", "Llama-3.2-1B-Instruct-Q4_K_M.gguf", "decoder"),
    ("HuggingFaceTB/SmolLM2-360M-Instruct-GGUF", "smollm2-360m-instruct-q8_0.gguf", "decoder"),
    ("gaianet/All-MiniLM-L6-v2-Embedding-GGUF", "all-MiniLM-L6-v2-ggml-model-f16.gguf", "encoder"),   # BERT, 46 MB
    ("cyanic-selkie/flan-t5-small-Q8_0-GGUF", "flan-t5-small-q8_0.gguf", "encoder-decoder"),           # T5, 83 MB
)

Progress = Callable[[float, str], None]


class DownloadError(ModelLoadError):
    """A download that did not happen or did not give a usable GGUF; the message says what to do."""


@dataclass(frozen=True)
class RemoteFile:
    """A file on the Hub, as its HEAD describes it."""
    repo_id: str
    filename: str
    revision: str
    commit: str | None
    size: int | None
    sha256: str | None          # an LFS file's content hash (its ETag)
    git_sha1: str | None        # a small file's git blob hash (its ETag)
    url: str                    # where to GET the bytes (the blob's address after the Hub's redirect)

    @property
    def name(self) -> str:
        """The file's name in the models folder."""
        return Path(self.filename).name


def models_folder() -> Path:
    """ATLAS_MODELS_DIR, else ~/.cache/attention-atlas/models: the folder the app's model picker lists."""
    raw = os.environ.get("ATLAS_MODELS_DIR", "").strip()
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "attention-atlas" / "models"


def endpoint() -> str:
    """HF_ENDPOINT (read now, not at import), else huggingface.co."""
    return (os.environ.get("HF_ENDPOINT", "").strip() or DEFAULT_ENDPOINT).rstrip("/")


def offline() -> bool:
    """HF_HUB_OFFLINE set now, or when huggingface_hub was imported."""
    from huggingface_hub import constants

    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"} or \
        constants.is_offline_mode()


def check_name(filename: str) -> str:
    """The models folder name of a Hub file name, or DownloadError when it is not a plain .gguf name."""
    parts = filename.split("/")
    if filename.startswith("/") or any(p in ("", ".", "..") for p in parts) or not LOCAL_NAME.fullmatch(parts[-1]):
        raise DownloadError(f"{filename!r} is not a GGUF file name: give the file's path in the repository, ending "
                            f"in .gguf, with letters, digits, dots, dashes and underscores (e.g. "
                            f"Qwen3-0.6B-Q8_0.gguf).")
    return parts[-1]


def remote_file(repo_id: str, filename: str, revision: str = "main") -> RemoteFile:
    """The Hub's description of repo_id's filename at revision (one HEAD request), or DownloadError."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    check_name(filename)
    where = f"{repo_id}/{filename}"
    if offline():
        raise DownloadError(f"Cannot fetch {where}: HF_HUB_OFFLINE is set, so the Hub is not asked. Unset it, or "
                            f"copy the file into the models folder by hand.")
    try:
        url = hf_hub_url(repo_id, filename, revision=revision, endpoint=endpoint())
        meta = get_hf_file_metadata(url, endpoint=endpoint())
    except Exception as exc:  # noqa: BLE001 - every failure of the client becomes one line
        raise DownloadError(_client_error(exc, repo_id, filename, revision)) from exc
    etag = (meta.etag or "").lower()
    return RemoteFile(repo_id, filename, revision, meta.commit_hash, meta.size,
                      etag if SHA256.fullmatch(etag) else None, etag if GIT_SHA1.fullmatch(etag) else None,
                      meta.location)


def free_bytes(folder: Path) -> int:
    """Free bytes on folder's disk (of its nearest existing parent)."""
    while not folder.exists():
        folder = folder.parent
    return shutil.disk_usage(folder).free


def download(repo_id: str, filename: str, folder: Path, revision: str = "main",
             progress: Progress | None = None) -> Path:
    """repo_id's filename in folder under its own name, checked; resumes an earlier cut-off download. A file
    already there with the Hub's hash is kept; one that was not fetched from this repository file is never
    replaced. DownloadError (one line: what to do) on any failure, the folder left as it was (except a network
    cut's .part, hidden, for the next call to resume)."""
    report = progress or (lambda fraction, message: None)
    report(0.0, f"Asking {endpoint()} about {repo_id}/{filename}…")
    remote = remote_file(repo_id, filename, revision)
    made = [p for p in (folder,) if not p.exists()]
    try:
        with _locked(folder / STAGING, remote.name):
            return _download_locked(remote, folder, report)
    except OSError as exc:                      # the staging folder or its lock could not be made
        raise DownloadError(_cannot_write(folder, exc)) from exc
    finally:
        _remove_if_empty(made)


def _download_locked(remote: RemoteFile, folder: Path, report: Progress) -> Path:
    """download's work, under the name's lock: the .part is removed on every failure but a network cut."""
    target = folder / remote.name
    part = folder / STAGING / f"{remote.name}.{(remote.sha256 or remote.git_sha1 or 'x')[:16]}.part"
    try:
        if target.is_file() and _has_remote_hash(remote, target):
            _write_record(remote, target, sha256_of(target))
            report(1.0, f"{remote.name} is in the models folder")
            return target
        if target.exists() and not _fetched_from(remote, target):
            raise DownloadError(f"{remote.name} is already in the models folder, and it was not fetched from "
                                f"{remote.repo_id}/{remote.filename}: it is kept, not replaced. Remove or rename "
                                f"it to fetch this one.")
        _fetch_part(remote, part, folder, report)
        report(1.0, f"Checking {remote.name}…")
        _write_record(remote, target, _check(remote, part))
        os.replace(part, target)
        return target
    except DownloadError:
        part.unlink(missing_ok=True)
        raise
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            part.unlink(missing_ok=True)
            raise DownloadError(f"The disk filled up while downloading {remote.name} into {folder}. Free some "
                                f"space or set ATLAS_MODELS_DIR to a larger disk.") from exc
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            part.unlink(missing_ok=True)
            raise DownloadError(_cannot_write(folder, exc)) from exc
        raise DownloadError(_cut_off(remote, exc)) from exc
    except Exception as exc:  # noqa: BLE001 - the client's own errors: one line; the .part stays for a resume
        raise DownloadError(_cut_off(remote, exc)) from exc


def _cannot_write(folder: Path, exc: OSError) -> str:
    return (f"Cannot write into the models folder {folder} ({exc.strerror or exc}). Set ATLAS_MODELS_DIR to a folder "
            f"this user can write.")


def fetched_file(repo_id: str, filename: str, folder: Path, revision: str = "main",
                 progress: Progress | None = None) -> Path:
    """repo_id's filename in folder: the file there when it matches the sha256 recorded when it was fetched from
    that repository file (the Hub is not asked), else fetched (download: a file there is kept only with the Hub's
    hash). DownloadError saying why a file there was not used when it cannot be fetched."""
    target = folder / check_name(filename)
    why = fetched_mismatch(target, repo_id, filename) if target.is_file() else None
    if target.is_file() and why is None:
        return target
    if why is not None and progress is not None:
        progress(0.0, f"{why}: asking the Hub…")
    try:
        return download(repo_id, filename, folder, revision, progress)
    except DownloadError as exc:
        raise DownloadError(f"{why}, so it was not used. {exc}" if why else str(exc)) from exc


def record_path(target: Path) -> Path:
    """Where the record of target's fetch is kept (hidden, beside it)."""
    return target.with_name(f".{target.name}.fetched.json")


def fetched_mismatch(target: Path, repo_id: str, filename: str) -> str | None:
    """None when target is the file fetched from repo_id's filename, by the sha256 recorded then; else why not."""
    record = _record(target)
    if record is None:
        return f"{target.name} has no record of being fetched from {repo_id}/{filename}"
    if (record["repo_id"], record["filename"]) != (repo_id, filename):
        return f"{target.name} was fetched from {record['repo_id']}/{record['filename']}, not {repo_id}/{filename}"
    got = sha256_of(target)
    if got != record["sha256"]:
        return (f"{target.name} does not match the sha256 recorded when it was fetched from {repo_id}/{filename} "
                f"(sha256 {got[:12]}…, recorded {record['sha256'][:12]}…): it changed on disk")
    return None


def changed_since_fetched(target: Path) -> str | None:
    """Why target is not the file it was when it was fetched (its sha256 differs from its record's); None when it is,
    or when it was not fetched here (no record)."""
    record = _record(target)
    return None if record is None else fetched_mismatch(target, record["repo_id"], record["filename"])


def _record(target: Path) -> dict | None:
    """target's fetch record, None when there is none or it is not one."""
    try:
        record = json.loads(record_path(target).read_text())
    except (OSError, ValueError):
        return None
    keys = ("repo_id", "filename", "sha256")
    return record if isinstance(record, dict) and all(isinstance(record.get(k), str) for k in keys) else None


@contextlib.contextmanager
def _locked(staging: Path, name: str) -> Iterator[None]:
    """Hold the lock of name's download (staging/<name>.lock, fcntl.flock): one download of a name at a time, across
    threads and processes. The lock file is removed on release (staging too when empty); a waiter that got the lock
    of a removed file takes the new one's."""
    lock = staging / f"{name}.lock"
    while True:
        staging.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:               # the folder went away between the two calls: again
            continue
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)
        os.close(fd)
        with contextlib.suppress(OSError):
            staging.rmdir()


def _has_remote_hash(remote: RemoteFile, path: Path) -> bool:
    """Whether path has the Hub's size and hash (sha256 of an LFS file, git blob sha1 of another)."""
    if remote.size is not None and path.stat().st_size != remote.size:
        return False
    if remote.sha256:
        return sha256_of(path) == remote.sha256
    return remote.git_sha1 is not None and _git_sha1_of(path) == remote.git_sha1


def _fetched_from(remote: RemoteFile, target: Path) -> bool:
    """Whether target's record says it was fetched from remote's repository file."""
    record = _record(target)
    return record is not None and (record["repo_id"], record["filename"]) == (remote.repo_id, remote.filename)


def _write_record(remote: RemoteFile, target: Path, sha256: str) -> None:
    """The record of target's fetch from remote (written before target is moved into place)."""
    record = {"repo_id": remote.repo_id, "filename": remote.filename, "revision": remote.revision,
              "commit": remote.commit, "size": remote.size, "sha256": sha256}
    path = record_path(target)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)


def _fetch_part(remote: RemoteFile, part: Path, folder: Path, report: Progress) -> None:
    """remote's bytes into part, resuming what part holds (read now, under the lock)."""
    have = part.stat().st_size if part.is_file() else 0
    if remote.size is not None and have > remote.size:
        part.unlink()
        have = 0
    if remote.size is not None and free_bytes(folder) < remote.size - have:
        raise DownloadError(f"Not enough disk space for {remote.name}: it needs {_mb(remote.size - have)} and "
                            f"{folder} has {_mb(free_bytes(folder))} free. Free some space or set ATLAS_MODELS_DIR "
                            f"to a larger disk.")
    with open(part, "ab") as out:
        _fetch_bytes(remote, out, have, report)


def _cut_off(remote: RemoteFile, exc: Exception) -> str:
    return (f"The download of {remote.repo_id}/{remote.filename} was cut off ({_short(exc)}). Run it again: it "
            f"resumes where it stopped.")


def _fetch_bytes(remote: RemoteFile, out, have: int, report: Progress) -> None:
    """Append the bytes after the first `have` of remote to out (a Range request), reporting progress."""
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    total = remote.size or 0

    class Bar:                  # the client's progress bar interface (tqdm_class): a context manager with update
        def __init__(self, **kwargs) -> None:
            self.done = have

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            return None

        def update(self, n: int = 1) -> None:
            self.done += n
            share = self.done / total if total else 0.0
            report(min(share, 1.0), f"Downloading {remote.name}: {_mb(self.done)} of {_mb(total)}")

    headers = build_hf_headers()
    headers["Accept-Encoding"] = "identity"
    http_get(remote.url, out, resume_size=have, headers=headers, expected_size=remote.size,
             displayed_filename=remote.name, tqdm_class=Bar)


def _check(remote: RemoteFile, part: Path) -> str:
    """part's sha256; DownloadError unless part has the Hub's size and hash and starts with the GGUF magic."""
    size = part.stat().st_size
    if remote.size is not None and size != remote.size:
        raise DownloadError(f"{remote.name} arrived with {size:,} bytes instead of the Hub's {remote.size:,}. Run "
                            f"the download again.")
    digest = sha256_of(part)
    if remote.sha256 and (got := digest) != remote.sha256:
        raise DownloadError(f"{remote.name} does not match the Hub's checksum (sha256 {got[:12]}…, expected "
                            f"{remote.sha256[:12]}…): the bytes were damaged on the way. Run the download again.")
    if remote.git_sha1 and (got := _git_sha1_of(part)) != remote.git_sha1:
        raise DownloadError(f"{remote.name} does not match the Hub's checksum (git sha1 {got[:12]}…, expected "
                            f"{remote.git_sha1[:12]}…): the bytes were damaged on the way. Run the download again.")
    with open(part, "rb") as f:
        head = f.read(len(GGUF_MAGIC))
    if head != GGUF_MAGIC:
        raise DownloadError(f"{remote.repo_id}/{remote.filename} is not a GGUF file (it starts with {head!r}, not "
                            f"{GGUF_MAGIC!r}). Pick a .gguf file of a GGUF repository (e.g. Qwen/Qwen3-0.6B-GGUF).")
    return digest


def _client_error(exc: Exception, repo_id: str, filename: str, revision: str) -> str:
    """One line for an error of the huggingface_hub client."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HFValidationError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(exc, GatedRepoError):
        return (f"{repo_id} is gated: accept its terms on the Hub and set HF_TOKEN to a token of that account, or "
                f"pick another repository.")
    if isinstance(exc, RepositoryNotFoundError):
        return f"There is no repository {repo_id} on {endpoint()} (or it is private). Check the name, e.g. " \
               f"Qwen/Qwen3-0.6B-GGUF."
    if isinstance(exc, RevisionNotFoundError):
        return f"{repo_id} has no revision {revision!r}. Leave the revision out to take the main branch."
    if isinstance(exc, RemoteEntryNotFoundError):
        return f"{repo_id} has no file {filename!r} (at {revision}). Check the file's name in the repository's " \
               f"file list."
    if isinstance(exc, HFValidationError):
        return f"{repo_id!r} is not a repository name: write it as owner/name, e.g. Qwen/Qwen3-0.6B-GGUF."
    if isinstance(exc, OfflineModeIsEnabled):
        return f"Cannot fetch {repo_id}/{filename}: HF_HUB_OFFLINE is set. Unset it, or copy the file into the " \
               f"models folder by hand."
    return f"Cannot reach {endpoint()} to fetch {repo_id}/{filename} ({_short(exc)}). Check the connection; in " \
           f"mainland China set HF_ENDPOINT=https://hf-mirror.com."


def _short(exc: Exception) -> str:
    """The first line of an exception's message, at most 160 characters."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:160]


def _mb(n: int) -> str:
    return f"{n / 1e9:,.2f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB"


def _git_sha1_of(path: Path) -> str:
    """git's blob id of the file: sha1 of 'blob <size>\\0' and the bytes."""
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _remove_if_empty(folders: list[Path]) -> None:
    """Remove the folders a download made, if it left them empty (deepest first)."""
    for folder in reversed(folders):
        with contextlib.suppress(OSError):
            folder.rmdir()
