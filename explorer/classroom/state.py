"""The live class's state behind one small interface: what students follow, and the class's poll answers.

A class is the teacher's position in a deck (deck, slide, the controls they moved, the predict slides they
revealed) and one poll per predict slide (each student's answer). Two stores keep it: ``InProcessStore`` (one
server, the default) and ``RedisStore`` (``EXPLORER_REDIS_URL``: every replica behind a load balancer shares the
class). Both enforce the same rules, tested once for both (tests/test_classroom_store.py):

- only the teacher's key moves, reveals, ends or keeps a class alive;
- ``state`` answers None alike for a malformed code, one never issued, an ended class and an expired one, so
  nobody learns which codes exist;
- a poll counts only students' ids the store issued (``new_student``: signed with ``student_secret``, which
  every store sharing the state shares), so nobody adds voters by making ids up;
- everything is bounded: ``MAX_CLASSES`` classes, ``MAX_VOTERS`` answers per poll, a deck's ``MAX_SLIDE``
  slides, ``MAX_CONTROLS`` controls; moves replace, they never append;
- a class ends ``LIFETIME`` seconds after the teacher's last move or keep-alive (30 minutes; the teacher's page
  keeps its class alive while it is open, ``explorer.ui.classroom``), without a thread to end it.

Subscribers hear ``(code, kind)`` with kind "move", "vote" or "end" after each change, whichever server made it:
followers rerun on "move", the teacher's count on "vote"; and ``("", "reconnected")`` when a shared store's events
come back after its connection dropped (Redis may have restarted, and lost classes).

A shared store's faults (``FAULTS``: unreachable, timeout, auth, full, not Redis, refused) are ``StoreUnavailable``
with one sentence each; ``health`` says whether the store answers. A class whose state was lost can be started
again under its code by whoever holds its teacher's key (``restart``).
"""

from __future__ import annotations

import abc
import math
import numbers
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from explorer import settings
from explorer.classroom import codes

MAX_CLASSES = 20  # at once per store: one server's, or all servers' sharing a Redis (EXPLORER_MAX_CLASSES)
LIFETIME = 30 * 60.0  # seconds without the teacher before a class ends (EXPLORER_CLASS_IDLE_MINUTES)
MAX_VOTERS = 500  # distinct students per poll; more are refused (the state stays bounded)
MAX_SLIDE = 200
MAX_CHOICE = 49  # a poll's choices are numbered 0 .. MAX_CHOICE
MAX_CONTROLS = 32
MAX_NAME = 40  # a deck's or a control's name
MIN_KEY_LENGTH = 22  # characters of a teacher's key that restarts a class: 128 bits in URL-safe base64

Controls = tuple[tuple[str, int | float | None], ...]


@dataclass(frozen=True)
class ClassState:
    code: str
    deck: str  # a deck name (<= 40 chars)
    slide: int  # 1-based
    controls: Controls  # the teacher's moved controls, sorted by name
    revealed: frozenset[int]  # predict slides the teacher has revealed
    moves: int  # bumped by every change of deck/slide/controls/revealed (followers rerun on it)


class ClassesFull(Exception):
    """The store's limit of classes at once is reached: on every server that shares the store (``shared``)."""

    def __init__(self, running: int, *, lifetime: float = LIFETIME, shared: bool = False):
        where = "this site (all its servers together)" if shared else "this server"
        super().__init__(
            f"{running} live classes are running, as many as {where} runs at once. Wait for one to end (a class "
            f"ends when its teacher ends it, or {lifetime / 60:.0f} minutes after its teacher's page was last open), "
            "then start yours."
        )


class StoreUnavailable(Exception):
    """The class state cannot be reached or changed now: its message is a sentence for the user, and ``kind`` says
    which fault it is (``FAULTS``: one sentence per kind, ``explorer.classroom.redis_store``)."""

    def __init__(self, message: str, kind: str = "unreachable"):
        super().__init__(message)
        self.kind = kind


