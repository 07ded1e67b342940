"""The model's facts a lesson's text may name: {n_layers}, {n_heads}, ... in a step's text, question, choices and
explanation are filled in from the configuration of the model in use, so a class on another model reads that
model's numbers. Only these names are replaced: every other brace (LaTeX's d_{model}, {answer}) is left as it is."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping

ATTENTION_KINDS = {"mha": "MHA", "gqa": "GQA", "mqa": "MQA"}
NAMES = ("n_layers", "last_layer", "n_heads", "n_kv_heads", "group", "head_dim", "rope_pairs", "sqrt_head_dim",
         "d_model", "d_ff", "ff_ratio", "embedding_params", "mlp_params", "vocab_size", "ln_vocab", "max_positions",
         "rope_base", "model_name", "norm", "mlp", "attention_kind")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(NAMES) + r")\}")


def attention_kind(n_heads: int, n_kv_heads: int) -> str:
    """'mha' (a KV head per query head), 'mqa' (one KV head) or 'gqa' (groups of query heads share one)."""
    if n_kv_heads == n_heads:
        return "mha"
    return "mqa" if n_kv_heads == 1 else "gqa"


def fact_values(config) -> dict[str, float | str]:
    """Every fact of a model's configuration (a ModelConfig), numbers as numbers."""
    c = config
    return {
        "n_layers": c.n_layers, "last_layer": c.n_layers - 1, "n_heads": c.n_heads, "n_kv_heads": c.n_kv_heads,
        "group": c.n_heads // c.n_kv_heads, "head_dim": c.head_dim, "rope_pairs": c.head_dim // 2,
        "sqrt_head_dim": math.sqrt(c.head_dim), "d_model": c.d_model, "d_ff": c.d_ff, "ff_ratio": c.d_ff / c.d_model,
        "embedding_params": c.vocab_size * c.d_model,
        "mlp_params": (3 if c.mlp == "swiglu" else 2) * c.d_model * c.d_ff,        # weights only, no biases
        "vocab_size": c.vocab_size, "ln_vocab": math.log(c.vocab_size), "max_positions": c.max_positions,
        "rope_base": c.rope_theta if c.rope_theta is not None else "—", "model_name": c.name,
        "norm": "RMSNorm" if c.norm == "rmsnorm" else "LayerNorm", "mlp": "SwiGLU" if c.mlp == "swiglu" else "GELU",
        "attention_kind": ATTENTION_KINDS[attention_kind(c.n_heads, c.n_kv_heads)],
    }


def shown(value: float | str) -> str:
    """A fact as a text shows it: whole numbers with thousands separators, others to 3 significant digits."""
    if isinstance(value, str):
        return value
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.3g}"


def model_facts(config) -> dict[str, str]:
    """The facts of a model's configuration as a text shows them."""
    return {name: shown(value) for name, value in fact_values(config).items()}


def fill(text: str, facts: Mapping[str, str]) -> str:
    """text with every {name} of NAMES replaced by the model's fact (left as it is when facts lacks it)."""
    return _PLACEHOLDER.sub(lambda m: facts.get(m.group(1), m.group(0)), text)
