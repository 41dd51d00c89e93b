"""The class state in Redis (``EXPLORER_REDIS_URL``): every replica behind a load balancer serves the same class.

Keys (one Redis, not a Cluster; ``{CODE}`` is the class's code in braces):

- ``explorer:class:{CODE}``: a hash of the class (deck, slide, controls and revealed as JSON, moves, the digest of
  the teacher's key, never the key);
- ``explorer:class:{CODE}:votes:SLIDE``: a hash per poll, student -> choice; ``explorer:class:{CODE}:polls``
  the set of slides that have one;
- ``explorer:class:live``: a sorted set of live codes scored by their end (ms, Redis's clock), which ``start``
  counts against the limit;
- ``explorer:class:student-secret``: the key that signs students' ids, made by the first server that asks (SET NX)
  and then every server's, so an id issued by one counts on all; it never expires (Redis restarted empty makes a
  new one, and the students' browsers are given new ids).

Every key of a class expires with it, and the teacher's move or keep-alive pushes them all back, so Redis itself
forgets an abandoned class. Each change is one Lua script (atomic: no two servers interleave a start past the
limit, a vote into a closed poll, or a poll past its voters), and publishes ``"CODE kind"`` on
``explorer:class:events`` from inside the script. One daemon thread per store listens there and calls the
subscribers, for changes made by any server, this one included.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from explorer.classroom import codes
from explorer.classroom.state import (
    LIFETIME,
    MAX_CHOICE,
    MAX_CLASSES,
    MAX_SLIDE,
    MAX_VOTERS,
    ClassesFull,
    ClassState,
    ClassStore,
    StoreUnavailable,
    checked_position,
    checked_slide,
    in_range,
    restartable,
)

log = logging.getLogger(__name__)

PREFIX = "explorer:class:"
LIVE = PREFIX + "live"
CHANNEL = PREFIX + "events"
STUDENT_SECRET = PREFIX + "student-secret"
# Redis does not answer: the listener waits and subscribes again. (AuthenticationError is among them.)
_UNREACHABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
_RETRY_SECONDS = (0.1, 5.0)  # the listener's wait before reconnecting: first, most

# Shared by the scripts: KEYS[1] the live set, KEYS[2] the class; ARGV[1] the code.
_LUA_PRELUDE = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function taught(digest)
  return redis.call('HGET', KEYS[2], 'digest') == digest
end
local function refresh(ttl)
  local polls = KEYS[2] .. ':polls'
  for _, slide in ipairs(redis.call('SMEMBERS', polls)) do
    redis.call('PEXPIRE', KEYS[2] .. ':votes:' .. slide, ttl)
  end
  redis.call('PEXPIRE', polls, ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('ZADD', KEYS[1], now_ms() + ttl, ARGV[1])
end
-- Redis refuses a command that may grow memory past maxmemory (noeviction) only while the script has written
-- nothing yet: a script that changes a class makes this its first write, so a full Redis refuses all of it.
local function room()
  redis.call('HINCRBY', KEYS[2], 'moves', 0)
end
local function revealed(slide)
  for _, shown in ipairs(cjson.decode(redis.call('HGET', KEYS[2], 'revealed'))) do
    if shown == slide then return true end
  end
  return false
end
"""

# ARGV: code, digest, ttl, max classes, deck, slide. {1, running} started, {0, running} code taken, {-1, running}
# full.
_START = """
local running = redis.call('ZCOUNT', KEYS[1], '(' .. now_ms(), '+inf')
if running >= tonumber(ARGV[4]) then return {-1, running} end
if redis.call('EXISTS', KEYS[2]) == 1 then return {0, running} end
redis.call('HSET', KEYS[2], 'deck', ARGV[5], 'slide', ARGV[6], 'controls', '[]', 'revealed', '[]', 'moves', 0,
           'digest', ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms())
refresh(tonumber(ARGV[3]))
return {1, running + 1}
"""

