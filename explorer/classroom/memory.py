"""The class state in this process: the default, for one server.

One lock guards every class; a call first drops the classes whose teacher has been away past their lifetime, so
no thread is needed to end them. Subscribers are called after the lock is released, in the thread that made the
change, so a slow or failing callback never holds up another class.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from explorer.classroom import codes
from explorer.classroom.state import (
    LIFETIME,
    MAX_CHOICE,
    MAX_CLASSES,
    MAX_SLIDE,
    MAX_VOTERS,
    ClassesFull,
    ClassState,
    ClassStore,
    checked_position,
    checked_slide,
    in_range,
    restartable,
)

log = logging.getLogger(__name__)


@dataclass
class _Class:
    state: ClassState
    digest: str  # of the teacher's key
    expires: float  # on the store's clock
    polls: dict[int, dict[str, int]] = field(default_factory=dict)  # slide -> student -> choice


class InProcessStore(ClassStore):
    def __init__(self, max_classes: int = MAX_CLASSES, lifetime: float = LIFETIME, clock=time.monotonic):
        self.max_classes, self.lifetime, self.clock = max_classes, lifetime, clock
        self._classes: dict[str, _Class] = {}
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[str, str], None]] = []
        self._student_secret = secrets.token_bytes(32)  # this process's: a restart issues students new ids

    def start(self, deck: str, slide: int = 1) -> tuple[str, str]:
        deck, slide, controls = checked_position(deck, slide, {})
        key = codes.new_key()
        with self._lock:
            self._drop_expired()
            if len(self._classes) >= self.max_classes:
                raise ClassesFull(len(self._classes), lifetime=self.lifetime)
            code = self._unused_code()
            state = ClassState(code, deck, slide, controls, frozenset(), 0)
            self._classes[code] = _Class(state, codes.key_digest(key), self.clock() + self.lifetime)
        return code, key

    def state(self, code: str) -> ClassState | None:
        with self._lock:
            live = self._live(code)
            return live.state if live else None

    def is_teacher(self, code: str, key: str | None) -> bool:
        with self._lock:
            live = self._live(code)
            return codes.key_matches(key, live.digest if live else None) and live is not None

    def move(self, code: str, key: str | None, *, deck: str, slide: int, controls: Mapping[str, object]) -> bool:
        deck, slide, controls = checked_position(deck, slide, controls)
        with self._lock:
            live = self._taught(code, key)
            if live is None:
                return False
            moved = (deck, slide, controls) != (live.state.deck, live.state.slide, live.state.controls)
            if moved:
                self._change(live, deck=deck, slide=slide, controls=controls)
        if moved:
            self._notify(live.state.code, "move")
        return True

    def reveal(self, code: str, key: str | None, slide: int) -> bool:
        slide = checked_slide(slide)
        with self._lock:
            live = self._taught(code, key)
            if live is None:
                return False
            revealing = slide not in live.state.revealed
            if revealing:
                self._change(live, revealed=live.state.revealed | {slide})
        if revealing:
            self._notify(live.state.code, "move")
        return True

    def end(self, code: str, key: str | None) -> bool:
        with self._lock:
            live = self._taught(code, key)
            if live is None:
                return False
            del self._classes[live.state.code]
        self._notify(live.state.code, "end")
        return True

    def keep_alive(self, code: str, key: str | None) -> bool:
        with self._lock:
            return self._taught(code, key) is not None

    def vote(self, code: str, slide: int, student: str, choice: int) -> bool:
        if not (in_range(slide, 1, MAX_SLIDE) and in_range(choice, 0, MAX_CHOICE) and self.is_student(student)):
            return False
        with self._lock:
            live = self._live(code)
            if live is None or slide in live.state.revealed:
                return False
            poll = live.polls.setdefault(int(slide), {})
            if student not in poll and len(poll) >= MAX_VOTERS:
                return False
            poll[student] = int(choice)
        self._notify(live.state.code, "vote")
        return True

    def votes(self, code: str, slide: int) -> dict[int, int]:
        with self._lock:
            live = self._live(code)
            answers = list(live.polls.get(slide, {}).values()) if live and in_range(slide, 1, MAX_SLIDE) else []
        counts: dict[int, int] = {}
        for choice in answers:
            counts[choice] = counts.get(choice, 0) + 1
        return counts

    def answer_of(self, code: str, slide: int, student: str) -> int | None:
        with self._lock:
            live = self._live(code)
            if live is None or not in_range(slide, 1, MAX_SLIDE) or not codes.is_student_id(student):
                return None
            return live.polls.get(slide, {}).get(student)

    def student_secret(self) -> bytes:
        return self._student_secret

    def subscribe(self, callback: Callable[[str, str], None]) -> Callable[[], None]:
        with self._lock:
            self._callbacks.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._callbacks:
                    self._callbacks.remove(callback)

        return unsubscribe

    def classes(self) -> int:
        with self._lock:
            self._drop_expired()
            return len(self._classes)

    def restart(self, code: str, key: str, *, deck: str, slide: int) -> bool:
        deck, slide, controls = checked_position(deck, slide, {})
        code = restartable(code, key)
        if code is None:
            return False
        with self._lock:
            live = self._live(code)
            if live is not None:  # running already: with this key (a second tab restarted it), or another's
                return codes.key_matches(key, live.digest)
            if len(self._classes) >= self.max_classes:
                raise ClassesFull(len(self._classes), lifetime=self.lifetime)
            state = ClassState(code, deck, slide, controls, frozenset(), 0)
            self._classes[code] = _Class(state, codes.key_digest(key), self.clock() + self.lifetime)
        self._notify(code, "move")
        return True

    # Below: called with the lock held, except _notify.

    def _drop_expired(self) -> None:
        now = self.clock()
        for code in [code for code, live in self._classes.items() if live.expires <= now]:
            del self._classes[code]

    def _live(self, code: str) -> _Class | None:
        self._drop_expired()
        code = codes.normalize_code(code)
        return self._classes.get(code) if code else None

    def _taught(self, code: str, key: str | None) -> _Class | None:
        """The live class when ``key`` is its teacher's, its lifetime started again; else None."""
        live = self._live(code)
        # The key is compared even when there is no class, so that a wrong code answers as a wrong key does.
        if not codes.key_matches(key, live.digest if live else None) or live is None:
            return None
        live.expires = self.clock() + self.lifetime
        return live

    def _change(self, live: _Class, **changes) -> None:
        live.state = dataclasses.replace(live.state, **changes, moves=live.state.moves + 1)

    def _unused_code(self) -> str:
        while (code := codes.new_code()) in self._classes:
            pass
        return code

    def _notify(self, code: str, kind: str) -> None:
        with self._lock:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            try:
                callback(code, kind)
            except Exception:
                log.exception("a class subscriber failed on %s %s", code, kind)
