"""Small widgets shared by the pages, each kept in the URL so that a link restores the exact view.

Every function draws its widget and returns a plain value. One mechanism serves them all:

1. **Resolve** the value: the one this session last chose (remembered across pages and reruns), else
   the link's (checked: a bad value gives a notice, never a traceback; Streamlit would silently drop
   it), else the default.
2. **Set** it into the widget's state, then draw the widget with no value of its own.
3. **Write** it into the URL (left out when it is the default, to keep links short).

The app writes the URL itself rather than binding widgets with ``bind="query-params"`` (checked in Chromium
with Streamlit 1.67): a bound widget drops a link's value it cannot use without a word (``?layer=9`` on a
6-layer model and ``?layer=abc`` both give layer 0 and no message), and forgets what the link asked for when
the model changes (layer 9 of a 12-layer model becomes 0, not 5, on a 6-layer one, and stays 0 when the
12-layer model comes back). A class following a teacher's link must be told when the link does not fit, and
get the nearest view.

Indices (layer, head, step...) remember what was asked for: an index that does not fit the model now
loaded is clamped with a notice, and comes back when a model where it fits is loaded again. Texts longer
than ``LINK_TEXT_CHARS`` are cut in the link (the server refuses request lines over ~16 kB), with a note.
"""

from __future__ import annotations

import streamlit as st

from explorer import DEFAULT_SEQ2SEQ
from explorer.data.attention import STACK_LABELS
from explorer.hosting import POLICY
from explorer.ui.text import literal

PAIR_HINT = "e.g. a question, as in BERT's sentence pairs"
# Models that only read one kind of text (the bundled date converter) start from an input and target of theirs.
EXAMPLES = {DEFAULT_SEQ2SEQ: ("Thursday, March 5, 2021", "2021-03-05")}
TARGET_HINT = "add it to see decoder self-attention and cross-attention"
MAX_TEXT_CHARS = POLICY.max_text_chars  # 20,000 locally, 2,000 on a hosted class server
LINK_TEXT_CHARS = 4_000  # a URL-encoded text this long stays well under the server's ~16 kB request line
_VALUES = "_widget_values"  # {widget key: the value this session last chose or was linked to}
_NOTICES = "_notices"  # messages about the link, shown once by ``notices_ui``
_MISSING = object()


def _remembered(key: str):
    return st.session_state.setdefault(_VALUES, {}).get(key, _MISSING)


def _remember(key: str, value) -> None:
    st.session_state.setdefault(_VALUES, {})[key] = value


def _keep(key: str, value, default) -> None:
    """Remember a value the visitor chose or a link gave; a page's own default is not carried to the next page,
    so every page starts from its own defaults however the visitor arrived (a direct link or another page)."""
    if value != default or _remembered(key) is not _MISSING:
        _remember(key, value)


def _on_change(key: str) -> None:
    _remember(key, st.session_state[key])


def _write_url(key: str, text: str | None) -> None:
    """Put ``key=text`` in the URL (or take ``key`` out when ``text`` is None), only when it changes."""
    if text is None:
        if key in st.query_params:
            del st.query_params[key]
    elif st.query_params.get(key) != text:
        st.query_params[key] = text


def _from_link(key: str, parse, label: str):
    """The link's value for ``key`` parsed (``_MISSING`` when the link has none or it does not parse)."""
    raw = st.query_params.get(key)
    if raw is None:
        return _MISSING
    try:
        return parse(raw)
    except ValueError as problem:
        add_notice(f"The link's {label.lower()} “{literal(raw[:40])}” {problem}: ignored.")
        return _MISSING


def _resolve(key: str, parse, default, label: str):
    value = _remembered(key)
    if value is _MISSING:
        value = _from_link(key, parse, label)
    return default if value is _MISSING else value


# -- texts ------------------------------------------------------------------------------------------------


def text_inputs_ui(
    kind: str, default_text: str, *, compact: bool = False, slot=None, model_name: str | None = None
) -> tuple[str, str | None, str | None]:
    """The text, plus a second segment for encoders or the decoder's text for encoder-decoders.

    Returns (text, text_pair, target), the last two None when empty (or only spaces) or not offered.
    All live in the URL. ``compact`` puts them behind a small button (presentation mode), drawn in ``slot``
    (the container ``page_header`` returns) when given. A model with its own example (``EXAMPLES``) starts
    from that text and target instead of ``default_text``.
    """
    default_text, default_target = EXAMPLES.get(model_name, (default_text, ""))
    label = f"Text: {literal(_preview(_resolve('text', str, default_text, 'text')))}"
    with slot if slot is not None else st.container():
        box = _texts_popover(label) if compact else st.container()
    # A closed popover draws no text boxes. Drawn there, a box the browser has not mounted keeps the value it
    # last showed and sends it back on the next run, undoing a value set from code (a preset's text came back
    # as the old one in presentation mode, issue 27); not drawn, it has no value to send back.
    field = text_ui if not compact or box.open else stored_text
    with box:
        if kind == "decoder":
            return field("Text", default_text, key="text"), None, None
        text_column, extra_column = st.columns([3, 2])
        with text_column:
            text = field("Text", default_text, key="text")
        with extra_column:
            if kind == "encoder":
                pair = field("Second segment (optional)", "", key="pair", placeholder=PAIR_HINT)
                return text, pair if pair.strip() else None, None
            target = field("Decoder text (target)", default_target, key="target", placeholder=TARGET_HINT)
            return text, None, target if target.strip() else None


