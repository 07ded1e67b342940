"""Generate: the model writes, one token at a time. Step through what it chose from and where the new token looked;
compare the same prompt and seed at a low and a high temperature. Generation runs in the background."""
from __future__ import annotations

from functools import partial

import numpy as np
import streamlit as st

import viz.attention
import viz.generation
import viz.seq2seq
from app_core import families
from app_core import schemas as S
from app_core.scheduling import FIGURES_IN_TURN
from app_pages.frame import controls, session, shell
from app_pages.frame.i18n import _, ngettext, translated
from app_pages.frame.widgets import SharedBuilders, escape_markdown, show_figure, token_legend
from app_pages.generate import seq2seq_view, stepper
from app_pages.generate.jobs import GREEDY, HIGH, LOW, SEED, TEMP, TOP_K, TOP_P, VIEW, N, current_jobs
from app_pages.generate.kv_cache import kv_cache_panel
from model.analysis.head_stats import mean_distance_back, sink_hidden_row
from model.maths.sampling import T_MAX, T_MIN, temperature_grid
from viz.format import percent_labels

va = SharedBuilders(viz.attention)
vg = SharedBuilders(viz.generation)

GRID = temperature_grid(T_MIN, T_MAX)
REFRESH_S, MAX_REFRESH_S = 0.3, 2.0   # progress refresh while generating (slower as more sessions write)
PROMPT_CHARS = 400                # the text so far shows at most this much of the prompt (its end)


def temperature_slider(param, label: str, width=260) -> None:
    st.select_slider(label, options=sorted({*GRID, float(st.session_state[param.key])}), key=param.key, width=width,
                     format_func=lambda t: f"{t:g}", **controls.PERSIST,
                     help=_("Logits are divided by T before the softmax: T < 1 sharpens, T > 1 flattens ({low} to "
                            "{high}, log steps).").format(low=f"{T_MIN:g}", high=f"{T_MAX:g}"))


def sampling_popover(where) -> None:
    with where.popover(_("Sampling"), icon=":material/tune:", help=_("top-k, top-p and the random seed")):
        st.number_input(_("top-k (0 = off)"), min_value=0, max_value=session.get_model().config.vocab_size, step=1,
                        key=TOP_K.key, **controls.PERSIST, help=_("Keep only the k most probable tokens."))
        st.slider(_("top-p (1.00 = off)"), 0.01, 1.0, step=0.01, key=TOP_P.key, format="%.2f", **controls.PERSIST,
                  help=_("Keep the smallest set of most probable tokens whose probabilities add up to p."))
        st.number_input(_("seed"), min_value=0, max_value=2**31 - 1, step=1, key=SEED.key, **controls.PERSIST,
                        help=_("The same seed draws the same tokens: change it to see another continuation."))


def written_markdown(lm, g_prompt_ids: list[int], new_ids: list[int], t: int | None) -> str:
    """The text so far as Markdown (escaped), its last prompt characters only, the token of step t highlighted."""
    stop = len(new_ids) if t is None else t + 1
    before = lm.decode(g_prompt_ids + new_ids[: stop - 1]) if stop else lm.decode(g_prompt_ids)
    after = lm.decode(g_prompt_ids + new_ids[:stop])
    piece = after[len(before):] if after.startswith(before) else lm.decode(new_ids[stop - 1: stop])
    prompt_text = lm.decode(g_prompt_ids)
    start = max(0, len(prompt_text) - PROMPT_CHARS)
    shown_before = ("…" if start else "") + before[start:]

    def md(text: str) -> str:
        return escape_markdown(text).replace("\n", "  \n")

    return md(shown_before) + (f":red-background[{md(piece)}]" if piece else "")


def wait_for(jobs: dict[str, object], what: str) -> None:
    """Progress of running jobs, updated in place while this script run waits for them; returns when all are done,
    and the page goes on to draw the result at once. A waiting script thread costs no CPU, where polling reran a
    fragment every refresh and noticed the end up to one refresh late (3 s with ten sessions writing). Any click
    meanwhile reruns the page (within one refresh); the jobs go on in the background."""
    shown = st.empty()
    while True:
        running = {name: job.poll() for name, job in jobs.items()}
        pending = [job for job in running.values() if not job.done.is_set()]
        if not pending:
            break
        with shown.container():
            for name, job in running.items():
                st.progress(job.progress, text=(_("{what} ({name}): {done} of {total} tokens") if len(jobs) > 1 else
                                                _("{what}: {done} of {total} tokens")).format(
                    what=what, name=name, done=len(job.partial), total=job.total))
                if job.partial:
                    step = job.partial[-1]
                    st.caption(_("Last token: {token} (p = {p})").format(token=escape_markdown(step.token),
                                                                         p=percent_labels([step.prob])[0]))
        pending[0].done.wait(min(MAX_REFRESH_S, REFRESH_S * max(1, session.generations_running())))
    shown.empty()


