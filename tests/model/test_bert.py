"""BERT GGUFs (harness/tiny_encoders.py: written as llama.cpp's converter writes them) against the independent
references: transformers' BertModel holding the same numbers (eager attention, erf GELU) for every hidden state and
attention, and tokenizers' BertWordPieceTokenizer / transformers' pure-Python BertTokenizerLegacy over the same
vocab.txt for the ids.
The loader refuses what it would compute wrongly."""
import gguf
import numpy as np
import pytest
import torch

from harness.tiny_encoders import TinyBert, read, rewritten, write_bert
from model import ModelLoadError, load_model

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Attention is all you need: every token looks at every token.",
    "It's a small model, but it's REAL; they'd call it tiny. Naïve café déjà vu!",
    "北京欢迎你！今天天气很好，我们去公园散步。",
    "def attention(q, k, v): return softmax(q @ k.T) @ v  # 42 tokens",
    "the [MASK] jumps over the lazy dog [SEP] twice",
    "an emoji 😀 and a very" + "long" * 40 + "word",
    "  spaces\tand\nnewlines  \u00a0 everywhere ",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bert")
    files = {}
    for key, tiny in {"uncased": TinyBert(), "cased": TinyBert(lowercase=False, pooling=None),
                      "q8": TinyBert(quant="Q8_0", pooling=2)}.items():
        hf, vocab = write_bert(folder / f"{key}.gguf", tiny)
        (folder / f"{key}.txt").write_text("\n".join(vocab) + "\n")
        files[key] = (folder / f"{key}.gguf", hf, folder / f"{key}.txt")
    return files


@pytest.fixture(scope="module")
def lm(built):
    return load_model(built["uncased"][0])


def test_the_file_holds_llama_cpps_bert_names_and_keys(built):
    """The names and keys the issue lists from llama.cpp (and gguf-py's MODEL_TENSORS for BERT): what the tiny
    writer writes is what a converted BERT holds."""
    reader = read(built["uncased"][0])
    names = {t.name for t in reader.tensors}
    per_layer = {f"blk.{i}.{part}.{kind}" for i in range(2) for kind in ("weight", "bias")
                 for part in ("attn_q", "attn_k", "attn_v", "attn_output", "attn_output_norm", "ffn_up", "ffn_down",
                              "layer_output_norm")}
    assert names == {"token_embd.weight", "token_types.weight", "position_embd.weight", "token_embd_norm.weight",
                     "token_embd_norm.bias"} | per_layer
    for key in ("bert.block_count", "bert.context_length", "bert.embedding_length", "bert.feed_forward_length",
                "bert.attention.head_count", "bert.attention.layer_norm_epsilon", "bert.attention.causal",
                "bert.pooling_type", "tokenizer.ggml.token_type_count", "tokenizer.ggml.seperator_token_id"):
        assert key in reader.fields, key
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    assert "[CLS]" in tokens and "\u2581the" in tokens and "ing" in tokens      # control, word-initial, '##ing'


def test_config_and_family(lm, built):
    cfg = lm.config
    assert (cfg.architecture, cfg.family, cfg.n_layers, cfg.n_heads, cfg.head_dim, cfg.d_model, cfg.d_ff) == \
        ("bert", "encoder", 2, 4, 16, 64, 128)
    assert (cfg.pooling, cfg.n_token_types, cfg.max_positions) == ("mean", 2, 64)
    assert load_model(built["q8"][0]).config.pooling == "cls"
    assert load_model(built["cased"][0]).config.pooling == "none"


@pytest.mark.parametrize("case", ["uncased", "cased"])
def test_ids_are_the_reference_tokenizers(built, case):
    from tokenizers import BertWordPieceTokenizer
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    path, _, vocab_file = built[case]
    lm = load_model(path)
    lower = case == "uncased"
    assert lm.tokenizer.lowercase == lower
    fast = BertWordPieceTokenizer(str(vocab_file), lowercase=lower)
    slow = BertTokenizerLegacy(vocab_file=str(vocab_file), do_lower_case=lower)   # pure Python
    for text in TEXTS:
        ids = lm.encode(text)
        assert ids == fast.encode(text).ids == slow(text)["input_ids"], text
    assert lm.token_strings(lm.encode("the tokens"))[0] == "[CLS]"


def test_special_and_unknown_tokens(lm, built):
    vocab = built["uncased"][2].read_text().split("\n")
    ids = lm.encode("the [MASK] 😀")
    assert [vocab[i] for i in ids] == ["[CLS]", "the", "[MASK]", "[UNK]", "[SEP]"]
    assert lm.decode(ids) == "[CLS] the [MASK] [UNK] [SEP]"
    assert lm.tokenizer.pieces("The [MASK] fox!") == ["the", "[MASK]", "fox", "!"]


