"""The class store in Redis (ATLAS_REDIS_URL): every replica of the app shares its classes.

Keys, all with a TTL of ttl_s that each teacher call renews (so a class ends 12 h after its teacher left):
- atlas:class:<code>        hash: secret (its SHA-256), view (JSON: page, params, question), question, revealed
                            ("0"/"1"), version (a follower's poll is one HGET of it);
- atlas:class:<code>:f      sorted set: follower id -> time of its last heartbeat;
- atlas:class:<code>:a      hash: follower id -> answer to the current question (deleted when the question changes);
- atlas:class:<code>:ended  set by end(), so the code reads as ended, not unknown.
The teacher's writes are Lua scripts: the secret is checked and the state written in one step, so no write lands
on a class that has just ended.
"""
from __future__ import annotations

import functools
import json

import redis

from app_core.classroom import codes
from app_core.classroom.store import (
    ClassClosed,
    ClassState,
    ClassStore,
    NotTeacher,
    StoreUnavailable,
    View,
    check_answer_text,
    tally,
)

PREFIX = "atlas:class:"
CLOSED, FORBIDDEN = -1, -2

# KEYS: class, followers, answers. ARGV: secret hash, ttl. Returns CLOSED, FORBIDDEN or 0 (then the action runs).
_TEACHER = """
local kept = redis.call('HGET', KEYS[1], 'secret')
if not kept then return -1 end
if kept ~= ARGV[1] then return -2 end
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ARGV[2]) end
"""
# ARGV[3]: view JSON, ARGV[4]: question ('' for none). Returns the version.
PUBLISH = _TEACHER + """
if redis.call('HGET', KEYS[1], 'view') == ARGV[3] then return tonumber(redis.call('HGET', KEYS[1], 'version')) end
if redis.call('HGET', KEYS[1], 'question') ~= ARGV[4] then
  redis.call('DEL', KEYS[3])
  redis.call('HSET', KEYS[1], 'question', ARGV[4], 'revealed', '0')
end
redis.call('HSET', KEYS[1], 'view', ARGV[3])
return redis.call('HINCRBY', KEYS[1], 'version', 1)
"""
REVEAL = _TEACHER + """
if redis.call('HGET', KEYS[1], 'revealed') == '1' then return tonumber(redis.call('HGET', KEYS[1], 'version')) end
redis.call('HSET', KEYS[1], 'revealed', '1')
return redis.call('HINCRBY', KEYS[1], 'version', 1)
"""
TEACHER_HERE = _TEACHER + "return 0"
ANSWERS = _TEACHER + "return redis.call('HVALS', KEYS[3])"
# KEYS: class, followers, answers, ended. ARGV: secret hash, ttl.
END = _TEACHER + """
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('SET', KEYS[4], '1', 'EX', ARGV[2])
return 0
"""
# KEYS: class, followers. ARGV: follower, now, oldest kept, ttl.
FOLLOW = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return 0
"""
# KEYS: class, answers. ARGV: follower, question, answer, ttl.
ANSWER = """
local state = redis.call('HMGET', KEYS[1], 'question', 'revealed')
if not state[1] then return -1 end
if state[1] ~= ARGV[2] or state[2] == '1' then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return 1
"""


def _reachable(method):
    """A store method whose Redis errors (down, unreachable, timed out) become StoreUnavailable."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except redis.RedisError as err:
            raise StoreUnavailable(f"the class store (Redis) cannot be reached: {err}") from err
    return call


def _view_json(view: View) -> str:
    return json.dumps({"page": view.page, "params": view.params, "question": view.question}, ensure_ascii=False,
                      sort_keys=True)


class RedisStore(ClassStore):
    """Classes in Redis at `url` (redis://host:port/db)."""

    networked = True

    def __init__(self, url: str, **kwargs):
        super().__init__(**kwargs)
        self.redis = redis.Redis.from_url(url, decode_responses=True, socket_timeout=2, socket_connect_timeout=2,
                                          health_check_interval=30)
        self._scripts = {name: self.redis.register_script(source) for name, source in
                         (("publish", PUBLISH), ("reveal", REVEAL), ("here", TEACHER_HERE), ("answers", ANSWERS),
                          ("end", END), ("follow", FOLLOW), ("answer", ANSWER))}

    def _ttl(self) -> int:
        return max(1, int(round(self.ttl_s)))

    def _keys(self, code: str) -> list[str]:
        key = PREFIX + code
        return [key, key + ":f", key + ":a", key + ":ended"]

    def _closed(self, code: str) -> ClassClosed:
        return ClassClosed(code, bool(self.redis.exists(PREFIX + code + ":ended")))

    def _teacher(self, script: str, code: str, secret: str, *args):
        if not codes.is_secret(secret):
            raise NotTeacher(code)
        keys = self._keys(code)
        out = self._scripts[script](keys=keys if script == "end" else keys[:3],
                                    args=[codes.secret_hash(secret), self._ttl(), *args])
        if out == CLOSED:
            raise self._closed(code)
        if out == FORBIDDEN:
            raise NotTeacher(code)
        return out

    @_reachable
    def create(self, view: View) -> tuple[str, str]:
        code, secret = codes.new_code(), codes.new_secret()
        key = self._keys(code)[0]
        with self.redis.pipeline() as pipe:
            pipe.hset(key, mapping={"secret": codes.secret_hash(secret), "view": _view_json(view),
                                    "question": view.question or "", "revealed": "0", "version": 1})
            pipe.expire(key, self._ttl())
            pipe.execute()
        return code, secret

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
        return ClassState(code, int(version), View(data["page"], data["params"], data["question"], revealed == "1"))

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
        if self._scripts["follow"](keys=keys, args=[follower, now, now - self.follow_window_s, self._ttl()]) == -1:
            raise self._closed(code)

    @_reachable
    def followers(self, code: str) -> int:
        return int(self.redis.zcount(PREFIX + code + ":f", self.clock() - self.follow_window_s, "+inf"))

    @_reachable
    def answer(self, code: str, follower: str, question: str, answer: str) -> bool:
        check_answer_text(question, follower, answer)
        keys = self._keys(code)
        out = self._scripts["answer"](keys=[keys[0], keys[2]], args=[follower, question, answer, self._ttl()])
        if out == -1:
            raise self._closed(code)
        return out == 1

    @_reachable
    def answers(self, code: str, secret: str) -> dict[str, int]:
        return tally(list(self._teacher("answers", code, secret)))
