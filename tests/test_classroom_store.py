"""The live class's state store: the same rules for the in-process store and for Redis (a real redis-server).

The in-process store runs on a fake clock; Redis keeps its own time, so its expiry tests use a short lifetime
and wait. Redis's events come from a listener thread, so tests wait for them on a queue.
"""

from __future__ import annotations

import base64
import hmac
import pickle
import queue
import subprocess
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pytest
import redis

from explorer.classroom import (
    LIFETIME,
    MAX_CHOICE,
    MAX_CLASSES,
    MAX_CONTROLS,
    MAX_SLIDE,
    MAX_VOTERS,
    ClassesFull,
    ClassState,
    StoreUnavailable,
    class_store,
    codes,
    state,
)
from explorer.classroom.memory import InProcessStore
from explorer.classroom.redis_store import STUDENT_SECRET, RedisStore
from tests.browser import ROOT, free_port

SIGNED = "the store's own student 1"  # in parameters, made before any store: ``student(store, 1)``
REDIS_LIFETIME = 2.5  # seconds: long enough that a loaded machine keeps to the steps of the expiry test
EVENT_WAIT = 5.0  # seconds an event may take to come back from Redis (it takes well under a millisecond)


def student(store, number: int) -> str:
    """Student ``number``'s id as ``store`` (and every store sharing its state) issues it: signed with its secret."""
    return codes.sign_student(f"{number:024x}", store.student_secret())


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Stores:
    """Makes stores of one kind, moves their time on, and measures what they hold."""

    kind: str
    url: str | None = None
    clock: FakeClock = field(default_factory=FakeClock)
    made: list = field(default_factory=list)

    @property
    def short_lifetime(self) -> float:
        return REDIS_LIFETIME if self.kind == "redis" else LIFETIME

    def new(self, max_classes: int = MAX_CLASSES, lifetime: float = LIFETIME):
        if self.kind == "redis":
            store = RedisStore(self.url, max_classes=max_classes, lifetime=lifetime)
        else:
            store = InProcessStore(max_classes=max_classes, lifetime=lifetime, clock=self.clock)
        self.made.append(store)
        return store

    def advance(self, seconds: float) -> None:
        if self.kind == "redis":
            threading.Event().wait(seconds)  # Redis's clock is real time
        else:
            self.clock.now += seconds

    def held(self, store) -> tuple[int, int]:
        """(keys, bytes) the store holds for its classes."""
        if self.kind == "memory":
            return len(store._classes), len(pickle.dumps(store._classes))
        client = redis.Redis.from_url(self.url)
        try:
            keys = [key for key in client.keys("*") if key != STUDENT_SECRET.encode()]  # the one key of no class
            return len(keys), sum(client.memory_usage(key, samples=0) for key in keys)
        finally:
            client.close()


# Redis runs as a program of its own (tests/redis_server.py) and its expiry waits in real time: the full loop only.
@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.slow)])
def stores(request):
    url = request.getfixturevalue("redis_db") if request.param == "redis" else None
    made = Stores(request.param, url)
    yield made
    for store in made.made:
        if isinstance(store, RedisStore):
            store.close()


@pytest.fixture
def store(stores):
    return stores.new()


def events_of(store) -> queue.Queue:
    events = queue.Queue()
    store.subscribe(lambda code, kind: events.put((code, kind)))
    return events


def next_event(events: queue.Queue) -> tuple[str, str]:
    return events.get(timeout=EVENT_WAIT)


# Codes, keys and students' ids


def test_codes_are_six_characters_without_look_alikes_and_distinct():
    drawn = [codes.new_code() for _ in range(10_000)]
    assert not set("0O1IL") & set(codes.ALPHABET) and len(set(codes.ALPHABET)) == 31
    assert all(len(code) == codes.CODE_LENGTH == 6 and set(code) <= set(codes.ALPHABET) for code in drawn)
    # 31**6 = 887 million codes: 10,000 draws share about 0.06 pairs, and 10 shared pairs would take a broken draw.
    assert len(set(drawn)) > 9_990
    # Each character about 60,000 / 31 = 1,935 times (its standard deviation is 43).
    assert all(1_600 < count < 2_300 for count in Counter("".join(drawn)).values())
    assert codes.normalize_code(drawn[0]) == drawn[0]