_TEXTS_POPOVER = "texts"
_TEXTS_OPEN = "_texts_open"


def _texts_popover(label: str):
    """The text inputs' popover, which reruns the page when it opens or closes. Streamlit tells popovers apart
    by their labels, and this one shows the text: whether it is open is carried over to the next text here."""
    st.session_state[_TEXTS_POPOVER] = st.session_state.get(_TEXTS_OPEN, False)
    return st.popover(label, width="stretch", key=_TEXTS_POPOVER, on_change=_remember_texts_open)


def _remember_texts_open() -> None:
    st.session_state[_TEXTS_OPEN] = bool(st.session_state[_TEXTS_POPOVER])


def _preview(text: str, limit: int = 48) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def text_ui(label: str, default: str, *, key: str, height: int | None = 80, placeholder: str | None = None) -> str:
    """A text (a prompt, a sentence; one line when ``height`` is None) kept in the URL; a text too long for a
    link is cut there, with a note."""
    value = _resolve(key, str, default, label)[:MAX_TEXT_CHARS]
    st.session_state[key] = value
    widget = st.text_input if height is None else st.text_area
    sizing = {} if height is None else {"height": height}
    text = widget(
        label,
        key=key,
        max_chars=MAX_TEXT_CHARS,
        placeholder=placeholder,
        on_change=_on_change,
        args=(key,),
        **sizing,
    )
    _keep_text(key, text, default)
    if len(text) > LINK_TEXT_CHARS:
        st.caption(
            f"This text is too long for a link: the page's link keeps its first {LINK_TEXT_CHARS:,} characters "
            f"(of {len(text):,})."
        )
    return text


def stored_text(label: str, default: str, *, key: str, placeholder: str | None = None) -> str:
    """The text ``text_ui`` would show, without its box (a closed popover's): remembered and in the URL."""
    text = _resolve(key, str, default, label)[:MAX_TEXT_CHARS]
    _keep_text(key, text, default)
    return text


def _keep_text(key: str, text: str, default: str) -> None:
    _keep(key, text, default)
    _write_url(key, None if text == default else text[:LINK_TEXT_CHARS])


# -- numbers and indices ------------------------------------------------------------------------------------


