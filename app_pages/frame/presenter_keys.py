"""Presenter keys: the arrows step the head (left / right) and the layer (up / down), PageUp / PageDown a lesson's
step, however fast they come.

The browser owns the target: KEYS_JS counts every press from the values it was last shown and sends the target
values themselves (a component state value, with a sequence number), not "one step": Streamlit merges the rerun
requests that arrive while a run is going on, and a step button's clicks merged into one (three presses 20 ms
apart moved one layer), while the slider's stale value in the same request undid the callback's step. The target
survives the merge: the last request carries every press. The server applies a target once (its sequence number
above the session's ACK) and the browser takes the server's values again once they acknowledge its last press (a
slider the teacher dragged then wins).

A request the browser sends before the applying run's output reached it (any click, or a class strip's timed
rerun, a moment after the press) carries the sliders' values from before the press, and the same target: it stopped
the applying run and its stale slider value won, the press lost for good (about 1 press in 200 with a class, two
replicas and a loaded CPU; a CI run's teacher lost an ArrowRight). So the values a target set are held (HELD) while
the browser's address is still the one it had at the press (no run has finished since: finish() writes the link),
and hold_applied() sets them again in a run whose request brought a slider back at its value from before the press.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

KEY = "presenter_keys"
ACK = "_presenter_keys_ack"      # the last target's sequence number this session applied
HELD = "_presenter_keys_held"    # (the address at the press, {name: (value before, value applied)})
KEYS_JS = """
const FIELDS = new Set(["INPUT", "TEXTAREA", "SELECT"]);

function onKey(w, e) {
  const d = w.data;
  if (!d || e.altKey || e.ctrlKey || e.metaKey || e.shiftKey || e.repeat && e.key.startsWith("Page")) return;
  const t = e.target;
  if (t && (t.isContentEditable || FIELDS.has(t.tagName) || t.closest?.('[role="slider"]'))) return;
  const bound = d.keys[e.key];
  if (!bound || !(bound[0] in w.targets)) return;
  const [name, delta] = bound;
  const [low, high] = d.limits[name];
  const next = Math.min(high, Math.max(low, w.targets[name] + delta));
  e.preventDefault();
  if (next === w.targets[name]) return;
  w.targets[name] = next;
  w.sent += 1;
  w.set("target", { values: { ...w.targets }, seq: w.sent });
}

export default function (component) {
  const { data, setStateValue } = component;
  const w = (window.atlasPresenterKeys ??= { data: null, targets: {}, sent: 0, mounts: 0 });
  const mount = ++w.mounts;
  if (data.ack >= w.sent || Object.keys(w.targets).join() !== Object.keys(data.values).join()) {
    w.targets = { ...data.values };
    w.sent = Math.max(w.sent, data.ack);
  }
  w.data = data;
  w.set = setStateValue;
  if (!w.listening) {
    w.listening = true;
    document.addEventListener("keydown", (e) => onKey(w, e), true);
  }
  return () => {
    if (w.mounts === mount) w.data = null;
  };
}
"""
_keys = st.components.v2.component("atlas_presenter_keys", js=KEYS_JS)


@dataclass(frozen=True)
class Stepped:
    """A whole-number value the keys step: its name, value now, range, keys (KeyboardEvent.key -> step) and how a
    target is applied (a module-level function: a callback outlives the run)."""

    name: str
    value: int
    low: int
    high: int
    keys: dict[str, int]
    apply: Callable[[int], None]


def _apply_target(apply: dict[str, Callable[[int], None]]) -> None:
    """Component callback: set each value of a target not applied yet."""
    ss = st.session_state
    target = (ss.get(KEY) or {}).get("target") or {}
    seq = target.get("seq")
    if not isinstance(seq, int) or seq <= ss.get(ACK, 0):
        return
    ss[ACK] = seq
    held = {}
    for name, value in (target.get("values") or {}).items():
        if name in apply and isinstance(value, int):
            before = ss.get(name)
            apply[name](value)
            if name in ss and ss[name] != before:      # a widget's value (a lesson step is applied by the next run)
                held[name] = (before, ss[name])
    ss[HELD] = (dict(st.query_params), held)


def hold_applied() -> None:
    """First in a run, before any widget: the values the last target set, again where this run's request brought
    them back from before the press while the browser's address is still the press's (see the module docstring).
    Once the address moved on, the browser has the new values and what it sends is the teacher's."""
    ss = st.session_state
    address, held = ss.get(HELD) or ({}, {})
    if not held or dict(st.query_params) != address:
        ss.pop(HELD, None)
        return
    for name, (before, applied) in held.items():
        if ss.get(name) == before:
            ss[name] = applied


def presenter_keys(*stepped: Stepped) -> None:
    """Mount the key handler for these values (once per run)."""
    data = {"values": {s.name: s.value for s in stepped}, "limits": {s.name: (s.low, s.high) for s in stepped},
            "keys": {key: (s.name, delta) for s in stepped for key, delta in s.keys.items()},
            "ack": st.session_state.get(ACK, 0)}
    _keys(key=KEY, data=data, default={"target": None}, width="content", height=0,
          on_target_change=functools.partial(_apply_target, {s.name: s.apply for s in stepped}))
