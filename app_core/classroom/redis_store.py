"""The class store in Redis (ATLAS_REDIS_URL): every replica of the app shares its classes.

Keys, all under `atlas:` (the ACL user of deploy/redis.conf may touch no other), a class's with a TTL of ttl_s that
each teacher call renews (so a class ends 12 h after its teacher left):
- atlas:class:<code>        hash: secret (its SHA-256), view (JSON: page, params, question, predict), question,
                            revealed ("0"/"1": the current question's), version (a follower's poll is one HGET of it);
- atlas:class:<code>:f      sorted set: follower id -> time of its last heartbeat (at most MAX_FOLLOWERS);
- atlas:class:<code>:a      hash: question SEP follower id -> that student's answer (the last one counts);
- atlas:class:<code>:t      hash: question SEP answer -> how many students gave it (the tallies, kept as answers come);
- atlas:class:<code>:n      hash: question -> how many students answered it (at most MAX_FOLLOWERS; MAX_QUESTIONS
                            questions);
- atlas:class:<code>:r      set: the questions revealed (a question the teacher comes back to stays revealed);
- atlas:class:<code>:ended  set by end(), so the code reads as ended, not unknown;
- atlas:classes             sorted set: open class -> when its teacher was last there (the cap on open classes);
- atlas:ticket:<id>         a teacher's key sealed with a one-time ticket (codes.seal), TICKET_S;
- atlas:key                 the random key follower ids are signed with (followers.py), made once.
The teacher's writes and a class's start are Lua scripts (Redis 7's `#!lua` form: Redis refuses a script that
writes when it is out of memory, before it runs; ending a class may run then, as it frees memory): the secret (or
the cap) is checked and the state written in one step, so no write lands on a class that has just ended.
A call waits at most CALL_TIMEOUT_S; after a call that could not reach Redis, calls fail at once for RETRY_AFTER_S
(a hung Redis costs a page run one timeout, not one per call).
"""
from __future__ import annotations

import functools
import json
import math
import secrets
import threading
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from app_core.classroom import codes
from app_core.classroom.store import (
    MAX_FOLLOWERS,
    MAX_QUESTIONS,
    SEP,
    TICKET_S,
    ClassClosed,
    ClassesFull,
    ClassState,
    ClassStore,
    NotTeacher,
    StoreUnavailable,
    View,
    check_answer_text,
    check_view,
)

PREFIX = "atlas:class:"
CLASSES = "atlas:classes"
TICKETS = "atlas:ticket:"
KEY = "atlas:key"
CLOSED, FORBIDDEN, FULL = -1, -2, -3
CALL_TIMEOUT_S = 0.5          # connect and answer (a call takes ~0.1-1 ms on a LAN)
RETRY_AFTER_S = 1.0           # after a call that could not reach Redis, calls fail at once this long

