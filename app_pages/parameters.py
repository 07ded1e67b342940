"""Parameters page: exact parameter count, weight memory, KV cache and FLOPs for any decoder shape.

Everything above the last section is pure arithmetic (instant). Only the last section reads the real model, to show
that the calculator's count for its shape equals the sum of its tensors' sizes.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages import _caches as caches
from app_pages import _controls as controls
from app_pages import _schemas as S
from app_pages import _shell as shell
from app_pages._widgets import show_figure
from model.calculator.params import (
    LABELS,
    MAX_BATCH,
    MAX_CONTEXT,
    PRESET_SOURCES,
    PRESETS,
    Breakdown,
    Shape,
    attention_flops_crossover,
    attention_variants,
    count_parameters,
    forward_flops_per_token,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    make_shape,
    shape_errors,
    shape_from_config,
    tensor_group_sums,
    weight_memory,
)
from viz.format import SI, format_bytes, format_si
from viz.params import (
    GROUP_LABELS,
    breakdown_treemap,
    comparison_figure,
    flops_figure,
    layer_split_figure,
    memory_figure,
)

K = S.PARAMS_KEY                  # prefix of every state key on this page: params_<field>
FIELDS = (*S.SHAPE_NUMBERS, *S.SHAPE_CHOICES, *S.SHAPE_FLAGS)
FORM_LABELS = {                   # short enough for one line in a quarter of a 1024 px page
    "vocab_size": "vocabulary size", "d_model": "width (d_model)", "n_layers": "layers", "d_ff": "MLP width (d_ff)",
    "n_heads": "heads", "n_kv_heads": "key/value heads", "head_dim": "head size", "max_positions": "context length",
    "mlp": "MLP type", "norm": "norm type", "positional": "positions", "tied_embeddings": "tied output head",
    "qkv_bias": "q/k/v bias", "out_bias": "output bias", "mlp_bias": "MLP bias", "qk_norm": "q/k norm",
}
HELP = {
    "vocab_size": "Rows of the token embedding (and of the output head when it is not tied).",
    "d_model": "Width of the residual stream: every token is a vector of this size between layers.",
    "n_layers": "Number of identical transformer blocks.",
    "d_ff": "Hidden width of the MLP (4 × d_model in GPT-2; about 8/3 × d_model, rounded, with SwiGLU). Leave empty "
            "for 4 × width.",
    "n_heads": "Query heads per layer.",
    "n_kv_heads": "Key/value heads per layer. Equal to the heads: MHA; 1: MQA; in between (a divisor): GQA. "
                  "Leave empty for 'same as heads'.",
    "head_dim": "Width of one head. Leave empty for width / heads; Qwen3 and Gemma set it separately.",
    "max_positions": "Context length the model was trained for; a learned position table has this many rows.",
    "mlp": "gelu: up and down matrices (GPT-2). swiglu: gate, up and down (Llama, Qwen, Mistral, SmolLM2).",
    "norm": "layernorm has a weight and a bias per channel; rmsnorm only a weight.",
    "positional": "Only 'learned' adds parameters (a table of positions × d_model); the others are formulas.",
    "tied_embeddings": "The output head reuses the token-embedding matrix (no extra parameters).",
    "qkv_bias": "Biases on the q, k, v projections (GPT-2, Qwen2).",
    "out_bias": "Bias on the attention output projection (GPT-2).",
    "mlp_bias": "Biases on the MLP matrices (GPT-2).",
    "qk_norm": "A norm over each head's q and k vectors (one head_dim weight each, as in Qwen3).",
}
FLOP_PREFIXES = SI[:5]            # up to T: '1.8e5 TFLOPs', never a wall of digits
ss = st.session_state


# ------------------------------------------------------------------------------------------------------- state

def follow_preset() -> None:
    """A preset's fields are the preset's (a link or a pick names only the preset); 'custom' keeps the form."""
    name = ss[K + "preset"]
    if name in PRESETS:
        values = S.preset_values(name)
        for field in FIELDS:
            ss[K + field] = values[field]


def mark_custom() -> None:
    """on_change of any shape field: the form no longer shows the preset it started from."""
    ss[K + "preset"] = S.CUSTOM


# -------------------------------------------------------------------------------------------------------- form

def shape_form() -> dict:
    """The shape inputs, each with a slot right under it for its message; returns the raw field values."""
    slots: dict = {}
    with st.container(horizontal=True, vertical_alignment="bottom", gap="medium"):
        st.selectbox("Preset", [*PRESETS, S.CUSTOM], key=K + "preset", width=220, **controls.PERSIST,
                     help="Pick a real model's shape, then change any field (the box then says 'custom').")
        name = ss[K + "preset"]
        st.caption(f"Shape from the published config of `{PRESET_SOURCES[name]}`." if name in PRESET_SOURCES
                   else "Custom shape: every field below is yours.")
    raw = {field: ss.get(K + field) for field in FIELDS}
    errors = shape_errors(**raw)
    custom = name == S.CUSTOM
    with st.expander(f"Shape: {shape_line(raw)}" + ("" if custom else " (open to change any field)"),
                     expanded=custom or bool(errors), icon=":material/tune:"):
        draw_fields(slots)                           # the widgets' values were in the state before they were drawn
    for err in errors:      # a short red line under the field: the grid's boxes stay where they are
        slots[err.field].caption(f":red[:material/error: {err.short}]", help=str(err))
    return raw if not errors else {"_errors": errors}


def shape_line(raw: dict) -> str:
    """The shape in one short line (raw fields: empty ones read 'auto')."""
    def v(field: str) -> str:
        value = raw.get(field)
        return "auto" if value is None else f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) \
            else str(value)
    return (f"{v('n_layers')} layers · width {v('d_model')} · {v('n_heads')} heads ({v('n_kv_heads')} KV) · "
            f"MLP {v('d_ff')} {v('mlp')} · vocab {v('vocab_size')}")


def draw_fields(slots: dict) -> None:
    """The shape's fields, three number boxes a row, each with an empty slot under it for its message."""

    def field_box(col, field: str, draw) -> None:
        with col:
            draw()
            slots[field] = st.empty()

    numbers = S.SHAPE_NUMBERS
    for row in (numbers[:3], numbers[3:6], numbers[6:]):     # 3 a row: a 10-digit value stays readable at 1024 px
        for col, field in zip(st.columns(3, vertical_alignment="top"), row, strict=False):
            field_box(col, field, lambda f=field: st.number_input(
                FORM_LABELS[f], key=K + f, value=None, step=1, format="%d", min_value=None, max_value=None,
                placeholder="automatic" if f in S.AUTO_FIELDS else None, help=HELP[f], on_change=mark_custom,
                **controls.PERSIST))
    for col, (field, kinds) in zip(st.columns(3, vertical_alignment="top"), S.SHAPE_CHOICES.items(), strict=True):
        field_box(col, field, lambda f=field, k=kinds: st.selectbox(
            FORM_LABELS[f], k, key=K + f, help=HELP[f], on_change=mark_custom, **controls.PERSIST))
    with st.container(horizontal=True, gap="medium", key=K + "flags"):
        for field in S.SHAPE_FLAGS:
            st.checkbox(FORM_LABELS[field], key=K + field, help=HELP[field], on_change=mark_custom,
                        **controls.PERSIST)