def _index(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ValueError("is not a whole number") from None
    if value < 0:
        raise ValueError("is not a valid index (they count from 0)")
    return value


def index_slider_ui(
    label: str,
    count: int,
    *,
    key: str,
    help: str | None = None,
    default_last: bool = False,
    first: int = 0,
    default: int | None = None,
) -> int:
    """A slider over ``count`` positions kept in the URL; returns the 0-based index.

    Layers, heads and tokens are numbered from 0 (as in code); steps from 1 (``first=1``: "step 1" is the
    first generated token, as in every title and table). The slider and the URL show the numbers. A number
    that does not fit ``count`` (a link to head 9 of a model with 2 heads) is clamped with a notice and
    remembered, so it comes back when a model where it fits is loaded again. With ``default_last``, a value
    nobody chose follows the last one (a replay slider that starts at the end). ``default``: the number shown
    when nobody chose one (a lecture slide's head 8), else ``first``.
    """
    default = first if default is None else default
    asked = _resolve(key, _index, None if default_last else default, label)
    _remember(key, asked)
    last = count - 1 + first
    shown = last if asked is None else min(max(asked, first), max(last, first))
    if asked is not None and asked > last:
        add_notice(
            f"{label} {asked} does not exist here ({count} {label.lower()}s, {first}–{last}): showing "
            f"{label.lower()} {shown}. It comes back when a model that has it is loaded."
        )
    _write_url(key, None if asked in (None, default) else str(asked))
    if count <= 1:
        return 0
    st.session_state[key] = shown
    return st.slider(label, first, last, key=key, help=help, on_change=_on_change, args=(key,)) - first


def layer_slider_ui(stack, *, key: str, help: str | None = None) -> int:
    """``index_slider_ui`` over the layers of ``stack`` (an ``AttentionStack``); returns the 0-based index into it.
    Where some of the model's layers are left out (Funnel's pooled layers: ``stack.layer_numbers``), the slider and
    the URL show the model's own layer numbers; a number not shown here falls back to the first with a notice."""
    if stack.layer_numbers is None:
        return index_slider_ui("Layer", stack.num_layers, key=key, help=help)
    numbers = [int(number) for number in stack.layer_numbers]
    asked = _resolve(key, _index, numbers[0], "Layer")
    _remember(key, asked)
    shown = asked if asked in numbers else numbers[0]
    if asked != shown:
        add_notice(
            f"Layer {asked} is not shown for this model (its layers shown: {', '.join(map(str, numbers))}): showing "
            f"layer {shown}. It comes back when a model that has it is loaded."
        )
    _write_url(key, None if shown == numbers[0] else str(shown))
    if len(numbers) <= 1:
        return 0
    st.session_state[key] = shown
    chosen = st.select_slider("Layer", numbers, key=key, help=help, on_change=_on_change, args=(key,))
    return numbers.index(chosen)


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
    """A bounded number (temperature, top-p, beams, steps...) kept in the URL; ints when all bounds are ints.

    A link's value outside [low, high] is clamped with a notice; one that is not a number is ignored with a
    notice. The bounds are visible on the slider, so a class cannot stall a server.
    """
    integer = all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high, default, step))
    cast = int if integer else float

    def parse(raw: str):
        try:
            value = float(raw)
        except ValueError:
            raise ValueError("is not a number") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("is not a number")
        clamped = cast(min(max(value, low), high))
        if clamped != value:
            add_notice(f"The link's {label.lower()} {literal(raw[:40])} is outside {low}–{high}: using {clamped}.")
        return clamped

    value = cast(min(max(_resolve(key, parse, default, label), low), high))
    st.session_state[key] = value
    shown = st.slider(
        label,
        cast(low),
        cast(high),
        step=cast(step),
        key=key,
        help=help,
        format=format,
        on_change=_on_change,
        args=(key,),
    )
    _keep(key, shown, default)
    _write_url(key, None if shown == default else _number_text(shown))
    return shown


def _number_text(value) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


# -- choices and switches ------------------------------------------------------------------------------------


def _true_or_false(raw: str) -> bool:
    if raw.lower() not in ("true", "false"):
        raise ValueError("is not true or false")
    return raw.lower() == "true"


def toggle_ui(label: str, *, key: str, help: str | None = None, default: bool = False) -> bool:
    """A toggle kept in the URL as true/false; anything else in a link is ignored with a notice."""
    st.session_state[key] = bool(_resolve(key, _true_or_false, default, label))
    value = st.toggle(label, key=key, help=help, on_change=_on_change, args=(key,))
    _remember(key, value)
    _write_url(key, None if value == default else str(value).lower())
    return value


def expander_ui(label: str, *, key: str, icon: str | None = None):
    """A section whose content runs only while it is open (Streamlit's lazy expander: what it computes costs
    nothing closed), kept in the URL as ``key=true`` while open. Draw into it only when ``.open``."""
    st.session_state[key] = bool(_resolve(key, _true_or_false, False, label))
    section = st.expander(label, key=key, icon=icon, on_change=_on_change, args=(key,))
    _remember(key, section.open)
    _write_url(key, "true" if section.open else None)
    return section


def views_ui(views: dict[str, str], *, key: str) -> str:
    """Which of a page's views to draw, one at a time: a segmented control, ``views`` mapping each view's word in
    the URL to its label; the first is the default and leaves the URL, another is kept as ``key=word``, and an
    unknown word in a link is ignored with a notice. Only the chosen view is drawn, so a hidden figure costs a
    slider move nothing (a class of forty moves the sliders at once). In presentation mode it sits in the header
    row (``shell.picker``), leaving the window's height to the figure."""
    words = list(views)

    def parse(raw: str) -> str:
        if raw not in views:
            raise ValueError("is not one of the views")
        return raw

    from explorer.ui.shell import picker  # the shell imports this module

    value = _resolve(key, parse, words[0], "view")
    st.session_state[key] = value if value in views else words[0]  # a value remembered from another page's views
    with picker():
        chosen = st.segmented_control(
            "View",
            words,
            key=key,
            required=True,
            format_func=views.get,
            label_visibility="collapsed",
            on_change=_on_change,
            args=(key,),
        )
    _keep(key, chosen, words[0])
    _write_url(key, None if chosen == words[0] else chosen)
    return chosen


