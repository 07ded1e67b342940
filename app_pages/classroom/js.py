"""The live class's two browser-side components: a follower's listener (waits for the next view over HTTP,
server/class_wait.py) and the teacher's key courier (swaps a one-time ticket for the HttpOnly key cookie,
server/class_key.py).
Both are `st.components.v2` components: scripts in the page itself, drawn with height 0."""
from __future__ import annotations

import streamlit as st

# A following browser's loop: ask the server for the class's next view (it answers when the view is not `seen`, or
# after a few seconds: ask again); when it changed, rerun the page (a trigger) and wait until the page shows it (new
# data), asking again after 5 s if it never does. When the server cannot answer (the class store is down, or the
# proxy's rate limit), the page reruns once to say so, and once more when it answers again; meanwhile the loop asks
# every second. One loop per tab (window.atlasClassListener), whatever remounts; the last mount's cleanup stops it.
LISTENER_JS = """
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
const FIELDS = ["url", "code", "seen", "me"];

async function listen(w) {
  while (w.data) {
    const d = w.data;
    const ctl = new AbortController();
    w.ctl = ctl;
    let answer = null;
    try {
      const asked = new URLSearchParams({code: d.code, seen: String(d.seen), me: d.me});
      const reply = await fetch(`${d.url}?${asked}`, {cache: "no-store", signal: ctl.signal});
      answer = reply.ok ? await reply.json() : null;
    } catch (err) {
      answer = null;
    }
    if (w.data !== d) continue;
    if ((answer === null) !== Boolean(w.trouble)) {
      w.trouble = answer === null;
      w.trigger("changed", -1);
    }
    if (answer === null) {
      await sleep(1000);
    } else if (answer.closed || answer.version !== d.seen) {
      w.trigger("changed", answer.closed ? 0 : answer.version);
      for (let i = 0; i < 100 && w.data === d; i++) await sleep(50);
    }
  }
  w.running = false;
}

export default function (component) {
  const { data, setTriggerValue } = component;
  const w = (window.atlasClassListener ??= { data: null, running: false, mounts: 0 });
  const mount = ++w.mounts;
  if (!w.data || FIELDS.some((k) => w.data[k] !== data[k])) {
    w.ctl?.abort();
    w.data = data;
  }
  w.trigger = setTriggerValue;
  if (!w.running) {
    w.running = true;
    listen(w);
  }
  return () => {
    if (w.mounts === mount) {
      w.data = null;
      w.ctl?.abort();
    }
  };
}
"""

# The teacher's key courier: POSTs {ticket} (or {forget: code}) to the key route once per ticket in this page (a few
# tries, a second apart, while the network or the store fails); the answer's Set-Cookie does the rest. It tells the
# page nothing (a trigger would rerun the page): the page draws it, unchanged, in every run. Nothing of it goes into
# a URL.
KEY_JS = """
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

async function swap(d) {
  const body = new URLSearchParams(d.ticket ? {ticket: d.ticket} : {forget: d.forget});
  for (let i = 0; i < 5; i++) {
    try {
      const reply = await fetch(d.url, {method: "POST", body, cache: "no-store", credentials: "same-origin",
                                        headers: {"X-Atlas-Class": "1"}});
      if (reply.status !== 503) return;
    } catch (err) {}
    await sleep(1000 * (i + 1));
  }
}

export default function (component) {
  const { data } = component;
  const w = (window.atlasClassKey ??= { asked: new Set() });
  const id = data.ticket || "forget:" + data.forget;
  if (!w.asked.has(id)) {
    w.asked.add(id);
    swap(data);
  }
}
"""

listener = st.components.v2.component("atlas_class_listener", js=LISTENER_JS)
key_courier = st.components.v2.component("atlas_class_key", js=KEY_JS)