def read_shape() -> Shape | None:
    """Draw the form; None (after saying which fields to fix) while any field is bad."""
    raw = shape_form()
    errors = raw.get("_errors")
    if errors:
        fields = ", ".join(LABELS.get(e.field, e.field) for e in errors)
        st.warning(f"Fix the field{'s' if len(errors) > 1 else ''} marked in red ({fields}) to see the counts.",
                   icon=":material/warning:")
        return None
    return make_shape(**raw)


# ----------------------------------------------------------------------------------------------------- results

def percent(n: int, total: int) -> str:
    share = 100 * n / total
    return f"{share:.1f}%" if share >= 1 or share == 0 else f"{share:.2f}%"


def summary(b: Breakdown) -> None:
    s = b.shape
    pct = b.layer.percentages()
    cols = st.columns(4)                             # short values (format_si): four fit a 1024 px row
    cols[0].metric("Total parameters", format_si(b.total, digits=4), help=f"Exactly {b.total:,}: every tensor "
                   "element once.")
    cols[1].metric("MLP share of a layer", f"{pct['mlp']:.1f}%",
                   help=f"MLP parameters / all parameters of one transformer block (attention {pct['attention']:.1f}%, "
                        f"norms {pct['norms']:.2f}%).")
    cols[2].metric("Weights in bf16", format_bytes(weight_memory(b.total)["bf16"]), help=f"{b.total:,} × 2 bytes")
    cols[3].metric("KV cache / token", format_bytes(kv_cache_bytes_per_token(s, "bf16")),
                   help=f"2 (K and V) × {s.n_layers} layers × {s.n_kv_heads} KV heads × {s.head_dim} × 2 bytes")
    st.caption(f"exactly {b.total:,} parameters · without embeddings and output head: "
               f"{format_si(b.non_embedding, digits=4)}")


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
            ("output head" + (" (tied: shared)" if s.tied_embeddings else ""), b.lm_head)]
    rows = [(name, n) for name, n in rows if n or name.startswith("output head")]
    rows.append(("total", b.total))
    return pd.DataFrame([{"part": name, "parameters": n, "% of model": 100 * n / b.total} for name, n in rows])


