"""Small widgets shared by the pages, each bound to the URL so that a link restores the exact view.

Every function draws its widgets and returns plain values. Values that arrive in a link are checked
before a widget sees them: Streamlit would silently replace a bad one with the default, and a teacher's
link must either show what it says or say why not.

Indices (layer, head, step...) remember what was asked for: an index that does not fit the model now
loaded is clamped with a notice, and comes back when a model where it fits is loaded again.
"""

from __future__ import annotations

import streamlit as st

from explorer.ui.text import literal

PAIR_HINT = "e.g. a question, as in BERT's sentence pairs"
TARGET_HINT = "add it to see decoder self-attention and cross-attention"
STACK_LABELS = {"encoder": "Encoder self-attention", "decoder": "Decoder self-attention", "cross": "Cross-attention"}
MAX_TEXT_CHARS = 20_000
_WANTED = "_wanted_indices"  # {widget key: the index the user or the link asked for}
_NOTICES = "_notices"  # messages about the link, shown once by ``notices_ui``


def text_inputs_ui(kind: str, default_text: str, *, compact: bool = False) -> tuple[str, str | None, str | None]:
    """The text, plus a second segment for encoders or the decoder's text for encoder-decoders.

    Returns (text, text_pair, target), the last two None when empty (or only spaces) or not offered.
    All live in the URL. ``compact`` puts them behind a small button (presentation mode).
    """
    label = f"Text: {literal(_preview(st.session_state.get('text', default_text)))}"
    with st.popover(label, width="stretch") if compact else st.container():
        if kind == "decoder":
            return _text_area("Text", key="text", value=default_text), None, None
        text_column, extra_column = st.columns([3, 2])
        with text_column:
            text = _text_area("Text", key="text", value=default_text)
        with extra_column:
            if kind == "encoder":
                pair = _text_area("Second segment (optional)", key="pair", placeholder=PAIR_HINT)
                return text, pair if pair.strip() else None, None
            target = _text_area("Decoder text (target)", key="target", placeholder=TARGET_HINT)
            return text, None, target if target.strip() else None


def _preview(text: str, limit: int = 48) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _text_area(label: str, *, key: str, value: str = "", placeholder: str | None = None, height: int = 80) -> str:
    return st.text_area(
        label, value, key=key, bind="query-params", height=height, max_chars=MAX_TEXT_CHARS, placeholder=placeholder
    )


def index_slider_ui(
    label: str, count: int, *, key: str, help: str | None = None, default_last: bool = False
) -> int:
    """A 0-based index slider bound to the URL.

    An index that does not fit ``count`` (a link to head 9 of a model with 2 heads) is clamped with a
    notice and remembered, so it comes back when a model where it fits is loaded again. With
    ``default_last``, an index nobody chose follows the last one (a replay slider that starts at the end).
    """
    wanted = st.session_state.setdefault(_WANTED, {})
    if key not in wanted:
        wanted[key] = _index_from_link(label, key, None if default_last else 0)
    asked = wanted[key] if wanted[key] is not None else count - 1
    if count <= 1:
        return 0
    shown = min(asked, count - 1)
    if asked >= count:
        add_notice(
            f"{label} {asked} does not exist here ({count} {label.lower()}s, 0–{count - 1}): showing "
            f"{label.lower()} {shown}. It comes back when a model that has it is loaded."
        )
    if st.session_state.get(key) != shown:
        st.session_state[key] = shown
    return st.slider(
        label, 0, count - 1, key=key, bind="query-params", help=help, on_change=_remember, args=(key,)
    )


def _remember(key: str) -> None:
    st.session_state.setdefault(_WANTED, {})[key] = st.session_state[key]


def _index_from_link(label: str, key: str, default: int | None = 0) -> int | None:
    """The index a link asks for (``default`` when it asks for none), with a notice when it is not a number."""
    raw = st.query_params.get(key)
    if raw is None:
        return st.session_state.get(key, default)
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        add_notice(f"The link's {label.lower()} `{literal(raw[:40])}` is not a valid index: showing {label.lower()} 0.")
        st.query_params.pop(key, None)
        return 0
    return value