# KEYS: classes, the new class. ARGV: now, ttl, expired before, idle before, cap, code, secret hash, view JSON,
# question, prefix. Returns FULL or 0.
CREATE = """#!lua
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[5]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if tonumber(oldest[2]) >= tonumber(ARGV[4]) then return -3 end
  local gone = ARGV[10] .. oldest[1]
  redis.call('DEL', gone, gone .. ':f', gone .. ':a', gone .. ':t', gone .. ':n', gone .. ':r')
  redis.call('SET', gone .. ':ended', '1', 'EX', ARGV[2])
  redis.call('ZREM', KEYS[1], oldest[1])
end
redis.call('HSET', KEYS[2], 'secret', ARGV[7], 'view', ARGV[8], 'question', ARGV[9], 'revealed', '0', 'version', 1)
redis.call('EXPIRE', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[6])
return 0
"""
# KEYS: class, followers, answers, ended, classes, tallies, answered, revealed. ARGV: secret hash, ttl, now, code.
# Returns CLOSED, FORBIDDEN or 0 (then the action runs).
_TEACHER = """#!lua
local kept = redis.call('HGET', KEYS[1], 'secret')
if not kept then return -1 end
if kept ~= ARGV[1] then return -2 end
for _, i in ipairs({1, 2, 3, 6, 7, 8}) do redis.call('EXPIRE', KEYS[i], ARGV[2]) end
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[4])
"""
# ARGV[5]: view JSON, ARGV[6]: question ('' for none). Returns the version.
PUBLISH = _TEACHER + """
if redis.call('HGET', KEYS[1], 'view') == ARGV[5] then return tonumber(redis.call('HGET', KEYS[1], 'version')) end
if redis.call('HGET', KEYS[1], 'question') ~= ARGV[6] then
  local shown = ARGV[6] ~= '' and redis.call('SISMEMBER', KEYS[8], ARGV[6]) == 1
  redis.call('HSET', KEYS[1], 'question', ARGV[6], 'revealed', shown and '1' or '0')
end
redis.call('HSET', KEYS[1], 'view', ARGV[5])
return redis.call('HINCRBY', KEYS[1], 'version', 1)
"""
REVEAL = _TEACHER + """
if redis.call('HGET', KEYS[1], 'revealed') == '1' then return tonumber(redis.call('HGET', KEYS[1], 'version')) end
redis.call('HSET', KEYS[1], 'revealed', '1')
local question = redis.call('HGET', KEYS[1], 'question')
if question ~= '' then
  redis.call('SADD', KEYS[8], question)
  redis.call('EXPIRE', KEYS[8], ARGV[2])
end
return redis.call('HINCRBY', KEYS[1], 'version', 1)
"""
TEACHER_HERE = _TEACHER + "return 0"
# The current question's tally: answer, count, answer, count, ...
ANSWERS = _TEACHER + """
local question = redis.call('HGET', KEYS[1], 'question')
local out = {}
if question == '' then return out end
local prefix = question .. '\\31'
local all = redis.call('HGETALL', KEYS[6])
for i = 1, #all, 2 do
  if string.sub(all[i], 1, #prefix) == prefix then
    out[#out + 1] = string.sub(all[i], #prefix + 1)
    out[#out + 1] = all[i + 1]
  end
end
return out
"""
TALLIES = _TEACHER + "return redis.call('HGETALL', KEYS[6])"
END = _TEACHER.replace("#!lua", "#!lua flags=allow-oom") + """
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[6], KEYS[7], KEYS[8])
redis.call('SET', KEYS[4], '1', 'EX', ARGV[2])
redis.call('ZREM', KEYS[5], ARGV[4])
return 0
"""
# KEYS: class, followers. ARGV: follower, now, oldest kept, ttl, most kept.
FOLLOW = """#!lua
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[3])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])
if over > 0 then redis.call('ZPOPMIN', KEYS[2], over) end
redis.call('EXPIRE', KEYS[2], ARGV[4])
return 0
"""
# KEYS: class, answers, tallies, answered. ARGV: follower, question, answer, ttl, most per question, most questions.
# Returns CLOSED, 0 (not taken) or 1.
ANSWER = """#!lua
local state = redis.call('HMGET', KEYS[1], 'question', 'revealed')
if not state[1] then return -1 end
if state[1] ~= ARGV[2] or state[2] == '1' then return 0 end
local mine = ARGV[2] .. '\\31' .. ARGV[1]
local before = redis.call('HGET', KEYS[2], mine)
if before == ARGV[3] then return 1 end
if before then
  local was = ARGV[2] .. '\\31' .. before
  if redis.call('HINCRBY', KEYS[3], was, -1) <= 0 then redis.call('HDEL', KEYS[3], was) end
else
  local n = tonumber(redis.call('HGET', KEYS[4], ARGV[2]) or '0')
  if n >= tonumber(ARGV[5]) then return 0 end
  if n == 0 and redis.call('HLEN', KEYS[4]) >= tonumber(ARGV[6]) then return 0 end
  redis.call('HINCRBY', KEYS[4], ARGV[2], 1)
end
redis.call('HSET', KEYS[2], mine, ARGV[3])
redis.call('HINCRBY', KEYS[3], ARGV[2] .. '\\31' .. ARGV[3], 1)
for i = 2, 4 do redis.call('EXPIRE', KEYS[i], ARGV[4]) end
return 1
"""


