"""Decoding for the pages: prompts, slider bounds, presets, and the generative-model check.

Traces and logits come from the gateway (``ui.run_model("decode" | "logits", ...)``), cached for the whole
server: moving a view-only control (a step slider, temperature, top-p) never runs the model again.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

import explorer
from explorer import display_name
from explorer.compute.decoding import first_steps, prefix_consistent
from explorer.hosting import POLICY
from explorer.ui.models import cached_model
from explorer.ui.presets import preset_button
from explorer.ui.results import run_model
from explorer.ui.text import literal

CHAPTER_MODEL = "openai-community/gpt2"
CHAPTER_PROMPT = "Transformers are the"
# Prompts that suit each bundled or well-known model (the bundled decoder learnt from 19th-century novels).
PROMPTS = {
    explorer.DEFAULT_DECODER: "It is a truth universally acknowledged, that",
    explorer.PROSE_GPT2: "It is a truth universally acknowledged, that",
    explorer.DEFAULT_SEQ2SEQ: "Thursday, March 5, 2021",
    CHAPTER_MODEL: CHAPTER_PROMPT,
    "gpt2": CHAPTER_PROMPT,
}
FALLBACK_PROMPT = "The meaning of life is"
# Bounds on the pages' sliders: a class cannot stall a shared server (the engine's own limits are higher).
PAGE_MAX_STEPS = min(32, explorer.MAX_NEW_TOKENS, POLICY.max_new_tokens)
PAGE_MAX_BEAMS = min(8, explorer.MAX_BEAMS, POLICY.max_beams)
# The Compare strategies page's temperature slider (low, high, step): all its values are sampled at once, one
# row each of one batch (``greedy_and_temperatures``), so the grid stays short: ten values, the chapter's 0.5, 1 and 2
# among them.
TEMPERATURES = (0.25, 2.5, 0.25)


def default_prompt(model_name: str) -> str:
    return PROMPTS.get(model_name, FALLBACK_PROMPT)


def greedy_decoding(model_name: str, prompt: str, *, steps: int, force=(), top_n: int = 5) -> explorer.DecodeTrace:
    """Greedy search to ``steps`` new tokens (after ``force``, ids the model is made to say first), cut from one
    decoding to the Steps slider's maximum: moving the slider never runs the model again. Exact because greedy
    search is prefix-consistent (``explorer.compute.decoding.first_steps`` says why and when not: then this
    decodes to ``steps`` itself)."""
    branch = {"force": tuple(force)} if force else {}
    settings = dict(strategy="greedy", top_n=top_n, **branch)
    trace = run_model("decode", model_name, prompt, max_new_tokens=max(PAGE_MAX_STEPS, steps), **settings)
    if not prefix_consistent(trace):
        return run_model("decode", model_name, prompt, max_new_tokens=steps, **settings)
    return first_steps(trace, steps, cached_model(model_name).tokenizer)


def on_temperature_grid(temperature: float) -> float:
    """``temperature`` as the ``TEMPERATURES`` slider writes it (0.15000000000000002 is 0.15): the key a move asks
    for must be the key ``greedy_and_temperatures`` filled."""
    nearest = min(slider_values(*TEMPERATURES), key=lambda value: abs(value - temperature))
    return nearest if abs(nearest - temperature) < 1e-9 else temperature


def greedy_and_temperatures(model_name: str, prompt: str, *, seed: int, **shared) -> None:
    """Greedy search and the seeded sampling at every value of the ``TEMPERATURES`` slider, in one batched
    decoding (together they cost about two and a half decodings alone), each kept under the key a ``decode``
    with its settings asks for: a temperature move then runs no model.

    Sampling at another temperature is another decoding (each draw depends on the temperature, and every later
    step on the draws), so nothing is cut or interpolated: each is the decoding ``explorer.decode`` gives alone
    (``explorer.decode_together``: equal to ``generate()`` with those settings)."""
    samples = [
        (("strategy", "sample"), ("temperature", value), ("seed", seed)) for value in slider_values(*TEMPERATURES)
    ]
    run_model("decode together", model_name, prompt, ((("strategy", "greedy"),), *samples), **shared)


def slider_values(low: float, high: float, step: float) -> list[float]:
    """Every value of a slider, written with the step's decimals (0.05 · 3 is 0.15, not 0.15000000000000002)."""
    decimals = len(f"{step:g}".partition(".")[2])
    return [round(low + index * step, decimals) for index in range(round((high - low) / step) + 1)]


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


def band_ui(distribution, *, key: str = "band") -> tuple[float, float] | None:
    """The keyboard's way to do what a drag across the sampling panels' histogram does: a probability band
    (log₁₀ p, low to high) whose tokens the curve highlights; None while it spans every token (nothing selected)."""
    probabilities = distribution.stage("temperature")
    lowest = int(np.floor(np.log10(probabilities[probabilities > 0].min())))
    decades = list(range(lowest, 1))
    low, high = st.select_slider(
        "Highlight tokens with probability between",
        options=decades,
        value=(decades[0], decades[-1]),
        format_func=lambda power: f"10^{power}" if power else "1",
        key=key,
        help="The same as dragging across the histogram: the curve marks the tokens in the band.",
    )
    return None if (low, high) == (decades[0], decades[-1]) else (float(low), float(high))
