"""python -m model fetch REPO_ID FILENAME: the real huggingface_hub client against a local server that answers as
the Hub does (tests/fake_hub.py), reached only through HF_ENDPOINT. Success puts a checked GGUF in the models folder
(the picker's catalog lists it); every failure prints one line, exits 2 and leaves the folder as it was; a cut-off
download resumes with a Range request."""
from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.tiny_gguf import Tiny, write_tiny
from model.files import hub
from tests.fake_hub import COMMIT, FakeHub

REPO = "atlas-test/Tiny-Qwen3-GGUF"
NAME = "tiny-qwen3-Q8_0.gguf"
RECORD = f".{NAME}.fetched.json"                  # where it was fetched from and its sha256, beside it


@pytest.fixture(scope="module")
def tiny_bytes(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("tiny") / NAME
    write_tiny(path, Tiny(arch="qwen3", n_layers=1, n_heads=2, n_kv_heads=1, head_dim=32, quant="Q8_0", n_merges=200))
    return path.read_bytes()


@pytest.fixture
def served(tiny_bytes, monkeypatch):
    """The fake Hub with the tiny model, a not-GGUF .gguf and a README; HF_ENDPOINT points at it."""
    with FakeHub() as server:
        server.add(REPO, NAME, tiny_bytes)
        server.add(REPO, "subdir/" + NAME, tiny_bytes)
        server.add(REPO, "page.gguf", b"<!doctype html><html>Sign in to continue</html>\n" * 40)
        server.add(REPO, "README.md", b"# Tiny\n", lfs=False)
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        yield server


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """A models folder that already holds one model (which no failure may touch)."""
    out = tmp_path / "models"
    out.mkdir()
    (out / "kept.gguf").write_bytes(b"GGUF kept")
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(out))
    return out


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under folder (hidden ones too) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()} | \
        {str(p.relative_to(folder)) + "/": b"" for p in folder.rglob("*") if p.is_dir()}


def fetch_cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "model", "fetch", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


def test_fetch_puts_the_checked_file_in_the_models_folder_and_the_picker_lists_it(served, folder, tiny_bytes):
    from app_core import models_folder

    out = fetch_cli(REPO, NAME)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == f"model file: {folder / NAME}"
    assert "100%" in out.stdout and "Downloading" in out.stdout
    assert (folder / NAME).read_bytes() == tiny_bytes
    assert sorted(p.name for p in folder.iterdir()) == [RECORD, "kept.gguf", NAME]   # no staging folder left
    record = json.loads((folder / RECORD).read_text())
    assert record == {"repo_id": REPO, "filename": NAME, "revision": "main", "commit": COMMIT,
                      "size": len(tiny_bytes), "sha256": hashlib.sha256(tiny_bytes).hexdigest()}
    assert ("HEAD", f"/{REPO}/resolve/main/{NAME}") in served.requests             # asked through HF_ENDPOINT
    listed = {info.name: info for info in models_folder.catalog()}
    assert listed["tiny-qwen3-Q8_0"].ok and listed["tiny-qwen3-Q8_0"].architecture == "qwen3"


def test_a_file_in_a_subfolder_lands_under_its_own_name_and_a_revision_is_passed(served, folder, tiny_bytes):
    out = fetch_cli(REPO, "subdir/" + NAME, "--revision", "0123456789abcdef0123456789abcdef01234567")
    assert out.returncode == 0, out.stderr
    assert (folder / NAME).read_bytes() == tiny_bytes
    assert ("HEAD", f"/{REPO}/resolve/0123456789abcdef0123456789abcdef01234567/subdir/{NAME}") in served.requests


FAILURES = {  # case -> (arguments, extra environment, what the error line says)
    "repository not found": ((f"{REPO}-nope", NAME), {}, "There is no repository"),
    "file not found": ((REPO, "missing.gguf"), {}, "has no file 'missing.gguf'"),
    "revision not found": ((REPO, NAME, "--revision", "v9"), {}, "has no revision 'v9'"),
    "offline": ((REPO, NAME), {"HF_HUB_OFFLINE": "1"}, "HF_HUB_OFFLINE is set"),
    "not a gguf": ((REPO, "page.gguf"), {}, "is not a GGUF file (it starts with b'<!do'"),
    "not a gguf name": ((REPO, "README.md"), {}, "'README.md' is not a GGUF file name"),
    "bad repository name": (("no such repo", NAME), {}, "is not a repository name"),
}


@pytest.mark.parametrize("case", list(FAILURES))
def test_each_failure_prints_one_line_exits_2_and_leaves_the_folder_as_it_was(served, folder, case):
    args, env, said = FAILURES[case]
    before = snapshot(folder)
    out = fetch_cli(*args, **env)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and said in lines[0], out.stderr
    assert snapshot(folder) == before


