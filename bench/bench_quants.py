"""Quantized weights at a 0.5B-class model's shapes (Qwen2.5-0.5B: d_model 896, d_ff 4864, 14 + 2 + 2 heads of 64,
vocab 151,936): dequantization throughput per GGUF type, and QuantizedMatrix.linear against DenseMatrix (float32)
for one token and for a 128-token prompt, per block of matrices and for the LM head.

    python -m bench.bench_quants [--runs 5] [--threads N]   (N: every core but one by default, as in the app)

Every number is the median of --runs runs, of wall-clock time and of this process's CPU time (all its threads:
the CPU time is what load from other processes on the same cores does not inflate, as long as torch runs one
thread; the load average is printed first and last). The matrices hold random valid blocks (harness/quant_blocks.py).
Types of 256-value super-blocks (K-quants) cannot hold 896-wide rows: as llama.cpp does, the "Q4_K" block uses Q5_0
there and Q4_K only for ffn_down (4864 wide).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from functools import partial

import numpy as np
import torch

from harness.quant_blocks import random_tensor
from model.decoder import matrices
from model.decoder.matrices import DenseMatrix, QuantizedMatrix
from model.files.quants import SUPPORTED_TYPES, dequantize

D, FF, VOCAB, N_LAYERS = 896, 4864, 151_936, 24
BLOCK = {"attn_qkv": (896 + 2 * 128, D), "attn_output": (D, D), "ffn_gate_up": (2 * FF, D), "ffn_down": (D, FF)}
BLOCK_TYPES = {"Q8_0": dict.fromkeys(BLOCK, "Q8_0"), "Q4_K": {**dict.fromkeys(BLOCK, "Q5_0"), "ffn_down": "Q4_K"},
               "Q6_K": {**dict.fromkeys(BLOCK, "Q8_0"), "ffn_down": "Q6_K"}}


def median_s(fn, runs: int) -> tuple[float, float]:
    """Median wall-clock and CPU seconds of fn()."""
    fn()                                                                           # warm: buffers, caches
    wall, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def matrix_shape(type_name: str) -> tuple[int, int]:
    """ffn_gate/up's [4864, 896] for 32-value blocks, ffn_down's [896, 4864] for 256-value ones."""
    return (D, FF) if type_name.endswith("_K") else (FF, D)


def dequantization(runs: int, rng: np.random.Generator) -> None:
    print("dequantization, values/s (load: raw GGUF -> float32 | product: QuantizedMatrix rows -> reused buffer)")
    for type_name in SUPPORTED_TYPES:
        rows, cols = matrix_shape(type_name)
        raw = random_tensor(type_name, rows, cols, rng)
        out = np.empty((rows, cols), np.float32)
        load, _ = median_s(partial(dequantize, raw, type_name, (rows, cols), out=out), runs)
        matrix = QuantizedMatrix(raw, type_name, (rows, cols))
        product, product_cpu = median_s(partial(dequantize_by_chunks, matrix), runs)
        print(f"  {type_name:5} [{rows}, {cols}]  load {rows * cols / load / 1e9:5.2f} G/s  "
              f"product {rows * cols / product / 1e9:5.2f} G/s ({rows * cols / product_cpu / 1e9:5.2f} G per CPU s)"
              f"  memory {matrix.nbytes / (rows * cols):.3f} B/value")


def dequantize_by_chunks(matrix: QuantizedMatrix) -> None:
    """What a product does besides multiplying: every chunk of rows into one reused buffer."""
    rows, cols = matrix.shape
    step = max(1, matrices.CHUNK_VALUES // cols)
    buffer = torch.empty(step, cols)
    for start in range(0, rows, step):
        matrix.dequantize_rows(slice(start, min(start + step, rows)), buffer[:min(step, rows - start)])


def block_products(block: dict, inputs: dict) -> None:
    for name, matrix in block.items():
        matrix.linear(inputs[name])


def products(runs: int, rng: np.random.Generator) -> None:
    print(f"x @ W^T for one block's matrices ({', '.join(BLOCK)}), ms; x24 = a {N_LAYERS}-layer forward's share")
    with torch.inference_mode():
        for variant, types in BLOCK_TYPES.items():
            quantized = {n: QuantizedMatrix(random_tensor(types[n], *shape, rng), types[n], shape)
                         for n, shape in BLOCK.items()}
            dense = {n: DenseMatrix(m.dequantized()) for n, m in quantized.items()}
            for tokens in (1, 128):
                inputs = {n: torch.randn(*(() if tokens == 1 else (tokens,)), shape[1]) for n, shape in BLOCK.items()}
                q, q_cpu = median_s(partial(block_products, quantized, inputs), runs)
                f, f_cpu = median_s(partial(block_products, dense, inputs), runs)
                print(f"  {variant:5} T={tokens:<3}  quantized {q * 1e3:7.2f} ms (x24 {q * N_LAYERS:5.2f} s, "
                      f"CPU {q_cpu * 1e3:7.2f} ms)   float32 {f * 1e3:7.2f} ms (x24 {f * N_LAYERS:5.2f} s, "
                      f"CPU {f_cpu * 1e3:7.2f} ms)   ratio {q / f:4.2f} (CPU {q_cpu / f_cpu:4.2f})")
        head = QuantizedMatrix(random_tensor("Q8_0", VOCAB, D, rng), "Q8_0", (VOCAB, D))
        x = torch.randn(D)
        q, q_cpu = median_s(partial(head.linear, x), runs)
        print(f"  LM head Q8_0 [{VOCAB}, {D}] T=1: {q * 1e3:.1f} ms ({VOCAB * D / q / 1e9:.2f} G values/s), "
              f"CPU {q_cpu * 1e3:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=max(1, len(os.sched_getaffinity(0)) - 1),
                        help="torch threads; default: every core but one, as the app's compute_threads()")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs; "
          f"torch threads {torch.get_num_threads()}; medians of {args.runs} runs")
    rng = np.random.default_rng(0)
    dequantization(args.runs, rng)
    products(args.runs, rng)
    print(f"load average after {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
