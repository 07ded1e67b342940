"""Tiny random BERT and T5 models, as transformers models and as GGUF files holding the same numbers, written as
llama.cpp's convert_hf_to_gguf.py writes them (classes BertModel and T5Model): the same metadata calls in the same
order, tensor names from gguf-py's own tensor-name map (get_tensor_name_map, what the converter's map_tensor_name
uses), 1-D tensors and norms F32, matrices F16 (or Q8_0, F16 where a row is no whole number of blocks: the
converter's fallback), the converter's vocabulary layouts (WordPiece with the phantom space; unigram pieces padded
with [PADn] rows, added tokens user-defined). The transformers model's weights are then replaced by the file's
dequantized values (gguf's own dequantization), so both hold exactly the same numbers.

Vocabularies: a WordPiece vocabulary built here from the tests' corpus (deterministic: the tokenizers library's
WordPiece trainer is not, run to run), and a SentencePiece unigram model trained on it by the sentencepiece library
with a fixed seed (the same file every run: tests check its digest).
"""
from __future__ import annotations

import collections
import io
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
import torch

from harness.trained_vocabs import CORPUS

BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
SUFFIXES = ("s", "ed", "ing", "er", "ion", "ly", "es", "en")
T5_EXTRA_IDS = 4          # <extra_id_N> added tokens (user-defined in the GGUF)
T5_PAD_ROWS = 4           # vocabulary rows beyond the pieces (config vocab_size > pieces), as real T5 files have
UNIGRAM_PIECES = 200


# ------------------------------------------------------------------------------------------------ vocabularies

def wordpiece_vocab(lowercase: bool = True, corpus: list[str] = CORPUS, min_count: int = 2) -> list[str]:
    """A WordPiece vocabulary of the corpus: the specials, every character alone and as a continuation, the words
    seen at least min_count times, and a few suffixes; in a fixed order."""
    from tokenizers import normalizers, pre_tokenizers

    normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=None)
    split = pre_tokenizers.BertPreTokenizer()
    counts = collections.Counter(word for line in corpus
                                 for word, _ in split.pre_tokenize_str(normalizer.normalize_str(line)))
    chars = sorted({c for word in counts for c in word})
    words = sorted((w for w, n in counts.items() if n >= min_count and len(w) > 1), key=lambda w: (-counts[w], w))
    return [*BERT_SPECIALS, *chars, *(f"##{c}" for c in chars), *words, *(f"##{s}" for s in SUFFIXES)]


def phantom(vocab: list[str]) -> tuple[list[str], list[int]]:
    """The vocabulary as llama.cpp's BertModel.set_vocab writes it: (tokens, token types)."""
    tokens, types = [], []
    for token in vocab:
        control = token in BERT_SPECIALS
        tokens.append(token if control else token[2:] if token.startswith("##") else "\u2581" + token)
        types.append(gguf.TokenType.CONTROL if control else gguf.TokenType.NORMAL)
    return tokens, types


def unigram_model(corpus: list[str] = CORPUS, pieces: int = UNIGRAM_PIECES, coverage: float = 0.98) -> bytes:
    """A SentencePiece unigram model proto trained on the corpus (nmt_nfkc normalization, T5's trainer settings)."""
    import sentencepiece as spm

    spm.set_random_generator_seed(1234)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_writer=model, model_type="unigram",
                                   vocab_size=pieces, character_coverage=coverage, num_threads=1, minloglevel=2,
                                   pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    return model.getvalue()


