"""The Decoder: embeddings, the blocks (model.decoder.blocks) and the LM head, run on a text to record a ForwardTrace.

Every architecture is the same loop: token embeddings (+ learned position embeddings for GPT-2), pre-norm blocks
under a mask (causal by default, or any narrower one the caller allows), the final norm and the LM head. A pass takes
hooks at named points (model/decoder/hooks.py) for that call only. Weights are read-only and shared; a pass keeps its
state in local variables, so one model serves many sessions at once.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import torch

from model.decoder.blocks import Attention, Block, Norm, Past, Record, Weight, dense, runs_natively
from model.decoder.config import DEFAULT_MAX_TOKENS, FLOAT32_ATTENTION_BYTES, ModelConfig
from model.decoder.embedding import embedding_table
from model.decoder.hooks import HookFn, Hooks, capture, hook_names
from model.decoder.matrices import QuantizedMatrix
from model.decoder.rope import rope_cos_sin
from model.decoder.trace import ForwardTrace, LayerDetail
from model.native.threads import torch_on_calling_thread
from model.tokenizers.delegate import TokenMethods

CHECKPOINT_EVERY = 6  # keep every 6th layer's input: layer_detail re-runs at most 5 blocks; 1/6 of the memory
LOGPROB_ROWS = 64     # positions whose logits over the whole vocabulary are computed at a time (token_logprobs)
BATCH_BYTES = 64 * 2**20   # float32 scores (and MLP activations) of one batch of sequences (variants_per_batch)
DETAIL_POINTS = ("attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_rot_q", "attn.hook_rot_k",
                 "attn.hook_attn_scores", "attn.hook_pattern")


@dataclass(frozen=True)
class Positions:
    """What every block of a T-token pass needs besides the residual stream: RoPE angles and the mask."""

    cos: torch.Tensor | None   # [T, hd/2] (None: the model has no RoPE)
    sin: torch.Tensor | None   # [T, hd/2]
    mask: torch.Tensor         # [T, T] bool, True where query i may attend key j

    def rows_from(self, n: int) -> Positions:
        """What positions n.. need when positions 0..n-1 come as past keys and values: their angles, their rows of
        the mask over every key ([T - n, T])."""
        cos, sin = (None, None) if self.cos is None else (self.cos[n:], self.sin[n:])
        return Positions(cos, sin, self.mask[n:])


class Decoder(TokenMethods):
    """A loaded decoder with its tokenizer: encode / decode / run / layer_detail / token_logprobs."""

    def __init__(self, config: ModelConfig, weights: dict[str, object], tokenizer, source: str,
                 tensor_sizes: dict[str, int], eos_token_id: int | None = None):
        """Builds the blocks from weights (GGUF tensor names: float32 arrays or QuantizedMatrix), emptying that dict
        as it goes."""
        def take(name: str) -> Weight | None:
            array = weights.pop(name, None)
            return array if array is None or isinstance(array, QuantizedMatrix) else torch.from_numpy(array)

        self.config = config
        self.source = source
        self.tokenizer = tokenizer
        self.tensor_sizes = dict(tensor_sizes)
        self.eos_token_id = eos_token_id                                             # generation stops after it
        self.embedding = embedding_table(weights.pop("token_embd.weight"))           # [V, D]
        self.position_embedding = take("position_embd.weight")                       # [P, D] (GPT-2) or None
        self.lm_head = embedding_table(weights.pop("output.weight")) if "output.weight" in weights else self.embedding
        self.out_norm = Norm(config.norm, take("output_norm.weight"), take("output_norm.bias"), config.norm_eps)
        self.rope_factors = take("rope_freqs.weight")                                # [hd/2] divisors or None
        self.blocks = [Block(config, lambda name, i=i: take(f"blk.{i}.{name}")) for i in range(config.n_layers)]

    @property
    def name(self) -> str:
        return self.config.name

    def check_max_tokens(self, max_tokens: int) -> int:
        limit = self.config.max_positions
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)) or \
                not 1 <= max_tokens <= limit:
            raise ValueError(f"max_tokens must be an integer from 1 to {limit} (the model's context length), "
                             f"got {max_tokens!r}")
        return int(max_tokens)

    # ------------------------------------------------------------------------------------------------ the pass
    def embed(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        """The residual stream entering layer 0 for ids [n] at positions start..start+n-1: [n, D]."""
        x = self.embedding.rows(ids)                                                 # [n, D]
        if self.position_embedding is not None:
            x = x + self.position_embedding[start:start + ids.shape[0]]              # [n, D]
        return x

    def embed_tokens(self, ids: torch.Tensor, hooks: Hooks | None = None) -> torch.Tensor:
        """The stream entering block 0 for ids [B, T] at positions 0..T-1: [B, T, D], through the hooks at
        hook_embed and hook_pos_embed."""
        hooks = self.hooks(hooks)
        B, T = ids.shape
        x = hooks.model("hook_embed", self.embedding.rows(ids.reshape(-1)).view(B, T, -1))   # [B, T, D]
        if self.position_embedding is not None:
            table = self.position_embedding[:T].expand(B, T, -1)                     # [B, T, D] (a view)
            x = x + hooks.model("hook_pos_embed", table.clone() if hooks.model.has("hook_pos_embed") else table)
        return x

    def hooks(self, hooks: Mapping[str, HookFn] | Hooks | None) -> Hooks:
        """hooks ({point name: f(tensor, hook)}) checked against this model's points (ValueError naming the valid
        ones otherwise)."""
        return hooks if isinstance(hooks, Hooks) else Hooks(hooks, self.config)

    def hook_names(self) -> list[str]:
        """Every hook point of this model, in the order a pass reaches them (model/decoder/hooks.py)."""
        return hook_names(self.config)

    def rope_tables(self, positions) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """cos and sin [T, hd/2] of the rotation angles at these positions, None, None without RoPE."""
        cfg = self.config
        if not cfg.uses_rope:
            return None, None
        return rope_cos_sin(positions, cfg.head_dim, cfg.rope_theta, self.rope_factors)

    def positions(self, T: int, allowed: np.ndarray | None = None) -> Positions:
        """RoPE tables and the mask for a T-token pass (allowed: see check_allowed; None: causal)."""
        cos, sin = self.rope_tables(range(T))
        mask = causal_mask(T) if allowed is None else torch.from_numpy(np.array(allowed, dtype=bool))
        return Positions(cos, sin, mask)

    def positions_for(self, trace: ForwardTrace) -> Positions:
        """The positions and mask the trace was recorded with (re-runs use the same mask)."""
        return self.positions(trace.n_tokens, trace.allowed)

    def pass_threads(self, rows: int):
        """The context a pass over `rows` positions runs in: torch's operations on the calling thread alone where
        the blocks' products run on the native kernel's threads (two pools spinning on the same cores)."""
        return torch_on_calling_thread(runs_natively(self.blocks[0].attn.w_qkv, rows))

    def final_norm(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_norm(x)

    def run(self, text: str, max_tokens: int | None = None, allowed: np.ndarray | None = None,
            hooks: Mapping[str, HookFn] | None = None) -> ForwardTrace:
        """Tokenize text (cut to max_tokens: by default DEFAULT_MAX_TOKENS or the model's context, whichever is
        smaller), run the decoder, and record attention and next-token logits.
        allowed: [T, T] bool mask for the tokens run (True where query i may attend key j <= i), applied in every
        layer; None is the causal mask.
        hooks: {point name: f(tensor, hook)} for this pass only (model/decoder/hooks.py; self.hook_names())."""
        max_tokens = self.check_max_tokens(min(DEFAULT_MAX_TOKENS, self.config.max_positions)
                                           if max_tokens is None else max_tokens)
        if not isinstance(text, str) or not text.strip():
            raise ValueError("The text is empty. Type some text (at least one non-space character) to run the model.")
        all_ids = self.encode(text)
        if len(all_ids) == len(self.tokenizer.prefix_ids):
            raise ValueError("The text has no tokens this model can read (only bytes outside its vocabulary). "
                             "Type some ordinary text.")
        ids = all_ids[:max_tokens]
        return self.run_ids(ids, text=text, n_tokens_total=len(all_ids), allowed=allowed, hooks=hooks)

    def run_ids(self, ids: list[int], text: str = "", n_tokens_total: int | None = None,
                allowed: np.ndarray | None = None, hooks: Mapping[str, HookFn] | None = None) -> ForwardTrace:
        """Run the decoder on token ids (at most the context length). A pass with hooks records what they made
        (its checkpoints: the stream entering a block, before its hooks) and no keys and values (a generation
        starts from none of them)."""
        cfg = self.config
        T = len(ids)
        if not 1 <= T <= cfg.max_positions:
            raise ValueError(f"Need 1 to {cfg.max_positions} tokens, got {T}")
        if allowed is not None:
            allowed = check_allowed(allowed, T)
        hooks = self.hooks(hooks)
        n_values = cfg.n_layers * cfg.n_heads * T * T
        dtype = np.float32 if 4 * n_values <= FLOAT32_ATTENTION_BYTES else np.float16
        attention = np.empty((cfg.n_layers, cfg.n_heads, T, T), dtype=dtype)       # [L, H, T, T]
        kv_shape = (cfg.n_layers, cfg.n_kv_heads, T, cfg.head_dim)
        keys, values = (None, None) if allowed is not None or hooks else \
            (np.empty(kv_shape, np.float32), np.empty(kv_shape, np.float32))         # [L, KV, T, hd] each
        checkpoints: dict[int, np.ndarray] = {}
        with torch.inference_mode(), self.pass_threads(T):
            pos = self.positions(T, allowed)
            x = self.embed_tokens(torch.tensor([ids]), hooks)                      # [1, T, D]
            for i, block in enumerate(self.blocks):
                if i % CHECKPOINT_EVERY == 0:
                    checkpoints[i] = _read_only(x[0].numpy().copy())               # [T, D]
                record = Record(torch.from_numpy(attention[i]), *(() if keys is None else
                                (torch.from_numpy(keys[i]), torch.from_numpy(values[i]))))
                x = block(x, pos.cos, pos.sin, pos.mask, hooks.layer(i), record=record)   # [1, T, D]
            final = hooks.model("ln_final.hook_normalized", self.final_norm(x))[0]   # [T, D]
            logits = self.lm_head.logits(final[-1])                                # [V]: only the last position
        return ForwardTrace(
            text=text, token_ids=list(ids), tokens=self.token_strings(ids), attention=_read_only(attention),
            next_token_logits=_read_only(logits.numpy().copy()),
            truncated=(n_tokens_total or T) > T, n_tokens_total=n_tokens_total or T, checkpoints=checkpoints,
            final_hidden=_read_only(final.numpy().copy()), allowed=allowed,
            keys=None if keys is None else _read_only(keys), values=None if values is None else _read_only(values),
            hooked=hooks.names)

    def run_blocks(self, x: torch.Tensor, pos: Positions, hooks: Mapping[str, HookFn] | Hooks | None = None,
                   start: int = 0, stop: int | None = None, past: list[Past] | None = None) -> torch.Tensor:
        """Blocks start..stop-1 (stop None: to the last) over the stream x [B, T, D] entering block start: the
        stream leaving block stop-1 [B, T, D]. pos: the positions of x's rows (Positions.rows_from where past holds
        each layer's keys and values of the positions before them, shared by every sequence). hooks: at the
        blocks' points (the model's own points are embed_tokens' and run's). Runs under the caller's grad mode."""
        hooks = self.hooks(hooks)
        stop = self.config.n_layers if stop is None else stop
        with self.pass_threads(x.shape[0] * x.shape[1]):
            for i in range(start, stop):
                x = self.blocks[i](x, pos.cos, pos.sin, pos.mask, hooks.layer(i), None if past is None else past[i])
        return x

    def rerun(self, trace: ForwardTrace, first: int, stop: int | None = None,
              hooks: Mapping[str, HookFn] | Hooks | None = None, pos: Positions | None = None) -> torch.Tensor:
        """The stream leaving block stop-1 ([1, T, D]; stop None: the last block) re-run from the trace's nearest
        checkpoint at or before block `first`, with the forward pass's own code (its numbers are the pass's),
        under the trace's mask (pos: its positions, when the caller has them)."""
        start = first - first % CHECKPOINT_EVERY
        x = torch.from_numpy(trace.checkpoints[start].copy())[None]                # [1, T, D]
        return self.run_blocks(x, pos or self.positions_for(trace), hooks, start, stop)

    def variants_per_batch(self, T: int) -> int:
        """How many sequences of T tokens one batched pass holds within BATCH_BYTES."""
        cfg = self.config
        return max(1, BATCH_BYTES // (4 * T * max(2 * cfg.n_heads * T, 3 * cfg.d_ff)))

    def token_logprobs(self, trace: ForwardTrace) -> np.ndarray:
        """[T - 1] float32: log p(token t+1 | tokens <= t) under the trace's own pass (its mask included)."""
        T = trace.n_tokens
        out = np.empty(T - 1, dtype=np.float32)
        targets = torch.tensor(trace.token_ids[1:])                                # [T - 1]
        with torch.inference_mode():
            hidden = torch.from_numpy(trace.final_hidden.copy())                   # [T, D]
            for start in range(0, T - 1, LOGPROB_ROWS):
                rows = slice(start, min(start + LOGPROB_ROWS, T - 1))
                logits = self.lm_head.logits(hidden[rows])                         # [n, V]
                picked = logits.gather(1, targets[rows, None])[:, 0]               # [n]
                out[rows] = (picked - torch.logsumexp(logits, dim=-1)).numpy()
        return out

    def layer_detail(self, trace: ForwardTrace, layer: int) -> LayerDetail:
        """Recompute one layer's q, k, v (pre/post RoPE), scores, mask and pattern, re-running the blocks from
        the nearest checkpoint with the forward pass's own code: the numbers are exactly the forward's."""
        if not 0 <= layer < self.config.n_layers:
            raise ValueError(f"layer must be from 0 to {self.config.n_layers - 1}, got {layer}")
        seen: dict[str, torch.Tensor] = {}
        with torch.inference_mode():
            pos = self.positions_for(trace)
            self.rerun(trace, layer, layer + 1, capture([f"blocks.{layer}.{p}" for p in DETAIL_POINTS], seen), pos)
        q, k, v, q_rot, k_rot, scores, pattern = (seen[f"blocks.{layer}.{p}"][0].numpy() for p in DETAIL_POINTS)
        return LayerDetail(layer=layer, q=q, q_rot=q_rot, k=k, k_rot=k_rot, v=v, scores=scores,
                           mask=pos.mask.numpy(), pattern=pattern)

    # ------------------------------------------------------------------------------------------ GQA / MQA
    def with_kv_heads(self, n: int) -> Decoder:
        """This model with its key/value heads regrouped into n (a divisor of n_heads): KV head j of the result is the
        mean of the original KV heads its query heads read (GQA paper's mean-pooling; n = n_heads duplicates each,
        which changes no output). Every other weight is shared with this model."""
        cfg = self.config
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= cfg.n_heads \
                or cfg.n_heads % n:
            divisors = [d for d in range(1, cfg.n_heads + 1) if cfg.n_heads % d == 0]
            raise ValueError(f"n must divide the number of query heads ({cfg.n_heads}): one of {divisors}; got {n!r}")
        if n == cfg.n_kv_heads:
            return self
        new_cfg = replace(cfg, n_kv_heads=int(n))
        twin = copy.copy(self)
        twin.config = new_cfg
        twin.blocks = []
        for block in self.blocks:
            new_block = copy.copy(block)
            new_block.attn = _regrouped(block.attn, new_cfg)
            twin.blocks.append(new_block)
        return twin


def _regrouped(attn: Attention, cfg: ModelConfig) -> Attention:
    """attn with its K and V rows (and biases) pooled into cfg.n_kv_heads heads (see Decoder.with_kv_heads)."""
    old = attn.cfg
    H, hd, old_kv, new_kv = old.n_heads, old.head_dim, old.n_kv_heads, cfg.n_kv_heads
    reads = torch.arange(H) // old.group_size                                      # [H] old KV head of each query
    # pool[j, i]: weight of old KV head i in new KV head j = share of new group j's query heads that read i
    pool = torch.zeros(new_kv, old_kv, dtype=torch.float64)
    pool.index_put_((torch.arange(H) // cfg.group_size, reads), torch.ones(H, dtype=torch.float64), accumulate=True)
    pool /= pool.sum(1, keepdim=True)                                              # [new KV, old KV]

    def regroup(rows: torch.Tensor) -> torch.Tensor:                              # [old KV hd, ...] -> [new KV hd, ...]
        heads = rows.reshape(old_kv, hd, -1).double()                             # [old KV, hd, m]
        return torch.einsum("ji,idm->jdm", pool, heads).float().reshape(new_kv * hd, *rows.shape[1:])

    def fused(t):
        if t is None:
            return None
        if isinstance(t, tuple):                                                   # separate (quantized) q, k, v
            q, k, v = t
            return q, regroup(dense(k)), regroup(dense(v))
        q, k, v = t.split((H * hd, old_kv * hd, old_kv * hd))
        return torch.cat((q, regroup(k), regroup(v)))

    return Attention(cfg, fused(attn.w_qkv), fused(attn.b_qkv), attn.w_o, attn.b_o, attn.q_norm, attn.k_norm)


def check_allowed(allowed, T: int) -> np.ndarray:
    """allowed as a read-only [T, T] bool array, or ValueError: every query must see at least one key, and none
    may see a later key (the model is causal)."""
    mask = np.asarray(allowed)
    if mask.shape != (T, T):
        raise ValueError(f"The mask must be a [T, T] array for the {T} tokens run, got shape {mask.shape}")
    if mask.dtype != bool:
        raise ValueError(f"The mask must be boolean (True where query i may attend key j), got {mask.dtype}")
    if np.triu(mask, 1).any():
        i, j = np.argwhere(np.triu(mask, 1))[0]
        raise ValueError(f"The mask lets query {i} attend the later key {j}; this decoder is causal: allow only "
                         f"keys j <= i")
    empty = np.flatnonzero(~mask.any(axis=1))
    if empty.size:
        raise ValueError(f"The mask leaves query {empty[0]} with no key to attend (its row is all False): softmax over "
                         f"nothing is undefined. Allow at least the token itself (the diagonal).")
    return _read_only(mask.copy())


def causal_mask(T: int) -> torch.Tensor:
    """[T, T] bool, True where query i may attend to key j (j <= i)."""
    return torch.ones(T, T, dtype=torch.bool).tril()


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a