def breakdown_section(b: Breakdown) -> None:
    show_figure(breakdown_treemap(b.parts(), title="Where the parameters are", height=400), key=K + "treemap",
                filename="parameters_treemap")
    show_figure(layer_split_figure([(f"one of {b.n_layers} layers", b.layer.groups())],
                                   title="Inside one transformer layer"),
                key=K + "layer_split", filename="parameters_one_layer")
    pct = b.layer.percentages()
    st.markdown(f"The **MLP holds {pct['mlp']:.0f}%** of every layer's parameters, attention {pct['attention']:.0f}%: "
                "attention decides *where* each token looks, the MLP holds most of the weights.")
    st.markdown(f"**One layer**: {b.layer.total:,} parameters; the model has {b.n_layers} identical ones.")
    st.dataframe(layer_table(b), hide_index=True, width="stretch", key=K + "layer_table",
                 column_config={"parameters": st.column_config.NumberColumn(format="localized"),
                                "% of layer": st.column_config.NumberColumn(format="%.2f%%")})
    st.markdown(f"**Whole model**: {b.total:,} parameters.")
    st.dataframe(model_table(b), hide_index=True, width="stretch", key=K + "model_table",
                 column_config={"parameters": st.column_config.NumberColumn(format="localized"),
                                "% of model": st.column_config.NumberColumn(format="%.2f%%")})