def test_a_teachers_key_carries_at_least_128_random_bits():
    keys = [codes.new_key() for _ in range(1_000)]
    assert len(set(keys)) == len(keys)
    for key in keys[:20]:
        random_bytes = base64.urlsafe_b64decode(key + "=" * (-len(key) % 4))
        assert len(random_bytes) * 8 >= 128 and len(key) <= codes.MAX_KEY_LENGTH


@pytest.mark.parametrize(
    ("typed", "code"),
    [
        (" ab2c3d\n", "AB2C3D"),
        ("XYZ789", "XYZ789"),
        ("AB2C3O", None),  # O looks like 0: not in the alphabet
        ("AB2C31", None),
        ("AB2C3", None),
        ("AB2C3DE", None),
        ("ÄB2C3D", None),
        ("", None),
        (None, None),
        (123456, None),
    ],
)
def test_normalize_code(typed, code):
    assert codes.normalize_code(typed) == code


def test_key_matches_only_the_key_itself_and_always_compares(monkeypatch):
    key = codes.new_key()
    digest = codes.key_digest(key)
    assert digest != key and len(digest) == 64
    compared = []
    real = hmac.compare_digest
    monkeypatch.setattr(codes.hmac, "compare_digest", lambda a, b: compared.append(1) or real(a, b))
    assert codes.key_matches(key, digest)
    refused = [None, "", key[:-1], key + "x", key.upper(), " " + key, "x" * 201, "\ud800", 42, codes.new_key()]
    assert not any(codes.key_matches(other, digest) for other in refused)
    assert not codes.key_matches(key, None) and not codes.key_matches(key, "")
    # Every check went through the constant-time comparison, refused keys too (no early exit on them).
    assert len(compared) == 1 + len(refused) + 2


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        # What a browser's crypto.randomUUID() gives; written out, so that every test worker collects the same test.
        ("a0292bb4-1166-4d1a-bf7f-9cafdaf9b311", True),
        ("a" * 16, True),
        ("A_b-" * 16, True),
        ("a" * 15, False),
        ("a" * 65, False),
        ("a" * 20 + " ", False),
        ("ä" * 20, False),
        ("a" * 20 + "\n", False),
        (None, False),
    ],
)
def test_is_student_id(text, valid):
    assert codes.is_student_id(text) is valid


def test_a_poll_counts_only_ids_its_store_issued(stores):
    store = stores.new()
    code, _ = store.start("anatomy")
    issued = store.new_student()
    forged = [
        "a0292bb4-1166-4d1a-bf7f-9cafdaf9b311",  # what a browser made before the server issued ids
        f"{'0' * 24}-{'0' * 32}",  # the issued ids' shape, under no secret
        InProcessStore().new_student(),  # another server's, with its own secret
        issued[:-1],
        issued[:-1] + ("0" if issued[-1] != "0" else "1"),
    ]
    assert [given for given in forged if store.is_student(given) or store.vote(code, 2, given, 1)] == []
    assert store.votes(code, 2) == {} and store.answer_of(code, 2, forged[0]) is None
    assert store.is_student(issued) and store.vote(code, 2, issued, 1) and store.votes(code, 2) == {1: 1}
    # Another store on the same state (a second server on the Redis) counts the first one's ids; in process, a
    # second store is another server's state, with a secret of its own.
    assert stores.new().is_student(issued) is (stores.kind == "redis")


