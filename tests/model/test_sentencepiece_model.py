"""A llama GGUF with a SentencePiece vocabulary (Llama 2, TinyLlama) loads through load_model: its token ids are the
sentencepiece library's own (BOS first, as llama.cpp adds it by default), its logits equal transformers' on those
ids, labels are readable and generation decodes back to text."""
import numpy as np
import pytest
import torch

from harness.tiny_gguf import FIRST_MERGE_ID, Tiny, write_tiny
from harness.trained_vocabs import sentencepiece_meta, train_sentencepiece
from model import load_model

VOCAB = 700
TEXTS = ["The quick brown fox jumps over the lazy dog.", "注意力机制 attention 2024!", "  two  spaces, <b>bold</b> 🙂"]


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    sp = train_sentencepiece(VOCAB)
    path = tmp_path_factory.mktemp("spm") / "tiny-llama-spm.gguf"
    hf = write_tiny(path, Tiny(arch="llama", n_merges=VOCAB - FIRST_MERGE_ID), sentencepiece=sentencepiece_meta(sp))
    return sp, hf, load_model(path=path)


@pytest.mark.parametrize("text", TEXTS)
def test_ids_are_sentencepiece_ids_after_bos(spm_model, text):
    sp, _, lm = spm_model
    assert lm.encode(text) == [sp.bos_id(), *sp.encode(text)]


def test_logits_equal_transformers_on_those_ids(spm_model):
    sp, hf, lm = spm_model
    trace = lm.run(TEXTS[1])
    assert trace.token_ids[0] == sp.bos_id() and len(trace.token_ids) > 5
    with torch.no_grad():
        logits = hf(torch.tensor([trace.token_ids])).logits[0, -1].numpy()
    np.testing.assert_allclose(trace.next_token_logits, logits, atol=1e-4 * max(1.0, np.abs(logits).max()), rtol=0)


def test_labels_readable_and_generation_decodes(spm_model):
    sp, _, lm = spm_model
    trace = lm.run(TEXTS[2])
    emoji = "".join(f"🙂{n}⁄₄" for n in "¹²³⁴")    # not in the vocabulary: four byte tokens, each a part of it
    expected = ("▁" + TEXTS[2]).replace("🙂", emoji).replace("▁", " ").replace(" ", "␣")  # the space prefix first
    assert "".join(trace.tokens[1:]) == expected
    assert "".join(t.raw for t in trace.tokens if "🙂" in t) == "".join(f"<0x{b:02X}>" for b in "🙂".encode())
    out = lm.generate(TEXTS[0], max_new_tokens=5, temperature=0.0)
    ids = out.new_token_ids
    assert len(ids) == 5 or out.stop_reason == "eos"
    if sp.eos_id() not in ids:
        assert out.new_text == sp.decode(ids)
