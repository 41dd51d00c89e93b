"""The model every page shows: loading it once for every session, and the sidebar picker.

``cached_model(name)``: one loaded model per name, shared by every session and thread (capture records into a
ContextVar, so sharing is safe), loaded by ``explorer.gateway.model``. The model in use is a name in
``st.session_state[MODEL_KEY]``, chosen in the sidebar by ``model_picker_ui``; a model that fails to
load leaves the previous one in place and says why.
"""

from __future__ import annotations

import streamlit as st

import explorer
from explorer import display_name, gateway
from explorer.gateway import BUNDLED_MODELS
from explorer.hosting import DOWNLOADS, POLICY
from explorer.ui.text import literal

MODEL_KEY = "model_name"  # session state: the name of the model every page shows
_REQUEST_KEY = "_model_request"  # a name the user just picked, loaded on this run
_ERROR_KEY = "_model_error"  # the last load failure, shown until the next pick
_NOTE_KEY = "_model_note"  # a preset's model could not be loaded and its planned fallback was: said calmly
_FALLBACK_KEY = "_model_fallback"  # what to load instead if the requested model cannot be loaded
_INSTEAD_KEY = "_model_instead"  # (why, planned): the model loading now stands in for one that did not load
_CHOICE_KEY = "model_choice"
_CUSTOM_KEY = "model_custom"
BUNDLED_LABELS = {
    explorer.DEFAULT_ENCODER: f"{display_name(explorer.DEFAULT_ENCODER)} (encoder)",
    explorer.DEFAULT_DECODER: f"{display_name(explorer.DEFAULT_DECODER)} (decoder)",
    explorer.DEFAULT_SEQ2SEQ: f"{display_name(explorer.DEFAULT_SEQ2SEQ)} (encoder-decoder)",
    explorer.PROSE_GPT2: f"{display_name(explorer.PROSE_GPT2)} (decoder, the previous default)",
}


def cached_model(name: str, _progress=None) -> explorer.LoadedModel:
    """One loaded model per name, shared by every session (a few at most: models are large).

    ``_progress`` receives each loading stage for the caller that loads it. In hosted mode the server's Hub
    token is never used and models over the parameter cap are refused before download (``gateway.model``).
    Kept in a process-wide cache (``gateway.models_cache``) that Streamlit's clear-cache request does not reach.
    """
    return gateway.model(name, _progress)


def bundled_choices() -> list[str]:
    """The bundled models whose files are present (the decoder appears once it has been trained)."""
    return [name for name in BUNDLED_MODELS if _bundle_present(name)]


def _bundle_present(name: str) -> bool:
    try:
        return (BUNDLED_MODELS[name]() / "config.json").exists()
    except Exception:  # e.g. the package that carries the weights is not installed
        return False


def model_picker_ui() -> str | None:
    """Sidebar: pick a bundled model or type any Hub id / folder. Returns the name of the model in use."""
    _request_initial_model()
    with st.sidebar:
        st.subheader("Model")
        # Drawn on every run, so the widgets below keep their places whether or not a load happens.
        _load_requested(st.empty())
        if st.session_state.get(_ERROR_KEY):
            # Messages quote names a visitor typed or linked: shown literally, never as Markdown.
            st.error(literal(st.session_state[_ERROR_KEY]))
        elif st.session_state.get(_NOTE_KEY):
            st.info(literal(st.session_state[_NOTE_KEY]), icon=":material/info:")
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
            help="Press Enter to load. Downloads need internet access."
            + (" On this server: Hugging Face Hub ids only." if POLICY.hosted else ""),
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
    # The box always shows the model in use, so "changed to the model in use" is no pick: Streamlit reports a
    # widget's value as changed when a rerun (a click, a reload) cut short the run that first drew it, and
    # taking that for a pick would wipe why a linked model did not load, leaving its stand-in unexplained.
    if st.session_state[_CHOICE_KEY] != st.session_state.get(MODEL_KEY):
        _request(st.session_state[_CHOICE_KEY])


def _request_custom() -> None:
    _request((st.session_state[_CUSTOM_KEY] or "").strip())


def _request(name: str | None) -> None:
    if name:
        st.session_state[_REQUEST_KEY] = name
        st.session_state[_ERROR_KEY] = st.session_state[_NOTE_KEY] = None  # a new pick replaces the last failure
        st.session_state.pop(_FALLBACK_KEY, None)
        st.session_state.pop(_INSTEAD_KEY, None)


def request_model(name: str, *, fallback: str | None = None) -> None:
    """Ask for ``name`` to be loaded on this run (a preset, a "switch model" button); if it cannot be loaded
    here (offline, say), ``fallback`` is loaded instead and the sidebar says why."""
    _request(name)
    if fallback:
        st.session_state[_FALLBACK_KEY] = fallback


