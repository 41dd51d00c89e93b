"""The KV cache drawn: what the cache holds after each pass of a decoding, and what each pass costs with the cache
and without it.

``cache_size_figure``: the bytes each cache holds after the prefill and every step (the decoder's self-attention
cache grows by one token a step; an encoder-decoder's cross-attention cache is filled once), with, where the model
groups its KV heads, what a key and a value per query head would take. ``pass_work_figure``: what each pass
computes with the cache (one token after the prefill) and without it (the whole prefix again), counted: attention
scores, the positions run in the hover. ``pass_times_figure``: each pass's measured time both ways, the median of
the timed runs with a bar from the fastest to the slowest.

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


def pass_work_figure(
    cached_scores: np.ndarray,
    uncached_scores: np.ndarray,
    cached_reads: np.ndarray,
    uncached_reads: np.ndarray,
    *,
    info: FigureInfo,
    look: Look = SCREEN,
) -> go.Figure:
    """[pass] attention scores each pass computes and positions it runs, with the cache and without (counted)."""
    labels = pass_labels(len(cached_scores) - 1)
    figure = go.Figure()
    for index, (name, scores, reads) in enumerate(
        (
            ("with the KV cache", cached_scores, cached_reads),
            ("without: the whole prefix again", uncached_scores, uncached_reads),
        )
    ):
        figure.add_trace(
            go.Bar(
                x=labels,
                y=np.asarray(scores, dtype=np.float64),
                customdata=np.asarray(reads),
                name=name,
                marker={"color": CATEGORICAL[index]},
                hovertemplate="%{x}: %{y:,.0f} attention scores, %{customdata} positions run<extra>%{fullData.name}"
                "</extra>",
            )
        )
    with batched(figure):
        finish(figure, info, look)
        _axes(figure, look, "attention scores computed")
        relayout(figure, barmode="group")
    return figure


def pass_times_figure(
    cached: tuple[np.ndarray, np.ndarray, np.ndarray],
    uncached: tuple[np.ndarray, np.ndarray, np.ndarray],
    cached_reads: np.ndarray,
    uncached_reads: np.ndarray,
    *,
    runs: int,
    info: FigureInfo,
    look: Look = SCREEN,
) -> go.Figure:
    """Each pass's measured time with the cache and without it: ``cached``/``uncached`` [pass] seconds (median,
    fastest, slowest over ``runs`` timed runs), drawn as the median with a bar from the fastest to the slowest."""
    labels = pass_labels(len(cached[0]) - 1)
    figure = go.Figure()
    for index, (name, (median, fastest, slowest), reads) in enumerate(
        (
            ("with the KV cache", cached, cached_reads),
            ("without: the whole prefix again", uncached, uncached_reads),
        )
    ):
        median, fastest, slowest = (1000 * np.asarray(ms, dtype=np.float64) for ms in (median, fastest, slowest))
        figure.add_trace(
            go.Scatter(
                x=labels,
                y=median,
                customdata=np.stack([np.asarray(reads), fastest, slowest], axis=-1),
                error_y={"type": "data", "array": slowest - median, "arrayminus": median - fastest, "thickness": 1},
                name=name,
                mode="lines+markers",
                line={"color": CATEGORICAL[index], "width": 3},
                marker={"size": 8},
                hovertemplate="%{x}: median %{y:.2f} ms (runs %{customdata[1]:.2f}–%{customdata[2]:.2f}), "
                "%{customdata[0]} positions run<extra>%{fullData.name}</extra>",
            )
        )
    with batched(figure):
        finish(figure, info, look)
        _axes(figure, look, f"time of the pass (ms, median of {runs} runs)")
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
