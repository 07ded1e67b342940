"""Inside a block: how the text becomes tokens (app_pages/inside/tokenization.py), then one token through one decoder
block with the model's own numbers, the residual stream's size across layers and the logit lens
(app_pages/inside/stream.py), and which heads push the prediction (direct logit attribution and head ablation)."""
from __future__ import annotations

import numpy as np
import streamlit as st

import viz.attention
import viz.head_effects
import viz.inside
from app_core import schemas as S
from app_core.derived import of_trace
from app_core.derived.heads import ablated_probs
from app_pages import navigation
from app_pages.frame import controls, shell
from app_pages.frame import session as caches
from app_pages.frame.i18n import N_, _, ngettext, translated
from app_pages.frame.widgets import SharedBuilders, picked_layer_head, selected_points, show_figure, token_legend
from app_pages.inside.common import follow_text, tok_md
from app_pages.inside.stream import lens_view, stream_view
from app_pages.inside.tokenization import tokens_view
from model.analysis.block_walk import NEAR_ZERO
from model.analysis.head_stats import sink_hidden_row
from model.decoder.rope import rope_frequencies
from model.maths import kv_heads
from viz.format import format_bytes
from viz.labels import plotly_escape, shorten

va = SharedBuilders(viz.attention)
he = SharedBuilders(viz.head_effects)
vi = SharedBuilders(viz.inside)

VIEW = S.INSIDE.by_name("view")
TARGET, OFF = (S.INSIDE.by_name(n) for n in ("target", "off"))
TARGET_PICK = "inside_target_pick"  # the target box's own key: it copies into the target setting
OFF_PICK = "inside_off_pick"        # the ablation box's own key: it copies into the off setting
ATTRIBUTION_CHART = "inside_attribution"
TOP_N = 10                          # ablation: the next-token candidates shown
NBSP = "\u00a0"                     # keeps a step's number and name on one line of the map
NORM_NAMES = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}
MLP_NAMES = {"swiglu": "SwiGLU", "gelu": "GELU"}


# ------------------------------------------------------------------------------------------------------ helpers
def step_header(number: int, anchor: str, title: str, formula: str, shape: str) -> None:
    """A step of the block walk: its title (an anchor of the map), its formula and the shapes involved."""
    st.subheader(f"{number}. {title}", anchor=f"step-{anchor}")
    st.markdown(f"$\\displaystyle {formula}$ &nbsp;·&nbsp; {shape}")


def steps(cfg) -> tuple[tuple[str, str], ...]:
    """The block's steps (anchor, name) with this model's norm, positions and MLP."""
    norm, mlp = NORM_NAMES[cfg.norm], MLP_NAMES[cfg.mlp]
    return (("in", N_("input")), ("norm1", norm), ("qkv", "q k v"),
            ("rope", "RoPE" if cfg.uses_rope else N_("no RoPE")), ("scores", N_("scores")), ("mask", N_("mask")),
            ("softmax", "softmax"), ("mix", "Σ a·v"), ("wo", "Wₒ"), ("add1", N_("+ add")), ("norm2", norm),
            ("swiglu", mlp), ("down", N_("down")), ("add2", N_("+ add")))


def steps_map(cfg) -> None:
    st.markdown("**{}** ".format(_("Steps:")) + " → ".join(
        f"[{i + 1}{NBSP}{_(name).replace(' ', NBSP)}](#step-{anchor})" for i, (anchor, name) in enumerate(steps(cfg))))


def vector_note(x: np.ndarray) -> str:
    big = int(np.argmax(np.abs(x)))
    return _("‖x‖ = {norm}, largest |xᵢ| = {largest} (dimension {dim})").format(
        norm=f"{np.linalg.norm(x):,.1f}", largest=f"{abs(float(x[big])):,.1f}", dim=big)


# ----------------------------------------------------------------------------------------------- one block
def words():
    """The figures' words in the session's language."""
    return translated(vi.WORDS)


