"""load_model(path) on other llama GGUFs: right (against transformers loading the same file) or refused.

Tiny llama models are initialised at random with transformers (fixed seed), written to GGUF the way llama.cpp's
convert_hf_to_gguf.py does (Q/K rows permuted), with SmolLM2's vocabulary. Each file is checked three ways: the
in-memory transformers model, transformers loading the GGUF (which un-permutes Q/K), and our loader.
"""
from dataclasses import dataclass, field

import gguf
import numpy as np
import pytest
import torch

from harness.tiny_gguf import smollm_vocab
from model import load_model
from model.errors import ModelLoadError

TEXT = ("The quick brown fox jumps over the lazy dog in 2024, and then 12 more foxes... "
        "<|im_start|>user\nIt's 3.14159, isn't it?<|im_end|>\n")


@dataclass(frozen=True)
class Variant:
    n_heads: int = 4
    n_kv_heads: int = 2
    d_model: int = 64
    matrix_type: str = "F16"           # "F16" or "F32" for 2-D weights; norms are always F32
    q8_embeddings: bool = False        # token_embd (and output, when untied) as Q8_0
    tied: bool = True
    rope_theta: float = 10000.0
    pre: str = "smollm"
    add_bos: bool | None = None         # None: no tokenizer.ggml.add_bos_token key
    metadata: dict = field(default_factory=dict)        # extra llama.* keys: name -> (writer method, value)
    extra_tensors: dict = field(default_factory=dict)   # name -> float32 array


VARIANTS = {
    "base": Variant(),
    "untied_q8": Variant(tied=False, q8_embeddings=True, rope_theta=100000.0),
    "float32": Variant(matrix_type="F32"),
    "multi_head": Variant(n_heads=4, n_kv_heads=4),
    "gqa_4_to_1": Variant(n_heads=8, n_kv_heads=2),
    "llama_bpe_bos": Variant(pre="llama-bpe", add_bos=True),
    "gpt2_pre": Variant(pre="gpt-2", q8_embeddings=True, add_bos=False),
}
REFUSED = {
    "rope_scaling_linear": (Variant(metadata={"add_rope_scaling_type": gguf.RopeScalingType.LINEAR,
                                              "add_rope_scaling_factor": 2.0}),
                            r"llama\.rope\.scaling\.type = 'linear'"),
    "rope_scaling_yarn": (Variant(metadata={"add_rope_scaling_type": gguf.RopeScalingType.YARN,
                                            "add_rope_scaling_factor": 4.0}),
                          r"llama\.rope\.scaling\.type = 'yarn'"),
    "rope_factor_without_type": (Variant(metadata={"add_rope_scaling_factor": 8.0}), r"rope\.scaling\.factor = 8\.0"),
    "unknown_tensor": (Variant(extra_tensors={"blk.0.attn_q.bias": np.zeros(64, np.float32)}), r"attn_q\.bias"),
    "unknown_pre_tokenizer": (Variant(pre="mystery-pre"), r"pre-tokenizer 'mystery-pre'"),
}
BOS_ID = 0  # <|endoftext|> in SmolLM2's vocabulary
FIRST_MERGE_ID = 252  # SmolLM2: ids 0-16 control tokens, 17-251 single bytes, then one token per merge
N_MERGES = 6000


@pytest.fixture(scope="module")
def vocab():
    """A valid smaller BPE vocabulary: SmolLM2's control tokens, bytes and first N_MERGES merges (merge i makes
    token 252 + i from earlier tokens), as tokens (str), token types and merges (str)."""
    return smollm_vocab(N_MERGES)