# ARGV: as _START's. {1, running} started again, {2, running} already running with this key, {0, running} the code
# is another class's, {-1, running} full. Published as a move: the class's waiting students rejoin.
_RESTART = """
if redis.call('EXISTS', KEYS[2]) == 1 then
  if taught(ARGV[2]) then return {2, 0} end
  return {0, 0}
end
local running = redis.call('ZCOUNT', KEYS[1], '(' .. now_ms(), '+inf')
if running >= tonumber(ARGV[4]) then return {-1, running} end
redis.call('HSET', KEYS[2], 'deck', ARGV[5], 'slide', ARGV[6], 'controls', '[]', 'revealed', '[]', 'moves', 0,
           'digest', ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms())
refresh(tonumber(ARGV[3]))
redis.call('PUBLISH', KEYS[3], ARGV[1] .. ' move')
return {1, running + 1}
"""

# ARGV: code, digest, ttl, deck, slide, controls. 0 not the teacher, 1 unchanged, 2 moved.
_MOVE = """
if not taught(ARGV[2]) then return 0 end
local now = redis.call('HMGET', KEYS[2], 'deck', 'slide', 'controls')
if now[1] == ARGV[4] and now[2] == ARGV[5] and now[3] == ARGV[6] then
  refresh(tonumber(ARGV[3]))  -- a keep-alive, which a full Redis still takes (it grows nothing)
  return 1
end
room()
refresh(tonumber(ARGV[3]))
redis.call('HSET', KEYS[2], 'deck', ARGV[4], 'slide', ARGV[5], 'controls', ARGV[6])
redis.call('HINCRBY', KEYS[2], 'moves', 1)
redis.call('PUBLISH', KEYS[3], ARGV[1] .. ' move')
return 2
"""

# ARGV: code, digest, ttl, slide. 0 not the teacher, 1 already revealed, 2 revealed.
_REVEAL = """
if not taught(ARGV[2]) then return 0 end
room()
refresh(tonumber(ARGV[3]))
local slide = tonumber(ARGV[4])
if revealed(slide) then return 1 end
local shown = cjson.decode(redis.call('HGET', KEYS[2], 'revealed'))
table.insert(shown, slide)
table.sort(shown)
redis.call('HSET', KEYS[2], 'revealed', cjson.encode(shown))
redis.call('HINCRBY', KEYS[2], 'moves', 1)
redis.call('PUBLISH', KEYS[3], ARGV[1] .. ' move')
return 2
"""

# ARGV: code, digest, ttl.
_KEEP_ALIVE = """
if not taught(ARGV[2]) then return 0 end
refresh(tonumber(ARGV[3]))
return 1
"""

# ARGV: code, digest.
_END = """
if not taught(ARGV[2]) then return 0 end
local polls = KEYS[2] .. ':polls'
for _, slide in ipairs(redis.call('SMEMBERS', polls)) do
  redis.call('DEL', KEYS[2] .. ':votes:' .. slide)
end
redis.call('DEL', polls, KEYS[2])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('PUBLISH', KEYS[3], ARGV[1] .. ' end')
return 1
"""

# KEYS[4] the poll. ARGV: code, slide, student, choice, max voters. A poll lives exactly as long as its class.
_VOTE = """
if redis.call('EXISTS', KEYS[2]) == 0 or revealed(tonumber(ARGV[2])) then return 0 end
if redis.call('HEXISTS', KEYS[4], ARGV[3]) == 0 and redis.call('HLEN', KEYS[4]) >= tonumber(ARGV[5]) then
  return 0
end
redis.call('HSET', KEYS[4], ARGV[3], ARGV[4])
redis.call('SADD', KEYS[2] .. ':polls', ARGV[2])
local ttl = redis.call('PTTL', KEYS[2])
redis.call('PEXPIRE', KEYS[4], ttl)
redis.call('PEXPIRE', KEYS[2] .. ':polls', ttl)
redis.call('PUBLISH', KEYS[3], ARGV[1] .. ' vote')
return 1
"""

