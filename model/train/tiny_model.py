"""The tiny decoder: token embedding, optional positions, blocks, final norm, unembedding. Records every head's
attention pattern when asked."""
from __future__ import annotations

import math

import torch
from torch import nn

from model.train.layers import Block, make_norm
from model.train.positions import alibi_bias, rope_angles, sinusoidal_table
from model.train.settings import TrainSettings

BASE_STD = 0.02            # GPT-2's initial weight scale; init_scale multiplies it


class TinyTransformer(nn.Module):
    """A decoder-only transformer of the settings' shape over `vocab_size` tokens and up to `n_positions`."""

    def __init__(self, s: TrainSettings, vocab_size: int, n_positions: int, generator: torch.Generator):
        super().__init__()
        self.settings, self.vocab_size, self.n_positions = s, vocab_size, n_positions
        D = s.d_model
        self.embed = nn.Embedding(vocab_size, D)
        self.pos_embed = nn.Embedding(n_positions, D) if s.positions == "learned" else None
        if s.positions == "sinusoidal":        # scaled to the learned positions' initial size (RMS = init std)
            table = sinusoidal_table(n_positions, D) * (s.init_scale * BASE_STD * math.sqrt(2.0))
            self.register_buffer("pos_table", table, persistent=False)                             # [P, D]
        causal = torch.full((n_positions, n_positions), float("-inf")).triu(1)[None]                 # [1, P, P]
        bias = causal + alibi_bias(s.n_heads, n_positions) if s.positions == "alibi" else causal     # [1|H, P, P]
        self.register_buffer("bias", bias, persistent=False)
        if s.positions == "rope":
            cos, sin = rope_angles(n_positions, s.head_dim)
            self.register_buffer("rope_cos", cos, persistent=False)                                  # [P, hd]
            self.register_buffer("rope_sin", sin, persistent=False)
        self.blocks = nn.ModuleList(Block(D, s.n_heads, s.kv_heads, s.mlp, s.norm, s.norm_place)
                                    for _ in range(s.n_layers))
        self.norm_final = make_norm(s.norm if s.norm_place == "pre" else "none", D)
        self.unembed = nn.Linear(D, vocab_size, bias=False)
        self._init_weights(s.init_scale * BASE_STD, s.n_layers, generator)

    def _init_weights(self, std: float, n_layers: int, generator: torch.Generator) -> None:
        """Normal(0, std) for every matrix and embedding; the projections back into the residual stream get
        std / sqrt(2 n_layers) (GPT-2), so the stream's variance does not grow with depth."""
        for name, p in self.named_parameters():
            if p.dim() == 2:
                scale = 1 / math.sqrt(2 * n_layers) if name.endswith(("attn.out.weight", "down.weight")) else 1.0
                nn.init.normal_(p, 0.0, std * scale, generator=generator)

    def forward(self, tokens: torch.Tensor, record: bool = False) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits [B, T, V] for tokens [B, T]; with record, every layer's pattern [B, H, T, T] (else [])."""
        T = tokens.shape[1]
        if T > self.n_positions:
            raise ValueError(f"The model knows {self.n_positions} positions; the sequence has {T} tokens.")
        x = self.embed(tokens)                                                # [B, T, D]
        if self.pos_embed is not None:
            x = x + self.pos_embed.weight[:T]
        elif self.settings.positions == "sinusoidal":
            x = x + self.pos_table[:T]
        rope = (self.rope_cos, self.rope_sin) if self.settings.positions == "rope" else None
        patterns = []
        for block in self.blocks:
            x, pattern = block(x, self.bias, rope, record)
            if record:
                patterns.append(pattern)
        return self.unembed(self.norm_final(x)), patterns                     # [B, T, V]

    @torch.no_grad()
    def complete(self, prompt: torch.Tensor, n_new: int) -> torch.Tensor:
        """Greedy continuation of prompt [T0] by n_new tokens (the context stays within n_positions). [n_new]"""
        ids = prompt.clone()
        for _ in range(n_new):
            logits, _ = self(ids[-self.n_positions:][None])                  # [1, T, V]
            ids = torch.cat([ids, logits[0, -1].argmax().reshape(1)])
        return ids[len(prompt):]