def random_llama(v: Variant, vocab_size: int):
    """A transformers LlamaForCausalLM with weights large enough for peaked attention, rounded to what the file
    stores (float16 matrices, Q8_0 embeddings), so the in-memory model and the file hold the same numbers."""
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=vocab_size, hidden_size=v.d_model, intermediate_size=2 * v.d_model, num_hidden_layers=2,
        num_attention_heads=v.n_heads, num_key_value_heads=v.n_kv_heads, max_position_embeddings=1024,
        rope_theta=v.rope_theta, rms_norm_eps=1e-5, tie_word_embeddings=v.tied, initializer_range=0.25,
        attn_implementation="eager")
    hf = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if p.ndim == 1:
                p.uniform_(0.5, 1.5)                                   # norms: not all ones
            elif "embed_tokens" in name or "lm_head" in name:
                if v.q8_embeddings:
                    q8 = gguf.quants.quantize(p.numpy(), gguf.GGMLQuantizationType.Q8_0)
                    p.copy_(torch.from_numpy(gguf.quants.dequantize(q8, gguf.GGMLQuantizationType.Q8_0)))
                elif v.matrix_type == "F16":
                    p.copy_(p.half().float())
            elif v.matrix_type == "F16":
                p.copy_(p.half().float())
    return hf


def permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf.py LlamaModel.permute: half-split RoPE rows -> interleaved."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def gguf_tensors(hf, v: Variant) -> dict[str, np.ndarray]:
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    out = {}
    for name, p in hf.state_dict().items():
        w = p.numpy().copy()
        if name == "model.embed_tokens.weight":
            out["token_embd.weight"] = w
        elif name == "model.norm.weight":
            out["output_norm.weight"] = w
        elif name == "lm_head.weight":
            if not v.tied:
                out["output.weight"] = w
        else:
            _, _, layer, *rest = name.split(".")
            kind = names[".".join(rest[:-1])]
            if kind == "attn_q":
                w = permute(w, v.n_heads)
            elif kind == "attn_k":
                w = permute(w, v.n_kv_heads)
            out[f"blk.{layer}.{kind}.weight"] = w
    return out


