"""What every view of one run of the Attention page reads. A module of its own: a page file's body runs at every
run (st.Page executes it), and making a dataclass there cost ~1 ms each time."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageRun:
    """What every view of one run of the page reads: the trace, the selection, the sink switch, the statistics."""
    ws: object              # app_core.workspace.Workspace: the model and what is computed with it
    trace: object
    layer: int
    head: int
    query: int
    hide_sink: bool
    stats: dict
    words: object
