"""Attention while generating: each new token's attention over the prompt and the tokens generated before it."""

import streamlit as st

import explorer
from explorer import ui, views
from explorer.ui import decoding

ui.page_shell()
ui.page_header(
    "Attention while generating",
    "While generating, the model runs once per new token: the prompt's pass chooses the first, then each new "
    "token is fed back and attends to the prompt and to every token before it (the cache keeps their keys and "
    "values). Stitched together, those rows form one causal matrix: rows above the dashed line are the prompt, "
    "rows below are the tokens fed back. The last new token is never fed back, so it has no row. Move the step "
    "slider to watch the matrix grow.",
)
lm = ui.require_model()
lm = decoding.generative_model(lm)

with ui.controls():
    prompt = ui.text_ui("Prompt", decoding.default_prompt(lm.name), key="prompt", height=68)
    strategy_column, steps_column, seed_column = st.columns([2, 1, 1], vertical_alignment="bottom")
    with strategy_column:
        strategy = ui.choice_ui("Strategy", ["greedy", "sample"], key="strategy")
    with steps_column:
        steps = ui.number_slider_ui("Steps", 1, decoding.PAGE_MAX_STEPS, 10, key="steps", step=1)
    with seed_column:
        seed = ui.number_slider_ui("Seed", 0, 9999, 0, key="seed", step=1, help="For sampling.")
if not prompt.strip():
    ui.notices_ui()
    st.info("Type a prompt to watch its attention grow token by token.")
    st.stop()
extra = (("seed", seed),) if strategy == "sample" else ()
decoding_settings = (("strategy", strategy), ("max_new_tokens", steps), *extra)
try:
    trace = ui.run_view(views.decoding.GenerationAttention(lm.name, prompt, decoding_settings))
except explorer.InputError as error:
    ui.notices_ui()
    st.info(ui.literal(error))
    st.stop()

stacks = {name: stack for name, stack in trace.attention.items() if name != "encoder"}
with ui.controls():
    stack_name = ui.stack_ui(list(stacks))
    stack = stacks[stack_name]
    generated = len(trace.generated_tokens[0])
    layer_column, head_column, step_column = st.columns(3)
    with layer_column:
        layer = ui.layer_slider_ui(stack, key="layer")
    with head_column:
        head = ui.index_slider_ui("Head", stack.num_heads, key="head")
    with step_column:
        step = ui.index_slider_ui(
            "Step",
            generated,
            key="step",
            default_last=True,
            first=1,
            help="Up to the pass that chose which generated token (step 1: the prompt's pass chose the first).",
        )
ui.notices_ui()
st.markdown(ui.prompt_and_continuation(trace.prompt, trace.continuations[0], seq2seq=trace.is_seq2seq))

view = views.decoding.GenerationAttention(lm.name, prompt, decoding_settings, stack_name, layer, head, step)
with ui.stage():
    ui.show_view(view, trace, key="generation")
st.caption(view.caption(trace))