@pytest.mark.parametrize("case", ["uncased", "q8"])
def test_hidden_states_and_every_attention_match_transformers(built, case):
    path, hf, _ = built[case]
    lm = load_model(path)
    worst = 0.0
    for text in TEXTS:
        tr = lm.run(text)
        with torch.no_grad():
            out = hf(torch.tensor([tr.token_ids]), output_attentions=True, output_hidden_states=True)
        assert tr.last_hidden_state.dtype == np.float32
        assert tr.attention.shape == (2, 4, tr.n_tokens, tr.n_tokens)
        worst = max(worst, np.abs(out.last_hidden_state[0].numpy() - tr.last_hidden_state).max())
        for layer in range(2):
            np.testing.assert_allclose(tr.attention[layer], out.attentions[layer][0].numpy(), atol=1e-4)
            np.testing.assert_allclose(tr.hidden_states[layer], out.hidden_states[layer][0].numpy(), atol=1e-4)
    assert worst < 1e-4


def test_attention_is_bidirectional(lm):
    tr = lm.run("every token sees every token, the later ones too")
    upper = np.triu(np.ones(tr.attention.shape[-2:], bool), 1)
    assert (tr.attention[..., upper] > 0).all()                       # a causal mask would make these 0
    np.testing.assert_allclose(tr.attention.sum(-1), 1.0, atol=1e-5)


def test_layer_detail_is_the_forward_pass_and_transformers(lm, built):
    hf = built["uncased"][1]
    tr = lm.run(TEXTS[1])
    for layer in range(2):
        d = lm.layer_detail(tr, layer)
        assert d.mask.all() and d.mask.shape == (tr.n_tokens, tr.n_tokens)
        np.testing.assert_array_equal(d.pattern, tr.attention[layer])
        module = hf.encoder.layer[layer].attention.self
        x = torch.from_numpy(tr.hidden_states[layer].copy())
        with torch.no_grad():
            q = module.query(x).view(tr.n_tokens, 4, 16).transpose(0, 1).numpy()       # [H, T, hd]
            k = module.key(x).view(tr.n_tokens, 4, 16).transpose(0, 1).numpy()
        np.testing.assert_allclose(d.q, q, atol=1e-5)
        np.testing.assert_allclose(d.k_rot, k, atol=1e-5)
        np.testing.assert_allclose(d.scores, q @ k.transpose(0, 2, 1) / 4.0, atol=1e-4)


def test_truncation_keeps_sep_and_pooling(lm):
    tr = lm.run(TEXTS[0], max_tokens=6)
    full = lm.encode(TEXTS[0])
    assert tr.truncated and tr.token_ids == full[:5] + full[-1:] and tr.n_tokens_total == len(full)
    np.testing.assert_allclose(lm.pooled(tr), tr.last_hidden_state.mean(0), atol=1e-6)
    with pytest.raises(ValueError, match="empty"):
        lm.run("   ")


def test_the_model_picker_describes_a_bert_file(built):
    from model.files.catalog import describe

    info = describe(built["uncased"][0])
    assert info.ok and (info.architecture, info.family, info.n_layers, info.n_heads) == ("bert", "encoder", 2, 4)
    lm = load_model(built["uncased"][0])
    assert info.n_params == sum(lm.tensor_sizes.values()) and info.memory_bytes == 4 * info.n_params
    assert info.quantization == "F16" and describe(built["q8"][0]).quantization == "Q8_0"


@pytest.mark.parametrize(("change", "message"), [
    (dict(drop=("blk.1.ffn_down.bias",)), r"lacks the tensors blk\.1\.ffn_down\.bias"),
    (dict(add={"cls.output.weight": np.zeros((2, 64), np.float32)}), r"does not use: cls\.output\.weight"),
    (dict(replace={"blk.0.attn_q.weight": np.zeros((32, 64), np.float32)}), r"shapes do not match"),
    (dict(keys={"bert.pooling_type": (4, gguf.GGUFValueType.UINT32)}), r"pooling_type = 4"),
    (dict(keys={"bert.attention.causal": (True, gguf.GGUFValueType.BOOL)}), r"causal"),
    (dict(keys={"bert.rope.freq_base": (1e4, gguf.GGUFValueType.FLOAT32)}), r"bert\.rope\.freq_base"),
    (dict(keys={"bert.attention.head_count": (3, gguf.GGUFValueType.UINT32)}), r"do not divide"),
    (dict(keys={"tokenizer.ggml.model": ("wordpiece", gguf.GGUFValueType.STRING)}), r"tokenizer model 'wordpiece'"),
    (dict(keys={"tokenizer.ggml.unknown_token_id": None}), r"unknown_token_id"),
    (dict(replace={"token_types.weight": np.zeros((3, 64), np.float32)}), r"token_types\.weight"),
])
def test_files_it_would_compute_wrongly_are_refused(built, tmp_path, change, message):
    path = rewritten(built["uncased"][0], tmp_path / "bad.gguf", **change)
    with pytest.raises(ModelLoadError, match=message):
        load_model(path)


def test_a_truncated_file_is_refused(built, tmp_path):
    data = built["uncased"][0].read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[:len(data) - 4096])
    with pytest.raises(ModelLoadError, match="truncated"):
        load_model(tmp_path / "cut.gguf")


def test_a_model_larger_than_the_memory_available_is_refused_before_loading(built, monkeypatch):
    from model.files import gguf as G

    monkeypatch.setattr(G, "available_memory_bytes", lambda: 100_000)      # the weights take ~190 kB
    with pytest.raises(ModelLoadError, match="needs .* GB of memory"):
        load_model(built["uncased"][0])
