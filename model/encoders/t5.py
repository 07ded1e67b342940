"""A T5 encoder-decoder from a `t5` GGUF, computed as transformers' T5ForConditionalGeneration (eager): the
encoder reads the source (its pieces, then </s>) with bidirectional attention; the decoder reads the target after its
start token with causal self-attention and attends to the encoder's output (cross-attention); the LM head predicts
the next target token. model/encoders/t5_layers.py holds the blocks; t5_generation.py writes a target step by step.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch

from model.decoder.trace import LayerDetail
from model.encoders import t5_generation
from model.encoders import t5_layers as L
from model.encoders.common import TokenizerMethods, as_numpy, attention_buffer, read_only
from model.encoders.config import T5Config
from model.encoders.reading import EncoderFile
from model.encoders.t5_generation import Seq2SeqGeneration, Seq2SeqStep
from model.encoders.traces import Seq2SeqTrace

STACKS = ("encoder", "decoder", "cross")


class EncoderPass:
    """The encoder's run on a source: its output and what each layer recorded."""

    def __init__(self, model: T5EncoderDecoder, ids: list[int]):
        cfg, w = model.config, model.weight
        S = len(ids)
        self.attention = attention_buffer((cfg.n_layers, cfg.n_heads, S, S))           # [L, H, S, S]
        self.hidden = np.empty((cfg.n_layers + 1, S, cfg.d_model), dtype=np.float32)   # [L + 1, S, D]
        x = w("token_embd.weight")[torch.tensor(ids)]                                # [S, D]
        bias = model.bias("enc", S)                                                 # [H, S, S]
        self.hidden[0] = x.numpy()
        for layer in range(cfg.n_layers):
            x, parts = L.encoder_block(x, w, layer, cfg, bias)
            self.attention[layer] = parts.pattern.numpy()
            self.hidden[layer + 1] = x.numpy()
        self.output = L.rms_norm(x, w("enc.output_norm.weight"), cfg.norm_eps)          # [S, D]
        self.cross_keys = [L.cross_keys(self.output, w, f"dec.blk.{i}.", cfg) for i in range(cfg.n_decoder_layers)]


