"""A replica prepares a live class's new view before its followers' runs ask (app_pages/classroom/prepared.py): the
trace of the view's text on the view's model, in the process's shared caches, the same trace a follower's run would
compute; a model this process has not loaded is left alone (nothing is loaded or fetched for a class's view)."""
from __future__ import annotations

import shutil

import numpy as np

from app_core import models_folder as models
from app_core import schemas as S
from app_core.classroom import View, class_store
from app_pages.classroom.prepared import prepare_view
from app_pages.frame import session
from model import load_model

TEXT = "Count: 1, 2, 3 <b> and 注意力 🙂"


def test_a_classs_new_view_is_traced_here_before_its_followers_ask(models_dir, tmp_path, monkeypatch):
    loaded, other = "tiny-llama", "tiny-never-loaded"
    shutil.copy(models_dir / f"{loaded}.gguf", tmp_path / f"{loaded}.gguf")
    shutil.copy(models_dir / "tiny-qwen3.gguf", tmp_path / f"{other}.gguf")     # a file no other test loads
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(tmp_path))
    lm = session.load_shared_model(models.resolve(loaded))
    ws = session.workspace(lm)
    text = f"{TEXT} (prepared)"
    code, _ = class_store().create(View("attention", {S.MODEL.name: loaded, S.TEXT.name: text}))
    assert ws.cached_trace(text) is None
    assert prepare_view(code)
    prepared = ws.cached_trace(text)
    reference = load_model(tmp_path / f"{loaded}.gguf").run(text)          # its own load: not the pool's
    assert prepared is not None and prepared.tokens == reference.tokens
    assert np.allclose(prepared.attention, reference.attention, atol=1e-5)

    code, _ = class_store().create(View("softmax", {S.MODEL.name: other, S.TEXT.name: text}))
    assert not prepare_view(code)
    assert models.pool().peek(models.identity(models.resolve(other).path)) is None
