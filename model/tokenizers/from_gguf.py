"""The tokenizer a GGUF describes, from its tokenizer.ggml.* metadata values, or a ValueError saying why this app
cannot tokenize text exactly as the model expects.

Keys read: tokenizer.ggml.model ("gpt2": byte-level BPE, "llama": SentencePiece, "bert": WordPiece, "t5":
SentencePiece unigram), .pre, .tokens, .token_type, .merges (gpt2), .scores (llama, t5), .bos_token_id,
.eos_token_id, .unknown_token_id (bert, t5), .add_bos_token, .add_space_prefix (llama, t5), .add_eos_token,
.add_sep_token, .remove_extra_whitespaces (refused when true for the decoders' kinds), .precompiled_charsmap (t5).
Defaults are llama.cpp's: BOS is added for SentencePiece, WordPiece and the Llama 3 family of pre-tokenizers, EOS
([SEP], </s>) for WordPiece and unigram; SentencePiece and unigram add a space prefix, unigram removes extra spaces.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from model.tokenizers.base import Tokenizer
from model.tokenizers.byte_bpe import Tokenizer as ByteLevelBPE
from model.tokenizers.pretokenizers import pre_tokenizer
from model.tokenizers.sentencepiece import SentencePieceTokenizer
from model.tokenizers.unigram import UnigramTokenizer
from model.tokenizers.wordpiece import WordPieceTokenizer

KEY = "tokenizer.ggml."
MODELS = {"gpt2": "byte-level BPE: GPT-2, Llama 3, Qwen, SmolLM", "llama": "SentencePiece: Llama 2, TinyLlama, Mistral",
          "bert": "WordPiece: BERT, MiniLM, BGE", "t5": "SentencePiece unigram: T5, Flan-T5"}
REFUSED_WHEN_TRUE = {
    "add_eos_token": "appends an end-of-sequence token to every text",
    "add_sep_token": "appends a separator token to every text",
    "remove_extra_whitespaces": "removes repeated spaces before tokenizing",
}


def build_tokenizer(meta: Mapping[str, object], name: str) -> Tokenizer:
    """The tokenizer of GGUF metadata (key -> value, arrays as lists: tokens as bytes); name labels it (the model
    file's name). ValueError with a message a user can act on for anything it cannot do exactly."""
    model = meta.get(KEY + "model")
    if model not in MODELS:
        raise ValueError(f"its tokenizer model '{model}' (tokenizer.ggml.model) is not supported by this app; "
                         f"supported: {'; '.join(f'{k} ({v})' for k, v in MODELS.items())}")
    if model in ("bert", "t5"):
        return _encoder_tokenizer(meta, model)
    for key, what in REFUSED_WHEN_TRUE.items():
        if meta.get(KEY + key):
            raise ValueError(f"its tokenizer {what} (tokenizer.ggml.{key}); this app does not support that")
    tokens = [_bytes(t) for t in _array(meta, "tokens", "vocabulary")]
    token_types = [int(t) for t in _array(meta, "token_type", "token types")]
    if len(token_types) != len(tokens):
        raise ValueError(f"it has {len(tokens):,} tokens but {len(token_types):,} token types "
                         f"(tokenizer.ggml.token_type); the file is damaged")
    eos = _token_id(meta, "eos_token_id")
    if model == "gpt2":
        pre_name = meta.get(KEY + "pre")
        add_bos = _flag(meta, "add_bos_token", pre_tokenizer(pre_name).add_bos)
        merges = [_bytes(m) for m in _array(meta, "merges", "BPE merges")]
        return ByteLevelBPE(tokens, token_types, merges, pre=pre_name, bos_token_id=_bos(meta, add_bos), name=name,
                            eos_token_id=eos)
    scores = [float(s) for s in _array(meta, "scores", "token scores")]
    bos = _bos(meta, _flag(meta, "add_bos_token", True))
    return SentencePieceTokenizer(tokens, scores, token_types, bos_token_id=bos, eos_token_id=eos,
                                  add_space_prefix=_flag(meta, "add_space_prefix", True))


def _encoder_tokenizer(meta: Mapping[str, object], model: str) -> Tokenizer:
    """WordPiece ("bert") or unigram ("t5"), with the file's special tokens and flags."""
    tokens = [_bytes(t) for t in _array(meta, "tokens", "vocabulary")]
    token_types = [int(t) for t in _array(meta, "token_type", "token types")]
    unknown = _token_id(meta, "unknown_token_id")
    if unknown is None:
        raise ValueError("it does not say which token is the unknown one (tokenizer.ggml.unknown_token_id)")
    eos = _token_id(meta, "eos_token_id")
    ids = dict(unknown_token_id=unknown, bos_token_id=_token_id(meta, "bos_token_id"),
               eos_token_id=_token_id(meta, "seperator_token_id") if eos is None and model == "bert" else eos)
    add_bos, add_eos = _flag(meta, "add_bos_token", model == "bert"), _flag(meta, "add_eos_token", True)
    for kind, added in (("bos", add_bos), ("eos", add_eos)):
        if added and ids[f"{kind}_token_id"] is None:
            raise ValueError(f"it adds a {kind.upper()} token to every text (tokenizer.ggml.add_{kind}_token) but "
                             f"does not say which (tokenizer.ggml.{kind}_token_id)")
    if model == "bert":
        return WordPieceTokenizer(tokens, token_types, add_bos=add_bos, add_eos=add_eos, **ids)
    charsmap = meta.get(KEY + "precompiled_charsmap")
    return UnigramTokenizer(tokens, [float(s) for s in _array(meta, "scores", "token scores")], token_types,
                            add_bos=add_bos, add_eos=add_eos, add_space_prefix=_flag(meta, "add_space_prefix", True),
                            remove_extra_whitespaces=_flag(meta, "remove_extra_whitespaces", True),
                            precompiled_charsmap=bytes(charsmap) if charsmap else None, **ids)


def _array(meta: Mapping[str, object], key: str, what: str) -> Sequence:
    value = meta.get(KEY + key)
    if value is None or len(value) == 0:
        raise ValueError(f"it has no {what} (tokenizer.ggml.{key}); it is not a complete GGUF. Convert it again "
                         f"with llama.cpp's convert_hf_to_gguf.py")
    return value


def _flag(meta: Mapping[str, object], key: str, default: bool) -> bool:
    value = meta.get(KEY + key)
    return default if value is None else bool(value)


def _token_id(meta: Mapping[str, object], key: str) -> int | None:
    value = meta.get(KEY + key)
    return None if value is None else int(value)


def _bos(meta: Mapping[str, object], add_bos: bool) -> int | None:
    """The BOS id encode puts first, None when the file does not ask for one."""
    if not add_bos:
        return None
    bos = _token_id(meta, "bos_token_id")
    if bos is None:
        raise ValueError("it asks for a BOS token (tokenizer.ggml.add_bos_token, or llama.cpp's default for its "
                         "tokenizer) but does not say which (tokenizer.ggml.bos_token_id)")
    return bos


def _bytes(value: object) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)
