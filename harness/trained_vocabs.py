"""Tiny vocabularies for tokenizer tests, trained on the spot by the reference libraries, and their GGUF metadata:

- SentencePiece BPE with byte fallback (the sentencepiece library), exported as llama.cpp's convert_hf_to_gguf.py
  `_create_vocab_sentencepiece` does (piece, score, type per id);
- byte-level BPE (the tokenizers library) with a given pre-tokenizer, as its tokenizer.json vocab and merges;
- the tokenizer metadata of a real GGUF file.
"""
import io
import json

import gguf

ENGLISH = """The quick brown fox jumps over the lazy dog.
Attention is all you need: every token looks at every earlier token.
A transformer block has an attention layer and a feed-forward network.
The model reads the text one token at a time and predicts the next one.
Count: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10. In 2024 it cost $12,345.67 (about 3.14 per token).
It's a small model, but it's real; they'd call it tiny. We'll see what they've done.
"""
CHINESE = """注意力机制让每个词元关注之前的词元。
多头注意力把查询、键和值分成几个头。
北京欢迎你！今天天气很好，我们去公园散步。
旋转位置编码把位置信息写进查询和键。
分词器把文本切成词元，模型再预测下一个词元。
"""
CODE = """def attention(q, k, v):
    scores = q @ k.T / math.sqrt(q.shape[-1])
    return softmax(scores) @ v

for (int i = 0; i < n; ++i) {
\tsum += a[i] * b[i];
}
<b>bold</b> <div class="note">&nbsp;</div>
SELECT name, count(*) FROM tokens WHERE id > 42;
"""
CORPUS = (ENGLISH + CHINESE + CODE).splitlines() * 3
SENTENCEPIECE_TYPES = {"unknown": 2, "control": 3, "unused": 5, "byte": 6}  # else 1 (normal); gguf.TokenType


def train_sentencepiece(vocab_size: int = 700, **options):
    """A SentencePiece BPE model with byte fallback trained on CORPUS, Llama 2's trainer settings (identity
    normalization, whitespace kept, digits split); options override them."""
    import sentencepiece as spm

    model = io.BytesIO()
    settings = dict(model_type="bpe", vocab_size=vocab_size, byte_fallback=True, normalization_rule_name="identity",
                    remove_extra_whitespaces=False, add_dummy_prefix=True, split_digits=True,
                    allow_whitespace_only_pieces=True, character_coverage=0.99, minloglevel=2, num_threads=1)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS), model_writer=model, **(settings | options))
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def sentencepiece_meta(sp, **extra) -> dict:
    """GGUF tokenizer metadata of a sentencepiece model, as convert_hf_to_gguf.py writes it."""
    types = []
    for i in range(sp.vocab_size()):
        kind = next((k for k in SENTENCEPIECE_TYPES if getattr(sp, f"is_{k}")(i)), None)
        types.append(SENTENCEPIECE_TYPES.get(kind, 1))
    meta = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.pre": "default",
            "tokenizer.ggml.tokens": [sp.id_to_piece(i).encode() for i in range(sp.vocab_size())],
            "tokenizer.ggml.scores": [sp.get_score(i) for i in range(sp.vocab_size())],
            "tokenizer.ggml.token_type": types,
            "tokenizer.ggml.bos_token_id": sp.bos_id(), "tokenizer.ggml.eos_token_id": sp.eos_id(),
            "tokenizer.ggml.unknown_token_id": sp.unk_id()}
    return meta | {f"tokenizer.ggml.{k}": v for k, v in extra.items()}


def train_byte_level(pre_tokenizer, vocab_size: int, specials: list[str], corpus: list[str]):
    """A tokenizers BPE trained with pre_tokenizer (ByteLevel, possibly after a Split) over every byte."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(corpus, trainer)
    return tokenizer


def byte_level_meta(tokenizer, pre: str, specials: list[str], **extra) -> dict:
    """GGUF tokenizer metadata of a trained tokenizers BPE: tokens in id order, specials as control tokens."""
    model = json.loads(tokenizer.to_str())["model"]
    by_id = sorted(model["vocab"].items(), key=lambda item: item[1])
    assert [i for _, i in by_id] == list(range(len(by_id)))
    merges = [" ".join(m) if isinstance(m, list) else m for m in model["merges"]]
    meta = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre,
            "tokenizer.ggml.tokens": [t.encode() for t, _ in by_id],
            "tokenizer.ggml.token_type": [3 if t in specials else 1 for t, _ in by_id],
            "tokenizer.ggml.merges": [m.encode() for m in merges],
            "tokenizer.ggml.bos_token_id": 0, "tokenizer.ggml.eos_token_id": 0}
    return meta | {f"tokenizer.ggml.{k}": v for k, v in extra.items()}


def reference_bpe(meta: dict, pre_tokenizer, ignore_merges: bool = False):
    """tokenizers BPE over a GGUF vocab/merges, control tokens added as special tokens the way transformers'
    tokenizer.json declares them (whole-string match anywhere, not normalized)."""
    import tokenizers

    tokens = [t.decode() for t in meta["tokenizer.ggml.tokens"]]
    pairs = [tuple(m.decode().split(" ")) for m in meta["tokenizer.ggml.merges"]]
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=pairs,
                                                     ignore_merges=ignore_merges))
    bpe.pre_tokenizer = pre_tokenizer
    bpe.decoder = tokenizers.decoders.ByteLevel()
    bpe.add_special_tokens([tokenizers.AddedToken(t, special=True, normalized=False)
                            for t, kind in zip(tokens, meta["tokenizer.ggml.token_type"], strict=True) if kind == 3])
    return bpe


def gguf_tokenizer_meta(path) -> dict:
    """Every tokenizer.ggml.* value of a GGUF file: strings as str, string arrays as bytes, numbers as numbers."""
    reader = gguf.GGUFReader(path)
    meta = {}
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer.ggml."):
            continue
        strings = field.types[-1] == gguf.GGUFValueType.STRING
        values = [bytes(field.parts[i]) if strings else field.parts[i].tolist()[0] for i in field.data]
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            meta[key] = values
        else:
            meta[key] = values[0].decode() if strings else values[0]
    return meta