def finished(jobs: dict[str, object]) -> bool:
    """After wait_for: False (and an error shown) when a job failed; a job cancelled unseen is started again."""
    failed = [job.error for job in jobs.values() if job.error]
    if failed:
        st.error(_("The generation failed: {error}").format(error=failed[0]), icon=":material/error:")
        return False
    if any(job.result is None for job in jobs.values()):
        st.rerun()
    return True


def write_view(lm, jobs: dict[str, object], words) -> None:
    seq2seq = families.family_of(lm) == families.SEQ2SEQ
    with st.container(horizontal=True, vertical_alignment="bottom", gap="medium"):
        st.slider(_("New tokens"), 1, S.MAX_NEW_TOKENS, key=N.key, width=170, **controls.PERSIST)
        st.toggle(_("Greedy"), key=GREEDY.key, **controls.PERSIST,
                  help=_("Always take the most probable token (no randomness, no temperature)."))
        if not st.session_state[GREEDY.key]:
            temperature_slider(TEMP, _("Temperature T"), width=200)
            sampling_popover(st)
    wait_for(jobs, _("Writing"))
    if not finished(jobs):
        return
    g = jobs[""].result
    if seq2seq:
        seq2seq_view.write_view(lm, g, translated(viz.seq2seq.WORDS))
        return
    scrubber(lm, g, words)
    kv_cache_panel(lm, g)


def scrubber(lm, g, words) -> None:
    n_steps = len(g.steps)
    last = n_steps - 1

    @st.fragment(run_every=stepper.play_every())
    def step_view() -> None:
        step_index = stepper.current_step(last)
        step = g.steps[step_index]
        story, chart = st.columns([3, 2], gap="medium")
        with story:
            stepper.step_controls(last, _("Which generated token to look at: the text up to it, what it was chosen "
                                          "from, and where the model looked to predict it."),
                                  _("Step through the generation, one token at a time."))
            with st.container(height=150, border=False, key="gen_text"):      # the model's words: not translated
                st.markdown(written_markdown(lm, g.prompt_ids, g.new_token_ids, step_index))
            kept = int(step.n_kept)
            st.caption(" ".join([ngettext(
                "Step {step}: drew {token} with p = {p} (rank {rank} at T = {t}; {raw} at T = 1), from {n} kept "
                "token.",
                "Step {step}: drew {token} with p = {p} (rank {rank} at T = {t}; {raw} at T = 1), from {n} kept "
                "tokens.", kept).format(step=step_index, token=escape_markdown(step.token), p=f"{step.prob:.1%}",
                                        rank=step.rank + 1, t=f"{g.settings.temperature:g}",
                                        raw=f"{step.raw_prob:.1%}", n=f"{kept:,}")]
                + ([_("Stopped at the end-of-turn token.")] if g.stop_reason == "eos" and step_index == last
                   else [])))
        with FIGURES_IN_TURN:
            step_figures(g, step, step_index, chart, words)
        shell.finish()                                        # the step changed: the link follows it

    step_view()