@pytest.mark.slow  # a redis-server of its own
def test_redis_keeps_one_secret_for_every_server_and_makes_a_new_one_when_it_lost_it(redis_db):
    first, second = RedisStore(redis_db), RedisStore(redis_db)
    client = redis.Redis.from_url(redis_db)
    try:
        secret = first.student_secret()
        assert second.student_secret() == secret == client.get(STUDENT_SECRET) and len(secret) == 64
        assert client.ttl(STUDENT_SECRET) == -1  # it never expires with a class
        issued = second.new_student()
        assert first.is_student(issued)
        client.flushdb()  # Redis restarted empty: no server keeps signing with the old secret
        assert not first.is_student(issued) and not second.is_student(issued)
        assert second.is_student(first.new_student()) and first.student_secret() != secret
    finally:
        client.close()
        first.close()
        second.close()


# A class, its teacher and what nobody else can do


def test_a_class_starts_where_the_teacher_is_and_follows_each_move(store):
    code, key = store.start("anatomy", slide=3)
    assert store.state(code) == ClassState(code, "anatomy", 3, (), frozenset(), 0)
    assert store.state(code.lower()) == store.state(code) and store.is_teacher(code, key)
    controls = {"temperature": 0.7, "layer": np.int64(3), "top_k": None, "scale": 1.0}
    assert store.move(code, key, deck="generation", slide=5, controls=controls)
    moved = store.state(code)
    assert moved == ClassState(
        code, "generation", 5, (("layer", 3), ("scale", 1.0), ("temperature", 0.7), ("top_k", None)), frozenset(), 1
    )
    assert [type(value) for _, value in moved.controls] == [int, float, float, type(None)]
    # The same position again changes nothing: followers are not woken for it.
    assert store.move(code, key, deck="generation", slide=5, controls=dict(reversed(controls.items())))
    assert store.state(code).moves == 1
    assert store.move(code, key, deck="generation", slide=5, controls={**controls, "layer": 4})
    assert store.state(code).moves == 2


def _crafted_keys(key: str, other_key: str) -> list:
    return [codes.new_key(), "", None, other_key, key[:-1], key + "x", key[1:], key.upper(), f" {key}", "x" * 10_000]


def test_no_key_but_the_teachers_moves_reveals_ends_or_keeps_a_class(stores):
    store = stores.new(lifetime=stores.short_lifetime)
    code, key = store.start("anatomy")
    other, other_key = store.start("generation")
    assert store.vote(code, 2, student(store, 1), 0)
    before = store.state(code)
    for crafted in _crafted_keys(key, other_key):
        assert not store.is_teacher(code, crafted)
        assert not store.move(code, crafted, deck="generation", slide=7, controls={"layer": 1})
        assert not store.reveal(code, crafted, 2)
        assert not store.keep_alive(code, crafted)
        assert not store.end(code, crafted)
    assert not store.move(other, key, deck="anatomy", slide=9, controls={})  # a teacher of another class
    assert not store.end(other, key)
    assert store.state(code) == before and store.state(other).slide == 1
    assert store.votes(code, 2) == {0: 1}
    # Crafted keep-alives did not keep the class: it ends a lifetime after its start.
    stores.advance(1.2 * stores.short_lifetime)
    assert store.state(code) is None


def test_a_missing_class_answers_the_same_whatever_the_reason(stores):
    store = stores.new(lifetime=stores.short_lifetime)
    ended, ended_key = store.start("anatomy")
    expired, _ = store.start("anatomy")
    kept, kept_key = store.start("anatomy")
    assert store.end(ended, ended_key)
    stores.advance(0.6 * stores.short_lifetime)
    assert store.keep_alive(kept, kept_key)
    stores.advance(0.6 * stores.short_lifetime)
    never = next(code for code in iter(codes.new_code, None) if code not in (ended, expired, kept))

    def answers(code, key):
        return (
            store.state(code),
            store.is_teacher(code, key),
            store.move(code, key, deck="anatomy", slide=2, controls={}),
            store.reveal(code, key, 2),
            store.keep_alive(code, key),
            store.vote(code, 2, student(store, 1), 1),
            store.votes(code, 2),
            store.answer_of(code, 2, student(store, 1)),
            store.end(code, key),
        )

    missing = [answers(code, kept_key) for code in ("", "0OIL1!", "X" * 5000, None, never, ended, expired)]
    assert missing == [(None, False, False, False, False, False, {}, None, False)] * len(missing)
    assert store.state(kept) is not None and store.classes() == 1


