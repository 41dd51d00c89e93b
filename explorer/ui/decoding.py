"""Decoding for the pages: cached traces and next-token logits, progress, presets, and the generative-model check.

Traces and logits are cached for the whole server (shared, read-only records; see ``ui.caches``):
moving a view-only control (a step slider, temperature, top-p) never runs the model again. A decoding
shows its progress (tokens done out of total) while it runs.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import streamlit as st

import explorer
from explorer.hosting import POLICY
from explorer.models.decoding import MAX_BEAMS, MAX_NEW_TOKENS
from explorer.models.loading import display_name
from explorer.serving import FORWARD_GATE
from explorer.ui.caches import results_cache
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
PROGRESS_EVERY_S = 0.25
# Bounds on the pages' sliders: a class cannot stall a shared server (the engine's own limits are higher).
PAGE_MAX_STEPS = min(32, MAX_NEW_TOKENS, POLICY.max_new_tokens)
PAGE_MAX_BEAMS = min(8, MAX_BEAMS, POLICY.max_beams)


def default_prompt(model_name: str) -> str:
    return PROMPTS.get(model_name, FALLBACK_PROMPT)


def cached_decode(model_name: str, prompt: str, settings: tuple, progress=None) -> explorer.DecodeTrace:
    """``explorer.decode`` of the cached model, once per (model, prompt, settings) for the whole server;
    ``settings`` is a tuple of (name, value) pairs; ``progress`` receives (done, total) while it runs."""
    key = ("decode", model_name, prompt, settings)
    lm = cached_model(model_name)
    return results_cache().get(
        key, lambda: FORWARD_GATE.run(lambda: explorer.decode(lm, prompt, progress=progress, **dict(settings)))
    )


def cached_logits(model_name: str, prompt: str) -> explorer.NextTokenLogits:
    """The next-token logits after ``prompt``, once per (model, prompt): sampling sliders work on these."""
    lm = cached_model(model_name)
    key = ("logits", model_name, prompt)
    if key in results_cache():
        return results_cache().get(key, lambda: None)
    with st.spinner("Running the model…"):
        return results_cache().get(key, lambda: FORWARD_GATE.run(lambda: explorer.next_token_logits(lm, prompt)))


@contextmanager
def progress_bar(unit: str):
    """A progress bar for the block, which receives ``progress(done, total)`` ("Generating: 3 of 8 tokens" for
    ``unit`` "Generating: {done} of {total} tokens"); gone when the block ends."""
    bar = st.empty()
    shown = [-PROGRESS_EVERY_S]

    def progress(done: int, total: int) -> None:
        # The first step at once (the bar appears), then at most every PROGRESS_EVERY_S: each update is a message
        # to the browser, and forty students' decodings sent thousands a second.
        now = time.monotonic()
        if now - shown[0] >= PROGRESS_EVERY_S:
            shown[0] = now
            bar.progress(done / total, text=unit.format(done=done, total=total))

    try:
        yield progress
    finally:
        bar.empty()


def decode_with_progress(model_name: str, prompt: str, **settings) -> explorer.DecodeTrace:
    """A cached decoding; while it runs, a progress bar says how many tokens are done."""
    with progress_bar("Generating: {done} of {total} tokens") as progress:
        return cached_decode(model_name, prompt, tuple(sorted(settings.items())), progress)


def generative_model(lm) -> explorer.LoadedModel:
    """The model a decoding page runs: the sidebar's, or the bundled decoder when that one cannot generate
    text (an encoder), said in one line. The sidebar's model stays as it is for the attention pages."""
    if lm.kind in ("decoder", "encoder-decoder"):
        return lm
    st.caption(
        f"{literal(display_name(lm.name))} is an encoder: it reads text but has no language-model head, so it cannot "
        "choose a next token. This page uses the bundled "
        f"{literal(display_name(explorer.DEFAULT_DECODER))} instead (offline); pick a decoder or a seq2seq model in "
        "the sidebar to use your own."
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
