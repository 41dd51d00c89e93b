"""A live class over two app servers sharing one Redis (issue 29, "past one server"), in Chromium: the teacher on
one server, students on both; every student follows every move, a poll counts the votes cast on both servers,
and the teacher's key means nothing to the other server's student tab with a character cut.

Two ``streamlit run`` servers on two ports with ``EXPLORER_REDIS_URL`` set to one real ``redis-server``: what a
load balancer without sticky sessions puts in front of a lecture hall. They are the class benchmark's servers (hosted
mode, the Dockerfile's environment), so its ``--follow --redis`` client runs here too, on the same two servers.
The servers have a teacher passphrase (issue 39): a flood of "Start a live class" on one server, over
Streamlit's protocol, adds to Redis no class without it and a few with it, and a teacher on the other server still
starts one.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from bench import bench_class
from bench.bench_class import TEACHER_PASSPHRASE
from tests.browser import chromium, needs_chromium, open_tab, wait_until_idle
from tests.redis_server import redis_server
from tests.test_browser_class import settle, start_class
from tests.test_class_poll import (
    assert_flood_refused,
    assert_following,
    assert_one_forged_voter,
    forgery,
    start_flood,
    teach_after_flood,
)

pytestmark = needs_chromium
TITLE = ".st-key-lecture-title h2"


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


@pytest.fixture(scope="module")
def bench_servers(redis_url):
    """Two app servers sharing ``redis_url``, with bench_class's teacher passphrase (which its clients type)."""
    started = [bench_class.Server(env={"EXPLORER_REDIS_URL": redis_url}) for _ in range(2)]
    yield started
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def servers(bench_servers):
    return tuple(f"http://127.0.0.1:{server.port}" for server in bench_servers)


def title(page) -> str | None:
    heading = page.locator(TITLE).first
    return heading.text_content() if heading.count() else None


def wait_for_title(page, wanted: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while title(page) != wanted and time.monotonic() < deadline:
        time.sleep(0.05)
    assert title(page) == wanted


def opened(browser, url: str):
    tab = open_tab(browser, width=1280, height=720)
    tab.page.goto(url)
    tab.page.locator(TITLE).wait_for(timeout=120_000)
    wait_until_idle(tab.page)
    return tab


def test_a_class_follows_its_teacher_across_two_servers(servers):
    first, second = servers
    with chromium() as browser:
        teacher, code, key, _ = start_class(
            browser, [], first, 2, passphrase=TEACHER_PASSPHRASE
        )  # the page settled before each click
        teacher.page.locator(TITLE).click()  # closes the class's popover
        students = [opened(browser, f"{server}/lecture?class={code}") for server in (first, second, second)]
        crafted = opened(browser, f"{second}/lecture?class={code}&key={key[:-1]}")
        for tab in (*students, crafted):
            wait_for_title(tab.page, title(teacher.page))
        assert crafted.page.locator(".st-key-lecture-place").count() == 0, "a cut key leads nothing"
        for press in ("End", "Home", "ArrowRight"):  # the crafted tab's keys move nobody
            crafted.page.keyboard.press(press)
        time.sleep(1)
        assert title(teacher.page) == title(students[0].page) == title(crafted.page)

        for _ in range(2):
            before = title(teacher.page)  # read before the key: the page may move before the wait starts
            teacher.page.keyboard.press("ArrowRight")
            teacher.page.wait_for_function(
                "(old) => document.querySelector('.st-key-lecture-title h2')?.textContent !== old",
                arg=before,
                timeout=60_000,
            )
            wait_until_idle(teacher.page)
            for tab in (*students, crafted):
                wait_for_title(tab.page, title(teacher.page))

        # The first slide asks a question: votes from both servers reach the teacher's count.
        teacher.page.keyboard.press("Home")
        for tab in students:
            wait_for_title(tab.page, "One token at a time")
        for index, tab in enumerate(students):
            settle(tab.page)
            tab.page.locator(f".st-key-vote-{index % 2} button").click()
            wait_until_idle(tab.page)
        teacher.page.get_by_text("3 answered").wait_for(timeout=30_000)
        for tab in (teacher, *students, crafted):
            assert not tab.external, tab.external
            assert not tab.errors, tab.errors


def test_one_session_presenting_forged_ids_adds_one_voter_across_both_servers(servers):
    """Over Streamlit's protocol (tests/test_class_poll.py's forger), on this module's two servers: an id issued by
    one server counts on the other (the secret that signs ids is Redis's), and one session presenting a made-up id
    before each of its votes adds one voter."""
    from explorer.lecture import GENERATION

    ports = [int(url.rsplit(":", 1)[1]) for url in servers]
    assert_one_forged_voter(asyncio.run(forgery(ports, GENERATION.slide(1).title)))


def test_a_start_flood_on_one_server_leaves_the_other_a_class_to_start(servers, redis_url):
    """tests/test_class_poll.py's start flood on server A, the classes counted in Redis: none without the
    passphrase, ``PER_SESSION`` with it; a teacher on server B then starts a class, and a student on A joins it."""
    import redis

    from explorer.classroom import teachers
    from explorer.classroom.redis_store import PREFIX
    from explorer.lecture import GENERATION

    store = redis.Redis.from_url(redis_url, decode_responses=True)

    def classes() -> set[str]:  # the class hashes' codes: explorer:class:{CODE} (its polls' keys run on)
        return {key[len(PREFIX) + 1 : -1] for key in store.scan_iter(match=PREFIX + "{*}")}

    first, second = (int(url.rsplit(":", 1)[1]) for url in servers)
    title = GENERATION.slide(1).title
    seen = asyncio.run(start_flood(first, title, classes))
    assert_flood_refused(seen)
    before, after_guesses, after_flood = seen["store"]
    assert after_guesses == before
    assert after_flood - before == set(seen["holder started"])
    assert len(after_flood) == len(before) + teachers.PER_SESSION
    code, drawn, errors = asyncio.run(teach_after_flood(second, first, title))
    assert errors == []
    assert classes() - after_flood == {code}
    store.close()
    assert_following(code, drawn)


def test_the_benchmarks_students_on_a_second_server_follow_through_redis(bench_servers):
    """bench_class --follow --redis: the teacher on server A; the students on A and B, which hears the moves
    through Redis."""
    from tests.test_bench_class import followed_every_move

    run = asyncio.run(bench_class.follow_class(bench_servers, 3, moves=2, every=1.0, idle=1.0))
    followed_every_move(run, students=3, moves=2)
    assert {f.server for f in run.followed} == {0, 1}
    assert set(run.memory) == {"A", "B"}
    assert [row.split(" | ")[0:3] for row in bench_class.follow_rows(run, 2)] == [
        ["| A", "2", "2/2"],
        ["| B", "1", "2/2"],
        ["| both", "3", "2/2"],
    ]
