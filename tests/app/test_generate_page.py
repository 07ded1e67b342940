"""The Generate page in Streamlit's AppTest, on the real model: the background generation, the step scrubber, the
candidates and attention of a step, the two-temperature comparison, and links that restore all of it. The page's
generations start from the text's trace (no prompt pass), so they are compared with lm.generate(..., trace=...)."""
from __future__ import annotations

import numpy as np
import pytest

from app_pages.frame import controls, session
from harness.apptest import array, figures, open_page, rerun, run_until, widget_values

PROMPT = "The capital of France is"


def generated(at) -> bool:
    return any((f["layout"].get("title") or {}).get("text", "").startswith("Top ") for f in figures(at))


def by_title(at, prefix: str) -> dict:
    return next(f for f in figures(at) if (f["layout"].get("title") or {}).get("text", "").startswith(prefix))


def test_greedy_generation_matches_the_model_and_steps_through(lm):
    at = run_until(open_page("generate", text=PROMPT, n="6", greedy="1"), generated)
    g = lm.generate(PROMPT, max_new_tokens=6, temperature=0, trace=lm.run(PROMPT))
    story = " ".join(m.value for m in at.markdown)
    assert "Paris" in g.new_text and "Paris" in story
    assert at.slider(key="gen_step_pick").value == len(g.steps) - 1           # the last step by default
    at.slider(key="gen_step_pick").set_value(0)
    rerun(at)
    assert at.query_params["step"] == "0"
    bars = by_title(at, "Top ")
    np.testing.assert_allclose(array(bars["data"][0]["x"]), g.steps[0].candidates.probs, rtol=1e-6)
    assert bars["layout"]["yaxis"]["ticktext"][0].endswith(g.steps[0].token)
    attention = by_title(at, "Where it looked")
    row = np.asarray(g.steps[0].attention[0, 0], dtype=float)                  # layer 0, head 0
    np.testing.assert_allclose(array(attention["data"][0]["y"]), row, atol=1e-3)
    assert len(row) == len(lm.encode(PROMPT))                                  # step 0 looks at the prompt only


def test_sampled_generation_follows_the_seed_and_the_link_restores_it(lm):
    at = run_until(open_page("generate", text=PROMPT, n="5", temp="1.5", seed="7", top_k="20"), generated)
    g = lm.generate(PROMPT, max_new_tokens=5, temperature=1.5, top_k=20, seed=7, trace=lm.run(PROMPT))
    assert g.new_text.strip()[:3] in " ".join(m.value for m in at.markdown)
    at.slider(key="head").set_value(4)
    at.slider(key="gen_step_pick").set_value(2)
    rerun(at)
    link = dict(at.query_params)
    assert link == {"text": PROMPT, "n": "5", "temp": "1.5", "top_k": "20", "seed": "7", "step": "2", "head": "4"}
    fresh = run_until(open_page("generate", **link), generated)
    assert widget_values(fresh) == widget_values(at)
    assert by_title(fresh, "Where it looked")["data"][0]["y"] == by_title(at, "Where it looked")["data"][0]["y"]


def test_two_temperatures_side_by_side(lm):
    at = open_page("generate", text=PROMPT, n="6", view="compare", low="0.3", high="2.0", seed="3")
    at = run_until(at, lambda a: len(figures(a)) == 2)
    for temperature, fig in zip((0.3, 2.0), figures(at), strict=True):      # T = 2: a mean p of ~0.03%
        g = lm.generate(PROMPT, max_new_tokens=6, temperature=temperature, seed=3, trace=lm.run(PROMPT))
        np.testing.assert_allclose(array(fig["data"][0]["y"]), [s.prob for s in g.steps], rtol=1e-6)
        title = fig["layout"]["title"]["text"]
        assert title.startswith("mean p = ") and title.endswith("%")
        shown = float(title.removeprefix("mean p = ").removesuffix("%")) / 100         # two significant digits
        assert shown == pytest.approx(np.mean([s.prob for s in g.steps]), rel=0.06)
    assert "greedy" not in at.query_params and at.query_params["view"] == "compare"


def test_empty_prompt_says_what_to_do(lm):
    at = open_page("generate", text=" ")
    assert any("text is empty" in i.value for i in at.info)


def test_one_run_waits_for_the_generation_and_draws_it(lm):
    """A fresh generation (a seed no other test uses) is drawn by the very run that started it, for both views: the
    run waits for the job instead of leaving a progress bar for a later refresh to replace."""
    at = open_page("generate", text=PROMPT, n="3", temp="1.0", seed="90817")
    assert generated(at) and not at.get("progress")
    g = lm.generate(PROMPT, max_new_tokens=3, temperature=1.0, seed=90817, trace=lm.run(PROMPT))
    assert g.new_text.strip()[:2] in " ".join(m.value for m in at.markdown)
    at = open_page("generate", text=PROMPT, n="3", view="compare", low="0.5", high="2.0", seed="90818")
    assert len(figures(at)) == 2 and not at.get("progress")


def test_the_generation_is_asked_for_before_the_frame_is_drawn(lm, monkeypatch):
    """A class pressing Generate at once: each run asks for its generation, from the link's settings, before it
    draws the sidebar's shared controls (~10 ms of Python each, under one GIL), and lets the batch make the first
    step first; the page's own ask then gets the same job."""
    events, jobs = [], []
    ask, picker = session.generation_job, controls.model_picker

    def asked(*settings):
        jobs.append(ask(*settings))
        events.append(("job", settings))
        return jobs[-1]

    def drawn(*args):
        events.append(("controls", bool(jobs) and all(job.partial or job.done.is_set() for job in jobs)))
        return picker(*args)

    open_page("attention", text=PROMPT)                # the class has its texts open: their traces are made
    monkeypatch.setattr(session, "generation_job", asked)
    monkeypatch.setattr(controls, "model_picker", drawn)
    at = open_page("generate", text=PROMPT, n="2", temp="1.0", seed="53117")
    assert generated(at)
    settings = (PROMPT, 2, 1.0, 0, 1.0, 53117)
    assert events[-3:] == [("job", settings), ("controls", True), ("job", settings)]
    assert jobs[-1] is jobs[-2] or jobs[-1].done.is_set()
