"""A live class's store when Redis fails (issue 39 §4): a real redis-server killed and started again (with the
shipped deploy/redis.conf the class and its votes come back; with append-only off they are lost, and the teacher
starts the class again under its code), paused (a timeout, after which a vote may have counted), filled (maxmemory
with noeviction: nothing new is written), behind a password, and something that is not Redis. Each fault is its
own sentence, logged once. Timeouts are tenths of a second, so each test takes about a second or less.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time

import pytest
import redis

from explorer.classroom import FAULTS, StoreUnavailable, class_store, state
from explorer.classroom.redis_store import RedisStore, sentences
from tests.browser import ROOT, free_port
from tests.redis_server import redis_process

CONFIG = ROOT / "deploy" / "redis.conf"
TIMEOUT = 0.3  # seconds a store waits for an answer in these tests
EVENT_WAIT = 10.0  # seconds for the listener to come back after a restart (it waits 0.1 s, then longer)


@pytest.fixture
def stores():
    """Makes RedisStores with short timeouts, and closes them."""
    made = []

    def new(url: str) -> RedisStore:
        store = RedisStore(url, timeout=TIMEOUT, connect_timeout=TIMEOUT)
        made.append(store)
        return store

    yield new
    for store in made:
        store.close()


def fault_of(call) -> StoreUnavailable:
    with pytest.raises(StoreUnavailable) as raised:
        call()
    return raised.value


def heard(events: queue.Queue, wanted: tuple[str, str]) -> bool:
    """Whether ``wanted`` comes before ``EVENT_WAIT`` seconds pass (other events before it are passed over)."""
    deadline = time.monotonic() + EVENT_WAIT
    while (left := deadline - time.monotonic()) > 0:
        try:
            if events.get(timeout=left) == wanted:
                return True
        except queue.Empty:
            break
    return False


def admin(server) -> redis.Redis:
    return redis.Redis.from_url(server.url, decode_responses=True)


def test_the_shipped_config_keeps_a_class_and_its_votes_when_redis_is_killed(stores):
    with redis_process(config=CONFIG) as server:
        assert admin(server).config_get("appendonly") == {"appendonly": "yes"}
        store = stores(server.url)
        code, key = store.start("generation", 3)
        assert store.move(code, key, deck="generation", slide=4, controls={"temperature": 1.5})
        assert store.reveal(code, key, 2)
        voters = [store.new_student() for _ in range(3)]
        for index, voter in enumerate(voters):
            assert store.vote(code, 4, voter, index % 2)
        before = store.state(code)

        server.restart()  # SIGKILL: nothing is written on the way down

        assert store.state(code) == before
        assert store.votes(code, 4) == {0: 2, 1: 1}
        assert store.is_teacher(code, key)
        assert store.vote(code, 4, voters[1], 0), "the students' ids still count (their secret was kept too)"
        assert store.votes(code, 4) == {0: 3}
        assert store.move(code, key, deck="generation", slide=5, controls={})


def test_without_append_only_a_lost_class_is_heard_of_and_its_teacher_starts_it_again(stores):
    with redis_process(config=CONFIG, options=("--appendonly", "no")) as server:
        store = stores(server.url)
        events = queue.Queue()
        store.subscribe(lambda code, kind: events.put((code, kind)))
        code, key = store.start("generation", 3)
        assert store.vote(code, 3, store.new_student(), 1)

        server.restart()

        assert store.state(code) is None and store.votes(code, 3) == {}
        assert heard(events, ("", "reconnected")), "followers are told to look again"
        assert not store.restart(code, "short", deck="generation", slide=3), "a weak key leads nothing"
        assert store.restart(code, key, deck="generation", slide=3)
        assert heard(events, (code, "move")), "its waiting students rejoin"
        assert store.is_teacher(code, key) and store.state(code).slide == 3
        assert store.restart(code, key, deck="generation", slide=3), "a second tab of the teacher: already running"
        assert not store.restart(code, key[::-1], deck="generation", slide=1), "nobody else takes the code"
        assert store.state(code).slide == 3


def test_a_paused_redis_is_a_timeout_after_which_a_vote_may_have_counted(stores):
    with redis_process() as server:
        store = stores(server.url)
        code, _key = store.start("generation", 3)
        voter = store.new_student()
        server.pause()
        try:
            began = time.monotonic()
            error = fault_of(lambda: store.vote(code, 3, voter, 1))
            waited = time.monotonic() - began
            assert error.kind == "timeout" and "did not answer within 0.3 s" in str(error)
            assert waited < 10 * TIMEOUT, f"{waited:.1f} s: a timeout is not tried again (the default tries 3 times)"
            assert fault_of(lambda: store.state(code)).kind == "timeout"
        finally:
            server.resume()
        # Whatever had reached Redis before it stopped runs once it resumes, so a vote that timed out may have
        # counted (the student is told so: tests/test_app_class_faults.py); voting again replaces it.
        assert store.state(code).slide == 3
        assert store.vote(code, 3, voter, 1) and store.votes(code, 3) == {1: 1}


def test_a_full_redis_refuses_what_would_grow_it_and_keeps_the_class(stores):
    with redis_process() as server:
        store = stores(server.url)
        code, key = store.start("generation", 3)
        voter = store.new_student()
        assert store.vote(code, 3, voter, 0)
        before = store.state(code)
        control = admin(server)
        control.config_set("maxmemory-policy", "noeviction")
        control.config_set("maxmemory", "1")
        try:
            for change in (
                lambda: store.vote(code, 3, voter, 1),
                lambda: store.move(code, key, deck="generation", slide=4, controls={}),
                lambda: store.reveal(code, key, 3),
                lambda: store.start("anatomy"),
            ):
                error = fault_of(change)
                assert error.kind == "full" and "is full" in str(error)
            assert store.state(code) == before and store.answer_of(code, 3, voter) == 0, "nothing half-written"
            assert store.classes() == 1
            assert store.keep_alive(code, key), "a keep-alive grows nothing: the class is not lost for it"
            assert store.move(code, key, deck="generation", slide=3, controls={}), "nor does a move to where it is"
        finally:
            control.config_set("maxmemory", "0")
        assert store.vote(code, 3, voter, 1) and store.move(code, key, deck="generation", slide=4, controls={})


@pytest.mark.parametrize("password", [None, "not-the-password"])
def test_a_password_redis_refuses_is_said_and_never_shown(stores, password):
    with redis_process(options=("--requirepass", "the-password-redis-wants")) as server:
        url = server.url if password is None else server.url.replace("//", f"//:{password}@")
        error = fault_of(stores(url).ping)
        assert error.kind == "auth" and "password" in str(error)
        assert "not-the-password" not in str(error) and "the-password-redis-wants" not in str(error)
        good = stores(server.url.replace("//", "//:the-password-redis-wants@"))
        assert good.start("anatomy")


@pytest.fixture
def not_redis():
    """A TCP server that answers every request with an HTTP error, as a web server on Redis's port would."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    done = threading.Event()

    def answer() -> None:
        while not done.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(1)
                try:
                    connection.recv(1024)
                    connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    done.set()
    thread.join()
    listener.close()


