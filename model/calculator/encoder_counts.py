"""Exact parameter counts of the two other families (pure Python, exact ints):

- an encoder (BERT): count_encoder_parameters(**shape) -> EncoderBreakdown
      token + position + token-type embeddings, their LayerNorm -> n_layers x (attention with biases, LayerNorm,
      MLP up / down with biases, LayerNorm) [-> pooler: dense d x d + bias, transformers' BertModel has one]
- an encoder-decoder (T5): count_encoder_decoder_parameters(**shape) -> EncoderDecoderBreakdown
      one shared embedding -> encoder: n_layers x (RMSNorm, attention q/k/v/o without biases, RMSNorm, MLP), a
      relative position bias table (buckets x heads, in block 0 only), a final RMSNorm -> decoder: the same blocks
      with a cross-attention (RMSNorm, q/k/v/o) between attention and MLP, its own bias table and final norm ->
      an LM head (0 when tied to the embedding: the original T5; Flan-T5 / T5 v1.1 have their own).
MLP: "gelu" (BERT: up, down), "relu" (T5 v1.0: up, down), "gated-gelu" (T5 v1.1 / Flan-T5: gate, up, down).

Shape keys: ENCODER_FIELDS / ENCODER_DECODER_FIELDS (checked as the decoder's shape is: ShapeError naming the field).
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

from model.calculator.shape import LIMITS, ShapeError

ENCODER_FIELDS = {"vocab_size": None, "d_model": None, "n_layers": None, "n_heads": None, "d_ff": None,
                  "max_positions": 512, "token_types": 2, "pooler": False}
ENCODER_DECODER_FIELDS = {"vocab_size": None, "d_model": None, "n_layers": None, "n_decoder_layers": None,
                          "n_heads": None, "head_dim": None, "d_ff": None, "mlp": "relu", "relative_buckets": 32,
                          "tied_embeddings": True}
SEQ2SEQ_MLPS = ("relu", "gated-gelu")
EXTRA_LIMITS = {"n_decoder_layers": LIMITS["n_layers"], "token_types": 1_000, "relative_buckets": 100_000}


def _checked(shape: dict, fields: dict, booleans: tuple[str, ...]) -> dict:
    """shape with defaults filled, every field checked (ShapeError naming the first bad one)."""
    for key in shape:
        if key not in fields:
            raise ShapeError(key, f"Unknown shape field {key!r}; known fields: {', '.join(fields)}.")
    values = {**fields, **{k: v for k, v in shape.items() if v is not None}}
    for key, value in values.items():
        if key in booleans:
            if not isinstance(value, bool):
                raise ShapeError(key, f"The setting '{key}' must be on or off, got {value!r}.", "on or off")
            continue
        limit = LIMITS.get(key, EXTRA_LIMITS.get(key))
        if limit is None:
            continue
        if value is None:
            if key in ("n_decoder_layers", "head_dim"):
                continue
            raise ShapeError(key, f"The {key} is required.", "required")
        if isinstance(value, bool) or not isinstance(value, Integral) or not 1 <= value <= limit:
            raise ShapeError(key, f"The {key} must be a whole number from 1 to {limit:,}, got {value!r}.",
                             f"1 to {limit:,}")
        values[key] = int(value)
    return values


# ------------------------------------------------------------------------------------------------------ encoder

@dataclass(frozen=True)
class EncoderBreakdown:
    """Parameters of a BERT-style encoder. `.total` is exact; groups() and parts() split it."""

    shape: dict
    token_embedding: int
    position_embedding: int
    token_type_embedding: int
    embedding_norm: int
    layer_attention: int        # one layer's q, k, v, o with biases
    layer_mlp: int              # one layer's up and down with biases
    layer_norms: int            # one layer's two LayerNorms (weight + bias)
    pooler: int

    @property
    def n_layers(self) -> int:
        return self.shape["n_layers"]

    @property
    def embeddings(self) -> int:
        return self.token_embedding + self.position_embedding + self.token_type_embedding

    @property
    def total(self) -> int:
        return self.embeddings + self.embedding_norm + self.n_layers * (
            self.layer_attention + self.layer_mlp + self.layer_norms) + self.pooler

    def groups(self) -> dict[str, int]:
        """embeddings, attention, mlp, norms, pooler: they sum to .total."""
        n = self.n_layers
        return {"embeddings": self.embeddings, "attention": n * self.layer_attention, "mlp": n * self.layer_mlp,
                "norms": n * self.layer_norms + self.embedding_norm, "pooler": self.pooler}

    def parts(self) -> dict[str, dict[str, int]]:
        """group -> part -> parameters over all layers (zeros dropped), for a treemap."""
        tree = {"embeddings": {"token embedding": self.token_embedding, "position embedding": self.position_embedding,
                               "token-type embedding": self.token_type_embedding},
                **{g: {g: v} for g, v in self.groups().items() if g != "embeddings"}}
        return {g: {k: v for k, v in leaves.items() if v} for g, leaves in tree.items() if any(leaves.values())}


def make_encoder_shape(**shape) -> dict:
    """An encoder shape with its defaults, checked; n_heads must divide d_model."""
    values = _checked(shape, ENCODER_FIELDS, ("pooler",))
    if values["d_model"] % values["n_heads"]:
        raise ShapeError("n_heads", f"The number of heads ({values['n_heads']:,}) must divide the model width "
                                    f"({values['d_model']:,}).", "must divide the width")
    return values


def count_encoder_parameters(**shape) -> EncoderBreakdown:
    """Exact parameter count of a BERT-style encoder (keys: ENCODER_FIELDS).

    >>> count_encoder_parameters(vocab_size=30522, d_model=768, n_layers=12, n_heads=12, d_ff=3072,
    ...                          pooler=True).total      # bert-base-uncased
    109482240
    """
    s = make_encoder_shape(**shape)
    d, f = s["d_model"], s["d_ff"]
    return EncoderBreakdown(
        shape=s, token_embedding=s["vocab_size"] * d, position_embedding=s["max_positions"] * d,
        token_type_embedding=s["token_types"] * d, embedding_norm=2 * d, layer_attention=4 * (d * d + d),
        layer_mlp=d * f + f + f * d + d, layer_norms=4 * d, pooler=d * d + d if s["pooler"] else 0)


# -------------------------------------------------------------------------------------------- encoder-decoder

@dataclass(frozen=True)
class EncoderDecoderBreakdown:
    """Parameters of a T5-style encoder-decoder. `.total` is exact; groups() and parts() split it."""

    shape: dict
    embedding: int                  # shared by the encoder, the decoder (and a tied head)
    attention: int                  # one self-attention's q, k, v, o
    mlp: int                        # one MLP
    norm: int                       # one RMSNorm
    relative_bias: int              # one stack's table (buckets x heads)
    head: int                       # an untied LM head; 0 when tied

    @property
    def encoder(self) -> int:
        """Encoder blocks (attention, MLP, two norms each) and its final norm, without its bias table."""
        return self.shape["n_layers"] * (self.attention + self.mlp + 2 * self.norm) + self.norm

    @property
    def decoder(self) -> int:
        """Decoder blocks' self-attention, MLP, their norms and the final norm (cross-attention apart)."""
        return self.shape["n_decoder_layers"] * (self.attention + self.mlp + 2 * self.norm) + self.norm

    @property
    def cross_attention(self) -> int:
        """Every decoder block's cross-attention q, k, v, o and its norm."""
        return self.shape["n_decoder_layers"] * (self.attention + self.norm)

    @property
    def total(self) -> int:
        return self.embedding + self.encoder + self.decoder + self.cross_attention + 2 * self.relative_bias + \
            self.head

    def groups(self) -> dict[str, int]:
        """embeddings, encoder, decoder, cross-attention, relative bias, head: they sum to .total."""
        return {"embeddings": self.embedding, "encoder": self.encoder, "decoder": self.decoder,
                "cross-attention": self.cross_attention, "relative bias": 2 * self.relative_bias, "head": self.head}

    def parts(self) -> dict[str, dict[str, int]]:
        """group -> part -> parameters (zeros dropped), for a treemap."""
        enc, dec = self.shape["n_layers"], self.shape["n_decoder_layers"]
        tree = {
            "embeddings": {"shared embedding": self.embedding},
            "encoder": {"attention": enc * self.attention, "mlp": enc * self.mlp,
                        "norms": (2 * enc + 1) * self.norm},
            "decoder": {"self-attention": dec * self.attention, "mlp": dec * self.mlp,
                        "norms": (2 * dec + 1) * self.norm},
            "cross-attention": {"q / k / v / o": dec * self.attention, "norms": dec * self.norm},
            "relative bias": {"encoder table": self.relative_bias, "decoder table": self.relative_bias},
            "head": {"lm head": self.head},
        }
        return {g: {k: v for k, v in leaves.items() if v} for g, leaves in tree.items() if any(leaves.values())}


