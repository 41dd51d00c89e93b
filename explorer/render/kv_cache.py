"""The KV cache drawn: what the cache holds after each pass of a decoding, and what each pass costs with the cache
and without it.

``cache_size_figure``: the bytes each cache holds after the prefill and every step (the decoder's self-attention
cache grows by one token a step; an encoder-decoder's cross-attention cache is filled once), with, where the model
groups its KV heads, what a key and a value per query head would take. ``pass_times_figure``: each pass's
measured time with the cache (one token after the prefill) and without it (the whole prefix again), the
positions each runs in the hover.

Both take plain arrays (a ``KVCacheTrace``'s), so a page keeps only what it draws.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.compute.kv_cache import pass_labels
from explorer.data.attention import STACK_LABELS
from explorer.render.layout import batched, relayout, update_axes
from explorer.render.style import CATEGORICAL, GRID, MUTED, SCREEN, FigureInfo, Look, finish

KIB = 1024


def cache_size_figure(
    stack_bytes: dict[str, np.ndarray],
    tokens: np.ndarray,
    ungrouped_bytes: np.ndarray | None,
    *,
    info: FigureInfo,
    look: Look = SCREEN,
) -> go.Figure:
    """stack_bytes {stack: [pass] bytes held after each pass}; tokens [pass]: the decoder positions cached then;
    ungrouped_bytes [pass]: every cache with a key and a value per query head (None: the model does not group)."""
    labels = pass_labels(len(tokens) - 1)
    figure = go.Figure()
    for index, (stack, nbytes) in enumerate(stack_bytes.items()):
        figure.add_trace(
            go.Bar(
                x=labels,
                y=np.asarray(nbytes, dtype=np.float64) / KIB,
                name=STACK_LABELS.get(stack, stack) + " cache",
                marker={"color": CATEGORICAL[index]},
                customdata=np.asarray(tokens),
                hovertemplate="after the %{x}: %{y:,.1f} KiB<br>(decoder: %{customdata} tokens cached)<extra>"
                "%{fullData.name}</extra>",
            )
        )
    if ungrouped_bytes is not None:
        figure.add_trace(
            go.Scatter(
                x=labels,
                y=np.asarray(ungrouped_bytes, dtype=np.float64) / KIB,
                name="with a key and a value per query head",
                mode="lines",
                line={"color": MUTED, "dash": "dash", "width": 2},
                hovertemplate="without grouped KV heads: %{y:,.1f} KiB<extra></extra>",
            )
        )
    with batched(figure):
        finish(figure, info, look)
        _axes(figure, look, "cache size (KiB)")
        relayout(figure, barmode="stack")
    return figure


def pass_times_figure(
    cached_seconds: np.ndarray,
    uncached_seconds: np.ndarray,
    cached_reads: np.ndarray,
    uncached_reads: np.ndarray,
    *,
    info: FigureInfo,
    look: Look = SCREEN,
) -> go.Figure:
    """[pass] seconds and positions run of each pass, with the cache and without it (measured)."""
    labels = pass_labels(len(cached_seconds) - 1)
    figure = go.Figure()
    for index, (name, seconds, reads) in enumerate(
        (
            ("with the KV cache", cached_seconds, cached_reads),
            ("without: the whole prefix again", uncached_seconds, uncached_reads),
        )
    ):
        figure.add_trace(
            go.Scatter(
                x=labels,
                y=1000 * np.asarray(seconds, dtype=np.float64),
                customdata=np.asarray(reads),
                name=name,
                mode="lines+markers",
                line={"color": CATEGORICAL[index], "width": 3},
                marker={"size": 8},
                hovertemplate="%{x}: %{y:.2f} ms, %{customdata} positions run<extra>%{fullData.name}</extra>",
            )
        )
    with batched(figure):
        finish(figure, info, look)
        _axes(figure, look, "time of the pass (ms)")
        update_axes(figure, "y", rangemode="tozero")
    return figure


def _axes(figure: go.Figure, look: Look, y_title: str) -> None:
    # The legend above the plot, under the title: the passes' labels keep the whole width.
    relayout(
        figure,
        margin={"l": 70, "r": 20, "t": look.title_band + look.font_size * 2, "b": 70},
        legend={
            "orientation": "h",
            "traceorder": "normal",
            "x": 0,
            "y": 1.0,
            "yanchor": "bottom",
            "font": {"size": look.font_size},
        },
    )
    update_axes(figure, "x", tickfont={"size": look.tick_size}, gridcolor=GRID)
    update_axes(figure, "y", title={"text": y_title}, tickfont={"size": look.tick_size}, gridcolor=GRID)
