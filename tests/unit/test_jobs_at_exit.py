"""Background jobs when the process exits: a training still running stops at its next log point and the process
exits cleanly. A daemon thread left inside torch while the interpreter shut down aborted it ("terminate called
without an active exception", exit status 134): a server stopped mid-run, or a test session ending after the Train
page started one."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import threading
from app_core import jobs as _jobs
from model.train.settings import TrainSettings
from model.train.trainer import train

training = threading.Event()

def work(job):
    def on_log(run):
        training.set()
        return job.abandoned()
    run = train(TrainSettings(steps=20_000), on_log=on_log)
    print("stopped:", run.cancelled, flush=True)

_jobs.JobRunner(2**20, size_of=lambda run: 0).job("a long run", 1, work)
training.wait(120)
print("exiting", flush=True)
"""


def test_a_running_training_stops_when_the_process_exits():
    """The script exits while its job trains (a run of 20,000 steps, its first log point seen): the job stops at its
    next log point and the process exits with 0 (without the exit hook: SIGABRT, 3 runs of 3)."""
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert out.stdout.split() == ["exiting", "stopped:", "True"], out.stdout
