"""Scaled dot-product attention, step by step, with the model's real numbers for one layer, head and query."""

import pandas as pd
import streamlit as st

from explorer import ui, views
from explorer.compute.attention import head_outputs, score_stages
from explorer.ui import steps
from explorer.ui.attention import require_vectors_ui, run_capture_ui

SOURCES = {
    "model": "the model's own queries, keys and values, per layer and head",
    "toy": "the chapter's toy: q = k = v = the token embeddings, no learnt weights",
}
TOY_EMBEDDINGS = {
    "model": "the model's own token embeddings",
    "random": "the chapter's: seeded random vectors of the model's width",
}


ui.page_shell()
header = ui.page_header(
    "Attention step by step",
    "Attention(Q, K, V) = softmax(Q·Kᵀ · scale + bias + mask) · V, for one head and one query token. The query "
    "vector meets every key vector in a dot product; the scores are scaled (by 1/√head_dim in most models, 1 in "
    "T5), a position bias is added where the model has one, masked keys get −∞, softmax turns the scores into "
    "weights that sum to 1, and the output is the weighted sum of the value vectors.",
)
lm = ui.require_model()
view = run_capture_ui(lm, header)
stack = view.stack
with ui.controls():
    source = ui.choice_ui(
        "Attention of",
        list(SOURCES),
        key="source",
        captions=SOURCES,
        help="The model's heads use the queries, keys and values its layer computed. The chapter first computes "
        "attention with no weights at all: every token's embedding serves as its query, key and value.",
    )
    toy = source == "toy"
    if toy:
        words_only = ui.toggle_ui(
            "Words only",
            key="toy_words",
            help="Leave out the special tokens ([CLS], [SEP]...), as the chapter's toy does: it runs on the words.",
        )
        special = set(lm.tokenizer.all_special_ids) if words_only else set()
        kept = [i for i, token_id in enumerate(view.capture.token_ids) if int(token_id) not in special]
        toy_ids = tuple(int(view.capture.token_ids[i]) for i in kept)
        toy_tokens = [view.capture.tokens[i] for i in kept]
        causal = ui.toggle_ui(
            "Causal mask", key="causal", help="Each token attends only to itself and the tokens before it."
        )
        toy_embeddings = ui.choice_ui(
            "Vectors",
            list(TOY_EMBEDDINGS),
            key="toy_embeddings",
            captions=TOY_EMBEDDINGS,
            help="The chapter draws random embeddings (entries of size 1), so each token attends almost only to "
            "itself; a trained model's embeddings are shorter and give flatter weights.",
        )
        query = ui.index_slider_ui(
            "Query token", len(toy_tokens), key="query", help="Which token's row to follow (counted from 0)."
        )
    else:
        layer_column, head_column, query_column = st.columns(3)
        with layer_column:
            layer = ui.layer_slider_ui(stack, key="layer")
        with head_column:
            head = ui.index_slider_ui("Head", stack.num_heads, key="head")
        with query_column:
            query = ui.index_slider_ui(
                "Query token",
                len(stack.query_tokens),
                key="query",
                help="Which token's row to follow (counted from 0).",
            )
ui.notices_ui()

if toy:
    steps.show_chapter_toy(
        lm,
        view,
        toy_tokens,
        query,
        causal=causal,
        embeddings=toy_embeddings,
        token_ids=toy_ids,
        specials=not words_only,
    )
    st.stop()

require_vectors_ui(stack)  # the model's own queries and keys: none where the model returns weights alone
stages = score_stages(stack, layer, head)
inputs = (lm.name, view.text, view.text_pair, view.target, view.stack_name)
step_view = views.attention.StepByStep(*inputs, layer, head, query)
st.latex(step_view.formula(view.capture))
st.caption(step_view.setting(view.capture, label=ui.literal))
with ui.stage():
    ui.show_view(step_view, view.capture, key="steps")

table = steps.stage_table(stages, stack.key_tokens, query)
table["captured weight"] = stack.attentions[layer, head, query]
st.dataframe(
    pd.DataFrame(table),
    hide_index=True,
    width="stretch",
    column_config={"captured weight": st.column_config.NumberColumn(help="What the model itself computed.")},
)
st.caption(step_view.caption(view.capture))

if stack.values is not None:
    values = stack.head_vectors(layer, head)[2]  # at this layer's own width
    output = head_outputs(stack.attentions[layer : layer + 1, head : head + 1], values[None, None])[0, 0, query]
    width = len(output)  # the values' width: MiMo-V2-Flash's are wider than its queries and keys
    st.markdown(
        f"**Output of this head for this query**: a vector of {width} numbers (first ones: "
        f"{', '.join(f'{v:.3f}' for v in output[:6])}, …). All {stack.num_heads} heads' outputs are concatenated "
        f"({stack.num_heads} × {width} = {stack.num_heads * width} numbers) and multiplied by the output "
        "projection, giving this token's attention output for the layer."
    )
