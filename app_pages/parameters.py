"""Parameters page: exact parameter count, weight memory, KV cache and FLOPs for any decoder shape.

Everything above the last section is pure arithmetic (instant). Only the last section loads the real model, to show
that the calculator's count for its shape equals the sum of its tensors' sizes.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages._widgets import show_figure
from model.params import (
    CUSTOM,
    DEFAULTS,
    DTYPE_BITS,
    LABELS,
    MAX_BATCH,
    MAX_CONTEXT,
    MLP_KINDS,
    NORM_KINDS,
    POSITIONAL_KINDS,
    PRESET_SOURCES,
    PRESETS,
    Breakdown,
    Shape,
    attention_flops_crossover,
    attention_variants,
    count_parameters,
    forward_flops_per_token,
    gguf_tensor_group,
    human_bytes,
    human_count,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    make_shape,
    shape_errors,
    shape_from_config,
    weight_memory,
)
from viz.params import (
    GROUP_LABELS,
    breakdown_treemap,
    comparison_figure,
    flops_figure,
    layer_split_figure,
    memory_figure,
)

DEFAULT_PRESET = "SmolLM2-135M"   # the model the rest of the app runs
K = "params_"                     # prefix of every session-state key on this page
NUMBER_FIELDS = ("vocab_size", "d_model", "n_layers", "d_ff", "n_heads", "n_kv_heads", "head_dim", "max_positions")
CHOICE_FIELDS = {"mlp": MLP_KINDS, "norm": NORM_KINDS, "positional": POSITIONAL_KINDS}
FLAG_FIELDS = ("tied_embeddings", "qkv_bias", "out_bias", "mlp_bias", "qk_norm")
OPTIONAL_HINTS = {"n_kv_heads": "auto", "head_dim": "auto"}   # empty: = query heads / d_model ÷ heads
FLAG_LABELS = {"tied_embeddings": "tied head", "qkv_bias": "q/k/v bias", "out_bias": "out bias",
               "mlp_bias": "MLP bias", "qk_norm": "q/k norm"}
HELP = {
    "vocab_size": "Rows of the token embedding (and of the LM head when it is not tied).",
    "d_model": "Width of the residual stream: every token is a vector of this size between layers.",
    "n_layers": "Number of identical transformer blocks.",
    "d_ff": "Hidden width of the MLP (4 × d_model in GPT-2; about 8/3 × d_model, rounded, with SwiGLU).",
    "n_heads": "Query heads per layer.",
    "n_kv_heads": "Key/value heads per layer. = query heads: MHA; 1: MQA; in between (a divisor): GQA. "
                  "Leave empty for = query heads.",
    "head_dim": "Width of one head. Leave empty for d_model / heads; Qwen3 and Gemma set it separately.",
    "max_positions": "Context length the model was trained for; a learned position table has this many rows.",
    "mlp": "gelu: up and down matrices (GPT-2). swiglu: gate, up and down (Llama, Qwen, Mistral, SmolLM2).",
    "norm": "layernorm has a weight and a bias per channel; rmsnorm only a weight.",
    "positional": "Only 'learned' adds parameters (a table of positions × d_model); the others are formulas.",
    "tied_embeddings": "Tied embeddings: the LM head reuses the token-embedding matrix (no extra parameters).",
    "qkv_bias": "Biases on the q, k, v projections (GPT-2, Qwen2).",
    "out_bias": "Bias on the attention output projection (GPT-2).",
    "mlp_bias": "Biases on the MLP matrices (GPT-2).",
    "qk_norm": "A norm over each head's q and k vectors (one head_dim weight each, as in Qwen3).",
}


# ------------------------------------------------------------------------------------------------------- state

def load_preset() -> None:
    """on_change of the preset box: copy the preset's fields into the form (custom keeps what is there)."""
    name = st.session_state[K + "preset"]
    if name not in PRESETS:
        return
    values = {**DEFAULTS, **PRESETS[name]}
    for field in (*NUMBER_FIELDS, *CHOICE_FIELDS, *FLAG_FIELDS):
        st.session_state[K + field] = values[field]
    st.session_state[K + "context"] = values["max_positions"]


def mark_custom() -> None:
    """on_change of any shape field: the form no longer shows the preset it started from."""
    st.session_state[K + "preset"] = CUSTOM


