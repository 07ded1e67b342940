"""T5 GGUFs (harness/tiny_encoders.py: written as llama.cpp's converter writes them) against the independent
references: transformers' T5ForConditionalGeneration holding the same numbers (eager) for the logits and every
attention (encoder, decoder, cross), its greedy generate for the generated ids and their cross-attention rows, and the
sentencepiece library's own encoding of the unigram model the vocabulary came from. The loader refuses what it would
compute wrongly."""
import hashlib
import random

import gguf
import numpy as np
import pytest
import torch

from harness.tiny_encoders import TinyT5, read, rewritten, unigram_model, write_t5
from harness.trained_vocabs import CORPUS
from model import ModelLoadError, load_model
from model.encoders.config import RELATIVE_MAX_DISTANCE
from model.encoders.t5_layers import relative_buckets

SOURCES = ["The quick brown fox jumps over the lazy dog.",
           "Attention is all you need: every token looks at every earlier token, twice，then once.",
           "北京欢迎你！ 注意力 😀  two   spaces\tand a tab"]
TARGET = "The model reads the text"
CASES = {"flan": TinyT5(), "flan_q8": TinyT5(quant="Q8_0"),
         "t5_tied_head": TinyT5(gated=False, tied=True, n_decoder_layers=2),
         "t5_no_head": TinyT5(gated=False, tied=True, head_in_file=False, n_decoder_layers=2)}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("t5")
    out = {}
    for key, tiny in CASES.items():
        hf, proto = write_t5(folder / f"{key}.gguf", tiny, seed=3)
        out[key] = (folder / f"{key}.gguf", hf, proto)
    return out


@pytest.fixture(scope="module")
def lm(built):
    return load_model(built["flan"][0])


def test_the_file_holds_llama_cpps_t5_names_and_keys(built):
    reader = read(built["flan"][0])
    names = {t.name for t in reader.tensors}
    mlp = ("ffn_norm", "ffn_gate", "ffn_up", "ffn_down")
    attn = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_o")
    expected = {"token_embd.weight", "output.weight", "enc.output_norm.weight", "dec.output_norm.weight",
                "enc.blk.0.attn_rel_b.weight", "dec.blk.0.attn_rel_b.weight"}
    expected |= {f"enc.blk.{i}.{p}.weight" for i in range(2) for p in attn + mlp}
    expected |= {f"dec.blk.{i}.{p}.weight" for i in range(3) for p in attn + mlp +
                 ("cross_attn_norm", "cross_attn_q", "cross_attn_k", "cross_attn_v", "cross_attn_o")}
    assert names == expected
    for key in ("t5.block_count", "t5.decoder_block_count", "t5.attention.key_length", "t5.attention.value_length",
                "t5.attention.layer_norm_rms_epsilon", "t5.attention.relative_buckets_count",
                "t5.decoder_start_token_id", "tokenizer.ggml.precompiled_charsmap", "tokenizer.ggml.add_eos_token"):
        assert key in reader.fields, key
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    assert tokens[-1].startswith("[PAD") and "<extra_id_0>" in tokens      # rows beyond the pieces
    no_gate = {t.name for t in read(built["t5_tied_head"][0]).tensors}
    assert not any("ffn_gate" in n for n in no_gate)


def test_the_trained_vocabulary_is_the_same_every_run():
    assert hashlib.sha256(unigram_model()).hexdigest() == hashlib.sha256(unigram_model()).hexdigest()


def test_config(lm, built):
    cfg = lm.config
    assert (cfg.architecture, cfg.family, cfg.n_layers, cfg.n_decoder_layers, cfg.n_heads, cfg.head_dim) == \
        ("t5", "encoder-decoder", 2, 3, 4, 16)
    assert cfg.gated and not cfg.tied_embeddings and not cfg.scale_decoder_output
    for key in ("t5_tied_head", "t5_no_head"):
        tied = load_model(built[key][0]).config
        assert not tied.gated and tied.tied_embeddings and tied.scale_decoder_output


