"""A live class on the Lecture page (issue 29), run headless by AppTest: a teacher starts a class and moves; a
student on the class's link is put on the teacher's slide with the teacher's control values and cannot move
anything; "Explore on my own" detaches and "Back to the teacher" follows again; crafted links never lead the
class, and a code that leads nowhere gets one answer; a poll counts each student once and shows nothing before
the teacher reveals it. Each test has a store of its own (the class limit must not carry over)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from streamlit.proto.ClientState_pb2 import ClientState

from explorer import hosting, settings
from explorer.classroom import codes, state, teachers
from explorer.classroom.memory import InProcessStore
from explorer.lecture import DECKS, controls
from explorer.render.poll import class_shares, poll_html
from explorer.ui import classroom, push
from tests.test_app_lecture import all_revealed, markdown, open_lecture, param, shown_specs

GENERATION = DECKS["generation"]
QUESTION = next(n for n, slide in enumerate(GENERATION.slides, 1) if slide.question and slide.question.shares)
DISTRIBUTION = next(  # a slide with a temperature to move and no question hiding its view
    n
    for n, slide in enumerate(GENERATION.slides, 1)
    if "temperature" in [c.field for c in controls.controls_of(slide.view)] and not slide.question
)


@pytest.fixture(autouse=True)
def store(monkeypatch):
    fresh = InProcessStore(max_classes=3)
    monkeypatch.setattr(state, "_store", fresh)
    return fresh


def teacher_start(deck: str = "generation", slide: int = 1):
    at = open_lecture(deck=deck, slide=slide)
    at.button(key="class_start").click().run()
    return at, param(at, "class"), param(at, "key")


def student(code: str, student_id: str | None = None, **params):
    at = open_lecture(**{"class": code, **params}) if student_id is None else _with_id(code, student_id, params)
    return at


def _with_id(code: str, student_id: str, params: dict):
    from streamlit.testing.v1 import AppTest

    from tests.test_app_lecture import TIMEOUT

    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.query_params.update({"class": code, **params})
    at.session_state["_class_student"] = student_id
    at.run()
    at.switch_page("pages/lecture.py")
    return at.run()


def title(at) -> str:
    return next(element.value for element in at.markdown if element.value.startswith("## "))


def keys(at) -> set[str]:
    return {button.key for button in at.button}


def test_the_teacher_starts_a_class_and_keeps_its_key(store):
    at, code, key = teacher_start(slide=2)
    assert not at.exception
    assert codes.normalize_code(code) == code and len(code) == codes.CODE_LENGTH
    assert len(key) >= 22  # 128 bits in URL-safe base64
    assert store.state(code).slide == 2 and store.is_teacher(code, key)
    assert "class_end" in keys(at) and {"previous", "next"} <= keys(at)
    assert [image for image in at.get("image") if ".png" in str(image.proto)], "the QR code for the projector"


def test_students_follow_the_teachers_slide_and_controls(store):
    at, code, _key = teacher_start()
    at.button(key="next").click().run()
    at.button(key="next").click().run()
    assert store.state(code).slide == 3
    follower = student(code)
    assert not follower.exception
    assert title(follower) == title(at)
    assert not {"previous", "next", "leave"} & keys(follower), "a follower moves nothing"
    assert "Following the teacher" in markdown(follower)

    # The teacher moves to a slide with a temperature and moves it: the follower's view is the teacher's.
    while store.state(code).slide != DISTRIBUTION:
        at.button(key="next").click().run()
    at.slider(key=f"s{DISTRIBUTION}_temperature").set_value(1.5).run()
    assert dict(store.state(code).controls) == {"temperature": 1.5}
    follower.run()
    assert title(follower) == title(at)
    assert shown_specs(at) and shown_specs(follower) == shown_specs(at)


def test_a_student_explores_on_their_own_and_comes_back(store):
    at, code, _key = teacher_start()
    follower = student(code)
    follower.button(key="class_detach").click().run()
    assert {"previous", "next"} <= keys(follower)
    follower.button(key="next").click().run()
    follower.button(key="next").click().run()
    at.button(key="next").click().run()
    follower.run()
    assert param(follower, "slide") == "3" and store.state(code).slide == 2, "the explorer stays where they are"
    follower.button(key="class_rejoin").click().run()
    assert title(follower) == title(at) and "Following the teacher" in markdown(follower)


@pytest.mark.parametrize(
    "crafted",
    ["wrong", "", "other", "minus one", "plus one", "upper"],
)
def test_a_crafted_link_never_leads_the_class(store, crafted):
    _at, code, key = teacher_start()
    _, other_code, other_key = teacher_start(deck="anatomy")
    craft = {
        "wrong": codes.new_key(),
        "": "",
        "other": other_key,
        "minus one": key[:-1],
        "plus one": key + "A",
        "upper": key.upper() if key.upper() != key else key.lower(),
    }[crafted]
    before = store.state(code)
    visitor = student(code, key=craft)
    assert not visitor.exception
    assert param(visitor, "key") is None, "a key that leads nothing leaves the link"
    assert not {"previous", "next", "class_end", "class_reveal"} & keys(visitor)
    for button in visitor.button:  # whatever a student can press, the class stays where the teacher left it
        button.click().run()
    assert store.state(code) == before
    assert store.state(other_code).slide == 1


@pytest.mark.parametrize("code", ["ZZZZZZ", "abc", "<b>x</b>", "ended"])
def test_a_code_that_leads_nowhere_gets_one_answer(store, code):
    if code == "ended":
        at, code, _key = teacher_start()
        at.button(key="class_end").click().run()
        assert param(at, "class") is None and store.state(code) is None
    visitor = student(code)
    assert not visitor.exception
    assert [info.value for info in visitor.info] == [classroom.NO_SUCH_CLASS]
    assert param(visitor, "class") is None
    assert {"previous", "next"} <= keys(visitor), "the lecture goes on without the class"


def test_the_class_after_the_limit_is_told_to_wait(store):
    for _ in range(3):
        teacher_start()
    at = open_lecture(deck="generation")
    at.button(key="class_start").click().run()
    assert param(at, "class") is None and store.classes() == 3
    assert any("wait for one to end" in info.value.lower() for info in at.info)


def test_a_poll_counts_each_student_once_and_shows_nothing_before_the_reveal(store):
    at, code, _key = teacher_start(slide=QUESTION)
    ids = [store.new_student() for _ in range(5)]  # as the server issued them to five browsers
    students = [student(code, student_id) for student_id in ids]
    for at_student in students:
        assert not at_student.exception
        assert "The answer" not in markdown(at_student)
        assert not shown_specs(at_student), "the view waits for the reveal"
    for index, at_student in enumerate(students):
        at_student.button(key=f"vote-{index % 2}").click().run()
    students[0].button(key="vote-1").click().run()  # changes its answer: replaced, not added
    again = student(code, ids[1])  # a reload of the same browser
    again.button(key="vote-1").click().run()
    assert store.votes(code, QUESTION) == {0: 2, 1: 3}
    at.run()
    assert "**5** answered" in markdown(at)
    assert not shown_specs(at), "the projector keeps the view for the reveal too"

    at.button(key="class_reveal").click().run()
    for at_student in students:
        at_student.run()
        assert shown_specs(at_student), "the view, once revealed"
        assert "The answer" in markdown(at_student) or "is right" in markdown(at_student)
    poll = [element for element in students[0].get("html") if "explorer-poll" in element.proto.body]
    assert poll and "5 answers" in poll[0].proto.body
    assert not store.vote(code, QUESTION, ids[0], 0), "the poll closed with the reveal"


# -- the parts, on their own ------------------------------------------------------------------------------------


def test_a_teachers_controls_are_checked_before_a_follower_uses_them():
    slide = GENERATION.slide(DISTRIBUTION)
    result = slide.view.result()
    crafted = {"temperature": 1e9, "top_p": float("nan"), "top_k": True, "nonsense": 3, "min_p": -5}
    view = controls.apply(slide.view, crafted, result)
    assert view.temperature == 3.0 and view.min_p == 0.0
    assert view.top_p == slide.view.top_p and view.top_k == slide.view.top_k
    assert controls.moved(view, slide.view) == {"temperature": 3.0}  # min_p clamped to its default
    anatomy = DECKS["anatomy"]
    head_slide = next(s for s in anatomy.slides if "head" in [c.field for c in controls.controls_of(s.view)])
    shown = controls.apply(head_slide.view, {"head": 10_000, "layer": -3}, head_slide.view.result())
    assert shown.head == head_slide.view.result().stacks[head_slide.view.stack].num_heads - 1


def test_the_poll_shows_every_label_literally_and_counts_shares():
    html = poll_html(["<script>alert(1)</script>", "b"], {0: 1, 1: 3, 7: 50}, [0.2, 0.8], "b")
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "4 answers" in html
    assert class_shares({0: 1, 1: 3, 7: 50}, 2) == [0.25, 0.75]
    assert class_shares({}, 3) == [0.0, 0.0, 0.0]
    assert math.isclose(sum(class_shares({0: 2, 2: 5}, 3)), 1.0)


def test_a_pushed_rerun_never_clicks_again():
    sent = ClientState(query_string="class=ABCDEF", page_script_hash="page", fragment_id="fragment")
    sent.is_auto_rerun = True
    for name, value in [("click", "trigger_value"), ("chat", "json_trigger_value"), ("slider", "int_value")]:
        widget = sent.widget_states.widgets.add(id=name)
        if value == "int_value":
            widget.int_value = 3
        else:
            setattr(widget, value, True if value == "trigger_value" else json.dumps({"x": 1}))
    fresh = push.fresh_state(sent)
    assert [widget.id for widget in fresh.widget_states.widgets] == ["slider"]
    assert fresh.fragment_id == "" and not fresh.is_auto_rerun
    assert fresh.query_string == "class=ABCDEF" and fresh.page_script_hash == "page"
    assert len(sent.widget_states.widgets) == 3, "the browser's own state is left as it was"
    alone = push.fresh_state(sent, page="followed", fragment="slide")
    assert alone.fragment_id == "slide" and alone.page_script_hash == "page", "the slide alone, on the browser's page"
    by_name = ClientState(query_string="class=ABCDEF", page_name="lecture")
    assert push.fresh_state(by_name, page="followed").page_script_hash == "followed", "not the app's first page"


def test_a_store_out_of_reach_says_so_and_the_lecture_goes_on(monkeypatch):
    from explorer.classroom.redis_store import RedisStore
    from tests.browser import free_port

    at, code, _key = teacher_start(slide=QUESTION)
    follower = student(code, "f" * 32)
    monkeypatch.setattr(state, "_store", RedisStore(f"redis://127.0.0.1:{free_port()}/0"))  # Redis went down
    for page in (at, follower):
        page.run()
        assert not page.exception
        assert any("does not answer" in error.value for error in page.error), [e.value for e in page.error]
        assert title(page), "the lecture goes on"
    fresh = student(code)
    assert not fresh.exception and fresh.error


def test_a_slides_figure_is_built_once_for_the_whole_class(monkeypatch):
    """Forty students rerun on the teacher's move: the slide's figure is built once per look, not per student."""
    from explorer.ui import figures

    built = []
    original = figures._drawn
    monkeypatch.setattr(figures, "_drawn", lambda build, look: built.append(look) or original(build, look))
    monkeypatch.setattr(figures, "_shared", type(figures._shared)())
    at, code, _key = teacher_start(slide=DISTRIBUTION)
    followers = [student(code) for _ in range(3)]
    for follower in followers:
        follower.run()
        assert shown_specs(follower) == shown_specs(at)
    slide_builds = [look for look in built if look.presentation]  # the home page each opening runs first draws too
    assert len(slide_builds) == 1, f"built {len(slide_builds)} times: {slide_builds}"


# -- who starts a class (issue 39 §2) ----------------------------------------------------------------------------

PASSPHRASE = "correct horse battery staple"


@pytest.fixture
def limits(monkeypatch):
    """Start limits of this test's own, so that no other test's starts count."""
    monkeypatch.setattr(teachers, "STARTS", teachers.StartLimits())
    monkeypatch.setattr(teachers, "GUESSES", teachers.StartLimits(teachers.PER_SESSION_GUESSES, 0))
    monkeypatch.delenv(settings.PASSPHRASE, raising=False)
    return monkeypatch


def hosted(monkeypatch) -> None:
    monkeypatch.setattr(hosting, "POLICY", dataclasses.replace(hosting.POLICY, hosted=True))


def notices(at) -> list[str]:
    """The notices' text as read (Markdown's escapes dropped)."""
    return [info.value.replace("\\", "") for info in at.info]


def test_a_hosted_server_without_a_passphrase_starts_no_class_and_says_what_to_set(store, limits):
    hosted(limits)
    at = open_lecture(deck="generation")
    start = at.button(key="class_start")
    assert start.disabled and classroom.CLASSES_OFF in notices(at)
    assert settings.PASSPHRASE in classroom.CLASSES_OFF
    assert param(at, "class") is None and store.classes() == 0


@pytest.mark.parametrize("where", ["local", "hosted"])
def test_with_a_passphrase_only_its_holders_start_classes_and_are_asked_once(store, limits, where):
    limits.setenv(settings.PASSPHRASE, PASSPHRASE)
    if where == "hosted":
        hosted(limits)
    at = open_lecture(deck="generation")
    for wrong in ["", "correct horse", PASSPHRASE + "!"]:
        at.text_input(key=classroom.PASSPHRASE_KEY).input(wrong)
        at.button(key="class_start").click().run()
        assert param(at, "class") is None and store.classes() == 0
        assert classroom.WRONG_PASSPHRASE in notices(at)
    at.text_input(key=classroom.PASSPHRASE_KEY).input(f" {PASSPHRASE} ")  # spaces around it are forgiven
    at.button(key="class_start").click().run()
    code, key = param(at, "class"), param(at, "key")
    assert store.is_teacher(code, key)
    at.button(key="class_end").click().run()
    assert param(at, "class") is None
    assert classroom.PASSPHRASE_KEY not in [box.key for box in at.text_input], "asked once: a teacher now"
    at.button(key="class_start").click().run()
    assert store.is_teacher(param(at, "class"), param(at, "key"))
    limits.setenv(settings.PASSPHRASE, "a new passphrase for next term")  # the host changes it: asked again
    other = open_lecture(deck="generation")
    other.button(key="class_start").click().run()
    assert param(other, "class") is None and classroom.WRONG_PASSPHRASE in notices(other)


def test_passphrase_guesses_are_limited_per_browser_tab(store, limits):
    limits.setenv(settings.PASSPHRASE, PASSPHRASE)
    at = open_lecture(deck="generation")
    for _ in range(teachers.PER_SESSION_GUESSES):
        at.text_input(key=classroom.PASSPHRASE_KEY).input("guess guess").run()
        at.button(key="class_start").click().run()
    at.text_input(key=classroom.PASSPHRASE_KEY).input(PASSPHRASE)
    at.button(key="class_start").click().run()
    assert param(at, "class") is None and any("Too many passphrases" in text for text in notices(at))
    teacher = open_lecture(deck="generation")  # another tab (a teacher's) is not held up by the guesser
    teacher.text_input(key=classroom.PASSPHRASE_KEY).input(PASSPHRASE)
    teacher.button(key="class_start").click().run()
    assert store.is_teacher(param(teacher, "class"), param(teacher, "key"))


def test_one_browser_tab_starts_a_few_classes_then_waits(store, limits):
    store.max_classes = 20
    at = open_lecture(deck="generation")
    for _ in range(teachers.PER_SESSION):
        at.button(key="class_start").click().run()
        assert param(at, "class") is not None
        at.button(key="class_end").click().run()
    at.button(key="class_start").click().run()
    assert param(at, "class") is None and store.classes() == 0
    (said,) = [text for text in notices(at) if "This browser tab has started" in text]
    assert f"{teachers.PER_SESSION} classes in the last 10 minutes" in said and "minutes" in said
    assert teacher_start()[1] is not None, "another tab starts its class"


def test_the_teachers_open_page_keeps_the_class_alive(store, limits, monkeypatch):
    at, code, key = teacher_start()
    kept = []
    monkeypatch.setattr(store, "keep_alive", lambda *args: kept.append(args) or True)
    at.run()
    assert kept == [(code, key)]
    assert classroom.KEEP_ALIVE_SECONDS * 10 <= state.LIFETIME


def test_the_limit_says_it_is_the_number_of_classes_at_once_here(store, limits):
    for _ in range(3):
        teacher_start()
    at = open_lecture(deck="generation")
    at.button(key="class_start").click().run()
    (said,) = [text for text in notices(at) if "Wait for one to end" in text]
    assert "3 live classes are running, as many as this server runs at once" in said


# -- nothing before the reveal, and one teacher link is one teacher (issue 39 §3) --------------------------------

ANATOMY = DECKS["anatomy"]
ANATOMY_QUESTION = next(n for n, slide in enumerate(ANATOMY.slides, 1) if slide.question)


def labels(at) -> set[str]:
    return {button.label for button in at.button}


def nothing_of_the_answer(at) -> bool:
    """No verdict, no view, no "Show the answer", and the slide's full page (which shows the view) shut."""
    text = markdown(at)
    return (
        "The answer" not in text
        and "is right" not in text
        and not shown_specs(at)
        and "Show the answer" not in labels(at)
        and at.button(key="leave").disabled
    )


