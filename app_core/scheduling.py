"""How one server shares its cores among a class: the performance model, and every policy that follows from it.

The model: a class of sixty students follows a teacher on a server with two cores. Every page run is Python under
one interpreter lock (the GIL); the model's computations are native code that wants whole cores; the event loop
sends every page its messages. When the teacher changes the view, sixty followers rerun it at once. Left alone,
the sixty runs would each get a sixtieth of the interpreter and all finish together at the end, the teacher's next
change waiting behind them, and two model passes in parallel would fight over the same cores. So:

- One model computation at a time (COMPUTE, held by app_core.workspace around each model call, never while a cache
  is waited for), on every core but one (compute_threads): torch's workers spin at each operation, and one that
  shares its core with the event loop or a browser makes a pass 3-4x slower.
- The GIL hands over every SWITCH_INTERVAL_S (Python's 5 ms), and every GENERATING_SWITCH_INTERVAL_S while
  generations decode (generating()): the generation batch thread asks for it back ~10 times a step, each time behind
  the pages' runs (a class of 30, one instrumented run: a 30-row step 137 -> 121 ms at 1 ms). Not always 1 ms: sixty
  followers' reruns, handing it on five times as often, cost 15% more each (60 followers' p95 1.12 -> 0.95 s at 5 ms,
  bench/class_swarm.py, 2-core Xeon).
- A class's runs take turns (app_core.classroom.turns, TURN_GRACE_S, TURN_WAIT_S): the teacher's run first, then
  each class's followers one at a time, so the first followers see the change first and the teacher competes with
  at most one follower of the class; each class has its own turn, and a follower's turn ends once its messages have
  left (SENT_WAIT_S at most): the event loop sends them while the next follower waits, where behind the next one's
  run every system call of the loop waits the switch interval for the interpreter (sixty followers: each one's
  messages left 0.3-0.8 s after its run, all at the end). Pages whose run waits for a background job
  (OUT_OF_TURN_PAGES: a generation) run out of turn: holding the turn while waiting would hold the class back.
- A follower hears of a change HEAD_START_S after the teacher's run here ended (server.class_wait), so the teacher's
  last messages leave before sixty reruns share the cores (at 0 the teacher's view took 1.44x its time alone; at
  0.05 s 1.06x, and the followers' p95 0.1 s less than at 0.15 s); an idle follower runs no script at all (it waits
  on an HTTP route).
- Work a page asks for before its frame is drawn (router.ASKED_FIRST: the Generate page's generations), so a
  class's thirty clicks ask within ~0.3 s instead of ~1 s.
- When a class's generations end together, the Generate page draws each session's step figures one session at a
  time, after its text (FIGURES_IN_TURN): thirty sessions drawing at once all finish together at the end, and the
  event loop gets the GIL one time in thirty-one, so even the text each page wrote first waits for the last figure.
- A following student's frame leaves out the controls that would lead elsewhere (app_pages.classroom.panel.following:
  examples, the model picker, the share link, the keys): a quarter of a follower's run.
- Figures are made once for every session showing the same one (app_pages' shared figures): a follower draws the
  teacher's.
- A live view polls (a Train run's curves: a fragment's timed rerun, ~25 ms of the interpreter each on a 2-core
  Xeon once its figures are shared), the teacher's every 0.4 s, a following student's every FOLLOWER_POLL_S:
  sixty followers at 0.4 s would ask for 150 runs a second, several cores' worth, starving the training run itself.
- Garbage: Streamlit's collection after every run is off (.streamlit/config.toml, runner.postScriptGC = false) and
  what is alive after the model's load is frozen out of the collector's walks (freeze_long_lived).
The numbers these policies were measured with are in the README (a class's cost) and bench/class_swarm.py.
"""
from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from model.native.threads import threads_from_environment, usable_cores

SWITCH_INTERVAL_S = 0.005          # the interpreter hands the GIL on this often (Python's default)
GENERATING_SWITCH_INTERVAL_S = 0.001   # ... while a generation decodes
TURN_GRACE_S = 0.05                # after a teacher's run: its last messages go out before the followers' runs
TURN_WAIT_S = 3.0                  # the longest a follower's run waits for its turn (then it runs anyway)
SENT_WAIT_S = 0.05                 # the longest a follower's turn waits for its messages to leave
HEAD_START_S = 0.05                # followers hear of a change this long after the teacher's run here ended
OUT_OF_TURN_PAGES = frozenset({"generate"})    # a run there waits for a job: followers run out of turn
FOLLOWER_POLL_S = 2.0              # a following student's live view refreshes this often (the teacher's: 0.4 s)
COMPUTE = threading.Lock()         # one model computation at a time in this process
FIGURES_IN_TURN = threading.Lock()  # one session's generation step figures at a time


_decoding = [0]                    # generations decoding now (generating())
_DECODING_LOCK = threading.Lock()


@contextmanager
def generating() -> Iterator[None]:
    """Around a generation's decoding: the GIL hands over every GENERATING_SWITCH_INTERVAL_S until the last
    generation going on ends, then every SWITCH_INTERVAL_S again."""
    with _DECODING_LOCK:
        _decoding[0] += 1
        sys.setswitchinterval(GENERATING_SWITCH_INTERVAL_S)
    try:
        yield
    finally:
        with _DECODING_LOCK:
            _decoding[0] -= 1
            if not _decoding[0]:
                sys.setswitchinterval(SWITCH_INTERVAL_S)


def compute_threads() -> int:
    """Threads for one model computation: ATLAS_TORCH_THREADS, else every core this process may use but one.

    torch's worker threads spin and wait for each other at every operation; when one of them has to share its core
    (the event loop, another session's figures, a browser on the same machine), a forward pass takes 3-4x longer
    and burns 4x the CPU (64 tokens: 0.10 s on 2 free cores, 0.70 s with one core busy; 0.18 s on one thread
    either way). One core is left for everything else."""
    return threads_from_environment("ATLAS_TORCH_THREADS") or max(1, usable_cores() - 1)


def freeze_long_lived() -> None:
    """What is alive now (modules, the model, the tokenizer's tables) out of the collector's walks: a collection
    walking ~260k long-lived objects cost ~0.1 s of CPU; frozen, it walks only what sessions made since."""
    gc.collect()
    gc.freeze()
