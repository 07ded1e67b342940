"""The encoder families as the pages read them. A page reads "the trace of a text": a decoder's or a BERT's own run;
for a T5, its encoder over the text (SourceTrace: the source's self-attention, no mask), so every view of one text's
self-attention shows a T5's encoder. The cross-attention view and the T5's generations read the whole run of a source
and a target (seq2seq_run) or the generation (t5_generation)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app_core.families import DECODER, SEQ2SEQ, family_of
from model.encoders.common import FLOAT32_ATTENTION_BYTES
from model.encoders.traces import EncoderTrace, Seq2SeqTrace

STACKS = ("cross", "decoder", "encoder")     # the cross-attention view's choice: which attention to show
MAX_WRITTEN = 48                             # tokens a T5 writes for the cross-attention view (no target typed)


@dataclass(frozen=True, eq=False)
class SourceTrace(EncoderTrace):
    """A T5's encoder over a text, read as a trace: attention [L_enc, H, S, S] (no mask), hidden_states the
    encoder's; seq2seq the run it comes from (the decoder fed its start token only)."""

    seq2seq: Seq2SeqTrace | None = field(default=None, repr=False)


def text_trace(model, text: str, max_tokens: int):
    """The trace pages read of text: model.run for a decoder or a BERT, a T5's encoder over the text (SourceTrace)."""
    run = model.run(text, max_tokens=max_tokens)
    if family_of(model) != SEQ2SEQ:
        return run
    return SourceTrace(text=text, token_ids=run.token_ids, tokens=run.tokens, attention=run.encoder_attention,
                       last_hidden_state=run.encoder_output, truncated=run.truncated,
                       n_tokens_total=run.n_tokens_total, hidden_states=run.encoder_hidden_states, seq2seq=run)


def layer_detail(model, trace, layer: int):
    """One layer's q, k, v, scores, mask and pattern of a text_trace (a T5's: its encoder's layer)."""
    if isinstance(trace, SourceTrace):
        return model.layer_detail(trace.seq2seq, layer, stack="encoder")
    return model.layer_detail(trace, layer)


def trace_bytes(config, n_tokens: int) -> int:
    """What an encoder's or a T5's text_trace of n_tokens holds, about: its attention (float16 above 64 MB of
    float32) and hidden states (a T5's decoder, fed one token, is left out)."""
    attention = config.n_layers * config.n_heads * n_tokens * n_tokens
    hidden = (config.n_layers + 1) * n_tokens * config.d_model * 4
    return attention * (4 if 4 * attention <= FLOAT32_ATTENTION_BYTES else 2) + hidden


def is_decoder(ws) -> bool:
    """Whether the workspace's model is a decoder (its self-attention causal)."""
    return family_of(ws.lm) == DECODER


def seq2seq_run(ws, source: str, target: str) -> Seq2SeqTrace:
    """A T5's run of source (its first max_tokens tokens) and target: every attention, shared by every session."""
    return ws.model.run(source, target=target, max_tokens=ws.max_tokens)


def written_run(ws, source: str) -> Seq2SeqTrace:
    """A T5's run of source and of the target it writes for it, greedily (at most MAX_WRITTEN tokens; its </s> not
    fed back): what the cross-attention view shows when no target is typed."""
    g = ws.model.generate(source, max_new_tokens=MAX_WRITTEN, temperature=0.0, max_tokens=ws.max_tokens)
    ids = [i for i in g.new_token_ids if i != ws.lm.eos_token_id]
    return ws.model.run(source, target=ids, max_tokens=ws.max_tokens)


def written_tokens(lm, run: Seq2SeqTrace) -> list[str]:
    """What each decoder position writes: the next target token, and after the last the model's top prediction
    (the labels of the cross-attention's rows: "to write this token, it looked there")."""
    return lm.token_strings([*run.target_ids[1:], int(np.argmax(run.next_token_logits))])


@dataclass(frozen=True, eq=False)
class AttentionMatrix:
    """One head's matrix of one stack: rows (queries) over columns (keys), with their tokens."""

    weights: np.ndarray          # [rows, columns] float32
    row_tokens: list[str]
    column_tokens: list[str]
    causal: bool                 # the decoder's self-attention: keys after the query are masked
    n_layers: int                # the stack's layers (the layer shown is within them)
    layer: int


def stack_matrix(run: Seq2SeqTrace, stack: str, layer: int, head: int, written: list[str]) -> AttentionMatrix:
    """The matrix a stack shows (cross: each written token (written_tokens) x source; decoder: target x target,
    causal; encoder: source x source), at layer (cut to the stack's last layer) and head."""
    attention = {"cross": run.cross_attention, "decoder": run.attention, "encoder": run.encoder_attention}[stack]
    layer = min(layer, attention.shape[0] - 1)
    rows = {"cross": written, "decoder": run.target_tokens, "encoder": run.tokens}[stack]
    columns = run.target_tokens if stack == "decoder" else run.tokens
    return AttentionMatrix(np.asarray(attention[layer, head], dtype=np.float32), rows, columns, stack == "decoder",
                           attention.shape[0], layer)


def alignment(weights: np.ndarray) -> np.ndarray:
    """Each row's most attended column: [rows] int (the alignment a cross-attention head draws)."""
    return np.argmax(np.asarray(weights), axis=-1)
