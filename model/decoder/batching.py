"""Concurrent generations share each decoding step: continuous batching for a whole class pressing Generate.

One GenerationBatcher per model runs a thread that keeps every active generation's KV cache (an
IncrementalDecoder each) and advances all of them by one token per step with generation.step_rows, which reads the
weights once for the whole batch: a one-token step is memory-bound, so B sequences cost little more than one.
Requests join at the next step (the prompts of those joining together are run first, short ones in one pass
over the weights, a prefix that an active request's cache or another joining prompt holds copied rather than
computed again, see generation.feed_together; a request given its prompt's trace starts from its keys and values
instead) and leave when they reach max_new_tokens, the end-of-sequence token,
or are cancelled (the caller stopped iterating, or its on_step returned True). An idle batcher waits JOIN_WINDOW_S
for requests sent together. Each request keeps its own random generator and its own cache, so its tokens are the
ones it would get alone. When no request is left the thread ends.

A caller iterating (run) is woken for every step; generate's on_step instead runs in the batch thread and the caller
wakes once at the end: on 2 cores a caller woken mid-step took a core from the step's second kernel thread (~5 ms a
step).
"""
from __future__ import annotations

import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from model.decoder import generation as G
from model.decoder.generation_records import Generation, GenerationSettings, GenerationStep
from model.decoder.next_token import SoftmaxWorkspace, choose_steps
from model.decoder.trace import ForwardTrace

_DONE = object()
JOIN_WINDOW_S = 0.005      # an idle batcher waits this long for more requests (ten threads' arrive within ~6 ms)


@dataclass(eq=False)
class Request:
    """One generation in the batch: its cache, its random generator, and the queue its steps go to."""

    prompt_ids: list[int]
    settings: GenerationSettings
    on_step: Callable[[GenerationStep], bool | None] | None = None   # run in the batch thread (else: to steps)
    steps: queue.Queue = field(default_factory=queue.Queue)            # steps (when no on_step), errors, _DONE
    made_steps: list = field(default_factory=list)                     # the steps, when on_step
    cancelled: threading.Event = field(default_factory=threading.Event)
    trace: ForwardTrace | None = None   # starts the cache instead of a prompt pass (generation.starts_prompt)
    closed: bool = False          # _DONE sent
    decoder: G.IncrementalDecoder | None = None
    rng: np.random.Generator | None = None
    made: int = 0                 # tokens chosen so far
    next_token: int = -1          # the token to feed at the next step


