"""Head ablation: which heads the next token depends on, and what the model says without them."""

import streamlit as st

import explorer
from explorer import ui, views
from explorer.compute.ablation import ablation_summary, probability
from explorer.ui import ablation, decoding

HEADS_KEY = "ablate"

ui.page_shell()
ui.page_header(
    "Which heads matter",
    "Ablating a head sets its output to zero before the layer's output projection, as if the head were not "
    "there. The map shows, for the token the model predicts next, how its log-probability changes when each "
    "head alone is ablated: blue squares are heads the prediction leans on. Click heads (or pick them below) "
    "to ablate them together and see the new prediction and continuation.",
)
lm = decoding.generative_model(ui.require_model())
seq2seq = lm.kind == "encoder-decoder"

with ui.controls():
    prompt_column, steps_column = st.columns([4, 1], vertical_alignment="bottom")
    with prompt_column:
        prompt = ui.text_ui("Prompt", decoding.default_prompt(lm.name), key="prompt", height=68)
    with steps_column:
        steps = ui.number_slider_ui("Steps", 1, decoding.PAGE_MAX_STEPS, 8, key="steps", step=1)
if not prompt.strip():
    ui.notices_ui()
    st.info("Type a prompt to see which heads its next token depends on.")
    st.stop()
try:
    effects = ui.run_view(views.ablation.Map(lm.name, prompt, seq2seq=seq2seq))
except explorer.InputError as error:
    ui.notices_ui()
    st.info(ui.literal(error))
    st.stop()

num_layers, num_heads = effects.logprobs.shape
# a hybrid's rows are only its layers with attention: named by the model's own numbers (selections stay rows)
numbers = None if effects.layer_numbers is None else tuple(int(n) for n in effects.layer_numbers)
ablation.take_click(key=HEADS_KEY)
with ui.controls():
    heads = ui.heads_ui(
        "Heads ablated",
        num_layers,
        num_heads,
        key=HEADS_KEY,
        layer_numbers=numbers,
        help="Click squares of the map, or pick heads here. They are kept in the link.",
    )
ui.notices_ui()
# Encoder-decoder models name the stack: the map is the decoder's self-attention.
spec = tuple(("decoder", layer, head) for layer, head in heads) if seq2seq else heads

target = effects.target_token
heads_map = views.ablation.Map(lm.name, prompt, heads, seq2seq)
with ui.stage():
    ui.show_view(heads_map, effects, key="ablation-map", select_key=ablation.map_selection_key())
st.caption(
    f"The model predicts {ui.literal(repr(target))} next (probability {probability(effects.baseline_logprob)}). "
    + ablation_summary(
        effects.changes,
        effects.baseline_logprob,
        tolerance=effects.tolerance,
        dtype=effects.dtype,
        layer_numbers=effects.layer_numbers,
    )
    + " "
    + views.ablation.method_caption(effects)
)
if numbering := views.ablation.numbering_caption(effects):
    st.caption(numbering)

if heads:
    shown = views.ablation.heads_named(heads, numbers)
    bars = views.ablation.BeforeAfter(lm.name, prompt, heads, seq2seq, layer_numbers=numbers)
    ui.show_view(bars, ui.run_view(bars), key="ablation-bars")
    try:
        original = ui.run_model("decode", lm.name, prompt, strategy="greedy", max_new_tokens=steps)
        changed = ui.run_model("decode", lm.name, prompt, strategy="greedy", max_new_tokens=steps, ablate=spec)
    except explorer.InputError as error:
        st.info(ui.literal(error))
        st.stop()
    left, right = st.columns(2)
    with left:
        st.markdown("**Greedy continuation, the model as it is**")
        st.markdown(ui.prompt_and_continuation(original.prompt, original.continuations[0], seq2seq=seq2seq))
        st.caption(f"log-probability {float(original.sequence_logprobs[0]):.2f}")
    with right:
        st.markdown(f"**…with {ui.literal(shown)} ablated**")
        st.markdown(ui.prompt_and_continuation(changed.prompt, changed.continuations[0], seq2seq=seq2seq))
        st.caption(f"log-probability {float(changed.sequence_logprobs[0]):.2f} (of the ablated model)")
else:
    st.caption("No head ablated: click squares of the map to ablate those heads together.")
