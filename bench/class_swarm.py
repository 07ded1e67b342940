"""A live class with many followers on one server, without a browser per follower.

bench/bench_class_follow.py runs a headless Chromium per student, which stops at ~10 on 2 cores. Here one headless
Chromium teacher (presenter mode, a class started, layers stepped with ArrowUp / ArrowDown as bench_class_follow
does) and N followers that speak Streamlit's websocket protocol themselves (`--swarm`: one process, one thread, raw
sockets). The followers are harness/streamlit_client.py's (what Streamlit 1.67's frontend does, as one recorded through
bench/ws_tap.py), time stamped by the kernel on the same clock as the teacher's tap (ws_tap.StampedTap): a swarm
late to read its sockets does not make the server look slow. The deployment is harness/deployment.py's.

For each N in --followers, prints:
  idle      the server's CPU over --idle-s seconds with the teacher alone and with N followers waiting:
            (difference) / N / seconds = one idle follower's share of a core (its held ask, answered every 5 s: the
            heartbeat), and a poll's round trip (rerun_script sent to its script_finished received) p50 / p95 when
            the server has followers poll;
  teacher   the server's time for the teacher's page run (its key's rerun request received to the run's end sent,
            bench_class_follow's tap), and the teacher's view time (the key pressed to the new layer on the teacher's
            screen: one Chromium, so a fair number here), medians over --steps, alone and with N followers;
  cpu       the server's CPU-seconds per follower per teacher change: the phase's CPU less the teacher's alone and
            less N idle followers' cost over the phase's length;
  served    per change, from the end of the teacher's page run (as the server sent it) to each follower's rerun of
            the new view received (script_finished), p50 / p95 / max; and a follower's own rerun (its new_session
            to its script_finished) p50.
and the swarm's own CPU (it shares the machine's cores with the server).

Run (from the repository root): python -m bench.class_swarm [--followers 10 30 60] [--idle-s 20] [--steps 6]
[--lang de] [--join-gap-s 0.1] [--replicas 2]   (2: the README's deployment, two replicas sharing Redis behind HAProxy,
on this machine's cores; the teacher on the first replica, the followers through the proxy)
The followers alone, against a server with a class open (a protocol check; one line per event on stdout):
python -m bench.class_swarm --swarm PORT CODE N [--lang de]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from playwright.sync_api import sync_playwright

from bench.bench_class_follow import SHORTCUTS_JS, RunEnds, new_page
from bench.bench_classroom import ServerProbe
from bench.ws_tap import StampedTap
from harness.browser import CHROMIUM, CHROMIUM_ARGS, open_view
from harness.classroom import SHOWS_JS, query, teacher_key
from harness.deployment import deployment
from harness.streamlit_client import swarm

ROOT = Path(__file__).resolve().parents[1]
STRIP_JS = """() => (document.querySelector('.st-key-class_strip') || {}).textContent || ''"""


# ---------------------------------------------------------------------------------------- the swarm, seen from outside
class Swarm:
    """`python -m bench.class_swarm --swarm ...` in its own process (its own interpreter and GIL); its events, as
    they come."""

    def __init__(self, port: int, code: str, n: int, lang: str | None, join_gap_s: float):
        self.n = n
        self.runs: list[list[tuple[float, float, str]]] = [[] for _ in range(n)]
        self.polls: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self.summary: dict | None = None
        self.ready = threading.Event()
        self._lock = threading.Lock()
        command = [sys.executable, "-m", "bench.class_swarm", "--swarm", str(port), code, str(n),
                   "--join-gap-s", str(join_gap_s)] + (["--lang", lang] if lang else [])
        self.proc = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            kind, _, rest = line.rstrip("\n").partition(" ")
            with self._lock:
                if kind == "run":
                    i, start, end, query = rest.split(" ", 3) if rest.count(" ") >= 3 else (*rest.split(" "), "")
                    self.runs[int(i)].append((float(start), float(end), query))
                elif kind == "poll":
                    _, sent, end, _ = rest.split(" ")
                    self.polls.append((float(sent), float(end)))
                elif kind == "error":
                    self.errors.append(rest)
                elif kind == "ready":
                    self.ready.set()
                elif kind == "summary":
                    self.summary = json.loads(rest)

    def poll_times(self, t0: float, t1: float) -> list[float]:
        with self._lock:
            return [end - sent for sent, end in self.polls if t0 <= sent <= t1]

    def followed(self, after: float, want: Callable[[str], bool]) -> list[tuple[float, float] | None]:
        """Each follower's first whole run started after `after` that shows what want() accepts: (start, end)."""
        with self._lock:
            return [next(((s, e) for s, e, q in runs if s > after and want(q)), None) for runs in self.runs]

    def close(self) -> dict:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self._reader.join(timeout=10)
        return self.summary or {}


# -------------------------------------------------------------------------------------------------------- the bench
def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} cores)"
    return f"unknown CPU ({os.cpu_count()} cores)"


