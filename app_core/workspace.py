"""The service layer the pages call: one loaded model and everything sessions compute with it, computed once and
shared read-only (pure Python: no Streamlit).

A Workspace is a light view of a model: `trace(text)` (the forward trace every page starts from; an encoder's run, a
T5's encoder over the text: app_core/derived/seq2seq.py), `layer_detail`,
and `compute(fn, *args)` for anything derived from them, fn(workspace, *args) keyed by the model and the call
itself (call_key: the function's name and its arguments by value), so no page builds a key. Values live in the
process's byte-bounded caches (SHARES of ATLAS_CACHE_MB); several sessions asking for one value wait for one
computation. The model's own computations run one at a time, through `workspace.model` (the model behind
COMPUTE, a process-wide lock: two passes in parallel threads fight over the same cores and both end later than one
after the other): a function never takes the lock itself, and the lock is only held around one model call, never
while waiting for a cache (no deadlock). `workspace.lm` is the model for what costs nothing (its config, encode).
"""
from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Callable, Hashable
from typing import Any

from app_core.budget import ByteBudgetCache
from app_core.call_key import call_key
from app_core.derived import seq2seq
from app_core.families import DECODER, family_of
from app_core.scheduling import COMPUTE
from model.calculator.params import kv_cache_bytes_per_token, shape_from_config
from model.decoder.config import DEFAULT_MAX_TOKENS, FLOAT32_ATTENTION_BYTES

SHARES = {"traces": 0.6, "layer_details": 0.15, "derived": 0.1, "generations": 0.1, "figures": 0.05}


def _figure_bytes(entry: tuple) -> int:
    """A shared figure's (figure, bytes estimated when it was made) entry: its bytes."""
    return entry[1]


@functools.cache
def shared_caches(budget_mb: int) -> dict[str, ByteBudgetCache]:
    """The process's caches by share of budget_mb (one set per process and budget)."""
    total = budget_mb * 2**20
    return {name: ByteBudgetCache(name, int(total * share), on_evict=gc.collect,
                                  **({"size_of": _figure_bytes} if name == "figures" else {}))
            for name, share in SHARES.items()}


class LockedModel:
    """A model whose every method call runs under COMPUTE (attributes that are not methods pass through)."""

    def __init__(self, lm):
        self._lm = lm

    def __getattr__(self, name: str):
        value = getattr(self._lm, name)
        if not callable(value):
            return value

        def locked(*args, **kwargs):
            with COMPUTE:
                return value(*args, **kwargs)
        return locked


class Workspace:
    """One model's shared computations (see the module's docstring)."""

    def __init__(self, lm, key: Hashable, caches: dict[str, ByteBudgetCache],
                 max_tokens: int = DEFAULT_MAX_TOKENS):
        self.lm = lm
        self.model = LockedModel(lm)
        self.key = key
        self.max_tokens = min(max_tokens, lm.config.max_positions)     # a model with a shorter context reads less
        self._caches = caches

    def trace(self, text: str):
        """The forward trace of text (its first max_tokens tokens), shared by every session."""
        traces, key = self._caches["traces"], (self.key, text, self.max_tokens)
        found = traces.peek(key)                   # a cached one: no tokenizing (for its size) at every rerun
        if found is not None:
            return found
        return traces.get(key, lambda: seq2seq.text_trace(self.model, text, self.max_tokens), self._trace_bytes(text))

    def cached_trace(self, text: str):
        """The trace of text if some session has made it already, else None (nothing is computed)."""
        return self._caches["traces"].peek((self.key, text, self.max_tokens))

    def layer_detail(self, text: str, layer: int):
        """q / k / v before and after RoPE, scores before the mask, mask and pattern of one layer (recomputed from
        the trace)."""
        return self.compute(_layer_detail, text, layer, share="layer_details")

    def compute(self, fn: Callable[..., Any], *args, share: str = "derived",
                progress: Callable[[Any], None] | None = None, **kwargs) -> Any:
        """fn(self, *args, **kwargs) (a module's function), computed once for every session asking with the same
        model and arguments, kept in the cache `share`. progress, when given, is passed on to fn (not part of the
        key: it shows how the computation goes)."""
        extra = {} if progress is None else {"progress": progress}
        return self._caches[share].get(self._key(fn, args, kwargs), lambda: fn(self, *args, **kwargs, **extra))

    def computed(self, fn: Callable[..., Any], *args, share: str = "derived", **kwargs) -> Any:
        """compute's value if some session has computed it already, else None (nothing is computed)."""
        return self._caches[share].peek(self._key(fn, args, kwargs))

    @contextlib.contextmanager
    def alone(self):
        """The machine to oneself for a sequence of model work (a regrouped twin's pass, a timing): COMPUTE held
        throughout. Inside, never ask for a trace or a computed value (another thread may hold it waiting for
        COMPUTE)."""
        with COMPUTE:
            yield

    def _key(self, fn, args: tuple, kwargs: dict) -> Hashable:
        return (self.key, self.max_tokens, call_key(fn, args, kwargs))

    def _trace_bytes(self, text: str) -> int:
        cfg = self.lm.config
        T = min(len(self.lm.encode(text)), self.max_tokens)
        if family_of(self.lm) != DECODER:
            return seq2seq.trace_bytes(cfg, T)
        attention = cfg.n_layers * cfg.n_heads * T * T                 # values; float16 above 64 MB of float32
        keys_values = kv_cache_bytes_per_token(shape_from_config(cfg), "fp32") * T      # the trace keeps k and v
        return attention * (4 if 4 * attention <= FLOAT32_ATTENTION_BYTES else 2) + keys_values


def _layer_detail(ws: Workspace, text: str, layer: int):
    return seq2seq.layer_detail(ws.model, ws.trace(text), layer)