def make_encoder_decoder_shape(**shape) -> dict:
    """An encoder-decoder shape with its defaults (n_decoder_layers: n_layers; head_dim: d_model // n_heads,
    which n_heads must then divide), checked."""
    values = _checked(shape, ENCODER_DECODER_FIELDS, ("tied_embeddings",))
    if values["mlp"] not in SEQ2SEQ_MLPS:
        raise ShapeError("mlp", f"The MLP type must be one of {', '.join(SEQ2SEQ_MLPS)}; got {values['mlp']!r}.",
                         f"one of {', '.join(SEQ2SEQ_MLPS)}")
    if values["head_dim"] is None:
        if values["d_model"] % values["n_heads"]:
            raise ShapeError("n_heads", f"The number of heads ({values['n_heads']:,}) must divide the model width "
                                        f"({values['d_model']:,}) when the head size is automatic.",
                             "must divide the width (or set the head size)")
        values["head_dim"] = values["d_model"] // values["n_heads"]
    if values["n_decoder_layers"] is None:
        values["n_decoder_layers"] = values["n_layers"]
    return values


def count_encoder_decoder_parameters(**shape) -> EncoderDecoderBreakdown:
    """Exact parameter count of a T5-style encoder-decoder (keys: ENCODER_DECODER_FIELDS).

    >>> count_encoder_decoder_parameters(vocab_size=32128, d_model=512, n_layers=6, n_heads=8, d_ff=2048).total
    60506624
    """
    s = make_encoder_decoder_shape(**shape)
    d, inner = s["d_model"], s["n_heads"] * s["head_dim"]
    return EncoderDecoderBreakdown(
        shape=s, embedding=s["vocab_size"] * d, attention=4 * d * inner,
        mlp=(3 if s["mlp"] == "gated-gelu" else 2) * d * s["d_ff"], norm=d,
        relative_bias=s["relative_buckets"] * s["n_heads"], head=0 if s["tied_embeddings"] else s["vocab_size"] * d)