def _load_requested(slot) -> None:
    """Load the model just picked, with progress in ``slot``; on failure keep the previous model and say why."""
    # The request is dropped only once it is handled: a run cut short by a rerun (a click while a model
    # loads) asks again on the next run instead of leaving the visitor with no model and no reason.
    name = st.session_state.get(_REQUEST_KEY)
    current = st.session_state.get(MODEL_KEY)
    if not name or name == current:
        st.session_state.pop(_REQUEST_KEY, None)
        if name:
            _say_instead(name)  # a stand-in already in use
        return
    fallback = st.session_state.get(_FALLBACK_KEY)
    try:
        name = POLICY.check_model_name(name, bundled=BUNDLED_MODELS)  # before the disk or the Hub is asked
        lm = _load_once(name, slot)
    except explorer.ModelLoadError as error:
        _not_loaded(name, current, fallback, str(error), slot)
        return
    st.session_state.pop(_REQUEST_KEY, None)
    st.session_state.pop(_FALLBACK_KEY, None)
    st.session_state[MODEL_KEY] = lm.name
    _say_instead(lm.name)
    slot.empty()  # success is said by the caption under the picker


def _say_instead(name: str) -> None:
    """Where ``name`` stands in for a model that did not load: why, and that it is shown instead."""
    if instead := st.session_state.pop(_INSTEAD_KEY, None):
        why, planned = instead
        _say(f"{why} Showing {display_name(name)} instead.", calm=planned)


def _not_loaded(name: str, current: str | None, fallback: str | None, why: str, slot) -> None:
    """Say why ``name`` did not load, and load a model in its place: a preset's planned fallback, else the
    bundled encoder for a link opened with no model yet; else the model in use stays."""
    st.session_state.pop(_FALLBACK_KEY, None)
    planned = fallback is not None
    if pending := st.session_state.pop(_INSTEAD_KEY, None):
        why = f"{pending[0]} {why}"  # the stand-in failed too: the first reason stays first
    if current is None and not fallback and name != explorer.DEFAULT_ENCODER:
        fallback = explorer.DEFAULT_ENCODER  # a shared link to a model that does not load here
    slot.empty()
    if fallback and fallback != name:
        # Said before the stand-in loads, so that a run cut short during that load still says why; its load
        # then says which model is shown instead.
        _say(why, calm=False)
        st.session_state[_INSTEAD_KEY] = (why, planned)
        st.session_state[_REQUEST_KEY] = fallback
        _load_requested(slot)
        return
    st.session_state.pop(_REQUEST_KEY, None)
    _say(why + (f" Showing {display_name(current)} instead." if current else ""), calm=False)


def _say(message: str, *, calm: bool) -> None:
    """The sidebar's word on the last load: an error, or a calm note (a preset whose planned fallback loaded)."""
    st.session_state[_ERROR_KEY], st.session_state[_NOTE_KEY] = (None, message) if calm else (message, None)


def _load_once(name: str, slot) -> explorer.LoadedModel:
    """The cached model, loading it with progress in ``slot``; hosted servers download one model at a time.

    Only a real download waits on the gate: bundled models, models already loaded and models already in the
    Hub cache (the presets' models, prefetched into the image) load at once, whatever another visitor fetches.
    """
    if name in gateway.models_cache():  # loaded already (most visits of a class): no status box to draw and clear
        return cached_model(name)
    gated = POLICY.hosted and gateway.needs_download(name)
    if gated and not DOWNLOADS.try_start(name):
        raise explorer.ModelLoadError(DOWNLOADS.busy_message())
    try:
        with slot.status(f"Loading {literal(display_name(name))}…", expanded=False) as status:
            try:
                return cached_model(name, _progress=lambda stage: status.update(label=literal(stage)))
            except explorer.ModelLoadError as error:
                failure = error  # raised outside the status box: it would turn red before the sidebar says why
        raise failure
    finally:
        if gated:
            DOWNLOADS.finish()


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
    shape = (
        f"{lm.num_layers} layers × {lm.num_heads} heads" if lm.num_heads else f"{lm.num_layers} layers, no attention"
    )
    reads = " · attention weights only" if getattr(lm, "weights_only", False) else ""
    return f"{bundled}{lm.kind} · {shape}{reads} · up to {lm.max_tokens} tokens"


def require_model() -> explorer.LoadedModel:
    """The model in use; stops the page with a hint when none could be loaded."""
    lm = selected_model()
    if lm is None:
        st.info("Pick a model in the sidebar to start.")
        st.stop()
    return lm


def selected_model() -> explorer.LoadedModel | None:
    """The model chosen in the sidebar (already loaded), or None when none could be loaded."""
    name = st.session_state.get(MODEL_KEY)
    return cached_model(name) if name else None
