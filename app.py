"""Attention Atlas: `streamlit run app.py` serves the pages (router.py) and, as the server starts, loads the model
and runs the default text in the background (app_pages/_warmup.py), so the first visitor does not wait for it;
Streamlit's frontend files are sent gzip-compressed from memory, the chart library imported with the page
(app_pages/_static_assets.py).
`streamlit run router.py` serves the same app with the first visitor's session loading the model instead."""
from contextlib import asynccontextmanager

import streamlit as st
from starlette.middleware import Middleware

from app_pages._static_assets import FrontendFiles
from app_pages._warmup import start_warm_up


@asynccontextmanager
async def warm_server(_app):
    start_warm_up()
    yield


app = st.App("router.py", lifespan=warm_server, middleware=[Middleware(FrontendFiles)])