# What can go wrong with a shared class store, each said in its own sentence and logged once (redis_store.py).
FAULTS = (
    "unreachable",  # nothing answers at the address (down, restarting, wrong host or port)
    "timeout",  # connected, but no answer in time (paused, overloaded): a change may have been made
    "auth",  # the password (or user) in EXPLORER_REDIS_URL is wrong or missing
    "full",  # Redis's maxmemory is reached (noeviction): it refuses what would grow it
    "not-redis",  # something else answers at the address
    "refused",  # Redis answered with another error (read-only replica, failing disk, a missing permission)
)


class ClassStore(abc.ABC):
    @abc.abstractmethod
    def start(self, deck: str, slide: int = 1) -> tuple[str, str]:
        """A new class at ``deck``'s ``slide``: (code, key). ClassesFull when ``MAX_CLASSES`` already run."""

    @abc.abstractmethod
    def state(self, code: str) -> ClassState | None:
        """None alike for a malformed code, one never issued, an ended class and an expired one."""

    @abc.abstractmethod
    def is_teacher(self, code: str, key: str | None) -> bool:
        """Whether ``key`` is the live class's key (constant-time comparison)."""

    @abc.abstractmethod
    def move(self, code: str, key: str | None, *, deck: str, slide: int, controls: Mapping[str, object]) -> bool:
        """The teacher's new position (False, nothing changed, for a wrong key or no class); refreshes the class's
        lifetime; bumps ``moves`` and notifies "move" only when something changed. ValueError for a malformed
        deck, slide or controls."""

    @abc.abstractmethod
    def reveal(self, code: str, key: str | None, slide: int) -> bool:
        """The teacher reveals ``slide``'s poll (which closes it); notifies "move"."""

    @abc.abstractmethod
    def end(self, code: str, key: str | None) -> bool:
        """The teacher ends the class: everything of it is deleted; notifies "end"."""

    @abc.abstractmethod
    def keep_alive(self, code: str, key: str | None) -> bool:
        """The teacher is still there: the class's lifetime starts again."""

    @abc.abstractmethod
    def vote(self, code: str, slide: int, student: str, choice: int) -> bool:
        """A student's answer to ``slide``'s poll (a second one replaces the first); notifies "vote". False for no
        class, a student id this store did not issue (``is_student``), a slide or choice out of range, a revealed
        slide (its poll is closed), or a new voter past ``MAX_VOTERS``."""

    @abc.abstractmethod
    def votes(self, code: str, slide: int) -> dict[int, int]:
        """``slide``'s poll: choice -> number of students."""

    @abc.abstractmethod
    def answer_of(self, code: str, slide: int, student: str) -> int | None:
        """The student's current answer to ``slide``'s poll."""

    @abc.abstractmethod
    def student_secret(self) -> bytes:
        """The key that signs students' ids: the same for every store sharing this state (in process: random,
        made with the store; in Redis: made once, by whichever server asks first)."""

    def new_student(self) -> str:
        """A new student's id, signed with ``student_secret`` (``codes.new_student_id``)."""
        return codes.new_student_id(self.student_secret())

    def is_student(self, student: object) -> bool:
        """Whether ``student`` is an id issued by this store, or by one sharing its state."""
        return codes.is_student_id(student) and codes.is_signed_student_id(student, self.student_secret())

    @abc.abstractmethod
    def subscribe(self, callback: Callable[[str, str], None]) -> Callable[[], None]:
        """``callback(code, kind)`` after each change made through any store sharing this state, from any thread;
        a callback that raises is logged, never raised to whoever made the change. Returns the unsubscribe."""

    @abc.abstractmethod
    def classes(self) -> int:
        """How many classes are live now."""

    @abc.abstractmethod
    def restart(self, code: str, key: str, *, deck: str, slide: int) -> bool:
        """The class ``code`` again, led by ``key``, at ``deck``'s ``slide``, after its state was lost (Redis
        restarted empty): its teacher's page still holds both. False when the code is taken (by a class with
        another key) or malformed, or the key is unusable; True when the class already runs with this key;
        ClassesFull at the limit. Notifies "move", so that its waiting students rejoin."""

    def ping(self) -> None:  # noqa: B027 (a store in this process always answers: only a shared one overrides it)
        """Nothing when the store answers, else ``StoreUnavailable`` with the fault's sentence (the health check)."""

    def where(self) -> str:
        """Where the class state lives, for the health check."""
        return "each server's own memory: EXPLORER_REDIS_URL is not set"