def _reachable(method):
    """A store method whose Redis errors become StoreUnavailable; after one that could not reach Redis (refused,
    timed out), calls fail at once for RETRY_AFTER_S."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        down, now = self._down, time.monotonic()
        if down is not None and now < down[0]:
            raise StoreUnavailable(down[1], slow=down[2], retry_in_s=down[0] - now)
        try:
            return method(self, *args, **kwargs)
        except (redis.ConnectionError, redis.TimeoutError) as err:
            slow = isinstance(err, redis.TimeoutError)
            why = f"the class store (Redis) {'is not answering' if slow else 'cannot be reached'}: {err}"
            self._down = (time.monotonic() + RETRY_AFTER_S, why, slow)
            raise StoreUnavailable(why, slow=slow, retry_in_s=RETRY_AFTER_S) from err
        except redis.RedisError as err:
            raise StoreUnavailable(f"the class store (Redis) refused the call: {err}") from err
    return call


def _view_json(view: View) -> str:
    check_view(view)
    return json.dumps({"page": view.page, "params": view.params, "question": view.question, "predict": view.predict},
                      ensure_ascii=False, sort_keys=True)


class RedisStore(ClassStore):
    """Classes in Redis at `url` (redis://[user:password@]host:port/db, or rediss:// over TLS)."""

    networked = True

    def __init__(self, url: str, **kwargs):
        super().__init__(**kwargs)
        self.redis = redis.Redis.from_url(url, decode_responses=True, socket_timeout=CALL_TIMEOUT_S,
                                          socket_connect_timeout=CALL_TIMEOUT_S, health_check_interval=30,
                                          retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)))
        self._scripts = {name: self.redis.register_script(source) for name, source in
                         (("create", CREATE), ("publish", PUBLISH), ("reveal", REVEAL), ("here", TEACHER_HERE),
                          ("answers", ANSWERS), ("tallies", TALLIES), ("end", END), ("follow", FOLLOW),
                          ("answer", ANSWER))}
        self._down: tuple[float, str, bool] | None = None     # (until, why, slow): calls fail at once until then
        self._key: bytes | None = None
        self._key_lock = threading.Lock()

    def _ttl(self) -> int:
        return max(1, int(round(self.ttl_s)))

    def _keys(self, code: str) -> list[str]:
        key = PREFIX + code
        return [key, key + ":f", key + ":a", key + ":ended", CLASSES, key + ":t", key + ":n", key + ":r"]

    def _closed(self, code: str) -> ClassClosed:
        return ClassClosed(code, bool(self.redis.exists(PREFIX + code + ":ended")))

    def _teacher(self, script: str, code: str, secret: str, *args):
        if not codes.is_secret(secret):
            raise NotTeacher(code)
        out = self._scripts[script](keys=self._keys(code),
                                    args=[codes.secret_hash(secret), self._ttl(), self.clock(), code, *args])
        if out == CLOSED:
            raise self._closed(code)
        if out == FORBIDDEN:
            raise NotTeacher(code)
        return out

    @_reachable
    def create(self, view: View) -> tuple[str, str]:
        text = _view_json(view)
        code, secret = codes.new_code(), codes.new_secret()
        now = self.clock()
        try:
            out = self._scripts["create"](keys=[CLASSES, PREFIX + code],
                                          args=[now, self._ttl(), now - self.ttl_s, now - self.idle_s,
                                                self.max_classes, code, codes.secret_hash(secret), text,
                                                view.question or "", PREFIX])
        except redis.OutOfMemoryError as err:                # maxmemory reached (noeviction): no new class
            raise ClassesFull(f"the class store is full: {err}") from err
        if out == FULL:
            raise ClassesFull(f"{self.max_classes} classes are open")
        return code, secret

    @_reachable
    def open_classes(self) -> int:
        return int(self.redis.zcount(CLASSES, self.clock() - self.ttl_s, "+inf"))

    @_reachable
    def version(self, code: str) -> int | None:
        found = self.redis.hget(PREFIX + code, "version")
        return None if found is None else int(found)

    @_reachable
    def state(self, code: str) -> ClassState:
        view, revealed, version = self.redis.hmget(PREFIX + code, "view", "revealed", "version")
        if view is None:
            raise self._closed(code)
        data = json.loads(view)
        return ClassState(code, int(version), View(data["page"], data["params"], data["question"], revealed == "1",
                                                   bool(data.get("predict"))))

    @_reachable
    def publish(self, code: str, secret: str, view: View) -> int:
        return int(self._teacher("publish", code, secret, _view_json(view), view.question or ""))

    @_reachable
    def reveal(self, code: str, secret: str) -> int:
        return int(self._teacher("reveal", code, secret))

    @_reachable
    def teacher_here(self, code: str, secret: str) -> None:
        self._teacher("here", code, secret)

    @_reachable
    def end(self, code: str, secret: str) -> None:
        self._teacher("end", code, secret)

    @_reachable
    def follow(self, code: str, follower: str) -> None:
        check_answer_text("", follower, "-")
        now = self.clock()
        keys = self._keys(code)[:2]
        out = self._scripts["follow"](keys=keys, args=[follower, now, now - self.follow_window_s, self._ttl(),
                                                       MAX_FOLLOWERS])
        if out == CLOSED:
            raise self._closed(code)

    @_reachable
    def followers(self, code: str) -> int:
        return int(self.redis.zcount(PREFIX + code + ":f", self.clock() - self.follow_window_s, "+inf"))

    @_reachable
    def answer(self, code: str, follower: str, question: str, answer: str) -> bool:
        check_answer_text(question, follower, answer)
        keys = self._keys(code)
        out = self._scripts["answer"](keys=[keys[0], keys[2], keys[5], keys[6]],
                                      args=[follower, question, answer, self._ttl(), MAX_FOLLOWERS, MAX_QUESTIONS])
        if out == CLOSED:
            raise self._closed(code)
        return out == 1

    @_reachable
    def answers(self, code: str, secret: str) -> dict[str, int]:
        flat = self._teacher("answers", code, secret)
        return {flat[i]: int(flat[i + 1]) for i in range(0, len(flat), 2) if int(flat[i + 1]) > 0}

    @_reachable
    def tallies(self, code: str, secret: str) -> dict[str, dict[str, int]]:
        flat = self._teacher("tallies", code, secret)
        out: dict[str, dict[str, int]] = {}
        for i in range(0, len(flat), 2):
            question, _, answer = flat[i].partition(SEP)
            if int(flat[i + 1]) > 0:
                out.setdefault(question, {})[answer] = int(flat[i + 1])
        return out

    # ------------------------------------------------------------------------------------ upkeep, keys, tickets
    @_reachable
    def sweep(self) -> int:
        """Classes left by their teachers leave atlas:classes (their keys expire in Redis by their TTLs)."""
        return int(self.redis.zremrangebyscore(CLASSES, "-inf", f"({self.clock() - self.ttl_s}"))

    @_reachable
    def shared_key(self) -> bytes:
        with self._key_lock:
            if self._key is None:
                self.redis.set(KEY, secrets.token_hex(32), nx=True)
                self._key = bytes.fromhex(self.redis.get(KEY))
            return self._key

    @_reachable
    def issue_ticket(self, token: str) -> str:
        ticket = codes.new_ticket()
        self.redis.set(TICKETS + codes.ticket_id(ticket), codes.seal(token, ticket), ex=math.ceil(TICKET_S))
        return ticket

    @_reachable
    def redeem_ticket(self, ticket: str) -> str | None:
        if not codes.is_secret(ticket):
            return None
        sealed = self.redis.getdel(TICKETS + codes.ticket_id(ticket))
        return None if sealed is None else codes.unseal(sealed, ticket)