class T5EncoderDecoder(TokenizerMethods):
    """A loaded T5 with its unigram tokenizer: encode / run / layer_detail / generate."""

    def __init__(self, f: EncoderFile):
        self.config: T5Config = f.config
        self.tokenizer = f.tokenizer
        self.source = str(f.path)
        self.tensor_sizes = dict(f.tensor_sizes)
        self.weights = f.weights                                                     # name -> float32 tensor
        self.head = self.weights.get("output.weight", self.weights["token_embd.weight"])   # [V, D]

    def weight(self, name: str) -> torch.Tensor:
        return self.weights[name]

    @property
    def decoder_start_token_id(self) -> int:
        return self.config.decoder_start_token_id

    def bias(self, stack: str, n_keys: int, n_queries: int | None = None) -> torch.Tensor:
        """The relative position bias [H, Tq, Tk] of the last n_queries (default all) of n_keys positions: the
        encoder's (bidirectional) or the decoder's (looking back)."""
        n_queries = n_keys if n_queries is None else n_queries
        keys = torch.arange(n_keys)
        return L.position_bias(self.weight(f"{stack}.blk.0.attn_rel_b.weight"), keys[n_keys - n_queries:], keys,
                               stack == "enc", self.config)

    def target_ids(self, target: str | Sequence[int] | None) -> list[int]:
        """The decoder's input: the start token, then the target's pieces (text without </s>, or ids as given)."""
        if target is None or isinstance(target, str):
            ids = self.tokenizer.encode(target) if target else []
            prefix, suffix = len(self.tokenizer.prefix_ids), len(self.tokenizer.suffix_ids)
            ids = ids[prefix:len(ids) - suffix]
        else:
            ids = [int(i) for i in target]
            if ids and not all(0 <= i < self.config.vocab_size for i in ids):
                raise ValueError(f"target ids must be from 0 to {self.config.vocab_size - 1}")
        if len(ids) + 1 > self.config.max_positions:
            raise ValueError(f"The target has {len(ids)} tokens; this model reads at most "
                             f"{self.config.max_positions - 1}.")
        return [self.decoder_start_token_id, *ids]

    def encoder_pass(self, ids: list[int]) -> EncoderPass:
        with torch.inference_mode():
            return EncoderPass(self, ids)

    def run(self, source: str, target: str | Sequence[int] | None = None,
            max_tokens: int | None = None) -> Seq2SeqTrace:
        """Encode source (its pieces and </s>, cut to max_tokens keeping </s>), then run the decoder on the start
        token and target's pieces: every attention (encoder, decoder self, cross) and the next-token logits."""
        ids, total = self.text_ids(source, max_tokens)
        cfg, targets = self.config, self.target_ids(target)
        T, S = len(targets), len(ids)
        enc = self.encoder_pass(ids)
        attention = attention_buffer((cfg.n_decoder_layers, cfg.n_heads, T, T))            # [L, H, T, T]
        cross = attention_buffer((cfg.n_decoder_layers, cfg.n_heads, T, S))                # [L, H, T, S]
        hidden = np.empty((cfg.n_decoder_layers + 1, T, cfg.d_model), dtype=np.float32)    # [L + 1, T, D]
        with torch.inference_mode():
            y = self.weight("token_embd.weight")[torch.tensor(targets)]              # [T, D]
            hidden[0] = y.numpy()
            bias = self.bias("dec", T)                                              # [H, T, T]
            for layer in range(cfg.n_decoder_layers):
                out = L.decoder_block(y, self.weight, layer, cfg, bias, enc.cross_keys[layer])
                y = out.y
                attention[layer], cross[layer] = out.self_parts.pattern.numpy(), out.cross_parts.pattern.numpy()
                hidden[layer + 1] = y.numpy()
            final = L.rms_norm(y, self.weight("dec.output_norm.weight"), cfg.norm_eps)     # [T, D]
            logits = L.lm_logits(final[-1:], self.head, cfg)[0]                      # [V]
        return Seq2SeqTrace(
            source=source, target=target if isinstance(target, str) else self.decode(targets[1:]),
            token_ids=ids, tokens=self.token_strings(ids), target_ids=targets,
            target_tokens=self.token_strings(targets), encoder_attention=read_only(enc.attention),
            attention=read_only(attention), cross_attention=read_only(cross), next_token_logits=as_numpy(logits),
            encoder_output=as_numpy(enc.output), last_hidden_state=as_numpy(final), truncated=total > S,
            n_tokens_total=total, encoder_hidden_states=read_only(enc.hidden), decoder_hidden_states=read_only(hidden))

    def layer_detail(self, trace: Seq2SeqTrace, layer: int, stack: str = "decoder") -> LayerDetail:
        """One attention layer recomputed from the trace with the forward pass's own code: the encoder's
        self-attention, the decoder's ("decoder") or its cross-attention ("cross"). scores are q.k plus the
        relative position bias (T5 does not divide by sqrt(head_dim); cross-attention has no bias), before the
        mask; q_rot / k_rot are q / k (no RoPE)."""
        if stack not in STACKS:
            raise ValueError(f"stack must be one of {', '.join(STACKS)}, got {stack!r}")
        n = self.config.n_layers if stack == "encoder" else self.config.n_decoder_layers
        if not 0 <= layer < n:
            raise ValueError(f"layer must be from 0 to {n - 1}, got {layer}")
        cfg, w = self.config, self.weight
        with torch.inference_mode():
            if stack == "encoder":
                x = torch.from_numpy(trace.encoder_hidden_states[layer].copy())       # [S, D]
                parts = L.self_attention(x, w, f"enc.blk.{layer}.", cfg, self.bias("enc", len(x)))
                mask = np.ones((len(x), len(x)), dtype=bool)
            else:
                y = torch.from_numpy(trace.decoder_hidden_states[layer].copy())       # [T, D]
                T, prefix = len(y), f"dec.blk.{layer}."
                parts = L.self_attention(y, w, prefix, cfg, self.bias("dec", T), None, L.causal(T, T))
                mask = L.causal(T, T).numpy()
                if stack == "cross":
                    keys = L.cross_keys(torch.from_numpy(trace.encoder_output.copy()), w, prefix, cfg)
                    parts = L.cross_attention(y + parts.out, w, prefix, cfg, keys)
                    mask = np.ones((T, trace.n_tokens), dtype=bool)
        q, k, v = as_numpy(parts.q), as_numpy(parts.k), as_numpy(parts.v)
        return LayerDetail(layer=layer, q=q, q_rot=q, k=k, k_rot=k, v=v, scores=as_numpy(parts.scores),
                           mask=read_only(mask), pattern=as_numpy(parts.pattern))

    def generate(self, source: str, max_new_tokens: int = 32, temperature: float = 1.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int = 0, max_tokens: int | None = None,
                 on_step: Callable[[Seq2SeqStep], bool | None] | None = None) -> Seq2SeqGeneration:
        """Write the target of source token by token (temperature 0: greedy), each step recording its candidates,
        its decoder self-attention row and its cross-attention row over the source; stops after </s> or
        max_new_tokens. on_step(step) returning True stops there."""
        return t5_generation.generate(self, source, max_new_tokens, temperature, top_k, top_p, seed, max_tokens,
                                      on_step)

    def generate_steps(self, source: str, max_new_tokens: int = 32, temperature: float = 1.0, top_k: int = 0,
                       top_p: float = 1.0, seed: int = 0, max_tokens: int | None = None) -> Iterator[Seq2SeqStep]:
        """generate as an iterator: yields each step as it is chosen (stop iterating to cancel)."""
        return t5_generation.steps(self, source, max_new_tokens, temperature, top_k, top_p, seed, max_tokens)
