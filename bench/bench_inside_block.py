"""Speed and memory of the "Inside a block" engine, against the plain forward pass on the same tokens.

Prints, at 64 and 512 tokens: median time of block_walk, residual_norms, logit_lens, logit_lens_top (k=5, every
position), logit_attribution and ablate_heads (one head in layer 0: the worst case, re-run from the embedding;
one head in layer 20: re-run from the layer-18 checkpoint), each with its ratio to one forward pass (run_ids).
Then the peak extra memory of logit_lens_top at 512 tokens, in a fresh process (VmHWM after a reset of the peak).
Usage (from the repository root): python -m bench.bench_inside_block [--runs 5]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOKEN_COUNTS = (64, 512)
SAMPLE = ("The quick brown fox jumps over the lazy dog while the printing press, invented in the fifteenth "
          "century, changed how knowledge moved across Europe. def f(x): return x * 2  # code 12345 ")

MEMORY_CHILD = r"""
import json
from model import load_model
lm = load_model()
trace = lm.run_ids((lm.encode({sample!r}) * 200)[:512])

def status(key):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(key + ":"))

with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak RSS (VmHWM) to the current RSS
before = status("VmRSS")
lm.logit_lens_top(trace, k=5)
print(json.dumps(dict(before_mb=before / 1024, peak_mb=status("VmHWM") / 1024)))
"""


def median_time(fn, runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def lens_top_memory() -> dict:
    code = MEMORY_CHILD.format(sample=SAMPLE)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    import numpy as np
    import torch

    from model import load_model

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.runs} runs "
          f"(the machine may be shared: compare ratios, not absolute times)\n")
    lm = load_model()
    mid_layer = lm.config.n_layers // 2
    for T in TOKEN_COUNTS:
        trace = lm.run_ids((lm.encode(SAMPLE) * 200)[:T])
        target = int(np.argmax(trace.next_token_logits))
        forward = median_time(lambda trace=trace: lm.run_ids(trace.token_ids), args.runs)
        cases = {
            f"block_walk (layer {mid_layer}, last token)": lambda trace=trace: lm.block_walk(trace, mid_layer, -1),
            "residual_norms": lambda trace=trace: lm.residual_norms(trace),
            "logit_lens (last token)": lambda trace=trace: lm.logit_lens(trace),
            "logit_lens_top (k=5, every position)": lambda trace=trace: lm.logit_lens_top(trace, k=5),
            "logit_attribution (top token)": lambda trace=trace, t=target: lm.logit_attribution(trace, t),
            "ablate_heads [(0, 3)]": lambda trace=trace: lm.ablate_heads(trace, [(0, 3)]),
            "ablate_heads [(20, 3)]": lambda trace=trace: lm.ablate_heads(trace, [(20, 3)]),
        }
        print(f"T = {T}: forward pass (run_ids) {forward * 1e3:.0f} ms")
        print(f"  {'':40} {'ms':>9} {'x forward':>10}")
        for name, fn in cases.items():
            t = median_time(fn, args.runs)
            print(f"  {name:40} {t * 1e3:9.1f} {t / forward:10.2f}")
        print()

    r = lens_top_memory()
    print(f"logit_lens_top at 512 tokens, fresh process: RSS {r['before_mb']:.0f} MB before, peak "
          f"{r['peak_mb']:.0f} MB during: {r['peak_mb'] - r['before_mb']:.0f} MB extra "
          f"(a full [31, 512, vocab] float32 tensor would be {31 * 512 * lm.config.vocab_size * 4 / 2**20:.0f} MB)")


if __name__ == "__main__":
    main()
