"""Our tokenizer of the real SmolLM2 GGUF against the reference `tokenizers` BPE built from the same vocab/merges."""
import functools
import random

import pytest

from harness.trained_vocabs import gguf_tokenizer_meta, reference_bpe
from model.files.gguf import default_model_path, read_gguf
from model.tokenizers.from_gguf import build_tokenizer
from model.tokenizers.labels import readable_token, sequence_labels
from tests.model.text_samples import chat_string, generated_strings


@functools.cache
def smollm_meta() -> dict:
    """The installed SmolLM2 GGUF's tokenizer metadata."""
    return gguf_tokenizer_meta(default_model_path())


def smollm_bpe(pre_tokenizer, ignore_merges: bool = False):
    """tokenizers BPE over SmolLM2's vocab/merges with its control tokens as special tokens."""
    return reference_bpe(smollm_meta(), pre_tokenizer, ignore_merges)


@pytest.fixture(scope="module")
def reference_tokenizer():
    import tokenizers

    return smollm_bpe(tokenizers.pre_tokenizers.Sequence([
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


@pytest.mark.parametrize("pre", ["gpt-2", "llama-bpe", "qwen2"])
def test_other_pre_tokenizers_match_tokenizers(pre):
    """The gpt-2, llama-bpe and qwen2 pre-tokenizers on SmolLM2's vocabulary (read by build_tokenizer from the real
    file's metadata, the pre-tokenizer name changed), against tokenizers' ByteLevel (GPT-2 regex) and the
    Split + ByteLevel pipelines with the regexes transformers uses for those names (ignore_merges for Llama 3)."""
    from tokenizers import Regex, pre_tokenizers
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS

    if pre == "gpt-2":
        reference = smollm_bpe(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True))
    else:
        reference = smollm_bpe(pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(GGUF_PRE_TOKENIZER_SPLITS[pre]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), ignore_merges=pre == "llama-bpe")
    no_bos = {"tokenizer.ggml.add_bos_token": False}
    ours = build_tokenizer(smollm_meta() | no_bos | {"tokenizer.ggml.pre": pre}, "smollm2")
    rng = random.Random(3)
    strings = generated_strings(n=1500, seed=5) + [chat_string(rng) for _ in range(300)] + [
        "year 2024: 1234567 items", "I'M HERE, it'S 'Ll", "a\r\n\r\nb  \n  c", "x'ſ y"]
    mismatches = [(s, ours.encode(s), reference.encode(s).ids) for s in strings
                  if ours.encode(s) != reference.encode(s).ids]
    assert not mismatches, f"{len(mismatches)} of {len(strings)} differ, first: {mismatches[:3]!r}"
    smollm = build_tokenizer(smollm_meta() | no_bos, "smollm2")
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
    assert readable_token(" a\u200bb\r".encode()) == "␣a<U+200B>b⏎"          # one invisible character among others
    assert readable_token("é".encode() + "世".encode()[:1]) == "é<0xE4>"     # whole characters, then a partial one
    assert readable_token(b"") == ""


def test_a_character_split_over_tokens_is_labelled_with_its_parts():
    wo, men = "我".encode(), "们".encode()                         # 3 bytes each: e6 88 91, e4 bb ac
    labels = sequence_labels([wo[:2], wo[2:] + men[:1], men[1:], b"!"])
    assert labels == ["我¹⁄₂", "我²⁄₂们¹⁄₂", "们²⁄₂", "!"]
    assert [label.raw for label in labels[:3]] == ["<0xE6><0x88>", "<0x91><0xE4>", "<0xBB><0xAC>"]
    assert sequence_labels([b"\xe6", b"a"]) == ["<0xE6>", "a"]     # a byte that makes no character stays a byte
    assert sequence_labels([b" a", b"\n"]) == ["␣a", "↵"] and sequence_labels([]) == []


def test_a_chinese_sentence_on_the_built_in_model_reads_as_characters(lm):
    """Every token of the sentence is labelled with the characters its bytes belong to (SmolLM2 splits most of
    them into byte tokens), none as <0xNN>; each split character's parts are numbered 1..n over its tokens."""
    text = "我们在课堂上学习注意力机制。"
    ids = lm.encode(text)
    labels = lm.token_strings(ids)
    assert not any("<0x" in label for label in labels)
    offsets = [0]
    for i in ids:
        offsets.append(offsets[-1] + len(lm.tokenizer.token_bytes(i)))
    char_starts = [len(text[:k].encode()) for k in range(len(text) + 1)]
    for k, label in enumerate(labels):
        touched = [text[c] for c in range(len(text))
                   if char_starts[c] < offsets[k + 1] and offsets[k] < char_starts[c + 1]]
        assert label.translate(str.maketrans("", "", "⁰¹²³⁴⁵⁶⁷⁸⁹⁄₀₁₂₃₄₅₆₇₈₉")) == "".join(touched), (k, label)
    split = [label for label in labels if "⁄" in label]
    assert len(split) >= 10 and len(labels) > len(text)


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


def test_build_tokenizer_reads_the_real_file_as_the_loader_does(lm):
    ours = build_tokenizer(smollm_meta(), "smollm2")
    assert ours.prefix_ids == () and ours.eos_token_id == 2 and ours.vocab_size == 49152
    assert all(ours.encode(s) == lm.encode(s) for s in generated_strings(n=500, seed=8))
