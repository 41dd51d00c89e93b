"""Streamlit glue shared by the pages: cached models and captures, and the small widgets around them.

The only module of ``explorer`` that imports Streamlit. Models and captures are ``st.cache_resource``
(one object for every session, never copied, so never changed per request):

- ``cached_model(name)``: the loaded model, keyed by its name.
- ``cached_capture(model_name, text, text_pair, target)``: one forward pass, keyed by everything
  that changes its result, so moving the layer or head widgets never runs the model again (the
  capture's arrays are read-only, so sharing it is safe).
- ``cached_verification(...)`` (``st.cache_data``, small): the recomputation check, once per capture.

The model in use is a name in ``st.session_state[MODEL_KEY]``, chosen in the sidebar by
``model_picker_ui``; a model that fails to load leaves the previous one in place. Widget
functions (``*_ui``) draw widgets and return plain values.
"""

from __future__ import annotations

import streamlit as st

import explorer
from explorer.models.loading import BUNDLED_MODELS

PAGE_CONFIG = {"page_title": "Attention & Decoding Explorer", "page_icon": "🔍", "layout": "wide"}
MODEL_KEY = "model_name"  # session state: the name of the model every page shows
_REQUEST_KEY = "_model_request"  # a name the user just picked, loaded on this run
_ERROR_KEY = "_model_error"  # the last load failure, shown until the next pick
_SHELL_KEY = "_shell_drawn"  # set by app.py's run, consumed by the page it runs
_CHOICE_KEY = "model_choice"
_CUSTOM_KEY = "model_custom"
BUNDLED_LABELS = {
    explorer.DEFAULT_ENCODER: "all-MiniLM-L6-v2 (encoder)",
    explorer.DEFAULT_DECODER: "prose-gpt2 (decoder)",
}
PAIR_HINT = "e.g. a question, as in BERT's sentence pairs"
TARGET_HINT = "add it to see decoder self-attention and cross-attention"
STACK_LABELS = {"encoder": "Encoder self-attention", "decoder": "Decoder self-attention", "cross": "Cross-attention"}


@st.cache_resource(max_entries=3, show_spinner=False)
def cached_model(name: str, _progress=None) -> explorer.LoadedModel:
    """One loaded model per name, shared by every session (a few at most: models are large).

    ``_progress`` (not part of the cache key) receives each loading stage for the first caller.
    """
    return explorer.load_model(name, progress=_progress)


# Captures hold [layer, head, query, key] arrays (75 MB for MiniLM at 512 tokens): keep a few, briefly.
@st.cache_resource(max_entries=8, ttl="1h", show_spinner="Running the model…")
def cached_capture(
    model_name: str, text: str, text_pair: str | None = None, target: str | None = None
) -> explorer.AttentionCapture:
    """``explorer.capture`` of the cached model, run once per distinct input; arrays are read-only."""
    return explorer.capture(cached_model(model_name), text, text_pair=text_pair, target=target)


@st.cache_data(max_entries=64, show_spinner="Checking the captured weights…")
def cached_verification(
    model_name: str, text: str, text_pair: str | None = None, target: str | None = None
) -> dict[str, float]:
    """{stack: max |recomputed - captured|}, computed once per capture (about 1 s at 512 tokens)."""
    result = cached_capture(model_name, text, text_pair, target)
    return {name: stack.verify() for name, stack in result.stacks.items()}


def bundled_choices() -> list[str]:
    """The bundled models whose files are present (the decoder appears once it has been trained)."""
    return [name for name in BUNDLED_MODELS if _bundle_present(name)]


def _bundle_present(name: str) -> bool:
    try:
        return (BUNDLED_MODELS[name]() / "config.json").exists()
    except Exception:  # e.g. the package that carries the weights is not installed
        return False


def app_shell() -> None:
    """What app.py draws before running a page: the page config and the model picker."""
    st.set_page_config(**PAGE_CONFIG)
    model_picker_ui()
    st.session_state[_SHELL_KEY] = True


def page_shell() -> None:
    """First line of every page: draws the shell when Streamlit ran the page file without app.py.

    That happens because a ``pages/`` folder exists: until the server's first ``st.navigation`` call,
    Streamlit treats pages as standalone scripts (a shared deep link opened first after a restart), and
    ``AppTest`` does so on every rerun.
    """
    if not st.session_state.pop(_SHELL_KEY, False):
        st.set_page_config(**PAGE_CONFIG)
        model_picker_ui()


def model_picker_ui() -> str | None:
    """Sidebar: pick a bundled model or type any Hub id / folder. Returns the name of the model in use."""
    _request_initial_model()
    with st.sidebar:
        st.subheader("Model")
        # Drawn on every run, so the widgets below keep their places whether or not a load happens.
        _load_requested(st.empty())
        if st.session_state.get(_ERROR_KEY):
            st.error(st.session_state[_ERROR_KEY])
        current = st.session_state.get(MODEL_KEY)
        options = bundled_choices() + ([current] if current and current not in BUNDLED_MODELS else [])
        if current in options:
            st.session_state[_CHOICE_KEY] = current  # the box shows the model in use, whoever picked it
        st.selectbox(
            "Model",
            options,
            key=_CHOICE_KEY,
            format_func=_model_label,
            on_change=_request_choice,
            label_visibility="collapsed",
        )
        st.text_input(
            "…or a Hugging Face Hub id or local folder",
            key=_CUSTOM_KEY,
            on_change=_request_custom,
            placeholder="openai-community/gpt2",
            help="Press Enter to load. Downloads need internet access.",
        )
        if current:
            st.caption(_model_summary(current))
    _share_model_in_url(current)
    return current


