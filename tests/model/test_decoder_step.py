"""The native decoder step (model/native/decoder_step.c: every block of a RMSNorm / RoPE / SwiGLU model in one call)
against the numpy blocks it replaces, which test_generation / test_architectures hold to transformers: for each
architecture's parts (Qwen2's q/k/v biases, Qwen3's per-head q/k norms and explicit head size, Llama's plain
blocks), every cached step's logits and attention rows agree, and greedy generation equals transformers'."""
import numpy as np
import pytest
import torch

from model import load_model
from model.decoder import generation as G
from model.native import decoder_step
from tests.tiny_gguf import Tiny, write_tiny

TEXT = "The quick brown fox jumps over the lazy dog in 2024, and then 12 more foxes... It's 3.14159, isn't it?"
CASES = {
    "llama_q4_1": Tiny(arch="llama", quant="Q4_1"),
    "qwen2_q8_0": Tiny(arch="qwen2", quant="Q8_0"),
    "qwen3_q5_0": Tiny(arch="qwen3", quant="Q5_0", head_dim=32, n_heads=4, n_kv_heads=1),
}
pytestmark = pytest.mark.skipif(not decoder_step.available(), reason="no C compiler: the numpy step runs")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("decoder_step")
    return {name: (folder / f"{name}.gguf", write_tiny(folder / f"{name}.gguf", t)) for name, t in CASES.items()}


def cached_steps(lm, ids: list[int], n_new: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Logits [V] and attention rows of the prompt and of n_new greedy steps, with a KV cache."""
    decoder = G.IncrementalDecoder(lm, len(ids) + n_new)
    logits, row = decoder.feed(ids)
    all_logits, rows = [logits], [row]
    for _ in range(n_new):
        logits, row = decoder.feed([int(np.argmax(logits))])
        all_logits.append(logits)
        rows.append(row)
    return all_logits, rows


@pytest.mark.parametrize("name", list(CASES))
def test_native_blocks_equal_the_numpy_blocks(built, name):
    lm = load_model(path=built[name][0])
    steps = G.steps_for(lm)
    assert steps.native_blocks is not None, "this model's blocks should run natively"
    ids = lm.encode(TEXT)
    native_logits, native_rows = cached_steps(lm, ids, 6)
    blocks, steps.native_blocks = steps.native_blocks, None
    try:
        numpy_logits, numpy_rows = cached_steps(lm, ids, 6)
    finally:
        steps.native_blocks = blocks
    for ours, theirs in zip(native_logits, numpy_logits, strict=True):
        np.testing.assert_allclose(ours, theirs, atol=1e-4 * max(1.0, float(np.abs(theirs).max())), rtol=0)
    for ours, theirs in zip(native_rows, numpy_rows, strict=True):
        np.testing.assert_allclose(ours.astype(np.float32), theirs.astype(np.float32), atol=2e-3, rtol=0)


@pytest.mark.parametrize("name", list(CASES))
def test_greedy_generation_equals_transformers(built, name):
    path, hf = built[name]
    lm = load_model(path=path)
    assert G.steps_for(lm).native_blocks is not None
    ids = lm.encode(TEXT)
    ours = lm.generate(ids, max_new_tokens=10, temperature=0)
    with torch.no_grad():
        theirs = hf.generate(torch.tensor([ids]), max_new_tokens=10, do_sample=False, eos_token_id=None,
                             pad_token_id=0)[0, len(ids):].tolist()
    assert ours.new_token_ids == theirs[:len(ours.new_token_ids)]


def test_gpt2_keeps_the_numpy_blocks(tmp_path):
    path = tmp_path / "gpt2.gguf"
    write_tiny(path, Tiny(arch="gpt2", quant="Q8_0"))
    assert G.steps_for(load_model(path=path)).native_blocks is None            # LayerNorm, GELU, positions
