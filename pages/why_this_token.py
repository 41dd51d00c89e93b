"""Why this token? Input attribution: which words of the text made the model predict its token."""

import streamlit as st

import explorer
from explorer import ui, views
from explorer.ui import decoding

# Measured on the bundled decoder: " she" (21%, " he" 16%), and "Elizabeth" scores the most after "that".
DEFAULT_TEXTS = {explorer.DEFAULT_DECODER: "Elizabeth knew that", explorer.DEFAULT_SEQ2SEQ: "Thursday, March 5, 2021"}
TYPED = "typed"
CANDIDATES = 10

ui.page_shell()
ui.page_header(
    "Why this token?",
    "Which words of the text made the model predict its token? Each input token gets a score for the target's "
    "log-probability: red tokens raise it, blue ones lower it. Integrated gradients walks from an all-zero input "
    "(every token embedding zero, positions kept) to the text and adds up the gradients on the way: the scores sum "
    "to log p(text) − log p(baseline), which the check line verifies. Gradient × input is the first step of that "
    "walk; occlusion zeroes one token at a time and reads how much the log-probability drops. The line under the "
    "bars says which token scores the most and, for a decoder, whether it is the one right before the prediction.",
)
lm = ui.require_model()
unexplained = ui.run_model("unexplained", lm.name)
if unexplained:
    # An encoder saved without its masked-LM head (the bundled MiniLM): say why, explain the bundled decoder.
    st.caption(
        f"{ui.literal(unexplained)} This page explains the bundled "
        f"{ui.literal(ui.display_name(explorer.DEFAULT_DECODER))} instead."
    )
    lm = ui.cached_model(explorer.DEFAULT_DECODER)
if lm.kind == "encoder":
    default_text = f"The capital of France is {lm.tokenizer.mask_token}."
else:
    default_text = DEFAULT_TEXTS.get(lm.name, decoding.default_prompt(lm.name))

with ui.controls():
    text = ui.text_ui("Text", default_text, key="text", height=None)
if not text.strip():
    ui.notices_ui()
    st.info("Type a text to see which of its tokens made the model predict what it predicts.")
    st.stop()
try:
    candidates = ui.run_model("attribution targets", lm.name, text, CANDIDATES)
except explorer.InputError as error:
    ui.notices_ui()
    st.info(ui.literal(error))
    st.stop()

ranks = [str(rank) for rank in range(1, len(candidates.ids) + 1)]
labels = {
    rank: f"{ui.literal(repr(token))} {100 * probability:.3g}%"
    for rank, token, probability in zip(ranks, candidates.tokens, candidates.probabilities.tolist(), strict=True)
}
with ui.controls():
    method_column, target_column = st.columns([2, 3])
    with method_column:
        method = ui.choice_ui("Method", list(views.attribution.METHODS), key="method", labels=views.attribution.METHODS)
        steps = views.attribution.DEFAULT_STEPS
        if method == views.attribution.INTEGRATED_GRADIENTS:
            steps = ui.number_slider_ui(
                "Steps",
                views.attribution.MIN_STEPS,
                views.attribution.MAX_STEPS,
                lm.integrated_gradients_steps,
                key="steps",
                step=8,
                help="Points on the path from the all-zero input to the text: more points, a smaller completeness "
                f"error. The default, {lm.integrated_gradients_steps}, is chosen to keep it under 1% on this "
                "architecture (T5's ReLUs and norms need 256, Llama's RMSNorms 512); the check line under the "
                "chart gives this text's error, and says so where log p jumps on the path (a mixture of experts "
                "switching experts), which no number of points closes.",
            )
    with target_column:
        chosen = ui.choice_ui(
            "Target: the model's top candidates, or a token you type",
            [*ranks, TYPED],
            key="candidate",
            labels={**labels, TYPED: "type one…"},
        )
        typed = ""
        if chosen == TYPED:
            typed = ui.text_ui(
                "Target (one token)",
                "",
                key="target",
                height=None,
                placeholder="a token, with its leading space if it has one (“ he”)",
            )
target = typed or int(candidates.ids[0 if chosen == TYPED else int(chosen) - 1])
view = views.attribution.Scores(lm.name, text, target, method, steps)
try:
    attribution = ui.run_view(view)
except explorer.InputError as error:
    ui.notices_ui()
    st.info(ui.literal(error))
    st.stop()
ui.notices_ui()

with ui.stage():
    st.html(view.html(attribution, font_size=30 if ui.presenting() else 20))
    # wide: bars need no 16:9 frame, and on a projector the shaded text above leaves less height for one
    ui.show_view(view, attribution, key="attribution", wide=True, alt=f"Attribution scores of {view.info().subtitle()}")
st.caption(view.caption(attribution))  # numbers and fixed words only
if attribution.held:
    st.caption(ui.literal(attribution.held))
decoder = lm.kind == "decoder"  # its last token is the one right before the prediction
st.caption(
    views.attribution.strongest_caption(attribution, skip_last=decoder, label=lambda token: ui.literal(repr(token)))
)
