"""What the live class keeps in a session (the state keys the class modules share), its timings, and the messages
more than one of them says."""
from __future__ import annotations

import streamlit as st

from app_core.classroom import StoreUnavailable, codes
from app_pages.frame.i18n import _

TEACHING = "_class_teaching"      # (code, secret): this session teaches that class
PUBLISHED = "_class_published"    # (code, View): what the teacher published last
STARTED = "_class_started"        # how many classes this session started
JOINED = "_class_joined"          # code: this session joined that class
PENDING_JOIN = "_class_pending"   # code: a join link read while the store could not be reached (tried again)
FOLLOWING = "_class_following"    # whether the joined student follows (else explores on their own)
SEEN = "_class_seen"              # the version of the view the follower opened
VIEW = "_class_view"              # that view
ME = "_class_me"                  # the follower's id (issued by the server, signed for the class: followers.py)
BEAT = "_class_beat"              # when the follower last sent a heartbeat
HERE = "_class_here"              # when the teacher last said they are there
SENT = "_class_sent"              # (question key, answer as given, right?): the student's answer sent
POINT_KEYS = "_class_point_keys"  # {question key: PointKey}: a point question's tokens and right positions as the
                                  # teacher's strip saw them (the class's text): the results' labels
ENDED_RESULTS = "_class_ended"    # (code, {lesson id: CSV}): the results of the class this session ended
REMEMBERED = "_class_remembered"  # the (code, secret) this browser's key cookie holds
KEY_TICKET = "_class_ticket"      # ((code, secret), ticket): the ticket the key courier swaps for the cookie
FORGET = "_class_forget"          # code: the browser's key cookie is to be cleared if it holds that class
TROUBLE = "_class_trouble"        # a button's call failed: what to say in the next run
POLL_S = 0.5                      # a follower's poll of the version without the wait route
RETRY_S = 3.0                     # a join link read during a store outage is tried again this often
STRIP_S = 1.0                     # the teacher's strip (followers, answers)
BEAT_S = 5.0                      # a follower's heartbeat (the store counts those of the last 15 s)
HERE_S = 60.0                     # the teacher's keep-alive (a class ends 12 h after the last)
MAX_STARTED = 10                  # classes one session may start (the server's own cap: ATLAS_MAX_CLASSES)


def closed_message(code: str, ended: bool) -> str:
    return (_("The class {code} has ended: this is the normal app, yours to explore.") if ended else
            _("No class is open with the code {code}: check the code with your teacher. This is the normal app."))\
        .format(code=codes.shown(code))


def unreachable_message(slow: bool = False) -> str:
    return (_("The class server is not answering just now: the class goes on when it answers again.") if slow else
            _("The class server cannot be reached just now: the class goes on when it answers again."))


def trouble(err: StoreUnavailable, message: str | None = None) -> None:
    """Say in the next run that the store failed (message, or that it cannot be reached / is slow)."""
    st.session_state[TROUBLE] = message or unreachable_message(err.slow)
