"""Train: a tiny transformer trained live on the server's CPU. Pick a task and a design, watch the losses, the
gradient flow and every head's attention change while it trains (the induction head forming), see it complete an
unseen sequence, and compare two runs that differ in one choice. Runs are background jobs shared by every session."""
from __future__ import annotations

import numpy as np
import streamlit as st

from app_core import schemas as S
from app_core.scheduling import FOLLOWER_POLL_S
from app_pages import navigation
from app_pages.classroom import panel as class_panel
from app_pages.frame import controls, shell
from app_pages.frame.i18n import N_, _, language, ngettext, translated
from app_pages.frame.widgets import PRESENTER_FONT_SCALE, escape_markdown, plotly_config
from app_pages.train import runs as training
from model.tokenizers.labels import readable_token
from model.train import PRESETS, TrainRun, TrainSettings, verdict
from model.train import settings as TS
from model.train.tasks import uniform_loss
from viz import train as vt
from viz.theme import scale_fonts

P = {name: S.TRAIN.by_name(name) for name in ("task", "cmp", "layers", "d", "heads", "kv", "mlp", "norm", "place",
                                              "pos", "vocab", "seq", "steps", "batch", "lr", "warmup", "cosine",
                                              "clip", "wd", "init", "seed", "side", "at")}
AT_PICK = "train_at_pick"          # the time slider's own key: it copies into the "at" setting (None = the last)
POLL_S = 0.4                       # refresh while training: 2.5 updates a second (a following student: FOLLOWER_POLL_S)
STEP_OPTIONS = (100, 200, 400, 800, 1200, 2000, 3000, 5000, 10_000, 20_000)
BATCH_OPTIONS = (8, 16, 32, 64, 128, 256)
LR_OPTIONS = (1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 3e-3, 5e-3, 1e-2, 2e-2, 3e-2, 5e-2, 0.1)
CLIP_OPTIONS = (0.0, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
WD_OPTIONS = (0.0, 0.01, 0.1, 0.3, 1.0)
INIT_OPTIONS = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)
TASKS = {"induction": N_("Induction: a repeated segment"), "copy": N_("Copy"), "sort": N_("Sort"),
         "modadd": N_("Modular addition"), "text": N_("Your text (characters)")}
COMPARE = {S.NO_COMPARE: N_("One run"), "layers": N_("1 layer vs 2 layers"),
           "norm_place": N_("Pre-LN vs Post-LN, high LR, no warmup"), "positions": N_("With vs without positions"),
           "norm": N_("LayerNorm vs RMSNorm"), "warmup": N_("Warmup vs none, high LR")}
CHOICES = {"mlp": {"none": N_("none (attention only)"), "gelu": N_("GELU (GPT)"), "swiglu": N_("SwiGLU (LLaMA)")},
           "norm": {"layernorm": N_("LayerNorm"), "rmsnorm": N_("RMSNorm"), "none": N_("none")},
           "norm_place": {"pre": N_("Pre-LN: x + f(norm(x))"), "post": N_("Post-LN: norm(x + f(x))")},
           "positions": {"learned": N_("learned"), "sinusoidal": N_("sinusoidal"), "rope": N_("RoPE"),
                         "alibi": N_("ALiBi"), "none": N_("none")}}
RUN_NAMES = {"n_layers": {1: N_("1 layer"), 2: N_("2 layers")},
             "norm_place": {"pre": N_("Pre-LN"), "post": N_("Post-LN")},
             "positions": {"learned": N_("learned positions"), "none": N_("no positions")},
             "norm": {"layernorm": N_("LayerNorm"), "rmsnorm": N_("RMSNorm")},
             "warmup": {200: N_("warmup 200"), 0: N_("no warmup")}}
CLAIMS = {"layers": N_("The notes: an induction head needs two layers (a head in the first finds each token's "
                       "predecessor, a head in the second uses it), so one layer cannot solve the induction task."),
          "norm_place": N_("The notes: without warmup, at a high learning rate, Post-LN trains worse than Pre-LN "
                           "(Post-LN needs warmup)."),
          "positions": N_("The notes: without positions a head cannot tell which token came just before, so no "
                          "induction head forms."),
          "norm": N_("The notes: RMSNorm (no centring, no bias) trains as well as LayerNorm."),
          "warmup": N_("The notes: at a high learning rate the first full-size updates can throw training off "
                       "(attention collapses onto single tokens, the loss stalls); a warmup avoids it.")}


