"""Vectors and the arithmetic of one attention head, drawn: embeddings, positions, the step-by-step computation
of scaled dot-product attention, and a neuron view (query and key vectors as coloured bands).

Signed values (vector components, scores) use ``DIVERGING`` (blue for negative, orange for positive, white
at 0, symmetric around 0); weights use the sequential scale. Every function follows ``style``'s conventions.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.compute.positions import shown_pairs
from explorer.render.layout import annotation_font, batched, relayout, subplots, update_axes
from explorer.render.lens import layer_names
from explorer.render.style import (
    CATEGORICAL,
    CHAR_WIDTH,
    GRID,
    INK,
    SCREEN,
    SEQUENTIAL,
    FigureInfo,
    Look,
    abbreviate,
    cell_text_colour,
    cell_text_colours,
    escape,
    finish,
    in_colour,
    text_width,
)

# Blue (negative) - white (0) - orange (positive): distinguishable for the common colour-vision deficiencies.
DIVERGING = [[0.0, "#08519c"], [0.25, "#6baed6"], [0.5, "#f7f7f7"], [0.75, "#fdae6b"], [1.0, "#b35806"]]
WEIGHT_BAR = SEQUENTIAL[6][1]  # the softmax weights' bars


def _labels(tokens, limit: int = 12) -> list[str]:
    return [f"#{i} {escape(abbreviate(t, limit))}" for i, t in enumerate(tokens)]


def _symmetric(values: np.ndarray, percentile: float = 100.0) -> float:
    """The colour range's half-width: the largest |value|, or a percentile of them (a few outlier dimensions
    would otherwise wash out every other one; the hover still gives exact values)."""
    finite = np.abs(values[np.isfinite(values)])
    top = float(np.percentile(finite, percentile)) if finite.size else 1.0
    return top if top > 0 else 1.0


def vectors_heatmap(
    values: np.ndarray,
    row_labels: list[str],
    *,
    info: FigureInfo,
    look: Look = SCREEN,
    x_title: str = "dimension",
    colorbar_title: str = "value",
    signed: bool = True,
) -> go.Figure:
    """Rows of vectors [row, dimension] (embeddings, encodings, Q/K/V) as colour bands, one row per token."""
    values = np.asarray(values, dtype=np.float32)
    top = _symmetric(values, 99.0) if signed else float(np.nanmax(values)) or 1.0
    figure = go.Figure(
        go.Heatmap(
            z=values,
            y=row_labels,
            x=list(range(values.shape[1])),
            zmin=-top if signed else 0.0,
            zmax=top,
            zmid=0 if signed else None,
            colorscale=DIVERGING if signed else SEQUENTIAL,
            colorbar={
                "title": {
                    "text": colorbar_title + ("<br>(clipped at the<br>99th percentile)" if signed else ""),
                    "side": "top",
                },
                "thickness": 14,
                "tickfont": {"size": look.smaller_ticks(2)},
            },
            hovertemplate="%{y}, dimension %{x}: <b>%{z:.4f}</b><extra></extra>",
        )
    )
    with batched(figure):
        finish(figure, info, look)
        rows = len(row_labels)
        step = max(1, int(np.ceil(rows * look.tick_size * 1.3 / max(look.height - look.title_band - 80, 50))))
        relayout(figure, margin={"l": 20, "r": 20, "t": look.title_band, "b": 50})
        update_axes(
            figure,
            "y",
            autorange="reversed",
            type="category",
            tickfont={"size": look.smaller_ticks(1)},
            tickvals=row_labels[::step],
            automargin=True,
        )
        update_axes(figure, "x", title=x_title, tickfont={"size": look.smaller_ticks(2)}, showgrid=False)
    return figure


MIN_COLUMN_PX = 2  # the narrowest column a heatmap of stripes is drawn with: narrower ones alias


def sinusoidal_figure(encoding: np.ndarray, *, info: FigureInfo, look: Look = SCREEN) -> go.Figure:
    """The sinusoidal encoding [position, dimension] as two panels, sin (even dimensions) and cos (odd), each
    with its pairs' frequencies falling left to right. Drawn as one band of alternating sin and cos columns,
    a figure narrower than its columns showed fading waves and a solid block that are not in the values: each
    panel keeps every k-th pair, k the smallest that gives each column ``MIN_COLUMN_PX`` pixels."""
    encoding = np.asarray(encoding, dtype=np.float32)
    positions, width = encoding.shape
    spacing = 0.06
    margin = {
        "l": int(look.tick_size * CHAR_WIDTH * len(str(positions - 1)) + look.font_size * 1.6 + 24),
        "r": int(look.tick_size * 3 + 40),  # the colour bar
        "t": look.title_band + look.font_size * 2,
        "b": look.font_size * 4,
    }
    panel = (look.width - margin["l"] - margin["r"]) * (1 - spacing) / 2
    pairs = shown_pairs(width, int(panel // MIN_COLUMN_PX))
    figure = subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=spacing,
        subplot_titles=["sin (even dimensions)", "cos (odd dimensions)"],
    )
    for col, (offset, wave) in enumerate(((0, "sin"), (1, "cos")), start=1):
        kept = pairs[2 * pairs + offset < width]
        figure.add_trace(
            go.Heatmap(
                z=encoding[:, 2 * kept + offset],
                x=kept,
                y=list(range(positions)),
                customdata=np.broadcast_to(2 * kept + offset, (positions, len(kept))),
                zmin=-1.0,
                zmax=1.0,
                colorscale=DIVERGING,
                showscale=col == 1,
                colorbar={
                    "title": {"text": "value", "side": "top"},
                    "thickness": 14,
                    "tickfont": {"size": look.smaller_ticks(2)},
                },
                hovertemplate=f"position %{{y}}, dimension %{{customdata}} ({wave}, pair %{{x}}): "
                "<b>%{z:.4f}</b><extra></extra>",
            ),
            1,
            col,
        )
    # Short: two panels share a narrow column. The caption and the hover say the rest (frequencies, dimensions).
    every = "" if len(pairs) < 2 or pairs[1] == 1 else f" (1 in {pairs[1]})"
    with batched(figure):
        finish(figure, info, look)
        relayout(figure, margin=margin)
        annotation_font(figure, {"size": look.font_size, "color": INK})
        update_axes(figure, "y", autorange="reversed", tickfont={"size": look.smaller_ticks(1)}, showgrid=False)
        update_axes(figure, "y", title="position", row=1, col=1)
        update_axes(
            figure,
            "x",
            title=f"pair i{every}",
            tickfont={"size": look.smaller_ticks(2)},
            showgrid=False,
            zeroline=False,
        )
    return figure


def cosine_figure(series: dict[str, np.ndarray], *, info: FigureInfo, look: Look = SCREEN) -> go.Figure:
    """Cosine similarity of the residual stream after the embeddings and after each layer (``layer_names``: the
    layers counted from 0, as on every page) for one or more token pairs."""
    figure = go.Figure()
    for index, (label, values) in enumerate(series.items()):
        figure.add_trace(
            go.Scatter(
                x=layer_names(len(values) - 1),
                y=[float(v) for v in values],
                mode="lines+markers",
                name=escape(label),
                line={"color": CATEGORICAL[index % len(CATEGORICAL)], "width": 3},
                marker={"size": 9},
                hovertemplate="after %{x}: cosine %{y:.3f}<extra></extra>",
            )
        )
    with batched(figure):
        finish(figure, info, look)
        relayout(
            figure,
            margin={"l": 80, "r": 30, "t": look.title_band + 10, "b": 70},
            legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"},
        )
        last = max((len(v) for v in series.values()), default=1) - 1
        update_axes(
            figure,
            "x",
            title="residual stream after",
            type="category",
            range=[-0.3, last + 0.3],
            gridcolor=GRID,
            tickfont={"size": look.tick_size},
        )
        update_axes(
            figure,
            "y",
            title="cosine similarity",
            range=[min(0.0, *(float(np.min(v)) for v in series.values())), 1.02],
            gridcolor=GRID,
            tickfont={"size": look.tick_size},
        )
    return figure


def step_by_step_figure(
    stages: dict[str, np.ndarray],
    query: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray | None,
    key_tokens,
    query_index: int,
    *,
    info: FigureInfo,
    look: Look = SCREEN,
) -> go.Figure:
    """One query of one head, left to right: its query vector against every key vector, the score of each key
    after each stage (−∞ where masked), the softmax weights, and the weighted sum of the value vectors."""
    names = [n for n in ("dot", "scaled", "capped", "biased", "masked") if n in stages]
    widths = [3, 3] + [1] * len(names) + [1.6] + ([3] if values is not None else [])
    titles = ["query q (every row)", "key vectors k"] + [_STAGE_TITLES[n] for n in names] + ["softmax"]
    titles += ["weights × values"] if values is not None else []
    figure = subplots(
        rows=1,
        cols=len(widths),
        column_widths=widths,
        shared_yaxes=True,
        horizontal_spacing=0.012,
        subplot_titles=titles,
    )
    labels = _labels(key_tokens)
    top = max(_symmetric(query), _symmetric(keys))
    figure.add_trace(_band(np.tile(query, (len(labels), 1)), labels, top, "query (same for every key)"), 1, 1)
    figure.add_trace(_band(keys, labels, top, "key"), 1, 2)
    for column, name in enumerate(names, start=3):
        figure.add_trace(_score_column(stages[name][query_index], labels, name, look), 1, column)
        update_axes(figure, "x", type="category", row=1, col=column)  # one named column
    weights = stages["weights"][query_index]
    column = 3 + len(names)
    figure.add_trace(_weight_bars(weights, labels), 1, column)
    update_axes(figure, "x", range=[0, 1.25], showticklabels=False, showgrid=False, row=1, col=column)
    if values is not None:
        weighted = weights[:, None] * values
        figure.add_trace(_band(weighted, labels, _symmetric(weighted), "weight × value"), 1, column + 1)
    with batched(figure):
        finish(figure, info, look)
        relayout(figure, margin={"l": 20, "r": 20, "t": look.title_band + 24, "b": 30}, showlegend=False)
        # Every column's keys as categories, not only the first's: the others were typed as numbers when tokens
        # looked like numbers ("1811", "3"), and their cells and bars moved to other keys (issue 38).
        update_axes(figure, "y", autorange="reversed", type="category")
        update_axes(figure, "y", automargin=True, tickfont={"size": look.smaller_ticks(1)}, row=1, col=1)
        annotation_font(figure, {"size": max(look.font_size - 2, 11), "color": INK})
        update_axes(figure, "x", showticklabels=False, showgrid=False, zeroline=False)
    return figure


_STAGE_TITLES = {"dot": "q·k", "scaled": "× scale", "capped": "softcap", "biased": "+ bias", "masked": "mask"}


def _band(values: np.ndarray, labels, top: float, what: str) -> go.Heatmap:
    return go.Heatmap(
        z=np.asarray(values, dtype=np.float32),
        y=labels,
        zmin=-top,
        zmax=top,
        zmid=0,
        colorscale=DIVERGING,
        showscale=False,
        hovertemplate=f"%{{y}}, {what} dim %{{x}}: <b>%{{z:.4f}}</b><extra></extra>",
    )


def _weight_bars(weights: np.ndarray, labels) -> go.Bar:
    """The softmax weights as horizontal bars, one per key, each labelled with its value (in the bar: in the
    colour that reads best on it; beside it: in the ink of all text on white)."""
    return go.Bar(
        x=weights,
        y=labels,
        orientation="h",
        marker={"color": WEIGHT_BAR},
        text=[f"{w:.2f}" for w in weights],
        insidetextfont={"color": cell_text_colour(WEIGHT_BAR)},
        outsidetextfont={"color": INK},
        # Inside a bar long enough to hold its number, beside it otherwise: a weight near 1 written outside its
        # bar ran into the next panel (the panel leaves a quarter of its width for numbers).
        textposition="auto",
        insidetextanchor="end",
        cliponaxis=False,
        hovertemplate="%{y}: weight %{x:.4f}<extra></extra>",
    )


def _score_column(scores: np.ndarray, labels, name: str, look: Look, width: float | None = None) -> go.Heatmap:
    """One stage's scores as a column of cells, each written in it; ``width``: the cell's width in px, the text
    then fitted to it (``fitted_scores``), else two decimals at the look's size."""
    finite = np.where(np.isfinite(scores), scores, np.nan)
    size = look.cell_text_size if look.presentation else max(look.tick_size - 4, 9)
    if width is None:
        text = [_score_text(v, 2) for v in scores]
    else:
        text, size = fitted_scores(scores, width, size)
    top = _symmetric(finite)
    # Each value in the colour that reads best on its cell; a masked key has no cell: its −∞ is on the white plot.
    colours = [
        colour or cell_text_colour("#ffffff") for [colour] in cell_text_colours(finite[:, None], -top, top, DIVERGING)
    ]
    return go.Heatmap(
        z=finite[:, None].astype(np.float32),
        y=labels,
        x=[name],
        zmin=-top,
        zmax=top,
        zmid=0,
        colorscale=DIVERGING,
        showscale=False,
        text=[[in_colour(t, colour)] for t, colour in zip(text, colours, strict=True)],
        texttemplate="%{text}",
        textfont={"size": size},
        customdata=[[t] for t in text],  # the hover's value, without the cell text's colour
        hoverongaps=False,
        hovertemplate="%{y}: %{customdata}<extra>" + name + "</extra>",
    )


