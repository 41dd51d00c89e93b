"""Streamlit glue shared by the pages: cached models and captures, and the small widgets around them.

The only module of ``explorer`` that imports Streamlit. Two caches, both ``st.cache_resource``
(one object for every session, never copied, so it must never be changed per request):

- ``cached_model(name)``: the loaded model, keyed by its name.
- ``cached_capture(model_name, text, text_pair, target)``: one forward pass, keyed by everything
  that changes its result, so moving the layer or head widgets never runs the model again. Its
  arrays are made read-only.

The model in use is a name in ``st.session_state[MODEL_KEY]``, chosen in the sidebar by
``model_picker_ui``; a model that fails to load leaves the previous one in place. Widget
functions (``*_ui``) draw widgets and return plain values.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import streamlit as st

import explorer
from explorer.models.loading import BUNDLED_MODELS

PAGE_CONFIG = {"page_title": "Attention & Decoding Explorer", "page_icon": ":material/visibility:", "layout": "wide"}
MODEL_KEY = "model_name"  # session state: the name of the model every page shows
_REQUEST_KEY = "_model_request"  # a name the user just picked, loaded on this run
_ERROR_KEY = "_model_error"  # the last load failure, shown until the next pick
_SHELL_KEY = "_shell_drawn"  # set by app.py's run, consumed by the page it runs
_CHOICE_KEY = "model_choice"
_CUSTOM_KEY = "model_custom"
BUNDLED_LABELS = {
    explorer.DEFAULT_ENCODER: "all-MiniLM-L6-v2 · encoder",
    explorer.DEFAULT_DECODER: "prose-gpt2 · decoder",
}
STACK_LABELS = {"encoder": "Encoder self-attention", "decoder": "Decoder self-attention", "cross": "Cross-attention"}


@st.cache_resource(max_entries=3, show_spinner="Loading the model…")
def cached_model(name: str) -> explorer.LoadedModel:
    """One loaded model per name, shared by every session (a few at most: models are large)."""
    return explorer.load_model(name)


# Captures hold [layer, head, query, key] arrays (75 MB for MiniLM at 512 tokens): keep a few, briefly.
@st.cache_resource(max_entries=8, ttl="1h", show_spinner="Running the model…")
def cached_capture(
    model_name: str, text: str, text_pair: str | None = None, target: str | None = None
) -> explorer.AttentionCapture:
    """``explorer.capture`` of the cached model, run once per distinct input; arrays are read-only."""
    result = explorer.capture(cached_model(model_name), text, text_pair=text_pair, target=target)
    _make_read_only(result)
    return result


@st.cache_data(max_entries=64, show_spinner="Checking the captured weights…")
def cached_verification(
    model_name: str, text: str, text_pair: str | None = None, target: str | None = None
) -> dict[str, float]:
    """{stack: max |recomputed - captured|}, computed once per capture (about 1 s at 512 tokens)."""
    result = cached_capture(model_name, text, text_pair, target)
    return {name: stack.verify() for name, stack in result.stacks.items()}


def _make_read_only(result: explorer.AttentionCapture) -> None:
    arrays = [result.token_ids]
    for stack in result.stacks.values():
        arrays += [getattr(stack, field.name) for field in dataclasses.fields(stack)]
    for array in arrays:
        if isinstance(array, np.ndarray):
            array.flags.writeable = False


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
        _load_requested()
        if st.session_state.get(_ERROR_KEY):
            st.error(st.session_state[_ERROR_KEY])
        current = st.session_state.get(MODEL_KEY)
        options = bundled_choices() + ([current] if current and current not in BUNDLED_MODELS else [])
        if current in options:
            st.session_state[_CHOICE_KEY] = current  # the box shows the model in use, whoever picked it
        st.selectbox(
            "Model", options, key=_CHOICE_KEY, format_func=_model_label, on_change=_request_choice,
            label_visibility="collapsed",
        )
        st.text_input(
            "…or a Hugging Face Hub id or local folder", key=_CUSTOM_KEY, on_change=_request_custom,
            placeholder="openai-community/gpt2", help="Press Enter to load. Downloads need internet access.",
        )
        if current:
            st.caption(_model_summary(current))
    return st.session_state.get(MODEL_KEY)


def _request_initial_model() -> None:
    """First run of a session: the model named in the URL (a shared link), else the bundled encoder."""
    if MODEL_KEY not in st.session_state and _REQUEST_KEY not in st.session_state:
        st.session_state[MODEL_KEY] = None
        st.session_state[_REQUEST_KEY] = st.query_params.get("model") or explorer.DEFAULT_ENCODER


def _request_choice() -> None:
    st.session_state[_REQUEST_KEY] = st.session_state[_CHOICE_KEY]


def _request_custom() -> None:
    name = (st.session_state[_CUSTOM_KEY] or "").strip()
    if name:
        st.session_state[_REQUEST_KEY] = name


def _load_requested() -> None:
    """Load the model just picked, with progress; on failure keep the previous model and say why."""
    name = st.session_state.pop(_REQUEST_KEY, None)
    if not name or name == st.session_state.get(MODEL_KEY):
        return
    st.session_state[_ERROR_KEY] = None
    with st.status(f"Loading `{name}`…", expanded=True) as status:
        st.write("Reading the tokenizer and weights, then checking that attention can be captured.")
        try:
            lm = cached_model(name)
        except explorer.ModelLoadError as error:
            status.update(label=f"Could not load `{name}`", state="error", expanded=False)
            kept = st.session_state.get(MODEL_KEY)
            st.session_state[_ERROR_KEY] = str(error) + (f"\n\nStill showing `{kept}`." if kept else "")
            return
        status.update(label=f"Loaded `{name}`", state="complete", expanded=False)
    st.session_state[MODEL_KEY] = lm.name
    _share_model_in_url(lm.name)


def _share_model_in_url(name: str) -> None:
    if name == explorer.DEFAULT_ENCODER:
        st.query_params.pop("model", None)
    else:
        st.query_params["model"] = name


def _model_label(name: str) -> str:
    return BUNDLED_LABELS.get(name, name) + (" (bundled)" if name in BUNDLED_MODELS else "")


def _model_summary(name: str) -> str:
    lm = cached_model(name)
    return f"`{lm.name}`: {lm.kind}, {lm.num_layers} layers × {lm.num_heads} heads, up to {lm.max_tokens} tokens."


def selected_model() -> explorer.LoadedModel | None:
    """The model chosen in the sidebar (already loaded), or None when none could be loaded."""
    name = st.session_state.get(MODEL_KEY)
    return cached_model(name) if name else None


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
        "Attention", stack_names, key=key, bind="query-params", horizontal=True,
        format_func=lambda name: STACK_LABELS.get(name, name),
    )
