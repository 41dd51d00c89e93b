"""Attention step by step: one query's row through every stage, for the model's heads or the chapter's toy."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import streamlit as st

import explorer
from explorer import views
from explorer.ui.results import run_view, show_view
from explorer.ui.shell import stage


def stage_table(stages: dict, key_tokens, query: int) -> dict:
    """One query's row of every stage, as table columns (−∞ written out)."""
    table = {"key": [f"#{i} {t}" for i, t in enumerate(key_tokens)]}
    for name in ("dot", "scaled", "capped", "biased", "masked"):
        if name in stages:
            table[STAGE_COLUMNS[name]] = [("−∞" if np.isneginf(v) else f"{v:.4f}") for v in stages[name][query]]
    table["softmax weight"] = stages["weights"][query]
    return table


STAGE_COLUMNS = {"dot": "q·k", "scaled": "× scale", "capped": "softcapped", "biased": "+ bias", "masked": "masked"}


def show_chapter_toy(lm, view, tokens, query: int, *, causal: bool) -> None:
    """The chapter's attention with no learnt weights, on this text's token embeddings, checked against torch."""
    token_ids = tuple(int(i) for i in view.capture.token_ids)
    toy = views.attention.Toy(lm.name, view.shown_text, token_ids, tuple(tokens), query, causal)
    found = run_view(toy)
    vectors = found.token
    stages = toy.stages(found)
    hidden = vectors.shape[-1]
    st.latex(
        r"\mathrm{Attention}(X) = \mathrm{softmax}\!\left(\frac{X X^\top}{\sqrt{%d}}" % hidden  # noqa: UP031
        + (r" + m" if causal else "")
        + r"\right) X"
    )
    st.caption(
        f"X holds the {len(tokens)} tokens' embeddings (the model's input embedding rows, {hidden} numbers each, no "
        "positions): each serves as its own query, key and value, with no learnt projections, so a token's highest "
        "score is usually with itself and with tokens of similar embeddings. How sharp the weights are depends on the "
        "embeddings' length: the chapter's freshly initialised table (entries of typical size 1, length √d) makes "
        "each token attend almost only to itself; embeddings of length about 1, as in the bundled models, give "
        f"nearly even weights (here, lengths {float(np.linalg.norm(vectors, axis=1).min()):.2f} to "
        f"{float(np.linalg.norm(vectors, axis=1).max()):.2f})."
        + (" The causal mask hides the tokens after each query." if causal else "")
    )
    with stage():
        show_view(toy, found, key="toy")
    st.dataframe(pd.DataFrame(stage_table(stages, tokens, query)), hide_index=True, width="stretch")
    reference = explorer.torch_attention(vectors, vectors, vectors, causal=causal)
    st.caption(toy.caption(found, reference))
    if causal:
        mask_column, scores_column = st.columns(2)
        with mask_column:
            show_view(dataclasses.replace(toy, show="mask"), found, key="toy-mask")
        with scores_column:
            show_view(dataclasses.replace(toy, show="scores"), found, key="toy-scores")
        st.caption(
            "The chapter's mask, torch.tril(torch.ones(n, n)): 1 where a query may attend, 0 where it may not; "
            "scores.masked_fill(mask == 0, −∞) gives the scores on the right."
        )
