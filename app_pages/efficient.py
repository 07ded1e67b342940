"""Efficient attention: FlashAttention tile by tile on one real head, sparse masks applied to the whole model
(the attention-sink finding), MHA / GQA / MQA by regrouping the model's KV heads, and linear attention.

Thin: the maths is in model/maths (flash_attention, sparse_masks, kv_heads, linear_attention, perplexity), the
passes in app_core/derived/efficient.py, the figures in viz/efficient.py. Only the open view is
computed.
"""
from __future__ import annotations

import numpy as np
import streamlit as st

import viz.efficient
from app_core import schemas as S
from app_core.derived import efficient as E
from app_core.examples import load_examples
from app_pages.frame import controls, session, shell
from app_pages.frame.i18n import _
from app_pages.frame.widgets import SharedBuilders, show_figure, token_label, token_legend
from model.maths import kv_heads, linear_attention, sparse_masks
from model.maths.flash_attention import (
    block_history,
    block_ranges,
    block_sizes,
    memory_traffic,
    nearest_block,
    visit_order,
)
from model.maths.perplexity import moving_average, perplexity, token_losses
from viz.format import format_bytes, format_si

V = SharedBuilders(viz.efficient)

VIEW, BLOCK, TILE = (S.EFFICIENT.by_name(n) for n in ("view", "block", "tile"))
MASK, WINDOW, SINKS, STRIDE = (S.EFFICIENT.by_name(n) for n in ("mask", "window", "sinks", "stride"))
TILE_PICK = "eff_tile_pick"       # the tile slider's own key: it copies into the tile setting (None = the last)
TOP_NEXT = 8                      # next-token candidates compared
LONG_TEXT = 128                   # below this many tokens the masks view suggests the long story
COST_POSITIONS = 4096             # the cost-per-token figure runs to this many tokens
SMOOTH = 16                       # per-token losses are also drawn as the mean of the last SMOOTH


STORY_TITLE = "A long story (attention sinks)"     # the example text the masks view offers to load


def switch_mask(kind: str) -> None:
    """Button callback: show another kind of mask (the masks view's setting)."""
    st.session_state[S.EFFICIENT.by_name("mask").key] = kind


def story_text() -> str | None:
    """The long example story (None if the examples file lacks it)."""
    return next((e["text"] for e in load_examples() if e["title"] == STORY_TITLE), None)


def load_story() -> None:
    """Button callback: the long story becomes the text (the masks view needs a few hundred tokens)."""
    text = story_text()
    if text is not None:
        st.session_state[S.TEXT.key] = text
        st.session_state[S.QUERY.key] = None


def mask_names() -> dict[str, str]:
    return {"full": _("Full causal"), "window": _("Sliding window"), "sink": _("Window + sink tokens"),
            "strided": _("Strided"), "dilated": _("Dilated window")}


def kv_names(cfg) -> dict[str, str]:
    return {"mha": _("MHA: {n} KV heads").format(n=cfg.n_heads), "gqa": _("GQA: {n} KV heads (the model)").format(
        n=cfg.n_kv_heads), "mqa": _("MQA: 1 KV head")}


def next_token_figure(lm, results: dict[str, E.PassResult], title: str):
    """The top candidates of the first result, and their probabilities under every result."""
    ids, probs = E.next_token_table(results, TOP_NEXT)
    return V.next_token_compare(lm.token_labels(ids), probs, title=title, x_title=_("probability of the next token"))


