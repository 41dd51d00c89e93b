"""Model anatomy views: where a model's parameters are, by kind and layer; its token ids; its feed-forward widths;
the lecture's count beside the real one; its sizes beside the sources' models."""

from __future__ import annotations

from dataclasses import dataclass

from explorer import gateway
from explorer.compute.anatomy import formula_gap, model_lecture_count
from explorer.render.anatomy import (
    count_figure,
    feed_forward_figure,
    parameters_figure,
    sizes_figure,
    token_ids_figure,
)
from explorer.render.style import FigureInfo
from explorer.views import Builder, builder
from explorer.views.tokens import Embeddings


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


@dataclass(frozen=True)
class TokenIds(Embeddings):
    """The tokenizer's output for a text: each token and its id in the model's vocabulary (``InputVectors``)."""

    def info(self, vectors) -> FigureInfo:
        return FigureInfo("Token ids", model=self.model, text=self.text, where=(f"{len(vectors.rows)} tokens",))

    def figure(self, vectors) -> Builder:
        rows = vectors.rows
        tokens, ids, special = (
            [row.token for row in rows],
            [row.token_id for row in rows],
            [row.special for row in rows],
        )
        return builder(token_ids_figure, tokens, ids, special, info=self.info(vectors))


@dataclass(frozen=True)
class FeedForward(Parameters):
    """One token's width through a layer's feed-forward block: d in, d_ff inside, d out."""

    def info(self, anatomy) -> FigureInfo:
        where = (f"d = {anatomy.width:,}", f"d_ff = {anatomy.ffn_size:,}")
        return FigureInfo("Feed-forward widths", model=self.model, where=where)

    def figure(self, anatomy) -> Builder:
        return builder(feed_forward_figure, anatomy.width, anatomy.ffn_size, info=self.info(anatomy))


def count_steps(anatomy) -> list[tuple[str, int, str]]:
    """The lecture's formula, term by term, then each part of the model it leaves out, to numel(): (label,
    parameters, "relative" or "total")."""
    count = model_lecture_count(anatomy)
    steps = [
        ("embeddings (|V| + l_c)·d", count.embeddings, "relative"),
        (f"{count.layers} layers × {count.per_layer:,}", count.per_layer * count.layers, "relative"),
        ("the formula", count.formula_total, "total"),
    ]
    steps += [(term.reason, term.parameters, "relative") for term in formula_gap(anatomy, count)]
    return [*steps, ("numel()", count.actual_total, "total")]


@dataclass(frozen=True)
class LectureCount(Parameters):
    """The lecture's parameter formula beside the model's real count, each part it leaves out named."""

    def info(self, anatomy) -> FigureInfo:
        return FigureInfo("The lecture's count and numel()", model=self.model, where=(f"{anatomy.total_parameters:,}",))

    def figure(self, anatomy) -> Builder:
        return builder(count_figure, count_steps(anatomy), info=self.info(anatomy))


@dataclass(frozen=True)
class Sizes(Parameters):
    """The model's layers, width, feed-forward width and heads beside other models' (``others``: (name, layers,
    d_model, d_ff, heads) from the sources' spec tables)."""

    others: tuple[tuple[str, int, int, int, int], ...] = ()

    def models(self, anatomy) -> list[tuple[str, int, int, int, int]]:
        own = (anatomy.name.rsplit("/", 1)[-1], anatomy.layers, anatomy.width, anatomy.ffn_size, anatomy.heads)
        return [*self.others, own]

    def info(self, anatomy) -> FigureInfo:
        return FigureInfo("Sizes side by side", model=self.model, where=(f"{len(self.others) + 1} models",))

    def figure(self, anatomy) -> Builder:
        return builder(sizes_figure, self.models(anatomy), info=self.info(anatomy))
