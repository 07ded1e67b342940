"""The data behind a view, for download: a head's attention matrix as CSV (labels as the axes show them)."""
from __future__ import annotations

import io

import numpy as np

from viz.attention import causal_nan
from viz.labels import position_labels


def matrix_csv(pattern: np.ndarray, tokens: list[str], causal: bool = True) -> str:
    """One head's [T, T] matrix as CSV: header and first column are position-prefixed token labels (the same
    labels as the axes); masked (j > i, where causal) and hidden cells are left empty."""
    p = causal_nan(np.asarray(pattern), causal)
    labels = position_labels(tokens)
    out = io.StringIO()
    quote = lambda s: '"' + s.replace('"', '""') + '"'  # noqa: E731
    out.write(",".join([quote("query \\ key")] + [quote(s) for s in labels]) + "\n")
    for i, row in enumerate(p):
        cells = ["" if not np.isfinite(v) else f"{v:.6g}" for v in row]
        out.write(quote(labels[i]) + "," + ",".join(cells) + "\n")
    return out.getvalue()