def init_state() -> None:
    if K + "preset" not in st.session_state:
        st.session_state[K + "preset"] = DEFAULT_PRESET
        load_preset()
    st.session_state.setdefault(K + "context", PRESETS[DEFAULT_PRESET]["max_positions"])
    st.session_state.setdefault(K + "batch", 1)
    st.session_state.setdefault(K + "kv_dtype", "bf16")
    st.session_state.setdefault(K + "cmp_a", "GPT-2 small")
    st.session_state.setdefault(K + "cmp_b", DEFAULT_PRESET)


# -------------------------------------------------------------------------------------------------------- form

def shape_form() -> tuple[dict, dict]:
    """The shape inputs; returns (raw field values, {field: empty slot right under its widget})."""
    slots: dict = {}
    top = st.columns([2, 3], vertical_alignment="bottom")
    top[0].selectbox("Preset", [*PRESETS, CUSTOM], key=K + "preset", on_change=load_preset, persist_state="session",
                     help="Pick a real model's shape, then change any field (the box then says 'custom').")
    name = st.session_state[K + "preset"]
    top[1].caption(f"Shape from the published config of `{PRESET_SOURCES[name]}`." if name in PRESET_SOURCES
                   else "Custom shape: every field below is yours.")

    def number(col, field: str) -> None:
        with col:
            st.number_input(LABELS[field], key=K + field, step=1, format="%d", min_value=None, max_value=None,
                            placeholder=OPTIONAL_HINTS.get(field), help=HELP[field], on_change=mark_custom,
                            persist_state="session")
            slots[field] = st.empty()

    for row in (NUMBER_FIELDS[:4], NUMBER_FIELDS[4:]):
        # 2-line labels: boxes aligned at the bottom
        for col, field in zip(st.columns(4, vertical_alignment="bottom"), row, strict=True):
            number(col, field)
    for col, (field, kinds) in zip(st.columns(3), CHOICE_FIELDS.items(), strict=True):
        with col:
            st.selectbox(LABELS[field], kinds, key=K + field, help=HELP[field], on_change=mark_custom,
                         persist_state="session")
            slots[field] = st.empty()
    # one wrapping row at each box's own width: five equal columns cut the labels at 1024 px ("tied h…")
    with st.container(horizontal=True, gap="medium", key=K + "flags"):
        for field in FLAG_FIELDS:
            st.checkbox(FLAG_LABELS[field], key=K + field, help=HELP[field], on_change=mark_custom,
                        persist_state="session")
    raw = {field: st.session_state.get(K + field) for field in (*NUMBER_FIELDS, *CHOICE_FIELDS, *FLAG_FIELDS)}
    return raw, slots


def read_shape() -> Shape | None:
    """Draw the form; show every bad field's message right under it. None while any field is bad."""
    raw, slots = shape_form()
    errors = shape_errors(**raw)
    for err in errors:
        slots.get(err.field, st).error(str(err), icon=":material/error:")
    if errors:
        fields = ", ".join(LABELS.get(e.field, e.field) for e in errors)
        st.warning(f"Fix the field{'s' if len(errors) > 1 else ''} marked above ({fields}) to see the counts.",
                   icon=":material/warning:")
        return None
    return make_shape(**raw)


# ----------------------------------------------------------------------------------------------------- results

def summary(b: Breakdown) -> None:
    s = b.shape
    pct = b.layer.percentages()
    cols = [*st.columns(2), *st.columns(2)]          # 2 × 2: four in a row cut the values at 1024 px
    cols[0].metric("Total parameters", f"{b.total:,}", help="Exact count; every tensor element once.")
    cols[0].caption(f"≈ {human_count(b.total)} · without embeddings and head: {human_count(b.non_embedding)}")
    cols[1].metric("MLP % of a layer", f"{pct['mlp']:.1f}%",
                   help="MLP parameters / all parameters of one transformer block.")
    cols[1].caption(f"attention {pct['attention']:.1f}% · norms {pct['norms']:.2f}%")
    cols[2].metric("Weights in bf16", human_bytes(weight_memory(b.total)["bf16"]))
    cols[2].caption(f"{b.total:,} × 2 bytes")
    cols[3].metric("KV cache per token", human_bytes(kv_cache_bytes_per_token(s, "bf16")))
    cols[3].caption(f"2 × {s.n_layers} layers × {s.n_kv_heads} KV heads × {s.head_dim} × 2 bytes")


