"""Widgets bound to the app's state: each uses its setting's state key (see _schemas.py) as its widget key, with
persist_state="session", so its value survives page switches and is exactly what the share link carries.

Every function takes `where` (the sidebar, a row of the page, a column) and draws one control there. Ranges come
from the model's config and the trace, never hard-coded.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import streamlit as st

from app_core import demo_models, families
from app_core import models_folder as models
from app_core import schemas as S
from app_core.examples import load_examples, localized, offered, reads_chinese
from app_pages.frame import default_model
from app_pages.frame import session as caches
from app_pages.frame.download_box import download_box
from app_pages.frame.i18n import _, language
from app_pages.frame.widgets import escape_markdown, picked_layer_head, selected_points, selected_rows, token_label
from model import ForwardTrace, ModelConfig
from viz.format import format_bytes, format_si

PERSIST = dict(persist_state="session")
STRIP_MAX_TOKENS = 60        # up to this many tokens the query token is picked from clickable token pills
PICK = "q_pick"              # the pills' own key; they copy the pick into the query setting


def _pick_example() -> None:
    choice = st.session_state.get("w_example")
    examples = load_examples()
    if choice is not None and 0 <= choice < len(examples):
        st.session_state[S.TEXT.key] = examples[choice]["text"]
        st.session_state[S.QUERY.key] = None           # new text: the query goes back to the last token
    st.session_state["w_example"] = None


def _text_changed() -> None:
    st.session_state[S.QUERY.key] = None


def example_picker(where) -> None:
    examples = [localized(e, language()) for e in load_examples()]
    chinese = reads_chinese(caches.get_model().tokenizer)
    where.selectbox(_("Example texts"), options=offered(chinese), index=None, key="w_example",
                    format_func=lambda i: examples[i]["title"], placeholder=_("Load an example text…"),
                    on_change=_pick_example, label_visibility="collapsed")


def text_box(where, height: int = 110) -> None:
    where.text_area(_("Text"), key=S.TEXT.key, height=height, max_chars=S.MAX_TEXT_CHARS, on_change=_text_changed,
                    label_visibility="collapsed", placeholder=_("Type a text for the model to read…"),
                    help=_("The model reads this text; every page shows what it did with it. Ctrl+Enter to apply."),
                    **PERSIST)


def layer_slider(where, cfg: ModelConfig, width="stretch") -> None:
    if cfg.n_layers > 1:
        where.slider(_("Layer"), 0, cfg.n_layers - 1, key=S.LAYER.key, width=width,
                     help=_("Which of the {n} transformer blocks (0 = first)").format(n=cfg.n_layers), **PERSIST)


def head_slider(where, cfg: ModelConfig, width="stretch") -> None:
    if cfg.n_heads > 1:
        where.slider(_("Head"), 0, cfg.n_heads - 1, key=S.HEAD.key, width=width,
                     help=_("Which of the layer's {n} query heads (head h reads key/value head h // {group})").format(
                         n=cfg.n_heads, group=cfg.group_size), **PERSIST)


def sink_toggle(where, label: str | None = None) -> None:
    where.toggle(label or _("Hide attention sink (token 0)"), key=S.SINK.key,
                 help=_("In the middle and late layers of most models, many heads put most of their attention on "
                        "the first token (SmolLM2-135M: from layer 12 on, 50-84%). This hides that column and "
                        "rescales every row to sum to 1, so the rest becomes visible. Rows with nothing left to show "
                        "turn grey."), **PERSIST)


MODEL_PICK = "w_model"      # the picker's own key; it copies the pick into the model setting
BUILTIN_PICK = ""           # the picker's option for the built-in model (a selectbox shows None as unselected)
UPLOAD = "w_model_upload"
UPLOAD_NOTE = "_model_upload_note"


def model_label(info: models.ModelInfo, builtin: bool = False, server_default: bool = False) -> str:
    """A readable model's line: name (a demo model's as app_core/demo_models calls it), architecture (and family,
    for an encoder or encoder-decoder), parameters, quantization, file size."""
    demo = demo_models.label(info)
    architecture = info.architecture if info.family in (None, families.DECODER) else \
        f"{info.architecture} ({_(families.FAMILY_NAMES[info.family])})"
    return (_("{name} (built-in) · {architecture} · {params} parameters · {quant} · {size}") if builtin else
            _("{name} (this server's default) · {architecture} · {params} parameters · {quant} · {size}")
            if server_default else
            _("{name} · {architecture} · {params} parameters · {quant} · {size}")).format(
        name=_(demo) if demo else info.name, architecture=architecture, params=format_si(info.n_params),
        quant=info.quantization, size=format_bytes(info.file_bytes))


def _copy_model_pick() -> None:
    st.session_state[S.MODEL.key] = st.session_state.get(MODEL_PICK) or None


def _save_upload() -> None:
    """on_change of the upload box: the file goes into the models folder and becomes the session's model."""
    upload = st.session_state.get(UPLOAD)
    if upload is None:
        return
    if upload.size > models.max_upload_bytes():
        st.session_state[UPLOAD_NOTE] = _("{file} has {size}, more than this server accepts ({limit}, "
                                          "ATLAS_MAX_UPLOAD_MB).").format(file=upload.name,
                                                                          size=format_bytes(upload.size),
                                                                          limit=format_bytes(models.max_upload_bytes()))
        return
    try:
        info = models.save_upload(upload.name, upload.getvalue())
    except models.UploadRefused as refused:
        st.session_state[UPLOAD_NOTE] = _(refused.note.template).format(**refused.note.values)
        return
    st.session_state[UPLOAD_NOTE] = None
    st.session_state[S.MODEL.key] = info.name


