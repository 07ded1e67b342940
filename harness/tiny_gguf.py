"""Tiny random models of every supported architecture, as transformers models and as GGUF files holding the same
numbers (the independent reference for the engine's tests and the app's model-picker tests).

A model is initialised at random with transformers (fixed seed), its weights stored in the file as the chosen
quantization type, and the transformers model's weights replaced by the file's dequantized values (gguf's own
dequantization), so both hold exactly the same numbers. The file is laid out as llama.cpp's convert_hf_to_gguf.py
lays it out: llama's q/k rows permuted, GPT-2's Conv1D weights transposed to (out, in), tensors named as in
llama.cpp. K-quant tensors (which the gguf package cannot quantize) are random valid blocks with small fp16 scales.
The vocabulary is SmolLM2's first merges (the installed default model's), with the pre-tokenizer the test names.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path

import gguf
import numpy as np
import torch

ARCHS = ("llama", "qwen2", "qwen3", "gpt2")
K_TYPES = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
# K-quant blocks: (bytes, [(offset of an fp16 scale, its magnitude)])
K_SCALES = {"Q2_K": (84, [(80, 2e-3), (82, 1e-3)]), "Q3_K": (110, [(108, 2e-3)]),
            "Q4_K": (144, [(0, 1e-3), (2, 1e-3)]), "Q5_K": (176, [(0, 2.5e-4), (2, 2.5e-4)]),
            "Q6_K": (210, [(208, 1e-4)])}
FIRST_MERGE_ID = 252  # SmolLM2: ids 0-16 control tokens, 17-251 single bytes, then one token per merge
BOS_ID, EOS_ID = 1, 2
PRE_TOKENIZER = {"llama": "smollm", "qwen2": "qwen2", "qwen3": "qwen2", "gpt2": "gpt-2"}


@dataclass(frozen=True)
class Tiny:
    """The shape and storage of one tiny model."""

    arch: str = "llama"
    quant: str = "F16"               # type of the 2-D weights; norms and biases are F32
    d_model: int = 64
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int | None = None      # None: d_model / n_heads (qwen3 files write it explicitly)
    d_ff: int = 128
    n_layers: int = 2
    n_merges: int = 2000
    tied: bool = True
    context: int = 256
    rope_theta: float = 10000.0
    llama3_rope: bool = False        # Llama 3.1-style rope scaling, written as a rope_freqs tensor
    metadata: dict = field(default_factory=dict)   # extra GGUFWriter calls: method -> value
    extra_tensors: dict = field(default_factory=dict)

    @property
    def vocab_size(self) -> int:
        return FIRST_MERGE_ID + self.n_merges


def smollm_vocab(n_merges: int) -> tuple[list[str], list[int], list[str]]:
    """SmolLM2's control tokens, bytes and first n_merges merges: (tokens, token types, merges)."""
    tokens, types, merges = _smollm_vocab()
    size = FIRST_MERGE_ID + n_merges
    return list(tokens[:size]), list(types[:size]), list(merges[:n_merges])


@functools.cache
def _smollm_vocab() -> tuple[tuple[str, ...], tuple[int, ...], tuple[str, ...]]:
    """SmolLM2's whole vocabulary, read once per process (parsing the file's 49,152 tokens takes seconds)."""
    from model.files.gguf import default_model_path

    reader = gguf.GGUFReader(default_model_path())
    tokens_field = reader.fields["tokenizer.ggml.tokens"]
    types_field = reader.fields["tokenizer.ggml.token_type"]
    merges_field = reader.fields["tokenizer.ggml.merges"]
    return (tuple(bytes(tokens_field.parts[i]).decode("utf-8") for i in tokens_field.data),
            tuple(int(types_field.parts[i][0]) for i in types_field.data),
            tuple(bytes(merges_field.parts[i]).decode("utf-8") for i in merges_field.data))