def norm_figure(x: np.ndarray, step, name: str, key: str) -> None:
    centred = f"({name} − {step.mean:,.4g})" if step.kind == "layernorm" else name
    rows = {_("{x} (in)").format(x=name): x, f"{centred} / rms   (rms = {step.rms:,.4g})": step.scaled,
            _("weight g (learned, one per dimension)"): step.weight}
    if step.bias is not None:
        rows[_("bias b (learned, one per dimension)")] = step.bias
    rows[f"out = {centred} / rms · g" + (" + b" if step.bias is not None else "")] = step.out
    show_figure(vi.vectors_figure(rows, row_px=78, words=words()), key=f"inside_{key}", filename=f"block_{key}")


def block_view(lm, trace) -> None:
    ss = st.session_state
    cfg = lm.config
    layer, head, p = int(ss[S.LAYER.key]), int(ss[S.HEAD.key]), int(ss[S.QUERY.key])
    hide_sink = bool(ss[S.SINK.key])
    tokens, T = trace.tokens, trace.n_tokens
    controls.query_slider(trace, label=_("Token to follow"))
    walk = caches.workspace().compute(of_trace, "block_walk", trace.text, layer, p, share="layer_details")
    kv = int(walk.kv_head[head])
    name = f"#{p} {tokens[p]}"
    steps_map(cfg)

    step_header(1, "in", _("Embedding row") if layer == 0 else _("The residual stream in"),
                rf"x = E[{walk.token_id}]" if layer == 0 else rf"x = x^{{({layer})}}",
                _("shape [{d}]").format(d=cfg.d_model))
    show_figure(vi.vectors_figure({_("x: token {token} entering layer {layer}").format(token=name, layer=layer):
                                   walk.x}, row_px=150, words=words()),
                key="inside_x", filename=f"block_L{layer}_x")
    if layer == 0:
        st.caption(" ".join([_("The embedding table has one row of {d} numbers per token ({vocab} rows); this is row "
                               "{row}, token {token}. {note}.").format(
            d=cfg.d_model, vocab=f"{cfg.vocab_size:,}", row=walk.token_id, token=tok_md(tokens[p]),
            note=vector_note(walk.x))] + ([_("The same table, transposed, is the output layer (tied embeddings).")]
                                          if cfg.tied_embeddings else [])))
    else:
        st.caption(_("The embedding of token {token} plus all that layers 0-{last} have added to it. {note}. Every "
                     "block reads this stream and adds to it; nothing overwrites it.").format(
            token=tok_md(tokens[p]), last=layer - 1, note=vector_note(walk.x)))

    layer_norm = cfg.norm == "layernorm"
    step_header(2, "norm1", _("LayerNorm") if layer_norm else _("RMSNorm"),
                r"\hat x = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} \odot g + b" if layer_norm else
                r"\hat x = \frac{x}{\sqrt{\frac{1}{d}\sum_i x_i^2 + \epsilon}} \odot g",
                f"[{cfg.d_model}] → [{cfg.d_model}], ε = {cfg.norm_eps:g}")
    norm_figure(walk.x, walk.attn_norm, "x", "norm1")
    st.caption(" ".join([_(
        "Subtract the mean, divide by the standard deviation, then scale each dimension by a learned weight and add "
        "a learned bias. RMSNorm (Llama, Qwen) skips the mean and the bias: one statistic, and it works as well.")
        if layer_norm else _(
            "Divide by the root mean square, then scale each dimension by a learned weight. LayerNorm would also "
            "subtract the mean and add a bias; RMSNorm skips both (one statistic, no bias) and works as well."),
        _("**Pre-norm:** the block normalizes what it *reads*, never the stream itself (post-norm, the 2017 "
          "Transformer, normalized after each add), so the stream can grow: in many models a few dimensions of "
          "position 0 become huge in the middle layers (SmolLM2: ~22,500 from layer 12 on). Divided by its huge "
          "scale, position 0's vector is then almost the same whatever the text: a fixed key the heads learn to park "
          "attention on when nothing else is relevant, the **attention sink**.")]
        + ([_("**This is position 0:** its RMS here is {rms}.").format(rms=f"{walk.attn_norm.rms:,.1f}")]
           if p == 0 else [])))

    bias = (lambda name: f" + b_{name}") if cfg.qkv_bias else (lambda name: "")
    step_header(3, "qkv", _("Queries, keys and values (GQA)") if cfg.n_kv_heads < cfg.n_heads else
                _("Queries, keys and values"),
                rf"q = W_q \hat x{bias('q')},\quad k = W_k \hat x{bias('k')},\quad v = W_v \hat x{bias('v')}",
                _("q [{heads} × {d}], k and v [{kv} × {d}] per token").format(heads=cfg.n_heads, d=cfg.head_dim,
                                                                              kv=cfg.n_kv_heads))
    show_figure(vi.gqa_figure(cfg.n_heads, cfg.n_kv_heads, selected=head, words=words()), key="inside_gqa",
                filename="gqa_mapping")
    show_figure(vi.qkv_figure(walk.q, walk.k[:, p], walk.v[:, p], walk.kv_head, selected=head, words=words()),
                key="inside_qkv", filename=f"block_L{layer}_qkv")
    cache = kv_heads.cache_bytes_per_token(cfg.n_layers, cfg.head_dim,
                                           kv_heads.kv_head_counts(cfg.n_heads, cfg.n_kv_heads))     # bf16
    st.caption(_("{heads} query heads share {kv_heads} key/value heads: head h reads KV head h // {group} (head "
                 "{head} reads KV head {kv}, outlined). The KV cache keeps k and v of every earlier token: {gqa} per "
                 "token in bf16 here, against {mha} with one KV head per query head (MHA) and {mqa} with a single "
                 "shared one (MQA); at the full {context}-token context {gqa_all} instead of {mha_all}.").format(
        heads=cfg.n_heads, kv_heads=cfg.n_kv_heads, group=cfg.group_size, head=head, kv=kv,
        gqa=format_bytes(cache["gqa"]), mha=format_bytes(cache["mha"]), mqa=format_bytes(cache["mqa"]),
        context=f"{cfg.max_positions:,}", gqa_all=format_bytes(cache["gqa"] * cfg.max_positions),
        mha_all=format_bytes(cache["mha"] * cfg.max_positions)))
    if cfg.qk_norm:
        st.caption(_("This model also normalizes each head's query and key (an RMSNorm over the head's {d} numbers, "
                     "with its own weights) before RoPE: the q and k above are after that norm. It keeps the scores "
                     "from growing with the size of q and k.").format(d=cfg.head_dim))
    if cfg.qkv_bias:
        st.caption(_("q, k and v each add a learned bias after the matrix product."))

    if cfg.uses_rope:
        rope_step(cfg, walk, layer, head, p, T)
    else:
        step_header(4, "rope", _("No RoPE: positions were added at the input"), r"x_0 = E[t] + P[p]",
                    _("q [{heads} × {d}] and k [{kv} × {T} × {d}]: unchanged").format(
                        heads=cfg.n_heads, d=cfg.head_dim, kv=cfg.n_kv_heads, T=T))
        st.caption(_("This model does not rotate q and k. It learned one position vector per position (a table of "
                     "{n} rows) and added it to each token's embedding before layer 0, so q and k carry the position "
                     "in their numbers.").format(n=f"{cfg.max_positions:,}"))
        navigation.link_to("positional", label=_("Its learned positions: Positional encodings (tab: the "
                                                        "model's positions)"), icon=":material/waves:")
    attention_steps(cfg, walk, layer, head, p, T, kv, name, tokens, hide_sink)
    mlp_steps(cfg, walk, layer)
    token_legend(tokens)


