"""Logit lens views: the top token read after every layer at every position, and one position's final
prediction layer by layer."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer import gateway
from explorer.data.lens import LogitLens
from explorer.render.lens import LAYERS_COUNTED as LAYERS_COUNTED  # the pages say how layers are counted
from explorer.render.lens import lens_figure, lens_trajectory_figure
from explorer.render.style import FigureInfo
from explorer.views import Builder, builder


@dataclass(frozen=True)
class Lens:
    """Every layer's top token at every position (the decoder's, for an encoder-decoder given a ``target``)."""

    model: str
    text: str
    target: str | None = None

    @classmethod
    def for_result(cls, lens: LogitLens) -> Lens:
        return cls(lens.model_name, " ".join(lens.tokens))

    @property
    def shown_text(self) -> str:
        return " / ".join(part for part in (self.text, self.target) if part)

    def result(self, progress=None) -> LogitLens:
        return gateway.run("lens", self.model, self.text, self.target, progress=progress)

    def info(self, lens=None) -> FigureInfo:
        where = ("decoder",) if self.target else ()
        return FigureInfo("Logit lens", model=self.model, text=self.shown_text, where=where)

    def figure(self, lens: LogitLens) -> Builder:
        tops = (lens.top_tokens, lens.top_logprobs)
        return builder(lens_figure, *tops, lens.tokens, info=self.info(), masked=lens.masked)


@dataclass(frozen=True)
class Trajectory(Lens):
    """The model's final prediction at ``position``: its log-probability and rank after each layer."""

    position: int = -1

    def info(self, lens=None) -> FigureInfo:
        where = (f"position {self.position}",)
        return FigureInfo("The final prediction, layer by layer", model=self.model, text=self.shown_text, where=where)

    def figure(self, lens: LogitLens) -> Builder:
        ranks, logprobs = lens.final_ranks[:, self.position], lens.final_logprobs[:, self.position]
        final = lens.final_tokens[self.position]
        return builder(lens_trajectory_figure, logprobs, ranks, final, info=self.info())


def summary(lens: LogitLens) -> str:
    settled = int(np.argmax(lens.final_ranks[:, -1] == 0))
    return (
        f"LogitLens: {lens.model_name}, {len(lens.tokens)} positions × {lens.num_layers + 1} readings (embeddings and "
        f"{lens.num_layers} layers); after the last token the model predicts {lens.final_tokens[-1]!r}, the lens's "
        f"top token from reading {settled} on"
    )