# ---------------------------------------------------------------------------------------------- FlashAttention
def flash_view(lm, trace) -> None:
    ss = st.session_state
    cfg = lm.config
    layer, head = ss[S.LAYER.key], ss[S.HEAD.key]
    offered = block_sizes(trace.n_tokens)
    block = ss[BLOCK.key] = nearest_block(int(ss[BLOCK.key]), trace.n_tokens)
    run = session.workspace().compute(E.flash_run, trace.text, layer, head, block)
    last = len(run.steps) - 1
    t = last if ss.get(TILE.key) is None else min(int(ss[TILE.key]), last)
    ss[TILE_PICK] = t
    with st.container(horizontal=True, vertical_alignment="bottom", gap="medium"):
        st.segmented_control(_("Block size B"), offered, key=BLOCK.key, required=True, **controls.PERSIST,
                             on_change=controls.reset, args=(TILE.key,),
                             help=_("Rows of Q and of K, V per tile. On a GPU, B is chosen so that the tiles fit "
                                    "in the fast on-chip memory (SRAM)."))
        if last > 0:
            st.slider(_("Tile"), 0, last, key=TILE_PICK, width=420, on_change=controls.follow_pick,
                      args=(TILE_PICK, TILE.key, last),
                      help=_("Step through the tiles in the order the algorithm visits them."))
    step = run.steps[t]
    ranges = [f"{r.start}–{r.stop - 1}" for r in block_ranges(trace.n_tokens, block)]
    history = block_history(run, t)
    rows = [token_label(trace.tokens, i, 10) for i in step.q_rows]
    final = run.out[step.q_rows.start:step.q_rows.stop]
    left, right = st.columns([1, 1], gap="medium")
    with left:
        order = visit_order(run, trace.n_tokens, t)
        show_figure(V.tile_order_figure(order, (step.q_block, step.k_block), ranges, title=_("Tiles in visit order"),
                                        x_title=_("key block j"), y_title=_("query block i"), step_word=_("step"),
                                        skipped_word=_("skipped: every key is in the future")),
                    key="eff_tiles", filename=f"flash_tiles_B{block}")
        st.caption(_("Outer loop over key/value blocks j, inner loop over query blocks i (Algorithm 1). Grey tiles "
                     "lie wholly above the diagonal: with a causal mask they are never computed."))
    with right:
        st.markdown(_("**Step {t} of {n}:** queries {q0}–{q1} against keys {k0}–{k1}.").format(
            t=t, n=last, q0=step.q_rows.start, q1=step.q_rows.stop - 1, k0=step.k_cols.start,
            k1=step.k_cols.stop - 1))
        show_figure(V.running_stats_figure(rows, [s.row_max for s in history], [s.row_sum for s in history],
                                           [_("after key block {j}").format(j=s.k_block) for s in history],
                                           titles=(_("running row maximum m"), _("running sum l")),
                                           x_title=_("query")),
                    key="eff_stats", filename=f"flash_running_L{layer}_H{head}")
        st.caption(_("When a new tile has a larger score, m grows and everything summed so far is rescaled by "
                     "exp(m_old − m_new): the sum l can shrink. Earlier tiles of this query block are faded."))
    show_figure(V.output_pair_figure(step.out, final, rows, titles=(_("output so far (divided by l)"),
                                                                    _("final output")),
                                     x_title=_("dimension of the head"), value_word=_("value")),
                key="eff_out", filename=f"flash_output_L{layer}_H{head}")
    exact, model = session.workspace().compute(E.flash_differences, trace.text, layer, head, block)
    st.caption(_("After the last tile every row is complete. Largest difference from ordinary softmax attention "
                 "on the same q, k, v: {exact:.1e} (float64 rounding); from the model's own float32 forward pass "
                 "(its pattern times v): {model:.1e}.").format(exact=exact, model=model))
    memory_panel(trace.n_tokens, cfg, block)


