"""Crafted GGUF files (harness/crafted_gguf.py) against the model picker and the loader: for each attack the file's
size, what describe() + load_model() said, their peak resident memory above the process's before (VmHWM reset
through /proc/self/clear_refs) and their time; then the real default model (SmolLM2-135M) read, described and loaded,
median of a few runs.

    python -m bench.bench_crafted_files [--runs 5] [--keep DIR]

The attacks run in one fresh process (harness/crafted_gguf.probe) after a good tiny model was loaded there, under an
address-space limit 2 GiB above what it had mapped, so a runaway allocation is a MemoryError, not the machine's.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.crafted_gguf import ATTACKS, probe_in_subprocess, write_attack, write_good


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def attacks(folder: Path) -> None:
    good = write_good(folder / "good.gguf")
    files = {name: write_attack(name, good, folder) for name in ATTACKS}
    results = probe_in_subprocess(good, [good, *files.values()])
    print(f"{'attack':18} {'file MB':>8} {'peak MB':>8} {'seconds':>8}  outcome")
    for (name, path), result in zip({"good": good, **files}.items(), results, strict=True):
        outcome = "loaded" if result["error"] is None else result["error"].split(" ", 1)[1][:90]
        print(f"{name:18} {path.stat().st_size / 1e6:8.1f} {result['peak_rss_bytes'] / 1e6:8.1f} "
              f"{result['seconds']:8.3f}  {outcome}", flush=True)


REAL = """
import statistics, sys, time
from model import load_model
from model.files.catalog import describe
from model.files.gguf import installed_model_path, open_reader
path = installed_model_path()
load_model(path=path)
times = {"open_reader": [], "describe": [], "load_model": []}
for _ in range(RUNS):
    for name, call in (("open_reader", open_reader), ("describe", describe), ("load_model", load_model)):
        start = time.perf_counter()
        call(path)
        times[name].append(time.perf_counter() - start)
for name, runs in times.items():
    print(f"SmolLM2-135M {name:12} median {statistics.median(runs):.3f} s  (runs: "
          + ", ".join(f"{t:.3f}" for t in runs) + ")")
"""


def real_model(runs: int) -> None:
    out = subprocess.run([sys.executable, "-c", REAL.replace("RUNS", str(runs))], capture_output=True, text=True,
                         timeout=900, cwd=Path(__file__).resolve().parent.parent)
    print(out.stdout.strip() or out.stderr[-2000:], flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="write the crafted files here (default: a temporary folder)")
    args = parser.parse_args()
    print(f"CPU: {cpu_name()}  ({time.strftime('%Y-%m-%d %H:%M')})", flush=True)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        attacks(args.keep)
    else:
        with tempfile.TemporaryDirectory() as folder:
            attacks(Path(folder))
    real_model(args.runs)
    print(f"(medians of {args.runs}; on a shared machine the times vary: compare runs taken together)")


if __name__ == "__main__":
    main()