def memory_section(b: Breakdown) -> None:
    s = b.shape
    st.markdown("#### Memory: weights and KV cache")
    cols = st.columns(3, vertical_alignment="top")
    cols[0].number_input("context length (tokens)", key=K + "context", value=None, step=1, format="%d", min_value=1,
                         max_value=MAX_CONTEXT, placeholder=f"{s.max_positions:,} (the model's)", **controls.PERSIST,
                         help="Tokens kept in the KV cache per sequence (and attended to, for the FLOPs below). "
                              "Empty: the shape's context length.")
    cols[1].number_input("batch (sequences)", key=K + "batch", step=1, format="%d", min_value=1, max_value=MAX_BATCH,
                         **controls.PERSIST)
    cols[2].selectbox("KV cache dtype", S.KV_DTYPES, key=K + "kv_dtype", **controls.PERSIST)
    context = int(ss[K + "context"] or s.max_positions)
    batch, kv_dtype = int(ss[K + "batch"] or 1), ss[K + "kv_dtype"]
    kv, rows = {}, []
    for label, n_kv in attention_variants(s).items():
        v_shape = s.with_kv_heads(n_kv)
        tag = f"{label} ({n_kv} KV head{'s' if n_kv > 1 else ''})"
        kv[tag] = kv_cache_bytes(v_shape, context, batch, kv_dtype)
        rows.append({"attention": tag + (" ← this shape" if n_kv == s.n_kv_heads else ""),
                     "parameters": f"{count_parameters(**v_shape.as_dict()).total:,}",   # exact beyond 2^53
                     "KV bytes / token": kv_cache_bytes_per_token(v_shape, kv_dtype),
                     f"KV cache ({context:,} × {batch})": format_bytes(kv[tag])})
    show_figure(memory_figure(weight_memory(b.total), kv, context, batch), key=K + "memory",
                filename="memory_weights_kv_cache")
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=K + "kv_table",
                 column_config={"KV bytes / token": st.column_config.NumberColumn(format="localized")})
    st.caption("Weights: plain storage (real int8/int4 formats add block scales, e.g. GGUF Q4_1 is 5 bits per "
               "weight). KV cache = 2 (K and V) × layers × KV heads × head_dim × bytes × tokens × batch. GQA/MQA "
               "shrink the cache by sharing each K/V head among a group of query heads.")

    st.markdown("#### Compute: forward FLOPs per token")
    flops = forward_flops_per_token(s, context)
    crossover = attention_flops_crossover(s)
    cols = st.columns(3)
    cols[0].metric(f"total at {format_si(context)} tokens", format_si(flops.total, "FLOPs", prefixes=FLOP_PREFIXES),
                   help=f"{flops.total:,} FLOPs per token")
    cols[1].metric("matmuls (weights)", format_si(flops.matmul, "FLOPs", prefixes=FLOP_PREFIXES),
                   help=f"2 × the weight matrices: {flops.matmul:,} FLOPs per token")
    cols[2].metric("attention (QKᵀ, AV)", format_si(flops.attention, "FLOPs", prefixes=FLOP_PREFIXES),
                   help=f"Scores and weighted sum over {context:,} positions: {flops.attention:,} FLOPs per token")
    steps = sorted({max(1, round(2 * max(context, crossover) * i / 60)) for i in range(61)})
    show_figure(flops_figure(flops.matmul, flops.attention // context, steps, marker=context),
                key=K + "flops", filename="flops_per_token")
    st.caption(f"Convention: a multiply-add is 2 FLOPs (M = 10⁶, G = 10⁹, T = 10¹²; the ? gives the exact count). "
               f"Matmuls = 2 × (q, k, v, o, MLP and output-head weights; the head counts even when tied, embedding "
               f"lookups, norms and biases do not). Attention = 2 × 2 × layers × heads × head_dim × context (scores "
               f"q·k, then the weighted sum of v) for a token that sees `context` positions. Attention costs as much "
               f"as all the matmuls from about {crossover:,} tokens.")


def compare_table(counts: list[tuple[str, Breakdown]]) -> pd.DataFrame:
    def describe(b: Breakdown) -> dict[str, str]:
        s = b.shape
        kind = "MHA" if s.n_kv_heads == s.n_heads else ("MQA" if s.n_kv_heads == 1 else "GQA")
        return {
            "total parameters": f"{b.total:,}",
            **{f"{GROUP_LABELS[g]}": f"{n:,} ({percent(n, b.total)})" for g, n in b.groups().items()},
            "one layer": f"{b.layer.total:,}",
            "layers × width": f"{s.n_layers} × {s.d_model}",
            "heads (KV heads) × head size": f"{s.n_heads} ({s.n_kv_heads}, {kind}) × {s.head_dim}",
            "MLP width · MLP · norm": f"{s.d_ff} · {s.mlp} · {s.norm}",
            "positions · embeddings": f"{s.positional} · {'tied' if s.tied_embeddings else 'untied'}",
            "weights in bf16": format_bytes(weight_memory(b.total)["bf16"]),
            "KV cache per token (bf16)": format_bytes(kv_cache_bytes_per_token(s, "bf16")),
        }
    table = {name: describe(b) for name, b in counts}
    return pd.DataFrame({"": list(next(iter(table.values()))), **{n: list(d.values()) for n, d in table.items()}})


def comparison_section(current: Shape | None) -> None:
    st.markdown("#### Compare two shapes")
    cols = st.columns(2)
    cols[0].selectbox("Left", S.COMPARE_OPTIONS, key=K + "cmp_a", **controls.PERSIST)
    cols[1].selectbox("Right", S.COMPARE_OPTIONS, key=K + "cmp_b", **controls.PERSIST)
    picked = []
    for key in ("cmp_a", "cmp_b"):
        name = ss[K + key]
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


def check_section() -> None:
    st.markdown("#### Check against the loaded model")
    lm = caches.get_model()
    sizes = {str(name): int(n) for name, n in lm.tensor_sizes.items()}
    b = count_parameters(**shape_from_config(lm.config).as_dict())
    tensor_groups = tensor_group_sums(sizes)
    tensor_total = sum(sizes.values())
    if tensor_total == b.total:
        st.success(f"{lm.name}: the calculator says {b.total:,} parameters for its shape, and its {len(sizes)} "
                   f"tensors hold {tensor_total:,} values. They match exactly.", icon=":material/check_circle:")
    else:
        st.error(f"{lm.name}: the calculator says {b.total:,} but the tensors hold {tensor_total:,} (difference "
                 f"{tensor_total - b.total:+,}).", icon=":material/cancel:")
    rows = []
    for group in (*b.groups(), *(g for g in tensor_groups if g not in b.groups())):
        calc, real = b.groups().get(group, 0), tensor_groups.get(group, 0)
        rows.append({"part": GROUP_LABELS.get(group, group), "calculator": calc, "sum of tensors": real,
                     "match": "✓" if calc == real else "✗"})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=K + "check_table",
                 column_config={"calculator": st.column_config.NumberColumn(format="localized"),
                                "sum of tensors": st.column_config.NumberColumn(format="localized")})
    st.caption(f"Shape read from the file: {lm.config.describe()}. Tied embeddings mean no separate output tensor, "
               "so the output head counts 0.")


# --------------------------------------------------------------------------------------------------------- page

follow_preset()
shell.header("Parameters, memory and compute", "Exact counts for any decoder shape: pick a real model, then change "
                                                "anything.")
shape = read_shape()
if shape is not None:
    breakdown = count_parameters(**shape.as_dict())
    summary(breakdown)
    breakdown_section(breakdown)
    memory_section(breakdown)
comparison_section(shape)
check_section()
