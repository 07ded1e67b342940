"""Training: the loop equals a plain PyTorch reference, runs are deterministic, and 2 layers form an induction head
where 1 layer cannot."""
import itertools
import math

import numpy as np
import pytest
import torch
from torch import nn

from model.train import TrainSettings, train
from model.train.trainer import build


class ReferenceDecoder(nn.Module):
    """Pre-LN decoder from torch's own modules: embeddings, nn.LayerNorm, nn.MultiheadAttention, nn.GELU."""

    def __init__(self, vocab: int, positions: int, d: int, heads: int, layers: int, mlp: bool):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(positions, d)
        self.ln1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.attn = nn.ModuleList(nn.MultiheadAttention(d, heads, bias=False, batch_first=True) for _ in range(layers))
        self.ln2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers)) if mlp else None
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d, 4 * d, bias=False), nn.GELU(),
                                               nn.Linear(4 * d, d, bias=False)) for _ in range(layers)) if mlp else None
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        T = tokens.shape[1]
        x = self.tok(tokens) + self.pos(torch.arange(T))
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        for i in range(len(self.attn)):
            h = self.ln1[i](x)
            x = x + self.attn[i](h, h, h, attn_mask=future, need_weights=False)[0]
            if self.mlp is not None:
                x = x + self.mlp[i](self.ln2[i](x))
        return self.head(self.ln_f(x))

    def load_from(self, ours):
        sd = ours.state_dict()
        with torch.no_grad():
            self.tok.weight.copy_(sd["embed.weight"])
            self.pos.weight.copy_(sd["pos_embed.weight"])
            for i in range(len(self.attn)):
                self.ln1[i].weight.copy_(sd[f"blocks.{i}.norm_attn.weight"])
                self.ln1[i].bias.copy_(sd[f"blocks.{i}.norm_attn.bias"])
                self.attn[i].in_proj_weight.copy_(sd[f"blocks.{i}.attn.qkv.weight"])
                self.attn[i].out_proj.weight.copy_(sd[f"blocks.{i}.attn.out.weight"])
                if self.mlp is not None:
                    self.ln2[i].weight.copy_(sd[f"blocks.{i}.norm_mlp.weight"])
                    self.ln2[i].bias.copy_(sd[f"blocks.{i}.norm_mlp.bias"])
                    self.mlp[i][0].weight.copy_(sd[f"blocks.{i}.mlp.up.weight"])
                    self.mlp[i][2].weight.copy_(sd[f"blocks.{i}.mlp.down.weight"])
            self.ln_f.weight.copy_(sd["norm_final.weight"])
            self.ln_f.bias.copy_(sd["norm_final.bias"])
            self.head.weight.copy_(sd["unembed.weight"])

    def named_like_ours(self):
        """Our parameter names -> this model's tensors, for comparing weights after training."""
        out = {"embed.weight": self.tok.weight, "pos_embed.weight": self.pos.weight,
               "norm_final.weight": self.ln_f.weight, "unembed.weight": self.head.weight}
        for i in range(len(self.attn)):
            out[f"blocks.{i}.attn.qkv.weight"] = self.attn[i].in_proj_weight
            out[f"blocks.{i}.attn.out.weight"] = self.attn[i].out_proj.weight
            if self.mlp is not None:
                out[f"blocks.{i}.mlp.down.weight"] = self.mlp[i][2].weight
        return out


def _lr(step: int, peak: float, warmup: int, total: int) -> float:
    """Linear warmup to peak, then a cosine down to peak / 10 at the last step."""
    if step <= warmup:
        return peak * step / warmup
    return peak / 10 + 0.5 * (peak - peak / 10) * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))


