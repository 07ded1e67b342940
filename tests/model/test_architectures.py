"""Every supported architecture and quantization type, exact against transformers built from the same weights.

Each tiny model (harness/tiny_gguf.py) is a random transformers model whose weights were stored in a GGUF as the
type under test and set back to the file's dequantized values; our engine reads the file. Next-token logits and
every attention layer must agree within 1e-4 (eager attention, float32), greedy generation must give the same
tokens, and every analysis must run with the architecture's own parts.
"""
import numpy as np
import pytest
import torch

from harness.tiny_gguf import ARCHS, Tiny, write_tiny
from model import load_model
from model.decoder.matrices import QuantizedMatrix

TEXT = "The quick brown fox jumps over the lazy dog in 2024, and then 12 more foxes... It's 3.14159, isn't it?"
QUANTS = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
CASES = {
    **{f"{arch}_f16": Tiny(arch=arch) for arch in ARCHS},
    "qwen3_head_dim": Tiny(arch="qwen3", head_dim=32, n_heads=4, n_kv_heads=1),
    "gpt2_untied_q8": Tiny(arch="gpt2", tied=False, quant="Q8_0"),
    "llama3_rope_freqs": Tiny(arch="llama", llama3_rope=True, rope_theta=500000.0),
    **{f"qwen2_{q.lower()}": Tiny(arch="qwen2", quant=q, d_model=256, n_heads=4, n_kv_heads=2, d_ff=512)
       for q in QUANTS},
    "llama_q4_k": Tiny(arch="llama", quant="Q4_K", d_model=256, n_heads=4, n_kv_heads=2, d_ff=512),
}


class Built(dict):
    """name -> (path, transformers model holding the file's numbers), each written on first use."""

    def __init__(self, folder):
        super().__init__()
        self.folder = folder

    def __missing__(self, name: str):
        path = self.folder / f"{name}.gguf"
        self[name] = (path, write_tiny(path, CASES[name]))
        return self[name]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return Built(tmp_path_factory.mktemp("architectures"))


def reference(hf, ids: list[int]):
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_attentions=True)
    return out.logits[0].numpy(), torch.stack([a[0] for a in out.attentions]).numpy()  # [T, V], [L, H, T, T]


KEPT_QUANTIZED = [f"qwen2_{q.lower()}" for q in QUANTS if q != "F32"] + ["llama_q4_k", "gpt2_untied_q8",
                                                                         "qwen3_head_dim"]


@pytest.mark.parametrize("name", list(CASES))
def test_logits_and_attention_equal_transformers(built, name):
    path, hf = built[name]
    check_against_transformers(load_model(path=path), hf, CASES[name])


@pytest.mark.parametrize("name", KEPT_QUANTIZED)
def test_matrices_kept_quantized_equal_transformers(built, name):
    """The file's blocks kept in memory (as large models are), dequantized a chunk at a time while multiplying."""
    path, hf = built[name]
    lm = load_model(path=path, keep_quantized=True)
    assert isinstance(lm.blocks[0].mlp.w_down, QuantizedMatrix)
    check_against_transformers(lm, hf, CASES[name])


def check_against_transformers(lm, hf, t: Tiny) -> None:
    assert lm.config.architecture == t.arch
    assert (lm.config.n_heads, lm.config.n_kv_heads, lm.config.tied_embeddings) == \
        (t.n_heads, t.n_kv_heads if t.arch != "gpt2" else t.n_heads, t.tied)
    trace = lm.run(TEXT)
    assert len(trace.token_ids) > 20
    logits, attention = reference(hf, trace.token_ids)
    scale = max(1.0, float(np.abs(logits[-1]).max()))
    np.testing.assert_allclose(trace.next_token_logits, logits[-1], atol=1e-4 * scale, rtol=0)
    # The quantized models' random blocks give pre-softmax scores of several tens: a float32 rounding of a score
    # (relative 1e-7, summed over the head) moves a probability by up to ~1e-4 there.
    np.testing.assert_allclose(trace.attention, attention, atol=2e-4, rtol=0)
    log_probs = torch.log_softmax(torch.from_numpy(logits[:-1]).double(), -1).numpy()
    expected = log_probs[np.arange(len(trace.token_ids) - 1), trace.token_ids[1:]]
    np.testing.assert_allclose(lm.token_logprobs(trace), expected, atol=1e-3 * scale, rtol=0)


