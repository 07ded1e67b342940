"""Time of the encoder families at published shapes (random weights: no real BERT or T5 GGUF is on this machine):
loading the GGUF, a BERT pass, a T5 pass on a source and a target, and T5's greedy generation with its per-step
cross-attention rows.

    python -m bench.bench_encoders [--runs 3] [--tokens 128] [--new 32]

The files are written by harness/tiny_encoders.py (as llama.cpp's converter writes them, F16 matrices) at BERT-base's
and flan-t5-small's shapes with the tests' small vocabularies (the vocabulary changes only the embedding lookup and
T5's LM head). Numbers: median of --runs; the machine's load at the time changes them.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def median_seconds(work, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128, help="tokens of the text (BERT) and of the source (T5)")
    parser.add_argument("--new", type=int, default=32, help="tokens T5 generates")
    args = parser.parse_args()

    import torch

    from harness.tiny_encoders import TinyBert, TinyT5, write_bert, write_t5
    from model import load_model

    folder = Path(tempfile.mkdtemp())
    bert_path, t5_path = folder / "bert-base-shape.gguf", folder / "flan-t5-small-shape.gguf"
    write_bert(bert_path, TinyBert(d_model=768, n_heads=12, d_ff=3072, n_layers=12, context=512))
    write_t5(t5_path, TinyT5(d_model=512, n_heads=6, d_kv=64, d_ff=1024, n_layers=8, n_decoder_layers=8, buckets=32))
    print(f"torch threads: {torch.get_num_threads()}")

    bert = load_model(bert_path)
    print(f"BERT-base shape: load {median_seconds(lambda: load_model(bert_path), args.runs):.2f} s")
    text = " ".join(["attention"] * (args.tokens - 2))
    tr = bert.run(text)
    print(f"  run, {tr.n_tokens} tokens: {1000 * median_seconds(lambda: bert.run(text), args.runs):.0f} ms")

    t5 = load_model(t5_path)
    print(f"flan-t5-small shape: load {median_seconds(lambda: load_model(t5_path), args.runs):.2f} s")
    source = " ".join(["the quick brown fox"] * (args.tokens // 8))
    tr = t5.run(source, target="the model reads the text")
    print(f"  run, {tr.n_tokens} source + {tr.n_target_tokens} target tokens: "
          f"{1000 * median_seconds(lambda: t5.run(source, target='the model reads the text'), args.runs):.0f} ms")
    g = t5.generate(source, max_new_tokens=args.new, temperature=0)
    seconds = median_seconds(lambda: t5.generate(source, max_new_tokens=args.new, temperature=0), args.runs)
    print(f"  greedy generation, {len(g.steps)} tokens ({g.stop_reason}): {seconds:.2f} s, "
          f"{1000 * seconds / max(1, len(g.steps)):.1f} ms a token")


if __name__ == "__main__":
    main()
