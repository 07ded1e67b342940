"""Every page's settings, declared once: what a share link can carry, with bounds and defaults (pure Python).

A page's widgets use exactly these state keys, so what a user sets is what the link restores. The settings shared
by the model pages (text, layer, head, query token, sink switch) are declared once and reused; `present`
(presenter mode), `lang` (the interface language) and `model` (the model file) are added to every page. A setting's
`when` says on which view it does something: the shell draws only those controls and the link carries only those
settings.
"""
from __future__ import annotations

from dataclasses import replace

from app_core.circuit_pairs import PAIRS
from app_core.examples import default_text
from app_core.link import Choice, Context, Flag, Float, Int, IntList, ModelName, Param, Schema, Text
from model.calculator.params import (
    CUSTOM,
    DEFAULTS,
    ENCODER_DECODER_PRESETS,
    ENCODER_PRESETS,
    LIMITS,
    MAX_BATCH,
    MAX_CONTEXT,
    MLP_KINDS,
    NORM_KINDS,
    POSITIONAL_KINDS,
    PRESETS,
)
from model.maths.flash_attention import BLOCK_CANDIDATES, block_sizes, default_block
from model.maths.sampling import T_MAX, T_MIN
from model.train import PRESETS as TRAIN_PRESETS
from model.train import TrainSettings
from model.train import settings as TS
from viz.text import N_

MAX_TEXT_CHARS = 8_000          # longer texts (typed or from a link) are cut: 512 tokens need far fewer characters
URL_TEXT_LIMIT = 16_000         # URL-encoded characters of text we still put into the share link


def _last_token(ctx: Context) -> int | None:
    """The last token's position (None: no text known yet, no bound)."""
    return None if ctx.n_tokens is None else ctx.n_tokens - 1


def _token_count(ctx: Context) -> int | None:
    return None if ctx.n_tokens is None else max(2, ctx.n_tokens)


TEXT = Text("text", "text", default=default_text(), max_chars=MAX_TEXT_CHARS, url_limit=URL_TEXT_LIMIT)
LAYER = Int("layer", "layer", 0, lo=0, hi=lambda c: c.n_layers - 1)
HEAD = Int("head", "head", 0, lo=0, hi=lambda c: c.n_heads - 1)
QUERY = Int("q", "q", _last_token, lo=0, hi=_last_token)           # default: the last token
SINK = Flag("sink", "sink")
PRESENT = Flag("present", "present")
LANG = Choice("lang", "lang", None, options=("en", "zh"))   # None: the browser's language (app_pages/_i18n)
MODEL = ModelName("model", "model")    # a file of the models folder by name; None: the built-in model
# A lesson's step (app_core/lessons): ?lesson=<id>&step=<n> on any page. Read and written beside a page's own
# settings, not in SCHEMAS: the Generate page's `step` (its generation step) yields the name inside a lesson.
LESSON = Text("lesson", "lesson_id", None, max_chars=64, url_limit=200)
LESSON_STEP = Int("step", "lesson_step", 1, lo=1, hi=40)
SHARED_KEYS = (TEXT.key, LAYER.key, HEAD.key, QUERY.key, SINK.key)   # the shell draws these controls
WHOLE_TEXT_PAGES = ("generate",)     # pages that read the whole text (the others show its first 512 tokens)


def _view_is(key: str, *views: str):
    return lambda state: state.get(key) in views


def _view_is_not(key: str, *views: str):
    return lambda state: state.get(key) not in views


def _with(param: Param, when) -> Param:
    """The same setting, applying only when `when(state)` holds."""
    return replace(param, when=when)


# ------------------------------------------------------------------------------------------------------ Attention
ATTENTION_VIEWS = {"head": N_("One head"), "layer": N_("All heads of a layer"), "model": N_("Whole model"),
                   "query": N_("Query token"), "next": N_("Next token"), "cross": N_("Cross-attention")}
