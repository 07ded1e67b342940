"""The training loop: AdamW with linear warmup and cosine decay, gradient clipping, a fixed seed; logs held-out
measurements at regular steps and hands each partial run to a callback."""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from model.train.metrics import (
    attention_entropy,
    induction_score,
    layer_grad_norms,
    predictable_loss,
    previous_token_score,
)
from model.train.optim import AdamW
from model.train.phase import phase_change_step
from model.train.run import SNAPSHOT_LEVELS, Completion, LogRecord, TrainRun
from model.train.settings import TrainSettings
from model.train.tasks import Batch, Task, make_task, probe_batch
from model.train.tiny_model import TinyTransformer

BETAS = (0.9, 0.95)
MIN_LR_RATIO = 0.1             # cosine decay ends at a tenth of the peak learning rate
TARGET_LOGS = 50               # about this many log points per run
TRAIN_THREADS = 1              # the fastest for these tiny matrices, and what makes a run reproducible anywhere
SNAPSHOT_TOKENS = 64           # the display example's snapshots cover at most this many tokens


def log_every(steps: int) -> int:
    """Steps between two log points: about TARGET_LOGS per run."""
    return max(1, round(steps / TARGET_LOGS))


def is_logged(step: int, steps: int) -> bool:
    return step % log_every(steps) == 0 or step == steps


def n_logs(steps: int) -> int:
    """How many log points a run of `steps` updates has (step 0 included)."""
    return steps // log_every(steps) + 1 + (steps % log_every(steps) != 0)


def lr_at(step: int, s: TrainSettings) -> float:
    """The learning rate of update number `step` (1-based): linear warmup over s.warmup updates, then constant or a
    cosine from s.lr down to s.lr * MIN_LR_RATIO at the last update."""
    if step <= s.warmup:
        return s.lr * step / s.warmup
    if not s.cosine:
        return s.lr
    progress = (step - s.warmup) / (s.steps - s.warmup)
    low = s.lr * MIN_LR_RATIO
    return low + 0.5 * (s.lr - low) * (1.0 + math.cos(math.pi * progress))


def build(s: TrainSettings) -> tuple[Task, TinyTransformer, torch.Generator]:
    """The task, the initial model and the generator of the training batches (seeded by s.seed): the model's
    initial weights are drawn from the generator first, then every update draws one batch."""
    task = make_task(s)
    gen = torch.Generator().manual_seed(s.seed)
    return task, TinyTransformer(s, task.vocab_size, task.seq_len, gen), gen


def make_optimizer(model: nn.Module, s: TrainSettings) -> AdamW:
    """AdamW; weight decay on the matrices and embeddings only (not on norm gains and biases)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": s.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return AdamW(groups, betas=BETAS)


def train_step(model: TinyTransformer, opt: AdamW, batch: Batch, step: int, s: TrainSettings,
               measure: bool = False) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """One update on one batch (loss on its predictable targets). Returns the loss before the update and, if
    measure, the gradient norm of all parameters and of each block [n_layers], both before clipping."""
    logits, _ = model(batch.tokens)                                                   # [B, T, V]
    loss = predictable_loss(logits, batch.tokens, batch.predictable)
    opt.zero_grad()
    loss.backward()
    layers = layer_grad_norms(model.blocks) if measure else None
    total = None
    if s.grad_clip > 0:
        total = nn.utils.clip_grad_norm_(model.parameters(), s.grad_clip)
    elif measure:
        total = nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
    opt.step(lr_at(step, s))
    return loss.detach(), total, layers


@torch.no_grad()
def _measure(model: TinyTransformer, held: Batch, probe: Batch, shown: torch.Tensor) -> dict:
    """Held-out loss and accuracy, entropy per head on the held-out batch, previous-token and induction scores on
    the probe, and the display example's patterns."""
    logits, patterns = model(held.tokens, record=True)                                # [B, T, V], L x [B, H, T, T]
    target = held.predictable[:, 1:]                                                  # [B, T-1]
    hits = logits[:, :-1].argmax(-1)[target] == held.tokens[:, 1:][target]
    probe_patterns = patterns if probe is held else model(probe.tokens, record=True)[1]
    _, shown_patterns = model(shown[None], record=True)                               # L x [1, H, T', T']
    return {
        "eval_loss": float(predictable_loss(logits, held.tokens, held.predictable)),
        "eval_accuracy": float(hits.float().mean()),
        "entropy": torch.stack([attention_entropy(p) for p in patterns]).numpy(),                    # [L, H]
        "prev_token": torch.stack([previous_token_score(p) for p in probe_patterns]).numpy(),
        "induction": torch.stack([induction_score(p, probe.predictable, probe.source)
                                  for p in probe_patterns]).numpy(),
        "snapshot": (torch.cat(shown_patterns) * SNAPSHOT_LEVELS).round().to(torch.uint8).numpy(),   # [L, H, T', T']
    }


