"""The data contract: what every model run of the explorer returns, and all that a figure, a table or a test reads.

How it works: a function of ``explorer.models`` runs the model and returns one of these records, frozen
dataclasses of CPU NumPy arrays made read-only once built (``_freeze``). One record can therefore be cached
(``explorer.caching``) and shared by every session, and everything downstream works on its arrays alone, never on
the model: ``explorer.compute`` (arithmetic), ``explorer.render`` (figures), the pages and a notebook. This package
imports nothing from those layers, nor torch, nor Streamlit; in Jupyter a record still draws itself as its page
draws it, through the ``Displayed`` mixin of ``_display``, which ``explorer.render.notebook`` fills when
``explorer`` is imported.

The axes, named once here and used in every shape of the package (each module restates the ones it uses):

- attention: ``layer`` (of one stack), ``head`` (query heads), ``query`` (rows: positions that attend), ``key``
  (columns: positions attended to), ``head_dim``; ``token`` (input positions) and ``hidden`` (d_model) for the
  residual stream.
- decoding: ``step`` (0 = the first new token), ``row`` (the sequences one step works on: beams, samples),
  ``candidate`` (a row's top-n next tokens), ``vocab`` (every token id), ``sequence`` (returned, best first).
- the logit lens: ``layer`` (L + 1 readings: the embeddings, then each layer), ``position``, ``rank``.

What each module holds:

- ``attention``: ``AttentionCapture`` (one forward pass: its stacks, tokens, hidden states, ``verify()``) and
  ``AttentionStack`` (one stack's weights, queries, keys, values, masks), the stack names and their labels.
- ``decoding``: ``DecodeTrace`` (a whole decoding: steps, candidates, the beam tree, n-gram bans) with
  ``DecodeSettings``, ``DecodeStep``, ``BeamNode`` and ``NgramBan``; ``NextTokenLogits`` and ``TokenDistribution``.
- ``ablation``: ``HeadAblationEffects`` ([layer, head]: each head ablated alone). ``lens``: ``LogitLens``.
  ``probes``: ``HeadProbes``. ``anatomy``: ``ModelAnatomy``, the tokenization table and ``Embeddings``.
  ``patching``: ``Patching`` (a clean prompt's activations patched into a corrupted one: [layer, position] of the
  residual stream, [layer, head], [layer] of the MLPs).

For example::

    cap = explorer.capture(lm, "time flies like an arrow")   # an AttentionCapture
    cap.main.attentions[2, 5]     # [query, key]: layer 2, head 5's weights, rows summing to 1
    cap                           # in Jupyter: the attention heatmaps page's figure of layer 0, head 0
"""

from explorer.data.ablation import HeadAblationEffects
from explorer.data.attention import (
    STACK_CROSS,
    STACK_DECODER,
    STACK_ENCODER,
    AttentionCapture,
    AttentionStack,
)
from explorer.data.decoding import (
    BeamNode,
    DecodeSettings,
    DecodeStep,
    DecodeTrace,
    NextTokenLogits,
    NgramBan,
    TokenDistribution,
)

__all__ = [
    "STACK_CROSS",
    "STACK_DECODER",
    "STACK_ENCODER",
    "AttentionCapture",
    "AttentionStack",
    "BeamNode",
    "DecodeSettings",
    "DecodeStep",
    "DecodeTrace",
    "HeadAblationEffects",
    "NextTokenLogits",
    "NgramBan",
    "TokenDistribution",
]
