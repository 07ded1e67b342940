"""A live class's cost on one server: what idle followers cost, and the teacher's view time with N followers.

One `streamlit run app.py` (the class store in memory), a teacher in presenter mode and N students following in
headless Chromium (at normal priority: at the lowest, a machine busy with other work starved it). Prints:
  idle      the server's CPU-seconds over --idle-s seconds with nobody changing anything, with 0 and N followers:
            (difference) / N / seconds = one idle follower's share of a core (its 0.5 s polls and 5 s heartbeats);
  teacher   the teacher's view time (ArrowUp/ArrowDown on the page: a layer step, key to the teacher's URL and chart
            updated), median over --steps, alone and with N followers (who all rerun the view after each step);
  cpu       the server's CPU-seconds per follower per teacher change (its rerun of the new view), and the
            teacher's own per change;
  follow    for each step with followers, the time from the teacher's screen updated to each student's (p50, p95).
The browsers share the server's cores here: a classroom's students run their own.

Run (from the repository root): python -m bench.bench_class_follow [--followers 10] [--idle-s 20] [--steps 6]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from app_core.classroom import codes
from bench.bench_classroom import ServerProbe
from tests.e2e.browser_harness import CHROMIUM, CHROMIUM_ARGS, RUN_COUNTER_INIT_JS, running_app
from tests.e2e.class_harness import SHOWS_JS, query
from tests.e2e.test_browser import open_view

ROOT = Path(__file__).resolve().parents[1]
SHORTCUTS_JS = "document.querySelectorAll('.st-key-keyboard_shortcuts button').length === 4"


def new_page(browser):
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    context.set_default_timeout(180_000)
    context.add_init_script(RUN_COUNTER_INIT_JS)
    return context.new_page()


def idle_cpu(probe_pid: int, seconds: float) -> float:
    with ServerProbe(probe_pid) as probe:
        time.sleep(seconds)
    return probe.cpu_used


def teacher_steps(teacher, students, steps: int) -> tuple[list[float], list[float]]:
    """(the teacher's view times, each student's time after the teacher's screen) over `steps` layer steps."""
    own, behind = [], []
    layer = int(query(teacher.url).get("layer", "0"))
    for i in range(steps):
        key, layer = ("ArrowUp", layer + 1) if i % 2 == 0 else ("ArrowDown", layer - 1)
        want = {"layer": str(layer) if layer else None}
        teacher.evaluate("document.activeElement && document.activeElement.blur()")
        t0 = time.monotonic()
        teacher.keyboard.press(key)
        teacher.wait_for_function(SHOWS_JS, arg=[want, 1], polling=20)
        shown = time.monotonic()
        own.append(shown - t0)
        for student in students:
            student.wait_for_function(SHOWS_JS, arg=[want, 1], polling=20)
            behind.append(time.monotonic() - shown)
        time.sleep(1.0)
    return own, behind


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--followers", type=int, default=10)
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, running_app(ROOT, Path(tmp) / "server.log", 120) as (proc, url), \
            sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        teacher = new_page(browser)
        open_view(teacher, url + "/?present=1")
        teacher.locator(".st-key-w_class_start button").first.click()
        teacher.wait_for_url(lambda u: "teach" in query(u))
        code, _ = codes.read_teacher_token(query(teacher.url)["teach"])
        teacher.wait_for_function(SHORTCUTS_JS)
        time.sleep(2)
        alone_idle = idle_cpu(proc.pid, args.idle_s)
        with ServerProbe(proc.pid) as probe:
            alone, _ = teacher_steps(teacher, [], args.steps)
        alone_cpu = probe.cpu_used
        students = []
        for _ in range(args.followers):
            student = new_page(browser)
            open_view(student, f"{url}/?join={code}")
            students.append(student)
        time.sleep(6)                                     # every follower's first heartbeat
        class_idle = idle_cpu(proc.pid, args.idle_s)
        with ServerProbe(proc.pid) as probe:
            with_class, behind = teacher_steps(teacher, students, args.steps)
        follower_run = (probe.cpu_used - alone_cpu) / args.steps / args.followers
        per_follower = (class_idle - alone_idle) / args.followers / args.idle_s
        print(f"idle: server CPU {alone_idle / args.idle_s:.1%} of a core alone, "
              f"{class_idle / args.idle_s:.1%} with {args.followers} followers: {per_follower:.2%} of a core each")
        print(f"teacher: view time median {statistics.median(alone):.2f} s alone, "
              f"{statistics.median(with_class):.2f} s with {args.followers} followers "
              f"({statistics.median(with_class) / statistics.median(alone):.2f}x)")
        print(f"server CPU per follower per teacher change: {follower_run:.3f} s (the teacher's own: "
              f"{alone_cpu / args.steps:.3f} s)")
        print(f"follow: after the teacher's screen, p50 {statistics.median(behind):.2f} s, p95 {p95(behind):.2f} s "
              f"(n={len(behind)})")
        browser.close()


if __name__ == "__main__":
    main()