def memory_panel(T: int, cfg, block: int) -> None:
    m = memory_traffic(T, cfg.head_dim, block)
    st.markdown("#### " + _("Memory: what never has to exist"))
    names = [_("score matrix, one head ({T} × {T})").format(T=T), _("score matrices, all heads and layers"),
             _("one tile ({B} × {B})").format(B=block)]
    values = [m.score_bytes, m.score_bytes * cfg.n_heads * cfg.n_layers, m.tile_bytes]
    show_figure(V.bytes_bars(names, values, [format_bytes(v) for v in values], title=_("Scores held (float32)"),
                             x_title=_("bytes (log scale)")), key="eff_bytes", filename="flash_bytes")
    names = [_("standard attention"), _("FlashAttention")]
    values = [m.standard, m.flash]
    show_figure(V.bytes_bars(names, values, [format_si(v) for v in values],
                             title=_("Slow-memory reads and writes, one head"), x_title=_("values"), log=False,
                             height=180), key="eff_hbm", filename="flash_hbm")
    st.caption(_("Dao et al. 2022, Theorem 2: standard attention reads and writes Θ(N d + N²) values of slow memory "
                 "(HBM), FlashAttention Θ(N² d² / M) for fast memory of M values. Here N = {T}, d = {d}, and tiles of "
                 "B = {B} need M = 4 B d = {M} values: N d + N² = {std}, N² d² / M = {fl}. Counted access by access "
                 "on this text's tiles: {std_count} against {fl_count}.").format(
        T=T, d=cfg.head_dim, B=block, M=format_si(m.sram_values), std=format_si(m.standard_theta),
        fl=format_si(m.flash_theta), std_count=format_si(m.standard), fl_count=format_si(m.flash)))
    if m.flash < m.standard:
        st.caption(_("{ratio:.1f}× fewer slow-memory accesses. FlashAttention does more arithmetic (it recomputes "
                     "the scores in the backward pass) but moves far less data, and moving data is what takes the "
                     "time.").format(ratio=m.standard / m.flash))
    else:
        st.caption(_("Here FlashAttention moves more: each of the N / B passes over the key blocks reads and writes "
                     "the query blocks' O, m and l again. Its saving grows with the text (N²) and with the fast "
                     "memory (a larger B): try B = 64 or a longer text."))


# ------------------------------------------------------------------------------------------------------- masks
def mask_controls(T: int) -> None:
    ss = st.session_state
    names = mask_names()
    kind = ss[MASK.key]
    with st.container(horizontal=True, vertical_alignment="bottom", gap="medium"):
        st.selectbox(_("Mask"), S.MASK_KINDS, key=MASK.key, format_func=names.get, width=220, **controls.PERSIST)
        if kind in ("window", "sink", "dilated"):
            st.slider(_("Window w (tokens)"), 1, max(2, T), key=WINDOW.key, width=260, **controls.PERSIST,
                      help=_("How many keys each query keeps (the last w tokens, itself included)."))
        if kind == "sink":
            st.slider(_("Sink tokens k"), 1, S.MAX_SINKS, key=SINKS.key, width=200, **controls.PERSIST,
                      help=_("The first k tokens of the text stay visible to every query."))
        if kind in ("strided", "dilated"):
            st.slider(_("Stride"), 2, S.MAX_STRIDE, key=STRIDE.key, width=200, **controls.PERSIST,
                      help=_("Strided: the last s tokens and every s-th token before them. Dilated: w keys spaced s "
                             "apart."))


