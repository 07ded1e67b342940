"""Published model shapes (PRESETS: decoders, each its config.json; ENCODER_PRESETS and ENCODER_DECODER_PRESETS:
BERT and T5, for model.calculator.encoder_counts), the loaded model's shape (shape_from_config) and a GGUF file's
tensors by parameter group."""
from __future__ import annotations

from model.calculator.shape import Shape, make_shape

# -------------------------------------------------------------------------------------------------------- presets

_GPT2 = dict(vocab_size=50257, mlp="gelu", norm="layernorm", positional="learned", max_positions=1024,
             tied_embeddings=True, qkv_bias=True, out_bias=True, mlp_bias=True)
_LLAMA = dict(mlp="swiglu", norm="rmsnorm", positional="rope")

# name -> shape keyword arguments. Each is the model's published config.json (tests rebuild them with transformers
# on the meta device and compare). Shapes from the Hugging Face repos named in PRESET_SOURCES.
PRESETS: dict[str, dict] = {
    "GPT-2 small": dict(_GPT2, d_model=768, n_layers=12, n_heads=12, d_ff=3072),
    "GPT-2 medium": dict(_GPT2, d_model=1024, n_layers=24, n_heads=16, d_ff=4096),
    "GPT-2 large": dict(_GPT2, d_model=1280, n_layers=36, n_heads=20, d_ff=5120),
    "GPT-2 XL": dict(_GPT2, d_model=1600, n_layers=48, n_heads=25, d_ff=6400),
    "Llama-2-7B": dict(_LLAMA, vocab_size=32000, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32, d_ff=11008,
                       max_positions=4096, tied_embeddings=False),
    "Llama-3-8B": dict(_LLAMA, vocab_size=128256, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, d_ff=14336,
                       max_positions=8192, tied_embeddings=False),
    "Mistral-7B": dict(_LLAMA, vocab_size=32000, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, d_ff=14336,
                       max_positions=32768, tied_embeddings=False),
    "Qwen3-8B": dict(_LLAMA, vocab_size=151936, d_model=4096, n_layers=36, n_heads=32, n_kv_heads=8, head_dim=128,
                     d_ff=12288, max_positions=40960, tied_embeddings=False, qk_norm=True),
    "Qwen2.5-0.5B": dict(_LLAMA, vocab_size=151936, d_model=896, n_layers=24, n_heads=14, n_kv_heads=2, d_ff=4864,
                         max_positions=32768, tied_embeddings=True, qkv_bias=True),
    "TinyLlama-1.1B": dict(_LLAMA, vocab_size=32000, d_model=2048, n_layers=22, n_heads=32, n_kv_heads=4, d_ff=5632,
                           max_positions=2048, tied_embeddings=False),
    "SmolLM2-135M": dict(_LLAMA, vocab_size=49152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3, d_ff=1536,
                         max_positions=8192, tied_embeddings=True),
}
PRESET_SOURCES = {
    "GPT-2 small": "openai-community/gpt2",
    "GPT-2 medium": "openai-community/gpt2-medium",
    "GPT-2 large": "openai-community/gpt2-large",
    "GPT-2 XL": "openai-community/gpt2-xl",
    "Llama-2-7B": "meta-llama/Llama-2-7b-hf",
    "Llama-3-8B": "meta-llama/Meta-Llama-3-8B",
    "Mistral-7B": "mistralai/Mistral-7B-v0.1",
    "Qwen3-8B": "Qwen/Qwen3-8B",
    "Qwen2.5-0.5B": "Qwen/Qwen2.5-0.5B",
    "TinyLlama-1.1B": "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T",
    "SmolLM2-135M": "HuggingFaceTB/SmolLM2-135M",
}
CUSTOM = "custom"

# BERT and T5 (count_encoder_parameters / count_encoder_decoder_parameters keys), each its repository's config.json.
# A BertModel has a pooler (a GGUF of it does not); the original T5 ties its head, T5 v1.1 / Flan-T5 do not.
_BERT = dict(vocab_size=30522, max_positions=512, token_types=2, pooler=True)
_FLAN = dict(vocab_size=32128, head_dim=64, mlp="gated-gelu", relative_buckets=32, tied_embeddings=False)
_T5 = dict(vocab_size=32128, head_dim=64, mlp="relu", relative_buckets=32, tied_embeddings=True)
ENCODER_PRESETS: dict[str, dict] = {
    "BERT-base": dict(_BERT, d_model=768, n_layers=12, n_heads=12, d_ff=3072),
    "BERT-large": dict(_BERT, d_model=1024, n_layers=24, n_heads=16, d_ff=4096),
}
ENCODER_DECODER_PRESETS: dict[str, dict] = {
    "T5-small": dict(_T5, d_model=512, n_layers=6, n_heads=8, d_ff=2048),
    "T5-base": dict(_T5, d_model=768, n_layers=12, n_heads=12, d_ff=3072),
    "flan-t5-small": dict(_FLAN, d_model=512, n_layers=8, n_heads=6, d_ff=1024),
    "flan-t5-base": dict(_FLAN, d_model=768, n_layers=12, n_heads=12, d_ff=2048),
}
FAMILY_PRESET_SOURCES = {
    "BERT-base": "google-bert/bert-base-uncased",
    "BERT-large": "google-bert/bert-large-uncased",
    "T5-small": "google-t5/t5-small",
    "T5-base": "google-t5/t5-base",
    "flan-t5-small": "google/flan-t5-small",
    "flan-t5-base": "google/flan-t5-base",
}


def shape_from_config(config) -> Shape:
    """The Shape of a loaded model (model.decoder.config.ModelConfig): its norm, positions, MLP, biases, q/k norm."""
    return make_shape(vocab_size=config.vocab_size, d_model=config.d_model, n_layers=config.n_layers,
                      n_heads=config.n_heads, n_kv_heads=config.n_kv_heads, head_dim=config.head_dim,
                      d_ff=config.d_ff, mlp=config.mlp, norm=config.norm, positional=config.positional,
                      max_positions=config.max_positions, tied_embeddings=config.tied_embeddings,
                      qkv_bias=config.qkv_bias, out_bias=config.out_bias, mlp_bias=config.mlp_bias,
                      qk_norm=config.qk_norm)


def gguf_tensor_group(name: str) -> str:
    """Which of Breakdown.groups() a decoder's (or a BERT's) GGUF tensor belongs to (token_embd, blk.N.attn_q,
    ffn_up, output, ...)."""
    leaf = name.split(".")[-2] if name.count(".") else name
    if leaf in ("token_embd", "position_embd", "token_types"):
        return "embeddings"
    if leaf == "output":
        return "head"
    if "norm" in leaf:
        return "norms"
    if leaf.startswith("attn_"):
        return "attention"
    if leaf.startswith("ffn_"):
        return "mlp"
    raise ValueError(f"unknown GGUF tensor {name!r}")


def tensor_group_sums(tensor_sizes: dict[str, int]) -> dict[str, int]:
    """Parameters per group (gguf_tensor_group; 'other' for a tensor it does not know) of a model file's tensors."""
    sums: dict[str, int] = {}
    for name, n in tensor_sizes.items():
        try:
            group = gguf_tensor_group(name)
        except ValueError:
            group = "other"
        sums[group] = sums.get(group, 0) + int(n)
    return sums
