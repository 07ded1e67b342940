"""The suggested BERT and T5 GGUFs (model/files/hub.SUGGESTED): the fetch CLI names them, and the model picker's
download box fetches each one and opens it, a tiny file of the family served under the suggestion's repository and
file name by the local stand-in for the Hub (tests/fake_hub.py; no network)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from app_core import schemas as S
from app_core.families import ENCODER, SEQ2SEQ
from harness.apptest import figures, open_page, rerun
from model.files import hub
from tests.app.encoders_folder import BERT, T5
from tests.fake_hub import FakeHub

SUGGESTED = {family: (i, repo, name) for i, (repo, name, family) in enumerate(hub.SUGGESTED)}


def test_one_small_bert_and_one_small_t5_are_suggested_by_the_cli():
    assert {ENCODER, SEQ2SEQ} <= set(SUGGESTED)
    out = subprocess.run([sys.executable, "-m", "model", "fetch", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0
    for family in (ENCODER, SEQ2SEQ):
        _, repo, name = SUGGESTED[family]
        assert f"python -m model fetch {repo} {name}    # {family}" in out.stdout


@pytest.fixture
def hub_with_encoders(tiny_encoders, tmp_path, monkeypatch):
    """The fake Hub serving the tiny BERT and T5 as the suggested files; an empty models folder; downloads allowed."""
    with FakeHub() as server:
        for family, model in ((ENCODER, BERT), (SEQ2SEQ, T5)):
            _, repo, name = SUGGESTED[family]
            server.add(repo, name, (tiny_encoders.path / f"{model}.gguf").read_bytes())
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setenv("ATLAS_MODELS_DIR", str(tmp_path / "models"))
        monkeypatch.setenv("ATLAS_ALLOW_DOWNLOAD", "1")
        yield server


@pytest.mark.parametrize("family", [ENCODER, SEQ2SEQ])
def test_the_download_box_fetches_the_suggested_bert_or_t5_and_opens_it(hub_with_encoders, tmp_path, family):
    index, repo, name = SUGGESTED[family]
    at = open_page("attention", text="The cat sat on the mat.")
    box = at.selectbox(key="w_download_suggest")
    assert f"{repo} · {name} ({family})" == box.options[index]
    box.select_index(index)
    rerun(at)
    assert (at.text_input(key="w_download_repo").value, at.text_input(key="w_download_file").value) == (repo, name)
    at.button(key="w_download_go").click()
    rerun(at)
    model = name.removesuffix(".gguf")
    assert at.session_state[S.MODEL.key] == model and at.query_params[S.MODEL.name] == model
    assert (tmp_path / "models" / name).is_file() and not at.error
    assert figures(at) and any(f"({family})" in o for o in at.selectbox(key="w_model").options)
