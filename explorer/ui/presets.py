"""One-click presets from the chapters: a model, a text and settings, with an honest offline fallback.

A preset asks for the chapter's model (``bert-base-uncased``, ``gpt2``); the sidebar loads it with
progress. Where it cannot be downloaded (no internet, as in class or in the tests), the bundled model is
loaded instead, the preset's values for it are applied, and the page says what happened.
"""

from __future__ import annotations

import streamlit as st

from explorer.ui.models import request_model
from explorer.ui.shell import controls
from explorer.ui.text import literal
from explorer.ui.widgets import set_value

_PENDING = "_pending_preset"
_NOTICE = "_preset_notice"


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

    with controls():
        st.button(label, on_click=apply, icon=":material/auto_stories:", key=key)


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
        applied += (
            f" {literal(preset['model'])} could not be downloaded here, so this preset shows the bundled "
            f"{literal(model_name)} instead (the sidebar says why)"
            + (", with the values above chosen for it." if values != preset["values"] else ".")
        )
    st.session_state[_NOTICE] = applied


def _setting(key: str, value) -> str:
    if isinstance(value, str):
        return f"{literal(key)} “{literal(value)}”" if value else f"no {literal(key)}"
    return f"{literal(key)} {literal(value)}"


def preset_notice() -> None:
    message = st.session_state.pop(_NOTICE, None)
    if message:
        st.info(message, icon=":material/info:")
