"""The data contract of the head-type probes: one score per head, for each kind of head."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from explorer.data._display import Displayed
from explorer.data._freeze import freeze_arrays
from explorer.data.attention import AttentionCapture


@dataclass(frozen=True, eq=False)
class HeadProbes(Displayed):
    """Scores [layer, head] of every head of the main stack on a seeded random sequence repeated twice.

    token_ids   the sequence the model read: ``offset`` start tokens, n random tokens, the same n again
    scores      {"induction" | "duplicate" | "previous" | "sink": [layer, head] float32} (see
                ``explorer.compute.probes.MEANINGS``)
    capture     the capture of that sequence (the weights the scores come from)
    uniform     {score: float}: what a head spreading each query's weight evenly over the keys it may see would
                score (``explorer.compute.probes.uniform_scores``); a score near it says nothing about the head
    """

    model_name: str
    n: int
    seed: int
    offset: int
    token_ids: np.ndarray
    scores: dict[str, np.ndarray]
    capture: AttentionCapture
    uniform: dict[str, float] = field(default_factory=dict)

    def __post_init__(self):
        freeze_arrays(self)
        for values in self.scores.values():
            values.flags.writeable = False

    def best(self, score: str) -> tuple[int, int]:
        """(layer, head) of the head with the highest ``score``."""
        layer, head = np.unravel_index(int(np.argmax(self.scores[score])), self.scores[score].shape)
        return int(layer), int(head)
