"""Phase-change detection on a held-out loss curve (pure numpy).

A phase change is the step where the loss falls fastest, when it falls there at least SPEEDUP times faster than its
average fall before, and then ends at least MIN_FALL of its initial value below the best loss seen before it (a
spike that recovers is not a phase change)."""
from __future__ import annotations

import numpy as np

SPEEDUP = 4.0
MIN_FALL = 0.25


def phase_change_step(steps: np.ndarray, loss: np.ndarray) -> int | None:
    """The step of the phase change in a loss curve logged at `steps` (both [n]), or None when there is none."""
    steps, loss = np.asarray(steps, dtype=np.float64), np.asarray(loss, dtype=np.float64)
    if len(loss) < 4 or not np.all(np.isfinite(loss)):
        return None
    slope = (loss[:-2] - loss[2:]) / (steps[2:] - steps[:-2])          # fall per step around points 1 .. n-2
    i = int(np.argmax(slope[1:])) + 2                                  # point i has at least two points before it
    before = (loss[0] - loss[i - 1]) / (steps[i - 1] - steps[0])       # average fall per step up to just before i
    fell_enough = loss[i:].min() <= loss[:i].min() - MIN_FALL * loss[0]
    return int(steps[i]) if slope[i - 1] > 0 and slope[i - 1] >= SPEEDUP * max(before, 0.0) and fell_enough else None