def test_the_21st_class_waits_until_one_ends(store):
    started = [store.start("anatomy") for _ in range(MAX_CLASSES)]
    assert store.classes() == MAX_CLASSES == 20
    with pytest.raises(ClassesFull, match=r"20 live classes are running.*Wait for one to end") as full:
        store.start("anatomy")
    # Issue 39: the limit is the store's, at once; through Redis every server sharing it counts, and says so.
    where = "this site (all its servers together)" if isinstance(store, RedisStore) else "this server"
    assert f"as many as {where} runs at once" in str(full.value)
    assert "30 minutes after its teacher's page was last open" in str(full.value)
    assert store.classes() == MAX_CLASSES
    assert store.end(*started[7])
    code, key = store.start("generation")
    assert store.is_teacher(code, key) and store.classes() == MAX_CLASSES


def test_a_class_without_its_teacher_ends_after_half_an_hour_not_three():
    assert LIFETIME == 30 * 60  # issue 39: twenty abandoned classes held every teacher out for 3 hours


def test_classes_started_at_once_never_pass_the_limit(stores):
    store = stores.new(max_classes=5)

    def start(_):
        try:
            return store.start("anatomy")
        except ClassesFull:
            return None

    with ThreadPoolExecutor(12) as pool:
        started = list(pool.map(start, range(12)))
    assert sum(map(bool, started)) == 5 and store.classes() == 5


def test_a_class_ends_a_lifetime_after_the_teachers_last_move_or_keep_alive(stores):
    store = stores.new(lifetime=stores.short_lifetime)
    lifetime = stores.short_lifetime
    code, key = store.start("anatomy")
    left, _ = store.start("anatomy")  # nobody keeps this one alive
    assert store.vote(code, 2, student(store, 1), 3)
    stores.advance(0.6 * lifetime)
    assert store.keep_alive(code, key)
    stores.advance(0.6 * lifetime)
    assert store.state(left) is None and store.classes() == 1
    assert store.move(code, key, deck="anatomy", slide=2, controls={})
    stores.advance(0.6 * lifetime)
    assert store.state(code).slide == 2 and store.votes(code, 2) == {3: 1}  # the poll lives with its class
    stores.advance(0.6 * lifetime)
    assert store.state(code) is None and store.votes(code, 2) == {} and store.classes() == 0
    assert stores.held(store)[0] == 0  # nothing of either class is left behind
    assert not store.keep_alive(code, key)


def test_ending_a_class_deletes_everything_of_it(stores):
    store = stores.new()
    empty = stores.held(store)
    code, key = store.start("anatomy")
    for slide in (2, 3):
        for number in range(5):
            assert store.vote(code, slide, student(store, number), number)
    assert store.reveal(code, key, 2)
    assert store.end(code, key)
    assert (
        store.state(code) is None and store.votes(code, 3) == {} and store.answer_of(code, 3, student(store, 1)) is None
    )
    assert stores.held(store) == empty


