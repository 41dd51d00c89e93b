"""Beam search: the whole search tree, pruned candidates and finished pool included, exactly as generate() runs it."""

import pandas as pd
import streamlit as st

import explorer
from explorer import ui, views
from explorer.compute.decoding import (
    bans_table,
    comparison_caption,
    pool_caption,
    pool_table,
    repeats,
    status_counts,
    tree_at,
)
from explorer.ui import branching, clicks, decoding
from explorer.ui.kv_cache import kv_cache_section

TREE = "beam-tree"  # the search tree: a click on a node branches there

EARLY = ["False", "True", "never"]
EARLY_CAPTIONS = {
    "False": "stop when no running beam can still win (a heuristic)",
    "True": "stop once num_beams hypotheses have finished",
    "never": "canonical beam search: run until no improvement is possible",
}

ui.page_shell()
ui.page_header(
    "Beam search",
    "Beam search keeps the num_beams best partial sequences (beams) at every step. Each beam proposes its "
    "likeliest next tokens; all proposals compete on their cumulative log-probability, and the best "
    "unfinished ones become the next beams. A proposal that ends the text joins the pool of finished "
    "hypotheses, ranked by its score divided by length^length_penalty. Every node below is a candidate the "
    "search really considered.",
)
lm = ui.require_model()
lm = decoding.generative_model(lm)

with ui.controls():
    prompt = ui.text_ui("Prompt", decoding.default_prompt(lm.name), key="prompt", height=68)
    beams_column, steps_column, returned_column = st.columns(3)
    with beams_column:
        beams = ui.number_slider_ui("Beams", 1, decoding.PAGE_MAX_BEAMS, 3, key="beams", step=1)
    with steps_column:
        steps = ui.number_slider_ui("Steps", 1, decoding.PAGE_MAX_STEPS, 8, key="steps", step=1)
    with returned_column:
        returned = ui.number_slider_ui(
            "Sequences returned",
            1,
            max(beams, 2),
            1,
            key="returned",
            step=1,
            help="num_return_sequences: at most the number of beams.",
        )
        returned = min(returned, beams)
    penalty_column, ngram_column, early_column = st.columns([1, 1, 2])
    with penalty_column:
        length_penalty = ui.number_slider_ui(
            "Length penalty",
            -1.0,
            3.0,
            1.0,
            key="lp",
            step=0.1,
            help="Finished scores are divided by length^length_penalty: above 0 favours longer texts.",
        )
    with ngram_column:
        ngram = ui.number_slider_ui(
            "No-repeat n-gram size",
            0,
            5,
            0,
            key="ngram",
            step=1,
            help="Ban any token that would repeat an n-gram already in the text (0 = off).",
        )
    with early_column:
        early = ui.choice_ui("Early stopping", EARLY, key="early", captions=EARLY_CAPTIONS)
ui.notices_ui()
if not prompt.strip():
    st.info("Type a prompt to watch beam search explore its continuations.")
    st.stop()

settings = dict(
    strategy="beam",
    num_beams=beams,
    max_new_tokens=steps,
    length_penalty=length_penalty,
    early_stopping={"False": False, "True": True, "never": "never"}[early],
    no_repeat_ngram_size=ngram,
    num_return_sequences=returned,
    top_n=5,
)
# The chapter's comparison: greedy search and beam search as they are, and beam search with a no-repeat n-gram
# ban (this page's size, or 2 when the page has none). Each says whether it bans: none is banned silently.
ban = ngram or 2
force = branching.forced_tokens()  # a branch: tokens every beam starts from (a click on a node sets it)
try:
    original = ui.run_model("decode", lm.name, prompt, **settings)
    branched = {**settings, "force": force, "max_new_tokens": max(steps, len(force) + 1)}  # a step of its own
    trace = ui.run_model("decode", lm.name, prompt, **branched) if force else original
    greedy = ui.run_model("decode", lm.name, prompt, strategy="greedy", max_new_tokens=steps, top_n=5)
    unbanned, banned = (
        (original, ui.run_model("decode", lm.name, prompt, **{**settings, "no_repeat_ngram_size": ban}))
        if not ngram
        else (ui.run_model("decode", lm.name, prompt, **{**settings, "no_repeat_ngram_size": 0}), original)
    )
