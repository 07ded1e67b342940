"""Our tiktoken-based tokenizer against the reference `tokenizers` BPE built from the same GGUF vocab/merges."""
import random

import pytest

from model.files.gguf import read_gguf
from model.tokenizers.byte_bpe import Tokenizer, readable_token

# Llama 3's published split regex (its tokenizer.json; llama.cpp src/llama-vocab.cpp quotes it).
LLAMA3_TOKENIZER_JSON_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

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


CONTROL_WORDS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<file_sep>", "<jupyter_code>", "<|im_", "im_end|>",
                 "<|", "|>", "<<|im_end|>>", "<|im_start|><|im_end|>", "<|endoftext|", "<filename", "<|IM_END|>"]


def chat_string(rng: random.Random) -> str:
    """Control tokens mixed with text: adjacent, at the start or end, inside words, partial ones that stay text."""
    parts = []
    for _ in range(rng.randrange(1, 10)):
        kind = rng.randrange(4)
        if kind == 0:
            parts.append(rng.choice(CONTROL_WORDS))
        elif kind == 1:
            parts.append(rng.choice(WORDS) + rng.choice(CONTROL_WORDS) + rng.choice(WORDS))  # inside a word
        elif kind == 2:
            parts.append(rng.choice(["user", "assistant", "system"]) + rng.choice(["\n", " ", "", "\n\n"]))
        else:
            parts.append(random_string(rng))
    return "".join(parts)


def gguf_vocab():
    """SmolLM2's tokens, token types and merges (strings) from the installed GGUF."""
    import gguf

    g = read_gguf()
    merges_field = gguf.GGUFReader(g.path).fields["tokenizer.ggml.merges"]
    return g.tokens, g.token_types, [bytes(merges_field.parts[i]) for i in merges_field.data]


def reference_bpe(pre_tokenizer, ignore_merges: bool = False):
    """tokenizers BPE over SmolLM2's vocab/merges, control tokens added as special tokens the way transformers'
    tokenizer.json declares them (whole-string match anywhere, not normalized)."""
    import tokenizers

    tokens, token_types, merges = gguf_vocab()
    vocab = {t.decode("utf-8"): i for i, t in enumerate(tokens)}
    pairs = [tuple(m.decode("utf-8").split(" ")) for m in merges]
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=pairs, ignore_merges=ignore_merges))
    bpe.pre_tokenizer = pre_tokenizer
    bpe.decoder = tokenizers.decoders.ByteLevel()
    bpe.add_special_tokens([tokenizers.AddedToken(t.decode("utf-8"), special=True, normalized=False)
                            for t, kind in zip(tokens, token_types, strict=True) if kind == 3])
    return bpe


@pytest.fixture(scope="module")
def reference_tokenizer():
    import tokenizers

    return reference_bpe(tokenizers.pre_tokenizers.Sequence([
        tokenizers.pre_tokenizers.Digits(individual_digits=True),
        tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)]))


def test_identical_ids_on_generated_strings(lm, reference_tokenizer):
    strings = generated_strings()
    assert len(strings) >= 2000
    mismatches = [(s, lm.encode(s), reference_tokenizer.encode(s).ids) for s in strings
                  if lm.encode(s) != reference_tokenizer.encode(s).ids]
    assert not mismatches, f"{len(mismatches)} of {len(strings)} differ, first: {mismatches[:3]!r}"


def test_identical_ids_on_strings_with_control_tokens(lm, reference_tokenizer):
    rng = random.Random(7)
    strings = [chat_string(rng) for _ in range(1500)]
    assert sum("<|im_end|>" in s for s in strings) > 300 and sum("<|im_" in s.replace("<|im_end|>", "").replace(
        "<|im_start|>", "") for s in strings) > 100
    mismatches = [(s, lm.encode(s), reference_tokenizer.encode(s).ids) for s in strings
                  if lm.encode(s) != reference_tokenizer.encode(s).ids]
    assert not mismatches, f"{len(mismatches)} of {len(strings)} differ, first: {mismatches[:3]!r}"


def test_control_tokens_are_single_tokens_with_their_own_label(lm):
    ids = lm.encode("<|im_start|>user\nHi!<|im_end|>\n<|im_")
    assert ids[0] == 1 and ids[5] == 2
    assert lm.token_strings(ids) == ["<|im_start|>", "user", "↵", "Hi", "!", "<|im_end|>", "↵", "<", "|", "im", "_"]
    assert lm.decode(ids) == "<|im_start|>user\nHi!<|im_end|>\n<|im_"


@pytest.mark.parametrize("pre", ["gpt-2", "llama-bpe"])
def test_other_pre_tokenizers_match_tokenizers(pre):
    """The split patterns of the gpt-2 and llama-bpe pre-tokenizers, on SmolLM2's vocabulary, against tokenizers'
    ByteLevel (GPT-2 regex) and the Llama 3 tokenizer.json Split + ByteLevel (ignore_merges) pipelines."""
    import tokenizers
    from tokenizers import pre_tokenizers

    if pre == "gpt-2":
        reference = reference_bpe(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True))
    else:
        reference = reference_bpe(pre_tokenizers.Sequence([
            pre_tokenizers.Split(tokenizers.Regex(LLAMA3_TOKENIZER_JSON_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), ignore_merges=True)
    tokens, token_types, merges = gguf_vocab()
    ours = Tokenizer(tokens, token_types, merges, pre=pre)
    rng = random.Random(3)
    strings = generated_strings(n=1500, seed=5) + [chat_string(rng) for _ in range(300)] + [
        "year 2024: 1234567 items", "I'M HERE, it'S 'Ll", "a\r\n\r\nb  \n  c", "x'ſ y"]
    mismatches = [(s, ours.encode(s), reference.encode(s).ids) for s in strings
                  if ours.encode(s) != reference.encode(s).ids]
    assert not mismatches, f"{len(mismatches)} of {len(strings)} differ, first: {mismatches[:3]!r}"
    smollm = Tokenizer(tokens, token_types, merges, pre="smollm")
    assert sum(ours.encode(s) != smollm.encode(s) for s in strings) > 50  # the pattern matters on these strings


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


def test_chat_example_is_the_models_own_chat_template(lm, reference_tokenizer):
    """assets/examples.json's chat example == the GGUF's tokenizer.chat_template rendered by transformers'
    apply_chat_template from the example's messages."""
    import json
    from pathlib import Path

    import transformers

    examples = json.loads((Path(__file__).resolve().parents[2] / "assets/examples.json").read_text(encoding="utf-8"))
    chat = next(e for e in examples if "messages" in e)
    template = read_gguf().chat_template
    assert "<|im_start|>" in template
    hf_tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=reference_tokenizer, chat_template=template)
    rendered = hf_tokenizer.apply_chat_template(chat["messages"], tokenize=False,
                                                add_generation_prompt=chat["add_generation_prompt"])
    assert rendered == chat["text"]
    ids = lm.encode(chat["text"])
    assert ids == reference_tokenizer.encode(chat["text"]).ids
    assert lm.token_strings(ids).count("<|im_start|>") == len(chat["messages"]) + 2  # + system + generation prompt