def test_the_class_state_stays_the_same_size_through_moves_and_past_the_voters(stores):
    store = stores.new()
    code, key = store.start("anatomy")

    def moves(first: int, last: int):
        for number in range(first, last):
            position = number % 100  # every 100 moves the teacher is back where they were
            controls = {"layer": position % 12, "temperature": 0.5 + position % 7 / 10}
            assert store.move(code, key, deck="anatomy", slide=position + 1, controls=controls)

    # 300 and 1,300 moves end on one position, with a counter of the same width (both stores pack small integers
    # by their size): the bytes held are exactly the same, nothing grew with the thousand moves between.
    moves(0, 300)
    after_300 = stores.held(store)
    moves(300, 1_300)
    assert store.state(code).moves == 1_300
    assert stores.held(store) == after_300
    counted = [store.vote(code, 4, student(store, number), number % 3) for number in range(600)]
    assert counted == [True] * MAX_VOTERS + [False] * 100 and MAX_VOTERS == 500
    assert sum(store.votes(code, 4).values()) == MAX_VOTERS
    assert store.answer_of(code, 4, student(store, MAX_VOTERS)) is None
    assert store.vote(code, 4, student(store, 0), 2)  # a counted student may still change their answer
    assert sum(store.votes(code, 4).values()) == MAX_VOTERS


# Polls


def test_a_second_answer_replaces_the_first(store):
    code, _ = store.start("anatomy")
    assert store.answer_of(code, 2, student(store, 1)) is None
    assert store.vote(code, 2, student(store, 1), 1) and store.vote(code, 2, student(store, 2), 1)
    assert store.vote(code, 2, student(store, 1), 3)
    assert store.votes(code, 2) == {1: 1, 3: 1}
    assert store.answer_of(code, 2, student(store, 1)) == 3 and store.answer_of(code, 2, student(store, 2)) == 1
    assert store.votes(code, 3) == {}  # each slide its own poll


def test_revealing_a_slide_closes_its_poll(store):
    code, key = store.start("anatomy")
    assert store.vote(code, 2, student(store, 1), 1)
    assert store.reveal(code, key, 2)
    assert store.state(code).revealed == {2} and store.state(code).moves == 1
    assert not store.vote(code, 2, student(store, 1), 4) and not store.vote(code, 2, student(store, 2), 1)
    assert store.votes(code, 2) == {1: 1} and store.answer_of(code, 2, student(store, 1)) == 1
    assert store.reveal(code, key, 2) and store.state(code).moves == 1  # revealed once
    assert store.vote(code, 3, student(store, 2), 0)  # other polls stay open
    assert store.reveal(code, key, 5) and store.state(code).revealed == {2, 5}


@pytest.mark.parametrize(
    ("slide", "who", "choice"),
    [
        (0, SIGNED, 1),
        (MAX_SLIDE + 1, SIGNED, 1),
        (True, SIGNED, 1),
        ("2", SIGNED, 1),
        (2.0, SIGNED, 1),
        (2, SIGNED, -1),
        (2, SIGNED, MAX_CHOICE + 1),
        (2, SIGNED, True),
        (2, SIGNED, "1"),
        (2, "short", 1),
        (2, "a b" * 10, 1),
        (2, None, 1),
    ],
)
def test_a_malformed_vote_is_refused_and_counts_nothing(store, slide, who, choice):
    code, _ = store.start("anatomy")
    who = student(store, 1) if who is SIGNED else who
    assert not store.vote(code, slide, who, choice)
    assert store.votes(code, 2) == {}
    assert store.vote(code, MAX_SLIDE, student(store, 1), MAX_CHOICE)  # the edges are in range


def test_two_classes_never_see_each_others_slides_or_votes(store):
    first, first_key = store.start("anatomy")
    second, _ = store.start("anatomy")
    assert store.move(first, first_key, deck="generation", slide=6, controls={"layer": 2})
    assert store.vote(first, 2, student(store, 1), 1) and store.reveal(first, first_key, 3)
    assert store.state(second) == ClassState(second, "anatomy", 1, (), frozenset(), 0)
    assert store.votes(second, 2) == {} and store.answer_of(second, 2, student(store, 1)) is None
    assert store.vote(second, 3, student(store, 1), 2)  # the first class's reveal closed its own poll only
    assert store.votes(first, 3) == {}


