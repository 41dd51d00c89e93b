"""The lecture benchmark's presenter on a real server (each move lands on its slide, by the keys' component and
by the slide's own buttons; a question is answered and its view drawn), and the switch its comparison turns
off: computing the next slides ahead."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from bench import bench_class, bench_lecture
from explorer.lecture import GENERATION, ahead
from tests.browser import needs_chromium


@dataclass(frozen=True)
class Counted:
    """A view whose result only counts how often it was computed."""

    name: str
    computed: list = field(default_factory=list, compare=False, hash=False)

    def result(self):
        self.computed.append(self.name)


def test_computing_ahead_queues_the_slides_around(monkeypatch):
    monkeypatch.delenv("EXPLORER_LECTURE_AHEAD", raising=False)
    view = Counted("on")
    assert ahead.compute_ahead([view]) == 1
    assert ahead.idle()
    assert view.computed == ["on"]


def test_the_benchmarks_switch_turns_computing_ahead_off(monkeypatch):
    monkeypatch.setenv("EXPLORER_LECTURE_AHEAD", "0")
    view = Counted("off")
    assert ahead.compute_ahead([view]) == 0
    assert ahead.idle()
    assert view.computed == []


@pytest.fixture(scope="module")
def server():
    instance = bench_class.Server()
    yield instance
    instance.stop()


@needs_chromium[0]  # a server, no browser: marked with the slow tests
def test_the_presenter_moves_by_keys_and_buttons_and_each_move_lands_on_its_slide(server):
    presenter = bench_lecture.Presenter(server.port, GENERATION)
    moves = asyncio.run(presenter.walk("t", 0.0, ("keys", "button"), route=[2, 3, 2, 1]))
    assert presenter.errors == []
    assert presenter.open_to_result is not None
    assert [(m.start, m.to, m.press) for m in moves] == [
        (1, 1, "reveal"),  # the first slide asks a question: the presenter answers it, and its view is drawn
        (1, 2, "keys"),
        (2, 3, "button"),
        (3, 2, "keys"),
        (2, 1, "button"),
    ]
    assert [m.title for m in moves] == [GENERATION.slide(n).title for n in (1, 2, 3, 2, 1)]
    assert presenter.answered == {1}
    assert "slide=1" in presenter.address  # the address the server wrote last: the presenter is back on slide 1
