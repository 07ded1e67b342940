"""End-to-end: the README's deployment (deploy/haproxy.cfg, deploy/redis.conf) on free local ports: Redis, two app
replicas with ATLAS_REDIS_URL, HAProxy in front. A teacher's browser kept on one replica and a student's on the
other (HAProxy's SERVERID cookie) share a class through the proxy; HAProxy's log shows who went where."""
from __future__ import annotations

import os
import re
import subprocess
import time
import urllib.request
from unittest import mock

import pytest

from app_core.classroom import codes
from tests.classroom.redis_server import running_redis
from tests.e2e.browser_harness import CHROMIUM, CHROMIUM_ARGS, RUN_COUNTER_INIT_JS, free_port
from tests.e2e.class_harness import query, servers, wait_shows
from tests.e2e.test_browser import HEALTH_TIMEOUT_S, PROJECTOR, RERUN_MS, ROOT, open_view, rerun

HAPROXY = "/usr/sbin/haproxy"


def wait_proxy(url: str, proc: subprocess.Popen, timeout_s: float = 30) -> None:
    """Until the proxy answers the app's health check with 200 (its backends are up)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"haproxy exited with {proc.returncode}"
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    pytest.fail("haproxy did not reach a healthy replica")


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """(the proxy's URL, the path of HAProxy's log)."""
    logs = tmp_path_factory.mktemp("haproxy")
    with running_redis(ROOT / "deploy/redis.conf") as redis_url, \
            servers(ROOT, logs, 2, HEALTH_TIMEOUT_S, redis_url) as (app1, app2):
        port = free_port()
        env = {"ATLAS_BIND": f"127.0.0.1:{port}", "ATLAS_APP1": app1.removeprefix("http://"),
               "ATLAS_APP2": app2.removeprefix("http://")}
        log_path = logs / "haproxy.log"
        with mock.patch.dict(os.environ, env), log_path.open("wb") as log:
            assert subprocess.run([HAPROXY, "-c", "-q", "-f", str(ROOT / "deploy/haproxy.cfg")]).returncode == 0
            proc = subprocess.Popen([HAPROXY, "-db", "-f", str(ROOT / "deploy/haproxy.cfg")], stdout=log,
                                    stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_proxy(url, proc)
            yield url, log_path
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def test_a_teacher_and_a_student_on_two_replicas_share_a_class(proxied):
    from playwright import sync_api

    url, log_path = proxied
    host = url.split("//")[1].split(":")[0]
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            pages = {}
            for who, replica in (("teacher", "app1"), ("student", "app2")):
                context = browser.new_context(viewport=dict(zip(("width", "height"), PROJECTOR, strict=True)),
                                              user_agent=f"atlas-{who}")
                context.set_default_timeout(RERUN_MS)
                context.add_init_script(RUN_COUNTER_INIT_JS)
                context.add_cookies([{"name": "SERVERID", "value": replica, "domain": host, "path": "/"}])
                pages[who] = context.new_page()
            teacher, student = pages["teacher"], pages["student"]
            open_view(teacher, url + "/?present=1")
            rerun(teacher, lambda: teacher.locator(".st-key-w_class_start button").first.click())
            code, secret = codes.read_teacher_token(query(teacher.url)["teach"])
            open_view(student, f"{url}/?join={code}")
            student.locator(".st-key-class_bar").wait_for()
            teacher.wait_for_function("window.atlasPresenterKeys?.data != null")
            teacher.evaluate("document.activeElement && document.activeElement.blur()")
            t0 = time.monotonic()
            teacher.keyboard.press("ArrowUp")
            latency = wait_shows(student, {"layer": "1"}, t0)
            print(f"\nthrough HAProxy, replica to replica: the student showed layer 1 {latency:.2f} s after the key")
            assert secret not in student.url
        finally:
            browser.close()
    served = {}
    for line in log_path.read_text(errors="replace").splitlines():
        found = re.search(r"streamlit/(app\d) .*\{atlas-(\w+)\}", line)
        if found:
            served.setdefault(found.group(2), set()).add(found.group(1))
    assert served == {"teacher": {"app1"}, "student": {"app2"}}, served