def masks_view(lm, trace) -> None:
    ss = st.session_state
    T = trace.n_tokens
    if T < LONG_TEXT:
        with st.container(horizontal=True, vertical_alignment="center", gap="small"):
            st.info(_("This text has {T} tokens. A mask that keeps only the recent tokens shows its effect on long "
                      "texts: load the long story (about 230 tokens).").format(T=T), icon=":material/short_text:",
                    width=520)                           # the button beside it: one row, the chart on the first screen
            st.button(_("Load the long story"), key="eff_story", on_click=load_story)
    mask_controls(T)
    kind = ss[MASK.key]
    key = E.mask_key(kind, int(ss[WINDOW.key]), int(ss[SINKS.key]), int(ss[STRIDE.key]))
    mask = sparse_masks.build_mask(kind, T, *key[1:])
    ws = session.workspace(lm)
    full = ws.compute(E.full_pass, trace.text)
    with st.spinner(_("Running the model with this mask in every layer…")):
        masked = ws.compute(E.masked_pass, trace.text, key)
    start = sparse_masks.first_cut_row(mask)
    cuts = start < T - 1                                      # some prediction sees fewer tokens than the model's
    names = mask_names()
    left, right = st.columns([2, 3], gap="medium")
    with left:
        show_figure(V.sparse_mask_figure(mask, title=names[kind], x_title=_("key position j"),
                                         y_title=_("query position i")), key="eff_mask_fig", filename=f"mask_{kind}")
        st.caption(":blue-background[{kept}] · :orange-background[{dropped}] · :gray-background[{future}]".format(
            kept=_("kept"), dropped=_("dropped by this mask"), future=_("future (causal)")))
        st.caption(_("The same mask in all {L} layers and {H} heads: it keeps {share:.0%} of the causal "
                     "(query, key) pairs.").format(L=lm.config.n_layers, H=lm.config.n_heads,
                                                   share=sparse_masks.kept_share(mask)))
    with right:
        perplexities(full, masked, start if cuts else 0, T)
        if kind in ("window", "sink") and cuts:
            sink_finding(trace.text, key, masked, full)
    series = {_("full causal"): token_losses(full.logprobs), names[kind]: token_losses(masked.logprobs)}
    show_figure(V.position_lines(series, trace.tokens[1:], title=_("Loss of each actual next token"),
                                 x_title=_("predicted token"), y_title=_("cross-entropy (nats)"),
                                 marker=start if cuts else None, marker_text=_("the mask starts to cut"),
                                 trend={name: moving_average(v, SMOOTH) for name, v in series.items()}),
                key="eff_loss", filename=f"loss_{kind}")
    st.caption(_("Point t is −log p(token t+1 | tokens ≤ t): lower is better. Faint: each token; bold: the mean of "
                 "the last {n}. Before the dotted line the mask cuts nothing and the lines coincide.").format(n=SMOOTH))
    show_figure(next_token_figure(lm, {_("full causal"): full, names[kind]: masked},
                                  _("Next token after the text")), key="eff_next", filename=f"next_{kind}")
    token_legend(trace.tokens)


def perplexities(full: E.PassResult, masked: E.PassResult, start: int, T: int) -> None:
    a, b = st.columns(2)
    ppl_full, ppl_masked = perplexity(full.logprobs, start), perplexity(masked.logprobs, start)
    a.metric(_("Perplexity, full attention"), f"{ppl_full:.1f}")
    b.metric(_("Perplexity with this mask"), f"{ppl_masked:.1f}", delta=f"{ppl_masked - ppl_full:+.1f}",
             delta_color="inverse")
    where = (_("Over the {n} predictions from token {start} on, where the mask cuts something.").format(
        n=T - 1 - start, start=start) if start else _("Over all {n} predictions: this mask cuts nothing here.").format(
        n=T - 1))
    st.caption(where + " " + _("Perplexity = exp(mean loss): the number of equally likely tokens the model is, on "
                               "average, choosing between."))


def sink_finding(text: str, key: tuple, masked: E.PassResult, full: E.PassResult) -> None:
    """The StreamingLLM comparison: the same window with and without the first tokens, once both have run (each
    mask switch runs the model once)."""
    ss = st.session_state
    kind, window = key[0], key[1]
    sinks = int(ss[SINKS.key])
    other_key = E.counterpart(key, sinks)
    other = session.workspace().computed(E.masked_pass, text, other_key)
    if other is None:
        target = mask_names()[other_key[0]]
        st.button(_("Compare: {mask}").format(mask=target), key="eff_compare", icon=":material/compare_arrows:",
                  on_click=switch_mask, args=(other_key[0],),
                  help=_("Runs the same window with the first {k} tokens kept (or dropped): the attention-sink "
                         "finding.").format(k=sinks))
        return
    plain, kept = (masked, other) if kind == "window" else (other, masked)
    first = min(window, len(full.logprobs))                  # where the plain window starts to cut
    ppl = [perplexity(r.logprobs, first) for r in (full, plain, kept)]
    st.markdown(_("**Attention sinks.** Full attention: {full:.1f}. A {w}-token window: **{plain:.1f}**. The same "
                  "window plus the first {k} tokens: **{kept:.1f}**.").format(full=ppl[0], w=window, plain=ppl[1],
                                                                             k=other_key[2] or key[2], kept=ppl[2]))
    st.caption(_("This model parks most of its attention on token 0 (see the Attention page). A window that drops "
                 "it forces every later layer to spread that weight over tokens that do not expect it; keeping a "
                 "few first tokens restores most of the quality (Xiao et al. 2023, StreamingLLM)."))