def draw(name: str, runs: dict[str, TrainRun], build, *detail) -> None:
    """A chart of these runs as they are now, from the figures shared by every session (presenter mode: larger
    text, a figure of its own)."""
    present = shell.presenter_mode()
    key = (name, tuple((r.settings, r.n_logged, r.finished) for r in runs.values()), language(), present, *detail)

    def built():
        fig = build()
        return scale_fonts(fig, PRESENTER_FONT_SCALE) if present else fig
    st.plotly_chart(training.shared_figure(key, built), key=f"train_{name}", config=plotly_config(f"train_{name}"))


# --------------------------------------------------------------------------------------------------- controls
def _select(where, param, label: str, labels: dict | None = None, options=None, help: str | None = None,
            width="stretch") -> None:
    names = {k: _(v) for k, v in labels.items()} if labels else None
    where.selectbox(label, options=list(options if options is not None else param.options), key=param.key,
                    format_func=(names.__getitem__ if names else str), help=help, width=width, **controls.PERSIST)


def _grid(where, param, label: str, options, fmt=lambda v: f"{v:g}", help: str | None = None) -> None:
    """A select slider over a grid of values, the current value included (a link may carry any value)."""
    ss = st.session_state
    where.select_slider(label, options=sorted({*options, ss[param.key]}), key=param.key, format_func=fmt,
                        help=help, **controls.PERSIST)


def main_controls(row) -> None:
    ss = st.session_state
    _select(row, P["task"], _("Task"), TASKS, width=220,
            help=_("What the model learns to predict. Induction: a random segment appears twice; after its first "
                   "token, the rest of the second copy can be read off the first."))
    if P["layers"].applies(ss):
        row.slider(_("Layers"), 1, TS.MAX_LAYERS, key=P["layers"].key, width=140, **controls.PERSIST)
    row.selectbox(_("Compare"), options=list(COMPARE), key=P["cmp"].key,
                  format_func={k: _(v) for k, v in COMPARE.items()}.__getitem__,   # translated in the script run
                  on_change=training.apply_preset, width=270, **controls.PERSIST,
                  help=_("Train two runs that differ in one choice and show them on the same charts (a preset sets "
                         "every other setting)."))


def detail_controls(where) -> None:
    """Architecture, data and optimiser: the sidebar (or, in presenter mode, a popover on the page)."""
    ss = st.session_state
    where.markdown(_("**Architecture**"))
    _select(where, P["d"], _("Width (d_model)"))
    width = int(ss[P["d"].key])
    _select(where, P["heads"], _("Heads"), options=[h for h in S.TRAIN_HEADS if width % h == 0])
    heads = int(ss[P["heads"].key])
    kv_options = [None, *(k for k in range(1, heads) if heads % k == 0)]
    if ss.get(P["kv"].key) not in kv_options:
        ss[P["kv"].key] = None
    kv_names = {k: _("{n} (MHA)").format(n=heads) if k is None else (_("1 (MQA)") if k == 1 else
                                                                      _("{n} (GQA)").format(n=k)) for k in kv_options}
    where.selectbox(_("Key/value heads"), options=kv_options, key=P["kv"].key, **controls.PERSIST,
                    format_func=kv_names.__getitem__,
                    help=_("Query head h reads key/value head h // (heads / KV heads)."))
    for name, label in (("mlp", _("MLP")), ("norm", _("Norm")), ("place", _("Norm placement")),
                        ("pos", _("Positions"))):
        if P[name].applies(ss):
            field = {"place": "norm_place", "pos": "positions"}.get(name, name)
            _select(where, P[name], label, CHOICES[field])
    _grid(where, P["init"], _("Initial weight scale (× 0.02)"), INIT_OPTIONS)
    where.markdown(_("**Data**"))
    if P["vocab"].applies(ss):
        where.slider(_("Symbols"), TS.MIN_VOCAB, TS.MAX_VOCAB, key=P["vocab"].key, **controls.PERSIST)
    if P["seq"].applies(ss):
        where.slider(_("Sequence length"), TS.MIN_SEQ_LEN, TS.MAX_SEQ_LEN, key=P["seq"].key, **controls.PERSIST)
    where.markdown(_("**Training**"))
    _grid(where, P["steps"], _("Steps"), STEP_OPTIONS, fmt=lambda v: f"{v:,}")
    _grid(where, P["batch"], _("Batch"), BATCH_OPTIONS, fmt=str)
    _grid(where, P["lr"], _("Learning rate (AdamW)"), LR_OPTIONS)
    where.number_input(_("Warmup steps"), min_value=0, max_value=TS.MAX_STEPS, step=10, key=P["warmup"].key,
                       **controls.PERSIST)
    where.toggle(_("Cosine decay to a tenth"), key=P["cosine"].key, **controls.PERSIST)
    _grid(where, P["clip"], _("Gradient clipping (0 = off)"), CLIP_OPTIONS)
    _grid(where, P["wd"], _("Weight decay"), WD_OPTIONS)
    where.number_input(_("Seed"), min_value=0, max_value=2**31 - 1, step=1, key=P["seed"].key,
                       help=_("The same settings and seed give the same run, bit for bit."), **controls.PERSIST)


