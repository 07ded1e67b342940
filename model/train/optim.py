"""AdamW written out (Loshchilov & Hutter): decoupled weight decay, bias-corrected first and second moments.

Ours rather than torch.optim.AdamW: torch's optimizers import torch._dynamo on first use (1.5-2.5 s on a 2-core
machine, paid by a server's first training run); the tests check this one against torch.optim.AdamW."""
from __future__ import annotations

import math

import torch


class AdamW:
    """AdamW over parameter groups [{"params": [...], "weight_decay": wd}], with the learning rate given per step."""

    def __init__(self, groups: list[dict], betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.groups = [{"params": list(g["params"]), "weight_decay": g["weight_decay"]} for g in groups]
        self.betas, self.eps = betas, eps
        self.state = {id(p): {"t": 0, "m": torch.zeros_like(p), "v": torch.zeros_like(p)}
                      for g in self.groups for p in g["params"]}

    def parameters(self) -> list[torch.Tensor]:
        return [p for g in self.groups for p in g["params"]]

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    @torch.no_grad()
    def step(self, lr: float) -> None:
        """One update of every parameter that has a gradient (each counts its own updates, like torch's)."""
        b1, b2 = self.betas
        for group in self.groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            states = [self.state[id(p)] for p in params]
            for st in states:
                st["t"] += 1
            grads, m, v = [p.grad for p in params], [st["m"] for st in states], [st["v"] for st in states]
            if group["weight_decay"]:
                torch._foreach_mul_(params, 1 - lr * group["weight_decay"])    # decoupled decay
            torch._foreach_lerp_(m, grads, 1 - b1)                             # m = b1 m + (1 - b1) g
            torch._foreach_mul_(v, b2)
            torch._foreach_addcmul_(v, grads, grads, 1 - b2)                   # v = b2 v + (1 - b2) g^2
            denom = torch._foreach_sqrt(v)
            torch._foreach_div_(denom, [math.sqrt(1 - b2 ** st["t"]) for st in states])
            torch._foreach_add_(denom, self.eps)
            torch._foreach_addcdiv_(params, m, denom, [-lr / (1 - b1 ** st["t"]) for st in states])  # p -= lr m^ / v^
