"""Lessons: the guided tours through the app's views (app_core/lessons), each opened at its first step; the
session's score; the lesson files that could not be read, with what is wrong in each."""
from __future__ import annotations

import streamlit as st

from app_core.lessons import load_catalog
from app_core.lessons.loading import ENV_DIR
from app_pages.frame import lesson_panel as panel
from app_pages.frame import shell
from app_pages.frame.i18n import _, language, ngettext
from app_pages.frame.widgets import escape_markdown


def render() -> None:
    """The page: every lesson as a card, the session's score, the files that could not be read."""
    shell.header(_("Lessons"), _("Guided tours through the real model, one per chapter of the course's notes. Each "
                                 "step opens a view with its settings; Previous / Next (PageUp / PageDown in presenter "
                                 "mode) move through them."))
    catalog = load_catalog()
    lang = language()
    on = panel.active()
    right, checked = panel.score()
    if checked:
        st.caption(_("Your score: {right} of {checked}").format(right=right, checked=checked))
    for lesson in catalog.lessons:
        with st.container(border=True, key=f"lesson_card_{lesson.id}"):
            row = st.container(horizontal=True, vertical_alignment="center", gap="small")
            steps = ngettext("{n} step", "{n} steps", len(lesson.steps)).format(n=len(lesson.steps))
            row.markdown(f"**{escape_markdown(lesson.title[lang])}** · [{steps}](?lesson={lesson.id})", width="stretch")
            if on is not None and on[0].id == lesson.id:
                row.button(_("Continue at step {n}").format(n=on[1]), key=f"w_lesson_continue_{lesson.id}",
                           icon=":material/play_arrow:", type="primary", on_click=panel.go, args=(lesson.id, on[1]))
            row.button(_("Start"), key=f"w_lesson_start_{lesson.id}", icon=":material/school:", on_click=panel.go,
                       args=(lesson.id, 1))
            st.markdown(lesson.summary[lang])
    if catalog.broken:
        st.markdown("#### " + _("Lesson files with errors"))
        for broken in catalog.broken:
            st.error(f"**{escape_markdown(broken.file)}**: {escape_markdown(panel.translate(broken.error))}",
                     icon=":material/error:")
    st.caption(_("Teachers add their own lessons as TOML files in the folder named by {env} (the format: "
                 "lessons/README.md in the app's repository; any view's Share link button gives a step's snippet to "
                 "paste).").format(env=f"`{ENV_DIR}`"))