def choice_ui(
    label: str,
    options: list[str],
    *,
    key: str,
    default: str | None = None,
    captions: dict[str, str] | None = None,
    horizontal: bool = True,
    help: str | None = None,
    labels: dict[str, str] | None = None,
) -> str:
    """One of a few options, as a radio kept in the URL; an unknown option in a link gives a notice.

    Options are short words carried by the URL and shown as they are, or as ``labels`` names them (the name the
    page's tables use); ``captions`` explain each under it.
    """
    default = default if default in options else options[0]

    def parse(raw: str) -> str:
        if raw not in options:
            raise ValueError("is not one of the choices")
        return raw

    value = _resolve(key, parse, default, label)
    st.session_state[key] = value if value in options else default
    chosen = st.radio(
        label,
        options,
        key=key,
        horizontal=horizontal,
        help=help,
        captions=[captions.get(option, "") for option in options] if captions else None,
        format_func=lambda option: (labels or {}).get(option, option),
        on_change=_on_change,
        args=(key,),
    )
    _remember(key, chosen)
    _write_url(key, None if chosen == default else chosen)
    return chosen


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


def heads_ui(
    label: str, num_layers: int, num_heads: int, *, key: str, help: str | None = None, layer_numbers=None
) -> tuple:
    """A set of (layer, head) pairs kept in the URL as ``0.2,3.1``; heads the model lacks are left out with a
    notice and remembered, like an index (they come back with a model that has them). ``layer_numbers``: the
    model's own number of each layer, where the layers counted are only some of its layers (a hybrid's with
    attention): the choices are named by them; the pairs and the URL stay indices."""
    named = (lambda layer: layer) if layer_numbers is None else (lambda layer: layer_numbers[int(layer)])

    def parse(raw: str) -> tuple:
        pairs = []
        for item in filter(None, raw.split(",")):
            layer, dot, head = item.partition(".")
            if not dot:
                raise ValueError("is not a list of layer.head pairs (like 0.2,3.1)")
            pairs.append((_index(layer), _index(head)))
        return tuple(sorted(set(pairs)))

    asked = _resolve(key, parse, (), label)
    _remember(key, asked)
    fits = tuple(pair for pair in asked if pair[0] < num_layers and pair[1] < num_heads)
    if len(fits) < len(asked):
        missing = ", ".join(f"{layer}.{head}" for layer, head in asked if (layer, head) not in fits)
        add_notice(f"{label}: {missing} do not exist here ({num_layers} layers × {num_heads} heads): left out.")
    options = [f"{layer}.{head}" for layer in range(num_layers) for head in range(num_heads)]
    st.session_state[key] = [f"{layer}.{head}" for layer, head in fits]
    chosen = st.multiselect(
        label,
        options,
        key=key,
        help=help,
        format_func=lambda option: "layer {} · head {}".format(named(option.split(".")[0]), option.split(".")[1]),
        placeholder="none: the model as it is",
        on_change=_on_heads_change,
        args=(key,),
    )
    pairs = head_pairs(chosen)
    _write_url(key, ",".join(f"{layer}.{head}" for layer, head in pairs) or None)
    return pairs


def head_pairs(options) -> tuple[tuple[int, int], ...]:
    """The (layer, head) pairs of ``heads_ui`` options ("3.5"), sorted."""
    return tuple(sorted(tuple(int(part) for part in option.split(".")) for option in options))


def _on_heads_change(key: str) -> None:
    _remember(key, head_pairs(st.session_state[key]))


def token_ids_state(label: str, *, key: str) -> tuple[int, ...]:
    """Token ids kept in the URL as ``12,345`` with no widget of their own (a branch the page's figures set);
    a link's value that is not a list of whole numbers is ignored with a notice."""

    def parse(raw: str) -> tuple[int, ...]:
        return tuple(_index(item) for item in raw.split(",") if item)

    ids = tuple(_resolve(key, parse, (), label))
    _remember(key, ids)
    _write_url(key, ",".join(map(str, ids)) or None)
    return ids


def set_value(key: str, value) -> None:
    """Set a widget's value from code (a preset, a link from another page) before it is drawn."""
    _remember(key, value)


def forget(keys) -> None:
    """Back to defaults for these widgets: what this session chose, what the link says and the widgets' own
    state are dropped (a lecture's next slide starts from its own values, not the last slide's)."""
    values = st.session_state.setdefault(_VALUES, {})
    for key in keys:
        values.pop(key, None)
        st.session_state.pop(key, None)
        _write_url(key, None)


# -- notices -------------------------------------------------------------------------------------------------


def add_notice(message: str) -> None:
    """Queue a message about the view (clamped or ignored link values) for ``notices_ui``."""
    notices = st.session_state.setdefault(_NOTICES, [])
    if message not in notices:
        notices.append(message)


def notices_ui() -> None:
    """Show and clear the queued notices (call it once per page, after the widgets)."""
    for message in st.session_state.pop(_NOTICES, []):
        st.info(message, icon=":material/info:")
