"""Every tokenizer a GGUF carries, against independent implementations on thousands of strings:

- SentencePiece ("llama"): a vocabulary trained here by the sentencepiece library (BPE, byte fallback), exported as
  llama.cpp's converter does; ids and decoded text against sentencepiece itself, ids against transformers' own GGUF
  tokenizer conversion;
- byte-level BPE ("gpt2"): a vocabulary trained here by the tokenizers library with each pre-tokenizer's own split
  (the regexes transformers uses for that GGUF pre-tokenizer name, or tokenizers' GPT-2 ByteLevel and Digits);
- build_tokenizer's refusals.
"""
import math
import random

import pytest

from harness.trained_vocabs import (
    CORPUS,
    byte_level_meta,
    reference_bpe,
    sentencepiece_meta,
    train_byte_level,
    train_sentencepiece,
)
from model.tokenizers.from_gguf import build_tokenizer
from model.tokenizers.pretokenizers import PRE_TOKENIZERS
from tests.model.text_samples import chat_string, generated_strings

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
IGNORE_MERGES = {"llama-bpe", "llama3", "llama-v3", "falcon3", "pixtral", "tekken"}  # as llama.cpp sets it


def mismatches(ours, reference, strings):
    return [(s, ours(s), reference(s)) for s in strings if ours(s) != reference(s)]


# ------------------------------------------------------------------------------------------------- SentencePiece
@pytest.fixture(scope="module")
def sp():
    return train_sentencepiece()


@pytest.fixture(scope="module")
def spm_tok(sp):
    return build_tokenizer(sentencepiece_meta(sp), "tiny-spm")


def test_sentencepiece_ids_and_text_match_sentencepiece(sp, spm_tok):
    strings = generated_strings(n=3000, seed=21) + ["<b>", "Count: 1, 2, 3", "  two  spaces  ", "\n\n\t", ""]
    assert spm_tok.prefix_ids == (sp.bos_id(),)  # llama.cpp's default for SentencePiece: add BOS
    bad = mismatches(lambda s: spm_tok.encode(s)[1:], sp.encode, strings)
    assert not bad, f"{len(bad)} of {len(strings)} differ, first: {bad[:3]!r}"
    bad = mismatches(lambda s: spm_tok.decode(spm_tok.encode(s)[1:]), lambda s: sp.decode(sp.encode(s)), strings)
    assert not bad, f"{len(bad)} of {len(strings)} decode differently, first: {bad[:3]!r}"
    assert sum(spm_tok.decode(spm_tok.encode(s)[1:]) == s for s in strings) == len(strings)
    byte_fallback = [s for s in strings if any(spm_tok.token_label(i).startswith("<0x") for i in spm_tok.encode(s))]
    assert len(byte_fallback) > 1000  # the vocabulary is tiny: most strings need byte tokens


def test_sentencepiece_remembers_segments_within_a_bound(sp, monkeypatch):
    """Segment ids are remembered (text repeats its words) up to KNOWN_SEGMENTS, then the memory starts over; the
    ids are sentencepiece's either way, on a fresh tokenizer and on one whose memory holds every segment."""
    from model.tokenizers import sentencepiece as spm_module

    monkeypatch.setattr(spm_module, "KNOWN_SEGMENTS", 50)
    tok = build_tokenizer(sentencepiece_meta(sp), "tiny-spm")
    strings = generated_strings(n=400, seed=5)
    for _ in range(2):                                            # the second pass reads remembered segments
        bad = mismatches(lambda s: tok.encode(s)[1:], sp.encode, strings)
        assert not bad, f"{len(bad)} of {len(strings)} differ, first: {bad[:3]!r}"
        assert 0 < len(tok._known) <= 50


def test_sentencepiece_without_space_prefix_or_bos():
    sp = train_sentencepiece(vocab_size=500, add_dummy_prefix=False)
    tok = build_tokenizer(sentencepiece_meta(sp, add_space_prefix=False, add_bos_token=False), "no-prefix")
    strings = generated_strings(n=1500, seed=22)
    assert tok.prefix_ids == ()
    bad = mismatches(tok.encode, sp.encode, strings)
    assert not bad, f"{len(bad)} of {len(strings)} differ, first: {bad[:3]!r}"
    assert all(tok.decode(tok.encode(s)) == sp.decode(sp.encode(s)) for s in strings)


