"""The native decoder step (model/native/decoder_step.c: every block of a RMSNorm / RoPE / SwiGLU model in one call)
against the numpy blocks it replaces, which test_generation / test_architectures hold to transformers: for each
architecture's parts (Qwen2's q/k/v biases, Qwen3's per-head q/k norms and explicit head size, Llama's plain
blocks), every cached step's logits and attention rows agree, and greedy generation equals transformers'."""
import numpy as np
import pytest
import torch

from harness.tiny_gguf import Tiny, write_tiny
from model import load_model
from model.decoder import generation as G
from model.decoder.step_weights import steps_for
from model.native import decoder_step

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


KEPT_QUANTIZED = ["qwen2_q8_0"]      # Q8_0 kept quantized: q / k / v and gate / up separate parts


@pytest.mark.parametrize("name, keep_quantized", [(name, None) for name in CASES] +
                         [(name, True) for name in KEPT_QUANTIZED])
def test_native_blocks_equal_the_numpy_blocks(built, name, keep_quantized):
    lm = load_model(path=built[name][0], keep_quantized=keep_quantized)
    steps = steps_for(lm)
    assert steps.native_blocks is not None, "this model's blocks should run natively"
    assert isinstance(steps.blocks[0].qkv, tuple) == bool(keep_quantized)      # parts multiplied in place
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


@pytest.mark.parametrize("name, keep_quantized", [(name, None) for name in CASES] +
                         [(name, True) for name in KEPT_QUANTIZED])
def test_greedy_generation_equals_transformers(built, name, keep_quantized):
    path, hf = built[name]
    lm = load_model(path=path, keep_quantized=keep_quantized)
    assert steps_for(lm).native_blocks is not None
    ids = lm.encode(TEXT)
    ours = lm.generate(ids, max_new_tokens=10, temperature=0)
    with torch.no_grad():
        theirs = hf.generate(torch.tensor([ids]), max_new_tokens=10, do_sample=False, eos_token_id=None,
                             pad_token_id=0)[0, len(ids):].tolist()
    assert ours.new_token_ids == theirs[:len(ours.new_token_ids)]


@pytest.mark.parametrize("name, keep_quantized", [(name, None) for name in CASES] +
                         [(name, True) for name in KEPT_QUANTIZED])
def test_split_across_any_number_of_threads_gives_the_same_bits(built, monkeypatch, name, keep_quantized):
    """The kernels use every core (model.native.threads), not torch's count: how a call is split must not change
    one bit of a step's logits or attention."""
    lm = load_model(path=built[name][0], keep_quantized=keep_quantized)
    ids = lm.encode(TEXT)
    results = {}
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("ATLAS_KERNEL_THREADS", threads)
        results[threads] = cached_steps(lm, ids, 6)
    for threads in ("2", "3"):
        for ours, alone in zip(results[threads][0] + results[threads][1], results["1"][0] + results["1"][1],
                               strict=True):
            np.testing.assert_array_equal(ours, alone)


def test_gpt2_keeps_the_numpy_blocks(tmp_path):
    path = tmp_path / "gpt2.gguf"
    write_tiny(path, Tiny(arch="gpt2", quant="Q8_0"))
    assert steps_for(load_model(path=path)).native_blocks is None            # LayerNorm, GELU, positions


def swiglu_rows(gate_up: np.ndarray, threads: int) -> np.ndarray:
    """decoder_step.c's SwiGLU pass (the function every step calls) on gate_up [B, 2 F] float32."""
    import ctypes

    from model.native.build import library

    fn = library().swiglu_rows
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int]
    B, F = gate_up.shape[0], gate_up.shape[1] // 2
    act = np.empty((B, F), np.float32)
    fn(gate_up.ctypes.data, act.ctypes.data, B, F, threads)
    return act


def test_swiglu_pass_matches_float64_with_libm_special_cases_and_any_split():
    """silu(g) * u with exp in vector registers: within 4 ulp of float64 over gates of -120..120; inf, NaN, -0 as
    libm gives them; each row the same alone, in a batch, on one or two threads, whatever its length (masked ends)."""
    rng = np.random.default_rng(0)
    F = 1037                                                                     # not a multiple of 16
    gate = np.concatenate([rng.standard_normal(4 * F - 20) * 6, np.linspace(-120, 120, 9),
                           [np.inf, -np.inf, np.nan, 0.0, -0.0, 88.7, -88.7, 103.9, 104.5, -1e-30, 1e-30]])
    gate = gate.astype(np.float32).reshape(4, F)
    up = (rng.standard_normal((4, F)) * 2).astype(np.float32)
    gate_up = np.ascontiguousarray(np.concatenate([gate, up], axis=1))         # [4, 2 F]
    act = swiglu_rows(gate_up, threads=2)
    g, u = gate.astype(np.float64), up.astype(np.float64)
    with np.errstate(all="ignore"):
        want = g / (1 + np.exp(-g)) * u
    finite = np.isfinite(want) & (np.abs(want) > 1e-30)
    ulps = np.abs(act[finite] - want[finite]) / np.spacing(np.abs(want[finite]).astype(np.float32))
    assert ulps.max() <= 4, ulps.max()
    with np.errstate(all="ignore"):                                              # what libm's expf gives
        libm = gate / (np.float32(1) + np.exp(-gate)) * up
    special = ~np.isfinite(libm) | (libm == 0)
    assert special.sum() >= 5
    assert np.array_equal(act[special], libm[special], equal_nan=True)
    assert np.array_equal(np.signbit(act[special]), np.signbit(libm[special]))   # -0 stays -0
    for b in range(4):
        alone = swiglu_rows(np.ascontiguousarray(gate_up[b:b + 1]), threads=1)[0]
        assert np.array_equal(alone.view(np.uint32), act[b].view(np.uint32))              # bit for bit
