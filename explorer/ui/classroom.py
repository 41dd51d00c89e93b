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
  "Explore on my own" detaches (the page is theirs again); "Back to the teacher" follows again. Answers stay
  the teacher's to give (``hides_answer``): a student, detached or not, sees no answer, view or full page of a
  question before the class's reveal, and never the speaker notes, whatever the link says.
- On a question slide the students vote, each session as one student id that the server issued to its browser
  (kept in localStorage; ``explorer.classroom.students``); the teacher sees how many answered and reveals;
  everyone then sees the class's answers beside the model's own distribution, and the view.

Who may move a class is decided by the store's constant-time key check (``explorer.classroom``), never by
anything else in the link: a wrong key is a student. A window on the teacher link joins the class where it is
and moves it only when its teacher moves in it (``_join``, ``publish``): a second teacher window follows the
first's moves as students do. A code that does not lead to a running class gets one
answer, whatever the reason.
"""

from __future__ import annotations

import contextlib
import io
import math
import secrets
import socket
import threading
import urllib.parse
import weakref
from dataclasses import dataclass, replace

import segno
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from explorer import hosting
from explorer.classroom import ClassesFull, ClassState, StoreUnavailable, class_store, codes, students, teachers
from explorer.classroom.state import checked_position
from explorer.lecture import DECKS, Deck, Slide, ahead
from explorer.lecture.controls import Index, UptoStep, apply, controls_of, moved
from explorer.render.poll import poll_html
from explorer.settings import PASSPHRASE
from explorer.ui import push
from explorer.ui.lecture import around, control_key, go_to, show_slide, slide_number, slide_ui, verdict_ui
from explorer.ui.shell import present_slides
from explorer.ui.text import literal
from explorer.ui.widgets import _NOTICES, add_notice, set_value

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
_STUDENT = "_class_student"  # the student id this session votes as, for good once set (tests set it directly)
_STUDENT_COMPONENT = "class-student"
FOLLOW_FRAGMENT = "class-follow"  # the key of a follower's slide fragment, which a teacher's move reruns alone
TEACHER_FRAGMENT = "class-teach"  # the key of a teacher window's check that another window moved the class
_TAUGHT = "_class_taught"  # (code, deck, slide, controls, revealed): the class as this teacher window last put it
_JOINING = "_class_joining"  # the class's controls, for the sliders of the slide a teacher window joins on
WAITS_FOR_REVEAL = "The answer shows once your teacher reveals it in class."
NO_NOTES = "Speaker notes are the teacher's: in a class, a student's page shows neither the notes nor the next slide."
_subscribing = threading.Lock()
# The stores whose events rerun followers here (the stores, not their ids: a store made later may get a gone one's).
_subscribed: weakref.WeakSet = weakref.WeakSet()
_LAST = "_class_last"  # the Seat this session last had: kept through the store's faults (``_outage``, ``_lost``)
_ended: dict[str, None] = {}  # the codes of classes ended (events heard here), oldest first: not "lost"
MAX_ENDED = 1000
WAIT_SECONDS = 2.0  # while the store is out, or a class lost: how often a waiting page asks again
OUTAGE_WAIT = "This page joins class {code} as soon as the class store answers again: keep it open."
LOST_TEACHER = (
    "Class {code} is no longer in the class store: its state was lost (Redis restarted without keeping it: "
    "docs/hosting.md), or it timed out while this page was away. Start it again: it keeps its code, so your "
    "students' pages rejoin it by themselves."
)
LOST_STUDENT = (
    "Class {code} has stopped: the class store lost it (it restarted), or it ended. Keep this page open: it "
    "rejoins the class as soon as your teacher starts it again."
)
CODE_TAKEN = "Another class has this code now, so yours could not start again under it: start a new class."
VOTE_NOT_COUNTED = "Your answer was not counted."
VOTE_MAY_HAVE_COUNTED = (
    "Your answer may have counted: the class store took too long to say. Press it again once the class is back "
    "(a second answer replaces the first)."
)

# The browser's student id, kept in its localStorage: one vote per browser, across reloads, tabs and rejoins. The
# server issues it (signed: explorer.classroom.students); the browser presents what it kept ("" for nothing) until
# the session has an id, then keeps the session's id in place of whatever it had (an old or a made-up one).
_STUDENT_JS = """
export default function(component) {
  const { data, setStateValue } = component;
  let kept = "";
  try { kept = localStorage.getItem("explorer-student") || ""; } catch (error) {}
  if (!data.id) {
    setStateValue("id", kept.slice(0, 64));
  } else if (data.id !== kept) {
    try { localStorage.setItem("explorer-student", data.id); } catch (error) {}
  }
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
    stale: bool = False  # the class as last seen: its store does not answer now (``_outage``)

    @property
    def follows(self) -> bool:
        return self.role == "student"


# -- joining -----------------------------------------------------------------------------------------------


def seat_ui() -> Seat | None:
    """This session's seat in the class the link names (``?class=CODE``, the teacher's with ``&key=``); None
    without a class in the link, or with one that is not running (said once, in one sentence for every reason).
    Two faults keep the class in the link and the session seated, said until they end (``_outage``, ``_lost``):
    the class's store does not answer, or it lost a class this session sat in (Redis restarted empty)."""
    raw = st.query_params.get("class")
    if raw is None:
        return None
    try:
        seat = _seat(raw)
    except StoreUnavailable as error:
        return _outage(raw, error)
    if seat is not None:
        st.session_state[_LAST] = seat
    return seat


def _outage(raw: str, error: StoreUnavailable) -> Seat | None:
    """The class's store does not answer: said, and the page asks again every ``WAIT_SECONDS`` (``_wait``). A
    session that sat in the class keeps its seat as last seen (a student stays on the teacher's slide, votes
    when the store is back, and sees no answer meanwhile); one that had not (the link opened during the outage)
    waits on this page, not on a lecture of its own, and joins when the store is back."""
    code = codes.normalize_code(raw)
    _say(error)
    if code is None:  # malformed: no class to wait for
        return None
    _wait(code, for_class=False)
    last = st.session_state.get(_LAST)
    if isinstance(last, Seat) and last.code == code:
        key = st.query_params.get("key")
        if last.role != "teacher" or not isinstance(key, str) or not secrets.compare_digest(key, last.key or ""):
            role = "explorer" if st.session_state.get(_DETACHED) == code else "student"
            last = replace(last, role=role, key=None)
        return replace(last, stale=True)
    st.info(literal(OUTAGE_WAIT.format(code=code)), icon=":material/hourglass_empty:")
    st.stop()


def _lost(code: str) -> bool:
    """Whether this session sat in class ``code``, which is gone though nobody here saw it end: its state was
    lost (Redis restarted without keeping it), or it timed out. Said for as long as it lasts: the teacher (the
    link's key is the one this session led with) may start it again under its code (``_restart``); a student
    waits on this page and rejoins when it is back. False (the one answer for every code that leads nowhere)
    for a session that never sat in it, or a class that ended."""
    last = st.session_state.get(_LAST)
    if not isinstance(last, Seat) or last.code != code or code in _ended:
        return False
    key = st.query_params.get("key")
    if last.role == "teacher" and isinstance(key, str) and secrets.compare_digest(key, last.key or ""):
        with st.container(key="class-lost"):
            st.warning(literal(LOST_TEACHER.format(code=code)), icon=":material/sync_problem:")
            st.button(
                f"Start class {code} again",
                type="primary",
                icon=":material/restart_alt:",
                key="class_restart",
                on_click=_restart,
                args=(code, key, last.state.deck, last.state.slide),
            )
        return True
    if last.role == "teacher":
        return False
    st.warning(literal(LOST_STUDENT.format(code=code)), icon=":material/sync_problem:")
    _wait(code, for_class=True)
    st.stop()


def _restart(code: str, key: str, deck: str, slide: int) -> None:
    """The teacher starts their lost class again, under its code and key, where it last was."""
    if not _may_start():
        return
    restarted = False
    try:
        restarted = class_store().restart(code, key, deck=deck, slide=slide)
    except (ClassesFull, StoreUnavailable) as error:
        add_notice(literal(error))
        return
    if not restarted:  # another class took its code meanwhile
        add_notice(CODE_TAKEN)
        st.session_state.pop(_LAST, None)
        for name in ("class", "key"):
            st.query_params.pop(name, None)


@st.fragment(run_every=WAIT_SECONDS)
def _wait(code: str, *, for_class: bool) -> None:
    """While the store does not answer (``for_class`` False) or the class is lost (True): asks every
    ``WAIT_SECONDS``, and runs the page again once the store answers, or once the class is back."""
    if not get_script_run_ctx().fragment_ids_this_run:
        return  # within the page's full run, which has just asked
    try:
        state = class_store().state(code)
    except StoreUnavailable:
        return
    if state is not None or not for_class:
        st.rerun(scope="app")


def _say(error: StoreUnavailable) -> None:
    """The store's fault, once on the page: not again where a notice (a vote's, a move's) already says it."""
    sentence = literal(error)  # as the notices hold it
    if not any(sentence in notice for notice in st.session_state.get(_NOTICES, [])):
        st.error(sentence, icon=":material/cloud_off:")


def _seat(raw: str) -> Seat | None:
    store = class_store()
    code = codes.normalize_code(raw)
    state = store.state(code) if code else None
    if state is None:
        if code is not None and _lost(code):
            return None
        push.unfollow(code or raw)  # as followed: the normalized code
        add_notice(NO_SUCH_CLASS)
        for name in ("class", "key"):
            st.query_params.pop(name, None)
        return None
    st.query_params["class"] = code
    key = st.query_params.get("key")
    if key is not None and store.is_teacher(code, key):
        seat = Seat("teacher", code, state, key)
        _join(seat)
        _notify_on_moves(store)
        push.follow(code, fragment=TEACHER_FRAGMENT)  # another teacher window's moves: ``_other_window``
        return seat
    st.query_params.pop("key", None)  # a key that does not lead the class: a student, told nothing more
    if st.session_state.get(_DETACHED) == code:
        push.unfollow(code)
        return Seat("explorer", code, state)
    _notify_on_moves(store)
    if not push.follow(code, fragment=FOLLOW_FRAGMENT):
        _poll_for_moves(code, state.moves)
    return Seat("student", code, state)


def _join(seat: Seat) -> None:
    """A teacher window shows the class where it is, unless it put it there itself: a teacher link opened in
    another browser or tab (or reloaded), with an older ``slide=`` or none, joins the class instead of moving it,
    and a window that another one moved the class from follows it (``_other_window`` reruns it). Only a key
    press, a click or a control moved in a window then moves the class (``publish``)."""
    state = seat.state
    known = st.session_state.get(_TAUGHT)
    if (known is None or known[:4] != _taught(state)[:4]) and state.deck in DECKS:
        show_slide(state.deck, state.slide)
        go_to(DECKS[state.deck], state.slide)  # this window's own controls dropped: the class's come instead
        st.session_state[_JOINING] = state.controls
    st.session_state[_TAUGHT] = _taught(state)


def _taught(state: ClassState) -> tuple:
    return state.code, state.deck, state.slide, state.controls, state.revealed


def join_controls(seat: Seat, slide: Slide, result) -> None:
    """The sliders of the slide a teacher window joined the class on, set to the class's controls (a slider
    shows a step from ``first``; a replay's last step, ``None`` in the class, is the slider's last)."""
    joining = st.session_state.pop(_JOINING, None)
    if joining is None:
        return
    shown = apply(slide.view, dict(joining), result)
    for control in controls_of(slide.view):
        value = getattr(shown, control.field)
        if value == getattr(slide.view, control.field):
            continue  # the slide's own value: its slider starts there anyway
        if isinstance(control, UptoStep) and value is None:
            value = control.count(slide.view, result) - 1
        shown_value = value + control.first if isinstance(control, Index) else value
        set_value(control_key(seat.state.slide, control.field), shown_value)


@st.fragment(key=TEACHER_FRAGMENT)
def _other_window(code: str) -> None:
    """Rerun alone on each of the class's moves (pushed): a full run when the class is not where this teacher
    window last put it (another window moved it or revealed, or the class ended), which then joins it there."""
    _check_other_windows(code)


@st.fragment(run_every=0.5)
def _other_window_polled(code: str) -> None:
    """Where reruns cannot be pushed (another Streamlit): ``_other_window``, asked twice a second."""
    _check_other_windows(code)


def _check_other_windows(code: str) -> None:
    if not get_script_run_ctx().fragment_ids_this_run:
        return  # within the page's full run, which puts the class where this window is
    try:
        state = class_store().state(code)
    except StoreUnavailable:
        return  # the page's next full run says so; this window stays where it is meanwhile
    if state is None or _taught(state) != st.session_state.get(_TAUGHT):
        st.rerun(scope="app")


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
    with contextlib.suppress(StoreUnavailable):  # the full run says so, and keeps the seat (``_outage``)
        state = class_store().state(seat.code)
    if state is None or state.deck != seat.state.deck or st.session_state.get(_DETACHED) == seat.code:
        st.rerun(scope="app")
    seat = replace(seat, state=state)
    st.session_state[_LAST] = seat
    return seat


@contextlib.contextmanager
def unreachable_store(*, notice: bool = False, voting: bool = False):
    """Runs the block; when the class's store cannot be reached or refuses (``StoreUnavailable``: down, paused,
    full...), says so in its fault's sentence (a notice, from a callback) and goes on: the lecture goes on. A
    vote (``voting``) says whether it counted: not, or, after a timeout, maybe (Redis may have run it)."""
    try:
        yield
    except StoreUnavailable as error:
        if voting:
            said = VOTE_MAY_HAVE_COUNTED if error.kind == "timeout" else VOTE_NOT_COUNTED
            add_notice(literal(f"{said} {error}"))
        elif notice:
            add_notice(literal(error))
        else:
            _say(error)


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
    st.session_state[_TAUGHT] = (code, deck, number, (), frozenset())  # where this window is: nothing to join


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


def _seconds(wait: float) -> str:
    count = math.ceil(wait)
    return "a second" if count <= 1 else f"{count} seconds"


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
    """The teacher's page, drawn: the class moves to it when this window moved (a key, a click, a control) since
    it last put or found the class somewhere; a run of a window where nothing moved (a redraw begun before
    another teacher window's move) leaves the class alone. The window remembers where it put the class: a class
    found elsewhere later was moved by another window (``_join``)."""
    if seat.stale:  # the store does not answer: the page says so already, and moves the class once it does
        return
    controls = moved(view, slide.view)
    position = (seat.code, *checked_position(deck.name, number, controls))
    known = st.session_state.get(_TAUGHT)
    if known is not None and known[:4] == position:
        return
    with unreachable_store():
        class_store().move(seat.code, seat.key, deck=deck.name, slide=number, controls=controls)
        st.session_state[_TAUGHT] = (*position, seat.state.revealed)


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
        (_other_window if push.available() else _other_window_polled)(seat.code)


@st.fragment(run_every=KEEP_ALIVE_SECONDS)
def _keep_alive(code: str, key: str | None) -> None:
    """While the teacher's page is open the class stays: a class ends ``LIFETIME`` after its teacher's last move
    or keep-alive, and a teacher may talk over one slide for longer than that."""
    with unreachable_store():
        class_store().keep_alive(code, key)


def _end(seat: Seat) -> None:
    with unreachable_store(notice=True):
        class_store().end(seat.code, seat.key)
    push.unfollow(seat.code)
    st.session_state.pop(_TAUGHT, None)
    st.session_state.pop(_LAST, None)  # ended here: not lost
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
    """The student id this session votes as (``_bind``); None until its browser has said what it kept. Draws the
    component that reads the browser's kept id and keeps the session's."""
    student, _ = _bind()
    _student_component(
        key=_STUDENT_COMPONENT, data={"id": student}, default={"id": None}, on_id_change=lambda: None, height=0
    )
    return student


def _bind() -> tuple[str | None, float | None]:
    """(the id this session votes as, or None; the seconds until a new id may be issued, when that is why it has
    none). Once a session has an id it keeps it, whatever its browser says later: one session, one voter. Until
    then: the id its browser presents, when the class's store issued it (``ClassStore.is_student``); else (none
    kept, or one made up) a new one, as often as ``students.MINTS`` allows this network address."""
    student = st.session_state.get(_STUDENT)
    if student is not None:
        return student, None
    presented = st.session_state.get(_STUDENT_COMPONENT)
    said = presented.get("id") if isinstance(presented, dict) else None
    if not isinstance(said, str):  # the browser has not said yet
        return None, None
    store = class_store()
    if store.is_student(said):
        student = said
    elif (wait := students.MINTS.take(_address())) is None:
        student = store.new_student()
    else:
        return None, wait
    st.session_state[_STUDENT] = student
    return student, None


def hides_answer(seat: Seat | None, deck_name: str, number: int) -> bool:
    """Whether this session is a student's in a class (following or exploring on their own) and slide
    ``number`` of the deck named ``deck_name`` has not been revealed in class: its answer, the view that shows
    it, the slide's full page and the speaker notes all wait for the teacher, whatever the link says."""
    if seat is None or seat.role == "teacher":
        return False
    return deck_name != seat.state.deck or number not in seat.state.revealed


def question_in_class_ui(seat: Seat, deck_name: str, number: int, slide: Slide, result) -> str | None:
    """A question slide in a class: the class's poll (``poll_ui``), for a student exploring on their own too
    (they vote, and see the answer when the class does, never before); a question of a deck the class is not
    on (a student exploring the other deck) shows without its answer. Returns the poll once revealed, else
    None."""
    if seat.role == "explorer" and deck_name != seat.state.deck:
        question = slide.question
        with st.container(key="lecture-question"):
            st.markdown(literal(question.ask))
        st.markdown("  ·  ".join(literal(choice) for choice in question.choices(result)))
        st.caption(WAITS_FOR_REVEAL)
        return None
    return poll_ui(seat, number, slide, result)


def poll_ui(seat: Seat, number: int, slide: Slide, result) -> str | None:
    """A question slide in a class (see ``_poll``); with the store out of reach, a sentence and no view."""
    if seat.stale:  # the question, and its answers once the store is back (the page says why it waits)
        with st.container(key="lecture-question"):
            st.markdown(literal(slide.question.ask))
        st.caption("Answers are taken again as soon as the class store answers.")
        return None
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
    counted = True
    try:
        student, wait = _bind()
    except StoreUnavailable as error:  # nothing was voted yet: whatever the fault, the answer did not count
        add_notice(literal(f"{VOTE_NOT_COUNTED} {error}"))
        return
    with unreachable_store(voting=True):
        if not student:
            add_notice(
                f"Many students are joining from your network just now: answer again in {_seconds(wait)}."
                if wait
                else "Your browser has not been counted in yet: answer again in a second."
            )
            return
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
        if store not in _subscribed:
            store.subscribe(_on_event)
            _subscribed.add(store)


def _on_event(code: str, kind: str) -> None:
    if kind == "end":
        with _subscribing:
            _ended[code] = None
            while len(_ended) > MAX_ENDED:
                del _ended[next(iter(_ended))]
    if kind in ("move", "end"):
        push.notify(code)
    elif kind == "reconnected":  # Redis may have come back empty: every follower here looks again
        push.notify_all()
