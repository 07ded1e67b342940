"""Speed of the live training lab (model/train): does the default run show its phase change within 10 s on 2 cores?

Measures, as the median of --runs runs (the 2-layer and 1-layer runs interleaved, so a change in the machine's load
hits both alike; the load average is printed before and after):
- the default run (induction, 2 layers, attention-only): wall time from train() until the held-out loss on the
  predictable tokens is below 1 nat (it starts near the uniform guess, ln 64 = 4.16), the step that happens at, the
  phase-change step the run detects, and the whole run's wall and CPU time;
- the 1-layer run with the same settings: its lowest held-out loss over the same number of steps (target: above
  2.5 nats, no induction head);
- one update's time with 1 and 2 torch threads (the run fixes 1: the reason);
- the first run in a fresh process (imports included), once.
Usage (from the repository root): python -m bench.bench_train [--runs 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

BELOW = 1.0                     # nats: the phase change has shown once the held-out loss is below this


def load_average() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


def timed_run(settings) -> dict:
    """One run with the time (since train() was called) at which the held-out loss first went below BELOW."""
    from model.train import train

    start, cpu = time.perf_counter(), time.process_time()
    below: dict = {}

    def on_log(run) -> None:
        if "s" not in below and run.eval_loss[-1] < BELOW:
            below.update(s=time.perf_counter() - start, step=int(run.steps_logged[-1]))

    run = train(settings, on_log=on_log)
    return {"run": run, "wall": time.perf_counter() - start, "cpu": time.process_time() - cpu,
            "below_s": below.get("s"), "below_step": below.get("step")}


def step_ms(threads: int, n: int = 100) -> float:
    """Milliseconds per update of the default model with this many torch threads."""
    import torch

    from model.train import TrainSettings
    from model.train.trainer import build, make_optimizer, train_step

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        s = TrainSettings()
        task, model, gen = build(s)
        opt = make_optimizer(model, s)
        batch = task.sample(gen, s.batch_size)
        for i in range(10):
            train_step(model, opt, batch, i + 1, s)
        start = time.perf_counter()
        for i in range(n):
            train_step(model, opt, batch, i + 11, s)
        return (time.perf_counter() - start) / n * 1e3
    finally:
        torch.set_num_threads(before)


def median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"start: {load_average()} (the machine may be shared with other work: expect noise)", flush=True)
    cold = subprocess.run([sys.executable, "-c", "import time; t = time.perf_counter(); "
                           "from model.train import TrainSettings, train; imported = time.perf_counter() - t; "
                           "train(TrainSettings()); print(f'{imported:.2f} {time.perf_counter() - t:.2f}')"],
                          capture_output=True, text=True, check=True).stdout.split()
    print(f"fresh process: import model.train {cold[0]} s, import + default run {cold[1]} s", flush=True)

    from model.train import TrainSettings

    two, one = TrainSettings(n_layers=2), TrainSettings(n_layers=1)
    results: dict[str, list[dict]] = {"2 layers": [], "1 layer": []}
    for _ in range(args.runs):
        results["2 layers"].append(timed_run(two))
        results["1 layer"].append(timed_run(one))
    print(f"\ndefault settings: {two}\n")
    for name, rs in results.items():
        print(f"{name} ({len(rs)} runs, median): run {median(r['wall'] for r in rs):.2f} s wall, "
              f"{median(r['cpu'] for r in rs):.2f} s CPU, {two.steps} steps")
    rs = results["2 layers"]
    below_s, below_step = median(r["below_s"] for r in rs), median(r["below_step"] for r in rs)
    phase = [r["run"].phase_step for r in rs]
    if below_s is None:
        print(f"2 layers: the held-out loss never went below {BELOW} nat (target: within 10 s)")
    else:
        print(f"2 layers: held-out loss {rs[0]['run'].eval_loss[0]:.2f} -> below {BELOW} nat after "
              f"{below_s:.2f} s wall (median; step {below_step:.0f}; target <= 10 s); detected phase change at "
              f"step {phase[0]}; final {median(float(r['run'].eval_loss[-1]) for r in rs):.2f} nats")
    lowest = [float(r["run"].eval_loss.min()) for r in results["1 layer"]]
    print(f"1 layer: lowest held-out loss over the {two.steps} steps {min(lowest):.2f} nats (target > 2.5); "
          f"phase change: {results['1 layer'][0]['run'].phase_step}")
    print(f"\none update: {step_ms(1):.2f} ms on 1 thread, {step_ms(2):.2f} ms on 2 threads")
    print(f"\nend: {load_average()}")


if __name__ == "__main__":
    main()
