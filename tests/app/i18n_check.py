"""Finding English left in a page shown in Chinese: every string a person reads, collected from the AppTest element
tree (text elements, labels, help texts, options, placeholders, tab / expander / popover labels, table headers) and
from the figures (titles, axis and colour-bar titles, annotations, hover templates, legend entries), then searched
for runs of two or more English words."""
from __future__ import annotations

import json
import re
from collections.abc import Sequence

from google.protobuf.message import Message

# Two or more English words (2+ letters each) in a row, separated by spaces only: single letters (q, k, v, i, j, T),
# identifiers (d_model, head_dim), numbers and units (135 M, 2.5 GB) never form one.
ENGLISH_RUN = re.compile(r"(?<![\w\-/.])[A-Za-z]{2,}(?: +[A-Za-z]{2,})+(?![\w\-/])")
# What a run may be (whole-run matches, case-insensitive): names of people, companies, models and algorithms that are
# written in English in Chinese text too, and the English term a student meets in papers, given in parentheses
# after the course's Chinese term (旋转位置编码 (RoPE) is one word; these are the multi-word ones).
ALLOWED = {
    "hugging face",                                   # company (Hugging Face's rotate_half, the model layout)
    "et al",                                          # citations: Press et al., Su et al., Dao et al.
    "attention sink", "logit lens", "nucleus sampling", "kv cache", "lm head", "pre norm",   # terms in parentheses
    "end of turn",
}
# Blocks that hold what the user or the model wrote (not the interface), by key prefix: the generated text.
WRITTEN_KEYS = ("gen_text",)
# Stripped before searching: code spans, LaTeX, HTML tags, plotly and Python placeholders, Material icons, URLs.
NOT_PROSE = re.compile(r"`[^`]*`|\$[^$]*\$|<[^<>]*>|%\{[^}]*\}|\{[^{}]*\}|:material/[a-z_]+:|https?://\S+"
                       r"|:[a-z]+\[|\\text\w*")
# Proto fields that hold no reader-facing text (ids, keys, values the user typed, figure specs read separately, a
# component's code).
SKIP_FIELDS = {"id", "key", "form_id", "spec", "data", "value", "default", "url", "icon", "format", "theme",
               "selections", "page_script_hash", "page", "raw_value", "set_value", "arrow_data", "styler",
               "editing_mode", "columns", "component_name", "js_content", "html_content", "css_content",
               "js_source_path", "css_source_path"}


def english_runs(text: str) -> list[str]:
    """The runs of 2+ English words in text that are not allowed names or terms."""
    prose = NOT_PROSE.sub(" ", text)
    return [m.group(0) for m in ENGLISH_RUN.finditer(prose) if m.group(0).lower() not in ALLOWED]


def _proto_strings(msg: Message, out: list[str], skip=frozenset()) -> None:
    for field, value in msg.ListFields():
        if field.name in skip:
            continue
        for v in (value if isinstance(value, Sequence) and not isinstance(value, str) else [value]):
            if isinstance(v, str):
                out.append(v)
            elif isinstance(v, Message):
                _proto_strings(v, out, skip)


def element_strings(node) -> list[str]:
    """Every reader-facing string of one element or block (its children are visited separately)."""
    proto = getattr(node, "proto", None)
    if proto is None or node.type in ("code", "latex", "text_area", "plotly_chart"):
        return [proto.label] if node.type == "text_area" and proto is not None else []
    out: list[str] = []
    _proto_strings(proto, out, SKIP_FIELDS)
    if node.type == "arrow_data_frame":
        out += [c.get("label", "") for c in json.loads(proto.columns or "{}").values() if isinstance(c, dict)]
    return out


def page_strings(at) -> list[str]:
    """Every reader-facing string on the page: the element tree, top to bottom."""
    out: list[str] = []

    def walk(node) -> None:
        if str(getattr(node, "key", None) or "").startswith(WRITTEN_KEYS):
            return
        out.extend(element_strings(node))
        for child in getattr(node, "children", {}).values():
            walk(child)
    walk(at._tree)
    return out


def figure_strings(fig: dict) -> list[str]:
    """The words a figure shows: titles, axis and colour-bar titles, annotations, hovers, legend entries."""
    layout, out = fig.get("layout", {}), []

    def title(obj) -> None:
        t = (obj or {}).get("title")
        out.append(t.get("text", "") if isinstance(t, dict) else (t or ""))
    title(layout)
    for name, axis in layout.items():
        if re.fullmatch(r"[xy]axis\d*", name) or name.startswith("coloraxis"):
            title(axis)
            title(axis.get("colorbar"))
    out += [a.get("text", "") for a in layout.get("annotations", [])]
    listed = [t for t in fig.get("data", []) if t.get("showlegend") is not False
              and t.get("type") in ("bar", "scatter", "scattergl")]
    legend = layout.get("showlegend") is True or (layout.get("showlegend") is not False and len(listed) > 1)
    for trace in fig.get("data", []):
        out.append(trace.get("hovertemplate", "") or "")
        title(trace.get("colorbar"))
        if trace.get("type") == "treemap":                            # its boxes' names
            out += [t for t in trace.get("labels", []) if isinstance(t, str)]
        if isinstance(trace.get("hovertext"), list):
            out += [t for t in trace["hovertext"] if isinstance(t, str)]
        if legend and trace in listed:
            out.append(trace.get("name", "") or "")
    return out
