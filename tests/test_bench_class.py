"""The class benchmark's own client, on a real server: a small class runs with no errors and no leaks, and a
student who interrupts a result others wait on (Streamlit stops that run) leaves nobody without it."""

from __future__ import annotations

import asyncio
from urllib.parse import urlencode

import pytest

from bench import bench_class
from tests.browser import needs_chromium

pytestmark = needs_chromium[:1]  # a server, no browser: marked with the slow tests


@pytest.fixture(scope="module")
def server():
    instance = bench_class.Server()
    yield instance
    instance.stop()


def test_students_get_their_own_results_and_nothing_else(server):
    plan = [bench_class.PAGES["attention_heatmaps"]] * 3
    students = asyncio.run(bench_class.class_run(server.port, plan, "t", moves=2))
    assert [s.errors for s in students] == [[], [], []]
    assert all(s.open_to_result is not None and len(s.moves) == 2 for s in students)
    assert sum(len(s.leaks) for s in students) == 0
    assert 0 < server.peak <= server.peak_rss  # shared pages counted once, not once per process


def test_an_interrupted_shared_run_leaves_nobody_without_a_result(server):
    plan = [bench_class.PAGES["beam_search"]] * 4
    students = asyncio.run(bench_class.class_run(server.port, plan, "i", moves=1, interrupt=True))
    assert students[0].interrupted, "the move came after the shared run had finished: nothing was interrupted"
    assert [s.open_to_result is not None for s in students] == [True] * 4
    assert [s.errors for s in students] == [[], [], [], []]


def test_lecture_students_each_open_a_slide_of_their_own():
    """Spread over both decks' slides; a question slide's own result is its question (its view stays hidden)."""
    from explorer.lecture import DECKS

    slides = sum(len(deck) for deck in DECKS.values())
    plan = bench_class.spread([bench_class.PAGES["lecture"], bench_class.PAGES["sampling"]] * slides)
    lecture = [spec for spec in plan if spec.path == "lecture"]
    links = [dict(spec.extra) for spec in lecture]
    assert len({(link["deck"], link["slide"]) for link in links}) == slides
    shown = [DECKS[link["deck"]].slide(int(link["slide"])) for link in links]
    assert [spec.heading for spec in lecture] == [slide.title for slide in shown]
    assert [spec.asks for spec in lecture] == [slide.question is not None for slide in shown]
    assert not any(spec.asks or spec.heading for spec in plan if spec.path != "lecture")  # the others as they were


def test_a_link_that_reveals_every_question_of_the_deck():
    from explorer.lecture import ANATOMY, tour

    link = dict(bench_class.on_slide(bench_class.PAGES["lecture"], 0, reveal=True).extra)
    assert tour.read_answers(link["answers"], ANATOMY) == (dict.fromkeys(tour.questions(ANATOMY), tour.REVEALED), [])


def test_lecture_students_get_their_own_slides(server):
    from explorer.lecture import ANATOMY

    plan = [bench_class.PAGES["lecture"]] * 3
    students = asyncio.run(bench_class.class_run(server.port, plan, "l", moves=1))
    assert [s.errors for s in students] == [[], [], []]
    assert all(s.open_to_result is not None for s in students)
    assert [s.spec.heading for s in students] == [ANATOMY.slide(n).title for n in (1, 2, 3)]
    assert sum(len(s.leaks) for s in students) == 0  # no student was shown another slide than their own


def test_the_follow_options_reach_the_class():
    args = bench_class.arguments(["--follow", "--students", "3", "--slides", "2", "--every", "1", "--redis"])
    assert (args.follow, args.students, args.slides, args.every, args.redis) == (True, [3], 2, 1.0, True)
    assert bench_class.arguments([]).follow is False


def test_the_teacher_walks_to_the_decks_end_and_back():
    from explorer.lecture import GENERATION

    last = len(GENERATION)
    assert bench_class.route(GENERATION, 1, 3) == [2, 3, 4]
    assert bench_class.route(GENERATION, last - 1, 3) == [last, last - 1, last - 2]


def followed_every_move(run, students: int, moves: int) -> None:
    assert [errors for errors in run.errors.values()] == [[]] * len(run.errors)
    assert run.moves == moves
    assert sorted((f.move, f.server) for f in run.followed) == sorted(
        (move, n % len(run.errors)) for move in range(moves) for n in range(students)
    )
    assert all(f.from_teacher is not None and f.from_press >= f.from_teacher for f in run.followed)


def test_students_follow_the_teachers_moves(server):
    """--follow's class on one server: each student's page shows every slide the teacher moves to, unasked."""
    run = asyncio.run(bench_class.follow_class([server], 3, moves=2, every=1.0, idle=1.0))
    followed_every_move(run, students=3, moves=2)
    assert set(run.idle_cpu) == {"A"} and run.memory["A"][0] > 0
    rows = bench_class.follow_rows(run, 1)
    assert len(rows) == 1 and rows[0].startswith("| A | 3 | 2/2 |")


def test_a_teachers_move_reruns_each_followers_slide_alone(server):
    """A follower's pushed run is its slide's fragment alone (the app around it, shell, menu and sidebar, was half
    of each follower's run); "Explore on my own", clicked in that fragment, brings the whole page back (arrows),
    "Back to the teacher" follows again, and the next move is the fragment's alone again."""
    from explorer.lecture import GENERATION

    def title(number: int) -> str:
        return GENERATION.slide(number).title

    async def scene() -> tuple[list, list, list, bench_class.Drawn, bench_class.Drawn]:
        teacher = bench_class.Teacher(server.port, GENERATION)
        await teacher.open(title(1))
        code = await teacher.start_class()
        follower = bench_class.ClassClient(server.port, urlencode({"class": code}))
        await follower.open(title(1))
        opened = len(follower.runs)
        for number in (2, 3):
            await teacher.press(number)
            await follower.until(lambda drawn, n=number: drawn.shows(title(n)), f"slide {number}")
        moved, at = follower.runs[opened:], len(follower.runs)
        await follower.send("class_detach")
        exploring = await follower.until(lambda drawn: "class_rejoin" in drawn.keys, "exploring")
        await follower.send("class_rejoin")
        await follower.until(lambda drawn: "class_detach" in drawn.keys, "following again")
        detached, at = follower.runs[at:], len(follower.runs)
        await teacher.press(4)
        again = await follower.until(lambda drawn: drawn.shows(title(4)), "slide 4")
        await asyncio.gather(follower.close(), teacher.close())
        return follower.runs[:opened], moved, [detached, follower.runs[at:]], exploring, again

    opening, moved, (detached, after), exploring, again = asyncio.run(scene())
    assert () in opening, "a follower opens on a full run"
    assert moved and all(len(run) == 1 for run in moved), f"a move reran more than the slide: {moved}"
    (slide,) = set(moved)
    assert detached[-1] == () and {"previous", "next"} <= exploring.keys, "exploring is the whole page again"
    assert after and set(after) == {slide}, f"following again, a move reruns the slide alone: {after}"
    assert "class_detach" in again.keys and not any("menu-section" in text for text in again.texts)  # no menu
