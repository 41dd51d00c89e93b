"""Head ablation drawn: which heads the next-token prediction leans on.

``ablation_map``: layers down, heads across, one square per head coloured by what ablating that head alone
does to the log-probability of the predicted token (blue: the prediction loses probability without the head,
so the head was helping it; red: it gains). Squares are scatter markers, not heatmap cells, so a click selects
a head (Streamlit reports no selection on heatmaps). Heads ablated in the current view are outlined.

``before_after_figure``: the most likely next tokens with and without the ablated heads, side by side.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.render.layout import batched, relayout, update_axes
from explorer.render.style import CATEGORICAL, GRID, INK, SCREEN, FigureInfo, Look, abbreviate, escape, finish

DIVERGING = [[0.0, "#2166ac"], [0.25, "#92c5de"], [0.5, "#f7f7f7"], [0.75, "#f4a582"], [1.0, "#b2182b"]]
COLORBAR_ROOM = 150  # px right of the squares: the colour bar and its title


def ablation_map(
    changes: np.ndarray,
    top_tokens,
    *,
    target_token: str,
    baseline_logprob: float,
    noise: float = 0.0,
    ablated=(),
    layer_numbers=None,
    info: FigureInfo,
    look: Look = SCREEN,
) -> go.Figure:
    """changes [layer, head]: log-probability change of ``target_token`` with that head ablated alone;
    top_tokens [layer][head]: the model's top token then. ``ablated``: (layer, head) pairs to outline.
    ``noise``: the largest change rounding alone can make; the colour scale reaches at least that far, so
    changes within it stay pale instead of filling the scale. ``layer_numbers``: the model's own number of each
    row, where the rows are only some of its layers (a hybrid's layers with attention); rows stay indices for
    clicks."""
    layers, heads = changes.shape
    named = list(range(layers)) if layer_numbers is None else [int(number) for number in layer_numbers]
    cell = _cell_size(layers, heads, look)
    limit = max(float(np.abs(changes).max()), noise) or 1.0
    layer_of, head_of = np.divmod(np.arange(layers * heads), heads)
    target = escape(repr(target_token))
    hover = [
        f"<b>layer {named[layer]}, head {head}</b> ablated<br>log p({target}): {baseline_logprob:.4g} → "
        f"{baseline_logprob + changes[layer, head]:.4g} ({changes[layer, head]:+.3g})<br>"
        f"top token then: {escape(repr(top_tokens[layer][head]))}"
        for layer, head in zip(layer_of, head_of, strict=True)
    ]
    figure = go.Figure(
        go.Scatter(
            x=head_of,
            y=layer_of,
            mode="markers",
            marker={
                "symbol": "square",
                "size": cell * 0.92,
                "color": changes.reshape(-1),
                "colorscale": DIVERGING,
                "cmin": -limit,
                "cmax": limit,
                "line": {"width": 0},
                "colorbar": {
                    "title": {"text": f"change in<br>log p({target})", "side": "top"},
                    "thickness": 14,
                    "tickfont": {"size": look.tick_size},
                },
            },
            # plain lists: a typed array would reach the page's click as an object, not a list
            customdata=np.stack([layer_of, head_of], axis=1).tolist(),
            hovertext=hover,
            hovertemplate="%{hovertext}<extra></extra>",
            showlegend=False,
        )
    )
    pairs = [(layer, head) for layer, head in ablated if layer < layers and head < heads]
    if pairs:
        figure.add_trace(
            go.Scatter(
                x=[head for _, head in pairs],
                y=[layer for layer, _ in pairs],
                mode="markers",
                marker={"symbol": "square-open", "size": cell * 0.92, "color": INK, "line": {"width": 3}},
                hoverinfo="skip",
                showlegend=False,
            )
        )
    with batched(figure):
        finish(figure, info, look)
        relayout(
            figure,
            margin={"l": 80, "r": COLORBAR_ROOM, "t": look.title_band, "b": 60, "autoexpand": False},
            clickmode="event+select",
            dragmode=False,
        )
        # Square cells: the axes keep one scale, shrinking the plot area (not the ranges) to the grid.
        axis = {"showgrid": False, "zeroline": False, "tickfont": {"size": look.tick_size}, "constrain": "domain"}
        update_axes(figure, "x", axis, title={"text": "head"}, tickmode="linear", range=[-0.5, heads - 0.5])
        ticks = (
            {"tickmode": "linear"}
            if layer_numbers is None
            else {"tickmode": "array", "tickvals": list(range(layers)), "ticktext": [str(n) for n in named]}
        )
        update_axes(figure, "y", axis, title={"text": "layer"}, range=[layers - 0.5, -0.5], scaleanchor="x", **ticks)
    return figure


def _cell_size(layers: int, heads: int, look: Look) -> float:
    """Square cells as large as the figure allows beside the colour bar and under the title."""
    room_x = look.width - COLORBAR_ROOM - 90
    room_y = look.height - look.title_band - 70
    return max(8.0, min(room_x / heads, room_y / layers))


def before_after_figure(
    tokens, before: np.ndarray, after: np.ndarray, *, ablated_label: str, info: FigureInfo, look: Look = SCREEN
) -> go.Figure:
    """tokens [n] labels, before/after [n] probabilities of those tokens with no head and with the heads
    ablated (the tokens most likely in either)."""
    labels = [escape(abbreviate(token, 14)) for token in tokens]
    figure = go.Figure(
        [
            go.Bar(x=labels, y=before, name="model as it is", marker={"color": CATEGORICAL[0]}),
            go.Bar(x=labels, y=after, name=escape(ablated_label), marker={"color": CATEGORICAL[5]}),
        ]
    )
    for trace, what in zip(figure.data, ("as it is", "ablated"), strict=True):
        trace.hovertemplate = f"%{{x}}: %{{y:.1%}} ({what})<extra></extra>"
    with batched(figure):
        finish(figure, info, look)
        relayout(
            figure,
            barmode="group",
            margin={"l": 70, "r": 20, "t": look.title_band + 30, "b": 90},
            legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "font": {"size": look.tick_size}},
        )
        # Categories: token labels such as "1" would otherwise put the bars on a number line.
        update_axes(figure, "x", type="category", tickfont={"size": look.tick_size}, tickangle=-30)
        update_axes(
            figure,
            "y",
            title={"text": "probability"},
            tickformat=".0%",
            gridcolor=GRID,
            tickfont={"size": look.tick_size},
        )
    return figure