def step_figures(g, step, step_index: int, chart, words) -> None:
    """The figures of one step: its candidates (in `chart`), where it looked, how far back every head looked."""
    ss = st.session_state
    with chart:
        c = step.candidates
        drawn = int(np.flatnonzero(c.ids == step.token_id)[0]) if step.token_id in c.ids else None
        show_figure(vg.candidates_figure(list(c.tokens), c.probs, c.kept, drawn, height=330, words=words,
                                         title=_("Top {n} candidates").format(n=len(c.ids))),
                    key="gen_candidates", filename=f"generate_step{step_index}_candidates")
    layer, head, hide_sink = ss[S.LAYER.key], ss[S.HEAD.key], bool(ss[S.SINK.key])
    rows = np.asarray(step.attention, dtype=np.float32)                                # [L, H, n]
    if hide_sink and rows.shape[-1] > 1:
        rows = sink_hidden_row(rows)
    tokens = g.tokens[: rows.shape[-1]]
    show_figure(vg.attention_row_figure(rows[layer, head], tokens, g.prompt_len, max_labels=40,
                                        words=words, title=_("Where it looked: layer {layer}, head {head}").format(
                                            layer=layer, head=head)),
                key="gen_attention", filename=f"generate_step{step_index}_L{layer}_H{head}")
    st.caption(_("The attention of the position that predicted this token, over the text so far: prompt tokens "
                 "blue, generated ones orange; token 0 (the sink) hidden.") if hide_sink else
               _("The attention of the position that predicted this token, over the text so far: prompt tokens "
                 "blue, generated ones orange."))
    distance = mean_distance_back(rows)                                                 # [L, H]
    show_figure(va.stat_overview(distance, label=_("mean distance back"), selected=(layer, head), zmin=0.0,
                              scale_title=_("tokens"), words=translated(va.WORDS),
                              title=_("How far back every head looked for this token")),
                key="gen_grid", filename=f"generate_step{step_index}_heads", selection_mode="points",
                on_select=partial(controls.pick_head_from_chart, "gen_grid"))
    st.caption(_("Each cell is one head: the attention-weighted distance back from the newest token (0 = "
                 "itself). Click a cell to show that head above.") if hide_sink else
               _("Each cell is one head: the attention-weighted distance back from the newest token (0 = "
                 "itself). Click a cell to show that head above. With the sink shown, heads that park on token 0 "
                 "look far back."))
    token_legend(tokens)


def compare_view(lm, jobs: dict[str, object], words) -> None:
    with st.container(horizontal=True, vertical_alignment="bottom", gap="medium"):
        st.slider(_("New tokens"), 1, S.MAX_NEW_TOKENS, key=N.key, width=150, **controls.PERSIST)
        temperature_slider(LOW, _("Low T"), width=160)
        temperature_slider(HIGH, _("High T"), width=160)
        sampling_popover(st)
    wait_for(jobs, _("Writing"))
    if not finished(jobs):
        return
    if families.family_of(lm) == families.SEQ2SEQ:
        seq2seq_view.compare_view(lm, jobs)
        return
    for (name, job), col, color in zip(jobs.items(), st.columns(2, gap="medium"), (vg.PROMPT_COLOR, vg.NEW_COLOR),
                                       strict=True):
        g = job.result
        with col:
            st.markdown(f"**{name}**")
            with st.container(height=130, border=True, key=f"gen_text_{name}"):
                st.markdown(written_markdown(lm, g.prompt_ids, g.new_token_ids, None))
            probs = np.array([s.prob for s in g.steps])
            mean = percent_labels([probs.mean()])[0]          # two digits: a high T's mean is not a rounded 0%
            show_figure(vg.chosen_probability_figure(probs, g.new_tokens, color=color, words=words,
                                                     title=_("mean p = {p}").format(p=mean)),
                        key=f"gen_compare_{name}", filename=f"generate_{name.replace(' = ', '')}_probabilities")
    st.caption(_("The same prompt, seed {seed} and top-k / top-p, at two temperatures. The bars: the probability "
                 "each chosen token was drawn with. Low T keeps picking likely tokens; high T wanders.").format(
        seed=int(st.session_state[SEED.key])))


def render() -> None:
    """The page: the prompt's generation (write view) or the same prompt at two temperatures (compare view)."""
    lm = session.get_model()
    text = shell.current_text()
    jobs = current_jobs()       # asked for already, before the frame was drawn (router.py): the same jobs
    shell.header(_("Generate"), _("The model writes one token at a time: each new token is drawn from its next-token "
                                  "probabilities (after temperature, top-k and top-p), appended, and fed back in.")
                 if families.family_of(lm) != families.SEQ2SEQ else
                 _("A T5 reads your text (the source) once with its encoder, then its decoder writes a target one "
                   "token at a time, each drawn from its next-token probabilities, and looks back at the source "
                   "through cross-attention."))
    if not text.strip():
        st.info(_("The text is empty. Type a prompt, or load an example, and the model will continue it."),
                icon=":material/edit_note:")
        shell.stop()
    view, tab = controls.view_tabs(VIEW, S.GENERATE_VIEWS)
    with tab:
        (write_view if view == "write" else compare_view)(lm, jobs, translated(vg.WORDS))

