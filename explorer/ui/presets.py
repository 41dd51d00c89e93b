"""One-click presets from the chapters: a model, a text and settings, with an honest offline fallback.

A preset asks for the chapter's model (``bert-base-uncased``, ``gpt2``); the sidebar loads it with
progress. Where it cannot be downloaded (no internet, as in class or in the tests), the bundled model is
loaded instead, the preset's values for it are applied, and the page says what happened.
"""

from __future__ import annotations

import huggingface_hub
import streamlit as st

from explorer import display_name, gateway
from explorer.ui.caches import models_cache
from explorer.ui.models import request_model
from explorer.ui.shell import controls
from explorer.ui.text import literal
from explorer.ui.widgets import set_value

_PENDING = "_pending_preset"
_NOTICE = "_preset_notice"
_FELL_BACK = "_preset_fell_back"  # models this session's presets asked for and could not load
# What the notice calls each setting a preset sets: the label of its widget, in the page's words.
SETTING_LABELS = {
    "text": "text",
    "pair": "second segment",
    "target": "decoder text",
    "prompt": "prompt",
    "layer": "layer",
    "head": "head",
    "query": "query token",
    "show": "show",
    "stack": "attention",
    "steps": "steps",
    "bv_view": "view",
    "bv_layer": "layer",
    "bv_head": "head",
    "probe_n": "tokens repeated (n)",
    "seed": "seed",
    "probe": "best head for",
}
_TEXT_KEYS = ("text", "prompt")  # the setting that holds a preset's text, for the button's offline label


def preset_button(
    label: str,
    *,
    model: str,
    fallback: str,
    values: dict,
    fallback_values: dict | None = None,
    key: str | None = None,
) -> None:
    """A button that loads ``model`` (or ``fallback``) and sets the page's widgets to ``values``."""

    def apply() -> None:
        request_model(model, fallback=fallback)
        st.session_state[_PENDING] = {"model": model, "values": values, "fallback_values": fallback_values or values}

    if _falls_back(model, fallback):  # the label names another model (and text): say what it loads here
        label += " — offline: " + _what_loads(fallback, values, fallback_values or values)
    with controls():
        st.button(label, on_click=apply, icon=":material/auto_stories:", key=key)


def _falls_back(model: str, fallback: str) -> bool:
    """Whether ``model`` is known not to load here: the Hub is switched off and it is not on this machine, or a
    preset of this session already fell back from it."""
    if model == fallback or model in models_cache() or not gateway.needs_download(model):
        return False
    return bool(huggingface_hub.constants.HF_HUB_OFFLINE) or model in st.session_state.get(_FELL_BACK, ())


def _what_loads(fallback: str, values: dict, fallback_values: dict) -> str:
    text = next((fallback_values[key] for key in _TEXT_KEYS if key in fallback_values), None)
    changed = text is not None and text != next((values[key] for key in _TEXT_KEYS if key in values), None)
    return display_name(fallback) + (f", “{literal(text)}”" if changed else "")


def apply_pending_preset(model_name: str) -> None:
    """After a preset's model loaded (or fell back), set its values; call before the page draws its widgets."""
    preset = st.session_state.pop(_PENDING, None)
    if not preset:
        return
    exact = model_name == preset["model"]
    values = preset["values"] if exact else preset["fallback_values"]
    for key, value in values.items():
        set_value(key, value)
    # Say what the preset set (it replaces the visitor's text), and with which model.
    applied = "Preset applied: " + ", ".join(_setting(key, value) for key, value in values.items()) + "."
    if not exact:
        st.session_state.setdefault(_FELL_BACK, set()).add(preset["model"])
        applied += (
            f" {literal(display_name(preset['model']))} could not be downloaded here, so this preset shows the "
            f"bundled {literal(display_name(model_name))} instead (the sidebar says why)"
            + (", with the values above chosen for it." if values != preset["values"] else ".")
        )
    st.session_state[_NOTICE] = applied


def _setting(key: str, value) -> str:
    """One setting as the page shows it: its widget's label and value (``head 8``, ``text “…”``)."""
    label = SETTING_LABELS.get(key, key.replace("_", " "))
    if isinstance(value, str):
        return f"{label} “{literal(value)}”" if value else f"no {label}"
    return f"{label} {literal(value)}"


def preset_notice() -> None:
    message = st.session_state.pop(_NOTICE, None)
    if message:
        st.info(message, icon=":material/info:")