CROSS_STACKS = {"cross": N_("Cross-attention"), "decoder": N_("Decoder self-attention"),
                "encoder": N_("Encoder self-attention")}      # app_core/derived/seq2seq.STACKS
MAX_TARGET_CHARS = 400          # a T5's target (the decoder's input): a few dozen tokens
OVERVIEW_KINDS = ("thumbs", "prev_token", "induction", "sink", "self", "entropy")
_A_VIEW = "attention_view"
ATTENTION = Schema("attention", (
    Choice("view", _A_VIEW, "head", options=tuple(ATTENTION_VIEWS)),
    TEXT,
    _with(LAYER, _view_is_not(_A_VIEW, "next")),
    _with(HEAD, _view_is_not(_A_VIEW, "next")),
    _with(QUERY, _view_is(_A_VIEW, "head", "query")),
    _with(SINK, _view_is_not(_A_VIEW, "next", "cross")),
    Choice("stack", "cross_stack", "cross", options=tuple(CROSS_STACKS), when=_view_is(_A_VIEW, "cross")),
    Text("target", "cross_target", None, max_chars=MAX_TARGET_CHARS, url_limit=2000,   # None: the model's own output
         when=_view_is(_A_VIEW, "cross")),
    Flag("stretch", "attention_stretch", when=_view_is(_A_VIEW, "head", "layer")),
    Choice("color", "attention_overview", "prev_token", options=OVERVIEW_KINDS, when=_view_is(_A_VIEW, "model")),
))

# --------------------------------------------------------------------------------------------------- Causal mask
MASK_TOKENS = 16                # the first N tokens shown by default: cells stay readable on a projector
MASK_VIEWS = {"steps": N_("The mask, step by step"), "compare": N_("With and without a mask")}
MAX_PARTNER_LAYERS = 256        # the compared model's layer and head: bounded by that model (the page clamps them)
_M_VIEW = "mask_view"
_steps = _view_is(_M_VIEW, "steps")
_compare = _view_is(_M_VIEW, "compare")
CAUSAL_MASK = Schema("causal-mask", (
    Choice("view", _M_VIEW, "steps", options=tuple(MASK_VIEWS)),
    TEXT, LAYER, HEAD, _with(SINK, _steps),
    Int("n", "mask_n", lambda c: min(MASK_TOKENS, c.n_tokens or 2), lo=2, hi=_token_count),
    Flag("side", "mask_side", when=_steps),
    Text("enc", "mask_encoder", None, max_chars=160, url_limit=400, when=_compare),   # None: the first BERT offered
    Int("olayer", "mask_other_layer", 0, lo=0, hi=MAX_PARTNER_LAYERS - 1, when=_compare),
    Int("ohead", "mask_other_head", 0, lo=0, hi=MAX_PARTNER_LAYERS - 1, when=_compare),
))

# ------------------------------------------------------------------------------------------ Softmax & temperature
SOFTMAX_SOURCES = {"next": N_("Next-token logits"), "attention": N_("One head's scores")}
MAX_SAMPLES = 100_000
_S_SOURCE = "softmax_source"
_attention_source = _view_is(_S_SOURCE, "attention")
SOFTMAX = Schema("softmax", (
    TEXT,
    Choice("source", _S_SOURCE, "next", options=tuple(SOFTMAX_SOURCES)),
    Float("temp", "temp", 1.0, lo=T_MIN, hi=T_MAX),
    _with(LAYER, _attention_source), _with(HEAD, _attention_source), _with(QUERY, _attention_source),
    _with(SINK, _attention_source),
    Int("top_k", "softmax_top_k", 0, lo=0, hi=lambda c: c.vocab_size),
    Float("top_p", "softmax_top_p", 1.0, lo=0.01, hi=1.0),
    Int("seed", "softmax_seed", 0, lo=0, hi=2**31 - 1),
    Int("draws", "softmax_draws", 1000, lo=1, hi=MAX_SAMPLES),
))

