"""A live class over two app servers sharing one Redis (issue 29, "past one server"), in Chromium: the teacher on
one server, students on both; every student follows every move, a poll counts the votes cast on both servers,
and the teacher's key means nothing to the other server's student tab with a character cut.

Two ``streamlit run`` servers on two ports with ``EXPLORER_REDIS_URL`` set to one real ``redis-server``: what a
load balancer without sticky sessions puts in front of a lecture hall.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.browser import chromium, needs_chromium, open_tab, served_app, wait_until_idle
from tests.redis_server import redis_server
from tests.test_browser_class import settle, start_class

pytestmark = needs_chromium
TITLE = ".st-key-lecture-title h2"


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    logs = tmp_path_factory.mktemp("class-redis")
    with redis_server() as url:
        env = {"EXPLORER_REDIS_URL": url}
        with (
            served_app(Path(logs / "a.log"), extra_env=env) as first,
            served_app(Path(logs / "b.log"), extra_env=env) as second,
        ):
            yield first, second


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
        teacher, code, key, _ = start_class(browser, [], first, 2)  # the page settled before each click
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
            teacher.page.keyboard.press("ArrowRight")
            teacher.page.wait_for_function(
                "(old) => document.querySelector('.st-key-lecture-title h2')?.textContent !== old",
                arg=title(teacher.page),
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
