"""Model anatomy: the sizes, the layout of a layer, and where the parameters are, beside the textbook formula."""

import pandas as pd
import streamlit as st

from explorer import ui, views
from explorer.compute.anatomy import (
    formula_gap,
    lecture_rows,
    memory_mb,
    model_lecture_count,
    stack_layer_against_textbook,
    textbook_formula,
)
from explorer.lecture.anatomy import SPEC_MODELS

# (has output embeddings, tied) -> what to say about the embedding tables
EMBEDDINGS = {
    (False, False): "input embeddings only (no output embeddings: no language-model head)",
    (True, True): "input and output embeddings shared (tied)",
    (True, False): "input and output embeddings separate",
}

LECTURE_FIGURES = "lecture_figures"  # the section of the lecture's figures: its key and link parameter

COUNT = st.column_config.NumberColumn(format="localized")  # thousands separators

ui.page_shell()
ui.page_header(
    "Model anatomy",
    "A transformer is a stack of identical layers. Each layer has an attention block (queries, keys, values and "
    "an output projection, split into heads of width head_dim = d_model / heads) and a feed-forward block, each "
    "with a layer norm and a residual connection. Here are this model's sizes, where its parameters are, and how "
    "one of its layers compares with the original Transformer's formula.",
)
lm = ui.require_model()


parameters = views.anatomy.Parameters(lm.name)
anatomy = ui.run_view(parameters)
facts = st.columns(4)
facts[0].metric("Parameters", f"{anatomy.total_parameters:,}")
facts[1].metric("Layers", anatomy.layers)
facts[2].metric("d_model", f"{anatomy.width:,}" if anatomy.width else "?")
facts[3].metric("Heads × head_dim", f"{anatomy.heads} × {anatomy.head_dim}")
more = st.columns(4)
more[0].metric("Key/value heads", anatomy.kv_heads, help="Fewer than the query heads: grouped-query attention.")
more[1].metric("Feed-forward size", f"{anatomy.ffn_size:,}" if anatomy.ffn_size else "?")
more[2].metric("Vocabulary", f"{anatomy.vocabulary:,}")
more[3].metric("Context (tokens)", f"{anatomy.context:,}")
st.markdown(
    f"**{ui.literal(anatomy.architecture)}** ({ui.literal(anatomy.model_type)}, {anatomy.kind}) · layer norms: "
    f"**{anatomy.norm_placement}** ({anatomy.norm_kind}) · positions: **{anatomy.position_scheme}** · "
    f"{EMBEDDINGS[anatomy.output_embeddings, anatomy.tied_embeddings]}."
)
if anatomy.width and anatomy.heads:
    st.caption(
        f"Multi-head attention here: {anatomy.heads} heads of width {anatomy.head_dim} "
        f"({anatomy.heads} × {anatomy.head_dim} = {anatomy.heads * anatomy.head_dim}, d_model = {anatomy.width}); "
        "each head attends on its own, their outputs are concatenated and mixed by the output projection."
    )

st.subheader("Where the parameters are")
with ui.stage():
    ui.show_view(parameters, anatomy, key="parameters")
totals = pd.DataFrame(
    [
        {"kind": kind, "parameters": count, "share": count / anatomy.total_parameters}
        for kind, count in anatomy.by_kind.items()
        if count
    ]
)
st.dataframe(totals, hide_index=True, column_config={"share": st.column_config.NumberColumn(format="percent")})

