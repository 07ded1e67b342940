"""The Train page in Streamlit's AppTest: it trains in the background and shows the run (the numbers are the
engine's), the share link restores every setting, a comparison preset shows both runs and its verdict, and two
sessions asking for the same run get one run."""
from __future__ import annotations

import numpy as np

import model.train.trainer as trainer
from harness.apptest import array, example, figures, open_page, rerun, run_until, widget_values
from model.train import TrainSettings, train


def finished(at) -> bool:
    return any("completes an unseen sequence" in m.value for m in at.markdown)


def by_title(at, prefix: str) -> dict:
    return next(f for f in figures(at) if (f["layout"].get("title") or {}).get("text", "").startswith(prefix))


def test_the_page_trains_and_shows_the_engines_run():
    at = run_until(open_page("train", steps="200", seed="11"), finished)
    reference = train(TrainSettings(steps=200, seed=11))
    loss = figures(at)[0]
    assert loss["layout"]["title"]["text"].startswith("Loss")                   # the first chart: the loss
    held_out = next(t for t in loss["data"] if t["name"] == "held-out")
    np.testing.assert_allclose(array(held_out["y"]), reference.eval_loss, rtol=1e-6)
    np.testing.assert_array_equal(array(held_out["x"]), reference.steps_logged)
    induction = by_title(at, "Induction score")
    assert len(induction["data"]) == 4                                          # every head of 2 layers x 2 heads
    np.testing.assert_allclose(array(induction["data"][3]["y"]), reference.induction[:, 1, 1], rtol=1e-6)
    assert "Every head on a held-out example, step 200" in by_title(at, "Every head")["layout"]["title"]["text"]
    at.select_slider(key="train_at_pick").set_value(0)
    rerun(at)
    assert at.query_params["at"] == "0"
    patterns = by_title(at, "Every head")
    assert patterns["layout"]["title"]["text"].endswith("step 0")
    z = array(patterns["data"][0]["z"]).reshape(2 * 32, 2 * 32)
    np.testing.assert_allclose(np.nan_to_num(z[:32, :32]), reference.pattern(0)[0, 0], atol=1e-6)


LINK = {"task": "copy", "layers": "3", "d": "48", "heads": "3", "kv": "1", "mlp": "swiglu", "norm": "rmsnorm",
        "place": "post", "pos": "rope", "vocab": "20", "seq": "21", "steps": "40", "batch": "16", "lr": "0.002",
        "warmup": "10", "cosine": "0", "clip": "0.5", "wd": "0.1", "init": "2.0", "seed": "3", "at": "16"}


def test_the_link_restores_every_setting():
    at = run_until(open_page("train", **LINK), finished)
    assert dict(at.query_params) == LINK
    state = at.session_state
    assert (state["train_task"], state["train_layers"], state["train_d"], state["train_heads"], state["train_kv"]) \
        == ("copy", 3, 48, 3, 1)
    assert (state["train_mlp"], state["train_norm"], state["train_place"], state["train_pos"]) \
        == ("swiglu", "rmsnorm", "post", "rope")
    assert (state["train_vocab"], state["train_seq"], state["train_steps"], state["train_batch"]) == (20, 21, 40, 16)
    assert (state["train_lr"], state["train_warmup"], state["train_cosine"], state["train_clip"]) \
        == (0.002, 10, False, 0.5)
    assert (state["train_wd"], state["train_init"], state["train_seed"], state["train_at"]) == (0.1, 2.0, 3, 16)
    assert by_title(at, "Every head")["layout"]["title"]["text"].endswith("step 16")
    fresh = run_until(open_page("train", **dict(at.query_params)), finished)
    assert widget_values(fresh) == widget_values(at)
    assert figures(fresh)[0]["data"][0]["y"] == figures(at)[0]["data"][0]["y"]


def test_a_preset_compares_two_runs_and_says_whether_the_claim_shows():
    at = run_until(open_page("train", cmp="norm", steps="60", side="b"), finished)
    names = [t["name"] for t in figures(at)[0]["data"]]
    assert "LayerNorm: held-out" in names and "RMSNorm: held-out" in names
    rms = train(TrainSettings(norm="rmsnorm", steps=60))
    z = array(by_title(at, "Every head")["data"][0]["z"]).reshape(64, 64)      # side b: the RMSNorm run's heads
    np.testing.assert_allclose(np.nan_to_num(z[32:, 32:]), rms.pattern(rms.n_logged - 1)[1, 1], atol=1e-6)
    verdicts = [m.value for m in at.success] + [m.value for m in at.warning]
    assert any("LayerNorm ended at" in v for v in verdicts)
    assert dict(at.query_params) == {"cmp": "norm", "steps": "60", "side": "b"}
    assert "train_norm" not in widget_values(at)                               # the compared choice has no control


def test_the_text_task_trains_on_the_sidebar_text_and_says_when_it_is_too_short():
    at = open_page("train", task="text", text="too short")
    assert any("at least 400 characters" in i.value for i in at.info)
    at = run_until(open_page("train", task="text", steps="30", text=example("long story")), finished)
    assert dict(at.query_params)["task"] == "text"


def test_two_sessions_asking_for_the_same_run_get_one_run(monkeypatch):
    calls = []

    def counted(settings, **kwargs):
        calls.append(settings)
        return train(settings, **kwargs)

    monkeypatch.setattr(trainer, "train", counted)
    link = {"steps": "300", "seed": "424242"}                       # a run no other test asked for
    first = open_page("train", **link)
    second = open_page("train", **link)                            # while the first session's run trains
    run_until(first, finished)
    run_until(second, finished)
    third = run_until(open_page("train", **link), finished)       # after it finished: from the cache
    assert len(calls) == 1
    assert figures(first)[0]["data"][0]["y"] == figures(second)[0]["data"][0]["y"] == figures(third)[0]["data"][0]["y"]



def test_presenter_mode_puts_the_settings_on_the_page():
    at = run_until(open_page("train", present="1", steps="30"), finished)
    assert not at.sidebar.get("selectbox")                                   # nothing left in the hidden sidebar
    assert "train_lr" in widget_values(at) and "train_task" in widget_values(at)


def test_a_run_waiting_behind_another_shows_its_axes_and_its_place(monkeypatch):
    """While another run holds the trainer, the page already shows the loss chart over the whole run with the
    uniform guess (ln of the vocabulary) and how many runs are ahead."""
    import threading

    from app_pages.train import runs as training

    hold, started = threading.Event(), threading.Event()

    def blocking(job):
        started.set()
        hold.wait(30)
        return None

    first = training._runner().job("a run of another session", 1, blocking)
    try:
        assert started.wait(10)
        at = open_page("train", steps="300", vocab="24", seed="5")
        waiting = [p.text for p in at.get("progress")]
        assert any("1 run ahead of it" in t for t in waiting), waiting
        loss = figures(at)[0]
        assert loss["layout"]["title"]["text"].startswith("Loss") and not loss["data"]
        assert loss["layout"]["xaxis"]["range"][1] >= 300
        uniform = next(s for s in loss["layout"]["shapes"] if s.get("yref") == "y")
        assert abs(uniform["y0"] - np.log(24)) < 1e-9
    finally:
        hold.set()
        first.done.wait(10)