def unigram_vocab(proto: bytes, vocab_size: int) -> dict:
    """The tokenizer metadata llama.cpp's T5Model.set_vocab writes for a sentencepiece model, its added tokens
    (added_tokens.json: <extra_id_N> after the pieces) and a config vocab_size beyond them."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2

    sp = spm.SentencePieceProcessor(model_proto=proto)
    spec = sentencepiece_model_pb2.ModelProto()
    spec.ParseFromString(proto)
    T = gguf.TokenType
    tokens = [f"[PAD{i}]" for i in range(vocab_size)]
    scores, types = [-10000.0] * vocab_size, [T.UNUSED] * vocab_size
    for i in range(sp.vocab_size()):
        tokens[i], scores[i] = sp.id_to_piece(i), sp.get_score(i)
        types[i] = T.UNKNOWN if sp.is_unknown(i) else T.CONTROL if sp.is_control(i) else \
            T.UNUSED if sp.is_unused(i) else T.BYTE if sp.is_byte(i) else T.NORMAL
    for n in range(T5_EXTRA_IDS):
        i = sp.vocab_size() + n
        tokens[i], scores[i], types[i] = f"<extra_id_{n}>", -1000.0, T.USER_DEFINED
    return {"tokens": tokens, "scores": scores, "types": types,
            "add_space_prefix": spec.normalizer_spec.add_dummy_prefix,
            "remove_extra_whitespaces": spec.normalizer_spec.remove_extra_whitespaces,
            "charsmap": spec.normalizer_spec.precompiled_charsmap, "pad": sp.pad_id(), "eos": sp.eos_id(),
            "unk": sp.unk_id()}


# -------------------------------------------------------------------------------------------------- the files

@dataclass(frozen=True)
class TinyBert:
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 128
    n_layers: int = 2
    context: int = 64
    lowercase: bool = True
    quant: str = "F16"
    pooling: int | None = 1            # sentence-transformers' mean pooling (None: no pooling_type key)


@dataclass(frozen=True)
class TinyT5:
    d_model: int = 64
    n_heads: int = 4
    d_kv: int = 16
    d_ff: int = 96
    n_layers: int = 2
    n_decoder_layers: int = 3
    buckets: int = 8
    gated: bool = True                 # Flan-T5 / v1.1 (gated-gelu, untied head) or the original (relu)
    tied: bool = False
    head_in_file: bool = True          # the converter writes lm_head even for a tied T5
    quant: str = "F16"


def _randomize(model, seed: int) -> None:
    """Norm weights near 1 and biases / position biases large enough to matter."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_((torch.rand(p.shape, generator=gen) + 0.5) if "weight" in name
                        else (torch.rand(p.shape, generator=gen) - 0.5) * 0.6)
            elif "relative_attention_bias" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 2.0)


def _stored(array: np.ndarray, quant: str) -> tuple[np.ndarray, gguf.GGMLQuantizationType]:
    """The converter's storage of a tensor: 1-D F32, else quant (F16 where quant cannot hold a row)."""
    if array.ndim == 1:
        return array.astype(np.float32), gguf.GGMLQuantizationType.F32
    qtype = gguf.GGMLQuantizationType[quant]
    try:
        return gguf.quants.quantize(array, qtype), qtype
    except gguf.QuantError:
        return array.astype(np.float16), gguf.GGMLQuantizationType.F16


def _write_tensors(w: gguf.GGUFWriter, model, names: dict[str, str], quant: str) -> None:
    """Each parameter under its GGUF name, stored as the converter does; the model then holds the stored values."""
    with torch.no_grad():
        for hf_name, p in model.named_parameters():
            name = names.get(hf_name)
            if name is None:
                continue
            array = p.numpy().astype(np.float32)
            data, qtype = _stored(array, "F32" if name.endswith("_norm.weight") else quant)
            values = np.asarray(gguf.quants.dequantize(data, qtype), dtype=np.float32).reshape(array.shape)
            p.copy_(torch.from_numpy(values))
            w.add_tensor(name, data, raw_dtype=qtype)


def _gguf_names(model, arch: gguf.MODEL_ARCH, n_blocks: int, prefix: str = "") -> dict[str, str]:
    """transformers name -> GGUF name through gguf-py's tensor-name map."""
    tmap = gguf.get_tensor_name_map(arch, n_blocks)
    out = {}
    for name, _ in model.named_parameters():
        mapped = tmap.get_name(name.removeprefix(prefix), try_suffixes=(".weight", ".bias"))
        if mapped is not None:
            out[name] = mapped
    return out


