"""Compare strategies: greedy search, beam search and seeded sampling on one prompt, side by side."""

import streamlit as st

import explorer
from explorer import ui, views
from explorer.ui import decoding

ui.page_shell()
ui.page_header(
    "Compare strategies",
    "One prompt, three ways of choosing the next token. Greedy search takes the likeliest token each time; "
    "beam search keeps several candidate texts and returns the likeliest whole text it found; sampling draws "
    "at random (here seeded, so the draw is repeatable). The log-probability says how likely the model finds "
    "each continuation as a whole: nearer 0 is likelier, which is not the same as better.",
)
lm = ui.require_model()
lm = decoding.generative_model(lm)

with ui.controls():
    prompt = ui.text_ui("Prompt", decoding.default_prompt(lm.name), key="prompt", height=68)
    columns = st.columns(5)
    with columns[0]:
        steps = ui.number_slider_ui("Steps", 1, decoding.PAGE_MAX_STEPS, 16, key="steps", step=1)
    with columns[1]:
        beams = ui.number_slider_ui("Beams", 2, decoding.PAGE_MAX_BEAMS, 4, key="beams", step=1)
    with columns[2]:
        ngram = ui.number_slider_ui("No-repeat n-gram", 0, 5, 0, key="ngram", step=1, help="For all three; 0 = off.")
    with columns[3]:
        low, high, step = decoding.TEMPERATURES
        temperature = ui.number_slider_ui(
            "Temperature", low, high, 0.75, key="temperature", step=step, help="For sampling."
        )
    with columns[4]:
        seed = ui.number_slider_ui("Seed", 0, 9999, 0, key="seed", step=1, help="For sampling.")
ui.notices_ui()
if not prompt.strip():
    st.info("Type a prompt to compare the strategies on it.")
    st.stop()

temperature = decoding.on_temperature_grid(temperature)
common = (("max_new_tokens", steps), ("no_repeat_ngram_size", ngram), ("top_n", 5))
comparison = views.decoding.Comparison(
    lm.name,
    prompt,
    (
        ("Greedy search", (("strategy", "greedy"), *common)),
        (f"Beam search ({beams} beams)", (("strategy", "beam"), ("num_beams", beams), *common)),
        (
            f"Sampling (T = {temperature:g}, seed {seed})",
            (("strategy", "sample"), ("temperature", temperature), ("seed", seed), *common),
        ),
    ),
    where=(f"{steps} steps",),
)
try:
    # Greedy search and every temperature of the slider in one batch: a temperature move runs no model.
    decoding.greedy_and_temperatures(lm.name, prompt, seed=seed, **dict(common))
    traces = ui.run_view(comparison)
except explorer.InputError as error:
    st.info(ui.literal(error))
    st.stop()

for column, (label, trace) in zip(st.columns(3), traces.items(), strict=True):
    with column:
        st.subheader(label)
        st.markdown(ui.prompt_and_continuation(trace.prompt, trace.continuations[0], seq2seq=trace.is_seq2seq))
        st.metric("Log-probability", f"{float(trace.sequence_logprobs[0]):.2f}")
        st.caption(f"{len(trace.generated_tokens[0])} tokens generated")

with ui.stage():
    ui.show_view(comparison, traces, key="compare")