def test_a_damaged_download_fails_the_checksum_and_leaves_nothing(served, folder, tiny_bytes):
    sha = hashlib.sha256(tiny_bytes).hexdigest()
    served.damage[sha] = tiny_bytes[:-1] + bytes([tiny_bytes[-1] ^ 1])         # one bit flipped on the way
    before = snapshot(folder)
    out = fetch_cli(REPO, NAME)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [out.stderr.strip()] and "does not match the Hub's checksum" in out.stderr
    assert f"expected {sha[:12]}" in out.stderr
    assert snapshot(folder) == before


def test_not_enough_disk_is_refused_before_downloading(served, folder):
    served.claimed_size[NAME] = 10**15                                           # a petabyte: more than any disk
    before = snapshot(folder)
    out = fetch_cli(REPO, NAME)
    assert out.returncode == 2 and "Not enough disk space" in out.stderr and "1,000,000.00 GB" in out.stderr
    assert snapshot(folder) == before
    assert not any(path.startswith("/blobs/") for _, path in served.requests)


@pytest.mark.parametrize(("code", "said"), [(errno.ENOSPC, "The disk filled up while downloading"),
                                           (errno.EROFS, "Cannot write into the models folder")])
def test_a_disk_that_fills_up_or_refuses_writes_mid_download_leaves_nothing(served, folder, monkeypatch, code, said):
    import huggingface_hub.file_download as client

    def fail(url, temp_file, **kwargs):
        temp_file.write(b"GGUF" + bytes(1000))
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(client, "http_get", fail)
    before = snapshot(folder)
    with pytest.raises(hub.DownloadError, match=said):
        hub.download(REPO, NAME, folder)
    assert snapshot(folder) == before


def test_a_cut_off_download_keeps_a_hidden_part_and_the_next_call_resumes_it(served, folder, tiny_bytes, monkeypatch):
    import huggingface_hub.file_download as client

    from app_core import models_folder

    real_get = client.http_get
    half = len(tiny_bytes) // 2

    def cut(url, temp_file, **kwargs):
        temp_file.write(tiny_bytes[:half])
        raise ConnectionResetError("Connection reset by peer")

    monkeypatch.setattr(client, "http_get", cut)
    names_before = [info.name for info in models_folder.catalog()]
    with pytest.raises(hub.DownloadError, match="was cut off .*resumes where it stopped"):
        hub.download(REPO, NAME, folder)
    assert [info.name for info in models_folder.catalog()] == names_before       # the picker sees nothing new
    parts = list((folder / hub.STAGING).iterdir())
    assert [p.stat().st_size for p in parts] == [half]

    monkeypatch.setattr(client, "http_get", real_get)
    shown = []
    path = hub.download(REPO, NAME, folder, progress=lambda fraction, message: shown.append(fraction))
    assert path.read_bytes() == tiny_bytes
    assert served.ranges == [f"bytes={half}-"]                                     # only the rest was asked for
    assert shown[0] == 0.0 and shown[-1] == 1.0 and all(a <= b for a, b in zip(shown, shown[1:], strict=False))
    assert sorted(p.name for p in folder.iterdir()) == [RECORD, "kept.gguf", NAME]


def test_a_file_already_there_with_the_hubs_checksum_is_not_downloaded_again(served, folder, tiny_bytes):
    (folder / NAME).write_bytes(tiny_bytes)
    assert hub.download(REPO, NAME, folder) == folder / NAME
    assert not any(path.startswith("/blobs/") for _, path in served.requests)


