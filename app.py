"""Attention Atlas: `streamlit run app.py` serves the pages (router.py) and, as the server starts, loads the model
and runs the default text in the background (app_pages/frame/warmup.py), so the first visitor does not wait for it;
Streamlit's frontend files are sent gzip-compressed from memory, the chart library imported with the page
(server/static_assets.py); a live class's followers wait for the teacher's next view on its own route
(server/class_wait.py; a new view is computed here before they are told: app_pages/classroom/prepared.py), and a
teacher's browser gets its class key as an HttpOnly cookie from another (server/class_key.py); answers go out
without Nagle's 40 ms delay (server/tcp_nodelay.py). The interpreter hands the GIL on every 5 ms, every 1 ms while
generations decode (app_core/scheduling.py).
`streamlit run router.py` serves the same app with the first visitor's session loading the model instead."""
import sys
from contextlib import asynccontextmanager

import streamlit as st
from starlette.middleware import Middleware

from app_core.scheduling import SWITCH_INTERVAL_S
from app_pages.classroom.prepared import prepare_view
from app_pages.frame.warmup import start_warm_up
from server import class_key, class_wait, streamlit_fixes
from server.static_assets import FrontendFiles
from server.tcp_nodelay import no_delay_on_listening_sockets

sys.setswitchinterval(SWITCH_INTERVAL_S)     # every 1 ms while generations decode (app_core/scheduling.py)
streamlit_fixes.mend()      # before the first session: its events, figures and labels take the mended paths


@asynccontextmanager
async def warm_server(_app):
    no_delay_on_listening_sockets()
    start_warm_up()
    yield


app = st.App("router.py", lifespan=warm_server, routes=class_wait.routes(prepare_view) + class_key.routes(),
             middleware=[Middleware(FrontendFiles)])
