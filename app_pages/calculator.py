"""Parameters page: exact parameter count, weight memory, KV cache and FLOPs for any decoder shape.

Everything above the last section is pure arithmetic (instant). Only the last section reads the real model, to show
that the calculator's count for its shape equals the sum of its tensors' sizes.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

import viz.calculator
from app_core import families
from app_core import schemas as S
from app_pages import calculator_families
from app_pages.frame import controls, session, shell
from app_pages.frame.i18n import N_, _, language, ngettext, translated
from app_pages.frame.widgets import SharedBuilders, show_figure
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
from viz.format import SI, format_bytes, format_count_zh, format_si

vp = SharedBuilders(viz.calculator)

K = S.PARAMS_KEY                  # prefix of every state key on this page: params_<field>
FIELDS = (*S.SHAPE_NUMBERS, *S.SHAPE_CHOICES, *S.SHAPE_FLAGS)
# The shape's kinds as the form shows them: technical names as written in papers; plain words translated.
KIND_LABELS = {"gelu": "GELU", "swiglu": "SwiGLU", "layernorm": "LayerNorm", "rmsnorm": "RMSNorm", "rope": "RoPE",
               "alibi": "ALiBi", "learned": N_("learned"), "sinusoidal": N_("sinusoidal"), "none": N_("none")}

FORM_LABELS = {                   # short enough for one line in a quarter of a 1024 px page
    "vocab_size": N_("vocabulary size"), "d_model": N_("width (d_model)"), "n_layers": N_("layers"),
    "d_ff": N_("MLP width (d_ff)"), "n_heads": N_("heads"), "n_kv_heads": N_("key/value heads"),
    "head_dim": N_("head size"), "max_positions": N_("context length"), "mlp": N_("MLP type"),
    "norm": N_("norm type"), "positional": N_("positions"), "tied_embeddings": N_("tied output head"),
    "qkv_bias": N_("q/k/v bias"), "out_bias": N_("output bias"), "mlp_bias": N_("MLP bias"),
    "qk_norm": N_("q/k norm"),
}
HELP = {
    "vocab_size": N_("Rows of the token embedding (and of the output head when it is not tied)."),
    "d_model": N_("Width of the residual stream: every token is a vector of this size between layers."),
    "n_layers": N_("Number of identical transformer blocks."),
    "d_ff": N_("Hidden width of the MLP (4 × d_model in GPT-2; about 8/3 × d_model, rounded, with SwiGLU). Leave "
               "empty for 4 × width."),
    "n_heads": N_("Query heads per layer."),
    "n_kv_heads": N_("Key/value heads per layer. Equal to the heads: MHA; 1: MQA; in between (a divisor): GQA. "
                     "Leave empty for 'same as heads'."),
    "head_dim": N_("Width of one head. Leave empty for width / heads; Qwen3 and Gemma set it separately."),
    "max_positions": N_("Context length the model was trained for; a learned position table has this many rows."),
    "mlp": N_("gelu: up and down matrices (GPT-2). swiglu: gate, up and down (Llama, Qwen, Mistral, SmolLM2)."),
    "norm": N_("layernorm has a weight and a bias per channel; rmsnorm only a weight."),
    "positional": N_("Only 'learned' adds parameters (a table of positions × d_model); the others are formulas."),
    "tied_embeddings": N_("The output head reuses the token-embedding matrix (no extra parameters)."),
    "qkv_bias": N_("Biases on the q, k, v projections (GPT-2, Qwen2)."),
    "out_bias": N_("Bias on the attention output projection (GPT-2)."),
    "mlp_bias": N_("Biases on the MLP matrices (GPT-2)."),
    "qk_norm": N_("A norm over each head's q and k vectors (one head_dim weight each, as in Qwen3)."),
}
FLOP_PREFIXES = SI[:5]            # up to T: '1.8e5 TFLOPs', never a wall of digits
TENSOR_KINDS = {                  # the treemap's leaves (Breakdown.parts()), shown translated
    "token embedding": N_("token embedding"), "position embedding": N_("position embedding"),
    "q proj": N_("q proj"), "k proj": N_("k proj"), "v proj": N_("v proj"), "o proj": N_("o proj"),
    "gate proj": N_("gate proj"), "up proj": N_("up proj"), "down proj": N_("down proj"),
    "attention norms": N_("attention norms"), "MLP norms": N_("MLP norms"), "q/k norms": N_("q/k norms"),
    "final norm": N_("final norm"), "lm head": N_("lm head"),
}


def kind_label(kind: str) -> str:
    """A shape kind ("learned", "rope", ...) as the form and the comparison table show it."""
    label = KIND_LABELS.get(kind, kind)
    return _(label) if kind in ("learned", "sinusoidal", "none") else label


def count(n: int, digits: int = 3) -> str:
    """A parameter count, short: '135 M', in Chinese '1.35 亿'."""
    return format_count_zh(n, digits) if language() == "zh" else format_si(n, digits=digits)


def group_label(group: str) -> str:
    return _(vp.GROUP_LABELS.get(group, group))


# ------------------------------------------------------------------------------------------------------- state

def follow_preset() -> None:
    """A preset's fields are the preset's (a link or a pick names only the preset); 'custom' keeps the form."""
    ss = st.session_state
    name = ss[K + "preset"]
    if name == S.LOADED and families.family_of(session.get_model()) != families.DECODER:
        name = ss[K + "preset"] = S.DEFAULT_PRESET          # a BERT or T5: its shape is in the families' section
    if name in PRESETS or name == S.LOADED:
        values = shape_from_config(session.get_model().config).as_dict() if name == S.LOADED else S.preset_values(name)
        for field in FIELDS:
            ss[K + field] = values[field]


def mark_custom() -> None:
    """on_change of any shape field: the form no longer shows the preset it started from."""
    st.session_state[K + "preset"] = S.CUSTOM


# -------------------------------------------------------------------------------------------------------- form

def shape_form() -> dict:
    """The shape inputs, each with a slot right under it for its message; returns the raw field values."""
    ss = st.session_state
    slots: dict = {}
    with st.container(horizontal=True, vertical_alignment="bottom", gap="medium"):
        labels = {S.CUSTOM: _("custom"), S.LOADED: _("the loaded model")}
        st.selectbox(_("Preset"), [*PRESETS, S.LOADED, S.CUSTOM], key=K + "preset", width=220, **controls.PERSIST,
                     format_func=lambda p: labels.get(p, p),
                     help=_("Pick a real model's shape, then change any field (the box then says 'custom')."))
        name = ss[K + "preset"]
        if name == S.LOADED:
            st.caption(_("Shape read from the loaded model's file, {model}.").format(model=session.get_model().name))
        else:
            st.caption(_("Shape from the published config of {source}.").format(source=f"`{PRESET_SOURCES[name]}`")
                       if name in PRESET_SOURCES else _("Custom shape: every field below is yours."))
    raw = {field: ss.get(K + field) for field in FIELDS}
    errors = shape_errors(**raw)
    custom = name == S.CUSTOM
    with st.expander((_("Shape: {shape}") if custom else _("Shape: {shape} (open to change any field)")).format(
            shape=shape_line(raw)),
                     expanded=custom or bool(errors), icon=":material/tune:"):
        draw_fields(slots)                           # the widgets' values were in the state before they were drawn
    for err in errors:      # a short red line under the field: the grid's boxes stay where they are
        slots[err.field].caption(f":red[:material/error: {err.short}]", help=str(err))
    return raw if not errors else {"_errors": errors}


def shape_line(raw: dict) -> str:
    """The shape in one short line (raw fields: empty ones read 'auto')."""
    def v(field: str) -> str:
        value = raw.get(field)
        return _("auto") if value is None else f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) \
            else str(value)
    return _("{layers} layers · width {d_model} · {heads} heads ({kv} KV) · MLP {d_ff} {mlp} · vocab {vocab}").format(
        layers=v("n_layers"), d_model=v("d_model"), heads=v("n_heads"), kv=v("n_kv_heads"), d_ff=v("d_ff"),
        mlp=v("mlp"), vocab=v("vocab_size"))


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
                _(FORM_LABELS[f]), key=K + f, value=None, step=1, format="%d", min_value=None, max_value=None,
                placeholder=_("automatic") if f in S.AUTO_FIELDS else None, help=_(HELP[f]), on_change=mark_custom,
                **controls.PERSIST))
    for col, (field, kinds) in zip(st.columns(3, vertical_alignment="top"), S.SHAPE_CHOICES.items(), strict=True):
        field_box(col, field, lambda f=field, k=kinds: st.selectbox(
            _(FORM_LABELS[f]), k, key=K + f, help=_(HELP[f]), on_change=mark_custom, format_func=kind_label,
            **controls.PERSIST))
    with st.container(horizontal=True, gap="medium", key=K + "flags"):
        for field in S.SHAPE_FLAGS:
            st.checkbox(_(FORM_LABELS[field]), key=K + field, help=_(HELP[field]), on_change=mark_custom,
                        **controls.PERSIST)


def read_shape() -> Shape | None:
    """Draw the form; None (after saying which fields to fix) while any field is bad."""
    raw = shape_form()
    errors = raw.get("_errors")
    if errors:
        fields = ", ".join(_(FORM_LABELS[e.field]) if e.field in FORM_LABELS else LABELS.get(e.field, e.field)
                           for e in errors)
        st.warning(ngettext("Fix the field marked in red ({fields}) to see the counts.",
                            "Fix the fields marked in red ({fields}) to see the counts.", len(errors)).format(
            fields=fields), icon=":material/warning:")
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
    cols[0].metric(_("Total parameters"), count(b.total, digits=4),
                   help=_("Exactly {n}: every tensor element once.").format(n=f"{b.total:,}"))
    cols[1].metric(_("MLP share per layer"), f"{pct['mlp']:.1f}%",
                   help=_("MLP parameters / all parameters of one transformer block (attention {attention}, norms "
                          "{norms}).").format(attention=f"{pct['attention']:.1f}%", norms=f"{pct['norms']:.2f}%"))
    cols[2].metric(_("Weights in bf16"), format_bytes(weight_memory(b.total)["bf16"]),
                   help=_("{n} × 2 bytes").format(n=f"{b.total:,}"))
    cols[3].metric(_("KV cache / token"), format_bytes(kv_cache_bytes_per_token(s, "bf16")),
                   help=_("2 (K and V) × {layers} layers × {kv} KV heads × {d} × 2 bytes").format(
                       layers=s.n_layers, kv=s.n_kv_heads, d=s.head_dim))
    st.caption(_("exactly {n} parameters · without embeddings and output head: {rest}").format(
        n=f"{b.total:,}", rest=count(b.non_embedding, digits=4)))


def layer_table(b: Breakdown) -> pd.DataFrame:
    s, lay = b.shape, b.layer
    d, q_w, kv_w = s.d_model, s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim
    norm = _("weight + bias") if s.norm == "layernorm" else _("weight")
    qkv_b, out_b, mlp_b = (" + " + _("bias") if flag else "" for flag in (s.qkv_bias, s.out_bias, s.mlp_bias))
    rows = [
        (_("attention norm"), "norms", f"{d} ({norm})", lay.attn_norm),
        (_("q projection"), "attention", f"{d} × {q_w}{qkv_b}", lay.q),
        (_("k projection"), "attention", f"{d} × {kv_w}{qkv_b}", lay.k),
        (_("v projection"), "attention", f"{d} × {kv_w}{qkv_b}", lay.v),
        (_("o projection"), "attention", f"{q_w} × {d}{out_b}", lay.o),
        (_("q norm"), "norms", f"{s.head_dim} ({norm})", lay.q_norm),
        (_("k norm"), "norms", f"{s.head_dim} ({norm})", lay.k_norm),
        (_("MLP norm"), "norms", f"{d} ({norm})", lay.mlp_norm),
        (_("gate projection"), "mlp", f"{d} × {s.d_ff}{mlp_b}", lay.gate),
        (_("up projection"), "mlp", f"{d} × {s.d_ff}{mlp_b}", lay.up),
        (_("down projection"), "mlp", f"{s.d_ff} × {d}{mlp_b}", lay.down),
    ]
    return pd.DataFrame([{_("tensor"): t, _("part"): group_label(g), _("shape"): sh, "parameters": n,
                          "% of layer": 100 * n / lay.total} for t, g, sh, n in rows if n])


def model_table(b: Breakdown) -> pd.DataFrame:
    s = b.shape
    rows = [(_("token embedding"), b.token_embedding), (_("position embedding"), b.position_embedding),
            (_("{n} × layer").format(n=b.n_layers), b.layers), (_("final norm"), b.final_norm)]
    rows = [(name, n) for name, n in rows if n]
    rows.append((_("output head (tied: shared)") if s.tied_embeddings else _("output head"), b.lm_head))
    rows.append((_("total"), b.total))
    return pd.DataFrame([{_("part"): name, "parameters": n, "% of model": 100 * n / b.total} for name, n in rows])


def breakdown_section(b: Breakdown) -> None:
    words = translated(vp.WORDS)
    parts = {group: {_(TENSOR_KINDS.get(leaf, leaf)): n for leaf, n in leaves.items()}
             for group, leaves in b.parts().items()}
    show_figure(vp.breakdown_treemap(parts, title=_("Where the parameters are"), height=400, words=words),
                key=K + "treemap", filename="parameters_treemap")
    show_figure(vp.layer_split_figure([(_("one of {n} layers").format(n=b.n_layers), b.layer.groups())],
                                   title=_("Inside one transformer layer"), words=words),
                key=K + "layer_split", filename="parameters_one_layer")
    pct = b.layer.percentages()
    st.markdown(_("The **MLP holds {mlp}** of every layer's parameters, attention {attention}: attention decides "
                  "*where* each token looks, the MLP holds most of the weights.").format(
        mlp=f"{pct['mlp']:.0f}%", attention=f"{pct['attention']:.0f}%"))
    st.markdown(_("**One layer**: {n} parameters; the model has {layers} identical ones.").format(
        n=f"{b.layer.total:,}", layers=b.n_layers))
    st.dataframe(layer_table(b), hide_index=True, width="stretch", key=K + "layer_table",
                 column_config={"parameters": st.column_config.NumberColumn(_("parameters"), format="localized"),
                                "% of layer": st.column_config.NumberColumn(_("share of the layer"), format="%.2f%%")})
    st.markdown(_("**Whole model**: {n} parameters.").format(n=f"{b.total:,}"))
    st.dataframe(model_table(b), hide_index=True, width="stretch", key=K + "model_table",
                 column_config={"parameters": st.column_config.NumberColumn(_("parameters"), format="localized"),
                                "% of model": st.column_config.NumberColumn(_("share of the model"), format="%.2f%%")})


def memory_section(b: Breakdown) -> None:
    ss = st.session_state
    s = b.shape
    words = translated(vp.WORDS)
    st.markdown("#### " + _("Memory: weights and KV cache"))
    cols = st.columns(3, vertical_alignment="top")
    cols[0].number_input(_("context length (tokens)"), key=K + "context", value=None, step=1, format="%d",
                         min_value=1, max_value=MAX_CONTEXT, **controls.PERSIST,
                         placeholder=_("{n} (the model's)").format(n=f"{s.max_positions:,}"),
                         help=_("Tokens kept in the KV cache per sequence (and attended to, for the FLOPs below). "
                                "Empty: the shape's context length."))
    cols[1].number_input(_("batch (sequences)"), key=K + "batch", step=1, format="%d", min_value=1,
                         max_value=MAX_BATCH, **controls.PERSIST)
    cols[2].selectbox(_("KV cache dtype"), S.KV_DTYPES, key=K + "kv_dtype", **controls.PERSIST)
    context = int(ss[K + "context"] or s.max_positions)
    batch, kv_dtype = int(ss[K + "batch"] or 1), ss[K + "kv_dtype"]
    kv, rows = {}, []
    for label, n_kv in attention_variants(s).items():
        v_shape = s.with_kv_heads(n_kv)
        tag = ngettext("{label} ({n} KV head)", "{label} ({n} KV heads)", n_kv).format(label=label, n=n_kv)
        kv[tag] = kv_cache_bytes(v_shape, context, batch, kv_dtype)
        rows.append({_("attention"): _("{variant} ← this shape").format(variant=tag) if n_kv == s.n_kv_heads
                     else tag,
                     _("parameters"): f"{count_parameters(**v_shape.as_dict()).total:,}",   # exact beyond 2^53
                     "KV bytes / token": kv_cache_bytes_per_token(v_shape, kv_dtype),
                     _("KV cache ({context} × {batch})").format(context=f"{context:,}", batch=batch):
                         format_bytes(kv[tag])})
    show_figure(vp.memory_figure(weight_memory(b.total), kv, context, batch, words=words), key=K + "memory",
                filename="memory_weights_kv_cache")
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=K + "kv_table",
                 column_config={"KV bytes / token": st.column_config.NumberColumn(_("KV bytes / token"),
                                                                                  format="localized")})
    st.caption(_("Weights: plain storage (real int8/int4 formats add block scales, e.g. GGUF Q4_1 is 5 bits per "
                 "weight). KV cache = 2 (K and V) × layers × KV heads × head_dim × bytes × tokens × batch. GQA/MQA "
                 "shrink the cache by sharing each K/V head among a group of query heads."))

    st.markdown("#### " + _("Compute: forward FLOPs per token"))
    flops = forward_flops_per_token(s, context)
    crossover = attention_flops_crossover(s)
    cols = st.columns(3)
    cols[0].metric(_("total at {n} tokens").format(n=format_si(context)),
                   format_si(flops.total, "FLOPs", prefixes=FLOP_PREFIXES),
                   help=_("{n} FLOPs per token").format(n=f"{flops.total:,}"))
    cols[1].metric(_("matmuls (weights)"), format_si(flops.matmul, "FLOPs", prefixes=FLOP_PREFIXES),
                   help=_("2 × the weight matrices: {n} FLOPs per token").format(n=f"{flops.matmul:,}"))
    cols[2].metric(_("attention (QKᵀ, AV)"), format_si(flops.attention, "FLOPs", prefixes=FLOP_PREFIXES),
                   help=_("Scores and weighted sum over {context} positions: {n} FLOPs per token").format(
                       context=f"{context:,}", n=f"{flops.attention:,}"))
    steps = sorted({max(1, round(2 * max(context, crossover) * i / 60)) for i in range(61)})
    show_figure(vp.flops_figure(flops.matmul, flops.attention // context, steps, marker=context, words=words),
                key=K + "flops", filename="flops_per_token")
    st.caption(_("Convention: a multiply-add is 2 FLOPs (M = 10⁶, G = 10⁹, T = 10¹²; the ? gives the exact count). "
                 "Matmuls = 2 × (q, k, v, o, MLP and output-head weights; the head counts even when tied, embedding "
                 "lookups, norms and biases do not). Attention = 2 × 2 × layers × heads × head_dim × context (scores "
                 "q·k, then the weighted sum of v) for a token that sees `context` positions. Attention costs as "
                 "much as all the matmuls from about {n} tokens.").format(n=f"{crossover:,}"))


def compare_table(counts: list[tuple[str, Breakdown]]) -> pd.DataFrame:
    def describe(b: Breakdown) -> dict[str, str]:
        s = b.shape
        kind = "MHA" if s.n_kv_heads == s.n_heads else ("MQA" if s.n_kv_heads == 1 else "GQA")
        return {
            _("total parameters"): f"{b.total:,}" + (f" ({count(b.total)})" if language() == "zh" else ""),
            **{group_label(g): f"{n:,} ({percent(n, b.total)})" for g, n in b.groups().items()},
            _("one layer"): f"{b.layer.total:,}",
            _("layers × width"): f"{s.n_layers} × {s.d_model}",
            _("heads (KV heads) × head size"): f"{s.n_heads} ({s.n_kv_heads}, {kind}) × {s.head_dim}",
            _("MLP width · MLP · norm"): f"{s.d_ff} · {kind_label(s.mlp)} · {kind_label(s.norm)}",
            _("positions · embeddings"): f"{kind_label(s.positional)} · " + (_("tied") if s.tied_embeddings
                                                                              else _("untied")),
            _("weights in bf16"): format_bytes(weight_memory(b.total)["bf16"]),
            _("KV cache per token (bf16)"): format_bytes(kv_cache_bytes_per_token(s, "bf16")),
        }
    table = {name: describe(b) for name, b in counts}
    return pd.DataFrame({"": list(next(iter(table.values()))), **{n: list(d.values()) for n, d in table.items()}})


def comparison_section(current: Shape | None) -> None:
    ss = st.session_state
    st.markdown("#### " + _("Compare two shapes"))
    cols = st.columns(2)
    above = _("shape above")
    shown = dict(format_func=lambda o: above if o == "shape above" else o)
    cols[0].selectbox(_("Left"), S.COMPARE_OPTIONS, key=K + "cmp_a", **shown, **controls.PERSIST)
    cols[1].selectbox(_("Right"), S.COMPARE_OPTIONS, key=K + "cmp_b", **shown, **controls.PERSIST)
    picked = []
    for key in ("cmp_a", "cmp_b"):
        name = ss[K + key]
        if name == "shape above":
            if current is None:
                st.info(_("The shape above has an error; pick a preset here or fix it."))
                return
            picked.append((_("shape above"), current))
        else:
            picked.append((name, make_shape(**PRESETS[name])))
    counts = [(name, count_parameters(**shape.as_dict())) for name, shape in picked]
    if picked[0][0] == picked[1][0]:
        counts[1] = (_("{name} (again)").format(name=picked[1][0]), counts[1][1])
    words = translated(vp.WORDS)
    show_figure(vp.comparison_figure([(name, b.groups()) for name, b in counts], title=_("Share of all parameters"),
                                  words=words), key=K + "cmp_parts", filename="compare_parts")
    show_figure(vp.layer_split_figure([(name, b.layer.groups()) for name, b in counts], title=_("Inside one layer"),
                                   words=words), key=K + "cmp_layer", filename="compare_one_layer")
    st.table(compare_table(counts).set_index(""))


def check_section() -> None:
    st.markdown("#### " + _("Check against the loaded model"))
    lm = session.get_model()
    sizes = {str(name): int(n) for name, n in lm.tensor_sizes.items()}
    b = count_parameters(**shape_from_config(lm.config).as_dict())
    tensor_groups = tensor_group_sums(sizes)
    calculator_families.match_verdict(lm.name, b.total, sizes)
    rows = []
    for group in (*b.groups(), *(g for g in tensor_groups if g not in b.groups())):
        calc, real = b.groups().get(group, 0), tensor_groups.get(group, 0)
        rows.append({_("part"): group_label(group), "calculator": calc, "sum of tensors": real,
                     _("match"): "✓" if calc == real else "✗"})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=K + "check_table",
                 column_config={"calculator": st.column_config.NumberColumn(_("calculator"), format="localized"),
                                "sum of tensors": st.column_config.NumberColumn(_("sum of tensors"),
                                                                                format="localized")})
    st.caption(_("Shape read from the file: {shape}. Tied embeddings mean no separate output tensor, so the output "
                 "head counts 0.").format(shape=shell.model_shape(lm.config)))


# --------------------------------------------------------------------------------------------------------- page

def render() -> None:
    """The page: the shape form and what it gives, the comparison of two shapes, the check against the model."""
    follow_preset()
    shell.header(_("Parameters, memory and compute"), _("Exact counts for any decoder shape: pick a real model, then "
                                                         "change anything."))
    shape = read_shape()
    if shape is not None:
        breakdown = count_parameters(**shape.as_dict())
        summary(breakdown)
        breakdown_section(breakdown)
        memory_section(breakdown)
    comparison_section(shape)
    calculator_families.section()
    if families.family_of(session.get_model()) == families.DECODER:
        check_section()

