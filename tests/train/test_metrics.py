"""Per-head measurements and the phase-change detector on hand-made patterns and curves."""
import math

import numpy as np
import torch

from model.train.metrics import attention_entropy, induction_score, predictable_loss, previous_token_score
from model.train.phase import phase_change_step


def _uniform_causal(T: int) -> torch.Tensor:
    return torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]          # [T, T]


def _previous_token(T: int) -> torch.Tensor:
    p = torch.zeros(T, T)
    p[0, 0] = 1.0
    p[torch.arange(1, T), torch.arange(T - 1)] = 1.0
    return p


def test_entropy_of_uniform_and_one_hot_rows():
    T = 6
    pattern = torch.stack([_uniform_causal(T), _previous_token(T)])[None]          # [1, 2, T, T]
    expected_uniform = sum(math.log(i + 1) for i in range(1, T)) / (T - 1)         # rows 1 .. T-1
    assert torch.allclose(attention_entropy(pattern), torch.tensor([expected_uniform, 0.0]), atol=1e-6)


def test_previous_token_score():
    T = 5
    pattern = torch.stack([_previous_token(T), _uniform_causal(T)])[None]
    expected_uniform = (1 / 2 + 1 / 3 + 1 / 4 + 1 / 5) / 4
    assert torch.allclose(previous_token_score(pattern), torch.tensor([1.0, expected_uniform]), atol=1e-6)


def test_induction_score_reads_the_token_after_the_earlier_occurrence():
    # tokens: a b c d | a b c : the second copy starts at 4; targets 5, 6 are predictable, copied from 1, 2
    T = 7
    predictable = torch.tensor([[False, False, False, False, False, True, True]])
    source = torch.tensor([[0, 1, 2, 3, 0, 1, 2]])
    induction = torch.zeros(T, T)
    induction[torch.arange(T), torch.arange(T)] = 1.0
    induction[4] = 0.0
    induction[4, 1] = 1.0                      # query 4 (a) -> key 1 (b, which followed the earlier a)
    induction[5] = 0.0
    induction[5, 2] = 0.5                      # query 5 (b) -> key 2 half, itself half
    induction[5, 5] = 0.5
    pattern = torch.stack([induction, _previous_token(T)])[None]
    assert torch.allclose(induction_score(pattern, predictable, source), torch.tensor([0.75, 0.0]))


def test_predictable_loss_counts_only_marked_targets():
    logits = torch.zeros(1, 3, 4)
    logits[0, 0, 2] = 10.0                     # position 0 predicts token 1 = 2 confidently
    tokens = torch.tensor([[0, 2, 3]])
    only_first = predictable_loss(logits, tokens, torch.tensor([[False, True, False]]))
    both = predictable_loss(logits, tokens, torch.tensor([[False, True, True]]))
    confident = -math.log(math.exp(10) / (math.exp(10) + 3))
    assert math.isclose(float(only_first), confident, abs_tol=1e-6)
    assert math.isclose(float(both), (confident + math.log(4)) / 2, rel_tol=1e-5)


def test_phase_change_found_in_a_sudden_drop_after_a_plateau():
    steps = np.arange(0, 801, 16)
    loss = 4.0 - 0.3 * steps / 800 - 3.2 / (1 + np.exp(-(steps - 300) / 15))       # plateau, then a cliff at 300
    found = phase_change_step(steps, loss)
    assert found is not None and abs(found - 300) <= 16


def test_no_phase_change_in_a_steady_decline_an_early_fall_or_a_spike():
    steps = np.arange(0, 801, 16)
    assert phase_change_step(steps, 4.0 - 3.0 * steps / 800) is None                       # steady
    assert phase_change_step(steps, 0.5 + 3.5 * np.exp(-steps / 60)) is None               # fastest at the start
    spike = np.full(len(steps), 3.0)
    spike[20] = 6.0                                                                        # up and back down
    assert phase_change_step(steps, spike) is None
    assert phase_change_step(steps[:3], np.array([4.0, 1.0, 0.5])) is None                 # too short to say