def rope_step(cfg, walk, layer: int, head: int, p: int, T: int) -> None:
    thetas = rope_frequencies(cfg.head_dim, cfg.rope_theta)
    half, base = cfg.head_dim // 2, f"{cfg.rope_theta:,.0f}".replace(",", "{,}")
    step_header(4, "rope", _("RoPE: rotate by position"),
                rf"(q_i,\, q_{{i+{half}}}) \mapsto R(p\,\theta_i)\,(q_i,\, q_{{i+{half}}}),\quad "
                rf"\theta_i = {base}^{{-2i/{cfg.head_dim}}}",
                _("q [{heads} × {d}] and k [{kv} × {T} × {d}]: same shapes").format(
                    heads=cfg.n_heads, d=cfg.head_dim, kv=cfg.n_kv_heads, T=T))
    show_figure(vi.rope_figure(walk.q[head], walk.q_rot[head], p * thetas, words=words(),
                               title=_("Head {head}'s query at position {p}").format(head=head, p=p)),
                key="inside_rope", filename=f"block_L{layer}_H{head}_rope")
    st.caption(" ".join([_("Each of the {n} pairs of dimensions is turned by its own angle, position × θᵢ: fast pairs "
                           "spin, slow pairs barely move. Keys are turned the same way, so the score between a query "
                           "and a key depends on how far apart they are, not where they sit.").format(
        n=cfg.head_dim // 2)] + ([_("Position 0 is not turned at all.")] if p == 0 else [])))
    navigation.link_to("positional", label=_("More on RoPE: Positional encodings (tab: RoPE inside the model)"),
                 icon=":material/waves:")


def attention_steps(cfg, walk, layer: int, head: int, p: int, T: int, kv: int, name: str, tokens, hide_sink) -> None:
    step_header(5, "scores", _("Scores: query · key"),
                rf"s_j = \frac{{q_{{\mathrm{{rot}}}} \cdot k_{{\mathrm{{rot}},\,j}}}}{{\sqrt{{{cfg.head_dim}}}}}",
                _("[{heads} × {T}]: one score per head and key").format(heads=cfg.n_heads, T=T))
    if T == 1:
        st.info(_("A one-token text has no other keys: the token's only key is itself."), icon=":material/looks_one:")
    else:
        show_figure(vi.scores_figure(walk.scores[head], walk.mask, tokens, words=words(),
                                     title=_("Head {head}: query {token} against every key").format(
                                         head=head, token=plotly_escape(shorten(name, 20)))),
                    key="inside_scores", filename=f"block_L{layer}_H{head}_scores")
        allowed = walk.scores[head][walk.mask]
        best = int(np.argmax(np.where(walk.mask, walk.scores[head], -np.inf)))
        values = dict(head=head, kv=kv, key=tok_md(f"#{best} {tokens[best]}"), score=f"{allowed.max():.2f}")
        st.caption((_("Head {head} reads KV head {kv}. Among the keys it may see, the highest score is key {key} "
                      "({score}); grey: future keys, computed but about to be masked.") if p < T - 1 else
                    _("Head {head} reads KV head {kv}. Among the keys it may see, the highest score is key {key} "
                      "({score}).")).format(**values))

    future = T - 1 - p
    step_header(6, "mask", _("Causal mask"), r"s_j \leftarrow -\infty \quad \text{for } j > i",
                _("[{T}] allowed keys: {allowed}, masked: {masked}").format(T=T, allowed=p + 1, masked=future))
    st.markdown(_("This is the last token: every key is in its past, so the mask removes nothing here. Pick an "
                  "earlier token to see it work.") if future == 0 else
                ngettext("The {n} key after this token (grey above) gets −∞, so after the softmax its weight is "
                         "exactly 0: a token never sees the future.",
                         "The {n} keys after this token (grey above) get −∞, so after the softmax their weight is "
                         "exactly 0: a token never sees the future.", future).format(n=future))
    navigation.link_to("causal-mask", label=_("The mask for every token: Causal mask"),
                 icon=":material/change_history:")

    step_header(7, "softmax", _("Softmax: attention weights"), r"a_j = \frac{e^{s_j}}{\sum_{k \le i} e^{s_k}}",
                _("[{heads} × {T}], each row sums to 1").format(heads=cfg.n_heads, T=T))
    if p == 0:
        st.info(_("Token 0 has no earlier keys: its only key is itself, so every head gives it weight 1."),
                icon=":material/looks_one:")
    else:
        rows = sink_hidden_row(walk.pattern) if hide_sink else np.asarray(walk.pattern, dtype=np.float32)  # [H, T]
        where = (_("Layer {layer}: where {token} looks (sink hidden)") if hide_sink else
                 _("Layer {layer}: where {token} looks")).format(layer=layer, token=plotly_escape(shorten(name, 20)))
        show_figure(va.query_heads_heatmap(rows, tokens, p, selected=head, sink_hidden=hide_sink, max_labels=24,
                                        title=where, words=words().attention),
                    key="inside_softmax", filename=f"block_L{layer}_pattern_q{p}")
        share = float(walk.pattern[:, 0].mean())
        values = dict(head=head, mine=f"{walk.pattern[head, 0]:.0%}", share=f"{share:.0%}")
        st.caption((_("One row per head. Head {head} puts {mine} on token 0; all heads {share} on average (the sink: "
                      "switch on **Hide attention sink** to see the rest).") if share > 0.5 and not hide_sink else
                    _("One row per head. Head {head} puts {mine} on token 0; all heads {share} on average.")).format(
            **values))
    navigation.link_to("softmax", label=_("Softmax and temperature"), icon=":material/thermostat:")

    step_header(8, "mix", _("Weighted sum of the values"), r"o_h = \sum_{j \le i} a_{h,j}\, v_{g(h),\,j}",
                f"[{cfg.n_heads} × {cfg.head_dim}]")
    show_figure(vi.head_rows_figure(walk.mixed, [_("head {head}").format(head=h) for h in range(cfg.n_heads)],
                                    selected=head, xlabel=_("dimension within the head"), words=words()),
                key="inside_mix", filename=f"block_L{layer}_mixed")
    st.caption(_("Each head's output is the average of the values it attends to, weighted by its attention: a head "
                 "that looks only at token 0 copies token 0's value."))

    norms = np.linalg.norm(walk.head_out, axis=1)
    step_header(9, "wo", _("Output projection"),
                rf"\mathrm{{attn}} = W_o\,[o_0; \dots; o_{{{cfg.n_heads - 1}}}] = \sum_h W_o^{{(h)}} o_h",
                f"[{cfg.n_heads * cfg.head_dim}] → [{cfg.d_model}]")
    show_figure(vi.head_rows_figure(walk.head_out, [_("head {head}").format(head=h) + f" (‖·‖ {norms[h]:.3g})"
                                                    for h in range(cfg.n_heads)],
                                    selected=head, xlabel=_("dimension of the residual stream"), words=words()),
                key="inside_wo", filename=f"block_L{layer}_head_out")
    st.caption(" ".join([_("Each row is what one head writes into the stream (its slice of Wₒ times its output); the "
                           "rows add up to the attention output (‖attn‖ = {norm}). The largest write here: head "
                           "{head}.").format(norm=f"{np.linalg.norm(walk.attn_out):,.2f}", head=int(np.argmax(norms)))]
                        + ([_("The output projection adds its learned bias once, after the heads' sum.")]
                           if cfg.out_bias else [])))

    step_header(10, "add1", _("Residual add"), r"x' = x + \mathrm{attn}", f"[{cfg.d_model}]")
    show_figure(vi.vectors_figure({_("x (stream in)"): walk.x, "+ attn": walk.attn_out, "= x'": walk.mid}, row_px=80,
                                  words=words()),
                key="inside_add1", filename=f"block_L{layer}_add1")
    st.caption(_("‖x‖ = {x}, ‖attn‖ = {attn}, ‖x'‖ = {mid}: attention adds to the stream, it does not replace "
                 "it.").format(x=f"{np.linalg.norm(walk.x):,.1f}", attn=f"{np.linalg.norm(walk.attn_out):,.1f}",
                               mid=f"{np.linalg.norm(walk.mid):,.1f}"))



def mlp_steps(cfg, walk, layer: int) -> None:
    layer_norm = cfg.norm == "layernorm"
    step_header(11, "norm2", _("LayerNorm again") if layer_norm else _("RMSNorm again"),
                r"\hat x' = \frac{x' - \mu'}{\sigma'} \odot g' + b'" if layer_norm else
                r"\hat x' = \frac{x'}{\mathrm{rms}(x')} \odot g'", f"[{cfg.d_model}] → [{cfg.d_model}]")
    norm_figure(walk.mid, walk.mlp_norm, "x'", "norm2")
    st.caption(_("The same operation with the MLP's own weight g' (and bias b'). Again only what the MLP reads is "
                 "normalized.") if layer_norm else
               _("The same operation with the MLP's own weight g'. Again only what the MLP reads is normalized."))
    if walk.gate is None:
        gelu_step(cfg, walk, layer)
    else:
        swiglu_step(cfg, walk, layer)
    down = r"\mathrm{mlp} = W_d\, h + b_d" if cfg.mlp_bias else r"\mathrm{mlp} = W_d\, h"
    step_header(13, "down", _("Down projection"), down, f"[{cfg.d_ff}] → [{cfg.d_model}]")
    show_figure(vi.vectors_figure({"mlp = W_d h": walk.mlp_out}, row_px=130, words=words()), key="inside_down",
                filename=f"block_L{layer}_down")
    st.caption(f"‖mlp‖ = {np.linalg.norm(walk.mlp_out):,.2f}.")

    last = layer == cfg.n_layers - 1
    step_header(14, "add2", _("Residual add"), rf"x^{{({layer + 1})}} = x' + \mathrm{{mlp}}", f"[{cfg.d_model}]")
    show_figure(vi.vectors_figure({"x'": walk.mid, "+ mlp": walk.mlp_out, _("= stream out"): walk.out}, row_px=80,
                                  words=words()),
                key="inside_add2", filename=f"block_L{layer}_add2")
    st.caption(f"‖out‖ = {np.linalg.norm(walk.out):,.1f}. "
               + (_("This is the last layer: the final {norm} and the output layer read this vector to predict the "
                    "next token (see Logit lens).").format(norm=NORM_NAMES[cfg.norm]) if last else
                  _("Layer {layer} reads this vector next.").format(layer=layer + 1)))


def swiglu_step(cfg, walk, layer: int) -> None:
    share = walk.near_zero_share()
    step_header(12, "swiglu", _("SwiGLU: gate, SiLU, up"),
                r"h = \mathrm{SiLU}(W_g \hat x') \odot (W_u \hat x'),\quad \mathrm{SiLU}(z) = z\,\sigma(z)",
                f"[{cfg.d_model}] → gate, up [{cfg.d_ff}] → h [{cfg.d_ff}]")
    show_figure(vi.activation_figure(walk.gate, walk.act, near_zero=NEAR_ZERO, words=words(),
                                     title=_("{n} gates: {share} nearly closed").format(n=f"{cfg.d_ff:,}",
                                                                                       share=f"{share:.0%}")),
                key="inside_silu", filename=f"block_L{layer}_silu")
    show_figure(vi.vectors_figure({"gate = W_g x̂'": walk.gate, "SiLU(gate)": walk.act, "up = W_u x̂'": walk.up,
                                   "h = SiLU(gate) · up": walk.product}, row_px=70, xlabel=_("channel"),
                                  words=words()),
                key="inside_mlp", filename=f"block_L{layer}_swiglu")
    st.caption(_("{share} of the {n} channels have |SiLU(gate)| < {limit}: the gate (mostly negative values, squashed "
                 "towards 0 by SiLU) shuts them, whatever *up* says. A GPT-2 MLP is W₂ GELU(W₁x): two matrices and "
                 "d_ff = 4d. SwiGLU multiplies a gated branch by a second one (three matrices) and uses a smaller "
                 "d_ff ({d_ff} = {ratio} d) for about the same parameter count.").format(
        share=f"{share:.0%}", n=f"{cfg.d_ff:,}", limit=f"{NEAR_ZERO:g}", d_ff=f"{cfg.d_ff:,}",
        ratio=f"{cfg.d_ff / cfg.d_model:.2f}"))


def gelu_step(cfg, walk, layer: int) -> None:
    share = walk.near_zero_share()
    step_header(12, "swiglu", _("GELU MLP: up, GELU"),
                r"h = \mathrm{GELU}(W_1 \hat x' + b_1),\quad \mathrm{GELU}(z) \approx z\,\Phi(z)",
                f"[{cfg.d_model}] → up [{cfg.d_ff}] → h [{cfg.d_ff}]")
    show_figure(vi.activation_figure(walk.up, walk.act, near_zero=NEAR_ZERO, gelu=True, words=words(),
                                     title=_("{n} channels: {share} nearly off").format(n=f"{cfg.d_ff:,}",
                                                                                       share=f"{share:.0%}")),
                key="inside_silu", filename=f"block_L{layer}_gelu")
    show_figure(vi.vectors_figure({"up = W_1 x̂' + b_1": walk.up, "h = GELU(up)": walk.act}, row_px=70,
                                  xlabel=_("channel"), words=words()),
                key="inside_mlp", filename=f"block_L{layer}_gelu_mlp")
    st.caption(_("{share} of the {n} channels have |GELU(up)| < {limit}: GELU lets positive values through and "
                 "squashes negative ones towards 0. This is GPT-2's MLP: two matrices with biases and d_ff = {ratio} d "
                 "({d_ff}). Llama and Qwen use SwiGLU instead: a gated branch times a second one (three "
                 "matrices).").format(share=f"{share:.0%}", n=f"{cfg.d_ff:,}", limit=f"{NEAR_ZERO:g}",
                                      d_ff=f"{cfg.d_ff:,}", ratio=f"{cfg.d_ff / cfg.d_model:.2f}"))


# ------------------------------------------------------------------------------------------------ which heads
def attribution_clicked() -> None:
    """A click on a head of the attribution grid switches it off (or on again). (Defined in the page: the page keeps
    no large object in its namespace, see render(), so this callback holds nothing big alive.)"""
    ss = st.session_state
    picked = picked_layer_head(selected_points(ss.get(ATTRIBUTION_CHART)))
    if picked is None:
        return
    n_heads = caches.get_model().config.n_heads
    flat = picked[0] * n_heads + picked[1]
    off = set(ss.get(OFF.key) or ())
    off ^= {flat}
    ss[OFF.key] = tuple(sorted(off))[: S.MAX_ABLATED]


def heads_view(lm, trace) -> None:
    ss = st.session_state
    cfg = lm.config
    text = trace.text
    follow_text(TARGET, text)
    ws = caches.workspace(lm)
    before = ws.compute(ablated_probs, text, ())
    top_ids = [int(i) for i in np.argsort(-before, kind="stable")[:TOP_N]]
    target, names = controls.target_picker(
        lm, TARGET, TARGET_PICK, top_ids, _("Explain the logit of"),
        help=_("The next token whose logit (after the last token) is split into every head's share."),
        detail=lambda i, name: f"{name} (id {i}, p = {before[i]:.1%})")
    last = plotly_escape(shorten(f"#{trace.n_tokens - 1} {trace.tokens[-1]}", 20))
    attr = ws.compute(of_trace, "logit_attribution", text, target, -1)
    off = tuple(int(i) for i in ss.get(OFF.key) or ())
    pairs = [divmod(i, cfg.n_heads) for i in off]
    fig = he.attribution_figure(attr.heads, off=pairs, words=translated(he.WORDS),
                                title=_("Each head's direct push on '{token}' after {last}").format(
                                    token=plotly_escape(shorten(names[target], 16)), last=last))
    show_figure(fig, key=ATTRIBUTION_CHART, filename=f"logit_attribution_{target}", on_select=attribution_clicked,
                selection_mode="points")
    order = np.argsort(-np.abs(attr.heads).ravel())[:3]
    strongest = ", ".join(f"L{i // cfg.n_heads} H{i % cfg.n_heads} ({attr.heads.ravel()[i]:+z.2f})" for i in order)
    st.caption(_("Logit of {token} = {logit} = embedding {embedding} + all heads {heads} + all MLPs {mlps}. Each part "
                 "is read through the final RMSNorm's real scale (1/rms = {scale}), so the parts add up exactly. Red "
                 "pushes the token up, blue down; strongest: {strongest}. *Direct* only: what a head changes in later "
                 "layers is not counted. Click a head to switch it off below.").format(
        token=tok_md(names[target]), logit=f"{attr.logit:.2f}", embedding=f"{attr.embedding:+z.2f}",
        heads=f"{attr.heads.sum():+z.2f}", mlps=f"{attr.mlps.sum():+z.2f}", scale=f"{attr.inv_rms:.3g}",
        strongest=strongest))
    show_figure(vi.layer_bars({_("all heads of the layer"): attr.heads.sum(axis=1), "MLP": attr.mlps},
                              ytitle=_("logit contribution"), title=_("By layer"), height=260, words=words()),
                key="inside_attr_layers", filename=f"logit_attribution_layers_{target}")

    st.subheader(_("Switch heads off"), anchor="ablation")
    ss[OFF_PICK] = list(off)
    st.multiselect(_("Heads switched off (their output set to zero)"), list(range(cfg.n_layers * cfg.n_heads)),
                   key=OFF_PICK, on_change=controls.follow_pick, args=(OFF_PICK, OFF.key, None),
                   max_selections=S.MAX_ABLATED,
                   format_func=lambda i: f"L{i // cfg.n_heads} H{i % cfg.n_heads}",
                   placeholder=_("Pick heads, or click them in the grid above"),
                   help=_("The model runs again with these heads adding nothing to the stream."))
    with st.spinner(_("Running the model without those heads…")):
        after = ws.compute(ablated_probs, text, tuple(pairs))
    shown = top_ids + [int(i) for i in np.argsort(-after, kind="stable")[:TOP_N] if int(i) not in top_ids]
    labels = lm.token_labels(shown)
    title = (ngettext("Next token after {last}: {n} head off", "Next token after {last}: {n} heads off", len(off))
             if off else _("Next token after {last}: all heads on")).format(last=last, n=len(off))
    show_figure(he.ablation_figure(labels, before[shown], after[shown], title=title, words=translated(he.WORDS)),
                key="inside_ablation", filename="head_ablation")
    if off:
        change = after[target] - before[target]
        st.caption(_("p({token}) goes from {before} to {after} ({change} points). Rows: the top {n} before, then any "
                     "new entries of the top {n} after.").format(
            token=tok_md(names[target]), before=f"{before[target]:.1%}", after=f"{after[target]:.1%}",
            change=f"{change * 100:+.1f}", n=TOP_N))
    else:
        st.caption(_("Nothing is switched off: the two bars are the same. Switch off the heads with the largest push "
                     "above and watch the probabilities move."))
    token_legend(labels)


# ----------------------------------------------------------------------------------------------------- the page
def render() -> None:
    """The page. Its model, trace and figures stay local: the page's namespace, which a widget callback defined here
    keeps alive, holds only functions and constants."""
    shell.header(_("Inside a block"), _("A token's way through the real model: tokenization, one decoder block step "
                                        "by step with its actual numbers, the residual stream, the logit lens, and "
                                        "which heads push the prediction."))
    lm = caches.get_model()
    text = shell.current_text()
    if not text.strip():
        st.info(_("The text is empty. Type some text, or load an example, to look inside the model."),
                icon=":material/edit_note:")
        return
    view, tab = controls.view_tabs(VIEW, S.INSIDE_VIEWS)
    with tab:
        if view == "tokens":
            tokens_view(lm, text)
        else:
            trace = shell.current_trace()
            if trace is not None:
                {"block": block_view, "stream": stream_view, "lens": lens_view, "heads": heads_view}[view](lm, trace)