@pytest.mark.parametrize("mlp", ["none", "gelu"])
def test_training_equals_a_plain_pytorch_loop(mlp):
    s = TrainSettings(steps=4, warmup=2, lr=0.01, grad_clip=0.5, weight_decay=0.1, mlp=mlp, d_model=32, n_heads=4,
                      batch_size=8)
    task, ours, gen = build(s)
    batches = [task.sample(gen, s.batch_size) for _ in range(s.steps)]   # what train() draws, in order
    ref = ReferenceDecoder(task.vocab_size, task.seq_len, 32, 4, 2, mlp == "gelu")
    ref.load_from(ours)
    decay = [p for p in ref.parameters() if p.dim() == 2]
    no_decay = [p for p in ref.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=0.01, betas=(0.9, 0.95))
    ref_losses = []
    for step, batch in enumerate(batches, start=1):
        for group in opt.param_groups:
            group["lr"] = _lr(step, 0.01, 2, 4)
        logits = ref(batch.tokens)
        mask = batch.predictable[:, 1:]
        loss = nn.functional.cross_entropy(logits[:, :-1][mask], batch.tokens[:, 1:][mask])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
        opt.step()
        ref_losses.append(loss.item())
    run = train(s)
    assert list(run.steps_logged) == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(run.train_loss[1:], ref_losses, rtol=1e-5)
    # Adam divides by the gradient's running size, so float32 rounding in a tiny gradient (the reduction order
    # depends on torch's thread count) moves a weight by ~1e-6; a wrong step moves it by ~lr = 1e-2.
    for name, tensor in ref.named_like_ours().items():
        np.testing.assert_allclose(run.state[name], tensor.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    assert not np.allclose(run.state["unembed.weight"], ours.state_dict()["unembed.weight"].numpy())  # it moved


def test_same_settings_same_curves_bit_for_bit_and_another_seed_differs():
    s = TrainSettings(steps=60, seed=5)
    a, b = train(s), train(s)
    for field in ("train_loss", "eval_loss", "induction", "prev_token", "entropy", "layer_grad_norms", "snapshots"):
        assert np.array_equal(getattr(a, field), getattr(b, field), equal_nan=True), field
    c = train(TrainSettings(steps=60, seed=6))
    assert not np.array_equal(a.train_loss, c.train_loss)


def test_the_run_fixes_its_thread_count_so_the_callers_does_not_matter():
    s = TrainSettings(steps=30)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = train(s)
        torch.set_num_threads(2)
        two = train(s)
        assert torch.get_num_threads() == 2                                # restored
    finally:
        torch.set_num_threads(before)
    assert np.array_equal(one.eval_loss, two.eval_loss)


def test_two_layers_form_an_induction_head_and_one_layer_cannot():
    two = train(TrainSettings(n_layers=2, steps=600))
    one = train(TrainSettings(n_layers=1, steps=600))
    assert two.eval_loss[0] > 0.9 * math.log(64)                          # starts near the uniform guess
    assert two.eval_loss[-1] < 1.0 and one.eval_loss.min() > 2.5
    assert two.phase_step is not None and one.phase_step is None
    assert two.induction[-1, 1].max() > 0.4 and one.induction[-1].max() < 0.2
    assert two.prev_token[-1, 0].max() > max(0.25, 2 * one.prev_token[-1, 0].max())   # what the induction head reads
    assert two.completion.accuracy > 0.8 and one.completion.accuracy < 0.5


def test_partial_runs_reach_the_callback_and_it_can_cancel():
    seen = []
    run = train(TrainSettings(steps=200), on_log=lambda r: seen.append(r) or r.n_logged == 3)
    assert run.cancelled and not run.finished and run.n_logged == 3 and run.completion is None
    assert [r.n_logged for r in seen] == [1, 2, 3]
    assert seen[-1].induction.shape == (3, 2, 2)


def test_a_finished_run_reports_its_size():
    run = train(TrainSettings(steps=20))
    n, T = run.n_logged, len(run.example)
    assert run.finished and run.snapshots.shape == (n, 2, 2, T, T) and run.snapshots.dtype == np.uint8
    arrays = sum(a.nbytes for a in run.state.values()) + run.snapshots.nbytes
    assert arrays < run.nbytes < arrays + 20_000
    assert run.nbytes < 1_000_000


OPTIONS = list(itertools.product(["none", "learned", "sinusoidal", "rope", "alibi"], ["layernorm", "rmsnorm", "none"],
                                 ["pre", "post"]))


@pytest.mark.parametrize(("positions", "norm", "place"), OPTIONS)
def test_every_design_trains_a_few_steps(positions, norm, place):
    s = TrainSettings(positions=positions, norm=norm, norm_place=place, mlp="swiglu" if norm == "rmsnorm" else "gelu",
                      n_heads=4, n_kv_heads=2 if positions == "rope" else 1, steps=3, n_layers=3)
    run = train(s)
    assert np.all(np.isfinite(run.eval_loss)) and run.induction.shape == (4, 3, 4)
    assert run.layer_grad_norms.shape == (4, 3) and np.all(run.layer_grad_norms[1:] > 0)
