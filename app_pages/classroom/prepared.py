"""A live class's next view prepared in this process as soon as it hears of it (app_core/classroom/waiting.py's
watcher, before it tells the followers waiting here): the trace of the view's text on its model, which every page
starts from. Followers on a replica other than the teacher's so find it computed, as those on the teacher's replica
find what the teacher's run computed; sixty reruns then read one cached trace instead of waiting for it."""
from __future__ import annotations

from app_core import schemas as S
from app_core.classroom import class_store
from app_core.classroom.views import class_text
from app_pages.frame import session


def prepare_view(code: str) -> bool:
    """The trace of the class's current view, computed here (a model this process has not loaded is left to the
    followers' runs). Whether it was prepared. ClassClosed, StoreUnavailable."""
    view = class_store().state(code).view
    lm = session.pooled_model(view.params.get(S.MODEL.name))
    if lm is None:
        return False
    session.workspace(lm).trace(class_text(view))
    return True