except explorer.InputError as error:
    st.info(ui.literal(error))
    if force:
        st.button("Back to the search's own choices", on_click=ui.set_value, args=(branching.FORCE_KEY, ()))
    st.stop()
branching.branch_on_click(TREE, trace)
if force:
    branching.breadcrumb_ui(trace)
    branching.side_by_side_ui(original, trace)
for note in trace.notes:
    st.caption(ui.literal(note))

for place, (continuation, score) in enumerate(zip(trace.continuations, trace.sequence_scores, strict=True), 1):
    line = ui.prompt_and_continuation(trace.prompt, continuation, seq2seq=trace.is_seq2seq)
    st.markdown(f"**{place}.** {line}  ·  normalised score {score:.4f}")

with ui.controls():
    upto = ui.index_slider_ui(
        "Show the search up to step",
        trace.num_steps,
        key="upto",
        default_last=True,
        first=1,
        help="Replay the search: the tree and the finished pool as they stood after this step (step 1 chose the "
        "first new token).",
    )
with ui.stage():
    tree = views.decoding.BeamTree(lm.name, prompt, upto_step=upto)
    ui.show_view(tree, trace, key="tree", select_key=clicks.selection_key(TREE))
shown_tree = tree_at(trace.tree, upto)  # the counts as the search stood at the replay step
counts = status_counts(shown_tree)
st.caption(
    f"{len(shown_tree) - 1} candidates considered up to step {upto + 1}: {counts['running']} kept as running beams, "
    f"{counts['pruned']} pruned, {counts['finished']} finished (entered the pool), {counts['returned']} on the "
    "returned path(s). Hover a node for its scores; click one to branch there (every beam then starts from that "
    "node's tokens)."
)

st.subheader("Finished pool")
pool = pool_table(trace, upto, lm.tokenizer)
if pool:
    st.dataframe(pd.DataFrame(pool), hide_index=True, width="stretch")
    st.caption(pool_caption(trace))
else:
    st.caption("No hypothesis had finished by this step.")

if trace.bans:
    st.subheader("Candidates the n-gram ban removed")
    st.caption(
        f"With no-repeat n-gram size {ngram}, a token that would repeat an n-gram already in the text gets "
        "probability 0. “Model's rank” is where the model itself ranked it (1 = its favourite)."
    )
    removed = bans_table(trace, upto)  # as the search stood at the replay step, like the tree and the pool
    if removed:
        st.dataframe(pd.DataFrame(removed), hide_index=True, width="stretch")
    else:
        st.caption(f"The ban had removed no candidate by step {upto + 1}.")

st.subheader("Greedy, beam, and beam with an n-gram ban")
beam_label = f"beam search, {beams} beam{'s' if beams > 1 else ''}"
compared = {
    "greedy search, no ban": greedy,
    f"{beam_label}, no ban": unbanned,
    f"{beam_label}, no repeated {ban}-grams": banned,
}
for column, (label, shown) in zip(st.columns(3), compared.items(), strict=True):
    with column:
        st.markdown(f"**{ui.literal(label[:1].upper() + label[1:])}**")
        st.markdown(ui.prompt_and_continuation(shown.prompt, shown.continuations[0], seq2seq=shown.is_seq2seq))
        st.metric("Log-probability", f"{float(shown.sequence_logprobs[0]):.2f}")
        st.caption(f"Repeated {ban}-grams: {repeats(shown.generated_tokens[0], size=ban)}")
logprobs = [float(shown.sequence_logprobs[0]) for shown in compared.values()]
# Written from the numbers shown above: which is likelier, and what the ban changed, differ by prompt and model.
st.caption(
    comparison_caption(
        *(
            (logprob, repeats(shown.generated_tokens[0], size=ban))
            for logprob, shown in zip(logprobs, compared.values(), strict=True)
        ),
        ban=ban,
        prompt_counts=not trace.is_seq2seq,
    )
)
comparison = views.decoding.Comparison(
    lm.name, prompt, (), title="Greedy, beam, beam with a ban", where=(f"{beams} beams", f"{steps} steps")
)
ui.show_view(comparison, compared, key="logprobs")
# The cache greedy search keeps from this prompt; beam search keeps one such row per beam.
kv_cache_section(lm.name, prompt, steps, rows=beams)
