"""The logit lens drawn: what the model would predict if it stopped after each layer.

``lens_figure``: layers up the y axis (the embeddings at the bottom, the last layer, which is the model's own
prediction, at the top, as the residual stream flows), input positions along x; a cell is the token the
model's final norm and unembedding read from the residual stream there, coloured by its probability, with
the top few in the hover. ``lens_trajectory_figure``: for one position, the probability (and rank) of the
token the model finally predicts, layer by layer.

Both take plain arrays (labels and log-probabilities), so a page keeps only what it draws.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.render.heatmap import token_matrix
from explorer.render.layout import batched, relayout, update_axes
from explorer.render.style import CATEGORICAL, GRID, SCREEN, FigureInfo, Look, abbreviate, escape, finish, in_colour

CELL_LABEL_CHARS = 6  # a cell prints the first characters of its top token; the hover has it whole


# Layers are counted from 0 on every page (the heatmaps' "layer 0" is the first layer, as in code and links), so
# the residual stream reads "embeddings", then "layer 0" (after the first layer), ..., "layer L-1" (after the last).
LAYERS_COUNTED = "Layers are counted from 0, as on every page: “layer 0” is the first layer."


def layer_names(num_layers: int) -> list[str]:
    """Names of the residual stream's readings, bottom to top: the embeddings, then after each layer (from 0)."""
    return ["embeddings", *(f"layer {layer}" for layer in range(num_layers))]


def lens_figure(
    top_labels,
    top_logprobs: np.ndarray,
    input_tokens,
    *,
    info: FigureInfo,
    look: Look = SCREEN,
    masked: bool = False,
) -> go.Figure:
    """top_labels [layer + 1][position][rank] token labels and top_logprobs [layer + 1, position, rank] their
    log-probabilities (over the whole vocabulary); row 0 is the embeddings. Cells: the top token at each layer
    and position (the prediction of the token after that position; with ``masked``, an encoder's guess of the
    token at that position), coloured by its probability."""
    names = layer_names(top_logprobs.shape[0] - 1)
    probabilities = np.exp(np.asarray(top_logprobs, dtype=np.float64))
    order = slice(None, None, -1)  # the last layer on top: the rows are drawn top to bottom
    figure = token_matrix(
        probabilities[order, :, 0].astype(np.float32),
        names[order],
        input_tokens,
        info=info,
        look=look,
        zmax=1.0,
        colorbar_title="probability<br>of the top token",
        row_title="residual stream after",
        column_title="position (guessing its own token)" if masked else "position (predicting the next token)",
        hovertemplate="%{customdata}<extra></extra>",
        value_format=".2f",
    )
    heatmap = figure.data[0]
    rows = [
        [
            _hover(names[layer], input_tokens[p], top_labels[layer][p], probabilities[layer, p], masked)
            for p in range(len(input_tokens))
        ]
        for layer in range(len(names))
    ][order]
    heatmap.customdata = rows
    if heatmap.texttemplate:  # the cells are large enough for text: the top token instead of its probability
        colours = heatmap.text  # each cell's readable text colour (``token_matrix``), rows in drawn order
        tokens = [
            [escape(abbreviate(top_labels[layer][p][0], CELL_LABEL_CHARS)) for p in range(len(input_tokens))]
            for layer in range(len(names))
        ][order]
        heatmap.text = [
            [in_colour(t, c) for t, c in zip(*row, strict=True)] for row in zip(tokens, colours, strict=True)
        ]
        heatmap.texttemplate = "%{text}"
    return figure


def _hover(layer_name: str, token: str, labels, probabilities, masked: bool = False) -> str:
    what = "the token here would be" if masked else "the next token would be"
    lines = [f"<b>after {escape(layer_name)}</b>, at {escape(repr(token))}: {what}"]
    lines += [
        f"{rank + 1}. {escape(repr(label))}  {100 * p:.1f}%"
        for rank, (label, p) in enumerate(zip(labels, probabilities, strict=True))
    ]
    return "<br>".join(lines)


def lens_trajectory_figure(
    logprobs: np.ndarray,
    ranks: np.ndarray,
    token: str,
    *,
    info: FigureInfo,
    look: Look = SCREEN,
) -> go.Figure:
    """logprobs [layer + 1] and ranks [layer + 1] (0 = top) of one token (the model's final prediction at one
    position), read through the lens after the embeddings and after each layer."""
    names = layer_names(len(logprobs) - 1)
    probabilities = np.exp(np.asarray(logprobs, dtype=np.float64))
    figure = go.Figure(
        go.Scatter(
            x=names,
            y=probabilities,
            customdata=np.asarray(ranks, dtype=np.int64) + 1,
            mode="lines+markers",
            line={"color": CATEGORICAL[0], "width": 3},
            marker={"size": 9},
            name=escape(token),
            hovertemplate="after %{x}: %{y:.1%} (rank %{customdata})<extra></extra>",
        )
    )
    with batched(figure):
        finish(figure, info, look)
        relayout(figure, margin={"l": 70, "r": 20, "t": look.title_band, "b": 60}, showlegend=False)
        update_axes(
            figure, "x", title={"text": "residual stream after"}, tickfont={"size": look.tick_size}, gridcolor=GRID
        )
        update_axes(
            figure,
            "y",
            title={"text": f"probability of {escape(repr(token))}"},
            range=[0, 1.02],
            tickformat=".0%",
            tickfont={"size": look.tick_size},
            gridcolor=GRID,
        )
    return figure