# ------------------------------------------------------------------------------------------------ MHA/GQA/MQA
def kv_view(lm, trace) -> None:
    cfg = lm.config
    counts = kv_heads.kv_head_counts(cfg.n_heads, cfg.n_kv_heads)
    names = kv_names(cfg)
    ws = session.workspace(lm)
    with st.spinner(_("Running the model with its KV heads regrouped…")):
        results = {slug: ws.compute(E.kv_pass, trace.text, n) for slug, n in counts.items()}
    T = trace.n_tokens
    gqa, mha, mqa = results["gqa"], results["mha"], results["mqa"]
    st.caption(_("The model has {H} query heads and {KV} key/value heads: query head h reads KV head h // {g}. "
                 "Copying each KV head once per query head that reads it gives multi-head attention; averaging "
                 "all of them into one gives multi-query attention (the GQA paper's conversion, without the "
                 "retraining it then needs).").format(H=cfg.n_heads, KV=cfg.n_kv_heads, g=cfg.group_size))
    a, b, c = st.columns(3)
    change = E.largest_change(mha, gqa)
    a.metric(_("MHA: largest change of a log p"), "0" if change == 0 else f"{change:.1e}",
             help=_("The largest difference, over every token of the text, between the log-probability the model "
                    "gives the actual next token and the one the MHA copy gives it."))
    b.metric(_("Perplexity, the model (GQA)"), f"{perplexity(gqa.logprobs):.2f}")
    ppl_mqa = perplexity(mqa.logprobs)
    c.metric(_("Perplexity, pooled into MQA"), f"{ppl_mqa:.2f}", delta=f"{ppl_mqa - perplexity(gqa.logprobs):+.2f}",
             delta_color="inverse")
    st.caption(_("Duplicated KV heads compute exactly what the shared ones did (the difference is float32 "
                 "rounding at most); one mean-pooled KV head changes every layer's keys and values, and the loss "
                 "shows it."))
    per_token = kv_heads.cache_bytes_per_token(cfg.n_layers, cfg.head_dim, counts)
    labels = list(names.values())
    values = list(per_token.values())
    show_figure(V.bytes_bars(labels, values, [format_bytes(v) for v in values],
                             title=_("KV cache per token (16-bit)"), x_title=_("bytes (log scale)")),
                key="eff_kv_bytes", filename="kv_cache_per_token")
    st.caption(_("Each token stores a key and a value of {d} numbers per KV head in each of {L} layers. For "
                 "this text's {T} tokens: MHA {mha}, GQA {gqa}, MQA {mqa}.").format(
        d=cfg.head_dim, L=cfg.n_layers, T=T, mha=format_bytes(per_token["mha"] * T),
        gqa=format_bytes(per_token["gqa"] * T), mqa=format_bytes(per_token["mqa"] * T)))
    show_figure(next_token_figure(lm, {names["gqa"]: gqa, names["mha"]: mha, names["mqa"]: mqa},
                                  _("Next token after the text")), key="eff_kv_next", filename="kv_next_token")
    series = {names["gqa"]: token_losses(gqa.logprobs), names["mqa"]: token_losses(mqa.logprobs)}
    show_figure(V.position_lines(series, trace.tokens[1:], title=_("Loss of each actual next token"),
                                 x_title=_("predicted token"), y_title=_("cross-entropy (nats)"),
                                 trend={name: moving_average(v, SMOOTH) for name, v in series.items()}),
                key="eff_kv_loss", filename="kv_loss")
    token_legend(trace.tokens)


