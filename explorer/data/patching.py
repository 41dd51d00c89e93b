"""The data contract of activation patching: where in the model a clean prompt's answer is computed.

Two prompts of the same length in tokens: a clean one and a corrupted one (one word changed, so the answer
changes). The metric is the logit difference LD = logit(answer) − logit(counterfactual) where the model predicts
(the last position of a decoder, the ``[MASK]`` of an encoder, the decoder's first token of an encoder-decoder).
One activation of the clean run is copied into the corrupted run and LD read again; each cell is the fraction of
the clean LD it recovers, (LD_patched − LD_corrupted) / (LD_clean − LD_corrupted): 1 = the clean answer fully
back, 0 = no change, negative = further from it.

Axis names, stated once: ``layer`` over the residual stream has L + 1 rows, layer l < L the input of layer l
(after the embeddings and l layers) and layer L the output of the last layer before the final norm (as in
``explorer.data.lens``); for ``heads`` and ``mlp`` it runs over the L layers. ``position`` over the input tokens
(the encoder's for an encoder-decoder), then, for a model that predicts at a position its generation appends after
the text (XLNet), that position (``predicted``); ``head`` over query heads, numbered as ``capture`` numbers them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.data._display import Displayed
from explorer.data._freeze import freeze_arrays
from explorer.data.attention import TOLERANCE


@dataclass(frozen=True, eq=False)
class Patching(Displayed):
    """The clean run's activations patched, one at a time, into the corrupted run.

    clean_tokens / corrupted_tokens   labels of the two prompts' positions (equal in number)
    answer_id / answer_token          the token LD counts for: the clean prompt's top next token unless asked
    counterfactual_id / _token        the token LD counts against: the corrupted prompt's top token unless asked
    ld_clean / ld_corrupted           LD on the clean and on the corrupted prompt
    stack                             the stack patched ("decoder", "encoder": an encoder-decoder's encoder)
    metric_position                   where LD is read: a position of the prompts, or None for the decoder's
                                      first token of an encoder-decoder
    residual                          [layer, position] float32 (L + 1 rows): the residual stream at that
                                      position alone patched
    heads                             [layer, head] float32: one head's output before the output projection
                                      (its share of the concatenated heads), at every position; NaN in a layer
                                      without attention (a hybrid's Mamba or linear-attention layer)
    mlp                               [layer] float32: one MLP's output, at every position
    whole_first / whole_last          recovered with the whole residual stream patched at layer 0 / layer L, and
    nothing                           with nothing patched, run in the same batches as the cells: 1, 1 and 0 up
                                      to rounding (``verification``)
    dtype                             the dtype the model ran in
    headless                          why rows of ``heads`` are NaN, in the visitor's words ("" where none is)
    predicted                         labels of the columns of ``residual`` after the text's: the positions the
                                      model predicts at, appended by its generation (XLNet's; () for most models)
    streams                           what a cell patches where layers carry more than one stream, or run
                                      their attention's output projection more than once (a head patched in
                                      each call), in the visitor's words ("" where neither)
    """

    model_name: str
    clean_tokens: tuple[str, ...]
    corrupted_tokens: tuple[str, ...]
    answer_id: int
    answer_token: str
    counterfactual_id: int
    counterfactual_token: str
    ld_clean: float
    ld_corrupted: float
    stack: str
    metric_position: int | None
    residual: np.ndarray
    heads: np.ndarray
    mlp: np.ndarray
    whole_first: float
    whole_last: float
    nothing: float
    dtype: str = "float32"
    headless: str = ""
    predicted: tuple[str, ...] = ()
    streams: str = ""

    def __post_init__(self):
        freeze_arrays(self)

    @property
    def num_layers(self) -> int:
        """L: the layers of the stack patched (``residual`` has L + 1 rows)."""
        return self.residual.shape[0] - 1

    @property
    def columns(self) -> tuple[str, ...]:
        """Labels of the residual map's columns: the clean prompt's tokens, then the predicted positions."""
        return (*self.clean_tokens, *self.predicted)

    @property
    def has_heads(self) -> bool:
        """Whether any layer has heads to patch (a state-space model's have none)."""
        return bool(np.isfinite(self.heads).any())

    @property
    def has_mlps(self) -> bool:
        """Whether any layer has an MLP apart from what mixes positions (Mamba's have none)."""
        return bool(np.isfinite(self.mlp).any())

    @property
    def tolerance(self) -> float:
        return TOLERANCE[self.dtype]

    def verification(self) -> float:
        """The largest distance of the three checks from what they must be: the whole residual stream at layer 0
        and at layer L recovers 1, nothing recovers 0. More than ``tolerance`` means the patching is wrong."""
        return max(abs(self.whole_first - 1.0), abs(self.whole_last - 1.0), abs(self.nothing))

    def summary(self) -> str:
        """One line: the metric and the checks."""
        return (
            f"LD = logit({self.answer_token!r}) − logit({self.counterfactual_token!r}): {self.ld_clean:.3f} clean, "
            f"{self.ld_corrupted:.3f} corrupted. Check: the whole stream patched at layer 0 recovers "
            f"{self.whole_first:.6f}, at layer {self.num_layers} {self.whole_last:.6f}, nothing {self.nothing:.6f} "
            f"(largest error {self.verification():.1e})."
        )
