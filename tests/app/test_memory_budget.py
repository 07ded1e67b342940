"""Memory bounded in bytes, in a fresh process (no other test's models count): the app shown 20 distinct ~500-token
texts, each on three views, stays under 1.5 GB of resident memory, and every cache within its share of the
budget; the last texts still render (evicted traces are recomputed, never an error)."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.app.apptest import ROOT

LIMIT_MB = 1500


def test_twenty_long_texts_stay_under_the_memory_budget():
    out = subprocess.run([sys.executable, "-m", "tests.app.memory_probe", "20", "400"], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["peak_mb"] < LIMIT_MB, result
    budget = result["budget_mb"]
    assert sum(result["cache_mb"].values()) <= budget, result
    assert result["final_mb"] - result["after_first_mb"] < budget, result     # nothing left behind beyond caches
