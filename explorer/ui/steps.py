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


def toy_caption(toy, stages: dict, vectors: np.ndarray) -> str:
    """Which vectors X holds, and what their weights do here: how many queries attend most to themselves."""
    count, hidden = vectors.shape
    held = (
        f"the {count} tokens' embeddings (the model's input embedding rows, {hidden} numbers each, no positions)"
        if toy.embeddings == "model"
        else f"{count} random vectors of {hidden} numbers (seed {toy.seed}, entries of size about 1), the chapter's "
        "setting"
    )
    lengths = np.linalg.norm(vectors, axis=1)
    itself = int((np.argmax(stages["weights"], axis=1) == np.arange(count)).sum())
    return (
        f"X holds {held}: each serves as its own query, key and value, with no learnt projections. Here "
        f"{itself} of the {count} queries put their largest weight on themselves, and the largest weight of a row is "
        f"{float(stages['weights'].max(axis=1).min()):.2f} to {float(stages['weights'].max(axis=1).max()):.2f} "
        f"(vector lengths {float(lengths.min()):.2f} to {float(lengths.max()):.2f})."
    )


STAGE_COLUMNS = {"dot": "q·k", "scaled": "× scale", "capped": "softcapped", "biased": "+ bias", "masked": "masked"}


def show_chapter_toy(
    lm, view, tokens, query: int, *, causal: bool, embeddings: str = "model", token_ids=None, specials: bool = True
) -> None:
    """The chapter's attention with no learnt weights, on this text's token embeddings or (``embeddings``
    "random") the chapter's seeded random vectors, checked against torch; ``token_ids`` (with ``tokens``): the
    tokens it runs on, the capture's all by default (``specials`` False: the special tokens were left out)."""
    token_ids = tuple(int(i) for i in (view.capture.token_ids if token_ids is None else token_ids))
    toy = views.attention.Toy(
        lm.name, view.shown_text, token_ids, tuple(tokens), query, causal, embeddings=embeddings, specials=specials
    )
    found = run_view(toy)
    vectors = toy.vectors(found)
    stages = toy.stages(found)
    hidden = vectors.shape[-1]
    st.latex(
        r"\mathrm{Attention}(X) = \mathrm{softmax}\!\left(\frac{X X^\top}{\sqrt{%d}}" % hidden  # noqa: UP031
        + (r" + m" if causal else "")
        + r"\right) X"
    )
    st.caption(
        toy_caption(toy, stages, vectors) + (" The causal mask hides the tokens after each query." if causal else "")
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
