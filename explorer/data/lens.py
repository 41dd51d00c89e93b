"""The data contract of the logit lens: what the model would predict if it stopped after each layer.

Axis names, stated once: ``layer`` runs over the residual stream after the embeddings (0) and after each of
the L layers (1 … L), so it has L + 1 entries; ``position`` over the input tokens (the prediction at a
position is of the token after it); ``rank`` over the top tokens, most likely first. Log-probabilities are
natural logs of a softmax over the whole vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.data._display import Displayed
from explorer.data._freeze import freeze_arrays


@dataclass(frozen=True, eq=False)
class LogitLens(Displayed):
    """The model's own final norm and unembedding applied to the residual stream after every layer.

    tokens          labels of the positions (the decoder's input for encoder-decoder models)
    top_ids         [layer, position, rank] int: the most likely next tokens read at each layer
    top_tokens      their labels, nested the same way (tuples)
    top_logprobs    [layer, position, rank] float32
    final_ids       [position] int: the token the model finally predicts (argmax of its own logits)
    final_tokens    their labels
    final_logprobs  [layer, position] float32: that token's log-probability read at each layer
    final_ranks     [layer, position] int: its rank there (0 = the top token)
    truncated       how many input tokens were cut to fit the model
    masked          True for an encoder read through its masked-LM head: a reading at a position is the model's
                    guess of the token there, not of the next one
    read_at         where the model predicts, in the visitor's words, where it is not at the text's positions (XLNet:
                    at a token its generation appends, from its query stream); "" for most models
    """

    model_name: str
    tokens: tuple[str, ...]
    top_ids: np.ndarray
    top_tokens: tuple[tuple[tuple[str, ...], ...], ...]
    top_logprobs: np.ndarray
    final_ids: np.ndarray
    final_tokens: tuple[str, ...]
    final_logprobs: np.ndarray
    final_ranks: np.ndarray
    truncated: int = 0
    masked: bool = False
    read_at: str = ""

    def __post_init__(self):
        freeze_arrays(self)

    @property
    def num_layers(self) -> int:
        """L: the layers of the stack (the arrays have L + 1 rows, the embeddings first)."""
        return self.top_ids.shape[0] - 1
