"""Which vocabularies hold Chinese (app_core.examples.reads_chinese, which decides the example texts offered): a
Qwen-style byte-level BPE trained here does, SmolLM2's does not (it spells most characters in bytes)."""
from app_core.examples import CHINESE_PROBE, reads_chinese
from model.tokenizers.from_gguf import build_tokenizer


def test_a_qwen_style_vocabulary_reads_chinese_and_smollm2s_does_not(lm):
    from tests.qwen_style_vocab import PRE, trained

    (tokens, types, merges), _ = trained()
    qwen_style = build_tokenizer({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": PRE,
                                  "tokenizer.ggml.tokens": [t.encode() for t in tokens],
                                  "tokenizer.ggml.token_type": types,
                                  "tokenizer.ggml.merges": [m.encode() for m in merges]}, "qwen-style")
    per_char = len(qwen_style.encode(CHINESE_PROBE)) / len(CHINESE_PROBE)
    assert per_char <= 1.5 and reads_chinese(qwen_style)
    assert len(lm.tokenizer.encode(CHINESE_PROBE)) / len(CHINESE_PROBE) > 1.6 and not reads_chinese(lm.tokenizer)