class GenerationBatcher:
    """The model's decoding loop shared by every concurrent generation (see the module docstring)."""

    def __init__(self, lm):
        self.lm = lm
        self._joining: list[Request] = []
        self._lock = threading.Condition()
        self._running = False
        self._softmaxes = SoftmaxWorkspace()      # the batch thread's, reused every step

    def run(self, prompt_ids: Sequence[int], settings: GenerationSettings,
            trace: ForwardTrace | None = None) -> Iterator[GenerationStep]:
        """Each step of one generation as soon as the batch has made it. Stop iterating to cancel. A trace of the
        prompt (generation.starts_prompt) starts its cache instead of a prompt pass."""
        request = self._submit(Request(list(prompt_ids), settings, trace=trace))
        try:
            while (item := request.steps.get()) is not _DONE:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            request.cancelled.set()

    def run_to_end(self, prompt_ids: Sequence[int], settings: GenerationSettings,
                   on_step: Callable[[GenerationStep], bool | None],
                   trace: ForwardTrace | None = None) -> list[GenerationStep]:
        """Every step of one generation. on_step(step) runs in the batch thread as each step is made (keep it short:
        the whole batch waits for it); returning True stops this generation there (its error stops only it). A
        trace of the prompt starts its cache, as in run."""
        request = self._submit(Request(list(prompt_ids), settings, on_step, trace=trace))
        try:
            item = request.steps.get()                 # _DONE or an error: the steps went to on_step
            if isinstance(item, BaseException):
                raise item
            return request.made_steps
        finally:
            request.cancelled.set()

    def _submit(self, request: Request) -> Request:
        with self._lock:
            self._joining.append(request)
            if not self._running:
                self._running = True
                threading.Thread(target=self._loop, daemon=True, name="generation-batch").start()
            self._lock.notify()
        return request

    def _loop(self) -> None:
        time.sleep(JOIN_WINDOW_S)       # requests sent together (a class pressing Generate) start together
        active: list[Request] = []
        while True:
            with self._lock:
                joining, self._joining = self._joining, []
                if not joining and not active:
                    self._running = False
                    return
            try:
                with torch.inference_mode():
                    active = [r for r in active if not r.cancelled.is_set()]
                    active += self._start(joining, active)
                    if active:
                        self._step(active)
                active = [r for r in active if not self._finished(r)]
            except Exception as exc:   # every waiting caller gets the error instead of waiting forever
                for r in active + joining:
                    r.steps.put(exc)
                active = []

    def _start(self, joining: list[Request], active: list[Request]) -> list[Request]:
        """Run the joining requests' prompts (short ones in one pass, a prefix an active request's cache or another
        joining prompt holds copied, see generation.feed_together) and choose their first tokens; returns those not
        already done."""
        if not joining:
            return []
        for r in joining:
            r.decoder = G.IncrementalDecoder(self.lm, len(r.prompt_ids) + r.settings.max_new_tokens - 1)
            r.rng = np.random.default_rng(r.settings.seed)
        prompted = [r for r in joining if r.trace is None]
        fed = dict(zip(prompted, G.feed_together([r.decoder for r in prompted], [r.prompt_ids for r in prompted],
                                                 donors=[r.decoder for r in active]) if prompted else [],
                       strict=True))
        started = [fed[r] if r.trace is None else r.decoder.start_from(r.trace) for r in joining]
        for r in joining:
            r.trace = None               # copied into the cache: a long text's trace is not held to the end
        self._choose(joining, [logits for logits, _ in started], [row for _, row in started])
        return [r for r in joining if not self._finished(r)]

    def _step(self, batch: list[Request]) -> None:
        rows = [np.empty((self.lm.config.n_layers, self.lm.config.n_heads, r.decoder.length + 1), np.float16)
                for r in batch]
        x = G.step_rows([r.decoder for r in batch], [r.next_token for r in batch], rows)   # [B, D]
        weights = batch[0].decoder.weights
        self._choose(batch, weights.logits(weights.out_norm(x)), rows)                    # logits [B, V]

    def _choose(self, batch: list[Request], logits: Sequence[np.ndarray] | np.ndarray,
                rows: Sequence[np.ndarray]) -> None:
        """Each request's next step from its logits [V] and attention row, every row at once
        (generation.choose_steps: a draw with each request's own generator); on_step runs here, in order. (A helper
        thread choosing half of the rows gave nothing: what numpy left there was Python, holding the GIL.)"""
        steps = choose_steps(self.lm, [r.made for r in batch], np.asarray(logits), [r.settings for r in batch],
                               [r.rng for r in batch], rows, self._softmaxes)
        for r, step in zip(batch, steps, strict=True):
            self._record(r, step)

    def _record(self, r: Request, step: GenerationStep) -> None:
        r.made += 1
        r.next_token = step.token_id
        if r.on_step is None:
            r.steps.put(step)
            return
        r.made_steps.append(step)
        try:
            stop = r.on_step(step) is True
        except Exception as exc:       # the caller's error ends its own generation only
            r.steps.put(exc)
            stop = True
        if stop:
            r.cancelled.set()

    def _finished(self, r: Request) -> bool:
        done = r.cancelled.is_set() or r.made >= r.settings.max_new_tokens or r.next_token == self.lm.eos_token_id
        if done and not r.closed:
            r.closed = True
            r.steps.put(_DONE)
            r.cancelled.set()            # finished: leaves the batch once
        return done


_BATCHERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_BATCHERS_LOCK = threading.Lock()


def batcher_for(lm) -> GenerationBatcher:
    """The model's batcher, made on first use and kept as long as the model."""
    with _BATCHERS_LOCK:
        batcher = _BATCHERS.get(lm)
        if batcher is None:
            batcher = _BATCHERS[lm] = GenerationBatcher(lm)
        return batcher


def generate_steps(lm, prompt_ids: Sequence[int], settings: GenerationSettings) -> Iterator[GenerationStep]:
    """Yield each step as soon as it is chosen (in the model's shared batch); stops after max_new_tokens or after the
    end-of-sequence token. prompt_ids must already fit (generation.prepare_prompt). Stop iterating to cancel."""
    return batcher_for(lm).run(prompt_ids, settings)


def generate(lm, prompt: str | Sequence[int], settings: GenerationSettings,
             on_step: Callable[[GenerationStep], bool | None] | None = None,
             trace: ForwardTrace | None = None) -> Generation:
    """One generation to its end in the model's shared batch. on_step(step) is called after each step (progress), in
    the batch's thread: keep it short; if it returns True, generation stops there (stop_reason "cancelled"). A
    causal trace of exactly the prompt's tokens (lm.run of the same text, generation.starts_prompt) starts the
    cache with its keys and values instead of a prompt pass; another trace is ignored."""
    text, ids, n_total = G.prepare_prompt(lm, prompt, settings.max_new_tokens)
    steps = batcher_for(lm).run_to_end(ids, settings, on_step or (lambda step: None),
                                       trace if G.starts_prompt(trace, ids) else None)
    if steps[-1].token_id == lm.eos_token_id:
        stop_reason = "eos"
    else:
        stop_reason = "length" if len(steps) == settings.max_new_tokens else "cancelled"
    new_ids = [s.token_id for s in steps]
    return Generation(prompt=text, prompt_ids=ids, tokens=lm.token_strings(ids + new_ids),
                        truncated=n_total > len(ids), n_prompt_tokens_total=n_total, settings=settings,
                        steps=tuple(steps), new_text=lm.decode(new_ids), stop_reason=stop_reason,
                        eos_token_id=lm.eos_token_id)
