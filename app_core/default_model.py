"""The server's default model: what every link without ?model= shows.

ATLAS_DEFAULT_MODEL (environment; on Community Cloud a root-level secret, which Streamlit exposes as one) is either
`REPO_ID:FILENAME` (a GGUF on the Hugging Face Hub or HF_ENDPOINT's mirror, fetched into the models folder in the
background at server start unless it is there already) or the name of a file in the models folder (with or without
.gguf). Unset: the built-in model. One fetch per process and value; sessions read its progress while it comes, and
on failure its reason (the pages then show the built-in model and say why).

A file there is used only if it is what was fetched: its sha256 is checked against the one recorded when it was
fetched (model.files.hub). For REPO_ID:FILENAME a file that differs or has no record is checked against the Hub and
fetched again (not used when the Hub cannot be asked); a file named by its name is refused when it differs from its
record (one put there by hand, without a record, is the owner's and is used).
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, replace

from app_core import models_folder as models
from model.files import hub

ENV = "ATLAS_DEFAULT_MODEL"
FETCHING, READY, FAILED = "fetching", "ready", "failed"


@dataclass(frozen=True)
class Source:
    """Where the default model comes from: a Hub file (repo_id set) or a file of the models folder."""
    repo_id: str | None
    filename: str

    @property
    def file_name(self) -> str:
        """The file's name in the models folder."""
        name = self.filename.rsplit("/", 1)[-1]
        return name if name.endswith(".gguf") else name + ".gguf"

    def __str__(self) -> str:
        return f"{self.repo_id}:{self.filename}" if self.repo_id else self.filename


def parse(raw: str) -> Source:
    """ATLAS_DEFAULT_MODEL's value as a Source; ValueError (what to write) when it is neither form."""
    text = raw.strip()
    repo_id, colon, filename = text.partition(":")
    if colon and repo_id.count("/") == 1 and filename.strip():
        return Source(repo_id.strip(), filename.strip())
    if not colon and text and "/" not in text and "\\" not in text and not text.startswith("."):
        return Source(None, text)
    raise ValueError(f"{ENV}={raw!r} is neither REPO_ID:FILENAME (e.g. Qwen/Qwen3-0.6B-GGUF:Qwen3-0.6B-Q8_0.gguf) "
                     f"nor the name of a file in the models folder.")


@dataclass(frozen=True)
class Status:
    state: str                  # FETCHING, READY or FAILED
    fraction: float = 0.0
    message: str = ""
    name: str | None = None     # READY: the model's name in the models folder (its file name without .gguf)
    error: str | None = None    # FAILED: why, in one line


class DefaultModel:
    """One value of ATLAS_DEFAULT_MODEL: made available once (start), its status read by every session."""

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self._lock = threading.Lock()
        self._status = Status(FETCHING, message=f"Fetching the server's default model {raw.strip()}…")
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Make the model available in a background thread (once; later calls do nothing)."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="atlas-default-model", daemon=True)
            self._thread.start()

    def status(self) -> Status:
        with self._lock:
            return self._status

    def wait(self, timeout_s: float | None = None) -> Status:
        """start(), then the status once it is no longer FETCHING (or when timeout_s has passed)."""
        self.start()
        assert self._thread is not None
        self._thread.join(timeout_s)
        return self.status()

    def _set(self, **changes) -> None:
        with self._lock:
            self._status = replace(self._status, **changes)

    def _run(self) -> None:
        try:
            source = parse(self.raw)
            path = models.models_dir() / source.file_name
            if source.repo_id is not None:
                path = hub.fetched_file(source.repo_id, source.filename, models.models_dir(),
                                        progress=lambda fraction, message: self._set(fraction=fraction,
                                                                                     message=message))
            elif not path.is_file():
                raise ValueError(f"{ENV}={self.raw.strip()}: there is no {source.file_name} in the models folder.")
            elif (why := hub.changed_since_fetched(path)) is not None:
                raise ValueError(f"{why}, so it was not used. Fetch it again (python -m model fetch) or remove it.")
            info = models.info_of(path)
            if not info.ok:
                raise ValueError(f"{path.name} cannot be used: {info.error}")
            self._set(state=READY, fraction=1.0, message="", name=info.name)
        except Exception as exc:  # noqa: BLE001 - any failure: the built-in model, and the reason shown
            self._set(state=FAILED, error=str(exc).strip() or type(exc).__name__)


_CURRENT: dict[str, DefaultModel] = {}
_CURRENT_LOCK = threading.Lock()


def current() -> DefaultModel | None:
    """The process's DefaultModel for ATLAS_DEFAULT_MODEL's value now (None when unset)."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return None
    with _CURRENT_LOCK:
        return _CURRENT.setdefault(raw, DefaultModel(raw))


def poll(default: DefaultModel, show, interval_s: float = 0.25) -> Status:
    """Wait for default's fetch, calling show(status) at every change (a page's progress bar)."""
    default.start()
    shown = None
    while (status := default.status()).state == FETCHING:
        if status != shown:
            show(status)
            shown = status
        time.sleep(interval_s)
    return status
