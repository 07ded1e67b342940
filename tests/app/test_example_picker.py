"""The example picker offers what the session's model can read: with SmolLM2 (Chinese in bytes) no Chinese example;
with a Qwen-style vocabulary that holds Chinese (tests/qwen_style_vocab.py, a tiny random GGUF) the Chinese examples
first, then the others. Titles in the interface's language."""
from __future__ import annotations

import pytest

from app_core.examples import load_examples
from harness.apptest import open_page
from tests import qwen_style_vocab

CHINESE = [e for e in load_examples() if e["lang"] == "zh"]
OTHERS = [e for e in load_examples() if e["lang"] != "zh"]


@pytest.fixture
def qwen_style_folder(tmp_path_factory, monkeypatch):
    folder = tmp_path_factory.mktemp("qwen-models")
    qwen_style_vocab.write_gguf(folder / "qwen-style.gguf")
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(folder))
    return folder


def test_smollm2_is_offered_no_chinese_example():
    options = open_page("attention").selectbox(key="w_example").options
    assert options == [e["title"] for e in OTHERS]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_chinese_vocabulary_is_offered_the_chinese_examples_first(qwen_style_folder, lang):
    at = open_page("attention", model="qwen-style", lang=lang)
    assert at.session_state["model"] == "qwen-style"
    titles = [e["zh"]["title"] if lang == "zh" else e["title"] for e in CHINESE + OTHERS]
    assert at.selectbox(key="w_example").options == titles
