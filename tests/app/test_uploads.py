"""Uploads into the models folder: off unless the owner sets ATLAS_ALLOW_UPLOAD=1; checked as the picker checks a
file before they are kept (crafted and broken files refused with the reader's reason); never replacing a file, even
one that appears while the upload is checked; a disk that fills up leaves nothing behind (no .part, no staging)."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from app_core import models_folder as models
from app_pages.frame import controls
from app_pages.frame.i18n import translations
from harness.apptest import open_page
from harness.crafted_gguf import T, record, string, with_records, write_attack, write_good


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """An uploads-on server whose models folder holds one model (which no upload may touch)."""
    out = tmp_path / "models"
    out.mkdir()
    (out / "kept.gguf").write_bytes(b"GGUF kept: not to be replaced")
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(out))
    monkeypatch.setenv("ATLAS_ALLOW_UPLOAD", "1")
    return out


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file and folder under folder (hidden ones too), files with their bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"/" for p in sorted(folder.rglob("*"))}


def refused(name: str, data: bytes) -> str:
    with pytest.raises(models.UploadRefused) as caught:
        models.save_upload(name, data)
    return str(caught.value)


@pytest.mark.parametrize("setting", [None, "0", "yes", "true"])
def test_uploads_are_off_unless_the_owner_sets_1(tiny_models, folder, monkeypatch, setting):
    if setting is None:
        monkeypatch.delenv("ATLAS_ALLOW_UPLOAD")
    else:
        monkeypatch.setenv("ATLAS_ALLOW_UPLOAD", setting)
    before = snapshot(folder)
    assert not models.upload_allowed()
    assert "does not take uploads" in refused("mine.gguf", (tiny_models / "tiny-llama.gguf").read_bytes())
    assert snapshot(folder) == before


def test_the_upload_box_is_drawn_only_where_uploads_are_on(models_dir, monkeypatch):
    monkeypatch.delenv("ATLAS_ALLOW_UPLOAD", raising=False)
    assert not open_page("attention", text="The cat sat.").get("file_uploader")
    monkeypatch.setenv("ATLAS_ALLOW_UPLOAD", "1")
    assert open_page("attention", text="The cat sat.").get("file_uploader")


def test_a_good_upload_is_kept_under_its_own_name(tiny_models, folder):
    data = (tiny_models / "tiny-qwen3.gguf").read_bytes()
    info = models.save_upload("mine.gguf", data)
    assert info.ok and info.name == "mine" and info.architecture == "qwen3"
    assert (folder / "mine.gguf").read_bytes() == data
    assert sorted(p.name for p in folder.iterdir()) == ["kept.gguf", "mine.gguf"]       # no staging left


def test_an_upload_never_replaces_a_file(tiny_models, folder):
    before = snapshot(folder)
    said = refused("kept.gguf", (tiny_models / "tiny-llama.gguf").read_bytes())
    assert "kept.gguf is already in the models folder, and an upload never replaces a model" in said
    assert snapshot(folder) == before


def test_a_file_that_appears_while_the_upload_is_checked_is_not_replaced(tiny_models, folder, monkeypatch):
    """Another session's upload (or the default model's download) lands under the same name during the check."""
    check = models.describe

    def describe_while_another_lands(path):
        (folder / "mine.gguf").write_bytes(b"GGUF the other one")
        return check(path)

    monkeypatch.setattr(models, "describe", describe_while_another_lands)
    said = refused("mine.gguf", (tiny_models / "tiny-llama.gguf").read_bytes())
    assert "already in the models folder" in said
    assert (folder / "mine.gguf").read_bytes() == b"GGUF the other one"
    assert sorted(p.name for p in folder.iterdir()) == ["kept.gguf", "mine.gguf"]


@pytest.mark.parametrize(("attack", "said"), [
    ("int32_4M", "declares general.junk with 4,000,000 items; this app reads at most 1,048,576"),
    ("nested_100k", "declares general.junk as an array of arrays"),
    ("keys_past_end", "is truncated or damaged"),
    ("vocab_1.5M", "declares tokenizer.ggml.tokens with 1,500,000 items"),
])
def test_a_crafted_upload_is_refused_with_the_readers_reason_and_leaves_nothing(folder, tmp_path, attack, said):
    crafted = write_attack(attack, write_good(tmp_path / "good.gguf"), tmp_path)
    before = snapshot(folder)
    message = refused(f"{attack}.gguf", crafted.read_bytes())
    assert message.startswith(f"{attack}.gguf was not kept: ") and said in message, message
    assert snapshot(folder) == before


@pytest.mark.parametrize(("data", "said"), [
    (b"<!doctype html><html>Sign in</html>", "is not a GGUF file"),
    (b"", "is empty (0 bytes)"),
])
def test_a_file_that_is_not_a_model_is_refused(folder, data, said):
    before = snapshot(folder)
    assert said in refused("page.gguf", data)
    assert snapshot(folder) == before


def test_an_unsupported_model_is_refused(folder, tmp_path):
    good = write_good(tmp_path / "good.gguf")
    mamba = with_records(good, tmp_path / "mamba.gguf", {
        "general.architecture": record("general.architecture", T.STRING, string(b"mamba"))})
    before = snapshot(folder)
    assert "is a 'mamba' model; Attention Atlas runs llama" in refused("mamba.gguf", mamba.read_bytes())
    assert snapshot(folder) == before


@pytest.mark.parametrize("name", ["../escape.gguf", ".hidden.gguf", "x.txt", "a/b.gguf", "中文.gguf"])
def test_an_unusable_name_is_refused(tiny_models, folder, name):
    before = snapshot(folder)
    assert "is not a usable model file name" in refused(name, (tiny_models / "tiny-llama.gguf").read_bytes())
    assert snapshot(folder) == before and not (folder.parent / "escape.gguf").exists()


def test_a_disk_that_fills_up_during_an_upload_leaves_nothing(tiny_models, folder, monkeypatch):
    """The disk fills up after the first 4 KB of the upload are written (os.write fails with ENOSPC, as on a full
    disk, for the files of the models folder only)."""
    real_write = os.write
    written = []

    def write(fd, data):
        if not os.readlink(f"/proc/self/fd/{fd}").startswith(str(folder)):
            return real_write(fd, data)
        if sum(written) >= 4096:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written.append(real_write(fd, bytes(data[:4096])))
        return written[-1]

    monkeypatch.setattr(os, "write", write)
    before = snapshot(folder)
    said = refused("mine.gguf", (tiny_models / "tiny-llama.gguf").read_bytes())
    assert written == [4096]                                   # it was writing when the disk filled up
    assert "mine.gguf was not kept: the models folder cannot take it (No space left on device)" in said
    assert snapshot(folder) == before


def test_an_upload_larger_than_the_free_space_is_refused_before_writing(tiny_models, folder, monkeypatch):
    monkeypatch.setattr(models.shutil, "disk_usage", lambda path: type("Usage", (), {"free": 1000})())
    before = snapshot(folder)
    assert "No space left on device" in refused("mine.gguf", (tiny_models / "tiny-llama.gguf").read_bytes())
    assert snapshot(folder) == before


@pytest.mark.parametrize(("lang", "said"), [("en", "an upload never replaces a model"), ("zh", "上传不会替换")])
def test_the_upload_box_says_why_in_the_readers_language(tiny_models, folder, monkeypatch, lang, said):
    class Upload:
        name, size = "kept.gguf", 1000

        def getvalue(self):
            return (tiny_models / "tiny-llama.gguf").read_bytes()

    state = {controls.UPLOAD: Upload()}
    monkeypatch.setattr(controls.st, "session_state", state)
    monkeypatch.setattr(controls, "_", translations(lang).gettext)
    controls._save_upload()
    assert said in state[controls.UPLOAD_NOTE] and (folder / "kept.gguf").read_bytes().startswith(b"GGUF kept")
