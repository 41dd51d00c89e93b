"""Token views: how a text becomes vectors (its token embeddings, the model's positions beside the sinusoidal
formula, or its rotary angles) and how context changes one token's vector layer by layer."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer import gateway
from explorer.compute.positions import find_token, layerwise_cosine, rotary_angles, sinusoidal_encoding
from explorer.render.lens import layer_names
from explorer.render.style import FigureInfo
from explorer.render.vectors import cosine_figure, sinusoidal_figure, vectors_heatmap
from explorer.views import Builder, builder

ROTARY_POSITIONS = 32  # at least this many positions of rotary angles, however short the text


@dataclass(frozen=True)
class Embeddings:
    """The token embeddings of a text (and its second segment), one row per token."""

    model: str
    text: str
    text_pair: str | None = None

    def result(self, progress=None):
        """The text's tokens, embeddings and the first layer's input (``InputVectors``)."""
        return gateway.run("input vectors", self.model, self.text, self.text_pair, progress=progress)

    def info(self, vectors) -> FigureInfo:
        where = (f"{vectors.embeddings.token.shape[1]} dimensions",)
        return FigureInfo("Token embeddings", model=self.model, text=self.text, where=where)

    def figure(self, vectors) -> Builder:
        labels = [f"#{row.position} {row.token}" for row in vectors.rows]
        return builder(vectors_heatmap, vectors.embeddings.token, labels, info=self.info(vectors))


def _position_labels(count: int) -> list[str]:
    return [f"position {i}" for i in range(count)]


@dataclass(frozen=True)
class LearnedPositions(Embeddings):
    """The model's learned position embeddings (for a model that has a table of them)."""

    def info(self, vectors) -> FigureInfo:
        found = vectors.embeddings
        where = (f"first {len(found.position)}",)
        if found.position_offset:  # position 0 reads a later row (RoBERTa, BART, OPT): say which
            where += (f"table rows from {found.position_offset}",)
        return FigureInfo("Learned position embeddings", model=self.model, where=where)

    def figure(self, vectors) -> Builder:
        positions = vectors.embeddings.position
        return builder(vectors_heatmap, positions, _position_labels(len(positions)), info=self.info(vectors))


@dataclass(frozen=True)
class Sinusoidal(Embeddings):
    """The original Transformer's fixed encoding at the model's width, as many positions as its table has."""

    def info(self, vectors) -> FigureInfo:
        where = (f"d = {vectors.embeddings.token.shape[1]}",)
        return FigureInfo("Sinusoidal encoding (Vaswani et al., 2017)", where=where)

    def figure(self, vectors) -> Builder:
        count = len(vectors.embeddings.position)
        encoding = sinusoidal_encoding(count, vectors.embeddings.token.shape[1])
        return builder(sinusoidal_figure, encoding, info=self.info(vectors))


@dataclass(frozen=True)
class RotaryAngles(Embeddings):
    """The angle each pair of query and key dimensions is turned by at each position (a rotary model's)."""

    def angles(self, vectors):
        return rotary_angles(vectors.embeddings.inverse_frequency, max(len(vectors.rows), ROTARY_POSITIONS))

    def info(self, vectors) -> FigureInfo:
        where = (f"{self.angles(vectors).shape[1]} pairs per head",)
        return FigureInfo("Rotary position angles", model=self.model, where=where)

    def figure(self, vectors) -> Builder:
        angles = self.angles(vectors)
        return builder(
            vectors_heatmap,
            angles,
            _position_labels(len(angles)),
            info=self.info(vectors),
            x_title="rotated pair (fast to slow)",
            colorbar_title="angle (radians)",
        )


@dataclass(frozen=True)
class Context:
    """The cosine similarity of ``word``'s vector in two sentences after each layer; the result is the two
    captures, and ``similarity`` None where the word is not a single token of both."""

    model: str
    sentence_a: str
    sentence_b: str
    word: str

    def result(self, progress=None):
        a = gateway.run("capture", self.model, self.sentence_a, progress=progress)
        return a, gateway.run("capture", self.model, self.sentence_b, progress=progress)

    def positions(self, captures) -> tuple[int | None, int | None]:
        """Where the word is in sentence 1 and in sentence 2 (None where it is not a single token)."""
        a, b = captures
        return find_token(a.tokens, self.word), find_token(b.tokens, self.word)

    def similarity(self, captures):
        (a, b), (pa, pb) = captures, self.positions(captures)
        if pa is None or pb is None or a.hidden_states is None:
            return None
        return layerwise_cosine(a.hidden_states, pa, b.hidden_states, pb)

    def caption(self, captures) -> str:
        """What the curve shows, from its own cosines (numbers and fixed words: the page adds the word)."""
        return context_caption(self.similarity(captures), *self.positions(captures))

    def info(self, captures=None) -> FigureInfo:
        text = f"{self.sentence_a} / {self.sentence_b}"
        return FigureInfo("Context changes a token", model=self.model, text=text, where=(self.word,))

    def figure(self, captures) -> Builder:
        series = {f"“{self.word}” in sentence 1 vs sentence 2": self.similarity(captures)}
        return builder(cosine_figure, series, info=self.info())


STEADY = 0.01  # a cosine that moves less than this from the embeddings to the last layer "stays about the same"


def context_caption(similarity, position_a: int, position_b: int) -> str:
    """The cosines [reading] of one token's vector in two sentences, in words: where the curve starts, whether it
    rises, falls or stays from the embeddings to the last layer, and its lowest reading in between."""
    first, last = float(similarity[0]), float(similarity[-1])
    start = f"{first:.3f} after the embeddings"
    if first < 1 - 1e-4 and position_a != position_b:
        start += f" (the same token at positions {position_a} and {position_b}: their position vectors differ)"
    change = last - first
    if abs(change) < STEADY:
        trend = f"it stays about the same ({change:+.3f})"
    elif change > 0:
        trend = f"it rises by {change:.3f}: the two vectors end more alike than they start"
    else:
        trend = f"it falls by {-change:.3f}: context pulls the two vectors apart"
    said = f"{start}, {last:.3f} after the last layer: {trend}."
    lowest = int(np.argmin(similarity))
    if float(similarity[lowest]) < min(first, last) - STEADY:
        said += f" Lowest after {layer_names(len(similarity) - 1)[lowest]} ({float(similarity[lowest]):.3f})."
    return said
