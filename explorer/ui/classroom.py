"""A live class on the lecture page: the teacher's slide on every student's screen, and the predict questions
answered as a class poll.

- The teacher starts a class from the slide's "Live class" popover: with the server's teacher passphrase where it
  has one, asked once per tab; on a hosted server without one, nobody (``explorer.classroom.teachers``, which
  also limits how many classes a tab or an address starts). While the teacher's page is open it keeps its class
  alive, once a minute (a class ends half an hour after that). The page then keeps a teacher link for itself
  (``?class=CODE&key=SECRET``) and shows the student link, ``?class=CODE``, with its QR code, behind "Class".
- A student on the student link *follows*: each teacher's move (slide, controls, reveal) reruns their slide
  (``explorer.ui.push``) on the teacher's slide with the teacher's values; nothing on it moves the class. The
  slide is a fragment (``follow_ui``) that a move reruns alone: the app around it (shell, menu, sidebar) was
  about half of each follower's run, and a class of forty queues forty of them on the server's cores.
  "Explore on my own" detaches (the page is theirs again); "Back to the teacher" follows again.
- On a question slide the students vote; the teacher sees how many answered and reveals; everyone then sees
  the class's answers beside the model's own distribution, and the view.

Who may move a class is decided by the store's constant-time key check (``explorer.classroom``), never by
anything else in the link: a wrong key is a student. A code that does not lead to a running class gets one
answer, whatever the reason.
"""

from __future__ import annotations

import contextlib
import io
import secrets
import socket
import threading
import urllib.parse
from dataclasses import dataclass, replace

import segno
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from explorer import hosting
from explorer.classroom import ClassesFull, ClassState, StoreUnavailable, class_store, codes, teachers
from explorer.lecture import Deck, Slide, ahead
from explorer.lecture.controls import apply, moved
from explorer.render.poll import poll_html
from explorer.settings import PASSPHRASE
from explorer.ui import push
from explorer.ui.lecture import around, show_slide, slide_number, slide_ui, verdict_ui
from explorer.ui.shell import present_slides
from explorer.ui.text import literal
from explorer.ui.widgets import add_notice

NO_SUCH_CLASS = "No class with this code is running: it may have ended, or the code may be mistyped."
CLASSES_OFF = (
    "Live classes are off on this server: only teachers start them, and whoever runs the server makes a "
    f"teacher passphrase for them by setting {PASSPHRASE} (docs/hosting.md, Who can start a class)."
)
WRONG_PASSPHRASE = "That is not this server's teacher passphrase: no class was started. Ask whoever runs the server."
PASSPHRASE_KEY = "class_passphrase"
_TEACHER = "_class_teacher"  # the digest of the teacher passphrase this session gave
_TAB = "_class_tab"  # this session's id for the start limits
KEEP_ALIVE_SECONDS = 60  # the teacher's open page tells the store it is there (LIFETIME is 30 minutes)
_DETACHED = "_class_detached"  # the class code this session explores on its own from
_STUDENT = "_class_student"  # this browser's student id, as its component last said (tests set it directly)
_STUDENT_COMPONENT = "class-student"
FOLLOW_FRAGMENT = "class-follow"  # the key of a follower's slide fragment, which a teacher's move reruns alone
_subscribing = threading.Lock()
_subscribed: set[int] = set()  # the stores whose events rerun followers here

# A random id kept in the browser's localStorage: one vote per browser, across reloads, tabs and rejoins.
# crypto.getRandomValues, not randomUUID: a class server on a LAN address is not a secure context.
_STUDENT_JS = """
export default function(component) {
  const { data, setStateValue } = component;
  let id = null;
  try { id = localStorage.getItem("explorer-student"); } catch (error) {}
  if (!id || !/^[0-9a-f]{32}$/.test(id)) {
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    id = Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
    try { localStorage.setItem("explorer-student", id); } catch (error) {}
  }
  if (data.known !== id) setStateValue("id", id);
}
"""
_student_component = st.components.v2.component("explorer_class_student", js=_STUDENT_JS, html="<span></span>")


@dataclass(frozen=True)
class Seat:
    """Where this session sits in a class: ``teacher`` (moves it), ``student`` (follows) or ``explorer`` (a
    student exploring on their own, who can follow again)."""

    role: str
    code: str
    state: ClassState
    key: str | None = None

    @property
    def follows(self) -> bool:
        return self.role == "student"


# -- joining -----------------------------------------------------------------------------------------------


def seat_ui() -> Seat | None:
    """This session's seat in the class the link names (``?class=CODE``, the teacher's with ``&key=``); None
    without a class in the link, with one that is not running (said once, in one sentence for every reason), or
    when the class's store cannot be reached (said, and the lecture goes on without the class)."""
    raw = st.query_params.get("class")
    if raw is None:
        return None
    seat = None
    with unreachable_store():
        seat = _seat(raw)
    return seat