def _request_initial_model() -> None:
    """First run of a session: the model named in the URL (a shared link), else the bundled encoder."""
    if MODEL_KEY not in st.session_state:
        st.session_state[MODEL_KEY] = None
        st.session_state[_REQUEST_KEY] = st.query_params.get("model") or explorer.DEFAULT_ENCODER


def _request_choice() -> None:
    _request(st.session_state[_CHOICE_KEY])


def _request_custom() -> None:
    _request((st.session_state[_CUSTOM_KEY] or "").strip())


def _request(name: str | None) -> None:
    if name:
        st.session_state[_REQUEST_KEY] = name
        st.session_state[_ERROR_KEY] = None  # a new pick replaces the last failure


def _load_requested(slot) -> None:
    """Load the model just picked, with progress in ``slot``; on failure keep the previous model and say why."""
    name = st.session_state.pop(_REQUEST_KEY, None)
    current = st.session_state.get(MODEL_KEY)
    if not name or name == current:
        return
    try:
        with slot.status(f"Loading `{name}`…", expanded=False) as status:
            lm = cached_model(name, _progress=lambda stage: status.update(label=stage))
    except explorer.ModelLoadError as error:
        slot.empty()
        if current is None and name != explorer.DEFAULT_ENCODER:
            # A shared link to a model that does not load here: say so, and show the bundled encoder.
            st.session_state[_REQUEST_KEY] = explorer.DEFAULT_ENCODER
            _load_requested(slot)
        shown = st.session_state.get(MODEL_KEY)
        st.session_state[_ERROR_KEY] = str(error) + (f"\n\nShowing `{shown}` instead." if shown else "")
        return
    slot.empty()  # success is said by the caption under the picker
    st.session_state[MODEL_KEY] = lm.name


def _share_model_in_url(name: str | None) -> None:
    """Keep ``?model=`` in the URL for shared links (left out for the default, to keep links short)."""
    wanted = None if name in (None, explorer.DEFAULT_ENCODER) else name
    if st.query_params.get("model") != wanted:
        if wanted is None:
            st.query_params.pop("model", None)
        else:
            st.query_params["model"] = wanted


def _model_label(name: str) -> str:
    return BUNDLED_LABELS.get(name, name)


def _model_summary(name: str) -> str:
    lm = cached_model(name)
    bundled = "bundled, works offline · " if name in BUNDLED_MODELS else ""
    return f"{bundled}{lm.kind} · {lm.num_layers} layers × {lm.num_heads} heads · up to {lm.max_tokens} tokens"


def selected_model() -> explorer.LoadedModel | None:
    """The model chosen in the sidebar (already loaded), or None when none could be loaded."""
    name = st.session_state.get(MODEL_KEY)
    return cached_model(name) if name else None


def text_inputs_ui(kind: str, default_text: str) -> tuple[str, str | None, str | None]:
    """The text, plus a second segment for encoders or the decoder's text for encoder-decoders.

    Returns (text, text_pair, target), the last two None when empty or not offered. All live in the URL.
    """
    if kind == "decoder":
        return _text_area("Text", key="text", value=default_text), None, None
    text_column, extra_column = st.columns([3, 2])
    with text_column:
        text = _text_area("Text", key="text", value=default_text)
    with extra_column:
        if kind == "encoder":
            return text, _text_area("Second segment (optional)", key="pair", placeholder=PAIR_HINT) or None, None
        return text, None, _text_area("Decoder text (target)", key="target", placeholder=TARGET_HINT) or None


def _text_area(label: str, *, key: str, value: str = "", placeholder: str | None = None) -> str:
    return st.text_area(
        label, value, key=key, bind="query-params", height=80, max_chars=20_000, placeholder=placeholder
    )


def index_slider_ui(label: str, count: int, *, key: str, help: str | None = None) -> int:
    """A 0-based index slider bound to the URL; a stored value past ``count`` is clamped first."""
    if count <= 1:
        return 0
    if st.session_state.get(key, 0) >= count:
        st.session_state[key] = count - 1
    return st.slider(label, 0, count - 1, key=key, bind="query-params", help=help)


def stack_ui(stack_names: list[str], *, key: str = "stack") -> str:
    """Which attention to show when a capture has several stacks (encoder, decoder, cross)."""
    if len(stack_names) == 1:
        return stack_names[0]
    if st.session_state.get(key) not in stack_names:
        st.session_state.pop(key, None)
    return st.radio(
        "Attention",
        stack_names,
        key=key,
        bind="query-params",
        horizontal=True,
        format_func=lambda name: STACK_LABELS.get(name, name),
    )
