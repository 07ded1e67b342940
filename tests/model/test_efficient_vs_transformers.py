"""The efficient-attention API against independent references: transformers (eager) loading the same GGUF.

- run(allowed=mask) vs transformers in float64 given the same mask as a 4D additive mask (sliding window, sink +
  window, strided): every layer's attention and the logits. float64, because a sliding window takes the attention
  sink away and later layers amplify float32's rounding: transformers in float32 is itself 6.0e-5 from its float64
  run on the window's attention (ours 5.2e-5), so two float32 runs may differ by more than the 1e-4 asked; the
  logits and log-probabilities also against float32 transformers, at the same 1e-3;
- token_logprobs vs transformers' log-softmax of every position's logits;
- with_kv_heads(n) vs transformers whose k_proj / v_proj are pooled or repeated the same way (model.maths.kv_heads);
- the tiled FlashAttention of one head vs the forward pass's own attention output for that head.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
import torch

from harness.apptest import example
from model.decoder.hooks import capture
from model.maths import sparse_masks
from model.maths.flash_attention import flash_attention
from model.maths.kv_heads import pool_kv_rows

MASKS = {"window": lambda T: sparse_masks.sliding_window(T, 16),
         "sink": lambda T: sparse_masks.sink_window(T, 16, 4),
         "strided": lambda T: sparse_masks.strided(T, 5)}


@pytest.fixture(scope="module")
def story_ids(lm):
    return lm.encode(example("long story"))[:96]


def reference(hf_model, ids, allowed=None):
    """transformers' logits [T, V] and attention [L, H, T, T] (in its dtype), with `allowed` as a 4D additive
    mask."""
    kwargs = {}
    dtype = hf_model.dtype
    if allowed is not None:
        additive = torch.zeros(len(ids), len(ids), dtype=dtype)
        additive[~torch.from_numpy(allowed)] = torch.finfo(dtype).min
        kwargs["attention_mask"] = additive[None, None]                     # [1, 1, T, T]
    with torch.no_grad():
        out = hf_model(torch.tensor([ids]), output_attentions=True, **kwargs)
    return out.logits[0].numpy(), torch.stack([a[0] for a in out.attentions]).numpy()


@pytest.mark.parametrize("kind", sorted(MASKS))
def test_masked_run_matches_transformers(lm, hf_model, hf_model_float64, story_ids, kind):
    allowed = MASKS[kind](len(story_ids))
    trace = lm.run_ids(story_ids, allowed=allowed)
    ref_logits, ref_attention = reference(hf_model_float64, story_ids, allowed)
    np.testing.assert_allclose(trace.attention, ref_attention, atol=1e-4, rtol=0)
    assert not trace.attention[:, :, ~allowed].any()                        # the mask itself, in every layer
    for logits in (ref_logits, reference(hf_model, story_ids, allowed)[0]):  # float64, and float32 as before
        np.testing.assert_allclose(trace.next_token_logits, logits[-1], atol=1e-3, rtol=0)
        ref_lp = torch.log_softmax(torch.from_numpy(logits).double(), -1)[:-1].gather(
            1, torch.tensor(story_ids[1:])[:, None])[:, 0].numpy()
        np.testing.assert_allclose(lm.token_logprobs(trace), ref_lp, atol=1e-3, rtol=0)


def test_masks_change_the_prediction_and_full_mask_changes_nothing(lm, story_ids):
    T = len(story_ids)
    plain = lm.run_ids(story_ids)
    full = lm.run_ids(story_ids, allowed=sparse_masks.causal(T))
    np.testing.assert_array_equal(lm.token_logprobs(full), lm.token_logprobs(plain))
    window = lm.run_ids(story_ids, allowed=MASKS["window"](T))
    lp, lp_full = lm.token_logprobs(window), lm.token_logprobs(plain)
    np.testing.assert_allclose(lp[:15], lp_full[:15], atol=1e-4)         # rows 0..15 lose nothing to a 16-window
    assert np.abs(lp[16:] - lp_full[16:]).max() > 0.1


def test_token_logprobs_match_transformers_unmasked(lm, hf_model, story_ids):
    ref_logits, _ = reference(hf_model, story_ids)
    ref_lp = torch.log_softmax(torch.from_numpy(ref_logits), -1)[:-1].gather(
        1, torch.tensor(story_ids[1:])[:, None])[:, 0].numpy()
    lp = lm.token_logprobs(lm.run_ids(story_ids))
    assert lp.shape == (len(story_ids) - 1,) and lp.dtype == np.float32
    np.testing.assert_allclose(lp, ref_lp, atol=1e-3, rtol=0)


@contextmanager
def hf_kv_heads(hf_model, n: int):
    """transformers' model with every layer's k_proj / v_proj pooled (or repeated) into n KV heads; restored after."""
    cfg = hf_model.config
    saved = []
    for layer in hf_model.model.layers:
        attn = layer.self_attn
        saved.append((attn, attn.k_proj, attn.v_proj, attn.num_key_value_groups))
        for name in ("k_proj", "v_proj"):
            w = getattr(attn, name).weight.detach().numpy()
            linear = torch.nn.Linear(w.shape[1], n * attn.head_dim, bias=False)
            linear.weight.data = torch.from_numpy(pool_kv_rows(w, cfg.num_key_value_heads, n).astype(np.float32))
            setattr(attn, name, linear)
        attn.num_key_value_groups = cfg.num_attention_heads // n
    try:
        yield hf_model
    finally:
        for attn, k_proj, v_proj, groups in saved:
            attn.k_proj, attn.v_proj, attn.num_key_value_groups = k_proj, v_proj, groups


@pytest.mark.parametrize("n", [1, 9])
def test_with_kv_heads_matches_transformers(lm, hf_model, story_ids, n):
    ids = story_ids[:48]
    twin = lm.with_kv_heads(n)
    assert twin.config.n_kv_heads == n and lm.config.n_kv_heads == 3          # the original is untouched
    trace = twin.run_ids(ids)
    with hf_kv_heads(hf_model, n):
        ref_logits, ref_attention = reference(hf_model, ids)
    np.testing.assert_allclose(trace.attention, ref_attention, atol=1e-4, rtol=0)
    np.testing.assert_allclose(trace.next_token_logits, ref_logits[-1], atol=1e-3, rtol=0)


def test_duplicated_kv_heads_change_nothing_and_mqa_does(lm, story_ids):
    ids = story_ids[:48]
    base = lm.token_logprobs(lm.run_ids(ids))
    mha = lm.with_kv_heads(9)
    np.testing.assert_allclose(mha.token_logprobs(mha.run_ids(ids)), base, atol=1e-5, rtol=0)
    mqa = lm.with_kv_heads(1)
    assert np.abs(mqa.token_logprobs(mqa.run_ids(ids)) - base).mean() > 0.1


@pytest.mark.parametrize("layer, head, block", [(0, 0, 16), (14, 4, 32), (29, 8, 64)])
def test_flash_attention_equals_the_forward_pass_head_output(lm, story_ids, layer, head, block):
    trace = lm.run_ids(story_ids)
    seen = {}
    names = [f"blocks.{layer}.attn.{point}" for point in ("hook_rot_q", "hook_rot_k", "hook_v", "hook_z")]
    with torch.inference_mode():
        lm.rerun(trace, layer, layer + 1, capture(names, seen))
    q_rot, k_rot, v, z = (seen[name][0].numpy() for name in names)
    kv = head // lm.config.group_size
    run = flash_attention(q_rot[head], k_rot[kv], v[kv], block)
    np.testing.assert_allclose(run.out, z[head], atol=1e-5, rtol=0)
