"""Logit lens: what the model would predict if it stopped after each layer."""

import numpy as np
import streamlit as st

import explorer
from explorer import ui, views

DEFAULT_TEXT = "It is a truth universally acknowledged, that a single man in possession of a good fortune"

ui.page_shell()
header = ui.page_header(
    "Logit lens",
    "After the embeddings and after every layer, the residual stream is read through the model's own final "
    "norm and unembedding, as if the model stopped there. Each cell is the token that reading predicts next, "
    "coloured by its probability; the top row is the model's real prediction. Early layers often predict the "
    "input token itself or a frequent token; the answer settles layer by layer. " + views.lens.LAYERS_COUNTED,
)
lm = ui.require_model()
text, _, target = ui.text_inputs_ui(lm.kind, DEFAULT_TEXT, compact=ui.presenting(), slot=header, model_name=lm.name)
if not text.strip():
    ui.notices_ui()
    st.info("Type some text to read every layer's prediction.")
    st.stop()
try:
    try:
        lens = ui.run_model("lens", lm.name, text, target)
    except explorer.InputError as error:
        if lm.kind != "encoder":
            raise
        # An encoder saved without its masked-LM head (the bundled MiniLM): say why, read the bundled decoder.
        st.caption(
            f"{ui.literal(error)} This page reads the bundled {ui.display_name(explorer.DEFAULT_DECODER)} instead."
        )
        lm = ui.cached_model(explorer.DEFAULT_DECODER)
        lens = ui.run_model("lens", lm.name, text, None)
except explorer.InputError as error:
    ui.notices_ui()
    st.info(ui.literal(error))
    st.stop()
if lens.truncated:
    st.warning(
        f"The text is longer than {ui.literal(ui.display_name(lm.name))} accepts: "
        f"the last {lens.truncated} tokens were cut."
    )

with ui.controls():
    position = ui.index_slider_ui(
        "Position",
        len(lens.tokens),
        key="position",
        default_last=True,
        help="Which token's prediction to follow layer by layer (counted from 0).",
    )
ui.notices_ui()

view = views.lens.Lens(lm.name, text, target)
with ui.stage():
    ui.show_view(view, lens, key="lens", alt=f"Logit lens of {view.info().subtitle()}")

final = lens.final_tokens[position]
ranks, logprobs = lens.final_ranks[:, position], lens.final_logprobs[:, position]
settled = int(np.argmax(ranks == 0))  # the last row is always 0: the model's own prediction
token = ui.literal(repr(lens.tokens[position]))
ui.show_view(views.lens.Trajectory(lm.name, text, target, position), lens, key="lens-trajectory")
where_settled = "after the embeddings" if settled == 0 else f"after layer {settled - 1}"  # row 0: the embeddings
predicts = f"At {token}, the model guesses" if lens.masked else f"After {token}, the model predicts"
st.caption(
    f"{predicts} {ui.literal(repr(final))} ({np.exp(logprobs[-1]):.1%}). It is the lens's "
    f"top token from {where_settled} on (rank {int(ranks[0]) + 1} after the embeddings). The top row equals the "
    "model's own logits; each row is the model's own final norm and unembedding applied to that layer's residual "
    "stream (nostalgebraist's logit lens, 2020)."
)
if lens.read_at:
    st.caption(ui.literal(lens.read_at))
