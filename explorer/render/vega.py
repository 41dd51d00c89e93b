"""Vega-Lite charts built once per layout and filled with data per call.

Altair's object model is slow to assemble: a linked two-panel chart (selections, layers, an hconcat) takes
about 80 ms to build and 20 ms to turn into a spec, because Altair deep-copies every sub-chart at each step.
The sampling page drew it at every slider move, for every student, on the one core the GIL allows (issue 13).
Its *structure* depends only on the figure's size and a few settings, so it is built with Altair once per
``Look``, its spec kept, and each call only supplies the named datasets and the title.

``VegaLite`` is what such a builder returns: the finished spec, with the methods the app and the exports use
(``to_dict``, ``to_json``), ``to_altair()`` for an Altair chart, and a notebook display.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class VegaLite:
    """A finished Vega-Lite chart: ``spec`` with its data under ``datasets``."""

    spec: dict

    def to_dict(self, validate: bool = False) -> dict:
        return copy.deepcopy(self.spec)

    def to_json(self, validate: bool = False, indent: int | None = None) -> str:
        return json.dumps(self.spec, indent=indent, default=float)

    def to_altair(self):
        """The same chart as an Altair object (slow to build: for notebooks and further editing)."""
        return _top_level_class(self.spec).from_dict(self.to_dict(), validate=False)

    def _repr_mimebundle_(self, include=None, exclude=None):
        import altair as alt

        return alt.renderers.get()(self.spec)


def filled(template: dict, datasets: dict[str, list[dict]], **top_level) -> VegaLite:
    """A copy of ``template`` (a spec whose data are named references) with ``datasets`` and top-level keys."""
    spec = copy.deepcopy(template)
    spec.update(top_level)
    spec["datasets"] = datasets
    return VegaLite(spec)


def _top_level_class(spec: dict):
    import altair as alt

    for key, cls in (("hconcat", alt.HConcatChart), ("vconcat", alt.VConcatChart), ("layer", alt.LayerChart)):
        if key in spec:
            return cls
    return alt.Chart
