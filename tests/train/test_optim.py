"""Our AdamW equals torch.optim.AdamW step for step."""
import torch

from model.train.optim import AdamW


def _groups(params):
    return [{"params": [params[0], params[2]], "weight_decay": 0.1}, {"params": [params[1]], "weight_decay": 0.0}]


def test_adamw_matches_torch_with_and_without_weight_decay():
    gen = torch.Generator().manual_seed(0)
    shapes = [(4, 3), (5,), (2, 2)]
    start = [torch.randn(s, generator=gen) for s in shapes]
    ours_params = [p.clone().requires_grad_() for p in start]
    torch_params = [p.clone().requires_grad_() for p in start]
    ours = AdamW(_groups(ours_params), betas=(0.9, 0.95))
    reference = torch.optim.AdamW(_groups(torch_params), lr=1.0, betas=(0.9, 0.95))
    for lr in (0.01, 0.03, 0.002, 0.02):
        grads = [torch.randn(s, generator=gen) for s in shapes]
        if lr == 0.002:
            grads[1] = None                                                  # a parameter without a gradient
        for p, q, g in zip(ours_params, torch_params, grads, strict=True):
            p.grad, q.grad = (None, None) if g is None else (g.clone(), g.clone())
        for group in reference.param_groups:
            group["lr"] = lr
        ours.step(lr)
        reference.step()
    for p, q, s in zip(ours_params, torch_params, start, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)
        assert not torch.allclose(p, s)
