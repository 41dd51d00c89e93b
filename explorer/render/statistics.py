"""The head statistics page's view transform drawn: one head's weights with some key tokens hidden and each row
renormalised over the rest, the rows renormalised from almost nothing greyed.

A row that kept 2.7e-6 of its weight would be scaled up to a full row of strong cells: the picture would show a
pattern the head does not have. Such rows (their kept share below a threshold, ``explorer.compute.statistics``)
are drawn as one grey band whose hover gives the share they kept, not as weights.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.render.heatmap import position_labels, token_matrix
from explorer.render.style import SCREEN, FigureInfo, Look

GREYED = "#c9ccd3"  # lighter than a masked cell's grey (#8a8f99): not masked, only not drawn as weights


def renormalised_matrix(
    weights: np.ndarray,
    kept: np.ndarray,
    threshold: float,
    query_tokens,
    key_tokens,
    *,
    info: FigureInfo,
    look: Look = SCREEN,
) -> go.Figure:
    """weights [query, kept key] renormalised (NaN where masked); kept [query]: the share of each row's weight
    left before renormalising. Rows with ``kept < threshold`` are greyed."""
    greyed = np.asarray(kept) < threshold
    shown = np.where(greyed[:, None], np.nan, weights).astype(np.float32)
    figure = token_matrix(shown, query_tokens, key_tokens, info=info, look=look)
    if greyed.any():
        figure.add_trace(_greyed_rows(weights, kept, greyed, query_tokens, key_tokens, figure.data[0]))
    return figure


def _greyed_rows(weights, kept, greyed, query_tokens, key_tokens, drawn: go.Heatmap) -> go.Heatmap:
    """A grey band over the greyed rows' cells that a query may attend to (the whole row where it may attend to
    none of the keys shown, e.g. a causal model's first token once it is hidden), each hovering with its share."""
    allowed = ~np.isnan(np.asarray(weights, dtype=np.float64))
    allowed |= ~allowed.any(axis=1, keepdims=True)
    band = np.where(greyed[:, None] & allowed, 1.0, np.nan).astype(np.float32)
    share = np.broadcast_to(np.asarray(kept, dtype=np.float64)[:, None], band.shape)
    return go.Heatmap(
        z=band,
        x=position_labels(key_tokens),
        y=position_labels(query_tokens),
        customdata=share,
        zmin=0,
        zmax=1,
        colorscale=[[0, GREYED], [1, GREYED]],
        showscale=False,
        xgap=drawn.xgap,
        ygap=drawn.ygap,
        hovertemplate="query %{y}: greyed, it kept only %{customdata:.2g} of its weight once the special tokens "
        "were hidden<extra></extra>",
        hoverongaps=False,
    )