def test_the_endpoint_is_read_at_every_call(served, folder, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")                      # the discard port: nothing answers
    with pytest.raises(hub.DownloadError, match="Cannot reach http://127.0.0.1:9 .*HF_ENDPOINT=https://hf-mirror"):
        hub.remote_file(REPO, NAME)
    monkeypatch.setenv("HF_ENDPOINT", served.url + "/")
    remote = hub.remote_file(REPO, NAME)
    assert remote.size == len(served.repos[REPO][NAME])
    assert remote.sha256 == hashlib.sha256(served.repos[REPO][NAME]).hexdigest()
    assert remote.url.startswith(served.cdn_url + "/blobs/")                      # the redirect to the blob's host


@pytest.mark.parametrize(("repo_id", "filename", "said"), [
    ("<b>", NAME, "is not a repository name"), ("Count: 1, 2, 3", NAME, "is not a repository name"),
    ("../..", NAME, "is not a repository name"), (REPO, "<br>.gguf", "is not a GGUF file name"),
    (REPO, "中文.gguf", "is not a GGUF file name"), (REPO, "😀.gguf", "is not a GGUF file name"),
    (REPO, "../../etc/x.gguf", "is not a GGUF file name"), (REPO, "/x.gguf", "is not a GGUF file name"),
])
def test_hostile_names_are_refused_before_the_hub_is_asked(served, folder, repo_id, filename, said):
    before = snapshot(folder)
    with pytest.raises(hub.DownloadError, match=said):
        hub.download(repo_id, filename, folder)
    assert not [r for r in served.requests if "resolve" in r[1] or r[1].startswith("/blobs/")]
    assert snapshot(folder) == before


def blob_gets(served) -> int:
    return sum(1 for method, path in served.requests if method == "GET" and path.startswith("/blobs/"))


def test_a_file_that_was_not_fetched_from_there_is_never_replaced(served, folder):
    (folder / NAME).write_bytes(b"GGUF the owner's own file")                   # no record: not fetched from REPO
    before = snapshot(folder)
    with pytest.raises(hub.DownloadError, match="already in the models folder, and it was not fetched from "
                                                f"{REPO}/{NAME}: it is kept, not replaced"):
        hub.download(REPO, NAME, folder)
    assert snapshot(folder) == before and blob_gets(served) == 0


def test_a_matching_fetched_file_is_used_without_asking_the_hub(served, folder, tiny_bytes, monkeypatch):
    hub.download(REPO, NAME, folder)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")                      # nothing answers there
    assert hub.fetched_file(REPO, NAME, folder) == folder / NAME
    assert (folder / NAME).read_bytes() == tiny_bytes


def test_a_fetched_file_that_changed_on_disk_is_fetched_again(served, folder, tiny_bytes):
    hub.download(REPO, NAME, folder)
    (folder / NAME).write_bytes(tiny_bytes[:-1] + bytes([tiny_bytes[-1] ^ 1]))  # one bit flipped on disk
    shown = []
    assert hub.fetched_file(REPO, NAME, folder, progress=lambda f, message: shown.append(message)) == folder / NAME
    assert (folder / NAME).read_bytes() == tiny_bytes and blob_gets(served) == 2
    assert any(f"{NAME} does not match the sha256 recorded when it was fetched from {REPO}/{NAME}" in m
               for m in shown), shown


def test_a_changed_file_is_not_used_when_the_hub_cannot_be_asked(served, folder, tiny_bytes, monkeypatch):
    hub.download(REPO, NAME, folder)
    damaged = tiny_bytes[:-1] + bytes([tiny_bytes[-1] ^ 1])
    (folder / NAME).write_bytes(damaged)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hub.DownloadError, match=f"{NAME} does not match the sha256 recorded when it was fetched .*"
                                                f"so it was not used. Cannot fetch .*HF_HUB_OFFLINE is set"):
        hub.fetched_file(REPO, NAME, folder)
    assert (folder / NAME).read_bytes() == damaged                               # left for the owner to see


@pytest.mark.parametrize("cut_before", [False, True])
def test_two_sessions_fetching_one_file_at_once_end_with_one_right_file(served, folder, tiny_bytes, monkeypatch,
                                                                         cut_before):
    """Two threads download at once (the blob host answers after 0.5 s, so they overlap; hashing takes 0.3 s, as a
    large file's would, so the other session is ready while the first checks), from nothing or resuming a cut-off
    part: one fetches, the other waits for the lock and finds the right file; one range asked."""
    import threading
    import time

    real_sha256 = hub.sha256_of

    def slow_sha256(path):
        time.sleep(0.3)
        return real_sha256(path)

    monkeypatch.setattr(hub, "sha256_of", slow_sha256)
    half = len(tiny_bytes) // 2
    if cut_before:
        staging = folder / hub.STAGING
        staging.mkdir()
        (staging / f"{NAME}.{hashlib.sha256(tiny_bytes).hexdigest()[:16]}.part").write_bytes(tiny_bytes[:half])
    served.delay_s = 0.5
    start = threading.Barrier(2)
    results, errors = [], []

    def session():
        start.wait()
        try:
            results.append(hub.download(REPO, NAME, folder))
        except hub.DownloadError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=session) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and results == [folder / NAME] * 2
    assert (folder / NAME).read_bytes() == tiny_bytes
    assert served.ranges == ([f"bytes={half}-"] if cut_before else [None])      # one GET, from the right offset
    assert sorted(p.name for p in folder.iterdir()) == [RECORD, "kept.gguf", NAME]


def test_two_processes_fetching_one_file_at_once_end_with_one_right_file(served, folder, tiny_bytes):
    served.delay_s = 1.0
    runs = [subprocess.Popen([sys.executable, "-m", "model", "fetch", REPO, NAME], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outs
    assert (folder / NAME).read_bytes() == tiny_bytes and blob_gets(served) == 1
    assert sorted(p.name for p in folder.iterdir()) == [RECORD, "kept.gguf", NAME]