def pct(values: list[float], q: float) -> float:
    return sorted(values)[max(0, round(q * len(values)) - 1)]


def students_shown(teacher) -> int | None:
    found = re.search(r"\d+", teacher.evaluate(STRIP_JS))
    return int(found.group()) if found else None


def step_layers(teacher, steps: int, teacher_runs, swarm_: Swarm | None = None, timeout_s: float = 60.0) -> dict:
    """`steps` layer steps of the teacher (ArrowUp, ArrowDown, ...): the teacher's server run times, and with a
    swarm, each follower's rerun of the new view (its end after the teacher's run's end, its own length)."""
    out = {"teacher": [], "view": [], "served": [], "follower_run": [], "late": 0}
    layer = int(query(teacher.url).get("layer", "0"))
    for i in range(steps):
        key, layer = ("ArrowUp", layer + 1) if i % 2 == 0 else ("ArrowDown", layer - 1)
        want = str(layer) if layer else None
        teacher.evaluate("document.activeElement && document.activeElement.blur()")
        pressed = time.time()
        teacher.keyboard.press(key)
        teacher.wait_for_function(SHOWS_JS, arg=[{"layer": want}, 1], polling=20)
        out["view"].append(time.time() - pressed)                  # the teacher's key to the new chart on screen
        if (run := teacher_runs.run_after(pressed)) is not None:
            out["teacher"].append(run)
        teacher_end = teacher_runs.first_after(pressed)
        if swarm_ is not None and teacher_end is not None:
            def shows(q: str, want: str | None = want) -> bool:
                return parse_qs(q).get("layer", [None])[-1] == want
            deadline = time.monotonic() + timeout_s
            while None in (runs := swarm_.followed(pressed, shows)) and time.monotonic() < deadline:
                time.sleep(0.05)
            out["late"] += runs.count(None)
            out["served"] += [e - teacher_end for s, e in filter(None, runs)]
            out["follower_run"] += [e - s for s, e in filter(None, runs)]
        time.sleep(1.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--followers", type=int, nargs="+", default=[10])
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--lang", default=None, help="the followers' lang= (their join link's own)")
    parser.add_argument("--join-gap-s", type=float, default=0.1, help="seconds between two followers joining")
    parser.add_argument("--replicas", type=int, default=1, choices=(1, 2),
                        help="2: the README's deployment (two replicas, Redis, HAProxy) on this machine's cores")
    parser.add_argument("--swarm", nargs=3, metavar=("PORT", "CODE", "N"),
                        help="only the followers, against a server with that class open (events on stdout)")
    args = parser.parse_args()
    if args.swarm:
        port, code, n = args.swarm
        swarm(int(port), code, int(n), args.lang, args.join_gap_s, sys.stdout)
        return
    bench(args)


class Probes:
    """The CPU-seconds of several server processes together (bench_classroom.ServerProbe each)."""

    def __init__(self, pids: list[int]):
        self.probes = [ServerProbe(pid) for pid in pids]

    def __enter__(self) -> Probes:
        for probe in self.probes:
            probe.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for probe in self.probes:
            probe.__exit__(*exc)

    @property
    def cpu_used(self) -> float:
        return sum(probe.cpu_used for probe in self.probes)


def idle_cpu(pids: list[int], seconds: float) -> float:
    with Probes(pids) as probes:
        time.sleep(seconds)
    return probes.cpu_used


