"""A live class's cost on one server: what idle followers cost, and the teacher's view time with N followers.

One `streamlit run app.py` (the class store in memory), a teacher in presenter mode and N students following in
headless Chromium (at normal priority: at the lowest, a machine busy with other work starved it). Prints:
  idle      the server's CPU-seconds over --idle-s seconds with nobody changing anything, with 0 and N followers:
            (difference) / N / seconds = one idle follower's share of a core (its held ask of the wait route,
            answered every 5 s: its heartbeat);
  teacher   the teacher's view time (ArrowUp/ArrowDown on the page: a layer step, key to the teacher's URL and chart
            updated), median over --steps, alone and with N followers (who all rerun the view after each step); and
            the server's part of it (the key's rerun request reaching the server to the run's end sent);
  cpu       the server's CPU-seconds per follower per teacher change (its rerun of the new view), and the
            teacher's own per change;
  follow    for each step with followers, the time from the teacher's screen updated to each student's (p50, p95);
  served    the server's part of it, whatever the browsers' CPU: from the end of the teacher's page run to the end of
            each follower's rerun of the new view, as a websocket tap between each page and the server saw them
            (bench/ws_tap.py).
The browsers share the server's cores here: a classroom's students run their own.

Run (from the repository root): python -m bench.bench_class_follow [--followers 10] [--idle-s 20] [--steps 6]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from playwright.sync_api import sync_playwright
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from bench.bench_classroom import ServerProbe, niced_chromium
from bench.ws_tap import TO_SERVER, WebSocketTap
from harness.browser import CHROMIUM, CHROMIUM_ARGS, RUN_COUNTER_INIT_JS, open_view, running_app
from harness.classroom import SHOWS_JS, query, teacher_key

ROOT = Path(__file__).resolve().parents[1]
SHORTCUTS_JS = "window.atlasPresenterKeys?.data != null"


def new_page(browser):
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    context.set_default_timeout(180_000)
    context.add_init_script(RUN_COUNTER_INIT_JS)
    return context.new_page()


class RunEnds:
    """When the server sent one page the end of each whole page run (not a fragment's run), and when it received
    the page's rerun requests, as its tap saw them."""

    def __init__(self):
        self.ends: list[float] = []
        self.asked: list[float] = []
        self._lock = threading.Lock()

    def on_message(self, direction: str, at: float, opcode: int, data: bytes) -> None:
        if opcode != 2:
            return
        if direction == TO_SERVER:
            request = BackMsg()
            request.ParseFromString(data)
            if request.WhichOneof("type") == "rerun_script":
                with self._lock:
                    self.asked.append(at)
            return
        if len(data) > 256:                                               # a run's end is a short message
            return
        message = ForwardMsg()
        message.ParseFromString(data)
        if message.WhichOneof("type") == "script_finished" and \
                message.script_finished == ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY:
            with self._lock:
                self.ends.append(at)

    def first_after(self, t: float) -> float | None:
        with self._lock:
            return next((e for e in self.ends if e > t), None)

    def run_after(self, t: float) -> float | None:
        """The server's time for the first run asked for after t: its request received to its end sent."""
        with self._lock:
            asked = next((a for a in self.asked if a > t), None)
        end = self.first_after(asked) if asked is not None else None
        return end - asked if end is not None else None


def idle_cpu(probe_pid: int, seconds: float) -> float:
    with ServerProbe(probe_pid) as probe:
        time.sleep(seconds)
    return probe.cpu_used


def teacher_steps(teacher, students, steps: int, teacher_runs: RunEnds,
                  student_runs: list[RunEnds] = ()) -> tuple[list[float], list[float], list[float], list[float]]:
    """(the teacher's view times, each student's time after the teacher's screen, each follower's rerun's end after
    the end of the teacher's run as the server sent them, the server's time for the teacher's runs) over `steps`
    layer steps."""
    own, behind, served, server_own = [], [], [], []
    layer = int(query(teacher.url).get("layer", "0"))
    for i in range(steps):
        key, layer = ("ArrowUp", layer + 1) if i % 2 == 0 else ("ArrowDown", layer - 1)
        want = {"layer": str(layer) if layer else None}
        teacher.evaluate("document.activeElement && document.activeElement.blur()")
        t0 = time.monotonic()
        pressed = time.time()
        teacher.keyboard.press(key)
        teacher.wait_for_function(SHOWS_JS, arg=[want, 1], polling=20)
        shown = time.monotonic()
        own.append(shown - t0)
        for student in students:
            student.wait_for_function(SHOWS_JS, arg=[want, 1], polling=20)
            behind.append(time.monotonic() - shown)
        if (run := teacher_runs.run_after(pressed)) is not None:
            server_own.append(run)
        teacher_end = teacher_runs.first_after(pressed)
        if teacher_end is not None:
            served += [end - teacher_end for runs in student_runs if (end := runs.first_after(teacher_end))]
        time.sleep(1.0)
    return own, behind, served, server_own


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--followers", type=int, default=10)
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--niced-browsers", action="store_true",
                        help="run Chromium at the lowest CPU priority (the server first, as when the students' "
                             "browsers run on their own machines); on a machine busy with other work it starves")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, running_app(ROOT, Path(tmp) / "server.log", 120) as (proc, url), \
            sync_playwright() as pw:
        chromium = niced_chromium(Path(tmp)) if args.niced_browsers else CHROMIUM
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        port = urlsplit(url).port
        teacher_runs = RunEnds()
        teacher_tap = WebSocketTap(port, teacher_runs.on_message)
        teacher = new_page(browser)
        open_view(teacher, teacher_tap.url + "/?present=1")
        teacher.locator(".st-key-w_class_start button").first.click()
        code, _ = teacher_key(teacher)                  # the key cookie (never in the teacher's address)
        teacher.wait_for_function(SHORTCUTS_JS)
        time.sleep(2)
        alone_idle = idle_cpu(proc.pid, args.idle_s)
        with ServerProbe(proc.pid) as probe:
            alone, _, _, server_alone = teacher_steps(teacher, [], args.steps, teacher_runs)
        alone_cpu = probe.cpu_used
        students, student_runs, taps = [], [], [teacher_tap]
        for _ in range(args.followers):
            student_runs.append(RunEnds())
            taps.append(WebSocketTap(port, student_runs[-1].on_message))
            student = new_page(browser)
            open_view(student, f"{taps[-1].url}/?join={code}")
            students.append(student)
        time.sleep(6)                                     # every follower's first heartbeat
        class_idle = idle_cpu(proc.pid, args.idle_s)
        with ServerProbe(proc.pid) as probe:
            with_class, behind, served, server_class = teacher_steps(teacher, students, args.steps, teacher_runs,
                                                                     student_runs)
        follower_run = (probe.cpu_used - alone_cpu) / args.steps / args.followers
        per_follower = (class_idle - alone_idle) / args.followers / args.idle_s
        print(f"idle: server CPU {alone_idle / args.idle_s:.1%} of a core alone, "
              f"{class_idle / args.idle_s:.1%} with {args.followers} followers: {per_follower:.2%} of a core each")
        print(f"teacher: view time median {statistics.median(alone):.2f} s alone, "
              f"{statistics.median(with_class):.2f} s with {args.followers} followers "
              f"({statistics.median(with_class) / statistics.median(alone):.2f}x)")
        print(f"teacher (server): run median {statistics.median(server_alone):.3f} s alone, "
              f"{statistics.median(server_class):.3f} s with {args.followers} followers "
              f"({statistics.median(server_class) / statistics.median(server_alone):.2f}x)")
        print(f"server CPU per follower per teacher change: {follower_run:.3f} s (the teacher's own: "
              f"{alone_cpu / args.steps:.3f} s)")
        print(f"follow: after the teacher's screen, p50 {statistics.median(behind):.2f} s, p95 {p95(behind):.2f} s "
              f"(n={len(behind)})")
        print(f"served: the followers' reruns ended p50 {statistics.median(served):.2f} s, p95 {p95(served):.2f} s "
              f"after the teacher's run (n={len(served)}; as the server sent them)" if served else
              "served: no follower's rerun was seen through the taps")
        browser.close()
        for tap in taps:
            tap.close()


if __name__ == "__main__":
    main()
