"""Reruns pushed to the sessions that follow a class: a teacher's move reaches forty students in tens of
milliseconds, and an idle class costs the server nothing.

The alternative, every student's page asking the server twice a second whether the slide changed (a fragment
with ``run_every``), cost 8.5% of a core for forty idle students and a median 268 ms per move on this project's
machines; pushing costs ~0.4% idle and 41 ms (../shared/notes/streamlit.md). Streamlit has no public way for one
session to rerun another, so this asks each follower's ``AppSession`` for a rerun on the server's event loop,
with the client state its browser last sent (its page and query), as Streamlit itself does when a source file
changes. Three things are taken out of that state first:

- trigger values (a button's click is sent once, for one run: resent, a click on "Start a class" would start
  a second class),
- the fragment id (the follower's last run may have been a fragment's: the new slide needs a full run),
- the auto-rerun flag.

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

PATCHED_VERSION = "1.67."  # the Streamlit whose AppSession.request_rerun and _client_state these use
_TRIGGERS = ("trigger_value", "json_trigger_value", "string_trigger_value")
_lock = threading.Lock()
# What this server's sessions follow: name (a class) -> {session id: the page it followed from}
_followers: dict[str, dict[str, str]] = {}
_log = logging.getLogger(__name__)


def available() -> bool:
    """Whether pushing works here: the known Streamlit, and a running server (``AppTest`` has none)."""
    return streamlit.__version__.startswith(PATCHED_VERSION) and Runtime.exists()


def follow(name: str) -> bool:
    """This session reruns whenever ``notify(name)`` is called; False where pushing is not available."""
    context = get_script_run_ctx()
    if context is None or not available():
        return False
    with _lock:
        _followers.setdefault(name, {})[context.session_id] = context.page_script_hash
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
    for session_id, page in sessions:
        session = runtime.get_app_session(session_id)
        if session is None or session._client_state.page_script_hash not in ("", page):
            gone.append(session_id)
            continue
        session._event_loop.call_soon_threadsafe(_rerun, session)
    if gone:
        with _lock:
            for session_id in gone:
                _followers.get(name, {}).pop(session_id, None)
    return len(sessions) - len(gone)


def _rerun(session) -> None:
    """On the event loop (where ``AppSession`` lives): a full run with the browser's last state, clicks left out."""
    try:
        session.request_rerun(fresh_state(session._client_state))
    except Exception:  # a session closing meanwhile: nothing to rerun
        _log.debug("a pushed rerun failed", exc_info=True)


def fresh_state(sent: ClientState) -> ClientState:
    """A copy of a browser's last ``ClientState`` for a rerun nobody clicked: no triggers, no fragment."""
    state = ClientState()
    state.CopyFrom(sent)
    state.fragment_id = ""
    state.is_auto_rerun = False
    kept = [widget for widget in state.widget_states.widgets if widget.WhichOneof("value") not in _TRIGGERS]
    del state.widget_states.widgets[:]
    state.widget_states.widgets.extend(kept)
    return state
