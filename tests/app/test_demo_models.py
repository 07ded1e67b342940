"""The built-in demo models (assets/models/, tools/train_demo_models.py): small files the loader reads, offered only
for a family the models folder lacks, and the T5 does what it was trained for: it writes its source's tokens in
reverse order, and its cross-attention draws that as an anti-diagonal (the reversal is the reference)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from app_core import demo_models
from app_core import models_folder as models
from app_core.families import ENCODER, SEQ2SEQ
from harness.apptest import figures, open_page
from model import load_model
from model.files.catalog import describe
from tests.app.encoders_folder import BERT

T5_FILE, BERT_FILE = (demo_models.ASSETS / demo_models.DEMOS[f][0] for f in (SEQ2SEQ, ENCODER))
SOURCES = ["one two three four five", "小机器人每天晚上都看着星星", "The cat sat on the mat."]


@pytest.fixture(scope="module")
def t5():
    return load_model(T5_FILE)


@pytest.mark.parametrize("family", [SEQ2SEQ, ENCODER])
def test_the_demo_files_are_small_and_read_as_their_family(family):
    path = demo_models.ASSETS / demo_models.DEMOS[family][0]
    info = describe(path)
    assert info.ok and info.family == family and path.stat().st_size < 700_000, (info, path.stat().st_size)
    assert demo_models.label(info) == demo_models.DEMOS[family][1] and demo_models.description(info)


def test_a_demo_is_offered_only_for_a_family_the_folder_lacks(tiny_encoders, tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(tmp_path))
    assert [i.name for i in models.offered()] == ["tiny-t5-reverse", "tiny-bert-mlm"]
    assert models.resolve("tiny-t5-reverse").path == T5_FILE
    shutil.copy(tiny_encoders.path / f"{BERT}.gguf", tmp_path / f"{BERT}.gguf")
    assert [i.name for i in models.offered()] == [BERT, "tiny-t5-reverse"]
    assert models.resolve("tiny-bert-mlm") is None
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(tiny_encoders.path))          # a BERT and a T5 of its own
    assert all(demo_models.label(i) is None for i in models.offered())


def pieces_of(t5, text: str) -> list[int]:
    return t5.encode(text)[:-1]                                              # without </s>


@pytest.mark.parametrize("source", SOURCES)
def test_the_demo_t5_writes_its_source_reversed_looking_at_each_token_it_copies(t5, source):
    ids = pieces_of(t5, source)
    g = t5.generate(source, max_new_tokens=len(ids) + 4, temperature=0)
    assert g.new_token_ids == [*ids[::-1], t5.eos_token_id]
    cross = g.cross_attention[: len(ids), -1]                                # the last layer: [steps, H, S]
    looked = cross.argmax(-1)                                                # [steps, H]
    anti_diagonal = np.arange(len(ids) - 1, -1, -1)[:, None]                 # step t writes source token S-2-t
    assert (looked == anti_diagonal).mean(axis=0).max() == 1.0               # a head that draws it exactly
    assert (looked == anti_diagonal).mean() > 0.8


def test_the_demo_t5_reverses_new_sequences_of_its_pieces(t5):
    rng = np.random.default_rng(7)
    pieces = [i for i in range(4, t5.config.vocab_size) if not t5.token_labels([i])[0].startswith("<")]
    exact = 0
    for _ in range(20):
        ids = [int(i) for i in rng.choice(pieces, size=int(rng.integers(3, 13)), replace=False)]
        g = t5.generate(t5.decode(ids), max_new_tokens=len(ids) + 4, temperature=0)
        source = pieces_of(t5, t5.decode(ids))
        exact += g.new_token_ids == [*source[::-1], t5.eos_token_id]
    assert exact >= 16, exact


def test_the_demo_bert_reads_the_example_texts_in_both_directions():
    bert = load_model(BERT_FILE)
    trace = bert.run("The little robot looked at the stars every night.")
    assert trace.tokens[:4] == ["[CLS]", "the", "little", "robot"]           # whole words: its vocabulary's
    pattern = trace.attention[-1]                                            # [H, T, T]
    assert np.allclose(pattern.sum(-1), 1.0, atol=1e-5) and (np.triu(pattern, 1) > 0.01).any()


def test_the_generate_page_titles_the_end_token_it_wrote_as_written(tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(tmp_path))                    # no T5 of its own: the demo is offered
    at = open_page("generate", model="tiny-t5-reverse", text="one two three", greedy="1", n="12")
    title = next(t for t in (f["layout"]["title"]["text"] for f in figures(at)) if t.startswith("To write"))
    assert title.startswith("To write &lt;/s&gt;:"), title                  # the last step: </s>, shown literally