def _seat(raw: str) -> Seat | None:
    store = class_store()
    code = codes.normalize_code(raw)
    state = store.state(code) if code else None
    if state is None:
        push.unfollow(code or raw)  # as followed: the normalized code
        add_notice(NO_SUCH_CLASS)
        for name in ("class", "key"):
            st.query_params.pop(name, None)
        return None
    st.query_params["class"] = code
    key = st.query_params.get("key")
    if key is not None and store.is_teacher(code, key):
        return Seat("teacher", code, state, key)
    st.query_params.pop("key", None)  # a key that does not lead the class: a student, told nothing more
    if st.session_state.get(_DETACHED) == code:
        push.unfollow(code)
        return Seat("explorer", code, state)
    _notify_on_moves(store)
    if not push.follow(code, fragment=FOLLOW_FRAGMENT):
        _poll_for_moves(code, state.moves)
    return Seat("student", code, state)


@st.fragment(key=FOLLOW_FRAGMENT)
def follow_ui(seat: Seat, deck: Deck) -> None:
    """A follower's slide (``lecture.slide_ui``) as a fragment: the teacher's moves rerun it alone (``push`` names
    it), and so do the follower's votes and "Explore on my own"."""
    alone = bool(get_script_run_ctx().fragment_ids_this_run)  # else within the page's full run
    if alone:  # ``seat`` is the last full run's: the class may have moved since
        seat = _moved(seat)
        show_slide(deck.name, seat.state.slide)
        present_slides(css=False)  # this run's thread is not the full run's: the figures' projector look again
    number = slide_number(deck)
    slide_ui(deck, number, seat)
    if alone:  # as the page does after a full run
        ahead.compute_ahead(around(deck, number))


def _moved(seat: Seat) -> Seat:
    """The follower's seat with the class as it is now; a full run instead where more than the slide changes:
    the class ended (or its store is out of reach), the teacher opened the other deck (the sidebar's), or the
    student chose to explore on their own (arrows, keys and controls appear)."""
    state = None
    with unreachable_store():
        state = class_store().state(seat.code)
    if state is None or state.deck != seat.state.deck or st.session_state.get(_DETACHED) == seat.code:
        st.rerun(scope="app")
    return replace(seat, state=state)


@contextlib.contextmanager
def unreachable_store(*, notice: bool = False):
    """Runs the block; when the class's store cannot be reached (Redis down), says so in one sentence (a notice,
    from a callback) and goes on: the lecture goes on without its class."""
    try:
        yield
    except StoreUnavailable as error:
        if notice:
            add_notice(literal(error))
        else:
            st.error(literal(error), icon=":material/cloud_off:")


@st.fragment(run_every=0.5)
def _poll_for_moves(code: str, moves: int) -> None:
    """Where reruns cannot be pushed (another Streamlit): ask twice a second whether the teacher moved."""
    with unreachable_store():
        state = class_store().state(code)
        if state is None or state.moves != moves:
            st.rerun(scope="app")


def start_ui(deck: Deck, number: int) -> None:
    """For a session in no class: start one from this slide (with the teacher passphrase, where the server has
    one; not at all on a hosted server without one: ``explorer.classroom.teachers``)."""
    policy = teachers.start_policy(hosting.POLICY.hosted)
    with st.popover("Live class", icon=":material/groups:", width="stretch"):
        st.markdown(
            "Teach this deck live: students open the class's link (or scan its QR code), follow your slides as "
            "you move, and answer the questions as a poll before you show the answer."
        )
        if policy == teachers.CLOSED:
            st.info(CLASSES_OFF, icon=":material/lock:")
            st.button("Start a live class", key="class_start", disabled=True)
        elif policy == teachers.PASSPHRASE_NEEDED and st.session_state.get(_TEACHER) != teachers.configured():
            with st.form("class-passphrase", clear_on_submit=True, border=False):
                st.text_input("Teacher passphrase", type="password", key=PASSPHRASE_KEY, max_chars=200)
                st.form_submit_button(
                    "Start a live class", type="primary", key="class_start", on_click=_start, args=(deck.name, number)
                )
            st.caption("Asked once: this browser tab then starts classes without it.")
        else:
            st.button(
                "Start a live class", type="primary", key="class_start", on_click=_start, args=(deck.name, number)
            )