# ------------------------------------------------------------------------------------------------------ runs
def run_names() -> dict[str, str]:
    """'' alone; with a comparison, each side's name from its value of the compared field."""
    ss = st.session_state
    preset = PRESETS.get(ss.get(P["cmp"].key))
    if preset is None:
        return {"": ""}
    names = RUN_NAMES[preset.field]
    return {side: _(names[getattr(getattr(preset, side), preset.field)]) for side in ("a", "b")}


def readable(run: TrainRun) -> list[str]:
    """The run's vocabulary as labels (characters of the text task made visible: ␣ for a space)."""
    if run.settings.task != "text":
        return list(run.labels)
    return [readable_token(c.encode("utf-8")) for c in run.labels]


def status(name: str, run: TrainRun | None, ahead: int = 0) -> None:
    """One progress bar: the run's step, its held-out loss and its time so far (before its first log point: how
    many runs train or wait before it)."""
    if run is None:
        st.progress(0.0, text=(ngettext("{name}: waiting for its turn, {n} run ahead of it…",
                                        "{name}: waiting for its turn, {n} runs ahead of it…", ahead) if ahead else
                               _("{name}: starting…")).format(name=name or _("Run"), n=ahead))
        return
    step, total = int(run.steps_logged[-1]), run.settings.steps
    text = _("{name}: step {step} of {total} · held-out loss {loss} nats · {seconds} s").format(
        name=name or _("Run"), step=f"{step:,}", total=f"{total:,}", loss=f"{run.eval_loss[-1]:.2f}",
        seconds=f"{run.seconds:.1f}")
    st.progress(1.0 if run.finished else step / max(1, total), text=text)


def curves(runs: dict[str, TrainRun], names: dict[str, str]) -> list[vt.Curves]:
    return [vt.Curves(names[k], r.steps_logged, r.train_loss, r.eval_loss, r.layer_grad_norms, r.phase_step)
            for k, r in runs.items()]


def waiting_chart(settings: list[TrainSettings], words) -> None:
    """Before the first log point: the loss chart's axes over the whole run and the uniform-guess line, where the
    curves will appear."""
    total, uniform = max(s.steps for s in settings), max(uniform_loss(s) for s in settings)
    present = shell.presenter_mode()

    def built():
        fig = vt.loss_figure([], total, uniform, height=300, words=words, title=_("Loss on the predictable tokens"))
        return scale_fonts(fig, PRESENTER_FONT_SCALE) if present else fig
    st.plotly_chart(training.shared_figure(("loss, waiting", total, uniform, language(), present), built),
                    key="train_loss", config=plotly_config("train_loss"))


def charts(runs: dict[str, TrainRun], names: dict[str, str], words) -> None:
    """Loss with the phase change, gradient flow, per-head entropy and scores: live while training."""
    total = max(r.settings.steps for r in runs.values())
    uniform = max(r.uniform_loss for r in runs.values())
    draw("loss", runs, lambda: vt.loss_figure(curves(runs, names), total, uniform, height=300, words=words,
                                              title=_("Loss on the predictable tokens")))
    left, right = st.columns(2, gap="medium")
    with left:
        draw("grads", runs, lambda: vt.grad_norm_figure(curves(runs, names), total, words=words,
                                                        title=_("Gradient norm per layer")))
    with right:
        top = float(np.log(max(len(r.example) for r in runs.values())))
        draw("entropy", runs, lambda: vt.head_lines_figure(
            [(names[k], r.steps_logged, r.entropy) for k, r in runs.items()], total, _("entropy (nats)"),
            y_range=(0.0, top), words=words, title=_("Attention entropy per head")))
    left, right = st.columns(2, gap="medium")
    for where, field, title in ((left, "prev_token", _("Previous-token score per head")),
                                (right, "induction", _("Induction score per head"))):
        with where:
            draw(field, runs, lambda field=field, title=title: vt.head_lines_figure(
                [(names[k], r.steps_logged, getattr(r, field)) for k, r in runs.items()], total, _("score"),
                y_range=(0.0, 1.0), words=words, title=title))
    st.caption(_("Measured on held-out data at every log point. Previous-token score: a head's mean attention from "
                 "each token to the one before it. Induction score: on repeated segments, its mean attention from a "
                 "token to the token that followed that token's earlier occurrence. Dashed lines: the second run."))
    navigation.link_to("circuits", icon=":material/hub:", query_params={"view": "roles", "role": "induction"},
                 label=_("The same score on every head of the real model: Circuits, head roles"))