def encoder_shape_from_config(config) -> dict:
    """The count's shape of a loaded BERT (model.encoders.config.BertConfig; a GGUF has no pooler) or T5
    (T5Config)."""
    if config.architecture == "bert":
        return make_encoder_shape(vocab_size=config.vocab_size, d_model=config.d_model, n_layers=config.n_layers,
                                  n_heads=config.n_heads, d_ff=config.d_ff, max_positions=config.max_positions,
                                  token_types=config.n_token_types, pooler=False)
    return make_encoder_decoder_shape(
        vocab_size=config.vocab_size, d_model=config.d_model, n_layers=config.n_layers,
        n_decoder_layers=config.n_decoder_layers, n_heads=config.n_heads, head_dim=config.head_dim, d_ff=config.d_ff,
        mlp="gated-gelu" if config.gated else "relu", relative_buckets=config.relative_buckets,
        tied_embeddings=config.tied_embeddings)


def encoder_decoder_tensor_group(name: str) -> str:
    """Which of EncoderDecoderBreakdown.groups() a T5 GGUF tensor belongs to."""
    if name == "token_embd.weight":
        return "embeddings"
    if name == "output.weight":
        return "head"
    if ".attn_rel_b." in name:
        return "relative bias"
    if ".cross_attn_" in name:
        return "cross-attention"
    if name.startswith(("enc.", "dec.")):
        return "encoder" if name.startswith("enc.") else "decoder"
    raise ValueError(f"unknown T5 GGUF tensor {name!r}")

