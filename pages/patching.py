"""Activation patching: where in the model the answer is computed."""

import streamlit as st

import explorer
from explorer import ui, views
from explorer.ui import decoding

DEFAULT_CLEAN = "The girl was sure that"
DEFAULT_CORRUPTED = "The boy was sure that"

ui.page_shell()
ui.page_header(
    "Patching",
    "Two prompts that differ in one word: the clean one makes the model say one thing (“she”), the corrupted one "
    "another (“he”). The metric is the logit difference LD = logit(answer) − logit(counterfactual) where the model "
    "predicts. Each cell copies one activation of the clean run into the corrupted run and reads LD again: the "
    "fraction of the clean LD it brings back, (LD patched − LD corrupted) / (LD clean − LD corrupted). 1 = the clean "
    "answer fully back, 0 = no change. The maps show where the changed word's information sits, layer by layer.",
)
lm = decoding.generative_model(ui.require_model())

with ui.controls():
    clean_column, corrupted_column = st.columns(2)
    with clean_column:
        clean = ui.text_ui("Clean prompt", DEFAULT_CLEAN, key="clean", height=None)
        answer = ui.text_ui(
            "Answer (one token)", "", key="answer", height=None, placeholder="the clean prompt's top next token"
        )
    with corrupted_column:
        corrupted = ui.text_ui(
            "Corrupted prompt (same length in tokens)", DEFAULT_CORRUPTED, key="corrupted", height=None
        )
        counterfactual = ui.text_ui(
            "Counterfactual (one token)",
            "",
            key="counterfactual",
            height=None,
            placeholder="the corrupted prompt's top next token",
        )
if not clean.strip() or not corrupted.strip():
    ui.notices_ui()
    st.info("Type a clean and a corrupted prompt of the same length in tokens.")
    st.stop()
residual = views.patching.Residual(lm.name, clean, corrupted, answer or None, counterfactual or None)
try:
    patching = ui.run_view(residual)
except explorer.InputError as error:
    ui.notices_ui()
    st.info(ui.literal(error))
    st.stop()
ui.notices_ui()

with ui.stage():
    ui.show_view(residual, patching, key="patching-residual")
if patching.streams:
    st.caption(ui.literal(patching.streams))
layer, position = views.patching.strongest(patching)
where = (
    f"the input of layer {layer}" if layer < patching.num_layers else f"the output of layer {patching.num_layers - 1}"
)
st.caption(
    f"Answer {ui.literal(repr(patching.answer_token))} against {ui.literal(repr(patching.counterfactual_token))}: "
    f"LD {patching.ld_clean:.3f} on the clean prompt, {patching.ld_corrupted:.3f} on the corrupted one. The "
    f"residual stream recovers the most at {where}, position {position} "
    f"({ui.literal(repr(patching.columns[position]))}: {float(patching.residual[layer, position]):+.2f}). "
    f"Check: the whole stream patched into layer 0 recovers {patching.whole_first:.6f}, out of the last layer "
    f"{patching.whole_last:.6f}, nothing {patching.nothing:.6f} (largest error {patching.verification():.1e}); "
    "every cell equals a one-run-per-cell reference with forward hooks within 1e-5 in the tests."
)
heads_column, mlp_column = st.columns([3, 1])
if patching.has_heads:
    with heads_column:
        heads = views.patching.Heads(lm.name, clean, corrupted, answer or None, counterfactual or None)
        ui.show_view(heads, patching, key="patching-heads")
if patching.has_mlps:
    with mlp_column:
        mlp = views.patching.Mlp(lm.name, clean, corrupted, answer or None, counterfactual or None)
        ui.show_view(mlp, patching, key="patching-mlp")
if patching.headless:  # a hybrid's Mamba layers, or a state-space model: why rows are blank or maps missing
    st.caption(ui.literal(patching.headless))
st.caption(
    "A head's cell patches its output before the layer's output projection (its share of the concatenated heads) "
    "at every position; an MLP's cell patches its output at every position."
)
