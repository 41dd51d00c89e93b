"""Activation patching views: the residual stream by layer and position, the heads by layer, the MLPs by layer,
each cell the fraction of the clean answer's logit difference it recovers in the corrupted run."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer import gateway
from explorer.data.patching import Patching
from explorer.render.patching import patching_map, residual_rows
from explorer.render.style import FigureInfo
from explorer.views import Builder, builder


@dataclass(frozen=True)
class Residual:
    """The clean run's residual stream at one layer and position, patched into the corrupted run."""

    model: str
    clean: str
    corrupted: str
    answer: str | None = None
    counterfactual: str | None = None

    @classmethod
    def for_result(cls, patching: Patching) -> Residual:
        return cls(patching.model_name, "".join(patching.clean_tokens), "".join(patching.corrupted_tokens))

    @property
    def shown_text(self) -> str:
        return f"{self.clean} → {self.corrupted}"

    def result(self, progress=None) -> Patching:
        inputs = (self.clean, self.corrupted, self.answer, self.counterfactual)
        return gateway.run("patching", self.model, *inputs, progress=progress)

    def info(self, patching=None) -> FigureInfo:
        return FigureInfo("Patching the residual stream", model=self.model, text=self.shown_text)

    def figure(self, patching: Patching) -> Builder:
        return builder(
            patching_map,
            patching.residual,
            residual_rows(patching.num_layers),
            patching.columns,
            row_title="residual stream",
            column_title="position (clean prompt's token)",
            what="the residual stream",
            info=self.info(),
        )


@dataclass(frozen=True)
class Heads(Residual):
    """Each head's output (before the output projection, at every position) patched alone."""

    def info(self, patching=None) -> FigureInfo:
        return FigureInfo("Patching each head", model=self.model, text=self.shown_text)

    def figure(self, patching: Patching) -> Builder:
        layers, heads = patching.heads.shape
        return builder(
            patching_map,
            patching.heads,
            [f"layer {layer}" for layer in range(layers)],
            [f"head {head}" for head in range(heads)],
            row_title="layer",
            column_title="head (its output at every position)",
            what="one head's output",
            info=self.info(),
        )


@dataclass(frozen=True)
class Mlp(Residual):
    """Each MLP's output (at every position) patched alone."""

    def info(self, patching=None) -> FigureInfo:
        return FigureInfo("Patching each MLP", model=self.model, text=self.shown_text)

    def figure(self, patching: Patching) -> Builder:
        return builder(
            patching_map,
            patching.mlp[:, None],
            [f"layer {layer}" for layer in range(len(patching.mlp))],
            ["MLP"],
            row_title="layer",
            column_title="the MLP's output at every position",
            what="one MLP's output",
            info=self.info(),
        )


def strongest(patching: Patching) -> tuple[int, int]:
    """(layer, position) of the residual-stream cell that recovers the most, the position where the answer is
    carried at that layer."""
    layer, position = np.unravel_index(int(np.argmax(patching.residual)), patching.residual.shape)
    return int(layer), int(position)


def summary(patching: Patching) -> str:
    """One line: the metric, the checks, and the head and the MLP that recover the most (where the model has them:
    NaN marks a layer without, as a hybrid's Mamba layers)."""
    line = f"Patching: {patching.model_name}, {patching.summary()}"
    if patching.has_heads:
        layer, head = np.unravel_index(int(np.nanargmax(patching.heads)), patching.heads.shape)
        line += f" The head that recovers the most alone: layer {layer}, head {head} "
        line += f"({float(patching.heads[layer, head]):+.2f});"
    if patching.has_mlps:
        line += f" the MLP: layer {int(np.nanargmax(patching.mlp))}."
    return " ".join([line, patching.headless]).strip()
