"""Named hook points (model/decoder/hooks.py): every point fires once with its shape, hooks that change nothing leave
every number as it was (the native kernels' included), interventions give what a formula worked by hand or
transformers with its own forward hooks on the same weights gives, the README's patching example equals
lm.activation_patching and transformers, and threads calling one model with different hooks each get their own."""
import re
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from model.decoder.hooks import BLOCK_POINTS, MODEL_POINTS, capture
from tests.model.circuits_reference import TinyModels, logit_difference, patching_by_hooks

README = Path(__file__).resolve().parents[2] / "README.md"
TEXT = "When Mary and John went to the store, John gave a drink to"
CORRUPT = "When Mary and John went to the store, Mary gave a drink to"   # one token differs
TINY = ("llama", "qwen3", "gpt2")   # RoPE + SwiGLU + GQA; q/k norms + MQA; learned positions + GELU + biases


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return TinyModels(tmp_path_factory.mktemp("hooks"))


def expected_shapes(lm, B: int, T: int, Tk: int) -> dict[str, tuple[int, ...]]:
    """Each point's shape, from the config (BLOCK_POINTS' and MODEL_POINTS' documentation)."""
    cfg = lm.config
    H, KV, hd, D, F = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_model, cfg.d_ff
    block = {"hook_resid_pre": (B, T, D), "ln1.hook_normalized": (B, T, D), "attn.hook_q": (B, H, T, hd),
             "attn.hook_k": (B, KV, T, hd), "attn.hook_v": (B, KV, T, hd), "attn.hook_rot_q": (B, H, T, hd),
             "attn.hook_rot_k": (B, KV, T, hd), "attn.hook_attn_scores": (B, H, T, Tk),
             "attn.hook_pattern": (B, H, T, Tk), "attn.hook_z": (B, H, T, hd), "hook_attn_out": (B, T, D),
             "hook_resid_mid": (B, T, D), "ln2.hook_normalized": (B, T, D), "mlp.hook_pre": (B, T, F),
             "mlp.hook_pre_linear": (B, T, F), "mlp.hook_post": (B, T, F), "hook_mlp_out": (B, T, D),
             "hook_resid_post": (B, T, D)}
    if cfg.mlp != "swiglu":
        del block["mlp.hook_pre_linear"]
    shapes = {"hook_embed": (B, T, D)} | ({"hook_pos_embed": (B, T, D)} if cfg.positional == "learned" else {})
    shapes |= {f"blocks.{i}.{point}": shape for i in range(cfg.n_layers) for point, shape in block.items()}
    return shapes | {"ln_final.hook_normalized": (B, T, D)}


def recorder(seen: list):
    def record(tensor, hook):
        seen.append((hook.name, tuple(tensor.shape), tensor.dtype))
    return record


@pytest.mark.parametrize("arch", TINY)
def test_every_point_fires_once_in_order_with_its_shape(tiny, arch):
    lm, _ = tiny[arch]
    T = len(lm.encode(TEXT))
    seen = []
    lm.run(TEXT, hooks=dict.fromkeys(lm.hook_names(), recorder(seen)))
    expected = expected_shapes(lm, 1, T, T)
    assert [name for name, _, _ in seen] == list(expected) == lm.hook_names()
    assert {name: shape for name, shape, _ in seen} == expected
    assert {dtype for _, _, dtype in seen} == {torch.float32}


def test_points_of_a_batch_after_shared_positions(tiny):
    """run_blocks over 3 sequences holding positions 5.. after 5 shared ones: keys Tk = T."""
    lm, _ = tiny["llama"]
    ids = torch.tensor([lm.encode(TEXT)] * 3)                                      # [3, T]
    T, n = ids.shape[1], 5
    kept, seen = {}, []
    with torch.inference_mode():
        pos = lm.positions(T)
        lm.run_blocks(lm.embed_tokens(ids[:1]), pos, capture(
            [f"blocks.{i}.attn.{p}" for i in range(lm.config.n_layers) for p in ("hook_rot_k", "hook_v")], kept))
        past = [(kept[f"blocks.{i}.attn.hook_rot_k"][0, :, :n], kept[f"blocks.{i}.attn.hook_v"][0, :, :n])
                for i in range(lm.config.n_layers)]
        names = [name for name in lm.hook_names() if name.startswith("blocks.")]
        lm.run_blocks(lm.embed_tokens(ids)[:, n:], pos.rows_from(n), dict.fromkeys(names, recorder(seen)),
                      past=past)
    expected = {name: shape for name, shape in expected_shapes(lm, 3, T - n, T).items() if name in names}
    assert {name: shape for name, shape, _ in seen} == expected and len(seen) == len(expected)


