"""Position encodings equal independent formulas: the sinusoidal table, RoPE as complex rotation, ALiBi's slopes."""
import math

import torch

from model.train.positions import alibi_bias, alibi_slopes, apply_rope, rope_angles, sinusoidal_table


def test_sinusoidal_table_worked_values():
    table = sinusoidal_table(50, 8)
    assert table.shape == (50, 8)
    assert torch.allclose(table[0], torch.tensor([0.0, 1.0] * 4))
    assert math.isclose(table[1, 0], math.sin(1.0), abs_tol=1e-6)
    assert math.isclose(table[1, 1], math.cos(1.0), abs_tol=1e-6)
    # dims 2i, 2i+1 use the frequency 1 / 10000^(2i / d): d = 8, i = 1 -> 10000^(-1/4) = 0.1
    assert math.isclose(table[7, 2], math.sin(0.7), abs_tol=1e-6)
    assert math.isclose(table[7, 3], math.cos(0.7), abs_tol=1e-6)
    assert math.isclose(table[40, 6], math.sin(40 * 1e-3), abs_tol=1e-6)
    assert sinusoidal_table(3, 5).shape == (3, 5)                      # odd widths end on a sine


def _rope_complex(x: torch.Tensor, positions: torch.Tensor, base: float = 10_000.0) -> torch.Tensor:
    """RoPE written independently: pair i is (x[i], x[i + d/2]) as a complex number, multiplied by
    exp(1j * p * base^(-2i/d))."""
    d = x.shape[-1]
    half = d // 2
    z = torch.complex(x[..., :half].double(), x[..., half:].double())
    theta = torch.tensor([base ** (-2 * i / d) for i in range(half)], dtype=torch.float64)
    rotated = z * torch.exp(1j * positions.double()[:, None] * theta)
    return torch.cat([rotated.real, rotated.imag], dim=-1).float()


def test_rope_is_a_complex_rotation_of_pairs():
    torch.manual_seed(0)
    T, hd = 9, 8
    x = torch.randn(2, 3, T, hd)
    cos, sin = rope_angles(T, hd)
    assert torch.allclose(apply_rope(x, cos, sin), _rope_complex(x, torch.arange(T)), atol=1e-5)


def test_rope_scores_depend_only_on_the_distance():
    torch.manual_seed(1)
    hd = 16
    q, k = torch.randn(hd), torch.randn(hd)
    cos, sin = rope_angles(40, hd)

    def score(i: int, j: int) -> float:
        qi = apply_rope(q[None, None, None], cos[i:i + 1], sin[i:i + 1])
        kj = apply_rope(k[None, None, None], cos[j:j + 1], sin[j:j + 1])
        return float((qi * kj).sum())

    assert math.isclose(score(5, 2), score(30, 27), rel_tol=1e-4, abs_tol=1e-5)
    assert not math.isclose(score(5, 2), score(5, 4), rel_tol=1e-3)


def test_alibi_slopes_follow_the_paper():
    assert torch.allclose(alibi_slopes(8), torch.tensor([2.0 ** -k for k in range(1, 9)]))
    assert torch.allclose(alibi_slopes(2), torch.tensor([2.0 ** -4, 2.0 ** -8]))
    # 6 heads: the 4-head slopes, then every other 8-head slope: 1/2, 1/8
    assert torch.allclose(alibi_slopes(6), torch.tensor([2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1,
                                                         2.0 ** -3]))


def test_alibi_bias_penalises_distance_linearly():
    bias = alibi_bias(2, 4)
    m = 2.0 ** -4
    expected_head0 = torch.tensor([[0, m, 2 * m, 3 * m],
                                   [-m, 0, m, 2 * m],
                                   [-2 * m, -m, 0, m],
                                   [-3 * m, -2 * m, -m, 0]])
    assert bias.shape == (2, 4, 4)
    assert torch.allclose(bias[0], expected_head0)
    assert torch.allclose(bias[1], expected_head0 / 16)
