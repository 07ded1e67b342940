"""A Qwen-style byte-level BPE vocabulary that holds Chinese, trained on the spot by the tokenizers library (Qwen2's
own split regex, then ByteLevel), and a tiny random GGUF carrying it: common Chinese characters are multi-byte
tokens and frequent words merge further, as in Qwen's real vocabulary. No weights are needed."""
from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path

from harness.tiny_gguf import FIRST_MERGE_ID, Tiny, write_tiny
from harness.trained_vocabs import byte_level_meta, reference_bpe, train_byte_level

PRE = "qwen2"
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]   # ids 0-2: tiny_gguf writes bos 1, eos 2
# Everyday and course sentences: the trainer learns their characters and words (a real Chinese vocabulary holds
# every common character; the test texts' are here too).
CORPUS = """周末我和朋友去图书馆借了三本关于人工智能的书，回家后一直读到深夜。
我们每天都在学习新的知识，老师说学习要有耐心。
今天天气很好，我们一起去公园散步，然后回家吃饭。
语言模型先把文字切成词元，再把每个词元变成一个数字。
注意力机制让模型在读一句话时回头看前面的词。
这个模型很小，但是它能说中文，也能写一点代码。
北京和上海都是很大的城市，每年有很多人来旅游。
我喜欢吃苹果和香蕉，也喜欢喝茶和咖啡。
中文的一个汉字通常是三个字节，英文字母只有一个字节。
大模型的参数很多，训练需要很多数据和时间。
The quick brown fox jumps over the lazy dog, and the model reads every token.
Tokenizers turn text into tokens, and tokens into numbers the model can read.
Emoji such as 😀 👍 🎉 🚀 are four bytes each: 😀👍🎉🚀
""".splitlines()


WORDS = ("我们 今天 学习 知识 老师 模型 文字 词元 数字 注意力 中文 汉字 字节 参数 数据 时间 朋友 一起 人工智能 "
         "图书馆").split()


def corpus(seed: int = 0) -> list[str]:
    """CORPUS, its characters in random order (each common character frequent, few long runs repeated: BPE learns
    characters and short words, not whole sentences), and WORDS in random pairs."""
    rng = random.Random(seed)
    chars = sorted({c for line in CORPUS for c in line if not c.isascii()})
    mixed = ["".join(rng.choices(chars, k=8)) for _ in range(3000)]
    words = ["".join(rng.choices(WORDS, k=2)) for _ in range(1500)]
    return CORPUS * 3 + mixed + words


@lru_cache(maxsize=1)
def trained():
    """(tokens, token types, merges) as GGUF strings, and the tokenizers reference over the same vocabulary."""
    from tests.model.test_tokenizers_reference import reference_pre_tokenizer

    pre = reference_pre_tokenizer(PRE)
    meta = byte_level_meta(train_byte_level(pre, 1200, SPECIALS, corpus()), PRE, SPECIALS)
    tokens = [t.decode() for t in meta["tokenizer.ggml.tokens"]]
    merges = [m.decode() for m in meta["tokenizer.ggml.merges"]]
    return (tokens, meta["tokenizer.ggml.token_type"], merges), reference_bpe(meta, pre)


def write_gguf(path: Path) -> Path:
    """A tiny qwen2 GGUF (random weights) with the trained vocabulary."""
    vocab, _ = trained()
    write_tiny(path, Tiny(arch="qwen2", n_layers=1, n_heads=2, n_kv_heads=1, d_model=32, d_ff=64,
                          n_merges=len(vocab[0]) - FIRST_MERGE_ID), vocab=vocab)
    return path