def assert_same_trace(hooked, plain):
    np.testing.assert_array_equal(hooked.attention, plain.attention)
    np.testing.assert_array_equal(hooked.next_token_logits, plain.next_token_logits)
    np.testing.assert_array_equal(hooked.final_hidden, plain.final_hidden)
    assert hooked.checkpoints.keys() == plain.checkpoints.keys()
    for layer, x in plain.checkpoints.items():
        np.testing.assert_array_equal(hooked.checkpoints[layer], x)


IDENTITIES = {"returns None": lambda t, hook: None, "returns it": lambda t, hook: t,
              "returns a copy": lambda t, hook: t.clone()}


@pytest.mark.parametrize("identity", list(IDENTITIES))
def test_hooks_that_change_nothing_leave_the_trace_bit_identical(lm, identity):
    """The built-in model's pass runs its attention, rotation and SwiGLU in native calls: with a hook at every point
    they still give the same bits (the rotation in torch is the same arithmetic; the native attention's and SwiGLU's
    results are kept where the hook left its input unchanged)."""
    plain = lm.run(TEXT)
    hooked = lm.run(TEXT, hooks=dict.fromkeys(lm.hook_names(), IDENTITIES[identity]))
    assert_same_trace(hooked, plain)
    assert hooked.hooked == tuple(lm.hook_names()) and hooked.keys is None and plain.keys is not None


@pytest.mark.parametrize("arch", TINY)
def test_hooks_that_change_nothing_on_every_architecture(tiny, arch):
    lm, _ = tiny[arch]
    assert_same_trace(lm.run(TEXT, hooks=dict.fromkeys(lm.hook_names(), IDENTITIES["returns a copy"])),
                      lm.run(TEXT))


def test_a_long_text_with_float16_attention(lm):
    """A long text's pattern goes to the trace as float16: a pattern hook sees float32 and the trace keeps the same
    bits as without it."""
    text = " ".join([TEXT] * 40)
    plain = lm.run(text, max_tokens=480)
    assert plain.attention.dtype == np.float16
    assert_same_trace(lm.run(text, max_tokens=480, hooks={"blocks.7.attn.hook_pattern": lambda t, hook: t.clone()}),
                      plain)


def test_zeroing_a_heads_pattern_equals_head_ablation(lm):
    trace = lm.run(TEXT)
    layer, head = 4, 2

    def zero_pattern(pattern, hook):
        pattern[:, head] = 0.0

    def zero_z(z, hook):
        z[:, head] = 0.0

    by_pattern = lm.run(TEXT, hooks={f"blocks.{layer}.attn.hook_pattern": zero_pattern})
    ablated = lm.ablate_heads(trace, [(layer, head)])
    # the other heads' z then come from torch's products instead of the kernel's: float32 rounding apart
    np.testing.assert_allclose(by_pattern.next_token_logits, ablated, atol=2e-4, rtol=0)
    assert np.abs(ablated - trace.next_token_logits).max() > 1e-2                  # the ablation did something
    np.testing.assert_array_equal(by_pattern.attention[layer, head], 0.0)          # the trace keeps what ran
    by_z = lm.run(TEXT, hooks={f"blocks.{layer}.attn.hook_z": zero_z})
    np.testing.assert_array_equal(by_z.next_token_logits, ablated)                # the same operations exactly


