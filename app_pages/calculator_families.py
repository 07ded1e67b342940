"""The Parameters page's section on the two other families: a BERT-style encoder and a T5-style encoder-decoder
(model/calculator's encoder_counts and encoder_costs): a published shape or the loaded model's, its parameters by
part, an encoder pass's FLOPs or an encoder-decoder generation's FLOPs and cache, and for a loaded BERT or T5 the
check that the count equals the sum of its file's tensors."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from app_core import families
from app_core import schemas as S
from app_pages.frame import controls, session
from app_pages.frame.i18n import N_, _
from model.calculator.params import (
    ENCODER_DECODER_PRESETS,
    ENCODER_PRESETS,
    FAMILY_PRESET_SOURCES,
    count_encoder_decoder_parameters,
    count_encoder_parameters,
    encoder_decoder_cache_bytes,
    encoder_decoder_generation_flops,
    encoder_decoder_tensor_group,
    encoder_pass_flops,
    encoder_shape_from_config,
    gguf_tensor_group,
    weight_memory,
)
from viz.format import SI, format_bytes, format_si

K = S.PARAMS_KEY
FLOP_PREFIXES = SI[:5]
GROUPS = {"embeddings": N_("embeddings"), "attention": N_("attention"), "mlp": N_("MLP"), "norms": N_("norms"),
          "pooler": N_("pooler"), "encoder": N_("encoder"), "decoder": N_("decoder"),
          "cross-attention": N_("cross-attention"), "relative bias": N_("relative position bias"),
          "head": N_("output head"), "other": N_("other")}


def match_verdict(model: str, calculated: int, sizes: dict[str, int]) -> None:
    """Whether the calculator's count for the model's shape is what its tensors hold, said in green or red."""
    total = sum(sizes.values())
    if total == calculated:
        st.success(_("{model}: the calculator says {n} parameters for its shape, and its {tensors} tensors hold "
                     "{total} values. They match exactly.").format(model=model, n=f"{calculated:,}",
                                                                   tensors=len(sizes), total=f"{total:,}"),
                   icon=":material/check_circle:")
    else:
        st.error(_("{model}: the calculator says {n} but the tensors hold {total} (difference {diff}).").format(
            model=model, n=f"{calculated:,}", total=f"{total:,}", diff=f"{total - calculated:+,}"),
                 icon=":material/cancel:")


def _loaded_encoder():
    """The session's model when it is a BERT or a T5, else None."""
    lm = session.get_model()
    return lm if families.family_of(lm) != families.DECODER else None


def _shape(name: str) -> tuple[dict, bool]:
    """(the count's shape of a preset or the loaded model, whether it is an encoder-decoder)."""
    if name == S.LOADED:
        shape = encoder_shape_from_config(_loaded_encoder().config)
        return shape, "n_decoder_layers" in shape
    if name in ENCODER_PRESETS:
        return ENCODER_PRESETS[name], False
    return ENCODER_DECODER_PRESETS[name], True


def _flops(n: int) -> str:
    return format_si(n, "FLOPs", prefixes=FLOP_PREFIXES)


