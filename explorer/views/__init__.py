"""Views: one unit per figure the app shows, the same for the page, the exports and (next) the lecture decks.

A view is a frozen object of its inputs (model name, text, settings). Each has

- ``result(progress=None)``: what it draws, through ``explorer.gateway`` (cached for the whole server);
- ``info(result)``: the ``FigureInfo`` that titles the figure and names its exports;
- ``figure(result)``: the figure's builder, a ``functools.partial`` of a render function called with ``look=``
  (the page's window, a slide), holding only the data it draws;
- ``caption(result)`` where the figure has one: plain text whose only visitor-controlled parts are quoted by
  the caller.

A page reads its widgets, makes the view, and hands it to ``ui.show_view``; anything else (a notebook, a deck)
calls the same three methods. No Streamlit here. One module per feature: ``attention`` (one head's heatmap, two
compared, statistics and rollout, all heads, step by step, the neuron view, BertViz's views), ``tokens``
(embeddings and positions), ``anatomy``, ``decoding`` (greedy, the beam tree, comparisons, attention while
generating), ``kv_cache`` (the cache while decoding), ``sampling`` (the next-token distribution), ``lens``,
``ablation``, ``patching``, ``attribution`` (why this token), ``probes`` (head types).
``display``: a result in Jupyter is its page's view (``for_result``: the page's opening settings), imported by
``explorer/__init__.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

Builder = Callable[..., object]  # called with look=...: a Plotly figure, a PlotlySpec or a Vega-Lite chart


def builder(render, *args, **kwargs) -> Builder:
    """``render(*args, look=..., **kwargs)`` when called, holding only its arguments (not a page's namespace)."""
    return functools.partial(render, *args, **kwargs)


# After ``builder``, which they use: ``views.sampling.Distribution`` reads as what it is at a page's call site.
from explorer.views import (  # noqa: E402
    ablation,
    anatomy,
    attention,
    attribution,
    decoding,
    kv_cache,
    lens,
    patching,
    probes,
    sampling,
    tokens,
)

__all__ = [
    "Builder",
    "ablation",
    "anatomy",
    "attention",
    "attribution",
    "builder",
    "decoding",
    "kv_cache",
    "lens",
    "patching",
    "probes",
    "sampling",
    "tokens",
]