def _finish(w: gguf.GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_bert(path: Path, t: TinyBert = TinyBert(), seed: int = 0):
    """A tiny BERT as a GGUF at path; returns (transformers BertModel holding the file's numbers, its vocab)."""
    import transformers

    vocab = wordpiece_vocab(t.lowercase)
    torch.manual_seed(seed)
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=t.d_model, num_hidden_layers=t.n_layers,
                                     num_attention_heads=t.n_heads, intermediate_size=t.d_ff,
                                     max_position_embeddings=t.context, type_vocab_size=2, hidden_act="gelu",
                                     layer_norm_eps=1e-12, initializer_range=0.2, attn_implementation="eager")
    model = transformers.BertModel(config, add_pooling_layer=False).eval()
    _randomize(model, seed)
    write_bert_model(path, model, vocab, t.quant, t.pooling)
    return model, vocab


def write_bert_model(path: Path, model, vocab: list[str], quant: str = "F16", pooling: int | None = 1,
                     name: str = "tiny bert") -> None:
    """A transformers BertModel (its weights then hold the file's stored values) and its WordPiece vocabulary
    (BERT_SPECIALS among them) as a GGUF at path, as llama.cpp's converter writes them."""
    config = model.config
    w = gguf.GGUFWriter(str(path), "bert")
    w.add_type("model")
    w.add_name(name)
    w.add_block_count(config.num_hidden_layers)                 # TextModel.set_gguf_parameters
    w.add_context_length(config.max_position_embeddings)
    w.add_embedding_length(config.hidden_size)
    w.add_feed_forward_length(config.intermediate_size)
    w.add_head_count(config.num_attention_heads)
    w.add_layer_norm_eps(config.layer_norm_eps)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_causal_attention(False)                               # BertModel.set_gguf_parameters
    if pooling is not None:
        w.add_pooling_type(gguf.PoolingType(pooling))
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_token_type_count(config.type_vocab_size)              # BertModel.set_vocab
    tokens, types = phantom(vocab)
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    ids = {s: vocab.index(s) for s in BERT_SPECIALS}            # gguf.SpecialVocab: cls as bos, sep as eos
    w.add_bos_token_id(ids["[CLS]"])
    w.add_eos_token_id(ids["[SEP]"])
    w.add_unk_token_id(ids["[UNK]"])
    w.add_sep_token_id(ids["[SEP]"])
    w.add_pad_token_id(ids["[PAD]"])
    w.add_mask_token_id(ids["[MASK]"])
    w.add_add_bos_token(True)
    w.add_add_eos_token(True)
    w.add_add_sep_token(False)
    _write_tensors(w, model, _gguf_names(model, gguf.MODEL_ARCH.BERT, config.num_hidden_layers), quant)
    _finish(w)


def write_t5(path: Path, t: TinyT5 = TinyT5(), seed: int = 0):
    """A tiny T5 as a GGUF at path; returns (transformers T5ForConditionalGeneration holding the file's numbers,
    the sentencepiece model proto)."""
    import transformers

    proto = unigram_model()
    n_pieces = UNIGRAM_PIECES + T5_EXTRA_IDS
    meta = unigram_vocab(proto, n_pieces + T5_PAD_ROWS)
    torch.manual_seed(seed)
    extra = {} if t.tied else {"tie_word_embeddings": False}
    config = transformers.T5Config(vocab_size=len(meta["tokens"]), d_model=t.d_model, d_kv=t.d_kv, d_ff=t.d_ff,
                                   num_layers=t.n_layers, num_decoder_layers=t.n_decoder_layers, num_heads=t.n_heads,
                                   relative_attention_num_buckets=t.buckets,
                                   relative_attention_max_distance=128,   # every T5's; not in a GGUF
                                   feed_forward_proj="gated-gelu" if t.gated else "relu", layer_norm_epsilon=1e-6,
                                   decoder_start_token_id=meta["pad"], pad_token_id=meta["pad"],
                                   eos_token_id=meta["eos"], attn_implementation="eager", **extra)
    model = transformers.T5ForConditionalGeneration(config).eval()
    if not t.tied:                                              # transformers 5 ties the head when it builds a T5
        model.lm_head.weight = torch.nn.Parameter(torch.randn(config.vocab_size, t.d_model) * t.d_model ** -0.5)
    _randomize(model, seed)
    with torch.no_grad():
        model.shared.weight.mul_(0.1)                           # the blocks, not the token's own row, decide
    write_t5_model(path, model, meta, t.quant, t.tied and t.head_in_file)
    return model, proto


