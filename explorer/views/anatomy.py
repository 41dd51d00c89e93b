"""Model anatomy views: where a model's parameters are, by kind and layer."""

from __future__ import annotations

from dataclasses import dataclass

from explorer import gateway
from explorer.render.anatomy import parameters_figure
from explorer.render.style import FigureInfo
from explorer.views import Builder, builder


@dataclass(frozen=True)
class Parameters:
    """The model's parameter counts by kind and layer (no model run: counted from its modules)."""

    model: str

    def result(self, progress=None):
        return gateway.run("anatomy", self.model, progress=progress)

    def info(self, anatomy) -> FigureInfo:
        where = (f"{anatomy.total_parameters:,} in all",)
        return FigureInfo("Parameters by kind and layer", model=self.model, where=where)

    def figure(self, anatomy) -> Builder:
        return builder(parameters_figure, anatomy, info=self.info(anatomy))
