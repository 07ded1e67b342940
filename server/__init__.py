"""The server around Streamlit (app.py's st.App): routes of our own (a class's wait and key routes), Streamlit's
frontend files from memory, TCP_NODELAY and a mended slow path of the pinned Streamlit. Nothing here draws a page
or warms one up (app_pages/frame/warmup.py); it imports app_core, never app_pages."""