def test_attention_is_peaked_so_a_row_mix_up_would_show(built):
    for name in ("llama_f16", "qwen2_f16", "qwen3_f16", "gpt2_f16"):
        path, hf = built[name]
        _, attention = reference(hf, load_model(path=path).encode(TEXT))
        rows = np.arange(5, attention.shape[-1])
        uniform = (1 / (rows + 1)).mean()                   # a row's largest weight if it attended evenly
        assert attention[:, :, 5:].max(axis=-1).mean() > 3 * uniform, name  # Qwen3's q/k norms keep it lowest


@pytest.mark.parametrize("name, quantized", [("llama_f16", False), ("qwen2_f16", False), ("qwen3_head_dim", False),
                                             ("gpt2_f16", False), ("llama3_rope_freqs", False),
                                             ("qwen2_q4_k", True), ("gpt2_untied_q8", True)])
def test_greedy_generation_equals_transformers(built, name, quantized):
    path, hf = built[name]
    lm = load_model(path=path, keep_quantized=quantized)
    ids = lm.encode(TEXT)
    ours = lm.generate(ids, max_new_tokens=8, temperature=0)
    with torch.no_grad():
        theirs = hf.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False, eos_token_id=None,
                             pad_token_id=0)[0, len(ids):].tolist()
    assert ours.new_token_ids == theirs[:len(ours.new_token_ids)]


@pytest.mark.parametrize("name, quantized", [("llama_f16", False), ("qwen2_f16", False), ("qwen3_head_dim", False),
                                             ("gpt2_untied_q8", False), ("llama_q4_k", True),
                                             ("gpt2_untied_q8", True)])
def test_every_analysis_runs_with_the_architectures_parts(built, name, quantized):
    path, hf = built[name]
    lm = load_model(path=path, keep_quantized=quantized)
    trace = lm.run(TEXT)
    T = trace.n_tokens
    detail = lm.layer_detail(trace, 1)
    np.testing.assert_allclose(detail.pattern, trace.attention[1], atol=1e-6)
    walk = lm.block_walk(trace, 1, T - 1)
    np.testing.assert_allclose(walk.pattern, trace.attention[1][:, T - 1], atol=1e-6)
    assert (walk.gate is None) == (lm.config.mlp == "gelu")
    assert (walk.attn_norm.bias is None) == (lm.config.norm == "rmsnorm")
    lens = lm.logit_lens(trace)
    np.testing.assert_allclose(lens[-1], trace.next_token_logits, atol=1e-4)
    token = int(np.argmax(trace.next_token_logits))
    attribution = lm.logit_attribution(trace, token)
    assert attribution.total == pytest.approx(attribution.logit, abs=1e-3)
    assert attribution.logit == pytest.approx(float(trace.next_token_logits[token]), abs=1e-3)
    assert (attribution.bias != 0) == (lm.config.architecture == "gpt2")
    np.testing.assert_array_equal(lm.ablate_heads(trace, []), trace.next_token_logits)
    assert not np.allclose(lm.ablate_heads(trace, [(1, 0), (1, 1)]), trace.next_token_logits)
    norms = lm.residual_norms(trace)
    assert norms.resid.shape == (lm.config.n_layers + 1, T)
    # The hidden state after the final norm, from transformers, against the lens's last row input.
    with torch.no_grad():
        hidden = hf(torch.tensor([trace.token_ids]), output_hidden_states=True).hidden_states
    np.testing.assert_allclose(norms.resid[0], torch.linalg.vector_norm(hidden[0][0], dim=-1).numpy(), rtol=1e-5)
