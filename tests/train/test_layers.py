"""The decoder's parts equal independent formulas: norms, MLPs and attention (MHA and grouped KV heads)."""
import math

import pytest
import torch
import torch.nn.functional as F

from model.train.layers import NORM_EPS, CausalSelfAttention, GeluMLP, LayerNorm, RMSNorm, SwiGLU


def test_layernorm_matches_torch_and_a_worked_example():
    x = torch.tensor([[1.0, 2.0, 3.0, 6.0]])
    # mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5
    expected = (x - 3.0) / math.sqrt(3.5 + NORM_EPS)
    ours = LayerNorm(4)
    assert torch.allclose(ours(x), expected, atol=1e-6)
    torch.manual_seed(0)
    y = torch.randn(3, 5, 16)
    ours = LayerNorm(16)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(16))
        ours.bias.copy_(torch.randn(16))
    reference = torch.nn.LayerNorm(16, eps=NORM_EPS)
    reference.load_state_dict(ours.state_dict())
    assert torch.allclose(ours(y), reference(y), atol=1e-6)


def test_rmsnorm_matches_a_worked_example_and_torch():
    x = torch.tensor([[3.0, 4.0]])
    # mean of squares (9 + 16) / 2 = 12.5
    ours = RMSNorm(2)
    with torch.no_grad():
        ours.weight.copy_(torch.tensor([2.0, 0.5]))
    expected = torch.tensor([[3.0 * 2.0, 4.0 * 0.5]]) / math.sqrt(12.5 + NORM_EPS)
    assert torch.allclose(ours(x), expected, atol=1e-6)
    y = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(1))
    reference = torch.nn.RMSNorm(12, eps=NORM_EPS)
    ours = RMSNorm(12)
    assert torch.allclose(ours(y), reference(y), atol=1e-6)
    assert not torch.allclose(ours(y), LayerNorm(12)(y), atol=1e-3)    # no centring: differs from LayerNorm


def test_gelu_mlp_is_down_of_erf_gelu_of_up():
    torch.manual_seed(2)
    mlp = GeluMLP(8)
    x = torch.randn(2, 3, 8)
    h = x @ mlp.up.weight.T
    gelu = h * 0.5 * (1.0 + torch.erf(h / math.sqrt(2.0)))              # the exact GELU, written out
    assert torch.allclose(mlp(x), gelu @ mlp.down.weight.T, atol=1e-6)
    assert torch.allclose(mlp(x), F.gelu(h) @ mlp.down.weight.T, atol=1e-6)
    assert mlp.up.weight.shape == (32, 8)


def test_swiglu_is_down_of_silu_gate_times_up():
    torch.manual_seed(3)
    mlp = SwiGLU(12)
    x = torch.randn(2, 3, 12)
    gate, up = x @ mlp.gate.weight.T, x @ mlp.up.weight.T
    silu = gate / (1.0 + torch.exp(-gate))                             # x * sigmoid(x), written out
    assert torch.allclose(mlp(x), (silu * up) @ mlp.down.weight.T, atol=1e-6)
    assert mlp.gate.weight.shape == (32, 12)                           # 8/3 of 12


def _causal_bias(T: int) -> torch.Tensor:
    return torch.full((T, T), float("-inf")).triu(1)[None]


def test_attention_matches_torch_sdpa_and_records_a_causal_pattern():
    torch.manual_seed(4)
    D, H, T = 16, 4, 6
    attn = CausalSelfAttention(D, H, H)
    x = torch.randn(2, T, D)
    out, pattern = attn(x, _causal_bias(T), record=True)
    q, k, v = (x @ w.T for w in attn.qkv.weight.split(D))               # [B, T, D] each
    heads = [t.view(2, T, H, D // H).transpose(1, 2) for t in (q, k, v)]
    expected = F.scaled_dot_product_attention(*heads, is_causal=True).transpose(1, 2).reshape(2, T, D)
    assert torch.allclose(out, expected @ attn.out.weight.T, atol=1e-5)
    assert pattern.shape == (2, H, T, T)
    assert torch.allclose(pattern.sum(-1), torch.ones(2, H, T), atol=1e-6)
    assert torch.all(pattern.triu(1) == 0)                             # nothing from the future
    _, none = attn(x, _causal_bias(T), record=False)
    assert none is None


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_kv_heads_equal_mha_with_shared_keys_and_values(kv_heads):
    """GQA / MQA: query head h reads KV head h // (H / kv_heads); equal to MHA whose K, V rows are repeated."""
    torch.manual_seed(5)
    D, H, T = 16, 4, 5
    hd = D // H
    gqa = CausalSelfAttention(D, H, kv_heads)
    mha = CausalSelfAttention(D, H, H)
    q_w, k_w, v_w = gqa.qkv.weight.split([H * hd, kv_heads * hd, kv_heads * hd])
    group = H // kv_heads
    repeat = [h // group for h in range(H)]
    k_full = torch.cat([k_w[j * hd:(j + 1) * hd] for j in repeat])
    v_full = torch.cat([v_w[j * hd:(j + 1) * hd] for j in repeat])
    with torch.no_grad():
        mha.qkv.weight.copy_(torch.cat([q_w, k_full, v_full]))
        mha.out.weight.copy_(gqa.out.weight)
    x = torch.randn(3, T, D)
    assert torch.allclose(gqa(x, _causal_bias(T))[0], mha(x, _causal_bias(T))[0], atol=1e-6)
