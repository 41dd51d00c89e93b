"""Every layer and head at once, as one figure of thumbnails (one heatmap trace, not dozens of charts).

The [layer, head, query, key] weights are tiled into one image: a row of thumbnails per layer, a column per
head, separated by blank (NaN) gutters. Long inputs are pooled first (mean over blocks of tokens) so a
thumbnail never carries more than ``MAX_THUMBNAIL`` cells a side: the browser gets what it can show. An
invisible marker at each thumbnail's centre makes it clickable (Streamlit returns no selection for heatmap
cells), so picking a thumbnail can open that head.
"""

from __future__ import annotations

import itertools

import numpy as np
import plotly.graph_objects as go

from explorer.render.layout import batched, relayout, update_axes
from explorer.render.style import MUTED, SCREEN, SEQUENTIAL, FigureInfo, Look, finish

MAX_THUMBNAIL = 48
GUTTER = 1  # blank cells between thumbnails, in (pooled) cells


def pooled(matrix: np.ndarray, size: int) -> np.ndarray:
    """Mean over blocks so that [query, key] becomes at most [size, size] (NaN cells ignored)."""
    rows, columns = matrix.shape[-2:]
    if rows <= size and columns <= size:
        return matrix
    r_edges = np.linspace(0, rows, min(rows, size) + 1).astype(int)
    c_edges = np.linspace(0, columns, min(columns, size) + 1).astype(int)
    out = np.empty((*matrix.shape[:-2], len(r_edges) - 1, len(c_edges) - 1), dtype=np.float32)
    for i, (r0, r1) in enumerate(itertools.pairwise(r_edges)):
        for j, (c0, c1) in enumerate(itertools.pairwise(c_edges)):
            block = matrix[..., r0:r1, c0:c1]
            # A block wholly masked (above a causal diagonal) has no mean: NaN, a gutter-like blank, without
            # np.nanmean's "Mean of empty slice" warning.
            shown = np.count_nonzero(~np.isnan(block), axis=(-2, -1))
            total = np.nansum(block, axis=(-2, -1))
            out[..., i, j] = np.where(shown > 0, total / np.maximum(shown, 1), np.nan)
    return out


def tiled(weights: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, int, int]:
    """One image [layer rows, head columns] of (pooled) thumbnails; returns (image, cell rows, cell columns)."""
    shown = np.where(masks[:, None], weights, np.nan).astype(np.float32)
    shown = pooled(shown, MAX_THUMBNAIL)
    layers, heads, rows, columns = shown.shape
    image = np.full((layers * (rows + GUTTER) - GUTTER, heads * (columns + GUTTER) - GUTTER), np.nan, np.float32)
    for layer in range(layers):
        for head in range(heads):
            top, left = layer * (rows + GUTTER), head * (columns + GUTTER)
            image[top : top + rows, left : left + columns] = shown[layer, head]
    return image, rows, columns


def heads_grid(
    weights: np.ndarray,
    masks: np.ndarray,
    *,
    info: FigureInfo,
    look: Look = SCREEN,
    selected: tuple[int, int] | None = None,
    color_max: float = 1.0,
) -> go.Figure:
    """Thumbnails of every head (weights [layer, head, query, key], masks [layer, query, key])."""
    image, rows, columns = tiled(weights, masks)
    return tiles_figure(
        image, rows, columns, *weights.shape[:2], info=info, look=look, selected=selected, color_max=color_max
    )


def tiles_figure(
    image: np.ndarray,
    rows: int,
    columns: int,
    layers: int,
    heads: int,
    *,
    info: FigureInfo,
    look: Look = SCREEN,
    selected: tuple[int, int] | None = None,
    color_max: float = 1.0,
    layer_numbers=None,
) -> go.Figure:
    """The thumbnails figure from an image ``tiled`` already made (pages keep the image, not the capture).
    ``layer_numbers``: the model's own number of each row of layers, where some of its layers are left out (the
    ticks and the hover say those; a click still gives the row's index)."""
    numbers = list(range(layers)) if layer_numbers is None else [int(number) for number in layer_numbers]
    figure = go.Figure(
        go.Heatmap(
            z=image,
            zmin=0,
            zmax=color_max,
            colorscale=SEQUENTIAL,
            hoverinfo="skip",
            showscale=True,
            colorbar={
                "title": {"text": f"weight<br>darkest = {color_max:g}", "side": "top"},
                "thickness": 12,
                "tickfont": {"size": look.smaller_ticks(2)},
            },
        )
    )
    centres_x = [h * (columns + GUTTER) + (columns - 1) / 2 for _ in range(layers) for h in range(heads)]
    centres_y = [layer * (rows + GUTTER) + (rows - 1) / 2 for layer in range(layers) for _ in range(heads)]
    figure.add_trace(
        go.Scatter(
            x=centres_x,
            y=centres_y,
            mode="markers",
            marker={"symbol": "square", "size": 14, "color": "rgba(0,0,0,0)"},
            customdata=[[layer, head] for layer in range(layers) for head in range(heads)],
            **_layer_hover(numbers, heads, renumbered=layer_numbers is not None),
            showlegend=False,
        )
    )
    if selected is not None:
        layer, head = selected
        x0, y0 = head * (columns + GUTTER) - 0.5, layer * (rows + GUTTER) - 0.5
        figure.add_shape(
            type="rect", x0=x0, x1=x0 + columns, y0=y0, y1=y0 + rows, line={"color": "#d55e00", "width": 3}
        )
    with batched(figure):
        finish(figure, info, look)
        relayout(
            figure,
            height=_height(image, look),
            margin={"l": 70, "r": 20, "t": look.title_band + 10, "b": 60},
            dragmode=False,
            clickmode="event+select",
        )
        update_axes(
            figure,
            "x",
            tickvals=[h * (columns + GUTTER) + (columns - 1) / 2 for h in range(heads)],
            ticktext=[str(h) for h in range(heads)],
            title="head",
            showgrid=False,
            zeroline=False,
            tickfont={"size": look.smaller_ticks(1)},
            constrain="domain",
        )
        update_axes(
            figure,
            "y",
            tickvals=[layer * (rows + GUTTER) + (rows - 1) / 2 for layer in range(layers)],
            ticktext=[str(number) for number in numbers],
            title="layer",
            autorange="reversed",
            showgrid=False,
            zeroline=False,
            scaleanchor="x",
            scaleratio=1,
            tickfont={"size": look.smaller_ticks(1)},
            color=MUTED,
        )
    return figure


def _layer_hover(numbers: list[int], heads: int, *, renumbered: bool) -> dict:
    """The thumbnails' hover: the layer as the model numbers it (its row index unless layers are left out)."""
    if not renumbered:
        return {"hovertemplate": "layer %{customdata[0]}, head %{customdata[1]}<br>click to open<extra></extra>"}
    return {
        "hovertext": [str(number) for number in numbers for _ in range(heads)],
        "hovertemplate": "layer %{hovertext}, head %{customdata[1]}<br>click to open<extra></extra>",
    }


def _height(image: np.ndarray, look: Look) -> int:
    """On a screen, as tall as the tiles need at the look's width (square cells), within its height: the page
    flows on below. A slide or a projector keeps its 16:9 size, and the square cells fit inside it."""
    if look.presentation:
        return look.height
    plot_width = look.width - 70 - 20 - 90
    return int(min(look.height, look.title_band + 10 + 60 + 20 + plot_width * image.shape[0] / image.shape[1]))
