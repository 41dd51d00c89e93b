"""What a browser's components send, read within bounds before Streamlit hands it to a page.

A ``st.components.v2`` component (the lecture's keys and timer, a class's student, every page's viewport probe)
sends its state and its events back as JSON text. Streamlit 1.67 parses that text with a bare ``json.loads``
(``streamlit.runtime.state.common.unpack_widget_state_value``) when it compares the widget's new value with the
old one, before the page's script starts: malformed JSON is a ``JSONDecodeError``, and 100,000 nested ``[`` a
``RecursionError``, shown to whoever sent it, on every run of theirs after, and no page code can catch either.
``guard_component_messages`` puts ``explorer.checks.message_value`` in its place for these two kinds of value:
too long, too deep or not JSON reads as no value (the component's defaults), as a page would have it.
Every other value is unpacked by Streamlit's own function. The pages then check each value's type and range
before use (``explorer.ui.lecture.read_press``).
"""

from __future__ import annotations

from streamlit.runtime.state import session_state

from explorer.checks import message_value

_JSON_FIELDS = ("json_value", "json_trigger_value")


def guard_component_messages() -> bool:
    """Read components' JSON within bounds from now on, in this process (once; later calls change nothing).
    Returns whether the guard is in place (False: this Streamlit unpacks values elsewhere, see the tests)."""
    unpack = getattr(session_state, "unpack_widget_state_value", None)
    if unpack is None:
        return False
    if getattr(unpack, "bounded", False):
        return True

    def bounded_unpack(widget_state):
        field = widget_state.WhichOneof("value")
        if field not in _JSON_FIELDS:
            return unpack(widget_state)
        text = getattr(widget_state, field)
        value = message_value(text)
        if field == "json_value":
            return value
        # A trigger's text goes on as text (its deserializer parses it again), or not at all.
        return text if value is not None else None

    bounded_unpack.bounded = True
    session_state.unpack_widget_state_value = bounded_unpack
    return True
