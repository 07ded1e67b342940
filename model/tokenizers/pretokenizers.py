"""Pre-tokenizers of byte-level BPE vocabularies, by their GGUF name (`tokenizer.ggml.pre`).

A pre-tokenizer cuts text into pieces that BPE merges separately. Each is a list of regexes applied in turn, each
cutting every piece into its matches and the text between them, as llama.cpp's llm_tokenizer_bpe does (its
LLAMA_VOCAB_PRE_TYPE_* cases in src/llama-vocab.cpp, the names from llama_vocab::impl::load). The regexes are the
original tokenizer.json ones (llama.cpp spells the case-insensitive contractions as [sS] instead; `(?i:...)` also
folds 'ſ', as the original does).
"""
from __future__ import annotations

import regex

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
DIGIT = r"\p{N}"  # tokenizers' Digits(individual_digits=True)
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
          r"|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
         r"|\s+(?!\S)|\s+")
QWEN35 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
          r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
          r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT4O = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


class PreTokenizer:
    """A byte-level BPE vocabulary's split and llama.cpp's add-BOS default for it."""

    def __init__(self, patterns: tuple[str, ...], add_bos: bool = False):
        """patterns: applied in turn, matches and the text between them become pieces; add_bos: whether encode
        starts with BOS when the file has no tokenizer.ggml.add_bos_token."""
        self.patterns = patterns
        self.add_bos = add_bos
        self._compiled = tuple(regex.compile(p) for p in patterns)

    def split(self, text: str) -> list[str]:
        """text cut into the pieces BPE merges separately (they join back to text)."""
        pieces = [text] if text else []
        for pattern in self._compiled:
            pieces = [part for piece in pieces for part in _isolate(pattern, piece)]
        return pieces


def _isolate(pattern: regex.Pattern, text: str) -> list[str]:
    """text as its matches and the runs between them, in order (tokenizers' Split behavior "isolated")."""
    parts: list[str] = []
    end = 0
    for match in pattern.finditer(text):
        if match.start() == match.end():
            continue
        if match.start() > end:
            parts.append(text[end:match.start()])
        parts.append(match.group())
        end = match.end()
    if end < len(text):
        parts.append(text[end:])
    return parts


_GPT2 = PreTokenizer((GPT2,))
_SMOLLM = PreTokenizer((DIGIT, GPT2))
_LLAMA3 = PreTokenizer((LLAMA3,), add_bos=True)
_QWEN2 = PreTokenizer((QWEN2,))
PRE_TOKENIZERS: dict[str, PreTokenizer] = {
    **dict.fromkeys(("gpt-2", "phi-2", "mpt", "olmo"), _GPT2),
    **dict.fromkeys(("smollm", "starcoder", "refact", "codeshell", "minerva-7b"), _SMOLLM),
    **dict.fromkeys(("llama-bpe", "llama3", "llama-v3", "falcon3", "pixtral"), _LLAMA3),
    **dict.fromkeys(("smaug-bpe", "dbrx"), PreTokenizer((LLAMA3,))),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"), _QWEN2),
    "qwen35": PreTokenizer((QWEN35,)),
    "tekken": PreTokenizer((TEKKEN,), add_bos=True),
    **dict.fromkeys(("gpt-4o", "llama4"), PreTokenizer((GPT4O,))),
}


def pre_tokenizer(name: str | None) -> PreTokenizer:
    """The pre-tokenizer a GGUF names; ValueError naming it and the supported ones when there is none."""
    if name is None:
        raise ValueError("it does not name its pre-tokenizer (tokenizer.ggml.pre), so how it splits text is unknown. "
                         "Convert it again with a recent llama.cpp convert_hf_to_gguf.py")
    if name not in PRE_TOKENIZERS:
        raise ValueError(f"its pre-tokenizer '{name}' (tokenizer.ggml.pre) is not supported by this app; supported: "
                         f"{', '.join(sorted(PRE_TOKENIZERS))}")
    return PRE_TOKENIZERS[name]