def test_forty_students_voting_at_once_are_each_counted_once(store):
    code, _ = store.start("anatomy")
    start = threading.Barrier(40)

    def answer(number: int) -> int:
        start.wait()
        store.vote(code, 2, student(store, number), number % 4)
        if number % 3 == 0:  # a reload, a second tab: the answer changes, the count does not
            store.vote(code, 2, student(store, number), (number + 1) % 4)
        return (number + 1) % 4 if number % 3 == 0 else number % 4

    with ThreadPoolExecutor(40) as pool:
        final = list(pool.map(answer, range(40)))
    assert store.votes(code, 2) == dict(Counter(final))
    assert sum(store.votes(code, 2).values()) == 40


@pytest.mark.parametrize(
    ("deck", "slide", "controls"),
    [
        ("", 1, {}),
        ("d" * 41, 1, {}),
        (None, 1, {}),
        ("anatomy", 0, {}),
        ("anatomy", MAX_SLIDE + 1, {}),
        ("anatomy", True, {}),
        ("anatomy", 1.5, {}),
        ("anatomy", 1, {f"c{n}": n for n in range(MAX_CONTROLS + 1)}),
        ("anatomy", 1, {"n" * 41: 1}),
        ("anatomy", 1, {"": 1}),
        ("anatomy", 1, {3: 1}),
        ("anatomy", 1, {"layer": "3"}),
        ("anatomy", 1, {"layer": True}),
        ("anatomy", 1, {"layer": [1]}),
        ("anatomy", 1, {"temperature": float("nan")}),
        ("anatomy", 1, {"temperature": float("inf")}),
        ("anatomy", 1, [("layer", 1)]),
    ],
)
def test_a_malformed_move_raises_and_changes_nothing(store, deck, slide, controls):
    code, key = store.start("anatomy")
    with pytest.raises(ValueError):
        store.move(code, key, deck=deck, slide=slide, controls=controls)
    assert store.state(code) == ClassState(code, "anatomy", 1, (), frozenset(), 0)


# Events


def test_subscribers_hear_moves_votes_and_ends(store):
    code, key = store.start("anatomy")
    events = events_of(store)
    assert store.move(code, key, deck="anatomy", slide=2, controls={})
    assert next_event(events) == (code, "move")
    assert store.move(code, key, deck="anatomy", slide=2, controls={})  # no change, no event:
    assert store.vote(code, 2, student(store, 1), 1)
    assert next_event(events) == (code, "vote")  # the next one is the vote's
    assert store.reveal(code, key, 2)
    assert next_event(events) == (code, "move")
    assert store.end(code, key)
    assert next_event(events) == (code, "end")


def test_an_unsubscribed_callback_hears_nothing_more(store):
    code, key = store.start("anatomy")
    heard = []
    unsubscribe = store.subscribe(lambda code, kind: heard.append(kind))
    events = events_of(store)
    assert store.move(code, key, deck="anatomy", slide=2, controls={})
    assert next_event(events) == (code, "move")
    unsubscribe()
    assert store.vote(code, 2, student(store, 1), 1)
    assert next_event(events) == (code, "vote")  # the callbacks are called in order: the first one was skipped
    assert heard == ["move"]


def test_a_failing_subscriber_never_breaks_a_move(store, caplog):
    code, key = store.start("anatomy")

    def broken(code, kind):
        raise RuntimeError("a subscriber's bug")

    store.subscribe(broken)
    events = events_of(store)
    assert store.move(code, key, deck="anatomy", slide=2, controls={})
    assert next_event(events) == (code, "move")  # the next subscriber still heard it
    assert store.state(code).slide == 2
    assert "a class subscriber failed" in caplog.text and "a subscriber's bug" in caplog.text