def phase_note(name: str, run: TrainRun) -> str:
    """One sentence on the run's phase change and its strongest induction head."""
    best = np.unravel_index(int(np.argmax(run.induction[-1])), run.induction[-1].shape)
    values = dict(name=name or _("This run"), layer=int(best[0]), head=int(best[1]),
                  score=f"{run.induction[-1][best]:.2f}", after=f"{run.eval_loss[-1]:.2f}")
    if run.phase_step is None:
        return _("**{name}**: no phase change (no sudden fall of the held-out loss, which ended at {after} nats); "
                 "strongest induction head: layer {layer}, head {head} (score {score}).").format(**values)
    at = int(np.searchsorted(run.steps_logged, run.phase_step))
    return _("**{name}**: phase change at step {step}: the held-out loss fell from {before} to {after} nats; "
             "strongest induction head: layer {layer}, head {head} (score {score}).").format(
        step=f"{run.phase_step:,}", before=f"{run.eval_loss[max(0, at - 2)]:.2f}", **values)


def patterns(runs: dict[str, TrainRun], names: dict[str, str], words, finished: bool) -> None:
    """Every head's attention on one held-out example; after training, a slider over training time."""
    ss = st.session_state
    side = ss.get(P["side"].key) if len(runs) > 1 else next(iter(runs))
    side = side if side in runs else next(iter(runs))
    with st.container(horizontal=True, vertical_alignment="bottom", gap="medium"):
        if len(runs) > 1:
            st.segmented_control(_("Attention of"), options=list(runs), key=P["side"].key, required=True,
                                 format_func=names.__getitem__, **controls.PERSIST)
        run = runs[side]
        steps = [int(s) for s in run.steps_logged]
        if finished and len(steps) > 1:
            wanted = ss.get(P["at"].key)
            shown = steps[-1] if wanted is None else min(steps, key=lambda s: abs(s - int(wanted)))
            ss[AT_PICK] = shown
            st.select_slider(_("Training step"), options=steps, key=AT_PICK, on_change=controls.follow_pick,
                             args=(AT_PICK, P["at"].key, steps[-1]), format_func=lambda s: f"{s:,}",
                             help=_("The attention patterns after this many updates: slide back to before the "
                                    "phase change."))
        else:
            shown = steps[-1]
    index = steps.index(shown)
    labels = readable(run)
    tokens = [labels[i] for i in run.example]
    draw("patterns", {side: run}, lambda: vt.patterns_figure(
        run.pattern(index), tokens, words=words,
        title=_("Every head on a held-out example, step {step}").format(step=f"{shown:,}")), shown)
    marked = [f"**{escape_markdown(t)}**" if p else escape_markdown(t)
              for t, p in zip(tokens, run.example_predictable, strict=True)]
    st.caption(_("Rows: the query token; columns: the key it attends to (the future is blank). The example, its "
                 "predictable tokens in bold: {tokens}").format(tokens=" ".join(marked)))


def completion(name: str, run: TrainRun) -> None:
    c = run.completion
    labels = readable(run)
    glue = "" if run.settings.task == "text" else " "

    def marked(ids, reference=None) -> str:
        out = []
        for i, token in enumerate(ids):
            text = escape_markdown(labels[int(token)])
            out.append(text if reference is None else
                       (f":green[{text}]" if int(token) == int(reference[i]) else f":red[{text}]"))
        return glue.join(out)

    st.markdown(_("**{name}** completes an unseen sequence ({right} of {n} right):").format(
        name=name or _("The model"), right=int((c.generated == c.expected).sum()), n=len(c.expected)))
    st.markdown(_("Prompt: {prompt}  \nExpected: {expected}  \nModel: {model}").format(
        prompt=marked(c.prompt), expected=marked(c.expected), model=marked(c.generated, c.expected)))


