"""A result in Jupyter is its page's view: the page's figure, with the page's opening settings, of that result.

``DISPLAYS`` gives, for each result type that displays, the view its page makes of it (the view class's
``for_result``) and what that view draws (the result itself, or what the page makes of it first), and a one-line
summary for where nothing can draw. ``mimebundle`` turns that into Jupyter's bundle (``explorer.render.notebook``)
and registers itself with ``explorer.data._display`` when this module is imported (``explorer/__init__.py`` does),
so the data classes import neither the views nor the figures.
"""

from __future__ import annotations

from collections.abc import Callable

from explorer.data import AttentionCapture, DecodeTrace, NextTokenLogits, TokenDistribution
from explorer.data._display import register_display
from explorer.data.ablation import HeadAblationEffects
from explorer.data.attribution import Attribution
from explorer.data.kv_cache import KVCacheTrace
from explorer.data.lens import LogitLens
from explorer.data.patching import Patching
from explorer.data.probes import HeadProbes
from explorer.render import notebook
from explorer.views import ablation, attention, attribution, decoding, kv_cache, lens, patching, probes, sampling


def _stages_of_logits(logits: NextTokenLogits):
    view = sampling.Stages.for_result(logits)
    return view, view.distribution(logits)


def _same(view_class) -> Callable:
    """The view ``view_class`` makes of a result, drawing that result as it is."""
    return lambda result: (view_class.for_result(result), result)


# result type -> (result -> (its page's view, what the view draws), result -> one-line summary)
DISPLAYS: dict[type, tuple[Callable, Callable[..., str]]] = {
    AttentionCapture: (_same(attention.Head), attention.summary),
    DecodeTrace: (lambda trace: (decoding.for_trace(trace), trace), decoding.summary),
    TokenDistribution: (_same(sampling.Stages), sampling.summary),
    NextTokenLogits: (_stages_of_logits, sampling.logits_summary),
    LogitLens: (_same(lens.Lens), lens.summary),
    HeadAblationEffects: (_same(ablation.Map), ablation.summary),
    HeadProbes: (_same(probes.BestHead), probes.summary),
    KVCacheTrace: (_same(kv_cache.CacheSize), kv_cache.summary),
    Patching: (_same(patching.Residual), patching.summary),
    Attribution: (_same(attribution.Scores), attribution.summary),
}


def view_of(result):
    """(the view its page makes of ``result`` as the page opens, what that view draws)."""
    return DISPLAYS[type(result)][0](result)


def mimebundle(result, include=None, exclude=None) -> dict:
    """Jupyter's bundle of ``result``: its page view's figure and the result's summary (``explorer.render.notebook``
    says which mime types and why)."""
    make, summary = DISPLAYS[type(result)]
    view, drawn = make(result)
    return notebook.mimebundle(view.figure(drawn), summary(result), include, exclude)


# Every result that derives from explorer.data's Displayed shows itself through this one function.
register_display(mimebundle)
