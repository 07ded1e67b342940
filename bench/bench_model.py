"""Speed and memory of the model engine, measured against transformers (eager, output_attentions=True).

Prints: forward + trace time per token count (median of runs) and the ratio to transformers (the median of ratios
of runs timed in pairs, one right after the other); achieved FLOP/s
against one large float32 matmul in the same process; load-to-first-trace time in a fresh process; peak RSS of a
fresh process that loads the model and traces T tokens (with the server's malloc settings, model.files.heap.tune_heap).
Usage (from the repository root): python -m bench.bench_model [--runs 7] [--no-reference]
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

TOKEN_COUNTS = (16, 64, 256, 512, 1024)
COMPARED = (64, 256)
SAMPLE = ("The quick brown fox jumps over the lazy dog while the printing press, invented in the fifteenth "
          "century, changed how knowledge moved across Europe. def f(x): return x * 2  # code 12345 ")

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
from model import load_model
from model.files.heap import tune_heap
tune_heap()                                   # as the app's server does (app_pages/frame/session.py)
lm = load_model()
ids = (lm.encode({sample!r}) * 200)[:{T}]
t2 = time.perf_counter()
lm.run_ids(ids)
t3 = time.perf_counter()
hwm_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps(dict(import_s=t1 - t0, load_s=t2 - t1, first_trace_s=t3 - t2, peak_rss_mb=hwm_kb / 1024)))
"""


def median_time(fn, runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved(ours, reference, runs: int) -> tuple[float, float]:
    """The reference's median time and the median of ours / reference over `runs` pairs timed one right after the
    other: a shared VM's speed drifts by 10-20 % over a minute, which skews two medians taken minutes apart."""
    ours()
    reference()
    pairs = []
    for _ in range(runs):
        start = time.perf_counter()
        ours()
        middle = time.perf_counter()
        reference()
        pairs.append((middle - start, time.perf_counter() - middle))
    return statistics.median(r for _, r in pairs), statistics.median(o / r for o, r in pairs)


def forward_flops(cfg, T: int) -> int:
    """Multiply-adds x 2 that our forward executes: projections and MLP on T tokens, the full T x T scores and
    mixing per head, and the LM head on the last token only."""
    per_token_matmul = (cfg.d_model * (cfg.n_heads + 2 * cfg.n_kv_heads) * cfg.head_dim   # q, k, v
                        + cfg.n_heads * cfg.head_dim * cfg.d_model                        # o
                        + 3 * cfg.d_model * cfg.d_ff)                                     # gate, up, down
    attention = 2 * cfg.n_heads * T * T * cfg.head_dim                                    # q k^T and p v
    return 2 * (cfg.n_layers * (T * per_token_matmul + attention) + cfg.vocab_size * cfg.d_model)


def matmul_flops_per_s(runs: int) -> float:
    import torch

    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    return 2 * 2048 ** 3 / median_time(lambda: a @ b, runs)


def fresh_process(T: int) -> dict:
    code = CHILD.format(sample=SAMPLE, T=T)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-reference", action="store_true", help="skip transformers")
    args = parser.parse_args()

    import torch

    from model import load_model
    from model.files.gguf import default_model_path

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.runs} runs\n")
    lm = load_model()
    cfg = lm.config
    peak = matmul_flops_per_s(args.runs)
    print(f"reference: one 2048x2048x2048 float32 matmul reaches {peak / 1e9:.1f} GFLOP/s\n")

    hf = None
    if not args.no_reference:
        import transformers

        path = default_model_path()
        hf = transformers.AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager").eval()

    print(f"{'T':>5} {'ours ms':>9} {'ms/token':>9} {'GFLOP/s':>8} {'% matmul':>9} {'transformers ms':>16} "
          f"{'ratio':>6}")
    previous = None
    for T in TOKEN_COUNTS:
        ids = (lm.encode(SAMPLE) * 200)[:T]
        ours = median_time(lambda ids=ids: lm.run_ids(ids), args.runs)
        rate = forward_flops(cfg, T) / ours
        ref_col, ratio_col = "", ""
        if hf is not None and T in COMPARED:
            with torch.inference_mode():
                ref, ratio = interleaved(lambda ids=ids: lm.run_ids(ids),
                                         lambda ids=ids: hf(torch.tensor([ids]), output_attentions=True), args.runs)
            ref_col, ratio_col = f"{ref * 1e3:16.1f}", f"{ratio:6.2f}"
        growth = f"  x{ours / previous[1]:.1f} time for x{T / previous[0]:.0f} tokens" if previous else ""
        print(f"{T:>5} {ours * 1e3:9.1f} {ours * 1e3 / T:9.2f} {rate / 1e9:8.1f} {100 * rate / peak:8.0f}% "
              f"{ref_col:>16} {ratio_col:>6}{growth}")
        previous = (T, ours)

    print("\nfresh process per row (load = read GGUF + dequantize + build; cold start of Python each time)")
    print(f"{'T':>5} {'import torch s':>15} {'load s':>7} {'first trace s':>14} {'load+trace s':>13} "
          f"{'peak RSS MB':>12}")
    for T in (16, 512, 1024):
        r = fresh_process(T)
        print(f"{T:>5} {r['import_s']:15.2f} {r['load_s']:7.2f} {r['first_trace_s']:14.2f} "
              f"{r['load_s'] + r['first_trace_s']:13.2f} {r['peak_rss_mb']:12.0f}")


if __name__ == "__main__":
    main()
