"""TrainRun: what a training run leaves (its logged curves, attention snapshots, final weights, a completion),
as small numpy arrays with their size in bytes."""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from model.train.settings import TrainSettings

SNAPSHOT_LEVELS = 255          # attention snapshots are stored as uint8: p * 255, the heatmap's resolution


@dataclass(frozen=True)
class LogRecord:
    """One log point: the model after `step` updates. Per-head arrays [n_layers, n_heads]."""

    step: int
    train_loss: float          # mean training loss of the updates since the previous log (at step 0: at init)
    eval_loss: float           # held-out loss on the predictable targets (nats)
    eval_accuracy: float       # held-out greedy accuracy on the predictable targets
    lr: float
    grad_norm: float           # all parameters' gradient norm at this step, before clipping (NaN at step 0)
    layer_grad_norms: np.ndarray    # [n_layers] (NaN at step 0)
    entropy: np.ndarray        # attention entropy (nats) on the held-out batch
    prev_token: np.ndarray     # previous-token score on the probe
    induction: np.ndarray      # induction score on the probe
    snapshot: np.ndarray       # [n_layers, n_heads, T, T] uint8: every head's pattern on the display example


@dataclass(frozen=True)
class Completion:
    """The trained model continuing an unseen example greedily: prompt, the true continuation, the model's."""

    prompt: np.ndarray
    expected: np.ndarray
    generated: np.ndarray

    @property
    def accuracy(self) -> float:
        return float((self.expected == self.generated).mean()) if len(self.expected) else float("nan")


@dataclass(frozen=True)
class TrainRun:
    """A run so far (while training) or finished. Logged arrays have n_logged rows, one per log point."""

    settings: TrainSettings
    labels: tuple[str, ...]            # the vocabulary's readable names
    uniform_loss: float                # ln(vocabulary size): the loss of a uniform guess
    example: np.ndarray                # [T] the held-out display example the snapshots are of
    example_predictable: np.ndarray    # [T] bool
    steps_logged: np.ndarray           # [n] int
    train_loss: np.ndarray             # [n]
    eval_loss: np.ndarray              # [n]
    eval_accuracy: np.ndarray          # [n]
    lr: np.ndarray                     # [n]
    grad_norm: np.ndarray              # [n]
    layer_grad_norms: np.ndarray       # [n, n_layers]
    entropy: np.ndarray                # [n, n_layers, n_heads]
    prev_token: np.ndarray             # [n, n_layers, n_heads]
    induction: np.ndarray              # [n, n_layers, n_heads]
    snapshots: np.ndarray              # [n, n_layers, n_heads, T, T] uint8
    phase_step: int | None = None      # the step of the phase change (None: none, or not finished)
    completion: Completion | None = None
    state: dict = field(default_factory=dict)   # final weights {name: float32 array} (empty until finished)
    finished: bool = False
    cancelled: bool = False
    seconds: float = 0.0               # wall time of the training so far

    @classmethod
    def from_records(cls, settings: TrainSettings, labels, example, example_predictable, records: list[LogRecord],
                     **rest) -> TrainRun:
        def stack(name: str, dtype) -> np.ndarray:
            return np.asarray([getattr(r, name) for r in records], dtype=dtype)

        return cls(settings, tuple(labels), float(np.log(len(labels))), example, example_predictable,
                   stack("step", np.int64), stack("train_loss", np.float32), stack("eval_loss", np.float32),
                   stack("eval_accuracy", np.float32), stack("lr", np.float32), stack("grad_norm", np.float32),
                   stack("layer_grad_norms", np.float32), stack("entropy", np.float32),
                   stack("prev_token", np.float32), stack("induction", np.float32), stack("snapshot", np.uint8),
                   **rest)

    @property
    def n_logged(self) -> int:
        return len(self.steps_logged)

    def pattern(self, index: int) -> np.ndarray:
        """Every head's attention on the display example at log point `index`, as probabilities. [L, H, T, T]"""
        return self.snapshots[index].astype(np.float32) / SNAPSHOT_LEVELS

    @property
    def nbytes(self) -> int:
        """Bytes held by the run's arrays (what a byte-bounded cache should count)."""
        arrays = [getattr(self, f.name) for f in fields(self) if isinstance(getattr(self, f.name), np.ndarray)]
        arrays += list(self.state.values())
        if self.completion is not None:
            arrays += [self.completion.prompt, self.completion.expected, self.completion.generated]
        return sum(a.nbytes for a in arrays) + sum(len(s) for s in self.labels) + len(self.settings.text)