# ---------------------------------------------------------------------------------------- Positional encodings
POSITIONAL_VIEWS = {"sin": N_("Sinusoidal PE"), "rope": N_("RoPE: the rotation"), "model": N_("RoPE inside the model"),
                    "alibi": N_("ALiBi")}
D_MODEL_OPTIONS = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
PE_BASE_OPTIONS = (100, 1_000, 10_000, 100_000, 1_000_000)
MAX_PE_POSITIONS = 2048
DISTANCE_OPTIONS = (512, 2048, 4096, 8192)
_P_VIEW = "positional_view"
MAX_ALIBI_HEADS = 64
_sin, _rope, _model, _alibi = (_view_is(_P_VIEW, v) for v in POSITIONAL_VIEWS)
POSITIONAL = Schema("positional", (
    Choice("view", _P_VIEW, "sin", options=tuple(POSITIONAL_VIEWS)),
    Choice("d", "pos_d_model", 128, options=D_MODEL_OPTIONS, when=_sin),
    Int("positions", "pos_n_positions", 256, lo=16, hi=MAX_PE_POSITIONS, when=_sin),
    Choice("base", "pos_base", 10_000, options=PE_BASE_OPTIONS, when=_sin),
    IntList("dims", "pos_dims", None, lo=0, hi=max(D_MODEL_OPTIONS) - 1, max_items=8, when=_sin),  # None: auto
    Float("rbase", "pos_rot_base", None, lo=100.0, hi=1e8, when=_rope),                          # None: the model's
    Int("rpositions", "pos_rot_positions", 64, lo=2, hi=512, when=_rope),
    Int("pa", "pos_pair_a", 0, lo=0, hi=lambda c: c.head_dim // 2 - 1, when=_rope),
    Int("pb", "pos_pair_b", lambda c: c.head_dim // 4, lo=0, hi=lambda c: c.head_dim // 2 - 1, when=_rope),
    _with(TEXT, _model), _with(LAYER, _model), _with(HEAD, _model), _with(QUERY, _model), _with(SINK, _model),
    Int("k", "pos_key", None, lo=0, hi=_last_token, when=_model),                                # None: strongest
    Choice("dist", "pos_max_distance", 4096, options=DISTANCE_OPTIONS, when=_model),
    Int("aheads", "pos_alibi_heads", lambda c: c.n_heads, lo=1, hi=MAX_ALIBI_HEADS, when=_alibi),
    Int("ahead", "pos_alibi_head", 0, lo=0, hi=MAX_ALIBI_HEADS - 1, when=_alibi),
    Int("apositions", "pos_alibi_positions", 24, lo=4, hi=128, when=_alibi),
    Choice("adist", "pos_alibi_distance", 512, options=DISTANCE_OPTIONS, when=_alibi),
))

# ----------------------------------------------------------------------------------------------------- Parameters
DEFAULT_PRESET = "SmolLM2-135M"
SHAPE_NUMBERS = ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "d_ff", "max_positions")
SHAPE_CHOICES = {"mlp": MLP_KINDS, "norm": NORM_KINDS, "positional": POSITIONAL_KINDS}
SHAPE_FLAGS = ("tied_embeddings", "qkv_bias", "out_bias", "mlp_bias", "qk_norm")
AUTO_FIELDS = ("n_kv_heads", "head_dim", "d_ff")   # empty = automatic (= heads, = d_model / heads, = 4 d_model)
KV_DTYPES = ("fp32", "bf16", "int8", "int4")
COMPARE_OPTIONS = ("shape above", *PRESETS)
_URL_NAMES = {"vocab_size": "vocab", "d_model": "d", "n_layers": "layers", "d_ff": "ff", "n_heads": "heads",
              "n_kv_heads": "kv", "head_dim": "hd", "max_positions": "ctx_max", "mlp": "mlp", "norm": "norm",
              "positional": "pos", "tied_embeddings": "tied", "qkv_bias": "qkv_bias", "out_bias": "out_bias",
              "mlp_bias": "mlp_bias", "qk_norm": "qk_norm"}
PARAMS_KEY = "params_"           # prefix of the Parameters page's state keys: params_<field>
LOADED = "loaded"                # the preset whose shape is the session's model's (read from its file)


def preset_values(name: str) -> dict:
    """Every form field of a preset (DEFAULTS filled in), or the default preset's for 'custom'."""
    return {**DEFAULTS, **PRESETS.get(name, PRESETS[DEFAULT_PRESET])}


def _is_custom(state) -> bool:
    return state.get(PARAMS_KEY + "preset") == CUSTOM


def _shape_params() -> tuple[Param, ...]:
    base = preset_values(DEFAULT_PRESET)
    out: list[Param] = []
    for field in SHAPE_NUMBERS:
        default = None if field in AUTO_FIELDS else base[field]
        out.append(Int(_URL_NAMES[field], PARAMS_KEY + field, default, lo=1, hi=LIMITS[field], when=_is_custom))
    for field, kinds in SHAPE_CHOICES.items():
        out.append(Choice(_URL_NAMES[field], PARAMS_KEY + field, base[field], options=kinds, when=_is_custom))
    for field in SHAPE_FLAGS:
        out.append(Flag(_URL_NAMES[field], PARAMS_KEY + field, bool(base[field]), when=_is_custom))
    return tuple(out)


PARAMETERS = Schema("parameters", (
    Choice("preset", PARAMS_KEY + "preset", DEFAULT_PRESET, options=(*PRESETS, LOADED, CUSTOM)),
    *_shape_params(),
    Int("ctx", PARAMS_KEY + "context", None, lo=1, hi=MAX_CONTEXT),       # None: the shape's max positions
    Int("batch", PARAMS_KEY + "batch", 1, lo=1, hi=MAX_BATCH),
    Choice("kv_dtype", PARAMS_KEY + "kv_dtype", "bf16", options=KV_DTYPES),
    Choice("left", PARAMS_KEY + "cmp_a", "GPT-2 small", options=COMPARE_OPTIONS),
    Choice("right", PARAMS_KEY + "cmp_b", DEFAULT_PRESET, options=COMPARE_OPTIONS),
    # The other families' section (app_pages/calculator_families.py): a BERT / T5 shape ("loaded": the session's
    # BERT or T5), the tokens an encoder reads and a T5 writes.
    Choice("family", PARAMS_KEY + "family", "BERT-base",
           options=(*ENCODER_PRESETS, *ENCODER_DECODER_PRESETS, LOADED)),
    Int("source", PARAMS_KEY + "source", 128, lo=1, hi=MAX_CONTEXT),
    Int("target", PARAMS_KEY + "target", 32, lo=1, hi=MAX_CONTEXT),
))

# -------------------------------------------------------------------------------------------------------- Generate
GENERATE_VIEWS = {"write": N_("Step by step"), "compare": N_("Two temperatures")}
MAX_NEW_TOKENS = 64
_G_VIEW = "generate_view"
_writing = _view_is(_G_VIEW, "write")


def _sampling(state) -> bool:
    """top-k, top-p and the seed act when tokens are drawn: sampled writing, or the temperature comparison."""
    return state.get(_G_VIEW) == "compare" or not state.get("gen_greedy")


GENERATE = Schema("generate", (
    Choice("view", _G_VIEW, "write", options=tuple(GENERATE_VIEWS)),
    TEXT,
    Int("n", "gen_n", 32, lo=1, hi=MAX_NEW_TOKENS),
    Flag("greedy", "gen_greedy", when=_writing),
    Float("temp", "gen_temp", 0.7, lo=T_MIN, hi=T_MAX, when=lambda s: _writing(s) and not s.get("gen_greedy")),
    Int("top_k", "gen_top_k", 0, lo=0, hi=lambda c: c.vocab_size, when=_sampling),
    Float("top_p", "gen_top_p", 1.0, lo=0.01, hi=1.0, when=_sampling),
    Int("seed", "gen_seed", 0, lo=0, hi=2**31 - 1, when=_sampling),
    Int("step", "gen_step", None, lo=0, hi=MAX_NEW_TOKENS - 1, when=_writing),        # None: the last step
    _with(LAYER, _writing), _with(HEAD, _writing), _with(SINK, _writing),
    Float("low", "gen_t_low", 0.3, lo=T_MIN, hi=T_MAX, when=_view_is(_G_VIEW, "compare")),
    Float("high", "gen_t_high", 1.5, lo=T_MIN, hi=T_MAX, when=_view_is(_G_VIEW, "compare")),
))

# -------------------------------------------------------------------------------------------------- Inside a block
INSIDE_VIEWS = {"tokens": N_("Tokenization"), "block": N_("Through one block"), "stream": N_("Residual stream"),
                "lens": N_("Logit lens"), "heads": N_("Which heads matter")}
MAX_ABLATED = 16                # heads switched off at once
_I_VIEW = "inside_view"
_block = _view_is(_I_VIEW, "block")
_heads = _view_is(_I_VIEW, "heads")
INSIDE = Schema("inside", (
    Choice("view", _I_VIEW, "tokens", options=tuple(INSIDE_VIEWS)),
    TEXT,
    Int("piece", "inside_piece", None, lo=0, hi=MAX_TEXT_CHARS - 1, when=_view_is(_I_VIEW, "tokens")),  # None: auto
    _with(LAYER, _block), _with(HEAD, _block), _with(SINK, _block),
    _with(QUERY, _view_is(_I_VIEW, "block", "stream", "lens")),
    Int("target", "inside_target", None, lo=0, hi=lambda c: c.vocab_size - 1, when=_heads),  # None: top prediction
    IntList("off", "inside_off", (), lo=0, hi=lambda c: c.n_layers * c.n_heads - 1, max_items=MAX_ABLATED,
            when=_heads),                                                  # flat head indices layer * n_heads + head
))

# ---------------------------------------------------------------------------------------------- Efficient attention
EFFICIENT_VIEWS = {"flash": N_("FlashAttention, tile by tile"), "masks": N_("Masks on the whole model"),
                   "kv": N_("MHA / GQA / MQA"), "linear": N_("Linear attention")}
MASK_KINDS = ("full", "window", "sink", "strided", "dilated")    # model.maths.sparse_masks.MASK_KINDS
MAX_SINKS = 16
MAX_STRIDE = 64
_E_VIEW = "efficient_view"
_E_MASK = "eff_mask"


def _mask_reads(*kinds: str):
    """The masks view is open and its mask is one of kinds (the ones that read this size)."""
    return lambda state: state.get(_E_VIEW) == "masks" and state.get(_E_MASK, "window") in kinds


def _flash_blocks(ctx: Context) -> tuple[int, ...]:
    """The block sizes offered for this text (model.maths.flash_attention.block_sizes); every candidate while the
    text is not known yet (a link is read before its text is tokenized, then clamped again)."""
    return block_sizes(ctx.n_tokens) if ctx.n_tokens else BLOCK_CANDIDATES


def _most_tiles(ctx: Context) -> int:
    """Tiles of the smallest block size for this text (the causal triangle of blocks): the tile slider's end."""
    n = -(-(ctx.n_tokens or 512) // min(_flash_blocks(ctx)))
    return max(0, n * (n + 1) // 2 - 1)


_head_views = _view_is(_E_VIEW, "flash", "linear")
EFFICIENT = Schema("efficient", (
    Choice("view", _E_VIEW, "flash", options=tuple(EFFICIENT_VIEWS)),
    TEXT,
    _with(LAYER, _head_views), _with(HEAD, _head_views),
    Int("block", "eff_block", lambda c: default_block(c.n_tokens or 512), lo=lambda c: min(_flash_blocks(c)),
        hi=lambda c: max(_flash_blocks(c)), when=_view_is(_E_VIEW, "flash")),
    Int("tile", "eff_tile", None, lo=0, hi=_most_tiles, when=_view_is(_E_VIEW, "flash")),     # None: the last
    Choice("mask", _E_MASK, "window", options=MASK_KINDS, when=_view_is(_E_VIEW, "masks")),
    Int("window", "eff_window", lambda c: min(64, c.n_tokens or 64), lo=1, hi=_token_count,
        when=_mask_reads("window", "sink", "dilated")),
    Int("sinks", "eff_sinks", 4, lo=1, hi=MAX_SINKS, when=_mask_reads("sink")),
    Int("stride", "eff_stride", 8, lo=2, hi=MAX_STRIDE, when=_mask_reads("strided", "dilated")),
))

# ------------------------------------------------------------------------------------------------------------ Train
TRAIN_DEFAULTS = TrainSettings()
TRAIN_HEADS = (1, 2, 3, 4, 6, 8)
NO_COMPARE = "none"
_T_TASK, _T_CMP = "train_task", "train_cmp"


def _not_compared(field: str):
    """The setting applies unless the comparison preset varies it (then each run has its own value)."""
    return lambda state: getattr(TRAIN_PRESETS.get(state.get(_T_CMP)), "field", None) != field


TRAIN = Schema("train", (
    Choice("task", _T_TASK, TRAIN_DEFAULTS.task, options=TS.TASKS),
    _with(TEXT, _view_is(_T_TASK, "text")),
    Choice("cmp", _T_CMP, NO_COMPARE, options=(NO_COMPARE, *TRAIN_PRESETS)),
    Int("layers", "train_layers", TRAIN_DEFAULTS.n_layers, lo=1, hi=TS.MAX_LAYERS, when=_not_compared("n_layers")),
    Choice("d", "train_d", TRAIN_DEFAULTS.d_model, options=TS.WIDTHS),
    Choice("heads", "train_heads", TRAIN_DEFAULTS.n_heads, options=TRAIN_HEADS),
    Int("kv", "train_kv", None, lo=1, hi=TS.MAX_HEADS),                                     # None: as many as heads
    Choice("mlp", "train_mlp", TRAIN_DEFAULTS.mlp, options=TS.MLP_KINDS, when=_not_compared("mlp")),
    Choice("norm", "train_norm", TRAIN_DEFAULTS.norm, options=TS.NORM_KINDS, when=_not_compared("norm")),
    Choice("place", "train_place", TRAIN_DEFAULTS.norm_place, options=TS.NORM_PLACES,
           when=_not_compared("norm_place")),
    Choice("pos", "train_pos", TRAIN_DEFAULTS.positions, options=TS.POSITION_KINDS, when=_not_compared("positions")),
    Int("vocab", "train_vocab", TRAIN_DEFAULTS.vocab_size, lo=TS.MIN_VOCAB, hi=TS.MAX_VOCAB,
        when=_view_is_not(_T_TASK, "text")),
    Int("seq", "train_seq", TRAIN_DEFAULTS.seq_len, lo=TS.MIN_SEQ_LEN, hi=TS.MAX_SEQ_LEN,
        when=_view_is_not(_T_TASK, "modadd")),
    Int("steps", "train_steps", TRAIN_DEFAULTS.steps, lo=1, hi=TS.MAX_STEPS),
    Int("batch", "train_batch", TRAIN_DEFAULTS.batch_size, lo=1, hi=TS.MAX_BATCH),
    Float("lr", "train_lr", TRAIN_DEFAULTS.lr, lo=1e-5, hi=0.1),
    Int("warmup", "train_warmup", TRAIN_DEFAULTS.warmup, lo=0, hi=TS.MAX_STEPS),
    Flag("cosine", "train_cosine", TRAIN_DEFAULTS.cosine),
    Float("clip", "train_clip", TRAIN_DEFAULTS.grad_clip, lo=0.0, hi=10.0),
    Float("wd", "train_wd", TRAIN_DEFAULTS.weight_decay, lo=0.0, hi=1.0),
    Float("init", "train_init", TRAIN_DEFAULTS.init_scale, lo=0.1, hi=10.0),
    Int("seed", "train_seed", TRAIN_DEFAULTS.seed, lo=0, hi=2**31 - 1),
    Choice("side", "train_side", "a", options=("a", "b"), when=_view_is_not(_T_CMP, NO_COMPARE)),
    Int("at", "train_at", None, lo=0, hi=TS.MAX_STEPS),       # the step whose attention is shown (None: the last)
))

# --------------------------------------------------------------------------------------------------------- Circuits
CIRCUITS_VIEWS = {"roles": N_("Head roles"), "patching": N_("Two texts: patching"),
                  "attribution": N_("Which tokens matter")}
HEAD_ROLES = ("previous_token", "induction", "duplicate_token", "sink")   # model.analysis.head_roles.ROLES
PATCH_KINDS = ("resid", "head")                                           # model.analysis.patching.KINDS
MAX_PAIR_CHARS = 600
_C_VIEW = "circuits_view"
_patching = _view_is(_C_VIEW, "patching")
_attributing = _view_is(_C_VIEW, "attribution")
_picking_heads = _view_is(_C_VIEW, "roles", "attribution")
CIRCUITS = Schema("circuits", (
    Choice("view", _C_VIEW, "roles", options=tuple(CIRCUITS_VIEWS)),
    Choice("role", "circ_role", "induction", options=HEAD_ROLES, when=_view_is(_C_VIEW, "roles")),
    _with(LAYER, _picking_heads), _with(HEAD, _picking_heads),
    Text("a", "circ_clean", PAIRS[0].clean, max_chars=MAX_PAIR_CHARS, url_limit=4000, when=_patching),
    Text("b", "circ_corrupt", PAIRS[0].corrupt, max_chars=MAX_PAIR_CHARS, url_limit=4000, when=_patching),
    Text("answer", "circ_answer", PAIRS[0].answer, max_chars=64, url_limit=400, when=_patching),
    Text("foil", "circ_foil", PAIRS[0].foil, max_chars=64, url_limit=400, when=_patching),
    Choice("kind", "circ_kind", "resid", options=PATCH_KINDS, when=_patching),
    _with(TEXT, _attributing),
    Int("target", "circ_target", None, lo=0, hi=lambda c: c.vocab_size - 1, when=_attributing),  # None: top token
))

# ---------------------------------------------------------------------------------------------------------- Lessons
LESSONS = Schema("lessons", ())           # the list of lessons (app_pages/lessons.py): no settings of its own

# ---------------------------------------------------------------------------------------------------------- all
VIEW_LABELS = {"attention": ATTENTION_VIEWS, "causal-mask": MASK_VIEWS, "softmax": SOFTMAX_SOURCES,
               "generate": GENERATE_VIEWS, "inside": INSIDE_VIEWS, "positional": POSITIONAL_VIEWS,
               "efficient": EFFICIENT_VIEWS, "circuits": CIRCUITS_VIEWS}   # each page's views, as its tabs name them
SCHEMAS: dict[str, Schema] = {
    s.page: Schema(s.page, (*s.params, PRESENT, LANG, MODEL))
    for s in (ATTENTION, CAUSAL_MASK, SOFTMAX, GENERATE, INSIDE, POSITIONAL, PARAMETERS, EFFICIENT, TRAIN, LESSONS,
              CIRCUITS)
}

SETTING_KEYS = frozenset(p.key for s in SCHEMAS.values() for p in s.params)   # every setting's state key


def schema(page: str) -> Schema:
    """The schema of a page by its name (its URL path; 'attention' for the default page)."""
    return SCHEMAS[page]
