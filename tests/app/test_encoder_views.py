"""The encoder families' own views, their numbers against transformers holding the same weights (the tiny BERT and
T5 of tests/app/encoders_folder.py) with ids from the reference tokenizers (tokenizers' WordPiece, sentencepiece):
the Attention page's cross-attention tab (target x source, the decoder's causal self-attention, the encoder's), the
Generate page writing a T5's target step by step (its greedy tokens and each one's cross-attention row), and the
Causal mask page's comparison (a decoder's pattern masked beside a BERT's, which is not)."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from app_core import schemas as S
from harness.apptest import array, figures, go_to, open_page, rerun
from harness.tiny_encoders import unigram_vocab
from tests.app.encoders_folder import BERT, DECODER, T5

SOURCE = "The quick brown fox jumps over the lazy dog."
TARGET = "The model reads the text"
TOL = 1e-4


def heat(figure) -> np.ndarray:
    return array(figure["data"][0]["z"]).astype(np.float64)


def titled(at, words: str) -> dict:
    found = [f for f in figures(at) if words in ((f["layout"].get("title") or {}).get("text") or "")]
    assert found, [(f["layout"].get("title") or {}).get("text") for f in figures(at)]
    return found[0]


def t5_reference(tiny, source_ids: list[int], decoder_ids: list[int]):
    with torch.no_grad():
        return tiny.t5(input_ids=torch.tensor([source_ids]), decoder_input_ids=torch.tensor([decoder_ids]),
                       output_attentions=True)


def greedy(tiny, source_ids: list[int], n: int, eos: int) -> list[int]:
    """transformers' greedy target, a full pass a token (its generate's cache wants stacks of equal depth)."""
    ids = [tiny.t5.config.decoder_start_token_id]
    for _ in range(n):
        with torch.no_grad():
            logits = tiny.t5(input_ids=torch.tensor([source_ids]), decoder_input_ids=torch.tensor([ids])).logits
        ids.append(int(logits[0, -1].argmax()))
        if ids[-1] == eos:
            break
    return ids[1:]


@pytest.fixture
def sp(encoders_dir):
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_proto=encoders_dir.t5_proto)


def test_the_cross_attention_tab_shows_a_t5s_three_attentions_as_transformers_computes_them(encoders_dir, sp):
    tiny = encoders_dir
    layer, head = 1, 2
    at = open_page("attention", model=T5, view="cross", text=SOURCE, target=TARGET, layer=str(layer),
                   head=str(head))
    source_ids = sp.encode(SOURCE) + [sp.eos_id()]
    decoder_ids = [tiny.t5.config.decoder_start_token_id] + sp.encode(TARGET)
    ref = t5_reference(tiny, source_ids, decoder_ids)
    cross = titled(at, "Cross-attention")
    expected = ref.cross_attentions[layer][0, head].numpy()                        # [T, S]
    assert heat(cross).shape == (len(decoder_ids), len(source_ids))
    assert np.abs(heat(cross) - expected).max() < TOL
    pieces = unigram_vocab(tiny.t5_proto, tiny.t5.config.vocab_size)["tokens"]        # the file's vocabulary
    written = [pieces[i] for i in [*decoder_ids[1:], int(ref.logits[0, -1].argmax())]]   # what each row writes
    assert [label.split(" ", 1)[1] for label in cross["data"][0]["y"]] == [p.replace("▁", "␣") for p in written]
    assert at.query_params["target"] == TARGET and at.query_params["view"] == "cross"

    at.session_state["cross_stack"] = "decoder"
    rerun(at)
    own = heat(titled(at, "Decoder self-attention"))
    causal = np.tril(np.ones(own.shape, dtype=bool))
    assert np.isnan(own[~causal]).all()                                            # later target tokens: masked
    assert np.abs(own[causal] - ref.decoder_attentions[layer][0, head].numpy()[causal]).max() < TOL
    at.session_state["cross_stack"] = "encoder"
    rerun(at)
    enc = heat(titled(at, "Encoder self-attention"))
    assert np.isfinite(enc).all() and np.abs(enc - ref.encoder_attentions[layer][0, head].numpy()).max() < TOL
    assert at.query_params["stack"] == "encoder"


def test_with_no_target_typed_the_rows_are_what_the_t5_writes_greedily(encoders_dir, sp):
    tiny = encoders_dir
    at = open_page("attention", model=T5, view="cross", text=SOURCE, layer="0", head="0")
    source_ids = sp.encode(SOURCE) + [sp.eos_id()]
    written = [i for i in greedy(tiny, source_ids, 48, sp.eos_id()) if i != sp.eos_id()]
    cross = titled(at, "Cross-attention")
    ref = t5_reference(tiny, source_ids, [tiny.t5.config.decoder_start_token_id] + written)
    assert np.abs(heat(cross) - ref.cross_attentions[0][0, 0].numpy()).max() < TOL
    assert "target" not in at.query_params


def test_generate_writes_a_t5s_target_and_shows_where_each_token_looked(encoders_dir, sp):
    tiny = encoders_dir
    n, layer, head = 6, 1, 3
    at = open_page("generate", model=T5, text=SOURCE, greedy="1", n=str(n), layer=str(layer), head=str(head))
    source_ids = sp.encode(SOURCE) + [sp.eos_id()]
    new = greedy(tiny, source_ids, n, sp.eos_id())
    steps = len(new)
    ref = t5_reference(tiny, source_ids, [tiny.t5.config.decoder_start_token_id, *new[:-1]])
    row = array(titled(at, "To write")["data"][0]["y"])                            # the last step's row
    assert np.abs(row - ref.cross_attentions[layer][0, head, steps - 1].numpy()).max() < TOL
    alignment = heat(titled(at, "The alignment so far"))
    assert alignment.shape == (steps, len(source_ids))
    assert np.abs(alignment - ref.cross_attentions[layer][0, head, :steps].numpy()).max() < TOL
    target = next(m.value for m in at.markdown if m.value.startswith("**Target**")).replace("\\", "")
    before, piece = re.fullmatch(r"\*\*Target\*\*: (.*):red-background\[(.*)\]", target, re.S).groups()
    assert before + piece == sp.decode(new[:steps])                               # the last token highlighted
    at.session_state["gen_step"] = 0
    rerun(at)
    first = array(titled(at, "To write")["data"][0]["y"])
    assert np.abs(first - ref.cross_attentions[layer][0, head, 0].numpy()).max() < TOL


def bert_ids(vocab: list[str], text: str) -> list[int]:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return [vocab.index("[CLS]"), *tok.encode(text).ids, vocab.index("[SEP]")]


def test_the_causal_mask_beside_no_mask_a_decoder_and_a_bert_on_the_same_text(encoders_dir):
    tiny = encoders_dir
    at = open_page("causal-mask", model=DECODER, view="compare", text=SOURCE, n="8", olayer="1", ohead="3")
    left, right = figures(at)
    masked, bidirectional = heat(left), heat(right)
    assert masked.shape == (8, 8) and bidirectional.shape == (8, 8)
    causal = np.tril(np.ones((8, 8), dtype=bool))
    assert np.isfinite(masked[causal]).all() and np.isnan(masked[~causal]).all()     # the future: masked
    assert np.allclose(np.nan_to_num(masked).sum(-1), 1.0, atol=1e-4)            # a causal row: all it sees shown
    ids = bert_ids(tiny.bert_vocab, SOURCE)
    with torch.no_grad():
        expected = tiny.bert(input_ids=torch.tensor([ids]), output_attentions=True).attentions[1][0, 3].numpy()
    assert np.abs(bidirectional - expected[:8, :8]).max() < TOL                   # no cell masked
    said = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "trained to predict the next token" in said and "trained to fill in masked tokens" in said
    assert f"{BERT} · layer 1, head 3" in right["layout"]["title"]["text"]
    assert (at.query_params["olayer"], at.query_params["ohead"]) == ("1", "3")
    go_to(at, "attention")
    rerun(at)
    assert S.MODEL.name in at.query_params and "olayer" not in at.query_params
