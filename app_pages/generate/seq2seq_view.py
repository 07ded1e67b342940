"""The Generate page for an encoder-decoder (T5): the text is the source, which the encoder reads once; the decoder
writes the target token by token. Step by step: each new target token, what it was chosen from, and where it looked
in the source (its cross-attention row), beside the alignment so far (every written token's row); two temperatures
side by side."""
from __future__ import annotations

import numpy as np
import streamlit as st

import viz.generation
import viz.seq2seq
from app_core import schemas as S
from app_core.scheduling import FIGURES_IN_TURN
from app_pages.frame import shell
from app_pages.frame.i18n import _, ngettext, translated
from app_pages.frame.widgets import SharedBuilders, escape_markdown, show_figure, token_legend
from app_pages.generate import stepper
from viz.format import percent_labels
from viz.labels import plotly_escape

vg = SharedBuilders(viz.generation)
vs = SharedBuilders(viz.seq2seq)

SOURCE_CHARS = 300                # the source shown above the target: at most this much of it


def target_markdown(lm, new_ids: list[int], t: int | None) -> str:
    """The target written up to step t (all: None) as Markdown (escaped), the token of step t highlighted."""
    stop = len(new_ids) if t is None else t + 1
    before, after = lm.decode(new_ids[: max(0, stop - 1)]), lm.decode(new_ids[:stop])
    piece = after[len(before):] if after.startswith(before) else lm.decode(new_ids[stop - 1: stop])
    md = lambda text: escape_markdown(text).replace("\n", "  \n")    # noqa: E731
    return md(before) + (f":red-background[{md(piece)}]" if piece else "")


def source_line(g) -> str:
    """The source as the encoder read it, shortened."""
    text = g.source if len(g.source) <= SOURCE_CHARS else g.source[:SOURCE_CHARS] + "…"
    cut = " " + _("(cut to its first {n} tokens)").format(n=len(g.source_ids)) if g.truncated else ""
    return _("**Source** (read once by the encoder){cut}: {text}").format(cut=cut, text=escape_markdown(text))


def write_view(lm, g, words) -> None:
    """The steps of one generation: a slider (or Play) over them, the story, and the step's figures."""
    last = len(g.steps) - 1
    if last < 0:
        st.info(_("The model wrote nothing."), icon=":material/edit_note:")
        return

    @st.fragment(run_every=stepper.play_every())
    def step_view() -> None:
        step_index = stepper.current_step(last)
        step = g.steps[step_index]
        story, chart = st.columns([3, 2], gap="medium")
        with story:
            stepper.step_controls(last, _("Which target token to look at: the target up to it, what it was chosen "
                                          "from, and where in the source the model looked to write it."),
                                  _("Step through the target, one token at a time."))
            st.markdown(source_line(g))
            with st.container(height=90, border=False, key="gen_target"):
                st.markdown(_("**Target**: {text}").format(text=target_markdown(lm, g.new_token_ids, step_index)))
            kept = int(step.n_kept)
            st.caption(" ".join([ngettext(
                "Step {step}: drew {token} with p = {p} (rank {rank} at T = {t}), from {n} kept token.",
                "Step {step}: drew {token} with p = {p} (rank {rank} at T = {t}), from {n} kept tokens.", kept).format(
                step=step_index, token=escape_markdown(step.token), p=f"{step.prob:.1%}", rank=step.rank + 1,
                t=f"{g.settings.temperature:g}", n=f"{kept:,}")]
                + ([_("Stopped at the end-of-sequence token </s>.")] if g.stop_reason == "eos" and step_index == last
                   else [])))
        with FIGURES_IN_TURN:
            step_figures(g, step, step_index, chart, words)
        shell.finish()

    step_view()


def step_figures(g, step, step_index: int, chart, words) -> None:
    """The step's candidates (in `chart`), its cross-attention row over the source, the alignment up to it."""
    ss = st.session_state
    with chart:
        c = step.candidates
        drawn = int(np.flatnonzero(c.ids == step.token_id)[0]) if step.token_id in c.ids else None
        show_figure(vg.candidates_figure(list(c.tokens), c.probs, c.kept, drawn, height=300,
                                         words=translated(vg.WORDS),
                                         title=_("Top {n} candidates").format(n=len(c.ids))),
                    key="gen_candidates", filename=f"generate_step{step_index}_candidates")
    cross = g.cross_attention                                                    # [steps, L_dec, H, S]
    layer, head = min(int(ss[S.LAYER.key]), cross.shape[1] - 1), int(ss[S.HEAD.key])
    written = [s.token for s in g.steps[: step_index + 1]]
    left, right = st.columns(2, gap="small")
    with left:
        show_figure(vs.source_row_figure(cross[step_index, layer, head], g.source_tokens, words=words, height=300,
                                         title=_("To write {token}: layer {layer}, head {head}").format(
                                             token=plotly_escape(step.token), layer=layer, head=head)),
                    key="gen_cross_row", filename=f"generate_step{step_index}_cross_L{layer}_H{head}")
    with right:
        show_figure(vs.attention_heatmap(cross[: step_index + 1, layer, head], written, g.source_tokens,
                                         row_title=words.written_axis, column_title=words.source_axis,
                                         highlight_row=step_index, height=300, max_labels=24, words=words,
                                         title=_("The alignment so far")),
                    key="gen_alignment", filename=f"generate_step{step_index}_alignment_L{layer}_H{head}")
    st.caption(_("Left: the cross-attention of the decoder position that wrote this token, over the source tokens "
                 "(its strongest in red). Right: every token written so far (rows) over the source (columns); a "
                 "copy or a word-by-word translation lines up on a diagonal, a reversal on an anti-diagonal.")
               + (" " + _("The decoder has {n} layers: showing its last.").format(n=cross.shape[1])
                  if int(ss[S.LAYER.key]) >= cross.shape[1] else ""))
    token_legend([*g.source_tokens, *written])


def compare_view(lm, jobs: dict[str, object]) -> None:
    """The same source's target at two temperatures: each text and the probability each token was drawn with."""
    words = translated(vg.WORDS)
    for (name, job), col, color in zip(jobs.items(), st.columns(2, gap="medium"), (vg.PROMPT_COLOR, vg.NEW_COLOR),
                                       strict=True):
        g = job.result
        with col:
            st.markdown(f"**{name}**")
            with st.container(height=130, border=True, key=f"gen_text_{name}"):
                st.markdown(target_markdown(lm, g.new_token_ids, None))
            probs = np.array([s.prob for s in g.steps])
            mean = percent_labels([probs.mean()])[0] if probs.size else "–"
            show_figure(vg.chosen_probability_figure(probs, [s.token for s in g.steps], color=color, words=words,
                                                     title=_("mean p = {p}").format(p=mean)),
                        key=f"gen_compare_{name}", filename=f"generate_{name.replace(' = ', '')}_probabilities")
    st.caption(_("The same source, seed {seed} and top-k / top-p, at two temperatures: the target each wrote, and the "
                 "probability each chosen token was drawn with.").format(seed=int(st.session_state[S.GENERATE.by_name(
                     "seed").key])))