def bench(args) -> None:
    print(f"CPU: {cpu_name()}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, deployment(args.replicas, Path(tmp)) as (procs, url, follow_port), \
            sync_playwright() as pw:
        pids = [proc.pid for proc in procs]
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        port = urlsplit(url).port
        teacher_runs = RunEnds()
        tap = StampedTap(port, teacher_runs.on_message)
        teacher = new_page(browser)
        open_view(teacher, tap.url + "/?present=1")
        teacher.locator(".st-key-w_class_start button").first.click()
        code, _ = teacher_key(teacher)                  # the key cookie (never in the teacher's address)
        teacher.wait_for_function(SHORTCUTS_JS)
        time.sleep(2)
        alone_idle = idle_cpu(pids, args.idle_s)
        with Probes(pids) as probe:
            alone = step_layers(teacher, args.steps, teacher_runs)
        alone_cpu = probe.cpu_used / args.steps
        print(f"teacher alone: server idle {alone_idle / args.idle_s:.1%} of a core; run median "
              f"{statistics.median(alone['teacher']) * 1e3:.0f} ms; server CPU per change {alone_cpu:.3f} s",
              flush=True)
        for n in args.followers:
            followers = Swarm(follow_port, code, n, args.lang, args.join_gap_s)
            if not followers.ready.wait(timeout=60 + 5 * n):
                raise RuntimeError(f"the {n} followers did not all finish a first run: {followers.errors[:5]}")
            time.sleep(6)                                            # every follower's first heartbeat
            shown = students_shown(teacher)
            t0 = time.time()
            class_idle = idle_cpu(pids, args.idle_s)
            polls = followers.poll_times(t0, time.time())
            started = time.monotonic()
            with Probes(pids) as probe:
                steps = step_layers(teacher, args.steps, teacher_runs, followers)
            phase_s = time.monotonic() - started
            summary = followers.close()
            idle_rate = (class_idle - alone_idle) / args.idle_s              # core-seconds per second, N followers
            per_change = (probe.cpu_used - alone_cpu * args.steps - idle_rate * phase_s) / args.steps / n
            gross = (probe.cpu_used - alone_cpu * args.steps) / args.steps / n
            rows.append({"n": n, "shown": shown, "idle": idle_rate / n, "polls": polls, "steps": steps,
                         "per_change": per_change, "gross": gross,
                         "poll_rate": len(polls) / n / args.idle_s, "summary": summary, "errors": followers.errors})
            served = steps["served"]
            print(f"{n} followers: the teacher shows {shown} students; idle {idle_rate / n:.2%} of a core each; "
                  f"served p50 {statistics.median(served):.3f} s, p95 {pct(served, 0.95):.3f} s, max "
                  f"{max(served):.3f} s (n={len(served)}, {steps['late']} never)" if served else
                  f"{n} followers: no follower's rerun seen", flush=True)
            if n != args.followers[-1]:
                time.sleep(16)                        # the store forgets the closed followers (15 s of heartbeats)
        browser.close()
        tap.close()
    table(args, alone, alone_cpu, rows)


def table(args, alone: dict, alone_cpu: float, rows: list[dict]) -> None:
    ms = 1e3
    print()
    where = "one server" if args.replicas == 1 else "two replicas behind HAProxy sharing Redis (deploy/)"
    print(f"Live class on {where}, {cpu_name()}; {args.steps} teacher changes (a layer step), "
          f"idle {args.idle_s:.0f} s; the followers speak the websocket protocol (bench/class_swarm.py).")
    print(f"teacher alone: page run (server) median {statistics.median(alone['teacher']) * ms:.0f} ms, "
          f"server CPU {alone_cpu:.3f} s per change")
    print(f"teacher's view alone (key to the new chart on screen, in Chromium): median "
          f"{statistics.median(alone['view']) * ms:.0f} ms")
    head = ("followers", "shown", "idle core", "poll p50/p95 ms", "teacher run ms", "x alone", "view ms", "x alone",
            "CPU s/fol/chg", "served p50 s", "p95 s", "max s", "fol run ms", "swarm core")
    print(" | ".join(head))
    for r in rows:
        s, steps, polls = r["summary"], r["steps"], r["polls"]
        served, teacher_run = steps["served"], steps["teacher"]
        cells = [str(r["n"]), str(r["shown"]), f"{r['idle']:.2%}",
                 f"{statistics.median(polls) * ms:.0f}/{pct(polls, 0.95) * ms:.0f}" if polls else "-",
                 f"{statistics.median(teacher_run) * ms:.0f}" if teacher_run else "-",
                 f"{statistics.median(teacher_run) / statistics.median(alone['teacher']):.2f}" if teacher_run else "-",
                 f"{statistics.median(steps['view']) * ms:.0f}",
                 f"{statistics.median(steps['view']) / statistics.median(alone['view']):.2f}",
                 f"{r['per_change']:.3f}",
                 *((f"{statistics.median(served):.3f}", f"{pct(served, 0.95):.3f}", f"{max(served):.3f}",
                    f"{statistics.median(steps['follower_run']) * ms:.0f}") if served else ("-",) * 4),
                 f"{s.get('cpu_s', 0) / max(s.get('wall_s', 1), 1e-9):.1%}"]
        print(" | ".join(c.rjust(len(h)) for c, h in zip(cells, head, strict=True)))
        if served:
            waited = [w - f for w, f in zip(steps["served"], steps["follower_run"], strict=True)]
            polled = (f"per poll the server sent {s['poll_bytes'] / s['polls']:.0f} B, {r['poll_rate']:.2f} polls a "
                      "second each" if s.get("polls") else
                      f"{s.get('asks', 0) / r['n']:.1f} asks of the wait route each")
            print(f"    a follower's rerun started p50 {statistics.median(waited):.3f} s after the teacher's run "
                  f"ended; {polled}; per whole run {s['run_bytes'] / max(s['runs'], 1):.0f} B; CPU per follower per "
                  f"change with the phase's idle cost {r['gross']:.3f} s (bench_class_follow's measure); "
                  f"{steps['late']} reruns never seen; errors: {r['errors'][:3] or 'none'}")
        else:
            print(f"    errors: {r['errors'][:3] or 'none'}")
        if s.get("unstamped_reads"):
            print(f"    {s['unstamped_reads']} reads had no kernel time stamp (the swarm's clock used for them)")


if __name__ == "__main__":
    main()
