"""Records describing a model and its input: anatomy, parameter counts, the tokenization table, embeddings.

Axes: ``token`` (input positions), ``position`` (positions a model can encode), ``hidden`` (d_model),
``pair`` (rotated pairs of a rotary head). Arrays are read-only float32 on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from explorer.data._freeze import freeze_arrays


@dataclass(frozen=True)
class ModuleRow:
    """One module of the tree: its depth, dotted name, class, own parameter shapes and total parameter count."""

    depth: int
    name: str
    kind: str
    parameters: tuple[tuple[str, tuple[int, ...]], ...]
    count: int


@dataclass(frozen=True)
class LayerCounts:
    """Parameters by kind (embeddings, attention, feed-forward, norms, other) of one layer of one stack;
    ``layer`` is None for what lies outside the layers (embeddings, final norm, heads). ``parts``: the same
    parameters by what they are within their kind (``explorer.models.anatomy.PARTS``), for the comparison with
    the textbook layer."""

    stack: str
    layer: int | None
    counts: dict[str, int]
    parts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelAnatomy:
    """A model's sizes, structure and parameter counts (see ``explorer.models.anatomy.model_anatomy``)."""

    name: str
    architecture: str
    model_type: str
    kind: str
    layers: int
    width: int | None
    heads: int
    kv_heads: int
    head_dim: int
    ffn_size: int | None
    vocabulary: int
    context: int
    norm_placement: str
    norm_kind: str
    position_scheme: str
    tied_embeddings: bool
    output_embeddings: bool  # a language-model head (an encoder such as MiniLM has none)
    total_parameters: int
    by_kind: dict[str, int]
    layer_counts: tuple[LayerCounts, ...]
    modules: tuple[ModuleRow, ...]
    bias_parameters: int = 0  # bias vectors outside the layer norms (the lecture's formulas leave them out)
    position_rows: int = 0  # rows of the learned position table (l_c); 0 for rotary or relative positions


@dataclass(frozen=True)
class TokenRow:
    """One token of the input, as the tokenizer produced it."""

    position: int
    token: str  # readable, with a leading space shown as "␣"
    token_id: int
    special: bool
    start: int | None  # character span in its segment's text (None for special tokens)
    end: int | None
    segment: str  # "A", or "B" from the second segment's first token on (sentence pairs)


@dataclass(frozen=True, eq=False)
class Embeddings:
    """What the model adds up before its first layer, for the input's tokens.

    token             [token, embedding]: each token's row of the embedding matrix, as the model's embedding
                      module returns it (BART's scale included); ``embedding`` may be narrower than ``hidden``
    position          [position, width] or None: learned absolute position embeddings of positions 0, 1, ...
                      (table rows ``position_offset``, ``position_offset`` + 1, ...)
    token_type        [token, width] or None: segment (token type) embeddings of the input
    inverse_frequency [pair] or None: rotary models' per-pair rotation frequency, from the model's own module
    position_offset   the table row of position 0 (OPT and BART: 2; RoBERTa: its padding index + 1)
    token_projection  the module (name) that maps token rows to the position rows' width first (OPT's project_in)
    projection        the module (name) that maps the normalised sum to the hidden width (ALBERT, ELECTRA)
    note              why token + position rows do not give the first layer's input, where they do not; else None
    trigram           the token projection reads each row beside its neighbours' (MobileBERT's ``trigram_input``)
    token_scale       what the embedding module multiplies its rows by (``embed_scale``: √d in mBART, BioGPT), in
                      ``token`` already
    """

    token: np.ndarray
    position: np.ndarray | None
    token_type: np.ndarray | None
    inverse_frequency: np.ndarray | None
    position_scheme: str
    position_offset: int = 0
    token_projection: str | None = None
    projection: str | None = None
    note: str | None = None
    trigram: bool = False
    token_scale: float = 1.0

    def __post_init__(self):
        freeze_arrays(self)
