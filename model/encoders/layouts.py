"""What a `bert` or `t5` GGUF holds, as llama.cpp's convert_hf_to_gguf.py writes it (classes BertModel and T5Model;
tensor names from gguf-py's TENSOR_NAMES): the metadata keys this app reads or accepts, the config they give, and
every tensor with its shape (torch layout: [out, in]). Anything not named here is refused by model.encoders.reading.
"""
from __future__ import annotations

from collections.abc import Callable

from model.encoders.config import POOLINGS, BertConfig, T5Config

Meta = Callable[[str], object]   # a metadata value by its key without the architecture prefix, None when absent

SHARED_KEYS = {"context_length", "embedding_length", "feed_forward_length", "block_count", "attention.head_count",
               "attention.head_count_kv", "vocab_size"}
KNOWN_KEYS = {
    "bert": SHARED_KEYS | {"attention.layer_norm_epsilon", "attention.causal", "pooling_type"},
    "t5": SHARED_KEYS | {"decoder_block_count", "attention.key_length", "attention.value_length",
                         "attention.layer_norm_epsilon", "attention.layer_norm_rms_epsilon",
                         "attention.relative_buckets_count", "decoder_start_token_id"},
}


def _need(meta: Meta, arch: str, key: str):
    value = meta(key)
    if value is None:
        raise ValueError(f"lacks the metadata key '{arch}.{key}'; it is not a complete {arch} GGUF")
    return value


def _positive(meta: Meta, arch: str, key: str) -> int:
    value = int(_need(meta, arch, key))
    if value < 1:
        raise ValueError(f"sets {arch}.{key} = {value}; it must be at least 1")
    return value


def _heads(meta: Meta, arch: str) -> int:
    heads = _positive(meta, arch, "attention.head_count")
    kv = meta("attention.head_count_kv")
    if kv is not None and int(kv) != heads:
        raise ValueError(f"has {kv} key/value heads for {heads} query heads; a {arch} model has one per head")
    return heads


def bert_config(meta: Meta, n_token_types: int, n_tokens: int, label: str) -> BertConfig:
    """The BertConfig of a file's metadata (ValueError saying what is missing or what this app does not do)."""
    if meta("attention.causal") not in (None, False):
        raise ValueError("sets bert.attention.causal = true: a causal BERT is not the encoder this app computes")
    pooling = int(meta("pooling_type") or 0)
    if pooling not in POOLINGS:
        raise ValueError(f"sets bert.pooling_type = {pooling}; this app knows the poolings "
                         f"{', '.join(f'{k} ({v})' for k, v in POOLINGS.items())} (4, rank, needs a classifier head)")
    d_model, heads = _positive(meta, "bert", "embedding_length"), _heads(meta, "bert")
    if d_model % heads:
        raise ValueError(f"has embedding_length {d_model}, which its {heads} heads do not divide")
    eps = float(_need(meta, "bert", "attention.layer_norm_epsilon"))
    if not 0 < eps < 1:
        raise ValueError(f"sets bert.attention.layer_norm_epsilon = {eps}; it must be in (0, 1)")
    return BertConfig(n_layers=_positive(meta, "bert", "block_count"), n_heads=heads, head_dim=d_model // heads,
                      d_model=d_model, d_ff=_positive(meta, "bert", "feed_forward_length"),
                      vocab_size=int(meta("vocab_size") or n_tokens),
                      max_positions=_positive(meta, "bert", "context_length"), n_token_types=n_token_types,
                      norm_eps=eps, pooling=POOLINGS[pooling], name=label)


