"""Encoding speed of this app's SentencePiece tokenizer against the `tokenizers` library (Rust) and the
`sentencepiece` library (C++) on the same vocabulary, and a byte-level BPE (Qwen-style) against `tokenizers`.

    python -m bench.bench_tokenizers [--runs 5] [--vocab 8000]

The SentencePiece vocabulary is trained here by the sentencepiece library (BPE with byte fallback, Llama 2's trainer
settings) on the course's notes and this repository's README / ARCHITECTURE (Chinese and English lines; no real
Llama vocabulary is on this machine), exported as llama.cpp's converter does, and read by build_tokenizer; the
`tokenizers` reference is transformers' GGUF conversion of the same metadata. Every string's ids are checked equal
first. Numbers: median of --runs passes over every line; "first pass" starts from an empty segment memory.
"""
from __future__ import annotations

import argparse
import io
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTES = ROOT.parent / "shared" / "course-notes"


def corpus() -> list[str]:
    """The notes' non-empty lines, then README.md's and ARCHITECTURE.md's."""
    files = sorted(NOTES.glob("*.md")) + [ROOT / "README.md", ROOT / "ARCHITECTURE.md"]
    return [line for f in files for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]


def median_pass(encode, strings: list[str], runs: int, before=None) -> float:
    times = []
    for _ in range(runs):
        if before:
            before()
        t0 = time.perf_counter()
        for s in strings:
            encode(s)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    import sentencepiece as spm
    from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer

    from harness.trained_vocabs import sentencepiece_meta
    from model.tokenizers.from_gguf import build_tokenizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--vocab", type=int, default=8000)
    args = parser.parse_args()
    lines = corpus()
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, model_type="bpe", vocab_size=args.vocab,
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=True, split_digits=True, allow_whitespace_only_pieces=True, character_coverage=0.9995,
        minloglevel=2, num_threads=2)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    meta = sentencepiece_meta(sp)
    reference, _ = convert_gguf_tokenizer("llama", {
        "tokenizer_type": "llama", "tokens": [t.decode() for t in meta["tokenizer.ggml.tokens"]],
        "scores": meta["tokenizer.ggml.scores"], "token_type": meta["tokenizer.ggml.token_type"],
        "bos_token_id": 1, "eos_token_id": 2, "unk_token_id": 0})
    ours = build_tokenizer(meta, "bench")
    strings = [s for s in lines if not s.startswith(" ")]   # the conversion's Metaspace differs on a leading space
    bad = sum(ours.encode(s)[1:] != reference.encode(s, add_special_tokens=False).ids for s in strings)
    print(f"SentencePiece vocabulary of {sp.vocab_size():,} pieces, {len(strings):,} strings "
          f"({sum(map(len, strings)):,} characters); ids differing from tokenizers: {bad}")
    rust = median_pass(lambda s: reference.encode(s, add_special_tokens=False), strings, args.runs)
    cpp = median_pass(sp.encode, strings, args.runs)
    warm = median_pass(ours.encode, strings, args.runs)
    first = median_pass(ours.encode, strings, args.runs, before=ours._known.clear)
    print(f"tokenizers     {rust * 1e3:8.1f} ms")
    print(f"sentencepiece  {cpp * 1e3:8.1f} ms")
    print(f"ours           {warm * 1e3:8.1f} ms  {warm / rust:.2f}x tokenizers, {warm / cpp:.2f}x sentencepiece")
    print(f"ours, 1st pass {first * 1e3:8.1f} ms  {first / rust:.2f}x tokenizers")


if __name__ == "__main__":
    main()