def _completion(model: TinyTransformer, task: Task) -> Completion:
    """The trained model continues an unseen example from its first predictable token to the end of that run of
    predictable tokens (the repeated segment, the copy, the sum, the rest of the text window)."""
    example = task.unseen_example()
    split = task.completion_split(example)
    tokens, predictable = example.tokens[0], example.predictable[0]
    end = split + int(predictable[split:].int().cumprod(0).sum())
    prompt, expected = tokens[:split], tokens[split:end]
    return Completion(prompt.numpy(), expected.numpy(), model.complete(prompt, len(expected)).numpy())


@torch.no_grad()
def _initial_loss(model: TinyTransformer, task: Task, gen: torch.Generator, s: TrainSettings) -> float:
    """The training loss at initialisation, on the batch the first update will use (the generator is not moved)."""
    ahead = torch.Generator()
    ahead.set_state(gen.get_state())
    first = task.sample(ahead, s.batch_size)
    return float(predictable_loss(model(first.tokens)[0], first.tokens, first.predictable))


@contextmanager
def _threads(n: int | None):
    """torch's intra-op threads set to n for the block (None: left as the caller set them)."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n is not None:
            torch.set_num_threads(before)


def train(s: TrainSettings, on_log: Callable[[TrainRun], bool | None] | None = None,
          threads: int | None = TRAIN_THREADS) -> TrainRun:
    """Train a tiny transformer with settings s. At every log point on_log(partial run) is called; if it returns
    True, training stops and the run so far comes back with cancelled=True.

    threads: torch's intra-op thread count during the run (restored after; None leaves the caller's). A run is the
    same bit for bit for the same settings and thread count; another thread count changes reduction orders (last
    bits of the losses), so the default fixes it at TRAIN_THREADS."""
    with _threads(threads):
        started = time.perf_counter()
        task, model, gen = build(s)
        opt = make_optimizer(model, s)
        held = task.held_out()
        probe = probe_batch(task, held)
        shown = held.tokens[0, :SNAPSHOT_TOKENS]
        context = dict(settings=s, labels=task.labels, example=shown.numpy(),
                       example_predictable=held.predictable[0, :SNAPSHOT_TOKENS].numpy())
        records: list[LogRecord] = []
        losses: list[torch.Tensor] = []
        for step in range(s.steps + 1):
            logged = is_logged(step, s.steps)
            if step:
                loss, total, layers = train_step(model, opt, task.sample(gen, s.batch_size), step, s, logged)
                losses.append(loss)
            if not logged:
                continue
            if step:
                train_loss, grad_norm, norms = float(torch.stack(losses).mean()), float(total), layers.numpy()
            else:
                train_loss, grad_norm, norms = _initial_loss(model, task, gen, s), math.nan, np.full(s.n_layers, np.nan)
            losses.clear()
            records.append(LogRecord(step, train_loss, lr=lr_at(max(step, 1), s), grad_norm=grad_norm,
                                     layer_grad_norms=norms, **_measure(model, held, probe, shown)))
            run = TrainRun.from_records(records=records, seconds=time.perf_counter() - started, **context)
            if on_log is not None and step < s.steps and on_log(run):
                return TrainRun.from_records(records=records, cancelled=True, seconds=run.seconds, **context)
        completion = _completion(model, task)
        state = {name: p.detach().numpy().copy() for name, p in model.state_dict().items()}
        steps, eval_loss = run.steps_logged, run.eval_loss
        final = TrainRun.from_records(records=records, phase_step=phase_change_step(steps, eval_loss),
                                      completion=completion, state=state, finished=True,
                                      seconds=time.perf_counter() - started, **context)
        if on_log is not None:
            on_log(final)
        return final
