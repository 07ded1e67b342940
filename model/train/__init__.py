"""Train a tiny transformer live (pure torch + numpy): synthetic tasks (induction, copy, sort, modular addition,
character-level text), a small decoder of any common design, a deterministic training loop that logs held-out
loss, gradient norms and per-head attention measurements, and the classic comparison presets.

    from model.train import TrainSettings, train
    run = train(TrainSettings(task="induction", n_layers=2, seed=0))
    run.eval_loss, run.induction, run.steps_logged

Settings, runs and presets need only numpy (the app's settings schema imports them); `train` imports torch when
first used.
"""
from model.train.presets import PRESETS, Preset, Verdict, verdict
from model.train.run import Completion, LogRecord, TrainRun
from model.train.settings import TrainSettings


def __getattr__(name: str):
    if name == "train":
        from model.train.trainer import train

        return train
    raise AttributeError(f"module 'model.train' has no attribute {name!r}")


__all__ = ["PRESETS", "Completion", "LogRecord", "Preset", "TrainRun", "TrainSettings", "Verdict", "train", "verdict"]