CELL_PADDING = 3  # px kept free on each side of a number written in a cell


def _score_text(value: float, decimals: int) -> str:
    return "−∞" if np.isneginf(value) else f"{value:.{decimals}f}"


def fitted_scores(scores: np.ndarray, width: float, largest: int) -> tuple[list[str], int]:
    """Each score written to fit a ``width`` px cell, and the text size: at the largest size from ``largest`` down
    to three quarters of it where every score fits with some decimals, each with as many of two as fit (−100.51
    becomes −100.5 in a narrow cell, 0.53 stays); masked keys −∞. The hover shows the same text."""
    smallest = max(int(largest * 0.75), 9)
    for size in range(largest, smallest - 1, -1):
        chars = (width - 2 * CELL_PADDING) / (CHAR_WIDTH * size)
        texts = [next((t for d in (2, 1, 0) if len(t := _score_text(v, d)) <= chars), None) for v in scores]
        if None not in texts:
            return texts, size
    return [_score_text(v, 0) for v in scores], smallest  # too narrow for any: the shortest form, smallest size


def _column_width(figure: go.Figure, look: Look, row: int, col: int, margin: dict, labels) -> float:
    """The px width of one subplot column, from the figure's own geometry: the look's width less the margins and
    the widest row label's room on the left (Plotly's automargin, estimated generously), times the column's
    domain."""
    label_room = max(text_width(label, look.smaller_ticks(1)) for label in labels) + 8
    plot = look.width - margin["l"] - margin["r"] - label_room
    low, high = figure.get_subplot(row, col).xaxis.domain
    return plot * (high - low)


