"""The data contract of input attribution: how much each input token moved one prediction.

Axis names, stated once: ``token`` runs over the input tokens (the encoder's for encoder-decoder models). The
prediction is a log-probability (natural log of a softmax over the whole vocabulary) of one ``target`` token:
the next token after the text for decoders and encoder-decoders (the decoder's first), the token at the
``[MASK]`` for encoders.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.data._display import Displayed
from explorer.data._freeze import freeze_arrays


@dataclass(frozen=True, eq=False)
class Attribution(Displayed):
    """One score per input token for the log-probability of ``target_token``.

    method            "integrated_gradients", "gradient_x_input" or "occlusion"
    tokens            labels of the input tokens
    scores            [token] float32: each token's share of the prediction (see ``explorer.attribute``)
    target_id         the predicted token's id, and its label ``target_token``
    logprob           its log-probability at the text
    baseline_logprob  its log-probability at the baseline (every input embedding zero; positions, token types
                      and the attention mask as for the text)
    delta             integrated gradients only: Σ scores − (logprob − baseline_logprob), the completeness error
                      of the path integral (0 for the exact integral); None for the other methods
    steps             the points on the path (integrated gradients), else None
    jumps             integrated gradients only: Σ of the jumps f makes along the path (found where neighbouring
                      points' values and slopes disagree; 0 where none is), which no gradient sees: delta ≈ −jumps
                      whatever the steps
    routed            integrated gradients only: the model routes each token to a few experts (a mixture of
                      experts), so log p may jump along the path wherever the search finds jumps or not
    held              what the pass reads beyond the text and every method holds as it is, in the visitor's words:
                      the token XLNet's generation appends to predict at ("" for most models)
    """

    model_name: str
    method: str
    tokens: tuple[str, ...]
    scores: np.ndarray
    target_id: int
    target_token: str
    logprob: float
    baseline_logprob: float
    delta: float | None = None
    steps: int | None = None
    jumps: float | None = None
    routed: bool = False
    held: str = ""

    def __post_init__(self):
        freeze_arrays(self)

    @property
    def change(self) -> float:
        """logprob − baseline_logprob: what integrated gradients' scores add up to."""
        return self.logprob - self.baseline_logprob

    def verification(self) -> str:
        """One line on how far the scores are from exact (integrated gradients' completeness)."""
        if self.delta is None:
            return f"{self.method.replace('_', ' ')}: no completeness to check (only integrated gradients has it)"
        relative = abs(self.delta) / max(abs(self.change), 1e-12)
        return (
            f"Σ scores = {float(self.scores.sum()):.4f}; log p(text) − log p(baseline) = {self.change:.4f}: "
            f"completeness error {self.delta:+.2e} ({relative:.2%} of the change, {self.steps} steps)"
        )


@dataclass(frozen=True, eq=False)
class Candidates:
    """The most likely targets of one prediction (``explorer.models.attribution.top_targets``), best first.

    ids            [candidate] int: token ids
    tokens         their labels
    probabilities  [candidate] float32: each one's probability (softmax over the whole vocabulary)
    """

    model_name: str
    ids: np.ndarray
    tokens: tuple[str, ...]
    probabilities: np.ndarray

    def __post_init__(self):
        freeze_arrays(self)