def test_something_that_is_not_redis_is_said(stores, not_redis):
    error = fault_of(stores(not_redis).ping)
    assert error.kind == "not-redis" and "is not Redis" in str(error)


def test_nothing_listening_is_unreachable(stores):
    error = fault_of(stores(f"redis://127.0.0.1:{free_port()}/0").ping)
    assert error.kind == "unreachable" and "does not answer" in str(error)


def test_every_fault_has_a_sentence_of_its_own():
    said = sentences("redis.example:6379", 5.0)
    assert set(said) == set(FAULTS)
    assert len(set(said.values())) == len(FAULTS)
    for sentence in said.values():
        assert sentence.endswith(".") and "Error" not in sentence and "Traceback" not in sentence


def test_each_fault_is_logged_once_until_redis_answers_again(stores, caplog):
    with redis_process() as server:
        store = stores(server.url)
        code, _key = store.start("generation", 3)
        voter = store.new_student()
        control = admin(server)
        caplog.set_level(logging.WARNING, logger="explorer.classroom.redis_store")
        control.config_set("maxmemory", "1")
        for _ in range(5):  # a class voting against a full Redis
            fault_of(lambda: store.vote(code, 3, voter, 1))
        control.config_set("maxmemory", "0")
        assert store.vote(code, 3, voter, 1)
        assert store.vote(code, 3, voter, 0)
        control.config_set("maxmemory", "1")
        fault_of(lambda: store.vote(code, 3, voter, 1))
        control.config_set("maxmemory", "0")
        lines = [record.getMessage() for record in caplog.records]
        assert [line.split(": ")[1] for line in lines] == [
            "full (OutOfMemoryError",
            "answers again",
            "full (OutOfMemoryError",
        ]
        assert all(f"Redis at 127.0.0.1:{server.port}" in line for line in lines)


# The health check


@pytest.fixture
def fresh_class_store(monkeypatch):
    monkeypatch.setattr(state, "_store", None)
    monkeypatch.delenv("EXPLORER_REDIS_URL", raising=False)
    yield monkeypatch
    if isinstance(state._store, RedisStore):
        state._store.close()


def test_the_health_check_reports_the_class_store(fresh_class_store):
    assert state.health() == (
        True,
        "The class store (each server's own memory: EXPLORER_REDIS_URL is not set) answers.",
    )
    with redis_process() as server:
        fresh_class_store.setattr(state, "_store", None)
        fresh_class_store.setenv("EXPLORER_REDIS_URL", server.url)
        assert state.health() == (True, f"The class store (Redis at 127.0.0.1:{server.port}) answers.")
        class_store().close()  # its listener and connections: the server stops next
        server.kill()
        healthy, said = state.health()
        assert not healthy and "does not answer" in said


def test_explorer_health_says_whether_the_class_store_answers(fresh_class_store, capsys):
    from explorer.cli import main

    with redis_process() as server:
        fresh_class_store.setenv("EXPLORER_REDIS_URL", server.url)
        assert main(["health"]) == 0
        assert capsys.readouterr().out.splitlines() == [
            "settings: fine",
            f"class store: The class store (Redis at 127.0.0.1:{server.port}) answers.",
        ]
        class_store().close()
        fresh_class_store.setattr(state, "_store", None)
        server.kill()
        assert main(["health"]) == 1
        assert "does not answer" in capsys.readouterr().out
    fresh_class_store.setenv("EXPLORER_MAX_CLASSES", "abc")
    assert main(["health"]) == 1
    assert capsys.readouterr().out.startswith("settings: EXPLORER_MAX_CLASSES")