def test_a_student_exploring_on_their_own_gets_no_answer_before_the_reveal(store):
    at, code, _key = teacher_start(slide=QUESTION)
    explorer = student(code, answers=all_revealed(GENERATION))  # a link that says every question was answered
    explorer.button(key="class_detach").click().run()
    assert "class_rejoin" in keys(explorer), "on their own"
    assert nothing_of_the_answer(explorer)
    assert "vote-0" in keys(explorer), "they answer the class's poll, as when they follow"

    # The other deck, which the class is not on: its questions wait for the teacher too, and say so.
    explorer.session_state["_lecture_at"] = {"generation": QUESTION, "anatomy": ANATOMY_QUESTION}
    explorer.sidebar.radio(key="deck").set_value("anatomy").run()
    assert title(explorer) == f"## {ANATOMY.slide(ANATOMY_QUESTION).title}"
    assert nothing_of_the_answer(explorer) and classroom.WAITS_FOR_REVEAL in [c.value for c in explorer.caption]
    assert not {key for key in keys(explorer) if key.startswith("vote-")}, "no vote in a poll the class has not"

    explorer.sidebar.radio(key="deck").set_value("generation").run()
    at.button(key="class_reveal").click().run()
    explorer.run()
    assert "The answer" in markdown(explorer) and shown_specs(explorer), "revealed in class: theirs too"
    assert not explorer.button(key="leave").disabled


