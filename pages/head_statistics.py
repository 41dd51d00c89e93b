"""Head statistics: every head measured (entropy, distance, first-token and special-token share, previous-token
score, peak), sortable; select a row to open the head. Plus two view transforms, clearly labelled."""

import pandas as pd
import streamlit as st

from explorer import ui, views
from explorer.compute.statistics import GREYED_COLUMN
from explorer.ui.attention import (
    cached_head_statistics,
    cached_rollout,
    open_head_links,
    run_capture_ui,
)

ui.page_shell()
header = ui.page_header(
    "Head statistics",
    "Each row is one head. Entropy (in nats, like every entropy here): low when the head looks at few tokens. "
    "Mean distance: how far, in "
    "tokens, it looks on average. First-token and special-token share: how much of its attention goes to the "
    "first token or to special tokens ([CLS], [SEP], …), often a resting place. Previous-token score: near 1 for "
    "heads that look one token back. Click a column to sort; select a row to open that head.",
)
lm = ui.require_model()
view = run_capture_ui(lm, header)
stack, capture = view.stack, view.capture
specials = set(ui.cached_model(lm.name).tokenizer.all_special_tokens)
special_positions = tuple(i for i, token in enumerate(stack.key_tokens) if token in specials)
with ui.controls():
    hide = ui.toggle_ui(
        "View transform: hide special tokens and renormalise rows",
        key="hide_special",
        help="Drops the special tokens' columns and rescales each row to sum to 1 again: a view, not the model.",
    ) and bool(special_positions)
rows = cached_head_statistics(view, special_positions, hide=hide)
table = pd.DataFrame(rows)
event = st.dataframe(
    table,
    hide_index=True,
    width="stretch",
    on_select="rerun",
    selection_mode="single-row",
    key="stats",
    column_config={
        name: st.column_config.NumberColumn(format="%d" if name == GREYED_COLUMN else "%.3f")
        for name in table.columns[2:]
    },
)
if hide:
    st.caption(views.attention.greyed_table_caption(rows, len(stack.query_tokens)))
selected = event.selection.rows if event and event.selection else []
if selected:
    picked = rows[selected[0]]
    ui.set_value("layer", picked["layer"])
    ui.set_value("head", picked["head"])
with ui.controls():
    layer_column, head_column = st.columns(2)
    with layer_column:
        layer = ui.layer_slider_ui(stack, key="layer")
    with head_column:
        head = ui.index_slider_ui("Head", stack.num_heads, key="head")
ui.notices_ui()

inputs = (lm.name, view.text, view.text_pair, view.target, view.stack_name)
hidden = special_positions if hide else ()
head_view = views.attention.StatisticsHead(*inputs, layer, head, hidden)
with ui.stage():
    ui.show_view(head_view, capture, key="stats-head")
if hidden:
    st.caption(head_view.caption(capture))
open_head_links(view, layer, head)

st.subheader("View transform: attention rollout")
st.caption(
    "Rollout (Abnar & Zuidema, 2020) estimates how much each input token reaches each position through all "
    "layers: average the heads of a layer, add the residual connection (½ identity + ½ attention), renormalise, "
    "and multiply layer by layer. An estimate built from the weights, not something the model computes."
)
if why := views.attention.rollout_not_drawn(stack):
    st.caption(why)
else:
    upto = ui.index_slider_ui("Rollout through layer", stack.num_layers, key="rollout_layer", default_last=True)
    ui.show_view(views.attention.Rollout(*inputs, upto), (capture, cached_rollout(view)), key="rollout")
