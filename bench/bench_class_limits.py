"""The class store's costs under the attacks of issue 54, in this process (no server): prints numbers.

  heartbeat  one follower's heartbeat (MemoryStore.follow) with N distinct ids already beating in the class, and
             the sweep that prunes them (off the event loop, every 60 s);
  classes    2,000 class starts on a fake clock (one a second) beside a live class: started / refused, the store's
             traced peak memory, the sweep once they expired;
  wait       the wait route's refusals (an invented id: 403; `seen=²`: 400) and a real follower's ask, per call;
  redis      with --redis: the same heartbeat and 2,000 starts on a real redis-server (Debian's), and one call to a
             hung Redis (SIGSTOP) and the calls after it.

python -m bench.bench_class_limits [--redis]
"""
from __future__ import annotations

import argparse
import asyncio
import secrets
import time
import tracemalloc

from app_core.classroom import View, followers
from app_core.classroom.memory import MemoryStore
from app_core.classroom.store import ClassesFull


class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def per_call_us(call, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - t0) / n * 1e6


def heartbeat(store, ids: int) -> None:
    code, _ = store.create(View("attention"))
    names = [secrets.token_hex(16) for _ in range(ids)]
    for name in names:
        store.follow(code, name)
    cost = per_call_us(lambda: store.follow(code, names[0]), 2000)
    t0 = time.perf_counter()
    store.sweep()
    print(f"  {type(store).__name__}: heartbeat with {ids} ids beating: {cost:.1f} µs; a sweep "
          f"{(time.perf_counter() - t0) * 1000:.1f} ms")


def classes(store, clock: Clock) -> None:
    text = "注意力 attention " * 1800
    live, secret = store.create(View("attention", {"text": text}))
    started = refused = 0
    tracemalloc.start()
    t0 = time.perf_counter()
    for i in range(2000):
        clock.now += 1
        if i % 30 == 0:
            store.teacher_here(live, secret)
        try:
            store.create(View("attention", {"text": f"{i} {text}"}))
            started += 1
        except ClassesFull:
            refused += 1
    took = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    live_kept = store.version(live) is not None
    clock.now += store.ttl_s + 1
    t1 = time.perf_counter()
    gone = store.sweep()
    sweep_ms = (time.perf_counter() - t1) * 1000
    print(f"  {type(store).__name__}: 2,000 starts of {len(text)}-character views in {took:.2f} s "
          f"({took / 2000 * 1000:.2f} ms each): {started} started, {refused} refused, open at most "
          f"{store.max_classes}; traced peak {peak / 1e6:.1f} MB; the live class still open: "
          f"{live_kept}; sweep after 12 h: {gone} gone in {sweep_ms:.1f} ms")


def wait_route() -> None:
    import functools

    from starlette.requests import Request

    from app_core import classroom
    from server import class_wait

    store = MemoryStore()
    classroom._store_for = functools.cache(lambda url, most: store)
    class_wait._waits.cache_clear()
    code, _ = store.create(View("attention"))
    me = followers.issue(classroom.follower_key(), code)

    def asked(query: str) -> int:
        request = Request({"type": "http", "method": "GET", "path": class_wait.WAIT_PATH, "headers": [],
                           "query_string": query.encode()})
        return asyncio.run(class_wait.wait_for_view(request)).status_code

    for name, query in (("an invented id (403)", f"code={code}&seen=0&me={secrets.token_hex(16)}"),
                        ("seen=² (400)", f"code={code}&seen=%C2%B2&me={me}"),
                        ("a real follower's changed view (200)", f"code={code}&seen=0&me={me}")):
        print(f"  wait route, {name}: {per_call_us(lambda q=query: asked(q), 500):.0f} µs a call "
              "(asyncio.run included)")
    print(f"  followers counted after 1,000 invented ids: {store.followers(code)}")


def redis_part() -> None:
    from app_core.classroom.redis_store import RedisStore
    from harness.redis_server import redis_server

    with redis_server() as server:
        clock = Clock()
        heartbeat(RedisStore(server.url), 20_000)
        server.admin().flushdb()
        classes(RedisStore(server.url, clock=clock), clock)
        print(f"  Redis used_memory after them: {server.admin().info('memory')['used_memory'] / 1e6:.1f} MB")
        store = RedisStore(server.url)
        code, _ = store.create(View("attention"))
        server.pause()
        try:
            took = []
            for _ in range(4):
                t0 = time.perf_counter()
                try:
                    store.version(code)
                except Exception:
                    pass
                took.append((time.perf_counter() - t0) * 1000)
        finally:
            server.resume()
        print("  a hung Redis: calls took " + ", ".join(f"{t:.0f}" for t in took) + " ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis", action="store_true", help="also on a real redis-server")
    args = parser.parse_args()
    print("heartbeat:")
    for ids in (64, 20_000):
        heartbeat(MemoryStore(), ids)
    print("classes:")
    clock = Clock()
    classes(MemoryStore(clock=clock), clock)
    print("wait:")
    wait_route()
    if args.redis:
        print("redis:")
        redis_part()


if __name__ == "__main__":
    main()