def breakdown_section(b: Breakdown) -> None:
    st.subheader("Where the parameters are")
    show_figure(breakdown_treemap(b.parts(), title="Whole model"), key=K + "treemap", filename="parameters_treemap")
    show_figure(layer_split_figure([(f"one of {b.n_layers} layers", b.layer.groups())],
                                   title="Inside one transformer layer"),
                key=K + "layer_split", filename="parameters_one_layer")
    pct = b.layer.percentages()
    st.markdown(f"The **MLP holds {pct['mlp']:.0f}%** of every layer's parameters, attention {pct['attention']:.0f}%: "
                f"attention decides *where* each token looks, the MLP holds most of the weights.")
    st.markdown(f"**One layer**: {b.layer.total:,} parameters; the model has {b.n_layers} identical ones.")
    st.dataframe(layer_table(b), hide_index=True, width="stretch", key=K + "layer_table",
                 column_config={"parameters": st.column_config.NumberColumn(format="localized"),
                                "% of layer": st.column_config.NumberColumn(format="%.2f%%")})
    st.markdown(f"**Whole model**: {b.total:,} parameters.")
    st.dataframe(model_table(b), hide_index=True, width="stretch", key=K + "model_table",
                 column_config={"parameters": st.column_config.NumberColumn(format="localized"),
                                "% of model": st.column_config.NumberColumn(format="%.2f%%")})


def percent(n: int, total: int) -> str:
    share = 100 * n / total
    return f"{share:.1f}%" if share >= 1 or share == 0 else f"{share:.2f}%"


def layer_table(b: Breakdown) -> pd.DataFrame:
    s, lay = b.shape, b.layer
    d, q_w, kv_w = s.d_model, s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim
    norm = "weight + bias" if s.norm == "layernorm" else "weight"
    qkv_b, out_b, mlp_b = (" + bias" if flag else "" for flag in (s.qkv_bias, s.out_bias, s.mlp_bias))
    rows = [
        ("attention norm", "norms", f"{d} ({norm})", lay.attn_norm),
        ("q projection", "attention", f"{d} × {q_w}{qkv_b}", lay.q),
        ("k projection", "attention", f"{d} × {kv_w}{qkv_b}", lay.k),
        ("v projection", "attention", f"{d} × {kv_w}{qkv_b}", lay.v),
        ("o projection", "attention", f"{q_w} × {d}{out_b}", lay.o),
        ("q norm", "norms", f"{s.head_dim} ({norm})", lay.q_norm),
        ("k norm", "norms", f"{s.head_dim} ({norm})", lay.k_norm),
        ("MLP norm", "norms", f"{d} ({norm})", lay.mlp_norm),
        ("gate projection", "mlp", f"{d} × {s.d_ff}{mlp_b}", lay.gate),
        ("up projection", "mlp", f"{d} × {s.d_ff}{mlp_b}", lay.up),
        ("down projection", "mlp", f"{s.d_ff} × {d}{mlp_b}", lay.down),
    ]
    return pd.DataFrame([{"tensor": t, "part": GROUP_LABELS[g], "shape": sh, "parameters": n,
                          "% of layer": 100 * n / lay.total} for t, g, sh, n in rows if n])


def model_table(b: Breakdown) -> pd.DataFrame:
    s = b.shape
    rows = [("token embedding", b.token_embedding), ("position embedding", b.position_embedding),
            (f"{b.n_layers} × layer", b.layers), ("final norm", b.final_norm),
            ("LM head" + (" (tied: shared)" if s.tied_embeddings else ""), b.lm_head)]
    rows = [(name, n) for name, n in rows if n or name.startswith("LM head")]
    rows.append(("total", b.total))
    return pd.DataFrame([{"part": name, "parameters": n, "% of model": 100 * n / b.total} for name, n in rows])