def _start(deck: str, number: int) -> None:
    if not _may_start():
        return
    refused = teachers.STARTS.take(_session_id(), _address())
    if refused is not None:
        whose, minutes = refused
        who = "This browser tab" if whose == "session" else "Your network address"
        add_notice(
            f"{who} has started {teachers.PER_SESSION if whose == 'session' else teachers.PER_ADDRESS} classes in "
            f"the last {teachers.WINDOW / 60:.0f} minutes, as many as it may: start the next in {_minutes(minutes)}."
        )
        return
    try:
        code, key = class_store().start(deck, number)
    except (ClassesFull, StoreUnavailable) as error:
        add_notice(literal(error))
        return
    st.query_params["class"] = code
    st.query_params["key"] = key


def _may_start() -> bool:
    """Whether this session may start a class now: anyone locally without a passphrase, its holders with one
    (the passphrase typed now, or earlier in this session), nobody on a hosted server without one."""
    policy = teachers.start_policy(hosting.POLICY.hosted)
    if policy == teachers.CLOSED:
        add_notice(CLASSES_OFF)
        return False
    expected = teachers.configured()
    if policy == teachers.OPEN or st.session_state.get(_TEACHER) == expected:
        return True
    if (limited := teachers.GUESSES.take(_session_id(), None)) is not None:
        add_notice(f"Too many passphrases tried in this browser tab: try again in {_minutes(limited[1])}.")
        return False
    if not teachers.matches(st.session_state.get(PASSPHRASE_KEY), expected):
        add_notice(WRONG_PASSPHRASE)
        return False
    st.session_state[_TEACHER] = expected  # the passphrase's digest: a new passphrase asks again
    return True


def _minutes(count: int) -> str:
    return f"{count} minute{'s' if count != 1 else ''}"


def _session_id() -> str:
    """A random id of this browser tab's session, kept in its state (what the start limits count by)."""
    return st.session_state.setdefault(_TAB, secrets.token_hex(16))


def _address() -> str | None:
    """The browser's network address as the server sees it (a proxy's, behind one); None when unknown."""
    try:
        return st.context.ip_address
    except Exception:  # outside a browser's session (AppTest)
        return None


def controls_for(seat: Seat, slide: Slide, result):
    """A follower's view: the slide's, with the teacher's control values (checked against the result)."""
    return apply(slide.view, dict(seat.state.controls), result)


def publish(seat: Seat, deck: Deck, number: int, slide: Slide, view) -> None:
    """The teacher's page, drawn: the class moves to it (nothing is sent when nothing changed)."""
    with unreachable_store():
        class_store().move(seat.code, seat.key, deck=deck.name, slide=number, controls=moved(view, slide.view))


# -- the bars on the slide ------------------------------------------------------------------------------------


def student_bar_ui(seat: Seat) -> None:
    """In place of the slide's arrows: following or not, and the button that switches."""
    with st.container(horizontal=True, vertical_alignment="center", key="class-bar"):
        if seat.follows:
            st.markdown(f":blue[**Following the teacher**] · slide {seat.state.slide} · class {seat.code}")
            st.button("Explore on my own", key="class_detach", on_click=_detach, args=(seat.code,))
        else:
            st.markdown(f"Exploring on your own · class {seat.code}")
            st.button("Back to the teacher", type="primary", key="class_rejoin", on_click=_rejoin)


def _detach(code: str) -> None:
    st.session_state[_DETACHED] = code


def _rejoin() -> None:
    st.session_state.pop(_DETACHED, None)


def teacher_ui(seat: Seat) -> None:
    """The teacher's "Class" popover: the student link, its QR code for the projector, and "End the class"."""
    link, local = student_link(seat.code)
    with st.popover(f"Class {seat.code}", icon=":material/groups:", width="stretch"):
        st.markdown("Students open")
        with st.container(key="class-link"):  # large enough to read off the projector
            st.markdown(f"**{literal(link)}**")
        st.image(qr_png(link), width=280, output_format="PNG")
        if local:
            st.caption("This page runs on this machine: students reach it at its network address, as shown.")
        st.caption("Keep this page's own link to yourself: whoever has it moves the class.")
        st.button("End the class", icon=":material/stop_circle:", key="class_end", on_click=_end, args=(seat,))
        _keep_alive(seat.code, seat.key)


@st.fragment(run_every=KEEP_ALIVE_SECONDS)
def _keep_alive(code: str, key: str | None) -> None:
    """While the teacher's page is open the class stays: a class ends ``LIFETIME`` after its teacher's last move
    or keep-alive, and a teacher may talk over one slide for longer than that."""
    with unreachable_store():
        class_store().keep_alive(code, key)


def _end(seat: Seat) -> None:
    with unreachable_store(notice=True):
        class_store().end(seat.code, seat.key)
    for name in ("class", "key"):
        st.query_params.pop(name, None)