@pytest.mark.parametrize("seat", ["following", "exploring"])
def test_presenter_1_on_a_student_link_shows_no_notes_and_no_next_slide(store, seat):
    at, code, key = teacher_start(slide=QUESTION)
    pupil = student(code, presenter=1)
    if seat == "exploring":
        pupil.button(key="class_detach").click().run()
        pupil.query_params["presenter"] = "1"  # added again, once on their own
        pupil.run()
    next_title = GENERATION.slide(QUESTION + 1).title
    for revealed in (False, True):  # no notes before the reveal, nor after it: the notes are the teacher's
        if revealed:
            at.button(key="class_reveal").click().run()
            pupil.query_params["presenter"] = "1"
            pupil.run()
        assert not pupil.exception
        assert "presenter" not in pupil.query_params, "the link says what the page shows"
        assert classroom.NO_NOTES in notices(pupil)
        assert "**Notes**" not in markdown(pupil) and GENERATION.slide(QUESTION).notes not in markdown(pupil)
        assert not any(next_title in caption.value for caption in pupil.caption)
        assert "explorer_lecture_timer" not in {e.proto.component_name for e in pupil.get("bidi_component")}
    teacher = open_lecture(**{"class": code, "key": key, "presenter": 1})  # the teacher's window keeps them
    assert "**Notes**" in markdown(teacher) and any(next_title in caption.value for caption in teacher.caption)


