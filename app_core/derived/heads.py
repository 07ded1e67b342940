"""What the head views derive from a text's trace: head statistics, the overview's thumbnails, the next-token
distribution with heads switched off, the logit lens's window, one head's matrix as CSV."""
from __future__ import annotations

import numpy as np

from app_core.derived.seq2seq import is_decoder
from model.analysis.head_stats import apply_sink, head_stats, sink_hidden_view
from model.maths.sampling import softmax
from viz.attention import thumbnail_tiles
from viz.exports import matrix_csv


def head_statistics(ws, text: str, hide_sink: bool) -> dict[str, np.ndarray]:
    """model.analysis.head_stats of the trace: {statistic: [n_layers, n_heads]}."""
    trace = ws.trace(text)
    return head_stats(trace.attention, trace.token_ids, hide_sink=hide_sink)


def thumbnails(ws, text: str, hide_sink: bool) -> np.ndarray:
    """viz.attention.thumbnail_tiles of the trace (sink hidden or not): [n_layers, n_heads, n, n]."""
    trace = ws.trace(text)
    return thumbnail_tiles(trace.attention, per_layer=(lambda a: apply_sink(a, True)) if hide_sink else None,
                           causal=is_decoder(ws))


def ablated_probs(ws, text: str, heads: tuple[tuple[int, int], ...]) -> np.ndarray:
    """Next-token probabilities [vocab_size] (float32) after the last token with these (layer, head) pairs switched
    off (sorted: one value however they were picked); with none, the model's own."""
    trace = ws.trace(text)
    logits = ws.model.ablate_heads(trace, tuple(sorted(heads))) if heads else trace.next_token_logits
    return softmax(logits).astype(np.float32)


def lens_window(ws, text: str, start: int, width: int, k: int = 5):
    """The logit lens's top-k at every layer for positions start .. start + width - 1 (cut at the text's end): the
    full grid over 512 positions costs seconds, a window of them a fraction of that."""
    trace = ws.trace(text)
    return ws.model.logit_lens_top(trace, k, list(range(start, min(start + width, trace.n_tokens))))


def head_matrix_csv(ws, text: str, layer: int, head: int, hide_sink: bool) -> str:
    """One head's attention matrix as shown (sink hidden or not) as CSV (a download's deferred data: not kept)."""
    trace = ws.trace(text)
    pattern = trace.attention[layer, head]
    return matrix_csv(sink_hidden_view(pattern) if hide_sink else np.asarray(pattern, dtype=np.float32), trace.tokens,
                      causal=is_decoder(ws))
