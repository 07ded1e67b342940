"""Figures of the Inside page's tokenization view: how text becomes tokens.

- byte_level_figure (byte-level BPE: Qwen, Llama 3, GPT-2, SmolLM2): a few pre-tokenizer pieces side by side, one
  column per character: the characters on top, each one's UTF-8 bytes stacked under it, then the merges in rounds
  joining bytes into characters and words, and the final tokens' ids at the bottom. Every label is drawn only
  where it fits its cell (text_px: a generous estimate of its width at the font it will be shown at), so no two
  labels overlap and none is shrunk below 10 px.
- bpe_merge_figure (SentencePiece): one piece's merges as a ladder, one row per merge.

Pure functions: bytes, ids and labels in, plotly figures out (no streamlit, no torch, no model).
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from viz.labels import plotly_escape, row_axis, tick_positions
from viz.text import N_, fill
from viz.theme import ACCENT, PALETTE, TICK_FONT_SIZE, apply_theme

PART_COLORS = ("#c6dbef", "#9ecae1")  # BPE parts alternate two pale blues; the part a merge just made: ACCENT
SPECIAL_COLOR = PALETTE[2]            # a control token written whole
CHAR_COLORS = ("#eeeeee", "#fde9a9")  # the characters row: other pieces, the chosen piece
ID_COLOR = "#fafafa"
ROW_PX = 30                           # one row of the SentencePiece ladder
MAX_FONT, MIN_FONT, BYTE_FONT, ID_FONT = 14, 10, 10, 10   # px; characters and tokens: the largest that fits
CHAR_ROW, ROUND_ROW, BYTE_LINE, ROW_GAP = 30, 26, 13, 4    # px: row heights of the byte-level figure, a byte's line
LABEL_PAD = 0.5                       # px a label's estimated width keeps clear of its cell's width
MAX_COLUMN_PX, MIN_COLUMN_PX = 44, 4  # px a character gets: a short text is not stretched, a long one squeezed
ROTATED_EM = 1.2                      # the width of a rotated label, in ems of its font
MARGIN_R, MARGIN_B = 10, 10
_BYTE_TOKEN = re.compile(r"<0x([0-9A-F]{2})>")


@dataclass(frozen=True)
class Words:
    """What the tokenization figures write (English defaults; pages pass them translated)."""

    bytes_row: str = N_("bytes")
    rank: str = N_("rank {rank}")
    control_token: str = N_("control token")
    part_hover: str = N_("%{customdata[0]}<br>id %{customdata[1]}<br>bytes %{customdata[2]}")
    piece_bytes: str = N_("the piece's bytes (UTF-8, hex)")
    characters: str = N_("characters")
    utf8_bytes: str = N_("UTF-8 bytes")
    merge_round: str = N_("merge round {n}")
    token_ids: str = N_("token ids")
    token_ids_hover: str = N_("token ids (hover)")    # the row's name when a cell is too narrow for its id
    char_hover: str = N_("%{customdata[0]} (%{customdata[1]})<br>UTF-8 bytes: %{customdata[2]}")
    byte_hover: str = N_("byte %{customdata[0]} = %{customdata[1]}<br>of %{customdata[2]}")
    round_hover: str = N_("%{customdata[0]}<br>id %{customdata[1]}<br>bytes %{customdata[2]}<br>%{customdata[3]}")
    made_now: str = N_("made in this round")
    made_before: str = N_("made earlier")


WORDS = Words()


@dataclass(frozen=True)
class PieceRounds:
    """One pre-tokenizer piece for byte_level_figure."""

    raw: bytes                                 # its UTF-8 bytes
    byte_ids: tuple[int, ...]                  # the token id of each byte
    rounds: tuple[tuple[bytes, ...], ...] = ()  # its parts after each round of merges; () when nothing merges
    made: tuple[frozenset[int], ...] = ()      # per round: the indices of the parts made in that round
    round_ids: tuple[tuple[int, ...], ...] = ()  # per round: the token id of each part
    special: bool = False                      # a control token written whole (one round: the token)

    @property
    def tokens(self) -> tuple[bytes, ...]:
        """The final tokens' bytes."""
        return self.rounds[-1] if self.rounds else tuple(bytes([b]) for b in self.raw)

    @property
    def ids(self) -> tuple[int, ...]:
        """The final tokens' ids."""
        return self.round_ids[-1] if self.rounds else self.byte_ids


