"""The modules plotly reads from sys.modules without importing them while it validates and writes a figure (is
this value a pandas Series, a PIL image?). A module that another thread is importing at that moment sits in
sys.modules half-made, and the figure fails: AttributeError: partially initialized module 'PIL.Image' has no
attribute 'Image' (CI: a teacher's first QR code, st.image, imported PIL while another session drew its charts;
earlier pandas, imported by the warm-up). import_whole() imports them; router.py calls it before any page draws, so
a session that finds one of them being imported waits until it is whole."""
from __future__ import annotations

import importlib

LOOKED_UP = ("pandas", "PIL.Image")     # plotly/io/_json.py, _plotly_utils: get_module(..., should_load=False)


def import_whole() -> None:
    for name in LOOKED_UP:
        importlib.import_module(name)