def test_ids_are_sentencepieces_then_eos(lm, built):
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=built["flan"][2])
    rng = random.Random(0)
    alphabet = list("abcdefghijklmnopqrstuvwxyzTQ  \t\n,.，。！ｆ北京注意力😀é\u00a0\u3000")
    texts = SOURCES + CORPUS + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(500)]
    for text in texts:
        assert lm.encode(text) == sp.encode(text) + [sp.eos_id()], repr(text)
    assert lm.encode("a，b")[:-1] == lm.encode("a,b")[:-1]                   # the charsmap folds '，'
    extra = lm.encode("say <extra_id_0> now")
    assert lm.token_labels(extra).count("<extra_id_0>") == 1 and extra[-1] == sp.eos_id()
    decoded = [ids for ids in (lm.encode(text)[:-1] for text in SOURCES + CORPUS) if sp.unk_id() not in ids]
    assert len(decoded) > 20 and all(lm.decode(ids) == sp.decode(ids) for ids in decoded)   # (<unk>: as written)


@pytest.mark.parametrize("case", list(CASES))
def test_logits_and_every_attention_match_transformers(built, case):
    path, hf, _ = built[case]
    lm = load_model(path)
    for source in SOURCES:
        tr = lm.run(source, target=TARGET)
        assert tr.token_ids[-1] == 1 and tr.target_ids[0] == lm.config.decoder_start_token_id
        with torch.no_grad():
            out = hf(input_ids=torch.tensor([tr.token_ids]), decoder_input_ids=torch.tensor([tr.target_ids]),
                     output_attentions=True, output_hidden_states=True)
        S, T = tr.n_tokens, tr.n_target_tokens
        assert tr.encoder_attention.shape[-2:] == (S, S) and tr.cross_attention.shape[-2:] == (T, S)
        np.testing.assert_allclose(tr.next_token_logits, out.logits[0, -1].numpy(), atol=1e-4)
        np.testing.assert_allclose(tr.encoder_output, out.encoder_last_hidden_state[0].numpy(), atol=1e-4)
        for mine, theirs in ((tr.encoder_attention, out.encoder_attentions), (tr.attention, out.decoder_attentions),
                             (tr.cross_attention, out.cross_attentions)):
            assert len(mine) == len(theirs)
            for layer, pattern in enumerate(theirs):
                np.testing.assert_allclose(mine[layer], pattern[0].numpy(), atol=1e-4)


def test_the_decoder_is_causal_and_the_encoder_is_not(lm):
    tr = lm.run(SOURCES[0], target=TARGET)
    assert (np.triu(tr.attention[0, 0], 1) == 0).all()
    assert (np.triu(tr.encoder_attention[0, 0], 1) > 0).any()


def test_layer_detail_of_each_stack(lm):
    tr = lm.run(SOURCES[1], target=TARGET)
    stacks = (("encoder", tr.encoder_attention), ("decoder", tr.attention), ("cross", tr.cross_attention))
    for stack, patterns in stacks:
        for layer in range(len(patterns)):
            d = lm.layer_detail(tr, layer, stack)
            np.testing.assert_allclose(d.pattern, patterns[layer], atol=1e-6)
            masked = np.where(d.mask, d.scores, -np.inf)
            soft = np.exp(masked - masked.max(-1, keepdims=True))
            np.testing.assert_allclose(soft / soft.sum(-1, keepdims=True), patterns[layer], atol=1e-5)
    assert lm.layer_detail(tr, 0, "decoder").mask[0, 1] == False     # noqa: E712 (numpy bool)


def test_relative_buckets_are_transformers():
    from transformers.models.t5.modeling_t5 import T5Attention

    relative = torch.arange(-600, 600)[None, :]
    for bidirectional in (True, False):
        for n in (8, 32):
            ours = relative_buckets(relative, bidirectional, n, RELATIVE_MAX_DISTANCE)
            theirs = T5Attention._relative_position_bucket(relative, bidirectional, n, RELATIVE_MAX_DISTANCE)
            assert torch.equal(ours, theirs)


@pytest.mark.parametrize("case", ["flan", "t5_tied_head"])
def test_greedy_generation_is_transformers_generate(built, case, tmp_path):
    tiny = CASES[case] if case != "flan" else TinyT5(n_decoder_layers=2)     # transformers' cache: symmetric stacks
    path = tmp_path / "gen.gguf"
    hf, _ = write_t5(path, tiny, seed=5)
    lm = load_model(path)
    for source in SOURCES[:2]:
        g = lm.generate(source, max_new_tokens=10, temperature=0)
        with torch.no_grad():
            ref = hf.generate(torch.tensor([lm.encode(source)]), max_new_tokens=10, do_sample=False,
                              output_attentions=True, return_dict_in_generate=True)
        ids = ref.sequences[0].tolist()
        assert ids[0] == lm.config.decoder_start_token_id
        assert g.new_token_ids == ids[1:1 + len(g.steps)] and len(set(g.new_token_ids)) > 1
        for t, step in enumerate(g.steps):
            assert step.cross_attention.shape == (2, 4, len(g.source_ids)) and step.attention.shape == (2, 4, t + 1)
            for layer in range(2):
                cross, own = ref.cross_attentions[t][layer][0, :, -1], ref.decoder_attentions[t][layer][0, :, -1]
                np.testing.assert_allclose(step.cross_attention[layer], cross.numpy(), atol=1e-4)
                np.testing.assert_allclose(step.attention[layer], own.numpy(), atol=1e-4)
        assert g.cross_attention.shape == (len(g.steps), 2, 4, len(g.source_ids))


