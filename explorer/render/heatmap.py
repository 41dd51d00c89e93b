"""One attention head as a Plotly heatmap: queries down the y axis, keys along x.

Design choices, and why:

- Only the chosen head's [query, key] matrix goes into the figure, as float32. Plotly serializes
  NumPy arrays as base64 typed arrays, 4 bytes a cell: exact values in less space than rounded
  decimal text would take (about 1.4 MB at 512 tokens).
- Axes are categories named ``#i 'token'``: the position keeps repeated tokens apart (Plotly merges
  equal category names) and lets the hover name both tokens without a per-cell text array.
  ``ticktext`` then shows the bare tokens.
- Masked cells (keys a query may not attend to) are NaN, which Plotly leaves blank; the colour scale
  starts at a visible tint so that a weight of 0 never looks like a masked cell.
- Tokens are escaped: Plotly renders tags such as ``<b>`` or ``<a>`` in labels and hover text.
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go

from explorer.data import AttentionStack

FONT = '"Source Sans", "Source Sans Pro", "Helvetica Neue", Arial, sans-serif'
# Blues, but starting at a tint that stays distinguishable from the blank (masked) background.
COLORSCALE = [
    [0.0, "#eaf0f8"],
    [0.125, "#d4e3f3"],
    [0.25, "#b9d3ea"],
    [0.375, "#93bfdf"],
    [0.5, "#6aa7d3"],
    [0.625, "#468cc4"],
    [0.75, "#2a6fb0"],
    [0.875, "#14528f"],
    [1.0, "#08306b"],
]
HOVER = "<b>%{z:.6g}</b><br>query %{y} → key %{x}<extra></extra>"
MAX_TICK_LABELS = 48  # beyond this, label every 2nd, 4th, 8th... position (the hover still names every cell)
MAX_ANNOTATED = 12  # up to this many tokens, cells also print their weight (readable on slides)


def attention_heatmap(
    stack: AttentionStack,
    layer: int,
    head: int,
    *,
    color_max: float | None = 1.0,
    title: str | None = None,
) -> go.Figure:
    """The weights of one head, [query, key], with masked cells blank.

    ``color_max`` is the weight drawn darkest: 1.0 compares heads on one scale; None stretches the
    colours to this head's largest weight. ``title`` defaults to "Layer L · head H" (counted from 0).
    """
    weights = masked_weights(stack, layer, head)
    queries, keys = position_labels(stack.query_tokens), position_labels(stack.key_tokens)
    trace = go.Heatmap(
        z=weights,
        x=keys,
        y=queries,
        zmin=0.0,
        zmax=_color_max(weights, color_max),
        colorscale=COLORSCALE,
        colorbar={"title": {"text": "weight"}, "thickness": 14, "outlinewidth": 0},
        hovertemplate=HOVER,
        hoverongaps=False,
        **_cell_style(max(len(queries), len(keys))),
    )
    figure = go.Figure(trace)
    figure.update_layout(_layout(len(queries), len(keys), title or f"Layer {layer} · head {head}"))
    figure.update_xaxes(_axis(keys, stack.key_tokens, "key (attended to)"), tickangle=-45)
    figure.update_yaxes(_axis(queries, stack.query_tokens, "query (attending)"), autorange="reversed")
    return figure


def masked_weights(stack: AttentionStack, layer: int, head: int) -> np.ndarray:
    """[query, key] float32 copy of one head's weights, NaN where the mask forbids attending."""
    allowed = stack.masks_by_layer()[layer]
    return np.where(allowed, stack.attentions[layer, head], np.nan).astype(np.float32)


def position_labels(tokens) -> list[str]:
    """``#i 'token'``, escaped: unique per position even when tokens repeat."""
    return [f"#{i} '{escape(token)}'" for i, token in enumerate(tokens)]


def escape(text: str) -> str:
    """Escape what Plotly's label renderer would read as markup (it decodes the entities back)."""
    return html.escape(text, quote=False)


def verification_caption(error: float, *, tolerance: float = 1e-4) -> str:
    """A one-line verdict on ``capture.verify()``: recomputing softmax(q . k) reproduces the weights."""
    if not math.isfinite(error) or error > tolerance:
        return f"⚠ not verified: max |recomputed − captured| = {error:.1e} (above {tolerance:.0e})"
    return f"✓ verified: max |recomputed − captured| = {error:.1e}"


def _color_max(weights: np.ndarray, color_max: float | None) -> float:
    if color_max is not None:
        return float(color_max)
    peak = np.nanmax(weights) if np.isfinite(weights).any() else 1.0
    return float(peak) if peak > 0 else 1.0


def _cell_style(count: int) -> dict:
    """Thin gaps and printed weights while cells are big enough to show them."""
    style = {"xgap": 1, "ygap": 1} if count <= 48 else {}
    if count <= MAX_ANNOTATED:
        style["texttemplate"] = "%{z:.2f}"
        style["textfont"] = {"size": 12}
    return style


def _axis(labels: list[str], tokens, title: str) -> dict:
    step = 1
    while len(labels) > step * MAX_TICK_LABELS:
        step *= 2
    shown = range(0, len(labels), step)
    text = [escape(tokens[i]) if step == 1 else f"#{i} {escape(tokens[i])}" for i in shown]
    return {
        "type": "category",
        "title": {"text": title},
        "tickmode": "array",
        "tickvals": [labels[i] for i in shown],
        "ticktext": text,
        "tickfont": {"size": 14 if len(labels) <= 24 else 11},
        "showgrid": False,
        "zeroline": False,
        "automargin": True,
        "constrain": "domain",
    }


def _layout(num_queries: int, num_keys: int, title: str) -> dict:
    # Square cells in a plot that grows with the input, within what fits a screen or a slide;
    # room around it for the token labels and the colour bar.
    side = int(min(720, max(420, 44 * max(num_queries, num_keys))))
    return {
        "template": "none",  # the default template adds ~7 kB and a grey background
        "title": {"text": escape(title), "x": 0.0, "xanchor": "left", "font": {"size": 18}},
        "font": {"family": FONT, "size": 14, "color": "#1f2430"},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "width": side + 170,
        "height": side + 140,
        "margin": {"l": 10, "r": 10, "t": 50, "b": 10},
        "hoverlabel": {"bgcolor": "white", "font": {"family": FONT, "size": 13}},
        "yaxis": {"scaleanchor": "x", "scaleratio": 1},
    }
