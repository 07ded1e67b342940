"""The "Inside a block" engine: block walk, residual norms, logit lens, direct logit attribution, head ablation.

References: the forward pass's own records (trace checkpoints, attention, logits: bit-equality), transformers
loading the same GGUF (hooks on its modules, hidden states, o_proj columns zeroed by hand), and hand formulas.
"""
import threading
from contextlib import contextmanager

import numpy as np
import pytest
import torch

from model.decoder.core import CHECKPOINT_EVERY

TEXTS = {
    "hobbit": "In a hole in the ground there lived a hobbit. Not a nasty, dirty, wet hole, filled with the ends of "
              "worms and an oozy smell, nor yet a dry, bare, sandy hole with nothing in it to sit down on or to eat.",
    "code": "def fibonacci(n: int) -> list[int]:\n    seq = [0, 1]\n    while len(seq) < n:\n        "
            "seq.append(seq[-1] + seq[-2])\n    return seq[:n]\n",
}


@pytest.fixture(scope="module")
def traces(lm):
    return {name: lm.run(text) for name, text in TEXTS.items()}


@pytest.fixture(scope="module")
def trace(traces):
    return traces["hobbit"]


def close(actual, expected, tol=1e-4):
    """Max abs difference within tol relative to the reference's scale (activations reach ~22,500 at position 0)."""
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    scale = max(1.0, float(np.abs(expected).max()))
    assert actual.shape == expected.shape
    assert np.abs(actual - expected).max() <= tol * scale, (np.abs(actual - expected).max(), scale)