def test_generation_steps_are_the_full_pass(lm):
    """Each step's logits and rows (the cached decoder) are the full pass's on the target so far."""
    g = lm.generate(SOURCES[0], max_new_tokens=6, temperature=0.8, seed=1)
    assert g.stop_reason in ("length", "eos") and len(g.steps) >= 1
    tr = lm.run(SOURCES[0], target=g.new_token_ids[:-1])
    last = g.steps[-1]
    np.testing.assert_allclose(last.cross_attention, tr.cross_attention[:, :, -1], atol=1e-5)
    np.testing.assert_allclose(last.attention, tr.attention[:, :, -1], atol=1e-5)
    assert [s.token_id for s in lm.generate_steps(SOURCES[0], max_new_tokens=6, temperature=0.8, seed=1)][
        :len(g.steps)] == g.new_token_ids


def test_the_model_picker_describes_t5_files_and_the_reason_for_a_broken_one(built, tmp_path):
    from model.files.catalog import describe

    info = describe(built["flan"][0])
    assert info.ok and (info.architecture, info.family, info.n_layers, info.n_heads) == ("t5", "encoder-decoder", 2, 4)
    assert info.n_params == sum(load_model(built["flan"][0]).tensor_sizes.values())
    broken = describe(rewritten(built["flan"][0], tmp_path / "broken.gguf", drop=("dec.output_norm.weight",)))
    assert not broken.ok and "dec.output_norm.weight" in broken.error


@pytest.mark.parametrize(("change", "message"), [
    (dict(drop=("dec.blk.2.cross_attn_k.weight",)), r"lacks the tensors dec\.blk\.2\.cross_attn_k\.weight"),
    (dict(drop=("dec.blk.0.attn_rel_b.weight",)), r"dec\.blk\.0\.attn_rel_b"),
    (dict(add={"enc.blk.1.attn_rel_b.weight": np.zeros((8, 4), np.float32)}), r"does not use: enc\.blk\.1\.attn_rel_b"),
    (dict(replace={"enc.blk.0.attn_q.weight": np.zeros((48, 64), np.float32)}), r"shapes do not match"),
    (dict(keys={"t5.attention.value_length": (8, gguf.GGUFValueType.UINT32)}), r"value heads of width 8"),
    (dict(keys={"t5.attention.relative_buckets_count": None}), r"relative_buckets_count"),
    (dict(keys={"t5.attention.sliding_window": (16, gguf.GGUFValueType.UINT32)}), r"sliding_window"),
    (dict(keys={"tokenizer.ggml.unknown_token_id": None}), r"unknown_token_id"),
    (dict(keys={"t5.decoder_start_token_id": (10**6, gguf.GGUFValueType.UINT32)}), r"decoder_start_token_id"),
])
def test_files_it_would_compute_wrongly_are_refused(built, tmp_path, change, message):
    path = rewritten(built["flan"][0], tmp_path / "bad.gguf", **change)
    with pytest.raises(ModelLoadError, match=message):
        load_model(path)


def test_a_vocabulary_that_does_not_fit_the_table_is_refused(built, tmp_path):
    reader = read(built["flan"][0])
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()[:-1]
    change = {f"tokenizer.ggml.{k}": (reader.fields[f"tokenizer.ggml.{k}"].contents()[:-1], gguf.GGUFValueType.ARRAY)
              for k in ("scores", "token_type")} | {"tokenizer.ggml.tokens": (tokens, gguf.GGUFValueType.ARRAY)}
    path = rewritten(built["flan"][0], tmp_path / "short.gguf", keys=change)
    with pytest.raises(ModelLoadError, match="tokens but 208 embedding rows"):
        load_model(path)
