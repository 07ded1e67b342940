"""Our tiktoken-based tokenizer against the reference `tokenizers` BPE built from the same GGUF vocab/merges."""
import random

import pytest

from model.gguf import read_gguf
from model.tokenizer import readable_token

WORDS = ["the", "The", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "attention", "is", "all", "you",
         "need", "transformer", "héllo", "naïve", "Zürich", "東京", "日本語", "한국어", "Ёжик", "مرحبا", "שלום",
         "🙂", "🚀🌍", "👩‍💻", "e\u0301", "a\u200bb", "\u202eRTL\u202c", "don't", "I'm", "we'll", "they've",
         "it's", "O'Neil", "x86_64", "foo_bar", "<|im_start|>", "<|endoftext|>", "\x04", "\x13\x14", "\x1d",
         "\U00040001", "\U000b0000", "\U00010348", "\ufeff", "\u00a0", "\u3000", "\x00", "\x7f"]
CODE = ["def f(x):\n    return x ** 2\n", "for (int i = 0; i < 10; ++i) {\n\tsum += a[i];\n}",
        "SELECT * FROM t WHERE id = 42;", "<div class=\"a\">&nbsp;</div>", "λx. x + 1", "x = [1, 2, 3]  # list",
        "if __name__ == '__main__':\n    main()", "    \n\n\t  \r\n", "{\"key\": [1.5e-3, null, true]}"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", " \n ", "\r\n", "\u00a0", "\u2003"]


def random_string(rng: random.Random) -> str:
    kind = rng.randrange(7)
    if kind == 0:  # prose
        return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 25))) + rng.choice([".", "!", "?", ""])
    if kind == 1:  # code
        return "".join(rng.choice(CODE) for _ in range(rng.randrange(1, 4)))
    if kind == 2:  # numbers, whitespace runs before digits
        parts = [rng.choice(SPACES) * rng.randrange(1, 4) + str(rng.randrange(10 ** rng.randrange(1, 12)))
                 for _ in range(rng.randrange(1, 8))]
        return rng.choice(["", "x", "v", "$", "-"]) + "".join(parts) + rng.choice(["", "%", " km", ".5", ",000"])
    if kind == 3:  # CJK and emoji
        return "".join(chr(rng.choice([rng.randrange(0x4E00, 0x9FFF), rng.randrange(0x1F300, 0x1FAFF),
                                       rng.randrange(0x3040, 0x30FF), rng.randrange(0xAC00, 0xD7A3)]))
                       for _ in range(rng.randrange(1, 20)))
    if kind == 4:  # random unicode over all planes, surrogates excluded
        chars = []
        for _ in range(rng.randrange(1, 30)):
            cp = rng.choice([rng.randrange(0, 0x80), rng.randrange(0x80, 0x800), rng.randrange(0x800, 0xD800),
                             rng.randrange(0xE000, 0x10000), rng.randrange(0x10000, 0x110000)])
            chars.append(chr(cp))
        return "".join(chars)
    if kind == 5:  # ASCII soup with punctuation runs
        soup = "abcXYZ019 .,;:!?'\"()[]{}-_=+*/\\\n\t#@$%^&|~`<>"
        return "".join(rng.choice(soup) for _ in range(rng.randrange(1, 60)))
    return "".join(rng.choice(WORDS + SPACES + CODE) for _ in range(rng.randrange(1, 12)))


def generated_strings(n: int = 2400, seed: int = 1234) -> list[str]:
    rng = random.Random(seed)
    return [random_string(rng) for _ in range(n)]


@pytest.fixture(scope="module")
def reference_tokenizer():
    import gguf
    import tokenizers

    g = read_gguf()
    reader = gguf.GGUFReader(g.path)
    merges_field = reader.fields["tokenizer.ggml.merges"]
    merges = [tuple(bytes(merges_field.parts[i]).decode("utf-8").split(" ")) for i in merges_field.data]
    vocab = {t.decode("utf-8"): i for i, t in enumerate(g.tokens)}
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=merges))
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.Sequence([
        tokenizers.pre_tokenizers.Digits(individual_digits=True),
        tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)])
    bpe.decoder = tokenizers.decoders.ByteLevel()
    return bpe


def test_identical_ids_on_generated_strings(lm, reference_tokenizer):
    strings = generated_strings()
    assert len(strings) >= 2000
    mismatches = [(s, lm.encode(s), reference_tokenizer.encode(s).ids) for s in strings
                  if lm.encode(s) != reference_tokenizer.encode(s).ids]
    assert not mismatches, f"{len(mismatches)} of {len(strings)} differ, first: {mismatches[:3]!r}"


def test_identical_ids_on_the_21_untokenizable_bytes(lm, reference_tokenizer):
    missing = lm.tokenizer.missing_bytes
    assert len(missing) == 21
    texts = ["a\x04b!!\x06!", "x\x13\x14\x16 y", "\x1d1\x1d2", "end\U00040000x", "\U000bffff\U00050000!"]
    for text in texts:
        assert lm.encode(text) == reference_tokenizer.encode(text).ids, text


def test_decode_inverts_encode_for_encodable_strings(lm):
    missing = set(lm.tokenizer.missing_bytes)
    checked = 0
    for s in generated_strings(n=1000, seed=99):
        if missing.isdisjoint(s.encode("utf-8")):
            assert lm.decode(lm.encode(s)) == s
            checked += 1
    assert checked > 500


def test_digits_are_split_one_by_one(lm):
    assert lm.token_strings(lm.encode("year 2024")) == ["year", "␣", "2", "0", "2", "4"]


def test_readable_labels():
    assert readable_token(b" the") == "␣the"
    assert readable_token(b"\n\n") == "↵↵"
    assert readable_token(b"\t") == "⇥"
    assert readable_token("é".encode()) == "é"
    assert readable_token("世".encode()[:2]) == "<0xE4><0xB8>"
    assert readable_token(b"\x00") == "<U+0000>"