def section() -> None:
    """The section: a shape of the other families and what it costs; the loaded BERT or T5 checked."""
    ss = st.session_state
    st.markdown("#### " + _("The other families: an encoder (BERT) and an encoder-decoder (T5)"))
    loaded = _loaded_encoder()
    options = [*ENCODER_PRESETS, *ENCODER_DECODER_PRESETS, *([S.LOADED] if loaded is not None else [])]
    if ss.get(K + "family") not in options:
        ss[K + "family"] = options[0]
    cols = st.columns(3, vertical_alignment="bottom")
    cols[0].selectbox(_("Shape"), options, key=K + "family", **controls.PERSIST,
                      format_func=lambda p: _("the loaded model") if p == S.LOADED else p,
                      help=_("A published BERT or T5 shape (its config.json on the Hub), or the loaded model's."))
    name = ss[K + "family"]
    shape, seq2seq = _shape(name)
    cols[1].number_input(_("source tokens") if seq2seq else _("tokens"), key=K + "source", step=1, format="%d",
                         min_value=1, max_value=S.MAX_CONTEXT, **controls.PERSIST,
                         help=_("The text the encoder reads (all at once: every token attends to all of them)."))
    if seq2seq:
        cols[2].number_input(_("target tokens"), key=K + "target", step=1, format="%d", min_value=1,
                             max_value=S.MAX_CONTEXT, **controls.PERSIST,
                             help=_("The tokens the decoder writes, one at a time."))
    source, target = int(ss[K + "source"]), int(ss[K + "target"])
    b = (count_encoder_decoder_parameters if seq2seq else count_encoder_parameters)(**shape)
    st.caption(_("Shape read from the loaded model's file, {model}.").format(model=loaded.name) if name == S.LOADED
               else _("Shape from the published config of {source}.").format(
                   source=f"`{FAMILY_PRESET_SOURCES[name]}`"))
    metrics = st.columns(3)
    metrics[0].metric(_("All parameters"), format_si(b.total, digits=4),
                      help=_("Exactly {n}: every tensor element once.").format(n=f"{b.total:,}"))
    metrics[1].metric(_("Weights in bf16"), format_bytes(weight_memory(b.total)["bf16"]))
    if seq2seq:
        g = encoder_decoder_generation_flops(shape, source, target)
        cache = encoder_decoder_cache_bytes(shape, source, target)
        metrics[2].metric(_("Writing {target} tokens").format(target=f"{target:,}"), _flops(g.total),
                          help=_("Encoder {encoder}, cross-attention keys and values {keys}, decoder {decoder}: "
                                 "{n} FLOPs in all.").format(encoder=_flops(g.encoder), keys=_flops(g.cross_keys),
                                                             decoder=_flops(g.decoder_matmul + g.self_attention
                                                                            + g.cross_attention), n=f"{g.total:,}"))
        st.caption(_("The encoder reads the {source} source tokens once; each new target token then runs the decoder: "
                     "its self-attention over the target so far, its cross-attention over the whole source. Cache in "
                     "bf16: the decoder's own keys and values {own}, the cross-attention's of the source {cross}, "
                     "made once.").format(source=f"{source:,}", own=format_bytes(cache["self"]),
                                          cross=format_bytes(cache["cross"])))
    else:
        f = encoder_pass_flops(shape, source)
        metrics[2].metric(_("One pass over {n} tokens").format(n=f"{source:,}"), _flops(f.total),
                          help=_("Matmuls {matmul}, attention {attention}: {n} FLOPs.").format(
                              matmul=_flops(f.matmul), attention=_flops(f.attention), n=f"{f.total:,}"))
        st.caption(_("An encoder reads the whole text in one pass (no KV cache: it writes nothing), every token "
                     "attending to all {n}; its output is one vector per token (for a search index, a classifier).")
                   .format(n=f"{source:,}"))
    rows = [{_("part"): _(GROUPS.get(group, group)), "parameters": n, "share": 100 * n / b.total}
            for group, n in b.groups().items() if n]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=K + "family_table",
                 column_config={"parameters": st.column_config.NumberColumn(_("parameters"), format="localized"),
                                "share": st.column_config.NumberColumn(_("share of the model"), format="%.2f%%")})
    if loaded is not None:
        check(loaded)


def check(lm) -> None:
    """The loaded BERT's or T5's count for its shape against the sum of its file's tensors, part by part."""
    shape = encoder_shape_from_config(lm.config)
    seq2seq = "n_decoder_layers" in shape
    b = (count_encoder_decoder_parameters if seq2seq else count_encoder_parameters)(**shape)
    sizes = {str(name): int(n) for name, n in lm.tensor_sizes.items()}
    group_of = encoder_decoder_tensor_group if seq2seq else gguf_tensor_group
    tensors: dict[str, int] = {}
    for name, n in sizes.items():
        try:
            group = group_of(name)
        except ValueError:
            group = "other"
        tensors[group] = tensors.get(group, 0) + n
    match_verdict(lm.name, b.total, sizes)
    groups = b.groups()
    rows = [{_("part"): _(GROUPS.get(g, g)), "calculator": groups.get(g, 0), "sum of tensors": tensors.get(g, 0),
             _("match"): "✓" if groups.get(g, 0) == tensors.get(g, 0) else "✗"}
            for g in (*groups, *(g for g in tensors if g not in groups)) if groups.get(g, 0) or tensors.get(g, 0)]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=K + "family_check",
                 column_config={"calculator": st.column_config.NumberColumn(_("calculator"), format="localized"),
                                "sum of tensors": st.column_config.NumberColumn(_("sum of tensors"),
                                                                                format="localized")})
