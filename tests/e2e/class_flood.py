"""A flood of the class's wait route as a hostile visitor sends it (many connections at once, from one address),
beside a victim follower of another class whose latency is measured: raw HTTP/1.1 over asyncio sockets, from a
chosen local address (127.0.0.x: a proxy sees each as another client). The flood runs in a process of its own
(flood_elsewhere), as an attacker's client would: in the victim's event loop, the victim's own answers would queue
behind the flood's 900 sockets, and its latency would measure the test's client, not the server."""
from __future__ import annotations

import asyncio
import json
import multiprocessing
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlencode, urlsplit

WAIT_PATH = "/_atlas/class/wait"        # server/class_wait.py


async def ask(base: str, query: dict, source: str = "127.0.0.1", timeout_s: float = 30) -> tuple[int, dict | None]:
    """GET base + WAIT_PATH?query from the local address source: (status, JSON body or None); status 0 when the
    connection failed or timed out."""
    parts = urlsplit(base)
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(parts.hostname, parts.port, local_addr=(source, 0)), timeout_s)
    except (OSError, TimeoutError):
        return 0, None
    try:
        writer.write(f"GET {WAIT_PATH}?{urlencode(query)} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                     "Connection: close\r\nUser-Agent: class-flood\r\n\r\n".encode())
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), timeout_s)
    except (OSError, TimeoutError):
        return 0, None
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0, None
    try:
        return status, json.loads(body) if body.strip() else None
    except ValueError:
        return status, None


@dataclass
class Flood:
    """What a flood got back: status -> count, and how long its asks took."""

    statuses: Counter = field(default_factory=Counter)
    seconds: list[float] = field(default_factory=list)


async def flood(base: str, queries: list[dict], source: str, at_once: int = 400) -> Flood:
    """Every query asked, at_once connections open at a time (each ask held up to the route's 5 s), from source."""
    out, gate = Flood(), asyncio.Semaphore(at_once)

    async def one(query: dict) -> None:
        async with gate:
            t0 = time.monotonic()
            status, _ = await ask(base, query, source)
            out.statuses[status] += 1
            out.seconds.append(time.monotonic() - t0)
    await asyncio.gather(*(one(q) for q in queries))
    return out


def flood_to_the_end(base: str, queries: list[dict], source: str, at_once: int) -> Flood:
    """flood() in this process's own event loop, to its end (flood_elsewhere's worker)."""
    return asyncio.run(flood(base, queries, source, at_once))


@asynccontextmanager
async def flood_elsewhere(base: str, queries: list[dict], source: str, at_once: int = 400):
    """flood() started in a process of its own (already running when this yields): yields an awaitable of its
    Flood."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(int).result()                                   # the worker is up before the flood is timed
        yield asyncio.get_running_loop().run_in_executor(pool, flood_to_the_end, base, queries, source, at_once)


def rss_mb(pid: int) -> float:
    """The resident memory of process pid, MB."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")
