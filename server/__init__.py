"""The server around Streamlit (app.py's st.App): routes of our own (a class's wait and key routes), Streamlit's
frontend files from memory, TCP_NODELAY, the warm-up at start and a mended slow path of the pinned Streamlit.
Nothing here draws a page; it imports app_core and model, never app_pages."""
