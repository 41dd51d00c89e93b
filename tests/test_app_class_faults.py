"""What a live class's pages say and do when its store fails (issue 39 §4), run headless by AppTest: a class lost
(Redis restarted empty) is said to its teacher and students for as long as it lasts, and its teacher starts it
again under its code; a student who votes during an outage stays seated (no page of their own, no "Show the
answer"), and after a timeout is told the vote may have counted; a class link opened during an outage waits and
joins when the store is back; a full Redis refuses votes and moves in its own sentence.

The lost class runs on the in-process store (its classes dropped, as a Redis restarted empty drops them); the
outages on a real redis-server started with deploy/redis.conf, killed, paused and filled.
"""

from __future__ import annotations

import time

import pytest
import redis

from explorer.classroom import state
from explorer.classroom.memory import InProcessStore
from explorer.classroom.redis_store import RedisStore
from explorer.ui import classroom
from tests.redis_server import redis_process
from tests.test_app_class import QUESTION, keys, student, teacher_start, title
from tests.test_app_lecture import markdown, param
from tests.test_class_faults import CONFIG


def said(at) -> list[str]:
    """Every notice, warning and error on the page, as read (Markdown's escapes dropped)."""
    return [box.value.replace("\\", "") for kind in ("info", "warning", "error") for box in at.get(kind)]


@pytest.fixture
def memory(monkeypatch):
    fresh = InProcessStore(max_classes=3)
    monkeypatch.setattr(state, "_store", fresh)
    return fresh


@pytest.fixture
def served(monkeypatch):
    """A redis-server with the shipped configuration, and the app's class store on it (short timeouts)."""
    with redis_process(config=CONFIG) as server:
        store = RedisStore(server.url, timeout=0.3, connect_timeout=0.3)
        monkeypatch.setattr(state, "_store", store)
        try:
            yield server, store
        finally:
            store.close()


def test_a_lost_class_is_said_until_its_teacher_starts_it_again_under_its_code(memory):
    at, code, key = teacher_start(slide=2)
    follower = student(code)
    assert "Following the teacher" in markdown(follower)
    memory._classes.clear()  # Redis restarted empty

    for _ in range(2):  # said on every run, not once
        at.run()
        follower.run()
        assert not at.exception and not follower.exception
        assert classroom.LOST_TEACHER.format(code=code) in said(at)
        assert classroom.LOST_STUDENT.format(code=code) in said(follower)
        assert param(at, "key") == key and param(follower, "class") == code, "both keep the class's link"
        assert classroom.NO_SUCH_CLASS not in said(follower)
        assert not {"vote-0", "class_detach", "previous", "next"} & keys(follower), "a waiting page, nothing else"
    newcomer = student(code)
    assert said(newcomer) == [classroom.NO_SUCH_CLASS], "a page that never sat in it learns nothing more"

    at.button(key="class_restart").click().run()
    assert memory.is_teacher(code, key) and memory.state(code).slide == 2
    assert classroom.LOST_TEACHER.format(code=code) not in said(at) and "class_end" in keys(at)
    follower.run()
    assert "Following the teacher" in markdown(follower) and title(follower) == title(at)


def test_a_class_its_teacher_ended_is_not_lost(memory):
    at, code, _key = teacher_start()
    follower = student(code)
    at.button(key="class_end").click().run()
    follower.run()
    assert said(follower) == [classroom.NO_SUCH_CLASS] and param(follower, "class") is None
    at.run()
    assert "class_restart" not in keys(at) and classroom.NO_SUCH_CLASS not in said(at)


def test_a_student_who_votes_while_redis_is_down_stays_seated_and_rejoins(served):
    server, store = served
    at, code, _key = teacher_start(slide=QUESTION)
    follower = student(code, store.new_student())
    assert {"vote-0", "vote-1"} <= keys(follower)

    server.kill()
    follower.button(key="vote-0").click().run()
    assert not follower.exception
    notices = said(follower)
    assert any(n.startswith(classroom.VOTE_NOT_COUNTED) and "does not answer" in n for n in notices), notices
    assert "Following the teacher" in markdown(follower), "still seated"
    assert "Show the answer" not in keys(follower) and not {"previous", "next"} & keys(follower)
    assert sum("does not answer" in text for text in notices) == 1, "the fault said once"

    server.start()  # with the shipped configuration: the class comes back with Redis
    follower.run()
    assert "Following the teacher" in markdown(follower) and title(follower) == title(at.run())
    follower.button(key="vote-1").click().run()
    assert store.votes(code, QUESTION) == {1: 1}


def test_after_a_timeout_a_vote_may_have_counted(served):
    server, store = served
    _at, code, _key = teacher_start(slide=QUESTION)
    follower = student(code, store.new_student())
    server.pause()
    try:
        follower.button(key="vote-0").click().run()
    finally:
        server.resume()
    notices = said(follower)
    assert any(n.startswith(classroom.VOTE_MAY_HAVE_COUNTED) for n in notices), notices
    assert not any(n.startswith(classroom.VOTE_NOT_COUNTED) for n in notices)
    assert "Following the teacher" in markdown(follower)


def test_a_class_link_opened_while_redis_is_down_waits_and_joins(served):
    server, _store = served
    at, code, _key = teacher_start(slide=3)
    server.kill()
    visitor = student(code)
    assert not visitor.exception
    assert classroom.OUTAGE_WAIT.format(code=code) in said(visitor)
    assert any("does not answer" in text for text in said(visitor))
    assert param(visitor, "class") == code and not {"previous", "next"} & keys(visitor), "not a lecture of its own"
    server.start()
    for _ in range(40):  # as the waiting page reruns itself, until the store's client has reconnected
        visitor.run()
        if "Following the teacher" in markdown(visitor):
            break
        time.sleep(0.25)
    assert "Following the teacher" in markdown(visitor) and title(visitor) == title(at)


def test_a_full_redis_refuses_votes_and_moves_in_its_sentence(served):
    server, store = served
    at, code, _key = teacher_start(slide=QUESTION)
    follower = student(code, store.new_student())
    control = redis.Redis.from_url(server.url)
    control.config_set("maxmemory", "1")
    try:
        follower.button(key="vote-0").click().run()
        at.button(key="next").click().run()
    finally:
        control.config_set("maxmemory", "0")
        control.close()
    assert any(n.startswith(classroom.VOTE_NOT_COUNTED) and "is full" in n for n in said(follower))
    assert any("is full" in text for text in said(at)), said(at)
    assert not follower.exception and not at.exception
    assert store.state(code).slide == QUESTION and store.votes(code, QUESTION) == {}


def test_this_servers_pages_hear_a_class_end_and_look_again_when_redis_is_back(monkeypatch):
    from explorer.ui import push

    asked = []
    monkeypatch.setattr(push, "notify", lambda code: asked.append(code) or 1)
    monkeypatch.setattr(push, "notify_all", lambda: asked.append("every class") or 1)
    monkeypatch.setattr(classroom, "_ended", {})
    classroom._on_event("ABCDEF", "end")
    classroom._on_event("", "reconnected")
    assert asked == ["ABCDEF", "every class"]
    assert list(classroom._ended) == ["ABCDEF"], "an ended class is not a lost one"