def test_sentencepiece_matches_transformers_gguf_conversion(sp, spm_tok):
    """transformers builds a tokenizers BPE from the same GGUF metadata (merges recovered from the scores). Its
    Metaspace adds no space before text that starts with one, unlike sentencepiece and llama.cpp: those are left
    out."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer

    meta = sentencepiece_meta(sp)
    reference, _ = convert_gguf_tokenizer("llama", {
        "tokenizer_type": "llama", "tokens": [t.decode() for t in meta["tokenizer.ggml.tokens"]],
        "scores": meta["tokenizer.ggml.scores"], "token_type": meta["tokenizer.ggml.token_type"],
        "bos_token_id": 1, "eos_token_id": 2, "unk_token_id": 0})
    strings = [s for s in generated_strings(n=3000, seed=23) if not s.startswith(" ")]
    assert len(strings) > 2500
    bad = mismatches(lambda s: spm_tok.encode(s)[1:], lambda s: reference.encode(s, add_special_tokens=False).ids,
                     strings)
    assert not bad, f"{len(bad)} of {len(strings)} differ, first: {bad[:3]!r}"


def test_sentencepiece_special_tokens_are_whole_and_each_run_gets_a_space(sp, spm_tok):
    """As llama.cpp: control and unknown-token strings in the text become their id; the text after each gets the
    space prefix again."""
    text = "<s>Hi</s> there<unk>中文"
    assert spm_tok.encode(text) == [1, 1, *sp.encode("Hi"), 2, *sp.encode(" there"), 0, *sp.encode("中文")]
    assert spm_tok.pieces("<s>Hi")[0] == "<s>" and spm_tok.special_ids == {0, 1, 2}
    assert spm_tok.encode("") == [1]


def test_sentencepiece_labels_are_readable(sp, spm_tok):
    ids = spm_tok.encode("the\n龘😀")[1:]
    assert spm_tok.token_strings(ids) == [
        "␣the", "↵", "龘¹⁄₃", "龘²⁄₃", "龘³⁄₃", "😀¹⁄₄", "😀²⁄₄", "😀³⁄₄", "😀⁴⁄₄"]
    assert [spm_tok.token_label(i) for i in ids][2:5] == ["<0xE9>", "<0xBE>", "<0x98>"]   # a byte on its own
    assert [sp.id_to_piece(i) for i in ids][:2] == ["▁the", "<0x0A>"]
    assert spm_tok.token_strings([1, 2, 0]) == ["<s>", "</s>", "<unk>"]
    assert spm_tok.token_bytes(ids[1]) == b"\n" and spm_tok.decode(ids) == "the\n龘😀"


def test_sentencepiece_pieces_join_to_the_text_with_its_space_prefix(spm_tok):
    for s in generated_strings(n=500, seed=24):
        if "<" not in s and "▁" not in s:
            assert "".join(spm_tok.pieces(s)) == (" " + s if s else "")


def test_sentencepiece_piece_counts_add_up_to_sentencepiece_tokens(sp, spm_tok):
    """Each piece's count (what Inside a block picks the first split piece by) is what sentencepiece gives it."""
    from model.tokenizers.bpe_walk import piece_token_count

    for s in generated_strings(n=300, seed=25):
        if "<" not in s:
            assert sum(piece_token_count(spm_tok, p) for p in spm_tok.pieces(s)) == len(sp.encode(s)), s


@pytest.mark.parametrize("bc_score, parts", [(-5.0, ["ab", "c"]), (-4.0, ["a", "bc"])])
def test_sentencepiece_joins_the_highest_score_and_the_leftmost_on_a_tie(bc_score, parts):
    from model.tokenizers.bpe_walk import bpe_walk

    pieces = [("▁", -1.0), ("a", -1.0), ("b", -1.0), ("c", -1.0), ("ab", -5.0), ("bc", bc_score)]
    tok = build_tokenizer(spm_meta(pieces, **{"tokenizer.ggml.add_space_prefix": False}), "ties")
    ids = tok.encode("abc")[1:]
    assert tok.token_strings(ids) == parts
    assert bpe_walk(tok, "abc").tokens == tuple(ids)