def checked_position(deck: object, slide: object, controls: object) -> tuple[str, int, Controls]:
    """The teacher's position as stored (controls sorted by name), or ValueError naming what is malformed."""
    if not isinstance(deck, str) or not 0 < len(deck) <= MAX_NAME:
        raise ValueError(f"a deck is named by 1 to {MAX_NAME} characters")
    if not isinstance(controls, Mapping) or len(controls) > MAX_CONTROLS:
        raise ValueError(f"controls are a mapping of at most {MAX_CONTROLS} names to values")
    return deck, checked_slide(slide), tuple(sorted(_checked_control(*item) for item in controls.items()))


def restartable(code: object, key: object) -> str | None:
    """``code`` normalized when ``code`` and ``key`` can start a class again (``ClassStore.restart``): a code's
    shape, and a key as long as the ones the stores issue (a shorter one would lead the class with a weaker key)."""
    usable = isinstance(key, str) and MIN_KEY_LENGTH <= len(key) <= codes.MAX_KEY_LENGTH
    return codes.normalize_code(code) if usable else None


def checked_slide(slide: object) -> int:
    if not in_range(slide, 1, MAX_SLIDE):
        raise ValueError(f"a slide is a whole number from 1 to {MAX_SLIDE}")
    return int(slide)


def in_range(number: object, low: int, high: int) -> bool:
    """Whether ``number`` is a whole number (not a bool, which is an int to Python) within [low, high]."""
    return isinstance(number, numbers.Integral) and not isinstance(number, bool) and low <= number <= high


def _checked_control(name: object, value: object) -> tuple[str, int | float | None]:
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME:
        raise ValueError(f"a control is named by 1 to {MAX_NAME} characters")
    if value is None:
        return name, None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"control {name!r}: a value is a number or None")
    # NumPy's numbers become Python's, so that both stores hold (and compare) the same values.
    value = int(value) if isinstance(value, numbers.Integral) else float(value)
    if not math.isfinite(value):
        raise ValueError(f"control {name!r}: a value is a finite number")
    return name, value


_store: ClassStore | None = None
_store_lock = threading.Lock()


def class_store() -> ClassStore:
    """The process-wide store, made at first use: Redis at ``EXPLORER_REDIS_URL`` when set (StoreUnavailable when
    it does not answer, and then the next call tries again), else in process."""
    global _store
    with _store_lock:
        if _store is None:
            _store = _new_store()
        return _store


def health() -> tuple[bool, str]:
    """(whether the class store answers, a sentence saying where it is or what is wrong), for ``explorer health``
    and whoever runs the server."""
    try:
        store = class_store()
        store.ping()
    except StoreUnavailable as error:
        return False, str(error)
    return True, f"The class store ({store.where()}) answers."


def _new_store() -> ClassStore:
    max_classes = settings.number("EXPLORER_MAX_CLASSES", MAX_CLASSES)
    lifetime = 60.0 * settings.number("EXPLORER_CLASS_IDLE_MINUTES", round(LIFETIME / 60))
    url = os.environ.get("EXPLORER_REDIS_URL")
    if not url:
        from explorer.classroom.memory import InProcessStore

        return InProcessStore(max_classes=max_classes, lifetime=lifetime)
    from explorer.classroom.redis_store import RedisStore

    store = RedisStore(url, max_classes=max_classes, lifetime=lifetime)
    try:
        store.ping()
    except StoreUnavailable:
        store.close()
        raise
    return store