def model_picker(where) -> None:
    """The Model picker: the built-in model and every readable GGUF of the models folder; unreadable files listed
    below it, greyed out with the reason; the upload box where the server allows uploads."""
    available = models.offered()
    readable = {info.name: info for info in available if info.ok}
    builtin = models.info_of(caches.builtin_model_path())
    server_default = default_model.ready_info()      # the server's default model: the link's model when unnamed
    if server_default is None:
        labels = {BUILTIN_PICK: model_label(builtin, builtin=True)}
    else:
        readable.pop(server_default.name, None)
        labels = {BUILTIN_PICK: model_label(server_default, server_default=True),
                  builtin.name: model_label(builtin, builtin=True)}
    labels |= {name: model_label(info) for name, info in readable.items()}
    pick = st.session_state.get(S.MODEL.key) or BUILTIN_PICK
    st.session_state[MODEL_PICK] = pick if pick in labels else BUILTIN_PICK
    where.selectbox(_("Model"), options=list(labels), key=MODEL_PICK, on_change=_copy_model_pick,
                    format_func=labels.__getitem__,             # translated here, in the script run
                    help=(_("The built-in model and the GGUF files in this server's models folder ({folder}). The "
                            "settings stay; layer and head move into the new model's range.").format(
                        folder=models.models_dir()) if models.upload_allowed() else   # a path only to those who add
                        _("The built-in model and the GGUF files in the server's models folder. The settings stay; "
                          "layer and head move into the new model's range.")))
    for info in available:
        if not info.ok:
            where.caption(":gray[:material/block: " + escape_markdown(_("{file}: cannot be used. {reason}").format(
                file=info.path.name, reason=info.error)) + "]")
    if models.upload_allowed():
        where.file_uploader(_("Add a GGUF model"), type=["gguf"], key=UPLOAD, on_change=_save_upload,
                            max_upload_size=max(1, models.max_upload_bytes() // 2**20),
                            help=_("Saved into the models folder ({folder}); up to {limit}.").format(
                                folder=models.models_dir(), limit=format_bytes(models.max_upload_bytes())))
        if st.session_state.get(UPLOAD_NOTE):
            where.caption(":orange[:material/warning: " + escape_markdown(st.session_state[UPLOAD_NOTE]) + "]")
    download_box(where)


def set_setting(key: str, value) -> None:
    """on_click: a setting takes this value (the language button)."""
    st.session_state[key] = value


def set_within(key: str, lo: int, hi: int, value: int) -> None:
    """Callback: set a whole-number setting to value, inside [lo, hi]."""
    st.session_state[key] = max(lo, min(hi, int(value)))


def _copy_pick() -> None:
    pick = st.session_state.get(PICK)
    if pick is not None:
        st.session_state[S.QUERY.key] = pick


def query_slider(trace: ForwardTrace, where=None, label: str | None = None, width="stretch") -> None:
    """The query token as a one-line slider over the text's positions (compact: fits above a chart)."""
    tokens = trace.tokens
    (where or st).select_slider(label or _("Query token"), options=list(range(trace.n_tokens)), key=S.QUERY.key,
                                width=width, format_func=lambda i: token_label(tokens, i, 20),
                                help=_("Drag (or use the arrow keys on it) to move the query token along the text"),
                                **PERSIST)


def query_picker(trace: ForwardTrace, where=None, label: str | None = None) -> None:
    """The query token: clickable token pills for short texts, the slider over positions for long ones."""
    where = st if where is None else where
    tokens = trace.tokens
    if trace.n_tokens > STRIP_MAX_TOKENS:
        query_slider(trace, where, label)
        return
    st.session_state[PICK] = st.session_state.get(S.QUERY.key)
    where.pills(label or _("Query token"), options=list(range(trace.n_tokens)), key=PICK, on_change=_copy_pick,
                required=True, format_func=_pill_labels(tuple(tokens)).__getitem__,
                help=_("Click a token to make it the query"))


@functools.lru_cache(maxsize=64)
def _pill_labels(tokens: tuple[str, ...]) -> tuple[str, ...]:
    """The query pills' labels (Streamlit formats each option twice a run, for every follower of a class)."""
    return tuple(escape_markdown(token) for token in tokens)


def head_picker(cfg: ModelConfig, where=None, label: str | None = None) -> None:
    """A row of head buttons bound to the head setting."""
    where = st if where is None else where
    st.session_state["w_head_pick"] = st.session_state.get(S.HEAD.key, 0)
    names = [_("head {head}").format(head=h) for h in range(cfg.n_heads)]    # translated here, in the script run
    where.segmented_control(label or _("Open a head"), options=list(range(cfg.n_heads)), format_func=names.__getitem__,
                            required=True, key="w_head_pick",
                            on_change=lambda: st.session_state.update({S.HEAD.key: st.session_state["w_head_pick"]}))


def view_tabs(param, labels: dict[str, str]):
    """st.tabs over a page's views, kept in the view setting (param, a Choice) and so in the link. Returns (the open
    view's slug, its tab container): only the open view's content should be computed, inside that container.
    labels: slug -> English label (marked with N_), shown translated."""
    labels = {slug: _(label) for slug, label in labels.items()}
    slug = st.session_state.get(param.key) or param.default
    widget = param.key + "_tabs"

    def changed() -> None:
        label = st.session_state.get(widget)
        st.session_state[param.key] = next((s for s, lab in labels.items() if lab == label), param.default)

    st.session_state[widget] = labels[slug]
    tabs = st.tabs(list(labels.values()), key=widget, on_change=changed)
    return slug, tabs[list(labels).index(slug)]


# Callbacks live here, not in the page scripts: a function defined in a page keeps that page's whole namespace
# (its trace, its figures) alive for as long as Streamlit keeps the widget's callback.
def pick_head_from_chart(widget_key: str) -> None:
    """on_select of an overview figure: the clicked (layer, head) becomes the selected head."""
    picked = picked_layer_head(selected_points(st.session_state.get(widget_key)))
    if picked is not None:
        st.session_state[S.LAYER.key], st.session_state[S.HEAD.key] = picked


def pick_head_from_table(widget_key: str, order_key: str) -> None:
    """on_select of a table whose rows are the (layer, head) pairs in st.session_state[order_key]."""
    rows = selected_rows(st.session_state.get(widget_key))
    order = st.session_state.get(order_key) or []
    if rows and rows[0] < len(order):
        st.session_state[S.LAYER.key], st.session_state[S.HEAD.key] = order[rows[0]]


def show_view(view_key: str, slug: str) -> None:
    """on_click: open one of a page's views."""
    st.session_state[view_key] = slug


def reset(setting_key: str) -> None:
    """on_change: the setting goes back to automatic (None)."""
    st.session_state[setting_key] = None


def follow_pick(widget_key: str, setting_key: str, automatic) -> None:
    """on_change of a widget standing in for a setting whose None means 'automatic': picking the automatic value
    keeps the setting automatic (and out of the link)."""
    value = st.session_state.get(widget_key)
    st.session_state[setting_key] = None if value == automatic else value


TOP_PREDICTION = -1          # a target picker's "the model's top prediction" (its setting None, out of the link)


def target_picker(lm, setting, pick_key: str, top_ids: list[int], label: str, help: str,
                  detail: Callable[[int, str], str] | None = None) -> tuple[int, dict[int, str]]:
    """A box picking the next token to explain: the model's top prediction (the default), one of top_ids, or the
    link's own; its own key pick_key copies into the setting. (the token picked, {id: label}); detail(id, label)
    says more of a candidate."""
    ss = st.session_state
    chosen = ss.get(setting.key)
    target = top_ids[0] if chosen is None else int(chosen)
    options = [TOP_PREDICTION] + top_ids + ([target] if target not in top_ids else [])
    names = dict(zip(options[1:], lm.token_labels(options[1:]), strict=True))
    ss[pick_key] = TOP_PREDICTION if chosen is None else target
    top = _("the top prediction: {token}").format(token=names[top_ids[0]])
    st.selectbox(label, options, key=pick_key, width=330, on_change=follow_pick,
                 args=(pick_key, setting.key, TOP_PREDICTION), help=help,
                 format_func=lambda i: top if i == TOP_PREDICTION else detail(i, names[i]) if detail else names[i])
    return target, names
