"""A T5 writing its target token by token: the source encoded once, its cross-attention keys and values kept, each
step one decoder row over the cached keys and values of the positions before it (the forward pass's own blocks,
model.encoders.t5_layers). A step's token is chosen by the decoders' rules (model.decoder.next_token: temperature,
top-k, top-p, one draw from a seeded generator; temperature 0 is greedy) and recorded with its decoder
self-attention row and its cross-attention row: where in the source the model looked to write it."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields

import numpy as np
import torch

from model.decoder.generation_records import GenerationSettings, GenerationStep
from model.decoder.next_token import choose_token, next_token_distribution, record_step
from model.encoders import t5_layers as L
from model.encoders.common import read_only
from model.native.threads import torch_on_calling_thread


@dataclass(frozen=True, eq=False)
class Seq2SeqStep(GenerationStep):
    """A decoder's GenerationStep (token, candidates, probabilities; .attention [L_dec, H, t + 1] the row of the
    fed token over the target so far: the start token, then the tokens written) and its cross-attention row."""

    cross_attention: np.ndarray   # [L_dec, H, S] float32: the fed token's attention over the source


@dataclass(frozen=True, eq=False)
class Seq2SeqGeneration:
    """A source, the settings, and every target token written."""

    source: str
    source_ids: list[int]             # the encoder's input (pieces, then </s>)
    source_tokens: list[str]
    truncated: bool                   # the source was cut to max_tokens (its </s> kept)
    settings: GenerationSettings
    start_token_id: int               # the decoder's first input
    encoder_attention: np.ndarray     # [L_enc, H, S, S]
    steps: tuple[Seq2SeqStep, ...]
    new_text: str                     # decode(new_token_ids), </s> included when written
    stop_reason: str                  # "eos", "length" or "cancelled"
    eos_token_id: int | None

    @property
    def new_token_ids(self) -> list[int]:
        return [s.token_id for s in self.steps]

    @property
    def target_ids(self) -> list[int]:
        """The decoder's inputs so far: the start token, then every token written."""
        return [self.start_token_id, *self.new_token_ids]

    @property
    def cross_attention(self) -> np.ndarray:
        """[steps, L_dec, H, S]: every step's cross-attention row (the alignment of target to source)."""
        rows = [s.cross_attention for s in self.steps]
        return np.stack(rows) if rows else np.zeros((0, *self.encoder_attention.shape[:2], len(self.source_ids)))


def steps(model, source: str, max_new_tokens: int, temperature: float, top_k: int, top_p: float, seed: int,
          max_tokens: int | None = None) -> Iterator[Seq2SeqStep]:
    """Each step as it is chosen (see generate)."""
    settings = GenerationSettings(max_new_tokens, temperature, top_k, top_p, seed)
    ids, _ = model.text_ids(source, max_tokens)
    return _steps(model, model.encoder_pass(ids), settings)


def generate(model, source: str, max_new_tokens: int, temperature: float, top_k: int, top_p: float, seed: int,
             max_tokens: int | None = None,
             on_step: Callable[[Seq2SeqStep], bool | None] | None = None) -> Seq2SeqGeneration:
    """The whole generation: steps until </s>, max_new_tokens, or on_step returning True."""
    settings = GenerationSettings(max_new_tokens, temperature, top_k, top_p, seed)
    ids, total = model.text_ids(source, max_tokens)
    enc = model.encoder_pass(ids)
    made: list[Seq2SeqStep] = []
    reason = "length"
    for step in _steps(model, enc, settings):
        made.append(step)
        if step.token_id == model.eos_token_id:
            reason = "eos"
            break
        if on_step is not None and on_step(step):
            reason = "cancelled"
            break
    return Seq2SeqGeneration(
        source=source, source_ids=ids, source_tokens=model.token_strings(ids), truncated=total > len(ids),
        settings=settings, start_token_id=model.decoder_start_token_id, encoder_attention=read_only(enc.attention),
        steps=tuple(made), new_text=model.decode([s.token_id for s in made]), stop_reason=reason,
        eos_token_id=model.eos_token_id)


def _steps(model, enc, settings: GenerationSettings) -> Iterator[Seq2SeqStep]:
    """Step t feeds the token at target position t (the start token, then step t-1's) through every decoder
    block over the cache of positions < t, and chooses the next token from its logits."""
    cfg, w = model.config, model.weight
    rng = np.random.default_rng(settings.seed)
    caches: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * cfg.n_decoder_layers
    fed = model.decoder_start_token_id
    limit = min(settings.max_new_tokens, cfg.max_positions - 1)
    for t in range(limit):
        own = np.empty((cfg.n_decoder_layers, cfg.n_heads, t + 1), dtype=np.float32)     # [L, H, t + 1]
        cross = np.empty((cfg.n_decoder_layers, cfg.n_heads, len(enc.output)), dtype=np.float32)  # [L, H, S]
        with torch.inference_mode(), torch_on_calling_thread():                     # one row: no team to wake
            y = w("token_embd.weight")[torch.tensor([fed])]                          # [1, D]
            bias = model.bias("dec", t + 1, 1)                                      # [H, 1, t + 1]
            for layer in range(cfg.n_decoder_layers):
                out = L.decoder_block(y, w, layer, cfg, bias, enc.cross_keys[layer], caches[layer])
                y = out.y
                caches[layer] = (out.self_parts.k, out.self_parts.v)                 # [H, t + 1, hd] each
                own[layer], cross[layer] = out.self_parts.pattern[:, 0].numpy(), out.cross_parts.pattern[:, 0].numpy()
            final = L.rms_norm(y, w("dec.output_norm.weight"), cfg.norm_eps)         # [1, D]
            logits = L.lm_logits(final, model.head, cfg)[0].numpy()                  # [V] float32
        dist = next_token_distribution(logits, settings)
        step = record_step(model, t, choose_token(dist, rng), dist, own)
        fed = step.token_id
        yield Seq2SeqStep(**{f.name: getattr(step, f.name) for f in fields(GenerationStep)},
                          cross_attention=read_only(cross))