def write_gguf(path, hf, v: Variant, vocab) -> None:
    tokens, token_types, merges = vocab
    cfg = hf.config
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(v.rope_theta)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    w.add_vocab_size(cfg.vocab_size)
    for method, value in v.metadata.items():
        getattr(w, method)(value)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(v.pre)
    w.add_token_list(tokens)
    w.add_token_types(token_types)
    w.add_token_merges(merges)
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(2)
    if v.add_bos is not None:
        w.add_add_bos_token(v.add_bos)
    for name, array in (gguf_tensors(hf, v) | v.extra_tensors).items():
        if array.ndim == 2 and v.q8_embeddings and name in ("token_embd.weight", "output.weight"):
            w.add_tensor(name, gguf.quants.quantize(array, gguf.GGMLQuantizationType.Q8_0),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        elif array.ndim == 2 and v.matrix_type == "F16":
            w.add_tensor(name, array.astype(np.float16))
        else:
            w.add_tensor(name, array.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def files(tmp_path_factory, vocab):
    """name -> (path, in-memory transformers model) for every variant and refusal case."""
    folder = tmp_path_factory.mktemp("gguf_variants")
    out = {}
    for name, v in {**VARIANTS, **{k: v for k, (v, _) in REFUSED.items()}}.items():
        hf = random_llama(v, len(vocab[0]))
        write_gguf(folder / f"{name}.gguf", hf, v, vocab)
        out[name] = (folder / f"{name}.gguf", hf)
    return out


def attentions_and_logits(hf, ids: list[int]):
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_attentions=True)
    return out.logits[0, -1].numpy(), torch.stack([a[0] for a in out.attentions]).numpy()  # [V], [L, H, T, T]


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_matches_transformers_loading_the_same_file(files, name):
    import transformers

    path, original = files[name]
    lm = load_model(path=path)
    v = VARIANTS[name]
    assert (lm.config.n_heads, lm.config.n_kv_heads, lm.config.tied_embeddings) == (v.n_heads, v.n_kv_heads, v.tied)
    trace = lm.run(TEXT)
    assert 40 <= len(trace.token_ids) <= 80
    from_file = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager").eval()
    ref_logits, ref_attention = attentions_and_logits(from_file, trace.token_ids)
    np.testing.assert_allclose(trace.next_token_logits, ref_logits, atol=1e-4, rtol=0)
    np.testing.assert_allclose(trace.attention, ref_attention, atol=1e-4, rtol=0)
    assert ref_attention[:, :, 5:].max(axis=-1).mean() > 0.3  # peaked attention: a Q/K row mix-up would show
    # The file round-trips: transformers' GGUF loader (which un-permutes Q/K) gives back the in-memory model.
    orig_logits, orig_attention = attentions_and_logits(original, trace.token_ids)
    np.testing.assert_allclose(ref_logits, orig_logits, atol=1e-4, rtol=0)
    np.testing.assert_allclose(ref_attention, orig_attention, atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def loaded(files):
    """name -> our LanguageModel, loaded once."""
    return {name: load_model(path=files[name][0]) for name in ("base", "llama_bpe_bos", "gpt2_pre")}


def test_add_bos_token_is_honoured_and_labelled(loaded):
    trace = loaded["llama_bpe_bos"].run("Hello world")
    assert trace.token_ids[0] == BOS_ID and trace.tokens[0] == "<|endoftext|>"
    assert trace.token_ids[1:] == loaded["base"].encode("Hello world")
    assert loaded["gpt2_pre"].encode("Hello")[0] != BOS_ID and loaded["base"].encode("Hello")[0] != BOS_ID


def reference_tokenizer(vocab, pre: str):
    """tokenizers' pipeline for each pre-tokenizer over the same vocabulary, BOS added by a post-processor."""
    import tokenizers
    from tokenizers import pre_tokenizers, processors

    tokens, token_types, merges = vocab
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE(vocab={t: i for i, t in enumerate(tokens)},
                                                     merges=[tuple(m.split(" ")) for m in merges],
                                                     ignore_merges=pre == "llama-bpe"))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=pre != "llama-bpe")
    bpe.pre_tokenizer = {
        "smollm": pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level]),
        "gpt-2": byte_level,
        "llama-bpe": pre_tokenizers.Sequence([pre_tokenizers.Split(tokenizers.Regex(
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+"), behavior="isolated"), byte_level])}[pre]
    bpe.add_special_tokens([tokenizers.AddedToken(t, special=True, normalized=False)
                            for t, kind in zip(tokens, token_types, strict=True) if kind == 3])
    if pre == "llama-bpe":
        bpe.post_processor = processors.TemplateProcessing(single=f"{tokens[BOS_ID]} $A",
                                                           special_tokens=[(tokens[BOS_ID], BOS_ID)])
    return bpe


STRINGS = [TEXT, " in 2024, it's 1234567 people's\n\n  ok", "IT'S (hello) 'LL\tx", "<|im_start|>a<|im_end|>\n",
           "Zürich 東京 🙂 x86_64 foo_bar", "def f(x):\n    return x ** 2\n", "x\n\n   42 and a   1", "a\r\n\r\nb"]


@pytest.mark.parametrize(("name", "pre"), [("base", "smollm"), ("gpt2_pre", "gpt-2"), ("llama_bpe_bos", "llama-bpe")])
def test_pre_tokenizer_comes_from_the_file(loaded, vocab, name, pre):
    """tokenizer.ggml.pre picks the split (same vocabulary in all three files), as tokenizers does it."""
    reference = reference_tokenizer(vocab, pre)
    for text in STRINGS:
        assert loaded[name].encode(text) == reference.encode(text).ids, text
    for other in loaded:  # the split really differs between the files on these strings
        if other != name:
            assert any(loaded[name].encode(t)[1:] != loaded[other].encode(t)[1:] for t in STRINGS), other


@pytest.mark.parametrize("name", list(REFUSED))
def test_unsupported_files_are_refused_naming_what_they_have(files, name):
    with pytest.raises(ModelLoadError, match=REFUSED[name][1]) as error:
        load_model(path=files[name][0])
    assert "not support" in str(error.value)
