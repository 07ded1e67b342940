"""LanguageModel: the decoder with every analysis of a trace as a method (the API the app and outside checks use).

The decoder (model.decoder) knows nothing of the analyses; they take a decoder and a trace (model.analysis), and this
class puts them together with the file reader, so imports go one way: decoder <- analysis <- language_model, and
files <- language_model. Every pass (run, run_ids, run_blocks, rerun: model.decoder.core) takes hooks at named
points for that call (model/decoder/hooks.py, hook_names()): the analyses below are written with them.
"""
from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from model.analysis.ablation import ablate_heads
from model.analysis.attribution import LogitAttribution, logit_attribution
from model.analysis.block_walk import BlockWalk, block_walk
from model.analysis.head_roles import probe_tokens, role_scores
from model.analysis.input_attribution import gradient_x_input, occlusion
from model.analysis.lens import LensTop, logit_lens, logit_lens_top
from model.analysis.patching import activation_patching
from model.analysis.stream import ResidualNorms, residual_norms
from model.analysis.token_args import input_ids, one_token_id
from model.decoder import batching, generation
from model.decoder.core import Decoder
from model.decoder.generation_records import Generation, GenerationSettings, GenerationStep
from model.decoder.trace import ForwardTrace
from model.files.gguf import read_gguf
from model.files.heap import paused_gc, release_free_heap


class LanguageModel(Decoder):
    """A loaded decoder with its tokenizer and the analyses the pages show."""

    @classmethod
    def from_gguf(cls, path: str | os.PathLike | None = None, keep_quantized: bool | None = None) -> LanguageModel:
        """Read a GGUF (model.files.gguf: checked, dequantized or kept quantized) and build the decoder it
        describes. keep_quantized None: quantized matrices for models too large for float32 (gguf.keeps_quantized)."""
        with paused_gc():
            g = read_gguf(path, keep_quantized)
            lm = cls(g.config, g.weights, g.tokenizer, str(g.path), g.tensor_sizes, g.eos_token_id)
            del g
        release_free_heap()
        return lm

    def block_walk(self, trace: ForwardTrace, layer: int, position: int) -> BlockWalk:
        """Every step of block `layer` for the token at `position`, with the forward pass's numbers."""
        return block_walk(self, trace, layer, position)

    def residual_norms(self, trace: ForwardTrace) -> ResidualNorms:
        """Norms of the residual stream after every layer and of each layer's attention / MLP outputs."""
        return residual_norms(self, trace)

    def logit_lens(self, trace: ForwardTrace, position: int = -1) -> np.ndarray:
        """[n_layers + 1, vocab_size] float32: row 0 from the embeddings, row l after layer l (last row: logits)."""
        return logit_lens(self, trace, position)

    def logit_lens_top(self, trace: ForwardTrace, k: int = 5, positions=None) -> LensTop:
        """Top-k ids and probabilities of the logit lens at every (layer, position): [n_layers + 1, P, k]."""
        return logit_lens_top(self, trace, k, positions)

    def logit_attribution(self, trace: ForwardTrace, token_id: int, position: int = -1) -> LogitAttribution:
        """Direct contributions of the embedding, every head and every MLP to token_id's logit at position."""
        return logit_attribution(self, trace, token_id, position)

    def ablate_heads(self, trace: ForwardTrace, heads) -> np.ndarray:
        """Next-token logits [vocab_size] with the given (layer, head) pairs switched off."""
        return ablate_heads(self, trace, heads)

    def head_role_probe(self) -> list[int]:
        """The standard probe of head_role_scores: the BOS (when the tokenizer adds one), then 32 distinct random
        ordinary tokens (seed 0) twice (model/analysis/head_roles.py)."""
        tok = self.tokenizer
        return probe_tokens(min(tok.vocab_size, self.config.vocab_size), tok.special_ids, tok.prefix_ids)

    def head_role_scores(self, tokens: list[int] | None = None) -> dict[str, np.ndarray]:
        """{"previous_token", "induction", "duplicate_token", "sink"}: each [layers, query heads] float64, from
        the causal attention of one run on tokens (ids used as given, no BOS added) or on head_role_probe()."""
        ids = self.head_role_probe() if tokens is None else input_ids(self, list(tokens), "token list")
        return role_scores(self.run_ids(ids).attention, ids)

    def activation_patching(self, clean_text: str, corrupt_text: str, answer, foil, kind: str) -> np.ndarray:
        """Patching effects (D_patched - D_corrupt) / (D_clean - D_corrupt), D = logit[answer] - logit[foil] at the
        last position: kind "resid" [layers, T] (stream entering block l at position p), "head" [layers, heads]
        (a head's mixed values at every position). answer / foil: token ids or one-token strings."""
        return activation_patching(self, clean_text, corrupt_text, answer, foil, kind)

    def occlusion(self, text: str | list[int], target=None, replacement=None) -> np.ndarray:
        """[T]: the change in log p(target) at the last position when each token in turn is replaced by
        `replacement` (default: the model's token for one space). target: an id or one-token string; default the
        model's top next token."""
        ids = input_ids(self, text)
        replacement = None if replacement is None else one_token_id(self, replacement, "replacement")
        return occlusion(self, ids, self._attribution_target(ids, target), replacement)

    def gradient_x_input(self, text: str | list[int], target=None) -> np.ndarray:
        """[T]: d log p(target) / d embedding . embedding for each input token (torch autograd, float32 forward).
        target: an id or one-token string; default the model's top next token."""
        ids = input_ids(self, text)
        return gradient_x_input(self, ids, self._attribution_target(ids, target))

    def _attribution_target(self, ids: list[int], target) -> int:
        if target is None:
            return int(np.argmax(self.run_ids(ids).next_token_logits))
        return one_token_id(self, target, "target")

    def generate(self, prompt: str | list[int], max_new_tokens: int = 32, temperature: float = 1.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int = 0, on_step=None, trace: ForwardTrace | None = None) -> Generation:
        """Continue prompt (text, or token ids) with a KV cache, recording each step (model/decoder/generation.py);
        concurrent calls share each decoding step (model/decoder/batching.py).
        temperature 0 is greedy. on_step(step) is called after each step; returning True from it stops there.
        trace: the prompt's own trace (self.run of the same text), whose keys and values start the cache instead of
        a prompt pass (the numbers of this forward, not of the step's kernels); ignored unless it holds exactly the
        prompt's tokens under the causal mask."""
        settings = GenerationSettings(max_new_tokens, temperature, top_k, top_p, seed)
        return batching.generate(self, prompt, settings, on_step, trace)

    def generate_steps(self, prompt: str | list[int], max_new_tokens: int = 32, temperature: float = 1.0,
                       top_k: int = 0, top_p: float = 1.0, seed: int = 0) -> Iterator[GenerationStep]:
        """generate as an iterator: yields each GenerationStep as it is chosen (stop iterating to cancel)."""
        settings = GenerationSettings(max_new_tokens, temperature, top_k, top_p, seed)
        _, ids, _ = generation.prepare_prompt(self, prompt, max_new_tokens)
        return batching.generate_steps(self, ids, settings)