def toggle_ui(label: str, *, key: str, help: str | None = None) -> bool:
    """A toggle bound to the URL ("true"/"false"); anything else in a link is ignored with a notice."""
    raw = st.query_params.get(key)
    if raw is not None and raw.lower() not in ("true", "false"):
        add_notice(f"The link's `{key}={literal(raw[:40])}` is not true or false: ignored.")
        st.query_params.pop(key, None)
    return st.toggle(label, key=key, bind="query-params", help=help)


def number_slider_ui(
    label: str,
    low: float,
    high: float,
    default: float,
    *,
    key: str,
    step: float,
    help: str | None = None,
    format: str | None = None,
) -> float:
    """A bounded number (temperature, top-p, beams, steps...) bound to the URL; ints when all bounds are ints.

    A link's value outside [low, high] is clamped with a notice; one that is not a number is replaced by
    the default with a notice. The bounds are visible on the slider, so a class cannot stall a server.
    """
    integer = all(isinstance(v, int) for v in (low, high, default, step))
    cast = int if integer else float
    raw = st.query_params.get(key)
    if raw is not None and key not in st.session_state:
        try:
            value = cast(float(raw)) if integer else float(raw)
            if value != value:  # NaN
                raise ValueError
        except ValueError:
            add_notice(f"The link's {label.lower()} `{literal(raw[:40])}` is not a number: using {default}.")
            value = default
        clamped = cast(min(max(value, low), high))
        if clamped != value:
            add_notice(f"The link's {label.lower()} {literal(raw[:40])} is outside {low}–{high}: using {clamped}.")
        st.session_state[key] = clamped
        if str(clamped) != raw:  # the URL says what is shown (a value set in code does not update it by itself)
            st.query_params[key] = str(clamped)
    if key not in st.session_state:
        st.session_state[key] = cast(default)
    return st.slider(
        label, cast(low), cast(high), step=cast(step), key=key, bind="query-params", help=help, format=format
    )


def choice_ui(
    label: str,
    options: list[str],
    *,
    key: str,
    default: str | None = None,
    captions: dict[str, str] | None = None,
    horizontal: bool = True,
    help: str | None = None,
) -> str:
    """One of a few options, as a radio bound to the URL; an unknown option in a link gives a notice.

    Options are shown as they are and are what the URL carries (Streamlit binds a radio by its displayed
    text), so keep them short words; ``captions`` explain each under it.
    """
    raw = st.query_params.get(key)
    if raw is not None and raw not in options:
        add_notice(f"The link's {label.lower()} `{literal(raw[:40])}` is not one of the choices: ignored.")
        st.query_params.pop(key, None)
    elif raw is not None and key not in st.session_state:
        st.session_state[key] = raw  # the link's choice, checked
    if st.session_state.get(key) not in options:
        st.session_state[key] = default if default in options else options[0]
    return st.radio(
        label,
        options,
        key=key,
        bind="query-params",
        horizontal=horizontal,
        help=help,
        captions=[captions.get(option, "") for option in options] if captions else None,
    )


def text_ui(label: str, default: str, *, key: str, height: int = 80, placeholder: str | None = None) -> str:
    """A text (a prompt) bound to the URL."""
    return _text_area(label, key=key, value=default, placeholder=placeholder) if height else st.text_input(
        label, default, key=key, bind="query-params", max_chars=MAX_TEXT_CHARS, placeholder=placeholder
    )


def stack_ui(stack_names: list[str], *, key: str = "stack") -> str:
    """Which attention to show when a capture has several stacks (encoder, decoder, cross)."""
    if len(stack_names) == 1:
        return stack_names[0]
    return choice_ui(
        "Attention",
        stack_names,
        key=key,
        captions={name: STACK_LABELS.get(name, "") for name in stack_names},
        help="Encoder self-attention, decoder self-attention, or the decoder's cross-attention to the encoder.",
    )


def add_notice(message: str) -> None:
    """Queue a message about the view (clamped or ignored link values) for ``notices_ui``."""
    notices = st.session_state.setdefault(_NOTICES, [])
    if message not in notices:
        notices.append(message)


def notices_ui() -> None:
    """Show and clear the queued notices (call it once per page, after the widgets)."""
    for message in st.session_state.pop(_NOTICES, []):
        st.info(message, icon=":material/info:")
