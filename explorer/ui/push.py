"""Reruns pushed to the sessions that follow a class: a teacher's move reaches forty students in tens of
milliseconds, and an idle class costs the server nothing.

The alternative, every student's page asking the server twice a second whether the slide changed (a fragment
with ``run_every``), cost 8.5% of a core for forty idle students and a median 268 ms per move on this project's
machines; pushing costs ~0.4% idle and 41 ms (../shared/notes/streamlit.md). Streamlit has no public way for one
session to rerun another, so this asks each follower's ``AppSession`` for a rerun on the server's event loop,
with the client state its browser last sent (its page and query), as Streamlit itself does when a source file
changes. Three things are changed in that state first:

- trigger values are taken out (a button's click is sent once, for one run: resent, a click on "Start a class"
  would start a second class),
- the fragment id is the follower's slide fragment (``follow(name, fragment=KEY)``, an ``st.fragment(key=KEY)``),
  where the session holds one: the rerun runs that fragment alone, not the app around it (the shell, menu and
  sidebar: about half of a follower's run); else none, for a full run (the follower's last run may have been
  another fragment's),
- the auto-rerun flag is cleared.

Only the Streamlit these were written against is used (``PATCHED_VERSION``): with another, ``available()`` is
False and followers poll instead (``explorer.ui.classroom``).
"""

from __future__ import annotations

import logging
import threading

import streamlit
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

PATCHED_VERSION = "1.67."  # the Streamlit whose AppSession.request_rerun, _client_state, _fragment_storage these use
_TRIGGERS = ("trigger_value", "json_trigger_value", "string_trigger_value")
_lock = threading.Lock()
# What this server's sessions follow: name (a class) -> {session id: (the page it followed from, the key of the
# fragment a move reruns, "" for a full run)}
_followers: dict[str, dict[str, tuple[str, str]]] = {}
_log = logging.getLogger(__name__)


def available() -> bool:
    """Whether pushing works here: the known Streamlit, and a running server (``AppTest`` has none)."""
    return streamlit.__version__.startswith(PATCHED_VERSION) and Runtime.exists()


def follow(name: str, *, fragment: str = "") -> bool:
    """This session reruns whenever ``notify(name)`` is called: the fragment keyed ``fragment`` alone once the
    session has drawn it, else the whole page. False where pushing is not available."""
    context = get_script_run_ctx()
    if context is None or not available():
        return False
    with _lock:
        _followers.setdefault(name, {})[context.session_id] = (context.page_script_hash, fragment)
    return True


def unfollow(name: str) -> None:
    """This session stops following ``name`` (detached, or on another page)."""
    context = get_script_run_ctx()
    if context is None:
        return
    with _lock:
        sessions = _followers.get(name)
        if sessions is not None:
            sessions.pop(context.session_id, None)
            if not sessions:
                del _followers[name]


def followers(name: str) -> int:
    """How many of this server's sessions follow ``name``."""
    with _lock:
        return len(_followers.get(name, ()))


def notify(name: str) -> int:
    """Rerun every session of this server that follows ``name``; returns how many were asked. Sessions that
    have gone (a closed tab) or moved to another page are forgotten. Safe from any thread."""
    with _lock:
        sessions = list(_followers.get(name, {}).items())
    if not sessions or not available():
        return 0
    runtime = Runtime.instance()
    gone = []
    for session_id, (page, fragment) in sessions:
        session = runtime.get_app_session(session_id)
        if session is None or session._client_state.page_script_hash not in ("", page):
            gone.append(session_id)
            continue
        session._event_loop.call_soon_threadsafe(_rerun, session, page, fragment)
    if gone:
        with _lock:
            for session_id in gone:
                _followers.get(name, {}).pop(session_id, None)
    return len(sessions) - len(gone)


def notify_all() -> int:
    """``notify`` for every name this server's sessions follow: their classes may be gone (Redis came back
    empty), and each follower's page then finds out. Returns how many were asked."""
    with _lock:
        names = list(_followers)
    return sum(notify(name) for name in names)


def _rerun(session, page: str, fragment: str) -> None:
    """On the event loop (where ``AppSession`` lives): a run of ``page`` with the browser's last state, clicks
    left out, of the fragment keyed ``fragment`` where the session holds it, else of the whole page."""
    try:
        session.request_rerun(fresh_state(session._client_state, page=page, fragment=fragment_id(session, fragment)))
    except Exception:  # a session closing meanwhile: nothing to rerun
        _log.debug("a pushed rerun failed", exc_info=True)


def fragment_id(session, key: str) -> str:
    """The id of the session's fragment keyed ``key`` (its last full run drew it), else "" (a full run: Streamlit
    drops a rerun of a fragment it no longer holds)."""
    if not key:
        return ""
    try:
        ids = session._fragment_storage.resolve_target(key)
    except Exception:  # never drawn in this session (its last full run had no such fragment)
        return ""
    return ids[0] if len(ids) == 1 else ""


def fresh_state(sent: ClientState, *, page: str = "", fragment: str = "") -> ClientState:
    """A copy of a browser's last ``ClientState`` for a rerun nobody clicked: no triggers; the fragment
    ``fragment`` alone, or (by default) the whole page. ``page``: the page's script hash where the browser has
    not named one (a page opened by name): a fragment's ``st.rerun(scope="app")`` reruns the page its run names,
    and without one, the app's first page."""
    state = ClientState()
    state.CopyFrom(sent)
    state.fragment_id = fragment
    state.page_script_hash = sent.page_script_hash or page
    state.is_auto_rerun = False
    kept = [widget for widget in state.widget_states.widgets if widget.WhichOneof("value") not in _TRIGGERS]
    del state.widget_states.widgets[:]
    state.widget_states.widgets.extend(kept)
    return state
