"""The Generate page's step scrubber, for a decoder's generation and a T5's target alike: which step is shown (the
step setting; None = the last), the Step slider and Play (one step further every PLAY_S, then it stops)."""
from __future__ import annotations

import streamlit as st

from app_core import schemas as S
from app_pages.frame import controls
from app_pages.frame.i18n import _

STEP = S.GENERATE.by_name("step")
STEP_PICK = "gen_step_pick"       # the step slider's own key: it copies into the step setting (None = the last)
PLAY = "gen_play"                 # playing is a moment, not a setting: not in the link
PLAY_S = 0.9                      # one step per PLAY_S while playing


def play_every() -> float | None:
    """The step fragment's run_every: PLAY_S while playing."""
    return PLAY_S if st.session_state.get(PLAY) else None


def current_step(last: int) -> int:
    """The step shown (0..last), one further when playing (playing stops at the last)."""
    ss = st.session_state
    step_index = last if ss.get(STEP.key) is None else min(int(ss[STEP.key]), last)
    if ss.get(PLAY):
        step_index = 0 if step_index >= last else step_index + 1
        ss[STEP.key] = None if step_index == last else step_index
        ss[PLAY] = step_index < last
    ss[STEP_PICK] = step_index
    return step_index


def step_controls(last: int, step_help: str, play_help: str) -> None:
    """The Step slider (with more than one step) and Play, in one row."""
    with st.container(horizontal=True, vertical_alignment="bottom", gap="small"):
        if last > 0:
            st.slider(_("Step"), 0, last, key=STEP_PICK, on_change=controls.follow_pick,
                      args=(STEP_PICK, STEP.key, last), help=step_help)
        st.toggle(_("Play"), key=PLAY, width="content", help=play_help)
