"""Sampling and temperature: the next-token distribution through transformers' sampling pipeline, live.

The page's body is a fragment: moving a control reruns it alone, not the app around it (the sidebar, the
navigation), which took a fifth of a slider move's time; a class moves these sliders all at once (issue 13).
Its variables are the function's own, so no page namespace outlives a run."""

import dataclasses

import pandas as pd
import pyarrow as pa
import streamlit as st

import explorer
from explorer import ui, views
from explorer.compute.decoding import sampled_table
from explorer.ui import decoding

ui.page_shell()


@st.fragment
def sampling_page() -> None:
    ui.page_header(
        "Sampling and temperature",
        "Sampling draws the next token at random, in proportion to its probability. Temperature reshapes the "
        "distribution first (below 1 sharpens it towards the likeliest tokens, above 1 flattens it); then top-k "
        "keeps the k likeliest tokens, top-p the fewest whose probabilities add up to p, and min-p those at least "
        "min-p times as likely as the favourite, in that order, as transformers applies them. Moving these "
        "controls never runs the model again: the next-token scores are computed once per prompt.",
    )
    lm = ui.require_model()
    lm = decoding.generative_model(lm)

    with ui.controls():
        prompt = ui.text_ui("Prompt", decoding.default_prompt(lm.name), key="prompt", height=68)
        columns = st.columns(4)
        with columns[0]:
            temperature = ui.number_slider_ui("Temperature", 0.05, 3.0, 1.0, key="temperature", step=0.05)
        with columns[1]:
            top_k = ui.number_slider_ui("Top-k", 0, 200, 0, key="top_k", step=1, help="0 = off.")
        with columns[2]:
            top_p = ui.number_slider_ui("Top-p", 0.01, 1.0, 1.0, key="top_p", step=0.01, help="1 = off.")
        with columns[3]:
            min_p = ui.number_slider_ui("Min-p", 0.0, 0.5, 0.0, key="min_p", step=0.01, help="0 = off.")
    ui.notices_ui()
    if not prompt.strip():
        st.info("Type a prompt to see the distribution of the next token.")
        return

    view = views.sampling.Distribution(lm.name, prompt, temperature, top_k, top_p, min_p)
    try:
        distribution = ui.run_view(view)
    except explorer.InputError as error:
        st.info(ui.literal(error))
        return
    st.caption(ui.literal(view.caption(distribution)))

    shown = ui.views_ui(VIEWS, key="view")
    ui.notices_ui()  # a link's unknown view
    if shown == "panels":
        with ui.controls():
            band = decoding.band_ui(distribution)  # a drag's band, from the keyboard
        with ui.stage():
            ui.show_view(dataclasses.replace(view, band=band), distribution, key="panels")
        st.caption(
            "Left: how many tokens have each probability, after temperature (grey: removed by top-k, top-p or "
            "min-p). Drag across it, or pick a band with the “Highlight tokens with probability between” slider, "
            "to highlight those tokens on the right. Right: the probability covered by the "
            "likeliest tokens; the dashed lines are the top-k rank and the top-p level."
        )
    elif shown == "temperatures":
        temperatures = views.sampling.Temperatures(lm.name, prompt, temperature)
        with ui.stage():
            ui.show_view(temperatures, ui.run_view(temperatures), key="temperatures")
    else:
        stages_ui(views.sampling.Stages(lm.name, prompt, temperature, top_k, top_p, min_p), distribution)

    st.subheader("Seeded sampling")
    draw_column, seed_column, steps_column = st.columns([2, 1, 1], vertical_alignment="bottom")
    with draw_column:
        draw = ui.toggle_ui(
            "Sample a continuation with these settings",
            key="draw",
            help="Runs the model once per new token (each draw changes what comes next). The same seed always "
            "draws the same tokens, on any machine.",
        )
    with seed_column:
        seed = ui.number_slider_ui("Seed", 0, 9999, 0, key="seed", step=1)
    with steps_column:
        sample_steps = ui.number_slider_ui("Tokens", 1, decoding.PAGE_MAX_STEPS, 12, key="sample_steps", step=1)
    if draw:
        trace = ui.run_model(
            "decode",
            lm.name,
            prompt,
            strategy="sample",
            max_new_tokens=sample_steps,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            min_p=min_p,
            seed=seed,
            top_n=20,
        )
        st.markdown(ui.prompt_and_continuation(trace.prompt, trace.continuations[0], seq2seq=trace.is_seq2seq))
        st.dataframe(
            pd.DataFrame(sampled_table(trace)),
            hide_index=True,
            width="stretch",
            column_config={
                "probability": st.column_config.NumberColumn(help="After the pipeline: what the sampler drew from."),
                "model's probability": st.column_config.NumberColumn(help="The model's own, before any processing."),
            },
        )
        st.caption(
            "Rank 1 is the likeliest token; sampling often draws lower ranks, which is what makes its text varied. "
            f"Log-probability of the whole continuation under the model: {float(trace.sequence_logprobs[0]):.2f}."
        )
        chosen = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p, "seed": seed}
        steps_figure_ui(lm.name, prompt, chosen, sample_steps)


# One view drawn at a time: a slider move redraws the view shown, not all three (a class of forty moves these
# sliders at once, and each hidden figure cost every move about a fifth of its time). Short labels: on a projector
# they share the header row with the title.
VIEWS = {"panels": "Two panels", "temperatures": "Temperatures", "stages": "Stages"}


STEPS_FIGURE = "steps_figure"  # the section of the lecture's figure of the draw: its key and link parameter


def steps_figure_ui(model_name: str, prompt: str, chosen: dict, steps: int) -> None:
    """The draw's steps as the lecture draws them ("Sampling, seeded"): each step's five likeliest candidates, the
    drawn one outlined. Lazy, so a draw costs nothing more until it is opened (Esc on that slide opens it)."""
    section = ui.expander_ui("Each step's candidates, as the lecture draws them", key=STEPS_FIGURE)
    if not section.open:
        return
    with section:
        sampled = views.decoding.Sampled(
            model_name, prompt, (("strategy", "sample"), *chosen.items(), ("max_new_tokens", steps))
        )
        ui.show_view(sampled, ui.run_view(sampled), key="sampled-steps")


def stages_ui(stages, distribution) -> None:
    st.dataframe(
        pa.Table.from_pylist(stages.rows(distribution)),  # Arrow as is: a pandas frame costs a slider move 1 ms
        hide_index=True,
        width="stretch",
        column_config={
            "mass removed": st.column_config.NumberColumn(format="percent"),
            "its probability": st.column_config.NumberColumn(format="%.4f"),
        },
    )
    with ui.stage():
        ui.show_view(stages, distribution, key="stages")


sampling_page()
