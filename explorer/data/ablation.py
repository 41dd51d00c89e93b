"""The data contract of head ablation: what ablating each head alone does to the next token.

Axis names, stated once: ``layer`` and ``head`` (query heads) of one attention stack, numbered as in
``explorer.data.attention``. Log-probabilities are natural logs of the model's own ``softmax(logits)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.data._display import Displayed
from explorer.data._freeze import freeze_arrays
from explorer.data.attention import TOLERANCE


@dataclass(frozen=True, eq=False)
class HeadAblationEffects(Displayed):
    """For the token after ``prompt``: the target's log-probability with every head of ``stack`` ablated alone.

    target_id / target_token  the token measured: the model's own top token, unless one was asked for
    baseline_logprob          its log-probability with no head ablated
    logprobs                  [layer, head] float32: its log-probability with only that head ablated
    top_ids                   [layer, head] int: the model's top token with only that head ablated
    top_tokens                readable labels of ``top_ids``, a tuple per layer
    dtype                     the dtype the model ran in ("float32", "float16", ...): its ``tolerance`` is the
                              smallest change in log-probability that is more than rounding
    batch_sizes               the rows of each forward pass that ablated heads (one head zeroed per row), in
                              order; one plain pass before them read ``baseline_logprob``
    layer_numbers             [layer] int or None: the model's own number of each layer of the map, where some of
                              its layers have no attention (a hybrid's); the map counts only those that have
    """

    model_name: str
    prompt: str
    stack: str
    target_id: int
    target_token: str
    baseline_logprob: float
    logprobs: np.ndarray
    top_ids: np.ndarray
    top_tokens: tuple[tuple[str, ...], ...]
    dtype: str = "float32"
    batch_sizes: tuple[int, ...] = ()
    layer_numbers: np.ndarray | None = None

    def __post_init__(self):
        freeze_arrays(self)

    @property
    def tolerance(self) -> float:
        return TOLERANCE[self.dtype]

    @property
    def changes(self) -> np.ndarray:
        """[layer, head] float32: what ablating each head alone changes the target's log-probability by
        (negative: the head was helping that prediction)."""
        return self.logprobs - np.float32(self.baseline_logprob)