def _hex(raw: bytes) -> str:
    return " ".join(f"{b:02X}" for b in raw)


def text_px(text: str, font_px: float) -> float:
    """A generous estimate of text's drawn width in px at font_px (DejaVu Sans, the widest of the usual fallbacks):
    CJK and other wide characters 1 em, emoji 1.3 em, m / w / @ 1 em, capitals 0.8 em (A-F 0.78), the
    rest 0.64 em."""
    width = 0.0
    for char in text:
        code = ord(char)
        if code >= 0x1F000 or 0x2600 <= code <= 0x27BF:
            width += 1.3
        elif unicodedata.east_asian_width(char) in "WF" or char in "MWmw@%&":
            width += 1.0
        elif char in "ABCDEF":
            width += 0.78
        elif char.isupper():
            width += 0.8
        else:
            width += 0.64
    return width * font_px


def utf8_characters(raw: bytes) -> list[bytes]:
    """raw cut into its UTF-8 characters (a byte that starts no valid character stands alone)."""
    out, i = [], 0
    while i < len(raw):
        for width in (1, 2, 3, 4):
            try:
                raw[i:i + width].decode("utf-8")
            except UnicodeDecodeError:
                continue
            break
        else:
            width = 1
        out.append(raw[i:i + width])
        i += width
    return out


def short_label(label: str) -> str:
    """A token label with its <0xE6>-style byte tokens written as bare hex (E6)."""
    return _BYTE_TOKEN.sub(r"\1", label)


class _Cells:
    """The bars (cells with hover) and the labels of the byte-level figure, as they are added. x: character
    columns; a cell from byte a to byte b spans x[a] to x[b] (a character's bytes share its column evenly)."""

    def __init__(self, x: list[float], column_px: float, fit_scale: float):
        self.xs, self.column_px, self.fit_scale = x, column_px, fit_scale
        self.bars: dict[str, dict[str, list]] = {}       # hover template -> the cells' x, base, y, width, ...
        self.labels: dict[str, list] = {k: [] for k in ("x", "y", "text", "size", "color")}
        self.rotated: list[dict] = []

    def add(self, first: int, end: int, y: float, height: float, color: str, hover: list, template: str,
            label: str = "", font: int = MIN_FONT, rotate: bool = False, x: tuple[float, float] | None = None) -> bool:
        """A cell over bytes [first, end) (or x = (left, right) in columns) centred on y; its label where it fits
        (rotated, if asked, when it does not fit across). Whether the label (if any) is drawn."""
        left, right = x or (self.xs[first], self.xs[end])
        cells = self.bars.setdefault(template, {k: [] for k in ("x", "base", "y", "width", "color", "hover")})
        for key, value in zip(cells, (right - left, left, y, height - 2, color, hover), strict=True):
            cells[key].append(value)
        if not label:
            return True
        room, need = (right - left) * self.column_px, (text_px(label, font) + LABEL_PAD) * self.fit_scale
        ink = "white" if color in (ACCENT, SPECIAL_COLOR) else "black"
        if need <= room and font * 1.25 * self.fit_scale <= height:
            for key, value in zip(self.labels, ((left + right) / 2, y, plotly_escape(label), font, ink), strict=True):
                self.labels[key].append(value)
        elif rotate and font * ROTATED_EM * self.fit_scale <= room and need <= height:
            self.rotated.append(dict(x=(left + right) / 2, y=y, text=plotly_escape(label), textangle=-90,
                                     showarrow=False, font=dict(size=font, color=ink)))
        else:
            return False
        return True


