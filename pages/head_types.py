"""Head types: induction, duplicate-token, previous-token and sink heads, found with a probe."""

import pandas as pd
import streamlit as st

import explorer
from explorer import ui, views
from explorer.compute.probes import MEANINGS, SCORE_NAMES

DECODER_PRESET = {"probe_n": 20, "seed": 0, "probe": "induction"}  # the model card's probe

ui.page_shell()
ui.page_header(
    "Head types",
    "The probe: n random tokens, then the same n again. Reading the second copy, an induction head attends "
    "to the token that came after the current token last time, and can copy it; other heads look at the "
    "previous occurrence, at the previous token, or rest on the first token. Each head gets a score for each "
    "pattern (0 to 1, the mean weight it puts there).",
)
lm = ui.require_model()
ui.apply_pending_preset(lm.name)
ui.preset_notice()
if lm.name != explorer.DEFAULT_DECODER:  # the probe's lesson needs a model with induction heads: one click away
    ui.preset_button(
        f"The bundled decoder, {explorer.display_name(explorer.DEFAULT_DECODER)} (trained so that induction heads "
        "form): 20 tokens repeated, seed 0, induction",
        model=explorer.DEFAULT_DECODER,
        fallback=explorer.DEFAULT_DECODER,
        values=DECODER_PRESET,
        key="decoder-preset",
    )
longest = max(2, min(100, ui.run_model("longest n", lm.name)))  # twice n tokens must fit the model
with ui.controls():
    n_column, seed_column, score_column = st.columns([2, 2, 3], vertical_alignment="bottom")
    with n_column:
        n = ui.number_slider_ui("Tokens repeated (n)", 2, longest, min(20, longest), key="probe_n", step=1)
    with seed_column:
        seed = ui.number_slider_ui("Seed", 0, 9999, 0, key="seed", step=1, help="Which random tokens.")
    with score_column:
        score = ui.choice_ui("Show the best head for", list(SCORE_NAMES), key="probe", labels=SCORE_NAMES)
ui.notices_ui()
try:
    best_head = views.probes.BestHead(lm.name, n, seed, score)
    probes = ui.run_view(best_head)
except explorer.InputError as error:
    st.info(ui.literal(error))
    st.stop()

stack = probes.capture.main
with ui.stage():
    ui.show_view(best_head, probes, key="probe-head")
st.caption(views.probes.best_caption(probes, score))  # numbers and fixed words only
rows = [
    {"layer": la, "head": he, **{SCORE_NAMES[s]: float(probes.scores[s][la, he]) for s in SCORE_NAMES}}
    for la in range(stack.num_layers)
    for he in range(stack.num_heads)
]
table = pd.DataFrame(rows).sort_values(SCORE_NAMES[score], ascending=False)
st.dataframe(
    table,
    hide_index=True,
    width="stretch",
    column_config={name: st.column_config.NumberColumn(format="%.3f") for name in SCORE_NAMES.values()},
)
st.caption(views.probes.types_caption(probes))
for name, meaning in MEANINGS.items():
    st.caption(f"**{SCORE_NAMES[name]}**: {meaning}")