def claim_check(runs: dict[str, TrainRun], names: dict[str, str]) -> None:
    """With a preset: the notes' claim, and whether these two runs show it (measured)."""
    ss = st.session_state
    preset = PRESETS[ss[P["cmp"].key]]
    v = verdict(preset, runs["a"], runs["b"])
    numbers = dict(a=names["a"], b=names["b"], a_loss=f"{v.a_final:.2f}", b_loss=f"{v.b_final:.2f}")
    st.markdown(_(CLAIMS[preset.name]))
    if v.holds:
        st.success(_("Shown here: {a} ended at {a_loss} nats, {b} at {b_loss} nats (held-out loss on the "
                     "predictable tokens).").format(**numbers), icon=":material/check_circle:")
    else:
        st.warning(_("Not shown at this scale: {a} ended at {a_loss} nats and {b} at {b_loss} nats, so these two "
                     "runs do not reproduce the claim.").format(**numbers), icon=":material/science:")


def show(jobs: dict, names: dict[str, str]) -> None:
    """The runs: live while any trains (refreshed every POLL_S, in place; a following student's every
    FOLLOWER_POLL_S), complete once all are done."""
    words = translated(vt.WORDS)
    failed = [job.error for job in jobs.values() if job.error]
    if failed:
        st.error(_("The run failed: {error}").format(error=failed[0]), icon=":material/error:")
        return
    if not all(job.done.is_set() for job in jobs.values()):
        @st.fragment(run_every=FOLLOWER_POLL_S if class_panel.following() else POLL_S)
        def live() -> None:
            runs = {k: training.latest(job.poll()) for k, job in jobs.items()}
            for k, run in runs.items():
                status(names[k], run, training.ahead(jobs[k]))
            if all(job.done.is_set() for job in jobs.values()):
                st.rerun()                            # done: the full view, with the slider and the completion
            shown = {k: r for k, r in runs.items() if r is not None}
            if shown:
                charts(shown, names, words)
                patterns(shown, names, words, finished=False)
            else:
                waiting_chart([job.key for job in jobs.values()], words)
        live()
        return
    runs = {k: job.result for k, job in jobs.items()}
    for k, run in runs.items():
        status(names[k], run)
    charts(runs, names, words)
    for k, run in runs.items():
        st.markdown(phase_note(names[k], run))
    if len(runs) == 2:
        claim_check(runs, names)

    @st.fragment
    def time_travel() -> None:                        # the slider redraws only the patterns
        patterns(runs, names, words, finished=True)
        shell.finish()                                # the step changed: the link follows it
    time_travel()
    for k, run in runs.items():
        completion(names[k], run)


def text_problem() -> str | None:
    """Why the text task cannot train on the sidebar text, or None."""
    ss = st.session_state
    n = len(shell.current_text())
    if ss.get(P["task"].key) == "text" and n < TS.MIN_TEXT_CHARS:
        return _("The text task learns the sidebar text character by character: it needs at least {need} characters "
                 "(it has {n}). Paste a longer text or load an example.").format(need=TS.MIN_TEXT_CHARS, n=n)
    return None


def fit_heads() -> None:
    """Heads that do not divide the width (from a link) become the most that do."""
    ss = st.session_state
    width, heads = int(ss[P["d"].key]), int(ss[P["heads"].key])
    if width % heads:
        ss[P["heads"].key] = max(h for h in S.TRAIN_HEADS if width % h == 0 and h <= heads)


def render() -> None:
    """The page: the controls, then the runs these settings name (started if no session has them yet)."""
    shell.header(_("Train"), _("A tiny transformer trained live on this server's CPU: watch the loss fall and the "
                               "heads change."))
    row = st.container(horizontal=True, vertical_alignment="bottom", gap="small", key="train_controls")
    main_controls(row)
    fit_heads()
    if shell.presenter_mode():
        with row.popover(_("Settings"), icon=":material/tune:"):
            detail_controls(st)
    else:
        detail_controls(st.sidebar)
    problem = text_problem()
    if problem:
        st.info(problem, icon=":material/edit_note:")
        shell.stop()
    try:
        wanted_runs = training.runs_of(st.session_state)
    except ValueError as err:
        st.error(_("These settings cannot be trained: {reason}").format(reason=str(err)), icon=":material/error:")
        shell.stop()
    jobs = {k: training.training_job(s) for k, s in wanted_runs.items()}
    if any(job.done.is_set() and job.result is None and not job.error for job in jobs.values()):
        st.rerun()                  # a run stopped while nobody watched it: asking again starts it anew
    show(jobs, run_names())