NEURON_MARGIN = {"l": 20, "r": 30, "b": 20}


def neuron_view_figure(
    query: np.ndarray,
    keys: np.ndarray,
    scores: dict[str, np.ndarray],
    weights: np.ndarray,
    key_tokens,
    query_token: str,
    *,
    info: FigureInfo,
    look: Look = SCREEN,
) -> go.Figure:
    """BertViz's neuron view for any model: the query vector, each key vector, their element-wise product (its sum
    is the dot product), each step from there to the scores the softmax reads, and the softmax weight, one row per
    key. ``scores`` {stage: [key]}, this query's row of the stages ``NEURON_STAGES`` names, those the model has, in
    that order (``dot`` always; ``scaled`` where the scale is not 1; ``bias`` the position bias itself and ``biased``
    the sum where the model adds one; ``masked`` with −∞ where keys are masked); the last is the softmax's input."""
    labels = _labels(key_tokens)
    products = keys * query[None, :]
    names = [name for name in NEURON_STAGES if name in scores]
    columns = 2 + len(names) + 1
    titles = ["query q"] + [""] * (columns - 1)
    titles += ["keys k", "q × k (element-wise)"] + [NEURON_STAGES[name] for name in names] + ["softmax"]
    figure = subplots(
        rows=2,
        cols=columns,
        column_widths=[4, 4] + [1] * len(names) + [1.4],
        row_heights=[1, max(len(labels), 2)],
        shared_yaxes=False,
        horizontal_spacing=0.02,
        vertical_spacing=0.04,
        subplot_titles=titles,
    )
    top = max(_symmetric(query), _symmetric(keys))
    query_label = f"q: {escape(abbreviate(query_token, 12))}"
    figure.add_trace(_band(query[None, :], [query_label], top, "query"), 1, 1)
    figure.add_trace(_band(keys, labels, top, "key"), 2, 1)
    figure.add_trace(_band(products, labels, _symmetric(products), "q × k"), 2, 2)
    for column, name in enumerate(names, start=3):
        # Written to fit its cells: a −100.51 overflowed its cell on a 1280×720 projector (issue 38).
        width = _column_width(figure, look, 2, column, NEURON_MARGIN, [*labels, query_label])
        figure.add_trace(_score_column(scores[name], labels, NEURON_STAGES[name], look, width), 2, column)
        update_axes(figure, "x", type="category", row=2, col=column)  # one named column
    figure.add_trace(_weight_bars(weights, labels), 2, columns)
    with batched(figure):
        finish(figure, info, look)
        relayout(figure, margin={**NEURON_MARGIN, "t": look.title_band + 20}, showlegend=False)
        update_axes(figure, "x", showticklabels=False, showgrid=False, zeroline=False)
        update_axes(figure, "x", range=[0, 1.3], row=2, col=columns)
        # Keys as categories in every column: tokens that look like numbers ("1811") must not become positions.
        update_axes(figure, "y", type="category")
        for col in range(1, columns + 1):
            update_axes(
                figure,
                "y",
                autorange="reversed",
                showticklabels=col == 1,
                automargin=True,
                tickfont={"size": look.smaller_ticks(1)},
                row=2,
                col=col,
            )
        update_axes(figure, "y", automargin=True, tickfont={"size": look.smaller_ticks(1)}, row=1, col=1)
        for col in range(2, columns + 1):
            update_axes(figure, "x", visible=False, row=1, col=col)
            update_axes(figure, "y", visible=False, row=1, col=col)
        annotation_font(figure, {"size": max(look.font_size - 2, 11), "color": INK})
    return figure


# The neuron view's steps from q·k to the softmax's input, in the model's order, with their column titles.
NEURON_STAGES = {
    "dot": "q·k",
    "scaled": "× scale",
    "capped": "softcap",
    "bias": "bias b",
    "biased": "+ b",
    "masked": "mask",
}