# ---------------------------------------------------------------------------------------------- byte-level BPE
def transformers_split(name: str):
    """transformers' own split regex for a GGUF pre-tokenizer name (its GGUF tokenizer conversion)."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS

    return GGUF_PRE_TOKENIZER_SPLITS[name]


def reference_pre_tokenizer(name: str):
    """The pre-tokenizer of the original tokenizer.json for a GGUF pre-tokenizer name."""
    from tokenizers import Regex, pre_tokenizers

    if name == "gpt-2":
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if name == "smollm":
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(transformers_split(name)), behavior="isolated"),
                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def with_transformers_split() -> list[str]:
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS

    return sorted(set(PRE_TOKENIZERS) & set(GGUF_PRE_TOKENIZER_SPLITS))


_TRAINED: dict[str, object] = {}


def trained(name: str):
    """A byte-level BPE trained with the reference pre-tokenizer of name (one per distinct split)."""
    key = transformers_split(name) if name not in ("gpt-2", "smollm") else name
    if key not in _TRAINED:
        corpus = CORPUS + generated_strings(n=1500, seed=31)
        _TRAINED[key] = train_byte_level(reference_pre_tokenizer(name), 1200, SPECIALS, corpus)
    return _TRAINED[key]


@pytest.fixture(scope="module")
def byte_level_strings():
    rng = random.Random(32)
    return generated_strings(n=1500, seed=33) + [chat_string(rng) for _ in range(300)] + [
        "year 2024: 1234567 items", "I'M HERE, it'S 'Ll", "a\r\n\r\nb  \n  c", "x'ſ y", "Count: 1, 2, 3", "<b>"]


@pytest.mark.parametrize("name", ["gpt-2", "smollm", *with_transformers_split()])
def test_byte_level_bpe_matches_tokenizers(name, byte_level_strings):
    """Our tokenizer from the GGUF metadata of a vocabulary trained with the pre-tokenizer's own split, against
    tokenizers over the same vocabulary (ignore_merges where llama.cpp sets it: the Llama 3 family, Tekken)."""
    reference_tokenizer = trained(name)
    meta = byte_level_meta(reference_tokenizer, name, SPECIALS)
    ours = build_tokenizer(meta, name)
    assert ours.prefix_ids == ((0,) if PRE_TOKENIZERS[name].add_bos else ())
    reference = reference_bpe(meta, reference_pre_tokenizer(name), ignore_merges=name in IGNORE_MERGES)
    bad = mismatches(lambda s: ours.encode(s)[len(ours.prefix_ids):], lambda s: reference.encode(s).ids,
                     byte_level_strings)
    assert not bad, f"{len(bad)} of {len(byte_level_strings)} differ, first: {bad[:3]!r}"
    assert all("".join(ours.pieces(s)) == s for s in byte_level_strings[:300])


def test_pre_tokenizers_split_differently(byte_level_strings):
    """The supported splits are really different (so each comparison above tests its own regexes)."""
    splits = {pre.patterns: pre for pre in PRE_TOKENIZERS.values()}.values()
    cuts = {tuple(tuple(pre.split(s)) for s in byte_level_strings[:600]) for pre in splits}
    assert len(cuts) == len(splits)


# ------------------------------------------------------------------------------------------ build_tokenizer errors
def spm_meta(pieces=(("▁", -1.0), ("a", -2.0), ("▁a", -3.0)), **changes):
    """A hand-made SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens, then pieces (text, score)."""
    meta = {"tokenizer.ggml.model": "llama",
            "tokenizer.ggml.tokens": [b"<unk>", b"<s>", b"</s>"] + [f"<0x{b:02X}>".encode() for b in range(256)] + [
                text.encode() for text, _ in pieces],
            "tokenizer.ggml.scores": [0.0] * 259 + [score for _, score in pieces],
            "tokenizer.ggml.token_type": [2, 3, 3] + [6] * 256 + [1] * len(pieces),
            "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2}
    return meta | changes


def bpe_meta(**changes):
    meta = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
            "tokenizer.ggml.tokens": [b"<|endoftext|>", b"a", b"b", b"ab"], "tokenizer.ggml.token_type": [3, 1, 1, 1],
            "tokenizer.ggml.merges": [b"a b"], "tokenizer.ggml.bos_token_id": 0}
    return meta | changes


def test_valid_metadata_builds_both_kinds():
    assert build_tokenizer(spm_meta(), "x").encode("a a") == [1, 261, 261]
    assert build_tokenizer(bpe_meta(), "x").encode("abab<|endoftext|>") == [3, 3, 0]
    assert build_tokenizer(bpe_meta(**{"tokenizer.ggml.pre": "llama-bpe"}), "x").prefix_ids == (0,)


@pytest.mark.parametrize("meta, words", [
    (bpe_meta(**{"tokenizer.ggml.model": "rwkv"}), r"tokenizer model 'rwkv' \(tokenizer.ggml.model\) is not supported"),
    (bpe_meta(**{"tokenizer.ggml.pre": None}), "does not name its pre-tokenizer"),
    (bpe_meta(**{"tokenizer.ggml.pre": "mystery"}), r"pre-tokenizer 'mystery' \(tokenizer.ggml.pre\) is not "
                                                    r"supported.*supported: .*qwen2"),
    (bpe_meta(**{"tokenizer.ggml.merges": None}), r"no BPE merges \(tokenizer.ggml.merges\)"),
    (bpe_meta(**{"tokenizer.ggml.tokens": []}), r"no vocabulary \(tokenizer.ggml.tokens\)"),
    (bpe_meta(**{"tokenizer.ggml.token_type": [3, 1, 1]}), "4 tokens but 3 token types"),
    (bpe_meta(**{"tokenizer.ggml.bos_token_id": 4, "tokenizer.ggml.add_bos_token": True}),
     r"BOS token id 4 is outside the vocabulary \(0..3\)"),
    (bpe_meta(**{"tokenizer.ggml.eos_token_id": 70000}), "EOS token id 70000 is outside the vocabulary"),
    (bpe_meta(**{"tokenizer.ggml.bos_token_id": None, "tokenizer.ggml.add_bos_token": True}),
     r"asks for a BOS token .* does not say which \(tokenizer.ggml.bos_token_id\)"),
    (bpe_meta(**{"tokenizer.ggml.pre": "llama-bpe", "tokenizer.ggml.bos_token_id": None}), "does not say which"),
    (bpe_meta(**{"tokenizer.ggml.add_eos_token": True}), "appends an end-of-sequence token"),
    (bpe_meta(**{"tokenizer.ggml.merges": [b"b a"]}), "merge #0 .* does not make a normal token"),
    (bpe_meta(**{"tokenizer.ggml.tokens": [b"<|endoftext|>", b"a", b"b", b"a b"]}), "not a byte-level BPE token"),
    (bpe_meta(**{"tokenizer.ggml.merges": []}), r"no BPE merges"),
    (spm_meta(**{"tokenizer.ggml.scores": None}), r"no token scores \(tokenizer.ggml.scores\)"),
    (spm_meta(**{"tokenizer.ggml.scores": [0.0] * 261 + [math.nan]}), r"has no valid score \(NaN\)"),
    (spm_meta(**{"tokenizer.ggml.bos_token_id": 262}), "BOS token id 262 is outside the vocabulary"),
    (spm_meta(**{"tokenizer.ggml.token_type": [2, 3, 3] + [6] * 255 + [1] * 4}),
     r"lacks 1 byte tokens \(first: <0xFF>\).*byte-fallback"),
    (spm_meta(**{"tokenizer.ggml.tokens": [b"<unk>", b"<s>", b"</s>", b"<0xZZ>"] + [
        f"<0x{b:02X}>".encode() for b in range(1, 256)] + [b"\xe2\x96\x81", b"a", b"\xe2\x96\x81a"]}),
     r"token 3 \('<0xZZ>'\) is marked as a byte token but is not <0xNN>"),
    (spm_meta(**{"tokenizer.ggml.tokens": spm_meta()["tokenizer.ggml.tokens"][:-1] + [b"\xe2\x96\x81b"]}),
     "holds the character 'b', which is no token of its own"),
    (spm_meta(**{"tokenizer.ggml.remove_extra_whitespaces": True}), "removes repeated spaces"),
    (spm_meta(**{"tokenizer.ggml.scores": [0.0] * 261}), "262 tokens but 261 scores"),
    (spm_meta(**{"tokenizer.ggml.tokens": [b"\xff"] + spm_meta()["tokenizer.ggml.tokens"][1:]}),
     r"token 0 \(b'\\xff'\) is not UTF-8 text"),
])
def test_build_tokenizer_refuses_what_it_cannot_do_exactly(meta, words):
    with pytest.raises(ValueError, match=words):
        build_tokenizer(meta, "bad")
