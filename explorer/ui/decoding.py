"""Decoding for the pages: prompts, slider bounds, presets, and the generative-model check.

Traces and logits come from the gateway (``ui.run_model("decode" | "logits", ...)``), cached for the whole
server: moving a view-only control (a step slider, temperature, top-p) never runs the model again.
"""

from __future__ import annotations

import streamlit as st

import explorer
from explorer.hosting import POLICY
from explorer.ui.models import cached_model
from explorer.ui.presets import preset_button
from explorer.ui.text import literal

CHAPTER_MODEL = "openai-community/gpt2"
CHAPTER_PROMPT = "Transformers are the"
# Prompts that suit each bundled or well-known model (the bundled decoder learnt from 19th-century novels).
PROMPTS = {
    explorer.DEFAULT_DECODER: "It is a truth universally acknowledged, that",
    explorer.DEFAULT_SEQ2SEQ: "Thursday, March 5, 2021",
    CHAPTER_MODEL: CHAPTER_PROMPT,
    "gpt2": CHAPTER_PROMPT,
}
FALLBACK_PROMPT = "The meaning of life is"
# Bounds on the pages' sliders: a class cannot stall a shared server (the engine's own limits are higher).
PAGE_MAX_STEPS = min(32, explorer.MAX_NEW_TOKENS, POLICY.max_new_tokens)
PAGE_MAX_BEAMS = min(8, explorer.MAX_BEAMS, POLICY.max_beams)


def default_prompt(model_name: str) -> str:
    return PROMPTS.get(model_name, FALLBACK_PROMPT)


def generative_model(lm) -> explorer.LoadedModel:
    """The model a decoding page runs: the sidebar's, or the bundled decoder when that one cannot generate
    text (an encoder), said in one line. The sidebar's model stays as it is for the attention pages."""
    if lm.kind in ("decoder", "encoder-decoder"):
        return lm
    st.caption(
        f"{literal(lm.name)} is an encoder: it reads text but has no language-model head, so it cannot choose a "
        f"next token. This page uses the bundled {literal(explorer.DEFAULT_DECODER)} instead (offline); pick a "
        "decoder or a seq2seq model in the sidebar to use your own."
    )
    return cached_model(explorer.DEFAULT_DECODER)


def chapter_preset_button(label: str, *, prompt_key: str = "prompt", **state) -> None:
    """A one-click preset: the chapter's gpt2 and prompt when gpt2 can be downloaded here, otherwise the
    bundled decoder with a prompt that suits it (the page says so). ``state`` sets other widgets."""
    preset_button(
        label,
        model=CHAPTER_MODEL,
        fallback=explorer.DEFAULT_DECODER,
        values={prompt_key: CHAPTER_PROMPT, **state},
        fallback_values={prompt_key: default_prompt(explorer.DEFAULT_DECODER), **state},
    )