st.subheader("One layer against the textbook")
# The first layer (layer 0: layers count from 0) of each stack: an encoder-decoder's encoder and decoder differ.
STACKS = {"main": "The encoder's" if anatomy.kind != "decoder" else "The model's", "decoder": "The decoder's"}
if anatomy.width and anatomy.ffn_size:
    for row in sorted((row for row in anatomy.layer_counts if row.layer == 0), key=lambda row: row.stack != "main"):
        blocks = stack_layer_against_textbook(anatomy, row)
        cross = row.parts.get("cross-attention weights", 0) > 0
        layers = sum(1 for other in anatomy.layer_counts if other.stack == row.stack and other.layer is not None)
        st.markdown(
            f"**{STACKS.get(row.stack, ui.literal(row.stack))} layer 0** (the first of {layers}) against the original "
            f"Transformer's {'decoder layer: self-attention, cross-attention' if cross else 'encoder layer: attention'}"
            ", feed-forward, a LayerNorm after each block, every projection with a bias"
            + (
                " (a decoder-only model's layer has the same parts, its attention masked)"
                if anatomy.kind == "decoder"
                else ""
            )
            + "."
        )
        st.latex(textbook_formula(cross=cross) + rf"\qquad (d = {anatomy.width},\ d_{{ff}} = {anatomy.ffn_size})")
        st.dataframe(
            pd.DataFrame(
                [
                    {"block": b.block, "textbook": b.textbook, "this model": b.actual, "difference": b.difference}
                    for b in blocks
                ]
            ),
            hide_index=True,
            column_config={column: COUNT for column in ("textbook", "this model", "difference")},
        )
        differing = [b for b in blocks if b.terms]
        for b in differing:
            st.markdown(
                f"- {b.block.capitalize()}, {b.difference:+,}: "
                + "; ".join(f"{t.parameters:+,}, {ui.literal(t.reason)}" for t in b.terms)
                + "."
            )
        if not differing:
            st.markdown("Exactly the textbook layer.")

st.subheader("The whole model, as the lecture counts it")
if anatomy.width and anatomy.ffn_size:
    count = model_lecture_count(anatomy)
    st.latex(
        count.formula
        + rf"\quad (|V| = {anatomy.vocabulary},\ l_c = {anatomy.position_rows},\ d = {anatomy.width},\ "
        + rf"L = {anatomy.layers})"
    )
    st.caption(
        "Weights and layer norms only, embeddings tied: an encoder layer 12d² + 4d, a decoder layer with "
        "cross-attention 16d² + 6d (a decoder-only model's layer has no cross-attention: it counts as an encoder "
        f"layer). With this model's feed-forward width (d_ff = {anatomy.ffn_size:,}"
        f"{'' if anatomy.ffn_size == 4 * anatomy.width else ', not 4d'}) the feed-forward term is 2·d·d_ff."
    )
    gap = formula_gap(anatomy, count)  # named from the model's own parameters
    st.dataframe(pd.DataFrame(lecture_rows(count, gap)), hide_index=True, column_config={"parameters": COUNT})
    memory = st.columns(2)
    memory[0].metric(
        "Weights at 32 bits",
        f"{memory_mb(anatomy.total_parameters, 32):,.1f} MiB",
        help=f"{anatomy.total_parameters:,} parameters × 4 bytes (MiB = 2²⁰ bytes: the lecture's “MB”).",
    )
    memory[1].metric(
        "Weights at 8 bits",
        f"{memory_mb(anatomy.total_parameters, 8):,.1f} MiB",
        help=f"{anatomy.total_parameters:,} parameters × 1 byte (quantized).",
    )

# The lecture's figures of these numbers (anatomy, slides 12 to 14): lazy, so the page costs nothing more until it
# is opened (Esc on one of those slides opens it: ``explorer.ui.full_page``).
figures = ui.expander_ui("The lecture's figures of these sizes", key=LECTURE_FIGURES, icon=":material/slideshow:")
if figures.open:
    with figures:
        drawn = [views.anatomy.Sizes(lm.name, others=SPEC_MODELS)]
        if anatomy.width and anatomy.ffn_size:  # the widths and the formula need both
            drawn = [views.anatomy.FeedForward(lm.name), views.anatomy.LectureCount(lm.name), *drawn]
        for view in drawn:
            ui.show_view(view, anatomy, key=f"lecture-{type(view).__name__}")

st.subheader("Module tree")
tree = pd.DataFrame(
    [
        {
            "module": "\u2003" * row.depth + row.name.split(".")[-1] if row.depth else row.name,
            "class": row.kind,
            "own parameters": ", ".join(f"{name} {list(shape)}" for name, shape in row.parameters),
            "parameters": row.count,
        }
        for row in anatomy.modules
    ]
)
st.dataframe(tree, hide_index=True, width="stretch", height=420, column_config={"parameters": COUNT})
