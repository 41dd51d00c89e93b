"""What a presenter can move on a slide: a table keyed by view class, each control one field of the view.

A slide's view holds the chapter's inputs (its text, layer, head, temperature); its controls change those
fields and nothing else, so a moved slide is the same view with other values, computed and drawn as its page
would (``dataclasses.replace``). An index's range comes from the view's result (a model's layers, a text's
tokens, a decoding's steps), so a control never offers a layer the model lacks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from explorer import views


@dataclass(frozen=True)
class Index:
    """A position counted from ``first`` (layers and heads from 0, steps from 1); ``count(view, result)`` of them."""

    field: str
    label: str
    count: Callable[[object, object], int]
    first: int = 0

    def value(self, view, result) -> int:
        return getattr(view, self.field)


@dataclass(frozen=True)
class Number:
    """A bounded setting (temperature, top-k...) as its page bounds it."""

    field: str
    label: str
    low: float
    high: float
    step: float

    def value(self, view, result) -> float:
        return getattr(view, self.field)


@dataclass(frozen=True)
class UptoStep(Index):
    """The beam tree's replay step: ``None`` in the view means the last."""

    def value(self, view, result) -> int:
        return view.upto(result)


def _layers(view, capture) -> int:
    return capture.stacks[view.stack].num_layers


def _heads(view, capture) -> int:
    return capture.stacks[view.stack].num_heads


def _queries(view, capture) -> int:
    return len(capture.stacks[view.stack].query_tokens)


def _trace_layers(view, trace) -> int:
    return trace.attention[view.stack].num_layers


def _trace_heads(view, trace) -> int:
    return trace.attention[view.stack].num_heads


def _generated(view, trace) -> int:
    return len(trace.generated_tokens[0])


LAYER, HEAD = Index("layer", "Layer", _layers), Index("head", "Head", _heads)
QUERY = Index("query", "Query token", _queries)
TEMPERATURE = Number("temperature", "Temperature", 0.05, 3.0, 0.05)
CUT_OFFS = (
    Number("top_k", "Top-k", 0, 200, 1),
    Number("top_p", "Top-p", 0.01, 1.0, 0.01),
    Number("min_p", "Min-p", 0.0, 0.5, 0.01),
)

# view class -> its controls, in the order they are drawn. A view class not here (a table of counts, a
# comparison of whole decodings) has none; a subclass not here has its parent's.
CONTROLS: dict[type, tuple] = {
    views.attention.Head: (LAYER, HEAD),
    views.attention.OneQuery: (LAYER, HEAD, QUERY),
    views.attention.BertViz: (HEAD,),
    views.sampling.Distribution: (TEMPERATURE, *CUT_OFFS),
    views.sampling.Temperatures: (TEMPERATURE,),
    views.decoding.BeamTree: (UptoStep("upto_step", "Step", lambda view, trace: trace.num_steps, first=1),),
    views.decoding.GenerationAttention: (
        Index("layer", "Layer", _trace_layers),
        Index("head", "Head", _trace_heads),
        Index("step", "Step", _generated, first=1),
    ),
    views.decoding.Greedy: (),
}


def controls_of(view) -> tuple:
    """The controls of ``view``: its class's, else its nearest parent's in ``CONTROLS``."""
    if isinstance(view, views.attention.Toy):
        return (Index("query", "Query token", lambda toy, found: len(toy.tokens)),) if toy_steps(view) else ()
    for cls in type(view).__mro__:
        if cls in CONTROLS:
            return CONTROLS[cls]
    return ()


def toy_steps(view) -> bool:
    # The toy's mask and scores show every query at once: only its stage-by-stage view follows one query.
    return view.show == "steps"


def moved(shown, view) -> dict[str, int | float | None]:
    """The controls of ``shown`` (a slide's view, controls moved) whose values differ from ``view``'s (the
    slide's own): what a teacher's class must move to show the same."""
    return {
        control.field: getattr(shown, control.field)
        for control in controls_of(view)
        if getattr(shown, control.field) != getattr(view, control.field)
    }


def apply(view, values, result):
    """``view`` with the controls ``values`` (a teacher's, from the class's shared state) set, each checked as a
    slider would: a field ``view`` has no control for is left alone, a number is clamped to its control's
    bounds, an index to the result's range (``None`` stays: a replay's last step)."""
    changed = {}
    for control in controls_of(view):
        value = values.get(control.field, _UNSET)
        if value is _UNSET or isinstance(value, bool):
            continue
        if isinstance(control, Number) and isinstance(value, int | float) and value == value:
            cast = type(getattr(view, control.field))
            changed[control.field] = cast(min(max(value, control.low), control.high))
        elif isinstance(control, Index) and (isinstance(value, int) or value is None):
            last = max(control.count(view, result) - 1, 0)  # fields count from 0; ``first`` is for display
            changed[control.field] = None if value is None else min(max(value, 0), last)
    return dataclasses.replace(view, **changed) if changed else view


_UNSET = object()
