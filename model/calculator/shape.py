"""A decoder shape (Shape): its fields, limits, defaults and checks (make_shape, shape_errors). Pure Python."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from numbers import Integral

# ---------------------------------------------------------------------------------------------------------- shape

MLP_KINDS = ("gelu", "swiglu")
NORM_KINDS = ("layernorm", "rmsnorm")
POSITIONAL_KINDS = ("learned", "sinusoidal", "rope", "alibi", "none")

# Sane upper bounds. The largest published dense models sit far inside them (Llama-3.1-405B: 126 layers, d_model
# 16,384, d_ff 53,248, 128 heads; Gemma: 256k vocab; Llama-4-Scout: 10M-token context). They exist to turn typos
# (a 10^7-layer model) into a clear message instead of a meaningless number.
LIMITS = {
    "vocab_size": 10_000_000,
    "d_model": 1_048_576,
    "n_layers": 10_000,
    "n_heads": 65_536,
    "n_kv_heads": 65_536,
    "head_dim": 1_048_576,        # as wide as d_model can be: one head of the whole width is a valid shape
    "d_ff": 16_777_216,
    "max_positions": 1_000_000_000,
}
MAX_CONTEXT = 1_000_000_000   # context length for KV-cache / FLOPs figures
MAX_BATCH = 1_000_000

LABELS = {   # plain-language names of the shape fields (the code name in brackets), for messages and forms
    "vocab_size": "vocabulary size",
    "d_model": "model width (d_model)",
    "n_layers": "number of layers",
    "n_heads": "number of heads",
    "n_kv_heads": "key/value heads",
    "head_dim": "head size (head_dim)",
    "d_ff": "MLP width (d_ff)",
    "mlp": "MLP type",
    "norm": "norm type",
    "positional": "positional encoding",
    "max_positions": "context length",
    "tied_embeddings": "tied embeddings",
    "qkv_bias": "q/k/v bias",
    "out_bias": "output-projection bias",
    "mlp_bias": "MLP bias",
    "qk_norm": "q/k norm",
}
REQUIRED = ("vocab_size", "d_model", "n_layers", "n_heads")
DEFAULTS = {   # n_kv_heads -> n_heads, head_dim -> d_model // n_heads, d_ff -> 4 * d_model (filled in make_shape)
    "n_kv_heads": None, "head_dim": None, "d_ff": None, "mlp": "swiglu", "norm": "rmsnorm", "positional": "rope",
    "max_positions": 2048, "tied_embeddings": False, "qkv_bias": False, "out_bias": False, "mlp_bias": False,
    "qk_norm": False,
}
FIELDS = tuple(LABELS)


class ShapeError(ValueError):
    """A shape field is missing or invalid; `.field` names it (a key of LABELS) for a form to show it there, and
    `.short` says what is wrong in a few words (for under the field; the message is the full sentence)."""

    def __init__(self, field: str, message: str, short: str | None = None):
        super().__init__(message)
        self.field = field
        self.short = short or message


@dataclass(frozen=True)
class Shape:
    """A validated model shape (build it with make_shape, which fills defaults and checks every field)."""

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    mlp: str
    norm: str
    positional: str
    max_positions: int
    tied_embeddings: bool
    qkv_bias: bool
    out_bias: bool
    mlp_bias: bool
    qk_norm: bool

    def as_dict(self) -> dict:
        return asdict(self)

    def with_kv_heads(self, n_kv_heads: int) -> Shape:
        """The same shape with another number of KV heads (MHA: n_heads, MQA: 1, GQA: in between)."""
        return make_shape(**{**self.as_dict(), "n_kv_heads": n_kv_heads})


def shape_errors(**shape) -> list[ShapeError]:
    """Every problem with a shape, one ShapeError per bad field (empty list: the shape is valid)."""
    errors: dict[str, ShapeError] = {}

    def bad(field: str, message: str, short: str | None = None) -> None:
        errors.setdefault(field, ShapeError(field, message, short))

    def name(key: str) -> str:
        return LABELS.get(key, key)

    for key in shape:
        if key not in LABELS:
            bad(key, f"Unknown shape field {key!r}; known fields: {', '.join(FIELDS)}.")
    for key in REQUIRED:
        if shape.get(key) is None:
            bad(key, f"The {name(key)} is required.", "required")
    values = {**DEFAULTS, **{k: v for k, v in shape.items() if v is not None}}

    for key in LIMITS:
        value = values.get(key)
        if value is None or key in errors:
            continue
        if isinstance(value, bool) or not isinstance(value, Integral):
            bad(key, f"The {name(key)} must be a whole number, got {value!r}.", "a whole number, please")
        elif value < 1:
            bad(key, f"The {name(key)} must be at least 1, got {value:,}.", "at least 1")
        elif value > LIMITS[key]:
            bad(key, f"The {name(key)} = {value:,} is beyond the sane upper bound {LIMITS[key]:,}.",
                f"at most {LIMITS[key]:,}")
    for key, kinds in (("mlp", MLP_KINDS), ("norm", NORM_KINDS), ("positional", POSITIONAL_KINDS)):
        if values[key] not in kinds:
            bad(key, f"The {name(key)} must be one of {', '.join(kinds)}; got {values[key]!r}.",
                f"one of {', '.join(kinds)}")
    for key in ("tied_embeddings", "qkv_bias", "out_bias", "mlp_bias", "qk_norm"):
        if not isinstance(values[key], bool):
            bad(key, f"The setting '{name(key)}' must be on or off, got {values[key]!r}.", "on or off")

    heads_ok = "n_heads" not in errors
    if heads_ok and "d_model" not in errors and values["head_dim"] is None and values["d_model"] % values["n_heads"]:
        bad("n_heads", f"The number of heads ({values['n_heads']:,}) must divide the model width "
                       f"({values['d_model']:,}) when the head size is automatic (head size = width / heads).",
            f"must divide the width {values['d_model']:,} (or set the head size)")
    if heads_ok and values["n_kv_heads"] is not None and "n_kv_heads" not in errors \
            and values["n_heads"] % values["n_kv_heads"]:
        bad("n_kv_heads", f"The key/value heads ({values['n_kv_heads']:,}) must divide the number of heads "
                          f"({values['n_heads']:,}): each key/value head serves a whole group of query heads.",
            f"must divide the {values['n_heads']:,} heads")
    return list(errors.values())


def make_shape(**shape) -> Shape:
    """Validate a shape given as keyword arguments (see LABELS), fill the defaults, and return it.

    Raises ShapeError (a ValueError with `.field`) for the first bad field; shape_errors() lists all of them.
    """
    errors = shape_errors(**shape)
    if errors:
        raise errors[0]
    values = {**DEFAULTS, **{k: v for k, v in shape.items() if v is not None}}
    for key in LIMITS:
        if values[key] is not None:
            values[key] = int(values[key])   # numpy / other Integral types -> plain int
    if values["n_kv_heads"] is None:
        values["n_kv_heads"] = values["n_heads"]
    if values["head_dim"] is None:
        values["head_dim"] = values["d_model"] // values["n_heads"]
    if values["d_ff"] is None:
        values["d_ff"] = 4 * values["d_model"]
    return Shape(**values)
