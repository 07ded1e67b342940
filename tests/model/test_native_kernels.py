"""Native kernels: the cached and the full pass's attention and SwiGLU against float64 numpy references, the narrower
instruction sets' paths (ATLAS_NATIVE_ISA) against the same references and the widest path's numbers, and the build
falling back to the torch paths (never failing) where no compiler works or ATLAS_NATIVE=0."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from harness.apptest import ROOT
from model.maths import sampling
from model.native import attention
from model.native.build import library
from model.native.softmax_entropy import softmax_entropy, softmax_entropy_rows


def reference_attention(q, keys, values):
    """softmax(q . k / sqrt(hd)) v per head in float64, query head h reading KV head h // (H / KV)."""
    H, hd = q.shape
    group = H // keys.shape[0]
    pattern = np.empty((H, keys.shape[1]))
    out = np.empty((H, hd))
    for h in range(H):
        scores = keys[h // group].astype(np.float64) @ q[h].astype(np.float64) / np.sqrt(hd)
        p = np.exp(scores - scores.max())
        pattern[h] = p / p.sum()
        out[h] = pattern[h] @ values[h // group].astype(np.float64)
    return pattern, out


@pytest.mark.skipif(not attention.available(), reason="no C compiler: torch path")
@pytest.mark.parametrize("heads, kv_heads, hd, lengths, new", [
    (4, 2, 16, [0], [1]), (9, 3, 64, [37, 5, 120], [1, 1, 1]), (8, 8, 16, [300, 1], [1, 1]),
    (6, 2, 32, [0, 9], [7, 3]), (4, 1, 24, [11, 2], [1, 4])])                      # 24: the portable C loops
def test_cached_attention_writes_the_caches_and_matches_float64_for_each_row(heads, kv_heads, hd, lengths, new):
    """Sequences with lengths[s] cached positions get new[s] tokens each (a step: 1; a prompt: several, in order)."""
    rng = np.random.default_rng(len(lengths))
    n_layers, layer = 3, 1
    caches = [(rng.standard_normal((n_layers, kv_heads, n + m + 5, hd)).astype(np.float32) * 3,
               rng.standard_normal((n_layers, kv_heads, n + m + 5, hd)).astype(np.float32))
              for n, m in zip(lengths, new, strict=True)]
    before = [(k.copy(), v.copy()) for k, v in caches]
    seq = [s for s, m in enumerate(new) for _ in range(m)]                         # row -> sequence
    positions = [lengths[s] + i for s, m in enumerate(new) for i in range(m)]
    B = len(seq)
    q = rng.standard_normal((B, heads, hd)).astype(np.float32)
    k_new, v_new = (rng.standard_normal((B, kv_heads, hd)).astype(np.float32) for _ in range(2))
    keep = [b % 2 == 0 for b in range(B)]
    attend = attention.CachedAttention([caches[s][0] for s in seq], [caches[s][1] for s in seq], positions, keep,
                                       heads)
    out = attend(layer, q, k_new, v_new, 1 / np.sqrt(hd))
    for b, (s, p) in enumerate(zip(seq, positions, strict=True)):
        k, v = caches[s]
        assert np.array_equal(k[layer, :, p], k_new[b]) and np.array_equal(v[layer, :, p], v_new[b])
        want_pattern, want_out = reference_attention(q[b], k[layer, :, :p + 1], v[layer, :, :p + 1])
        np.testing.assert_allclose(out[b], want_out, atol=1e-5)
        if keep[b]:
            np.testing.assert_allclose(attend.pattern(b)[layer], want_pattern, atol=1e-6)
    for s, (k, v) in enumerate(caches):                                            # nothing else written
        untouched = np.ones(k.shape[2], bool)
        untouched[lengths[s]:lengths[s] + new[s]] = False
        assert np.array_equal(k[:, :, untouched], before[s][0][:, :, untouched])
        assert np.array_equal(k[[0, 2]], before[s][0][[0, 2]]) and np.array_equal(v[[0, 2]], before[s][1][[0, 2]])
    last = B - 1                                                                   # alone: the same numbers
    s, p = seq[last], positions[last]
    alone = attention.CachedAttention([caches[s][0]], [caches[s][1]], [p], [True], heads)
    alone_out = alone(layer, q[last:], k_new[last:], v_new[last:], 1 / np.sqrt(hd))
    assert np.array_equal(alone_out[0], out[last])


@pytest.mark.skipif(not attention.available(), reason="no C compiler: torch path")
@pytest.mark.parametrize("heads, kv_heads, hd, T, masked", [
    (4, 2, 16, 1, False), (9, 3, 64, 37, False), (6, 2, 32, 50, True), (4, 1, 24, 19, True),   # 24: portable loops
    (14, 2, 64, 40, False), (8, 2, 128, 33, True), (10, 5, 80, 17, False)])   # a KV head's 7, 4 or 2 heads mixed
def test_prompt_attention_matches_float64_under_its_mask_and_holds_the_steps_numbers(heads, kv_heads, hd, T, masked):
    """Every query row of a pass over its allowed keys (a random lower-triangular mask keeping the diagonal, or the
    causal mask): the pattern (0 at every masked or later key), every scaled dot product (later keys too) and the mix
    of values against float64; causal rows bit for bit what a generation step computes from the same vectors."""
    rng = np.random.default_rng(T)
    q = rng.standard_normal((heads, T, hd)).astype(np.float32) * 2
    k, v = (rng.standard_normal((kv_heads, T, hd)).astype(np.float32) for _ in range(2))
    mask = np.tril(rng.random((T, T)) < 0.6 if masked else np.ones((T, T), bool))
    np.fill_diagonal(mask, True)
    pattern = np.full((heads, T, T), np.nan, np.float32)
    scores = np.full((heads, T, T), np.nan, np.float32)
    out = attention.prompt_attention(q, k, v, mask, 1 / np.sqrt(hd), pattern, scores)
    assert out.shape == (T, heads, hd)
    group = heads // kv_heads
    for h in range(heads):
        want_scores = q[h].astype(np.float64) @ k[h // group].astype(np.float64).T / np.sqrt(hd)     # [T, T]
        np.testing.assert_allclose(scores[h], want_scores, atol=1e-5, rtol=1e-5)
        shown = np.where(mask, want_scores, -np.inf)
        want = np.exp(shown - shown.max(-1, keepdims=True))
        want /= want.sum(-1, keepdims=True)
        np.testing.assert_allclose(pattern[h], want, atol=1e-6)
        assert np.all(pattern[h][~mask] == 0)
        np.testing.assert_allclose(out[:, h], want @ v[h // group].astype(np.float64), atol=1e-5)
    if masked:
        return
    cache_k = np.zeros((1, kv_heads, T, hd), np.float32)
    cache_v = np.zeros((1, kv_heads, T, hd), np.float32)
    rows = q.transpose(1, 0, 2).copy()                                             # [T, H, hd]: one token a row
    step = attention.CachedAttention([cache_k] * T, [cache_v] * T, list(range(T)), [True] * T, heads)
    step_out = step(0, rows, k.transpose(1, 0, 2).copy(), v.transpose(1, 0, 2).copy(), 1 / np.sqrt(hd))
    assert np.array_equal(step_out, out)
    for i in range(T):
        assert np.array_equal(step.pattern(i)[0], pattern[:, i, :i + 1])
    no_scores = np.empty_like(pattern)
    assert np.array_equal(attention.prompt_attention(q, k, v, mask, 1 / np.sqrt(hd), no_scores), out)
    assert np.array_equal(no_scores, pattern)
    on_team = np.empty_like(pattern)                                               # rows on torch's OpenMP team
    assert np.array_equal(attention.prompt_attention(q, k, v, mask, 1 / np.sqrt(hd), on_team, torch_threads=2), out)
    assert np.array_equal(on_team, pattern)
    half = np.empty(pattern.shape, np.float16)                                     # a long text's trace
    assert np.array_equal(attention.prompt_attention(q, k, v, mask, 1 / np.sqrt(hd), half), out)
    assert np.array_equal(half.view(np.uint16), pattern.astype(np.float16).view(np.uint16))


@pytest.mark.skipif(not attention.available(), reason="no C compiler: torch path")
def test_prompt_attention_flushes_only_probabilities_below_the_smallest_normal_float():
    """A key scoring ~100 below its row's best gets exactly 0 (a denormal probability costs microcode assists),
    one ~80 below keeps its tiny normal probability, and the row still sums to 1; the caller's own floating-point
    mode is left as it was."""
    q = np.zeros((1, 3, 16), np.float32)
    q[0, 2, 0] = 1.0
    k = np.zeros((1, 3, 16), np.float32)
    k[0, :, 0] = [-100.0, -80.0, 0.0]                                             # scores -100, -80, 0 (scale 1)
    pattern = np.empty((1, 3, 3), np.float32)
    attention.prompt_attention(q, k, k, np.tril(np.ones((3, 3), bool)), 1.0, pattern)
    last = pattern[0, 2]
    assert last[0] == 0.0 and last[1] == pytest.approx(np.exp(-80.0), rel=1e-5) and last[2] == pytest.approx(1.0)
    tiny = np.array([1e-20], np.float32)
    assert (tiny * tiny)[0] > 0                                                    # this thread still makes denormals


@pytest.mark.skipif(not attention.available(), reason="no C compiler: torch path")
def test_prompt_attention_refuses_a_mask_that_lets_a_query_see_a_later_key():
    q = np.ones((2, 3, 16), np.float32)
    kv = np.ones((1, 3, 16), np.float32)
    with pytest.raises(ValueError, match="no later key"):
        attention.prompt_attention(q, kv, kv, np.ones((3, 3), bool), 0.25, np.empty((2, 3, 3), np.float32))


@pytest.mark.skipif(not attention.available(), reason="no C compiler: torch path")
def test_a_full_passs_swiglu_matches_float64_and_each_row_alone():
    """silu(gate) * up of a pass's rows (split across the cores) against float64, and each row as computed alone."""
    from model.native.elementwise import swiglu_rows

    gate_up = (np.random.default_rng(9).standard_normal((37, 2 * 200)) * 6).astype(np.float32)
    gate, up = gate_up[:, :200].astype(np.float64), gate_up[:, 200:].astype(np.float64)
    got = swiglu_rows(gate_up)
    np.testing.assert_allclose(got, gate / (1 + np.exp(-gate)) * up, rtol=1e-6, atol=1e-30)
    assert all(np.array_equal(swiglu_rows(gate_up[t:t + 1])[0], got[t]) for t in (0, 17, 36))
    with pytest.raises(ValueError, match="float32"):
        swiglu_rows(gate_up[:, :199])


@pytest.mark.skipif(not attention.available(), reason="no C compiler: torch path")
@pytest.mark.parametrize("heads, kv_heads, hd, T, torch_threads", [(9, 3, 64, 37, 1), (14, 2, 64, 5, 2),
                                                                    (4, 4, 6, 1, 1)])
def test_split_rotate_is_apply_ropes_numbers_head_major(heads, kv_heads, hd, T, torch_threads):
    """A fused projection's queries and keys rotated as rope.apply_rope rotates them (torch's numbers, bit for bit;
    against float64 within rounding), laid out [heads, T, hd], the values copied, on the pool or torch's team."""
    from model.decoder.rope import apply_rope, rope_cos_sin
    from model.native.elementwise import split_rotate

    rng = np.random.default_rng(T)
    qkv = (rng.standard_normal((T, (heads + 2 * kv_heads) * hd)) * 3).astype(np.float32)
    cos, sin = rope_cos_sin(range(100, 100 + T), hd, 10_000.0)                       # [T, hd / 2] each
    k_rot, v = np.full((kv_heads, T, hd), np.nan, np.float32), np.full((kv_heads, T, hd), np.nan, np.float32)
    q_rot = split_rotate(qkv, cos.numpy(), sin.numpy(), heads, kv_heads, k_rot, v, torch_threads)
    by_head = qkv.reshape(T, heads + 2 * kv_heads, hd).transpose(1, 0, 2)              # [heads + 2 KV, T, hd]
    q, k = by_head[:heads], by_head[heads:heads + kv_heads]
    assert np.array_equal(q_rot, apply_rope(np.ascontiguousarray(q), cos, sin))
    assert np.array_equal(k_rot, apply_rope(np.ascontiguousarray(k), cos, sin))
    assert np.array_equal(v, by_head[heads + kv_heads:])
    half = hd // 2
    c, s_ = cos.double().numpy(), sin.double().numpy()
    x1, x2 = q[..., :half].astype(np.float64), q[..., half:].astype(np.float64)
    np.testing.assert_allclose(q_rot, np.concatenate([x1 * c - x2 * s_, x1 * s_ + x2 * c], -1), atol=1e-5)
    with pytest.raises(ValueError, match="k_rot"):
        split_rotate(qkv, cos.numpy(), sin.numpy(), heads, kv_heads, k_rot[..., :2], v)


def float16_cases() -> np.ndarray:
    """float32 values whose float16 rounding is easy to get wrong: every float16 value, every midpoint between two
    neighbours (ties to even), a float32 step either side of each midpoint, the subnormal and overflow ends, zeros
    and infinities of both signs, and a spread of ordinary values."""
    halves = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)   # 0 .. 65504, every one
    midpoints = ((halves[:-1] + halves[1:]) / 2).astype(np.float32)                       # exact in float32
    around = np.concatenate([np.nextafter(midpoints, np.float32(np.inf)), np.nextafter(midpoints, np.float32(0))])
    ends = np.array([65504, 65519.996, 65520, 65536, 1e9, np.inf, 2.0 ** -24, 2.0 ** -25, 1.5 * 2.0 ** -25,
                     2.0 ** -26, 1e-30, 1e-45, 0.0, 6.1e-5], np.float32)
    spread = (np.random.default_rng(3).standard_normal(20_000) * np.exp(np.random.default_rng(4).uniform(
        -20, 12, 20_000))).astype(np.float32)
    values = np.concatenate([halves.astype(np.float32), midpoints, around, ends, spread])
    return np.concatenate([values, -values])


@pytest.mark.skipif(not attention.available(), reason="no C compiler: torch path")
@pytest.mark.parametrize("portable", [False, True])
def test_float16_conversion_rounds_as_torch_and_numpy_bit_for_bit(portable):
    """half_rows.c's conversion (F16C, and its integer arithmetic) against torch's and numpy's (each IEEE round to
    nearest even, made independently), bit for bit, NaN included (torch's quiet NaN)."""
    import torch

    x = np.concatenate([float16_cases(), np.array([np.nan], np.float32)])
    got = attention.float16_bits(x, portable=portable).view(np.uint16)
    want = torch.from_numpy(x).to(torch.float16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(got, want)
    with np.errstate(over="ignore"):                                               # 65520 and up: inf
        assert np.array_equal(got[:-1], x[:-1].astype(np.float16).view(np.uint16))


@pytest.mark.skipif(not attention.available(), reason="no C compiler: torch path")
def test_the_kept_attention_rows_are_written_as_float16_in_one_call():
    """write_patterns puts each kept row's pattern (every layer) into its float16 array, converted as numpy does, and
    leaves rows not asked for (None) and arrays of a wrong shape alone."""
    rng = np.random.default_rng(11)
    n_layers, heads, kv_heads, hd, lengths = 3, 4, 2, 16, [5, 0, 12]
    caches = [tuple(rng.standard_normal((n_layers, kv_heads, n + 3, hd)).astype(np.float32) for _ in range(2))
              for n in lengths]
    keep = [True, False, True]
    attend = attention.CachedAttention([k for k, _ in caches], [v for _, v in caches], lengths, keep, heads)
    for layer in range(n_layers):
        q = rng.standard_normal((3, heads, hd)).astype(np.float32) * 4
        k_new, v_new = (rng.standard_normal((3, kv_heads, hd)).astype(np.float32) for _ in range(2))
        attend(layer, q, k_new, v_new, 1 / np.sqrt(hd))
    rows = [np.full((n_layers, heads, n + 1), -1, np.float16) if kept else None
            for n, kept in zip(lengths, keep, strict=True)]
    attend.write_patterns(rows)
    for b in (0, 2):
        assert np.array_equal(rows[b].view(np.uint16), attend.pattern(b).astype(np.float16).view(np.uint16))
        assert rows[b].min() >= 0 and np.allclose(rows[b].astype(np.float32).sum(axis=-1), 1, atol=1e-2)
    with pytest.raises(ValueError, match="row 0"):
        attend.write_patterns([np.zeros((n_layers, heads, 5), np.float16), None, None])
    with pytest.raises(ValueError, match="row 1"):
        attend.write_patterns([None, np.zeros((n_layers, heads, 1), np.float16), None])


@pytest.mark.skipif(softmax_entropy(np.zeros(3, np.float32), 1.0) is None, reason="no compiler or no AVX2")
@pytest.mark.parametrize("vocab", [1, 7, 16, 17, 1000, 49_152])
@pytest.mark.parametrize("temperature", [0.05, 0.7, 1.0, 10.0])
def test_softmax_entropy_matches_float64_numpy(vocab, temperature):
    """The step's native softmax and entropy against numpy in float64 (exp(x - max) / sum, -sum p log2 p), for spreads
    from near-uniform to one token taking everything; masked ends (vocabularies not a multiple of 16)."""
    rng = np.random.default_rng(vocab)
    for spread in (0.01, 3.0, 300.0):
        logits = (rng.standard_normal(vocab) * spread).astype(np.float32)
        probs, entropy = softmax_entropy(logits, temperature)
        z = (logits.astype(np.float64) - logits.max()) / temperature
        want = np.exp(z) / np.exp(z).sum()
        seen = want > 1e-300
        np.testing.assert_allclose(probs[seen], want[seen], rtol=1e-12)
        assert np.all(probs[~seen] < 1e-290)
        assert probs.sum() == pytest.approx(1.0, abs=1e-12)
        assert entropy == pytest.approx(-(want[seen] * np.log2(want[seen])).sum(), abs=1e-10)
        assert entropy == pytest.approx(sampling.entropy_bits(sampling.softmax(logits, temperature)), abs=1e-10)


@pytest.mark.skipif(softmax_entropy(np.zeros(3, np.float32), 1.0) is None, reason="no compiler or no AVX2")
def test_softmax_entropy_leaves_infinite_and_nan_logits_to_numpy():
    for bad in (np.inf, -np.inf, np.nan):
        assert softmax_entropy(np.array([0.5, bad, 1.0], np.float32), 1.0) is None


@pytest.mark.skipif(softmax_entropy(np.zeros(3, np.float32), 1.0) is None, reason="no compiler or no AVX2")
@pytest.mark.parametrize("n_rows", [1, 2, 3, 30])
def test_softmax_entropy_rows_give_each_rows_own_call_bit_for_bit(n_rows):
    """A batch's softmaxes in one call, a row a thread at a time: each exactly its own softmax_entropy call, rows
    taken in any order and twice (two temperatures), a row holding inf left to numpy (None) without touching the
    others."""
    rng = np.random.default_rng(n_rows)
    logits = (rng.standard_normal((n_rows, 4099)) * 4).astype(np.float32)
    logits[-1, 7] = np.inf if n_rows > 2 else logits[-1, 7]
    rows = [r for r in range(n_rows) for _ in range(2)][::-1]
    temperatures = [0.7 if i % 2 else 1.0 for i in range(len(rows))]
    got = softmax_entropy_rows(logits, rows, temperatures)
    for (probs_entropy, r, t) in zip(got, rows, temperatures, strict=True):
        alone = softmax_entropy(logits[r], t)
        if alone is None:
            assert probs_entropy is None and n_rows > 2 and r == n_rows - 1
        else:
            assert np.array_equal(probs_entropy[0], alone[0]) and probs_entropy[1] == alone[1]


PROBE = """
import json
from model.native import attention, int8_linear
from model import load_model
lm = load_model()
print(json.dumps({"int8": int8_linear.available(), "attention": attention.available(),
                  "text": lm.generate("Count with me: 1, 2, 3,", max_new_tokens=6, temperature=0).new_text}))
"""


def run_probe(env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_without_a_working_compiler_generation_runs_on_the_torch_path(tmp_path):
    fallback = run_probe({"CC": "/bin/false", "ATLAS_CACHE_DIR": str(tmp_path)})
    off = run_probe({"ATLAS_NATIVE": "0"})
    assert fallback["int8"] is False and fallback["attention"] is False and off["int8"] is False
    assert fallback["text"] == off["text"] and fallback["text"].strip()


SOFTMAX_PROBE = """
import hashlib
import numpy as np
from model.native.build import library
from model.native.softmax_entropy import softmax_entropy, softmax_entropy_rows
rng = np.random.default_rng(0)
digest = hashlib.sha256()
for vocab in (1, 7, 8, 9, 17, 1000, 49_152):
    for temperature in (0.05, 0.7, 1.0, 10.0):
        done = softmax_entropy((rng.standard_normal(vocab) * 3).astype(np.float32), temperature)
        digest.update(b"none" if done is None else done[0].tobytes() + np.float64(done[1]).tobytes())
print(library().int8_linear_level(), digest.hexdigest())
"""


def softmax_digest(isa: str | None) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "ATLAS_NATIVE_ISA"} | ({"ATLAS_NATIVE_ISA": isa} if isa else {})
    done = subprocess.run([sys.executable, "-c", SOFTMAX_PROBE], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    level, digest = done.stdout.split()
    return int(level), digest


@pytest.mark.skipif(not attention.available(), reason="no C compiler")
def test_the_softmax_gives_the_same_numbers_on_avx2_as_on_the_widest_instruction_set():
    """The step's softmax and entropy, bit for bit, on the widest path this CPU runs and with ATLAS_NATIVE_ISA=avx2
    (the same operations per entry, the sums in the same order); `portable` leaves them to numpy."""
    widest, capped, portable = softmax_digest(None), softmax_digest("avx2"), softmax_digest("portable")
    assert capped[0] == min(widest[0], 1) and portable[0] == 0
    if capped[0] == 1:
        assert capped[1] == widest[1]
    assert portable[1] != widest[1]


def avx2_is_what_runs() -> bool:
    """The kernels in this process already take the AVX2 paths (widest path AVX2, or capped there), so a run capped
    at AVX2 would repeat the same tests on the same code, bit for bit."""
    return os.environ.get("ATLAS_NATIVE_ISA", "") in ("", "avx2") and library().int8_linear_level() == 1


@pytest.mark.skipif(not attention.available(), reason="no C compiler")
def test_the_avx2_paths_pass_the_kernel_tests():
    """This file's, the decoder step's and the int8 products' tests again with the kernels capped at AVX2
    (ATLAS_NATIVE_ISA=avx2): on an AVX-512 machine the AVX2 loops (matrix products, softmax, SwiGLU, attention's exp)
    are otherwise never run. Where the kernels take those paths already (a CPU whose widest is AVX2, such as AMD's
    Zen 2 and 3), the other kernel tests of this run were that run: it is not repeated (~50-70 s of a 2-core CI run;
    a skip would fail the run, tests/conftest.py)."""
    if avx2_is_what_runs():
        return
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/model/test_native_kernels.py", "tests/model/test_decoder_step.py",
                           "tests/model/test_int8_blocks.py", "-k",
                           "not test_the_avx2_paths_pass_the_kernel_tests"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "ATLAS_NATIVE_ISA": "avx2"})
    assert done.returncode == 0, done.stdout[-4000:]
    assert " passed" in done.stdout and " failed" not in done.stdout