def student_link(code: str) -> tuple[str, bool]:
    """(the student link, whether its host was this machine's own name, replaced by its network address)."""
    address = urllib.parse.urlsplit(st.context.url or "http://localhost:8501/")
    host, local = address.hostname or "localhost", False
    if host in ("localhost", "127.0.0.1", "::1"):
        host, local = network_address(), True
    netloc = f"{host}:{address.port}" if address.port else host
    base = address.path.rsplit("/", 1)[0]
    return f"{address.scheme or 'http'}://{netloc}{base}/lecture?class={code}", local


def network_address() -> str:
    """This machine's address on its network (the route out; nothing is sent), else localhost."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
        except OSError:
            return "localhost"


def qr_png(link: str) -> bytes:
    """The link as a QR code a phone reads across a room (medium error correction, a wide quiet zone)."""
    out = io.BytesIO()
    segno.make(link, error="m").save(out, kind="png", scale=10, border=4)
    return out.getvalue()


# -- the poll -------------------------------------------------------------------------------------------------


def student_id() -> str | None:
    """This browser's student id (from its localStorage, through a component), once it has said it."""
    reported = _student_component(
        key=_STUDENT_COMPONENT,
        data={"known": st.session_state.get(_STUDENT)},
        default={"id": None},
        on_id_change=lambda: None,
        height=0,
    )
    given = getattr(reported, "id", None)
    if isinstance(given, str) and codes.is_student_id(given):
        st.session_state[_STUDENT] = given
    return st.session_state.get(_STUDENT)


def poll_ui(seat: Seat, number: int, slide: Slide, result) -> str | None:
    """A question slide in a class (see ``_poll``); with the store out of reach, a sentence and no view."""
    poll = None
    with unreachable_store():
        poll = _poll(seat, number, slide, result)
    return poll


def _poll(seat: Seat, number: int, slide: Slide, result) -> str | None:
    """A question slide in a class: the question, then the votes (a student's buttons, the teacher's count and
    "Show the answer"); once revealed, the verdict. Returns the poll beside the model (HTML) once revealed,
    else None: the view stays hidden until then."""
    question = slide.question
    choices = question.choices(result)
    revealed = number in seat.state.revealed
    with st.container(key="lecture-question"):
        st.markdown(literal(question.ask))
    if seat.role == "teacher":
        _teacher_poll(seat, number, choices, revealed)
    elif not revealed:
        _student_vote(seat, number, choices)
    if not revealed:
        return None
    store = class_store()
    student = st.session_state.get(_STUDENT)
    mine = store.answer_of(seat.code, number, student) if seat.role != "teacher" and student else None
    verdict_ui(question, choices, mine, result)
    return poll_html(choices, store.votes(seat.code, number), question.model_shares(result), question.answer(result))


def _student_vote(seat: Seat, number: int, choices) -> None:
    student = student_id()
    mine = class_store().answer_of(seat.code, number, student) if student else None
    with st.container(horizontal=True, key="lecture-choices"):
        for index, choice in enumerate(choices):
            st.button(
                literal(choice),
                key=f"vote-{index}",
                type="primary" if index == mine else "secondary",
                on_click=_vote,
                args=(seat.code, number, index),
            )
    said = "Your answer is in: you may change it" if mine is not None else "Answer, then wait"
    st.caption(f"{said} until the teacher shows the answer.")


def _vote(code: str, number: int, choice: int) -> None:
    student = st.session_state.get(_STUDENT)
    if not student:
        add_notice("Your browser has not been counted in yet: answer again in a second.")
        return
    counted = True
    with unreachable_store(notice=True):
        counted = class_store().vote(code, number, student, choice)
    if not counted:
        add_notice("This poll has closed, or is full: your answer was not counted.")


def _teacher_poll(seat: Seat, number: int, choices, revealed: bool) -> None:
    st.markdown("  ·  ".join(literal(choice) for choice in choices))
    if revealed:
        return
    with st.container(horizontal=True, vertical_alignment="center", key="lecture-choices"):
        _answered(seat.code, number)
        st.button(
            "Show the answer to the class", type="primary", key="class_reveal", on_click=_reveal, args=(seat, number)
        )


@st.fragment(run_every=1.0)
def _answered(code: str, number: int) -> None:
    """How many answered so far, counted again every second (one teacher per class: a cheap poll)."""
    with unreachable_store():
        count = sum(class_store().votes(code, number).values())
        st.markdown(f"**{count}** answered")


def _reveal(seat: Seat, number: int) -> None:
    with unreachable_store(notice=True):
        class_store().reveal(seat.code, seat.key, number)


def _notify_on_moves(store) -> None:
    """Once per store: its class events rerun this server's followers (Redis delivers another server's
    teacher's moves too)."""
    with _subscribing:
        if id(store) not in _subscribed:
            store.subscribe(_on_event)
            _subscribed.add(id(store))


def _on_event(code: str, kind: str) -> None:
    if kind in ("move", "end"):
        push.notify(code)
