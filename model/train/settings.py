"""TrainSettings: everything that decides a training run (frozen and hashable: the same settings, the same run)."""
from __future__ import annotations

from dataclasses import dataclass, fields

TASKS = ("induction", "copy", "sort", "modadd", "text")
MLP_KINDS = ("none", "gelu", "swiglu")
NORM_KINDS = ("layernorm", "rmsnorm", "none")
NORM_PLACES = ("pre", "post")
POSITION_KINDS = ("none", "learned", "sinusoidal", "rope", "alibi")

MAX_LAYERS = 6
WIDTHS = (32, 48, 64, 96, 128, 192, 256)
MAX_HEADS = 8
MIN_SEQ_LEN, MAX_SEQ_LEN = 8, 128
MIN_VOCAB, MAX_VOCAB = 8, 128
MAX_STEPS = 20_000
MAX_BATCH = 256
MIN_TEXT_CHARS = 400        # the text task needs this much text: windows for training and a held-out tail


@dataclass(frozen=True)
class TrainSettings:
    """One run's task, architecture and optimiser. Defaults are the page's: the induction run that forms an
    induction head in a few seconds on 2 cores. n_kv_heads None means as many as heads (MHA)."""

    task: str = "induction"
    text: str = ""                  # the text task's training text (character level); ignored by the other tasks
    vocab_size: int = 64            # symbols of the synthetic tasks (the text task uses its characters)
    seq_len: int = 32
    n_layers: int = 2
    d_model: int = 32
    n_heads: int = 2
    n_kv_heads: int | None = None
    mlp: str = "none"
    norm: str = "layernorm"
    norm_place: str = "pre"
    positions: str = "learned"
    steps: int = 800
    batch_size: int = 32
    lr: float = 5e-3
    warmup: int = 50
    cosine: bool = True             # decay the learning rate to a tenth along a cosine after the warmup
    grad_clip: float = 1.0          # 0: no clipping
    weight_decay: float = 0.01
    init_scale: float = 3.0           # initial weights: normal with std init_scale * 0.02
    seed: int = 0

    def __post_init__(self) -> None:
        for problem in _problems(self):
            raise ValueError(problem)

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def changed(self) -> dict:
        """The fields that differ from the defaults (a short description of a run)."""
        base = TrainSettings()
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(base, f.name)}


def _choice(name: str, value, options) -> str | None:
    return None if value in options else f"{name} must be one of {', '.join(map(str, options))} (got {value!r})."


def _between(name: str, value, lo, hi) -> str | None:
    return None if lo <= value <= hi else f"{name} must be between {lo} and {hi} (got {value!r})."


def _problems(s: TrainSettings) -> list[str]:
    """Every reason these settings cannot be trained, as sentences a user can act on."""
    found = [
        _choice("task", s.task, TASKS), _choice("mlp", s.mlp, MLP_KINDS), _choice("norm", s.norm, NORM_KINDS),
        _choice("norm_place", s.norm_place, NORM_PLACES), _choice("positions", s.positions, POSITION_KINDS),
        _between("n_layers", s.n_layers, 1, MAX_LAYERS), _between("d_model", s.d_model, min(WIDTHS), max(WIDTHS)),
        _between("n_heads", s.n_heads, 1, MAX_HEADS), _between("seq_len", s.seq_len, MIN_SEQ_LEN, MAX_SEQ_LEN),
        _between("vocab_size", s.vocab_size, MIN_VOCAB, MAX_VOCAB), _between("steps", s.steps, 1, MAX_STEPS),
        _between("batch_size", s.batch_size, 1, MAX_BATCH), _between("lr", s.lr, 1e-6, 1.0),
        _between("warmup", s.warmup, 0, MAX_STEPS), _between("grad_clip", s.grad_clip, 0.0, 100.0),
        _between("weight_decay", s.weight_decay, 0.0, 10.0), _between("init_scale", s.init_scale, 0.01, 10.0),
        _between("seed", s.seed, 0, 2**31 - 1),
    ]
    if s.n_heads >= 1 and s.d_model % s.n_heads:
        found.append(f"d_model ({s.d_model}) must be a multiple of n_heads ({s.n_heads}).")
    elif s.positions == "rope" and s.head_dim % 2:
        found.append(f"RoPE rotates pairs of dimensions: d_model / n_heads ({s.head_dim}) must be even.")
    kv = s.kv_heads
    if not 1 <= kv <= s.n_heads or s.n_heads % kv:
        found.append(f"n_kv_heads ({kv}) must divide n_heads ({s.n_heads}): {s.n_heads} for MHA, 1 for MQA, "
                     "a divisor in between for GQA.")
    if s.task == "text" and len(s.text) < MIN_TEXT_CHARS:
        found.append(f"The text task needs at least {MIN_TEXT_CHARS} characters of text (got {len(s.text)}): "
                     "paste a longer text.")
    return [p for p in found if p]