@pytest.mark.slow  # a redis-server of its own
def test_redis_events_reach_every_server_sharing_the_class(redis_db):
    """Two stores on one Redis stand for two app servers; a third process votes as a third server would."""
    teacher_side, student_side = RedisStore(redis_db), RedisStore(redis_db)
    try:
        events = events_of(student_side)
        code, key = teacher_side.start("anatomy")
        assert teacher_side.move(code, key, deck="anatomy", slide=4, controls={"layer": 1})
        assert next_event(events) == (code, "move")
        assert student_side.state(code) == teacher_side.state(code)
        vote = (
            "from explorer.classroom.redis_store import RedisStore; "
            f"print(RedisStore({redis_db!r}).vote({code!r}, 4, {student(teacher_side, 7)!r}, 2))"
        )
        voted = subprocess.run([sys.executable, "-c", vote], cwd=ROOT, capture_output=True, text=True, check=True)
        assert voted.stdout.strip() == "True"
        assert next_event(events) == (code, "vote")
        assert teacher_side.votes(code, 4) == {2: 1}
        assert teacher_side.end(code, key)
        assert next_event(events) == (code, "end")
        assert student_side.state(code) is None
    finally:
        teacher_side.close()
        student_side.close()


def test_redis_events_come_back_after_the_connection_drops(redis_db):
    store = RedisStore(redis_db)
    try:
        code, _ = store.start("anatomy")
        events = events_of(store)
        admin = redis.Redis.from_url(redis_db)
        admin.client_kill_filter(_type="pubsub")
        admin.close()
        # While subscribing again the listener counts every live class as moved (events may have been lost), then
        # says it is back (classes Redis lost meanwhile are found gone by their followers).
        assert next_event(events) == (code, "move")
        assert next_event(events) == ("", "reconnected")
        assert store.vote(code, 2, student(store, 1), 1)
        assert next_event(events) == (code, "vote")
    finally:
        store.close()


# The process-wide store


@pytest.fixture
def fresh_class_store(monkeypatch):
    monkeypatch.setattr(state, "_store", None)
    monkeypatch.delenv("EXPLORER_REDIS_URL", raising=False)
    monkeypatch.delenv("EXPLORER_MAX_CLASSES", raising=False)
    yield monkeypatch
    if isinstance(state._store, RedisStore):
        state._store.close()


def test_class_store_is_one_store_in_process_by_default(fresh_class_store):
    with ThreadPoolExecutor(8) as pool:
        made = set(map(id, pool.map(lambda _: class_store(), range(32))))
    assert len(made) == 1 and isinstance(class_store(), InProcessStore)
    assert class_store().max_classes == MAX_CLASSES


def test_class_store_is_redis_when_a_url_is_set(fresh_class_store, redis_db):
    fresh_class_store.setenv("EXPLORER_REDIS_URL", redis_db)
    fresh_class_store.setenv("EXPLORER_MAX_CLASSES", "3")
    store = class_store()
    assert isinstance(store, RedisStore) and class_store() is store and store.max_classes == 3
    code, _ = store.start("anatomy")
    client = redis.Redis.from_url(redis_db, decode_responses=True)
    assert client.exists(f"explorer:class:{{{code}}}")
    client.close()


@pytest.mark.parametrize("password", ["", ":hunter2@"])
def test_class_store_says_which_redis_does_not_answer(fresh_class_store, password):
    port = free_port()  # nothing listens there
    fresh_class_store.setenv("EXPLORER_REDIS_URL", f"redis://{password}127.0.0.1:{port}/0")
    with pytest.raises(StoreUnavailable) as raised:
        class_store()
    message = str(raised.value)
    assert f"(Redis at 127.0.0.1:{port}) does not answer" in message
    assert "hunter2" not in message and "Error" not in message and "Traceback" not in message
    assert state._store is None  # the next call tries again


def test_class_store_refuses_a_url_that_is_not_redis(fresh_class_store):
    fresh_class_store.setenv("EXPLORER_REDIS_URL", "http://user:hunter2@example.org/")
    with pytest.raises(StoreUnavailable, match="not a Redis URL") as raised:
        class_store()
    assert "hunter2" not in str(raised.value)