def test_a_scores_hook_changes_the_pattern_as_the_softmax_says(tiny):
    """Head 1's scores set to 0 everywhere: its pattern is uniform over the keys it may see, its z the mean of those
    values (worked by hand), and the prediction changes."""
    lm, _ = tiny["llama"]
    layer, head = 1, 1
    kv = head // lm.config.group_size
    seen = {}
    names = [f"blocks.{layer}.attn.{p}" for p in ("hook_pattern", "hook_v", "hook_z")]

    def flat(scores, hook):
        scores[:, head] = 0.0

    hooked = lm.run(TEXT, hooks={f"blocks.{layer}.attn.hook_attn_scores": flat} | capture(names, seen))
    pattern, v, z = (seen[name][0].double().numpy() for name in names)
    T = hooked.n_tokens
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    np.testing.assert_allclose(pattern[head], uniform, atol=1e-7, rtol=0)
    np.testing.assert_allclose(hooked.attention[layer, head], uniform, atol=1e-7, rtol=0)
    np.testing.assert_allclose(z[head], np.cumsum(v[kv], axis=0) / np.arange(1, T + 1)[:, None], atol=1e-5, rtol=0)
    assert np.abs(hooked.next_token_logits - lm.run(TEXT).next_token_logits).max() > 1e-3


def test_mlp_hooks_on_the_built_in_model(lm):
    """A zero gate (SwiGLU's mlp.hook_pre) makes silu(gate) * up and the MLP's output exactly 0."""
    layer = 3
    seen = {}
    names = [f"blocks.{layer}.{p}" for p in ("mlp.hook_post", "hook_mlp_out", "hook_resid_mid", "hook_resid_post")]
    hooked = lm.run(TEXT, hooks={f"blocks.{layer}.mlp.hook_pre": lambda gate, hook: torch.zeros_like(gate)} |
                    capture(names, seen))
    post, out, mid, resid_post = (seen[name] for name in names)
    assert not post.any() and not out.any()
    np.testing.assert_array_equal(resid_post.numpy(), mid.numpy())
    assert np.abs(hooked.next_token_logits - lm.run(TEXT).next_token_logits).max() > 1e-3


def test_a_final_norm_hook_moves_the_logits_by_the_unembedding(lm):
    """logits = W_U h: adding delta to the last position's h adds W_U delta (float64 by hand)."""
    delta = torch.from_numpy(np.random.default_rng(0).normal(0, 0.5, lm.config.d_model).astype(np.float32))

    def shift(h, hook):
        h = h.clone()
        h[0, -1] += delta
        return h

    plain = lm.run(TEXT)
    hooked = lm.run(TEXT, hooks={"ln_final.hook_normalized": shift})
    table = lm.lm_head.dequantized().double().numpy()                              # [V, D]
    np.testing.assert_allclose(hooked.next_token_logits - plain.next_token_logits, table @ delta.double().numpy(),
                               atol=1e-4, rtol=0)
    np.testing.assert_array_equal(hooked.attention, plain.attention)


def readme_example() -> str:
    text = README.read_text()
    found = re.search(r"<!-- hooks-example -->\n```python\n(.*?)```", text, re.S)
    assert found, "README.md lost its hooks example"
    return found[1]


@pytest.mark.parametrize("arch", ["llama", "qwen3"])   # gpt2: the texts barely move its answer
def test_the_readme_example_is_activation_patching(tiny, tmp_path, arch):
    """The README's code, run as written on a tiny GGUF, equals lm.activation_patching (its layer-batched runs after
    the shared prefix) and transformers patching with its own forward hooks on the same weights."""
    lm, hf = tiny[arch]
    code = readme_example()
    assert code.count('load_model("model.gguf")') == 1
    scope = {}
    exec(code.replace('load_model("model.gguf")', f'load_model({str(tiny.folder / f"{arch}.gguf")!r})'), scope)
    effects, answer, foil = scope["effects"], int(scope["answer"]), int(scope["foil"])
    assert effects.shape == (lm.config.n_layers, lm.config.n_heads)
    np.testing.assert_allclose(effects, lm.activation_patching(TEXT, CORRUPT, answer, foil, "head"), atol=1e-4,
                               rtol=0)
    expected = patching_by_hooks(hf, lm.encode(TEXT), lm.encode(CORRUPT), answer, foil, "head")
    np.testing.assert_allclose(effects, expected, atol=1e-3, rtol=0)
    assert np.abs(expected).max() > 0.05                                          # the check can see an effect


