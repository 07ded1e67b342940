"""Streamlit's frontend (1.67), mended as it is served: a few bytes of its compiled JavaScript replaced
(server/static_assets.py applies `mended` to each file it loads). A mend whose every text is found exactly once
is applied; otherwise (another Streamlit) the file is served as Streamlit wrote it, with a warning, and
tests/unit/test_streamlit_contract.py fails by the mend's name.

- **Every chart drawn once, not twice.** Streamlit's PlotlyChart learns its frame's width from a ResizeObserver,
  which reports only after the chart's first render: until then the width is -1, and react-plotly drew the figure
  at plotly's default size (an autosize), then again at the frame's width, every figure of every view (2
  `plotly_react` per chart in Chromium). Here the plot is mounted once the frame's width is known (or the chart is
  full screen), and drawn once. Until then an empty box of the chart's height holds its place, so the page does not
  jump (a live view's charts are mounted anew at each update). Once drawn, a chart stays mounted when the width is
  unknown again (a tab hidden), as before; one in a collapsed expander is drawn when the expander opens. Over 25
  views (bench/bench_chart_draws.py, 2-core Xeon): 2.36 -> 1.00 draws per chart, Chromium 0.88 -> 0.69 CPU-s per
  view (0.78x), wall 0.90x.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class FrontendMend:
    """Replacements (old, new) in one of Streamlit's hashed JavaScript chunks, named by what precedes its hash."""

    name: str
    chunk: str
    replacements: tuple[tuple[bytes, bytes], ...]


CHART_DRAWN_ONCE = FrontendMend(
    "every chart drawn once",
    "PlotlyChart",
    ((b"let c=C(),{expanded:l,width:u,height:d,expand:f,collapse:p}=E(k),",
      b"let c=C(),{expanded:l,width:u,height:d,expand:f,collapse:p}=E(k),atlasWidthKnown=(0,P.useRef)(!1),"),
     (b"children:i(q,{data:N.data,",
      b"children:(u>0&&(atlasWidthKnown.current=!0),atlasWidthKnown.current||l)?i(q,{data:N.data,"),
     (b"t.setElementState(e.id,`figure`,n),F(n)}})})}",
      b"t.setElementState(e.id,`figure`,n),F(n)}}):i(`div`,{style:{height:U}})})}")))
MENDS = (CHART_DRAWN_ONCE,)


def chunk_name(file_name: str) -> str:
    """'PlotlyChart' for 'PlotlyChart.D9Z0_fxz.js': the name before the content hash."""
    return file_name.rsplit("/", 1)[-1].split(".", 1)[0]


def applies(mend: FrontendMend, data: bytes) -> bool:
    """Whether each of the mend's texts occurs exactly once in data."""
    return all(data.count(old) == 1 for old, _ in mend.replacements)


def mended(file_name: str, data: bytes, mends: tuple[FrontendMend, ...] = MENDS) -> bytes:
    """The file's bytes with every mend for it that applies; a mend that does not is left out, with a warning."""
    if not file_name.endswith(".js"):
        return data
    for mend in mends:
        if mend.chunk != chunk_name(file_name):
            continue
        if not applies(mend, data):
            _LOG.warning("frontend mend %r not applied: %s is not the file it was written for", mend.name, file_name)
            continue
        for old, new in mend.replacements:
            data = data.replace(old, new, 1)
    return data