def memory_section(b: Breakdown) -> None:
    s = b.shape
    st.subheader("Memory: weights and KV cache")
    cols = st.columns(3)
    with cols[0]:
        st.number_input("context length (tokens)", key=K + "context", step=1, format="%d", persist_state="session",
                        help="Tokens kept in the KV cache per sequence (and attended to, for the FLOPs below).")
        context_slot = st.empty()
    with cols[1]:
        st.number_input("batch (sequences)", key=K + "batch", step=1, format="%d", persist_state="session")
        batch_slot = st.empty()
    with cols[2]:
        st.selectbox("KV cache dtype", list(DTYPE_BITS), key=K + "kv_dtype", persist_state="session")
    context, batch, kv_dtype = (st.session_state[K + k] for k in ("context", "batch", "kv_dtype"))
    ok = True
    for value, limit, slot, what in ((context, MAX_CONTEXT, context_slot, "context length"),
                                     (batch, MAX_BATCH, batch_slot, "batch")):
        if value is None or not 1 <= value <= limit:
            slot.error(f"The {what} must be between 1 and {limit:,}.", icon=":material/error:")
            ok = False
    if not ok:
        return
    variants = attention_variants(s)
    kv = {}
    rows = []
    for label, n_kv in variants.items():
        v_shape = s.with_kv_heads(n_kv)
        tag = f"{label} ({n_kv} KV head{'s' if n_kv > 1 else ''})"
        kv[tag] = kv_cache_bytes(v_shape, context, batch, kv_dtype)
        total = count_parameters(**v_shape.as_dict()).total
        rows.append({"attention": tag + (" ← this shape" if n_kv == s.n_kv_heads else ""),
                     "parameters": total, "KV bytes / token": kv_cache_bytes_per_token(v_shape, kv_dtype),
                     f"KV cache ({context:,} × {batch})": human_bytes(kv[tag])})
    show_figure(memory_figure(weight_memory(b.total), kv, context, batch), key=K + "memory",
                filename="memory_weights_kv_cache")
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=K + "kv_table",
                 column_config={"parameters": st.column_config.NumberColumn(format="localized"),
                                "KV bytes / token": st.column_config.NumberColumn(format="localized")})
    st.caption("Weights: plain storage (real int8/int4 formats add block scales, e.g. GGUF Q4_1 is 5 bits per "
               "weight). KV cache = 2 (K and V) × layers × KV heads × head_dim × bytes × tokens × batch. GQA/MQA "
               "shrink the cache by sharing each K/V head among a group of query heads.")

    st.subheader("Compute: forward FLOPs per token")
    flops = forward_flops_per_token(s, context)
    crossover = attention_flops_crossover(s)
    cols = st.columns(3)
    cols[0].metric(f"total at {context:,} tokens", flops_short(flops.total), help=f"{flops.total:,} FLOPs per token")
    cols[1].metric("matmuls (weights)", flops_short(flops.matmul),
                   help=f"2 × the weight matrices: {flops.matmul:,} FLOPs per token")
    cols[2].metric("attention (QKᵀ, AV)", flops_short(flops.attention),
                   help=f"Scores and weighted sum over {context:,} positions: {flops.attention:,} FLOPs per token")
    st.caption("FLOPs per token: M = million (10⁶), G = billion (10⁹), T = trillion (10¹²). The ? beside each "
               "label gives the exact count.")
    steps = sorted({max(1, round(2 * max(context, crossover) * i / 60)) for i in range(61)})
    show_figure(flops_figure(flops.matmul, flops.attention // context, steps, marker=context),
                key=K + "flops", filename="flops_per_token")
    st.caption(f"Convention: a multiply-add is 2 FLOPs. Matmuls = 2 × (q, k, v, o, MLP and LM-head weights; the LM "
               f"head counts even when tied, embedding lookups, norms and biases do not). Attention = 2 × 2 × layers "
               f"× heads × head_dim × context (scores q·k, then the weighted sum of v) for a token that sees "
               f"`context` positions. Attention costs as much as all the matmuls from about {crossover:,} tokens.")


def flops_short(n: int) -> str:
    """835145472 -> '835 M', 1.4e9 -> '1.4 G': 3 significant digits, short enough for a third of a 1024 px page."""
    for value, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= value:
            return f"{n / value:.3g} {suffix}" if n / value < 1000 else f"{n / value:,.0f} {suffix}"
    return f"{n:,}"


def comparison_section(current: Shape | None) -> None:
    st.subheader("Compare two shapes")
    options = ["shape above", *PRESETS]
    cols = st.columns(2)
    cols[0].selectbox("Left", options, key=K + "cmp_a", persist_state="session")
    cols[1].selectbox("Right", options, key=K + "cmp_b", persist_state="session")
    picked = []
    for key in ("cmp_a", "cmp_b"):
        name = st.session_state[K + key]
        if name == "shape above":
            if current is None:
                st.info("The shape above has an error; pick a preset here or fix it.")
                return
            picked.append(("shape above", current))
        else:
            picked.append((name, make_shape(**PRESETS[name])))
    counts = [(name, count_parameters(**shape.as_dict())) for name, shape in picked]
    if picked[0][0] == picked[1][0]:
        counts[1] = (picked[1][0] + " (again)", counts[1][1])
    show_figure(comparison_figure([(name, b.groups()) for name, b in counts], title="Share of all parameters"),
                key=K + "cmp_parts", filename="compare_parts")
    show_figure(layer_split_figure([(name, b.layer.groups()) for name, b in counts], title="Inside one layer"),
                key=K + "cmp_layer", filename="compare_one_layer")
    st.table(compare_table(counts).set_index(""))


def compare_table(counts: list[tuple[str, Breakdown]]) -> pd.DataFrame:
    def describe(b: Breakdown) -> dict[str, str]:
        s = b.shape
        kind = "MHA" if s.n_kv_heads == s.n_heads else ("MQA" if s.n_kv_heads == 1 else "GQA")
        return {
            "total parameters": f"{b.total:,}",
            **{f"{GROUP_LABELS[g]}": f"{n:,} ({percent(n, b.total)})" for g, n in b.groups().items()},
            "one layer": f"{b.layer.total:,}",
            "layers × d_model": f"{s.n_layers} × {s.d_model}",
            "heads (KV heads) × head_dim": f"{s.n_heads} ({s.n_kv_heads}, {kind}) × {s.head_dim}",
            "d_ff · MLP · norm": f"{s.d_ff} · {s.mlp} · {s.norm}",
            "positions · embeddings": f"{s.positional} · {'tied' if s.tied_embeddings else 'untied'}",
            "weights in bf16": human_bytes(weight_memory(b.total)["bf16"]),
            "KV cache per token (bf16)": human_bytes(kv_cache_bytes_per_token(s, "bf16")),
        }
    table = {name: describe(b) for name, b in counts}
    return pd.DataFrame({"": list(next(iter(table.values()))), **{n: list(d.values()) for n, d in table.items()}})


def check_section() -> None:
    st.subheader("Check against the loaded model")
    try:
        from app_pages._state import get_model

        lm = get_model()
        sizes = {str(name): int(n) for name, n in lm.tensor_sizes.items()}
        shape = shape_from_config(lm.config)
    except Exception as exc:   # the engine is optional for this page: the calculator above never needs it
        st.info(f"The real model could not be loaded here, so this check is skipped ({type(exc).__name__}: {exc}).",
                icon=":material/info:")
        return
    b = count_parameters(**shape.as_dict())
    tensor_groups: dict[str, int] = {}
    for name, n in sizes.items():
        try:
            group = gguf_tensor_group(name)
        except ValueError:
            group = "other"
        tensor_groups[group] = tensor_groups.get(group, 0) + n
    tensor_total = sum(sizes.values())
    model_name = getattr(lm.config, "name", "the loaded model")
    if tensor_total == b.total:
        st.success(f"{model_name}: the calculator says {b.total:,} parameters for its shape, and its "
                   f"{len(sizes)} tensors hold {tensor_total:,} values. They match exactly.",
                   icon=":material/check_circle:")
    else:
        st.error(f"{model_name}: the calculator says {b.total:,} but the tensors hold {tensor_total:,} "
                 f"(difference {tensor_total - b.total:+,}).", icon=":material/cancel:")
    rows = []
    for group in (*b.groups(), *(g for g in tensor_groups if g not in b.groups())):
        calc, real = b.groups().get(group, 0), tensor_groups.get(group, 0)
        rows.append({"part": GROUP_LABELS.get(group, group), "calculator": calc, "sum of tensors": real,
                     "match": "✓" if calc == real else "✗"})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=K + "check_table",
                 column_config={"calculator": st.column_config.NumberColumn(format="localized"),
                                "sum of tensors": st.column_config.NumberColumn(format="localized")})
    st.caption(f"Shape read from the file: {lm.config.describe() if hasattr(lm.config, 'describe') else shape}. "
               f"Tied embeddings mean no separate output tensor, so the LM head counts 0.")


# --------------------------------------------------------------------------------------------------------- page

init_state()
st.title("Parameters, memory and compute")
st.caption("Exact counts for any decoder shape: pick a real model, then change anything.")
with st.container(border=True):
    shape = read_shape()
if shape is not None:
    breakdown = count_parameters(**shape.as_dict())
    summary(breakdown)
    breakdown_section(breakdown)
    memory_section(breakdown)
comparison_section(shape)
check_section()
