"""The three model families (course chapter 01) and which pages and views each can show (pure Python).

- decoder ("decoder-only": SmolLM2, Llama, Qwen, GPT-2): causal self-attention, trained to predict the next token;
- encoder (BERT): self-attention with no mask, every token sees every token, trained to fill in masked tokens;
- encoder-decoder (T5): an encoder reads a source with no mask, a decoder writes a target token by token with causal
  self-attention and cross-attention to the source.

SUPPORT says, per page, which families each view supports (a view not named: every family). The frame
(app_pages/frame/shell.py) stops a page whose open view the session's model cannot show, with one note saying what
this family is and links to what it can show instead (INSTEAD). For an encoder-decoder, the pages that read "the
trace of a text" see its encoder's self-attention over the text (app_core/derived/seq2seq.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from viz.text import N_

DECODER, ENCODER, SEQ2SEQ = "decoder", "encoder", "encoder-decoder"
FAMILIES = (DECODER, ENCODER, SEQ2SEQ)
FAMILY_NAMES = {DECODER: N_("decoder-only"), ENCODER: N_("encoder"), SEQ2SEQ: N_("encoder-decoder")}
_DECODER_ONLY = (DECODER,)


@dataclass(frozen=True)
class Views:
    """A page's support: `param` names its view setting in its schema (None: a page without views); `support` maps a
    view (None: the whole page) to the families that can show it; views not named show with every family."""

    param: str | None
    support: dict[str | None, tuple[str, ...]] = field(default_factory=dict)


SUPPORT = {
    "attention": Views("view", {"next": _DECODER_ONLY, "cross": (SEQ2SEQ,)}),
    "causal-mask": Views("view", {"steps": _DECODER_ONLY}),
    "softmax": Views("source", {"next": _DECODER_ONLY}),
    "generate": Views("view", {"write": (DECODER, SEQ2SEQ), "compare": (DECODER, SEQ2SEQ)}),
    "inside": Views("view", {"block": _DECODER_ONLY, "stream": _DECODER_ONLY, "lens": _DECODER_ONLY,
                             "heads": _DECODER_ONLY}),
    "positional": Views("view", {"model": _DECODER_ONLY}),
    "efficient": Views(None, {None: _DECODER_ONLY}),
    "circuits": Views(None, {None: _DECODER_ONLY}),
}

# What a family can show instead, best first: (page, view).
INSTEAD = {
    DECODER: (("attention", "head"), ("causal-mask", "compare"), ("generate", "write")),
    ENCODER: (("attention", "head"), ("causal-mask", "compare"), ("inside", "tokens")),
    SEQ2SEQ: (("attention", "cross"), ("generate", "write"), ("causal-mask", "compare")),
}

# One sentence on what the family is (a note's start); {model} is the model's name.
WHAT_IT_IS = {
    DECODER: N_("{model} is a decoder-only model: it reads left to right (a causal mask) and is trained to predict "
                "the next token."),
    ENCODER: N_("{model} is an encoder (BERT family): every token sees every other token (no causal mask), and it is "
                "trained to fill in masked tokens, not to predict the next one or write text."),
    SEQ2SEQ: N_("{model} is an encoder-decoder (T5 family): its encoder reads a source text with no mask; its decoder "
                "writes a target one token at a time, looking back at the source through cross-attention."),
}
# What a view that the family cannot show needs.
NEEDS = {
    DECODER: N_("This view needs a decoder-only model (one that predicts the next token): pick one in the model "
                "picker."),
    SEQ2SEQ: N_("This view needs an encoder-decoder (T5 family) model: pick one in the model picker (a built-in tiny "
                "T5 is there when the models folder has none)."),
}


def family_of(lm) -> str:
    """The family of a loaded model (its config's `family`; the decoders' ModelConfig has none)."""
    return getattr(lm.config, "family", DECODER)


def supports(page: str, view: str | None, family: str) -> bool:
    """Whether a model of this family can show the page's view (view None: the page itself)."""
    views = SUPPORT.get(page)
    if views is None:
        return True
    families = views.support.get(view if views.param is not None else None, FAMILIES)
    return family in families


def needs(page: str, view: str | None) -> str:
    """The family a view needs (one of NEEDS' keys): an encoder-decoder for cross-attention, else a decoder."""
    views = SUPPORT.get(page)
    families = views.support.get(view if views and views.param is not None else None, FAMILIES) if views else FAMILIES
    return SEQ2SEQ if families == (SEQ2SEQ,) else DECODER


def instead(family: str, page: str) -> tuple[tuple[str, str], ...]:
    """What a family can show instead of a view it cannot: INSTEAD, the views of this page it supports first."""
    own = [(page, view) for view, families in SUPPORT.get(page, Views(None)).support.items()
           if view is not None and family in families]
    return tuple(dict.fromkeys([*own, *INSTEAD[family]]))
