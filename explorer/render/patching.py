"""Activation patching drawn: how much of the clean answer each patched activation brings back.

``patching_map``: one heatmap for the three maps of ``explorer.data.patching`` (the residual stream by layer and
position, the heads by layer, the MLPs by layer), coloured by the fraction recovered on a diverging scale centred
on 0 (red: towards the clean answer, 1 = all of it; blue: away from it). The residual stream's rows run as the
lens's do: the embeddings at the bottom, the last layer's output on top.

Takes plain arrays and labels, so a page keeps only what it draws.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.render.layout import batched, relayout, update_axes
from explorer.render.style import SCREEN, FigureInfo, Look, abbreviate, cell_text_colours, escape, finish

DIVERGING = [[0.0, "#2166ac"], [0.25, "#92c5de"], [0.5, "#f7f7f7"], [0.75, "#f4a582"], [1.0, "#b2182b"]]
MAX_CELLS_WITH_TEXT = 24  # columns (or rows) up to which each cell prints its value
LABEL_CHARS = 12


def residual_rows(num_layers: int) -> list[str]:
    """The residual stream's L + 1 rows, bottom to top: the input of each layer (layer 0's is the embeddings),
    then the last layer's output."""
    return [f"into layer {layer}" for layer in range(num_layers)] + [f"out of layer {num_layers - 1}"]


def patching_map(
    recovered: np.ndarray,
    row_labels,
    column_labels,
    *,
    row_title: str,
    column_title: str,
    what: str,
    info: FigureInfo,
    look: Look = SCREEN,
) -> go.Figure:
    """recovered [row, column]: the fraction of the clean logit difference each cell's patch recovers; rows are
    drawn bottom to top (row 0 at the bottom). ``what`` names a cell's patch in the hover ("the residual stream")."""
    values = np.asarray(recovered, dtype=np.float32)
    limit = max(1.0, float(np.nanmax(np.abs(values))) if values.size else 1.0)
    rows = [escape(abbreviate(label, LABEL_CHARS * 2)) for label in row_labels]
    columns = [f"#{i} {escape(abbreviate(label, LABEL_CHARS))}" for i, label in enumerate(column_labels)]
    hover = [
        [f"<b>{what}</b>, {row} at {column}<br>recovers {v:+.3f}" for column, v in zip(columns, line, strict=True)]
        for row, line in zip(rows, values.tolist(), strict=True)
    ]
    fits = max(values.shape) <= MAX_CELLS_WITH_TEXT
    figure = go.Figure(
        go.Heatmap(
            z=values,
            x=columns,
            y=rows,
            zmin=-limit,
            zmax=limit,
            colorscale=DIVERGING,
            customdata=hover,
            hovertemplate="%{customdata}<extra></extra>",
            # Each value in black or white, whichever reads better on its cell (style.cell_text_colours).
            text=cell_text_colours(np.asarray(values, dtype=np.float64), -limit, limit, DIVERGING) if fits else None,
            texttemplate='<span style="color:%{text}">%{z:.2f}</span>' if fits else None,
            textfont={"size": look.cell_text_size},
            colorbar={
                "title": {"text": "recovered", "side": "top"},
                "thickness": 14,
                "tickfont": {"size": look.tick_size},
            },
        )
    )
    with batched(figure):
        finish(figure, info, look)
        relayout(figure, margin={"l": 150, "r": 40, "t": look.title_band, "b": 110})
        axis = {"showgrid": False, "zeroline": False, "tickfont": {"size": look.tick_size}, "type": "category"}
        update_axes(figure, "x", axis, title={"text": column_title}, tickangle=-40 if len(columns) > 6 else 0)
        update_axes(figure, "y", axis, title={"text": row_title})
    return figure