_CLASSES = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms())
return redis.call('ZCARD', KEYS[1])
"""


def class_key(code: str) -> str:
    return f"{PREFIX}{{{code}}}"


def poll_key(code: str, slide: int) -> str:
    return f"{class_key(code)}:votes:{slide}"


def where(url: str) -> str:
    """The server of a Redis URL as host:port (a socket's path), never its user or password."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return parts.path
    try:
        return f"{parts.hostname}:{parts.port or 6379}"
    except ValueError:  # a port that is not a number
        return f"{parts.hostname}"


def sentences(at: str, timeout: float) -> dict[str, str]:
    """The sentence of each fault (``state.FAULTS``) of the class store at ``at`` (host:port)."""
    store = f"The classes' shared state (Redis at {at})"
    later = "Try again in a minute; if it lasts, whoever runs this server should check Redis."
    return {
        "unreachable": f"{store} does not answer, so no class can start or be followed now. {later}",
        "timeout": f"{store} did not answer within {timeout:g} s: it may be paused or overloaded. {later}",
        "auth": f"{store} refuses this server's password, so no class can start or be followed. Whoever runs this "
        "server should set the password Redis expects in EXPLORER_REDIS_URL (redis://:PASSWORD@host:port/0).",
        "full": f"{store} is full (its maxmemory is reached), so it takes no new answers, moves or classes; what "
        "it holds is kept. Whoever runs this server should give Redis more memory (docs/hosting.md).",
        "not-redis": f"Something that is not Redis answers at {at}, so no class can start or be followed. Whoever "
        "runs this server should point EXPLORER_REDIS_URL at Redis.",
        "refused": f"{store} refused the change (the server's log says why: a read-only replica, a disk it cannot "
        f"write, a permission), so the class did not change. {later}",
    }


def fault(error: redis.exceptions.RedisError) -> str:
    """Which of ``state.FAULTS`` a redis-py error is."""
    if isinstance(error, redis.exceptions.AuthenticationError):  # a ConnectionError: first
        return "auth"
    if isinstance(error, redis.exceptions.TimeoutError):
        return "timeout"
    if isinstance(error, redis.exceptions.InvalidResponse):  # "Protocol Error": no RESP came back
        return "not-redis"
    if isinstance(error, redis.exceptions.ConnectionError):  # refused, reset, loading its data
        return "unreachable"
    text = str(error)
    if isinstance(error, redis.exceptions.OutOfMemoryError) or "maxmemory" in text or text.startswith("OOM"):
        return "full"  # a transaction says so in its EXECABORT
    if text.startswith(("NOAUTH", "WRONGPASS")) or "Authentication required" in text:
        return "auth"
    return "refused"


class RedisStore(ClassStore):
    def __init__(
        self,
        url: str,
        max_classes: int = MAX_CLASSES,
        lifetime: float = LIFETIME,
        *,
        timeout: float = 5.0,
        connect_timeout: float = 2.0,
    ):
        """``timeout``: seconds an answer may take (then the "timeout" fault); ``connect_timeout``: a connection."""
        self.max_classes, self.lifetime = max_classes, lifetime
        self._ttl = max(1, round(lifetime * 1000))  # Redis's expiry, in milliseconds
        self._where = where(url)
        self._sentences = sentences(self._where, timeout)
        self._faults_said: set[str] = set()  # logged since Redis last answered: each kind once
        self._faults_lock = threading.Lock()
        try:
            self._client = redis.Redis.from_url(
                url,
                decode_responses=True,
                socket_connect_timeout=connect_timeout,
                socket_timeout=timeout,
                health_check_interval=30,
                # A dropped connection (Redis restarted) is tried again at once, once; nothing else is: redis-py's
                # default, three tries with backoff, kept a vote waiting 10-16 s before it failed.
                retry=Retry(NoBackoff(), 1, supported_errors=(redis.exceptions.ConnectionError,)),
            )
        except ValueError as error:
            raise StoreUnavailable(
                "EXPLORER_REDIS_URL is not a Redis URL (redis://host:port/0), so no class can start."
            ) from error
        self._scripts = {
            name: self._client.register_script(_LUA_PRELUDE + source)
            for name, source in [
                ("start", _START),
                ("restart", _RESTART),
                ("move", _MOVE),
                ("reveal", _REVEAL),
                ("keep_alive", _KEEP_ALIVE),
                ("end", _END),
                ("vote", _VOTE),
                ("classes", _CLASSES),
            ]
        }
        self._callbacks: list[Callable[[str, str], None]] = []
        self._callbacks_lock = threading.Lock()
        self._listener: threading.Thread | None = None
        self._listening = threading.Event()  # set while the listener is subscribed
        self._closed = threading.Event()

    def ping(self) -> None:
        with self._answering():
            self._client.ping()

    def where(self) -> str:
        return f"Redis at {self._where}"

    def close(self) -> None:
        """Stops the listener and closes the connections (for tests and shutdown)."""
        self._closed.set()
        if self._listener is not None:
            self._listener.join(timeout=5)
        self._client.close()

    def start(self, deck: str, slide: int = 1) -> tuple[str, str]:
        deck, slide, _ = checked_position(deck, slide, {})
        key = codes.new_key()
        while True:  # a code already in use (1 in 44 million with 20 classes) draws another
            code = codes.new_code()
            started, running = self._run("start", code, codes.key_digest(key), self._ttl, self.max_classes, deck, slide)
            if started < 0:
                raise ClassesFull(running, lifetime=self.lifetime, shared=True)
            if started:
                return code, key

    def state(self, code: str) -> ClassState | None:
        code = codes.normalize_code(code)
        if code is None:
            return None
        with self._answering():
            fields = self._client.hgetall(class_key(code))
        if not fields:
            return None
        controls = tuple((name, value) for name, value in json.loads(fields["controls"]))
        revealed = frozenset(json.loads(fields["revealed"]))
        return ClassState(code, fields["deck"], int(fields["slide"]), controls, revealed, int(fields["moves"]))

    def is_teacher(self, code: str, key: str | None) -> bool:
        code = codes.normalize_code(code)
        digest = None
        if code is not None:
            with self._answering():
                digest = self._client.hget(class_key(code), "digest")
        return codes.key_matches(key, digest)

    def move(self, code: str, key: str | None, *, deck: str, slide: int, controls: Mapping[str, object]) -> bool:
        deck, slide, controls = checked_position(deck, slide, controls)
        # Canonical JSON, so that the script sees an unchanged position as the same string.
        moved = json.dumps(controls, separators=(",", ":"), allow_nan=False)
        return self._as_teacher("move", code, key, deck, slide, moved)

    def reveal(self, code: str, key: str | None, slide: int) -> bool:
        return self._as_teacher("reveal", code, key, checked_slide(slide))

    def end(self, code: str, key: str | None) -> bool:
        return self._as_teacher("end", code, key)

    def keep_alive(self, code: str, key: str | None) -> bool:
        return self._as_teacher("keep_alive", code, key)

    def vote(self, code: str, slide: int, student: str, choice: int) -> bool:
        code = codes.normalize_code(code)
        valid = in_range(slide, 1, MAX_SLIDE) and in_range(choice, 0, MAX_CHOICE) and self.is_student(student)
        if code is None or not valid:
            return False
        slide, choice = int(slide), int(choice)
        return bool(self._run("vote", code, slide, student, choice, MAX_VOTERS, poll=poll_key(code, slide)))

    def votes(self, code: str, slide: int) -> dict[int, int]:
        code = codes.normalize_code(code)
        if code is None or not in_range(slide, 1, MAX_SLIDE):
            return {}
        with self._answering():
            answers = self._client.hvals(poll_key(code, int(slide)))
        return dict(Counter(map(int, answers)))

    def answer_of(self, code: str, slide: int, student: str) -> int | None:
        code = codes.normalize_code(code)
        if code is None or not in_range(slide, 1, MAX_SLIDE) or not codes.is_student_id(student):
            return None
        with self._answering():
            answer = self._client.hget(poll_key(code, int(slide)), student)
        return None if answer is None else int(answer)

    def student_secret(self) -> bytes:
        # Read each time (one round trip, once per vote or new student), never kept: after Redis lost it, every
        # server signs with the one made next, not with its own old copy. Read before any write: a full Redis
        # (noeviction) refuses the SET even when the secret is there, and its students' pages must still draw.
        with self._answering(writes=False):
            secret = self._client.get(STUDENT_SECRET)
        if secret is None:
            with self._answering(), self._client.pipeline() as made_once:  # MULTI/EXEC: one round trip, atomic
                made_once.set(STUDENT_SECRET, secrets.token_hex(32), nx=True).get(STUDENT_SECRET)
                _, secret = made_once.execute()
        return secret.encode()

    def subscribe(self, callback: Callable[[str, str], None]) -> Callable[[], None]:
        with self._callbacks_lock:
            self._callbacks.append(callback)
            if self._listener is None:
                self._listener = threading.Thread(target=self._listen, name="class-events", daemon=True)
                self._listener.start()
        # Redis drops what is published before a subscription reaches it: return once it has.
        self._listening.wait(timeout=5)

        def unsubscribe() -> None:
            with self._callbacks_lock:
                if callback in self._callbacks:
                    self._callbacks.remove(callback)

        return unsubscribe

    def classes(self) -> int:
        return int(self._run("classes", ""))

    def restart(self, code: str, key: str, *, deck: str, slide: int) -> bool:
        deck, slide, _ = checked_position(deck, slide, {})
        code = restartable(code, key)
        if code is None:
            return False
        done, running = self._run("restart", code, codes.key_digest(key), self._ttl, self.max_classes, deck, slide)
        if done < 0:
            raise ClassesFull(running, lifetime=self.lifetime, shared=True)
        return bool(done)

    def _as_teacher(self, script: str, code: str, key: str | None, *args) -> bool:
        code = codes.normalize_code(code)
        # The key is checked here in constant time; the script checks the digest again, so that a class ended
        # in between (and its code issued again) is never changed with the old teacher's key.
        if not self.is_teacher(code or "", key):
            return False
        return bool(self._run(script, code, codes.key_digest(key), self._ttl, *args))

    def _run(self, script: str, code: str, *args, poll: str | None = None):
        keys = [LIVE, class_key(code), CHANNEL] + ([poll] if poll else [])
        with self._answering():
            return self._scripts[script](keys=keys, args=[code, *args])

    @contextlib.contextmanager
    def _answering(self, *, writes: bool = True):
        """Runs the block; a Redis failure becomes ``StoreUnavailable`` with its fault's sentence, logged the first
        time each fault happens since Redis last answered (a class of 40 would log each failure 40 times). A block
        that only reads (``writes=False``) says nothing of whether a full Redis takes writes again."""
        try:
            yield
        except redis.exceptions.RedisError as error:
            kind = fault(error)
            with self._faults_lock:
                first = kind not in self._faults_said
                self._faults_said.add(kind)
            if first:
                log.warning("class store (Redis at %s): %s (%s: %s)", self._where, kind, type(error).__name__, error)
            raise StoreUnavailable(self._sentences[kind], kind) from error
        if self._faults_said:
            with self._faults_lock:
                cleared = self._faults_said if writes else self._faults_said - {"full"}
                self._faults_said = self._faults_said - cleared
            if cleared:
                log.warning("class store (Redis at %s): answers again", self._where)

    def _listen(self) -> None:
        """Subscribes, calls the subscribers for each event, and after a dropped connection subscribes again."""
        wait, subscribed_before = _RETRY_SECONDS[0], False
        while not self._closed.is_set():
            pubsub = self._client.pubsub()
            try:
                pubsub.subscribe(CHANNEL)
                while not self._closed.is_set():
                    message = pubsub.get_message(timeout=1.0)  # blocks up to 1 s: no busy loop
                    if message and message["type"] == "subscribe":
                        self._listening.set()
                        if subscribed_before:
                            self._after_reconnect()
                        wait, subscribed_before = _RETRY_SECONDS[0], True
                    elif message and message["type"] == "message":
                        self._fan_out(message["data"])
            except (*_UNREACHABLE, OSError) as error:
                self._listening.clear()
                log.warning("class events: Redis connection lost (%s); subscribing again in %.1f s", error, wait)
                self._closed.wait(wait)
                wait = min(wait * 2, _RETRY_SECONDS[1])
            finally:
                pubsub.close()

    def _after_reconnect(self) -> None:
        """Events published while the connection was down are lost: every live class counts as moved, so its
        followers read the state again (they compare ``moves``); then ``("", "reconnected")``, for the classes
        Redis no longer has (it restarted empty): their followers find them gone."""
        with contextlib.suppress(redis.exceptions.RedisError):
            for code in self._client.zrange(LIVE, 0, -1):
                self._fan_out(f"{code} move")
        self._fan_out(" reconnected")

    def _fan_out(self, payload: str) -> None:
        code, _, kind = payload.partition(" ")
        with self._callbacks_lock:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            try:
                callback(code, kind)
            except Exception:
                log.exception("a class subscriber failed on %s %s", code, kind)