def _columns(pieces: Sequence[PieceRounds]) -> tuple[list[bytes], list[float]]:
    """The window's characters, and x of every byte boundary (character c spans [c, c + 1))."""
    chars = [char for p in pieces for char in utf8_characters(p.raw)]
    xs: list[float] = []
    for c, char in enumerate(chars):
        xs += [c + j / len(char) for j in range(len(char))]
    return chars, xs + [float(len(chars))]


def _font(chars: list[bytes], label: Callable[[bytes], str], column_px: float, fit_scale: float) -> int:
    """The largest font (MIN_FONT to MAX_FONT) at which every character's label fits its column."""
    widest = max(text_px(label(c), 1.0) for c in chars)
    return int(max(MIN_FONT, min(MAX_FONT, (column_px / fit_scale - LABEL_PAD) / widest)))


def byte_level_figure(pieces: Sequence[PieceRounds], label: Callable[[bytes], str], *, chosen: int | None = None,
                      max_width: int = 600, fit_scale: float = 1.0, title: str | None = None,
                      words: Words = WORDS) -> go.Figure:
    """Byte-level BPE, text -> bytes -> tokens -> ids, for a few consecutive pieces (pieces[chosen]'s characters
    shaded, a line between two pieces), one column per character. Rows: the characters; each one's UTF-8 bytes
    stacked under it (each byte a token); one row per round of merges (the parts made in that round in ACCENT), a
    part as wide as its bytes' share of their characters; the final tokens' ids (the row named "token ids (hover)"
    where a token is too narrow for its id even turned upright).

    label(bytes) -> readable text of a character or token (raw: escaped here; <0xE6> shown as E6). The figure is
    max_width px wide or less (a character gets at most MAX_COLUMN_PX); fit_scale: how much larger the fonts will
    be shown (presenter mode), for deciding which labels fit.
    """
    if not pieces:
        raise ValueError("byte_level_figure needs at least one piece")
    for p in pieces:
        shapes_agree = [len(ids) for ids in p.round_ids] == [len(parts) for parts in p.rounds]
        if (not p.raw or len(p.byte_ids) != len(p.raw) or len(p.made) != len(p.rounds) or not shapes_agree
                or any(b"".join(parts) != p.raw for parts in p.rounds)):
            raise ValueError("each piece needs bytes, an id per byte, a 'made' set and an id per part in every "
                             "round, and every round's parts must spell its bytes")
    n_rounds = max(len(p.rounds) for p in pieces)
    chars, xs = _columns(pieces)
    widest_hex = max(text_px(f"{b:02X}", BYTE_FONT) for p in pieces for b in p.raw)
    id_need = max(text_px(f"{i:,}", ID_FONT) for p in pieces for i in p.ids) * fit_scale + LABEL_PAD
    byte_row = max(len(c) for c in chars) * BYTE_LINE * fit_scale + 4
    heights = [CHAR_ROW * fit_scale, byte_row] + [ROUND_ROW * fit_scale] * n_rounds + [max(ROUND_ROW, id_need)]
    tops = [sum(heights[:r]) + ROW_GAP * r for r in range(len(heights))]
    centre = [t + h / 2 for t, h in zip(tops, heights, strict=True)]
    starts = [sum(len(p.raw) for p in pieces[:k]) for k in range(len(pieces))]      # each piece's first byte
    for ids_row in (words.token_ids, words.token_ids_hover):     # the second where a token is too narrow for its id
        rows = [words.characters, words.utf8_bytes] + [fill(words.merge_round, n=r + 1) for r in range(n_rounds)] + \
            [ids_row]
        margin_l = int(max(text_px(r, TICK_FONT_SIZE) for r in rows) * fit_scale) + 18
        column_px = min(MAX_COLUMN_PX, max(MIN_COLUMN_PX, (max_width - margin_l - MARGIN_R) / len(chars)))
        font = _font(chars, label, column_px, fit_scale)
        hex_fits = (widest_hex + LABEL_PAD) * fit_scale <= column_px              # the bytes' labels: all, or none
        cells = _Cells(xs, column_px, fit_scale)
        every_id = [_piece_cells(cells, p, first, k == chosen, n_rounds, tops, heights, label, font, hex_fits, words)
                    for k, (p, first) in enumerate(zip(pieces, starts, strict=True))]
        if all(every_id):
            break
    texts = cells.labels
    kinds = {words.char_hover: "characters", words.byte_hover: "bytes", words.round_hover: "rounds",
             words.part_hover: "ids"}
    data = [go.Bar(x=bars["x"], base=bars["base"], y=bars["y"], width=bars["width"], orientation="h",
                   marker=dict(color=bars["color"], line=dict(color="white", width=1)), customdata=bars["hover"],
                   hovertemplate=template + "<extra></extra>", name=kinds[template])
            for template, bars in cells.bars.items()]                  # one trace per kind of row
    for size in sorted(set(texts["size"])):             # one trace per font size (presenter mode scales each)
        at = [i for i, s in enumerate(texts["size"]) if s == size]
        data.append(go.Scatter(x=[texts["x"][i] for i in at], y=[texts["y"][i] for i in at],
                               text=[texts["text"][i] for i in at], mode="text", hoverinfo="skip", name="labels",
                               textfont=dict(size=size, color=[texts["color"][i] for i in at]),
                               textposition="middle center"))
    plot_h = tops[-1] + heights[-1]
    bounds = [xs[start] for start in starts[1:]]
    shapes = [dict(type="line", x0=x, x1=x, y0=0, y1=plot_h, line=dict(color="#555555", width=2)) for x in bounds]
    fig = go.Figure(data=data, layout=dict(shapes=shapes, annotations=cells.rotated))
    apply_theme(fig, title=title)
    top = 60 if title else 10
    fig.update_layout(width=int(margin_l + len(chars) * column_px + MARGIN_R), height=int(top + plot_h + MARGIN_B),
                      margin=dict(l=margin_l, r=MARGIN_R, t=top, b=MARGIN_B), showlegend=False, bargap=0,
                      hovermode="closest")
    fig.update_xaxes(type="linear", range=[0, len(chars)], showticklabels=False, showgrid=False, zeroline=False,
                     automargin=False, fixedrange=True)
    fig.update_yaxes(type="linear", range=[plot_h, 0], tickmode="array", tickvals=centre,
                     ticktext=[plotly_escape(r) for r in rows], showgrid=False, zeroline=False, automargin=False,
                     fixedrange=True)
    return fig


