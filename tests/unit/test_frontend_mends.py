"""server.frontend_mends: Streamlit's compiled JavaScript mended as served, each mend applied only to the file it
was written for (every text found exactly once), with the file unchanged and a warning otherwise."""
from __future__ import annotations

import logging

from server.frontend_mends import FrontendMend, chunk_name, mended

MEND = FrontendMend("a test mend", "PlotlyChart", ((b"let a=1,", b"let a=1,b=2,"), (b"f(a)", b"f(a,b)")))
FILE = b"function g(){let a=1,c=3;return f(a)}"


def test_a_mend_replaces_each_text_once_in_its_chunk():
    assert mended("PlotlyChart.D9Z0_fxz.js", FILE, (MEND,)) == b"function g(){let a=1,b=2,c=3;return f(a,b)}"


def test_other_files_are_unchanged():
    assert mended("index.D9Z0_fxz.js", FILE, (MEND,)) == FILE
    assert mended("PlotlyChart.D9Z0_fxz.js.map", FILE, (MEND,)) == FILE
    assert mended("PlotlyChartExtra.Ab12.js", FILE, (MEND,)) == FILE


def test_a_mend_whose_text_is_missing_or_repeated_is_left_out_with_a_warning(caplog):
    for other in (b"function g(){let a=2,c=3;return f(a)}", FILE + b";function h(){return f(a)}"):
        with caplog.at_level(logging.WARNING, logger="server.frontend_mends"):
            assert mended("PlotlyChart.D9Z0_fxz.js", other, (MEND,)) == other
        assert "a test mend" in caplog.text
        caplog.clear()


def test_the_chunk_name_is_what_precedes_the_hash():
    assert chunk_name("PlotlyChart.D9Z0_fxz.js") == "PlotlyChart"
    assert chunk_name("/static/js/index.DormvYxC.js") == "index"
