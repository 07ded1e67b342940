"""What each supported GGUF architecture is made of: its block parts, its metadata keys and its tensors.

One description per architecture (the values follow llama.cpp's convert_hf_to_gguf.py and src/llama-arch.cpp);
model.files.gguf reads a file through it and model.decoder builds one decoder from the ModelConfig it yields.
Anything a description does not name is refused: a tensor or a key this app would silently ignore would make its
numbers wrong.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from model.decoder.config import ModelConfig

Meta = Callable[[str], object]   # a metadata value by its key without the architecture prefix, None when absent


@dataclass(frozen=True)
class Architecture:
    """The parts of one GGUF architecture's blocks and what its files carry."""

    name: str
    norm: str                      # "rmsnorm" | "layernorm"
    positional: str                # "rope" | "learned"
    mlp: str                       # "swiglu" | "gelu"
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    permuted_qk: bool = False      # the converter reordered q/k rows for interleaved RoPE (llama only)
    fused_qkv: bool = False        # the file holds one attn_qkv tensor (gpt2) instead of attn_q / attn_k / attn_v
    optional_rope_freqs: bool = False  # may carry rope_freqs (Llama 3.1 / 3.2 long-context RoPE factors)

    @property
    def eps_key(self) -> str:
        return "attention.layer_norm_rms_epsilon" if self.norm == "rmsnorm" else "attention.layer_norm_epsilon"

    @property
    def known_keys(self) -> frozenset[str]:
        """Metadata keys (without the prefix) the decoder reads, or that change nothing it computes."""
        keys = {"context_length", "embedding_length", "block_count", "feed_forward_length", "vocab_size",
                "attention.head_count", "attention.head_count_kv", "attention.key_length", "attention.value_length",
                self.eps_key}
        if self.positional == "rope":
            keys |= {"rope.freq_base", "rope.dimension_count", "rope.scaling.original_context_length",
                     "rope.scaling.finetuned"}
        return frozenset(keys)

    def config(self, meta: Meta, names: set[str], n_tokens: int, label: str) -> ModelConfig:
        """The ModelConfig of a file, from its metadata (ValueError naming what is missing or inconsistent)."""
        def need(key: str):
            value = meta(key)
            if value is None:
                raise ValueError(f"lacks the metadata key '{self.name}.{key}'; it is not a complete {self.name} GGUF")
            return value

        d_model = int(need("embedding_length"))
        n_heads = int(need("attention.head_count"))
        key_length = meta("attention.key_length")
        if key_length is None and d_model % n_heads:
            raise ValueError(f"embedding_length {d_model} is not a multiple of head_count {n_heads} and there is "
                             f"no {self.name}.attention.key_length")
        head_dim = int(key_length) if key_length is not None else d_model // n_heads
        value_length = meta("attention.value_length")
        if value_length is not None and int(value_length) != head_dim:
            raise ValueError(f"has value heads of width {value_length} and query/key heads of width {head_dim}; "
                             f"this app does not support heads of different widths")
        rope_dims = meta("rope.dimension_count")
        if self.positional == "rope" and rope_dims is not None and int(rope_dims) != head_dim:
            raise ValueError(f"applies RoPE to {rope_dims} of the {head_dim} dimensions of each head "
                             f"({self.name}.rope.dimension_count); this app does not support partial RoPE")
        n_kv = meta("attention.head_count_kv")
        return ModelConfig(
            n_layers=int(need("block_count")), n_heads=n_heads, n_kv_heads=int(n_kv) if n_kv else n_heads,
            head_dim=head_dim, d_model=d_model, d_ff=int(need("feed_forward_length")),
            vocab_size=int(meta("vocab_size") or n_tokens),
            rope_theta=float(meta("rope.freq_base") or 10000.0) if self.positional == "rope" else None,
            norm_eps=float(need(self.eps_key)), max_positions=int(need("context_length")),
            tied_embeddings="output.weight" not in names, name=label, architecture=self.name, norm=self.norm,
            positional=self.positional, mlp=self.mlp, qkv_bias=self.qkv_bias, out_bias=self.out_bias,
            mlp_bias=self.mlp_bias, qk_norm=self.qk_norm,
            rope_scaled=self.optional_rope_freqs and "rope_freqs.weight" in names)

    def tensor_shapes(self, cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
        """Every tensor the decoder reads, with its shape in torch layout (out, in); output.weight only when untied,
        rope_freqs only when the file has it."""
        D, hd, F = cfg.d_model, cfg.head_dim, cfg.d_ff
        q_rows, kv_rows = cfg.n_heads * hd, cfg.n_kv_heads * hd
        shapes: dict[str, tuple[int, ...]] = {"token_embd.weight": (cfg.vocab_size, D), "output_norm.weight": (D,)}
        if self.norm == "layernorm":
            shapes["output_norm.bias"] = (D,)
        if not cfg.tied_embeddings:
            shapes["output.weight"] = (cfg.vocab_size, D)
        if self.positional == "learned":
            shapes["position_embd.weight"] = (cfg.max_positions, D)
        if cfg.rope_scaled:
            shapes["rope_freqs.weight"] = (hd // 2,)
        block: dict[str, tuple[int, ...]] = {"attn_norm.weight": (D,), "ffn_norm.weight": (D,),
                                             "attn_output.weight": (D, q_rows), "ffn_down.weight": (D, F),
                                             "ffn_up.weight": (F, D)}
        if self.fused_qkv:
            block["attn_qkv.weight"] = (q_rows + 2 * kv_rows, D)
        else:
            block |= {"attn_q.weight": (q_rows, D), "attn_k.weight": (kv_rows, D), "attn_v.weight": (kv_rows, D)}
        if self.norm == "layernorm":
            block |= {"attn_norm.bias": (D,), "ffn_norm.bias": (D,)}
        if self.qkv_bias:
            block |= ({"attn_qkv.bias": (q_rows + 2 * kv_rows,)} if self.fused_qkv else
                      {"attn_q.bias": (q_rows,), "attn_k.bias": (kv_rows,), "attn_v.bias": (kv_rows,)})
        if self.out_bias:
            block["attn_output.bias"] = (D,)
        if self.mlp == "swiglu":
            block["ffn_gate.weight"] = (F, D)
        if self.mlp_bias:
            block |= {"ffn_up.bias": (F,), "ffn_down.bias": (D,)}
        if self.qk_norm:
            block |= {"attn_q_norm.weight": (hd,), "attn_k_norm.weight": (hd,)}
        for i in range(cfg.n_layers):
            shapes.update({f"blk.{i}.{name}": shape for name, shape in block.items()})
        return shapes


ARCHITECTURES = {
    "llama": Architecture("llama", "rmsnorm", "rope", "swiglu", permuted_qk=True, optional_rope_freqs=True),
    "qwen2": Architecture("qwen2", "rmsnorm", "rope", "swiglu", qkv_bias=True),
    "qwen3": Architecture("qwen3", "rmsnorm", "rope", "swiglu", qk_norm=True),
    "gpt2": Architecture("gpt2", "layernorm", "learned", "gelu", qkv_bias=True, out_bias=True, mlp_bias=True,
                         fused_qkv=True),
}
# Metadata that is fine only at its neutral values (anything else changes the maths: RoPE scaling, experts, ...).
NEUTRAL_VALUES = {"rope.scaling.type": ("none",), "rope.scaling.factor": (0.0, 1.0), "rope.scale_linear": (0.0, 1.0),
                  "expert_count": (0,), "expert_used_count": (0,), "attention.sliding_window": (0,),
                  "attn_logit_softcapping": (0.0,), "final_logit_softcapping": (0.0,)}
# Every architecture this app loads and its family: the decoders above (model.files.gguf) and the encoders
# (model.encoders: BERT and T5, as llama.cpp's converter writes them).
FAMILIES = {**{name: "decoder" for name in ARCHITECTURES}, "bert": "encoder", "t5": "encoder-decoder"}


def family(architecture: str) -> str | None:
    """"decoder", "encoder" or "encoder-decoder" for an architecture this app loads, None for another."""
    return FAMILIES.get(architecture)