def bert_tensor_shapes(cfg: BertConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor of a BERT file, [out, in] for matrices."""
    D, F = cfg.d_model, cfg.d_ff
    shapes: dict[str, tuple[int, ...]] = {
        "token_embd.weight": (cfg.vocab_size, D), "token_types.weight": (cfg.n_token_types, D),
        "position_embd.weight": (cfg.max_positions, D), "token_embd_norm.weight": (D,), "token_embd_norm.bias": (D,)}
    block = {"attn_q": (D, D), "attn_k": (D, D), "attn_v": (D, D), "attn_output": (D, D), "ffn_up": (F, D),
             "ffn_down": (D, F)}
    for i in range(cfg.n_layers):
        for part, (rows, columns) in block.items():
            shapes |= {f"blk.{i}.{part}.weight": (rows, columns), f"blk.{i}.{part}.bias": (rows,)}
        for norm in ("attn_output_norm", "layer_output_norm"):
            shapes |= {f"blk.{i}.{norm}.weight": (D,), f"blk.{i}.{norm}.bias": (D,)}
    return shapes


def t5_config(meta: Meta, names: set[str], n_tokens: int, label: str, tied: bool) -> T5Config:
    """The T5Config of a file's metadata; tied: the LM head holds the embedding table's values (then the decoder's
    output is scaled by d_model**-0.5, as transformers does for a tied T5)."""
    heads = _heads(meta, "t5")
    head_dim = _positive(meta, "t5", "attention.key_length")
    value_length = meta("attention.value_length")
    if value_length is not None and int(value_length) != head_dim:
        raise ValueError(f"has value heads of width {value_length} and key heads of width {head_dim}; a T5 has one "
                         f"width (d_kv)")
    eps = meta("attention.layer_norm_rms_epsilon")
    eps = float(eps if eps is not None else _need(meta, "t5", "attention.layer_norm_epsilon"))
    if not 0 < eps < 1:
        raise ValueError(f"sets t5.attention.layer_norm_rms_epsilon = {eps}; it must be in (0, 1)")
    n_layers = _positive(meta, "t5", "block_count")
    start = meta("decoder_start_token_id")
    vocab = int(meta("vocab_size") or n_tokens)
    if start is not None and not 0 <= int(start) < vocab:
        raise ValueError(f"sets t5.decoder_start_token_id = {start}, outside the vocabulary (0..{vocab - 1})")
    return T5Config(n_layers=n_layers, n_decoder_layers=int(meta("decoder_block_count") or n_layers), n_heads=heads,
                    head_dim=head_dim, d_model=_positive(meta, "t5", "embedding_length"),
                    d_ff=_positive(meta, "t5", "feed_forward_length"), vocab_size=vocab,
                    max_positions=_positive(meta, "t5", "context_length"), norm_eps=eps,
                    relative_buckets=_positive(meta, "t5", "attention.relative_buckets_count"),
                    gated="enc.blk.0.ffn_gate.weight" in names, tied_embeddings=tied, scale_decoder_output=tied,
                    decoder_start_token_id=int(start or 0), name=label)


def t5_tensor_shapes(cfg: T5Config, with_head: bool) -> dict[str, tuple[int, ...]]:
    """Every tensor of a T5 file, [out, in] for matrices; output.weight when with_head (the file has one)."""
    D, F, inner = cfg.d_model, cfg.d_ff, cfg.n_heads * cfg.head_dim
    shapes: dict[str, tuple[int, ...]] = {"token_embd.weight": (cfg.vocab_size, D), "enc.output_norm.weight": (D,),
                                          "dec.output_norm.weight": (D,),
                                          "enc.blk.0.attn_rel_b.weight": (cfg.relative_buckets, cfg.n_heads),
                                          "dec.blk.0.attn_rel_b.weight": (cfg.relative_buckets, cfg.n_heads)}
    if with_head:
        shapes["output.weight"] = (cfg.vocab_size, D)
    attention = {"q": (inner, D), "k": (inner, D), "v": (inner, D), "o": (D, inner)}
    mlp = {"ffn_norm": (D,), "ffn_up": (F, D), "ffn_down": (D, F)} | ({"ffn_gate": (F, D)} if cfg.gated else {})
    for stack, n in (("enc", cfg.n_layers), ("dec", cfg.n_decoder_layers)):
        for i in range(n):
            block = {"attn_norm": (D,)} | {f"attn_{p}": shape for p, shape in attention.items()} | mlp
            if stack == "dec":
                block |= {"cross_attn_norm": (D,)} | {f"cross_attn_{p}": shape for p, shape in attention.items()}
            shapes |= {f"{stack}.blk.{i}.{part}.weight": shape for part, shape in block.items()}
    return shapes