def hf_run(hf_model, ids, modules: dict):
    """Run transformers on ids, recording {name: (input, output)} of the given {name: module}."""
    seen = {}
    hooks = [m.register_forward_hook(lambda mod, args, out, name=name: seen.__setitem__(
        name, (args[0][0].detach().clone() if args else None,
               (out[0] if isinstance(out, tuple) else out)[0].detach().clone())))
        for name, m in modules.items()]
    try:
        with torch.no_grad():
            out = hf_model(torch.tensor([ids]), output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()
    return out, seen


def layer_modules(hf_model, layer: int) -> dict:
    block = hf_model.model.layers[layer]
    return {"attn_norm": block.input_layernorm, "q": block.self_attn.q_proj, "k": block.self_attn.k_proj,
            "v": block.self_attn.v_proj, "o": block.self_attn.o_proj, "mlp_norm": block.post_attention_layernorm,
            "gate": block.mlp.gate_proj, "up": block.mlp.up_proj, "act": block.mlp.act_fn,
            "down": block.mlp.down_proj, "mlp": block.mlp}


# ------------------------------------------------------------------ block walk: the forward pass's own numbers

@pytest.mark.parametrize("layer", [0, 5, 11, 17, 28])
def test_walk_residual_out_is_the_forward_passs_next_layer_input(lm, trace, layer):
    """Layers ending just before a checkpoint: the walk's output must equal the stored checkpoint bit for bit."""
    for p in (0, 7, trace.n_tokens - 1):
        w = lm.block_walk(trace, layer, p)
        if (layer + 1) % CHECKPOINT_EVERY == 0:
            np.testing.assert_array_equal(w.out, trace.checkpoints[layer + 1][p])
        if layer % CHECKPOINT_EVERY == 0:
            np.testing.assert_array_equal(w.x, trace.checkpoints[layer][p])
        np.testing.assert_array_equal(w.pattern, trace.attention[layer][:, p])


def test_walk_of_the_last_layer_gives_the_forward_passs_logits(lm, trace):
    w = lm.block_walk(trace, lm.config.n_layers - 1, -1)
    with torch.inference_mode():
        logits = lm.lm_head.logits(lm.final_norm(torch.from_numpy(w.out.copy())))
    np.testing.assert_array_equal(logits.numpy(), trace.next_token_logits)


def test_walk_layer_zero_starts_from_the_embedding_row(lm, trace):
    w = lm.block_walk(trace, 0, 3)
    assert w.token_id == trace.token_ids[3]
    np.testing.assert_array_equal(w.x, lm.embedding.rows(torch.tensor([w.token_id]))[0].numpy())


def test_walk_attention_equals_layer_detail(lm, trace):
    d = lm.layer_detail(trace, 13)
    p = 20
    w = lm.block_walk(trace, 13, p)
    np.testing.assert_array_equal(w.q, d.q[:, p])
    np.testing.assert_array_equal(w.q_rot, d.q_rot[:, p])
    np.testing.assert_array_equal(w.k, d.k)
    np.testing.assert_array_equal(w.k_rot, d.k_rot)
    np.testing.assert_array_equal(w.v, d.v)
    np.testing.assert_array_equal(w.scores, d.scores[:, p])
    np.testing.assert_array_equal(w.mask, d.mask[p])


@pytest.mark.parametrize("layer, p", [(3, 0), (9, 17), (20, 40)])
def test_walk_matches_transformers_hooks(lm, hf_model, trace, layer, p):
    cfg = lm.config
    out, seen = hf_run(hf_model, trace.token_ids, layer_modules(hf_model, layer))
    w = lm.block_walk(trace, layer, p)
    T = trace.n_tokens
    close(w.x, out.hidden_states[layer][0, p].numpy())
    close(w.attn_norm.out, seen["attn_norm"][1][p].numpy())
    close(w.q, seen["q"][1][p].view(cfg.n_heads, cfg.head_dim).numpy())
    close(w.k, seen["k"][1].view(T, cfg.n_kv_heads, cfg.head_dim).transpose(0, 1).numpy())
    close(w.v, seen["v"][1].view(T, cfg.n_kv_heads, cfg.head_dim).transpose(0, 1).numpy())
    close(w.mixed, seen["o"][0][p].view(cfg.n_heads, cfg.head_dim).numpy())
    close(w.attn_out, seen["o"][1][p].numpy())
    close(w.mlp_norm.out, seen["mlp_norm"][1][p].numpy())
    close(w.gate, seen["gate"][1][p].numpy())
    close(w.up, seen["up"][1][p].numpy())
    close(w.act, seen["act"][1][p].numpy())
    close(w.product, seen["down"][0][p].numpy())
    close(w.mlp_out, seen["mlp"][1][p].numpy())
    close(w.out, out.hidden_states[layer + 1][0, p].numpy())


@pytest.mark.parametrize("layer, p", [(0, 0), (6, 12), (14, 33), (29, 50)])
def test_walk_hand_checkable_identities(lm, trace, layer, p):
    cfg = lm.config
    w = lm.block_walk(trace, layer, p)
    T, hd = trace.n_tokens, cfg.head_dim
    assert w.layer == layer and w.position == p

    for step, x in ((w.attn_norm, w.x), (w.mlp_norm, w.mid)):   # RMSNorm: rms, x / rms, * weight
        x64 = x.astype(np.float64)
        assert step.rms == pytest.approx(np.sqrt(np.mean(x64 ** 2) + cfg.norm_eps), rel=1e-5)
        np.testing.assert_allclose(step.scaled, x64 / step.rms, rtol=1e-5, atol=1e-6)
        mean_square = np.mean(x64 ** 2)
        np.testing.assert_allclose(np.mean(step.scaled.astype(np.float64) ** 2), mean_square / (mean_square +
                                   cfg.norm_eps), rtol=1e-5)   # 1 unless x is tiny next to eps
        np.testing.assert_array_equal(step.out, step.scaled * step.weight)

    np.testing.assert_array_equal(w.kv_head, [h // (cfg.n_heads // cfg.n_kv_heads) for h in range(cfg.n_heads)])
    theta = cfg.rope_theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)           # [hd/2]
    cos, sin = np.cos(p * theta), np.sin(p * theta)
    q = w.q.astype(np.float64)
    q_rot = np.concatenate((q[:, :hd // 2] * cos - q[:, hd // 2:] * sin,
                            q[:, :hd // 2] * sin + q[:, hd // 2:] * cos), axis=-1)     # half-split pairs
    close(w.q_rot, q_rot, tol=1e-5)
    np.testing.assert_allclose(w.rope_cos[p], cos, atol=1e-6)

    k_rot = w.k_rot[w.kv_head].astype(np.float64)                                   # [H, T, hd]
    close(w.scores, np.einsum("hd,htd->ht", w.q_rot.astype(np.float64), k_rot) / np.sqrt(hd), tol=1e-5)
    np.testing.assert_array_equal(w.mask, np.arange(T) <= p)
    assert np.all(np.isneginf(w.masked_scores[:, p + 1:]))
    np.testing.assert_array_equal(w.masked_scores[:, :p + 1], w.scores[:, :p + 1])
    allowed = w.scores[:, :p + 1].astype(np.float64)
    softmax = np.exp(allowed - allowed.max(-1, keepdims=True))
    softmax /= softmax.sum(-1, keepdims=True)
    np.testing.assert_allclose(w.pattern[:, :p + 1], softmax, atol=1e-6)
    np.testing.assert_allclose(w.pattern.sum(-1), 1.0, atol=1e-5)
    assert np.all(w.pattern[:, p + 1:] == 0)
    close(w.mixed, np.einsum("ht,htd->hd", w.pattern.astype(np.float64), w.v[w.kv_head].astype(np.float64)),
          tol=1e-5)

    w_o = lm.blocks[layer].attn.w_o.numpy().astype(np.float64)                      # [D, H hd]
    close(w.head_out, np.stack([w_o[:, h * hd:(h + 1) * hd] @ w.mixed[h] for h in range(cfg.n_heads)]), tol=1e-5)
    close(w.head_out.sum(0), w.attn_out, tol=1e-5)
    np.testing.assert_array_equal(w.mid, w.x + w.attn_out)

    gate = w.gate.astype(np.float64)
    close(w.act, gate / (1 + np.exp(-gate)), tol=1e-6)
    np.testing.assert_allclose(w.product, w.act.astype(np.float64) * w.up, rtol=1e-6, atol=1e-7)
    assert w.near_zero_share() == np.mean(np.abs(w.act) < 0.05)
    assert w.near_zero_share(0.5) >= w.near_zero_share(0.05)
    np.testing.assert_array_equal(w.out, w.mid + w.mlp_out)
    np.testing.assert_array_equal(w.out, (w.x + w.attn_out) + w.mlp_out)


def test_walk_arrays_are_read_only_copies(lm, trace):
    w = lm.block_walk(trace, 2, 5)
    with pytest.raises(ValueError):
        w.attn_norm.weight[0] = 0.0
    assert w.k.base is None or w.k.base.size == w.k.size     # not a view into a bigger buffer
    assert w.scores.shape == (lm.config.n_heads, trace.n_tokens)


def test_walk_negative_position_and_bad_arguments(lm, trace):
    assert lm.block_walk(trace, 1, -1).position == trace.n_tokens - 1
    with pytest.raises(ValueError, match="layer"):
        lm.block_walk(trace, lm.config.n_layers, 0)
    with pytest.raises(ValueError, match="position"):
        lm.block_walk(trace, 0, trace.n_tokens)


# ------------------------------------------------------------------ residual stream norms

def test_residual_norms_match_transformers(lm, hf_model, trace):
    cfg = lm.config
    modules = {f"attn{i}": b.self_attn for i, b in enumerate(hf_model.model.layers)}
    modules |= {f"mlp{i}": b.mlp for i, b in enumerate(hf_model.model.layers)}
    modules["norm"] = hf_model.model.norm
    out, seen = hf_run(hf_model, trace.token_ids, modules)
    norms = lm.residual_norms(trace)
    T = trace.n_tokens
    assert norms.resid.shape == (cfg.n_layers + 1, T)
    assert norms.attn.shape == norms.mlp.shape == (cfg.n_layers, T)
    streams = [out.hidden_states[i][0] for i in range(cfg.n_layers)] + [seen["norm"][0]]  # last: before the norm
    close(norms.resid, np.stack([s.norm(dim=-1).numpy() for s in streams]))
    close(norms.attn, np.stack([seen[f"attn{i}"][1].norm(dim=-1).numpy() for i in range(cfg.n_layers)]))
    close(norms.mlp, np.stack([seen[f"mlp{i}"][1].norm(dim=-1).numpy() for i in range(cfg.n_layers)]))


def test_residual_norms_equal_checkpoint_norms_and_show_the_position_zero_blow_up(lm, trace):
    norms = lm.residual_norms(trace)
    for layer, x in trace.checkpoints.items():
        np.testing.assert_allclose(norms.resid[layer], np.linalg.norm(x.astype(np.float64), axis=-1), rtol=1e-5)
    middle = slice(13, 29)   # after layers 12..27 position 0 is over 10x the typical norm (~20,000)
    assert np.all(norms.resid[middle, 0] > 10 * np.median(norms.resid[middle, 1:], axis=1))
    assert np.all(norms.resid[middle, 0] > 10_000)


# ------------------------------------------------------------------ logit lens

@pytest.mark.parametrize("position", [-1, 9, 0])
def test_logit_lens_matches_transformers_hidden_states(lm, hf_model, trace, position):
    cfg = lm.config
    lens = lm.logit_lens(trace, position=position)
    assert lens.shape == (cfg.n_layers + 1, cfg.vocab_size) and lens.dtype == np.float32
    out, _ = hf_run(hf_model, trace.token_ids, {})
    with torch.no_grad():   # hidden_states[-1] is already normalized: compare rows 0..L-1 by hand, row L to logits
        ref = torch.stack([hf_model.lm_head(hf_model.model.norm(out.hidden_states[i][0, position]))
                           for i in range(cfg.n_layers)]).numpy()
    # Position 0's stream reaches ~22,500 (the sink) in a few channels: after the norm its small channels keep that
    # scale's float32 rounding, and its rows differ by up to 3.1e-4 where MKL runs AVX-512
    np.testing.assert_allclose(lens[:cfg.n_layers], ref, atol=5e-4 if position == 0 else 2e-4, rtol=0)
    np.testing.assert_allclose(lens[cfg.n_layers], out.logits[0, position].numpy(), atol=1e-4, rtol=0)


def test_logit_lens_last_row_is_the_next_token_logits(lm, trace):
    np.testing.assert_allclose(lm.logit_lens(trace)[-1], trace.next_token_logits, atol=1e-4, rtol=0)


def test_logit_lens_top_equals_the_full_lens(lm, trace):
    top = lm.logit_lens_top(trace, k=5)
    T = trace.n_tokens
    assert top.ids.shape == top.probs.shape == (lm.config.n_layers + 1, T, 5)
    np.testing.assert_array_equal(top.positions, np.arange(T))
    for p in (0, 11, T - 1):
        lens = lm.logit_lens(trace, position=p).astype(np.float64)                  # [L + 1, V]
        probs = np.exp(lens - lens.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        expected_ids = np.argsort(-probs, axis=-1, kind="stable")[:, :5]
        np.testing.assert_allclose(top.probs[:, p], np.take_along_axis(probs, expected_ids, -1), atol=1e-5)
        np.testing.assert_array_equal(top.ids[:, p, 0], expected_ids[:, 0])
        np.testing.assert_allclose(np.take_along_axis(probs, top.ids[:, p], -1), top.probs[:, p], atol=1e-5)
    assert np.all(np.diff(top.probs, axis=-1) <= 1e-7)


def test_logit_lens_top_for_chosen_positions(lm, trace):
    full = lm.logit_lens_top(trace, k=3)
    some = lm.logit_lens_top(trace, k=3, positions=[-1, 4])
    np.testing.assert_array_equal(some.positions, [trace.n_tokens - 1, 4])
    np.testing.assert_array_equal(some.ids, full.ids[:, [trace.n_tokens - 1, 4]])
    np.testing.assert_allclose(some.probs, full.probs[:, [trace.n_tokens - 1, 4]], atol=1e-6)
    with pytest.raises(ValueError, match="k must be"):
        lm.logit_lens_top(trace, k=0)
    with pytest.raises(ValueError, match="position"):
        lm.logit_lens_top(trace, positions=[trace.n_tokens])


# ------------------------------------------------------------------ direct logit attribution

def attribution_targets(lm, trace):
    order = np.argsort(-trace.next_token_logits)
    return [int(order[0]), int(order[50]), int(order[-1])]   # the prediction, a runner-up, the least likely


@pytest.mark.parametrize("name", list(TEXTS))
def test_direct_contributions_add_up_to_the_logit(lm, traces, name):
    trace = traces[name]
    cfg = lm.config
    for token_id in attribution_targets(lm, trace):
        for position in (-1, 5):
            a = lm.logit_attribution(trace, token_id, position=position)
            assert a.heads.shape == (cfg.n_layers, cfg.n_heads) and a.mlps.shape == (cfg.n_layers,)
            total = a.embedding + a.heads.sum() + a.mlps.sum()
            assert total == pytest.approx(a.logit, abs=2e-5)
            if position == -1:
                assert a.logit == pytest.approx(float(trace.next_token_logits[token_id]), abs=1e-4)
            assert np.abs(a.heads).max() > 1e-3   # the test sees real numbers, not zeros


def test_head_contributions_match_transformers(lm, hf_model, trace):
    """Per-head parts from transformers' o_proj inputs, the final norm's scale from its input."""
    cfg = lm.config
    hd = cfg.head_dim
    modules = {f"o{i}": b.self_attn.o_proj for i, b in enumerate(hf_model.model.layers)}
    modules |= {f"mlp{i}": b.mlp for i, b in enumerate(hf_model.model.layers)}
    modules["norm"] = hf_model.model.norm
    out, seen = hf_run(hf_model, trace.token_ids, modules)
    token_id = int(np.argmax(trace.next_token_logits))
    heads = np.empty((cfg.n_layers, cfg.n_heads))
    with torch.no_grad():
        final = seen["norm"][0][-1].double()                                       # [D] before the final norm
        inv_rms = 1.0 / torch.sqrt(final.pow(2).mean() + cfg.norm_eps)
        direction = inv_rms * hf_model.model.norm.weight.double() * hf_model.lm_head.weight[token_id].double()
        for i, block in enumerate(hf_model.model.layers):
            mixed = seen[f"o{i}"][0][-1].double()                                  # [H hd]
            w_o = block.self_attn.o_proj.weight.double()                           # [D, H hd]
            for h in range(cfg.n_heads):
                heads[i, h] = float((w_o[:, h * hd:(h + 1) * hd] @ mixed[h * hd:(h + 1) * hd]) @ direction)
        mlps = np.array([float(seen[f"mlp{i}"][1][-1].double() @ direction) for i in range(cfg.n_layers)])
        embedding = float(out.hidden_states[0][0, -1].double() @ direction)
    a = lm.logit_attribution(trace, token_id)
    np.testing.assert_allclose(a.heads, heads, atol=1e-3, rtol=0)
    np.testing.assert_allclose(a.mlps, mlps, atol=1e-3, rtol=0)
    assert a.embedding == pytest.approx(embedding, abs=1e-4)
    assert a.inv_rms == pytest.approx(float(inv_rms), rel=1e-5)


def test_attribution_bad_token(lm, trace):
    with pytest.raises(ValueError, match="token_id"):
        lm.logit_attribution(trace, lm.config.vocab_size)


# ------------------------------------------------------------------ head ablation

@contextmanager
def o_proj_columns_zeroed(hf_model, heads, head_dim):
    """Zero head h's columns h*hd:(h+1)*hd of layer l's o_proj for each (l, h), on clones restored afterwards."""
    saved = {layer: hf_model.model.layers[layer].self_attn.o_proj.weight.detach().clone() for layer, _ in heads}
    try:
        with torch.no_grad():
            for layer, head in heads:
                hf_model.model.layers[layer].self_attn.o_proj.weight[:, head * head_dim:(head + 1) * head_dim] = 0.0
        yield
    finally:
        with torch.no_grad():
            for layer, weight in saved.items():
                hf_model.model.layers[layer].self_attn.o_proj.weight.copy_(weight)


@pytest.mark.parametrize("heads", [[(4, 2)], [(3, 1), (3, 7), (17, 5)], [(0, 0), (29, 8)]])
def test_ablation_equals_transformers_with_o_proj_columns_zeroed(lm, hf_model, trace, heads):
    ablated = lm.ablate_heads(trace, heads)
    with o_proj_columns_zeroed(hf_model, heads, lm.config.head_dim):
        with torch.no_grad():
            ref = hf_model(torch.tensor([trace.token_ids])).logits[0, -1].numpy()
    np.testing.assert_allclose(ablated, ref, atol=1e-4, rtol=0)
    assert np.abs(ablated - trace.next_token_logits).max() > 1e-3   # the ablation did something


def test_no_heads_and_repeated_heads(lm, trace):
    np.testing.assert_array_equal(lm.ablate_heads(trace, []), trace.next_token_logits)
    np.testing.assert_array_equal(lm.ablate_heads(trace, [(8, 3), (8, 3)]), lm.ablate_heads(trace, {(8, 3)}))


def test_ablation_is_thread_safe_and_leaves_the_model_unchanged(lm, trace):
    cases = [[(1, 0)], [(12, 4), (20, 1)], [(25, 6)], [(6, 2), (6, 3)]]
    serial = [lm.ablate_heads(trace, heads) for heads in cases]
    results = [None] * len(cases)

    def work(i):
        results[i] = lm.ablate_heads(trace, cases[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, expected in zip(results, serial, strict=True):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(lm.run_ids(trace.token_ids).next_token_logits, trace.next_token_logits)


def test_ablation_bad_heads(lm, trace):
    with pytest.raises(ValueError, match="does not exist"):
        lm.ablate_heads(trace, [(0, lm.config.n_heads)])
    with pytest.raises(ValueError, match="pair"):
        lm.ablate_heads(trace, [3])