# ------------------------------------------------------------------------------------------- linear attention
def linear_view(lm, trace) -> None:
    ss = st.session_state
    cfg = lm.config
    layer, head = ss[S.LAYER.key], ss[S.HEAD.key]
    detail = session.workspace().layer_detail(trace.text, layer)
    kv = head // cfg.group_size
    q, k, v = detail.q_rot[head], detail.k_rot[kv], detail.v[kv]
    soft = detail.pattern[head].astype(np.float64)                                     # [T, T] the model's own
    lin = linear_attention.linear_pattern(q, k)                                        # [T, T]
    err = linear_attention.pattern_error(soft, lin, v)
    show_figure(V.pattern_pair(soft, lin, trace.tokens, titles=(_("softmax (the model)"),
                                                                _("linear attention, φ(x) = elu(x) + 1")),
                               x_title=_("key"), y_title=_("query"), colour_title=_("weight")),
                key="eff_lin_patterns", filename=f"linear_L{layer}_H{head}")
    st.caption(_("The same q and k (after RoPE). Softmax weighs key j by exp(q·k/√d): sharp, it can put almost "
                 "everything on one key. The kernel φ(q)·φ(k) is positive and grows slowly, so its rows come out "
                 "much flatter. Mean distance between the rows: {tv:.2f} (0 = the same, 1 = nothing in common); "
                 "relative error of the outputs: {out:.0%}.").format(tv=float(err.row_distance.mean()),
                                                                     out=err.total_output_error))
    left, right = st.columns(2, gap="medium")
    with left:
        show_figure(V.position_lines({_("distance between the rows"): err.row_distance,
                                      _("relative output error"): err.output_error}, trace.tokens,
                                     title=_("Error of each query row"), x_title=_("query"), y_title=""),
                    key="eff_lin_error", filename=f"linear_error_L{layer}_H{head}")
    with right:
        positions = np.arange(0, COST_POSITIONS + 1, 16)
        soft_cost, lin_cost = linear_attention.cost_per_token(positions, cfg.head_dim)
        show_figure(V.cost_figure(positions, {_("softmax attention"): soft_cost, _("linear attention"): lin_cost},
                                  current=trace.n_tokens, current_text=_("this text"),
                                  title=_("Work per new token, one head"), x_title=_("tokens so far"),
                                  y_title=_("multiply-adds")), key="eff_lin_cost", filename="linear_cost")
    st.caption(_("Softmax attention compares the new token with every earlier key: its work (and its KV cache) "
                 "grows with the text. Linear attention keeps a running d × d state: the same {c} multiply-adds "
                 "for every token, cheaper once the text is longer than d = {d} tokens.").format(
        c=f"{int(lin_cost[0]):,}", d=cfg.head_dim))
    st.caption(_("Run token by token with that state, linear attention gives exactly the outputs of its pattern "
                 "above: largest difference {gap:.1e}.").format(gap=linear_attention.recurrence_gap(q, k, v)))
    token_legend(trace.tokens)


def render() -> None:
    """The page: the open view (FlashAttention, sparse masks, MHA / GQA / MQA, linear attention) on the text."""
    shell.header(_("Efficient attention"), _("Attention costs time and memory that grow with the square of the text. "
                                             "Here are the main ways around that, each run on the real model and "
                                             "your text: what it keeps, and what it costs."))
    trace = shell.current_trace()
    if trace is None:
        shell.stop()
    lm = session.get_model()
    view, tab = controls.view_tabs(VIEW, S.EFFICIENT_VIEWS)
    with tab:
        if view in ("masks", "kv") and trace.n_tokens < 2:
            st.info(_("This view measures how well the model predicts each next token: type a text of at least "
                      "two tokens."), icon=":material/edit_note:")
            return
        {"flash": flash_view, "masks": masks_view, "kv": kv_view, "linear": linear_view}[view](lm, trace)

