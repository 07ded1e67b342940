"""The Circuits analyses' time on the built-in model: head roles (one pass on the probe), activation patching of each
example pair (resid and head), occlusion and gradient x input on the indirect-object sentence. Median of --repeat
runs each, with torch on --threads threads (the app's compute threads: every core but one).

Run (from the repository root): python -m bench.bench_circuits [--repeat 3] [--threads 1]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from app_core.circuit_pairs import PAIRS
from model import load_model


def median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=max(1, torch.get_num_threads() - 1))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    lm = load_model()
    print(f"{lm.name}, torch threads {args.threads}, median of {args.repeat}")
    print(f"head_role_scores (probe of {len(lm.head_role_probe())} tokens): "
          f"{median_seconds(lm.head_role_scores, args.repeat):.2f} s")
    for pair in PAIRS:
        for kind in ("resid", "head"):
            seconds = median_seconds(lambda pair=pair, kind=kind: lm.activation_patching(
                pair.clean, pair.corrupt, pair.answer, pair.foil, kind), args.repeat)
            print(f"activation_patching {kind:5} {pair.title} ({len(lm.encode(pair.clean))} tokens): {seconds:.2f} s")
    text = PAIRS[0].clean
    print(f"occlusion ({len(lm.encode(text))} tokens): {median_seconds(lambda: lm.occlusion(text), args.repeat):.2f} s")
    print(f"gradient_x_input: {median_seconds(lambda: lm.gradient_x_input(text), args.repeat):.2f} s")


if __name__ == "__main__":
    main()
