"""Greedy search: at every step, the most likely next token; the chapter's table of candidates, step by step."""

import pandas as pd
import streamlit as st

import explorer
from explorer import ui, views
from explorer.compute.decoding import greedy_table, looks_untrained, mark_leading_space, repeated_ngram
from explorer.ui import branching, clicks, decoding
from explorer.ui.kv_cache import kv_cache_section

GRID = "greedy-grid"  # the candidates grid: a click there branches
CHAIN = "chain"  # the chain rule's section: its key and link parameter

ui.page_shell()
ui.page_header(
    "Greedy search",
    "At every step the model gives a probability to each token of its vocabulary, and greedy search appends "
    "the most likely one. Each row shows the text so far and the five most likely next tokens; the boxed cell "
    "is the token taken. Entropy measures how unsure the model is (0 = certain), in nats: natural logarithms, "
    "like the log-probabilities.",
)
lm = ui.require_model()
lm = decoding.generative_model(lm)
ui.apply_pending_preset(lm.name)
ui.preset_notice()

with ui.controls():
    prompt_column, steps_column = st.columns([4, 1], vertical_alignment="bottom")
    with prompt_column:
        prompt = ui.text_ui("Prompt", decoding.default_prompt(lm.name), key="prompt", height=68)
    with steps_column:
        steps = ui.number_slider_ui(
            "Steps",
            1,
            decoding.PAGE_MAX_STEPS,
            8,
            key="steps",
            step=1,
            help="How many tokens to generate, one per step.",
        )
    decoding.chapter_preset_button("Chapter preset: gpt2, “Transformers are the”, 8 steps", steps=8)
ui.notices_ui()
if not prompt.strip():
    st.info("Type a prompt to see which token greedy search picks at each step.")
    st.stop()

force = branching.forced_tokens()  # a branch: tokens the model is made to say first (clicks set it)
try:
    original = decoding.greedy_decoding(lm.name, prompt, steps=steps)
    # The branch gets at least one step of its own after the forced tokens.
    trace = (
        decoding.greedy_decoding(lm.name, prompt, steps=max(steps, len(force) + 1), force=force) if force else original
    )
except explorer.InputError as error:
    st.info(ui.literal(error))
    if force:
        st.button("Back to the model's own choices", on_click=ui.set_value, args=(branching.FORCE_KEY, ()))
    st.stop()
branching.branch_on_click(GRID, trace)
for note in trace.notes:
    st.caption(ui.literal(note))

if force:
    branching.breadcrumb_ui(trace)
    branching.side_by_side_ui(original, trace)
else:
    st.markdown(ui.prompt_and_continuation(trace.prompt, trace.continuations[0], seq2seq=trace.is_seq2seq))
if looks_untrained(trace, len(lm.tokenizer)):
    st.warning(
        "This model's predictions are nearly uniform over its vocabulary: it looks untrained (random weights), "
        "so its choices mean nothing yet."
    )
loop = repeated_ngram(trace.generated_tokens[0], size=2)
if loop:
    st.info(
        f"Greedy search is looping: “{ui.literal(''.join(loop))}” keeps coming back. This is the lesson of greedy "
        "search: each step takes the single most likely token, and once a phrase repeats, the model finds it "
        "even likelier. Beam search with a no-repeat n-gram ban, or sampling, breaks the loop.",
        icon=":material/repeat:",
    )
    link_params = {"prompt": prompt, "steps": str(steps)}
    left, right = st.columns(2)
    left.page_link(
        "pages/beam_search.py",
        label="Try beam search with an n-gram ban",
        query_params={**link_params, "ngram": "2"},
        icon=":material/account_tree:",
    )
    right.page_link(
        "pages/sampling.py", label="Try sampling", query_params={"prompt": prompt}, icon=":material/casino:"
    )

# Every column in view, with no sideways scroll, on a 1280-pixel screen beside the sidebar: a table whose cells
# wrap (a data grid keeps each cell on one line, and its eight columns took 1,150 px where 820 were left).
# st.table renders each cell as Markdown, so the prompt in "input" goes through ui.literal.
# "chosen" only where a branch made it differ from choice 1 (greedy search otherwise always takes choice 1).
table = pd.DataFrame(greedy_table(trace, lm.tokenizer, context_chars=48))
st.table(ui.literal_table(table if force else table.drop(columns="chosen")), hide_index=True)
with ui.stage():
    ui.show_view(views.decoding.Greedy(lm.name, prompt), trace, key="greedy", select_key=clicks.selection_key(GRID))
st.caption(
    "Click any candidate to make the model say it at that step: the tokens before it stay as they were, and "
    "greedy search continues from there (the branch is kept in the link)."
)
logprob_column, entropy_column = st.columns(2)
logprob_column.metric(
    "Log-probability of the continuation",
    f"{float(trace.sequence_logprobs[0]):.2f}",
    help="The sum, over the generated tokens, of the log of the probability the model gave each one.",
)
entropy_column.metric(
    "Mean entropy per step",
    f"{sum(float(s.entropy[0]) for s in trace.steps) / max(trace.num_steps, 1):.2f} nats",
)
st.caption("Tokens: " + " · ".join(ui.literal(mark_leading_space(t)) for t in trace.generated_tokens[0]))
# The lecture's figures of this decoding (generation, slides 2 and 3): lazy, so the page costs nothing more until
# it is opened (Esc on one of those slides opens it: ``explorer.ui.full_page``).
chain = ui.expander_ui("The chain rule: log-probabilities added", key=CHAIN, icon=":material/functions:")
if chain.open:
    with chain:
        for view in (views.decoding.ChainRule(lm.name, prompt), views.decoding.Products(lm.name, prompt)):
            ui.show_view(view, trace, key=f"chain-{type(view).__name__}")
# The model's own cache, pass by pass, for the model's own choices (a branch's forced tokens aside).
kv_cache_section(lm.name, prompt, steps)