def test_stream_patching_by_hooks_equals_transformers(tiny):
    """The residual stream entering block l at position p copied from the clean run by a hook at hook_resid_pre."""
    lm, hf = tiny["qwen3"]
    clean, corrupt = lm.encode(TEXT), lm.encode(CORRUPT)
    answer, foil = int(np.argmax(lm.run_ids(clean).next_token_logits)), int(lm.encode(" John")[-1])
    saved = {}
    lm.run_ids(clean, hooks=capture([f"blocks.{i}.hook_resid_pre" for i in range(lm.config.n_layers)], saved))

    def patch(p):
        def hook(x, point):
            x[:, p] = saved[point.name][:, p]
        return hook

    d_clean = logit_difference(hf, clean, answer, foil)
    d_corrupt = logit_difference(hf, corrupt, answer, foil)
    ours = np.array([[lm.run_ids(corrupt, hooks={name: patch(p)}).next_token_logits[[answer, foil]] @ [1, -1]
                      for p in range(len(clean))] for name in saved])
    expected = patching_by_hooks(hf, clean, corrupt, answer, foil, "resid")
    np.testing.assert_allclose((ours - d_corrupt) / (d_clean - d_corrupt), expected, atol=1e-3, rtol=0)
    assert np.abs(expected).max() > 0.05


def test_the_readme_lists_every_point():
    text = README.read_text()
    section = text[text.index("## Interventions (hook points)"):text.index("<!-- hooks-example -->")]
    for point in list(MODEL_POINTS) + list(BLOCK_POINTS):
        short = point.rsplit(".", 1)[-1]
        assert f"`{point}`" in section or f"`{'blocks.{i}.' + point}`" in section or f"`{short}`" in section, point


def test_unknown_points_and_bad_hooks_are_refused(tiny):
    lm, _ = tiny["gpt2"]
    last = lm.config.n_layers - 1
    suggested = r"did you mean 'blocks\.1\.attn\.hook_pattern'.*blocks\.\{i\}\.hook_resid_pre"
    with pytest.raises(ValueError, match=suggested):
        lm.run(TEXT, hooks={"blocks.1.attn.pattern": lambda t, hook: None})
    with pytest.raises(ValueError, match=f"blocks.0 to blocks.{last}"):
        lm.run(TEXT, hooks={f"blocks.{last + 1}.hook_resid_post": lambda t, hook: None})
    with pytest.raises(ValueError, match="mlp.hook_pre_linear"):                   # GPT-2's MLP has no up branch
        lm.run(TEXT, hooks={"blocks.0.mlp.hook_pre_linear": lambda t, hook: None})
    with pytest.raises(ValueError, match="hook_pos_embed"):                        # a RoPE model has no such point
        tiny["llama"][0].run(TEXT, hooks={"hook_pos_embed": lambda t, hook: None})
    with pytest.raises(ValueError, match="must be a function"):
        lm.run(TEXT, hooks={"blocks.0.hook_resid_pre": 3})
    with pytest.raises(ValueError, match=r"blocks\.0\.attn\.hook_z returned torch\.float32 \(1, 4\)"):
        lm.run(TEXT, hooks={"blocks.0.attn.hook_z": lambda z, hook: z[:, :, 0, 0]})
    with pytest.raises(ValueError, match="returned torch.float64"):
        lm.run(TEXT, hooks={"hook_embed": lambda x, hook: x.double()})


def test_threads_with_different_hooks_each_get_their_own_result(lm):
    """One model, two threads running at once, each with its own hooks, several times: each result is what its
    hooks give alone, and the model is unchanged afterwards."""
    def zero_head(z, hook):
        z[:, 3] = 0.0

    def push(x, hook):
        return x + 0.5

    cases = [{"blocks.2.attn.hook_z": zero_head}, {"blocks.5.hook_resid_post": push, "blocks.9.attn.hook_z": zero_head}]
    alone = [lm.run(TEXT, hooks=hooks).next_token_logits for hooks in cases]
    assert np.abs(alone[0] - alone[1]).max() > 1e-2
    results: list[list[np.ndarray]] = [[], []]

    def work(i):
        for _ in range(3):
            results[i].append(lm.run(TEXT, hooks=cases[i]).next_token_logits)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, expected in zip(results, alone, strict=True):
        assert len(got) == 3
        for logits in got:
            np.testing.assert_array_equal(logits, expected)
    plain = lm.run(TEXT)
    assert plain.hooked == () and plain.keys is not None