def write_t5_model(path: Path, model, meta: dict, quant: str = "F16", tied_head_in_file: bool = False,
                   name: str = "tiny t5") -> None:
    """A transformers T5ForConditionalGeneration (its weights then hold the file's stored values) and its
    vocabulary (unigram_vocab of its sentencepiece model) as a GGUF at path, as llama.cpp's converter writes them;
    tied_head_in_file: a tied T5's lm_head written too (the converter does)."""
    config = model.config
    w = gguf.GGUFWriter(str(path), "t5")
    w.add_type("model")
    w.add_name(name)
    w.add_context_length(512)                                   # T5Model.set_gguf_parameters (no n_positions)
    w.add_embedding_length(config.d_model)
    w.add_feed_forward_length(config.d_ff)
    w.add_block_count(config.num_layers)
    w.add_decoder_block_count(config.num_decoder_layers)
    w.add_head_count(config.num_heads)
    w.add_key_length(config.d_kv)
    w.add_value_length(config.d_kv)
    w.add_layer_norm_eps(config.layer_norm_epsilon)
    w.add_relative_attn_buckets_count(config.relative_attention_num_buckets)
    w.add_layer_norm_rms_eps(config.layer_norm_epsilon)
    w.add_decoder_start_token_id(config.decoder_start_token_id)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_tokenizer_model("t5")                                 # T5Model.set_vocab
    w.add_tokenizer_pre("default")
    w.add_token_list(meta["tokens"])
    w.add_token_scores(meta["scores"])
    w.add_token_types(meta["types"])
    w.add_add_space_prefix(meta["add_space_prefix"])
    w.add_remove_extra_whitespaces(meta["remove_extra_whitespaces"])
    w.add_precompiled_charsmap(meta["charsmap"])
    w.add_eos_token_id(meta["eos"])                             # gguf.SpecialVocab (tokenizer.json, config.json)
    w.add_unk_token_id(meta["unk"])
    w.add_pad_token_id(meta["pad"])
    w.add_add_eos_token(True)
    names = _gguf_names(model, gguf.MODEL_ARCH.T5, max(config.num_layers, config.num_decoder_layers))
    _write_tensors(w, model, names, quant)
    if tied_head_in_file:                                       # the checkpoint's lm_head: the shared table
        data, qtype = _stored(model.shared.weight.detach().numpy(), quant)
        w.add_tensor("output.weight", data, raw_dtype=qtype)
    _finish(w)


def read(path: Path):
    """A file's metadata and tensor table through the app's reader (gguf.GGUFReader makes a numpy part of each of
    the charsmap's 240,000 bytes: 11 s a file)."""
    from model.files.gguf import _open_reader

    return _open_reader(path)


def rewritten(good: Path, path: Path, keys: dict | None = None, drop: tuple[str, ...] = (),
              add: dict[str, np.ndarray] | None = None, replace: dict[str, np.ndarray] | None = None) -> Path:
    """good copied to path through GGUFWriter: keys {key: (value, GGUFValueType) or None to drop it}, tensors
    dropped, added or replaced (float32 arrays)."""
    keys, add, replace = keys or {}, add or {}, replace or {}
    reader = read(good)
    writer = gguf.GGUFWriter(str(path), reader.fields["general.architecture"].contents())
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in keys:
            continue
        kind = field.types[0]
        writer.add_key_value(key, field.contents(), kind,
                             sub_type=field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None)
    for key, value in keys.items():
        if value is not None:
            old = reader.fields.get(key)
            sub = old.types[-1] if value[1] == gguf.GGUFValueType.ARRAY and old is not None else None
            writer.add_key_value(key, value[0], value[1], sub_type=sub)
    for tensor in reader.tensors:
        if tensor.name in drop:
            continue
        if tensor.name in replace:
            writer.add_tensor(tensor.name, replace[tensor.name])
        else:
            data = np.array(tensor.data)
            writer.add_tensor(tensor.name, data, raw_shape=data.shape, raw_dtype=tensor.tensor_type)
    for name, array in add.items():
        writer.add_tensor(name, array)
    _finish(writer)
    return path
