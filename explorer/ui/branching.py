"""Branch and force on the decoding pages: "what if it had said X?".

The forced tokens live in the link (``force=12,345``). A click on a candidate of the greedy grid, or on a
node of the beam tree, branches there: the tokens the decoding had chosen before that point, then the
clicked one, are forced, and the strategy continues from them. A breadcrumb shows the branch and undoes it.
"""

from __future__ import annotations

import streamlit as st

from explorer.compute.decoding import mark_leading_space, path_to
from explorer.ui.clicks import clicked_point
from explorer.ui.shell import controls
from explorer.ui.text import literal, prompt_and_continuation
from explorer.ui.widgets import set_value, token_ids_state

FORCE_KEY = "force"


def forced_tokens() -> tuple[int, ...]:
    """The branch in the link: token ids forced before the strategy chooses."""
    return token_ids_state("Forced tokens", key=FORCE_KEY)


def branch_on_click(figure: str, trace) -> None:
    """If a candidate or a node of ``figure`` (drawn from ``trace``) was clicked, branch there and rerun; and the
    same without a mouse (``branch_picker_ui``)."""
    branch_picker_ui(figure, trace)
    point = clicked_point(figure)
    if point is None:
        return
    set_value(FORCE_KEY, _branch_at(trace, point))
    st.rerun()


def _branch_at(trace, point) -> tuple[int, ...]:
    """The forced tokens of a branch at ``point`` of the figure: (step, token id) on the greedy grid, (step, node
    id) in the beam tree."""
    if trace.settings.strategy == "beam":
        nodes = {node.id: node for node in trace.tree}
        return tuple(nodes[i].token_id for i in path_to(nodes, int(point[1])))
    step, token_id = int(point[0]), int(point[1])
    return (*(int(s.chosen_ids[0]) for s in trace.steps[:step]), token_id)


def branch_points(trace) -> dict[str, tuple[int, int]]:
    """What a click on the figure can branch at, by a name a keyboard's visitor picks it by: {label: point}."""
    if trace.settings.strategy == "beam":
        return {
            f"step {node.step + 1}: “{mark_leading_space(node.token)}” (node {node.id})": (node.step, node.id)
            for node in trace.tree
            if node.id != 0 and not getattr(node, "forced", False)
        }
    return {
        f"step {step.step + 1}: “{mark_leading_space(token)}” (the model's #{rank + 1})": (step.step, int(token_id))
        for step in trace.steps[trace.num_forced :]
        for rank, (token_id, token) in enumerate(zip(step.candidate_ids[0], step.candidate_tokens[0], strict=False))
    }


def branch_picker_ui(figure: str, trace) -> None:
    """The keyboard's way to branch (a click on the figure needs a mouse): a list of the same candidates."""
    points = branch_points(trace)
    if not points:
        return
    with controls():
        st.selectbox(
            "Branch at a candidate",
            list(points),
            index=None,
            placeholder="Choose a candidate to make the model say it",
            key=f"{figure}-branch-picker",
            on_change=_branch_picked,
            args=(f"{figure}-branch-picker", trace, points),
            help="The same as clicking the candidate on the figure.",
        )


def _branch_picked(key: str, trace, points: dict) -> None:
    picked = st.session_state.get(key)
    if picked in points:
        set_value(FORCE_KEY, _branch_at(trace, points[picked]))
    st.session_state[key] = None


def breadcrumb_ui(branch) -> None:
    """The forced tokens of ``branch`` (a trace decoded with them), what the model wanted at each, and buttons
    that undo the last one or go back to the model's own choices."""
    forced = branch.steps[: branch.num_forced]
    ids = tuple(int(step.chosen_ids[0]) for step in forced)
    crumbs = " → ".join(
        f"“{literal(_forced_label(branch, step))}” (the model's #{int(step.forced_rank[0]) + 1})" for step in forced
    )
    # Wide enough for the buttons' labels at 1280 px beside the sidebar ([6, 2, 2] cut "Undo the last b…").
    text_column, undo_column, clear_column = st.columns([4, 3, 3], vertical_alignment="center")
    text_column.markdown(f"**Branch:** the model was made to say {crumbs}, then chose the rest.")
    undo_column.button(
        "Undo the last branch", icon=":material/undo:", on_click=set_value, args=(FORCE_KEY, ids[:-1]), width="stretch"
    )
    clear_column.button(
        "Remove the branch", icon=":material/close:", on_click=set_value, args=(FORCE_KEY, ()), width="stretch"
    )


def _forced_label(trace, step) -> str:
    token_id = int(step.chosen_ids[0])
    candidates = list(step.candidate_ids[0])
    if token_id in candidates:
        return mark_leading_space(step.candidate_tokens[0][candidates.index(token_id)])
    generated = trace.generated_tokens[0]
    return mark_leading_space(generated[step.step]) if step.step < len(generated) else "?"


def side_by_side_ui(original, branch) -> None:
    """The model's own decoding and the branch, with their sequence log-probabilities."""
    left, right = st.columns(2)
    for column, title, trace in (
        (left, "The model's own choices", original),
        (right, "The branch", branch),
    ):
        with column:
            st.markdown(f"**{title}**")
            st.markdown(prompt_and_continuation(trace.prompt, trace.continuations[0], seq2seq=trace.is_seq2seq))
            st.metric("Log-probability of the continuation", f"{float(trace.sequence_logprobs[0]):.2f}")