@pytest.mark.parametrize("link", ["an older slide", "no slide", "a slide that is none"])
def test_a_teacher_link_opened_again_joins_the_class_where_it_is(store, link):
    at, code, key = teacher_start(slide=DISTRIBUTION)
    at.slider(key=f"s{DISTRIBUTION}_temperature").set_value(1.5).run()
    before = store.state(code)
    assert before.slide == DISTRIBUTION and dict(before.controls) == {"temperature": 1.5}
    older = {
        "an older slide": {"slide": 2, "s2_temperature": 0.5},
        "no slide": {},
        "a slide that is none": {"slide": "²"},
    }
    window = open_lecture(**{"class": code, "key": key, **older[link]})
    assert not window.exception
    assert store.state(code) == before, "opening the link moves nothing"
    assert title(window) == title(at) and param(window, "slide") == str(DISTRIBUTION)
    assert window.slider(key=f"s{DISTRIBUTION}_temperature").value == 1.5 and shown_specs(window) == shown_specs(at)
    assert "class_end" in keys(window), "a teacher's window: it leads when its teacher moves"


def test_a_second_teacher_window_follows_the_first_and_leads_as_well(store, monkeypatch):
    first, code, key = teacher_start()
    second = open_lecture(**{"class": code, "key": key, "slide": 5})
    first.button(key="next").click().run()
    second.run()  # as a move pushes it (AppTest has no server to push reruns: the test runs it)
    assert store.state(code).slide == 2 and title(second) == title(first), "it follows, and moves nothing"
    second.button(key="next").click().run()
    first.run()
    assert store.state(code).slide == 3 and title(first) == title(second)
    moves = store.state(code).moves
    for window in (first, second, first):  # runs that nobody moved in move nothing
        window.run()
    assert store.state(code).moves == moves

    # A run of the second window that began before the first's next move (it read the class where it was): it
    # leaves the class where the first put it, then follows.
    before = store.state(code)
    first.button(key="next").click().run()
    with monkeypatch.context() as patch:
        patch.setattr(store, "state", lambda code: before)
        second.run()
    assert store.state(code).slide == 4, "a window where nobody moved moves nothing back"
    second.run()
    assert title(second) == title(first) and store.state(code).slide == 4
