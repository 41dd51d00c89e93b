"""The data contract: what the explorer's capture and decoding functions return.

Frozen dataclasses of CPU NumPy arrays, read-only once built, so one object can be cached and shared
by every session. Axis names are stated once, in each module's docstring, and used in every shape:

- ``attention``: ``AttentionCapture`` and ``AttentionStack`` (axes ``layer``, ``head``, ``query``,
  ``key``, ``head_dim``).
- ``decoding``: ``DecodeTrace`` (steps, candidates, beam trees), ``TokenDistribution`` and
  ``NextTokenLogits`` (axes ``step``, ``row``, ``candidate``, ``vocab``, ``sequence``).
- ``ablation``: ``HeadAblationEffects`` (axes ``layer``, ``head``).
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