def _piece_cells(cells: _Cells, p: PieceRounds, first: int, chosen: bool, n_rounds: int, tops: list[float],
                 heights: list[float], label: Callable[[bytes], str], font: int, hex_fits: bool,
                 words: Words) -> bool:
    """One piece's cells, its first byte the window's byte number first: its characters, their bytes (stacked in
    the character's column), each round's parts, the final ids. Whether every id is written."""
    at = first
    line = BYTE_LINE * cells.fit_scale
    for c, char in enumerate(utf8_characters(p.raw)):
        text = short_label(label(char))
        code = ", ".join(f"U+{ord(ch):04X}" for ch in char.decode("utf-8", errors="replace"))
        column = (cells.xs[at], cells.xs[at + len(char)])
        cells.add(at, at + len(char), tops[0] + heights[0] / 2, heights[0], CHAR_COLORS[chosen],
                  [plotly_escape(text), code, _hex(char)], words.char_hover, text, font)
        for j, b in enumerate(char):
            cells.add(at, at + 1, tops[1] + 2 + (j + 0.5) * line, line, PART_COLORS[c % 2],
                      [f"{b:02X}", f"id {p.byte_ids[at - first]:,}", plotly_escape(text)], words.byte_hover,
                      f"{b:02X}" if hex_fits else "", BYTE_FONT, x=column)
            at += 1
    for r in range(n_rounds):
        last = min(r, len(p.rounds) - 1)                      # a piece with fewer rounds keeps its tokens
        parts, ids = (p.rounds[last], p.round_ids[last]) if p.rounds else (p.tokens, p.ids)
        made = p.made[r] if r < len(p.rounds) else frozenset()
        at = first
        for i, (part, token_id) in enumerate(zip(parts, ids, strict=True)):
            text = short_label(label(part))
            color = SPECIAL_COLOR if p.special else ACCENT if i in made else PART_COLORS[i % 2]
            cells.add(at, at + len(part), tops[2 + r] + heights[2 + r] / 2, heights[2 + r], color,
                      [plotly_escape(text), f"{token_id:,}", _hex(part),
                       words.made_now if i in made else words.made_before], words.round_hover, text, font)
            at += len(part)
    at, written = first, True
    for part, token_id in zip(p.tokens, p.ids, strict=True):
        text = short_label(label(part))
        written &= cells.add(at, at + len(part), tops[-1] + heights[-1] / 2, heights[-1], ID_COLOR,
                             [plotly_escape(text), f"{token_id:,}", _hex(part)], words.part_hover, f"{token_id:,}",
                             ID_FONT, rotate=True)
        at += len(part)
    return written


