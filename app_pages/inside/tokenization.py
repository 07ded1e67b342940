"""The Inside page's tokenization view: text -> tokens -> ids (the first step of the course's Lesson 1).

The pre-tokenizer's pieces are pills; the picked piece is drawn with its neighbours (up to
app_core.tokenization.WINDOW_CHARS characters). Byte-level BPE (Qwen, Llama 3, GPT-2, SmolLM2): characters, their
UTF-8 bytes, the merges in rounds, the final ids (viz.tokenization.byte_level_figure). SentencePiece: the picked
piece's merges one by one (viz.tokenization.bpe_merge_figure).
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

import viz.tokenization
from app_core import schemas as S
from app_core.tokenization import piece_rounds, piece_window
from app_pages.frame import controls, session
from app_pages.frame.i18n import _, ngettext, translated
from app_pages.frame.widgets import (
    PRESENT_KEY,
    PRESENTER_FONT_SCALE,
    SharedBuilders,
    escape_markdown,
    show_figure,
    token_legend,
)
from app_pages.inside.common import follow_text
from model.tokenizers.bpe_walk import BpeWalk, bpe_walk, piece_token_count
from model.tokenizers.labels import readable_token
from model.tokenizers.sentencepiece import SentencePieceTokenizer
from viz.labels import plotly_escape, shorten

vt = SharedBuilders(viz.tokenization)

PIECE = S.INSIDE.by_name("piece")
PIECE_PICK = "inside_piece_pick"    # the piece picker's own key: it copies into the piece setting (None = automatic)
PILLS_MAX = 160                     # up to this many pieces the picker is clickable pills, beyond that a slider
PILLS_BOX_PX = 118                  # the pills scroll inside a box this high when they need more than ~3 rows
PILLS_INLINE = 24                   # up to this many pieces the pills need no box
FIGURE_WIDTH = 680                  # px: the main area's width at 1024x768 beside the sidebar (686)
PRESENTER_WIDTH = 900               # px: the same in presenter mode, without the sidebar
ss = st.session_state


def auto_piece(pieces: list[str], counts: list[int | None]) -> int:
    """The first piece BPE leaves as 2+ tokens (the interesting case), else the longest one short enough to walk
    (earliest of equals); counts[i] is None for a piece too long to walk."""
    split = [i for i, c in enumerate(counts) if c is not None and c >= 2]
    if split:
        return split[0]
    walkable = [i for i, c in enumerate(counts) if c is not None] or list(range(len(pieces)))
    return max(walkable, key=lambda i: (len(pieces[i].encode("utf-8", errors="surrogatepass")), -i))


def piece_picker(pieces: list[str], labels: list[str], auto: int) -> int:
    """The pills (a slider for many pieces) that pick a piece; returns the picked one."""
    picked = dict(on_change=controls.follow_pick, args=(PIECE_PICK, PIECE.key, auto))
    if ss.get(PIECE.key) is not None and ss[PIECE.key] >= len(pieces):
        ss[PIECE.key] = None                                    # a link's piece beyond this text's pieces: automatic
    chosen = auto if ss.get(PIECE.key) is None else int(ss[PIECE.key])
    ss[PIECE_PICK] = chosen
    label = _("The pre-tokenizer splits the text into {n} pieces (BPE never merges across them). Click one to "
              "tokenize it:").format(n=f"{len(pieces):,}")
    if len(pieces) <= PILLS_MAX:
        box = dict(height=PILLS_BOX_PX) if len(pieces) > PILLS_INLINE else {}
        with st.container(border=False, **box):
            st.pills(label, options=list(range(len(pieces))), key=PIECE_PICK, required=True, **picked,
                     format_func=lambda i: escape_markdown(labels[i]))
    else:
        st.select_slider(label, options=list(range(len(pieces))), key=PIECE_PICK, **picked,
                         format_func=lambda i: f"#{i} {shorten(labels[i], 16)}")
    return chosen


def tokens_view(lm, text: str) -> None:
    tok = lm.tokenizer
    pieces = tok.pieces(text)
    if not pieces:
        st.info(_("The pre-tokenizer finds nothing to split in this text."), icon=":material/edit_note:")
        return
    follow_text(PIECE, text)
    counts = [piece_token_count(tok, p) for p in pieces]
    labels = [readable_token(p.encode("utf-8", errors="surrogatepass")) for p in pieces]
    chosen = piece_picker(pieces, labels, auto_piece(pieces, counts))
    try:
        walk = bpe_walk(tok, pieces[chosen])
    except ValueError as err:
        st.info(str(err), icon=":material/content_cut:")
        return
    if not walk.raw:
        st.info(_("Piece #{piece} is only bytes that no token covers (control characters): the tokenizer drops "
                  "it.").format(piece=chosen), icon=":material/block:")
        return
    if isinstance(tok, SentencePieceTokenizer):
        shown = sentencepiece_figure(walk, chosen, labels)
    else:
        shown = byte_level_view(tok, pieces, counts, chosen)
    final = [(k, part, token_id) for k, w in shown for part, token_id in zip(w.steps[-1], w.tokens, strict=True)]
    st.dataframe(pd.DataFrame({_("piece"): [k for k, _part, _id in final],
                               _("token"): [readable_token(part) for _k, part, _id in final],
                               "id": [token_id for _k, _part, token_id in final],
                               _("bytes (hex)"): [" ".join(f"{b:02X}" for b in part) for _k, part, _id in final]}),
                 hide_index=True, width="content", key="inside_final_tokens")
    whole_text_caption(tok, text, pieces)
    token_legend(labels)


def byte_level_view(tok, pieces: list[str], counts: list[int | None], chosen: int) -> list[tuple[int, BpeWalk]]:
    """The picked piece and its neighbours, bytes to ids; returns the (piece index, walk) pairs shown."""
    sizes = [len(p) if c is not None else None for p, c in zip(pieces, counts, strict=True)]
    window = piece_window(sizes, chosen)
    shown = [(k, bpe_walk(tok, pieces[k])) for k in window]
    rounds = [piece_rounds(tok, w) for _k, w in shown]
    n_tokens = sum(len(w.tokens) for _k, w in shown)
    counts = dict(first=window.start, last=window.stop - 1, chars=sum(len(pieces[k]) for k in window),
                  bytes=sum(len(w.raw) for _k, w in shown), n=n_tokens)
    title = (ngettext("Piece #{first}: {chars} characters, {bytes} bytes → {n} token",
                      "Piece #{first}: {chars} characters, {bytes} bytes → {n} tokens", n_tokens) if len(window) == 1
             else ngettext("Pieces #{first}–#{last}: {chars} characters, {bytes} bytes → {n} token",
                           "Pieces #{first}–#{last}: {chars} characters, {bytes} bytes → {n} tokens", n_tokens)
             ).format(**counts)
    present = bool(ss.get(PRESENT_KEY))
    fig = vt.byte_level_figure(rounds, readable_token, chosen=chosen - window.start,
                               max_width=PRESENTER_WIDTH if present else FIGURE_WIDTH,
                               fit_scale=PRESENTER_FONT_SCALE if present else 1.0, title=title,
                               words=translated(vt.WORDS))
    show_figure(fig, key="inside_bpe", filename=f"bpe_pieces{window.start}-{window.stop - 1}", width="content")
    merges = sum(len(w.merges) for _k, w in shown)
    st.caption(_("Top: the characters (the picked piece shaded, a line between two pieces), then each character's "
                 "UTF-8 bytes: a Chinese character is 3 bytes, an emoji 4, an English letter 1. Every byte is a "
                 "token of its own. Each next row is a round of merges ({n} merges in all): BPE joins, again and "
                 "again, the adjacent pair whose joined bytes come first in the merge list (the new token's id is "
                 "its rank), and stops when no adjacent pair is a token; a round shows the merges that happen side "
                 "by side, red the parts made in it. Bottom: the ids the model reads. Hover a cell for its bytes "
                 "and id.").format(n=f"{merges:,}"))
    return shown


def sentencepiece_figure(walk: BpeWalk, chosen: int, labels: list[str]) -> list[tuple[int, BpeWalk]]:
    """The picked piece's merges one by one (SentencePiece); returns the (piece index, walk) shown."""
    part_labels = [[readable_token(part) for part in step] for step in walk.steps]
    merged_at = [None] + [m.index for m in walk.merges]
    title = ngettext("Piece #{piece} '{text}': {bytes} bytes → {n} token",
                     "Piece #{piece} '{text}': {bytes} bytes → {n} tokens", len(walk.tokens)).format(
        piece=chosen, text=plotly_escape(shorten(labels[chosen], 24)), bytes=len(walk.raw), n=len(walk.tokens))
    show_figure(vt.bpe_merge_figure(walk.steps, part_labels, walk.ids, merged_at, special=walk.special, title=title,
                                    words=translated(vt.WORDS)), key="inside_bpe", filename=f"bpe_piece{chosen}")
    if walk.special:
        st.caption(_("A control token written in the text: the tokenizer matches it whole before splitting, so it is "
                     "one id ({id}) and is never merged or split.").format(id=walk.tokens[0]))
    else:
        st.caption(_("Row 1: the piece's characters (␣ is a space), each a token of its own (a character without a "
                     "token as its UTF-8 byte tokens). Each next row is one merge, {n} in all: of every adjacent pair, "
                     "SentencePiece joins the one whose joined text is the token with the highest score, leftmost on "
                     "a tie, and stops when no adjacent pair is a token. Red: the part the merge just made.").format(
            n=len(walk.merges)))
    return [(chosen, walk)]


def whole_text_caption(tok, text: str, pieces: list[str]) -> None:
    total = len(tok.encode(text)) - len(tok.prefix_ids)
    read = ([_("The model reads the first {n}.").format(n=session.DEFAULT_MAX_TOKENS)]
            if total > session.DEFAULT_MAX_TOKENS else [])
    split = (_("The text is cut before each space (the space stays with the word after it) and between two "
               "characters that no token holds side by side. This walk replays the tokenizer's merge loop and ends "
               "on the same tokens.") if isinstance(tok, SentencePieceTokenizer) else
             _("The split follows the model's pre-tokenizer (a word with its leading space, numbers, runs of "
               "punctuation, runs of whitespace). tiktoken does the real encoding; this walk replays its merge loop "
               "and ends on the same tokens."))
    control = ([_("Control tokens written in the text, such as {token}, stay whole.").format(
        token=escape_markdown(tok.token_strings([tok.eos_token_id])[0]))] if tok.eos_token_id is not None else [])
    st.caption(" ".join([_("The whole text: {pieces} pieces → {tokens} tokens.").format(
        pieces=f"{len(pieces):,}", tokens=f"{total:,}")] + read + [split] + control))
