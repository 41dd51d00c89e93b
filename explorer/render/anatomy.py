"""Figures of a model's anatomy: where its parameters are, by kind and layer, beside the textbook layer."""

from __future__ import annotations

import plotly.graph_objects as go

from explorer.data.anatomy import ModelAnatomy
from explorer.render.layout import annotation_font, batched, relayout, subplots, update_axes
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


def token_ids_figure(tokens, ids, special, *, info: FigureInfo, look: Look = SCREEN) -> go.Figure:
    """The tokenizer's output as a table: each token's position, its text and its id (special tokens marked)."""
    kinds = ["special" if flag else "" for flag in special]
    figure = go.Figure(
        go.Table(
            header={
                "values": ["position", "token", "token id", ""],
                "font": {"size": look.font_size},
                "fill": {"color": GRID},
                "height": look.font_size * 2,
            },
            cells={
                "values": [list(range(len(tokens))), list(tokens), [int(i) for i in ids], kinds],
                "font": {"size": look.cell_text_size},
                "height": look.cell_text_size * 2,
            },
            columnwidth=[1, 2, 2, 1],
        )
    )
    with batched(figure):
        finish(figure, info, look)
        relayout(figure, margin={"l": 40, "r": 40, "t": look.title_band + 10, "b": 20})
    return figure


def feed_forward_figure(width: int, ffn_size: int, *, info: FigureInfo, look: Look = SCREEN) -> go.Figure:
    """One token through the feed-forward block: its width going in (d), inside (d_ff) and coming out (d)."""
    stages = ["input (d)", "hidden (d_ff)", "output (d)"]
    values = [width, ffn_size, width]
    figure = go.Figure(
        go.Bar(
            x=stages,
            y=values,
            text=[f"{value:,}" for value in values],
            textposition="outside",
            textfont={"size": look.cell_text_size},
            marker={"color": [CATEGORICAL[0], KIND_COLOURS["feed-forward"], CATEGORICAL[0]]},
            hovertemplate="%{x}: %{y:,} numbers per token<extra></extra>",
        )
    )
    with batched(figure):
        finish(figure, info, look)
        relayout(figure, margin={"l": 90, "r": 20, "t": look.title_band + 30, "b": 60}, showlegend=False)
        update_axes(figure, "y", title="numbers per token", gridcolor=GRID, range=[0, ffn_size * 1.2])
        update_axes(figure, "x", type="category", tickfont={"size": look.tick_size})
    return figure


def count_figure(steps, *, info: FigureInfo, look: Look = SCREEN) -> go.Figure:
    """A waterfall, top to bottom, from the lecture's formula to the model's real count: ``steps`` are (label,
    parameters, measure), measure "relative" for a term added, "total" for a running total drawn whole."""
    labels, values, measures = zip(*steps, strict=True)
    signed = [
        f"{value:+,}" if measure == "relative" else f"{value:,}"
        for value, measure in zip(values, measures, strict=True)
    ]
    figure = go.Figure(
        go.Waterfall(
            orientation="h",
            y=list(labels),
            x=[0 if measure == "total" else value for value, measure in zip(values, measures, strict=True)],
            measure=list(measures),
            text=signed,
            textposition="outside",
            textfont={"size": look.cell_text_size},
            connector={"line": {"color": GRID}},
            totals={"marker": {"color": CATEGORICAL[0]}},
            increasing={"marker": {"color": CATEGORICAL[1]}},
            decreasing={"marker": {"color": CATEGORICAL[5]}},
            hovertemplate="%{y}: %{x:,}<extra></extra>",
        )
    )
    with batched(figure):
        finish(figure, info, look)
        relayout(figure, margin={"l": 20, "r": 40, "t": look.title_band + 10, "b": 70}, showlegend=False)
        update_axes(figure, "x", title="parameters", gridcolor=GRID, tickformat="~s", range=[0, max(values) * 1.3])
        update_axes(
            figure, "y", type="category", autorange="reversed", automargin=True, tickfont={"size": look.tick_size}
        )
    return figure


SIZE_DIALS = ("layers", "d_model", "d_ff", "heads")


def sizes_figure(models, *, info: FigureInfo, look: Look = SCREEN) -> go.Figure:
    """Models side by side on the four dials of a spec table: ``models`` are (name, layers, d_model, d_ff,
    heads); one panel per dial, one bar per model, in the legend's colours."""
    figure = subplots(rows=1, cols=len(SIZE_DIALS), subplot_titles=SIZE_DIALS, horizontal_spacing=0.05)
    for index, (name, *values) in enumerate(models):
        for column, (dial, value) in enumerate(zip(SIZE_DIALS, values, strict=True), 1):
            figure.add_trace(
                go.Bar(
                    x=[name],
                    y=[value],
                    name=name,
                    legendgroup=name,
                    showlegend=column == 1,
                    text=[f"{value:,}"],
                    textposition="outside",
                    textfont={"size": look.cell_text_size},
                    marker={"color": CATEGORICAL[index % len(CATEGORICAL)]},
                    hovertemplate=f"{name}: %{{y:,}} {dial}<extra></extra>",
                ),
                row=1,
                col=column,
            )
    for column in range(1, len(SIZE_DIALS) + 1):
        top = max(model[column] for model in models)
        update_axes(figure, "y", row=1, col=column, range=[0, top * 1.25], gridcolor=GRID, showticklabels=False)
    with batched(figure):
        finish(figure, info, look)
        relayout(
            figure,
            margin={"l": 20, "r": 20, "t": look.title_band + 40, "b": look.font_size * 3},
            legend={"orientation": "h", "y": -0.02, "yanchor": "top", "x": 0, "font": {"size": look.font_size}},
            bargap=0.15,
        )
        update_axes(figure, "x", type="category", showticklabels=False)
        annotation_font(figure, {"size": look.font_size})
    return figure