# ------------------------------------------------------------------------------------------- SentencePiece
def bpe_merge_figure(steps: Sequence[Sequence[bytes]], labels: Sequence[Sequence[str]],
                     ids: Sequence[Sequence[int]], merged_at: Sequence[int | None], *, special: bool = False,
                     title: str | None = None, words: Words = WORDS) -> go.Figure:
    """A piece's BPE merges as a ladder: one row per step (the single bytes on top, the final tokens at the
    bottom), each part a bar as wide as its bytes, labelled with its token; the part each merge made in ACCENT.

    steps[s][i]: the bytes of part i after s merges; labels: their readable text (raw: escaped here); ids: their
    token ids; merged_at[s]: the index of the part merge s made (None for the first row). The x ticks are the
    piece's bytes in hex; the y ticks name each merge by its rank (== the new token's id).
    """
    if not (len(steps) == len(labels) == len(ids) == len(merged_at)) or not steps:
        raise ValueError("steps, labels, ids and merged_at need one entry per step (at least one)")
    raw = b"".join(steps[0])
    y, base, width, colors, text, hover = [], [], [], [], [], []              # hover: [label, id, bytes] per bar
    for s, parts in enumerate(steps):
        offset = 0
        for i, part in enumerate(parts):
            y.append(s)
            base.append(offset)
            width.append(len(part))
            label = plotly_escape(labels[s][i])
            text.append(label)
            hover.append([label, ids[s][i], _hex(part)])
            colors.append(SPECIAL_COLOR if special else ACCENT if merged_at[s] == i else PART_COLORS[i % 2])
            offset += len(part)
    rows = [words.bytes_row if m is None else fill(words.rank, rank=f"{ids[s][m]:,}") for s, m in enumerate(merged_at)]
    if special:
        rows = [words.control_token]
    fig = go.Figure(go.Bar(
        x=width, y=y, base=base, orientation="h", marker=dict(color=colors, line=dict(color="white", width=2)),
        text=text, textposition="inside", insidetextanchor="middle", textangle=0, constraintext="none",
        textfont=dict(size=14, color=["white" if c in (ACCENT, SPECIAL_COLOR) else "black" for c in colors]),
        customdata=hover, hovertemplate=words.part_hover + "<extra></extra>",
        name="parts"))
    n = max(1, len(raw))
    byte_ticks = tick_positions(len(raw), 32)
    fig.update_xaxes(title_text=words.piece_bytes, type="linear", tickmode="array",
                     tickvals=[i + 0.5 for i in byte_ticks], ticktext=[f"{raw[i]:02X}" for i in byte_ticks],
                     range=[0, n], showgrid=False, zeroline=False)
    fig.update_yaxes(**row_axis(rows, max_chars=14), showgrid=False)
    apply_theme(fig, title=title, height=80 + (40 if title else 0) + ROW_PX * len(steps))
    fig.update_layout(barmode="overlay", bargap=0.15, showlegend=False,
                      uniformtext=dict(minsize=10, mode="hide"))
    return fig