def hf_model(t: Tiny):
    """A random transformers model of the architecture (eager attention), weights large enough for peaked
    attention."""
    import transformers

    torch.manual_seed(0)
    common = dict(vocab_size=t.vocab_size, tie_word_embeddings=t.tied, attn_implementation="eager")
    if t.arch == "gpt2":
        config = transformers.GPT2Config(n_positions=t.context, n_embd=t.d_model, n_layer=t.n_layers,
                                         n_head=t.n_heads, n_inner=t.d_ff, activation_function="gelu_new",
                                         layer_norm_epsilon=1e-5, initializer_range=0.25, **common)
        model = transformers.GPT2LMHeadModel(config)
    else:
        cls = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
               "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
               "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM)}[t.arch]
        extra = {"head_dim": t.head_dim or t.d_model // t.n_heads}
        if t.llama3_rope:
            extra["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                     "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
        config = cls[0](hidden_size=t.d_model, intermediate_size=t.d_ff, num_hidden_layers=t.n_layers,
                        num_attention_heads=t.n_heads, num_key_value_heads=t.n_kv_heads,
                        max_position_embeddings=t.context, rope_theta=t.rope_theta, rms_norm_eps=1e-5,
                        initializer_range=0.25, **extra, **common)
        model = cls[1](config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.uniform_(0.5, 1.5) if name.endswith("weight") else p.uniform_(-0.3, 0.3)  # norms, biases
    return model.eval()


def permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf.py LlamaModel.permute: half-split RoPE rows -> interleaved."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def stored(w: np.ndarray, quant: str, rng: np.random.Generator) -> np.ndarray:
    """The raw GGUF data of a 2-D float32 matrix [out, in] stored as quant (K types: random valid blocks)."""
    qtype = gguf.GGMLQuantizationType[quant]
    if quant in K_TYPES:
        block_bytes, scales = K_SCALES[quant]
        n_blocks = w.shape[1] // 256
        raw = rng.integers(0, 256, size=(w.shape[0], n_blocks, block_bytes), dtype=np.uint8)
        for offset, size in scales:
            d = (rng.standard_normal((w.shape[0], n_blocks)) * size).astype(np.float16)
            raw[:, :, offset:offset + 2] = d.view(np.uint8).reshape(w.shape[0], n_blocks, 2)
        return raw.reshape(w.shape[0], n_blocks * block_bytes)
    return gguf.quants.quantize(w, qtype)


def dequantized(raw: np.ndarray, quant: str) -> np.ndarray:
    return np.asarray(gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[quant]), dtype=np.float32)


def _gguf_names(t: Tiny) -> dict[str, str]:
    if t.arch == "gpt2":
        return {"attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "mlp.c_fc": "ffn_up",
                "mlp.c_proj": "ffn_down", "ln_1": "attn_norm", "ln_2": "ffn_norm"}
    return {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
            "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
            "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
            "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm"}


def _gguf_name(t: Tiny, hf_name: str) -> str | None:
    """GGUF tensor name of a transformers parameter (None: not stored, e.g. a tied LM head)."""
    top = {"model.embed_tokens.weight": "token_embd.weight", "transformer.wte.weight": "token_embd.weight",
           "transformer.wpe.weight": "position_embd.weight", "model.norm.weight": "output_norm.weight",
           "transformer.ln_f.weight": "output_norm.weight", "transformer.ln_f.bias": "output_norm.bias",
           "lm_head.weight": None if t.tied else "output.weight"}
    if hf_name in top:
        return top[hf_name]
    parts = hf_name.split(".")
    layer = parts[2]
    module, kind = ".".join(parts[3:-1]), parts[-1]
    return f"blk.{layer}.{_gguf_names(t)[module]}.{kind}"


def llama3_rope_factors(t: Tiny) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf.py LlamaModel.generate_extra_tensors for rope_type llama3."""
    hd = t.head_dim or t.d_model // t.n_heads
    freqs = 1.0 / (t.rope_theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    factor, low, high, old = 8.0, 1.0, 4.0, 32
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def write_tiny(path: Path, t: Tiny, vocab=None, seed: int = 0, sentencepiece: dict | None = None):
    """Write t as a GGUF at path; returns the transformers model holding the file's numbers. sentencepiece: the
    GGUF tokenizer metadata of a SentencePiece vocabulary (harness/trained_vocabs.sentencepiece_meta) written
    instead of SmolLM2's byte-level BPE."""
    if not sentencepiece:
        tokens, types, merges = vocab if vocab is not None else smollm_vocab(t.n_merges)
    model = hf_model(t)
    rng = np.random.default_rng(seed)
    cfg = model.config
    hd = t.head_dim or t.d_model // t.n_heads
    w = gguf.GGUFWriter(str(path), t.arch)
    w.add_block_count(t.n_layers)
    w.add_context_length(t.context)
    w.add_embedding_length(t.d_model)
    w.add_feed_forward_length(t.d_ff)
    w.add_head_count(t.n_heads)
    if t.arch == "gpt2":
        w.add_layer_norm_eps(cfg.layer_norm_epsilon)
    else:
        w.add_head_count_kv(t.n_kv_heads)
        w.add_rope_freq_base(t.rope_theta)
        w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
        w.add_rope_dimension_count(hd)
    if t.head_dim or t.arch == "qwen3":                                      # convert_hf_to_gguf writes it for qwen3
        w.add_key_length(hd)
        w.add_value_length(hd)
    for method, value in t.metadata.items():
        getattr(w, method)(value)
    if sentencepiece:
        _write_sentencepiece(w, sentencepiece)
    else:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(PRE_TOKENIZER[t.arch])
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
        w.add_bos_token_id(BOS_ID)
        w.add_eos_token_id(EOS_ID)
        w.add_add_bos_token(False)
    with torch.no_grad():
        for name, p in model.named_parameters():
            gguf_name = _gguf_name(t, name)
            if gguf_name is None:
                continue
            array = p.numpy().astype(np.float32)
            conv1d = t.arch == "gpt2" and array.ndim == 2 and gguf_name.startswith("blk.")
            if conv1d:
                array = array.T.copy()                                       # Conv1D (in, out) -> (out, in)
            if array.ndim == 1 or gguf_name == "position_embd.weight":
                w.add_tensor(gguf_name, array)
                continue
            raw = stored(array, t.quant, rng)
            values = dequantized(raw, t.quant).reshape(array.shape)
            p.copy_(torch.from_numpy(values.T.copy() if conv1d else values))
            if t.arch == "llama" and gguf_name.endswith(("attn_q.weight", "attn_k.weight")):
                raw = permute(raw, t.n_heads if "attn_q" in gguf_name else t.n_kv_heads)
            if t.quant in ("F32", "F16"):
                w.add_tensor(gguf_name, raw)
            else:
                w.add_tensor(gguf_name, raw, raw_dtype=gguf.GGMLQuantizationType[t.quant])
    if t.llama3_rope:
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(t))
    for name, array in t.extra_tensors.items():
        w.add_tensor(name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model


def _write_sentencepiece(w: gguf.GGUFWriter, meta: dict) -> None:
    """A SentencePiece vocabulary's metadata as convert_hf_to_gguf.py writes it (add_bos left to llama.cpp's
    default, which is true)."""
    key = "tokenizer.ggml."
    w.add_tokenizer_model(meta[key + "model"])
    w.add_tokenizer_pre(meta[key + "pre"])
    w.add_token_list(meta[key + "tokens"])
    w.add_token_scores(meta[key + "scores"])
    w.add_token_types(meta[key + "token_type"])
    w.add_bos_token_id(meta[key + "bos_token_id"])
    w.add_eos_token_id(meta[key + "eos_token_id"])
    w.add_unk_token_id(meta[key + "unknown_token_id"])
