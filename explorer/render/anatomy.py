"""Figures of a model's anatomy: where its parameters are, by kind and layer, beside the textbook layer."""

from __future__ import annotations

import plotly.graph_objects as go

from explorer.data.anatomy import ModelAnatomy
from explorer.render.layout import batched, relayout, update_axes
from explorer.render.style import CATEGORICAL, GRID, SCREEN, FigureInfo, Look, finish

KIND_COLOURS = dict(zip(("embeddings", "attention", "feed-forward", "norms", "other"), CATEGORICAL, strict=False))


def parameters_figure(anatomy: ModelAnatomy, *, info: FigureInfo, look: Look = SCREEN) -> go.Figure:
    """Stacked bars: parameters of each kind, for what lies outside the layers and for every layer."""
    rows = anatomy.layer_counts
    labels = [_row_label(row) for row in rows]
    figure = go.Figure()
    for kind, colour in KIND_COLOURS.items():
        values = [row.counts[kind] for row in rows]
        if not any(values):
            continue
        figure.add_trace(
            go.Bar(
                x=labels,
                y=values,
                name=kind,
                marker={"color": colour},
                hovertemplate="%{x}: %{y:,} " + kind + " parameters<extra></extra>",
            )
        )
    with batched(figure):
        finish(figure, info, look)
        relayout(
            figure,
            barmode="stack",
            margin={"l": 90, "r": 20, "t": look.title_band + 30, "b": 80},
            legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        )
        update_axes(
            figure, "y", title="parameters", gridcolor=GRID, tickformat="~s", tickfont={"size": look.smaller_ticks(1)}
        )
        update_axes(figure, "x", tickfont={"size": look.smaller_ticks(2)}, tickangle=-45 if len(labels) > 12 else 0)
    return figure


def _row_label(row) -> str:
    where = "outside layers" if row.layer is None else f"layer {row.layer}"
    return where if row.stack == "main" else f"decoder {where}"
